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
        // A merge before 2.4 joined its inputs' modes; it reads as mixed, written so.
        if name == "merged" {
            assert_eq!(before["mode"], "closed, open");
            before["mode"] = "mixed".into();
        }
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
        "merged",
        "mixed_inputs",
        "client_bottleneck",
        "shard_missing",
        "rebuilt",
        "left_out",
        "a_kind_from_the_future",
    ];
    for word in words {
        let read: Warning = serde_json::from_value(serde_json::json!({"kind": word, "message": "m"})).unwrap();
        let known = read.kind.known().is_some();
        assert_eq!(known, word != "a_kind_from_the_future", "{word}: {read:?}");
        assert_eq!(serde_json::to_value(&read).unwrap()["kind"], word, "written back as read");
    }
}

/// Each field of the result's word sets reads as its enum in every saved result (before:
/// strings, matched by hand in each format).
#[test]
fn the_saved_results_words_read_typed() {
    let read = |i: usize| Run::parse(WRITTEN[i].1).unwrap();
    let modes: Vec<Option<Mode>> = (0..WRITTEN.len()).map(|i| read(i).mode.known()).collect();
    use Mode::*;
    assert_eq!(modes, [Some(Open), Some(Closed), Some(Open), Some(Burst), Some(Closed), Some(Mixed), Some(Closed)]);
    let process = |i: usize| read(i).meta.arrival.map(|a| a.process.known());
    assert_eq!(
        (process(0), process(2), process(1)),
        (Some(Some(Process::Uniform)), Some(Some(Process::Poisson)), None)
    );
    assert_eq!(read(4).messages.unwrap().kind.known(), Some(StreamKind::Bidi));
    assert_eq!(read(3).warm_rounds.and_then(|w| w.known()), Some(Verdict::Steady));
    let verdict = |i: usize| read(i).steady_state.map(|s| s.verdict.known());
    assert_eq!(
        (verdict(0), verdict(1), verdict(5)),
        (Some(Some(Verdict::Steady)), Some(Some(Verdict::TooShort)), None)
    );
    // Each word reads back as itself.
    for mode in Mode::ALL {
        assert_eq!(Word::<Mode>::read(mode.as_str()), Word::Known(*mode));
    }
    for v in Verdict::ALL {
        assert_eq!(serde_json::to_value(Word::Known(*v)).unwrap(), v.as_str());
    }
}

/// A word a newer minor version writes (a mode, an arrival, a stream kind, a verdict) is
/// read and kept as written, never taken for one this version knows (report/table.rs shows
/// it as written).
#[test]
fn a_newer_minors_words_are_kept_as_written() {
    let mut v: Value = serde_json::from_str(WRITTEN[3].1).unwrap();
    v.as_object_mut().unwrap().remove("histogram");
    v["meta"]["schema_version"] = "2.9".into();
    v["mode"] = "ramping".into();
    v["meta"]["arrival"] = serde_json::json!({"process": "bursty"});
    v["messages"] =
        serde_json::json!({"kind": "half duplex", "sent": 1, "received": 1, "sent_per_s": 1.0, "received_per_s": 1.0});
    v["steady_state"]["verdict"] = "drifting slowly".into();
    v["warm_rounds"] = "still warming".into();
    let run = Run::from_value(v.clone()).unwrap();
    assert_eq!(run.mode, Word::Other("ramping".into()));
    assert_eq!(run.steady_state.as_ref().unwrap().verdict, Word::Other("drifting slowly".into()));
    assert_eq!(run.warm_rounds, Some(Word::Other("still warming".into())));
    assert_eq!(run.to_value(), v, "written back as read");
}

/// One list of notices behind `notices` and `warnings`: a run's written with both; a result
/// written without `warnings` (a merge before 2.4) reads its notices kindless and writes
/// them back without it; a text the coordinator added without a warning keeps no kind
/// while the others keep theirs (before: two lists, rejoined by text where read).
#[test]
fn notices_and_warnings_are_one_list() {
    let run = Run::parse(WRITTEN[0].1).unwrap();
    let kinds: Vec<Option<NoticeKind>> = run.notices.0.iter().map(|n| n.kind.as_ref().and_then(Word::known)).collect();
    assert_eq!(kinds, [Some(NoticeKind::ScheduleLag), Some(NoticeKind::SharedCores)]);
    let merged = Run::parse(WRITTEN[5].1).unwrap();
    assert_eq!(merged.notices.0.len(), 6);
    assert!(merged.notices.0.iter().all(|n| n.kind.is_none()));
    assert!(merged.to_value().get("warnings").is_none(), "none was read: none written");

    let mut v: Value = serde_json::from_str(WRITTEN[0].1).unwrap();
    v.as_object_mut().unwrap().remove("histogram");
    let mut texts = v["notices"].as_array().unwrap().clone();
    texts.insert(1, "shard 1/2 is missing from this result: lost".into());
    v["notices"] = texts.into();
    let run = Run::from_value(v.clone()).unwrap();
    let kinds: Vec<Option<NoticeKind>> = run.notices.0.iter().map(|n| n.kind.as_ref().and_then(Word::known)).collect();
    assert_eq!(kinds, [Some(NoticeKind::ScheduleLag), None, Some(NoticeKind::SharedCores)]);
    assert_eq!(run.to_value(), v, "written back as read");

    // Written from the one list: the texts in order, and each kinded one as a warning.
    let mut fresh = Run::default();
    fresh.notices.push(NoticeKind::Merged, "merged");
    fresh.notices.push(NoticeKind::ShardMissing, "missing");
    let written = fresh.to_value();
    assert_eq!(written["notices"], serde_json::json!(["merged", "missing"]));
    let expected =
        serde_json::json!([{"kind": "merged", "message": "merged"}, {"kind": "shard_missing", "message": "missing"}]);
    assert_eq!(written["warnings"], expected);
    assert_eq!(Run::default().to_value()["warnings"], serde_json::json!([]), "no notice: an empty list, as before");
}
