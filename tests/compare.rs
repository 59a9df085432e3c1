//! `rpcmeter compare A.json B.json` on synthetic results (only the keys it reads): verdicts
//! in the table and in JSON, what is left out (warm-up, the last partial interval), and the
//! exit codes: 0 for A/A, 1 for a regression with --fail-on-regression, 2 for a bad file.
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
mod common;
#[path = "common/compare_cli.rs"]
mod compare_cli;
use compare_cli::{compare, os, row};

/// A run's level: its throughput, latencies and error rate per interval.
#[derive(Clone, Copy)]
struct Level {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    error_rate: f64,
}

const BASE: Level = Level { rps: 10_000.0, p50_us: 400.0, p99_us: 1_500.0, error_rate: 0.0 };

/// A result file of `measured` full 1 s intervals at `level` with ±1.5 % noise (a quiet machine), after two warm-up
/// intervals 3x slower (far off the level: they would change the verdicts if they were
/// counted) and followed by a last interval of 0.25 s at the level. The whole-run numbers are
/// those of the measured full intervals, as a run writes them.
fn write_result(dir: &Path, name: &str, level: Level, measured: usize, seed: u64) -> PathBuf {
    let result = result_json(name, level, measured, seed);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&result).unwrap()).unwrap();
    path
}

fn result_json(name: &str, level: Level, measured: usize, seed: u64) -> Value {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut noise = move || 1.0 + 0.015 * (rng.random::<f64>() * 2.0 - 1.0);
    let mut intervals = Vec::new();
    let mut t = 0.0;
    let row = |t: f64, length: f64, phase: &str, rps: f64, p50: f64, p99: f64, error_rate: f64| {
        let calls = (rps * length).round() as u64;
        let failed = (calls as f64 * error_rate.min(1.0)).round() as u64;
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
            if level.error_rate >= 1.0 { 1.0 } else { level.error_rate * e },
        ));
    }
    let full = &intervals[2..];
    let sum = |key: &str| full.iter().map(|iv| iv[key].as_u64().unwrap()).sum::<u64>();
    let median = |key: &str| {
        let mut v: Vec<f64> = full.iter().map(|iv| iv[key].as_f64().unwrap()).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (calls, ok, failed) = (sum("calls"), sum("ok"), sum("failed"));
    let (p50, p99) = (median("p50_us"), median("p99_us"));
    // The last interval is short, as a `-z` run's is, and counts like the others for its length.
    let (r, l50, l99) = (noise(), noise(), noise());
    let error_rate = if level.error_rate >= 1.0 { 1.0 } else { level.error_rate };
    intervals.push(row(t + 0.25, 0.25, "measured", level.rps * r, level.p50_us * l50, level.p99_us * l99, error_rate));
    json!({
        "meta": {"name": name, "started_at": format!("2025-01-01T00:00:{:02}.000Z", seed % 60)},
        "call": "EchoService/echo",
        "target": "127.0.0.1:9000",
        "requests": {"total": calls, "ok": ok, "failed": failed},
        "duration_s": measured as f64,
        "throughput_rps": calls as f64 / measured as f64,
        "ok_rps": ok as f64 / measured as f64,
        "latency_us": {"p50": p50, "p99": p99},
        "interval_s": 1.0,
        "intervals": intervals,
    })
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
        assert!(line.contains("no change"), "{line}\n{stdout}");
    }
    // One run a side: the report says what it cannot judge, and how many runs would.
    assert!(stdout.contains("A: 1 run, B: 1 run.") && stdout.contains("\"not judged\""), "{stdout}");
    assert!(stdout.contains("3 runs or more a side") && stdout.contains("compare --runs"), "{stdout}");
    // Four metrics tested as one family, and the output says how.
    assert!(stdout.contains("Holm-Bonferroni over the 4 metrics tested"), "{stdout}");

    let (code, stdout, _) = compare(&[a.as_os_str(), b.as_os_str(), os("--format"), os("json")]);
    assert_eq!(code, Some(0));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["regressions"], json!([]));
    for key in ["throughput", "p50", "p99", "error_rate"] {
        let m = metric(&report, key);
        assert_eq!(m["verdict"], "no change", "{m}");
        assert_eq!((m["a"]["runs"].as_array().unwrap().len(), m["b"]["runs"].as_array().unwrap().len()), (1, 1));
        assert!(m["p_value"].as_f64().unwrap() >= 0.05, "{m}");
    }
    let throughput = metric(&report, "throughput");
    let ci = throughput["ratio_ci"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < 1.0 && ci[1].as_f64().unwrap() > 1.0, "{throughput}");
    // The floor of one run a side: 2 % per run, so about ±7.3 % at Holm's level 0.05 / 4
    // (z = 2.50; ±5.5 % at 0.05 alone).
    let resolution = throughput["resolution"].as_f64().unwrap();
    assert!((0.07..0.08).contains(&resolution), "{throughput}");
    assert_eq!(report["family"]["metrics"], json!(["throughput", "p50", "p99", "error_rate"]));
    assert_eq!(report["family"]["method"], "Holm-Bonferroni");
}

#[test]
fn a_regression_is_named_and_fails_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 30, 3);
    // 10 % less throughput, 30 % slower p99, 0.5 % errors; p50 unchanged.
    let worse = Level { rps: 9_000.0, p99_us: 1_950.0, error_rate: 0.005, ..BASE };
    let b = write_result(dir.path(), "b", worse, 30, 4);

    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let line = |label: &str| row(&stdout, label).to_string();
    assert!(line("throughput").contains("% lower: regression"), "{stdout}");
    assert!(line("p99 latency").contains("% slower: regression"), "{stdout}");
    assert!(line("p50 latency").contains("no change"), "{stdout}");
    assert!(line("error rate").contains("B is higher by 0.5"), "{stdout}");
    assert!(line("error rate").contains("pp: regression"), "{stdout}");

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
    assert!(p99["p_value"].as_f64().unwrap() < 0.05, "{p99}");
    // The interval covers the true shift (x1.3) and not 1: it agrees with the p-value.
    let covers = |ci: &Value, x: f64| ci[0].as_f64().unwrap() <= x && x <= ci[1].as_f64().unwrap();
    assert!(covers(&p99["ratio_ci"], 1.3) && !covers(&p99["ratio_ci"], 1.0), "{p99}");
    assert_eq!(report["metrics"].as_array().unwrap().len(), 2);

    // B better than A: an improvement, never a failure.
    let (code, stdout, stderr) = compare(&[b.as_os_str(), a.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% higher: improvement"), "{stdout}");
    assert!(row(&stdout, "p99 latency").contains("% faster: improvement"), "{stdout}");
    assert!(row(&stdout, "error rate").contains("pp: improvement"), "{stdout}");
}

#[test]
fn a_default_run_of_four_full_intervals_is_judged() {
    // `run -z 5s` (the default) often ends with 4 full intervals and a last one a little
    // longer; compare needed 5 a side, so two default runs were never judged.
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 4, 5);
    let b = write_result(dir.path(), "b", Level { rps: 5_000.0, ..BASE }, 4, 6);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% lower: regression"), "{stdout}");
    assert!(!stdout.contains("too few"), "{stdout}");
}

#[test]
fn a_b_whose_every_call_failed_is_a_regression_never_faster() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "ok", BASE, 30, 11);
    // Every call failed at once (UNAVAILABLE in 40 µs): fast "latency", high call rate.
    let failed = Level { rps: 50_000.0, p50_us: 40.0, p99_us: 90.0, error_rate: 1.0 };
    for measured in [2, 30] {
        let b = write_result(dir.path(), &format!("allfailed{measured}"), failed, measured, 12);
        let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        assert!(!stdout.contains("faster") && !stdout.contains("improvement"), "{stdout}");
        assert!(row(&stdout, "throughput").contains("B has no OK calls: regression"), "{stdout}");
        assert!(row(&stdout, "p50 latency").contains("not judged") && stdout.contains("has no OK calls"), "{stdout}");
        assert!(row(&stdout, "error rate").contains("B is higher by 100.00 pp: regression"), "{stdout}");
        // The regression and what could not be judged, each on a line of its own.
        assert_eq!(stderr.lines().count(), 2, "{stderr}");
        assert!(stderr.lines().any(|l| l.contains("not judged") && l.contains("p50 latency")), "{stderr}");
        assert!(stderr.lines().any(|l| l.contains("regressed") && l.contains("error rate")), "{stderr}");
    }

    // Only latency asked for: nothing to judge is a failure of its own.
    let b = dir.path().join("allfailed30.json");
    let (code, stdout, stderr) =
        compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression"), os("--metric=p50")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not judged: p50 latency"), "{stderr}");
    // Without --fail-on-regression it is a report, not a failure.
    let (code, _, _) = compare(&[a.as_os_str(), b.as_os_str(), os("--metric=p50")]);
    assert_eq!(code, Some(0));
}

#[test]
fn latency_counts_ok_calls_only() {
    // 30 % of B's calls failed: its result's latency mixes them in, so it is not compared;
    // its throughput of OK calls is (and is lower).
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 10, 13);
    let b = write_result(dir.path(), "b", Level { p50_us: 100.0, error_rate: 0.3, ..BASE }, 10, 14);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "p50 latency").contains("not judged: 30% of"), "{stdout}");
    assert!(row(&stdout, "throughput").contains("% lower: regression"), "{stdout}");
}

#[test]
fn merged_results_are_judged_with_the_spread_of_several_or_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    // What `merge` and `run --shards` write: histograms and counts, no interval series.
    let merged = |name: &str, level: Level, seed: u64| {
        let mut r = result_json(name, level, 10, seed);
        let o = r.as_object_mut().unwrap();
        o.remove("intervals");
        o.remove("interval_s");
        o.insert("shards".into(), json!([{"input": "s0"}, {"input": "s1"}]));
        r["meta"]["merged_from"] = json!(["s0.json", "s1.json"]);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, r.to_string()).unwrap();
        path
    };
    // An A/A pair of merged runs whose p99 moved x1.9 (what 3 of 4 such pairs did): judged
    // against the bare floor, it was a regression.
    let a = merged("a", BASE, 15);
    let b = merged("b", Level { p99_us: BASE.p99_us * 1.9, ..BASE }, 16);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    for label in ["throughput", "p50 latency", "p99 latency"] {
        let line = row(&stdout, label);
        assert!(line.contains("not judged: ") && line.contains("merged from 2 results"), "{stdout}");
    }
    assert!(row(&stdout, "error rate").contains("no change"), "{stdout}");
    assert!(!stdout.contains("resolves only") && !stdout.contains("±16%"), "{stdout}");
    assert!(stderr.contains("not judged: throughput") && stderr.contains("merged from 2 results"), "{stderr}");
    // A merged result against a single run: the same.
    let single = write_result(dir.path(), "single", BASE, 10, 17);
    let (code, stdout, stderr) = compare(&[a.as_os_str(), single.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "p50 latency").contains("not judged"), "{stdout}");

    // Three merged runs a side: their spread is measured, and a 50 % slower p50 is found.
    let side = |name: &str, p50_us: f64, seed: u64| -> Vec<PathBuf> {
        (0..3).map(|i| merged(&format!("{name}{i}"), Level { p50_us, ..BASE }, seed + i)).collect()
    };
    let (a, b) = (side("ma", BASE.p50_us, 70), side("mb", BASE.p50_us * 1.5, 80));
    let mut args: Vec<&std::ffi::OsStr> = a.iter().map(|p| p.as_os_str()).collect();
    args.push(os("--"));
    args.extend(b.iter().map(|p| p.as_os_str()));
    let (code, stdout, stderr) = compare(&args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "p50 latency").contains("% slower: regression"), "{stdout}");
}

#[test]
fn different_methods_or_the_same_run_twice_are_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 10, 18);
    let mut other = result_json("b", BASE, 10, 19);
    other["call"] = json!("rpcmeter.lab.v1.Storage/Get");
    let b = dir.path().join("b.json");
    std::fs::write(&b, other.to_string()).unwrap();
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("rpcmeter: warning: the runs call different methods"), "{stderr}");
    assert!(stderr.contains("rpcmeter.lab.v1.Storage/Get") && stdout.contains("different methods"), "{stderr}");

    let (_, _, stderr) = compare(&[a.as_os_str(), a.as_os_str()]);
    assert!(stderr.contains("are the same run"), "{stderr}");

    // Run ids (`meta.run_id`, and a merged result's `meta.source_run_ids`) name the runs.
    let with_ids = |name: &str, id: Value, sources: Value| {
        let mut r = result_json(name, BASE, 10, 21);
        r["meta"]["run_id"] = id;
        r["meta"]["source_run_ids"] = sources;
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, r.to_string()).unwrap();
        path
    };
    let one = with_ids("one", json!("r-1"), json!([]));
    let other = with_ids("other", json!("r-2"), json!([]));
    let merged = with_ids("merged", json!("r-3"), json!(["r-1", "r-4"]));
    let (code, _, stderr) = compare(&[one.as_os_str(), other.as_os_str()]);
    assert!(code == Some(0) && stderr.is_empty(), "same start, other ids: two runs: {stderr}");
    let (_, _, stderr) = compare(&[merged.as_os_str(), one.as_os_str()]);
    assert!(stderr.contains("one.json is one of the runs merged into"), "{stderr}");
}

#[test]
fn several_runs_a_side_are_judged_on_the_spread_between_them() {
    let dir = tempfile::tempdir().unwrap();
    // Runs that move 12 % from one to the next (what a busy machine does): a 10 % drop of B
    // is within that spread with 3 runs a side...
    let runs = |side: &str, scale: f64, seed: u64| -> Vec<PathBuf> {
        [1.0, 1.12, 0.88]
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let level = Level { rps: BASE.rps * scale * k, ..BASE };
                write_result(dir.path(), &format!("{side}{i}"), level, 10, seed + i as u64)
            })
            .collect()
    };
    let (a, b) = (runs("a", 1.0, 20), runs("b", 0.9, 30));
    // (the interval then holds a 10 % change either way: not judged, not "no change")
    // Flags before `--`: what follows it is B's runs.
    let mut args: Vec<&std::ffi::OsStr> = vec![os("--format=json")];
    args.extend(a.iter().map(|p| p.as_os_str()));
    args.push(os("--"));
    args.extend(b.iter().map(|p| p.as_os_str()));
    let (code, stdout, stderr) = compare(&args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let throughput = metric(&report, "throughput");
    assert_eq!(throughput["verdict"], "not judged", "{throughput}");
    assert!(throughput["why"].as_str().unwrap().contains("cannot rule out a change of ±10%"), "{throughput}");
    assert_eq!(throughput["a"]["runs"].as_array().unwrap().len(), 3);
    assert!(throughput["degrees_of_freedom"].as_f64().is_some(), "{throughput}");
    assert!(report["runs"].as_str().unwrap().starts_with("A: 3 runs, B: 3 runs."), "{report}");

    // ... and the same drop with steady runs is found.
    let steady = |side: &str, scale: f64, seed: u64| -> Vec<PathBuf> {
        (0..3)
            .map(|i| {
                write_result(dir.path(), &format!("s{side}{i}"), Level { rps: BASE.rps * scale, ..BASE }, 10, seed + i)
            })
            .collect()
    };
    let (a, b) = (steady("a", 1.0, 40), steady("b", 0.9, 50));
    let mut args: Vec<&std::ffi::OsStr> = a.iter().map(|p| p.as_os_str()).collect();
    args.push(os("--"));
    args.extend(b.iter().map(|p| p.as_os_str()));
    let (code, stdout, stderr) = compare(&args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% lower: regression"), "{stdout}");
}

#[test]
fn with_several_runs_a_side_their_spread_is_the_noise_not_their_intervals_swings() {
    // Runs whose p50 agree to 1.5 % from one to the next while their 1 s intervals swing by
    // ±30 % (a busy machine's bursts, within each run alike). The swings are in each run's
    // value and so in the spread between runs; counted again as each run's own noise, they
    // left a 15 % slower B "not judged" with 5 runs a side.
    let dir = tempfile::tempdir().unwrap();
    let swinging = |r: &mut Value| {
        for (i, row) in r["intervals"].as_array_mut().unwrap().iter_mut().enumerate() {
            let k = if i % 2 == 0 { 0.7 } else { 1.3 };
            row["p50_us"] = json!(row["p50_us"].as_f64().unwrap() * k);
        }
    };
    let side = |name: &str, p50_us: f64, seed: u64| -> Vec<PathBuf> {
        (0..5)
            .map(|i| write_edited(dir.path(), &format!("{name}{i}"), Level { p50_us, ..BASE }, 10, seed + i, swinging))
            .collect()
    };
    let judge = |a: &[PathBuf], b: &[PathBuf]| -> Value {
        let mut args: Vec<&std::ffi::OsStr> = vec![os("--format=json"), os("--metric=p50")];
        args.extend(a.iter().map(|p| p.as_os_str()));
        args.push(os("--"));
        args.extend(b.iter().map(|p| p.as_os_str()));
        let (code, stdout, stderr) = compare(&args);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        serde_json::from_str(&stdout).unwrap()
    };
    let a = side("a", BASE.p50_us, 200);
    let slower = judge(&a, &side("slower", BASE.p50_us * 1.15, 210));
    assert_eq!(metric(&slower, "p50")["verdict"], "regression", "{slower}");
    let same = judge(&a, &side("same", BASE.p50_us, 220));
    assert_eq!(metric(&same, "p50")["verdict"], "no change", "{same}");
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
    // A flag after `--` (where every argument is B's), one side only, three files without `--`.
    let (code, _, stderr) = compare(&[a.as_os_str(), os("--"), a.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--fail-on-regression comes after `--`"), "{stderr}");
    for args in [vec![a.as_os_str()], vec![a.as_os_str(), a.as_os_str(), a.as_os_str()]] {
        let (code, _, stderr) = compare(&args);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.lines().count() == 1 && stderr.contains("--"), "{stderr}");
    }
}

#[test]
fn a_significant_change_below_min_effect_is_no_meaningful_difference() {
    let dir = tempfile::tempdir().unwrap();
    // A 10 % drop in throughput is significant with one run a side; p99 is 40 % slower.
    let a = write_result(dir.path(), "a", BASE, 30, 8);
    let b = write_result(dir.path(), "b", Level { rps: 9_000.0, p99_us: 2_100.0, ..BASE }, 30, 9);

    // Without --min-effect the 10 % is a regression like any other.
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("% lower: regression"), "{stdout}");

    // With it, throughput is significant but too small to matter; p99 still fails the run.
    let (code, stdout, stderr) =
        compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression"), os("--min-effect"), os("15%")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(row(&stdout, "throughput").contains("no change"), "{stdout}");
    assert!(row(&stdout, "p99 latency").contains("% slower: regression"), "{stdout}");
    assert!(stdout.contains("smallest change that matters 15%"), "{stdout}");
    assert!(stderr.contains("p99 latency") && !stderr.contains("throughput"), "{stderr}");

    // Only throughput compared: nothing left that fails.
    let (code, stdout, stderr) = compare(&[
        a.as_os_str(),
        b.as_os_str(),
        os("--fail-on-regression"),
        os("--min-effect=15%"),
        os("--metric=throughput"),
        os("--format=json"),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let throughput = metric(&report, "throughput");
    assert_eq!(throughput["verdict"], "no change", "{throughput}");
    assert!(throughput["p_value"].as_f64().unwrap() < 0.05, "{throughput}");
    assert_eq!(report["min_effect"], 0.15);
    assert_eq!(report["regressions"], json!([]));

    for bad in ["150%", "five", "-1%"] {
        let flag = format!("--min-effect={bad}");
        let (code, _, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os(&flag)]);
        assert_eq!(code, Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--min-effect") && stderr.lines().count() == 1, "{stderr}");
    }
}

/// `result_json` written to `dir/name.json` after `edit`.
fn write_edited(
    dir: &Path,
    name: &str,
    level: Level,
    measured: usize,
    seed: u64,
    edit: impl FnOnce(&mut Value),
) -> PathBuf {
    let mut result = result_json(name, level, measured, seed);
    edit(&mut result);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, result.to_string()).unwrap();
    path
}

fn judged(m: &Value) -> bool {
    matches!(m["verdict"].as_str(), Some("regression" | "improvement"))
}

#[test]
fn a_stall_in_the_last_short_interval_is_in_the_noise_not_a_verdict() {
    // A `-z 3s` run: two full intervals and a short third, which alone held a 72 ms stall. The
    // run's p99 is the stall; its noise came from the two full intervals only, so an A/A pair
    // read "B / A = 0.028, p = 1.4e-15, improvement".
    let dir = tempfile::tempdir().unwrap();
    let a = write_edited(dir.path(), "stalled", BASE, 2, 60, |r| {
        let last = r["intervals"].as_array_mut().unwrap().last_mut().unwrap();
        last["p99_us"] = json!(72_000.0);
        last["max_us"] = json!(72_000.0);
        r["latency_us"]["p99"] = json!(72_000.0);
    });
    let b = write_result(dir.path(), "clean", BASE, 2, 61);
    for (x, y) in [(&a, &b), (&b, &a)] {
        let (code, stdout, stderr) = compare(&[x.as_os_str(), y.as_os_str(), os("--format=json")]);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        let p99 = metric(&report, "p99");
        assert!(!judged(p99), "{p99}");
        assert!(p99["p_value"].as_f64().unwrap() > 0.05, "{p99}");
    }
}

#[test]
fn a_run_that_froze_does_not_look_quieter_than_a_clean_one() {
    // One second of ten without an OK call (the client froze): its throughput is 10 % lower
    // and its p50 holds a 1 s stall. Its intervals without that second are as quiet as a
    // clean run's; dropped, the frozen run was judged as if clean ("B is 11% higher").
    let dir = tempfile::tempdir().unwrap();
    let frozen = write_edited(dir.path(), "frozen", BASE, 10, 62, |r| {
        let rows = r["intervals"].as_array_mut().unwrap();
        let frozen_row = &mut rows[6];
        for key in ["calls", "ok", "failed"] {
            frozen_row[key] = json!(0);
        }
        for key in ["rps", "p50_us", "p90_us", "p99_us", "max_us"] {
            frozen_row[key] = json!(0.0);
        }
        let ok = r["requests"]["ok"].as_f64().unwrap() * 0.9;
        r["requests"] = json!({"total": ok as u64, "ok": ok as u64, "failed": 0});
        r["ok_rps"] = json!(ok / 10.0);
        r["throughput_rps"] = json!(ok / 10.0);
    });
    let clean = write_result(dir.path(), "clean", BASE, 10, 63);
    let other = write_result(dir.path(), "other", BASE, 10, 64);
    let report = |a: &Path, b: &Path| -> Value {
        let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--format=json")]);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        serde_json::from_str(&stdout).unwrap()
    };
    let (clean_pair, frozen_pair) = (report(&clean, &other), report(&frozen, &other));
    for key in ["throughput", "p50"] {
        let (c, f) = (metric(&clean_pair, key), metric(&frozen_pair, key));
        assert!(!judged(f), "{f}");
        let resolution = |m: &Value| m["resolution"].as_f64().unwrap_or(f64::INFINITY);
        assert!(resolution(f) > 2.0 * resolution(c), "frozen {f}\nclean {c}");
    }
}

#[test]
fn a_run_whose_client_was_disturbed_is_named_and_its_metrics_are_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 10, 90);
    // B's client froze for a second (SIGSTOP): its own result says so (client_hiccups, as the
    // run writes it when hiccups stand out of the calibrated floor), and its numbers are the
    // client's. Without that warning the pair is a clean A/A.
    let hiccups = |r: &mut Value| {
        r["warnings"] =
            json!([{"kind": "client_hiccups", "message": "client hiccups: a 1 ms sleep overshot by p99 1.00 s"}]);
        r["client"] = json!({"cpu_s": 0.1, "cpu_us_per_request": 10.0, "max_rss_bytes": 1, "threads": 1,
                             "utilization": 0.1, "hiccup_us": {"count": 900, "p50": 60.0, "p99": 1_000_000.0, "max": 1_000_000.0}});
    };
    let unsent = |r: &mut Value| r["requests"]["unsent"] = json!(500);
    // Sends late by the client's own wake-ups (no calibration: beyond 1 ms), or by slot waits
    // (the target's doing: judged).
    let lag = |wakeups: u64, slots: u64| {
        move |r: &mut Value| {
            r["schedule_lag_us"] = json!({"count": 1000, "p50": 40.0, "p99": 5_000.0, "max": 9_000.0});
            r["late_wakeups"] = json!(wakeups);
            r["late_sends"] = json!(slots);
        }
    };
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &[&str], &str)> = vec![
        (
            "hiccups",
            Box::new(hiccups),
            &["throughput", "p50 latency", "p99 latency"],
            "the client was held up (a 1 ms sleep overshot by up to 1.000 s)",
        ),
        ("unsent", Box::new(unsent), &["throughput", "p50 latency", "p99 latency"], "500 of "),
        (
            "lag",
            Box::new(lag(50, 0)),
            &["p50 latency", "p99 latency"],
            "schedule lag p99 5.00 ms from the client's own late wake-ups",
        ),
        ("slots", Box::new(lag(0, 50)), &[], ""),
    ];
    for (name, edit, touched, why) in cases {
        let b = write_edited(dir.path(), name, BASE, 10, 91, |r| edit(r));
        let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
        for label in ["throughput", "p50 latency", "p99 latency", "error rate"] {
            let line = row(&stdout, label);
            if touched.contains(&label) {
                assert!(line.contains("not judged: ") && line.contains(why), "{name}: {stdout}");
                assert!(!line.contains("regression") && !line.contains("improvement"), "{name}: {stdout}");
            } else {
                assert!(line.contains("no change"), "{name} {label}: {stdout}");
            }
        }
        if touched.is_empty() {
            assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
            assert!(stderr.is_empty(), "{name}: {stderr}");
            continue;
        }
        // Named on stderr, and a gate fails saying which metric and why.
        assert_eq!(code, Some(1), "{name}: {stdout}{stderr}");
        assert!(stderr.contains(&format!("warning: {}: {why}", b.display())), "{name}: {stderr}");
        assert!(stderr.contains(&format!("not judged: {}", touched[0])), "{name}: {stderr}");
    }

    // Three runs a side: their spread holds the disturbed run, which is named and judged.
    let side = |name: &str, seed: u64, disturbed: bool| -> Vec<PathBuf> {
        (0..3)
            .map(|i| {
                write_edited(dir.path(), &format!("{name}{i}"), BASE, 10, seed + i, |r| {
                    if disturbed && i == 1 {
                        r["requests"]["unsent"] = json!(5);
                    }
                })
            })
            .collect()
    };
    let (a, b) = (side("ra", 100, false), side("rb", 110, true));
    let mut args: Vec<&std::ffi::OsStr> = a.iter().map(|p| p.as_os_str()).collect();
    args.push(os("--"));
    args.extend(b.iter().map(|p| p.as_os_str()));
    let (code, stdout, stderr) = compare(&args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("rb1.json: 5 of "), "{stderr}");
    assert!(!stdout.contains("not judged: "), "{stdout}");
}

#[test]
fn a_change_the_runs_cannot_resolve_is_not_judged_and_fails_the_gate() {
    // B's throughput fell to 0.17 x A's and its p99 rose 7x, with intervals that swung from
    // 2 % to 50 % of A's rate: the interval of B / A spanned more than 600 %. The verdict was
    // "no significant difference", the header "differences under throughput 636% are not
    // judged", and --fail-on-regression exited 0.
    let dir = tempfile::tempdir().unwrap();
    let a = write_result(dir.path(), "a", BASE, 10, 120);
    let b = write_edited(dir.path(), "b", BASE, 10, 121, |r| {
        let rows = r["intervals"].as_array_mut().unwrap();
        let mut ok = 0;
        for (i, row) in rows.iter_mut().enumerate().skip(2) {
            let share = if i % 2 == 0 { 0.02 } else { 0.5 };
            let calls = (BASE.rps * share * row["length_s"].as_f64().unwrap()) as u64;
            ok += calls;
            row["calls"] = json!(calls);
            row["ok"] = json!(calls);
            row["p99_us"] = json!(BASE.p99_us * if i % 2 == 0 { 30.0 } else { 1.5 });
        }
        r["requests"] = json!({"total": ok, "ok": ok, "failed": 0});
        r["ok_rps"] = json!(BASE.rps * 0.17);
        r["latency_us"]["p99"] = json!(BASE.p99_us * 7.1);
    });
    let (code, stdout, stderr) = compare(&[a.as_os_str(), b.as_os_str(), os("--fail-on-regression")]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let line = row(&stdout, "throughput");
    assert!(line.contains("not judged: the interval cannot rule out a change of ±10%"), "{stdout}");
    assert!(stderr.contains("not judged: throughput (the interval cannot rule out"), "{stderr}");
    let (_, stdout, _) = compare(&[a.as_os_str(), b.as_os_str(), os("--format=json")]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(metric(&report, "throughput")["verdict"], "not judged");
    assert!(report["not_judged"].as_array().unwrap().contains(&json!("throughput")), "{report}");
}
