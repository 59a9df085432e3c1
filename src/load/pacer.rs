//! The Pacer: a pure answer to "when should call number k be sent?", testable without a
//! network (vegeta's idea). One worker loop serves every load model through it.
use std::time::Duration;

/// A sending rate that may change linearly: `from` calls/s at the start, `to` calls/s
/// after `over`, constant afterwards (`--rps 100:1000:30s`; a plain `--rps R` has from = to).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSchedule {
    pub from: f64,
    pub to: f64,
    pub over: Duration,
}

impl RateSchedule {
    pub fn constant(rps: f64) -> Self {
        RateSchedule { from: rps, to: rps, over: Duration::ZERO }
    }

    /// Calls due by `t` since the start: the integral of the rate.
    pub fn calls_due(&self, t: Duration) -> f64 {
        let (t, ramp) = (t.as_secs_f64(), self.over.as_secs_f64());
        if t < ramp {
            self.from * t + (self.to - self.from) * t * t / (2.0 * ramp)
        } else {
            (self.from + self.to) * ramp / 2.0 + self.to * (t - ramp)
        }
    }

    /// The intended send time of call `k` (0-based): the time at which `k` calls are due,
    /// the inverse of `calls_due`.
    pub fn send_time(&self, k: u64) -> Duration {
        let k = k as f64;
        let ramp = self.over.as_secs_f64();
        let ramp_calls = self.calls_due(self.over);
        let secs = if k < ramp_calls {
            let slope = (self.to - self.from) / ramp; // rate(t) = from + slope * t
            if slope.abs() < 1e-12 {
                k / self.from
            } else {
                // slope/2 t² + from t - k = 0, the positive root, written to stay exact near slope 0
                2.0 * k / (self.from + (self.from * self.from + 2.0 * slope * k).sqrt())
            }
        } else {
            ramp + (k - ramp_calls) / self.to
        };
        // A schedule beyond what a Duration holds is simply never reached.
        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX)
    }
}

/// `R`, or `FROM:TO:DURATION` for a ramp, as `--rps` takes it.
impl std::fmt::Display for RateSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from == self.to || self.over.is_zero() {
            write!(f, "{}", self.to)
        } else {
            write!(f, "{}:{}:{}", self.from, self.to, humantime::format_duration(self.over))
        }
    }
}

/// How calls are paced. Closed loop and bursts send as soon as they are allowed to;
/// open loop sends on a schedule that does not wait for answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacer {
    /// Each worker sends its next call when its previous one ended.
    Closed,
    /// Calls are due at fixed times whatever the server does (coordinated omission visible).
    Open(RateSchedule),
    /// Rounds of `size` calls fired at once; a round starts when the previous one has fully ended.
    Burst { size: u64 },
}

impl Pacer {
    /// When call `k` is due, from the start of the run; `None`: as soon as allowed.
    pub fn intended(&self, k: u64) -> Option<Duration> {
        match self {
            Pacer::Open(rate) => Some(rate.send_time(k)),
            Pacer::Closed | Pacer::Burst { .. } => None,
        }
    }

    /// Open loop: how many calls are due before `t` from the start (the count whose
    /// intended time is earlier than `t`); `None` for the other pacers.
    pub fn due_by(&self, t: Duration) -> Option<u64> {
        match self {
            Pacer::Open(rate) => {
                let due = rate.calls_due(t);
                Some(if due >= u64::MAX as f64 { u64::MAX } else { due.ceil() as u64 })
            }
            Pacer::Closed | Pacer::Burst { .. } => None,
        }
    }

    /// How many calls must have ended before call `k` may start (the round barrier of bursts).
    pub fn completed_before(&self, k: u64) -> u64 {
        match self {
            Pacer::Burst { size } => k / size * size,
            Pacer::Closed | Pacer::Open(_) => 0,
        }
    }

    /// Whether latency can see coordinated omission (only a schedule that ignores answers can).
    pub fn is_open(&self) -> bool {
        matches!(self, Pacer::Open(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_by_counts_the_calls_intended_before_a_time() {
        let p = Pacer::Open(RateSchedule::constant(10.0));
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
        let p = Pacer::Open(RateSchedule::constant(500.0));
        assert_eq!(p.intended(0), Some(Duration::ZERO));
        assert!((secs(p.intended(1).unwrap()) - 0.002).abs() < 1e-9);
        assert!((secs(p.intended(5000).unwrap()) - 10.0).abs() < 1e-9);
        assert_eq!(p.completed_before(5000), 0);
    }

    #[test]
    fn linear_ramp_matches_its_integral() {
        // 100 -> 1000 calls/s over 30 s: 16,500 calls due during the ramp.
        let r = RateSchedule { from: 100.0, to: 1000.0, over: Duration::from_secs(30) };
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
        let r = RateSchedule { from: 1000.0, to: 10.0, over: Duration::from_secs(10) };
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
}
