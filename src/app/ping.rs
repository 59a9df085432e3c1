//! `rpcmeter ping TARGET`: the ping-vs-gRPC experiment (docs/experiments.md, "Ping vs gRPC
//! latency") as one command. Every `--interval`, one network probe (`ping::Prober`: ICMP
//! echo, else TCP connect, saying which) and one gRPC call on one HTTP/2 connection (warmed
//! by one call that is not counted), in alternating order so neither always goes first.
//! Then per protocol the write-up's table (count, mean, std, min, quartiles, max), outliers
//! flagged by z-score passes and Tukey's fences (trimmed only with `--trim`, and then said),
//! and gRPC - ICMP: the difference of the medians with a 95% bootstrap interval and a
//! Mann-Whitney U test (`stats::compare`).
use super::run;
use crate::error::{internal, run_failed};
use crate::grpc::{CallOptions, Target};
use crate::grpc::{Connection, Connector, PreparedCall};
use crate::load::plan::Control;
use crate::ping::{Method, Outcome, Prober};
use crate::report::Format;
use crate::schema::{DataSource, RequestSource, SchemaSource};
use crate::stats::compare::{self, Bootstrap, MannWhitney, MedianShift, TukeyFences};
use crate::stats::describe::Description;
use crate::units;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// |z| above this is flagged, as in the write-up's trimming.
const Z_THRESHOLD: f64 = 3.0;

/// Which outlier flags trim the samples (never by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Trim {
    /// Iterated z-score passes, |z| > 3 (as the ping-vs-gRPC write-up).
    Z,
    /// Tukey's fences, 1.5 IQR beyond the quartiles.
    Tukey,
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the method is described (a .proto, a protoset, reflection).
    pub schema: SchemaSource,
    /// The method called beside the network probe.
    pub call: String,
    pub data: DataSource,
    pub target: Target,
    /// Each gRPC call's metadata, deadline (`timeout`) and message options.
    pub options: CallOptions,
    pub count: u64,
    pub interval: Duration,
    pub timeout: Duration,
    pub icmp: Method,
    pub trim: Option<Trim>,
    /// Table, JSON or the HTML page (`pages::ping`).
    pub format: Format,
    /// `-o FILE`: where the report goes (None: standard output).
    pub output: Option<std::path::PathBuf>,
}

/// What one protocol's probes gave: the answered round trips and why the others were lost.
#[derive(Debug, Default)]
pub struct Samples {
    pub answered: Vec<Duration>,
    pub lost: u64,
    /// The first reason a probe was lost, for the report.
    pub first_loss: Option<String>,
    /// The sample number (from 0) of each answer and of each loss, for the page's series.
    pub answered_at: Vec<u64>,
    pub lost_at: Vec<u64>,
}

impl Samples {
    fn add(&mut self, outcome: Outcome) {
        let at = self.answered.len() as u64 + self.lost;
        match outcome {
            Outcome::Answered(d) => {
                self.answered.push(d);
                self.answered_at.push(at);
            }
            Outcome::Lost(why) => {
                self.lost += 1;
                self.lost_at.push(at);
                self.first_loss.get_or_insert(why);
            }
        }
    }
}

/// Outlier flags of one sample (indices into `answered`), and the sample the report uses.
#[derive(Debug)]
pub struct Analysed {
    pub all: Option<Description>,
    pub z_passes: Vec<Vec<usize>>,
    pub fences: Option<TukeyFences>,
    pub tukey: Vec<usize>,
    /// The sample after `--trim` (all of it without), in ns.
    pub used_ns: Vec<f64>,
    /// Described after trimming, when trimmed.
    pub trimmed: Option<Description>,
}

fn analyse(samples: &Samples, trim: Option<Trim>) -> Analysed {
    let ns: Vec<f64> = samples.answered.iter().map(|d| d.as_nanos() as f64).collect();
    let z = compare::z_score_outliers(&ns, Z_THRESHOLD);
    let fences = TukeyFences::of(&ns);
    let tukey = fences.as_ref().map(|f| f.outliers(&ns)).unwrap_or_default();
    let dropped = match trim {
        Some(Trim::Z) => z.flagged(),
        Some(Trim::Tukey) => tukey.clone(),
        None => Vec::new(),
    };
    let used_ns = compare::without(&ns, &dropped);
    let trimmed = trim.and_then(|_| {
        let kept: Vec<Duration> = used_ns.iter().map(|&x| Duration::from_nanos(x as u64)).collect();
        Description::of(&kept)
    });
    Analysed { all: Description::of(&samples.answered), z_passes: z.passes, fences, tukey, used_ns, trimmed }
}

/// Everything `ping` measured and concluded.
#[derive(Debug)]
pub struct Report {
    pub target: String,
    pub call: String,
    pub method: Method,
    pub interval: Duration,
    pub asked: u64,
    pub interrupted: bool,
    pub trim: Option<Trim>,
    pub icmp: (Samples, Analysed),
    pub grpc: (Samples, Analysed),
    /// gRPC - network, on the samples used.
    pub shift: Option<MedianShift>,
    pub test: Option<MannWhitney>,
    pub bootstrap: Bootstrap,
}

pub fn run(settings: &Settings, control: &Control) -> anyhow::Result<ExitCode> {
    // Made before the samples: a bad path costs no measuring.
    let destination = super::pages::Destination::open(settings.output.as_deref())?;
    let method = run::resolve_method(&settings.schema, &settings.call, &settings.target, control)?;
    let requests = RequestSource::new(&method, &settings.data)?;
    let call = PreparedCall::new(&settings.options.spec(crate::load::stage::path(&method)?));
    let target = settings.target.clone();
    let address = crate::ping::resolve(&target.host, target.port)
        .map_err(|e| run_failed(format!("ping: cannot resolve {}: {e}", target.host)))?;
    let prober = Prober::open(settings.icmp, address, settings.timeout).map_err(|e| run_failed(format!("{e:#}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start a runtime: {e}")))?;
    let (icmp, grpc, interrupted, method_used) = runtime.block_on(async {
        let connector = Connector::new(&target)?;
        let conn = connector.connect().await?;
        let warm = conn.call(&call, requests.request(0, 0), false).await;
        if warm.status != tonic::Code::Ok {
            return Err(run_failed(format!(
                "ping: the warm-up call of {} failed: {} {}",
                method.full_name(),
                crate::grpc::status::name(warm.status),
                warm.message.unwrap_or_default()
            )));
        }
        let method_used = prober.method();
        let (icmp, grpc, interrupted) = sample(&conn, &call, &requests, prober, settings, control).await?;
        anyhow::Ok((icmp, grpc, interrupted, method_used))
    })?;
    drop(runtime);

    let (icmp_a, grpc_a) = (analyse(&icmp, settings.trim), analyse(&grpc, settings.trim));
    let bootstrap = Bootstrap::default();
    let report = Report {
        target: target.to_string(),
        call: method.full_name().to_string(),
        method: method_used,
        interval: settings.interval,
        asked: settings.count,
        interrupted,
        trim: settings.trim,
        shift: compare::median_shift(&icmp_a.used_ns, &grpc_a.used_ns, &bootstrap),
        test: compare::mann_whitney(&icmp_a.used_ns, &grpc_a.used_ns),
        icmp: (icmp, icmp_a),
        grpc: (grpc, grpc_a),
        bootstrap,
    };
    write_report(&report, settings.format, destination)
}

/// The series itself: `settings.count` network probes and gRPC calls, interleaved at
/// `settings.interval`; returns (network samples, gRPC samples, whether Ctrl-C cut it short).
async fn sample(
    conn: &Connection,
    call: &PreparedCall,
    requests: &RequestSource,
    prober: Prober,
    settings: &Settings,
    control: &Control,
) -> anyhow::Result<(Samples, Samples, bool)> {
    let (mut icmp, mut grpc) = (Samples::default(), Samples::default());
    let mut prober = Some(prober);
    let start = Instant::now();
    let mut interrupted = false;
    for i in 0..settings.count {
        // Sleep to the sample's time; Ctrl-C ends the series with what was measured.
        let due = start + settings.interval * i as u32;
        while Instant::now() < due && control.interrupts.load(Relaxed) == 0 {
            tokio::time::sleep(due.saturating_duration_since(Instant::now()).min(Duration::from_millis(50))).await;
        }
        if control.interrupts.load(Relaxed) > 0 {
            interrupted = true;
            break;
        }
        let grpc_call = async {
            let sent = Instant::now();
            let reply = conn.call(call, requests.request(i + 1, 0), false).await;
            match reply.status {
                tonic::Code::Ok => Outcome::Answered(sent.elapsed()),
                code => {
                    Outcome::Lost(format!("{} {}", crate::grpc::status::name(code), reply.message.unwrap_or_default()))
                }
            }
        };
        // The probe blocks on its socket: off the runtime, which drives the connection.
        let mut p = prober.take().expect("returned after each probe");
        let network = tokio::task::spawn_blocking(move || {
            let outcome = p.probe();
            (p, outcome)
        });
        let join = |r: Result<(Prober, Outcome), tokio::task::JoinError>| {
            r.map_err(|e| internal(format!("the network probe stopped: {e}")))
        };
        // Alternating order: neither protocol always runs right after the pause.
        if i % 2 == 0 {
            let (p, outcome) = join(network.await)?;
            icmp.add(outcome);
            prober = Some(p);
            grpc.add(grpc_call.await);
        } else {
            grpc.add(grpc_call.await);
            let (p, outcome) = join(network.await)?;
            icmp.add(outcome);
            prober = Some(p);
        }
    }
    Ok((icmp, grpc, interrupted))
}

/// Prints the report in its format; a side with no answer at all makes the run fail (exit 1).
fn write_report(report: &Report, format: Format, destination: super::pages::Destination) -> anyhow::Result<ExitCode> {
    let text = match format {
        Format::Json => serde_json::to_string_pretty(&to_json(report)).unwrap_or_default() + "\n",
        Format::Html => super::pages::ping::render(report),
        _ => table(report),
    };
    destination.write(&text, "ping")?;
    let mut problems = Vec::new();
    if report.icmp.0.answered.is_empty() {
        problems.push(format!("no {} probe was answered", report.method.name()));
    }
    if report.grpc.0.answered.is_empty() {
        problems.push("no gRPC call was answered".to_string());
    }
    match problems.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        false => Err(run_failed(problems.join("; "))),
    }
}

// ---- rendering: the only place with units ----

/// As `run`'s table writes durations (`units::duration`): `70.0 µs`, not `0.070 ms`.
pub fn ms(d: Duration) -> String {
    units::duration(d)
}

/// A difference in ns, signed, in `ms`'s units.
pub fn signed_ms(ns: f64) -> String {
    let size = Duration::try_from_secs_f64(ns.abs() / 1e9).unwrap_or(Duration::MAX);
    format!("{}{}", if ns < 0.0 { "-" } else { "+" }, ms(size))
}

pub(crate) fn trim_word(t: Trim) -> &'static str {
    match t {
        Trim::Z => "z-score",
        Trim::Tukey => "Tukey",
    }
}

/// What was done with the outliers flagged, said once for the table and the page.
pub(crate) fn outliers_text(r: &Report) -> String {
    match r.trim {
        Some(t) => format!(
            "Outliers flagged; the {} ones are left out of the trimmed table and of the difference",
            trim_word(t)
        ),
        None => "Outliers flagged, all kept; --trim z|tukey leaves them out".into(),
    }
}

/// The outlier flags of one protocol in words.
pub(crate) fn flags_text(name: &str, s: &Samples, a: &Analysed) -> String {
    let z: usize = a.z_passes.iter().map(Vec::len).sum();
    let passes: Vec<String> = a.z_passes.iter().map(|p| p.len().to_string()).collect();
    let worst = |idx: &[usize]| {
        idx.iter().map(|&i| s.answered[i]).max().map_or(String::new(), |d| format!(", largest {}", ms(d)))
    };
    format!(
        "{name}: z-score (|z| > {Z_THRESHOLD}) {z} in {} pass(es) [{}]{}; Tukey (1.5 IQR) {}{}",
        a.z_passes.len(),
        passes.join(", "),
        worst(&a.z_passes.concat()),
        a.tukey.len(),
        worst(&a.tukey)
    )
}

/// gRPC - network: the difference of the medians with its interval, the ratio, the test.
pub(crate) fn difference_text(r: &Report) -> String {
    let net = r.method.name();
    match (&r.shift, &r.test) {
        (Some(s), Some(t)) => format!(
            "gRPC - {net} (medians{}): {} [{:.0}% bootstrap CI {}, {}], gRPC / {net} {}; Mann-Whitney p {}",
            if r.trim.is_some() { ", trimmed" } else { "" },
            signed_ms(s.difference),
            r.bootstrap.level * 100.0,
            signed_ms(s.difference_ci.low),
            signed_ms(s.difference_ci.high),
            s.ratio.map_or("-".into(), |x| format!("{x:.2}")),
            if t.p_value < 1e-4 { "< 0.0001".to_string() } else { format!("= {:.4}", t.p_value) }
        ),
        _ => format!("gRPC - {net}: no difference without answers on both sides"),
    }
}

pub fn table(r: &Report) -> String {
    let mut o = String::new();
    let net = r.method.name();
    let _ = writeln!(
        o,
        "rpcmeter ping {}: {} of {} samples every {}{}\n  network: {} ({})\n  gRPC:    {} on one HTTP/2 connection, warmed by one uncounted call",
        r.target,
        r.icmp.0.answered.len() as u64 + r.icmp.0.lost,
        r.asked,
        humantime::format_duration(r.interval),
        if r.interrupted { " (interrupted)" } else { "" },
        net,
        r.method.describe(),
        r.call
    );
    let mut tables = vec![(None, &r.icmp.1.all, &r.grpc.1.all)];
    if let Some(t) = r.trim {
        tables.push((Some(t), &r.icmp.1.trimmed, &r.grpc.1.trimmed));
    }
    for (trimmed, a, b) in tables {
        let _ = writeln!(o);
        if let Some(t) = trimmed {
            let word = trim_word(t);
            let _ = writeln!(
                o,
                "Trimmed (--trim {}): the {word} outliers below are left out of this table and of the difference",
                word.to_lowercase()
            );
        }
        let _ = writeln!(o, "  {:<8} {:>14} {:>14}", "", net, "grpc");
        let count = |d: &Option<Description>| d.map_or(0, |d| d.count);
        let _ = writeln!(o, "  {:<8} {:>14} {:>14}", "count", count(a), count(b));
        let labels = a.or(*b).map(|d| d.rows().map(|(label, _)| label)).unwrap_or_default();
        for (i, label) in labels.iter().enumerate() {
            let cell = |d: &Option<Description>| d.map_or("-".to_string(), |d| ms(d.rows()[i].1));
            let _ = writeln!(o, "  {:<8} {:>14} {:>14}", label, cell(a), cell(b));
        }
    }
    let _ = writeln!(o, "  {:<8} {:>14} {:>14}", "lost", r.icmp.0.lost, r.grpc.0.lost);
    for (name, s) in [(net, &r.icmp.0), ("grpc", &r.grpc.0)] {
        if let Some(why) = &s.first_loss {
            let _ = writeln!(o, "  ({name}: first loss: {why})");
        }
    }
    let _ = writeln!(o, "\n{}", difference_text(r));
    let _ = writeln!(
        o,
        "{}:\n  {}\n  {}",
        outliers_text(r),
        flags_text(net, &r.icmp.0, &r.icmp.1),
        flags_text("grpc", &r.grpc.0, &r.grpc.1)
    );
    o
}

fn json_description(d: &Option<Description>) -> Value {
    match d {
        None => json!({"count": 0}),
        Some(d) => {
            let mut out = serde_json::Map::new();
            out.insert("count".into(), d.count.into());
            for (label, value) in [
                ("mean", d.mean),
                ("std", d.std),
                ("min", d.min),
                ("p25", d.q25),
                ("p50", d.q50),
                ("p75", d.q75),
                ("max", d.max),
            ] {
                out.insert(label.into(), units::micros(value).into());
            }
            out.into()
        }
    }
}

fn json_side(method: &str, s: &Samples, a: &Analysed) -> Value {
    let at_us = |idx: &[usize]| idx.iter().map(|&i| units::micros(s.answered[i])).collect::<Vec<_>>();
    json!({
        "method": method,
        "answered": s.answered.len(),
        "lost": s.lost,
        "first_loss": s.first_loss,
        "latency_us": json_description(&a.all),
        "trimmed_latency_us": a.trimmed.as_ref().map(|_| json_description(&a.trimmed)),
        "outliers": {
            "z_threshold": Z_THRESHOLD,
            "z_passes_us": a.z_passes.iter().map(|p| at_us(p)).collect::<Vec<_>>(),
            "tukey_fences_us": a.fences.as_ref().map(|f| json!([f.lower / 1e3, f.upper / 1e3])),
            "tukey_us": at_us(&a.tukey),
        },
        "samples_us": s.answered.iter().map(|&d| units::micros(d)).collect::<Vec<_>>(),
    })
}

pub fn to_json(r: &Report) -> Value {
    json!({
        "target": r.target,
        "call": r.call,
        "interval_s": units::secs(r.interval),
        "asked": r.asked,
        "interrupted": r.interrupted,
        "trim": r.trim.map(trim_word),
        "network": json_side(r.method.name(), &r.icmp.0, &r.icmp.1),
        "grpc": json_side("grpc", &r.grpc.0, &r.grpc.1),
        "difference": r.shift.map(|s| json!({
            "statistic": "median gRPC - median network",
            "difference_us": s.difference / 1e3,
            "difference_ci_us": [s.difference_ci.low / 1e3, s.difference_ci.high / 1e3],
            "ratio": s.ratio,
            "ratio_ci": s.ratio_ci.map(|ci| json!([ci.low, ci.high])),
            "confidence": r.bootstrap.level,
            "bootstrap_resamples": r.bootstrap.resamples,
            "mann_whitney_p": r.test.map(|t| t.p_value),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of a few samples a side, one of them an outlier, as `run` makes it.
    fn report(trim: Option<Trim>) -> Report {
        let samples = |ms: &[u64]| {
            let mut s = Samples::default();
            for &m in ms {
                s.add(Outcome::Answered(Duration::from_millis(m)));
            }
            s
        };
        let (icmp, grpc) = (samples(&[1, 1, 1, 2, 1, 1, 40]), samples(&[2, 2, 3, 2, 2, 2, 90]));
        let (icmp_a, grpc_a) = (analyse(&icmp, trim), analyse(&grpc, trim));
        let bootstrap = Bootstrap::default();
        Report {
            target: "127.0.0.1:1".into(),
            call: "EchoService.echo".into(),
            method: Method::Tcp,
            interval: Duration::from_millis(10),
            asked: 7,
            interrupted: false,
            trim,
            shift: compare::median_shift(&icmp_a.used_ns, &grpc_a.used_ns, &bootstrap),
            test: compare::mann_whitney(&icmp_a.used_ns, &grpc_a.used_ns),
            icmp: (icmp, icmp_a),
            grpc: (grpc, grpc_a),
            bootstrap,
        }
    }

    #[test]
    fn the_table_and_the_page_say_the_same_of_the_outliers() {
        for trim in [None, Some(Trim::Z), Some(Trim::Tukey)] {
            let r = report(trim);
            let (text, page) = (table(&r), super::super::pages::ping::render(&r));
            // The table's line above the flags, without its colon, is the page's first note.
            let line = text.lines().find(|l| l.starts_with("Outliers")).unwrap_or_else(|| panic!("{text}"));
            let sentence = line.strip_suffix(':').unwrap_or(line);
            assert!(page.contains(&format!("<h2>Outliers</h2><ul class=\"notices\"><li>{sentence}</li>")), "{page}");
        }
        assert!(outliers_text(&report(Some(Trim::Tukey))).contains("the Tukey ones are left out"));
    }
}
