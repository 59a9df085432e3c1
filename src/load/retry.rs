//! Retries as seed 002's rmeter did them, counted right: a call is every attempt until
//! the final answer; retries = attempts - calls, each counted once.
use std::time::Duration;
use tonic::Code;

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: no retries).
    pub max_retries: u32,
    /// Backoff before retry r (1-based) is `base * 2^(r-1)`.
    pub base: Duration,
    /// Spread each backoff uniformly over [backoff/2, backoff] so retries do not align.
    pub jitter: bool,
    /// Statuses that are retried.
    pub retry_on: Vec<Code>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 0,
            base: Duration::from_secs(1),
            jitter: false,
            retry_on: vec![Code::ResourceExhausted, Code::Unavailable],
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based), or None when the attempt that
    /// ended with `status` is final.
    pub fn backoff(&self, retry: u32, status: Code) -> Option<Duration> {
        if retry > self.max_retries || !self.retry_on.contains(&status) {
            return None;
        }
        let full = self.base.saturating_mul(1u32 << (retry - 1).min(20));
        Some(if self.jitter { full.mul_f64(0.5 + rand::random::<f64>() / 2.0) } else { full })
    }

    /// A call that ended on a retryable status after its last allowed attempt ran out of retries.
    pub fn exhausted(&self, attempts: u32, status: Code) -> bool {
        self.max_retries > 0 && attempts > self.max_retries && self.retry_on.contains(&status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_stops_after_max() {
        let p = RetryPolicy { max_retries: 3, base: Duration::from_millis(100), ..Default::default() };
        assert_eq!(p.backoff(1, Code::ResourceExhausted), Some(Duration::from_millis(100)));
        assert_eq!(p.backoff(2, Code::Unavailable), Some(Duration::from_millis(200)));
        assert_eq!(p.backoff(3, Code::Unavailable), Some(Duration::from_millis(400)));
        assert_eq!(p.backoff(4, Code::Unavailable), None);
        assert_eq!(p.backoff(1, Code::Internal), None);
        assert_eq!(p.backoff(1, Code::Ok), None);
        assert!(p.exhausted(4, Code::Unavailable));
        assert!(!p.exhausted(4, Code::Internal));
        assert!(!p.exhausted(3, Code::Unavailable));
    }

    #[test]
    fn jitter_stays_within_half_to_full() {
        let p = RetryPolicy { max_retries: 1, base: Duration::from_millis(100), jitter: true, ..Default::default() };
        for _ in 0..200 {
            let b = p.backoff(1, Code::Unavailable).unwrap();
            assert!(b >= Duration::from_millis(50) && b <= Duration::from_millis(100), "{b:?}");
        }
    }

    #[test]
    fn no_retries_means_nothing_is_exhausted() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, Code::Unavailable), None);
        assert!(!p.exhausted(1, Code::Unavailable));
    }
}
