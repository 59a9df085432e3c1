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
    // A merged result merges again, but not with one of its parts: its calls would count
    // twice (the_same_run_twice_is_refused merges a merge with a third run).
    let again = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("merge").arg(&merged).arg(&a).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));
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

fn read(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write(p: &std::path::Path, v: &serde_json::Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// One short run's JSON result, written to `path`.
fn one_run(server: &TestServer, path: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut cmd = run_echo(server.addr, extra);
    cmd.arg("--export").arg(format!("json={}", path.display()));
    assert!(cmd.output().unwrap().status.success());
    read(path)
}

/// `merge a.json a.json` once doubled every count without a word.
#[test]
fn the_same_run_twice_is_refused() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let a = one_run(&server, &p("a.json"), &["-n", "50"]);
    let b = one_run(&server, &p("b.json"), &["-n", "70"]);
    let id = a["meta"]["run_id"].as_str().unwrap_or_else(|| panic!("no meta.run_id: {}", a["meta"]));
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version(), Some(uuid::Version::Random));
    assert_ne!(a["meta"]["run_id"], b["meta"]["run_id"]);
    // A copy is the same run.
    std::fs::copy(p("a.json"), p("copy.json")).unwrap();
    for twice in [["a.json", "a.json"], ["a.json", "copy.json"]] {
        let out = rpcmeter().arg("merge").arg(p(twice[0])).arg(p(twice[1])).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{twice:?}: {stderr}");
        assert!(stderr.contains(id) && stderr.trim_end().lines().count() == 1, "{stderr}");
    }
    // A merge carries its sources' ids and one of its own; merged with one of its parts, refused.
    let out = rpcmeter().arg("merge").arg(p("a.json")).arg(p("b.json")).arg("-o").arg(p("m.json")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = read(&p("m.json"));
    assert_eq!(m["meta"]["source_run_ids"], serde_json::json!([a["meta"]["run_id"], b["meta"]["run_id"]]));
    let own = m["meta"]["run_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(own).is_ok() && own != id, "{own}");
    for part in ["a.json", "b.json", "m.json"] {
        let out = rpcmeter().arg("merge").arg(p("m.json")).arg(p(part)).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "m.json + {part}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A merge of a merge lists every run underneath.
    let c = one_run(&server, &p("c.json"), &["-n", "30"]);
    let out = rpcmeter().arg("merge").arg(p("m.json")).arg(p("c.json")).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mm: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(mm["requests"]["total"], 150);
    assert_eq!(mm["meta"]["source_run_ids"].as_array().unwrap().len(), 3);
    assert!(mm["meta"]["source_run_ids"].as_array().unwrap().contains(&c["meta"]["run_id"]));
}

/// Results written before run ids existed: the same run (same start, counts and histogram) is
/// refused however its file was re-written; different runs still merge.
#[test]
fn results_without_a_run_id_are_refused_when_the_same() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    for (name, n) in [("a.json", "40"), ("b.json", "60")] {
        let mut r = one_run(&server, &p(name), &["-n", n]);
        r["meta"].as_object_mut().unwrap().remove("run_id");
        write(&p(name), &r);
    }
    // The same result, written compactly: not the same bytes, the same run.
    let a: serde_json::Value = read(&p("a.json"));
    std::fs::write(p("a-compact.json"), serde_json::to_string(&a).unwrap()).unwrap();
    let out = rpcmeter().arg("merge").arg(p("a.json")).arg(p("a-compact.json")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.trim_end().lines().count() == 1 && stderr.contains("a-compact.json"), "{stderr}");
    let out = rpcmeter().arg("merge").arg(p("a.json")).arg(p("b.json")).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["requests"]["total"], 100);
}

/// Moves a result's start by `by` seconds and gives it a new run id.
fn shifted(r: &serde_json::Value, by: f64) -> serde_json::Value {
    let mut r = r.clone();
    let at = humantime::parse_rfc3339(r["meta"]["started_at"].as_str().unwrap()).unwrap();
    let at = at + std::time::Duration::from_secs_f64(by);
    r["meta"]["started_at"] = humantime::format_rfc3339_millis(at).to_string().into();
    r["meta"]["run_id"] = uuid::Uuid::new_v4().to_string().into();
    r
}

/// "Union of the windows" was the span: two runs 6 s apart merged over 6 s of nothing.
#[test]
fn the_merged_duration_is_the_union_of_the_windows() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let a = one_run(&server, &p("a.json"), &["-n", "200", "--rps", "400"]);
    let d = a["duration_s"].as_f64().unwrap();
    assert!(d > 0.3, "{d}");
    let merge = |other: &serde_json::Value| -> serde_json::Value {
        write(&p("other.json"), other);
        let out = rpcmeter().arg("merge").arg(p("a.json")).arg(p("other.json")).args(["--format", "json"]).output();
        let out = out.unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Apart: the gap is left out.
    let m = merge(&shifted(&a, 6.0));
    let union = m["duration_s"].as_f64().unwrap();
    assert!((union - 2.0 * d).abs() < 0.01, "union {union} s, each {d} s");
    assert!((m["span_s"].as_f64().unwrap() - (6.0 + d)).abs() < 0.01, "{}", m["span_s"]);
    let rps = m["throughput_rps"].as_f64().unwrap();
    assert!((rps - 400.0 / (2.0 * d)).abs() < 1.0, "{rps}");
    // Overlapping: the overlap counts once.
    let m = merge(&shifted(&a, d / 2.0));
    let union = m["duration_s"].as_f64().unwrap();
    assert!((union - 1.5 * d).abs() < 0.01, "union {union} s, each {d} s");
    // The table says which it is.
    let out = rpcmeter().arg("merge").arg(p("a.json")).arg(p("other.json")).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("union of the measured windows"), "{table}");
}

/// Closed and open loops, or different methods, merge with a warning and a note in the meta.
#[test]
fn mixed_results_merge_with_a_warning() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    one_run(&server, &p("closed.json"), &["-n", "50"]);
    let open = one_run(&server, &p("open.json"), &["-n", "50", "--rps", "500"]);
    let out = rpcmeter().arg("merge").arg(p("closed.json")).arg(p("open.json")).args(["--format", "json"]).output();
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning") && stderr.contains("closed") && stderr.contains("open"), "{stderr}");
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(m["meta"]["mixed"].to_string().contains("closed"), "{}", m["meta"]);
    // Another method: merged, with its warning.
    let mut other = shifted(&open, 0.0);
    other["call"] = "other.Service/Method".into();
    write(&p("other.json"), &other);
    let out = rpcmeter().arg("merge").arg(p("open.json")).arg(p("other.json")).args(["--format", "json"]).output();
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning") && stderr.contains("other.Service/Method"), "{stderr}");
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(m["meta"]["mixed"].to_string().contains("other.Service/Method"), "{}", m["meta"]);
}

#[test]
fn late_sends_by_cause_are_added() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (i, (slot, wake)) in [(3u64, 1u64), (4, 2)].into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.json"));
        let mut cmd = run_echo(server.addr, &["-c", "1", "-n", "20"]);
        cmd.arg("--export").arg(format!("json={}", path.display()));
        assert!(cmd.output().unwrap().status.success());
        // Stand-ins for an open loop's counts: a closed loop writes zeros.
        let mut r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        r["late_sends"] = slot.into();
        r["late_wakeups"] = wake.into();
        std::fs::write(&path, r.to_string()).unwrap();
        paths.push(path);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .arg("merge")
        .args(&paths)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((m["late_sends"].as_u64(), m["late_wakeups"].as_u64()), (Some(7), Some(3)), "{m:#}");
}

/// `merge` prints every format `run` prints, each of the merged calls (before: table or JSON
/// only, any other --format refused); each input's slice stays under `shards`.
#[test]
fn a_merge_prints_every_format_run_prints() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (path, n) in [(&a, "30"), (&b, "50")] {
        let mut cmd = run_echo(server.addr, &["-n", n]);
        cmd.arg("--export").arg(format!("json={}", path.display()));
        assert!(cmd.output().unwrap().status.success());
    }
    let merge = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["merge", "--format", format])
            .args([&a, &b])
            .output()
            .unwrap();
        assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(merge("prometheus").contains("rpcmeter_run_count{") && merge("prometheus").contains("} 80\n"));
    assert!(merge("influx").contains("count=80i"), "{}", merge("influx"));
    assert!(merge("junit").contains("<testsuite"), "{}", merge("junit"));
    assert!(merge("rmeter").contains("| 80 |"), "{}", merge("rmeter"));
    // A merge keeps no interval series: its whole window is the one row.
    let csv = merge("csv");
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.lines().nth(1).unwrap().contains(",measured,80,80,0,"), "{csv}");
    assert!(merge("table").contains("merged from 2 results"));
    let m: serde_json::Value = serde_json::from_str(&merge("json")).unwrap();
    let shards = m["shards"].as_array().unwrap();
    let ra: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(shards[0]["requests"], serde_json::json!({"total": 30, "ok": 30, "failed": 0}));
    assert_eq!(shards[0]["histogram"], ra["histograms"]["call_latency"]);
    assert_eq!(shards[1]["statuses"]["OK"], 50);
    // A newer major schema is refused in one line, exit 2.
    let mut future = ra.clone();
    future["meta"]["schema_version"] = "3.0".into();
    let c = dir.path().join("c.json");
    std::fs::write(&c, future.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("merge").args([&c, &b]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("schema version 3.0 is newer than this rpcmeter reads"), "{stderr}");
}

/// Two saved results, the first stopped early, merged: what `merge` prints in `format`.
fn merged_partial(dir: &std::path::Path, format: &str) -> String {
    let saved = || read(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results/open.json")));
    let (mut a, mut b) = (saved(), saved());
    a["partial"] = true.into();
    a["meta"]["ended"] = "interrupted".into();
    b["meta"]["run_id"] = "00000000-0000-4000-8000-000000000001".into();
    b["meta"]["started_at"] = "2026-11-25T17:43:14.417Z".into();
    let (pa, pb) = (dir.join("a.json"), dir.join("b.json"));
    write(&pa, &a);
    write(&pb, &b);
    let out = rpcmeter().args(["merge", "--format", format]).args([&pa, &pb]).output().unwrap();
    assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A merge of which one input was stopped early is partial in every format (before: the
/// merged JSON said partial, and prometheus, influx and the others rendered it completed).
#[test]
fn a_partial_merge_says_partial_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let m: serde_json::Value = serde_json::from_str(&merged_partial(dir.path(), "json")).unwrap();
    assert_eq!((&m["partial"], &m["meta"]["ended"]), (&true.into(), &"partial".into()), "{}", m["meta"]);
    let each = [
        ("table", "[PARTIAL]"),
        ("prometheus", "end_reason=\"partial\""),
        ("influx", "end_reason=partial"),
        ("junit", "<property name=\"ended\" value=\"partial\"/>"),
        ("rmeter", "PARTIAL: the result ended partial"),
        ("csv", ",partial\n"),
    ];
    for (format, says) in each {
        let text = merged_partial(dir.path(), format);
        assert!(text.contains(says), "{format} does not say {says:?}:\n{text}");
        assert!(!text.contains("completed"), "{format} says completed:\n{text}");
    }
    // The HTML page of the merged result.
    let merged = dir.path().join("m.json");
    std::fs::write(&merged, merged_partial(dir.path(), "json")).unwrap();
    let page = dir.path().join("m.html");
    let out = rpcmeter().arg("report").arg(&merged).arg("-o").arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Partial result"), "the page does not say partial");
}

/// A saved closed loop and a saved open loop merged: what `merge` prints in `format`.
fn merged_mixed(dir: &std::path::Path, format: &str) -> String {
    let saved =
        |name: &str| read(&std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results")).join(name));
    let (pa, pb) = (dir.join("closed.json"), dir.join("open.json"));
    write(&pa, &saved("calib.json"));
    write(&pb, &saved("open.json"));
    let out = rpcmeter().args(["merge", "--format", format]).args([&pa, &pb]).output().unwrap();
    assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A merge of a closed and an open loop says its mode is mixed in every format that names a
/// mode, each input's own under `shards` (before: JSON "closed, open", prometheus and influx
/// `mode="closed"`, the first input's, and the report the first input's load alone).
#[test]
fn a_mixed_merge_says_mixed_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let m: serde_json::Value = serde_json::from_str(&merged_mixed(dir.path(), "json")).unwrap();
    assert_eq!(m["mode"], "mixed", "{}", m["mode"]);
    let modes: Vec<&serde_json::Value> = m["shards"].as_array().unwrap().iter().map(|s| &s["mode"]).collect();
    assert_eq!(modes, [&serde_json::json!("closed"), &serde_json::json!("open")]);
    let kinds: Vec<&str> = m["warnings"].as_array().unwrap().iter().filter_map(|w| w["kind"].as_str()).collect();
    assert_eq!(&kinds[..2], ["merged", "mixed_inputs"], "the merge's own notices have kinds");
    assert_eq!(m["warnings"].as_array().unwrap().len(), m["notices"].as_array().unwrap().len());
    let each = [
        ("prometheus", "mode=\"mixed\""),
        ("influx", "mode=mixed"),
        ("table", "(merged from 2 results, mode mixed)"),
        ("table", "closed.json (closed): "),
        ("table", "open.json (open): "),
    ];
    for (format, says) in each {
        let text = merged_mixed(dir.path(), format);
        assert!(text.contains(says), "{format} does not say {says:?}:\n{text}");
    }
    let merged = dir.path().join("m.json");
    std::fs::write(&merged, merged_mixed(dir.path(), "json")).unwrap();
    let page = dir.path().join("m.html");
    let out = rpcmeter().arg("report").arg(&merged).arg("-o").arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&page).unwrap().contains("mixed: closed loop"), "the page does not say mixed");
}

/// A result edited by hand (name, edit, what the refusal says).
type Edit = (&'static str, fn(&mut serde_json::Value), &'static str);

/// A hand-edited result is refused where it is read, in one line, exit 2 (before: `report`
/// drew a 309-digit calls/s, -3 µs and u64::MAX calls; `merge` took `duration_s: 1e308` as
/// `Duration: inf s` and `0` as no window, doubling the merged throughput; both drew 12 to
/// 18 digits of calls/s from counts that their window or each other could not hold).
#[test]
fn numbers_beyond_a_run_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let saved = read(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results/open.json")));
    let mut other = saved.clone();
    other["meta"]["run_id"] = "00000000-0000-4000-8000-000000000002".into();
    let good = dir.path().join("good.json");
    write(&good, &other);
    let edits: [Edit; 7] = [
        ("rps", |v| v["throughput_rps"] = 1e308.into(), "throughput_rps 1e308 is not a rate per second"),
        ("negative", |v| v["latency_us"]["p50"] = (-3.0).into(), "latency_us.p50 -3 is not a latency in µs"),
        ("calls", |v| v["requests"]["total"] = u64::MAX.into(), "requests.total 18446744073709551615 is not a count"),
        ("endless", |v| v["duration_s"] = 1e308.into(), "duration_s 1e308 is not a duration in seconds"),
        ("zero", |v| v["duration_s"] = 0.into(), "duration_s 0 with 206 calls: no measured window"),
        // Each count within its bound, but not with the others: report drew OK calls/s of
        // 211014982063726.5 from 10^12 OK of 500 calls, merge 106098957806387152.0 calls/s.
        (
            "ok",
            |v| v["requests"]["ok"] = 1_000_000_000_000u64.into(),
            "requests.ok 1000000000000 and requests.failed 0 are more than requests.total 206",
        ),
        (
            "window",
            |v| v["requests"]["total"] = 1_000_000_000_000_000u64.into(),
            "requests.total 1000000000000000 in duration_s 1.000162: more than 1e9 calls/s",
        ),
    ];
    for (name, edit, says) in edits {
        let mut v = saved.clone();
        edit(&mut v);
        let path = dir.path().join(format!("{name}.json"));
        write(&path, &v);
        for args in [
            vec!["merge".as_ref(), path.as_os_str(), good.as_os_str()],
            vec!["report".as_ref(), path.as_os_str(), "-o".as_ref(), "-".as_ref()],
        ] {
            let out = rpcmeter().args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name} {:?}: {stderr}", args[0]);
            assert!(stderr.contains(says) && stderr.lines().count() == 1, "{name} {:?}: {stderr}", args[0]);
        }
    }
}

/// A saved plain run (open.json: 1 s measured) and a copy of it started `later` seconds after
/// it, merged: what `merge` prints in `format`.
fn merged_plain(dir: &std::path::Path, later: f64, format: &str) -> String {
    merged_saved(dir, "open.json", later, &["--format", format])
}

/// The saved result `name` and a copy of it started `later` seconds after it, merged with `args`.
fn merged_saved(dir: &std::path::Path, name: &str, later: f64, args: &[&str]) -> String {
    let a = read(&std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results")).join(name));
    let mut b = a.clone();
    b["meta"]["run_id"] = "00000000-0000-4000-8000-000000000003".into();
    let started = humantime::parse_rfc3339(a["meta"]["started_at"].as_str().unwrap()).unwrap();
    let moved = started + std::time::Duration::from_secs_f64(later);
    b["meta"]["started_at"] = humantime::format_rfc3339_millis(moved).to_string().into();
    let (pa, pb) = (dir.join("a.json"), dir.join("b.json"));
    write(&pa, &a);
    write(&pb, &b);
    let out = rpcmeter().arg("merge").args(args).args([&pa, &pb]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn series_notices(m: &serde_json::Value) -> Vec<&serde_json::Value> {
    m["warnings"].as_array().unwrap().iter().filter(|w| w["kind"] == "series_left_out").collect()
}

/// `merge a.json b.json` of two plain runs made one after the other warned `series_left_out`
/// ("a.json's intervals carry no histograms"): a series of runs at different times is no
/// series, and nothing the user could change would give one. Such a merge now says nothing
/// of it (docs/merge.md).
#[test]
fn plain_runs_apart_merge_without_a_word_on_a_series() {
    let dir = tempfile::tempdir().unwrap();
    let m: serde_json::Value = serde_json::from_str(&merged_plain(dir.path(), 60.0, "json")).unwrap();
    assert!(m.get("intervals").is_none() && m.get("steady_state").is_none(), "{m}");
    assert!(series_notices(&m).is_empty(), "{}", m["warnings"]);
    let table = merged_plain(dir.path(), 60.0, "table");
    assert!(!table.contains("series"), "{table}");
}

/// Two plain runs that ran at the same time (0.1 s apart, each 1 s long) could have had a
/// merged series, had they run as shards: the one notice says so, and how.
#[test]
fn plain_runs_at_the_same_time_are_told_how_to_have_a_series() {
    let dir = tempfile::tempdir().unwrap();
    let m: serde_json::Value = serde_json::from_str(&merged_plain(dir.path(), 0.1, "json")).unwrap();
    assert!(m.get("intervals").is_none(), "{}", m["intervals"]);
    let said = series_notices(&m);
    let [notice] = said[..] else { panic!("not one series notice: {}", m["warnings"]) };
    let text = notice["message"].as_str().unwrap();
    assert!(text.contains("overlap in time") && text.contains("(--shard I/N --start-at TIME each"), "{text}");
    assert!(merged_plain(dir.path(), 0.1, "table").contains(&format!("Note: {text}")));
    // A slice has no series to have: merged, it says nothing of one (the whole does).
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&merged_saved(dir.path(), "workload.json", 0.01, args)).unwrap()
    };
    let whole = json(&["--format", "json"]);
    assert_eq!(series_notices(&whole).len(), 1, "{}", whole["warnings"]);
    let slice = json(&["--format", "json", "--slice", "calls_by_name=put"]);
    assert!(series_notices(&slice).is_empty(), "{}", slice["warnings"]);
}
