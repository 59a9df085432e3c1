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
