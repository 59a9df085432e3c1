//! Steady state and warm-up: where the run's per-interval p50 latency stopped changing, and
//! the one place a warm-up is cut out of the measured result (`--warmup auto`; a fixed
//! `--warmup` is recorded apart by the engine as it runs, nothing to cut).
use crate::load::engine::Recorded;
use crate::record::early::EarlyIntervals;
use crate::record::intervals::IntervalRow;
use crate::record::Tally;
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
    let full: Vec<&IntervalRow> = rows.iter().filter(|r| r.length >= interval).collect();
    let p50s: Vec<f64> = full.iter().map(|r| if r.calls == 0 { f64::NAN } else { r.p50.as_secs_f64() }).collect();
    let verdict = steady::latency_steadiness(&p50s);
    let after = match verdict {
        Steadiness::Steady { from } => Some(full.get(from).map_or(Duration::ZERO, |r| r.at.saturating_sub(r.length))),
        _ => None,
    };
    SteadyState { verdict, after, intervals: full.len() }
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
