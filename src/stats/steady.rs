//! Warm-up and steady state: from which point on a run's per-interval series (or the
//! durations of a burst's rounds) stops changing, or the honest answer that it never did.
//!
//! docs/design.md asks that "a result says ... when no steady state was reached" and that
//! warm-up be excluded from the result and reported separately (the JSON `"steady_state"`:
//! `{"after_s": X}` or `{"reached": false}`). This module decides which; it only sees a
//! series of numbers and answers with indices, so the caller turns `from` into seconds
//! (or rounds) with the interval it used.
//!
//! # Method
//! The approach is the one of Barrett, Bolz-Tereick, Killick, Mount and Tratt, "Virtual
//! machine warmup blows hot and cold" (OOPSLA 2017): cut the series into segments of
//! constant mean with a changepoint method, then classify by the last segment.
//!
//! 1. **Scale.** When every value is positive (durations, rates) the analysis works on
//!    `ln(value)`: a slow start is also a noisy one (5x slower, 5x the jitter), and on the
//!    log scale a relative change is a change in mean and the noise has one size at every
//!    level. A series with zero or negative values is analysed as it is.
//! 2. **Noise.** The noise standard deviation `sigma` comes from the first differences,
//!    whose spread is `sqrt(2) x sigma`: 1.4826 x their median absolute deviation, refined
//!    by one reweighting step (the root mean square of the differences within 4 such
//!    deviations). Differencing removes level shifts and drifts (a step changes one
//!    difference, a drift all of them alike) and the median ignores outliers, so warm-up
//!    does not inflate the noise that is meant to judge it. In a quantised series (most
//!    differences zero) `sigma` is the rounding noise of its step instead. All later
//!    steps measure in units of `sigma`, so they mean the same on every series.
//! 3. **Outliers.** A point more than [`OUTLIER_Z`] `sigma` beyond the medians of its
//!    [`OUTLIER_WINDOW`] neighbours on both sides (a GC pause, a stray slow interval) is
//!    replaced by them for the analysis, as Barrett et al. leave outliers out of their
//!    changepoint analysis, so that a single spike neither creates a warm-up nor splits
//!    the steady part. The first and last points have neighbours on one side only and
//!    are kept.
//! 4. **Changepoints.** PELT (Killick, Fearnhead and Eckley, "Optimal detection of
//!    changepoints with a linear computational cost", JASA 2012) finds the segmentation
//!    that minimises the Gaussian change-in-mean cost, the sum of squared deviations from
//!    each segment's mean in units of `sigma^2`, plus [`PENALTY_PER_LN_N`]` x ln(n)` per
//!    segment. The modified BIC of Zhang and Siegmund (Biometrics 2007), the default of
//!    the R package changepoint, charges about `3 ln(n)`; this penalty is higher because
//!    `sigma` is estimated, not known, and a false changepoint near the end would turn a
//!    steady run into "no steady state". PELT returns the exact optimum; its pruning only
//!    skips split points that can no longer win (a test compares it with the unpruned
//!    search).
//! 5. **Tidying**, as Barrett et al. merge equivalent segments before classifying:
//!    neighbouring segments of the same level merge, the closest pair first. The same
//!    level means levels within [`EQUIVALENT`] of each other (a statistically significant
//!    shift of 2 % is not a warm-up) or no more than [`SIGNIFICANT`] standard errors
//!    apart. A segment between two of the same level, and shorter than both, is a
//!    transient (a slow patch mid-run, not warm-up) and joins them.
//! 6. **Classification.** The series is steady from the start of its last segment unless
//!    it was still changing when it ended, which is the case when
//!    - the last segment holds fewer than [`MIN_STEADY_POINTS`] points or less than
//!      [`MIN_STEADY_FRACTION`] of the series: the run ended before the new level could
//!      show that it holds (a series that keeps changing, such as an oscillation, has
//!      only short segments);
//!    - the last segment drifts: a slow drift hides in one segment when each step is
//!      within [`EQUIVALENT`] of the next, so a line is fitted through it, and a slope
//!      beyond [`SIGNIFICANT`] standard errors that moves the level by more than
//!      [`EQUIVALENT`] is a drift;
//!    - or the change into the last segment is gradual: a line through the last two
//!      segments drifts (as above) and fits them about as well as their two levels do
//!      (within one PELT penalty, the price of the step's position). PELT cuts a steady
//!      drift into pieces, each just too short for its own slope to be significant, so
//!      this is how a drift across segments shows; a warm-up instead ends in a step, or
//!      bends into a flat stretch that no line follows.
//!
//!    Fewer than [`MIN_POINTS`] values are [`Steadiness::TooShort`], and a NaN or
//!    infinite value is [`Steadiness::NotFinite`]: neither is a guess.
//!
//! The series are at most a few thousand points, so the crates were not worth a
//! dependency: `pelt` (MPL-2.0) needs a newer Rust than this crate's `rust-version`, and
//! `changepoint` does Bayesian online detection, not PELT.

use std::ops::Range;
use std::time::Duration;

/// Fewer values than this cannot show a warm-up followed by a steady part.
pub const MIN_POINTS: usize = 4;
/// The last segment must hold at least this many points to count as steady: with fewer, a
/// level cannot be told from an outlier (runs of up to two points are outliers).
pub const MIN_STEADY_POINTS: usize = 3;
/// ... and at least this share of the series, so a changepoint in the final quarter means
/// "no steady state": the run ended before the new level could show that it holds.
pub const MIN_STEADY_FRACTION: f64 = 0.25;
/// Segments whose means differ by at most this fraction of the larger are the same level:
/// 20%, because on a shared 2-core machine the p50 of one interval of a steady service moves
/// by up to 15% from the next (measured against `rpcmeter serve` at 100 calls/s); a smaller
/// tolerance calls such runs "not steady". Warm-ups worth the name (JIT, caches, pools) are
/// several times slower, far beyond it.
pub const EQUIVALENT: f64 = 0.20;
/// For latency series, levels closer than this are one level whatever their ratio: on a
/// fast service a relative tolerance alone is a few tens of µs, less than a busy machine moves
/// a call by (a p50 of ~120 µs drifted by ~60 µs in a steady run; fresh runs of one server
/// differ by 3-37 µs in p50), while warm-ups worth the name cost milliseconds.
pub const LATENCY_FLOOR: Duration = Duration::from_micros(100);
/// The PELT penalty per segment is this times `ln(n)`, in units of the noise variance.
pub const PENALTY_PER_LN_N: f64 = 4.0;
/// A point is an outlier when it is more than this many noise standard deviations beyond
/// the median of the [`OUTLIER_WINDOW`] points before it and that of the ones after it.
pub const OUTLIER_Z: f64 = 5.0;
/// How many neighbours on each side judge an outlier; their median ignores a run of up to
/// two outliers, so such runs are found too.
pub const OUTLIER_WINDOW: usize = 5;
/// A difference beyond this many standard errors is significant: two segments closer than
/// that are one level, and a last segment whose slope is steeper than that drifts.
pub const SIGNIFICANT: f64 = 3.0;

/// A stretch of the series with one mean: indices `start..end` (end exclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub start: usize,
    pub end: usize,
    /// The arithmetic mean of the values in the segment, in their own unit (outliers
    /// included: they are left out of the analysis, not out of the data).
    pub mean: f64,
}

impl Segment {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Whether, and from where, a series is steady.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steadiness {
    /// Steady from index `from` (the first index of the last segment) to the end; the
    /// points before it are the warm-up. `from == 0` means no warm-up was seen.
    Steady { from: usize },
    /// The series was still changing when it ended (see the module documentation).
    NoSteadyState,
    /// Fewer than [`MIN_POINTS`] values: too few to tell.
    TooShort,
    /// The value at `index` is NaN or infinite (an interval with no calls has no mean).
    NotFinite { index: usize },
}

/// The segments of constant mean of `values`, after tidying (module documentation, steps
/// 1 to 5). Empty for an empty series or one with a non-finite value.
pub fn segments(values: &[f64]) -> Vec<Segment> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return Vec::new();
    }
    match Scaled::new(values) {
        Some(scaled) => scaled.segments(),
        None => vec![segment(values, 0..values.len())],
    }
}

/// Whether `values` (one number per interval, e.g. each interval's mean latency) reached a
/// steady state, and from which index (module documentation, step 6).
pub fn steadiness(values: &[f64]) -> Steadiness {
    steadiness_within(values, 0.0)
}

/// [`steadiness`] of a latency series in seconds (each interval's p50, say): levels within
/// [`LATENCY_FLOOR`] of each other are the same level, as well as those within [`EQUIVALENT`].
pub fn latency_steadiness(seconds: &[f64]) -> Steadiness {
    steadiness_within(seconds, LATENCY_FLOOR.as_secs_f64())
}

/// [`steadiness`] where levels that differ by at most `floor` (in the values' unit) are also
/// the same level.
pub fn steadiness_within(values: &[f64], floor: f64) -> Steadiness {
    if let Some(index) = values.iter().position(|v| !v.is_finite()) {
        return Steadiness::NotFinite { index };
    }
    if values.len() < MIN_POINTS {
        return Steadiness::TooShort;
    }
    let Some(mut scaled) = Scaled::new(values) else {
        return Steadiness::Steady { from: 0 }; // constant
    };
    scaled.floor = floor;
    let segments = scaled.segments();
    let (last, before) = segments.split_last().expect("a non-empty series has a segment");
    let needed = MIN_STEADY_POINTS.max((values.len() as f64 * MIN_STEADY_FRACTION).ceil() as usize);
    let still_changing = last.len() < needed
        || scaled.drifts(last.start..last.end)
        || before.last().is_some_and(|previous| scaled.gradual(previous, last));
    if still_changing {
        Steadiness::NoSteadyState
    } else {
        Steadiness::Steady { from: last.start }
    }
}

/// Which rounds of a burst benchmark (e.g. 10 rounds of 10,000 calls, the latch benchmark
/// of docs/experiments.md) were warm-up, judged from the rounds' durations by
/// [`steadiness`]: `Steady { from }` means rounds `0..from` were warm-up.
pub fn warm_rounds(round_times: &[Duration]) -> Steadiness {
    let seconds: Vec<f64> = round_times.iter().map(Duration::as_secs_f64).collect();
    steadiness(&seconds)
}

/// A series on its analysis scale (`ln` when all values are positive), centred on its
/// median and divided by the noise, so one unit is one standard deviation of the noise.
struct Scaled<'a> {
    values: &'a [f64],
    z: Vec<f64>,
    log: bool,
    centre: f64,
    sigma: f64,
    /// Levels closer than this, in the values' unit, are one level (see [`equivalent`]).
    floor: f64,
}

impl<'a> Scaled<'a> {
    /// `None` for a constant series, which has no noise to scale by.
    fn new(values: &'a [f64]) -> Option<Scaled<'a>> {
        let log = values.iter().all(|&v| v > 0.0);
        let y: Vec<f64> = if log { values.iter().map(|v| v.ln()).collect() } else { values.to_vec() };
        let sigma = noise(&y)?;
        let centre = median(&y);
        let z: Vec<f64> = y.iter().map(|v| (v - centre) / sigma).collect();
        Some(Scaled { values, z: despike(&z), log, centre, sigma, floor: 0.0 })
    }

    /// A value on the analysis scale back in the values' own unit.
    fn raw(&self, z: f64) -> f64 {
        let y = z * self.sigma + self.centre;
        if self.log {
            y.exp()
        } else {
            y
        }
    }

    /// PELT's penalty for one more segment.
    fn penalty(&self) -> f64 {
        PENALTY_PER_LN_N * (self.z.len() as f64).ln()
    }

    /// PELT's segments, tidied: equivalent neighbours merged (the closest pair first) and
    /// transients absorbed (module documentation, step 5) until neither applies.
    fn segments(&self) -> Vec<Segment> {
        let mut start = 0;
        let mut ranges: Vec<Range<usize>> = pelt(&self.z, self.penalty())
            .into_iter()
            .map(|end| {
                let range = start..end;
                start = end;
                range
            })
            .collect();
        loop {
            let gap = |i: usize| (self.level(&ranges[i - 1]) - self.level(&ranges[i])).abs();
            let closest = (1..ranges.len())
                .filter(|&i| self.same_level(&ranges[i - 1], &ranges[i]))
                .min_by(|&i, &j| gap(i).total_cmp(&gap(j)));
            if let Some(i) = closest {
                ranges[i - 1].end = ranges[i].end;
                ranges.remove(i);
                continue;
            }
            let transient = (1..ranges.len().saturating_sub(1))
                .filter(|&i| {
                    let len = ranges[i].len();
                    len < ranges[i - 1].len()
                        && len < ranges[i + 1].len()
                        && self.same_level(&ranges[i - 1], &ranges[i + 1])
                })
                .min_by_key(|&i| ranges[i].len());
            match transient {
                Some(i) => {
                    ranges[i - 1].end = ranges[i + 1].end;
                    ranges.drain(i..=i + 1);
                }
                None => return ranges.into_iter().map(|r| segment(self.values, r)).collect(),
            }
        }
    }

    /// The mean of `range` on the analysis scale, outliers replaced.
    fn level(&self, range: &Range<usize>) -> f64 {
        self.z[range.clone()].iter().sum::<f64>() / range.len() as f64
    }

    /// Two stretches are one level when their levels are within [`EQUIVALENT`] of each
    /// other or differ by no more than [`SIGNIFICANT`] standard errors.
    fn same_level(&self, a: &Range<usize>, b: &Range<usize>) -> bool {
        let (a_level, b_level) = (self.level(a), self.level(b));
        let standard_error = (1.0 / a.len() as f64 + 1.0 / b.len() as f64).sqrt();
        equivalent(self.raw(a_level), self.raw(b_level), self.floor)
            || (a_level - b_level).abs() <= SIGNIFICANT * standard_error
    }

    /// Whether `range` drifts: the least-squares line through it has a slope more than
    /// [`SIGNIFICANT`] standard errors from zero and ends more than [`EQUIVALENT`] away from
    /// where it starts.
    fn drifts(&self, range: Range<usize>) -> bool {
        let line = Line::fit(&self.z[range.clone()]);
        // z is in units of the noise, so the slope's standard error is 1 / sqrt(sxx).
        let significant = line.slope.abs() * line.sxx.sqrt() > SIGNIFICANT;
        let end = line.start + line.slope * (range.len() - 1) as f64;
        significant && !equivalent(self.raw(line.start), self.raw(end), self.floor)
    }

    /// Whether the change from `before` into `last` is gradual rather than a step: a line
    /// through both drifts and fits them within one PELT penalty (the price of the step's
    /// position) of their two levels. Then the series was still moving at the pace it had
    /// before (a drift cut into pieces), whereas a warm-up ends with a step, or a bend into
    /// a flat stretch that no line follows.
    fn gradual(&self, before: &Segment, last: &Segment) -> bool {
        let (a, b) = (&self.z[before.start..before.end], &self.z[last.start..last.end]);
        let two_levels = squares_about_mean(a) + squares_about_mean(b);
        self.drifts(before.start..last.end)
            && Line::fit(&self.z[before.start..last.end]).residual <= two_levels + self.penalty()
    }
}

/// `z` with isolated outliers (see [`OUTLIER_Z`]) replaced by the mean of their two
/// neighbourhoods' medians. The first and last points have neighbours on one side only
/// and are kept: a slow first interval is warm-up, and a last one may be a new level.
fn despike(z: &[f64]) -> Vec<f64> {
    let n = z.len();
    (0..n)
        .map(|i| {
            let before = &z[i.saturating_sub(OUTLIER_WINDOW)..i];
            let after = &z[(i + 1).min(n)..(i + 1 + OUTLIER_WINDOW).min(n)];
            if before.is_empty() || after.is_empty() {
                return z[i];
            }
            let (b, a) = (median(before), median(after));
            let beyond = (z[i] - b).abs() > OUTLIER_Z && (z[i] - a).abs() > OUTLIER_Z;
            if beyond && (z[i] - b).signum() == (z[i] - a).signum() {
                // The nearer level: right after a step the two medians are the levels on
                // either side, and their mean would be a level that never was.
                if (z[i] - b).abs() <= (z[i] - a).abs() {
                    b
                } else {
                    a
                }
            } else {
                z[i]
            }
        })
        .collect()
}

/// The noise standard deviation of `y` from its first differences (module documentation,
/// step 2); `None` when `y` is constant.
fn noise(y: &[f64]) -> Option<f64> {
    let diffs: Vec<f64> = y.windows(2).map(|w| w[1] - w[0]).collect();
    if diffs.is_empty() {
        return None;
    }
    let mid = median(&diffs);
    let deviations: Vec<f64> = diffs.iter().map(|d| (d - mid).abs()).collect();
    let mad = 1.4826 * median(&deviations);
    if mad > 0.0 {
        // One reweighting step: the median absolute deviation is robust but noisy (on 20
        // points its standard error is about a quarter of it), so take the root mean
        // square of the differences within 4 of its deviations, which still leaves out
        // steps and outliers.
        let kept: Vec<f64> = deviations.into_iter().filter(|&d| d <= 4.0 * mad).collect();
        let rms = (kept.iter().map(|d| d * d).sum::<f64>() / kept.len() as f64).sqrt();
        return Some(rms / std::f64::consts::SQRT_2);
    }
    // More than half the differences are equal: a quantised series (whole milliseconds,
    // say). Its noise is at least the rounding noise of its step q, q / sqrt(12), with q
    // the smallest nonzero deviation of a difference from their median.
    let step = deviations.iter().copied().filter(|&d| d > 0.0).min_by(f64::total_cmp);
    if let Some(q) = step {
        return Some(q / 12f64.sqrt());
    }
    // All differences equal: a noiseless straight line (any noise is below a billionth of
    // its range), or a constant.
    let range = y.iter().copied().fold(f64::NEG_INFINITY, f64::max) - y.iter().copied().fold(f64::INFINITY, f64::min);
    (range > 0.0).then_some(range * 1e-9)
}

/// PELT for a change in mean of a series in units of its noise: the ends (exclusive) of the
/// segments minimising the sum of squared deviations from each segment's mean plus
/// `penalty` per segment. Killick et al.'s recursion `F(t) = min over s of F(s) + C(s..t) +
/// penalty`, with their pruning (constant K = 0, as this cost never grows when a segment
/// is split): a split point `s` with `F(s) + C(s..t) > F(t)` can never be optimal again.
fn pelt(z: &[f64], penalty: f64) -> Vec<usize> {
    let n = z.len();
    let (mut sum, mut squares) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, v) in z.iter().enumerate() {
        sum[i + 1] = sum[i] + v;
        squares[i + 1] = squares[i] + v * v;
    }
    let cost = |s: usize, t: usize| {
        let total = sum[t] - sum[s];
        (squares[t] - squares[s] - total * total / (t - s) as f64).max(0.0)
    };
    let mut best = vec![-penalty; n + 1]; // best[t]: optimal cost of z[..t]
    let mut previous = vec![0; n + 1]; // previous[t]: where the last segment of z[..t] starts
    let mut candidates = vec![0];
    for t in 1..=n {
        let (s, f) = candidates
            .iter()
            .map(|&s| (s, best[s] + cost(s, t) + penalty))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("there is always a candidate");
        best[t] = f;
        previous[t] = s;
        candidates.retain(|&s| best[s] + cost(s, t) <= best[t]);
        candidates.push(t);
    }
    let mut ends = Vec::new();
    let mut t = n;
    while t > 0 {
        ends.push(t);
        t = previous[t];
    }
    ends.reverse();
    ends
}

/// The least-squares line through the points `(i, y[i])`.
struct Line {
    /// The line's value at `i = 0`.
    start: f64,
    slope: f64,
    /// The sum of squared deviations of `i` from its mean.
    sxx: f64,
    /// The sum of squared residuals.
    residual: f64,
}

impl Line {
    fn fit(y: &[f64]) -> Line {
        let n = y.len() as f64;
        let (x_mean, y_mean) = ((n - 1.0) / 2.0, y.iter().sum::<f64>() / n);
        let sxx = n * (n * n - 1.0) / 12.0;
        let sxy: f64 = y.iter().enumerate().map(|(i, v)| (i as f64 - x_mean) * (v - y_mean)).sum();
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        Line { start: y_mean - slope * x_mean, slope, sxx, residual: squares_about_mean(y) - slope * sxy }
    }
}

fn squares_about_mean(y: &[f64]) -> f64 {
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    y.iter().map(|v| (v - mean).powi(2)).sum()
}

fn segment(values: &[f64], range: Range<usize>) -> Segment {
    let mean = values[range.clone()].iter().sum::<f64>() / range.len() as f64;
    Segment { start: range.start, end: range.end, mean }
}

/// Whether `a` and `b` differ by at most [`EQUIVALENT`] of the larger magnitude, or by at most
/// `floor` (an absolute tolerance in their unit; 0 for none).
fn equivalent(a: f64, b: f64, floor: f64) -> bool {
    (a - b).abs() <= (EQUIVALENT * a.abs().max(b.abs())).max(floor)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded xorshift64 generator with roughly Gaussian draws (the sum of 12 uniforms,
    /// minus 6, has mean 0 and variance 1), so every test sees the same numbers.
    struct Noise(u64);

    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }

        fn gaussian(&mut self) -> f64 {
            (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
        }

        /// `level` with `relative` noise (0.05: 5 %).
        fn around(&mut self, level: f64, relative: f64) -> f64 {
            level * (1.0 + relative * self.gaussian())
        }
    }

    fn steady_from(values: &[f64]) -> usize {
        match steadiness(values) {
            Steadiness::Steady { from } => from,
            other => panic!("expected a steady state, got {other:?} for {values:?}"),
        }
    }

    #[test]
    fn five_times_slower_start_is_found_as_warm_up() {
        for seed in 1..=20 {
            let mut noise = Noise(seed);
            let values: Vec<f64> = (0..100).map(|i| noise.around(if i < 30 { 5.0 } else { 1.0 }, 0.05)).collect();
            let from = steady_from(&values);
            assert!((28..=32).contains(&from), "seed {seed}: steady from {from}");
        }
    }

    #[test]
    fn flat_noisy_series_is_steady_from_the_start() {
        for seed in 1..=20 {
            let mut noise = Noise(seed);
            let values: Vec<f64> = (0..100).map(|_| noise.around(1.0, 0.05)).collect();
            assert!(steady_from(&values) <= 2, "seed {seed}");
        }
    }

    #[test]
    fn linear_drift_has_no_steady_state() {
        for seed in 1..=20 {
            let mut noise = Noise(seed);
            let values: Vec<f64> = (0..100).map(|i| noise.around(1.0 + i as f64 / 100.0, 0.05)).collect();
            assert_eq!(steadiness(&values), Steadiness::NoSteadyState, "seed {seed}");
        }
    }

    #[test]
    fn slow_drift_has_no_steady_state() {
        // +30 % over 200 points in 2 % noise: neighbouring pieces are within EQUIVALENT of
        // each other, so they merge into long segments whose slope gives the drift away.
        for seed in 1..=20 {
            let mut noise = Noise(seed);
            let values: Vec<f64> = (0..200).map(|i| noise.around(1.0 + 0.3 * i as f64 / 200.0, 0.02)).collect();
            assert_eq!(steadiness(&values), Steadiness::NoSteadyState, "seed {seed}");
        }
    }

    #[test]
    fn oscillation_has_no_steady_state() {
        let mut noise = Noise(7);
        let values: Vec<f64> =
            (0..100).map(|i| noise.around(if (i / 20) % 2 == 0 { 1.0 } else { 2.0 }, 0.05)).collect();
        assert_eq!(steadiness(&values), Steadiness::NoSteadyState);
    }

    #[test]
    fn change_in_the_final_quarter_is_no_steady_state() {
        let mut noise = Noise(3);
        let values: Vec<f64> = (0..100).map(|i| noise.around(if i < 80 { 1.0 } else { 2.0 }, 0.05)).collect();
        assert_eq!(segments(&values).last().map(|s| s.start), Some(80));
        assert_eq!(steadiness(&values), Steadiness::NoSteadyState);
    }

    #[test]
    fn single_spike_is_neither_warm_up_nor_the_end_of_steadiness() {
        for spike_at in [1, 20, 50, 80, 98] {
            for seed in 1..=10 {
                let mut noise = Noise(seed);
                let mut values: Vec<f64> = (0..100).map(|_| noise.around(1.0, 0.05)).collect();
                values[spike_at] = 10.0;
                assert!(steady_from(&values) <= 2, "spike at {spike_at}, seed {seed}");
                assert_eq!(segments(&values).len(), 1, "spike at {spike_at}, seed {seed}");
            }
        }
    }

    #[test]
    fn two_point_dip_in_flat_data_is_an_outlier() {
        let mut noise = Noise(11);
        let mut values: Vec<f64> = (0..60).map(|_| noise.around(1.0, 0.05)).collect();
        values[40] = 0.2;
        values[41] = 0.25;
        assert_eq!(steady_from(&values), 0);
    }

    #[test]
    fn slow_patch_mid_run_is_a_transient_not_a_warm_up() {
        let mut noise = Noise(13);
        let values: Vec<f64> =
            (0..100).map(|i| noise.around(if (40..46).contains(&i) { 2.0 } else { 1.0 }, 0.05)).collect();
        let found = segments(&values);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(steady_from(&values), 0);
    }

    #[test]
    fn slow_last_point_may_be_a_new_level() {
        let mut noise = Noise(17);
        let mut values: Vec<f64> = (0..40).map(|_| noise.around(1.0, 0.05)).collect();
        values[39] = 10.0;
        assert_eq!(steadiness(&values), Steadiness::NoSteadyState);
    }

    #[test]
    fn burst_rounds_like_the_latch_benchmark_warm_up_in_three_or_four_rounds() {
        let rounds: Vec<Duration> =
            [900, 420, 260, 200, 190, 185, 188, 186, 187, 185].into_iter().map(Duration::from_millis).collect();
        match warm_rounds(&rounds) {
            Steadiness::Steady { from } => assert!(from == 3 || from == 4, "warm-up of {from} rounds"),
            other => panic!("expected a warm-up, got {other:?}"),
        }
    }

    #[test]
    fn rounds_that_are_fast_then_slow_again_are_not_steady() {
        let rounds: Vec<Duration> =
            [900, 420, 260, 200, 190, 185, 188, 186, 400, 410].into_iter().map(Duration::from_millis).collect();
        assert_eq!(warm_rounds(&rounds), Steadiness::NoSteadyState);
    }

    #[test]
    fn very_short_input_is_too_short() {
        assert_eq!(steadiness(&[]), Steadiness::TooShort);
        assert_eq!(steadiness(&[1.0, 2.0, 3.0]), Steadiness::TooShort);
        assert_eq!(warm_rounds(&[Duration::from_millis(5); 3]), Steadiness::TooShort);
        assert!(segments(&[]).is_empty());
        assert_eq!(segments(&[4.0]), vec![Segment { start: 0, end: 1, mean: 4.0 }]);
    }

    #[test]
    fn constant_input_is_steady_without_dividing_by_zero() {
        assert_eq!(steadiness(&[2.5; 50]), Steadiness::Steady { from: 0 });
        assert_eq!(steadiness(&[0.0; 50]), Steadiness::Steady { from: 0 });
        assert_eq!(segments(&[2.5; 50]), vec![Segment { start: 0, end: 50, mean: 2.5 }]);
        // Constant after a warm-up: the differences are mostly zero.
        let mut values = vec![1.0; 40];
        values[..10].fill(3.0);
        assert_eq!(steadiness(&values), Steadiness::Steady { from: 10 });
    }

    #[test]
    fn quantised_series_is_judged_by_its_rounding_noise() {
        // Whole milliseconds, mostly repeating: the median absolute deviation is zero.
        let mut values = vec![185.0; 60];
        for i in (0..60).step_by(7) {
            values[i] = 186.0;
        }
        values[..5].copy_from_slice(&[900.0, 420.0, 260.0, 210.0, 200.0]);
        // 210 and 200 are within EQUIVALENT of the 185 level: steady from the fourth round.
        assert_eq!(steady_from(&values), 3);
    }

    /// A 100 ms warm-up for 8 intervals, then ~2.9 ms (p50s of a merged run, µs as written:
    /// the slow ones one histogram bucket apart, so the noise read from them is 0.09 %). The
    /// first fast points, 3 % below the fast level, were "outliers" of both neighbourhoods and
    /// were replaced by the mean of the two levels' medians, a 17 ms level that never was:
    /// steady from point 11 (5.5 s), not 8 (4 s, the truth).
    #[test]
    fn a_point_just_after_a_step_keeps_to_its_own_level() {
        let us = [
            101711.871, 101842.943, 101711.871, 101777.407, 101908.479, 101974.015, 101777.407, 101842.943, 2906.111,
            2824.191, 2908.159, 2912.255, 3186.687, 3098.623, 2836.479,
        ];
        let s: Vec<f64> = us.iter().map(|u| u / 1e6).collect();
        assert_eq!(latency_steadiness(&s), Steadiness::Steady { from: 8 }, "{:?}", segments(&s));
    }

    #[test]
    fn noiseless_straight_line_has_no_steady_state() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(steadiness(&values), Steadiness::NoSteadyState);
    }

    #[test]
    fn non_finite_values_are_named_not_guessed() {
        let mut values = vec![1.0; 20];
        values[7] = f64::NAN;
        assert_eq!(steadiness(&values), Steadiness::NotFinite { index: 7 });
        assert!(segments(&values).is_empty());
        values[7] = f64::INFINITY;
        assert_eq!(steadiness(&values), Steadiness::NotFinite { index: 7 });
    }

    #[test]
    fn series_with_zero_and_negative_values_is_analysed_unscaled() {
        let mut noise = Noise(5);
        let values: Vec<f64> = (0..80).map(|i| if i < 20 { 10.0 } else { 0.0 } + noise.gaussian() * 0.5).collect();
        assert!(values.iter().any(|&v| v <= 0.0));
        let from = steady_from(&values);
        assert!((19..=21).contains(&from), "steady from {from}");
    }

    #[test]
    fn segments_report_boundaries_and_means() {
        let mut noise = Noise(9);
        let values: Vec<f64> = (0..60)
            .map(|i| {
                noise.around(
                    match i {
                        0..20 => 1.0,
                        20..40 => 3.0,
                        _ => 2.0,
                    },
                    0.01,
                )
            })
            .collect();
        let found = segments(&values);
        let bounds: Vec<(usize, usize)> = found.iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(bounds, vec![(0, 20), (20, 40), (40, 60)]);
        for (segment, level) in found.iter().zip([1.0, 3.0, 2.0]) {
            assert!((segment.mean - level).abs() < 0.02 * level, "{segment:?}");
            assert_eq!(segment.len(), 20);
        }
        assert_eq!(steadiness(&values), Steadiness::Steady { from: 40 });
    }

    /// Optimal partitioning without pruning (the O(n^2) search PELT speeds up).
    fn optimal_partitioning(z: &[f64], penalty: f64) -> f64 {
        let cost = |s: usize, t: usize| {
            let part = &z[s..t];
            let mean = part.iter().sum::<f64>() / part.len() as f64;
            part.iter().map(|v| (v - mean).powi(2)).sum::<f64>()
        };
        let mut best = vec![-penalty; z.len() + 1];
        for t in 1..=z.len() {
            best[t] = (0..t).map(|s| best[s] + cost(s, t) + penalty).fold(f64::INFINITY, f64::min);
        }
        best[z.len()]
    }

    #[test]
    fn pelt_pruning_keeps_the_optimum() {
        for seed in 1..=30 {
            let mut noise = Noise(seed);
            let z: Vec<f64> =
                (0..60).map(|i| noise.gaussian() + [0.0, 3.0, 1.0, 4.0][(i / 15 + seed as usize) % 4]).collect();
            let penalty = PENALTY_PER_LN_N * (z.len() as f64).ln();
            let ends = pelt(&z, penalty);
            let mut start = 0;
            let mut total = 0.0;
            for &end in &ends {
                let part = &z[start..end];
                let mean = part.iter().sum::<f64>() / part.len() as f64;
                total += part.iter().map(|v| (v - mean).powi(2)).sum::<f64>() + penalty;
                start = end;
            }
            let optimum = optimal_partitioning(&z, penalty) + penalty;
            assert!((total - optimum).abs() < 1e-9 * optimum.abs().max(1.0), "seed {seed}: {total} vs {optimum}");
        }
    }

    #[test]
    fn a_drift_of_tens_of_microseconds_on_a_fast_service_is_steady() {
        // Seen once in 7 runs of a 3 s warm-up: p50 ~120 µs drifting ~60 µs over the run, 50 %
        // of the level (beyond EQUIVALENT) but below what a busy machine moves a fast call by.
        let mut noise = Noise(17);
        let drifting: Vec<f64> = (0..20).map(|i| 120e-6 + 60e-6 * i as f64 / 19.0 + 2e-6 * noise.gaussian()).collect();
        assert_eq!(steadiness(&drifting), Steadiness::NoSteadyState, "a relative tolerance alone");
        assert_eq!(latency_steadiness(&drifting), Steadiness::Steady { from: 0 });
        // A warm-up worth the name (2 ms, then 120 µs) is still one, and a drift to 1 ms still drifts.
        let warm: Vec<f64> =
            (0..20).map(|i| if i < 5 { 2e-3 } else { 120e-6 } * (1.0 + 0.02 * noise.gaussian())).collect();
        assert_eq!(latency_steadiness(&warm), Steadiness::Steady { from: 5 });
        let away: Vec<f64> = (0..20).map(|i| 120e-6 + 900e-6 * i as f64 / 19.0 + 2e-6 * noise.gaussian()).collect();
        assert_eq!(latency_steadiness(&away), Steadiness::NoSteadyState);
    }
}
