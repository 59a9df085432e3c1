//! `rpcmeter run --workload FILE` from a test: the file written to a fresh folder, the run
//! started, its JSON read, and a method's OK count in the lab server's Stats.
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `text` as `NAME` in a fresh folder, beside the `extra` files (name, contents) it names.
pub fn workload_file(name: &str, text: &str, extra: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for (file, contents) in extra {
        std::fs::write(dir.path().join(file), contents).unwrap();
    }
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

pub fn rpcmeter(addr: &str, file: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--no-calibrate", addr, "--workload"])
        .arg(file)
        .args(args)
        .output()
        .unwrap()
}

pub fn run_json(addr: &str, file: &Path, args: &[&str]) -> Value {
    let out = rpcmeter(addr, file, &[args, &["--format", "json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn stats_ok(stats: &rpcmeter::lab::proto::lab::StatsReply, path: &str) -> u64 {
    stats.methods.iter().find(|m| m.method == path).map_or(0, |m| m.ok)
}
