//! `rpcmeter compare` from the outside, shared by tests/compare.rs and tests/compare_runs.rs,
//! which include this file as a module of their own.

/// Runs `rpcmeter compare ARGS`: its exit code, standard output and standard error.
pub fn compare(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    crate::common::rpcmeter_with([std::ffi::OsStr::new("compare")].into_iter().chain(args.iter().copied()))
}

pub fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// The row of a metric in the table ("Per metric" and after).
pub fn row<'a>(table: &'a str, label: &str) -> &'a str {
    let rows = &table[table.find("Per metric").unwrap_or_else(|| panic!("{table}"))..];
    rows.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} row:\n{table}"))
}
