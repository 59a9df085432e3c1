//! A load split into shards: `run --shards N` forks N local `run --shard I/N` processes that
//! start together (`--start-at`) and merges their results exactly.
mod common;
use common::*;

#[test]
fn local_shards_split_the_load_and_merge_exactly() {
    let server = TestServer::start(Behaviour::Echo);
    // Open loop: 400 calls/s for 2 s as a whole, over 3 shards.
    let r = json_of(run_echo(server.addr, &["--shards", "3", "--rps", "400", "-n", "801"]));
    assert_eq!(r["requests"]["total"], 801, "{r}");
    assert_eq!(server.calls(), 801);
    let shards = r["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    // -n split with the remainder spread: 267 each.
    for s in shards {
        assert_eq!(s["calls"], 267, "{s}");
    }
    // Together they kept the whole rate: the union of their windows is about 801/400 s.
    let rps = r["throughput_rps"].as_f64().unwrap();
    assert!((rps - 400.0).abs() < 20.0, "{rps} calls/s");
}

#[test]
fn a_start_time_already_past_is_refused() {
    let server = TestServer::start(Behaviour::Echo);
    let out = run_echo(server.addr, &["--shard", "0/2", "--start-at", "1000000000", "-n", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_shard_names_itself_in_its_result() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["--shard", "1/4", "-c", "8", "-n", "10"]));
    assert_eq!(r["meta"]["shard"], "1/4");
    // -n 10 over 4 shards: 3, 3, 2, 2; -c 8: 2 workers each.
    assert_eq!(r["requests"]["total"], 3);
    assert_eq!(r["concurrency"], 2);
}
