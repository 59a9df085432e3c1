//! Steady state and warm-up: where the run's per-interval p50 latency stopped changing, and
//! the one place a warm-up is cut out of the measured result (`--warmup auto`; a fixed
//! `--warmup` is recorded apart by the engine as it runs, nothing to cut).
use crate::load::engine::Recorded;
use crate::record::early::EarlyIntervals;
use crate::record::intervals::IntervalRow;
use crate::record::Tally;
use crate::result;
use crate::stats::steady::{self, Steadiness};
use std::time::Duration;

/// The steady-state verdict on the interval series, with what it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub verdict: Steadiness,
    /// Where the steady part starts, from the start of the run.
    pub after: Option<Duration>,
    /// Full intervals analysed.
    pub intervals: usize,
}

/// PELT on the per-interval p50 latency of the full intervals (the last, shorter one is
/// left out: its few calls are no level). docs/design.md, "Measurement rules".
pub fn steady_state(rows: &[IntervalRow], interval: Duration) -> SteadyState {
    judge(rows.iter().map(|r| Point { at: r.at, length: r.length, p50: (r.calls > 0).then_some(r.p50) }), interval)
}

/// One interval as the verdict reads it: where it ends (from the start of the run), how long
/// it is, and its p50 call latency (None: it had no calls).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub at: Duration,
    pub length: Duration,
    pub p50: Option<Duration>,
}

/// The verdict on any interval series: a run's own rows (`steady_state`) and a merge's added
/// ones (`of_result_rows`) are judged by this one function.
pub fn judge(points: impl IntoIterator<Item = Point>, interval: Duration) -> SteadyState {
    let full: Vec<Point> = points.into_iter().filter(|p| p.length >= interval).collect();
    let p50s: Vec<f64> = full.iter().map(|p| p.p50.map_or(f64::NAN, |d| d.as_secs_f64())).collect();
    let verdict = steady::latency_steadiness(&p50s);
    let after = match verdict {
        Steadiness::Steady { from } => Some(full.get(from).map_or(Duration::ZERO, |p| p.at.saturating_sub(p.length))),
        _ => None,
    };
    SteadyState { verdict, after, intervals: full.len() }
}

/// The verdict on a result's interval series, as written (a merge's, app/merge.rs): its
/// times read back to the microsecond and the latency to the nanosecond they were written to
/// (`units::secs`, `units::micros`), so that a 0.3 s interval read as 0.299999… s still
/// counts as full.
pub fn of_result_rows(rows: &[result::IntervalRow], interval: Duration) -> SteadyState {
    let whole = |n: f64| if n.is_finite() && n > 0.0 { n.round() as u64 } else { 0 };
    let secs = |s: f64| Duration::from_micros(whole(s * 1e6));
    let point = |r: &result::IntervalRow| Point {
        at: secs(r.t_s),
        length: secs(r.length_s),
        p50: (r.calls > 0).then(|| Duration::from_nanos(whole(r.p50_us * 1e3))),
    };
    judge(rows.iter().map(point), secs(interval.as_secs_f64()))
}

/// `--warmup auto`: the warm-up that `found` (the steady state of `rows`) names is taken out
/// of the result exactly (the first intervals were kept whole by `early`), the rows it covers
/// are marked warm-up, and its length is returned: the warm-up, as a fixed `--warmup` of
/// that length would have made it. None: nothing was cut.
pub fn cut_found_warmup(
    recorded: &mut Recorded,
    rows: &mut [IntervalRow],
    found: &SteadyState,
    early: &EarlyIntervals,
) -> Option<Duration> {
    let Steadiness::Steady { from } = found.verdict else { return None };
    // Only full intervals were judged; `from` counts among them, which are the first rows.
    let (part, length) = early.first(from).filter(|_| from > 0)?;
    cut(recorded, &part, length);
    for row in rows.iter_mut().take(from) {
        row.warmup = true;
    }
    Some(length)
}

/// Moves `part` (calls of the first `length` of the measured window, recorded in it) from
/// the measured result into the warm-up.
fn cut(recorded: &mut Recorded, part: &Tally, length: Duration) {
    recorded.measured.subtract(part);
    recorded.warmup.add(part);
    recorded.window = recorded.window.saturating_sub(length);
    recorded.warmup_window += length;
}
