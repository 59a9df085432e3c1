//! Issue 41, "Output and comfort": what a user meets around a run, each seen on main.
mod common;
use common::{echo_proto, outcome, rpcmeter, Behaviour, TestServer};

/// In a CI log (stderr not a terminal) a run says it is alive every 10 s, as k6 does, and
/// only that often.
#[test]
fn a_run_without_a_terminal_prints_a_progress_line_every_ten_seconds() {
    let server = TestServer::start(Behaviour::Echo);
    let mut cmd = rpcmeter();
    cmd.args(["run", "--plaintext", "--no-save", "--proto"])
        .arg(echo_proto())
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#, "--rps", "20", "-z", "11s"])
        .arg(server.addr.to_string());
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("progress ")).collect();
    assert_eq!(lines.len(), 1, "one line at 10 s: {stderr}");
    assert!(lines[0].contains(" calls/s") && lines[0].contains("errors"), "{}", lines[0]);
    // Run time to a tenth, as the sharded run's line ("progress 10.000 s" it read).
    assert!(lines[0].starts_with("progress 10.0 s:"), "{}", lines[0]);
}

/// `-o result.html` writes the HTML report (it wrote the text table), and `--format html`
/// is a format like the others (it was refused).
#[test]
fn an_html_output_file_gets_the_html_report() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("result.html");
    let mut cmd = common::run_echo(server.addr, &["-n", "20", "-o"]);
    cmd.arg(&page);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"), "{}", &html[..html.len().min(300)]);

    let (code, stdout, stderr) = outcome(common::run_echo(server.addr, &["-n", "20", "--format", "html"]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("<!DOCTYPE html>"), "{}", &stdout[..stdout.len().min(300)]);
}

/// `man run` prints rpcmeter-run(1) with run's own flags (only the top level had a page);
/// an unknown command is one line and exit 2.
#[test]
fn each_command_has_its_man_page() {
    let (code, page, stderr) = common::rpcmeter_with(["man", "run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(page.contains(".TH rpcmeter-run 1") && page.contains("\\-\\-workload"), "{}", &page[..page.len().min(400)]);
    // As git's pages: named git-commit(1), used as `git commit` (it read `rpcmeter-run [--call]`,
    // a program there is not).
    assert!(page.contains(".SH SYNOPSIS\n\\fBrpcmeter run\\fR "), "{}", &page[..page.len().min(600)]);
    let (code, _, stderr) = common::rpcmeter_with(["man", "nope"]);
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("man nope: no such command"), "{stderr}");
}

/// `run --help` comes in groups (it was 271 lines under one "Options:"), and TARGET's help
/// names the address lists.
#[test]
fn run_help_is_grouped_and_names_every_target_form() {
    let (code, help, _) = common::rpcmeter_with(["run", "--help"]);
    assert_eq!(code, Some(0));
    for heading in
        ["What to call:", "Streams:", "Load:", "Warm-up, retries and deadlines:", "Connections:", "Output:", "Shards:"]
    {
        assert!(help.lines().any(|l| l == heading), "no {heading:?} in run --help");
    }
    assert!(help.contains("ipv4:") && help.contains("ipv6:"), "TARGET's help");
    assert!(help.contains("flows") && help.contains("checks"), "--workload's help");
}

/// A SIGKILL leaves `.NAME.XXXXXX.tmp` beside the output; the next run writing NAME removes
/// such orphans, and never the file of a writer still alive (it holds its lock).
#[test]
fn a_killed_runs_temporary_file_is_removed_by_the_next_run() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let orphan = dir.path().join(".r.json.a1B2c3.tmp");
    std::fs::File::create(&orphan).unwrap().set_modified(old).unwrap();
    let live = dir.path().join(".r.json.Z9y8X7.tmp");
    let held = std::fs::File::create(&live).unwrap();
    held.set_modified(old).unwrap();
    held.lock().unwrap();
    let mut cmd = common::run_echo(server.addr, &["-n", "10", "--format", "json", "-o"]);
    cmd.arg(dir.path().join("r.json"));
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!orphan.exists(), "the orphan stayed");
    assert!(live.exists(), "a live writer's file was removed");
    assert!(dir.path().join("r.json").exists());
}

/// A history written before histories were made 0600 is made private when next opened.
#[test]
fn an_old_world_readable_history_becomes_private() {
    use std::os::unix::fs::PermissionsExt;
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite3");
    let run = |history: &std::path::Path| {
        let mut cmd = rpcmeter();
        cmd.args(["run", "--plaintext", "--quiet", "--proto"])
            .arg(echo_proto())
            .args(["--call", "EchoService/echo", "-d", "{}", "-n", "5", "--history"])
            .arg(history)
            .arg(server.addr.to_string());
        let (code, _, stderr) = outcome(cmd);
        assert_eq!(code, Some(0), "{stderr}");
    };
    run(&history);
    std::fs::set_permissions(&history, std::fs::Permissions::from_mode(0o644)).unwrap();
    run(&history);
    let mode = std::fs::metadata(&history).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
}

/// The HTML report's per-name table prints latencies as the summary does (it printed raw µs
/// with three decimals: 684.031).
#[test]
fn the_reports_breakdown_tables_print_readable_latencies() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("w.html");
    let saved = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/results/workload.json");
    let (code, _, stderr) =
        common::rpcmeter_with([std::ffi::OsStr::new("report"), saved.as_os_str(), "-o".as_ref(), page.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    let html = std::fs::read_to_string(&page).unwrap();
    let table = &html[html.find("<h3>By call name</h3>").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<th>p50</th>") && table.contains(" µs</td>"), "{table}");
    assert!(!table.contains(".031"), "{table}");
}
