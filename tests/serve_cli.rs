//! `rpcmeter serve` and `rpcmeter protos` as a user runs them: the built binary, real signals.
mod common;
use common::rpcmeter;
use rpcmeter::lab::proto::echo::{echo_service_client::EchoServiceClient, Message};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Output, Stdio};
use std::time::{Duration, Instant};

/// Waits for the child to exit by itself (killing it after 30 s so a broken build cannot
/// hang the suite), then collects what it printed.
fn finish(mut child: Child, mut stdout: impl Read) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("rpcmeter serve did not stop within 30 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).unwrap();
    let mut output = child.wait_with_output().unwrap();
    output.stdout = out;
    output
}

/// Starts `rpcmeter serve` with `args` and reads its first line: the child, the rest of its
/// stdout, and the address it listens on.
fn serve(args: &[&str]) -> (Child, BufReader<ChildStdout>, String) {
    let mut child = rpcmeter().arg("serve").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr = first.trim_end().strip_prefix("listening on ").unwrap_or_else(|| panic!("first line: {first:?}"));
    let addr = addr.to_string();
    (child, stdout, addr)
}

#[test]
fn serve_prints_where_it_listens_answers_and_drains_on_sigint_sigterm_and_sighup() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let (child, stdout, addr) = serve(&["--addr", "127.0.0.1:0", "--fib", "15", "--db-sleep", "10ms"]);
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "the real port: {addr}");

        let runtime = tokio::runtime::Runtime::new().unwrap();
        let reply = runtime.block_on(async {
            let mut client = EchoServiceClient::connect(format!("http://{addr}")).await.unwrap();
            client.echo(Message { content: "ping".into() }).await.unwrap().into_inner()
        });
        drop(runtime);
        assert_eq!(reply.content, "ping");

        // SAFETY: kill with a pid we spawned and a valid signal number.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let output = finish(child, stdout);
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "signal {signal}: {:?}\n{printed}", output.status);
        let echo_row: Vec<&str> = printed
            .lines()
            .find(|l| l.starts_with("/EchoService/echo"))
            .unwrap_or_else(|| panic!("no summary:\n{printed}"))
            .split_whitespace()
            .collect();
        assert_eq!(echo_row, ["/EchoService/echo", "1", "1", "0", "0"], "received ok failed rejected");
        assert!(printed.contains("server-side throughput"), "{printed}");
    }
}

/// Runs rpcmeter to completion and returns (exit code, stderr).
fn run(args: &[&str]) -> (Option<i32>, String) {
    let (code, _, stderr) = common::rpcmeter_with(args);
    (code, stderr)
}

#[test]
fn serve_refuses_a_port_in_use_bad_input_and_an_unreachable_database_with_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 12] = [
        (&["serve", "--addr", &addr], "cannot listen on"),
        (&["serve", "--addr", "127.0.0.1:0", "--db", "mysql://x"], "sqlite:PATH or postgres://"),
        (&["serve", "--addr", "127.0.0.1:0", "--model", "threaded", "--per-thread", "2"], "--per-thread"),
        (&["serve", "--addr", "127.0.0.1:0", "--db", "postgres://nobody@127.0.0.1:1/none"], "cannot use database"),
        (&["serve", "--addr", "127.0.0.1:0", "--fib", "46"], "--fib 46 is above 45"),
        (
            &["serve", "--addr", "127.0.0.1:0", "--per-thread", "18446744073709551615"],
            "--per-thread 18446744073709551615",
        ),
        (&["serve", "--addr", "127.0.0.1:0", "--model", "threaded", "--queue", "100000000000"], "--queue 100000000000"),
        (&["serve", "--addr", "127.0.0.1:0", "--queue", "18446744073709551615"], "--queue 18446744073709551615"),
        (&["serve", "--addr", "127.0.0.1:0", "--threads", "1025"], "--threads 1025 is above 1024"),
        (&["serve", "--addr", "127.0.0.1:0", "--db-pool", "100000000"], "--db-pool 100000000 is above 1024"),
        (
            &["serve", "--addr", "127.0.0.1:0", "--relax", "--kv-replica-lag", "5ms"],
            "--kv-replica-lag applies to --kv-consistency eventual only",
        ),
        (
            &["serve", "--addr", "127.0.0.1:0", "--kv-consistency", "eventual", "--kv-replica-lag", "2m"],
            "--kv-replica-lag 2m is above 1m",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.iter().any(|l| l.contains(expected)), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
        if expected != "sqlite:PATH or postgres://" {
            // Ours, not clap's usage text: exactly one line.
            assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        }
    }
}

#[test]
fn protos_writes_the_lab_protos_with_their_import_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("protos");
    let output = rpcmeter().args(["protos"]).arg(&out).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    for (name, text) in rpcmeter::lab::proto::SOURCES {
        assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), *text, "{name}");
    }
    // What it wrote compiles on its own, as ghz or grpcurl would read it.
    protox::compile(["echo.proto", "rpcmeter/lab/v1/lab.proto"], [&out]).unwrap();
}

#[test]
fn sigint_lets_a_call_in_flight_finish() {
    use rpcmeter::lab::proto::lab::{stats_client::StatsClient, test_service_client::TestServiceClient};
    use rpcmeter::lab::proto::lab::{DbRequest, StatsRequest};
    let (child, stdout, addr) = serve(&["--addr", "127.0.0.1:0", "--db-sleep", "1s"]);
    let url = format!("http://{addr}");
    let pid = child.id() as libc::pid_t;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let count = runtime.block_on(async {
        let mut test = TestServiceClient::connect(url.clone()).await.unwrap();
        let call = tokio::spawn(async move { test.db(DbRequest { rows: 2 }).await });
        let mut stats = StatsClient::connect(url).await.unwrap();
        while stats.get(StatsRequest {}).await.unwrap().into_inner().in_flight == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // SAFETY: kill with a pid we spawned and a valid signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        call.await.unwrap().expect("the call in flight is answered, not cut off").into_inner().count
    });
    assert_eq!(count, 2);
    let output = finish(child, stdout);
    assert!(output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("still in flight 0"), "{printed}");
    let db_row = printed.lines().find(|l| l.starts_with("/rpcmeter.lab.v1.TestService/Db")).unwrap();
    assert_eq!(db_row.split_whitespace().skip(1).collect::<Vec<_>>(), ["1", "1", "0", "0"]);
}

/// One runtime thread held by a long fib (about 8 s in a debug build): the drain cannot end
/// before that call does, and a second SIGINT stops the server at once, summary included.
#[test]
fn a_second_sigint_during_the_drain_stops_at_once() {
    use rpcmeter::lab::proto::lab::{stats_client::StatsClient, test_service_client::TestServiceClient};
    use rpcmeter::lab::proto::lab::{CpuRequest, StatsRequest};
    let (child, mut stdout, addr) = serve(&["--addr", "127.0.0.1:0", "--threads", "1", "--per-thread", "1"]);
    let url = format!("http://{addr}");
    let pid = child.id() as libc::pid_t;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut stats = StatsClient::connect(url.clone()).await.unwrap();
        let mut test = TestServiceClient::connect(url).await.unwrap();
        tokio::spawn(async move { test.cpu(CpuRequest { n: 45 }).await });
        // Stats answers until fib holds the only runtime thread.
        loop {
            match tokio::time::timeout(Duration::from_secs(1), stats.get(StatsRequest {})).await {
                Ok(reply) => assert_eq!(reply.unwrap().into_inner().in_flight, 0),
                Err(_) => break,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    // SAFETY: kill with a pid we spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let mut line = String::new();
    while !line.starts_with("stopping") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "no stopping line");
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let output = finish(child, stdout);
    drop(runtime);
    let printed = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}\n{printed}\n{stderr}", output.status);
    assert!(stderr.contains("second signal: stopped without waiting; calls still in flight: 1"), "{stderr}");
    let cpu_row = printed.lines().find(|l| l.starts_with("/rpcmeter.lab.v1.TestService/Cpu")).unwrap();
    assert_eq!(cpu_row.split_whitespace().skip(1).collect::<Vec<_>>(), ["1", "0", "0", "0"], "{printed}");
    assert!(printed.contains("still in flight 1"), "{printed}");
}

/// SIGTERM turns health NOT_SERVING before the drain: a Watch stream hears it, then ends.
#[test]
fn a_health_watch_sees_not_serving_after_sigterm() {
    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
    let (child, stdout, addr) = serve(&["--addr", "127.0.0.1:0"]);
    let pid = child.id() as libc::pid_t;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
        let mut health = HealthClient::new(channel.connect().await.unwrap());
        let mut watch = health.watch(HealthCheckRequest { service: String::new() }).await.unwrap().into_inner();
        let mut seen = vec![watch.message().await.unwrap().unwrap().status()];
        // SAFETY: kill with a pid we spawned and a valid signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        while let Ok(Ok(Some(reply))) = tokio::time::timeout(Duration::from_secs(10), watch.message()).await {
            seen.push(reply.status());
        }
        seen
    });
    assert_eq!(seen, [ServingStatus::Serving, ServingStatus::NotServing]);
    let output = finish(child, stdout);
    assert!(output.status.success(), "{:?}", output.status);
}

/// Plaintext on an address beyond loopback: one warning line on stderr; on loopback, none.
/// Zero bounds are refused in one line, exit 2.
#[test]
fn serve_warns_once_when_plaintext_listens_beyond_loopback() {
    for (addr, warnings) in [("127.0.0.1:0", 0), ("0.0.0.0:0", 1)] {
        let (child, stdout, _) = serve(&["--addr", addr]);
        // SAFETY: kill with a pid we spawned and a valid signal number.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
        let output = finish(child, stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("warning: serving plaintext")).count(),
            warnings,
            "{stderr}"
        );
    }
    for bound in ["--kv-max-bytes", "--db-max-rows"] {
        let (code, stderr) = run(&["serve", "--addr", "127.0.0.1:0", bound, "0"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(bound), "{stderr}");
    }
}

/// `--kv-max-bytes` takes a size with its unit; the first lines say the bounds.
#[test]
fn serve_takes_its_kv_bound_with_a_unit() {
    let (child, mut stdout, _) = serve(&["--addr", "127.0.0.1:0", "--kv-max-bytes", "1MiB", "--db-max-rows", "500"]);
    let mut shape = String::new();
    stdout.read_line(&mut shape).unwrap();
    assert!(shape.contains("at most 500 rows") && shape.contains("at most 1.0 MiB"), "{shape}");
    // SAFETY: kill with a pid we spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    assert!(finish(child, stdout).status.success());
    let (child, mut stdout, _) =
        serve(&["--addr", "127.0.0.1:0", "--kv-consistency", "eventual", "--kv-replica-lag", "250us"]);
    let mut shape = String::new();
    stdout.read_line(&mut shape).unwrap();
    assert!(shape.contains("storage eventual, replica lag 250us (at most 64.0 MiB)"), "{shape}");
    // SAFETY: kill with a pid we spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    assert!(finish(child, stdout).status.success());
    let (code, stderr) = run(&["serve", "--addr", "127.0.0.1:0", "--kv-max-bytes", "lots"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--kv-max-bytes"), "{stderr}");
}
