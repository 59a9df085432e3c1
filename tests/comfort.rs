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
}
