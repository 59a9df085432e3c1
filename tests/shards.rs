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

/// The Kubernetes path without Kubernetes: what `kube` prints is a valid Indexed Job whose
/// pods run the shards; two such "pods" printing JSON, their logs concatenated (with a
/// stray error line, as `kubectl logs` of a failed pod adds) merge into the one result.
#[test]
fn kube_prints_an_indexed_job_and_pod_logs_merge() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_rpcmeter");
    let out = Command::new(bin)
        .args([
            "kube",
            "--shards",
            "4",
            "--output",
            "json",
            "run",
            "--plaintext",
            "--call",
            "EchoService/echo",
            "--rps",
            "1000",
            "-z",
            "30s",
            "svc:9000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 4);
    assert_eq!(job["spec"]["parallelism"], 4);
    let args: Vec<&str> = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.windows(2).any(|w| w == ["--shard", "$(JOB_COMPLETION_INDEX)/4"]), "{args:?}");
    assert!(args.contains(&"--start-at") && args[0] == "run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("rpcmeter merge -"));
    let bad =
        Command::new(bin).args(["kube", "--shards", "2", "run", "--rps", "0", "h:1", "--call", "x"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // A usage error of the nested run names what is missing, on one line.
    let unpaired = Command::new(bin)
        .args(["kube", "--shards", "2", "run", "--call", "x", "--cert", "c.pem", "h:1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&unpaired.stderr);
    assert_eq!(unpaired.status.code(), Some(2));
    assert!(stderr.trim_end().lines().count() == 1 && stderr.contains("--key"), "{stderr}");

    let server = TestServer::start(Behaviour::Echo);
    let start = format!(
        "{:.3}",
        (std::time::SystemTime::now() + std::time::Duration::from_secs(2))
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    );
    let pods: Vec<_> = (0..2)
        .map(|i| {
            let mut cmd = run_echo(server.addr, &["--rps", "200", "-n", "200", "--format", "json"]);
            cmd.args(["--shard", &format!("{i}/2"), "--start-at", &start]).stdout(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut logs = String::new();
    for pod in pods {
        let out = pod.wait_with_output().unwrap();
        assert!(out.status.success());
        logs += &String::from_utf8_lossy(&out.stdout);
        logs += "rpcmeter: error: a stray line from a failed pod\n";
    }
    let mut merge = Command::new(bin)
        .args(["merge", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    merge.stdin.take().unwrap().write_all(logs.as_bytes()).unwrap();
    let merged: serde_json::Value = serde_json::from_slice(&merge.wait_with_output().unwrap().stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 200);
    assert_eq!(server.calls(), 200);
    let rps = merged["throughput_rps"].as_f64().unwrap();
    assert!((rps - 200.0).abs() < 10.0, "two shards started together keep the whole rate: {rps}");
    assert!(merged["notices"].to_string().contains("left out"), "{}", merged["notices"]);
}
