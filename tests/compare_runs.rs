//! `rpcmeter compare` on fresh runs against a test server of exactly known delay: A/A pairs
//! are never called changed, a 20 % slower server is found. A file of its own, so that
//! the other compare tests (in parallel threads of one binary) do not load the machine during
//! one run of a pair and not the other.
use std::path::{Path, PathBuf};
#[path = "common/compare_cli.rs"]
mod compare_cli;
use compare_cli::{compare, os, row};

mod common;
use common::{json_of, run_echo, Behaviour, TestServer};
use std::time::Duration;

/// One short closed-loop run, its result written to `dir/name.json`. Calls of 100 ms: on a
/// busy machine (2 cores, 8 builds) late wake-ups add 2 to 5 ms to each call, which moves
/// the p50 of a 1 ms server by tens of percent from run to run and of a 100 ms one by a few.
fn measure(server: &TestServer, dir: &Path, name: &str) -> PathBuf {
    let args =
        ["-c", "8", "-z", "2s", "--warmup", "200ms", "--interval", "500ms", "--no-calibrate", "--no-server-stats"];
    let result = json_of(run_echo(server.addr, &args));
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, result.to_string()).unwrap();
    path
}

#[test]
fn fresh_a_a_runs_differ_by_nothing_and_a_20_percent_slower_server_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Behaviour::Delay(Duration::from_millis(100)));
    for attempt in 0..3 {
        let a = measure(&server, dir.path(), &format!("a{attempt}"));
        let b = measure(&server, dir.path(), &format!("b{attempt}"));
        // Not p99: of some 150 calls it is the second slowest, one late wake-up.
        let metrics = os("--metric=throughput,p50,error_rate");
        let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), metrics]);
        eprintln!("{stdout}");
        assert_eq!(code, Some(0), "A/A try {attempt}: {stdout}{stderr}");
        // Never a verdict of change. Throughput of 8 calls of 100 ms swings by a batch of 8
        // from one 500 ms interval to the next, so one run a side may not resolve 10 % of it
        // ("not judged"), nor, on a busy machine, p50.
        for label in ["throughput", "p50 latency", "error rate"] {
            let line = row(&stdout, label);
            assert!(!line.contains("regression") && !line.contains("improvement"), "A/A try {attempt}:\n{stdout}");
        }
    }
    let slower = TestServer::start(Behaviour::Delay(Duration::from_millis(120)));
    let a = dir.path().join("a0.json");
    let b = measure(&slower, dir.path(), "slower");
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    eprintln!("{stdout}");
    // The gate fails: found, or (one run a side on a busy machine, whose intervals spread by
    // tens of percent) not judged; never "no change" nor faster.
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let line = row(&stdout, "p50 latency");
    assert!(line.contains("% slower: regression") || line.contains("not judged: "), "{stdout}");
}

#[test]
fn a_result_has_the_latency_of_its_ok_calls_and_compare_judges_on_it() {
    // Half the calls are rejected at once: every call's latency mixes them in, the OK calls'
    // does not, and compare judges latency on the OK calls' (it used to give up beyond 1 %).
    let server = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 2 });
    let dir = tempfile::tempdir().unwrap();
    let args = ["-c", "2", "-z", "1s", "--no-calibrate", "--no-server-stats"];
    let result = json_of(run_echo(server.addr, &args));
    let (ok, failed) = (result["requests"]["ok"].as_u64().unwrap(), result["requests"]["failed"].as_u64().unwrap());
    assert!(ok > 10 && failed > 10, "{}", result["requests"]);
    assert_eq!(result["ok_latency_us"]["count"].as_u64(), Some(ok), "{}", result["ok_latency_us"]);
    assert_eq!(result["latency_us"]["count"].as_u64(), Some(ok + failed));
    let histogram = result["histograms"]["ok_call_latency"].as_str().unwrap();
    assert_eq!(rpcmeter::record::shard::from_text(histogram).unwrap().len(), ok);

    let path = dir.path().join("half.json");
    std::fs::write(&path, result.to_string()).unwrap();
    let (code, stdout, stderr) = compare(&[path.as_os_str(), path.as_os_str(), os("--metric=p50")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // Judged on the OK calls' values (the same run twice: 1.000), never refused for the
    // failed ones; whether one short run resolves 10 % depends on the machine.
    let line = row(&stdout, "p50 latency");
    assert!(line.contains(" 1.000 [") && !line.contains("failed"), "{stdout}");

    // Merged, the OK calls' latency stays exact.
    let merged = std::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["merge", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(merged.status.success(), "{}", String::from_utf8_lossy(&merged.stderr));
    let merged: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(merged["ok_latency_us"]["count"].as_u64(), Some(ok), "{merged}");
}

#[test]
fn compare_runs_makes_interleaved_runs_keeps_them_and_judges_them() {
    let server = TestServer::start(Behaviour::Delay(Duration::from_millis(20)));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let target = server.addr.to_string();
    let proto = common::echo_proto();
    let mut args: Vec<&std::ffi::OsStr> = vec![os("--runs"), os("2"), os("--out"), out.as_os_str()];
    args.extend([os(&target), os(&target), os("--")]);
    args.extend([os("--plaintext"), os("--no-save"), os("--proto"), proto.as_os_str()]);
    args.extend([os("--call"), os("EchoService/echo"), os("-d"), os(r#"{"content":"hi"}"#)]);
    args.extend([os("-c"), os("4"), os("-z"), os("1s"), os("--no-calibrate"), os("--no-server-stats")]);
    let (code, stdout, stderr) = compare(&args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // A B B A, every result kept, and judged as 2 runs a side.
    let order: Vec<&str> = stderr.lines().filter_map(|l| l.split(" -> ").nth(1)).collect();
    let names: Vec<String> = order.iter().map(|p| Path::new(p).file_name().unwrap().to_string_lossy().into()).collect();
    assert_eq!(names, ["a1.json", "b1.json", "b2.json", "a2.json"], "{stderr}");
    for name in &names {
        let result: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join(name)).unwrap()).unwrap();
        assert!(result["requests"]["ok"].as_u64().unwrap() > 0, "{name}: {result}");
    }
    assert!(stdout.contains("A: 2 runs, B: 2 runs."), "{stdout}");
    assert!(stdout.contains("2 runs a side resolve throughput ±"), "{stdout}");
    for label in ["throughput", "p50 latency", "p99 latency", "error rate"] {
        let line = row(&stdout, label);
        assert!(!line.contains("regression") && !line.contains("improvement"), "{stdout}");
    }

    // A bad run flag: the run's own message, exit 2, nothing compared.
    let (code, stdout, stderr) = compare(&[
        os("--runs"),
        os("2"),
        os("--out"),
        out.as_os_str(),
        os(&target),
        os(&target),
        os("--"),
        os("--bogus"),
    ]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.lines().last().unwrap().contains("--bogus"), "{stderr}");
    // Targets, not result files: exactly two before `--`.
    let (code, _, stderr) = compare(&[os("--runs"), os("2"), os(&target), os("--"), os("-z"), os("1s")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("give the two targets"), "{stderr}");
}

#[test]
fn a_run_whose_client_was_stopped_for_a_second_is_never_judged_against_a_clean_one() {
    use rustix::process::{kill_process, Pid, Signal};
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let args = ["-c", "2", "-z", "4s", "--no-server-stats"];
    let clean = dir.path().join("clean.json");
    std::fs::write(&clean, json_of(run_echo(server.addr, &args)).to_string()).unwrap();

    // The same run, its client stopped for 1 s (SIGSTOP, then SIGCONT) once it is calling.
    let mut cmd = run_echo(server.addr, &args);
    cmd.args(["--format", "json"]).stdout(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let before = server.calls();
    common::wait::wait_for_count("the run's calls", before + 100, || server.calls());
    let pid = Pid::from_child(&child);
    kill_process(pid, Signal::STOP).unwrap();
    // The disturbance itself, not a wait for an event: the client stands still this long.
    std::thread::sleep(Duration::from_secs(1));
    kill_process(pid, Signal::CONT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stopped = dir.path().join("stopped.json");
    std::fs::write(&stopped, &out.stdout).unwrap();

    // Either side, never a verdict on what the freeze touches: not judged, naming the run.
    for (a, b) in [(&clean, &stopped), (&stopped, &clean)] {
        let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        let named = format!("{}: the client stood still for ", stopped.display());
        assert!(stderr.contains(&format!("warning: {named}")), "{stderr}");
        for label in ["throughput", "p50 latency", "p99 latency"] {
            let line = row(&stdout, label);
            assert!(line.contains("not judged: ") && line.contains(&named), "{label}: {stdout}");
        }
        assert!(stderr.contains("not judged: throughput"), "{stderr}");
    }
}
