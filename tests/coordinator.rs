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
        .args(extra)
        .env("RPCMETER_COORDINATOR_SECRET", SECRET);
    cmd
}

/// The secret the tests' shards share.
const SECRET: &str = "a-test-secret-of-32-characters!!";

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
    wait::wait_for_count("100 calls of the shards", 100, || server.calls());
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

/// Shard 0 of 2 listening, its address, and its stderr's reader.
fn hub_of_two(server: &TestServer, load: &[&str]) -> (Child, String, std::thread::JoinHandle<String>) {
    hub_shard(server, 2, load)
}

/// Shard 1 of 2 joining `addr`.
fn joiner(server: &TestServer, addr: &str, load: &[&str]) -> Child {
    let mut extra = vec!["--coordinator", addr, "--format", "json"];
    extra.extend(load);
    shard(server.addr, 1, 2, &extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// A real result of this server, to dress a stranger's post in.
fn a_result(server: &TestServer) -> serde_json::Value {
    json_of(run_echo(server.addr, &["-n", "3"]))
}

/// A stranger at the coordinator's port speaking the protocol as it was before it was typed
/// (one JSON object a line, told apart by its keys): it says `hello`, answers pings, and once
/// told the start posts `post` as its result. Returns when it has had its first answer (a
/// ping, or the connection closed), and the thread that plays the rest.
fn old_protocol_stranger(addr: &str, hello: &str, post: Option<serde_json::Value>) -> std::thread::JoinHandle<()> {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(format!("{hello}\n").as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    std::thread::spawn(move || {
        let mut line = first;
        loop {
            let Ok(m) = serde_json::from_str::<serde_json::Value>(&line) else { return };
            if let Some(k) = m["ping"].as_u64() {
                let _ = stream.write_all(format!("{{\"pong\": {k}, \"at_ns\": {k}}}\n").as_bytes());
            }
            if m.get("start_at_ns").is_some() {
                if let Some(post) = &post {
                    let bytes = post.to_string();
                    let _ = stream.write_all(format!("{{\"result\": {}}}\n{bytes}", bytes.len()).as_bytes());
                }
            }
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
        }
    })
}

/// Issue 40: a stranger who connected first took shard 1's place and, after the start,
/// posted a result: shard 0 printed "Calls: 1000002999 ... 111110234.6 calls/s", exit 0, and
/// the real shard 1 was turned away. Now the stranger never proves itself: it gets no place,
/// its post is never read, and the merged result holds exactly the calls the server answered.
#[test]
fn a_stranger_who_connects_first_takes_no_place_and_posts_nothing() {
    let server = TestServer::start(Behaviour::Echo);
    let mut fake = a_result(&server);
    fake["requests"]["total"] = 1_000_000_000u64.into();
    fake["requests"]["ok"] = 1_000_000_000u64.into();
    fake["meta"]["run_id"] = "00000000-0000-4000-8000-000000000000".into();
    let before = server.calls();
    let load = ["--rps", "200", "-n", "200"];
    let (first, addr, said) = hub_of_two(&server, &load);
    let stranger = old_protocol_stranger(&addr, r#"{"hello": 1, "of": 2}"#, Some(fake));
    let real = joiner(&server, &addr, &load);
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert!(out.status.success(), "{said}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 200, "{}", merged["requests"]);
    assert_eq!(server.calls() - before, 200);
    let real = real.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&real.stderr);
    assert!(real.status.success() && stderr.contains("result given to the coordinator"), "{stderr}");
    stranger.join().unwrap();
}

/// Issue 40: one JSON line (`{"hello": 1, "of": 2, "failed": ...}`) aborted a run before it
/// started, and a connection could hold the hub's memory. A stranger's line, its garbage and
/// a claim with the wrong secret are each turned away; the run goes on and completes.
#[test]
fn strangers_cannot_abort_a_run_or_hold_more_than_a_few_kib() {
    use std::io::{Read, Write};
    let server = TestServer::start(Behaviour::Echo);
    let load = ["--rps", "200", "-n", "100"];
    let (first, addr, said) = hub_of_two(&server, &load);
    old_protocol_stranger(&addr, r#"{"hello": 1, "of": 2, "failed": "aborted by a stranger"}"#, None).join().unwrap();
    // 64 KiB of no message: the hub stops reading it after a few KiB and closes it.
    let mut garbage = std::net::TcpStream::connect(&addr).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let _ = garbage.write_all(&[b'x'; 64 << 10]);
    let mut byte = [0; 1];
    match garbage.read(&mut byte) {
        Ok(0) => {}
        Err(e) if e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("the hub still holds a connection that sent 64 KiB of no message: {other:?}"),
    }
    // A shard with the wrong secret is refused, told so, and changes nothing.
    let wrong = {
        let mut extra = vec!["--coordinator", addr.as_str(), "--format", "json", "--join-timeout", "5s"];
        extra.extend(load);
        shard(server.addr, 1, 2, &extra)
            .env("RPCMETER_COORDINATOR_SECRET", "another-secret-of-32-characters!")
            .output()
            .unwrap()
    };
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("does not hold this run's secret"), "{stderr}");
    let real = joiner(&server, &addr, &load);
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert!(out.status.success(), "{said}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 100);
    assert!(real.wait_with_output().unwrap().status.success());
}

/// One connection per shard index: a second shard 1 is refused, the first keeps its place.
#[test]
fn a_second_claim_of_one_shard_is_refused() {
    let server = TestServer::start(Behaviour::Echo);
    let load = ["--rps", "100", "-n", "50"];
    let (first, addr, said) = hub_of_two(&server, &load);
    let twins = [joiner(&server, &addr, &load), joiner(&server, &addr, &load)];
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert!(out.status.success(), "{said}");
    let outs: Vec<_> = twins.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let refused: Vec<String> =
        outs.iter().filter(|o| !o.status.success()).map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("a second claim is refused"), "{}", refused[0]);
    assert!(said.contains("refused a second shard 1/2"), "{said}");
}

/// Issue 40: shards with another rate were merged, exit 0. A shard with other flags is now
/// refused at the door, the flag named, and the run ends before any call.
#[test]
fn a_shard_with_other_flags_is_refused_naming_the_flag() {
    let server = TestServer::start(Behaviour::Echo);
    let (first, addr, said) = hub_of_two(&server, &["--rps", "100", "-n", "50"]);
    let other = joiner(&server, &addr, &["--rps", "200", "-n", "50"]);
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("other flags than the coordinator: --rps differ"), "{said}");
    let other = other.wait_with_output().unwrap();
    assert_eq!(other.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other.stderr).contains("--rps differ"));
    assert_eq!(server.calls(), 0);
}

/// A hand-started coordinator without the run's secret is refused at once (exit 2), naming
/// both ways to give it; `--coordinator localhost:P` listens on loopback only (it listened on
/// every interface).
#[test]
fn the_coordinator_needs_a_secret_and_listens_exactly_where_told() {
    let server = TestServer::start(Behaviour::Echo);
    let out = shard(server.addr, 0, 2, &["-n", "10", "--coordinator", "127.0.0.1:0"])
        .env_remove("RPCMETER_COORDINATOR_SECRET")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--coordinator-secret-file") && stderr.contains("RPCMETER_COORDINATOR_SECRET"), "{stderr}");
    let short = shard(server.addr, 0, 2, &["-n", "10", "--coordinator", "127.0.0.1:0"])
        .env("RPCMETER_COORDINATOR_SECRET", "short")
        .output()
        .unwrap();
    assert_eq!(short.status.code(), Some(2));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{SECRET}\n")).unwrap();
    let (first, addr, said) = {
        let path = file.path().to_str().unwrap().to_string();
        let mut child = shard(server.addr, 0, 2, &["--coordinator", "localhost:0", "--format", "json"])
            .args(["-n", "10", "--join-timeout", "1s", "--coordinator-secret-file", &path])
            .env_remove("RPCMETER_COORDINATOR_SECRET")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        let rest = std::thread::spawn(move || {
            let mut all = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut all);
            all
        });
        (child, line, rest)
    };
    let bound: std::net::SocketAddr = addr
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{addr}"));
    assert!(bound.ip().is_loopback(), "--coordinator localhost:0 listens on {bound}");
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    // Alone, it gives up at the join timeout: the secret file was taken.
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("did not join within"), "{said}");
}

/// Issue 40: a fake result with bad histograms made shard 0 print nothing, the whole run
/// lost. A shard that proves itself and then sends a result that cannot be merged fails
/// alone: shard 0 prints the merge of the others, marked partial, naming it, and exits 1.
#[test]
fn a_bad_result_from_a_proven_shard_fails_that_shard_not_the_run() {
    use rpcmeter::app::coordinator::trust::{Credentials, Secret};
    use rpcmeter::app::coordinator::Client;
    let server = TestServer::start(Behaviour::Echo);
    let mut bad = a_result(&server);
    bad["histograms"]["call_latency"] = "not a histogram".into();
    let load = ["--rps", "100", "-n", "50"];
    let (first, addr, said) = hub_of_two(&server, &load);
    // Shard 1, in this process, with the very flags shard 0 runs (its fingerprint).
    let child = shard(server.addr, 1, 2, &["--coordinator", &addr, "--format", "json"])
        .args(load)
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    let how = rpcmeter::app::run::Coordination {
        addr: addr.clone(),
        listen: false,
        join_timeout: Duration::from_secs(20),
        progress: None,
    };
    let credentials = Credentials {
        secret: Secret::new(SECRET.as_bytes(), "test").unwrap(),
        fingerprint: rpcmeter::cli::run_settings::fingerprint(&child).unwrap(),
    };
    let control = std::sync::Arc::new(rpcmeter::load::plan::Control::default());
    let client = Client::new(&how, credentials, addr.clone(), 1, 2, control);
    client.agree().unwrap();
    let refused = client.deliver(&bad).unwrap_err();
    assert!(format!("{refused:#}").contains("cannot be merged"), "{refused:#}");
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{said}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(merged["partial"], true);
    assert_eq!(merged["missing_shards"][0]["shard"], "1/2", "{}", merged["missing_shards"]);
    assert_eq!(merged["requests"]["total"], 25, "shard 0's own calls");
}

/// Issue 39: with `--coordinator`, shard 0 never judged the merged result (exit 0 on a
/// breach) and each other shard judged its share. Shard 0 judges the merged run, once.
#[test]
fn shard_0_judges_the_assertions_once_on_the_merged_run() {
    let server = TestServer::start(Behaviour::Echo);
    for (assert, code) in [("rps>=80", 0), ("rps>=150", 1)] {
        let load = ["--rps", "100", "-z", "2s", "--assert", assert];
        let (first, addr, said) = hub_of_two(&server, &load);
        let other = joiner(&server, &addr, &load);
        let out = first.wait_with_output().unwrap();
        let said = said.join().unwrap();
        assert_eq!(out.status.code(), Some(code), "{assert}: {said}");
        let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
        assert_eq!(merged["assertions"][0]["ok"], code == 0, "{}", merged["assertions"]);
        if code == 1 {
            assert!(said.contains(&format!("assertion breached: {assert}")), "{said}");
        }
        // The other shard never judges its 50 calls/s.
        let other = other.wait_with_output().unwrap();
        assert!(other.status.success(), "{assert}: {}", String::from_utf8_lossy(&other.stderr));
    }
}

/// Connections that never prove themselves are bounded (32 at once, each closed after 10 s):
/// strangers holding them all delay a real shard, which tries again, but never keep it out.
#[test]
fn idle_strangers_delay_a_shard_but_never_keep_it_out() {
    let server = TestServer::start(Behaviour::Echo);
    let load = ["--rps", "100", "-n", "20"];
    let (first, addr, said) = hub_of_two(&server, &load);
    let idle: Vec<std::net::TcpStream> = (0..40).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    let real = joiner(&server, &addr, &load);
    let out = first.wait_with_output().unwrap();
    let said = said.join().unwrap();
    assert!(out.status.success(), "{said}");
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 20);
    assert!(real.wait_with_output().unwrap().status.success());
    drop(idle);
}
