//! Warm-up and steady state found in the run's interval series (PELT on the per-interval
//! p50 latency), against servers whose warm-up is known: the ground truth.
mod common;
use common::*;
use std::time::Duration;

/// Open loop, 100 calls/s for 8 s in half-second intervals: 16 points.
/// These tests' truth is timing: one at a time, so that they do not load the 2 cores for
/// each other (a busy machine moves a p50 by more than the levels they tell apart).
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Returns the verdict, and the interval rows to show when it is wrong; None when the run
/// cannot be judged (`judged`).
fn steady_state(behaviour: Behaviour) -> Option<(serde_json::Value, String)> {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(behaviour);
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.csv");
    let mut cmd = run_echo(server.addr, &["--rps", "100", "-z", "8s", "--interval", "500ms"]);
    cmd.arg("--export").arg(format!("csv={}", rows.display()));
    let r = json_of(cmd);
    let rows = std::fs::read_to_string(rows).unwrap();
    judged(&r, &rows).then(|| (r["steady_state"].clone(), rows))
}

/// Whether the run's verdict can be checked against the server's truth, whose levels are
/// milliseconds apart. Not when the client was held up beyond TOO_BUSY (its own hiccups), nor
/// on a machine with more runnable tasks than cores (`machine_busy`): a load of 20 on 2 cores
/// moved the p50 of whole intervals by more than that, with hiccups under 100 ms. Nor when an
/// interval holds no calls: a client held up past a whole interval (over 0.6 s at that load)
/// hands its calls over in the next one, and the verdict rightly refuses to read such a
/// series; it must then name the empty interval that is really in the rows.
fn judged(r: &serde_json::Value, rows: &str) -> bool {
    let s = &r["steady_state"];
    if s["verdict"] == "an interval without calls" {
        let empty = rows.lines().skip(1).any(|row| row.split(',').nth(2) == Some("0"));
        assert!(empty, "no interval without calls in the rows: {s}\n{rows}");
        eprintln!("not judged, an interval holds no calls (a busy machine):\n{rows}");
        return false;
    }
    let held = client_hiccup_max(r);
    if held >= TOO_BUSY {
        eprintln!("not judged ({s}), the client was held up {held:?} (a busy machine):\n{rows}");
        return false;
    }
    if let Some(load) = machine_busy() {
        eprintln!("not judged ({s}), the machine's load is {load}:\n{rows}");
        return false;
    }
    true
}

#[test]
fn a_server_slow_for_its_first_3_s_warms_up_in_3_s() {
    let ms = Duration::from_millis;
    let Some((s, rows)) = steady_state(Behaviour::WarmsUp { slow: ms(12), fast: ms(3), warm: Duration::from_secs(3) })
    else {
        return;
    };
    assert_eq!(s["verdict"], "steady", "{s}\n{rows}");
    let after = s["steady_after_s"].as_f64().unwrap();
    assert!((after - 3.0).abs() <= 1.0, "steady after {after} s, truth 3 s\n{rows}");
}

#[test]
fn a_flat_server_has_no_warm_up_longer_than_a_second() {
    let Some((s, rows)) = steady_state(Behaviour::WarmsUp {
        slow: Duration::from_millis(2),
        fast: Duration::from_millis(2),
        warm: Duration::ZERO,
    }) else {
        return;
    };
    assert_eq!(s["verdict"], "steady", "{s}\n{rows}");
    assert!(s["steady_after_s"].as_f64().unwrap() <= 1.0, "{s}\n{rows}");
}

#[test]
fn a_server_drifting_the_whole_run_reaches_no_steady_state() {
    let ms = Duration::from_millis;
    let Some((s, rows)) = steady_state(Behaviour::Drifts { base: ms(1), per_second: ms(4) }) else {
        return;
    };
    assert_eq!(s["verdict"], "no steady state", "{s}\n{rows}");
}

#[test]
fn burst_rounds_name_their_warm_up() {
    // Bursts load both cores for seconds: alone too, or a steady-state test beside them sees
    // its first seconds slower (CI saw a flat server's p50 at 4.6 ms, then 3.7 ms once done).
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["--burst", "200", "--rounds", "6"]));
    assert!(r["warm_rounds"].is_string(), "{r}");
    let table = run_echo(server.addr, &["--burst", "200", "--rounds", "6"]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("  Rounds: "), "{text}");
}

#[test]
fn warmup_auto_takes_the_found_warm_up_out_of_the_result() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let ms = Duration::from_millis;
    let server = TestServer::start(Behaviour::WarmsUp { slow: ms(12), fast: ms(3), warm: Duration::from_secs(3) });
    let r = json_of(run_echo(server.addr, &["--rps", "100", "-z", "8s", "--interval", "500ms", "--warmup", "auto"]));
    let rows: Vec<String> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{},{},{}", i["t_s"], i["phase"], i["calls"]))
        .collect();
    let rows = format!("t_s,phase,calls\n{}", rows.join("\n"));
    // Nothing lost, judged or not: measured + warm-up calls are every call the server answered.
    let (measured, warm) = (r["requests"]["total"].as_u64().unwrap(), r["warmup"]["calls"].as_u64().unwrap_or(0));
    assert_eq!(measured + warm, server.calls());
    if !judged(&r, &rows) {
        return;
    }
    let warmup = r["warmup"]["duration_s"].as_f64().unwrap_or_else(|| panic!("no warm-up taken out: {r}"));
    assert!((warmup - 3.0).abs() <= 1.0, "warm-up taken out: {warmup} s, truth 3 s");
    // What is left is the fast server: its p90 is below the warm-up's p10 (the levels are
    // 12 ms and 3 ms; compared with each other, not with a clock, as a busy machine moves both).
    let p90 = r["latency_us"]["p90"].as_f64().unwrap();
    let warm_p10 = r["warmup"]["latency_us"]["p10"].as_f64().unwrap();
    assert!(p90 < warm_p10, "measured p90 {p90} µs not below the warm-up's p10 {warm_p10} µs: {}", r["latency_us"]);
    assert!((f64::from(warm as u32) - 100.0 * warmup).abs() <= 60.0, "{warm} warm-up calls over {warmup} s");
}
