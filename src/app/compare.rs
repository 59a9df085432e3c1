//! `rpcmeter compare A B` (or `compare a1 a2 a3 -- b1 b2 b3`): results of `rpcmeter run
//! --format json` (also merged and `--shards` results) -> one comparison per metric -> a
//! table or JSON, and the exit code.
//!
//! The unit is the run, as benchstat's: from one run to the next of the same build against
//! the same server, p50 moves by a few percent (an A/A audit saw 3-37 µs on about 1 ms), far
//! more than the noise between the intervals of one run, so a test over one run's intervals
//! calls identical servers different. Each metric gives one value per run: throughput of OK
//! calls per second, p50 and p99 latency of OK calls (`ok_latency_us`), the error rate.
//! Throughput and latency are compared as logarithms (a ratio B / A), the error rate as a
//! difference in percentage points. `stats::compare::mean_shift` judges the runs: Welch's t
//! over the runs' values, each side's noise per run taken as the largest of the spread
//! measured between its runs (2 runs or more), the noise measured within its runs (from
//! their intervals; binomial for the error rate) and the stated floor [`Metric::noise_floor`]
//! (docs/design.md, "compare"). With one run a side nothing between runs is measured: the
//! floor sets the smallest change judged, and the report says so. The interval and the
//! p-value come from the same t (or normal) distribution, so they never disagree.
//!
//! A regression is a significant change the bad way: lower throughput, higher latency or
//! error rate. With `--min-effect`, a significant change smaller than that share of A's value
//! is "no meaningful difference". A metric that cannot be judged (no OK calls on a side,
//! latency of a run whose calls mostly failed, latency of OK calls faster on a side that
//! failed materially more calls: [`FailedMore`]) says why; `--fail-on-regression` fails on it.
use crate::error::{bad_input, run_failed};
use crate::report::Format;
use crate::result::{NoticeKind, Run};
use crate::stats::assertions::Value;
use crate::stats::compare::{mean_shift, MeanShift, Runs, Spread};
use crate::units;
use serde_json::{json, Value as JsonValue};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// A result without `ok_latency_us` (written before it existed) whose calls failed more than
/// this share has no latency of OK calls to compare: its `latency_us` counts failed calls too
/// (a fast rejection would look like a fast call).
pub const MAX_FAILED_FOR_LATENCY: f64 = 0.01;

/// An interval in which the run's rate would have ended this many OK calls and none ended is a
/// stall (Poisson: a quiet run has none with probability e^-10, 5e-5).
pub const STALL_EXPECTED_CALLS: f64 = 10.0;

/// A client that stood still this share of the measured time or longer froze: a closed loop
/// loses that share of its calls, an open loop delays that share of its calls by up to the
/// freeze, as large as the noise floor assumed of throughput ([`Metric::noise_floor`]).
pub const FREEZE_SHARE: f64 = 0.02;

/// Everything a comparison needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub a: Vec<ResultRef>,
    pub b: Vec<ResultRef>,
    /// `--runs`: make A's and B's runs first (then `a` and `b` are empty).
    pub interleave: Option<crate::app::interleave::Interleave>,
    /// `--slice`, for the results `--runs` makes.
    pub slice: Option<(String, String)>,
    pub metrics: Vec<Metric>,
    pub alpha: f64,
    /// `--min-effect`: the smallest relative change that counts (0.05 = 5 %).
    pub min_effect: Option<f64>,
    pub fail_on_regression: bool,
    /// Table, JSON or the HTML page (`pages::compare`).
    pub format: Format,
    /// `-o FILE`: where the report goes (None: standard output).
    pub output: Option<PathBuf>,
}

/// Where a result comes from: a JSON result file or a history id ("42", "#42"), whole or one
/// slice of it (`--slice calls_by_name=put`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRef {
    pub path: PathBuf,
    /// (breakdown, name), e.g. ("calls_by_name", "put").
    pub slice: Option<(String, String)>,
}

impl ResultRef {
    pub fn resolve(arg: &Path) -> ResultRef {
        ResultRef { path: arg.to_path_buf(), slice: None }
    }

    /// How reports name it.
    pub fn label(&self) -> String {
        match &self.slice {
            None => self.path.display().to_string(),
            Some((key, name)) => format!("{} [{key}={name}]", self.path.display()),
        }
    }

    /// The result (or its slice), read and checked; a bad-input error (exit 2) naming the
    /// source otherwise.
    pub fn load(&self) -> anyhow::Result<RunResult> {
        let text = crate::history::resolve_text(&self.path.to_string_lossy())?;
        let label = self.label();
        let run = read(&text, &label)?;
        match &self.slice {
            None => RunResult::of(&run, label),
            Some((key, name)) => {
                let slice = run.of_slice(key, name).map_err(|e| bad_input(format!("{}: {e}", self.path.display())))?;
                RunResult::of(&slice, label)
            }
        }
    }
}

fn read(text: &str, label: &str) -> anyhow::Result<Run> {
    Run::parse(text).map_err(|e| bad_input(format!("{label}: {e}")))
}

/// The parts of a result that a comparison reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub label: String,
    pub name: Option<String>,
    pub started_at: Option<String>,
    /// `meta.run_id`, when the result has one.
    pub run_id: Option<String>,
    /// `meta.source_run_ids` of a merged result: the runs merged into it.
    pub source_run_ids: Vec<String>,
    pub call: Option<String>,
    pub target: Option<String>,
    /// How many results were merged into this one (`merge`, `run --shards`); 0 for one run.
    pub merged_from: usize,
    pub partial: bool,
    pub calls: u64,
    pub ok: u64,
    pub failed: u64,
    pub duration: Duration,
    /// OK calls per second of the measured window.
    pub ok_rps: f64,
    pub throughput_rps: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// Whether `p50` and `p99` are of OK calls only (`ok_latency_us`); else of every call.
    pub ok_only: bool,
    /// The sampling error of p50 and p99 (of their logarithms), from the call latency
    /// histogram's order statistics; 0 without a histogram.
    pub p50_error: f64,
    pub p99_error: f64,
    /// The interval series; empty for merged results, which keep none.
    pub interval: Option<Duration>,
    pub intervals: Vec<IntervalRow>,
    /// What in the run's own result says some of its numbers are not the target's.
    pub disturbances: Vec<Disturbance>,
}

/// Something in a run's own result that makes some of its numbers the client's (or the
/// merge's) rather than the target's: with fewer than [`MIN_RUNS_FOR_SPREAD`] runs a side,
/// the metrics it touches are not judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Disturbance {
    pub why: String,
    pub touches: &'static [Metric],
    /// The client's doing (a warning), not the merge's (a note).
    pub client: bool,
}

const CLIENT_METRICS: &[Metric] = &[Metric::Throughput, Metric::P50, Metric::P99];
const LATENCY_METRICS: &[Metric] = &[Metric::P50, Metric::P99];

/// A run's disturbances, from its own result: a client held up well beyond the calibrated
/// floor (its `client_hiccups` warning: latency and, in a closed loop, throughput hold the
/// stall), a client that froze once ([`client_freeze`]), calls due but never sent (the rate
/// was not kept), sends late by the client's own wake-ups beyond the calibrated timer floor
/// (slot waits are the target's doing and are not counted), and a merge: its shards ran at
/// once under the same conditions, so their spread is not the spread from run to run
/// (docs/compare.md: the shards of one run agreed on p50 to 2 % where runs moved it x2), and
/// it keeps no interval series.
fn disturbances(run: &Run, merged_from: usize) -> Vec<Disturbance> {
    let mut out = Vec::new();
    if run.notices.has(NoticeKind::Hiccups) {
        let max = run.client.as_ref().and_then(|c| c.hiccup_us.as_ref()).and_then(|h| micros(h.max, "").ok());
        let stall = max.map_or(String::new(), |m| format!(" (a 1 ms sleep overshot by up to {})", units::duration(m)));
        out.push(Disturbance {
            why: format!("the client was held up{stall}, well beyond the calibrated floor (client_hiccups)"),
            touches: CLIENT_METRICS,
            client: true,
        });
    }
    if let Some(freeze) = client_freeze(run) {
        out.push(Disturbance {
            why: format!(
                "the client stood still for {} (its longest hiccup: a 1 ms sleep overshot by that much), {}% of \
                 the measured time",
                units::duration(freeze),
                percent(freeze.as_secs_f64() / run.duration_s)
            ),
            touches: CLIENT_METRICS,
            client: true,
        });
    }
    let unsent = run.requests.unsent.unwrap_or(0);
    if unsent > 0 {
        out.push(Disturbance {
            why: format!(
                "{unsent} of {} due calls were never sent (the rate was not kept)",
                run.requests.total.saturating_add(unsent)
            ),
            touches: CLIENT_METRICS,
            client: true,
        });
    }
    if let Some(lag) = client_lag(run) {
        out.push(Disturbance {
            why: format!(
                "schedule lag p99 {} from the client's own late wake-ups, beyond the calibrated timer floor",
                units::duration(lag)
            ),
            touches: LATENCY_METRICS,
            client: true,
        });
    }
    if merged_from > 0 {
        out.push(Disturbance {
            why: format!(
                "merged from {merged_from} results: its shards ran at once under the same conditions, so their \
                 spread is not how a run varies from the next, and it keeps no interval series"
            ),
            touches: CLIENT_METRICS,
            client: false,
        });
    }
    out
}

/// The longest hiccup of a run's client (`client.hiccup_us.max`: its threads stood still that
/// long, stopped or starved) when it is at least [`FREEZE_SHARE`] of the measured time. A
/// freeze is one stall, so the hiccups' p99 (the `client_hiccups` warning) misses it: a client
/// stopped for 1 s of 4 overshot a 1 ms sleep by 1.04 s once in 2156 sleeps, p99 7 ms.
fn client_freeze(run: &Run) -> Option<Duration> {
    let max = micros(run.client.as_ref()?.hiccup_us.as_ref()?.max, "").ok()?;
    (run.duration_s > 0.0 && max.as_secs_f64() >= FREEZE_SHARE * run.duration_s).then_some(max)
}

/// The schedule lag p99 of a run whose late sends were mostly the client's own late wake-ups
/// and stand out of the calibrated timer floor (`pacer_lateness_us`) as hiccups do
/// (`analysis::notices::hiccups_stand_out`); without a calibration, beyond 1 ms (the
/// schedule-lag notice's bound).
fn client_lag(run: &Run) -> Option<Duration> {
    let lag = micros(run.schedule_lag_us.as_ref()?.stats.get("p99").copied()?, "").ok()?;
    if run.late_wakeups.unwrap_or(0) <= run.late_sends.unwrap_or(0) {
        return None;
    }
    let floor = run
        .calibration
        .as_ref()
        .and_then(|c| c.get("pacer_lateness_us")?.get("p99")?.as_f64())
        .and_then(|us| micros(us, "").ok());
    let stands_out = match floor {
        Some(floor) => crate::analysis::notices::hiccups_stand_out(lag, floor),
        None => lag > Duration::from_millis(1),
    };
    stands_out.then_some(lag)
}

/// One row of a result's interval series.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// End of the interval, from the start of the run.
    pub at: Duration,
    pub length: Duration,
    pub measured: bool,
    pub calls: u64,
    pub ok: u64,
    pub failed: u64,
    pub p50: Duration,
    pub p99: Duration,
}

impl RunResult {
    /// A result from its JSON text; `label` names it in errors.
    pub fn parse(text: &str, label: String) -> anyhow::Result<RunResult> {
        let run = read(text, &label)?;
        RunResult::of(&run, label)
    }

    /// What a comparison reads of a result: its numbers as Durations and rates, checked.
    pub fn of(run: &Run, label: String) -> anyhow::Result<RunResult> {
        let bad = |why: String| bad_input(format!("{label}: not a result of rpcmeter run --format json: {why}"));
        checked_counts(run).map_err(bad)?;
        let seconds = |s: f64, key: &str| {
            Duration::try_from_secs_f64(s).map_err(|_| bad(format!("{key} {s} is not a duration in seconds")))
        };
        let rate = |x: f64, key: &str| match x {
            x if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(bad(format!("{key} {x} is not a rate"))),
        };
        let interval = match run.interval_s {
            Some(s) if seconds(s, "interval_s")?.is_zero() => return Err(bad("interval_s is 0".into())),
            Some(s) => Some(seconds(s, "interval_s")?),
            None => None,
        };
        let intervals = run.intervals.iter().flatten().map(|iv| interval_row(iv).map_err(bad));
        let intervals = intervals.collect::<anyhow::Result<Vec<_>>>()?;
        let duration = seconds(run.duration_s, "duration_s")?;
        let ok_rps = match run.ok_rps {
            Some(x) => rate(x, "ok_rps")?,
            None if duration.is_zero() => 0.0,
            None => run.requests.ok as f64 / duration.as_secs_f64(),
        };
        // Of OK calls only when the result has them (results written before it existed have
        // only latency_us).
        let ok_only = run.ok_latency_us.is_some();
        let (latency, key) = match &run.ok_latency_us {
            Some(l) => (l, "ok_latency_us"),
            None => (&run.latency_us, "latency_us"),
        };
        let p50 = micros(latency.stats.get("p50").copied().unwrap_or(0.0), &format!("{key}.p50")).map_err(bad)?;
        let p99 = micros(latency.stats.get("p99").copied().unwrap_or(0.0), &format!("{key}.p99")).map_err(bad)?;
        let merged_from =
            run.meta.merged_from.as_ref().map_or(0, Vec::len).max(run.shards.as_ref().map_or(0, Vec::len));
        let throughput_rps = rate(run.throughput_rps, "throughput_rps")?;
        let h = &run.histograms;
        let latencies = if ok_only { h.ok_call_latency.as_deref() } else { Some(h.call_latency.as_str()) };
        let histogram = match latencies.filter(|text| !text.is_empty()) {
            Some(text) => Some(
                crate::record::shard::from_text(text).map_err(|why| bad(format!("histograms.call_latency {why}")))?,
            ),
            None => None,
        };
        let error = |q: f64| histogram.as_ref().map_or(0.0, |h| quantile_error(h, q));
        Ok(RunResult {
            ok_only,
            p50_error: error(0.5),
            p99_error: error(0.99),
            label,
            name: run.meta.name.clone(),
            started_at: run.meta.started_at.clone(),
            run_id: run.meta.run_id.as_ref().map(id_text),
            source_run_ids: run.meta.source_run_ids.iter().flatten().map(id_text).collect(),
            call: Some(run.call.clone()).filter(|c| !c.is_empty()),
            target: Some(run.target.clone()).filter(|t| !t.is_empty()),
            merged_from,
            partial: run.partial,
            calls: run.requests.total,
            ok: run.requests.ok,
            failed: run.requests.failed,
            duration,
            ok_rps,
            throughput_rps,
            p50,
            p99,
            interval,
            intervals,
            disturbances: disturbances(run, merged_from),
        })
    }

    /// The measured intervals (warm-up left out), the last, shorter one included.
    pub fn measured_intervals(&self) -> impl Iterator<Item = &IntervalRow> {
        self.intervals.iter().filter(|iv| iv.measured)
    }

    /// Whether no OK call in `length` is a stall rather than chance: the run's rate of OK
    /// calls expected at least [`STALL_EXPECTED_CALLS`] in it (at 2 calls/s, a 500 ms interval
    /// without one is no stall).
    fn stalled(&self, length: Duration) -> bool {
        self.ok_rps * length.as_secs_f64() >= STALL_EXPECTED_CALLS
    }

    /// How far the run's value could be from its own run's true one by sampling alone, as a
    /// standard error of its logarithm (percentiles: order statistics of the histogram).
    fn sampling_error(&self, metric: Metric) -> f64 {
        match metric {
            Metric::P50 => self.p50_error,
            Metric::P99 => self.p99_error,
            Metric::Throughput | Metric::ErrorRate => 0.0,
        }
    }

    fn failed_share(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failed as f64 / self.calls as f64
        }
    }
}

/// As merge refuses them (src/app/merge.rs, MAX_COUNT): a count beyond 2^53 is no run's, and
/// the error rate adds the counts of every run.
fn checked_counts(run: &Run) -> Result<(), String> {
    let r = &run.requests;
    let rows = run.intervals.iter().flatten();
    let counts = [("requests.total", r.total), ("requests.ok", r.ok), ("requests.failed", r.failed)]
        .into_iter()
        .chain(rows.flat_map(|iv| [("intervals[].calls", iv.calls), ("intervals[].failed", iv.failed)]));
    for (key, n) in counts {
        if n > 1 << 53 {
            return Err(format!("{key} {n} is not a count of calls"));
        }
    }
    Ok(())
}

/// Latencies are written in µs to the ns: back to whole ns, without float truncation.
fn micros(us: f64, key: &str) -> Result<Duration, String> {
    match us * 1e3 {
        ns if ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64 => Ok(Duration::from_nanos(ns.round() as u64)),
        _ => Err(format!("{key} {us} is not a latency in µs")),
    }
}

fn interval_row(iv: &crate::result::IntervalRow) -> Result<IntervalRow, String> {
    let seconds = |s: f64, key: &str| {
        Duration::try_from_secs_f64(s).map_err(|_| format!("{key} {s} is not a duration in seconds"))
    };
    Ok(IntervalRow {
        at: seconds(iv.t_s, "t_s")?,
        length: seconds(iv.length_s, "length_s")?,
        measured: match iv.phase.as_str() {
            "measured" => true,
            "warmup" => false,
            other => return Err(format!("unknown interval phase {other:?}")),
        },
        calls: iv.calls,
        ok: iv.ok.unwrap_or(iv.calls.saturating_sub(iv.failed)),
        failed: iv.failed,
        p50: micros(iv.p50_us, "p50_us")?,
        p99: micros(iv.p99_us, "p99_us")?,
    })
}

/// A run id as text, whatever JSON it was written as.
fn id_text(id: &JsonValue) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_string)
}

/// The standard error of the logarithm of the `q` quantile of `h`: the values at the ranks
/// one binomial standard deviation, `sqrt(q (1 - q) / n)`, either side of `q` (the order
/// statistics' distribution-free interval), half their distance in logarithms.
fn quantile_error(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    let n = h.len();
    if n < 2 {
        return 0.0;
    }
    let step = (q * (1.0 - q) / n as f64).sqrt();
    let (low, high) = (h.value_at_quantile((q - step).max(0.0)), h.value_at_quantile((q + step).min(1.0)));
    if low == 0 || high == 0 {
        return 0.0;
    }
    ((high as f64).ln() - (low as f64).ln()) / 2.0
}

/// A metric compared between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Throughput,
    P50,
    P99,
    ErrorRate,
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

    /// Compared as a ratio (on logarithms), or else as a difference (the error rate: 0 has no
    /// logarithm and "0.5 pp more errors" is what a user reads).
    pub fn relative(self) -> bool {
        self != Metric::ErrorRate
    }

    /// The least standard deviation of one run's value from run to run, on the metric's scale
    /// (of the logarithm: 0.02 is about 2 %): what one run a side cannot measure. Stated and
    /// justified in docs/design.md ("compare"); the error rate's is binomial, per comparison.
    pub fn noise_floor(self) -> f64 {
        match self {
            Metric::Throughput | Metric::P50 => 0.02,
            Metric::P99 => 0.05,
            Metric::ErrorRate => 0.0,
        }
    }

    /// The smallest change that matters: `--min-effect` when given (a share of A's value),
    /// else 10 % for throughput and p50, 25 % for p99 (about the resolution of one run a side
    /// at the floors and Holm's strictest level over 4 metrics, 7.1 % and 19 %, rounded up), and
    /// 1 percentage point of errors. "No change" means the interval rules out a change this big.
    pub fn matters(self, min_effect: Option<f64>) -> f64 {
        match (self, min_effect) {
            (Metric::ErrorRate, _) => 0.01,
            (_, Some(m)) => m,
            (Metric::Throughput | Metric::P50, None) => 0.10,
            (Metric::P99, None) => 0.25,
        }
    }

    /// A run's value (OK calls per second, ns of OK calls' latency, a fraction), or why it has none.
    pub fn run_value(self, run: &RunResult) -> Result<f64, String> {
        let latency = |d: Duration| {
            if run.ok == 0 {
                Err(format!("{} has no OK calls", run.label))
            } else if !run.ok_only && run.failed_share() > MAX_FAILED_FOR_LATENCY {
                Err(format!(
                    "{}% of {}'s calls failed, and its latency counts them",
                    percent(run.failed_share()),
                    run.label
                ))
            } else {
                Ok(d.as_nanos() as f64)
            }
        };
        match self {
            Metric::Throughput => Ok(run.ok_rps),
            Metric::P50 => latency(run.p50),
            Metric::P99 => latency(run.p99),
            Metric::ErrorRate if run.calls == 0 => Err(format!("{} made no calls", run.label)),
            Metric::ErrorRate => Ok(run.failed_share()),
        }
    }

    /// How much the run's value moved within it: the standard deviation of its measured
    /// intervals' values (of their logarithms for latency; relative to the run's rate for
    /// throughput), each weighted by its length, the last, shorter interval included (a
    /// `-z 3s` run has two full intervals and a third short one, and a stall in that third is
    /// in the run's value). An interval without an OK call is the stall it is: 0 calls/s, and
    /// a latency of at least its length (no call ended OK in it), when the run's rate would
    /// have ended some there ([`RunResult::stalled`]). Not robust on purpose: a run that froze
    /// must not look as quiet as a clean one. What moves a run against the next (load from
    /// other processes, CPU frequency, a noisy neighbour) moves its intervals too, so a run is
    /// taken to vary between runs at least this much (not this over the root of the count:
    /// intervals of one run share its conditions and do not average them out).
    pub fn within_run(self, run: &RunResult) -> Option<Spread> {
        let latency = |iv: &IntervalRow, p: Duration| match iv.ok {
            0 if run.stalled(iv.length) => Some(p.max(iv.length)),
            0 => None,
            _ => Some(p),
        };
        let rows = run.measured_intervals().filter(|iv| !iv.length.is_zero());
        let values: Vec<(f64, f64)> = rows
            .filter_map(|iv| {
                let value = match self {
                    Metric::Throughput if run.ok_rps > 0.0 => iv.ok as f64 / iv.length.as_secs_f64() / run.ok_rps,
                    Metric::P50 => (latency(iv, iv.p50)?.as_nanos() as f64).ln(),
                    Metric::P99 => (latency(iv, iv.p99)?.as_nanos() as f64).ln(),
                    _ => return None,
                };
                value.is_finite().then_some((value, iv.length.as_secs_f64()))
            })
            .collect();
        crate::stats::compare::weighted_sd(&values)
    }

    /// A value, typed.
    pub fn value(self, x: f64) -> Value {
        match self {
            Metric::Throughput => Value::PerSecond(x),
            Metric::P50 | Metric::P99 => Value::Latency(Duration::from_nanos(x.max(0.0).round() as u64)),
            Metric::ErrorRate => Value::Fraction(x),
        }
    }
}

/// What one metric's comparison concludes: one vocabulary for the table, the JSON and the
/// exit code.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A change the bad way (lower throughput, higher latency or error rate), significant at
    /// the metric's Holm level and at least `--min-effect`.
    Regression,
    /// The same the good way.
    Improvement,
    /// No change that matters: the interval rules out every change of [`Metric::matters`] or
    /// more (or the change is significant but smaller than `--min-effect`).
    NoChange,
    /// No verdict, and why: a side without a value, a run whose client was disturbed, an
    /// interval too wide to rule out a change that matters, or a latency of OK calls on a side
    /// that failed materially more calls, unless it calls that side slower ([`FailedMore`]).
    NotJudged(String),
}

impl Verdict {
    /// Its name in the table and the JSON.
    pub fn key(&self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoChange => "no change",
            Verdict::NotJudged(_) => "not judged",
        }
    }
}

/// Fewer runs than this on a side and the spread between runs is not measured well enough to
/// hold a disturbed run (or a merged one): the metrics it touches are not judged.
pub const MIN_RUNS_FOR_SPREAD: usize = 3;

/// One metric of A against B.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricComparison {
    pub metric: Metric,
    /// Each run's value, in the metric's unit (empty when some run has none).
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    /// On the scale compared: logarithms of the values for a relative metric, else the values;
    /// its interval at `level`.
    pub shift: Option<MeanShift>,
    /// The significance level it was tested at (Holm's step), and its Holm-adjusted p-value.
    pub level: Option<f64>,
    pub p_adjusted: Option<f64>,
    /// The smallest change that matters, `--min-effect` or [`Metric::matters`].
    pub matters: f64,
    /// B had no OK calls at all where A had some (or the other way): certain, no test needed.
    pub none_on: Option<&'static str>,
    pub verdict: Verdict,
}

/// A metric decided without a test, or ready for one.
enum Prepared {
    Decided(MetricComparison),
    Pending(Pending),
}

/// A metric ready for its test: the values on the scale compared and each side's noise.
struct Pending {
    comparison: MetricComparison,
    a: Vec<f64>,
    b: Vec<f64>,
    floor_a: (f64, Option<f64>),
    floor_b: (f64, Option<f64>),
}

impl Pending {
    fn shift(&self, alpha: f64) -> Option<MeanShift> {
        let runs = |values, (floor_sd, floor_df)| Runs { values, floor_sd, floor_df };
        mean_shift(runs(&self.a, self.floor_a), runs(&self.b, self.floor_b), alpha)
    }
}

impl MetricComparison {
    /// One metric alone (a family of one).
    pub fn of(metric: Metric, a: &[RunResult], b: &[RunResult], alpha: f64, min_effect: Option<f64>) -> Self {
        family(&[metric], a, b, alpha, min_effect).remove(0)
    }

    /// The runs' values and what can be said without a test.
    fn prepare(metric: Metric, a: &[RunResult], b: &[RunResult], min_effect: Option<f64>) -> Prepared {
        let mut out = MetricComparison {
            metric,
            a: vec![],
            b: vec![],
            shift: None,
            level: None,
            p_adjusted: None,
            matters: metric.matters(min_effect),
            none_on: None,
            verdict: Verdict::NoChange,
        };
        let values =
            |runs: &[RunResult]| runs.iter().map(|r| metric.run_value(r)).collect::<Result<Vec<f64>, String>>();
        match (values(a), values(b)) {
            (Ok(x), Ok(y)) => (out.a, out.b) = (x, y),
            (Err(why), _) | (_, Err(why)) => {
                out.verdict = Verdict::NotJudged(why);
                return Prepared::Decided(out);
            }
        }
        if metric.relative() {
            // A side without OK calls has no logarithm: all zero against all positive is certain.
            let zero = |xs: &[f64]| (xs.iter().all(|&x| x == 0.0), xs.contains(&0.0));
            let b_better = match (zero(&out.a), zero(&out.b)) {
                ((false, false), (false, false)) => None,
                ((false, false), (true, _)) => {
                    out.none_on = Some("B");
                    Some(!metric.higher_is_better())
                }
                ((true, _), (false, false)) => {
                    out.none_on = Some("A");
                    Some(metric.higher_is_better())
                }
                _ => {
                    out.verdict = Verdict::NotJudged("some runs have no OK calls".into());
                    return Prepared::Decided(out);
                }
            };
            if let Some(better) = b_better {
                out.verdict = if better { Verdict::Improvement } else { Verdict::Regression };
                return Prepared::Decided(out);
            }
        }
        if let Some(why) = disturbed(metric, a, b) {
            out.verdict = Verdict::NotJudged(why);
            return Prepared::Decided(out);
        }
        let scale = |xs: &[f64]| if metric.relative() { xs.iter().map(|x| x.ln()).collect() } else { xs.to_vec() };
        let (sa, sb): (Vec<f64>, Vec<f64>) = (scale(&out.a), scale(&out.b));
        Prepared::Pending(Pending {
            a: sa,
            b: sb,
            floor_a: noise(metric, a, a, b),
            floor_b: noise(metric, b, a, b),
            comparison: out,
        })
    }

    /// The verdict of a tested metric at its Holm level.
    fn judge(mut self, shift: Option<MeanShift>, level: f64, p_adjusted: f64, min_effect: Option<f64>) -> Self {
        self.level = Some(level);
        self.p_adjusted = Some(p_adjusted);
        self.verdict = match &shift {
            None => Verdict::NotJudged("a value is not finite".into()),
            Some(s) if s.significant() && below(min_effect, self.metric, s) => Verdict::NoChange,
            Some(s) if s.significant() && (s.difference > 0.0) == self.metric.higher_is_better() => {
                Verdict::Improvement
            }
            Some(s) if s.significant() => Verdict::Regression,
            Some(_) => Verdict::NoChange,
        };
        self.shift = shift;
        if self.verdict == Verdict::NoChange && !self.shift.is_some_and(|s| s.significant()) {
            if let Some(r) = self.resolution().filter(|&r| r > self.matters) {
                self.verdict = Verdict::NotJudged(format!(
                    "the interval cannot rule out a change of {} (it resolves only {}): give more runs a side",
                    self.amount(self.matters),
                    self.amount(r)
                ));
            }
        }
        self
    }

    /// A latency verdict, when a side failed materially more ([`FailedMore`]): it stands when
    /// it calls that side slower, or when nothing was tested (a side without a value, a
    /// disturbed run); else it is not judged, and for that reason before an interval too wide
    /// (more runs would not make it judged).
    fn unless_failed_more(mut self, failed_more: Option<&FailedMore>) -> Self {
        let Some(f) = failed_more.filter(|_| LATENCY_METRICS.contains(&self.metric)) else { return self };
        let stands = match self.verdict {
            Verdict::Regression => f.side == "B",
            Verdict::Improvement => f.side == "A",
            Verdict::NoChange => false,
            Verdict::NotJudged(_) => self.shift.is_none(),
        };
        if !stands {
            self.verdict = Verdict::NotJudged(f.why());
        }
        self
    }

    pub fn is_regression(&self) -> bool {
        self.verdict == Verdict::Regression
    }

    /// A change of this metric as the reader reads it: "10%" or "1.00 pp".
    pub(crate) fn amount(&self, x: f64) -> String {
        if self.metric.relative() && x > 10.0 {
            // Beyond ±1000 % the digits say nothing more than "unbounded".
            "±1000%+".into()
        } else if self.metric.relative() {
            format!("±{}%", percent(x))
        } else {
            format!("±{:.2} pp", x * 100.0)
        }
    }

    /// B / A of a relative metric, with its interval.
    pub fn ratio(&self) -> Option<(f64, f64, f64)> {
        let s = self.shift.filter(|_| self.metric.relative())?;
        Some((s.difference.exp(), s.ci.low.exp(), s.ci.high.exp()))
    }

    /// Each side's summary: the geometric mean of its runs (relative metrics), else the mean.
    pub fn sides(&self) -> Option<(f64, f64)> {
        match (self.shift, self.metric.relative()) {
            (Some(s), true) => Some((s.a_mean.exp(), s.b_mean.exp())),
            (Some(s), false) => Some((s.a_mean, s.b_mean)),
            (None, _) if !self.a.is_empty() && !self.b.is_empty() => {
                let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
                Some((mean(&self.a), mean(&self.b)))
            }
            _ => None,
        }
    }

    /// The smallest change the test could have judged: the larger distance from no change to
    /// an end of the interval, as a share of A's value (relative metrics: an interval of B / A
    /// of [0.17, 7.36] resolves 636 %) or in the metric's unit.
    pub fn resolution(&self) -> Option<f64> {
        let s = self.shift?;
        let half = (s.ci.high - s.ci.low) / 2.0;
        Some(if self.metric.relative() { half.exp() - 1.0 } else { half })
    }

    /// "B is 3.5% slower: regression", "no change", "not judged: why".
    pub fn verdict_text(&self) -> String {
        match &self.verdict {
            Verdict::Regression | Verdict::Improvement => format!("{}: {}", self.change_text(), self.verdict.key()),
            Verdict::NotJudged(why) => format!("not judged: {why}"),
            Verdict::NoChange => match self.shift.filter(|s| s.significant()) {
                Some(_) => {
                    format!("no change ({}, under --min-effect {})", self.change_text(), self.amount(self.matters))
                }
                None => "no change".into(),
            },
        }
    }

    /// "B is 3.5% slower", "B is higher by 0.50 pp", "B has no OK calls".
    pub fn change_text(&self) -> String {
        if let Some(side) = self.none_on {
            return format!("{side} has no OK calls");
        }
        let Some(s) = self.shift else { return String::new() };
        let b_higher = s.difference > 0.0;
        let word = match (self.metric, b_higher) {
            (Metric::P50 | Metric::P99, true) => "slower",
            (Metric::P50 | Metric::P99, false) => "faster",
            (_, true) => "higher",
            (_, false) => "lower",
        };
        match self.ratio() {
            Some((r, _, _)) => format!("B is {}% {word}", percent((r - 1.0).abs())),
            None => format!("B is {word} by {:.2} pp", s.difference.abs() * 100.0),
        }
    }
}

/// Each side's noise per run for `metric`, the least `mean_shift` takes beside the spread it
/// measures between the runs: the stated floor and, with fewer than [`MIN_RUNS_FOR_SPREAD`]
/// runs, the spread within them (with its degrees of freedom when that won); for the error
/// rate the binomial noise at the rate of both sides pooled.
fn noise(metric: Metric, runs: &[RunResult], a: &[RunResult], b: &[RunResult]) -> (f64, Option<f64>) {
    if !metric.relative() {
        // A side at 0 % still has noise: the rate of both sides pooled.
        let (failed, calls) = a.iter().chain(b).fold((0u64, 0u64), |(f, c), r| (f + r.failed, c + r.calls));
        let p = if calls == 0 { 0.0 } else { failed as f64 / calls as f64 };
        let least_calls = runs.iter().map(|r| r.calls).min().unwrap_or(0).max(1) as f64;
        return (metric.noise_floor().max((p * (1.0 - p) / least_calls).sqrt()), None);
    }
    if runs.len() >= MIN_RUNS_FOR_SPREAD {
        // The spread between the runs is measured (`mean_shift`), and it holds whatever moved a
        // run's value, its intervals' swings included: the intervals' spread, a stand-in for
        // it with fewer runs, would count them again, a run's worth each (an interval's p50
        // swings more than a run's). Issue 39's busy machine: it widened `--runs 5`'s p50
        // intervals by 18 % in the logarithm (median of 40 tries; one A/A [0.28, 4.44] where
        // the runs' own spread gave [0.60, 2.10]). The floor and the runs' sampling error stay.
        let sampling = runs.iter().map(|r| r.sampling_error(metric).powi(2)).sum::<f64>() / runs.len() as f64;
        return (metric.noise_floor().max(sampling.sqrt()), None);
    }
    // The runs' typical spread (root mean square): one chaotic run of several must not set the
    // noise of all; its value is in the spread between runs anyway. A spread from a few
    // intervals is an estimate: its degrees of freedom go to the test.
    let (mut squares, mut df, mut estimated) = (0.0, 0.0, false);
    for r in runs {
        let within = metric.within_run(r).unwrap_or(Spread { sd: 0.0, effective_n: 1.0 });
        let sampling = r.sampling_error(metric);
        squares += within.sd.max(sampling).powi(2);
        df += within.effective_n - 1.0;
        estimated |= within.sd > sampling;
    }
    let within = (squares / runs.len().max(1) as f64).sqrt();
    match within > metric.noise_floor() && estimated {
        true => (within, Some(df)),
        false => (metric.noise_floor().max(within), None),
    }
}

/// Why `metric` is not judged for a disturbed or merged run, when a side has too few runs for
/// their spread to hold it.
fn disturbed(metric: Metric, a: &[RunResult], b: &[RunResult]) -> Option<String> {
    if a.len() >= MIN_RUNS_FOR_SPREAD && b.len() >= MIN_RUNS_FOR_SPREAD {
        return None;
    }
    let named: Vec<String> = a
        .iter()
        .chain(b)
        .flat_map(|r| r.disturbances.iter().filter(|d| d.touches.contains(&metric)).map(move |d| (r, d)))
        .map(|(r, d)| format!("{}: {}", r.label, d.why))
        .collect();
    (!named.is_empty()).then(|| {
        format!("{} (with {MIN_RUNS_FOR_SPREAD} runs or more a side their spread would hold it)", named.join("; "))
    })
}

/// Every metric asked for, the tested ones as one family under Holm's step-down procedure
/// (`stats::compare::holm`): the chance that any of them is called changed when none is stays
/// at most `alpha`. Each tested metric's interval is at the level Holm tested it at, so that
/// the interval and the verdict agree. When a side failed materially more of its calls
/// ([`FailedMore`]), a latency verdict stands only when it calls that side slower.
pub fn family(
    metrics: &[Metric],
    a: &[RunResult],
    b: &[RunResult],
    alpha: f64,
    min_effect: Option<f64>,
) -> Vec<MetricComparison> {
    let latency = metrics.iter().any(|m| LATENCY_METRICS.contains(m));
    let failed_more = if latency { FailedMore::of(a, b, alpha) } else { None };
    let tested = tested_family(metrics, a, b, alpha, min_effect);
    tested.into_iter().map(|m| m.unless_failed_more(failed_more.as_ref())).collect()
}

/// A side that failed materially more of its calls than the other: its runs' mean error rate
/// is higher by at least the error rate's change that matters ([`Metric::matters`], 1
/// percentage point), significantly or not. The latency compared is of OK calls, and a side
/// that failed more may have failed its slowest (a deadline fails exactly those): its p50 and
/// p99 then read lower than its calls took. So only its being slower is called (failing more
/// and slower is worse either way); faster or no change is not judged. Issue 39's session 3
/// saw B with `--deadline 1ms` fail 8-16 % of its calls and read "p99 improvement, B 85 %
/// faster". Significance is not asked: runs on a busy machine fail a spread share (a
/// deadline fails fast calls held up too: beside two busy loops, tests/compare_failed.rs's B
/// failed 18 % on average, B - A [-20, +57] pp), too spread for the error rate to differ
/// significantly while the OK calls' p99 may still differ steadily
/// (`a_side_that_failed_more_in_runs_too_spread_to_prove_it_is_not_called_faster` read "B is
/// 89% faster: improvement" for B failing 18 % against A's 0 %).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedMore {
    /// "A" or "B": the side that failed more.
    pub side: &'static str,
    /// Its failed share and the other side's (each the mean over its runs).
    pub share: f64,
    pub other_share: f64,
}

impl FailedMore {
    fn of(a: &[RunResult], b: &[RunResult], alpha: f64) -> Option<FailedMore> {
        let errors = tested_family(&[Metric::ErrorRate], a, b, alpha, None).remove(0);
        let s = errors.shift?;
        if s.difference.abs() < Metric::ErrorRate.matters(None) {
            return None;
        }
        Some(match s.difference > 0.0 {
            true => FailedMore { side: "B", share: s.b_mean, other_share: s.a_mean },
            false => FailedMore { side: "A", share: s.a_mean, other_share: s.b_mean },
        })
    }

    /// Why a latency is not judged.
    pub fn why(&self) -> String {
        let other = if self.side == "A" { "B" } else { "A" };
        format!(
            "{side} failed {}% of its calls against {other}'s {}%: its OK calls may leave its slowest out, so only \
             {side} slower would be called",
            percent(self.share),
            percent(self.other_share),
            side = self.side,
        )
    }
}

/// [`family`] without the [`FailedMore`] rule.
fn tested_family(
    metrics: &[Metric],
    a: &[RunResult],
    b: &[RunResult],
    alpha: f64,
    min_effect: Option<f64>,
) -> Vec<MetricComparison> {
    let prepared: Vec<Prepared> = metrics.iter().map(|&m| MetricComparison::prepare(m, a, b, min_effect)).collect();
    let p_values: Vec<f64> = prepared
        .iter()
        .filter_map(|p| match p {
            Prepared::Pending(p) => Some(p.shift(alpha).map_or(1.0, |s| s.p_value)),
            Prepared::Decided(_) => None,
        })
        .collect();
    let holm = crate::stats::compare::holm(&p_values, alpha);
    let mut tested = holm.into_iter();
    prepared
        .into_iter()
        .map(|p| match p {
            Prepared::Decided(done) => done,
            Prepared::Pending(pending) => {
                let (level, p_adjusted) = tested.next().expect("one Holm step per tested metric");
                let shift = pending.shift(level);
                pending.comparison.judge(shift, level, p_adjusted, min_effect)
            }
        })
        .collect()
}

/// Whether the change is smaller than `min_effect` of A's value. The error rate has a
/// relative change only when A's is above zero: otherwise any significant change counts.
fn below(min_effect: Option<f64>, metric: Metric, s: &MeanShift) -> bool {
    let Some(min) = min_effect else { return false };
    if metric.relative() {
        (s.difference.exp() - 1.0).abs() < min
    } else {
        s.a_mean > 0.0 && (s.difference / s.a_mean).abs() < min
    }
}

/// A whole comparison: both sides' runs, each metric.
#[derive(Debug, Clone)]
pub struct Report {
    pub a: Vec<RunResult>,
    pub b: Vec<RunResult>,
    pub alpha: f64,
    pub min_effect: Option<f64>,
    pub metrics: Vec<MetricComparison>,
    /// Why the comparison may mislead (different methods, the same run twice, ...).
    pub warnings: Vec<String>,
    /// How the comparison was made, where a reader could assume otherwise.
    pub notes: Vec<String>,
}

impl Report {
    pub fn of(a: Vec<RunResult>, b: Vec<RunResult>, settings: &Settings) -> Report {
        let metrics = family(&settings.metrics, &a, &b, settings.alpha, settings.min_effect);
        let (warnings, notes) = caveats(&a, &b);
        Report { a, b, alpha: settings.alpha, min_effect: settings.min_effect, metrics, warnings, notes }
    }

    pub fn regressions(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| m.is_regression())
    }

    pub fn not_judged(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| matches!(m.verdict, Verdict::NotJudged(_)))
    }

    /// The metrics that were tested (Holm's family).
    pub fn tested(&self) -> impl Iterator<Item = &MetricComparison> {
        self.metrics.iter().filter(|m| m.level.is_some())
    }

    /// How the family was tested, said once.
    pub fn family_text(&self) -> String {
        let names: Vec<&str> = self.tested().map(|m| m.metric.label()).collect();
        match names.len() {
            0 => "No metric was tested.".into(),
            1 => format!("{} tested alone at alpha {}.", names[0], self.alpha),
            n => format!(
                "Holm-Bonferroni over the {n} metrics tested ({}): the chance that any of them is called changed \
                 when none is stays at most alpha {}; each is tested, and its interval drawn, at its Holm level.",
                names.join(", "),
                self.alpha
            ),
        }
    }

    /// What `compare --runs` made, and what its N runs a side resolve.
    pub fn interleaved_text(&self, i: &crate::app::interleave::Interleave) -> String {
        let resolved: Vec<String> = self
            .metrics
            .iter()
            .filter_map(|m| m.resolution().map(|r| format!("{} {}", m.metric.label(), m.amount(r))))
            .collect();
        format!(
            "compare --runs {n}: A and B ran alternately (A B B A ...), {n} runs each, every result kept in {}; \
             {n} runs a side resolve {} here",
            i.out.display(),
            if resolved.is_empty() { "nothing".to_string() } else { resolved.join(", ") },
            n = i.runs,
        )
    }

    /// What the runs can and cannot see, said once.
    pub fn runs_text(&self) -> String {
        let runs = |n: usize| if n == 1 { "1 run".to_string() } else { format!("{n} runs") };
        let mut s = format!("A: {}, B: {}.", runs(self.a.len()), runs(self.b.len()));
        if self.a.len() < 2 || self.b.len() < 2 {
            let _ = write!(
                s,
                " With one run on a side the noise between runs is not measured: a run is taken to vary by at least \
                 {} (throughput, p50) and {} (p99) from run to run, or by the spread of its own intervals when larger \
                 (docs/design.md, \"compare\"). Give 3 runs or more a side, interleaved (`compare --runs 5 TARGET_A \
                 TARGET_B -- RUN FLAGS` makes them), to measure it.",
                percent_sd(Metric::P50),
                percent_sd(Metric::P99),
            );
        } else {
            s += if self.a.len().min(self.b.len()) >= MIN_RUNS_FOR_SPREAD {
                " Each side's noise per run is the spread between its runs, at least the floor"
            } else {
                " Each side's noise per run is the largest of the spread between its runs, the spread within them and \
                 the floor"
            };
            s += " (docs/design.md, \"compare\"); interleave A's and B's runs so that a change of the machine over \
                  time is not taken for one of B.";
        }
        let matters: Vec<String> =
            self.metrics.iter().map(|m| format!("{} {}", m.metric.label(), m.amount(m.matters))).collect();
        let _ = write!(
            s,
            " \"no change\" means the interval rules out a change of {} or more; an interval too wide for that is \
             \"not judged\".",
            matters.join(", ")
        );
        s
    }
}

fn percent_sd(metric: Metric) -> String {
    // A standard deviation of a logarithm this small is the relative one.
    format!("{}%", percent(metric.noise_floor()))
}

/// Warnings (the comparison may mean nothing) and notes (how it was made).
fn caveats(a: &[RunResult], b: &[RunResult]) -> (Vec<String>, Vec<String>) {
    let (mut warnings, mut notes) = (Vec::new(), Vec::new());
    let all: Vec<&RunResult> = a.iter().chain(b).collect();
    for (what, key) in [("methods", 0), ("targets", 1)] {
        let field = |r: &RunResult| if key == 0 { r.call.clone() } else { r.target.clone() };
        let mut distinct: Vec<String> = all.iter().filter_map(|r| field(r)).collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() > 1 {
            warnings.push(format!(
                "the runs call different {what} ({}): their numbers may not be comparable",
                distinct.join(", ")
            ));
        }
    }
    for (i, x) in all.iter().enumerate() {
        for y in &all[i + 1..] {
            let same = match (&x.run_id, &y.run_id) {
                (Some(p), Some(q)) => p == q,
                // Without run ids: the same start and the same calls are the same run.
                _ => x.started_at.is_some() && x.started_at == y.started_at && x.calls == y.calls,
            };
            if same {
                warnings.push(format!("{} and {} are the same run: it is compared with itself", x.label, y.label));
            }
            for (whole, part) in [(x, y), (y, x)] {
                if part.run_id.as_ref().is_some_and(|id| whole.source_run_ids.contains(id)) {
                    warnings.push(format!("{} is one of the runs merged into {}", part.label, whole.label));
                }
            }
        }
    }
    for r in &all {
        if r.partial {
            warnings.push(format!("{} ended early (partial): its numbers cover only part of the run", r.label));
        }
        if r.merged_from > 0 {
            notes.push(format!(
                "{} is merged from {} results: its whole-run numbers (the merged histograms and counts) are one \
                 run's, and its throughput and latency are judged only with {MIN_RUNS_FOR_SPREAD} runs or more a \
                 side, whose spread measures the noise between runs",
                r.label, r.merged_from
            ));
        }
        for d in r.disturbances.iter().filter(|d| d.client) {
            warnings.push(format!("{}: {}", r.label, d.why));
        }
    }
    (warnings, notes)
}

/// Reads every result, compares, prints; with `fail_on_regression`, a regression or a metric
/// that cannot be judged is exit 1 (after the report is printed).
pub fn run(settings: &Settings) -> anyhow::Result<ExitCode> {
    // Made before the runs --runs makes: a bad path costs no measuring.
    let destination = super::pages::Destination::open(settings.output.as_deref())?;
    let load = |refs: &[ResultRef]| refs.iter().map(ResultRef::load).collect::<anyhow::Result<Vec<_>>>();
    let (a, b, made) = match &settings.interleave {
        None => (load(&settings.a)?, load(&settings.b)?, None),
        Some(i) => {
            let made = i.make()?;
            let refs = |paths: &[PathBuf]| -> Vec<ResultRef> {
                paths.iter().map(|p| ResultRef { path: p.clone(), slice: settings.slice.clone() }).collect()
            };
            (load(&refs(&made.a))?, load(&refs(&made.b))?, Some(i))
        }
    };
    let mut report = Report::of(a, b, settings);
    if let Some(i) = made {
        let note = report.interleaved_text(i);
        report.notes.push(note);
    }
    for w in &report.warnings {
        eprintln!("rpcmeter: warning: {w}");
    }
    let text = match settings.format {
        Format::Json => serde_json::to_string_pretty(&to_json(&report)).unwrap_or_default() + "\n",
        Format::Html => super::pages::compare::render(&report),
        _ => table(&report),
    };
    destination.write(&text, "compare")?;
    if !settings.fail_on_regression {
        return Ok(ExitCode::SUCCESS);
    }
    let unjudged: Vec<String> = report
        .not_judged()
        .map(|m| match &m.verdict {
            Verdict::NotJudged(why) => format!("{} ({why})", m.metric.label()),
            _ => m.metric.label().to_string(),
        })
        .collect();
    let regressions: Vec<String> =
        report.regressions().map(|m| format!("{} ({})", m.metric.label(), m.change_text())).collect();
    match (regressions.is_empty(), unjudged.is_empty()) {
        (true, true) => Ok(ExitCode::SUCCESS),
        (false, _) => {
            if !unjudged.is_empty() {
                eprintln!("rpcmeter: --fail-on-regression: not judged: {}", unjudged.join("; "));
            }
            Err(run_failed(format!("B regressed against A: {}", regressions.join("; "))))
        }
        (true, false) => Err(run_failed(format!(
            "--fail-on-regression: not judged: {} (a metric that is not judged fails too)",
            unjudged.join("; ")
        ))),
    }
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

pub(crate) fn format_value(v: Value) -> String {
    match v {
        Value::Latency(d) => units::duration(d),
        Value::PerSecond(r) => format!("{r:.1}/s"),
        Value::Fraction(f) => format!("{:.2}%", f * 100.0),
    }
}

pub(crate) fn format_p(p: f64) -> String {
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

/// The change with its interval: "0.912 [0.871, 0.955]" or "+0.50 pp [+0.20, +0.80]".
pub(crate) fn change_cell(m: &MetricComparison) -> String {
    if let Some((r, low, high)) = m.ratio() {
        let bound = |x: f64| if x > 1000.0 { ">1000".to_string() } else { format!("{x:.3}") };
        return format!("{r:.3} [{low:.3}, {}]", bound(high));
    }
    match m.shift.filter(|_| !m.metric.relative()) {
        Some(s) => {
            // A rate difference lies within -100 and +100 pp, whatever the normal interval says.
            let pp = |x: f64| format!("{:+.2}", x.clamp(-1.0, 1.0) * 100.0);
            format!("{} pp [{}, {}]", pp(s.difference), pp(s.ci.low), pp(s.ci.high))
        }
        None => "-".into(),
    }
}

pub(crate) fn resolution_cell(m: &MetricComparison) -> String {
    m.resolution().map_or("-".into(), |r| m.amount(r))
}

/// The human report.
pub fn table(r: &Report) -> String {
    let mut o = String::new();
    for (side, runs) in [("A", &r.a), ("B", &r.b)] {
        for run in runs {
            let _ = writeln!(o, "{side}: {}", describe(run));
        }
    }
    let _ = writeln!(o, "\n{}\n{}", r.runs_text(), r.family_text());
    let _ = writeln!(
        o,
        "\nPer metric: each side's runs (geometric mean; OK calls only for throughput and latency), B / A with its \
         interval at the metric's Holm level (B - A for the error rate), the change it can resolve, Welch's t \
         (p adjusted by Holm), alpha {}{}:",
        r.alpha,
        r.min_effect.map_or(String::new(), |m| format!(", smallest change that matters {}%", percent(m)))
    );
    let _ = writeln!(
        o,
        "  {:<12} {:>14} {:>14}  {:<30} {:>10} {:>8}  verdict",
        "metric", "A", "B", "B / A [CI]", "resolves", "p (Holm)"
    );
    for m in &r.metrics {
        let sides = m.sides();
        let show = |x: Option<f64>| x.map_or("-".into(), |x| format_value(m.metric.value(x)));
        let _ = writeln!(
            o,
            "  {:<12} {:>14} {:>14}  {:<30} {:>10} {:>8}  {}",
            m.metric.label(),
            show(sides.map(|s| s.0)),
            show(sides.map(|s| s.1)),
            change_cell(m),
            resolution_cell(m),
            m.p_adjusted.map_or("-".into(), format_p),
            m.verdict_text()
        );
    }
    let mut notes: Vec<String> = r.notes.clone();
    notes.extend(r.warnings.iter().map(|w| format!("warning: {w}")));
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

fn json_run(r: &RunResult) -> JsonValue {
    json!({
        "source": r.label,
        "name": r.name,
        "started_at": r.started_at,
        "run_id": r.run_id,
        "merged_from": r.merged_from,
        "partial": r.partial,
        "calls": r.calls,
        "failed": r.failed,
        "throughput_rps": r.throughput_rps,
        "ok_rps": r.ok_rps,
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
            let sides = m.sides();
            let values = |xs: &[f64]| xs.iter().map(|&x| json_number(metric, x)).collect::<Vec<_>>();
            let s = m.shift;
            json!({
                "metric": metric.key(),
                "unit": match metric { Metric::Throughput => "calls/s", Metric::P50 | Metric::P99 => "us", Metric::ErrorRate => "fraction" },
                "a": {"runs": values(&m.a), "summary": sides.map(|s| json_number(metric, s.0))},
                "b": {"runs": values(&m.b), "summary": sides.map(|s| json_number(metric, s.1))},
                "ratio": m.ratio().map(|r| r.0),
                "ratio_ci": m.ratio().map(|r| json!([r.1, r.2])),
                "difference": s.filter(|_| !metric.relative()).map(|s| s.difference),
                "difference_ci": s.filter(|_| !metric.relative()).map(|s| json!([s.ci.low.max(-1.0), s.ci.high.min(1.0)])),
                "resolution": m.resolution(),
                "degrees_of_freedom": s.and_then(|s| s.degrees_of_freedom),
                "p_value": s.map(|s| s.p_value),
                "p_adjusted": m.p_adjusted,
                "level": m.level,
                "matters": m.matters,
                "verdict": m.verdict.key(),
                "why": match &m.verdict { Verdict::NotJudged(why) => Some(why.as_str()), _ => None },
                "summary": m.verdict_text(),
            })
        })
        .collect();
    json!({
        "a": r.a.iter().map(json_run).collect::<Vec<_>>(),
        "b": r.b.iter().map(json_run).collect::<Vec<_>>(),
        "alpha": r.alpha,
        "confidence": 1.0 - r.alpha,
        "min_effect": r.min_effect,
        "test": "Welch's t over run values (logarithms of throughput and latency), each side's noise at least its floor and, with fewer than 3 runs, the length-weighted spread of its runs' intervals; Holm-Bonferroni over the metrics tested",
        "noise_floor": Metric::ALL.iter().map(|m| (m.key().to_string(), JsonValue::from(m.noise_floor()))).collect::<serde_json::Map<_, _>>(),
        "runs": r.runs_text(),
        "metrics": metrics,
        "regressions": r.regressions().map(|m| m.metric.key()).collect::<Vec<_>>(),
        "not_judged": r.not_judged().map(|m| m.metric.key()).collect::<Vec<_>>(),
        "family": {
            "method": "Holm-Bonferroni",
            "metrics": r.tested().map(|m| m.metric.key()).collect::<Vec<_>>(),
            "alpha": r.alpha,
            "summary": r.family_text(),
        },
        "warnings": r.warnings,
        "notes": r.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_measured_interval_and_run_values() {
        // As `run` writes them: a warm-up row, full rows, one without calls, and a last row
        // that is not full length (here longer: it runs to the last answer).
        let row = |t: f64, length: f64, phase: &str, calls: u64, failed: u64| {
            json!({"t_s": t, "length_s": length, "phase": phase, "calls": calls, "ok": calls - failed,
                   "failed": failed, "rps": calls as f64 / length, "p50_us": 100.5, "p90_us": 150.0,
                   "p99_us": 1348.985, "max_us": 2000.0})
        };
        let text = json!({
            "meta": {"name": "x"},
            "requests": {"total": 1200, "ok": 1195, "failed": 5},
            "duration_s": 2.009172,
            "throughput_rps": 1000.0,
            "ok_rps": 995.0,
            "latency_us": {"p50": 100.0, "p99": 1000.0},
            "interval_s": 0.5,
            "intervals": [row(0.5, 0.5, "warmup", 10, 0), row(1.0, 0.5, "measured", 500, 5),
                          row(1.5, 0.5, "measured", 0, 0), row(2.009172, 0.509172, "measured", 700, 0)],
        })
        .to_string();
        let r = RunResult::parse(&text, "x.json".into()).unwrap();
        assert_eq!(r.measured_intervals().count(), 3);
        // 500 and 700 calls OK and an interval without one, where 995/s would have ended some:
        // a stall of at least its length in the latency spread, 0 calls/s in throughput's.
        assert!(r.stalled(Duration::from_millis(500)) && !r.stalled(Duration::from_millis(5)));
        let within = |m: Metric| m.within_run(&r).unwrap().sd;
        assert!(within(Metric::Throughput) > 0.5, "{}", within(Metric::Throughput));
        assert!(within(Metric::P50) > 2.0, "{}", within(Metric::P50));
        assert_eq!(Metric::Throughput.run_value(&r), Ok(995.0));
        assert_eq!(Metric::P99.run_value(&r), Ok(1_000_000.0));
        assert_eq!(Metric::ErrorRate.run_value(&r), Ok(5.0 / 1200.0));

        let bad = RunResult::parse("[]", "y.json".into()).unwrap_err().to_string();
        assert!(bad.starts_with("y.json: not a result of rpcmeter run"), "{bad}");
        assert_eq!(crate::error::exit_code(&RunResult::parse("{", "y.json".into()).unwrap_err()), 2);
    }

    #[test]
    fn an_error_rates_interval_stays_within_what_a_rate_can_be() {
        // 0 % against 100 % failed: Welch's interval ran past +100 pp ("+98.24, +101.76").
        let run = |failed: u64| {
            let text = json!({
                "requests": {"total": 1000, "ok": 1000 - failed, "failed": failed},
                "duration_s": 2.0, "throughput_rps": 500.0, "latency_us": {"p50": 100.0, "p99": 1000.0},
            });
            RunResult::parse(&text.to_string(), format!("{failed}.json")).unwrap()
        };
        let m = MetricComparison::of(Metric::ErrorRate, &[run(0)], &[run(1000)], 0.05, None);
        assert!(m.is_regression());
        let cell = change_cell(&m);
        assert!(cell.starts_with("+100.00 pp [") && cell.ends_with(", +100.00]"), "{cell}");
    }

    #[test]
    fn a_side_that_failed_more_in_runs_too_spread_to_prove_it_is_not_called_faster() {
        // As tests/compare_failed.rs saw beside two busy loops: B's 20 ms deadline failed
        // 4 %, 10 % and 40 % of its calls (a busy run fails fast calls too), too spread for
        // its error rate to differ significantly from A's 0 %, while its OK calls' p99 (the
        // fast ones) read a steady tenth of A's, which waited for the slow ones.
        let run = |failed: u64, p99_ms: f64| {
            let text = json!({
                "requests": {"total": 1000, "ok": 1000 - failed, "failed": failed},
                "duration_s": 2.0, "throughput_rps": 500.0,
                "latency_us": {"p50": 500.0, "p99": p99_ms * 1000.0},
                "ok_latency_us": {"p50": 500.0, "p99": p99_ms * 1000.0},
            });
            RunResult::parse(&text.to_string(), format!("{failed}.json")).unwrap()
        };
        let a = [run(0, 95.0), run(0, 100.0), run(0, 105.0)];
        let b = [run(40, 10.0), run(100, 10.5), run(400, 11.0)];
        let errors = MetricComparison::of(Metric::ErrorRate, &a, &b, 0.05, None);
        assert!(!errors.shift.unwrap().significant(), "{errors:?}");
        let p99 = family(&[Metric::P99, Metric::ErrorRate], &a, &b, 0.05, None).remove(0);
        assert!(p99.shift.unwrap().significant(), "{p99:?}");
        let Verdict::NotJudged(why) = &p99.verdict else { panic!("{}", p99.verdict_text()) };
        assert!(why.starts_with("B failed 18% of its calls against A's 0.0%"), "{why}");
        // Within a percentage point, as noise leaves two equal sides, latency is judged.
        let b = [run(0, 10.0), run(5, 10.5), run(0, 11.0)];
        let p99 = family(&[Metric::P99, Metric::ErrorRate], &a, &b, 0.05, None).remove(0);
        assert_eq!(p99.verdict, Verdict::Improvement, "{}", p99.verdict_text());
    }

    #[test]
    fn a_count_no_run_could_hold_is_refused_not_added() {
        // 2^64 - 1 calls overflowed the error rate's pooled sum (a panic in a debug build).
        let text = json!({
            "requests": {"total": u64::MAX, "ok": u64::MAX, "failed": 0},
            "duration_s": 2.0, "throughput_rps": 1000.0, "latency_us": {"p50": 100.0, "p99": 1000.0},
        })
        .to_string();
        let err = RunResult::parse(&text, "x.json".into()).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(err.to_string().contains("requests.total 18446744073709551615 is not a count"), "{err}");
    }
}
