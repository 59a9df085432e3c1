//! `rpcmeter merge`: two runs merged equal one run over all their samples, percentile for
//! percentile (the histograms are added, never the percentiles averaged).
mod common;
use common::*;
use std::process::Command;

fn histogram(text: &str) -> hdrhistogram::Histogram<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
    hdrhistogram::serialization::Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap()
}

#[test]
fn two_runs_merge_into_one_exactly() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let (a, b, merged) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("m.json"));
    for (path, args) in [(&a, ["-c", "2", "-n", "400"]), (&b, ["-c", "8", "-n", "600"])] {
        let mut cmd = run_echo(server.addr, &args);
        cmd.arg("--export").arg(format!("json={}", path.display()));
        assert!(cmd.output().unwrap().status.success());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .arg("merge")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("merged from 2 results"));
    let read = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (ra, rb, m) = (read(&a), read(&b), read(&merged));
    assert_eq!(m["requests"]["total"], 1000);
    assert_eq!(m["statuses"]["OK"], 1000);
    // The merged percentiles are those of all 1000 samples.
    let mut all = histogram(ra["histograms"]["call_latency"].as_str().unwrap());
    all.add(histogram(rb["histograms"]["call_latency"].as_str().unwrap())).unwrap();
    assert_eq!(all.len(), 1000);
    for (key, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        let truth = all.value_at_quantile(q) as f64 / 1e3;
        let got = m["latency_us"][key].as_f64().unwrap();
        assert!((got - truth).abs() < 1e-3, "{key}: merged {got} µs, all samples {truth} µs");
    }
    assert_eq!(histogram(m["histograms"]["call_latency"].as_str().unwrap()), all);
    // Throughput over the union of the two windows (one after the other here).
    let span = m["duration_s"].as_f64().unwrap();
    assert!(span >= ra["duration_s"].as_f64().unwrap() + rb["duration_s"].as_f64().unwrap() - 0.01, "{span}");
    assert_eq!(m["shards"].as_array().unwrap().len(), 2);
    // A merged result merges again.
    let again = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .arg("merge")
        .arg(&merged)
        .arg(&a)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["requests"]["total"], 1400);
}

#[test]
fn what_is_not_a_result_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("merge").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.json") && stderr.lines().count() == 1, "{stderr}");
}
