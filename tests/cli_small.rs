//! Small defects of issue 30, each seen on main: `history --limit`, a file named like a run
//! id, a read-only history's exit code, `report`'s silence, durations in merge and ping.
use std::path::Path;
use std::process::{Command, Output};

fn rpcmeter(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A history at `dir`'s default place holding `n` runs; returns its path.
fn history(dir: &Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("data").join("rpcmeter").join("history.sqlite3");
    let history = rpcmeter::history::History::open(&path).unwrap();
    for i in 0..n {
        let result = serde_json::json!({"meta": {"started_at": format!("2024-05-01T10:00:0{i}.000Z")},
                                        "requests": {"total": 5, "ok": 5}});
        history.save(&result).unwrap();
    }
    path
}

#[test]
fn history_takes_limit_before_list() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path(), 6);
    let out = rpcmeter(dir.path(), &["history", "--limit", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A header and 4 runs.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 5, "{:?}", out);
    let out = rpcmeter(dir.path(), &["history", "--limit", "4", "show", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_file_named_like_a_run_id_wins() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path(), 5);
    std::fs::write(dir.path().join("5"), "not a result").unwrap();
    for command in ["merge", "report"] {
        let out = rpcmeter(dir.path(), &[command, "5"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("5: not"), "{command}: {}", stderr(&out));
    }
    // "#5" with no such file is the run.
    let out = rpcmeter(dir.path(), &["merge", "#5"]);
    assert!(stderr(&out).contains("no \"histograms\""), "{}", stderr(&out));
}

#[test]
fn a_read_only_history_is_an_output_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = history(dir.path(), 1);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    // Root ignores permissions: an immutable file is read-only to it too.
    let immutable = Command::new("chattr").arg("+i").arg(&path).status().is_ok_and(|s| s.success());
    let out = rpcmeter(dir.path(), &["history", "rm", "1"]);
    if immutable {
        let _ = Command::new("chattr").arg("-i").arg(&path).status();
    }
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("readonly"), "{}", stderr(&out));
}

#[test]
fn report_says_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    // The least a result holds for the report to draw it.
    let mut histogram = rpcmeter::record::shard::new_histogram();
    histogram.record(100).unwrap();
    let json = serde_json::json!({"requests": {"total": 1, "ok": 1}, "latency_us": {"p50": 100.0},
                                  "histograms": {"call_latency": rpcmeter::record::shard::to_text(&histogram)}});
    std::fs::write(dir.path().join("a.json"), json.to_string()).unwrap();
    let result = "a.json";
    let out = rpcmeter(dir.path(), &["report", result, "-o", "r.html"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("wrote the report of 1 run (") && said.trim_end().ends_with("to r.html"), "{said}");
    let out = rpcmeter(dir.path(), &["report", result, "-o", "-"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!DOCTYPE html>"));
    assert!(stderr(&out).contains("to standard output"), "{}", stderr(&out));
}

#[test]
fn merge_and_ping_write_durations_as_run_does() {
    let mut merged = rpcmeter::result::Run::default();
    merged.latency_us.stats = [("p50", 70.0), ("p90", 437.5), ("p99", 12345.0), ("p999", 1.5e6), ("max", 2e6)]
        .map(|(k, v)| (k.into(), v))
        .into();
    let table = rpcmeter::app::merge::table(&merged);
    assert!(table.contains("p50 70.0 µs, p90 437.5 µs, p99 12.35 ms, p99.9 1.500 s, max 2.000 s"), "{table}");
    assert_eq!(rpcmeter::app::ping::ms(std::time::Duration::from_micros(70)), "70.0 µs");
    assert_eq!(rpcmeter::app::ping::signed_ms(-70_000.0), "-70.0 µs");
}
