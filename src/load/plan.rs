//! The Plan: how a run makes its load, validated. The CLI builds it; the engine only reads it.
use super::pacer::{Pacer, Stages};
use super::retry::RetryPolicy;
use crate::grpc::{CallOptions, Target};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Outside control of a run: how many times the user asked it to stop (Ctrl-C).
#[derive(Default)]
pub struct Control {
    pub interrupts: AtomicUsize,
}

/// When a run ends (the first limit reached wins; at least one is set).
#[derive(Debug, Clone, Default)]
pub struct StopAt {
    /// Measured calls in all (`-n`; bursts: size x rounds).
    pub total: Option<u64>,
    /// Calls per worker (`--loop`, as rmeter's tasks x loop).
    pub per_worker: Option<u64>,
    /// Measured time (`-z`), after the warm-up.
    pub duration: Option<Duration>,
}

/// This process's part of a load that several processes share (`--shard I/N`): ticket k of
/// shard I is ticket k*N + I of the whole schedule, so the shards together keep the whole
/// run's intended times exactly, interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOf {
    pub index: u32,
    pub count: u32,
}

impl Default for ShardOf {
    fn default() -> Self {
        ShardOf { index: 0, count: 1 }
    }
}

impl ShardOf {
    /// The whole run's ticket of this shard's ticket `k`.
    pub fn global(&self, k: u64) -> u64 {
        k.saturating_mul(self.count as u64).saturating_add(self.index as u64)
    }

    /// Of the whole run's first `due` tickets, how many are this shard's.
    pub fn local_due(&self, due: u64) -> u64 {
        due.saturating_sub(self.index as u64).div_ceil(self.count as u64)
    }

    /// This shard's share of `n` (workers, calls): n/N, the remainder spread over the first shards.
    pub fn share(&self, n: u64) -> u64 {
        n / self.count as u64 + ((self.index as u64) < n % self.count as u64) as u64
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

/// When the schedule's zero is, for shards that must start together.
#[derive(Clone)]
pub enum Start {
    /// `--start-at`: a wall-clock time, read on this machine's clock.
    At(std::time::SystemTime),
    /// `--coordinator`: agreed with the other shards once this one is connected and ready
    /// (app/coordinator.rs), as an instant on this machine's monotonic clock.
    Agreed(Arc<Agree>),
}

/// Joins the other shards and returns the agreed start.
pub type Agree = dyn Fn(&Control) -> anyhow::Result<Instant> + Send + Sync;

impl Start {
    /// The instant the schedule starts, on this machine's monotonic clock.
    pub fn agree(&self, control: &Control) -> anyhow::Result<Instant> {
        match self {
            Start::At(at) => {
                let (now, wall) = (Instant::now(), std::time::SystemTime::now());
                Ok(match at.duration_since(wall) {
                    Ok(ahead) => now + ahead,
                    // Checked when the flags were read; a start passed since is now.
                    Err(_) => now,
                })
            }
            Start::Agreed(agree) => agree(control),
        }
    }

    /// The wall-clock time given (`--start-at`), if any.
    pub fn wall(&self) -> Option<std::time::SystemTime> {
        match self {
            Start::At(at) => Some(*at),
            Start::Agreed(_) => None,
        }
    }
}

impl std::fmt::Debug for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Start::At(at) => f.debug_tuple("At").field(at).finish(),
            Start::Agreed(_) => f.write_str("Agreed"),
        }
    }
}

/// How the load is made: complete when the flags are read, before any schema is asked.
/// What each call is (its path, kind, stream limits) is the resolved stage's (`stage::Mix`).
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    /// What goes with every call but its path (metadata, deadline, message sizes).
    pub call: CallOptions,
    pub pacer: Pacer,
    /// Closed loop: concurrent workers (`-c`); open loop: most calls in flight; burst: its size.
    pub workers: u32,
    /// OS threads, each with its own current-thread runtime and connections.
    pub threads: u32,
    /// HTTP/2 connections, spread over the threads.
    pub connections: u32,
    pub stop: StopAt,
    /// Measured, reported apart, excluded from the result.
    pub warmup: Duration,
    /// Closed loop: how many workers are active over time (`--ramp`: from 0 to all of them,
    /// rmeter's ramp-up; `--stages`: k6's ramping VUs). Worker i of the whole run works while
    /// the count is above i; `None`: all of them all along.
    pub active_workers: Option<Stages>,
    pub retry: RetryPolicy,
    /// Period of interval reports (progress, CSV, HDR log).
    pub interval: Duration,
    /// After the end (or the first Ctrl-C), how long calls in flight may still finish.
    pub drain: Duration,
    /// Keep response bodies for per-call details.
    pub keep_responses: bool,
    /// This process's share of a load split over several (`--shard`).
    pub shard: ShardOf,
    /// A start shared with other shards (`--start-at`, `--coordinator`); None: at once.
    pub start: Option<Start>,
    /// `--warmup auto`: exclude the warm-up that steady-state detection finds.
    pub warmup_auto: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::pacer::{Arrival, Pacer, RateSchedule};

    #[test]
    fn shards_together_keep_the_whole_schedule() {
        let ramp = RateSchedule::ramp(100.0, 700.0, std::time::Duration::from_secs(2));
        for arrival in [Arrival::Uniform, Arrival::Poisson { seed: 5 }] {
            let whole = &Pacer::Open(ramp.clone(), arrival);
            let mut times: Vec<_> = (0..3u32)
                .flat_map(|index| {
                    let shard = ShardOf { index, count: 3 };
                    let mut cursor = whole.cursor();
                    (0..100u64).map(move |k| cursor.intended(shard.global(k)).unwrap())
                })
                .collect();
            times.sort();
            let expected: Vec<_> = (0..300u64).map(|k| whole.intended(k).unwrap()).collect();
            assert_eq!(times, expected, "{arrival:?}");
        }
    }

    #[test]
    fn shares_add_up() {
        for n in [0u64, 1, 7, 10, 1001] {
            let total: u64 = (0..4).map(|index| ShardOf { index, count: 4 }.share(n)).sum();
            assert_eq!(total, n);
            let due: u64 = (0..4).map(|index| ShardOf { index, count: 4 }.local_due(n)).sum();
            assert_eq!(due, n, "due {n}");
        }
    }
}
