//! The measurements behind docs/compare.md's defaults and issue 39's tables: verdicts of A/A
//! pairs and of known shifts against a test server of exact delay, with two busy-loop CPU
//! hogs beside the client. Minutes of runs, so `#[ignore]`d: run them by hand,
//! `RPCMETER_BIN=target/release/rpcmeter cargo test --test compare_measure -- --ignored --nocapture`.
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;
mod common;
use common::{echo_proto, Behaviour, TestServer};

/// The binary measured: `RPCMETER_BIN` (a release build), else this build's.
fn bin() -> PathBuf {
    std::env::var_os("RPCMETER_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rpcmeter")), PathBuf::from)
}

/// Two busy loops on the 2 cores, stopped (by their ids) when dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn start() -> Hogs {
        Hogs((0..2).map(|_| Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()).collect())
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

const DELAY: Duration = Duration::from_millis(20);

fn run_flags(addr: &str) -> Vec<String> {
    let proto = echo_proto().display().to_string();
    [
        "--plaintext",
        "--quiet",
        "--no-save",
        "--proto",
        &proto,
        "--call",
        "EchoService/echo",
        "-d",
        r#"{"content":"hi"}"#,
        "-c",
        "8",
        "-z",
        "2s",
        "--warmup",
        "200ms",
        "--no-server-stats",
        addr,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn one_run(addr: &str, path: &Path) {
    let out = Command::new(bin()).arg("run").args(run_flags(addr)).args(["--format", "json"]).output().unwrap();
    assert!(!out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(path, out.stdout).unwrap();
}

/// Each metric's (key, verdict).
type Verdicts = Vec<(String, String)>;

/// Each metric's verdict, and p50's B / A interval.
fn verdicts(args: &[&std::ffi::OsStr]) -> (Verdicts, Option<(f64, f64)>) {
    // Flags before the arguments: after `--` they would be run flags.
    let out = Command::new(bin()).args(["compare", "--format", "json"]).args(args).output().unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let metrics = report["metrics"].as_array().unwrap();
    let p50 = metrics.iter().find(|m| m["metric"] == "p50").and_then(|m| {
        let ci = m["ratio_ci"].as_array()?;
        Some((ci[0].as_f64()?, ci[1].as_f64()?))
    });
    let v =
        metrics.iter().map(|m| (m["metric"].as_str().unwrap().to_string(), m["verdict"].as_str().unwrap().to_string()));
    (v.collect(), p50)
}

fn called(v: &[(String, String)]) -> bool {
    v.iter().any(|(_, x)| x == "regression" || x == "improvement")
}

fn tally(v: &[(String, String)], counts: &mut std::collections::BTreeMap<String, usize>) {
    for (m, x) in v {
        *counts.entry(format!("{m}: {x}")).or_default() += 1;
    }
}

#[test]
#[ignore]
fn single_run_a_a_pairs_on_a_busy_machine() {
    let pairs: usize = std::env::var("PAIRS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let server = TestServer::start(Behaviour::Delay(DELAY));
    let addr = server.addr.to_string();
    let dir = tempfile::tempdir().unwrap();
    let _hogs = Hogs::start();
    let (mut n_called, mut counts) = (0, Default::default());
    for i in 0..pairs {
        let (a, b) = (dir.path().join(format!("a{i}.json")), dir.path().join(format!("b{i}.json")));
        one_run(&addr, &a);
        one_run(&addr, &b);
        let (v, _) = verdicts(&[a.as_os_str(), b.as_os_str()]);
        n_called += called(&v) as usize;
        tally(&v, &mut counts);
        eprintln!("pair {i}: {v:?} load {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    }
    eprintln!("SINGLE A/A: {n_called} of {pairs} pairs called on some metric; {counts:?}");
}

#[test]
#[ignore]
fn interleaved_runs_on_a_busy_machine() {
    let tries: usize = std::env::var("TRIES").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let runs = std::env::var("RUNS").unwrap_or_else(|_| "5".into());
    let shifts: Vec<f64> =
        std::env::var("SHIFTS").map_or(vec![0.0, 0.10], |s| s.split(',').map(|x| x.parse().unwrap()).collect());
    let base = TestServer::start(Behaviour::Delay(DELAY));
    let dir = tempfile::tempdir().unwrap();
    let _hogs = Hogs::start();
    for shift in shifts {
        let other = TestServer::start(Behaviour::Delay(DELAY.mul_f64(1.0 + shift)));
        let (mut found, mut held, mut n_called, mut counts) = (0, 0, 0, Default::default());
        for t in 0..tries {
            let out = dir.path().join(format!("s{shift}-{t}"));
            let (a, b) = (base.addr.to_string(), other.addr.to_string());
            let mut args: Vec<std::ffi::OsString> =
                vec!["--runs".into(), runs.clone().into(), "--out".into(), out.into()];
            args.extend([a.into(), b.into(), "--".into()]);
            let flags = run_flags("x");
            // compare --runs adds --quiet and --format json itself.
            args.extend(flags[..flags.len() - 1].iter().filter(|f| *f != "--quiet").map(Into::into));
            let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let (v, p50) = verdicts(&refs);
            n_called += called(&v) as usize;
            found += v.iter().any(|(m, x)| m == "p50" && x == "regression") as usize;
            // The true p50 ratio is about (DELAY (1 + shift) + overhead) / (DELAY + overhead).
            held += p50.is_some_and(|(low, high)| low <= 1.0 + shift && 1.0 + shift * 0.9 <= high) as usize;
            tally(&v, &mut counts);
            eprintln!(
                "shift {shift} try {t}: {v:?} p50 {p50:?} load {}",
                std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
            );
        }
        eprintln!("INTERLEAVED shift {shift}: called {n_called} of {tries}, p50 regression {found}, interval held ~truth {held}; {counts:?}");
    }
}
