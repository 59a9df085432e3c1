//! `rpcmeter compare A.json B.json` on synthetic results (only the keys it reads): verdicts
//! in the table and in JSON, what is left out (warm-up, the last partial interval), and the
//! exit codes: 0 for A/A, 1 for a regression with --fail-on-regression, 2 for a bad file.
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A run's level: its throughput, latencies and error rate per interval.
#[derive(Clone, Copy)]
struct Level {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    error_rate: f64,
}

const BASE: Level = Level { rps: 10_000.0, p50_us: 400.0, p99_us: 1_500.0, error_rate: 0.0 };

/// A result file of `measured` full 1 s intervals at `level` with 5 % noise, after two warm-up
/// intervals 3x slower and followed by a partial interval with a tenth of the calls (both
/// far off the level: they would change the verdicts if they were counted).
fn write_result(dir: &Path, name: &str, level: Level, measured: usize, seed: u64) -> PathBuf {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut noise = move || 1.0 + 0.05 * (rng.gen::<f64>() * 2.0 - 1.0) * 1.7;
    let mut intervals = Vec::new();
    let mut t = 0.0;
    let row = |t: f64, length: f64, phase: &str, rps: f64, p50: f64, p99: f64, error_rate: f64| {
        let calls = (rps * length).round() as u64;
        let failed = (calls as f64 * error_rate).round() as u64;
        json!({"t_s": t, "length_s": length, "phase": phase, "calls": calls, "ok": calls - failed,
               "failed": failed, "rps": calls as f64 / length, "p50_us": p50, "p90_us": p50 * 2.0,
               "p99_us": p99, "max_us": p99 * 2.0})
    };
    for _ in 0..2 {
        t += 1.0;
        intervals.push(row(t, 1.0, "warmup", level.rps / 3.0, level.p50_us * 3.0, level.p99_us * 3.0, 0.5));
    }
    for _ in 0..measured {
        t += 1.0;
        let (r, l50, l99, e) = (noise(), noise(), noise(), noise());
        intervals.push(row(
            t,
            1.0,
            "measured",
            level.rps * r,
            level.p50_us * l50,
            level.p99_us * l99,
            level.error_rate * e,
        ));
    }
    intervals.push(row(t + 0.25, 0.25, "measured", level.rps / 10.0, level.p50_us * 5.0, level.p99_us * 5.0, 0.5));
    let result = json!({
        "meta": {"name": name, "started_at": "2025-01-01T00:00:00.000Z"},
        "requests": {"total": 0, "ok": 0, "failed": 0},
        "throughput_rps": level.rps,
        "latency_us": {"p50": level.p50_us, "p99": level.p99_us},
        "interval_s": 1.0,
        "intervals": intervals,
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&result).unwrap()).unwrap();
    path
}

fn compare(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_rpcmeter")).arg("compare").args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// The per-interval row of a metric in the table.
fn row<'a>(table: &'a str, label: &str) -> &'a str {
    let rows = &table[table.find("Per interval").unwrap_or_else(|| panic!("{table}"))..];
    rows.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} row:\n{table}"))
}

fn metric<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == key).unwrap()
}

#[test]
fn an_a_a_pair_shows_no_significant_difference_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 30, 1);
    let b = write_result(dir.path(), "b", BASE, 30, 2);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    for label in ["throughput", "p50 latency", "p99 latency", "error rate"] {
        let line = row(&stdout, label);
        assert!(line.contains("no significant difference"), "{line}\n{stdout}");
    }
    // Whole-run numbers of each file, for context.
    assert!(stdout.contains("10000.0 calls/s") && stdout.contains("1.50 ms"), "{stdout}");

    let (code, stdout, _) = compare(&[a.as_os_str(), b.as_os_str(), os("--format"), os("json")]);
    assert_eq!(code, Some(0));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["regressions"], json!([]));
    for key in ["throughput", "p50", "p99", "error_rate"] {
        let m = metric(&report, key);
        assert_eq!(m["verdict"], "no significant difference", "{m}");
        // 30 full measured intervals: no warm-up, no partial last one.
        assert_eq!((m["a"]["n"].as_u64(), m["b"]["n"].as_u64()), (Some(30), Some(30)), "{m}");
        assert!(m["p_value"].as_f64().unwrap() >= 0.05, "{m}");
    }
    let throughput = metric(&report, "throughput");
    let ci = throughput["ratio_ci"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < 1.0 && ci[1].as_f64().unwrap() > 1.0, "{throughput}");
    assert_eq!(report["a"]["full_measured_intervals"], 30);
}

#[test]
fn a_regression_is_named_and_fails_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 30, 3);
    // 10 % less throughput, 20 % slower p99, 1 % errors; p50 unchanged.
    let worse = Level { rps: 9_000.0, p99_us: 1_800.0, error_rate: 0.01, ..BASE };
    let b = write_result(dir.path(), "b", worse, 30, 4);

    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // The sample medians differ from the levels by the noise: 10 % and 20 % give about that.
    let line = |label: &str| row(&stdout, label).to_string();
    assert!(line("throughput").contains("% lower: regression"), "{stdout}");
    assert!(line("p99 latency").contains("% slower: regression"), "{stdout}");
    assert!(line("p50 latency").contains("no significant difference"), "{stdout}");
    assert!(line("error rate").contains("B is higher by 0.99 pp: regression"), "{stdout}");

    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for named in ["throughput", "p99 latency", "error rate"] {
        assert!(stderr.contains(named), "{stderr}");
    }
    assert!(!stderr.contains("p50"), "{stderr}");

    let (code, stdout, _) =
        compare(&[a.as_os_str(), b.as_os_str(), os("--format=json"), os("--metric"), os("p99,throughput")]);
    assert_eq!(code, Some(0));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["regressions"], json!(["p99", "throughput"]));
    let p99 = metric(&report, "p99");
    assert_eq!(p99["verdict"], "regression");
    assert_eq!(p99["unit"], "us");
    assert!(p99["p_value"].as_f64().unwrap() < 0.001, "{p99}");
    // The 95 % intervals cover the true shift (+300 µs, x1.2).
    let covers = |ci: &Value, x: f64| ci[0].as_f64().unwrap() <= x && x <= ci[1].as_f64().unwrap();
    assert!(covers(&p99["difference_ci"], 300.0) && covers(&p99["ratio_ci"], 1.2), "{p99}");
    assert_eq!(report["metrics"].as_array().unwrap().len(), 2);

    // B better than A: an improvement, never a failure.
    let (code, stdout, stderr) = compare(&[b.as_os_str(), a.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% higher: improvement"), "{stdout}");
    assert!(row(&stdout, "p99 latency").contains("% faster: improvement"), "{stdout}");
    assert!(row(&stdout, "error rate").contains("B is 100% lower: improvement"), "{stdout}");
}

#[test]
fn too_few_intervals_get_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 4, 5);
    let b = write_result(dir.path(), "b", Level { rps: 5_000.0, ..BASE }, 30, 6);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("too few intervals to judge (4 vs 30; 5 per side needed)"), "{stdout}");
    assert!(!stdout.contains("regression"), "{stdout}");
}

#[test]
fn bad_files_and_flags_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 30, 7);
    let missing = dir.path().join("missing.json");
    let (code, stdout, stderr) = compare(&[a.as_os_str(), missing.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stdout.is_empty() && stderr.lines().count() == 1 && stderr.contains("missing.json"), "{stderr}");

    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{\"throughput_rps\": 1}").unwrap();
    let (code, _, stderr) = compare(&[garbage.as_os_str(), a.as_os_str()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.lines().count() == 1 && stderr.contains("garbage.json"), "{stderr}");

    let (code, _, stderr) = compare(&[a.as_os_str(), a.as_os_str(), os("--alpha"), os("1.5")]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = compare(&[a.as_os_str(), a.as_os_str(), os("--metric"), os("p42")]);
    assert_eq!(code, Some(2), "{stderr}");
}

#[test]
fn a_significant_change_below_min_effect_is_no_meaningful_difference() {
    let dir = tempfile::tempdir().unwrap();
    // 100 intervals a side make a 3 % drop in throughput significant; p99 is 20 % slower.
    let a = write_result(dir.path(), "a", BASE, 100, 8);
    let b = write_result(dir.path(), "b", Level { rps: 9_700.0, p99_us: 1_800.0, ..BASE }, 100, 9);

    // Without --min-effect the 3 % is a regression like any other.
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% lower: regression"), "{stdout}");

    // With it, throughput is significant but too small to matter; p99 still fails the run.
    let (code, stdout, stderr) =
        compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression"), os("--min-effect"), os("5%")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("no meaningful difference"), "{stdout}");
    assert!(row(&stdout, "p99 latency").contains("% slower: regression"), "{stdout}");
    assert!(stdout.contains("smallest change that matters 5.0%"), "{stdout}");
    assert!(stderr.contains("p99 latency") && !stderr.contains("throughput"), "{stderr}");

    // Only throughput compared: nothing left that fails.
    let (code, stdout, stderr) = compare(&[
        a.as_os_str(),
        b.as_os_str(),
        os("--fail-on-regression"),
        os("--min-effect=5%"),
        os("--metric=throughput"),
        os("--format=json"),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let throughput = metric(&report, "throughput");
    assert_eq!(throughput["verdict"], "no meaningful difference", "{throughput}");
    assert!(throughput["p_value"].as_f64().unwrap() < 0.05, "{throughput}");
    assert_eq!(report["min_effect"], 0.05);
    assert_eq!(report["regressions"], json!([]));

    for bad in ["150%", "five", "-1%"] {
        let flag = format!("--min-effect={bad}");
        let (code, _, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os(&flag)]);
        assert_eq!(code, Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--min-effect") && stderr.lines().count() == 1, "{stderr}");
    }
}
