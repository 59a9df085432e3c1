//! The measurements behind docs/compare.md's defaults and issue 39's tables: verdicts of A/A
//! pairs and of known delay shifts against a test server of exact delay (`Behaviour::Delay`, a
//! thread's sleep: a busy wait would need a core for each of the 8 calls in flight), with
//! busy-loop CPU hogs beside the client. Minutes of runs, so `#[ignore]`d: run them by hand,
//! or `bench/compare_tables.sh` (which builds what it needs and prints the tables).
//!
//! `measure_tables` makes the runs, in rounds so that every set meets the same drift of the
//! machine: per round two single-run A/A pairs, one interleaved A/A try (`compare --runs`) and
//! one interleaved try per delay shift. Every result file is kept under `MEASURE_DIR`, so that
//! `judge_saved` can judge them again with another build's compare (RPCMETER_BIN) without
//! running anything. Environment (defaults): RPCMETER_BIN (this build's binary), MEASURE_DIR
//! (a new directory under the system's temporary one), HOGS (2), ROUNDS (10), SHIFT_ROUNDS
//! (ROUNDS: rounds that also try the shifts), SHIFTS (0.05,0.10,0.20), RUNS (5), RUN_FOR
//! (10s, compare --runs' default), CONCURRENCY (8).
use serde_json::Value;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;
mod common;
use common::{echo_proto, Behaviour, TestServer};

/// The server's delay: long beside the client's own overhead, short enough for many calls.
const DELAY: Duration = Duration::from_millis(20);

/// The binary measured: `RPCMETER_BIN` (a release build), else this build's.
fn bin() -> PathBuf {
    std::env::var_os("RPCMETER_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rpcmeter")), PathBuf::from)
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn shifts() -> Vec<f64> {
    std::env::var("SHIFTS")
        .map_or(vec![0.05, 0.10, 0.20], |s| s.split(',').map(|x| x.trim().parse().unwrap()).collect())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
}

/// Busy loops beside the client, stopped (by their ids) when dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs((0..n).map(|_| Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()).collect())
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every run's flags but the target.
fn run_flags() -> Vec<String> {
    let proto = echo_proto().display().to_string();
    let concurrency = env_or("CONCURRENCY", 8usize).to_string();
    let run_for = std::env::var("RUN_FOR").unwrap_or_else(|_| "10s".into());
    let flags = ["--plaintext", "--no-save", "--proto", &proto, "--call", "EchoService/echo"];
    let more = ["-d", r#"{"content":"hi"}"#, "-c", &concurrency, "-z", &run_for, "--no-server-stats"];
    flags.iter().chain(&more).map(|s| s.to_string()).collect()
}

/// One run against `addr`, its result written to `path`.
fn one_run(addr: &str, path: &Path) {
    let out = Command::new(bin()).arg("run").args(run_flags()).args(["--quiet", "--format", "json", addr]).output();
    let out = out.unwrap();
    assert!(!out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(path, out.stdout).unwrap();
}

/// `compare --runs N A B -- FLAGS`, its files kept in `dir` (a1.json, b1.json, ...).
fn interleaved(a: &str, b: &str, dir: &Path) {
    let runs = env_or("RUNS", 5usize).to_string();
    let mut args: Vec<OsString> = vec!["compare".into(), "--runs".into(), runs.into(), "--out".into(), dir.into()];
    args.extend([a.into(), b.into(), "--".into()]);
    args.extend(run_flags().into_iter().map(Into::into));
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(dir.join("a1.json").exists(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[ignore]
fn measure_tables() {
    let dir = std::env::var_os("MEASURE_DIR")
        .map_or_else(|| std::env::temp_dir().join(format!("compare-measure-{}", std::process::id())), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    let rounds = env_or("ROUNDS", 10usize);
    let shift_rounds = env_or("SHIFT_ROUNDS", rounds);
    let base = TestServer::start(Behaviour::Delay(DELAY));
    let shifted: Vec<(f64, TestServer)> =
        shifts().into_iter().map(|s| (s, TestServer::start(Behaviour::Delay(DELAY.mul_f64(1.0 + s))))).collect();
    let _hogs = Hogs::start(env_or("HOGS", 2usize));
    let a = base.addr.to_string();
    let mut log = format!("hogs {} flags {:?}\n", env_or("HOGS", 2usize), run_flags());
    for round in 0..rounds {
        for pair in [2 * round, 2 * round + 1] {
            let pair_dir = dir.join(format!("single/{pair}"));
            std::fs::create_dir_all(&pair_dir).unwrap();
            one_run(&a, &pair_dir.join("a1.json"));
            one_run(&a, &pair_dir.join("b1.json"));
        }
        interleaved(&a, &a, &dir.join(format!("shift0/{round}")));
        for (shift, server) in shifted.iter().filter(|_| round < shift_rounds) {
            interleaved(&a, &server.addr.to_string(), &dir.join(format!("shift{shift}/{round}")));
        }
        writeln!(log, "round {round} load {}", load_average()).unwrap();
        std::fs::write(dir.join("log.txt"), &log).unwrap();
        eprintln!("round {round} done, load {}", load_average());
    }
    eprintln!("{}", tables(&dir));
}

/// The tables again from the files `measure_tables` kept in `MEASURE_DIR`, judged by
/// RPCMETER_BIN's compare.
#[test]
#[ignore]
fn judge_saved() {
    let dir = PathBuf::from(std::env::var_os("MEASURE_DIR").expect("MEASURE_DIR: the directory measure_tables kept"));
    println!("{}", tables(&dir));
}

/// One comparison's verdict per metric ("not judged" with why: disturbed, too wide), p50's
/// B / A interval, A's p50 (µs), and each metric's spread between runs (the standard deviation
/// of the logarithm of its runs' values, of both sides pooled).
struct Judged {
    verdicts: Vec<(String, String)>,
    p50_ci: Option<(f64, f64)>,
    a_p50_us: Option<f64>,
    spread: Vec<(String, f64)>,
}

impl Judged {
    fn called(&self) -> bool {
        self.verdicts.iter().any(|(_, v)| v == "regression" || v == "improvement")
    }

    fn verdict(&self, metric: &str) -> &str {
        self.verdicts.iter().find(|(m, _)| m == metric).map_or("", |(_, v)| v)
    }
}

/// compare's JSON verdicts of the runs in `dir` (a1.json ... against b1.json ...).
fn judge(dir: &Path) -> Judged {
    let side = |x: &str| {
        let mut files: Vec<PathBuf> =
            (1..).map(|i| dir.join(format!("{x}{i}.json"))).take_while(|p| p.exists()).collect();
        files.sort();
        files
    };
    let mut args: Vec<OsString> = vec!["compare".into(), "--format".into(), "json".into()];
    args.extend(side("a").into_iter().map(Into::into));
    args.push("--".into());
    args.extend(side("b").into_iter().map(Into::into));
    let out = Command::new(bin()).args(args).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: {e}: {}", dir.display(), String::from_utf8_lossy(&out.stderr)));
    let metrics = report["metrics"].as_array().unwrap();
    let p50 = metrics.iter().find(|m| m["metric"] == "p50");
    let p50_ci = p50.and_then(|m| {
        let ci = m["ratio_ci"].as_array()?;
        Some((ci[0].as_f64()?, ci[1].as_f64()?))
    });
    let verdicts = metrics.iter().map(|m| (m["metric"].as_str().unwrap().to_string(), verdict(m)));
    let spread = metrics.iter().filter(|m| m["metric"] != "error_rate").filter_map(|m| {
        let sd = pooled_log_sd(&[&m["a"]["runs"], &m["b"]["runs"]])?;
        Some((m["metric"].as_str().unwrap().to_string(), sd))
    });
    Judged {
        verdicts: verdicts.collect(),
        p50_ci,
        a_p50_us: p50.and_then(|m| m["a"]["summary"].as_f64()),
        spread: spread.collect(),
    }
}

/// A metric's verdict, "not judged" with the kind of why.
fn verdict(m: &Value) -> String {
    let v = m["verdict"].as_str().unwrap();
    let why = m["why"].as_str().unwrap_or("");
    match v {
        "not judged" if why.contains("cannot rule out") => "not judged (too wide)".into(),
        "not judged" if why.contains("merged from") => "not judged (merged)".into(),
        "not judged" => "not judged (disturbed)".into(),
        _ => v.into(),
    }
}

/// The standard deviation of the logarithms of each side's values about its own mean, pooled.
fn pooled_log_sd(sides: &[&Value]) -> Option<f64> {
    let (mut squares, mut df) = (0.0, 0.0);
    for side in sides {
        let logs: Vec<f64> =
            side.as_array()?.iter().filter_map(Value::as_f64).filter(|x| *x > 0.0).map(f64::ln).collect();
        if logs.len() < 2 {
            continue;
        }
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        squares += logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        df += logs.len() as f64 - 1.0;
    }
    (df > 0.0).then(|| (squares / df).sqrt())
}

/// "p50 0.31 (0.12-0.52)": each metric's spread between runs, median (min-max) over tries.
fn spreads(judged: &[Judged]) -> String {
    let mut by_metric: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for j in judged {
        for (m, sd) in &j.spread {
            by_metric.entry(m).or_default().push(*sd);
        }
    }
    let text = |(m, sds): (&&str, &Vec<f64>)| {
        let mut sds = sds.clone();
        sds.sort_by(f64::total_cmp);
        format!("{m} {:.3} ({:.3}-{:.3})", sds[sds.len() / 2], sds[0], sds[sds.len() - 1])
    };
    by_metric.iter().map(text).collect::<Vec<_>>().join(", ")
}

/// The tries kept under `dir/set`, in order.
fn tries(dir: &Path, set: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join(set))
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("a1.json").exists() && p.join("b1.json").exists()))
        .into_iter()
        .flatten()
        .collect();
    found.sort_by_key(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u64>().ok()));
    found
}

/// "p50 not judged 9, no change 1; ..." over `judged`.
fn counts(judged: &[Judged]) -> String {
    let mut by_metric: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, usize>> = Default::default();
    for j in judged {
        for (m, v) in &j.verdicts {
            *by_metric.entry(m).or_default().entry(v).or_default() += 1;
        }
    }
    let metric = |(m, vs): (&&str, &std::collections::BTreeMap<&str, usize>)| {
        format!("{m}: {}", vs.iter().map(|(v, n)| format!("{v} {n}")).collect::<Vec<_>>().join(", "))
    };
    by_metric.iter().map(metric).collect::<Vec<_>>().join("; ")
}

/// The markdown tables of everything kept in `dir`.
fn tables(dir: &Path) -> String {
    let mut out = String::new();
    writeln!(out, "{}", std::fs::read_to_string(dir.join("log.txt")).unwrap_or_default()).unwrap();
    writeln!(
        out,
        "| what | tries | called regression/improvement | p50 found | p50 interval held the truth | verdicts |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|").unwrap();
    let single: Vec<Judged> = tries(dir, "single").iter().map(|t| judge(t)).collect();
    let called = single.iter().filter(|j| j.called()).count();
    writeln!(out, "| one run a side, A/A | {} | {called} | | | {} |", single.len(), counts(&single)).unwrap();
    let mut spread_lines = vec![];
    let mut sets = vec![0.0];
    sets.extend(shifts());
    for shift in sets {
        let judged: Vec<Judged> = tries(dir, &format!("shift{shift}")).iter().map(|t| judge(t)).collect();
        if judged.is_empty() {
            continue;
        }
        let called = judged.iter().filter(|j| j.called()).count();
        let found = judged.iter().filter(|j| j.verdict("p50") == "regression").count();
        // B's p50 is A's plus the added delay: the true B / A is 1 + shift x DELAY / A's p50.
        let held = judged
            .iter()
            .filter(|j| {
                let truth = j.a_p50_us.map(|a| 1.0 + shift * DELAY.as_micros() as f64 / a);
                matches!((j.p50_ci, truth), (Some((low, high)), Some(t)) if low <= t && t <= high)
            })
            .count();
        let ci: Vec<String> =
            judged.iter().filter_map(|j| j.p50_ci).map(|(l, h)| format!("[{l:.3}, {h:.3}]")).collect();
        let what = if shift == 0.0 { "A/A".to_string() } else { format!("B +{}%", shift * 100.0) };
        let runs = (1..).take_while(|i| tries(dir, &format!("shift{shift}"))[0].join(format!("a{i}.json")).exists());
        writeln!(
            out,
            "| `--runs {}`, {what} | {} | {called} | {found} | {held} | {}; p50 B / A {} |",
            runs.count(),
            judged.len(),
            counts(&judged),
            ci.join(" ")
        )
        .unwrap();
        spread_lines.push(format!("{what}: {}", spreads(&judged)));
    }
    writeln!(out, "\nSpread between runs (sd of the logarithm, median (min-max) over tries):").unwrap();
    for line in spread_lines {
        writeln!(out, "- {line}").unwrap();
    }
    out
}
