//! `rpcmeter ping` against the lab (`rpcmeter serve` on 127.0.0.1 port 0): both protocols'
//! tables (docs/experiments.md, "Ping vs gRPC latency"), the method used named, the
//! difference with its interval, trimming only when asked and then stated, bad values refused.
mod common;
use common::lab_process::LabProcess;
use serde_json::Value;
use std::process::Command;

const METHODS: [&str; 4] = ["icmp-datagram", "icmp-raw", "system-ping", "tcp-connect"];

fn ping(args: &[&str]) -> (Option<i32>, String, String) {
    common::rpcmeter_with(["ping"].iter().chain(args))
}

#[test]
fn ping_gives_both_tables_and_the_difference() {
    let lab = LabProcess::start(&[]);
    let (code, stdout, stderr) = ping(&["--plaintext", "-n", "5", "--interval", "50ms", &lab.addr]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let header = stdout.lines().find(|l| l.trim_start().starts_with("count")).unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["count", "5", "5"], "{stdout}");
    for row in ["mean", "std", "min", "25%", "50%", "75%", "max", "lost"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(row)), "no {row} row:\n{stdout}");
    }
    let method =
        METHODS.iter().find(|m| stdout.contains(&format!("network: {m} ("))).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        stdout.contains(&format!("gRPC - {method} (medians): +")),
        "gRPC is slower than the network alone:\n{stdout}"
    );
    assert!(stdout.contains("95% bootstrap CI") && stdout.contains("Mann-Whitney p"), "{stdout}");
    assert!(stdout.contains("EchoService.echo on one HTTP/2 connection, warmed by one uncounted call"), "{stdout}");
    assert!(stdout.contains("flagged, all kept"), "no trimming by default:\n{stdout}");

    let (code, stdout, stderr) = ping(&[
        "--plaintext",
        "-n",
        "5",
        "--interval",
        "50ms",
        "--icmp",
        "tcp",
        "--trim",
        "tukey",
        "--format",
        "json",
        &lab.addr,
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["network"]["method"], "tcp-connect");
    assert_eq!(r["trim"], "Tukey");
    for side in ["network", "grpc"] {
        assert_eq!(r[side]["answered"], 5, "{r}");
        assert_eq!(r[side]["samples_us"].as_array().unwrap().len(), 5);
        let l = &r[side]["latency_us"];
        let v = |k: &str| l[k].as_f64().unwrap();
        assert!(
            v("min") > 0.0
                && v("min") <= v("p25")
                && v("p25") <= v("p50")
                && v("p50") <= v("p75")
                && v("p75") <= v("max"),
            "{l}"
        );
        // Trimmed: described again without what Tukey flagged.
        let flagged = r[side]["outliers"]["tukey_us"].as_array().unwrap().len() as u64;
        assert_eq!(r[side]["trimmed_latency_us"]["count"].as_u64().unwrap(), 5 - flagged, "{r}");
    }
    let d = &r["difference"];
    let ci = d["difference_ci_us"].as_array().unwrap();
    let (low, high, x) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap(), d["difference_us"].as_f64().unwrap());
    assert!(low <= x && x <= high, "{d}");
    assert!(d["mann_whitney_p"].as_f64().unwrap() <= 1.0);
}

#[test]
fn absurd_values_are_refused_before_anything_is_sent() {
    let lab = LabProcess::start(&[]);
    for bad in [
        vec!["-n", "0"],
        vec!["-n", "100001"],
        vec!["--interval", "1ms"],
        vec!["--interval", "2h"],
        vec!["--timeout", "0s"],
        vec!["--icmp", "carrier-pigeon"],
        vec!["--call", "Nope/x"],
        vec!["-d", "{not json"],
    ] {
        let mut args = vec!["--plaintext"];
        args.extend(&bad);
        args.push(&lab.addr);
        let (code, stdout, stderr) = ping(&args);
        assert_eq!(code, Some(2), "{bad:?}: {stdout}{stderr}");
        assert!(stdout.is_empty() && stderr.lines().count() == 1, "{bad:?}: {stderr}");
    }
    let (code, _, stderr) = ping(&["--plaintext", "-n", "1", "unix:/tmp/x.sock"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unix:"), "{stderr}");
}

/// `--cert`/`--key` (run's TLS flags) reach ping's gRPC side: a lab that requires client
/// certificates answers with them, and refuses the handshake without.
#[test]
fn mutual_tls_pings_with_the_client_certificate() {
    let pki = tempfile::tempdir().unwrap();
    let file = |name: &str| pki.path().join(name).display().to_string();
    let dir = pki.path().display().to_string();
    let lab = LabProcess::start(&["--self-signed", &dir, "--tls-client-ca", &file("ca.pem")]);
    let (ca, cert, key) = (file("ca.pem"), file("client.pem"), file("client-key.pem"));
    let flags = ["-n", "2", "--interval", "50ms", "--icmp", "tcp", "--format", "json", "--cacert", &ca];
    let (code, stdout, stderr) = ping(&[&flags[..], &["--cert", &cert, "--key", &key, &lab.addr]].concat());
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["grpc"]["answered"], 2, "{r}");

    let (code, _, stderr) = ping(&[&flags[..], &[lab.addr.as_str()]].concat());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("client certificate"), "{stderr}");
}

/// `--icmp auto` in a network namespace of its own (`unshare -n`, root), where
/// net.ipv4.ping_group_range is set without touching the machine's: the unprivileged
/// datagram socket when the range allows it, else the raw socket.
#[test]
fn auto_takes_the_datagram_socket_when_allowed_else_raw() {
    let usable =
        |program: &str, args: &[&str]| Command::new(program).args(args).output().is_ok_and(|o| o.status.success());
    if !usable("unshare", &["-n", "true"]) || !usable("ip", &["-V"]) {
        eprintln!("skipped: no private network namespace here (unshare -n needs root, and ip)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, (range, expected)) in [("0 2147483647", "icmp-datagram"), ("1 0", "icmp-raw")].into_iter().enumerate() {
        // A file per server: the shell may test the last one's before the new one truncates it.
        let first_line = dir.path().join(format!("serve-{i}.out"));
        let script = format!(
            r#"set -e
ip link set lo up
echo '{range}' > /proc/sys/net/ipv4/ping_group_range
"{bin}" serve --addr 127.0.0.1:0 > "{out}" &
server=$!
trap 'kill $server' EXIT
for i in $(seq 200); do [ -s "{out}" ] && break; sleep 0.05; done
"{bin}" ping --plaintext -n 3 --interval 50ms --format json "$(head -1 "{out}" | cut -d' ' -f3)"
"#,
            bin = env!("CARGO_BIN_EXE_rpcmeter"),
            out = first_line.display()
        );
        let out = Command::new("unshare").args(["-n", "sh", "-c", &script]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{range}: {stderr}");
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        assert_eq!(r["network"]["method"], expected, "ping_group_range {range}");
        assert_eq!(r["network"]["answered"], 3, "{r}");
        assert_eq!(r["grpc"]["answered"], 3, "{r}");
    }
}

/// `--icmp system`: the system's ping times each echo (its `time=` field is read).
#[test]
fn the_system_ping_is_read_where_installed() {
    if !Command::new("ping").arg("-V").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no ping program here (Debian: iputils-ping)");
        return;
    }
    let lab = LabProcess::start(&[]);
    let (code, stdout, stderr) =
        ping(&["--plaintext", "-n", "3", "--interval", "50ms", "--icmp", "system", "--format", "json", &lab.addr]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["network"]["method"], "system-ping");
    assert_eq!(r["network"]["answered"], 3, "{r}");
    // ping prints its time with 3 decimals of a millisecond: whole microseconds.
    for us in r["network"]["samples_us"].as_array().unwrap() {
        let us = us.as_f64().unwrap();
        assert!(us > 0.0 && us.fract() == 0.0, "{us}");
    }
}

/// `ping` takes `run`'s call flags (one group, `CallArgs`): the authority, message size,
/// compression and reflection metadata of its gRPC call, as `run` does.
#[test]
fn ping_takes_runs_call_flags() {
    let lab = LabProcess::start(&[]);
    let (code, stdout, stderr) = ping(&[
        "--plaintext",
        "-n",
        "2",
        "--interval",
        "20ms",
        "--authority",
        "lab.example",
        "--max-msg-size",
        "65536",
        "--reflect-metadata",
        r#"{"x-from":"ping"}"#,
        &lab.addr,
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("EchoService.echo"), "{stdout}");
}
