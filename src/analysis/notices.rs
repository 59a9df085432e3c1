//! Notices: what a sceptical reader must know to trust (or not) the numbers (docs/design.md,
//! "Measurement rules"). One function per notice, each from the plan and the summary alone.
use super::Summary;
use crate::calibrate::{Calibration, Floor};
use crate::load::pacer::Pacer;
use crate::load::plan::Plan;
use crate::result::Ended;
use crate::stats::steady::Steadiness;
use crate::units;
use std::time::Duration;

pub use crate::result::NoticeKind;

#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub text: String,
}

pub(super) fn notice(kind: NoticeKind, text: impl Into<String>) -> Notice {
    Notice { kind, text: text.into() }
}

/// Every notice of a finished run, in the order a reader meets them.
pub fn notices(plan: &Plan, s: &Summary) -> Vec<Notice> {
    [
        partial(plan, s),
        closed_loop(plan),
        behind_schedule(plan, s),
        schedule_lag(plan, s),
        unsent(plan, s),
        client_cpu(s),
        shared_cores(plan, s),
        littles_law(plan, s),
        steadiness(&s.steady, s.requests.ok, plan.warmup, plan.interval),
    ]
    .into_iter()
    .flatten()
    .chain(slow_backends(&s.by_backend(), s.client.hiccups.map(|h| h.p99)))
    .chain(down_backends(plan, s))
    .chain(abandoned(s))
    .chain(failed_checks(s))
    .chain(flows_stopped(s))
    .collect()
}

/// How much of a check's or flow's name a notice shows.
const NAME_CHARS: usize = 80;

/// Workload checks that failed: a failed check is no failed call, so the statuses do not
/// show it. The three that failed most are named.
fn failed_checks(s: &Summary) -> Option<Notice> {
    let mut failed: Vec<(String, u64, u64)> = s
        .checks()
        .into_iter()
        .filter(|c| c.3 > 0)
        .map(|(call, text, pass, fail)| {
            (units::abridged(&format!("{call}: {text}"), NAME_CHARS).into_owned(), fail, pass + fail)
        })
        .collect();
    if failed.is_empty() {
        return None;
    }
    failed.sort_by_key(|c| std::cmp::Reverse(c.1));
    let named: Vec<String> =
        failed.iter().take(3).map(|(name, fail, all)| format!("\"{name}\" {fail} of {all}")).collect();
    let more = failed.len().saturating_sub(3);
    Some(notice(
        NoticeKind::FailedChecks,
        format!(
            "{} of the workload's checks failed: {}{}; a failed check is not a failed call (see Checks)",
            failed.len(),
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ),
    ))
}

/// Flows that ended early with every call answered OK: stopped by a failed check
/// (`stop_on_check_failure`) or by a capture that could not be taken or used.
fn flows_stopped(s: &Summary) -> Vec<Notice> {
    let stopped = s.by_flow().into_iter().filter(|(_, _, f)| f.stopped_by_check + f.capture_errors > 0);
    stopped
        .map(|(name, _, f)| {
            notice(
                NoticeKind::FlowsStopped,
                format!(
                    "flow \"{}\": {} of {} flows ended early with every call OK: {}",
                    units::abridged(name, NAME_CHARS),
                    f.stopped_by_check + f.capture_errors,
                    f.share.calls,
                    stop_reasons(f.stopped_by_check, f.capture_errors)
                ),
            )
        })
        .collect()
}

/// Why flows ended early, in words: "stopped 3 by a failed check (...), 2 by a capture error (...)".
pub fn stop_reasons(by_check: u64, by_capture: u64) -> String {
    let mut parts = Vec::new();
    if by_check > 0 {
        parts.push(format!("{by_check} by a failed check (stop_on_check_failure)"));
    }
    if by_capture > 0 {
        parts.push(format!("{by_capture} by a capture error (a value absent, over 64 KiB or not fitting its field)"));
    }
    format!("stopped {}", parts.join(", "))
}

/// The run ended before its end.
fn partial(plan: &Plan, s: &Summary) -> Option<Notice> {
    match s.ended {
        Ended::Interrupted => Some(notice(NoticeKind::Partial, "partial result: the run was stopped before its end")),
        Ended::DrainTimedOut => Some(notice(
            NoticeKind::Partial,
            format!(
                "partial result: calls were still in flight {} after the end (--drain)",
                units::duration(plan.drain)
            ),
        )),
        // A merge's own word: its parts' notices say which ended early.
        Ended::Partial => Some(notice(NoticeKind::Partial, "partial result: a part of it ended early")),
        Ended::Completed => None,
    }
}

fn closed_loop(plan: &Plan) -> Option<Notice> {
    (!plan.pacer.is_open()).then(|| {
        notice(
            NoticeKind::ClosedLoop,
            "closed loop: a slow answer delays the next send, so coordinated omission is invisible here; \
             use --rps for an open loop that measures from the intended send time",
        )
    })
}

/// Open loop: more than 1% of the scheduled sends left late for want of an in-flight slot.
/// A send is timed once (its schedule lag): a call, or a whole flow of a workload, so the
/// share is of the sends, not of the calls (issue 39: "170 calls (3.5%)" were 170 of 2400
/// flows, 7.1%).
fn behind_schedule(plan: &Plan, s: &Summary) -> Option<Notice> {
    let (sends, what) = scheduled_sends(s);
    (plan.pacer.is_open() && sends > 0 && s.late_sends * 100 > sends).then(|| {
        notice(
            NoticeKind::BehindSchedule,
            format!(
                "{} of {sends} {what} ({:.1}%) were sent more than 1 ms behind schedule because all --max-in-flight {} \
                 slots were busy: the rate was not kept (their latency counts from the intended send time)",
                s.late_sends,
                100.0 * s.late_sends as f64 / sends as f64,
                plan.workers
            ),
        )
    })
}

/// The sends an open loop timed (each with its schedule lag), and what one is: a call, or a
/// whole flow of a workload.
fn scheduled_sends(s: &Summary) -> (u64, &'static str) {
    let sends = s.schedule_lag.as_ref().map_or(s.requests.total, |lag| lag.count);
    (sends, if s.flow_shares.is_empty() { "calls" } else { "scheduled sends (a flow is one)" })
}

/// Schedule lag p99 over 1 ms, named by what most late sends waited for: a slot (the server
/// or --max-in-flight), or the client's own wake-up. A late wake-up releases every send due
/// while the client slept at once, so the server saw them bunched, not at the schedule's gaps
/// (bench/poisson_ks.sh: behind two busy loops, a third of Poisson sends left within 10 µs
/// of the one before); the share says how much of the run that was.
fn schedule_lag(plan: &Plan, s: &Summary) -> Option<Notice> {
    let lag = s.schedule_lag.as_ref().filter(|l| l.percentile(99.0) > Duration::from_millis(1))?;
    let p99 = units::duration(lag.percentile(99.0));
    let text = if s.late_sends >= s.late_wakeups {
        format!(
            "schedule lag p99 {p99} is slot wait: {} calls waited for one of the {} in-flight slots \
             ({} sends were late by the client's own wake-up); raise --max-in-flight, or the server \
             stalled; latency still counts from the intended time",
            s.late_sends, plan.workers, s.late_wakeups
        )
    } else {
        let (sends, what) = scheduled_sends(s);
        format!(
            "schedule lag p99 {p99} is late wake-ups: {} of {sends} {what} ({:.1}%) left more than 1 ms late \
             because the client woke late (a busy or descheduled client, a slot free): the sends due meanwhile \
             left together, not at the schedule's gaps ({} waited for a slot); latency still counts from the \
             intended time",
            s.late_wakeups,
            100.0 * s.late_wakeups as f64 / sends.max(1) as f64,
            s.late_sends
        )
    };
    Some(notice(NoticeKind::ScheduleLag, text))
}

fn unsent(plan: &Plan, s: &Summary) -> Option<Notice> {
    (s.requests.unsent > 0).then(|| {
        notice(
            NoticeKind::Unsent,
            format!(
                "{} calls were due before the end but never sent: the rate was not kept (the client or \
             --max-in-flight {} could not keep up); they are not in the totals, but are in the latency \
             percentiles at their lower bound (the end less their intended send time; sent only: beside)",
                s.requests.unsent, plan.workers
            ),
        )
    })
}

/// Utilisation over a short run is mostly start-up: no verdict on less than a second.
fn client_cpu(s: &Summary) -> Option<Notice> {
    (s.client.utilization > 0.85 && wall_enough(s)).then(|| {
        notice(
            NoticeKind::ClientCpu,
            format!(
                "client CPU at {:.0}% of its {} thread(s): the client, not the server, may be the bottleneck",
                s.client.utilization * 100.0,
                s.client.threads
            ),
        )
    })
}

fn shared_cores(plan: &Plan, s: &Summary) -> Option<Notice> {
    plan.target.is_loopback().then(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        notice(
            NoticeKind::SharedCores,
            format!(
                "client and server share this machine's {cores} core(s): the client's CPU ({}/call) is taken \
                 from the server",
                units::duration(s.client.cpu_per_call)
            ),
        )
    })
}

/// No steady state, or one reached only well after the warm-up excluded; not judged when no
/// call succeeded (a failure's latency says nothing of the service's). A run's and a merge's
/// (app/merge.rs, on its merged series) are said by this one function: `steady` the verdict on
/// the series, `ok` the OK calls it holds, `warmup` what the run excluded (`--warmup`, or what
/// `--warmup auto` found), `interval` the series' interval.
pub fn steadiness(steady: &super::SteadyState, ok: u64, warmup: Duration, interval: Duration) -> Option<Notice> {
    match (steady.verdict, steady.after) {
        _ if ok == 0 => None,
        (Steadiness::NoSteadyState, _) => Some(notice(
            NoticeKind::NoSteadyState,
            "no steady state reached: the per-interval p50 latency was still changing at the end; \
             a longer run (or a longer --warmup) may tell more",
        )),
        (Steadiness::Steady { .. }, Some(after)) if after > warmup + interval => Some(notice(
            NoticeKind::WarmUp,
            format!(
                "the per-interval p50 latency was steady only after {:.1} s{}: the result includes that warm-up \
                 (--warmup {} excludes it)",
                after.as_secs_f64(),
                if warmup.is_zero() {
                    String::new()
                } else {
                    format!(", not after the {} of --warmup", units::duration(warmup))
                },
                humantime::format_duration(Duration::from_secs(after.as_secs_f64().ceil() as u64))
            ),
        )),
        _ => None,
    }
}

/// A backend is compared once it answered this many calls.
const SLOW_BACKEND_CALLS: u64 = 20;

/// The slow pod behind a name: a backend whose p50 latency is more than twice the median of
/// the other backends' p50 (and at least 100 µs above it, above a busy client's scheduling
/// noise), each with `SLOW_BACKEND_CALLS` calls or more; and above the noise of the run: the
/// other backends' median p90, and their median p50 plus the client's hiccup p99 when measured.
/// On a busy machine a starved thread or a late wake-up puts one of two equal backends' p50
/// several times the other's (8.3 ms against 1.4 ms at a load of 17 on 2 cores), yet still
/// within the stalls that the other's slowest tenth shows; a slow pod stands above them.
fn slow_backends(backends: &[(&str, &crate::record::shard::NameTally)], hiccup: Option<Duration>) -> Vec<Notice> {
    let judged: Vec<(&str, Duration, Duration, u64)> = backends
        .iter()
        .filter(|(_, share)| share.calls >= SLOW_BACKEND_CALLS)
        .map(|(addr, share)| {
            let at = |p: f64| crate::stats::Statistic::Percentile(p).of(&share.latency);
            (*addr, at(50.0), at(90.0), share.calls)
        })
        .collect();
    let mut out = Vec::new();
    for (i, &(addr, p50, _, calls)) in judged.iter().enumerate() {
        let others = judged.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, other)| other);
        let (Some(median), Some(p90)) = (median(others.clone().map(|o| o.1)), median(others.map(|o| o.2))) else {
            continue;
        };
        let noise = p90.max(median + hiccup.unwrap_or_default());
        if p50 > median * 2 && p50 - median >= Duration::from_micros(100) && p50 > noise {
            out.push(notice(
                NoticeKind::SlowBackend,
                format!(
                    "backend {addr} is slow: p50 {} over {calls} calls, {:.1}x the other backends' median p50 ({}), \
                     above their p90 ({}): a slow pod behind the name? (each backend's latency: backends in \
                     --format json)",
                    units::duration(p50),
                    p50.as_secs_f64() / median.as_secs_f64().max(1e-9),
                    units::duration(median),
                    units::duration(p90),
                ),
            ));
        }
    }
    out
}

/// The median of some durations (the mean of the middle two of an even count); None of none.
fn median(values: impl Iterator<Item = Duration>) -> Option<Duration> {
    let mut v: Vec<Duration> = values.collect();
    v.sort();
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2),
    }
}

/// Under round_robin every ready backend takes an equal share: one that answered less than
/// half the other backends' median (each of them `SLOW_BACKEND_CALLS` or more) was down or
/// unreachable for part of the run, or all of it when it answered none. Calls that found no
/// ready backend are said with it (they are in no backend's row).
fn down_backends(plan: &Plan, s: &Summary) -> Vec<Notice> {
    if plan.target.lb != crate::grpc::Lb::RoundRobin {
        return Vec::new();
    }
    let backends = s.by_backend();
    let answered: Vec<(&str, u64)> =
        backends.iter().map(|(addr, share)| (*addr, share.statuses.get(tonic::Code::Ok))).collect();
    let mut out =
        down_texts(&answered).into_iter().map(|text| notice(NoticeKind::DownBackend, text)).collect::<Vec<_>>();
    let placed: u64 = backends.iter().map(|(_, share)| share.calls).sum();
    let unplaced = s.requests.total.saturating_sub(placed);
    if !out.is_empty() && unplaced > 0 {
        out.push(notice(
            NoticeKind::DownBackend,
            format!("{unplaced} calls found no ready backend (UNAVAILABLE, in no backend's row)"),
        ));
    }
    out
}

/// More backends found down than this are told in one notice after these.
const NAMED_DOWN_BACKENDS: usize = 3;

/// A line for each backend that answered under half the OK calls of the busiest other one
/// (of 20 or more): round_robin gives every ready backend the same share, within the number
/// of workers, so a backend that was up all along never falls under half of another's. The
/// others' median named none when most were down (49 of 50 addresses closed: a median of 0).
/// Past `NAMED_DOWN_BACKENDS`, the rest are one line.
fn down_texts(answered: &[(&str, u64)]) -> Vec<String> {
    let mut down = Vec::new();
    for (i, &(addr, ok)) in answered.iter().enumerate() {
        let others = answered.iter().enumerate().filter(|(j, _)| *j != i);
        let Some(busiest) = others.map(|(_, (_, n))| *n).max() else { continue };
        if busiest >= SLOW_BACKEND_CALLS && ok * 2 < busiest {
            down.push((addr, ok, busiest));
        }
    }
    let mut out: Vec<String> = down
        .iter()
        .take(NAMED_DOWN_BACKENDS)
        .map(|&(addr, ok, busiest)| {
            let how = match ok {
                0 => "none: down or unreachable from the start?".to_owned(),
                _ => format!("{}% of it: down or unreachable for part of the run?", ok * 100 / busiest),
            };
            format!("backend {addr} answered {ok} calls OK where the busiest other backend answered {busiest}, {how}")
        })
        .collect();
    if let Some(rest) = down.get(NAMED_DOWN_BACKENDS..).filter(|rest| !rest.is_empty()) {
        let none = rest.iter().filter(|(_, ok, _)| *ok == 0).count();
        let busiest = answered.iter().map(|(_, n)| *n).max().unwrap_or(0);
        out.push(format!(
            "{} more backends answered under half the {busiest} calls OK of the busiest ({none} of them none): \
             down or unreachable? (the JSON result's `backends` has each)",
            rest.len()
        ));
    }
    out
}

fn abandoned(s: &Summary) -> Option<Notice> {
    (s.requests.abandoned > 0).then(|| {
        notice(
            NoticeKind::Abandoned,
            format!("{} calls were still in flight when the run was stopped and are not counted", s.requests.abandoned),
        )
    })
}

/// The client's hiccups during the run, flagged when well above the calibrated floor's: the
/// client stalled, and every latency it timed may hold up to that stall.
pub fn hiccups(run: Floor, floor: &Calibration) -> Option<Notice> {
    hiccups_stand_out(run.p99, floor.hiccup.p99).then(|| {
        notice(
            NoticeKind::Hiccups,
            format!(
                "client hiccups: a 1 ms sleep overshot by p99 {} (max {}) during the run, {} on this machine idle \
                 (rpcmeter calibrate): the client's threads were held up (other load, too few cores), and its \
                 latencies may include up to that stall",
                units::duration(run.p99),
                units::duration(run.max),
                units::duration(floor.hiccup.p99)
            ),
        )
    })
}

/// Hiccups worth a notice: twice the calibrated floor's p99 and at least 500 µs above it (a
/// few hundred µs of scheduling noise is every shared machine's). Also `compare`'s rule for
/// a run's schedule lag against the calibrated timer floor.
pub fn hiccups_stand_out(run_p99: Duration, floor_p99: Duration) -> bool {
    run_p99 > floor_p99 * 2 && run_p99 >= floor_p99 + Duration::from_micros(500)
}

/// Closed loop keeps `workers` calls in flight, so throughput x mean latency must equal
/// them (Little's law); less means workers spent time outside calls: the client's own.
fn littles_law(plan: &Plan, s: &Summary) -> Option<Notice> {
    let closed = matches!(plan.pacer, Pacer::Closed) && plan.active_workers.is_none() && wall_enough(s);
    if !closed || s.requests.total < 100 {
        return None;
    }
    let in_flight = s.throughput_rps * s.latency.mean.as_secs_f64();
    let off = (in_flight - plan.workers as f64).abs() / plan.workers as f64;
    (off > 0.02).then(|| {
        notice(
            NoticeKind::LittlesLaw,
            format!(
                "Little's law: {} workers, but throughput x mean latency = {in_flight:.2} in flight ({:.1}% off): \
             workers spent that share of the time outside calls, in the client itself",
                plan.workers,
                off * 100.0
            ),
        )
    })
}

/// Whether the run was long enough to judge the client's CPU use.
pub(super) fn wall_enough(s: &Summary) -> bool {
    s.duration + s.warmup.as_ref().map_or(Duration::ZERO, |w| w.duration) >= Duration::from_secs(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fixture::*;
    use crate::load::pacer::{Arrival, RateSchedule};
    use crate::stats::Latency;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 1000 calls of 1 ms over 2 s.
    fn fine() -> Summary {
        summary(plan(), recorded(tally(1000, ms(1), 0), Duration::from_secs(2)))
    }

    fn open_plan() -> Plan {
        Plan { pacer: Pacer::Open(RateSchedule::constant(500.0), Arrival::Uniform), ..plan() }
    }

    #[test]
    fn a_run_stopped_early_is_partial() {
        let mut s = fine();
        assert!(partial(&plan(), &s).is_none());
        s.ended = Ended::Interrupted;
        assert_eq!(partial(&plan(), &s).unwrap().kind, NoticeKind::Partial);
        s.ended = Ended::DrainTimedOut;
        assert!(partial(&plan(), &s).unwrap().text.contains("--drain"));
    }

    #[test]
    fn only_a_closed_loop_is_told_it_hides_coordinated_omission() {
        assert!(closed_loop(&plan()).is_some());
        assert!(closed_loop(&open_plan()).is_none());
    }

    #[test]
    fn behind_schedule_over_one_percent_of_late_sends() {
        let mut s = fine();
        s.late_sends = 10;
        assert!(behind_schedule(&open_plan(), &s).is_none(), "1% is not over 1%");
        s.late_sends = 11;
        assert!(behind_schedule(&open_plan(), &s).is_some());
        assert!(behind_schedule(&plan(), &s).is_none(), "closed loop: no schedule");
        // A workload of flows: 2400 sends (flows) of 4800 calls, 170 late: 7.1 % of the sends.
        s.requests.total = 4800;
        s.schedule_lag = Some(crate::stats::Latency {
            count: 2400,
            ..crate::stats::Latency::of(&hdrhistogram::Histogram::new(3).unwrap())
        });
        s.flow_shares = vec![(("login".into(), vec!["auth".into(), "get".into()]), Default::default())];
        s.late_sends = 170;
        let text = behind_schedule(&open_plan(), &s).unwrap().text;
        assert!(text.starts_with("170 of 2400 scheduled sends (a flow is one) (7.1%)"), "{text}");
    }

    #[test]
    fn schedule_lag_is_named_by_what_most_late_sends_waited_for() {
        let mut s = fine();
        s.schedule_lag = Some(Latency::of(&tally(100, ms(5), 0).call_latency));
        (s.late_sends, s.late_wakeups) = (80, 20);
        assert!(schedule_lag(&open_plan(), &s).unwrap().text.contains("is slot wait"));
        (s.late_sends, s.late_wakeups) = (20, 80);
        let text = schedule_lag(&open_plan(), &s).unwrap().text;
        assert!(text.contains("is late wake-ups: 80 of 100 calls (80.0%) left more than 1 ms late"), "{text}");
        s.schedule_lag = Some(Latency::of(&tally(100, Duration::from_micros(900), 0).call_latency));
        assert!(schedule_lag(&open_plan(), &s).is_none(), "under 1 ms is no lag worth a word");
    }

    #[test]
    fn unsent_and_abandoned_calls_are_told() {
        let mut s = fine();
        assert!(unsent(&plan(), &s).is_none() && abandoned(&s).is_none());
        (s.requests.unsent, s.requests.abandoned) = (3, 2);
        assert!(unsent(&plan(), &s).unwrap().text.starts_with("3 calls"));
        assert!(abandoned(&s).unwrap().text.starts_with("2 calls"));
    }

    #[test]
    fn a_busy_client_is_flagged_only_over_a_second() {
        let mut s = fine();
        s.client.utilization = 0.9;
        assert!(client_cpu(&s).is_some());
        s.duration = ms(500);
        assert!(client_cpu(&s).is_none(), "half a second is mostly start-up");
    }

    #[test]
    fn a_loopback_target_shares_the_cores() {
        let s = fine();
        assert!(shared_cores(&plan(), &s).is_none());
        let local = Plan { target: crate::grpc::transport::Target::new("127.0.0.1", 1), ..plan() };
        assert!(shared_cores(&local, &s).is_some());
    }

    #[test]
    fn littles_law_holds_or_is_told() {
        // 8 workers at 1 ms each: 8000 calls/s keep 8 in flight; 1000 calls over 2 s do not.
        let s = fine();
        assert!(littles_law(&plan(), &s).unwrap().text.contains("0.50 in flight"));
        let kept = summary(plan(), recorded(tally(16_000, ms(1), 0), Duration::from_secs(2)));
        assert!(littles_law(&plan(), &kept).is_none(), "{:?}", kept.throughput_rps);
    }

    #[test]
    fn steadiness_is_not_judged_without_an_ok_call() {
        let (r, rows, _) = warming_up(4, 12);
        let (s, p) = (crate::analysis::summary_of(run(plan(), r, rows)), plan());
        assert_eq!(steadiness(&s.steady, s.requests.ok, p.warmup, p.interval).unwrap().kind, NoticeKind::WarmUp);
        assert!(steadiness(&s.steady, 0, p.warmup, p.interval).is_none());
    }

    /// 49 of 50 backends down from the start were named by no notice: each compared itself
    /// with the others' median, 0 (issue 41).
    #[test]
    fn backends_under_half_the_busiest_are_down_however_many() {
        let names: Vec<String> = (0..50).map(|i| format!("10.0.0.{i}:1")).collect();
        let mut answered: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 0)).collect();
        answered[0].1 = 200;
        let texts = down_texts(&answered);
        assert_eq!(texts.len(), 4, "{texts:#?}");
        assert!(
            texts[0].starts_with("backend 10.0.0.1:1 answered 0 calls OK where the busiest other backend answered 200")
        );
        assert!(texts[0].ends_with("from the start?"), "{}", texts[0]);
        assert!(texts[3]
            .starts_with("46 more backends answered under half the 200 calls OK of the busiest (46 of them none)"));
        // One down of three, and one up for a fifth of the run: each named; equal shares are not.
        let three = [("a:1", 100), ("b:1", 0), ("c:1", 99)];
        assert_eq!(down_texts(&three).len(), 1);
        assert!(down_texts(&[("a:1", 100), ("b:1", 20)])[0].contains("20% of it"));
        assert!(down_texts(&[("a:1", 100), ("b:1", 92), ("c:1", 96)]).is_empty());
        assert!(down_texts(&[("a:1", 19), ("b:1", 0)]).is_empty(), "too few calls to judge");
    }

    #[test]
    fn the_slow_backend_stands_above_twice_the_others_median() {
        let share = |p50_us: u64, calls: u64| {
            let mut t = crate::record::shard::NameTally::default();
            for _ in 0..calls {
                t.latency.record(p50_us * 1000).unwrap();
            }
            t.calls = calls;
            t
        };
        let kinds = |backends: &[(&str, crate::record::shard::NameTally)]| {
            slow_backends(&backends.iter().map(|(a, share)| (*a, share)).collect::<Vec<_>>(), None)
                .iter()
                .map(|n| n.text.split(' ').nth(1).unwrap().to_string())
                .collect::<Vec<_>>()
        };
        // Three backends: one at 2.5x the median of the others (1 ms and 1.2 ms: 1.1 ms).
        let three = [("a:1", share(1000, 50)), ("b:1", share(1200, 50)), ("c:1", share(2750, 50))];
        assert_eq!(kinds(&three), vec!["c:1"]);
        // Below twice the median is not slow; too few calls are not judged.
        assert!(kinds(&[("a:1", share(1000, 50)), ("b:1", share(1900, 50))]).is_empty());
        assert!(kinds(&[("a:1", share(1000, 50)), ("b:1", share(5000, 19))]).is_empty());
        // Microseconds apart is scheduling noise, not a slow pod.
        assert!(kinds(&[("a:1", share(20, 50)), ("b:1", share(90, 50))]).is_empty());
        assert!(kinds(&[("a:1", share(1000, 50))]).is_empty(), "one backend has no others");
    }

    #[test]
    fn a_p50_within_the_runs_noise_is_not_a_slow_backend() {
        // Latencies in µs, one call each.
        let share = |us: &[u64]| {
            let mut t = crate::record::shard::NameTally::default();
            for &u in us {
                t.latency.record(u * 1000).unwrap();
            }
            t.calls = us.len() as u64;
            t
        };
        let named = |backends: &[(&str, crate::record::shard::NameTally)], hiccup| {
            !slow_backends(&backends.iter().map(|(a, share)| (*a, share)).collect::<Vec<_>>(), hiccup).is_empty()
        };
        // As seen at a load of 17 on 2 cores: two equal echo servers, one's p50 5.6x the
        // other's, the other's p90 above it (the machine's stalls, not the server).
        let equal = share(&[[1_400; 12].as_slice(), &[8_000; 4], &[12_000; 4]].concat());
        let starved = share(&[[3_000; 8].as_slice(), &[7_800; 8], &[11_000; 4]].concat());
        assert!(!named(&[("a:1", equal.clone()), ("b:1", starved.clone())], None));
        // A server 20 ms slower stands above the other's p90 however busy the machine...
        let slow = share(&[[21_000; 16].as_slice(), &[30_000; 4]].concat());
        assert!(named(&[("a:1", equal.clone()), ("b:1", slow.clone())], None));
        // ...unless the client's own stalls reach that far.
        let tight = share(&[1_400; 20]);
        assert!(named(&[("a:1", tight.clone()), ("b:1", share(&[5_000; 20]))], None));
        assert!(!named(&[("a:1", tight.clone()), ("b:1", share(&[5_000; 20]))], Some(Duration::from_millis(4))));
        assert!(named(&[("a:1", tight), ("b:1", slow)], Some(Duration::from_millis(4))));
    }

    #[test]
    fn hiccups_stand_out_only_well_above_the_floor() {
        let us = Duration::from_micros;
        assert!(hiccups_stand_out(us(5_000), us(100)));
        assert!(!hiccups_stand_out(us(500), us(100)), "within 500 µs of the floor");
        assert!(!hiccups_stand_out(us(1_900), us(1_000)), "under twice the floor");
        assert!(hiccups_stand_out(us(2_100), us(1_000)));
    }
}
