//! The run history end to end: `run` records its result (unless --no-save), `history list`
//! shows it, `history show ID --format json` gives back the run's own JSON byte for byte,
//! `history rm` removes it. Every command gets its own XDG_DATA_HOME, so no test writes into
//! the real home.
use rpcmeter::lab::{LabConfig, LabServer};
use std::path::Path;
use std::process::{Command, Output};

fn rpcmeter(data_home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter")).env("XDG_DATA_HOME", data_home).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn run_args<'a>(addr: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--plaintext", "--quiet", "--call", "EchoService/echo", "-n", "50", "--format", "json"];
    args.extend(extra);
    args.push(addr);
    args
}

/// The run ids `history list` prints, newest first.
fn listed(out: &Output) -> Vec<i64> {
    text(out)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().trim_start_matches('#').parse().unwrap())
        .collect()
}

#[test]
fn runs_are_recorded_listed_shown_exactly_and_removed() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let data_home = dir.path().join("data");
    let db = dir.path().join("runs.sqlite3");
    let db = db.to_str().unwrap();

    let mut printed = Vec::new();
    for extra in [&["--history", db][..], &["--history", db, "--name", "second"], &["--no-save"]] {
        let out = rpcmeter(&data_home, &run_args(&addr, extra));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
        printed.push(text(&out));
    }
    // --history, or --no-save: nothing went to the default history.
    assert!(!data_home.exists());

    let list = rpcmeter(&data_home, &["history", "--history", db, "list"]);
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    let ids = listed(&list);
    assert_eq!(ids.len(), 2, "{}", text(&list));
    let (second, first) = (ids[0], ids[1]);
    assert!(text(&list).lines().nth(1).unwrap().contains("second"), "{}", text(&list));
    assert!(text(&list).contains("EchoService.echo"), "{}", text(&list));

    for (id, stdout) in [(first, &printed[0]), (second, &printed[1])] {
        let show = rpcmeter(&data_home, &["history", "--history", db, "show", &id.to_string(), "--format", "json"]);
        assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
        assert_eq!(&text(&show), stdout, "run #{id}");
    }
    let summary = rpcmeter(&data_home, &["history", "show", &format!("#{second}"), "--history", db]);
    assert!(text(&summary).starts_with(&format!("run #{second} \"second\"")), "{}", text(&summary));
    assert!(text(&summary).contains("50 (50 ok, 0 failed)"), "{}", text(&summary));

    // --no-save and --history contradict each other.
    let both = rpcmeter(&data_home, &run_args(&addr, &["--no-save", "--history", db]));
    assert_eq!(both.status.code(), Some(2));

    let rm = rpcmeter(&data_home, &["history", "--history", db, "rm", &first.to_string()]);
    assert!(rm.status.success(), "{}", String::from_utf8_lossy(&rm.stderr));
    let show = rpcmeter(&data_home, &["history", "--history", db, "show", &first.to_string()]);
    assert_eq!(show.status.code(), Some(2));
    assert!(show.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&show.stderr).lines().count(), 1, "{}", String::from_utf8_lossy(&show.stderr));
    let rm = rpcmeter(&data_home, &["history", "--history", db, "rm", &first.to_string()]);
    assert_eq!(rm.status.code(), Some(2));
    assert_eq!(listed(&rpcmeter(&data_home, &["history", "--history", db])), [second]);
}

#[test]
fn the_default_history_follows_xdg_data_home_and_never_fails_a_run() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();

    // No --history: $XDG_DATA_HOME/rpcmeter/history.sqlite3.
    let data_home = dir.path().join("data");
    let out = rpcmeter(&data_home, &run_args(&addr, &[]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(data_home.join("rpcmeter/history.sqlite3").exists());
    let list = rpcmeter(&data_home, &["history", "list"]);
    assert_eq!(listed(&list).len(), 1, "{}{}", text(&list), String::from_utf8_lossy(&list.stderr));

    // A default history that cannot be written (its directory would be under a file): the
    // run still exits 0, with its report and one warning line.
    let blocked = dir.path().join("a-file");
    std::fs::write(&blocked, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .env_remove("XDG_DATA_HOME")
        .env("HOME", &blocked)
        .args(run_args(&addr, &[]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.starts_with("rpcmeter: warning: ") && stderr.lines().count() == 1, "{stderr}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();

    // The same history asked for with --history: an output failure, exit 1, report kept.
    let db = blocked.join("history.sqlite3");
    let out = rpcmeter(&data_home, &run_args(&addr, &["--history", db.to_str().unwrap()]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
}

/// compare, report and merge take history ids ("1", "#2") as well as files.
#[test]
fn compare_report_and_merge_read_history_ids() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let data_home = dir.path().join("data");
    for _ in 0..2 {
        let out = rpcmeter(&data_home, &run_args(&addr, &["--interval", "100ms"]));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let merged = rpcmeter(&data_home, &["merge", "1", "#2", "--format", "json"]);
    assert!(merged.status.success(), "{}", String::from_utf8_lossy(&merged.stderr));
    let merged: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(merged["requests"]["total"], 100);
    let compare = rpcmeter(&data_home, &["compare", "1", "2"]);
    assert!(compare.status.success(), "{}", String::from_utf8_lossy(&compare.stderr));
    let page = dir.path().join("r.html");
    let report = rpcmeter(&data_home, &["report", "1", "2", "-o", page.to_str().unwrap()]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
    let missing = rpcmeter(&data_home, &["compare", "1", "99"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// `demo` runs four measurements the user did not ask for: they stay out of the history
/// unless `demo --save`; the commands it prints can be pasted (the JSON quoted).
#[test]
fn a_demo_is_not_recorded_unless_saved() {
    let home = tempfile::tempdir().unwrap();
    let demo = |save: bool| {
        let mut args = vec!["demo", "--duration", "200ms"];
        args.extend(save.then_some("--save"));
        let out = rpcmeter(home.path(), &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        text(&out)
    };
    let shown = demo(false);
    assert!(shown.contains(r#"-d '{"content":"hello"}'"#), "{shown}");
    let list = rpcmeter(home.path(), &["history", "list"]);
    assert!(listed(&list).is_empty(), "demo recorded: {}", text(&list));
    demo(true);
    let list = rpcmeter(home.path(), &["history", "list"]);
    assert_eq!(listed(&list).len(), 4, "{}", text(&list));
}
