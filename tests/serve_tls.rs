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
        (vec!["--tls-cert", junk.as_str(), "--tls-key", junk.as_str()], "--tls-cert"),
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

/// `serve --self-signed DIR` with `extra`, to its end: (exit code, stderr). A refusal ends it
/// at once; a server that started is killed.
fn self_signed_refusal(dir: &Path) -> (Option<i32>, String) {
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["serve", "--addr", "127.0.0.1:0", "--self-signed"])
        .arg(dir)
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A link planted in DIR where a key goes is refused (one line, exit 2) and its target is
/// untouched; so is a file in DIR that --self-signed did not make.
#[test]
fn self_signed_refuses_planted_links_and_foreign_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (pki, target) = (tmp.path().join("pki"), tmp.path().join("victim"));
    std::fs::create_dir(&pki).unwrap();
    std::fs::write(&target, "precious").unwrap();
    std::os::unix::fs::symlink(&target, pki.join("server-key.pem")).unwrap();
    let (code, stderr) = self_signed_refusal(&pki);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("server-key.pem") && stderr.contains("link"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");

    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("client.pem"), "mine").unwrap();
    let (code, stderr) = self_signed_refusal(&foreign);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("client.pem"), "{stderr}");
    assert_eq!(std::fs::read_to_string(foreign.join("client.pem")).unwrap(), "mine");
}

/// A restart reuses the CA in DIR: ca.pem is the same file, and a client that kept the old
/// one still connects. Certificates are valid for about a year (at most 398 days, what
/// browsers accept), the CA longer.
#[test]
fn self_signed_reuses_its_ca_on_restart_and_signs_for_a_year() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    let first = serve(&["--self-signed", &pki.display().to_string()]);
    let kept = tmp.path().join("kept-ca.pem");
    std::fs::copy(pki.join("ca.pem"), &kept).unwrap();
    let server_pem = std::fs::read_to_string(pki.join("server.pem")).unwrap();
    drop(first);

    let second = serve(&["--self-signed", &pki.display().to_string()]);
    assert_eq!(std::fs::read(pki.join("ca.pem")).unwrap(), std::fs::read(&kept).unwrap(), "the same CA");
    assert_ne!(std::fs::read_to_string(pki.join("server.pem")).unwrap(), server_pem, "a new server certificate");
    let (code, stderr) = run(&second, &["--cacert", &kept.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");

    let days = |name: &str| {
        let pem = std::fs::read_to_string(pki.join(name)).unwrap();
        let (not_before, not_after) = rpcmeter::lab::tls::validity(&pem).unwrap();
        assert!(not_before <= time::OffsetDateTime::now_utc(), "{name} valid from now");
        (not_after - not_before).whole_days()
    };
    for leaf in ["server.pem", "client.pem"] {
        assert!((300..=398).contains(&days(leaf)), "{leaf}: {} days", days(leaf));
    }
    assert!(days("ca.pem") > 398, "the CA outlives its certificates");
}

/// A certificate or key that is not one, or a key that is not the certificate's: one line
/// naming the file and what is wrong with it, exit 2, before anything listens.
#[test]
fn a_bad_tls_file_is_named_with_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    drop(serve(&["--self-signed", &pki.display().to_string()]));
    let bad = tmp.path().join("bad.pem");
    std::fs::write(&bad, "not a certificate").unwrap();
    let (bad, key, cert, client) =
        (bad.display().to_string(), file(&pki, "server-key.pem"), file(&pki, "server.pem"), file(&pki, "client.pem"));
    for (args, named, what) in [
        (vec!["--tls-cert", bad.as_str(), "--tls-key", key.as_str()], &bad, "no PEM certificate"),
        (vec!["--tls-cert", cert.as_str(), "--tls-key", bad.as_str()], &bad, "private key"),
        (vec!["--tls-cert", client.as_str(), "--tls-key", key.as_str()], &key, "not the key of"),
        (
            vec!["--tls-cert", cert.as_str(), "--tls-key", key.as_str(), "--tls-client-ca", bad.as_str()],
            &bad,
            "no PEM certificate",
        ),
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
        assert!(stderr.contains(named.as_str()) && stderr.contains(what), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: listened anyway");
    }
}
