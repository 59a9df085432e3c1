//! The Pacer: a pure answer to "when should call number k be sent?", testable without a
//! network (vegeta's idea). One worker loop serves every load model through it.
use std::sync::Arc;
use std::time::Duration;

/// A quantity that moves linearly from stage to stage, as k6's `stages` do: `start` at
/// time 0, then each stage (duration, target) ramps linearly to its target over its duration
/// (a stage of 0s is a step); after the last stage the last target holds. Rates of the open
/// loop and worker counts of the closed loop are both such schedules.
#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    start: f64,
    segments: Arc<[Segment]>,
}

/// One stage, with what is known at its start, so that no query sums over the stages before.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    /// Start and length, in seconds from the start of the run.
    t0: f64,
    len: f64,
    /// The value at the start and at the end.
    v0: f64,
    v1: f64,
    /// The integral of the value from 0 to `t0` (calls due, for a rate).
    area0: f64,
}

impl Segment {
    fn area(&self) -> f64 {
        (self.v0 + self.v1) * self.len / 2.0
    }

    fn end(&self) -> f64 {
        self.t0 + self.len
    }

    fn value_at(&self, t: f64) -> f64 {
        if self.len == 0.0 {
            return self.v1;
        }
        self.v0 + (self.v1 - self.v0) * ((t - self.t0) / self.len).clamp(0.0, 1.0)
    }

    /// The integral from `t0` to `t0 + dt` (dt within the segment).
    fn area_to(&self, dt: f64) -> f64 {
        if self.len == 0.0 {
            return 0.0;
        }
        self.v0 * dt + (self.v1 - self.v0) * dt * dt / (2.0 * self.len)
    }

    /// The time from `t0` at which the integral from `t0` reaches `a` (0 <= a <= area): the
    /// positive root of slope/2 dt² + v0 dt - a = 0, written to stay exact near slope 0.
    fn time_of_area(&self, a: f64) -> f64 {
        if a <= 0.0 {
            return 0.0;
        }
        let slope = (self.v1 - self.v0) / self.len;
        let root = (self.v0 * self.v0 + 2.0 * slope * a).max(0.0).sqrt();
        (2.0 * a / (self.v0 + root)).min(self.len)
    }
}

impl Stages {
    /// `start`, then `stages` of (duration, target) in turn.
    pub fn new(start: f64, stages: &[(Duration, f64)]) -> Stages {
        let (mut t0, mut v0, mut area0) = (0.0, start, 0.0);
        let segments = stages
            .iter()
            .map(|&(over, to)| {
                let segment = Segment { t0, len: over.as_secs_f64(), v0, v1: to, area0 };
                (t0, v0, area0) = (segment.end(), to, area0 + segment.area());
                segment
            })
            .collect();
        Stages { start, segments }
    }

    /// The same value all along.
    pub fn constant(value: f64) -> Stages {
        Stages::new(value, &[])
    }

    /// The stages' durations added up.
    pub fn length(&self) -> Duration {
        let secs = self.segments.last().map_or(0.0, Segment::end);
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }

    /// The highest value at any time.
    pub fn peak(&self) -> f64 {
        self.segments.iter().map(|s| s.v1).fold(self.start, f64::max)
    }

    /// Each stage's duration and target.
    pub fn targets(&self) -> impl Iterator<Item = (Duration, f64)> + '_ {
        self.segments.iter().map(|s| (Duration::from_secs_f64(s.len), s.v1))
    }

    fn last_value(&self) -> f64 {
        self.segments.last().map_or(self.start, |s| s.v1)
    }

    /// The value at `t` from the start.
    pub fn value_at(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        match self.segment_at(t) {
            Some(segment) => segment.value_at(t),
            None => self.last_value(),
        }
    }

    /// The segment holding `t`, if `t` is before the end of the last one.
    fn segment_at(&self, t: f64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.end() <= t);
        self.segments.get(i)
    }

    /// The integral of the value from 0 to `t`.
    pub fn integral(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        match self.segment_at(t) {
            Some(s) => s.area0 + s.area_to((t - s.t0).max(0.0)),
            None => {
                let end = self.segments.last().map_or((0.0, 0.0), |s| (s.end(), s.area0 + s.area()));
                end.1 + self.last_value() * (t - end.0)
            }
        }
    }

    /// The time at which the integral reaches `x`, inverting it in the one segment where it
    /// does (no sum over calls, so call a billion is as exact as call one); `None` when it
    /// never does (the value ends at 0 before).
    pub fn time_of_integral(&self, x: f64) -> Option<Duration> {
        // The first segment whose integral at its end reaches x; stages with nothing due
        // (a rate of 0, a step) are passed over.
        let i = self.segments.partition_point(|s| s.area0 + s.area() < x);
        let secs = match self.segments.get(i) {
            Some(s) => s.t0 + s.time_of_area(x - s.area0),
            None => {
                let (end, total) = self.segments.last().map_or((0.0, 0.0), |s| (s.end(), s.area0 + s.area()));
                match self.last_value() {
                    v if v > 0.0 => end + (x - total).max(0.0) / v,
                    _ => return None,
                }
            }
        };
        // A schedule beyond what a Duration holds is simply never reached.
        Duration::try_from_secs_f64(secs.max(0.0)).ok()
    }

    /// The first time from `t` on at which the value is above `level` (reaching it on a
    /// rising stage counts: a worker starts as the count of workers reaches it); `None`
    /// when it never is again.
    pub fn first_above(&self, level: f64, t: Duration) -> Option<Duration> {
        let t = t.as_secs_f64();
        let first = self.segments.partition_point(|s| s.end() <= t);
        for s in &self.segments[first..] {
            let from = t.max(s.t0);
            if s.value_at(from) > level {
                return Duration::try_from_secs_f64(from).ok();
            }
            if s.v1 > level {
                let crossing = s.t0 + (level - s.v0) / (s.v1 - s.v0) * s.len;
                return Duration::try_from_secs_f64(crossing.max(from)).ok();
            }
        }
        let end = self.segments.last().map_or(0.0, Segment::end);
        (self.last_value() > level).then(|| Duration::try_from_secs_f64(t.max(end)).ok()).flatten()
    }

    /// `D:V,D:V,...` as `--stages` takes it (no stage: the value).
    fn write_stages(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.segments.is_empty() {
            return write!(f, "{}", self.start);
        }
        for (i, s) in self.segments.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{}:{}", humantime::format_duration(Duration::from_secs_f64(s.len)), s.v1)?;
        }
        Ok(())
    }
}

/// `D:V,D:V,...`, as `--stages` takes it.
impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_stages(f)
    }
}

/// The sending rate of an open loop, in calls/s: constant (`--rps R`), a linear ramp that
/// then holds (`--rps FROM:TO:D`) or stages from 0 (`--stages D:R,...`, k6's
/// ramping-arrival-rate with its default start rate of 0).
#[derive(Debug, Clone, PartialEq)]
pub struct RateSchedule {
    pub rate: Stages,
    /// Given as `--stages` (printed the same way).
    pub staged: bool,
}

impl RateSchedule {
    pub fn constant(rps: f64) -> Self {
        RateSchedule { rate: Stages::constant(rps), staged: false }
    }

    /// `from` calls/s at the start, `to` after `over`, constant afterwards.
    pub fn ramp(from: f64, to: f64, over: Duration) -> Self {
        RateSchedule { rate: Stages::new(from, &[(over, to)]), staged: false }
    }

    /// From 0 calls/s, each stage ramping linearly to its rate.
    pub fn stages(stages: Stages) -> Self {
        RateSchedule { rate: stages, staged: true }
    }

    /// Calls due by `t` since the start: the integral of the rate.
    pub fn calls_due(&self, t: Duration) -> f64 {
        self.rate.integral(t)
    }

    /// The intended send time of call `k` (0-based): the time at which `k` calls are due,
    /// the inverse of `calls_due`; `Duration::MAX` when it is never due.
    pub fn send_time(&self, k: u64) -> Duration {
        self.time_of(k as f64)
    }

    /// The time at which `calls` calls are due (a real number of calls: Poisson arrivals
    /// land between the uniform ones).
    fn time_of(&self, calls: f64) -> Duration {
        self.rate.time_of_integral(calls).unwrap_or(Duration::MAX)
    }
}

/// `R`, `FROM:TO:DURATION` for a ramp, as `--rps` takes it, or the stages as `--stages` does.
impl std::fmt::Display for RateSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.staged, &*self.rate.segments) {
            (true, _) => self.rate.write_stages(f),
            (false, [ramp]) if ramp.v0 != ramp.v1 && ramp.len > 0.0 => {
                write!(f, "{}:{}:{}", ramp.v0, ramp.v1, humantime::format_duration(Duration::from_secs_f64(ramp.len)))
            }
            _ => write!(f, "{}", self.rate.last_value()),
        }
    }
}

/// How the calls of an open loop arrive around the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Call k exactly when k calls are due (evenly spaced at a constant rate).
    Uniform,
    /// A Poisson process of the schedule's rate (the gRPC benchmark driver's offered load):
    /// exponential gaps of mean 1/rate at a constant rate; under ramps and stages a
    /// non-homogeneous one, by time rescaling: call k is sent when `calls_due` reaches the
    /// k-th arrival of a rate-1 Poisson process. Seeded, so a run can be drawn again.
    Poisson { seed: u64 },
    /// Each call when a log says (`run --replay`, load/logged.rs): the call brings its own
    /// time; the rate is the log's mean, for the report.
    Logged,
}

/// Fixed-point unit of the rate-1 arrival times: sums of integers are exact and the same in
/// any thread, so every thread and shard agrees on every intended time.
const UNIT: f64 = (1u64 << 32) as f64;

/// The arrivals of an open loop, read in order: Poisson arrivals are a running sum, so each
/// thread keeps its own cursor (no lock); going back restarts it from the seed.
#[derive(Debug, Clone)]
pub struct Cursor {
    pacer: Pacer,
    poisson: Option<PoissonArrivals>,
}

#[derive(Debug)]
struct PoissonArrivals {
    seed: u64,
    rng: rand::rngs::ChaCha8Rng,
    /// The next arrival's number and its time on the rate-1 scale, in units of 1/UNIT.
    next: u64,
    at: u128,
}

/// By the generator's state: rand's ChaCha8Rng is not `Clone`, so that a stream is not reused
/// by accident; a cursor's copy reading the same arrivals is the point here.
impl Clone for PoissonArrivals {
    fn clone(&self) -> Self {
        let rng = rand::rngs::ChaCha8Rng::deserialize_state(&self.rng.serialize_state());
        PoissonArrivals { rng, ..*self }
    }
}

impl PoissonArrivals {
    fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        PoissonArrivals { seed, rng: rand::rngs::ChaCha8Rng::seed_from_u64(seed), next: 0, at: 0 }
    }

    /// Arrival `k`'s time on the rate-1 scale: arrival 0 at 0 (the run starts with a call, as
    /// the uniform schedule does), then exponential gaps of mean 1.
    fn arrival(&mut self, k: u64) -> f64 {
        if k < self.next {
            *self = PoissonArrivals::new(self.seed);
        }
        while self.next < k {
            self.step();
        }
        self.at as f64 / UNIT
    }

    fn step(&mut self) {
        use rand::RngExt;
        // 1 - u is in (0, 1]: the gap is finite (at most 37 for 53-bit u).
        let gap = -(1.0 - self.rng.random::<f64>()).ln();
        self.at += (gap * UNIT).round() as u128;
        self.next += 1;
    }
}

impl Cursor {
    /// When call `k` is due, from the start of the run; `None`: as soon as allowed. Cheap
    /// when `k` only grows (as a thread's tickets do).
    pub fn intended(&mut self, k: u64) -> Option<Duration> {
        match (&self.pacer, &mut self.poisson) {
            (Pacer::Open(rate, _), Some(poisson)) => Some(rate.time_of(poisson.arrival(k))),
            (pacer, _) => pacer.intended_uniform(k),
        }
    }

    /// Open loop: how many calls are due before `t` from the start (the count whose
    /// intended time is earlier than `t`); `None` for the other pacers.
    pub fn due_by(&mut self, t: Duration) -> Option<u64> {
        let Pacer::Open(rate, _) = &self.pacer else { return None };
        let due = rate.calls_due(t);
        match &mut self.poisson {
            None => Some(if due >= u64::MAX as f64 { u64::MAX } else { due.ceil() as u64 }),
            Some(poisson) => {
                // Arrivals before the cursor's are earlier still: count on from there when it
                // is before `t` (the engine reads the last call's time first), else from 0.
                let mut k = if poisson.arrival(poisson.next) < due { poisson.next } else { 0 };
                while poisson.arrival(k) < due {
                    k += 1;
                }
                Some(k)
            }
        }
    }
}

impl Cursor {
    /// Open loop: the lower bounds of a shard's calls due before `end` but never sent (its
    /// tickets `unsent`, in order): each had waited `end` less its intended time when the run
    /// ended, and would have waited longer (wrk2 counts every scheduled call; issue 39). They
    /// come as runs: `each(first, n, bound)` for `n` tickets from `first` whose bounds all lie
    /// within [`lowest(bound)`, `bound`], one bucket of a histogram. So a million calls unsent
    /// cost a step per bucket, not per call, and no memory: the schedule says when each was due.
    pub fn unsent_bounds(
        &mut self,
        unsent: std::ops::Range<u64>,
        shard: &super::plan::ShardOf,
        end: Duration,
        lowest: impl Fn(Duration) -> Duration,
        mut each: impl FnMut(u64, u64, Duration),
    ) {
        let mut k = unsent.start;
        while k < unsent.end {
            let Some(due) = self.intended(shard.global(k)) else { return };
            let bound = end.saturating_sub(due);
            // The calls due by `end - lowest(bound)` (that instant included) have their bounds
            // in the same bucket; a rounding at the bucket's edge only makes a run shorter.
            let last = end.saturating_sub(lowest(bound)).saturating_add(Duration::from_nanos(1));
            let through = self.due_by(last).map_or(unsent.end, |due| shard.local_due(due));
            let next = through.clamp(k + 1, unsent.end);
            each(k, next - k, bound);
            k = next;
        }
    }
}

/// How calls are paced. Closed loop and bursts send as soon as they are allowed to;
/// open loop sends on a schedule that does not wait for answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Pacer {
    /// Each worker sends its next call when its previous one ended.
    Closed,
    /// Calls are due at fixed times whatever the server does (coordinated omission visible).
    Open(RateSchedule, Arrival),
    /// Rounds of `size` calls fired at once; a round starts when the previous one has fully ended.
    Burst { size: u64 },
}

impl Pacer {
    /// A reader of the intended times; each thread keeps its own.
    pub fn cursor(&self) -> Cursor {
        let poisson = match self {
            Pacer::Open(_, Arrival::Poisson { seed }) => Some(PoissonArrivals::new(*seed)),
            _ => None,
        };
        Cursor { pacer: self.clone(), poisson }
    }

    /// When call `k` is due, from the start of the run; `None`: as soon as allowed. With
    /// Poisson arrivals this draws every arrival before `k`: a `Cursor` reads them in turn.
    pub fn intended(&self, k: u64) -> Option<Duration> {
        self.cursor().intended(k)
    }

    fn intended_uniform(&self, k: u64) -> Option<Duration> {
        match self {
            Pacer::Open(rate, _) => Some(rate.send_time(k)),
            Pacer::Closed | Pacer::Burst { .. } => None,
        }
    }

    /// Open loop: how many calls are due before `t` from the start (the count whose
    /// intended time is earlier than `t`); `None` for the other pacers.
    pub fn due_by(&self, t: Duration) -> Option<u64> {
        self.cursor().due_by(t)
    }

    /// How many calls must have ended before call `k` may start (the round barrier of bursts).
    pub fn completed_before(&self, k: u64) -> u64 {
        match self {
            Pacer::Burst { size } => k / size * size,
            Pacer::Closed | Pacer::Open(..) => 0,
        }
    }

    /// Whether latency can see coordinated omission (only a schedule that ignores answers can).
    pub fn is_open(&self) -> bool {
        matches!(self, Pacer::Open(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unsent calls' lower bounds, a run per bucket, and the same computed call by call:
    /// one histogram, for a constant rate, stages, Poisson arrivals and a shard of three.
    #[test]
    fn unsent_calls_are_counted_at_their_lower_bound_a_bucket_at_a_time() {
        use crate::load::plan::ShardOf;
        use crate::record::shard::new_histogram;
        let end = Duration::from_secs(50);
        let cases = [
            (Pacer::Open(RateSchedule::constant(3000.0), Arrival::Uniform), ShardOf::default()),
            (Pacer::Open(k6_stages(), Arrival::Uniform), ShardOf::default()),
            (poisson(RateSchedule::constant(2000.0), 5), ShardOf::default()),
            (Pacer::Open(RateSchedule::constant(3000.0), Arrival::Uniform), ShardOf { index: 1, count: 3 }),
        ];
        for (pacer, shard) in cases {
            let due = shard.local_due(pacer.due_by(end).unwrap());
            let sent = due / 3;
            let (mut runs, mut by_runs, mut by_calls) = (0, new_histogram(), new_histogram());
            let lowest = |d: Duration| Duration::from_nanos(by_runs.lowest_equivalent(d.as_nanos() as u64));
            let mut recorded = Vec::new();
            pacer.cursor().unsent_bounds(sent..due, &shard, end, lowest, |first, n, bound| {
                recorded.push((first, n, bound));
            });
            let mut next = sent;
            for (first, n, bound) in recorded {
                assert_eq!(first, next, "{pacer:?}: runs follow each other");
                by_runs.record_n(bound.as_nanos() as u64, n).unwrap();
                (next, runs) = (first + n, runs + 1);
            }
            assert_eq!(next, due, "{pacer:?}: every unsent call");
            let mut cursor = pacer.cursor();
            for k in sent..due {
                let bound = end - cursor.intended(shard.global(k)).unwrap();
                by_calls.record(bound.as_nanos() as u64).unwrap();
            }
            assert_eq!(by_runs, by_calls, "{pacer:?}");
            // The first unsent call waited longest: two thirds of the schedule's calls are
            // unsent, so about two thirds of the run (the stages' rate is highest at the end).
            assert!(by_calls.max() > 10_000_000_000 && by_calls.len() == due - sent, "{pacer:?}");
            assert!(runs < (due - sent) / 4, "{pacer:?}: {runs} runs for {} calls", due - sent);
        }
    }

    #[test]
    fn due_by_counts_the_calls_intended_before_a_time() {
        let p = Pacer::Open(RateSchedule::constant(10.0), Arrival::Uniform);
        // Calls at 0, 0.1, ..., 0.9 s are due before 1 s; the one at exactly 1 s is not.
        assert_eq!(p.due_by(Duration::from_secs(1)), Some(10));
        assert_eq!(p.due_by(Duration::from_millis(1001)), Some(11));
        assert_eq!(p.due_by(Duration::ZERO), Some(0));
        for k in [0u64, 1, 7, 999] {
            assert_eq!(p.due_by(p.intended(k).unwrap()), Some(k), "call {k}");
        }
        assert_eq!(Pacer::Closed.due_by(Duration::from_secs(1)), None);
    }

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn constant_rate_spaces_calls_evenly() {
        let p = Pacer::Open(RateSchedule::constant(500.0), Arrival::Uniform);
        assert_eq!(p.intended(0), Some(Duration::ZERO));
        assert!((secs(p.intended(1).unwrap()) - 0.002).abs() < 1e-9);
        assert!((secs(p.intended(5000).unwrap()) - 10.0).abs() < 1e-9);
        assert_eq!(p.completed_before(5000), 0);
    }

    #[test]
    fn linear_ramp_matches_its_integral() {
        // 100 -> 1000 calls/s over 30 s: 16,500 calls due during the ramp.
        let r = RateSchedule::ramp(100.0, 1000.0, Duration::from_secs(30));
        assert!((r.calls_due(Duration::from_secs(30)) - 16_500.0).abs() < 1e-6);
        assert!((secs(r.send_time(16_500)) - 30.0).abs() < 1e-6);
        // After the ramp the rate is constant at 1000/s.
        assert!((secs(r.send_time(17_500)) - 31.0).abs() < 1e-6);
        // Inverse property inside the ramp, and times only move forward.
        let mut last = Duration::ZERO;
        for k in (0..16_500).step_by(97) {
            let t = r.send_time(k);
            assert!((r.calls_due(t) - k as f64).abs() < 1e-6, "k={k}");
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn descending_ramp_is_inverted_too() {
        let r = RateSchedule::ramp(1000.0, 10.0, Duration::from_secs(10));
        for k in [1u64, 100, 1000, 5049] {
            assert!((r.calls_due(r.send_time(k)) - k as f64).abs() < 1e-6, "k={k}");
        }
    }

    #[test]
    fn bursts_wait_for_whole_rounds() {
        let p = Pacer::Burst { size: 10 };
        assert_eq!(p.completed_before(0), 0);
        assert_eq!(p.completed_before(9), 0);
        assert_eq!(p.completed_before(10), 10);
        assert_eq!(p.completed_before(25), 20);
        assert_eq!(p.intended(3), None);
        assert!(!p.is_open() && !Pacer::Closed.is_open());
    }

    /// k6's example shape: 0 -> 100/s over 10 s, -> 1000/s over 30 s, -> 0 over 10 s.
    fn k6_stages() -> RateSchedule {
        RateSchedule::stages(Stages::new(
            0.0,
            &[(Duration::from_secs(10), 100.0), (Duration::from_secs(30), 1000.0), (Duration::from_secs(10), 0.0)],
        ))
    }

    #[test]
    fn stages_send_calls_at_the_times_their_formula_gives() {
        let r = k6_stages();
        // Due by the end of each stage: 100*10/2 = 500, + (100+1000)/2*30 = 17,000, + 1000*10/2 = 22,000.
        for (t, due) in [(10, 500.0), (40, 17_000.0), (50, 22_000.0)] {
            assert!((r.calls_due(Duration::from_secs(t)) - due).abs() < 1e-6, "{t}s");
        }
        let close = |k: u64, expected: f64| {
            let t = secs(r.send_time(k));
            assert!((t - expected).abs() < 1e-9, "call {k}: {t} s, expected {expected} s");
        };
        // Stage 1: rate 10t, due 5t², so call k at sqrt(k/5).
        close(0, 0.0);
        close(20, 2.0);
        close(125, 5.0);
        close(500, 10.0);
        // Stage 2: due 500 + 100u + 15u² at 10 + u.
        close(3_000, 20.0);
        close(17_000, 40.0);
        // Stage 3: due 17,000 + 1000u - 50u² at 40 + u.
        close(20_750, 45.0);
        close(21_999, 40.0 + (1000.0 - 200f64.sqrt()) / 100.0);
        // Call 22,000 would be due as the stages end (so never sent), and none after the rate is 0.
        close(22_000, 50.0);
        assert_eq!(r.send_time(22_001), Duration::MAX);
        assert_eq!(r.to_string(), "10s:100,30s:1000,10s:0");
        // The inverse everywhere, times only moving forward.
        let mut last = Duration::ZERO;
        for k in (0..22_000).step_by(37) {
            let t = r.send_time(k);
            assert!((r.calls_due(t) - k as f64).abs() < 1e-6, "k={k}");
            assert!(t >= last, "k={k}");
            last = t;
        }
    }

    #[test]
    fn a_stage_of_no_time_is_a_step() {
        // 0 -> 10/s over 2 s, then at once 100/s held for 1 s.
        let r = RateSchedule::stages(Stages::new(
            0.0,
            &[(Duration::from_secs(2), 10.0), (Duration::ZERO, 100.0), (Duration::from_secs(1), 100.0)],
        ));
        assert!((r.calls_due(Duration::from_secs(3)) - 110.0).abs() < 1e-9);
        assert!((secs(r.send_time(10)) - 2.0).abs() < 1e-9);
        assert!((secs(r.send_time(60)) - 2.5).abs() < 1e-9);
    }

    #[test]
    fn worker_stages_start_and_park_workers_in_turn() {
        // 0 -> 8 workers over 10 s, then down to 0 over 10 s: worker i works while the count is above i.
        let w = Stages::new(0.0, &[(Duration::from_secs(10), 8.0), (Duration::from_secs(10), 0.0)]);
        let at = |s: f64| Duration::from_secs_f64(s);
        assert_eq!(w.first_above(0.0, Duration::ZERO), Some(Duration::ZERO));
        // Worker 7 starts as the count reaches 7, at 8.75 s, as `--ramp` started it.
        assert_eq!(w.first_above(7.0, Duration::ZERO), Some(at(8.75)));
        assert_eq!(w.first_above(7.0, at(9.0)), Some(at(9.0)));
        // ... and parks once the count is back to 7, at 11.25 s, for good.
        assert_eq!(w.first_above(7.0, at(11.0)), Some(at(11.0)));
        assert_eq!(w.first_above(7.0, at(11.3)), None);
        assert_eq!(w.first_above(0.0, at(20.0)), None);
        assert_eq!(w.length(), Duration::from_secs(20));
        assert_eq!(w.peak(), 8.0);
        // A later stage wakes parked workers again; a last target held keeps them.
        let again = Stages::new(4.0, &[(Duration::ZERO, 0.0), (Duration::from_secs(2), 0.0), (Duration::ZERO, 6.0)]);
        assert_eq!(again.first_above(5.0, at(1.0)), Some(at(2.0)));
        assert_eq!(again.first_above(5.0, at(100.0)), Some(at(100.0)));
        assert_eq!(again.first_above(6.0, at(1.0)), None);
    }

    fn poisson(rate: RateSchedule, seed: u64) -> Pacer {
        Pacer::Open(rate, Arrival::Poisson { seed })
    }

    #[test]
    fn poisson_gaps_are_exponential_with_mean_one_over_the_rate() {
        // 100,000 gaps at 1000/s: the mean gap's standard error is 1 ms / sqrt(1e5) = 3.2 µs,
        // so +-16 µs is five of them; the seed is fixed, so this is not flaky, only honest.
        let n = 100_000u64;
        let mut cursor = poisson(RateSchedule::constant(1000.0), 42).cursor();
        let times: Vec<f64> = (0..=n).map(|k| secs(cursor.intended(k).unwrap())).collect();
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.001).abs() < 16e-6, "mean gap {mean}");
        // Exponential: standard deviation = mean (the sample one within +-3% here, 5 standard errors).
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.03, "coefficient of variation {}", sd / mean);
        assert!(gaps.iter().all(|&g| g >= 0.0));
        // Memorylessness shows as many gaps far below the mean: P(gap < mean/10) = 1 - e^-0.1 = 9.5%.
        let short = gaps.iter().filter(|&&g| g < 0.0001).count() as f64 / n as f64;
        assert!((short - 0.0952).abs() < 0.005, "short gaps {short}");
    }

    #[test]
    fn poisson_counts_in_a_window_are_within_their_bound() {
        // Calls due in [0, 100 s) at 1000/s: Poisson(100,000), standard deviation 316; in
        // [10 s, 11 s): Poisson(1000), sd 31.6. Allowed: 5 sd.
        let p = poisson(RateSchedule::constant(1000.0), 7);
        let in_100s = p.due_by(Duration::from_secs(100)).unwrap() as i64;
        assert!((in_100s - 100_000).abs() < 1_581, "{in_100s} calls in 100 s");
        let mut cursor = p.cursor();
        let window = cursor.due_by(Duration::from_secs(11)).unwrap() as i64
            - cursor.due_by(Duration::from_secs(10)).unwrap() as i64;
        assert!((window - 1000).abs() < 158, "{window} calls in [10 s, 11 s)");
        // due_by counts exactly the intended times before t.
        let t = Duration::from_millis(2500);
        let due = p.due_by(t).unwrap();
        assert!(p.intended(due - 1).unwrap() < t && p.intended(due).unwrap() >= t);
    }

    #[test]
    fn poisson_under_stages_rescales_time() {
        // A non-homogeneous Poisson process by time rescaling: the count due at each intended
        // time is the rate-1 process's arrival, whose gaps have mean 1.
        let r = k6_stages();
        let p = poisson(r.clone(), 3);
        let mut cursor = p.cursor();
        let mut last = 0.0;
        let mut gaps = 0.0;
        let n = 20_000u64;
        for k in 1..=n {
            let due = r.calls_due(cursor.intended(k).unwrap());
            assert!(due >= last, "k={k}");
            gaps += due - last;
            last = due;
        }
        // Mean 1 +- 5 standard errors (1/sqrt(20,000) = 0.7%).
        assert!((gaps / n as f64 - 1.0).abs() < 0.035, "mean gap in calls {}", gaps / n as f64);
        // Counts per stage follow the integral: 500 in the first 10 s (sd 22), 16,500 in the next 30 s (sd 128).
        let first = p.due_by(Duration::from_secs(10)).unwrap() as i64;
        let second = p.due_by(Duration::from_secs(40)).unwrap() as i64 - first;
        assert!((first - 500).abs() < 112, "{first}");
        assert!((second - 16_500).abs() < 642, "{second}");
    }

    #[test]
    fn poisson_arrivals_are_the_same_for_a_seed_in_any_order() {
        let p = poisson(RateSchedule::ramp(100.0, 700.0, Duration::from_secs(2)), 11);
        let forward: Vec<_> = {
            let mut c = p.cursor();
            (0..500).map(|k| c.intended(k).unwrap()).collect()
        };
        // Another thread's cursor, reading every third ticket, and going back: the same times.
        let mut other = p.cursor();
        for k in (0..500).step_by(3).chain([7, 2, 499, 0]) {
            assert_eq!(other.intended(k).unwrap(), forward[k as usize], "k={k}");
        }
        assert_eq!(p.intended(123), Some(forward[123]));
        // Another seed, other arrivals; the uniform schedule is none of them.
        let reseeded = poisson(RateSchedule::ramp(100.0, 700.0, Duration::from_secs(2)), 12);
        assert_ne!(reseeded.intended(100), Some(forward[100]));
        assert_eq!(forward[0], Duration::ZERO);
    }
}
