//! `rpcmeter compare A B`: two results of `rpcmeter run --format json` -> one comparison per
//! metric, from their interval series -> a table or JSON, and the exit code.
//!
//! Each metric is a sample per run: one value per full measured interval (warm-up and the
//! last, shorter interval left out; latency and error rate also leave out intervals without
//! calls). A's and B's samples go to `stats::compare`: medians, B - A and B / A with 95 %
//! bootstrap intervals (seeded: the same files always give the same numbers), the
//! Mann-Whitney U test, and Tukey and z-score outlier flags (reported, never removed).
//! B is a regression on a metric when the test says p < alpha and B went the bad way:
//! lower throughput, higher latency, higher error rate. With `--min-effect`, a significant
//! change of the median smaller than that share of A's median is "no meaningful
//! difference": statistically real, too small to act on (it never fails a CI run).
//!
//! Where results come from is [`ResultRef`]: paths today; a run history's ids can be one
//! more variant, resolved in [`ResultRef::resolve`], without touching the rest.
use crate::cli::compare::{CompareArgs, CompareFormat, MetricArg};
use crate::error::{bad_input, output_failed, run_failed};
use crate::report::units;
use crate::stats::assertions::Value;
use crate::stats::compare::{Bootstrap, Comparison, Interval, Outcome};
use serde::Deserialize;
use serde_json::{json, Value as JsonValue};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Fewer intervals than this on a side: no verdict for that metric.
pub const MIN_INTERVALS: usize = 5;

/// Everything a comparison needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub a: ResultRef,
    pub b: ResultRef,
    pub metrics: Vec<Metric>,
    pub alpha: f64,
    /// `--min-effect`: the smallest relative change of the median that counts (0.05 = 5 %).
    pub min_effect: Option<f64>,
    pub fail_on_regression: bool,
    pub format: CompareFormat,
    pub bootstrap: Bootstrap,
}

impl Settings {
    pub fn from_args(args: &CompareArgs) -> Settings {
        let mut metrics: Vec<Metric> = args.metrics.iter().map(|&m| Metric::from(m)).collect();
        if metrics.is_empty() {
            metrics = Metric::ALL.to_vec();
        }
        let mut seen = Vec::new();
        metrics.retain(|m| {
            !seen.contains(m) && {
                seen.push(*m);
                true
            }
        });
        Settings {
            a: ResultRef::resolve(&args.a),
            b: ResultRef::resolve(&args.b),
            metrics,
            alpha: args.alpha,
            min_effect: args.min_effect,
            fail_on_regression: args.fail_on_regression,
            format: args.format,
            bootstrap: Bootstrap::default(),
        }
    }
}

/// Where a result comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultRef {
    /// A JSON result file.
    Path(PathBuf),
}

impl ResultRef {
    /// What a command-line argument names: a file, or a history id (read in `load`).
    pub fn resolve(arg: &Path) -> ResultRef {
        ResultRef::Path(arg.to_path_buf())
    }

    /// How reports name it.
    pub fn label(&self) -> String {
        match self {
            ResultRef::Path(p) => p.display().to_string(),
        }
    }

    /// The result, read and checked; a bad-input error (exit 2) naming the source otherwise.
    pub fn load(&self) -> anyhow::Result<RunResult> {
        match self {
            ResultRef::Path(path) => {
                // A history id ("42", "#42") or a file.
                let text = crate::history::resolve_text(&path.to_string_lossy())?;
                RunResult::parse(&text, self.label())
            }
        }
    }
}

/// The parts of a run's JSON result that a comparison reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub label: String,
    pub name: Option<String>,
    pub started_at: Option<String>,
    pub interval: Duration,
    pub throughput_rps: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub intervals: Vec<IntervalRow>,
}

/// One row of a result's interval series.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// End of the interval, from the start of the run.
    pub at: Duration,
    pub length: Duration,
    pub measured: bool,
    pub calls: u64,
    pub failed: u64,
    pub rps: f64,
    pub p50: Duration,
    pub p99: Duration,
}

#[derive(Deserialize)]
struct RawResult {
    #[serde(default)]
    meta: RawMeta,
    throughput_rps: f64,
    latency_us: RawLatency,
    interval_s: f64,
    intervals: Vec<RawInterval>,
}

#[derive(Deserialize, Default)]
struct RawMeta {
    name: Option<String>,
    started_at: Option<String>,
}

#[derive(Deserialize)]
struct RawLatency {
    p50: f64,
    p99: f64,
}

#[derive(Deserialize)]
struct RawInterval {
    t_s: f64,
    length_s: f64,
    phase: String,
    calls: u64,
    failed: u64,
    rps: f64,
    p50_us: f64,
    p99_us: f64,
}

impl RunResult {
    /// A result from its JSON text; `label` names it in errors.
    pub fn parse(text: &str, label: String) -> anyhow::Result<RunResult> {
        let bad = |why: String| bad_input(format!("{label}: not a result of rpcmeter run --format json: {why}"));
        let raw: RawResult = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let seconds = |s: f64, key: &str| {
            Duration::try_from_secs_f64(s).map_err(|_| bad(format!("{key} {s} is not a duration in seconds")))
        };
        // Latencies are written in µs to the ns: back to whole ns, without float truncation.
        let micros = |us: f64, key: &str| match us * 1e3 {
            ns if ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64 => Ok(Duration::from_nanos(ns.round() as u64)),
            _ => Err(bad(format!("{key} {us} is not a latency in µs"))),
        };
        let interval = seconds(raw.interval_s, "interval_s")?;
        if interval.is_zero() {
            return Err(bad("interval_s is 0".into()));
        }
        let intervals = raw
            .intervals
            .iter()
            .map(|iv| {
                Ok(IntervalRow {
                    at: seconds(iv.t_s, "t_s")?,
                    length: seconds(iv.length_s, "length_s")?,
                    measured: match iv.phase.as_str() {
                        "measured" => true,
                        "warmup" => false,
                        other => return Err(bad(format!("unknown interval phase {other:?}"))),
                    },
                    calls: iv.calls,
                    failed: iv.failed,
                    rps: iv.rps,
                    p50: micros(iv.p50_us, "p50_us")?,
                    p99: micros(iv.p99_us, "p99_us")?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let (p50, p99) = (micros(raw.latency_us.p50, "latency_us.p50")?, micros(raw.latency_us.p99, "latency_us.p99")?);
        Ok(RunResult {
            label,
            name: raw.meta.name,
            started_at: raw.meta.started_at,
            interval,
            throughput_rps: raw.throughput_rps,
            p50,
            p99,
            intervals,
        })
    }

    /// The measured intervals of full length (the last, shorter one and warm-up left out).
    pub fn full_intervals(&self) -> impl Iterator<Item = &IntervalRow> {
        // Lengths are written rounded to the µs.
        let full = |iv: &&IntervalRow| iv.length.abs_diff(self.interval) <= Duration::from_micros(1);
        self.intervals.iter().filter(|iv| iv.measured).filter(full)
    }
}

/// A metric compared per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Throughput,
    P50,
    P99,
    ErrorRate,
}

impl From<MetricArg> for Metric {
    fn from(m: MetricArg) -> Metric {
        match m {
            MetricArg::Throughput => Metric::Throughput,
            MetricArg::P50 => Metric::P50,
            MetricArg::P99 => Metric::P99,
            MetricArg::ErrorRate => Metric::ErrorRate,
        }
    }
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::Throughput, Metric::P50, Metric::P99, Metric::ErrorRate];

    /// Its key in JSON and on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::ErrorRate => "error_rate",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::P50 => "p50 latency",
            Metric::P99 => "p99 latency",
            Metric::ErrorRate => "error rate",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self == Metric::Throughput
    }

    /// The sample of a run: one value per full measured interval, in calls/s, nanoseconds
    /// or a fraction. Latency and error rate skip intervals without calls (nothing to measure).
    pub fn sample(self, run: &RunResult) -> Vec<(Duration, f64)> {
        let with_calls = |iv: &&IntervalRow| iv.calls > 0;
        let full = run.full_intervals();
        match self {
            Metric::Throughput => full.map(|iv| (iv.at, iv.rps)).collect(),
            Metric::P50 => full.filter(with_calls).map(|iv| (iv.at, iv.p50.as_nanos() as f64)).collect(),
            Metric::P99 => full.filter(with_calls).map(|iv| (iv.at, iv.p99.as_nanos() as f64)).collect(),
            Metric::ErrorRate => {
                full.filter(with_calls).map(|iv| (iv.at, iv.failed as f64 / iv.calls as f64)).collect()
            }
        }
    }

    /// A value of the sample, typed.
    pub fn value(self, x: f64) -> Value {
        match self {
            Metric::Throughput => Value::PerSecond(x),
            Metric::P50 | Metric::P99 => Value::Latency(Duration::from_nanos(x.max(0.0).round() as u64)),
            Metric::ErrorRate => Value::Fraction(x),
        }
    }

    /// A difference of two values (B - A), typed: its sign and size.
    pub fn difference(self, x: f64) -> Difference {
        Difference { negative: x < 0.0, size: self.value(x.abs()) }
    }
}

/// A signed difference B - A of a metric's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    pub negative: bool,
    pub size: Value,
}

/// What one metric's comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Fewer than [`MIN_INTERVALS`] values on a side.
    TooFew,
    NoSignificantDifference,
    /// p < alpha, but the medians differ by less than `--min-effect` of A's.
    NoMeaningfulDifference,
    /// p < alpha and B went the good way.
    Improvement,
    /// p < alpha and B went the bad way (lower throughput, higher latency or error rate).
    Regression,
}

/// One metric of A against B.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricComparison {
    pub metric: Metric,
    /// The ends of the intervals in each sample, in order (for naming flagged outliers).
    pub a_at: Vec<Duration>,
    pub b_at: Vec<Duration>,
    /// `None` when a side has no interval at all.
    pub numbers: Option<Comparison>,
    pub verdict: Verdict,
}

impl MetricComparison {
    pub fn of(
        metric: Metric,
        a: &RunResult,
        b: &RunResult,
        alpha: f64,
        min_effect: Option<f64>,
        how: &Bootstrap,
    ) -> MetricComparison {
        let (a_at, a_values): (Vec<Duration>, Vec<f64>) = metric.sample(a).into_iter().unzip();
        let (b_at, b_values): (Vec<Duration>, Vec<f64>) = metric.sample(b).into_iter().unzip();
        let numbers = Comparison::of(&a_values, &b_values, how);
        let verdict = match &numbers {
            None => Verdict::TooFew,
            Some(c) => match (c.outcome(alpha, MIN_INTERVALS), metric.higher_is_better()) {
                (Outcome::TooFew, _) => Verdict::TooFew,
                (Outcome::NoSignificantDifference, _) => Verdict::NoSignificantDifference,
                _ if below(min_effect, c) => Verdict::NoMeaningfulDifference,
                (Outcome::BHigher, true) | (Outcome::BLower, false) => Verdict::Improvement,
                (Outcome::BHigher, false) | (Outcome::BLower, true) => Verdict::Regression,
            },
        };
        MetricComparison { metric, a_at, b_at, numbers, verdict }
    }

    pub fn is_regression(&self) -> bool {
        matches!(self.verdict, Verdict::Regression)
    }

    /// "B is 3.5% slower: regression", "no significant difference", ...
    pub fn verdict_text(&self) -> String {
        match self.verdict {
            Verdict::Regression => format!("{}: regression", self.change_text()),
            Verdict::Improvement => format!("{}: improvement", self.change_text()),
            _ => self.change_text(),
        }
    }

    /// "B is 3.5% slower", "no significant difference", ...
    pub fn change_text(&self) -> String {
        let numbers = match (self.verdict, &self.numbers) {
            (Verdict::TooFew, _) | (_, None) => {
                return format!(
                    "too few intervals to judge ({} vs {}; {MIN_INTERVALS} per side needed)",
                    self.a_at.len(),
                    self.b_at.len()
                )
            }
            (Verdict::NoSignificantDifference, _) => return "no significant difference".into(),
            (Verdict::NoMeaningfulDifference, Some(c)) => {
                return format!(
                    "no meaningful difference (significant, but B / A = {:.3} is within --min-effect)",
                    c.shift.ratio.unwrap_or(1.0)
                )
            }
            (_, Some(numbers)) => numbers,
        };
        // The direction is the test's: B's values tend to be the higher ones.
        let b_higher = numbers.test.b_over_a > 0.5;
        let word = match (self.metric, b_higher) {
            (Metric::P50 | Metric::P99, true) => "slower",
            (Metric::P50 | Metric::P99, false) => "faster",
            (_, true) => "higher",
            (_, false) => "lower",
        };
        let shift = &numbers.shift;
        match shift.ratio.map(|r| r - 1.0) {
            Some(change) if change != 0.0 && (change > 0.0) == b_higher => {
                format!("B is {}% {word}", percent(change.abs()))
            }
            None if shift.difference != 0.0 && (shift.difference > 0.0) == b_higher => {
                format!("B is {word} by {}", format_size(self.metric.difference(shift.difference).size))
            }
            _ => {
                format!("B is {word} by rank (medians {} and {})", self.show(shift.a_median), self.show(shift.b_median))
            }
        }
    }

    fn show(&self, x: f64) -> String {
        format_value(self.metric.value(x))
    }
}

/// Whether the medians differ by less than `min_effect` of A's. A ratio needs A's median
/// above zero (an error rate of zero has none): then any significant change counts.
fn below(min_effect: Option<f64>, c: &Comparison) -> bool {
    match (min_effect, c.shift.ratio) {
        (Some(min), Some(ratio)) => (ratio - 1.0).abs() < min,
        _ => false,
    }
}

/// A whole comparison: both runs, each metric.
#[derive(Debug, Clone)]
pub struct Report {
    pub a: RunResult,
    pub b: RunResult,
    pub alpha: f64,
    pub min_effect: Option<f64>,
    pub bootstrap: Bootstrap,
    pub metrics: Vec<MetricComparison>,
}

impl Report {
    pub fn of(a: RunResult, b: RunResult, settings: &Settings) -> Report {
        let metrics = settings
            .metrics
            .iter()
            .map(|&m| MetricComparison::of(m, &a, &b, settings.alpha, settings.min_effect, &settings.bootstrap))
            .collect();
        Report { a, b, alpha: settings.alpha, min_effect: settings.min_effect, bootstrap: settings.bootstrap, metrics }
    }

    pub fn regressions(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| m.is_regression())
    }
}

/// Reads both results, compares, prints; with `fail_on_regression`, a regression is exit 1
/// (after the report is printed).
pub fn run(settings: &Settings) -> anyhow::Result<ExitCode> {
    let a = settings.a.load()?;
    let b = settings.b.load()?;
    let report = Report::of(a, b, settings);
    let text = match settings.format {
        CompareFormat::Table => table(&report),
        CompareFormat::Json => serde_json::to_string_pretty(&to_json(&report)).unwrap_or_default() + "\n",
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| output_failed(Path::new("-"), e))?;
    let regressions: Vec<String> =
        report.regressions().map(|m| format!("{} ({})", m.metric.label(), m.change_text())).collect();
    if settings.fail_on_regression && !regressions.is_empty() {
        return Err(run_failed(format!("B regressed against A: {}", regressions.join("; "))));
    }
    Ok(ExitCode::SUCCESS)
}

// ---- rendering: the only place with units ----

fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p >= 10.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

fn format_value(v: Value) -> String {
    match v {
        Value::Latency(d) => units::duration(d),
        Value::PerSecond(r) => format!("{r:.1}/s"),
        Value::Fraction(f) => format!("{:.2}%", f * 100.0),
    }
}

fn format_difference(d: Difference) -> String {
    format!("{}{}", if d.negative { "-" } else { "+" }, format_size(d.size))
}

/// The size of a difference: error rates in percentage points, not as a relative change.
fn format_size(size: Value) -> String {
    match size {
        Value::Fraction(f) => format!("{:.2} pp", f * 100.0),
        size => format_value(size),
    }
}

fn format_p(p: f64) -> String {
    if p < 1e-4 {
        "<0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

fn describe(r: &RunResult) -> String {
    let mut s = r.label.clone();
    if let Some(name) = &r.name {
        let _ = write!(s, "  \"{name}\"");
    }
    if let Some(at) = &r.started_at {
        let _ = write!(s, "  started {at}");
    }
    s
}

/// The human report.
pub fn table(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "A: {}\nB: {}", describe(&r.a), describe(&r.b));
    let _ = writeln!(o, "\nWhole run:       {:>16}  {:>16}", "A", "B");
    let rate = |x: f64| format!("{x:.1} calls/s");
    let _ = writeln!(o, "  throughput     {:>16}  {:>16}", rate(r.a.throughput_rps), rate(r.b.throughput_rps));
    let _ = writeln!(o, "  p50 latency    {:>16}  {:>16}", units::duration(r.a.p50), units::duration(r.b.p50));
    let _ = writeln!(o, "  p99 latency    {:>16}  {:>16}", units::duration(r.a.p99), units::duration(r.b.p99));
    let level = r.bootstrap.level * 100.0;
    let _ = writeln!(
        o,
        "\nPer interval: medians of the full measured intervals ({} s) and how many; B - A and B / A with \
         {level:.0}% bootstrap intervals; Mann-Whitney U, two-sided, alpha {}{}:",
        units::secs(r.a.interval),
        r.alpha,
        r.min_effect.map_or(String::new(), |m| format!(", smallest change that matters {}%", percent(m)))
    );
    let _ = writeln!(
        o,
        "  {:<12} {:>16} {:>16}  {:<34} {:<22} {:>8}  verdict",
        "metric", "A (n)", "B (n)", "B - A [CI]", "B / A [CI]", "p"
    );
    for m in &r.metrics {
        let side = |at: &[Duration], median: Option<f64>| {
            median.map_or_else(
                || format!("- ({})", at.len()),
                |x| format!("{} ({})", format_value(m.metric.value(x)), at.len()),
            )
        };
        let n = m.numbers.as_ref();
        let difference = n.map_or("-".into(), |c| {
            let d = |x: f64| format_difference(m.metric.difference(x));
            let ci = c.shift.difference_ci;
            format!("{} [{}, {}]", d(c.shift.difference), d(ci.low), d(ci.high))
        });
        let ratio =
            n.and_then(|c| c.shift.ratio.map(|x| (x, c.shift.ratio_ci))).map_or("-".into(), |(x, ci)| match ci {
                Some(Interval { low, high }) => format!("{x:.3} [{low:.3}, {high:.3}]"),
                None => format!("{x:.3}"),
            });
        let p = n.map_or("-".into(), |c| format_p(c.test.p_value));
        let _ = writeln!(
            o,
            "  {:<12} {:>16} {:>16}  {:<34} {:<22} {:>8}  {}",
            m.metric.label(),
            side(&m.a_at, n.map(|c| c.a.median)),
            side(&m.b_at, n.map(|c| c.b.median)),
            difference,
            ratio,
            p,
            m.verdict_text()
        );
    }
    let mut notes = Vec::new();
    for m in &r.metrics {
        let Some(c) = &m.numbers else { continue };
        for (run, robust, at) in [("A", &c.a, &m.a_at), ("B", &c.b, &m.b_at)] {
            if !robust.tukey_outliers.is_empty() {
                let when: Vec<String> =
                    robust.tukey_outliers.iter().map(|&i| format!("{}", units::secs(at[i]))).collect();
                notes.push(format!(
                    "{run}'s {} is beyond the Tukey fences (1.5 IQR) in {} of {} intervals (ending at {} s); kept",
                    m.metric.label(),
                    robust.tukey_outliers.len(),
                    robust.n,
                    when.join(", ")
                ));
            }
        }
    }
    if r.regressions().next().is_some() {
        let names: Vec<&str> = r.regressions().map(|m| m.metric.label()).collect();
        notes.push(format!("B regressed against A: {}", names.join(", ")));
    }
    if !notes.is_empty() {
        let _ = writeln!(o, "\nNotes:");
        for n in notes {
            let _ = writeln!(o, "  {n}");
        }
    }
    o
}

/// A metric's number in JSON: calls/s, µs (latencies, as every `*_us` key) or a fraction.
fn json_number(metric: Metric, x: f64) -> JsonValue {
    match metric.value(x.abs()) {
        Value::Latency(d) => (units::micros(d) * x.signum()).into(),
        _ => x.into(),
    }
}

fn json_interval(metric: Metric, ci: Option<Interval>) -> JsonValue {
    ci.map_or(JsonValue::Null, |ci| json!([json_number(metric, ci.low), json_number(metric, ci.high)]))
}

fn json_run(r: &RunResult) -> JsonValue {
    json!({
        "source": r.label,
        "name": r.name,
        "started_at": r.started_at,
        "interval_s": units::secs(r.interval),
        "full_measured_intervals": r.full_intervals().count(),
        "throughput_rps": r.throughput_rps,
        "latency_us": {"p50": units::micros(r.p50), "p99": units::micros(r.p99)},
    })
}

/// The comparison as one JSON object.
pub fn to_json(r: &Report) -> JsonValue {
    let metrics: Vec<JsonValue> = r
        .metrics
        .iter()
        .map(|m| {
            let metric = m.metric;
            let verdict = match m.verdict {
                Verdict::TooFew => "too few intervals",
                Verdict::NoSignificantDifference => "no significant difference",
                Verdict::NoMeaningfulDifference => "no meaningful difference",
                Verdict::Improvement => "improvement",
                Verdict::Regression => "regression",
            };
            let side = |robust: Option<&crate::stats::compare::Robust>, at: &[Duration]| {
                let when = |idx: &[usize]| idx.iter().map(|&i| units::secs(at[i])).collect::<Vec<_>>();
                match robust {
                    None => json!({"n": at.len()}),
                    Some(s) => json!({
                        "n": s.n,
                        "median": json_number(metric, s.median),
                        "mad": json_number(metric, s.mad),
                        "tukey_outliers_t_s": when(&s.tukey_outliers),
                        "z_outliers_t_s": when(&s.z_outliers),
                    }),
                }
            };
            let c = m.numbers.as_ref();
            json!({
                "metric": metric.key(),
                "unit": match metric { Metric::Throughput => "calls/s", Metric::P50 | Metric::P99 => "us", Metric::ErrorRate => "fraction" },
                "a": side(c.map(|c| &c.a), &m.a_at),
                "b": side(c.map(|c| &c.b), &m.b_at),
                "difference": c.map(|c| json_number(metric, c.shift.difference)),
                "difference_ci": json_interval(metric, c.map(|c| c.shift.difference_ci)),
                "ratio": c.and_then(|c| c.shift.ratio),
                "ratio_ci": c.and_then(|c| c.shift.ratio_ci).map(|ci| json!([ci.low, ci.high])),
                "hodges_lehmann": c.and_then(|c| c.hodges_lehmann).map(|x| json_number(metric, x)),
                "p_value": c.map(|c| c.test.p_value),
                "verdict": verdict,
                "summary": m.verdict_text(),
            })
        })
        .collect();
    json!({
        "a": json_run(&r.a),
        "b": json_run(&r.b),
        "alpha": r.alpha,
        "min_effect": r.min_effect,
        "test": "Mann-Whitney U, two-sided, normal approximation with tie and continuity corrections",
        "confidence": r.bootstrap.level,
        "bootstrap_resamples": r.bootstrap.resamples,
        "bootstrap_seed": r.bootstrap.seed,
        "min_intervals": MIN_INTERVALS,
        "metrics": metrics,
        "regressions": r.regressions().map(|m| m.metric.key()).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_the_full_measured_intervals() {
        // As `run` writes them: a warm-up row, full rows, one without calls, and a last row
        // that is not full length (here longer: it runs to the last answer).
        let row = |t: f64, length: f64, phase: &str, calls: u64, failed: u64| {
            json!({"t_s": t, "length_s": length, "phase": phase, "calls": calls, "ok": calls - failed,
                   "failed": failed, "rps": calls as f64 / length, "p50_us": 100.5, "p90_us": 150.0,
                   "p99_us": 1348.985, "max_us": 2000.0})
        };
        let text = json!({
            "meta": {"name": "x"},
            "throughput_rps": 1000.0,
            "latency_us": {"p50": 100.0, "p99": 1000.0},
            "interval_s": 0.5,
            "intervals": [row(0.5, 0.5, "warmup", 10, 0), row(1.0, 0.5, "measured", 500, 5),
                          row(1.5, 0.5, "measured", 0, 0), row(2.009172, 0.509172, "measured", 700, 0)],
        })
        .to_string();
        let r = RunResult::parse(&text, "x.json".into()).unwrap();
        assert_eq!(
            (r.name.as_deref(), r.interval, r.p99),
            (Some("x"), Duration::from_millis(500), Duration::from_millis(1))
        );
        assert_eq!(
            Metric::Throughput.sample(&r),
            vec![(Duration::from_secs(1), 1000.0), (Duration::from_millis(1500), 0.0)]
        );
        assert_eq!(Metric::P99.sample(&r), vec![(Duration::from_secs(1), 1_348_985.0)]);
        assert_eq!(Metric::ErrorRate.sample(&r), vec![(Duration::from_secs(1), 0.01)]);
        assert_eq!(Metric::P99.value(1_348_985.0), Value::Latency(Duration::from_nanos(1_348_985)));

        let bad = RunResult::parse("[]", "y.json".into()).unwrap_err().to_string();
        assert!(bad.starts_with("y.json: not a result of rpcmeter run"), "{bad}");
        assert_eq!(crate::error::exit_code(&RunResult::parse("{", "y.json".into()).unwrap_err()), 2);
    }
}
