//! `rpcmeter compare` from the outside, shared by tests/compare.rs and tests/compare_runs.rs,
//! which include this file as a module of their own.
use std::process::{Command, Stdio};

/// Runs `rpcmeter compare ARGS`: its exit code, standard output and standard error.
pub fn compare(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("compare").args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// The row of a metric in the table ("Per metric" and after).
pub fn row<'a>(table: &'a str, label: &str) -> &'a str {
    let rows = &table[table.find("Per metric").unwrap_or_else(|| panic!("{table}"))..];
    rows.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} row:\n{table}"))
}
