//! `rpcmeter run` against the lab server: the client's counts must equal the server's own
//! (Stats), schema by server reflection, and the test_service experiment in miniature
//! (docs/experiments.md, "Threaded vs async servers").
use rpcmeter::lab::{LabConfig, LabServer, Model};
use std::process::Command;
use std::time::Duration;
#[path = "common/wait.rs"]
mod wait;

fn run(addr: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--format", "json", addr])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn lab(config: LabConfig) -> LabServer {
    LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..config }).unwrap()
}

fn method<'a>(
    stats: &'a rpcmeter::lab::proto::lab::StatsReply,
    path: &str,
) -> &'a rpcmeter::lab::proto::lab::MethodStats {
    stats.methods.iter().find(|m| m.method == path).unwrap_or_else(|| panic!("no {path} in {stats:?}"))
}

#[test]
fn client_ok_count_equals_the_servers_count() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // No --proto: the schema comes from the lab's server reflection.
    let r = run(
        &addr,
        &["--call", "EchoService.echo", "-d", r#"{"content":"{{.RequestNumber}}"}"#, "-c", "4", "-n", "1000"],
    );
    let cpu =
        run(&addr, &["--call", "rpcmeter.lab.v1.TestService/Cpu", "-d", r#"{"n":15}"#, "-c", "2", "--loop", "25"]);
    let stats = server.shutdown();
    assert_eq!(r["requests"]["ok"], 1000);
    assert_eq!(method(&stats, "/EchoService/echo").ok, 1000);
    assert_eq!(cpu["requests"]["ok"], 50);
    assert_eq!(method(&stats, "/rpcmeter.lab.v1.TestService/Cpu").ok, 50);
}

#[test]
fn test_service_rejections_seen_by_the_client_are_the_servers() {
    // One threaded worker, no queue, Db calls holding it 30 ms: four clients collide, the
    // server refuses with RESOURCE_EXHAUSTED and the client retries with backoff.
    let server = lab(LabConfig {
        model: Model::Threaded,
        threads: 1,
        queue: Some(0),
        db_sleep: Duration::from_millis(30),
        ..LabConfig::default()
    });
    let addr = server.local_addr().to_string();
    let r = run(
        &addr,
        &[
            "--call",
            "rpcmeter.lab.v1.TestService/Db",
            "-c",
            "4",
            "--loop",
            "5",
            "--max-retries",
            "3",
            "--retry-ms",
            "10",
        ],
    );
    let stats = server.shutdown();
    let db = method(&stats, "/rpcmeter.lab.v1.TestService/Db");
    let q = &r["requests"];
    let rejected_seen = r["attempt_statuses"]["RESOURCE_EXHAUSTED"].as_u64().unwrap_or(0);
    assert!(rejected_seen > 0, "no collision at all: {r}");
    // Every attempt reached the server once, and every refusal it counted is one the client saw.
    assert_eq!(q["attempts"].as_u64().unwrap(), db.received);
    assert_eq!(rejected_seen, db.rejected);
    assert_eq!(q["ok"].as_u64().unwrap(), db.ok);
    assert_eq!(q["total"], 20);
    assert_eq!(q["retries"].as_u64().unwrap(), db.received - 20);
    // Only echo's fast path spins: a Db run's server CPU has no spin in it.
    assert_eq!(r["server"]["echo_spin_us"], 0, "{r}");
}

#[test]
fn run_shows_the_servers_own_count_beside_its_own() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let echo = ["--call", "EchoService.echo", "-c", "4", "-n", "500"];
    let first = run(&addr, &echo);
    let s = &first["server"];
    assert_eq!(s["received"], 500, "{first}");
    assert_eq!(s["ok"], 500);
    assert!(s["throughput_rps"].as_f64().unwrap() > 0.0);
    assert!(s["rss_bytes"].as_u64().unwrap() > 0);
    // Its CPU includes echo's spin, and the result says how long (the default, 200 µs).
    assert_eq!(s["echo_spin_us"], 200, "{first}");
    let notices = first["notices"].to_string();
    assert!(!notices.contains("the server counted"), "{notices}");
    // A second run counts only its own calls (a difference, not a reset), and cannot claim
    // the server's first-to-last rate as its own.
    let second = run(&addr, &echo);
    assert_eq!(second["server"]["received"], 500);
    assert!(second["server"]["throughput_rps"].is_null());
    let stats = server.shutdown();
    assert_eq!(method(&stats, "/EchoService/echo").received, 1000, "Stats were not reset");
}

#[test]
fn gzip_compressed_requests_reach_the_lab() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let content = format!(r#"{{"content":"{}"}}"#, "a".repeat(4000));
    let r = run(&addr, &["--call", "EchoService.echo", "-d", &content, "-n", "50", "--compression", "gzip"]);
    assert_eq!(r["requests"]["ok"], 50, "{r}");
    let stats = server.shutdown();
    assert_eq!(method(&stats, "/EchoService/echo").ok, 50);
}

/// `sweep --clients`: every step is a real run against the lab, reported with its load, and
/// the knee is named (its rule is unit-tested on known series in app::sweep; a live lab on
/// this shared machine moves too much from step to step to pin where it falls).
#[test]
fn a_sweep_of_clients_reports_every_step_and_the_knee() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["sweep", "--clients", "1..4", "--json", "run", "--plaintext", "--quiet", "--no-save"])
        .args(["--call", "rpcmeter.lab.v1.TestService/Cpu", "-d", r#"{"n":22}"#, "-z", "1s", &addr])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sweep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = sweep["steps"].as_array().unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(labels, ["-c 1", "-c 2", "-c 3", "-c 4"]);
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["result"]["concurrency"], i + 1);
        assert!(s["result"]["throughput_rps"].as_f64().unwrap() > 0.0);
    }
    assert!(sweep.get("knee").is_some());
    let table = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["sweep", "--clients", "1..3", "run", "--plaintext", "--quiet", "--no-save"])
        .args(["--call", "rpcmeter.lab.v1.TestService/Cpu", "-d", r#"{"n":22}"#, "-z", "1s", &addr])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("Knee: "), "{text}");
    assert!(text.contains("-c 1") && text.contains("-c 3"), "{text}");
}

fn sweep_args(addr: &str, rates: &str, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["sweep", "--rates", rates, "run", "--plaintext", "--quiet", "--no-save"]
        .into_iter()
        .chain(["--call", "EchoService/echo", "--max-in-flight", "1"])
        .chain(more.iter().copied())
        .map(String::from)
        .collect();
    args.push(addr.to_string());
    args
}

/// The sweep sets each step's load on the run's flags: a run that sets one of its own is
/// refused in one line that says so, before any step runs; `--json` still works (see above)
/// but is no longer offered in the help, where `run ... --format json` is the way.
#[test]
fn a_sweep_refuses_a_load_in_the_run_flags_and_hides_its_json_alias() {
    for (load, flag) in [("--rates", "-c"), ("--clients", "--rps"), ("--preset", "--loop")] {
        let value = match load {
            "--rates" => "100",
            "--clients" => "1..2",
            _ => "S",
        };
        let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["sweep", load, value, "run", "--plaintext", "--call", "EchoService/echo", flag, "5"])
            .arg("127.0.0.1:1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{load} with {flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(flag) && err.contains("the sweep sets each step's load"), "{err}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(["sweep", "--help"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("--json"), "{}", String::from_utf8_lossy(&help.stdout));
}

/// A step that could not keep its rate shows its unsent calls; a step cut short by Ctrl-C is
/// marked partial, those after it "not run", and the sweep says it was interrupted.
#[test]
fn a_sweep_shows_unsent_calls_and_marks_an_interrupted_step() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // 50000 calls/s through one slot cannot be kept; then three 1 s steps, the second of
    // which (or the third, on a slow machine) the SIGINT cuts short: it is sent once the
    // first step is done and calls of the second have reached the server.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(sweep_args(&addr, "50000,100,100,100", &["-z", "1s"]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = wait::Lines::read(child.stderr.take().unwrap());
    stderr.wait_for_line("sweep: --rps 50000 done");
    let after_first = server.stats().received;
    wait::wait_for_count("calls of the second step", after_first + 1, || server.stats().received);
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    server.shutdown();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}{text}", stderr.rest());
    assert!(text.lines().next().unwrap().contains("unsent"), "{text}");
    let first = text.lines().find(|l| l.starts_with("--rps 50000")).unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(cells.last(), Some(&"whole"), "{text}");
    let unsent: u64 = cells[cells.len() - 3].parse().unwrap();
    assert!(unsent > 1000, "unsent {unsent}: {text}");
    assert!(text.contains("PARTIAL (interrupted; not in the knee)"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("--rps 100") && l.ends_with("not run")), "{text}");
    assert!(text.contains("Interrupted:"), "{text}");
}

/// `run`'s -o and --format json given to a sweep write the sweep's JSON to the file; the
/// per-run files are refused in one line.
#[test]
fn a_sweep_honours_o_and_format_json_and_refuses_export() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(sweep_args(&addr, "100,200", &["-z", "500ms", "--format", "json", "-o", file.to_str().unwrap()]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let sweep: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let steps = sweep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for s in steps {
        assert_eq!(s["partial"], false);
        assert!(s["result"]["requests"]["ok"].as_u64().unwrap() > 0);
    }
    assert_eq!(sweep["interrupted"], false);
    let export = dir.path().join("x.csv");
    let refused = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(sweep_args(&addr, "100", &["--export", &format!("csv={}", export.display())]))
        .output()
        .unwrap();
    server.shutdown();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--export"), "{err}");
}

/// A sweep whose every call failed exits 1 like `run`, after its table (which counts them).
#[test]
fn a_sweep_in_which_every_call_failed_exits_1() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["sweep", "--rates", "50,100", "run", "--plaintext", "--quiet", "--no-save"])
        .args(["--call", "rpcmeter.lab.v1.TestService/Cpu", "-d", r#"{"n":1000}"#, "-z", "300ms", &addr])
        .output()
        .unwrap();
    server.shutdown();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{err}{text}");
    assert!(err.contains("no call of any step succeeded"), "{err}");
    let row = text.lines().find(|l| l.starts_with("--rps 50 ")).unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2], cells[cells.len() - 4], "calls and failed differ: {row}");
}
