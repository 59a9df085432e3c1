//! `rpcmeter run` end to end against real servers on 127.0.0.1 port 0: every load model,
//! open-loop ground truth under a known stall, retry accounting against known rejections,
//! Ctrl-C and a dying target.
mod common;
use common::*;
use std::time::Duration;

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}
fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn open_loop_latency_matches_the_analytic_truth_of_a_stall() {
    // Enough slots: the stalled calls are all in flight, sent on time.
    stall_ground_truth("1000");
}

#[test]
fn open_loop_corrects_coordinated_omission_when_slots_run_out() {
    // 100 slots for 500 stalled calls: 400 are sent late and count from their intended time.
    let r = stall_ground_truth("100");
    assert!(u(&r["late_sends"]) >= 350, "late sends {}", r["late_sends"]);
}

/// Tests whose truth is timing hold this, so that an overloading test beside them on the
/// 2 cores does not move their numbers.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn stall_ground_truth(max_in_flight: &str) -> serde_json::Value {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    // 500 calls/s for 4 s; call number 1000 (t = 2 s) stalls all handling for 1 s. (Kept
    // short: the suite's time goes to real-time tests like this one.)
    let (rate, seconds, at, stall) = (500.0, 4.0, 1000u64, 1.0);
    let server = TestServer::start(Behaviour::StallAt { at, stall: Duration::from_secs_f64(stall) });
    let r = json_of(run_echo(server.addr, &["--rps", "500", "-z", "4s", "--max-in-flight", max_in_flight]));
    assert_accounted(&r);

    // Truth: call i is due at i/rate; calls due while the stall lasts wait for its end,
    // so their latency is stall_end - i/rate; the others answer at once (~0 here).
    let n = (rate * seconds) as u64;
    let stall_start = (at - 1) as f64 / rate;
    let mut truth: Vec<f64> = (0..n)
        .map(|i| i as f64 / rate)
        .map(|t| if t >= stall_start && t < stall_start + stall { stall_start + stall - t } else { 0.0 })
        .collect();
    truth.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p99 = truth[(0.99 * n as f64).ceil() as usize - 1];
    let max = truth[n as usize - 1];

    // Every call due is sent, or counted as never sent (a starved client falls behind).
    let (calls, unsent) = (u(&r["requests"]["total"]), u(&r["requests"]["unsent"]));
    assert!((calls + unsent).abs_diff(n) <= 2, "open loop sent {calls} calls and {unsent} never, expected {n}");
    let got_p99 = f(&r["latency_us"]["p99"]) / 1e6;
    let got_max = f(&r["latency_us"]["max"]) / 1e6;
    // A busy machine only adds time, never takes it: from below, the truth holds always.
    let seen = format!("p99 {got_p99:.4} s, truth {p99:.4} s; max {got_max:.4} s, truth {max:.4} s");
    assert!(got_p99 > p99 * 0.95 && got_max > max * 0.95, "{seen}");
    // From above, it holds within the client's own hiccups (the time this run was held up),
    // checked only while those stay under TOO_BUSY and the cores keep up (`machine_busy`):
    // beyond, the answers the stall released were delayed by more than the hiccups show (the
    // client's share of the cores sets how fast it reads 500 of them), and only the bound from
    // below is defended.
    let hiccup = client_hiccup_max(&r);
    if let Some(load) = machine_busy() {
        eprintln!("{seen}: not checked from above, the machine's load is {load}");
    } else if hiccup < TOO_BUSY {
        let slack = hiccup.as_secs_f64();
        assert!(got_p99 < p99 * 1.05 + slack && got_max < max * 1.05 + slack, "{seen}; hiccups up to {hiccup:?}");
    } else {
        eprintln!("{seen}: not checked from above, the client was held up to {hiccup:?}");
    }
    assert_eq!(r["mode"], "open");
    // Service time (actual send to answer) never exceeds the latency from the intended time.
    let service_p99 = f(&r["service_time_us"]["p99"]) / 1e6;
    assert!(service_p99 <= got_p99 * 1.001, "service p99 {service_p99:.4} s above call p99 {got_p99:.4} s");
    r
}

#[test]
fn an_overloaded_open_loop_ends_at_its_duration_and_counts_what_it_never_sent() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behaviour::Echo);
    let started = std::time::Instant::now();
    let r = json_of(run_echo(server.addr, &["--rps", "1000000", "-z", "1s", "--max-in-flight", "16"]));
    let wall = started.elapsed();
    // Far below a million calls a second: the end comes at -z, not after the backlog.
    assert!(wall < Duration::from_secs(4), "ran {wall:?}");
    assert_eq!(r["partial"], false);
    assert_eq!(r["meta"]["ended"], "completed");
    let (sent, unsent) = (u(&r["requests"]["total"]), u(&r["requests"]["unsent"]));
    assert!(unsent > 500_000, "unsent {unsent}");
    assert!(sent + unsent >= 999_000 && sent + unsent <= 1_000_001, "sent {sent} + unsent {unsent}");
    assert!(f(&r["duration_s"]) <= wall.as_secs_f64());
    assert!(r["notices"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("never sent")));
}

#[test]
fn a_slow_open_loop_reports_no_more_time_than_it_ran() {
    let server = TestServer::start(Behaviour::Echo);
    let started = std::time::Instant::now();
    // Calls at 0 s and 2 s; the run ends at 3 s: the window is 3 s, not the 4 s of two slots.
    let r = json_of(run_echo(server.addr, &["--rps", "0.5", "-z", "3s"]));
    let wall = started.elapsed().as_secs_f64();
    assert_eq!(u(&r["requests"]["total"]), 2);
    assert!(f(&r["duration_s"]) <= wall, "duration {} s after {wall} s", r["duration_s"]);
}

#[test]
fn a_tiny_run_makes_no_bottleneck_verdict() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["-n", "5"]));
    let notices = r["notices"].as_array().unwrap();
    assert!(!notices.iter().any(|n| n.as_str().unwrap().contains("bottleneck")), "{notices:?}");
}

/// Issue 39: an open loop whose server stalls past the end of the run counts the calls it
/// never sent in its headline latency, each at its lower bound (the end minus its intended
/// send time), and prints the sent-only figures beside it under their own name. (Before: the
/// unsent calls were left out, and p99 was that of the fast calls sent before the stall.)
#[test]
fn calls_never_sent_count_in_the_headline_latency_at_their_lower_bound() {
    // The 2 calls in flight through the stall are answered within the drain.
    let r = unsent_at_their_lower_bound("5s");
    assert_eq!(r["meta"]["ended"], "completed");
}

/// As above with a drain that runs out before the stall does: the schedule still ran to its
/// end, so what it never sent is unsent and in the percentiles (before: 0 unsent, and p99 of
/// the calls answered before the stall).
#[test]
fn a_drain_that_ran_out_counts_its_unsent_calls_too() {
    let r = unsent_at_their_lower_bound("300ms");
    assert_eq!(r["meta"]["ended"], "drain timed out");
    assert_eq!(u(&r["requests"]["abandoned"]), 2, "{}", r["requests"]);
}

/// 200 calls/s for 2 s with 2 slots; call 301 (t = 1.5 s) stalls all handling for 3 s: the
/// calls due after it never leave. Checks the headline against the calls' lower bounds and
/// the sent-only figures beside it (JSON and table); returns the result.
fn unsent_at_their_lower_bound(drain: &str) -> serde_json::Value {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let (rate, due, end) = (200.0, 400u64, 2.0);
    let server = TestServer::start(Behaviour::StallAt { at: 301, stall: Duration::from_secs(3) });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let export = format!("json={}", file.display());
    let mut cmd = run_echo(
        server.addr,
        &["--rps", "200", "-z", "2s", "--max-in-flight", "2", "--drain", drain, "--export", &export],
    );
    cmd.args(["--format", "table"]);
    let (_, table, stderr) = outcome(cmd);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_accounted(&r);
    // The server's count is the truth of what was sent; the schedule's, of what was due.
    let q = &r["requests"];
    let (sent, unsent) = (u(&q["total"]) + u(&q["abandoned"]), u(&q["unsent"]));
    assert_eq!(sent, server.calls(), "{q}");
    assert_eq!(sent + unsent, due, "{q}");
    assert!(unsent >= 50, "the stall left {unsent} calls unsent");
    // Lower bounds: call k is due at k/rate; one never sent had waited end - k/rate when the
    // run ended (a sent one, at least 0).
    let mut bound: Vec<f64> = (0..due).map(|k| if k < sent { 0.0 } else { end - k as f64 / rate }).collect();
    bound.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let answered = u(&q["total"]);
    let p99_bound = bound[(0.99 * (answered + unsent) as f64).ceil() as usize - 1 + (due - answered - unsent) as usize];
    let p99 = f(&r["latency_us"]["p99"]) / 1e6;
    assert!(p99 >= p99_bound * 0.999, "p99 {p99:.4} s below the lower bound {p99_bound:.4} s");
    assert_eq!(u(&r["latency_us"]["count"]), answered + unsent, "every due call in the headline but those abandoned");
    // The sent-only figures, beside it under their own name, and in the table.
    let sent_only = &r["sent_latency_us"];
    assert_eq!(u(&sent_only["count"]), answered, "{r}");
    assert!(f(&sent_only["p99"]) <= f(&r["latency_us"]["p99"]), "{sent_only}");
    let header =
        table.lines().find(|l| l.contains("call") && l.contains("sent only")).unwrap_or_else(|| panic!("{table}"));
    assert!(header.find("call") < header.find("sent only"), "{header}");
    let p99_row = table.lines().find(|l| l.trim_start().starts_with("p99 ")).unwrap_or_else(|| panic!("{table}"));
    assert_eq!(p99_row.split_whitespace().count(), 1 + 3 * 2, "p99, call, sent only, service: {p99_row}");
    r
}

#[test]
fn closed_loop_hides_the_stall_and_says_so() {
    let server = TestServer::start(Behaviour::StallAt { at: 200, stall: Duration::from_secs(1) });
    let r = json_of(run_echo(server.addr, &["-c", "4", "-z", "3s"]));
    assert_accounted(&r);
    // Four workers wait through the stall once each: a handful of slow calls among hundreds
    // (625 at a load of 25 on 2 cores, thousands on a quiet machine), above the 99th
    // percentile, so p99 stays far below the second that an open loop would show: under
    // 100 ms, plus the client's own hiccups on a busy machine, and never a stalled call.
    assert!(u(&r["requests"]["total"]) >= 400, "{r}");
    assert!(f(&r["latency_us"]["max"]) > 900_000.0, "{r}");
    let bound = (0.1 + client_hiccup_max(&r).as_secs_f64()).min(0.9);
    assert!(f(&r["latency_us"]["p99"]) < bound * 1e6, "p99 not under {bound} s: {r}");
    let notices = r["notices"].to_string();
    assert!(notices.contains("coordinated omission"), "{notices}");
}

#[test]
fn closed_loop_total_and_loop_counts_are_exact() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["-c", "3", "-n", "500"]));
    assert_eq!(u(&r["requests"]["total"]), 500);
    assert_eq!(u(&r["requests"]["ok"]), 500);
    assert_eq!(u(&r["statuses"]["OK"]), 500);
    let r = json_of(run_echo(server.addr, &["-c", "5", "--loop", "20"]));
    assert_eq!(u(&r["requests"]["total"]), 100);
    assert_eq!(u(&r["loop_per_worker"]), 20);
    // The server saw exactly what the client counted: 600 calls.
    assert_eq!(server.calls(), 600);
    assert!(f(&r["client"]["cpu_s"]) > 0.0 && u(&r["client"]["max_rss_bytes"]) > 0);
    let hist = r["histograms"]["call_latency"].as_str().unwrap();
    assert!(hist.len() > 20, "histogram missing: {hist}");
}

#[test]
fn bursts_report_each_round() {
    let server = TestServer::start(Behaviour::Echo);
    let mut cmd = run_echo(server.addr, &["--burst", "50", "--rounds", "4"]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.matches("Took: ").count(), 4, "{table}");
    assert!(table.contains("RPS: "));
    let r = json_of(run_echo(server.addr, &["--burst", "50", "--rounds", "4"]));
    assert_eq!(u(&r["requests"]["total"]), 200);
    assert_eq!(r["rounds"].as_array().unwrap().len(), 4);
}

#[test]
fn warmup_is_measured_apart_and_excluded() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["--rps", "200", "--warmup", "1s", "-z", "2s"]));
    let warm = u(&r["warmup"]["calls"]);
    let measured = u(&r["requests"]["total"]);
    // Each call due is in its phase, or never sent (a starved client falls behind).
    let unsent = u(&r["requests"]["unsent"]);
    assert!((warm + measured + unsent).abs_diff(600) <= 2, "{warm} warm-up, {measured} measured, {unsent} never sent");
    if unsent == 0 {
        assert!(warm.abs_diff(200) <= 2, "warm-up calls {warm}");
        assert!(measured.abs_diff(400) <= 2, "measured calls {measured}");
    }
    assert_eq!(server.calls(), warm + measured);
    // The measured window is the 2 s of schedule after the warm-up, to its last answer: that
    // comes at most the slowest call's latency after the schedule's end (0.8 s at a load of 25).
    let (duration, slowest) = (f(&r["duration_s"]), f(&r["latency_us"]["max"]) / 1e6);
    assert!(duration > 1.8 && duration < 2.2 + slowest, "{duration} s, the slowest call {slowest} s");
}

#[test]
fn rate_ramp_sends_the_integral() {
    let server = TestServer::start(Behaviour::Echo);
    // 100 -> 300 calls/s over 2 s: 400 calls due in the ramp, then 300/s for 1 s.
    let r = json_of(run_echo(server.addr, &["--rps", "100:300:2s", "-z", "3s"]));
    let calls = u(&r["requests"]["total"]);
    assert!(calls.abs_diff(700) <= 2, "{calls}");
}

#[test]
fn worker_ramp_and_connections_spread_calls() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["-c", "4", "--loop", "10", "--ramp", "200ms", "--connections", "2"]));
    assert_eq!(u(&r["requests"]["total"]), 40);
    assert_eq!(u(&r["connections"]), 2);
}

#[test]
fn retries_are_counted_once_and_timed_whole() {
    // Attempts 1,2 rejected, 3 ok, 4,5 rejected, 6 ok...: every call takes exactly 3 attempts.
    let server = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 3 });
    let r = json_of(run_echo(server.addr, &["-c", "1", "-n", "10", "--max-retries", "3", "--retry-ms", "20"]));
    let q = &r["requests"];
    assert_eq!((u(&q["total"]), u(&q["ok"]), u(&q["attempts"]), u(&q["retries"])), (10, 10, 30, 20));
    assert_eq!(u(&q["retry_exhausted"]), 0);
    assert_eq!(u(&r["attempt_statuses"]["RESOURCE_EXHAUSTED"]), 20);
    assert_eq!(u(&r["statuses"]["OK"]), 10);
    // Call latency covers both backoffs (20 + 40 ms); an attempt alone is far shorter.
    assert!(f(&r["latency_us"]["min"]) >= 60_000.0, "{}", r["latency_us"]);
    assert!(f(&r["attempt_latency_us"]["p50"]) < 20_000.0, "{}", r["attempt_latency_us"]);
    assert_eq!(server.calls(), 30);
}

#[test]
fn calls_out_of_retries_are_rmeters_retry_max() {
    // One retry allowed: odd calls are rejected twice (out of retries), even calls pass.
    let server = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 3 });
    let mut cmd = run_echo(server.addr, &["-c", "1", "--loop", "10", "--max-retries", "1", "--retry-ms", "1"]);
    let out = cmd.args(["--format", "rmeter"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("| Tasks | Loop | Duration | Successful | RetryMax | Retries | gRPC ResExh | gRPC Unavail | gRPC Other | Throughput (req/s) | Avg/Max/Min ms |"), "{text}");
    let row: Vec<&str> = text.lines().nth(2).unwrap().split('|').map(str::trim).collect();
    // | Tasks | Loop | Duration | Successful | RetryMax | Retries | ResExh | Unavail | Other |
    assert_eq!(&row[1..3], ["1", "10"]);
    assert_eq!(&row[4..10], ["5", "5", "5", "10", "0", "0"], "{text}");
}

#[test]
fn a_dying_target_is_counted_not_lost() {
    let mut server = TestServer::start(Behaviour::Echo);
    let child = run_echo(server.addr, &["-c", "2", "-z", "3s", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once calls have been answered, well inside the 3 s.
    common::wait::wait_for_count("20 calls at the server", 20, || server.calls());
    server.kill();
    let out = child.wait_with_output().unwrap();
    let r: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_accounted(&r);
    assert!(u(&r["requests"]["ok"]) > 0);
    assert!(u(&r["statuses"]["UNAVAILABLE"]) > 0, "{}", r["statuses"]);
}

#[test]
fn ctrl_c_leaves_a_valid_partial_result() {
    let server = TestServer::start(Behaviour::Echo);
    let child = run_echo(server.addr, &["-c", "2", "-z", "60s", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait::wait_for_count("20 calls at the server", 20, || server.calls());
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["partial"], true);
    assert!(u(&r["requests"]["total"]) > 0);
    assert!(f(&r["duration_s"]) < 30.0);
    assert_accounted(&r);
}

#[test]
fn assertions_decide_the_exit_code() {
    let server = TestServer::start(Behaviour::Echo);
    let ok = run_echo(server.addr, &["-n", "50", "--assert", "error_rate<1%,p99<10s"]).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let breached = run_echo(server.addr, &["-n", "50", "--assert", "p99<1ns"]).output().unwrap();
    assert_eq!(breached.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&breached.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("p99<1ns"), "{stderr}");
}

#[test]
fn per_call_csv_and_hdr_log_are_streamed() {
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("calls.csv");
    let hdr = dir.path().join("run.hlog");
    let mut cmd = run_echo(server.addr, &["-n", "300", "-c", "2", "--interval", "100ms"]);
    cmd.arg("--csv-details").arg(&csv).arg("--hdr-log").arg(&hdr);
    let r = json_of(cmd);
    assert_eq!(u(&r["requests"]["total"]), 300);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "msg,key,version,timestamp,latency_ns,bytes,success,status,attempts,warmup,worker,intended"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 300);
    assert!(rows.iter().all(|r| r.contains(",true,OK,1,false,")), "{}", rows[0]);
    // A closed loop has no schedule: no intended send time.
    assert!(rows.iter().all(|r| r.ends_with(',')), "{}", rows[0]);
    let log = std::fs::read_to_string(&hdr).unwrap();
    assert!(log.contains("#[StartTime:"), "{log}");
}

#[test]
fn interval_rows_add_up_to_the_total() {
    let server = TestServer::start(Behaviour::Echo);
    // The JSON's interval rows: the rows --format csv prints (report/csv.rs writes the same
    // series), beside the totals they must add up to.
    let args = ["--rps", "1000", "-z", "1500ms", "--interval", "200ms", "--warmup", "300ms"];
    let r = json_of(run_echo(server.addr, &args));
    let rows = r["intervals"].as_array().unwrap_or_else(|| panic!("no interval rows: {r}"));
    let (mut warm, mut measured) = (0u64, 0u64);
    for row in rows {
        match row["phase"].as_str() {
            Some("warmup") => warm += u(&row["calls"]),
            Some("measured") => measured += u(&row["calls"]),
            phase => panic!("phase {phase:?}: {row}"),
        }
    }
    let seen = serde_json::to_string_pretty(rows).unwrap();
    // Every call in exactly one interval, none lost or counted twice.
    assert_eq!(warm + measured, server.calls(), "{seen}");
    // 1800 calls due in 1.8 s: each sent, or counted as never sent (a starved client falls
    // behind: at a load of 20 on 2 cores it sent 1467).
    let unsent = u(&r["requests"]["unsent"]);
    assert!((warm + measured + unsent).abs_diff(1800) <= 2, "{unsent} never sent: {seen}");
    assert!(rows.len() >= 8, "{} intervals of 200 ms in 1.8 s: {seen}", rows.len());
}

/// A client held up across an interval's end (here frozen whole, SIGSTOP, as a busy machine
/// deschedules it) hands its calls over late. The collector closed the interval 25 ms after
/// its end all the same, so the calls of one interval landed in the next and a run at a
/// steady rate showed an interval without calls (a load of 20 on 2 cores did it to the
/// steady-state tests). It waits for each thread's hand-over now.
#[test]
fn a_client_held_up_at_an_intervals_end_keeps_each_call_in_its_interval() {
    use std::process::Stdio;
    let server = TestServer::start(Behaviour::Echo);
    let mut cmd = run_echo(server.addr, &["--rps", "200", "-z", "3s", "--interval", "250ms", "--format", "json"]);
    let child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i32;
    common::wait::wait_for_count("the first calls", 1, || server.calls());
    // Freezes of 60 ms, every 110 ms, for 2.2 s of the 3: some of them span an interval's end.
    for _ in 0..20 {
        // SAFETY: plain kill(2)s of our own child, still running (not waited for).
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(60));
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls: Vec<u64> = r["intervals"].as_array().unwrap().iter().map(|i| u(&i["calls"])).collect();
    assert_eq!(calls.iter().sum::<u64>(), u(&r["requests"]["total"]));
    // 50 calls due in each 250 ms; a freeze of 60 ms moves at most 12 of them across an end.
    // A busy machine may hold the client longer than the interval the collector waits for it
    // (then it is right to close without it): checked while the client's own hiccups stay
    // under 200 ms (with a freeze's 60 ms, short of the 250 ms waited). Nor while the cores
    // do not keep up (`machine_busy`): a collector that has not sent a thread's spares back
    // by the next interval's end has that hand-over land an interval late, by design
    // (docs/design.md, "Recording"), which no measure of the run shows. Beside two busy loops
    // (load 11-13) 3 of 24 runs read [47, 7, 96, ..], [48, 87, 0, 33, ..] and [35, 23, 83, ..]
    // with the client's hiccups at most 85, 177 and 182 ms.
    let held = client_hiccup_max(&r);
    if let Some(load) = machine_busy() {
        eprintln!("not checked, the machine's load is {load}: calls per interval {calls:?}, held up to {held:?}");
        return;
    }
    let full = &calls[..calls.len() - 1];
    assert!(
        held >= Duration::from_millis(200) || full.iter().all(|&n| n >= 25),
        "calls per interval: {calls:?}, held up to {held:?}"
    );
}

#[test]
fn open_loop_with_a_count_ends_at_its_last_call_and_keeps_the_rate() {
    let server = TestServer::start(Behaviour::Echo);
    // 256 senders wait for tickets far in the future: the 10th call must release them all.
    let r = json_of(run_echo(server.addr, &["--rps", "20", "-n", "10"]));
    assert_eq!(u(&r["requests"]["total"]), 10);
    assert_eq!(server.calls(), 10);
    // 10 calls at 20/s span half a second of schedule, even though the last answer is early;
    // a late one (a busy machine) ends the window, at most the slowest call after its time.
    let rps = f(&r["throughput_rps"]);
    let slowest = f(&r["latency_us"]["max"]) / 1e6;
    assert!(rps < 21.0 && rps > 10.0 / (0.5f64).max(0.45 + slowest) - 1.0, "throughput {rps}, slowest {slowest} s");
}

#[test]
fn loop_counts_measured_calls_only() {
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["-c", "2", "--loop", "50", "--warmup", "100ms"]));
    assert_eq!(u(&r["requests"]["total"]), 100);
    assert_eq!(server.calls(), 100 + u(&r["warmup"]["calls"]));
}

#[test]
fn retries_in_flight_finish_when_the_count_is_reached() {
    // Two attempts in three are refused, shared among 4 workers; when the last call is
    // claimed, the others' retries must still run to their end: every failed call is one
    // that used all 6 attempts, none was cut short.
    let server = TestServer::start(Behaviour::RejectUnlessMultipleOf { every: 3 });
    let r = json_of(run_echo(server.addr, &["-c", "4", "-n", "40", "--max-retries", "5", "--retry-ms", "1"]));
    let q = &r["requests"];
    assert_eq!(u(&q["total"]), 40);
    assert_eq!(u(&q["failed"]), u(&q["retry_exhausted"]), "{q}");
    assert_eq!(u(&q["attempts"]), server.calls());
}

/// The `schedule_lag` warning's text, if any.
fn schedule_lag_warning(r: &serde_json::Value) -> Option<String> {
    let warnings = r["warnings"].as_array().unwrap();
    warnings.iter().find(|w| w["kind"] == "schedule_lag").map(|w| w["message"].as_str().unwrap().to_string())
}

#[test]
fn schedule_lag_of_a_stall_is_named_slot_wait_not_a_busy_client() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    // 500 calls/s; call 200 (t = 0.4 s) stalls all handling for 300 ms: the 20 slots fill in
    // 40 ms, and the ~130 calls due after that wait for one.
    let server = TestServer::start(Behaviour::StallAt { at: 200, stall: Duration::from_millis(300) });
    let r = json_of(run_echo(server.addr, &["--rps", "500", "-z", "1500ms", "--max-in-flight", "20"]));
    assert_accounted(&r);
    let lag = schedule_lag_warning(&r).unwrap_or_else(|| panic!("no schedule lag warning: {}", r["warnings"]));
    let (slot, wakeup) = (u(&r["late_sends"]), u(&r["late_wakeups"]));
    // The stall's waits are counted as slot waits whatever the machine does: the server holds
    // them, not the client.
    assert!(slot >= 100, "late sends: {slot} waiting for a slot, {wakeup} by wake-ups: {lag}");
    // The warning names the larger cause. On a quiet machine that is the stall's slot wait;
    // a busy one (a load of 20 on 2 cores) also wakes the client late on hundreds of sends
    // before and after the stall, and then the warning rightly says so, with the slot waits.
    if slot >= wakeup {
        assert!(lag.contains("is slot wait") && lag.contains("20 in-flight slots"), "{lag}");
        assert!(!lag.contains("descheduled"), "{lag}");
    } else {
        assert!(lag.contains("is late wake-ups") && lag.contains(&format!("{slot} waited for a slot")), "{lag}");
    }
}

#[test]
fn schedule_lag_without_a_stall_blames_no_slot() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behaviour::Echo);
    let r = json_of(run_echo(server.addr, &["--rps", "500", "-z", "1s"]));
    assert_accounted(&r);
    // A loaded machine may wake the client late (then the warning says so); slots never ran
    // out. Unless its calls took half a second: all 256 slots busy means 256 calls sent and
    // unanswered, due 2 ms apart, so the oldest was by then 510 ms past its intended time (a
    // load of 20 on 2 cores took that long: the server shares the cores).
    let (slot, wakeup) = (u(&r["late_sends"]), u(&r["late_wakeups"]));
    let slowest = f(&r["latency_us"]["max"]) / 1e6;
    if slowest < 0.51 {
        assert_eq!(slot, 0, "no call took 510 ms (the slowest {slowest} s): {}", r["warnings"]);
    }
    if let Some(lag) = schedule_lag_warning(&r).filter(|_| wakeup > slot) {
        assert!(lag.contains("is late wake-ups") && lag.contains(&format!("{slot} waited for a slot")), "{lag}");
    } else if let Some(lag) = schedule_lag_warning(&r) {
        assert!(lag.contains("is slot wait") && slowest >= 0.51, "{lag}: the slowest call {slowest} s");
    }
}

#[test]
fn retry_backoffs_last_as_designed_not_a_timer_tick_more() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    // Attempts 1-3 of every call are UNAVAILABLE, the 4th OK: backoffs of 1, 2 and 4 ms.
    let server = TestServer::start(Behaviour::UnavailableUnlessMultipleOf { every: 4 });
    let calls = 40;
    let r =
        json_of(run_echo(server.addr, &["-c", "1", "-n", &calls.to_string(), "--max-retries", "3", "--retry-ms", "1"]));
    let q = &r["requests"];
    assert_eq!((u(&q["total"]), u(&q["ok"]), u(&q["attempts"])), (calls, calls, 4 * calls));
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len() as u64, 4 * calls);
    // Between two attempts' arrivals: the backoff and one attempt's round trip (the answer
    // back, the next request out); what is left over is the timer's overshoot. tokio's timer
    // rounds up to its 1 ms tick, nearly every backoff; a loaded machine (other tests, a
    // build) delays some wake-ups by its scheduler's tick, so the lower quartile judges.
    let round_trip = f(&r["attempt_latency_us"]["p50"]) / 1e3;
    let mut over: Vec<f64> = arrivals
        .chunks(4)
        .flat_map(|call| {
            [(1, 1.0), (2, 2.0), (3, 4.0)]
                .map(|(retry, designed)| (call[retry] - call[retry - 1]).as_secs_f64() * 1e3 - designed - round_trip)
        })
        .collect();
    over.sort_by(f64::total_cmp);
    let quartile = over[over.len() / 4];
    assert!(
        quartile < 0.5,
        "backoffs overshot by {quartile:.3} ms (lower quartile; median {:.3} ms), past an attempt's p50 of {round_trip:.3} ms",
        over[over.len() / 2]
    );
}

#[test]
fn per_call_details_carry_the_open_loops_intended_send_times() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let server = TestServer::start(Behaviour::Echo);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("calls.csv");
    let mut cmd = run_echo(server.addr, &["--rps", "500", "-z", "1s", "--threads", "2", "--connections", "2"]);
    cmd.arg("--csv-details").arg(&csv);
    let r = json_of(cmd);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name}: {header:?}"));
    let (sent, intended) = (column("timestamp"), column("intended"));
    let mut rows: Vec<(u128, u128)> = lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            (cells[intended].parse().unwrap_or_else(|_| panic!("{l}")), cells[sent].parse().unwrap())
        })
        .collect();
    assert_eq!(rows.len() as u64, u(&r["requests"]["total"]));
    // A loaded machine may leave the last calls unsent; those sent are the schedule's first.
    assert!(rows.len() >= 100, "{} calls", rows.len());
    rows.sort();
    // The schedule itself: 1/500 s apart exactly, across both threads. A call due but never
    // sent (a thread held up past the end while the other sent its later ticket) leaves a
    // gap of whole steps; no more of them than the run counts as never sent.
    let mut skipped = 0;
    for pair in rows.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(gap > 0 && gap % 2_000_000 == 0, "intended times {} and {}", pair[0].0, pair[1].0);
        skipped += (gap / 2_000_000 - 1) as u64;
    }
    assert!(skipped <= u(&r["requests"]["unsent"]), "{skipped} due calls skipped: {}", r["requests"]);
    // No call leaves before its time (the two clocks are read apart: 50 µs of slack).
    for (due, sent) in &rows {
        assert!(sent + 50_000 >= *due, "sent at {sent}, due at {due}");
    }
}
