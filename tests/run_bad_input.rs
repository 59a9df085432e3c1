//! `rpcmeter run` with bad input, against the built binary: each case must exit with the
//! code docs/design.md, "Exit codes", gives (2 bad usage or input, 1 the run failed), say
//! what is wrong on exactly one stderr line, print no report and never panic.
mod common;
use std::path::Path;

struct Case {
    name: &'static str,
    args: Vec<String>,
    code: i32,
    /// Must appear in the stderr line.
    keyword: String,
}

fn case(name: &'static str, code: i32, keyword: &str, args: Vec<String>) -> Case {
    Case { name, args, code, keyword: keyword.to_owned() }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn bad_input_is_one_line_and_the_right_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/echo.proto").display().to_string();
    let broken = write(d, "broken.proto", "syntax = \"proto3\";\nmessage M {\n  string name = ;\n}\n");
    let missing_import = write(d, "imports.proto", "syntax = \"proto3\";\nimport \"nowhere/gone.proto\";\n");
    let not_a_set = write(d, "text.pb", "syntax = \"proto3\"; message M {}");
    let bad_line = write(d, "calls.jsonl", "{\"content\": \"a\"}\n{\"content\": 7}\n");
    let absent = d.join("absent.json").display().to_string();
    // A port nothing listens on: bound by us, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    // Input errors must be found before any connection: the target refuses connections, so
    // a case that got as far as calling would fail with 1, not 2.
    let target = closed.as_str();
    let at = |target: &str, args: &[&str]| -> Vec<String> {
        ["--plaintext"].iter().chain(args).chain([&target]).map(|a| a.to_string()).collect()
    };
    let run = |args: &[&str]| at(target, args);
    let echo_flags = ["--proto", echo.as_str(), "--call", "EchoService/echo"];
    // The echo method with `extra` flags.
    let echo = |extra: &[&str]| run(&[&echo_flags[..], extra].concat());
    let call = |call: &str| run(&[echo_flags[0], echo_flags[1], "--call", call]);

    let cases = vec![
        case("broken .proto", 2, "broken.proto:3:17", run(&["--proto", &broken, "--call", "M/x"])),
        case(
            "missing import",
            2,
            "import 'nowhere/gone.proto' not found",
            run(&["--proto", &missing_import, "--call", "M/x"]),
        ),
        case("missing proto file", 2, "no such file", run(&["--proto", "/no/x.proto", "--call", "M/x"])),
        case("unknown service", 2, "did you mean \"EchoService\"", call("EchoServce/echo")),
        case("unknown method", 2, "no method \"ecko\"", call("EchoService/ecko")),
        case("call without a method", 2, "SERVICE/METHOD", call("EchoService")),
        case("malformed JSON", 2, "invalid JSON", echo(&["-d", "{\"content\": "])),
        case("mistyped JSON field", 2, "field \"content\" (string)", echo(&["-d", "{\"content\": 5}"])),
        case("unknown JSON field", 2, "'contnt'", echo(&["-d", "{\"contnt\": \"x\"}"])),
        case("unknown template", 2, "{{.Nope}}", echo(&["-d", "{\"content\": \"{{.Nope}}\"}"])),
        case("missing -D file", 2, absent.as_str(), echo(&["-D", &absent])),
        case("bad replayed line", 2, "line 2: field \"content\"", echo(&["-D", &bad_line])),
        case("bad metadata JSON", 2, "-m: invalid JSON", echo(&["-m", "{\"a\": "])),
        case("bad metadata key", 2, "\"bad key\"", echo(&["-m", "{\"bad key\": \"v\"}"])),
        case("bad duration", 2, "5parsecs", echo(&["-z", "5parsecs"])),
        case("zero rate", 2, "--rps", echo(&["--rps", "0"])),
        case("negative rate", 2, "-5", echo(&["--rps", "-5"])),
        case("vanishing rate", 2, "1e-20", echo(&["--rps", "1e-20"])),
        case("ramp longer than the run", 2, "--ramp", echo(&["--ramp", "10s", "-z", "1s"])),
        case("more threads than connections", 2, "--connections", echo(&["--threads", "2"])),
        case("warm-up with bursts", 2, "--warmup", echo(&["--burst", "4", "--rounds", "2", "--warmup", "1s"])),
        case("count not a number", 2, "abc", echo(&["-n", "abc"])),
        case("zero concurrency", 2, "concurrency", echo(&["-c", "0"])),
        case("unwritable -o", 2, "/nonexistent/dir/out.json", echo(&["-o", "/nonexistent/dir/out.json"])),
        case("unknown --format", 2, "xml", echo(&["--format", "xml"])),
        case("target without a port", 2, "localhost", at("localhost", &echo_flags)),
        case("target port out of range", 2, "host:99999", at("host:99999", &echo_flags)),
        case("--proto and --protoset", 2, "--protoset", echo(&["--protoset", &not_a_set])),
        case(
            "protoset not a descriptor set",
            2,
            "not a FileDescriptorSet",
            run(&["--protoset", &not_a_set, "--call", "EchoService/echo"]),
        ),
        case("unreachable target", 1, target, echo(&["-n", "1"])),
        case("unreachable target, reflection", 1, target, run(&["--call", "EchoService/echo", "-n", "1"])),
    ];

    assert!(cases.len() >= 20);
    check(&cases);
}

/// Runs every case; fails the test with a list of the cases that went wrong.
fn check(cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        let args: Vec<String> = ["run".to_owned()].into_iter().chain(c.args.iter().cloned()).collect();
        let (code, stdout, stderr) = common::rpcmeter_with(&args);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut problems = Vec::new();
        if code != Some(c.code) {
            problems.push(format!("exit code {code:?}, expected {}", c.code));
        }
        if lines.len() != 1 || stderr.lines().count() != 1 {
            problems.push(format!("{} stderr lines, expected exactly one", stderr.lines().count()));
        }
        if !stderr.contains(&c.keyword) {
            problems.push(format!("stderr does not name {:?}", c.keyword));
        }
        if stderr.contains("panicked") || stderr.contains("memory allocation") {
            problems.push("panicked or aborted".to_owned());
        }
        if c.code == 2 && !stdout.is_empty() {
            problems.push(format!("printed on stdout: {stdout:?}"));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{}: {}\n    rpcmeter {}\n    stderr: {stderr:?}",
                c.name,
                problems.join("; "),
                args.join(" ")
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Usage errors keep clap's whole message (names, did-you-mean) on one line; flags that
/// would be ignored in a combination are refused; extreme numbers are refused or run, never
/// panic, wrap or abort. Valid extremes reach the (closed) target and fail with 1.
#[test]
fn usage_errors_ignored_flags_and_extreme_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/echo.proto").display().to_string();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let target = closed.as_str();
    let same = dir.path().join("same.out").display().to_string();
    let proto_dir = dir.path().display().to_string();
    let args = |extra: &[&str], with_target: bool| -> Vec<String> {
        let base = ["--plaintext", "--proto", echo.as_str(), "--call", "EchoService/echo"];
        let mut all: Vec<String> = base.iter().chain(extra).map(|a| a.to_string()).collect();
        if with_target {
            all.push(target.to_string());
        }
        all
    };
    let echo = |extra: &[&str]| args(extra, true);
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/rpcmeter/lab/v1/lab.proto").display().to_string();
    // A streaming method of the lab with `extra` flags.
    let stream = |method: &str, extra: &[&str]| -> Vec<String> {
        let call = format!("rpcmeter.lab.v1.Streaming/{method}");
        let base = ["--plaintext", "--proto", lab.as_str(), "--call", call.as_str()];
        base.iter().chain(extra).chain([&target]).map(|a| a.to_string()).collect()
    };
    let huge = "{\"content\": \"{{randomString 99999999999}}\"}";
    let cases = vec![
        // Usage errors name what is missing or wrong.
        case("missing --call", 2, "--call", vec!["--plaintext".into(), target.into()]),
        case("round_robin over one Unix socket", 2, "one Unix socket", {
            let mut a = args(&["--lb", "round_robin"], false);
            a.push("unix:/tmp/rpcmeter-no-such.sock".into());
            a
        }),
        case("missing target", 2, "<TARGET>", args(&[], false)),
        case("--burst without --rounds", 2, "--rounds", echo(&["--burst", "4"])),
        case("--cert without --key", 2, "--key", args(&["--cert", "c.pem"], true)[1..].to_vec()),
        case("misspelled flag", 2, "--plaintext", echo(&["--plaintxt"])),
        case("unknown export format", 2, "junit", echo(&["--export", "xml=x.xml"])),
        case("--metrics-addr not HOST:PORT", 2, "--metrics-addr", echo(&["--metrics-addr", "localhost"])),
        case("error rate without %", 2, "error_rate<50", echo(&["--assert", "error_rate<50"])),
        case("unknown percentile", 2, "p0", echo(&["--assert", "p0<1ms"])),
        case("threads named as given", 2, "--threads 64", echo(&["--threads", "64", "--connections", "64"])),
        case(
            "randomInt min above max",
            2,
            "MIN must not exceed MAX",
            echo(&["-d", "{\"content\": \"{{randomInt 5 1}}\"}"]),
        ),
        case(
            "--proto DIR",
            2,
            "directory",
            vec!["--plaintext".into(), "--proto".into(), proto_dir, "--call".into(), "E/e".into(), target.into()],
        ),
        case("retry on OK", 2, "never retried", echo(&["--retry-on", "OK"])),
        case("zero deadline", 2, "--deadline", echo(&["--deadline", "0s"])),
        case("unknown export format", 2, "xml", echo(&["--export", "xml=out.xml"])),
        // Named as the target was given, with or without reflection (both named `localhost:0`
        // or `localhost`, and an IPv6 address without its brackets, issue 41).
        case(
            "absent unix socket",
            1,
            "cannot connect to unix:/nonexistent/x.sock: ",
            args(&[], false).into_iter().chain(["unix:/nonexistent/x.sock".to_string()]).collect(),
        ),
        case(
            "absent unix socket, by reflection",
            1,
            "server reflection on unix:/nonexistent/x.sock: cannot connect to unix:/nonexistent/x.sock: ",
            ["--plaintext", "--call", "EchoService/echo", "unix:/nonexistent/x.sock"].map(String::from).to_vec(),
        ),
        case(
            "closed IPv6 port, by reflection",
            1,
            "server reflection on [::1]:1: cannot connect to [::1]:1",
            ["--plaintext", "--call", "EchoService/echo", "[::1]:1"].map(String::from).to_vec(),
        ),
        case("one file for two outputs", 2, "overwrite", echo(&["-o", &same, "--hdr-log", &same])),
        // Flags that would be silently ignored in a combination.
        case("-c with --rps", 2, "--rps", echo(&["-c", "4", "--rps", "10"])),
        case("-n with --burst", 2, "--burst", echo(&["--burst", "4", "--rounds", "1", "-n", "5"])),
        case("-z with --burst", 2, "--burst", echo(&["--burst", "4", "--rounds", "1", "-z", "1s"])),
        case("--ramp with --rps", 2, "--rps", echo(&["--ramp", "1s", "--rps", "10"])),
        case("--max-in-flight in closed loop", 2, "--rps", echo(&["--max-in-flight", "10"])),
        // --stages sets the run's length and its load.
        case("-z with --stages", 2, "--stages", echo(&["--stages", "1s:10", "-z", "1s"])),
        case("-n with --stages", 2, "--stages", echo(&["--stages", "1s:10", "-n", "5"])),
        case("-c with --stages", 2, "--stages", echo(&["--stages", "1s:10", "-c", "5"])),
        case("stages of no time", 2, "no time", echo(&["--stages", "0s:10"])),
        case("a stage that is not D:V", 2, "--stages", echo(&["--stages", "10s:100,30s"])),
        case("a fraction of a worker", 2, "whole number", echo(&["--stages", "1s:2.5", "--stages-of", "workers"])),
        case("stages with no worker", 2, "--stages", echo(&["--stages", "1s:0", "--stages-of", "workers"])),
        case("warm-up as long as the stages", 2, "--warmup", echo(&["--stages", "1s:10", "--warmup", "1s"])),
        case("--arrival in closed loop", 2, "--arrival", echo(&["--arrival", "poisson"])),
        case("--seed without --arrival", 2, "--arrival", echo(&["--rps", "10", "--seed", "1"])),
        case("an unknown arrival", 2, "--arrival", echo(&["--rps", "10", "--arrival", "bursty"])),
        // Extreme numbers: refused with one line...
        case("endless -z", 2, "longer than", echo(&["-z", "99999999999h"])),
        case("endless warm-up", 2, "longer than", echo(&["--warmup", "1000000days"])),
        case("endless drain", 2, "longer than", echo(&["--drain", "99999999h"])),
        case("endless ramp", 2, "longer than", echo(&["--ramp", "99999999h"])),
        case("endless interval", 2, "longer than", echo(&["--interval", "99999999h"])),
        case("endless deadline", 2, "longer than", echo(&["--deadline", "99999999h"])),
        case("stream count on a unary method", 2, "EchoService.echo is unary", echo(&["--stream-call-count", "3"])),
        case("stream duration on a unary method", 2, "--stream-call-duration", echo(&["--stream-call-duration", "1s"])),
        case("stream interval on a unary method", 2, "--stream-interval", echo(&["--stream-interval", "1ms"])),
        case("interval on a server stream", 2, "server streaming", stream("Subscribe", &["--stream-interval", "1ms"])),
        case(
            "zero stream count on a server stream",
            2,
            "--stream-call-count",
            stream("Subscribe", &["--stream-call-count", "0"]),
        ),
        case(
            "an empty stream with a count",
            2,
            "no message to send",
            stream("Echo", &["-d", "[]", "--stream-call-count", "2"]),
        ),
        case("cancel after a word it does not know", 2, "first-response", stream("Echo", &["--cancel-after", "soon"])),
        case("cancel after nothing", 2, "first-response", stream("Echo", &["--cancel-after", "0s"])),
        case("cancel on a unary method", 2, "--cancel-after", echo(&["--cancel-after", "begin"])),
        case(
            "cancel a client stream after its answer",
            2,
            "client streaming",
            stream("Upload", &["--cancel-after", "first-response"]),
        ),
        case("zero stream duration", 2, "above zero", stream("Echo", &["--stream-call-duration", "0s"])),
        case("endless stream duration", 2, "longer than", stream("Echo", &["--stream-call-duration", "99999999h"])),
        case(
            "stream count beyond u64",
            2,
            "--stream-call-count",
            stream("Echo", &["--stream-call-count", "18446744073709551616"]),
        ),
        case(
            "mistyped stream message",
            2,
            "field \"seq\"",
            stream("Upload", &["-d", "[{\"seq\": 1}, {\"seq\": \"x\"}]"]),
        ),
        case("endless backoff", 2, "--retry-ms", echo(&["--retry-ms", "18446744073709551615"])),
        case("rate beyond reach", 2, "--rps", echo(&["--rps", "1e308"])),
        case("rate ramp over nothing", 2, "--rps", echo(&["--rps", "1:2:0s"])),
        case(
            "bursts beyond counting",
            2,
            "counted",
            echo(&["--burst", "4294967295", "--rounds", "18446744073709551615"]),
        ),
        case("a burst beyond memory", 2, "MiB", echo(&["--burst", "100000000", "--rounds", "1"])),
        case("workers beyond memory", 2, "MiB", echo(&["-c", "100000000", "-z", "1s"])),
        case("connections beyond calls", 2, "--connections", echo(&["--connections", "4294967295"])),
        case("a huge random string", 2, "4194304", echo(&["-d", huge])),
        case("count beyond u64", 2, "--total", echo(&["-n", "18446744073709551616"])),
        // ...or valid: they reach the closed target and fail there (1), without panicking.
        case("many workers, few calls", 1, target, echo(&["-c", "4294967295", "-n", "10"])),
        case("huge max-in-flight", 1, target, echo(&["--rps", "100", "--max-in-flight", "4294967295", "-n", "10"])),
        case("largest count", 1, target, echo(&["-n", "18446744073709551615"])),
        case(
            "largest stream count",
            1,
            target,
            stream("Echo", &["--stream-call-count", "18446744073709551615", "-n", "1"]),
        ),
        case("largest loop", 1, target, echo(&["--loop", "18446744073709551615", "-c", "1"])),
        case("largest retries", 1, target, echo(&["--max-retries", "4294967295", "-n", "1"])),
        case("slowest rate", 1, target, echo(&["--rps", "0.001", "-z", "30days"])),
        case("longest stages", 1, target, echo(&["--stages", "15days:1e9,15days:0", "--arrival", "poisson"])),
        case("http:// target", 1, target, args(&[], false).into_iter().chain([format!("http://{target}")]).collect()),
    ];
    check(&cases);
}
