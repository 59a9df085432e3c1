//! `lab threaded-vs-async`: docs/experiments.md, "Threaded vs async servers: test_service".
//! The Cpu and Db calls under a thread pool and an event loop: rpcmeter's own server (Rust
//! threads vs tokio tasks), a Python grpcio server (a thread pool vs grpc.aio; the GIL like
//! Ruby's GVL) and the write-up's own runtime, Ruby's grpc (its thread pool vs each worker's
//! loop under the async gem's Fiber scheduler, as the write-up patched it). Closed loop, the
//! write-up's sizes and backoff, the rmeter table counted right beside the write-up's retry
//! count, and the servers' memory over time (the write-up's open TODO).
use super::servers::{Runtime, Server};
use super::{line_plot, Lab};
use crate::record::resource::rss_bytes_of;
use crate::report::rmeter;
use crate::result::Run;
use crate::stats::Statistic;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;

pub const TITLE: &str = "Lab: threaded vs async servers (test_service)";

/// A server and its execution model, as the write-up configured them: 5 threads; async with
/// at most 5 calls per thread. Every server refuses what it cannot run at once (rpcmeter's
/// `--queue 0`; grpcio's limit is the same; Ruby's is grpc's own `RpcServer#available?`), so
/// the six differ only in their model and runtime.
struct Model {
    label: &'static str,
    runtime: Runtime,
    args: &'static [&'static str],
}

const MODELS: [Model; 6] = [
    Model {
        label: "rpcmeter threaded",
        runtime: Runtime::Rpcmeter,
        args: &["--model", "threaded", "--threads", "5", "--queue", "0"],
    },
    Model {
        label: "rpcmeter async",
        runtime: Runtime::Rpcmeter,
        args: &["--model", "async", "--threads", "5", "--per-thread", "5", "--queue", "0"],
    },
    Model { label: "python threaded", runtime: Runtime::Python, args: &["--model", "threaded", "--threads", "5"] },
    Model {
        label: "python async",
        runtime: Runtime::Python,
        args: &["--model", "async", "--threads", "5", "--per-thread", "5"],
    },
    Model { label: "ruby threaded", runtime: Runtime::Ruby, args: &["--model", "threaded", "--threads", "5"] },
    Model {
        label: "ruby async",
        runtime: Runtime::Ruby,
        args: &["--model", "async", "--threads", "5", "--per-thread", "5"],
    },
];

/// The write-up's plan: tasks x loop 20 (S..XL), retries with 1 s initial backoff, 3 retries.
struct Plan {
    tasks: &'static [u32],
    loops: u32,
    retry: Duration,
    /// fib(n) of a Cpu call: the write-up's 30, or less in quick mode (Python's fib(30) takes
    /// about a quarter of a second).
    fib: u32,
}

const MAX_RETRIES: u64 = 3;

fn plan(quick: bool) -> Plan {
    if quick {
        Plan { tasks: &[5, 40], loops: 2, retry: Duration::from_millis(100), fib: 24 }
    } else {
        Plan { tasks: &[5, 10, 20, 40], loops: 20, retry: Duration::from_secs(1), fib: 30 }
    }
}

/// One row of a table: which server, which size, what it measured.
struct Step {
    model: &'static str,
    method: &'static str,
    tasks: u32,
    summary: Run,
}

/// The write-up's retry count (docs/experiments.md, "Threaded vs async servers": every row
/// fits it): a call that ran out of retries had its K retries counted once, every other
/// rejected attempt twice. Meaningful only when every failed attempt was RESOURCE_EXHAUSTED.
fn write_up_retries(rejected_attempts: u64, retry_exhausted: u64) -> u64 {
    let exhausted_attempts = (MAX_RETRIES + 1) * retry_exhausted;
    2 * rejected_attempts.saturating_sub(exhausted_attempts) + MAX_RETRIES * retry_exhausted
}

pub fn run(mut lab: Lab) -> anyhow::Result<(PathBuf, PathBuf)> {
    let plan = plan(lab.options.quick);
    lab.doc.para(format!(
        "Closed loop: {} tasks x {} calls each, retries on RESOURCE_EXHAUSTED with {} initial backoff, at most {MAX_RETRIES}; \
         Cpu computes fib({}){}; Db inserts 10 rows, counts them and sleeps 250 ms on {}. Each server: 5 threads; async \
         at most 5 calls per thread. Every server answers RESOURCE_EXHAUSTED at once to a call it cannot start (no queue: rpcmeter serve --queue 0).",
        plan.tasks.iter().map(u32::to_string).collect::<Vec<_>>().join("/"),
        plan.loops,
        humantime::format_duration(plan.retry),
        plan.fib,
        if lab.options.quick { " (quick mode; the write-up's fib(30) and S..XL x 20 without --quick)" } else { "" },
        if lab.options.db.is_some() { "the database of --db" } else { "SQLite (no --db given; Postgres with --db postgres://...)" },
    ));
    let wanted: Vec<Runtime> = vec![Runtime::Rpcmeter, Runtime::Python, Runtime::Ruby];
    let ready = lab.servers(&wanted)?;
    let mut steps: Vec<Step> = Vec::new();
    let mut memory: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for model in MODELS.iter() {
        let Some((_, built)) = ready.iter().find(|(r, _)| *r == model.runtime) else { continue };
        if lab.interrupted() {
            break;
        }
        memory.push((model.label.to_string(), measure_model(&mut lab, model, built, &plan, &mut steps)?));
    }
    for method in ["Cpu", "Db"] {
        method_section(&mut lab, method, &steps);
    }
    memory_section(&mut lab, &memory);
    lab.doc.findings("What it shows", findings(&steps));
    lab.finish()
}

/// One server model through every Cpu and Db step of the plan, its steps appended to
/// `steps`; returns the server's RSS sampled over all of them.
fn measure_model(
    lab: &mut Lab,
    model: &'static Model,
    built: &super::servers::Built,
    plan: &Plan,
    steps: &mut Vec<Step>,
) -> anyhow::Result<Vec<(f64, f64)>> {
    let mut args: Vec<String> = model.args.iter().map(|s| s.to_string()).collect();
    if let Some(db) = &lab.options.db {
        args.extend(["--db".to_string(), db.clone()]);
    }
    let server = Server::start(model.runtime, built, model.label, &args)?;
    let sampler = RssSampler::start(server.pid());
    for method in ["Cpu", "Db"] {
        for &tasks in plan.tasks {
            if lab.interrupted() {
                break;
            }
            let data = if method == "Cpu" { format!(r#"{{"n":{}}}"#, plan.fib) } else { "{}".to_string() };
            let flags: Vec<String> = [
                "--call",
                &format!("rpcmeter.lab.v1.TestService/{method}"),
                "-d",
                &data,
                "-c",
                &tasks.to_string(),
                "--loop",
                &plan.loops.to_string(),
                "--max-retries",
                &MAX_RETRIES.to_string(),
                "--retry-ms",
                &plan.retry.as_millis().to_string(),
            ]
            .map(String::from)
            .to_vec();
            let label = format!("{}-{}-{}x{}", model.label.replace(' ', "-"), method.to_lowercase(), tasks, plan.loops);
            let Some(summary) = lab.measure(&label, &server, &flags)? else { break };
            steps.push(Step { model: model.label, method, tasks, summary });
        }
    }
    let memory = sampler.stop();
    drop(server);
    Ok(memory)
}

/// One method's rmeter table, counted right, and its throughput against tasks per server.
fn method_section(lab: &mut Lab, method: &str, steps: &[Step]) {
    lab.doc.heading(format!("{method}: the rmeter table, counted right"));
    let rows = steps.iter().filter(|s| s.method == method).map(row).collect();
    lab.doc.table(
        &[
            "server",
            "Tasks",
            "Loop",
            "Duration",
            "Successful",
            "RetryMax",
            "Retries (attempts - calls)",
            "Retries as the write-up counted",
            "gRPC ResExh (attempts)",
            "server rejected",
            "gRPC Other",
            "Throughput (ok/s)",
            "Avg/Max/Min ms (whole call)",
        ],
        rows,
    );
    let series: Vec<(String, Vec<(f64, f64)>)> = MODELS
        .iter()
        .map(|m| {
            let points = steps
                .iter()
                .filter(|s| s.method == method && s.model == m.label)
                .map(|s| (s.tasks as f64, s.summary.ok_calls_per_s()));
            (m.label.to_string(), points.collect::<Vec<_>>())
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    lab.doc.figure(
        line_plot(
            &format!("tput-{}", method.to_lowercase()),
            &format!("{method}: throughput vs tasks"),
            "tasks (closed-loop workers)",
            "ok calls/s",
            &series,
        ),
        format!("{method}: successful calls per second against the number of tasks, per server and model"),
    );
}

/// Each server's resident memory through its steps: start, peak and end, and over time.
fn memory_section(lab: &mut Lab, memory: &[(String, Vec<(f64, f64)>)]) {
    lab.doc.heading("Server memory over time (the write-up's TODO)");
    lab.doc.table(
        &["server", "RSS at start (MiB)", "max RSS (MiB)", "RSS at the end (MiB)"],
        memory
            .iter()
            .map(|(label, points)| {
                let mib = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
                let max = points.iter().map(|p| p.1).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
                vec![label.clone(), mib(points.first().map(|p| p.1)), mib(max), mib(points.last().map(|p| p.1))]
            })
            .collect(),
    );
    lab.doc.figure(
        line_plot("memory", "Server RSS over time", "time since the server started (s)", "RSS (MiB)", memory),
        "each server's resident memory, sampled every 100 ms through all its Cpu and Db steps",
    );
}

fn row(s: &Step) -> Vec<String> {
    let m = &s.summary;
    let count = |code: Code| m.attempt_statuses.get(crate::grpc::status::name(code)).copied().unwrap_or(0);
    let rejected = count(Code::ResourceExhausted);
    let all: u64 = m.attempt_statuses.values().sum();
    let other = all - count(Code::Ok) - rejected - count(Code::Unavailable);
    let clean = other == 0 && count(Code::Unavailable) == 0;
    let ms = |stat: Statistic| format!("{:.0}", m.latency_us.micros(stat).unwrap_or(0.0) / 1e3);
    let exhausted = m.requests.retry_exhausted.unwrap_or(0);
    vec![
        s.model.to_string(),
        s.tasks.to_string(),
        m.loop_per_worker.map_or("-".into(), |n| n.to_string()),
        format!("{:.2}s", m.duration_s),
        m.requests.ok.to_string(),
        exhausted.to_string(),
        m.requests.retries.unwrap_or(0).to_string(),
        if clean { write_up_retries(rejected, exhausted).to_string() } else { "–".into() },
        rejected.to_string(),
        m.server.as_ref().map_or("–".into(), |v| v.rejected.to_string()),
        other.to_string(),
        format!("{:.2}", m.ok_calls_per_s()),
        format!("{}/{}/{}", ms(Statistic::Mean), ms(Statistic::Max), ms(Statistic::Min)),
    ]
}

/// The comparisons a reader looks for, computed from the rows.
fn findings(steps: &[Step]) -> Vec<String> {
    let mut out = vec![format!(
        "Retries are attempts - calls, counted once; the write-up's count is shown beside it. The rmeter header line is \
         `{}` (run --format rmeter prints it).",
        rmeter::HEADER.lines().next().unwrap_or("")
    )];
    for method in ["Cpu", "Db"] {
        let best = |model: &str| {
            steps
                .iter()
                .filter(|s| s.method == method && s.model == model)
                .map(|s| s.summary.ok_calls_per_s())
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        };
        for family in ["rpcmeter", "python", "ruby"] {
            if let (Some(t), Some(a)) = (best(&format!("{family} threaded")), best(&format!("{family} async"))) {
                out.push(format!(
                    "{method}, {family}: best throughput threaded {t:.1} ok/s, async {a:.1} ok/s (async/threaded {:.2}x).",
                    a / t.max(f64::MIN_POSITIVE)
                ));
            }
        }
    }
    let disagree: Vec<String> = steps
        .iter()
        .filter_map(|s| {
            let server = s.summary.server.as_ref()?.rejected;
            let client = s
                .summary
                .attempt_statuses
                .get(crate::grpc::status::name(Code::ResourceExhausted))
                .copied()
                .unwrap_or(0);
            (server != client)
                .then(|| format!("{} {} {} tasks: client {client}, server {server}", s.model, s.method, s.tasks))
        })
        .collect();
    out.push(if disagree.is_empty() {
        "Every rejection the client counted, the server counted too (its Stats).".into()
    } else {
        format!("Client and server counts of rejections differ: {}", disagree.join("; "))
    });
    out
}

/// Samples a process's RSS every 100 ms on a thread of its own: (seconds since start, MiB).
struct RssSampler {
    stop: Arc<AtomicBool>,
    points: Arc<Mutex<Vec<(f64, f64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let points = Arc::new(Mutex::new(Vec::new()));
        let (s, p) = (stop.clone(), points.clone());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            // Bounded: one point per 100 ms for at most a day.
            while !s.load(Relaxed) && start.elapsed() < Duration::from_secs(86_400) {
                if let Some(rss) = rss_bytes_of(pid) {
                    if let Ok(mut v) = p.lock() {
                        v.push((start.elapsed().as_secs_f64(), rss as f64 / (1 << 20) as f64));
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        RssSampler { stop, points, thread: Some(thread) }
    }

    fn stop(mut self) -> Vec<(f64, f64)> {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.points.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_ups_retry_count_is_reproduced() {
        // docs/experiments.md, "Threaded vs async servers": threaded Db, 80 tasks: ResExh 2275,
        // RetryMax 515, Retries as printed 1975 (the true count is 2275 - 515 = 1760).
        assert_eq!(write_up_retries(2275, 515), 1975);
        // async Cpu, 40 tasks: ResExh 442, RetryMax 15, printed 809.
        assert_eq!(write_up_retries(442, 15), 809);
        assert_eq!(write_up_retries(0, 0), 0);
    }
}
