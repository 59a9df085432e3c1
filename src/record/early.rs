//! The first intervals of a run kept whole (every histogram, compressed), so that a warm-up
//! found afterwards (`--warmup auto`) can be taken out of the result exactly. Bounded: only
//! the first `KEPT` intervals, a few KB each.
use crate::record::intervals::Interval;
use crate::record::shard::{new_backend_histogram, new_histogram, pack, unpack};
use crate::record::{Counts, Tally};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

/// Warm-ups longer than this many intervals are not taken out (2 minutes at 1 s).
pub const KEPT: usize = 120;

struct Kept {
    length: Duration,
    histograms: [Vec<u8>; 7],
    counts: Counts,
    errors: BTreeMap<(i32, String), u64>,
    /// `--workload`: each name's calls, statuses and packed latency.
    by_name: Vec<(u64, crate::grpc::status::PerStatus, Vec<u8>)>,
    /// Flows as names, with their stops (by check, by capture).
    by_flow: Vec<(u64, crate::grpc::status::PerStatus, Vec<u8>, u64, u64)>,
    checks: Vec<(u64, u64)>,
    /// Each backend's calls by status, and its packed latency where the tally kept it
    /// (`Slots::backend_latency`: a run with `--warmup auto` keeps it in every tally).
    by_backend: Vec<crate::grpc::status::PerStatus>,
    backend_latency: Option<Vec<Vec<u8>>>,
}

#[derive(Default)]
pub struct EarlyIntervals {
    kept: Vec<Kept>,
}

/// A histogram a tally may go without (`Tally::schedule_lag`, `Tally::service_time`): absent
/// packs to no bytes.
fn pack_optional(h: &Option<Histogram<u64>>) -> Vec<u8> {
    h.as_ref().map_or_else(Vec::new, pack)
}

fn unpacked_optional(bytes: &[u8]) -> Option<Histogram<u64>> {
    (!bytes.is_empty()).then(|| unpacked(bytes))
}

/// A kept histogram back, in the tally's bounds, so that it subtracts from the run's.
fn unpacked(bytes: &[u8]) -> Histogram<u64> {
    unpacked_into(new_histogram(), bytes)
}

fn unpacked_into(mut h: Histogram<u64>, bytes: &[u8]) -> Histogram<u64> {
    if let Ok(read) = unpack(bytes) {
        let _ = h.add(&read);
    }
    h
}

/// Kept per-name shares back.
fn shares(kept: &[(u64, crate::grpc::status::PerStatus, Vec<u8>)]) -> Vec<crate::record::shard::NameTally> {
    kept.iter()
        .map(|(calls, statuses, latency)| crate::record::shard::NameTally {
            calls: *calls,
            statuses: *statuses,
            latency: unpacked(latency),
        })
        .collect()
}

impl EarlyIntervals {
    pub fn keep(&mut self, iv: &Interval) {
        if self.kept.len() < KEPT {
            let s = iv.tally;
            self.kept.push(Kept {
                length: iv.length,
                histograms: [
                    pack(&s.call_latency),
                    pack_optional(&s.attempt_latency),
                    pack_optional(&s.schedule_lag),
                    pack_optional(&s.service_time),
                    pack_optional(&s.message_latency),
                    pack_optional(&s.first_message),
                    pack(&s.ok_call_latency),
                ],
                counts: s.counts.clone(),
                errors: s.errors.clone(),
                by_name: s.by_name.iter().map(|n| (n.calls, n.statuses, pack(&n.latency))).collect(),
                by_flow: s
                    .by_flow
                    .iter()
                    .map(|f| {
                        let n = &f.share;
                        (n.calls, n.statuses, pack(&n.latency), f.stopped_by_check, f.capture_errors)
                    })
                    .collect(),
                checks: s.checks.clone(),
                by_backend: s.by_backend.clone(),
                backend_latency: s.backend_latency.as_ref().map(|each| each.iter().map(pack).collect()),
            });
        }
    }

    /// The first `n` intervals as one tally, with their total length; `None` when fewer
    /// were kept.
    pub fn first(&self, n: usize) -> Option<(Tally, Duration)> {
        if n > self.kept.len() {
            return None;
        }
        let mut sum = Tally::default();
        let mut length = Duration::ZERO;
        for k in &self.kept[..n] {
            let part = Tally {
                call_latency: unpacked(&k.histograms[0]),
                attempt_latency: unpacked_optional(&k.histograms[1]),
                schedule_lag: unpacked_optional(&k.histograms[2]),
                service_time: unpacked_optional(&k.histograms[3]),
                message_latency: unpacked_optional(&k.histograms[4]),
                first_message: unpacked_optional(&k.histograms[5]),
                ok_call_latency: unpacked(&k.histograms[6]),
                counts: k.counts.clone(),
                errors: k.errors.clone(),
                by_name: shares(&k.by_name),
                by_backend: k.by_backend.clone(),
                backend_latency: k
                    .backend_latency
                    .as_ref()
                    .map(|each| each.iter().map(|bytes| unpacked_into(new_backend_histogram(), bytes)).collect()),
                // The series' lines are not kept: their rows are made as each interval closes.
                backend_lines: Vec::new(),
                by_flow: k
                    .by_flow
                    .iter()
                    .map(|(calls, statuses, latency, stopped, capture)| crate::record::shard::FlowTally {
                        share: crate::record::shard::NameTally {
                            calls: *calls,
                            statuses: *statuses,
                            latency: unpacked(latency),
                        },
                        stopped_by_check: *stopped,
                        capture_errors: *capture,
                    })
                    .collect(),
                checks: k.checks.clone(),
            };
            sum.add(&part);
            length += k.length;
        }
        Some((sum, length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn kept_histograms_come_back_exactly() {
        let mut h = new_histogram();
        for v in [1000u64, 2_000_000, 12_000_000] {
            h.record(v).unwrap();
        }
        let back = unpacked(&pack(&h));
        assert_eq!(back.len(), 3);
        let mut whole = h.clone();
        whole.subtract(&back).unwrap();
        assert_eq!(whole.len(), 0);
    }

    #[test]
    fn a_workloads_names_are_kept_for_an_exact_warmup() {
        let mut tally = Tally::default();
        for i in 1..=10u64 {
            let index = (i % 2) as usize;
            tally.record_named(index, Duration::from_micros(i), tonic::Code::Ok);
        }
        let mut early = EarlyIntervals::default();
        let iv = Interval {
            at: Duration::from_secs(1),
            length: Duration::from_secs(1),
            warmup: false,
            tally: &tally,
            usage: Default::default(),
            in_flight: 0,
        };
        early.keep(&iv);
        let (part, _) = early.first(1).unwrap();
        let mut result = tally.clone();
        result.subtract(&part);
        assert!(result.by_name.iter().all(|n| n.calls == 0 && n.latency.is_empty()));
        assert_eq!(part.by_name[1].calls, 5);
    }
}
