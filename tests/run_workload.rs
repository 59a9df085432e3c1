//! `rpcmeter run --workload FILE` against the lab server: per-name counts exact by smooth
//! weighted round robin under every load model, and equal to the server's own Stats.
use rpcmeter::lab::{LabConfig, LabServer};
use serde_json::Value;
#[path = "common/workload_cli.rs"]
mod workload_cli;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use workload_cli::{rpcmeter, run_json, stats_ok, workload_file};

const ECHO: &str = "/EchoService/echo";
const CPU: &str = "/rpcmeter.lab.v1.TestService/Cpu";

/// Echo at weight 3, a small Cpu call at weight 7 (one record of a file, cycled).
const MIX: &str = r#"
[[call]]
name = "echo"
method = "EchoService/echo"
data = '{"content":"n{{.RequestNumber}}"}'
weight = 3

[[call]]
name = "cpu"
method = "rpcmeter.lab.v1.TestService/Cpu"
data_file = "cpu.jsonl"
weight = 7
"#;

fn lab() -> LabServer {
    LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), fib: 10, ..LabConfig::default() }).unwrap()
}

/// The workload file (and its data file) in a fresh folder.
fn workload(text: &str) -> (tempfile::TempDir, PathBuf) {
    workload_file(
        "mix.toml",
        text,
        &[(
            "cpu.jsonl",
            "{\"n\": 5}
{\"n\": 6}
",
        )],
    )
}

fn by_name(r: &Value, name: &str) -> u64 {
    r["calls_by_name"][name]["requests"]["total"].as_u64().unwrap_or_else(|| panic!("no {name} in {r}"))
}

/// Per name: requests = ok (every call answered OK), statuses add up, the histogram holds
/// each call; and the names add up to the totals.
fn assert_names_add_up(r: &Value) {
    let names = r["calls_by_name"].as_object().unwrap();
    let mut sum = 0;
    for (name, v) in names {
        let total = v["requests"]["total"].as_u64().unwrap();
        assert_eq!(v["requests"]["ok"].as_u64().unwrap(), total, "{name}: {v}");
        assert_eq!(v["statuses"]["OK"].as_u64().unwrap_or(0), total, "{name}: {v}");
        assert_eq!(v["latency_us"]["count"].as_u64().unwrap(), total, "{name}: {v}");
        sum += total;
    }
    assert_eq!(sum, r["requests"]["total"].as_u64().unwrap(), "{r}");
}

#[test]
fn a_3_to_7_mix_is_exactly_300_and_700_and_the_servers_count() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let r = run_json(&addr, &file, &["-c", "8", "-n", "1000", "--connections", "2", "--threads", "2"]);
    let stats = server.shutdown();
    assert_eq!((by_name(&r, "echo"), by_name(&r, "cpu")), (300, 700), "{}", r["calls_by_name"]);
    assert_names_add_up(&r);
    assert_eq!(stats_ok(&stats, ECHO), 300);
    assert_eq!(stats_ok(&stats, CPU), 700);
    assert_eq!(r["calls_by_name"]["cpu"]["method"], "rpcmeter.lab.v1.TestService.Cpu");
    // The run's own view of the server's count adds up the mix's methods.
    assert_eq!(r["server"]["ok"], 1000, "{}", r["server"]);
}

#[test]
fn open_loop_and_bursts_keep_the_mix_exact() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let open = run_json(&addr, &file, &["--rps", "400", "-n", "200"]);
    assert_eq!((by_name(&open, "echo"), by_name(&open, "cpu")), (60, 140));
    assert_names_add_up(&open);
    let bursts = run_json(&addr, &file, &["--burst", "10", "--rounds", "5"]);
    assert_eq!((by_name(&bursts, "echo"), by_name(&bursts, "cpu")), (15, 35));
    assert_names_add_up(&bursts);
    let stats = server.shutdown();
    assert_eq!(stats_ok(&stats, ECHO), 60 + 15);
    assert_eq!(stats_ok(&stats, CPU), 140 + 35);
}

#[test]
fn stages_split_by_weight_and_add_up_to_the_servers_count() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let r = run_json(&addr, &file, &["--stages", "300ms:2,300ms:4", "--stages-of", "workers"]);
    let stats = server.shutdown();
    assert_names_add_up(&r);
    let (echo, cpu) = (by_name(&r, "echo"), by_name(&r, "cpu"));
    assert!(echo + cpu > 20, "{r}");
    // Round robin in start order: within one cycle (10 calls) of exact 3:7.
    let whole = (echo + cpu) / 10;
    assert!(echo >= whole * 3 && echo <= whole * 3 + 3, "{echo} {cpu}");
    assert_eq!(stats_ok(&stats, ECHO), echo);
    assert_eq!(stats_ok(&stats, CPU), cpu);
}

#[test]
fn a_seed_draws_the_mix_at_random_the_same_way_each_time() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let args = ["-c", "4", "-n", "1000", "--seed", "7"];
    let (a, b) = (run_json(&addr, &file, &args), run_json(&addr, &file, &args));
    let counts = |r: &Value| (by_name(r, "echo"), by_name(r, "cpu"));
    assert_eq!(counts(&a), counts(&b));
    assert_ne!(counts(&a), (300, 700), "a random draw, not the round robin");
    assert!((230..370).contains(&counts(&a).0), "{:?}", counts(&a));
    assert_names_add_up(&a);
}

#[test]
fn the_table_has_a_section_per_name() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("By call name:"), "{table}");
    let echo = table.lines().find(|l| l.trim_start().starts_with("echo ")).unwrap_or_else(|| panic!("{table}"));
    assert!(echo.contains(" 6 ") && echo.contains("EchoService.echo"), "{echo}");
}

#[test]
fn a_one_call_workload_needs_no_weight() {
    let server = lab();
    let addr = server.local_addr().to_string();
    // Was refused: "call #1 (\"echo\"): missing field `weight`".
    let (_dir, file) = workload("[[call]]\nname = \"echo\"\nmethod = \"EchoService/echo\"\n");
    let r = run_json(&addr, &file, &["-c", "2", "-n", "5"]);
    assert_eq!(by_name(&r, "echo"), 5);
    server.shutdown();
}

#[test]
fn the_table_prints_the_start_of_a_check_on_a_large_body() {
    let server = lab();
    let addr = server.local_addr().to_string();
    // A 362 KB expected value made a 362 KB table line.
    let body = "x".repeat(362_000);
    let text = format!("[[call]]\nname = \"echo\"\nmethod = \"EchoService/echo\"\ncheck = [\"content != {body}\"]\n");
    let (_dir, file) = workload(&text);
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    let line = table.lines().find(|l| l.contains("echo: content != x")).unwrap_or_else(|| panic!("no check line"));
    assert!(line.len() < 200 && line.contains("(+361937 chars)") && line.contains(" 5 passed"), "{line}");
    assert!(table.lines().all(|l| l.len() < 1000), "a line of {} bytes", table.lines().map(str::len).max().unwrap());
    server.shutdown();
}

#[test]
fn prometheus_has_each_name() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(MIX);
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "20", "--format", "prometheus"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("rpcmeter_run_name_calls{") && l.contains("call_name=\"cpu\""));
    assert!(line.is_some_and(|l| l.contains("status=\"OK\"") && l.ends_with(" 14")), "{text}");
    assert!(text.contains("rpcmeter_run_name_latency_seconds{"), "{text}");
}

#[test]
fn bad_workloads_are_refused_with_one_line() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let refused = |text: &str, args: &[&str], wanted: &str| {
        let (_dir, file) = workload(text);
        let out = rpcmeter(&addr, &file, &[args, &["-n", "5"]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{wanted}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(wanted), "wanted {wanted:?} in {stderr}");
    };
    let one = |extra: &str| format!("[[call]]\nname = \"a\"\nmethod = \"EchoService/echo\"\nweight = 1\n{extra}");
    refused(&one("wieght = 2\n"), &[], "unknown field `wieght`");
    refused(&one("").replace("weight = 1", "weight = 0"), &[], "weight must be at least 1");
    refused(&one("").replace("weight = 1", "weight = -1"), &[], "call[0].weight: invalid value");
    refused(
        &one("").replace("EchoService/echo", "EchoService/nope"),
        &[],
        "call \"a\": method EchoService/nope: no method",
    );
    refused(&one("data = '{\"nope\": 1}'\n"), &[], "call \"a\"");
    refused(&one(""), &["--call", "EchoService/echo"], "--call and --workload together");
    refused(&one(""), &["-d", "{}"], "-d/-D and --workload together");
    refused(&one(""), &["-D", "x.json"], "-d/-D and --workload together");
    refused(&one(""), &["--stream-call-count", "2"], "stream flags need a streaming method");
    refused("this is not toml", &[], "--workload");
}

#[test]
fn merge_adds_each_name_exactly() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (dir, file) = workload(MIX);
    let (a, b, merged) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("m.json"));
    for (path, n) in [(&a, "100"), (&b, "50")] {
        let out = rpcmeter(&addr, &file, &["-c", "2", "-n", n, "--format", "json", "-o", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["merge", "--format", "json", "-o"])
        .arg(&merged)
        .args([&a, &b])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (ra, rb, m) = (read(&a), read(&b), read(&merged));
    assert_eq!((by_name(&m, "echo"), by_name(&m, "cpu")), (30 + 15, 70 + 35), "{}", m["calls_by_name"]);
    assert_names_add_up(&m);
    // The merged histogram holds both runs' samples: its max is the larger of theirs.
    let max = |r: &Value| r["calls_by_name"]["cpu"]["latency_us"]["max"].as_f64().unwrap();
    assert_eq!(max(&m), max(&ra).max(max(&rb)));
    let html = dir.path().join("r.html");
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("report").arg(&a).arg("-o").arg(&html).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("By call name") && page.contains("<td>cpu</td>"), "no per-name table in the report");
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("merge").args([&a, &b]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("By call name:") && table.contains("  cpu: 105 calls (failed 0)"), "{table}");
}

/// A slice of a result (`--slice calls_by_name=cpu`) merges, compares and renders as a whole
/// run does: merged, its counts and histogram are those the whole merge gives the name;
/// compared, each side is that name's calls; rendered, any format shows them.
#[test]
fn a_slice_merges_compares_and_renders_like_a_whole() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let (dir, file) = workload(MIX);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (path, n) in [(&a, "100"), (&b, "50")] {
        let out = rpcmeter(&addr, &file, &["-c", "2", "-n", n, "--format", "json", "-o", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let bin = || Command::new(env!("CARGO_BIN_EXE_rpcmeter"));
    let stdout = |out: Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (ra, rb) = (read(&a), read(&b));
    // Merged: the slices' merge is the whole merge's slice.
    let whole: Value =
        serde_json::from_str(&stdout(bin().args(["merge", "--format", "json"]).args([&a, &b]).output().unwrap()))
            .unwrap();
    let sliced = bin().args(["merge", "--format", "json", "--slice", "calls_by_name=cpu"]).args([&a, &b]).output();
    let sliced: Value = serde_json::from_str(&stdout(sliced.unwrap())).unwrap();
    let cpu = &whole["calls_by_name"]["cpu"];
    assert_eq!(sliced["requests"]["total"], 105);
    assert_eq!(sliced["requests"]["total"], cpu["requests"]["total"]);
    assert_eq!(sliced["statuses"], cpu["statuses"]);
    assert_eq!(sliced["latency_us"], cpu["latency_us"]);
    assert_eq!(sliced["histogram"], cpu["histogram"]);
    assert_eq!(sliced["throughput_rps"], cpu["throughput_rps"]);
    assert_eq!(sliced["shards"][0]["histogram"], ra["calls_by_name"]["cpu"]["histogram"]);
    // Compared: each side's values are its slice's.
    let compared = bin().args(["compare", "--format", "json", "--slice", "calls_by_name=cpu"]).args([&a, &b]).output();
    let compared: Value = serde_json::from_str(&stdout(compared.unwrap())).unwrap();
    for (side, r) in [("a", &ra), ("b", &rb)] {
        let run = &compared[side][0];
        assert_eq!(run["calls"], r["calls_by_name"]["cpu"]["requests"]["total"], "{run}");
        assert_eq!(run["latency_us"]["p99"], r["calls_by_name"]["cpu"]["latency_us"]["p99"], "{run}");
        assert!(run["source"].as_str().unwrap().ends_with("[calls_by_name=cpu]"), "{run}");
    }
    // Rendered: in every format, as a merge of wholes is.
    let prometheus =
        bin().args(["merge", "--format", "prometheus", "--slice", "calls_by_name=cpu"]).args([&a, &b]).output();
    let prometheus = stdout(prometheus.unwrap());
    assert!(prometheus.lines().any(|l| l.starts_with("rpcmeter_run_count{") && l.ends_with(" 105")), "{prometheus}");
    let table = stdout(bin().args(["merge", "--slice", "calls_by_name=echo"]).args([&a, &b]).output().unwrap());
    assert!(table.contains("Calls:       45 (ok 45, failed 0)"), "{table}");
    let page = stdout(bin().args(["report", "-o", "-", "--slice", "calls_by_name=cpu"]).arg(&a).output().unwrap());
    assert!(page.contains("a.json [calls_by_name=cpu]") && page.contains("<svg"), "no page of the slice");
    // A name no result has: one line, exit 2.
    let out = bin().args(["compare", "--slice", "calls_by_name=nope"]).args([&a, &b]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && stderr.lines().count() == 1, "{stderr}");
    assert!(stderr.contains("no such name in calls_by_name (it has: cpu, echo)"), "{stderr}");
}
