//! Issue 41, "Output and comfort": the commands that are not a run draw a page of their own
//! for `-o FILE.html` or `--format html` (compare, history and ping refused both; sweep and
//! merge wrote their text table or JSON into the .html file). Each page is drawn from real
//! runs against a server on 127.0.0.1 port 0, or from saved results, and holds no text table.
mod common;
use common::wait::wait_for_count;
use common::{echo_proto, outcome, rpcmeter, rpcmeter_with, run_echo, Behaviour, TestServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The page at `path`, whole: HTML from its first byte to its last, and none of the lines of
/// the command's text table (`table`).
fn page_at(path: &Path, table: &[&str]) -> String {
    let html = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    is_page(&html, table);
    html
}

fn is_page(html: &str, table: &[&str]) {
    let start = &html[..html.len().min(300)];
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"), "not a page: {start}");
    for line in table {
        assert!(!html.contains(line), "the text table is in the page ({line:?})");
    }
}

/// The part of `html` from the element with `id` to the first end of a table or a box.
fn element<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in the page"));
    let rest = &html[at..];
    let end = ["</table>", "</div>"].iter().filter_map(|e| rest.find(e)).min().unwrap_or(rest.len());
    &rest[..end]
}

/// The table row with `id`, to its end.
fn row<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in the page"));
    let rest = &html[at..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

/// A real run's result: `run --format json -o DIR/NAME` against `server`.
fn result(server: &TestServer, dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut cmd = run_echo(server.addr, extra);
    cmd.args(["--format", "json", "-o"]).arg(&path);
    let (_, _, stderr) = outcome(cmd);
    assert!(path.exists(), "no result written: {stderr}");
    path
}

const SAVED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/results");

/// The comparison's text table, line by line as `compare` prints it.
const COMPARE_TABLE: [&str; 2] = ["Per metric: each side's runs", "B / A [CI]"];

/// `compare A B -o page.html`: the verdicts (a regression among them), the forest plot with
/// the band of no change, and B's failed calls named first and in its row (-o was refused).
#[test]
fn compare_draws_its_verdicts_and_the_failed_calls_on_one_page() {
    let dir = tempfile::tempdir().unwrap();
    let good = TestServer::start(Behaviour::Echo);
    let a = result(&good, dir.path(), "a.json", &["-n", "400", "-c", "2"]);
    let failing = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 2 });
    let b = result(&failing, dir.path(), "b.json", &["-n", "400", "-c", "2"]);
    let out = dir.path().join("page.html");
    let mut cmd = rpcmeter();
    cmd.arg("compare").arg(&a).arg(&b).arg("-o").arg(&out);
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.is_empty(), "the page went to the file: {stdout}");
    let html = page_at(&out, &COMPARE_TABLE);

    // Half of B's calls failed: its error rate is a regression, said first and in its row.
    let errors = row(&html, "verdict-error_rate");
    assert!(errors.contains("class=\"verdict v-regression\">regression<"), "{errors}");
    let headline = element(&html, "headline");
    assert!(
        headline.contains("Regression: B is worse than A in ") && headline.contains("error rate: B is higher by"),
        "{headline}"
    );
    for metric in ["throughput", "p50", "p99"] {
        let verdict = row(&html, &format!("verdict-{metric}"));
        let words = ["regression", "improvement", "no change", "not judged"];
        assert!(words.iter().any(|v| verdict.contains(&format!("\">{v}</td>"))), "{verdict}");
    }
    let b_label = b.display().to_string();
    let disturbed = element(&html, "disturbed");
    assert!(disturbed.contains(&format!("B: {b_label}: ")) && disturbed.contains("of 400 calls failed"), "{disturbed}");
    let runs = element(&html, "runs");
    assert!(runs.contains("<tr class=\"run-failed\"><td>B</td>"), "B's row is marked: {runs}");
    // The forest plot: B / A per metric with its interval, and the band of no change.
    for plot in ["id=\"forest\"", "id=\"forest-errors\"", "no change that matters", "B = A"] {
        assert!(html.contains(plot), "no {plot} in the page");
    }
}

/// `compare --format html` (refused as a format) prints the page: a metric not judged says
/// why in its row and above the table, and the disturbed run is named with its disturbance.
#[test]
fn compare_format_html_says_why_a_metric_is_not_judged() {
    let (open, merged) = (format!("{SAVED}/open.json"), format!("{SAVED}/merged.json"));
    let (code, html, stderr) = rpcmeter_with(["compare", &open, &merged, "--format", "html"]);
    assert_eq!(code, Some(0), "{stderr}");
    is_page(&html, &COMPARE_TABLE);
    let throughput = row(&html, "verdict-throughput");
    assert!(throughput.contains("v-not-judged\">not judged<"), "{throughput}");
    assert!(throughput.contains("merged from 2 results"), "the reason is in the row: {throughput}");
    assert!(element(&html, "not-judged").contains("Not judged: throughput: "), "{html}");
    let disturbed = element(&html, "disturbed");
    assert!(disturbed.contains("A: ") && disturbed.contains("open.json: schedule lag p99"), "{disturbed}");
}

/// `run` recording into `history` against `addr`.
fn recorded(addr: std::net::SocketAddr, history: &Path, extra: &[&str]) -> Command {
    let mut cmd = rpcmeter();
    cmd.args(["run", "--plaintext", "--quiet", "--proto"])
        .arg(echo_proto())
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#, "--history"])
        .arg(history)
        .args(extra)
        .arg(addr.to_string());
    cmd
}

/// `history --format html -o trend.html`: the trend of the recorded runs with the failed
/// run (every call failed) and the interrupted one marked, in the plots and the table
/// (`--format` was no option of `history`).
#[test]
fn history_draws_the_trend_with_failed_and_interrupted_runs_marked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite3");
    let good = TestServer::start(Behaviour::Echo);
    for _ in 0..2 {
        let (code, _, stderr) = outcome(recorded(good.addr, &db, &["-n", "100"]));
        assert_eq!(code, Some(0), "{stderr}");
    }
    let refusing = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: u64::MAX });
    let (code, _, stderr) = outcome(recorded(refusing.addr, &db, &["-n", "20"]));
    assert_eq!(code, Some(1), "every call failed: {stderr}");
    // Interrupted once the server has answered calls: Ctrl-C ends it with what it measured.
    let another = TestServer::start(Behaviour::Echo);
    let mut child = recorded(another.addr, &db, &["-z", "60s", "--rps", "50"]).stdout(Stdio::null()).spawn().unwrap();
    wait_for_count("calls before the interrupt", 20, || another.calls());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().unwrap();

    let out = dir.path().join("trend.html");
    let mut cmd = rpcmeter();
    cmd.arg("history").arg("--history").arg(&db).args(["--format", "html", "-o"]).arg(&out);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let html = page_at(&out, &["id  started (UTC)"]);
    for plot in ["trend-throughput", "trend-latency", "trend-errors"] {
        assert!(html.contains(&format!("id=\"{plot}\"")), "no {plot}");
    }
    let runs = element(&html, "runs");
    assert_eq!(runs.matches("<tr").count(), 5, "a header and 4 runs: {runs}");
    assert_eq!(runs.matches("<tr class=\"run-failed\">").count(), 1, "{runs}");
    assert!(runs.contains("failed: every call failed (20 of 20)"), "{runs}");
    assert_eq!(runs.matches("<tr class=\"run-interrupted\">").count(), 1, "{runs}");
    assert!(runs.contains("cut short: interrupted"), "{runs}");
    let failures = element(&html, "failures");
    assert!(
        failures.contains(" failed: every call failed") && failures.contains("ended early (interrupted)"),
        "{failures}"
    );
    assert!(html.contains("failed run") && html.contains("run cut short"), "the plots' legends name the marks");

    // `history list -o FILE.html` is the same page, the list's text never in it.
    let list = dir.path().join("list.html");
    let mut cmd = rpcmeter();
    cmd.arg("history").arg("--history").arg(&db).args(["list", "-o"]).arg(&list);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(page_at(&list, &["id  started (UTC)"]).contains("id=\"trend-errors\""));
}

/// `ping -o ping.html`: the round trips' distribution (every sample in order, box plots,
/// violins) beside ping's table (-o was refused).
#[test]
fn ping_draws_the_round_trip_distribution() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ping.html");
    let mut cmd = rpcmeter();
    cmd.args(["ping", "--plaintext", "--proto"])
        .arg(echo_proto())
        .args(["--icmp", "tcp", "-n", "6", "--interval", "10ms", "-o"])
        .arg(&out)
        .arg(server.addr.to_string());
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let html = page_at(&out, &["  lost    ", "  count  "]);
    for part in ["id=\"ping-series\"", "id=\"ping-box\"", "id=\"ping-violin\"", "gRPC - tcp-connect (medians): "] {
        assert!(html.contains(part), "no {part} in the page");
    }
    assert!(html.contains("<td>count</td><td class=\"n\">6</td><td class=\"n\">6</td>"), "both sides' 6 samples");
}

/// `sweep ... run -o sweep.html`: throughput and latency against the load with the knee
/// (it wrote its text table into the .html file).
#[test]
fn sweep_draws_throughput_and_latency_against_the_load() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep.html");
    let mut cmd = rpcmeter();
    cmd.args(["sweep", "--clients", "1..3", "run", "--plaintext", "--quiet", "--no-save", "--proto"])
        .arg(echo_proto())
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#, "-n", "200", "-o"])
        .arg(&out)
        .arg(server.addr.to_string());
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let html = page_at(&out, &["calls/s         OK/s"]);
    for part in ["id=\"sweep-throughput\"", "id=\"sweep-latency\"", "id=\"sweep-failures\"", "Knee: "] {
        assert!(html.contains(part), "no {part} in the page");
    }
    assert_eq!(element(&html, "steps").matches("<tr>").count(), 4, "a header and 3 steps");
}

/// `merge -o merged.html` and `run --shards 2 -o run.html` write the merged run's page (they
/// wrote JSON and merge's text table into it); a command
/// without a page (calibrate, replay-info) and `--export table=FILE.html` refuse in one line,
/// exit 2, and write nothing there.
#[test]
fn an_html_file_gets_a_page_or_a_one_line_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.html");
    let mut cmd = rpcmeter();
    cmd.args(["merge", &format!("{SAVED}/open.json"), "-o"]).arg(&out);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(page_at(&out, &[]).contains("<svg"));

    // `run --shards` merges its shards' results: the page, not merge's table.
    let server = TestServer::start(Behaviour::Echo);
    let sharded = dir.path().join("sharded.html");
    let mut cmd = run_echo(server.addr, &["--shards", "2", "-n", "40", "-o"]);
    cmd.arg(&sharded);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(page_at(&sharded, &["  Calls:       "]).contains("<svg"));

    let table = dir.path().join("table.html");
    let (code, _, stderr) =
        outcome(run_echo(server.addr, &["-n", "5", "--export", &format!("table={}", table.display())]));
    assert_eq!((code, stderr.lines().count()), (Some(2), 1), "{stderr}");
    assert!(stderr.contains("give html="), "{stderr}");
    assert!(!table.exists());

    for (args, says) in [
        (vec!["calibrate", "--format", "html"], "[possible values: table, json]"),
        (vec!["replay-info", "log.bin", "-o", "x.html"], "unexpected argument '-o'"),
    ] {
        let (code, _, stderr) = rpcmeter_with(&args);
        assert_eq!((code, stderr.lines().count()), (Some(2), 1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
