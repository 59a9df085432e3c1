//! A sample of latencies described as the ping-vs-gRPC write-up's table does (pandas'
//! `describe`): count, mean, sample standard deviation, min, quartiles, max
//! (docs/experiments.md, "Ping vs gRPC latency"). Quartiles interpolate as R's type 7, the
//! rule pandas uses, so the numbers match that table's tools.
use super::compare::quantile_sorted;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Description {
    pub count: usize,
    pub mean: Duration,
    /// Sample standard deviation (n - 1); zero below two values.
    pub std: Duration,
    pub min: Duration,
    pub q25: Duration,
    pub q50: Duration,
    pub q75: Duration,
    pub max: Duration,
}

impl Description {
    /// `None` for an empty sample.
    pub fn of(sample: &[Duration]) -> Option<Description> {
        let mut ns: Vec<f64> = sample.iter().map(|d| d.as_nanos() as f64).collect();
        ns.sort_unstable_by(f64::total_cmp);
        let n = ns.len() as f64;
        let mean = ns.iter().sum::<f64>() / n;
        let var = if ns.len() > 1 { ns.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let d = |x: f64| Duration::from_nanos(x.max(0.0).round() as u64);
        Some(Description {
            count: ns.len(),
            mean: d(mean),
            std: d(var.sqrt()),
            min: d(*ns.first()?),
            q25: d(quantile_sorted(&ns, 0.25)?),
            q50: d(quantile_sorted(&ns, 0.5)?),
            q75: d(quantile_sorted(&ns, 0.75)?),
            max: d(*ns.last()?),
        })
    }

    /// The rows of the table, in its order, with their labels.
    pub fn rows(&self) -> [(&'static str, Duration); 7] {
        [
            ("mean", self.mean),
            ("std", self.std),
            ("min", self.min),
            ("25%", self.q25),
            ("50%", self.q50),
            ("75%", self.q75),
            ("max", self.max),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_as_pandas_does() {
        let ms = |x: u64| Duration::from_millis(x);
        let d = Description::of(&[ms(4), ms(1), ms(2), ms(3)]).unwrap();
        assert_eq!(d.count, 4);
        assert_eq!((d.min, d.max, d.mean), (ms(1), ms(4), Duration::from_micros(2500)));
        // pandas: 25% 1.75, 50% 2.5, 75% 3.25, std 1.290994
        assert_eq!(
            (d.q25, d.q50, d.q75),
            (Duration::from_micros(1750), Duration::from_micros(2500), Duration::from_micros(3250))
        );
        assert_eq!(d.std, Duration::from_nanos(1_290_994));
        assert_eq!(Description::of(&[]), None);
        assert_eq!(Description::of(&[ms(5)]).unwrap().std, Duration::ZERO);
    }
}
