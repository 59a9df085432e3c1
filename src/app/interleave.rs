//! `rpcmeter compare --runs N TARGET_A TARGET_B -- RUN FLAGS`: benchstat's advice automated.
//! Runs A and B alternately, N times each with the same flags (`rpcmeter run RUN FLAGS TARGET
//! --format json`, each a child process of this binary), in the order A B B A A B ... so that
//! a machine that drifts over the runs weighs on both sides alike; keeps every result file in
//! one directory; `app::compare` then judges them with the spread between runs.
use crate::error::{bad_input, internal, run_failed};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs a side when `--runs` is given without a count (docs/compare.md says why).
pub const DEFAULT_RUNS: &str = "5";

/// Each run's length when the run flags set none (`-z`, `-n`): docs/compare.md says why.
pub const DEFAULT_RUN_LENGTH: &str = "10s";

/// What to run, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Interleave {
    /// Runs a side, at least 2.
    pub runs: usize,
    /// Where every result file is kept.
    pub out: PathBuf,
    pub target_a: OsString,
    pub target_b: OsString,
    /// The flags of every run, the same for A and B.
    pub run_flags: Vec<OsString>,
}

/// The result files made, A's and B's, in the order they ran within each side.
pub struct Made {
    pub a: Vec<PathBuf>,
    pub b: Vec<PathBuf>,
}

impl Interleave {
    /// The run flags with a length when they set none, and the flags compare needs.
    fn flags(&self) -> Vec<OsString> {
        let mut flags = self.run_flags.clone();
        let limited = flags.iter().any(|f| {
            let f = f.to_string_lossy();
            ["-z", "-n", "--duration", "--total", "--loop", "--loop-per-worker"]
                .iter()
                .any(|l| f == *l || f.starts_with(&format!("{l}=")))
                || (f.starts_with("-z") || f.starts_with("-n")) && !f.starts_with("--")
        });
        if !limited {
            flags.extend(["-z".into(), DEFAULT_RUN_LENGTH.into()]);
        }
        if !flags.iter().any(|f| f == "--quiet" || f == "-q") {
            flags.push("--quiet".into());
        }
        flags.extend(["--format".into(), "json".into()]);
        flags
    }

    /// Which side runs at step `i` of `2 N`: A B B A A B B A ...
    fn side_at(i: usize) -> bool {
        // true = A. Pairs alternate their order: AB, BA, AB, ...
        let (pair, second) = (i / 2, i % 2 == 1);
        (pair % 2 == 0) != second
    }

    /// Runs every run, each result to `out/a1.json`, `out/b1.json`, ...; a run that fails to
    /// start or writes no result stops them all, naming it (a bad flag: exit 2, as the run's).
    pub fn make(&self) -> anyhow::Result<Made> {
        std::fs::create_dir_all(&self.out)
            .map_err(|e| bad_input(format!("compare --runs: cannot create {}: {e}", self.out.display())))?;
        let exe = std::env::current_exe().map_err(|e| internal(format!("cannot find rpcmeter: {e}")))?;
        let flags = self.flags();
        let mut made = Made { a: Vec::new(), b: Vec::new() };
        for i in 0..2 * self.runs {
            let is_a = Interleave::side_at(i);
            let (side, target, files) =
                if is_a { ("a", &self.target_a, &mut made.a) } else { ("b", &self.target_b, &mut made.b) };
            let path = self.out.join(format!("{side}{}.json", files.len() + 1));
            eprintln!(
                "rpcmeter: compare --runs: run {} of {} ({} of {}) -> {}",
                i + 1,
                2 * self.runs,
                side.to_uppercase(),
                target.to_string_lossy(),
                path.display()
            );
            run_one(&exe, &flags, target, &path)?;
            files.push(path);
        }
        Ok(made)
    }
}

/// One `rpcmeter run FLAGS TARGET`, its JSON result written to `path`. A run that asserted
/// and failed (exit 1) still wrote its result, which is kept and compared.
fn run_one(exe: &Path, flags: &[OsString], target: &OsString, path: &Path) -> anyhow::Result<()> {
    let output = Command::new(exe)
        .arg("run")
        .args(flags)
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| internal(format!("cannot start {}: {e}", exe.display())))?;
    let why = || {
        let stderr = String::from_utf8_lossy(&output.stderr);
        stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim().to_string()
    };
    match output.status.code() {
        Some(2) => return Err(bad_input(format!("compare --runs: the run flags: {}", why()))),
        _ if output.stdout.is_empty() => {
            return Err(run_failed(format!(
                "compare --runs: the run against {} wrote no result ({}): {}",
                target.to_string_lossy(),
                output.status,
                why()
            )))
        }
        _ => {}
    }
    std::fs::write(path, &output.stdout).map_err(|e| crate::error::output_failed(path, e))
}

/// The directory of a `--runs` comparison when `--out` is not given: new, in the current one.
pub fn default_out() -> PathBuf {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    PathBuf::from(format!("rpcmeter-compare-{stamp}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_alternate_a_b_b_a() {
        let order: String = (0..8).map(|i| if Interleave::side_at(i) { 'A' } else { 'B' }).collect();
        assert_eq!(order, "ABBAABBA");
    }

    #[test]
    fn a_run_without_a_length_gets_the_default() {
        let with = |flags: &[&str]| Interleave {
            runs: 2,
            out: PathBuf::from("x"),
            target_a: "a".into(),
            target_b: "b".into(),
            run_flags: flags.iter().map(OsString::from).collect(),
        };
        let length = |flags: &[&str]| {
            let all = with(flags).flags();
            all.iter().position(|f| f == "-z").map(|i| all[i + 1].clone())
        };
        assert_eq!(length(&["-c", "8"]), Some(DEFAULT_RUN_LENGTH.into()));
        assert_eq!(length(&["-z", "2s"]), Some("2s".into()));
        assert_eq!(length(&["-n", "100"]), None);
        assert_eq!(length(&["--duration=1s"]), None);
        assert!(with(&[]).flags().ends_with(&["--quiet".into(), "--format".into(), "json".into()]));
        // Given already: not twice (a run refuses it twice).
        assert_eq!(with(&["--quiet"]).flags().iter().filter(|f| *f == "--quiet").count(), 1);
    }
}
