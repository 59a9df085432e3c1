//! `--assert 'p99<10ms,error_rate<1%,rps>=1000'`: checks on a result; a breach makes the run
//! exit 1. Any statistic of `Statistic` can be checked (`p42<5ms`, `p99.9<20ms`, as k6's p(42)).
use super::Statistic;
use crate::error::bad_input;
use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    Latency(Statistic),
    /// Failed calls over all calls.
    ErrorRate,
    /// Calls per second of the measured window.
    Rps,
    /// `--workload` checks: passed over all checks made (k6's `checks` rate).
    Checks,
}

/// A metric's value, with its unit.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub enum Value {
    Latency(Duration),
    /// A fraction: 0.01 is 1%.
    Fraction(f64),
    PerSecond(f64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Latency(d) => f.write_str(&crate::units::duration(*d)),
            Value::Fraction(x) => write!(f, "{}%", trim(x * 100.0)),
            Value::PerSecond(x) => write!(f, "{} calls/s", trim(*x)),
        }
    }
}

/// A number with at most 3 decimals and no trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comparison {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// As the user wrote it.
    pub text: String,
    pub metric: Metric,
    pub comparison: Comparison,
    pub limit: Value,
}

/// Parses a comma-separated list such as `p99<10ms,error_rate<1%,rps>=1000`.
pub fn parse(list: &str) -> anyhow::Result<Vec<Assertion>> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse_one).collect()
}

fn parse_one(text: &str) -> anyhow::Result<Assertion> {
    let bad = |why: &str| bad_input(format!("--assert {text:?}: {why}"));
    let op_at = text.find(['<', '>']).ok_or_else(|| bad("expected METRIC<VALUE or METRIC>VALUE"))?;
    let (name, rest) = text.split_at(op_at);
    let or_equal = rest[1..].starts_with('=');
    let comparison = match (rest.starts_with('<'), or_equal) {
        (true, false) => Comparison::Less,
        (true, true) => Comparison::LessOrEqual,
        (false, false) => Comparison::Greater,
        (false, true) => Comparison::GreaterOrEqual,
    };
    let value = rest[1 + or_equal as usize..].trim();
    let fraction = || {
        let x = match value.strip_suffix('%') {
            Some(percent) => percent.trim().parse::<f64>().ok().map(|p| p / 100.0),
            None => value.parse::<f64>().ok(),
        };
        x.filter(|x| (0.0..=1.0).contains(x)).map(Value::Fraction)
    };
    let (metric, limit) = match name.trim() {
        "error_rate" | "errors" => match fraction() {
            Some(x) => (Metric::ErrorRate, x),
            None => return Err(bad("error_rate takes a percentage such as 1% (or a fraction from 0 to 1)")),
        },
        "checks" => match fraction() {
            Some(x) => (Metric::Checks, x),
            None => return Err(bad("checks takes a percentage of checks passed such as 99% (or a fraction)")),
        },
        "rps" => match value.parse::<f64>() {
            Ok(r) if r.is_finite() && r >= 0.0 => (Metric::Rps, Value::PerSecond(r)),
            _ => return Err(bad("rps takes a number of calls per second")),
        },
        name => {
            let stat = Statistic::parse(name).ok_or_else(|| {
                bad(&format!(
                    "unknown metric {name:?} (known: min, mean, stdev, max, any percentile as p50, p99.9, p42; \
                     error_rate, rps, checks)"
                ))
            })?;
            let limit =
                humantime::parse_duration(value).map_err(|_| bad("latency limits take a duration such as 10ms"))?;
            (Metric::Latency(stat), Value::Latency(limit))
        }
    };
    Ok(Assertion { text: text.to_string(), metric, comparison, limit })
}

impl Assertion {
    pub fn holds(&self, value: Value) -> bool {
        match self.comparison {
            Comparison::Less => value < self.limit,
            Comparison::LessOrEqual => value <= self.limit,
            Comparison::Greater => value > self.limit,
            Comparison::GreaterOrEqual => value >= self.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_latency_rate_and_throughput() {
        let a = parse("p99<10ms, error_rate<1%").unwrap();
        assert_eq!(a[0].metric, Metric::Latency(Statistic::Percentile(99.0)));
        assert!(a[0].holds(Value::Latency(Duration::from_micros(9_999))));
        assert!(!a[0].holds(Value::Latency(Duration::from_millis(10))));
        assert_eq!(a[1].metric, Metric::ErrorRate);
        assert!(a[1].holds(Value::Fraction(0.009)) && !a[1].holds(Value::Fraction(0.01)));
        let r = parse("rps>=1000").unwrap();
        assert!(r[0].holds(Value::PerSecond(1000.0)) && !r[0].holds(Value::PerSecond(999.0)));
        let any = parse("p42<1ms,p99.9<=20ms").unwrap();
        assert_eq!(any[0].metric, Metric::Latency(Statistic::Percentile(42.0)));
        assert_eq!(any[1].metric, Metric::Latency(Statistic::Percentile(99.9)));
    }

    #[test]
    fn a_rate_above_one_without_percent_is_refused() {
        // `error_rate<50` once read as a fraction of 50 and always passed.
        let err = parse("error_rate<50").unwrap_err().to_string();
        assert!(err.contains("error_rate<50") && err.contains('%'), "{err}");
        assert_eq!(parse("error_rate<0.5").unwrap()[0].limit, Value::Fraction(0.5));
        assert_eq!(parse("error_rate<50%").unwrap()[0].limit, Value::Fraction(0.5));
    }

    #[test]
    fn rejects_nonsense_with_the_assertion_named() {
        for bad in ["p99", "p0<1ms", "p101<1ms", "p99<fast", "error_rate<lots", "rps>NaN", "error_rate<200%"] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn values_print_with_units() {
        assert_eq!(Value::Latency(Duration::from_micros(437_500) / 1000).to_string(), "437.5 µs");
        assert_eq!(Value::Fraction(0.0125).to_string(), "1.25%");
        assert_eq!(Value::PerSecond(1000.0).to_string(), "1000 calls/s");
    }
}
