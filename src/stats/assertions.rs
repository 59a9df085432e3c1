//! `--assert 'p99<10ms,error_rate<1%'`: checks on a result; a breach makes the run exit 1.
use crate::error::bad_input;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency statistic, in microseconds: p50, p90, p99, p99.9, mean, max, ...
    Latency(&'static str),
    ErrorRate,
    Rps,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    pub text: String,
    pub metric: Metric,
    pub less: bool,
    pub or_equal: bool,
    /// Microseconds for latency, a fraction for error_rate, calls/s for rps.
    pub limit: f64,
}

const LATENCIES: [&str; 12] =
    ["min", "mean", "stdev", "p50", "p75", "p90", "p95", "p99", "p99.9", "p999", "p99.99", "max"];

/// Parses a comma-separated list such as `p99<10ms,error_rate<1%,rps>=1000`.
pub fn parse(list: &str) -> anyhow::Result<Vec<Assertion>> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse_one).collect()
}

fn parse_one(text: &str) -> anyhow::Result<Assertion> {
    let bad = |why: &str| bad_input(format!("--assert {text:?}: {why}"));
    let op_at = text.find(['<', '>']).ok_or_else(|| bad("expected METRIC<VALUE or METRIC>VALUE"))?;
    let (name, rest) = text.split_at(op_at);
    let less = rest.starts_with('<');
    let or_equal = rest[1..].starts_with('=');
    let value = rest[1 + or_equal as usize..].trim();
    let name = name.trim();
    let (metric, limit) = match name {
        "error_rate" | "errors" => {
            let v = value
                .strip_suffix('%')
                .map_or_else(|| value.parse::<f64>(), |p| p.trim().parse::<f64>().map(|x| x / 100.0));
            (Metric::ErrorRate, v.map_err(|_| bad("error_rate takes a fraction or a percentage such as 1%"))?)
        }
        "rps" => (Metric::Rps, value.parse::<f64>().map_err(|_| bad("rps takes a number of calls per second"))?),
        _ => {
            let stat = LATENCIES.iter().find(|&&l| l == name).ok_or_else(|| {
                bad(&format!("unknown metric {name:?} (known: {}, error_rate, rps)", LATENCIES.join(", ")))
            })?;
            let d: Duration =
                humantime::parse_duration(value).map_err(|_| bad("latency limits take a duration such as 10ms"))?;
            (Metric::Latency(stat), d.as_secs_f64() * 1e6)
        }
    };
    Ok(Assertion { text: text.to_string(), metric, less, or_equal, limit })
}

impl Assertion {
    pub fn holds(&self, value: f64) -> bool {
        match (self.less, self.or_equal) {
            (true, false) => value < self.limit,
            (true, true) => value <= self.limit,
            (false, false) => value > self.limit,
            (false, true) => value >= self.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_issue_example() {
        let a = parse("p99<10ms, error_rate<1%").unwrap();
        assert_eq!(a[0].metric, Metric::Latency("p99"));
        assert_eq!(a[0].limit, 10_000.0);
        assert!(a[0].holds(9_999.0) && !a[0].holds(10_000.0));
        assert_eq!(a[1].metric, Metric::ErrorRate);
        assert!((a[1].limit - 0.01).abs() < 1e-12);
        let r = parse("rps>=1000").unwrap();
        assert!(r[0].holds(1000.0) && !r[0].holds(999.0));
    }

    #[test]
    fn rejects_nonsense_with_the_assertion_named() {
        for bad in ["p99", "p42<1ms", "p99<fast", "error_rate<lots"] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }
}
