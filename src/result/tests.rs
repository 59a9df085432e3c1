use super::*;

/// Results as rpcmeter wrote them before this module existed (run of each kind, a merge).
const WRITTEN: [(&str, &str); 7] = [
    ("result", include_str!("../../tests/data/result.json")),
    ("workload", include_str!("../../tests/data/results/workload.json")),
    ("open", include_str!("../../tests/data/results/open.json")),
    ("burst", include_str!("../../tests/data/results/burst.json")),
    ("bidi", include_str!("../../tests/data/results/bidi.json")),
    ("merged", include_str!("../../tests/data/results/merged.json")),
    ("calib", include_str!("../../tests/data/results/calib.json")),
];

#[test]
fn every_written_result_reads_and_writes_back_unchanged() {
    for (name, text) in WRITTEN {
        let mut before: Value = serde_json::from_str(text).unwrap();
        let run = Run::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // 1.x wrote the call-latency histogram twice; it is written once, and was the same.
        let twice = before.as_object_mut().unwrap().remove("histogram");
        assert_eq!(twice.as_ref(), Some(&before["histograms"]["call_latency"]), "{name}");
        assert!(run.other.is_empty() && run.meta.other.is_empty(), "{name}: keys not typed: {:?}", run.other.keys());
        let after = run.to_value();
        // The first key that differs, rather than two whole results.
        for (key, value) in before.as_object().unwrap() {
            assert_eq!(after.get(key), Some(value), "{name}: {key}");
        }
        assert_eq!(after.as_object().unwrap().len(), before.as_object().unwrap().len(), "{name}");
        // Byte for byte, as written.
        assert_eq!(run.to_json_pretty(), serde_json::to_string_pretty(&before).unwrap() + "\n", "{name}");
    }
}

#[test]
fn keys_of_a_newer_minor_are_kept_and_a_newer_major_refused() {
    let mut v: Value = serde_json::from_str(WRITTEN[0].1).unwrap();
    v["meta"]["schema_version"] = "2.7".into();
    v["from_the_future"] = serde_json::json!({"x": 1});
    v.as_object_mut().unwrap().remove("histogram");
    let run = Run::from_value(v.clone()).unwrap();
    assert_eq!(run.to_value(), v);
    v["meta"]["schema_version"] = "3.0".into();
    let refused = Run::from_value(v).unwrap_err().to_string();
    let expected = format!("schema version 3.0 is newer than this rpcmeter reads ({SCHEMA_VERSION}): upgrade rpcmeter");
    assert_eq!(refused, expected);
}

#[test]
fn a_slice_is_a_run_of_its_own() {
    let run = Run::parse(WRITTEN[1].1).unwrap();
    let put = run.of_slice("calls_by_name", "put").unwrap();
    let slice = &run.calls_by_name.as_ref().unwrap()["put"];
    assert_eq!(put.requests.total, slice.requests.total);
    assert_eq!(put.whole().histogram, slice.histogram);
    assert_eq!(put.latency_us, slice.latency_us);
    assert!(put.meta.name.as_deref().unwrap().contains("calls_by_name=put"));
    let none = run.of_slice("calls_by_name", "nope").unwrap_err().to_string();
    assert_eq!(none, "--slice calls_by_name=nope: no such name in calls_by_name (it has: echo, put)");
    assert!(run.of_slice("flows", "x").is_err());
    assert_eq!(parse_slice("calls_by_name=a=b"), Ok(("calls_by_name".into(), "a=b".into())));
    assert!(parse_slice("nope=x").is_err() && parse_slice("calls_by_name").is_err());
}

#[test]
fn slices_add_exactly() {
    let run = Run::parse(WRITTEN[1].1).unwrap();
    let names = run.calls_by_name.as_ref().unwrap();
    let mut sum = slice::SliceSum::default();
    let mut echo = names["echo"].clone();
    echo.method = None;
    let mut put = names["put"].clone();
    put.method = None;
    sum.add(&echo).unwrap();
    sum.add(&put).unwrap();
    let both = sum.finish(&|n| n as f64);
    assert_eq!(both.requests.total, run.requests.total);
    assert_eq!(both.latency_us, run.latency_us);
    assert_eq!(both.throughput_rps, run.requests.total as f64);
    // Two methods under one name do not add.
    let mut sum = slice::SliceSum::default();
    sum.add(&names["put"]).unwrap();
    let mut other = names["put"].clone();
    other.method = Some("Other/method".into());
    assert_eq!(sum.add(&other).unwrap_err(), "method \"Other/method\" is not the other inputs' \"EchoService.echo\"");
}

#[test]
fn ended_reads_every_word_written_and_refuses_others() {
    let mut v: Value = serde_json::from_str(WRITTEN[0].1).unwrap();
    for (word, ended) in [
        ("completed", Ended::Completed),
        ("interrupted", Ended::Interrupted),
        ("drain timed out", Ended::DrainTimedOut),
        ("partial", Ended::Partial),
    ] {
        v["meta"]["ended"] = word.into();
        let run = Run::from_value(v.clone()).unwrap();
        assert_eq!((run.meta.ended, run.meta.ended.as_str()), (ended, word));
        assert_eq!(run.meta.ended.partial(), ended != Ended::Completed, "{word}");
        assert_eq!(run.to_value()["meta"]["ended"], word);
    }
    // Before: any other word was read as completed.
    v["meta"]["ended"] = "half done".into();
    let refused = Run::from_value(v).unwrap_err().to_string();
    assert!(
        refused.starts_with("not a result of rpcmeter run --format json: meta.ended: unknown variant"),
        "{refused}"
    );
}

/// One formula for OK calls/s: a run's, its slice's and its value as written agree (before:
/// three, of which html's took the OK share of the throughput).
#[test]
fn ok_calls_per_second_is_one_formula() {
    for (name, text) in WRITTEN {
        let run = Run::parse(text).unwrap();
        let ok = run.ok_calls_per_s();
        assert_eq!(ok, ok_calls_per_s(run.requests.ok, run.window()), "{name}");
        if let Some(written) = run.ok_rps {
            // The window is written to the µs: the rate read back is as near as that.
            let near = written * 0.5e-6 / run.duration_s + 1e-9;
            assert!((ok - written).abs() <= near, "{name}: {ok} against {written} as written");
        }
    }
    assert_eq!(ok_calls_per_s(900, Duration::from_secs(2)), 450.0);
    assert_eq!(ok_calls_per_s(900, Duration::ZERO), 0.0, "no window, no rate");
    let run = Run::parse(WRITTEN[1].1).unwrap();
    let put = run.of_slice("calls_by_name", "put").unwrap();
    assert_eq!(put.ok_rps, Some(put.ok_calls_per_s()));
    assert_eq!(put.ok_calls_per_s(), ok_calls_per_s(put.requests.ok, run.window()));
}

/// One formula for CPU per call: over every call, the warm-up's included, as the CPU is
/// (before: a result read back divided by the measured calls alone).
#[test]
fn cpu_per_call_is_one_formula_and_counts_the_warmup() {
    assert_eq!(cpu_per_call(Duration::from_millis(500), 500), Duration::from_millis(1));
    assert_eq!(cpu_per_call(Duration::from_millis(500), 0), Duration::ZERO);
    let mut run = Run::parse(WRITTEN[2].1).unwrap();
    run.client = Some(Client { cpu_s: 0.5, ..Client::default() });
    run.requests.total = 400;
    run.warmup = Some(Warmup { calls: 100, ..Warmup::default() });
    assert_eq!(run.cpu_per_call(), Some(Duration::from_millis(1)));
    run.client = None;
    assert_eq!(run.cpu_per_call(), None, "a merge's clients are its inputs'");
}

/// 1.x keyed checks "call: expression": such a result still reads, one entry per key.
#[test]
fn checks_keyed_as_1x_wrote_them_still_read() {
    let mut v: Value = serde_json::from_str(WRITTEN[1].1).unwrap();
    v["meta"]["schema_version"] = "1.0".into();
    v["checks"] = serde_json::json!({
        "get: status == OK": {"call": "get", "expression": "status == OK", "pass": 5, "fail": 1},
        "put: status == OK": {"call": "put", "expression": "status == OK", "pass": 7, "fail": 0},
    });
    let checks = Run::from_value(v).unwrap().checks.unwrap();
    let read: Vec<(&str, u64)> = checks.iter().map(|c| (c.call.as_str(), c.pass)).collect();
    assert_eq!(read, [("get", 5), ("put", 7)]);
}

/// One key for the call-latency histogram: written once, and a result with `histogram`
/// alone (as the oldest wrote it) reads it as `histograms.call_latency`.
#[test]
fn the_call_histogram_has_one_key() {
    let mut v: Value = serde_json::from_str(WRITTEN[0].1).unwrap();
    let text = v["histogram"].clone();
    v.as_object_mut().unwrap().remove("histograms");
    let run = Run::from_value(v).unwrap();
    assert_eq!(Value::from(run.histograms.call_latency.clone()), text);
    let written = run.to_value();
    assert!(written.get("histogram").is_none(), "written twice");
    assert_eq!(written["histograms"]["call_latency"], text);
}

/// The kinds results have always held read back as themselves, and a kind this version does
/// not know (a newer minor's) is kept as written, not refused and not taken for another (before:
/// a list of kinds kept by hand beside the enum; slow_backend, missing from it, read back as
/// partial).
#[test]
fn warning_kinds_read_as_written() {
    let words = [
        "partial",
        "closed_loop",
        "behind_schedule",
        "schedule_lag",
        "unsent",
        "client_cpu",
        "shared_cores",
        "littles_law",
        "abandoned",
        "server_count",
        "server_throughput",
        "warm_up",
        "no_steady_state",
        "client_hiccups",
        "slow_backend",
        "down_backend",
        "failed_checks",
        "flows_stopped",
        "a_kind_from_the_future",
    ];
    for word in words {
        let read: Warning = serde_json::from_value(serde_json::json!({"kind": word, "message": "m"})).unwrap();
        let known = read.kind.known().is_some();
        assert_eq!(known, word != "a_kind_from_the_future", "{word}: {read:?}");
        assert_eq!(serde_json::to_value(&read).unwrap()["kind"], word, "written back as read");
    }
}
