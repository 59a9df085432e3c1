//! `rpcmeter serve` over TLS and mutual TLS (`--self-signed DIR`, `--tls-cert/--tls-key`,
//! `--tls-client-ca`), measured by `rpcmeter run` as a user runs both: the built binary,
//! real handshakes on 127.0.0.1. Handshakes that must fail fail in one line, exit 1.
mod common;
use common::lab_process::LabProcess;
use std::path::Path;
use std::time::Duration;

/// `rpcmeter serve` on one thread with `args` (the TLS flags), killed when dropped.
fn serve(args: &[&str]) -> LabProcess {
    LabProcess::start(&[&["--threads", "1"], args].concat())
}

/// `rpcmeter run` of 50 echo calls (schema by reflection, over the same TLS); (exit code, stderr).
fn run(lab: &LabProcess, tls: &[&str]) -> (Option<i32>, String) {
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "-q", "--no-save", "--no-calibrate", "--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#])
        .args(["-n", "50", "-c", "2"])
        .args(tls)
        .arg(&lab.addr)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn tls_and_mutual_tls_handshakes_succeed_and_fail_as_they_should() {
    let tmp = tempfile::tempdir().unwrap();
    let (pki, other) = (tmp.path().join("pki"), tmp.path().join("other"));
    let tls = serve(&["--self-signed", &pki.display().to_string()]);
    let mtls = serve(&["--self-signed", &other.display().to_string(), "--tls-client-ca", &file(&other, "ca.pem")]);
    let ca = file(&pki, "ca.pem");

    // TLS: the CA that --self-signed wrote is all a client needs (127.0.0.1 is in the certificate).
    let (code, stderr) = run(&tls, &["--cacert", &ca]);
    assert_eq!(code, Some(0), "{stderr}");
    // Another CA: refused, one line naming the certificate problem.
    let (code, stderr) = run(&tls, &["--cacert", &file(&other, "ca.pem")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    // Plaintext against TLS: the run fails, the server stays up.
    let (code, _) = run(&tls, &["--plaintext"]);
    assert_eq!(code, Some(1));

    // Mutual TLS with the client certificate written beside the CA.
    let other_ca = file(&other, "ca.pem");
    let client =
        ["--cacert", &other_ca, "--cert", &file(&other, "client.pem"), "--key", &file(&other, "client-key.pem")];
    let (code, stderr) = run(&mtls, &client);
    assert_eq!(code, Some(0), "{stderr}");
    // No client certificate, or one of another CA: refused in one line that says what to check.
    let (code, stderr) = run(&mtls, &["--cacert", &other_ca]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("client certificate"), "{stderr}");
    let stranger = ["--cacert", &other_ca, "--cert", &file(&pki, "client.pem"), "--key", &file(&pki, "client-key.pem")];
    let (code, stderr) = run(&mtls, &stranger);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // The files --self-signed wrote serve again through --tls-cert/--tls-key.
    let again = serve(&["--tls-cert", &file(&pki, "server.pem"), "--tls-key", &file(&pki, "server-key.pem")]);
    let (code, stderr) = run(&again, &["--cacert", &ca]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn bad_tls_files_are_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let junk = junk.display().to_string();
    let missing = tmp.path().join("missing.pem").display().to_string();
    for (args, keyword) in [
        (vec!["--tls-cert", missing.as_str(), "--tls-key", missing.as_str()], "--tls-cert"),
        (vec!["--tls-cert", junk.as_str(), "--tls-key", junk.as_str()], "TLS"),
        (vec!["--tls-cert", junk.as_str()], "--tls-key"),
        (vec!["--tls-client-ca", junk.as_str()], "--tls-client-ca"),
    ] {
        let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(&args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(keyword), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: listened anyway");
    }
}
