//! What a new user of ghz or grpcurl expects of `run`'s outputs, against a real server on
//! 127.0.0.1: memory that follows the calls in flight, a report that survives a failing side
//! output, no empty file after a failed run, Ctrl-C while reflection waits, every breached
//! assertion named with units, errors grouped by the server's message, result metadata,
//! an HDR log HdrHistogram's reader accepts, exports beside the report.
mod common;
use common::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn memory_follows_calls_in_flight_not_the_flags() {
    let server = TestServer::start(Behaviour::Echo);
    // 100,000 workers once cost 850 MB for 10 calls; 10 calls need 10 workers.
    let r = json_of(run_echo(server.addr, &["-c", "100000", "-n", "10"]));
    assert_eq!(r["requests"]["total"], 10);
    let rss = r["client"]["max_rss_bytes"].as_u64().unwrap();
    assert!(rss < 100 << 20, "max RSS {} MiB", rss >> 20);
    // An open loop starts workers as calls need them, whatever --max-in-flight allows.
    let r = json_of(run_echo(server.addr, &["--rps", "200", "--max-in-flight", "100000000", "-n", "20"]));
    assert_eq!(r["requests"]["total"], 20);
    let rss = r["client"]["max_rss_bytes"].as_u64().unwrap();
    assert!(rss < 100 << 20, "max RSS {} MiB", rss >> 20);
}

#[test]
fn a_failing_side_output_keeps_the_report_and_exits_1() {
    let server = TestServer::start(Behaviour::Echo);
    let cmd = run_echo(server.addr, &["-n", "50", "--csv-details", "/dev/full"]);
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.contains("Summary:") && stdout.contains("Calls:       50"), "{stdout}");
    assert!(stderr.contains("/dev/full") && stderr.lines().count() == 1, "{stderr}");
}

#[test]
fn a_failed_run_leaves_no_empty_result_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut cmd = run_echo(closed, &["-n", "1", "-o"]);
    cmd.arg(&out);
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!out.exists(), "a 0-byte result was left behind");
}

#[test]
fn ctrl_c_while_reflection_waits_ends_at_once() {
    // Accepts connections and never answers: reflection would wait for --connect-timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (arrived, request_arrived) = std::sync::mpsc::channel();
    let (test_over, over) = std::sync::mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let _ = conn.read(&mut [0; 64]);
        let _ = arrived.send(());
        // Held, unanswered, until the test ends.
        let _ = over.recv();
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--connect-timeout", "60s", "--call", "EchoService/echo"])
        .arg(addr.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    request_arrived.recv_timeout(wait::LIMIT).expect("the client's first bytes reached the server");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // Far short of the 60 s connect timeout that would end it without the signal.
    let status = wait::wait_for("the run to end after Ctrl-C", Duration::from_secs(10), || {
        child.try_wait().unwrap().ok_or("still running while reflection connects")
    });
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    drop(test_over);
    held.join().unwrap();
}

#[test]
fn every_breached_assertion_is_named_with_units() {
    let server = TestServer::start(Behaviour::Echo);
    let cmd = run_echo(server.addr, &["-n", "100", "--assert", "p99<1ns,p42<1h,rps>1000000000,error_rate<=0%"]);
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("p99<1ns") && stderr.contains("rps>1000000000"), "{stderr}");
    assert!(!stderr.contains("p42<1h") && !stderr.contains("error_rate"), "{stderr}");
    assert!(stdout.contains("Assert p42<1h: ok (") && stdout.contains(" µs)") || stdout.contains(" ms)"), "{stdout}");
    assert!(stdout.contains("calls/s)"), "{stdout}");
}

#[test]
fn errors_are_grouped_by_the_servers_message() {
    let server = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 2 });
    let r = json_of(run_echo(server.addr, &["-n", "40", "-c", "1"]));
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(errors[0]["message"], "rejected by the test server");
    assert_eq!(errors[0]["count"], 20);
}

#[test]
fn results_carry_metadata_and_more_percentiles() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["-n", "30", "--name", "baseline", "--tag", "host=ci", "--tag", "build=7"]));
    let meta = &r["meta"];
    assert_eq!(meta["name"], "baseline");
    assert_eq!(meta["tags"]["host"], "ci");
    assert_eq!(meta["tags"]["build"], "7");
    assert_eq!(meta["ended"], "completed");
    assert_eq!(meta["rpcmeter_version"], env!("CARGO_PKG_VERSION"));
    assert!(meta["arguments"].as_array().unwrap().iter().any(|a| a == "--name"));
    assert!(meta["started_at"].as_str().unwrap().ends_with('Z'));
    // Every notice also comes as a structured warning; a loopback target shares our cores.
    let warnings = r["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), r["notices"].as_array().unwrap().len());
    assert!(warnings.iter().any(|w| w["kind"] == "shared_cores"), "{warnings:?}");
    assert!(warnings.iter().any(|w| w["kind"] == "closed_loop"), "{warnings:?}");
    for key in ["p10", "p25", "p50", "p999", "p9999"] {
        assert!(r["latency_us"][key].as_f64().unwrap() > 0.0, "{key}");
    }
}

/// A run of a few ms with every call OK: its calls/s and OK calls/s are one number, in the
/// table and in the JSON, and the JSON's rates are its counts over its own `duration_s`.
/// Before, the table's OK calls/s (from `duration_s`, written to the µs) and calls/s (from
/// the window to the ns) differed in their last digit (`2123.8 calls/s (2124.0 ok/s)`).
#[test]
fn a_short_runs_calls_and_ok_calls_per_second_agree() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    for _ in 0..3 {
        let mut cmd = run_echo(server.addr, &["-n", "5", "--export"]);
        cmd.arg(format!("json={}", json.display()));
        let (code, stdout, stderr) = outcome(cmd);
        assert_eq!(code, Some(0), "{stderr}");
        let line = stdout.lines().find(|l| l.trim_start().starts_with("Throughput:")).expect(&stdout);
        let numbers: Vec<&str> = line.split(['(', ' ']).filter(|w| w.parse::<f64>().is_ok()).collect();
        assert_eq!(numbers.len(), 2, "{line}");
        assert_eq!(numbers[0], numbers[1], "every call was OK: {line}");

        let text = std::fs::read_to_string(&json).unwrap();
        let run = rpcmeter::result::Run::parse(&text).unwrap();
        assert_eq!((run.requests.total, run.requests.ok), (5, 5), "{text}");
        assert_eq!(run.ok_rps, Some(run.throughput_rps), "{text}");
        // What a reader computes from the file is what the file says.
        assert_eq!(run.ok_calls_per_s(), run.throughput_rps, "{text}");
        assert_eq!(format!("{:.1}", run.throughput_rps), numbers[0], "the table prints the JSON's rate");
        // The window in a unit that keeps its digits, as the JSON has it (a 2 ms run read 0.00 s).
        let window = rpcmeter::units::duration(run.window());
        assert!(stdout.contains(&format!("  Duration:    {window}\n")) && !window.starts_with("0.0"), "{stdout}");
    }
}

#[test]
fn the_warm_up_line_writes_its_duration_as_the_duration_line_does() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = run_echo(server.addr, &["-z", "300ms", "--warmup", "200ms", "--export"]);
    cmd.arg(format!("json={}", json.display()));
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let run = rpcmeter::result::Run::parse(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let warmup = run.warmup.as_ref().expect("a warm-up");
    let took = rpcmeter::units::duration(rpcmeter::units::from_secs(warmup.duration_s).unwrap());
    // "Warm-up:     200.12 ms, …" beside "Duration:    300.05 ms" (it read "0.20 s").
    assert!(stdout.contains(&format!("  Warm-up:     {took}, ")) && took.ends_with(" ms"), "{stdout}");
}

#[test]
fn exports_beside_the_report_and_a_readable_hdr_log() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let (json, csv, hlog) = (dir.path().join("r.json"), dir.path().join("r.csv"), dir.path().join("r.hlog"));
    let mut cmd = run_echo(server.addr, &["--rps", "400", "-z", "1s", "--interval", "250ms"]);
    cmd.arg("--export").arg(format!("json={}", json.display()));
    cmd.arg("--export").arg(format!("csv={}", csv.display()));
    cmd.arg("--hdr-log").arg(&hlog);
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("Latency histogram (log scale"), "{stdout}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let total = r["requests"]["total"].as_u64().unwrap();
    assert!((390..=410).contains(&total), "{total}");
    // Interval rows: no float noise such as 1.3489849999999999 in any cell.
    let rows = std::fs::read_to_string(&csv).unwrap();
    for cell in rows.lines().skip(1).flat_map(|l| l.split(',')) {
        let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 6, "{cell} in\n{rows}");
    }
    // HdrHistogram's own reader accepts the log, with the header its tools write.
    let log = std::fs::read(&hlog).unwrap();
    assert!(log.starts_with(b"#[Histogram log format version 1.3]\n"));
    assert!(String::from_utf8_lossy(&log).contains("\"StartTimestamp\",\"Interval_Length\""));
    let mut deserializer = hdrhistogram::serialization::Deserializer::new();
    let mut calls = 0;
    for entry in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&log) {
        if let hdrhistogram::serialization::interval_log::LogEntry::Interval(h) = entry.unwrap() {
            let bytes =
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, h.encoded_histogram()).unwrap();
            let hist: hdrhistogram::Histogram<u64> = deserializer.deserialize(&mut bytes.as_slice()).unwrap();
            calls += hist.len();
        }
    }
    assert_eq!(calls, total);
}

/// Starts a long run writing `out` (and its exports); the caller waits for its calls.
fn long_run_into(server: &TestServer, dir: &std::path::Path) -> std::process::Child {
    let mut cmd = run_echo(server.addr, &["-c", "2", "-z", "60s", "--format", "json", "-o"]);
    cmd.arg(dir.join("r.json"));
    cmd.arg("--export").arg(format!("csv={}", dir.join("r.csv").display()));
    cmd.arg("--csv-details").arg(dir.join("calls.csv"));
    cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

#[test]
fn a_killed_run_leaves_the_earlier_results_whole() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let names = ["r.json", "r.csv", "calls.csv"];
    for name in names {
        std::fs::write(dir.path().join(name), format!("a good earlier {name}\n")).unwrap();
    }
    let mut child = long_run_into(&server, dir.path());
    wait::wait_for_count("calls at the server", 20, || server.calls());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    for name in names {
        let kept = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(kept, format!("a good earlier {name}\n"), "{name} was overwritten by a killed run");
    }
}

#[test]
fn a_hang_up_ends_the_run_like_sigterm_with_a_partial_report() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r.json"), "old").unwrap();
    let child = long_run_into(&server, dir.path());
    wait::wait_for_count("calls at the server", 20, || server.calls());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["partial"], true);
    assert!(r["requests"]["total"].as_u64().unwrap() > 0);
    assert_accounted(&r);
    let calls = std::fs::read_to_string(dir.path().join("calls.csv")).unwrap();
    assert!(calls.lines().count() > 1, "{calls}");
    // Nothing but the three outputs: no temporary file left beside them.
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["calls.csv", "r.csv", "r.json"]);
}

#[test]
fn outputs_are_written_whole_and_private() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = run_echo(server.addr, &["-n", "20", "-o"]);
    cmd.arg(dir.path().join("r.txt"));
    cmd.arg("--export").arg(format!("json={}", dir.path().join("r.json").display()));
    cmd.arg("--hdr-log").arg(dir.path().join("r.hlog"));
    let (code, _, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["r.hlog", "r.json", "r.txt"], "a temporary file was left behind");
    for name in &left {
        let mode = std::fs::metadata(dir.path().join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}: {mode:o}");
    }
    // A device stays a device: -o /dev/null is written through, not replaced.
    let (code, _, stderr) = outcome({
        let mut cmd = run_echo(server.addr, &["-n", "5", "-o", "/dev/null"]);
        cmd.arg("--export").arg("json=/dev/stdout");
        cmd
    });
    assert_eq!(code, Some(0), "{stderr}");
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => found.extend(files_under(&path)),
            false => found.push(path),
        }
    }
    found
}

#[test]
fn credentials_reach_no_result_nor_the_history_and_both_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |extra: &[&str], out: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rpcmeter"));
        cmd.env("XDG_DATA_HOME", &data).env("HOME", dir.path());
        cmd.args(["run", "--plaintext", "--quiet", "--proto"]).arg(echo_proto());
        cmd.args(["--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#, "-n", "20", "--format", "json"]);
        cmd.args(extra).arg("-o").arg(dir.path().join(out));
        cmd.arg(server.addr.to_string());
        let (code, stdout, stderr) = outcome(cmd);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(!stdout.contains("s3cr3t") && !stderr.contains("s3cr3t"));
    };
    let metadata = r#"{"authorization":"Bearer s3cr3t-XYZ","x-run":"7"}"#;
    let junit = format!("junit={}", dir.path().join("r.xml").display());
    let nowhere = |secrets: &[&str]| {
        for path in files_under(dir.path()) {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for secret in secrets {
                assert!(!text.contains(secret), "{secret} in {}", path.display());
            }
        }
    };
    run(&["-m", metadata, "--tag", "api-token=tok-ABC", "--tag", "host=ci", "--export", &junit], "r.json");
    let history = data.join("rpcmeter").join("history.sqlite3");
    assert!(history.exists(), "not recorded");
    nowhere(&["s3cr3t-XYZ", "tok-ABC"]);
    // A name of the user's own, kept out with --redact.
    run(&["-m", r#"{"X-Tenant":"acme-QQQ"}"#, "--redact", "x-tenant"], "r2.json");
    nowhere(&["acme-QQQ"]);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let arguments = r["meta"]["arguments"].to_string();
    assert!(
        arguments.contains("REDACTED") && arguments.contains("x-run") && arguments.contains("host=ci"),
        "{arguments}"
    );
    assert_eq!(r["meta"]["tags"]["api-token"], "REDACTED");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&history), 0o600);
    assert_eq!(mode(&data.join("rpcmeter")), 0o700);
    assert_eq!(mode(&dir.path().join("r.json")), 0o600);
    assert_eq!(mode(&dir.path().join("r.xml")), 0o600);
}

#[test]
fn kube_keeps_credentials_in_a_secret_and_out_of_the_job() {
    let metadata = r#"{"authorization":"Bearer s3cr3t-XYZ","x-run":"7"}"#;
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args([
            "kube",
            "--shards",
            "2",
            "--output",
            "json",
            "run",
            "--plaintext",
            "--call",
            "EchoService/echo",
            "-m",
            metadata,
            "svc:9000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    let item = |kind: &str| list["items"].as_array().unwrap().iter().find(|o| o["kind"] == kind).unwrap().clone();
    let (secret, job) = (&item("Secret"), &item("Job"));
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["stringData"]["metadata"], metadata, "the pods must still send the real metadata");
    assert_eq!(job["kind"], "Job");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert!(!job.to_string().contains("s3cr3t"), "{job}");
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.windows(2).any(|w| w == ["-m", "$(RPCMETER_METADATA)"]), "{args:?}");
    assert_eq!(container["env"][0]["name"], "RPCMETER_METADATA");
    assert_eq!(container["env"][0]["valueFrom"]["secretKeyRef"]["name"], secret["metadata"]["name"]);
}

/// Answers every call with a status whose message would set the terminal's title and forge a line.
struct Hostile;

const HOSTILE: &str = "\x1b]0;pwned\x07\nFAKE LINE";

#[tonic::async_trait]
impl rpcmeter::lab::proto::echo::echo_service_server::EchoService for Hostile {
    async fn echo(
        &self,
        _: tonic::Request<rpcmeter::lab::proto::echo::Message>,
    ) -> Result<tonic::Response<rpcmeter::lab::proto::echo::Message>, tonic::Status> {
        Err(tonic::Status::internal(HOSTILE))
    }
}

#[test]
fn a_servers_message_cannot_drive_the_terminal() {
    use rpcmeter::lab::proto::echo::echo_service_server::EchoServiceServer;
    let server = ThreadServer::start(|| tonic::service::Routes::new(EchoServiceServer::new(Hostile)));
    let (code, stdout, stderr) = outcome(run_echo(server.addr, &["-n", "3"]));
    assert_eq!(code, Some(1), "{stderr}");
    let raw = |c: char| c.is_control() && c != '\n';
    assert!(!stdout.chars().any(raw) && !stderr.chars().any(raw), "{stdout:?}\n{stderr:?}");
    let line = stdout.lines().find(|l| l.contains("INTERNAL: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.ends_with(r"INTERNAL: \x1b]0;pwned\x07\nFAKE LINE"), "{line}");
    assert!(!stdout.lines().any(|l| l.starts_with("FAKE LINE")), "{stdout}");
    // An error line carries it escaped too (ping's warm-up call fails with it).
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["ping", "--plaintext", "-n", "1", "--proto"])
        .arg(echo_proto())
        .arg(server.addr.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(!stderr.trim_end().chars().any(|c| c.is_control()), "{stderr:?}");
    assert!(stderr.contains(r"\x1b]0;pwned\x07\nFAKE LINE"), "{stderr}");
}

#[test]
fn a_full_disk_is_one_line_and_a_closed_pipe_is_quiet() {
    let bin = env!("CARGO_BIN_EXE_rpcmeter");
    for what in [&["completions", "bash"][..], &["man"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = Command::new(bin).args(what).stdout(full).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{what:?}: {stderr}");
        assert!(stderr.contains("standard output") && !stderr.contains("panicked"), "{what:?}: {stderr}");

        // `| head -c10` that has read its fill: the reading end is closed before the write.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(bin).args(what).stdout(writer).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{what:?}: {stderr}");
        assert_eq!(stderr, "", "{what:?}");
    }
}
