//! Reports: one file per format, all rendering one `Summary` computed from a run's result.
//! Measuring and printing stay apart (hyperfine's split): nothing here measures.
pub mod csv;
pub mod details;
pub mod json;
pub mod rmeter;
pub mod table;

use crate::load::engine::RunResult;
use crate::load::pacer::Pacer;
use crate::load::plan::Plan;
use crate::stats::{
    self,
    assertions::{Assertion, Metric},
    Latency,
};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
pub struct Requests {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    pub retries: u64,
    pub attempts: u64,
    /// Calls that still failed after their last allowed retry (rmeter's RetryMax).
    pub retry_exhausted: u64,
    /// Calls started but never answered (abandoned at a hard stop); not in `total`.
    pub abandoned: u64,
}

#[derive(Debug, Serialize)]
pub struct Client {
    pub cpu_s: f64,
    pub cpu_us_per_request: f64,
    pub max_rss_bytes: u64,
    pub threads: u32,
    /// CPU used over the run's wall time per client thread (1.0 = every thread always busy).
    pub utilization: f64,
}

#[derive(Debug, Serialize)]
pub struct Phase {
    pub duration_s: f64,
    pub calls: u64,
    pub throughput_rps: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Serialize)]
pub struct Round {
    pub took_ms: f64,
    pub rps: f64,
}

#[derive(Debug, Serialize)]
pub struct Checked {
    pub assertion: String,
    pub value: f64,
    pub ok: bool,
}

/// Everything a report prints; `--format json` is this, serialized (DESIGN.md schema).
#[derive(Debug, Serialize)]
pub struct Summary {
    pub target: String,
    pub call: String,
    pub mode: &'static str,
    pub concurrency: u32,
    pub connections: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_per_worker: Option<u64>,
    pub partial: bool,
    pub requests: Requests,
    pub statuses: BTreeMap<&'static str, u64>,
    pub attempt_statuses: BTreeMap<&'static str, u64>,
    pub duration_s: f64,
    pub throughput_rps: f64,
    /// Calls answered OK per second (rmeter's Throughput).
    pub ok_rps: f64,
    pub latency_us: Latency,
    pub attempt_latency_us: Latency,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_lag_us: Option<Latency>,
    pub late_sends: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Phase>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
    pub client: Client,
    pub notices: Vec<String>,
    pub assertions: Vec<Checked>,
    /// Call latency, nanoseconds, HdrHistogram V2 deflate, base64: merges losslessly.
    pub histogram: String,
}

impl Summary {
    pub fn new(plan: &Plan, call: &str, result: &RunResult, assertions: &[Assertion]) -> Summary {
        let m = &result.measured;
        let c = &m.counts;
        let latency = Latency::of(&m.call_latency);
        let throughput = stats::rate(c.calls, result.window);
        let all_calls = c.calls + result.warmup.counts.calls;
        let wall = result.window + result.warmup_window;
        let threads = plan.threads.max(1);
        let client = Client {
            cpu_s: result.cpu.as_secs_f64(),
            cpu_us_per_request: if all_calls == 0 { 0.0 } else { result.cpu.as_secs_f64() * 1e6 / all_calls as f64 },
            max_rss_bytes: result.max_rss_bytes,
            threads,
            utilization: if wall.is_zero() {
                0.0
            } else {
                result.cpu.as_secs_f64() / wall.as_secs_f64() / threads as f64
            },
        };
        let (mode, rps_target) = match plan.pacer {
            Pacer::Closed => ("closed", None),
            Pacer::Open(r) if r.from == r.to => ("open", Some(format!("{}", r.to))),
            Pacer::Open(r) => ("open", Some(format!("{}:{}:{}s", r.from, r.to, r.over.as_secs_f64()))),
            Pacer::Burst { .. } => ("burst", None),
        };
        let mut summary = Summary {
            target: format!("{}:{}", plan.target.host, plan.target.port),
            call: call.to_string(),
            mode,
            concurrency: plan.workers,
            connections: plan.connections,
            rps_target,
            loop_per_worker: plan.stop.per_worker,
            partial: result.partial,
            requests: Requests {
                total: c.calls,
                ok: c.ok(),
                failed: c.failed(),
                retries: c.retries(),
                attempts: c.attempts,
                retry_exhausted: c.retry_exhausted,
                abandoned: result.abandoned,
            },
            statuses: stats::statuses(&c.call_status).into_iter().collect(),
            attempt_statuses: stats::statuses(&c.attempt_status).into_iter().collect(),
            duration_s: result.window.as_secs_f64(),
            throughput_rps: throughput,
            ok_rps: stats::rate(c.ok(), result.window),
            attempt_latency_us: Latency::of(&m.attempt_latency),
            schedule_lag_us: plan.pacer.is_open().then(|| Latency::of(&m.schedule_lag)),
            late_sends: c.late_sends,
            warmup: (!plan.warmup.is_zero()).then(|| Phase {
                duration_s: result.warmup_window.as_secs_f64(),
                calls: result.warmup.counts.calls,
                throughput_rps: stats::rate(result.warmup.counts.calls, result.warmup_window),
                latency_us: Latency::of(&result.warmup.call_latency),
            }),
            rounds: result
                .rounds
                .iter()
                .map(|d| Round { took_ms: d.as_secs_f64() * 1e3, rps: stats::rate(plan.workers as u64, *d) })
                .collect(),
            notices: Vec::new(),
            assertions: Vec::new(),
            histogram: encode_histogram(&m.call_latency),
            latency_us: latency,
            client,
        };
        summary.assertions = assertions
            .iter()
            .map(|a| {
                let value = summary.metric(a.metric);
                Checked { assertion: a.text.clone(), value, ok: a.holds(value) }
            })
            .collect();
        summary.notices = notices(plan, &summary);
        summary
    }

    fn metric(&self, metric: Metric) -> f64 {
        let l = &self.latency_us;
        match metric {
            Metric::ErrorRate => {
                if self.requests.total == 0 {
                    0.0
                } else {
                    self.requests.failed as f64 / self.requests.total as f64
                }
            }
            Metric::Rps => self.throughput_rps,
            Metric::Latency(stat) => match stat {
                "min" => l.min,
                "mean" => l.mean,
                "stdev" => l.stdev,
                "p50" => l.p50,
                "p75" => l.p75,
                "p90" => l.p90,
                "p95" => l.p95,
                "p99" => l.p99,
                "p99.9" | "p999" => l.p999,
                "p99.99" => l.p9999,
                _ => l.max,
            },
        }
    }

    pub fn breached(&self) -> Vec<&Checked> {
        self.assertions.iter().filter(|a| !a.ok).collect()
    }
}

/// What a sceptical reader must know to trust (or not) the numbers (DESIGN.md, "Measurement rules").
fn notices(plan: &Plan, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    if s.partial {
        out.push("partial result: the run was stopped before its end".into());
    }
    if !plan.pacer.is_open() {
        out.push(
            "closed loop: a slow answer delays the next send, so coordinated omission is invisible here; \
             use --rps for an open loop that measures from the intended send time"
                .into(),
        );
    }
    if plan.pacer.is_open() && s.requests.total > 0 && s.late_sends * 100 > s.requests.total {
        out.push(format!(
            "{} calls ({:.1}%) were sent more than 1 ms behind schedule because all --max-in-flight {} slots were busy: \
             the rate was not kept (their latency counts from the intended send time)",
            s.late_sends,
            100.0 * s.late_sends as f64 / s.requests.total as f64,
            plan.workers
        ));
    }
    if s.client.utilization > 0.85 {
        out.push(format!(
            "client CPU at {:.0}% of its {} thread(s): the client, not the server, may be the bottleneck",
            s.client.utilization * 100.0,
            s.client.threads
        ));
    }
    if s.requests.abandoned > 0 {
        out.push(format!(
            "{} calls were still in flight when the run was stopped and are not counted",
            s.requests.abandoned
        ));
    }
    out
}

pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut buf = Vec::new();
    // Serializing into a Vec cannot fail for a valid histogram.
    let _ = V2DeflateSerializer::new().serialize(h, &mut buf);
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// One row per interval for `--format csv` (small: one per second, not one per call).
#[derive(Debug, Clone, Serialize)]
pub struct IntervalRow {
    pub t_s: f64,
    pub phase: &'static str,
    pub calls: u64,
    pub ok: u64,
    pub failed: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub client_cpu_total_s: f64,
    pub client_rss_bytes: u64,
}

impl IntervalRow {
    pub fn of(iv: &crate::load::engine::Interval) -> IntervalRow {
        let l = Latency::of(&iv.shard.call_latency);
        let c = &iv.shard.counts;
        IntervalRow {
            t_s: iv.at.as_secs_f64(),
            phase: if iv.warmup { "warmup" } else { "measured" },
            calls: c.calls,
            ok: c.ok(),
            failed: c.failed(),
            rps: stats::rate(c.calls, iv.length),
            p50_us: l.p50,
            p90_us: l.p90,
            p99_us: l.p99,
            max_us: l.max,
            client_cpu_total_s: iv.usage.cpu.as_secs_f64(),
            client_rss_bytes: iv.usage.rss_bytes,
        }
    }
}
