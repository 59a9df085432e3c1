//! Every input is read with a bound (src/input.rs): a file larger than its kind's limit is
//! refused with one line naming it and exit 2, before its content is taken into memory.
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rpcmeter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(args).stdin(Stdio::null()).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit 2 and one line on stderr holding each of `words`.
fn refused(out: &Output, words: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for word in words {
        assert!(err.contains(word), "{word:?} in {err}");
    }
}

/// A file that says `size` bytes and uses no disk (sparse).
fn sparse(dir: &Path, name: &str, size: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    path
}

#[test]
fn report_of_dev_zero_is_refused_quickly() {
    let started = Instant::now();
    let out = rpcmeter(&["report", "/dev/zero", "-o", "/dev/null"]);
    refused(&out, &["/dev/zero", "256.0 MiB", "--max-input-size"]);
    // Generous: reading 256 MiB of zeros takes well under a second; before, it never ended.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

#[test]
fn big_result_files_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let big = sparse(dir.path(), "big.json", 1 << 30);
    let big = big.to_str().unwrap();
    for args in [vec!["report", big, "-o", "/dev/null"], vec!["merge", big], vec!["compare", big, big]] {
        refused(&rpcmeter(&args), &[big, "1.0 GiB", "larger than the 256.0 MiB", "--max-input-size"]);
    }
}

#[test]
fn max_input_size_moves_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    std::fs::write(&path, "not json, 25 bytes long..").unwrap();
    let path = path.to_str().unwrap();
    refused(&rpcmeter(&["merge", path, "--max-input-size", "10"]), &["25 B, larger than the 10 B"]);
    refused(&rpcmeter(&["merge", path, "--max-input-size", "1KiB"]), &["not JSON"]);
    refused(&rpcmeter(&["merge", path, "--max-input-size", "lots"]), &["--max-input-size"]);
}

#[test]
fn merge_from_an_endless_stdin_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["merge", "-", "--max-input-size", "1MiB"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    refused(&out, &["standard input", "larger than the 1.0 MiB"]);
}

#[test]
fn request_data_and_protos_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let echo = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/echo.proto").display().to_string();
    // Refused before any connection: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--plaintext", "--proto", &echo, "--call", "EchoService/echo", "-n", "1"];
        args.extend(extra);
        args.push(&closed);
        rpcmeter(&args)
    };
    refused(&run(&["-D", "/dev/zero"]), &["-D /dev/zero", "larger than the 64.0 MiB allowed for request data"]);
    let data = sparse(dir.path(), "data.json", 100 << 20);
    refused(&run(&["-D", data.to_str().unwrap()]), &["data.json", "100.0 MiB, larger than the 64.0 MiB"]);

    let proto = sparse(dir.path(), "big.proto", 20 << 20);
    let out = rpcmeter(&["run", "--plaintext", "--proto", proto.to_str().unwrap(), "--call", "M/x", &closed]);
    refused(&out, &["big.proto", "20.0 MiB, larger than the 16.0 MiB allowed for a .proto file"]);
    // The PEM reader reads lines: /dev/zero has none, and grew until memory ran out.
    let out = rpcmeter(&["run", "--proto", &echo, "--call", "EchoService/echo", "--cacert", "/dev/zero", &closed]);
    refused(&out, &["/dev/zero", "larger than the 16.0 MiB allowed for a PEM file"]);
    let set = sparse(dir.path(), "big.pb", 20 << 20);
    let out = rpcmeter(&["run", "--plaintext", "--protoset", set.to_str().unwrap(), "--call", "M/x", &closed]);
    refused(&out, &["--protoset", "big.pb", "20.0 MiB"]);
}

#[test]
fn history_rows_are_bounded_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite3");
    let result = serde_json::json!({"meta": {"name": "x".repeat(5000)}, "requests": {"total": 1}});
    let id = rpcmeter::history::History::open(&path).unwrap().save(&result).unwrap().to_string();
    let history = path.to_str().unwrap();
    let out = rpcmeter(&["history", "--history", history, "show", &id, "--max-input-size", "4KiB"]);
    refused(&out, &[&format!("run #{id}"), "larger than the 4.0 KiB allowed for a result"]);
    let out = rpcmeter(&["history", "--history", history, "show", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The listing cuts what it shows.
    let out = rpcmeter(&["history", "--history", history]);
    assert!(out.status.success() && out.stdout.len() < 1000, "{}", String::from_utf8_lossy(&out.stdout));
}
