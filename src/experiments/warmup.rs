//! `lab warmup`: docs/experiments.md, "Echo warm-up: the latch benchmark". The write-up saw a
//! cold JVM *client* report 5k calls/s for a server that did 39k once warm. Here each server
//! (rpcmeter's, grpc-go, grpc-java) is measured cold by a client that needs no warm-up
//! (rpcmeter: compiled ahead of time), by the write-up's own method (rounds of bursts) and by
//! an open loop whose interval series shows when latency settles; then the write-up's cold JVM
//! client is pointed at rpcmeter's server, which needs no warm-up either. What warms up is
//! then measured, not inferred: the server (rows 1-3) or the client (the last row).
use super::servers::{self, Runtime, Server};
use super::{ms, per_s, Lab};
use crate::stats::steady::{self, Steadiness};
use std::path::PathBuf;
use std::time::Duration;

pub const TITLE: &str = "Lab: warm-up of servers and clients (the latch benchmark)";

/// Sizes: the write-up's (10 rounds of 10,000 calls) or quick ones.
struct Sizes {
    burst: u32,
    rounds: u32,
    pause: Duration,
    open_rate: u32,
    open_for: Duration,
}

fn sizes(quick: bool) -> Sizes {
    if quick {
        Sizes {
            burst: 2000,
            rounds: 6,
            pause: Duration::from_millis(200),
            open_rate: 1000,
            open_for: Duration::from_secs(3),
        }
    } else {
        Sizes {
            burst: 10_000,
            rounds: 10,
            pause: Duration::from_secs(1),
            open_rate: 2000,
            open_for: Duration::from_secs(10),
        }
    }
}

/// One client/server pairing's rounds.
struct Rounds {
    pairing: String,
    took: Vec<Duration>,
    failed: u64,
}

impl Rounds {
    fn verdict(&self) -> Steadiness {
        steady::warm_rounds(&self.took)
    }

    /// The first round's time over the median of the steady rounds (or of the last half).
    fn first_over_warm(&self) -> Option<f64> {
        let from = match self.verdict() {
            Steadiness::Steady { from } if from > 0 => from,
            _ => self.took.len() / 2,
        };
        let mut warm: Vec<f64> = self.took.get(from.max(1)..)?.iter().map(Duration::as_secs_f64).collect();
        warm.sort_by(f64::total_cmp);
        let median = *warm.get(warm.len() / 2)?;
        Some(self.took.first()?.as_secs_f64() / median)
    }
}

fn verdict_text(v: Steadiness) -> String {
    match v {
        Steadiness::Steady { from: 0 } => "no warm-up the changepoint can tell from the noise".into(),
        Steadiness::Steady { from } => format!("warm after {from} round(s)"),
        Steadiness::NoSteadyState => "still changing at the end".into(),
        Steadiness::TooShort => "too few rounds to tell".into(),
        Steadiness::NotFinite { .. } => "a round with no time".into(),
    }
}

pub fn run(mut lab: Lab) -> anyhow::Result<(PathBuf, PathBuf)> {
    let s = sizes(lab.options.quick);
    lab.doc.para(format!(
        "The write-up (docs/experiments.md, \"Echo warm-up: the latch benchmark\") fired 10 rounds of 10,000 echo calls from a \
         JVM client and read 5,464 calls/s in round 1 and about 39,000 once warm; it concluded that its client was cold. \
         Here: {} rounds of {} calls per round{}, each server started fresh for each method.",
        s.rounds,
        s.burst,
        if lab.options.quick { " (quick mode; the write-up's sizes without --quick)" } else { "" }
    ));
    let ready = lab.servers(&[Runtime::Rpcmeter, Runtime::Go, Runtime::Java])?;
    let mut rounds: Vec<Rounds> = Vec::new();
    let mut open_rows = Vec::new();
    for (runtime, built) in &ready {
        if lab.interrupted() {
            break;
        }
        // A step not run (interrupted before it started) ends the servers' loop.
        let Some(burst) = burst_rounds(&mut lab, *runtime, built, &s)? else { break };
        rounds.push(burst);
        let Some(open) = open_loop_row(&mut lab, *runtime, built, &s)? else { break };
        open_rows.push(open);
    }
    if let Some(latch) = latch_client(&mut lab, &ready, &s)? {
        rounds.push(latch);
    }
    rounds_table(&mut lab, &rounds, &s);
    lab.doc.heading("Open loop on a fresh server: when latency settles");
    lab.doc.table(
        &[
            "server",
            "load",
            "p99 of the first 250 ms (ms)",
            "p99 of the run (ms)",
            "steady state (changepoint on p50 per interval)",
            "failed",
        ],
        open_rows,
    );
    lab.doc.findings("What was measured", conclusions(&rounds));
    lab.finish()
}

const ECHO: [&str; 4] = ["--call", "EchoService/echo", "-d", r#"{"content":"Hello"}"#];

/// The write-up's method on a cold server: rounds of bursts on one connection.
fn burst_rounds(lab: &mut Lab, runtime: Runtime, built: &servers::Built, s: &Sizes) -> anyhow::Result<Option<Rounds>> {
    let server = Server::start(runtime, built, runtime.name(), &[])?;
    let mut flags: Vec<String> = ECHO.iter().map(|s| s.to_string()).collect();
    flags.extend(["--burst".into(), s.burst.to_string(), "--rounds".into(), s.rounds.to_string()]);
    let label = format!("rpcmeter-to-{}-bursts", runtime.name());
    let Some(summary) = lab.measure(&label, &server, &flags)? else { return Ok(None) };
    Ok(Some(Rounds {
        pairing: format!("rpcmeter client → {} server", runtime.name()),
        took: summary.rounds.iter().flatten().map(|r| Duration::from_secs_f64(r.took_ms.max(0.0) / 1e3)).collect(),
        failed: summary.requests.failed,
    }))
}

/// An open loop on a fresh server: when does its latency settle? One row of the open-loop table.
fn open_loop_row(
    lab: &mut Lab,
    runtime: Runtime,
    built: &servers::Built,
    s: &Sizes,
) -> anyhow::Result<Option<Vec<String>>> {
    let server = Server::start(runtime, built, runtime.name(), &[])?;
    let mut flags: Vec<String> = ECHO.iter().map(|s| s.to_string()).collect();
    flags.extend(
        [
            "--rps",
            &s.open_rate.to_string(),
            "-z",
            &humantime::format_duration(s.open_for).to_string(),
            "--interval",
            "250ms",
        ]
        .map(String::from),
    );
    let label = format!("rpcmeter-to-{}-open-loop", runtime.name());
    let Some(summary) = lab.measure(&label, &server, &flags)? else { return Ok(None) };
    let us = |us: f64| Duration::from_nanos((us.max(0.0) * 1e3).round() as u64);
    let first = summary.intervals.iter().flatten().find(|i| i.calls > 0).map(|i| us(i.p99_us));
    let steady = summary.steady_state.clone().unwrap_or_default();
    Ok(Some(vec![
        format!("{} server", runtime.name()),
        format!("{} calls/s for {}", s.open_rate, humantime::format_duration(s.open_for)),
        first.map_or("–".into(), ms),
        ms(summary.latency_us.get(crate::stats::Statistic::Percentile(99.0)).unwrap_or_default()),
        match steady.steady_after_s {
            Some(after) => format!("steady after {after:.2} s"),
            None => steady.verdict.to_string(),
        },
        summary.requests.failed.to_string(),
    ]))
}

/// The write-up's own client, cold, against a server that needs no warm-up: its rounds,
/// when the JVM client was built and the lab is still running.
fn latch_client(lab: &mut Lab, ready: &[(Runtime, servers::Built)], s: &Sizes) -> anyhow::Result<Option<Rounds>> {
    if let Some((_, java)) = ready.iter().find(|(r, _)| *r == Runtime::Java) {
        if let (Some(client), Some((rt, rust))) = (&java.client, ready.iter().find(|(r, _)| *r == Runtime::Rpcmeter)) {
            if !lab.interrupted() {
                let server = Server::start(*rt, rust, "rpcmeter", &[])?;
                let args = [
                    "--target".to_string(),
                    server.addr.clone(),
                    "--calls".into(),
                    s.burst.to_string(),
                    "--rounds".into(),
                    s.rounds.to_string(),
                    "--pause".into(),
                    format!("{}ms", s.pause.as_millis()),
                ];
                eprintln!("lab warmup: the JVM latch client against rpcmeter serve");
                let out = servers::run_client(client, &args, Duration::from_secs(300))?;
                let (took, failed) = parse_latch(&out);
                return Ok(Some(Rounds { pairing: "JVM latch client → rpcmeter server".into(), took, failed }));
            }
        }
    }
    Ok(None)
}

/// The write-up's rounds table, one column per pairing, with the warm-up verdict, round 1
/// against the warm rounds and the failures beneath.
fn rounds_table(lab: &mut Lab, rounds: &[Rounds], s: &Sizes) {
    lab.doc.heading("Rounds: Took (ms) and calls/s per round, as the write-up printed them");
    let mut head = vec!["round".to_string()];
    head.extend(rounds.iter().map(|r| r.pairing.clone()));
    let n = rounds.iter().map(|r| r.took.len()).max().unwrap_or(0);
    let mut rows: Vec<Vec<String>> = (0..n)
        .map(|k| {
            let mut row = vec![(k + 1).to_string()];
            row.extend(rounds.iter().map(|r| {
                r.took.get(k).map_or("–".into(), |t| {
                    format!("{} ms · {} calls/s", ms(*t), per_s(s.burst as f64 / t.as_secs_f64()))
                })
            }));
            row
        })
        .collect();
    let mut verdicts = vec!["warm-up (changepoint on round times)".to_string()];
    verdicts.extend(rounds.iter().map(|r| verdict_text(r.verdict())));
    rows.push(verdicts);
    let mut ratio = vec!["round 1 / warm rounds' median".to_string()];
    ratio.extend(rounds.iter().map(|r| r.first_over_warm().map_or("–".into(), |x| format!("{x:.2}x"))));
    rows.push(ratio);
    let mut failed = vec!["failed calls".to_string()];
    failed.extend(rounds.iter().map(|r| r.failed.to_string()));
    rows.push(failed);
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    lab.doc.table(&head, rows);
}

/// What the rounds say: whose warm-up each pairing shows.
fn conclusions(rounds: &[Rounds]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rounds {
        let Some(x) = r.first_over_warm() else { continue };
        let whose = if r.pairing.starts_with("JVM") {
            "the client's warm-up (the server is rpcmeter's, compiled ahead of time)"
        } else {
            "the server's warm-up and connection start (rpcmeter's client needs none)"
        };
        out.push(format!(
            "{}: round 1 took {x:.2}x the warm rounds' median: {whose}; {}.",
            r.pairing,
            verdict_text(r.verdict())
        ));
    }
    if let (Some(jvm), Some(own)) = (
        rounds.iter().find(|r| r.pairing.starts_with("JVM")).and_then(Rounds::first_over_warm),
        rounds.iter().find(|r| r.pairing == "rpcmeter client → rpcmeter server").and_then(Rounds::first_over_warm),
    ) {
        out.push(if jvm > own * 1.5 {
            format!(
                "Same server, two clients: round 1 is {jvm:.2}x the warm rounds with the JVM client and {own:.2}x with \
                 rpcmeter's: the difference is the client's warm-up, which is what the write-up's 5k vs 39k measured."
            )
        } else {
            format!(
                "Same server, two clients: round 1 is {jvm:.2}x the warm rounds with the JVM client and {own:.2}x with \
                 rpcmeter's: no clear client warm-up in this run (one run each; rerun without --quick)."
            )
        });
    }
    out
}

/// The latch client's lines: `round K: Took: X ms  RPS: Y  failed: F`.
fn parse_latch(out: &str) -> (Vec<Duration>, u64) {
    let mut took = Vec::new();
    let mut failed = 0;
    for line in out.lines() {
        let field = |name: &str| line.split(name).nth(1)?.split_whitespace().next().map(str::to_string);
        if let Some(ms) = field("Took:").and_then(|v| v.parse::<f64>().ok()) {
            took.push(Duration::from_secs_f64(ms.max(0.0) / 1e3));
            failed += field("failed:").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    (took, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_lines_are_read() {
        let (took, failed) = parse_latch(
            "round 1: Took: 1830.1 ms  RPS: 5464  failed: 2\nnoise\nround 2: Took: 440.6 ms  RPS: 22698  failed: 0\n",
        );
        assert_eq!(took, vec![Duration::from_secs_f64(1.8301), Duration::from_secs_f64(0.4406)]);
        assert_eq!(failed, 2);
    }

    #[test]
    fn the_write_ups_rounds_show_a_cold_first_round() {
        let ms = [1830.1, 440.6, 390.7, 318.1, 256.0, 313.4, 377.7, 252.0, 255.0, 253.4];
        let r = Rounds {
            pairing: "JVM".into(),
            took: ms.iter().map(|m| Duration::from_secs_f64(m / 1e3)).collect(),
            failed: 0,
        };
        assert!(r.first_over_warm().unwrap() > 4.0);
    }
}
