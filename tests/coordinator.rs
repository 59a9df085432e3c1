//! Shards that start together: `--start-at` and `--coordinator` make the schedule's zero the
//! agreed instant itself, and the shards' calls keep the numbers they have in the whole run.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `run --shard I/N` against `addr` whose bodies carry `{{.RequestNumber}}`.
fn shard(addr: std::net::SocketAddr, index: u32, count: u32, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rpcmeter"));
    cmd.args(["run", "--plaintext", "--quiet", "--no-save", "--proto"])
        .arg(echo_proto())
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"{{.RequestNumber}}"}"#])
        .arg(addr.to_string())
        .args(["--shard", &format!("{index}/{count}")])
        .args(extra);
    cmd
}

/// For each shard (call number modulo `count`), the median of how far its calls arrived
/// after their place in the whole schedule (`rate` calls/s from the first arrival's zero).
fn median_offsets(server: &TestServer, count: u64, rate: f64) -> Vec<f64> {
    let calls: Vec<(Instant, u64)> = server.contents().into_iter().map(|(at, c)| (at, c.parse().unwrap())).collect();
    let zero = calls.iter().map(|(at, _)| *at).min().unwrap();
    (0..count)
        .map(|i| {
            let mut offsets: Vec<f64> = calls
                .iter()
                .filter(|(_, n)| n % count == i)
                .map(|(at, n)| at.duration_since(zero).as_secs_f64() - *n as f64 / rate)
                .collect();
            offsets.sort_by(f64::total_cmp);
            offsets[offsets.len() / 2] * 1e3
        })
        .collect()
}

fn spread(values: &[f64]) -> f64 {
    values.iter().cloned().fold(f64::MIN, f64::max) - values.iter().cloned().fold(f64::MAX, f64::min)
}

fn wait_all(children: Vec<Child>) -> Vec<std::process::Output> {
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

/// Every shard once numbered its calls from 0: 3 shards of 300 calls sent 100 distinct bodies
/// three times. Now call k of shard i is call k*3+i of the whole run: 300 distinct numbers.
/// And with a shared --start-at, the shards' schedules interleave: each shard's calls arrive
/// where the whole schedule puts them (one shard began 2.8-3.8 ms late, from its wake-up).
#[test]
fn start_at_shards_interleave_and_number_their_calls_as_the_whole_run() {
    let server = TestServer::start(Behaviour::Echo);
    let at = (SystemTime::now() + Duration::from_secs(2)).duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let at = format!("{at:.6}");
    let children = (0..3)
        .map(|i| {
            shard(server.addr, i, 3, &["--rps", "300", "-n", "600", "--start-at", &at, "--format", "json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for out in wait_all(children) {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let numbers: BTreeSet<u64> = server.contents().iter().map(|(_, c)| c.parse().unwrap()).collect();
    assert_eq!(server.calls(), 600);
    assert_eq!(numbers.len(), 600, "distinct request numbers");
    assert_eq!(numbers, (0..600).collect(), "the whole run's numbers");
    let offsets = median_offsets(&server, 3, 300.0);
    eprintln!("median offsets per shard (ms): {offsets:?}");
    assert!(spread(&offsets) < 1.5, "shards started apart: median offsets {offsets:?} ms");
}

/// Starts shard 0 of `count` with `--coordinator 127.0.0.1:0`; returns it and the address
/// it listens on (from its stderr), its stderr's reader kept for what it says after.
fn hub_shard(server: &TestServer, count: u32, extra: &[&str]) -> (Child, String, std::thread::JoinHandle<String>) {
    use std::io::BufRead;
    let mut child = shard(server.addr, 0, count, &["--coordinator", "127.0.0.1:0", "--format", "json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr =
        line.split("listening on ").nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or_else(|| panic!("{line}"));
    let addr = addr.to_string();
    let rest = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut all);
        all
    });
    (child, addr, rest)
}

/// Three shards joining 1 s apart start at one instant, set by shard 0 once all have joined:
/// each shard's calls arrive where the whole schedule puts them, and shard 0 prints the one
/// merged result, whose windows are one window.
#[test]
fn shards_joining_apart_start_together_and_shard_0_prints_the_merge() {
    let server = TestServer::start(Behaviour::Echo);
    let load = ["--rps", "300", "-n", "600"];
    let (first, addr, said) = hub_shard(&server, 3, &load);
    let mut others = Vec::new();
    for index in 1..3 {
        std::thread::sleep(Duration::from_secs(1));
        let mut extra = vec!["--coordinator", &addr, "--format", "json"];
        extra.extend(load);
        others
            .push(shard(server.addr, index, 3, &extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    }
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert!(out.status.success(), "{said}");
    for other in wait_all(others) {
        let stderr = String::from_utf8_lossy(&other.stderr);
        assert!(other.status.success(), "{stderr}");
        // One log holds the answer: the others print one line, no result.
        assert!(other.stdout.is_empty() && stderr.contains("result given to the coordinator"), "{stderr}");
    }
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 600, "{merged}");
    assert_eq!(merged["shards"].as_array().unwrap().len(), 3);
    assert_eq!(merged["partial"], false);
    assert_eq!(merged["windows"].as_array().unwrap().len(), 1, "{}", merged["windows"]);
    let numbers: BTreeSet<u64> = server.contents().iter().map(|(_, c)| c.parse().unwrap()).collect();
    assert_eq!(numbers.len(), 600, "distinct request numbers");
    let offsets = median_offsets(&server, 3, 300.0);
    eprintln!("median offsets per shard (ms): {offsets:?}");
    assert!(spread(&offsets) < 1.5, "shards started apart: median offsets {offsets:?} ms");
}

/// A shard killed mid-run: shard 0 prints what the others measured, marked partial and
/// naming the shard that is missing, and exits 1.
#[test]
fn a_shard_killed_mid_run_leaves_a_partial_merge_naming_it() {
    let server = TestServer::start(Behaviour::Echo);
    let load = ["--rps", "150", "-z", "3s"];
    let (first, addr, said) = hub_shard(&server, 3, &load);
    let mut others: Vec<Child> = (1..3)
        .map(|index| {
            let mut extra = vec!["--coordinator", addr.as_str(), "--format", "json"];
            extra.extend(load);
            shard(server.addr, index, 3, &extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(20);
    while server.calls() < 100 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    others[1].kill().unwrap();
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("shard 2/3 is missing"), "{said}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(merged["partial"], true);
    assert_eq!(merged["shards"].as_array().unwrap().len(), 2);
    assert_eq!(merged["missing_shards"][0]["shard"], "2/3", "{}", merged["missing_shards"]);
    assert!(merged["requests"]["total"].as_u64().unwrap() > 0);
    for other in wait_all(others) {
        let _ = other;
    }
}

/// `run --shards` goes through the same coordinator: its shards' calls carry the whole run's
/// numbers too.
#[test]
fn local_shards_number_their_calls_as_the_whole_run() {
    let server = TestServer::start(Behaviour::Echo);
    let mut cmd = shard(server.addr, 0, 1, &[]);
    // --shard 0/1 is the whole run; --shards replaces it.
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a != "--shard" && *a != "0/1").collect();
    cmd = Command::new(env!("CARGO_BIN_EXE_rpcmeter"));
    cmd.args(args).args(["--shards", "3", "--rps", "300", "-n", "300"]);
    let merged = json_of(cmd);
    assert_eq!(merged["requests"]["total"], 300);
    let numbers: BTreeSet<u64> = server.contents().iter().map(|(_, c)| c.parse().unwrap()).collect();
    assert_eq!(numbers, (0..300).collect());
}

/// A shard alone waits no longer than --join-timeout, whichever side it is on, and says who
/// is missing.
#[test]
fn a_shard_left_alone_gives_up_at_the_join_timeout() {
    let server = TestServer::start(Behaviour::Echo);
    let began = Instant::now();
    let (first, _addr, said) = hub_shard(&server, 2, &["-n", "10", "--join-timeout", "1s"]);
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("shard 1/2 did not join within --join-timeout 1s"), "{said}");
    // Nobody listens on port 9 of 127.0.0.1 (discard): the joiner retries, then gives up.
    let out = shard(server.addr, 1, 2, &["-n", "10", "--coordinator", "127.0.0.1:9", "--join-timeout", "1s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot join the coordinator at 127.0.0.1:9"), "{stderr}");
    assert!(began.elapsed() < Duration::from_secs(15), "{:?}", began.elapsed());
    assert_eq!(server.calls(), 0);
    // An address that is no HOST:PORT is bad input on every shard, at once.
    let out = shard(server.addr, 1, 2, &["-n", "10", "--coordinator", "pod-0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--coordinator pod-0: not HOST:PORT"));
}
