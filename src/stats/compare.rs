//! Comparing two samples (say the per-interval throughput of run A and of run B), and the
//! robust summaries that go with it. Pure functions on `f64` samples; the caller decides
//! what a sample is, which way is better, and how the numbers are printed.
//!
//! # The test: Mann-Whitney U, two-sided
//! Rank the pooled samples (ties get the average of their ranks); `U_B` = the sum of B's
//! ranks - `n_B (n_B + 1) / 2` counts the pairs (a, b) with b > a, ties as one half. Under
//! "A and B come from the same distribution" `U_B` has mean `n_A n_B / 2` and variance
//! `n_A n_B / 12 x ((n + 1) - sum(t^3 - t) / (n (n - 1)))`, where `n = n_A + n_B` and `t`
//! runs over the sizes of the groups of tied values (the tie correction). The p-value is
//! the normal approximation with a continuity correction of 1/2, as R's
//! `wilcox.test(exact = FALSE, correct = TRUE)` and SciPy's `mannwhitneyu(method =
//! "asymptotic")` compute it: `z = max(|U_B - mean| - 1/2, 0) / sd`, `p = 2 (1 - Phi(z))`.
//! The approximation is within about 0.01 of the exact p-value from 8 values per side on
//! (it errs on the conservative side near p = 0.05 with the correction), which is why
//! [`MIN_EXACT_ENOUGH`] is 8; between 5 and 7 values the p-value is still given but coarse.
//! All values equal (no variance of U): p = 1.
//!
//! # Between runs: Welch's t with a noise floor
//! [`mean_shift`] compares one value per run (what `rpcmeter compare` judges: runs, not the
//! intervals of one run): Welch's t test, each side's standard deviation at least a floor,
//! a side whose floor won counted as known noise. Its interval and p-value come from the
//! same distribution and quantile, so the interval holds 0 exactly when p >= alpha.
//!
//! # The size of the difference
//! - the difference and the ratio of the medians (B - A, B / A), each with a **percentile
//!   bootstrap** confidence interval: both samples are resampled with replacement,
//!   independently, [`Bootstrap::resamples`] times, from a seeded `StdRng`, so the same
//!   input always gives the same interval; the interval holds the central `level` of the
//!   resampled statistics (quantiles as R's type 7). The ratio has no interval when A's
//!   median, or that of any resample of A, is not positive (error rates of zero).
//! - the Hodges-Lehmann shift, the median of all `n_A x n_B` differences b - a: the shift
//!   estimate that belongs to the Mann-Whitney test (quadratic memory, so not computed above
//!   [`HODGES_LEHMANN_MAX_PAIRS`] pairs).
//!
//! # Robust summaries and outliers
//! Median, MAD (median absolute deviation, unscaled: x [`MAD_TO_SIGMA`] estimates a normal
//! sigma), Tukey's fences (1.5 IQR beyond the quartiles) and iterated z-score passes (flag
//! |z| > 3 with the mean and sample standard deviation of what is left, take the flagged
//! out, recompute, repeat until a pass flags nothing). They return flags and indices into
//! the sample; nothing is dropped unless the caller asks with [`without`].
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Below this many values per side the normal approximation of the U test is coarse.
pub const MIN_EXACT_ENOUGH: usize = 8;

/// MAD x this estimates the standard deviation of normally distributed data.
pub const MAD_TO_SIGMA: f64 = 1.4826;

/// The Hodges-Lehmann shift needs every pairwise difference in memory: at most this many.
pub const HODGES_LEHMANN_MAX_PAIRS: usize = 4_000_000;

/// The median; `None` for an empty sample. NaNs sort last (`total_cmp`) and count as values.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v = xs.to_vec();
    median_in_place(&mut v)
}

/// The median of `v`, reordering it (linear time).
fn median_in_place(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (left, mid, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *mid;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = left.iter().copied().max_by(f64::total_cmp).expect("n >= 2");
    Some((lower + upper) / 2.0)
}

/// The median absolute deviation from the median, unscaled; `None` for an empty sample.
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let mut deviations: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median_in_place(&mut deviations)
}

/// The `q` quantile (0..=1) of a sorted sample, interpolated as R's type 7 (the default of
/// R and NumPy): `x[h]` at `h = (n - 1) q`, linear between neighbours.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let below = h.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    Some(sorted[below] + (h - below as f64) * (sorted[above] - sorted[below]))
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// Tukey's fences: a value below `lower` or above `upper` is an outlier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TukeyFences {
    pub q1: f64,
    pub q3: f64,
    pub lower: f64,
    pub upper: f64,
}

impl TukeyFences {
    /// The fences at 1.5 IQR beyond the quartiles (type 7); `None` for an empty sample.
    pub fn of(xs: &[f64]) -> Option<TukeyFences> {
        let s = sorted(xs);
        let (q1, q3) = (quantile_sorted(&s, 0.25)?, quantile_sorted(&s, 0.75)?);
        let iqr = q3 - q1;
        Some(TukeyFences { q1, q3, lower: q1 - 1.5 * iqr, upper: q3 + 1.5 * iqr })
    }

    pub fn outside(&self, x: f64) -> bool {
        x < self.lower || x > self.upper
    }

    /// The indices of the values of `xs` outside the fences, in order.
    pub fn outliers(&self, xs: &[f64]) -> Vec<usize> {
        (0..xs.len()).filter(|&i| self.outside(xs[i])).collect()
    }
}

/// Iterated z-score outlier passes: what each pass flagged, as indices into the sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZScorePasses {
    /// Pass k flagged these (ascending); the last pass is the first that flagged nothing,
    /// and is not listed.
    pub passes: Vec<Vec<usize>>,
}

impl ZScorePasses {
    /// Every flagged index, ascending.
    pub fn flagged(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self.passes.iter().flatten().copied().collect();
        all.sort_unstable();
        all
    }
}

/// Flags values with |z| > `threshold` (3 in the ping-vs-gRPC write-up), z from the mean and
/// sample standard deviation of the values not yet flagged; repeats on what is left until a
/// pass flags nothing, fewer than 3 values remain, or they are all equal. With `m` values no
/// |z| can exceed `(m - 1) / sqrt(m)`, so a threshold of 3 flags nothing below 11 values.
pub fn z_score_outliers(xs: &[f64], threshold: f64) -> ZScorePasses {
    let mut kept: Vec<usize> = (0..xs.len()).collect();
    let mut passes = Vec::new();
    while kept.len() >= 3 {
        let m = kept.len() as f64;
        let mean = kept.iter().map(|&i| xs[i]).sum::<f64>() / m;
        let var = kept.iter().map(|&i| (xs[i] - mean).powi(2)).sum::<f64>() / (m - 1.0);
        let sd = var.sqrt();
        if sd.is_nan() || sd <= 0.0 {
            break;
        }
        let (flagged, rest): (Vec<usize>, Vec<usize>) =
            kept.iter().partition(|&&i| ((xs[i] - mean) / sd).abs() > threshold);
        if flagged.is_empty() {
            break;
        }
        passes.push(flagged);
        kept = rest;
    }
    ZScorePasses { passes }
}

/// The sample without the values at `flagged` (trimming, only when asked for).
pub fn without(xs: &[f64], flagged: &[usize]) -> Vec<f64> {
    xs.iter().enumerate().filter(|(i, _)| !flagged.contains(i)).map(|(_, &x)| x).collect()
}

/// A sample summarised robustly, its outliers flagged (not removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Robust {
    pub n: usize,
    pub median: f64,
    /// Unscaled; see [`MAD_TO_SIGMA`].
    pub mad: f64,
    pub fences: TukeyFences,
    /// Indices of the values outside the Tukey fences.
    pub tukey_outliers: Vec<usize>,
    /// Indices flagged by iterated |z| > 3 passes.
    pub z_outliers: Vec<usize>,
}

impl Robust {
    /// `None` for an empty sample.
    pub fn of(xs: &[f64]) -> Option<Robust> {
        let fences = TukeyFences::of(xs)?;
        Some(Robust {
            n: xs.len(),
            median: median(xs)?,
            mad: mad(xs)?,
            fences,
            tukey_outliers: fences.outliers(xs),
            z_outliers: z_score_outliers(xs, 3.0).flagged(),
        })
    }
}

/// The result of a two-sided Mann-Whitney U test of A against B.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// Pairs (a, b) with b > a, ties counted one half.
    pub u_b: f64,
    /// `u_b / (n_A n_B)`: the probability that a value of B exceeds one of A (ties one
    /// half); above 1/2, B tends to be the larger.
    pub b_over_a: f64,
    /// The continuity-corrected standard score of `u_b`, signed as `u_b - mean`.
    pub z: f64,
    pub p_value: f64,
}

/// The two-sided Mann-Whitney U test (see the module documentation); `None` when a side is
/// empty or holds a NaN.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| x.is_nan()) {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let n = na + nb;
    // (value, from B) pooled and sorted; ranks are 1-based, averaged over ties.
    let mut pooled: Vec<(f64, bool)> = a.iter().map(|&x| (x, false)).chain(b.iter().map(|&x| (x, true))).collect();
    pooled.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
    let (mut rank_sum_b, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_b += rank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let u_b = rank_sum_b - nb * (nb + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let variance = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    let (z, p_value) = if variance > 0.0 {
        let size = ((u_b - mean).abs() - 0.5).max(0.0) / variance.sqrt();
        (size.copysign(u_b - mean), erfc(size / std::f64::consts::SQRT_2).min(1.0))
    } else {
        (0.0, 1.0)
    };
    Some(MannWhitney { u_b, b_over_a: u_b / (na * nb), z, p_value })
}

/// The complementary error function, fractional error below 1.2e-7 everywhere (the
/// Chebyshev fit of Numerical Recipes' `erfcc`): ample for p-values.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The Hodges-Lehmann shift of B against A: the median of all differences b - a. `None` when
/// a side is empty or there would be more than [`HODGES_LEHMANN_MAX_PAIRS`] differences.
pub fn hodges_lehmann(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len().checked_mul(b.len())? > HODGES_LEHMANN_MAX_PAIRS {
        return None;
    }
    let mut differences: Vec<f64> = b.iter().flat_map(|&y| a.iter().map(move |&x| y - x)).collect();
    median_in_place(&mut differences)
}

/// How a percentile bootstrap is run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    /// The confidence level, 0.95 by default.
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap { level: 0.95, resamples: 2000, seed: 0x7270_636d_6574_6572 }
    }
}

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfidenceInterval {
    pub low: f64,
    pub high: f64,
}

impl ConfidenceInterval {
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// B's median against A's, with bootstrap confidence intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianShift {
    pub a_median: f64,
    pub b_median: f64,
    /// `b_median - a_median`.
    pub difference: f64,
    pub difference_ci: ConfidenceInterval,
    /// `b_median / a_median`; `None` unless A's median is positive.
    pub ratio: Option<f64>,
    /// `None` when some resample of A has a median that is not positive.
    pub ratio_ci: Option<ConfidenceInterval>,
}

/// Difference and ratio of the medians with percentile bootstrap intervals (both from the
/// same resamples); `None` when a side is empty.
pub fn median_shift(a: &[f64], b: &[f64], how: &Bootstrap) -> Option<MedianShift> {
    let (a_median, b_median) = (median(a)?, median(b)?);
    let mut rng = StdRng::seed_from_u64(how.seed);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut differences = Vec::with_capacity(how.resamples);
    let mut ratios = Some(Vec::with_capacity(how.resamples));
    for _ in 0..how.resamples.max(1) {
        ra.iter_mut().for_each(|x| *x = a[rng.random_range(0..a.len())]);
        rb.iter_mut().for_each(|x| *x = b[rng.random_range(0..b.len())]);
        let (ma, mb) = (median_in_place(&mut ra)?, median_in_place(&mut rb)?);
        differences.push(mb - ma);
        ratios = ratios.filter(|_| ma > 0.0).map(|mut r| {
            r.push(mb / ma);
            r
        });
    }
    let interval = |mut stats: Vec<f64>| {
        stats.sort_unstable_by(f64::total_cmp);
        let tail = (1.0 - how.level) / 2.0;
        Some(ConfidenceInterval { low: quantile_sorted(&stats, tail)?, high: quantile_sorted(&stats, 1.0 - tail)? })
    };
    let ratio = (a_median > 0.0).then(|| b_median / a_median);
    Some(MedianShift {
        a_median,
        b_median,
        difference: b_median - a_median,
        difference_ci: interval(differences)?,
        ratio,
        ratio_ci: ratio.and(ratios).and_then(interval),
    })
}

/// Every number of a comparison of sample A with sample B.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub a: Robust,
    pub b: Robust,
    pub shift: MedianShift,
    pub hodges_lehmann: Option<f64>,
    pub test: MannWhitney,
}

/// What a comparison says, before anyone decides which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Fewer than the minimum values on a side: no test.
    TooFew,
    /// p >= alpha.
    NoSignificantDifference,
    /// p < alpha and B's values tend to be the higher (Mann-Whitney's `b_over_a > 1/2`).
    BHigher,
    BLower,
}

impl Comparison {
    /// `None` when a side is empty or holds a NaN.
    pub fn of(a: &[f64], b: &[f64], how: &Bootstrap) -> Option<Comparison> {
        Some(Comparison {
            test: mann_whitney(a, b)?,
            a: Robust::of(a)?,
            b: Robust::of(b)?,
            shift: median_shift(a, b, how)?,
            hodges_lehmann: hodges_lehmann(a, b),
        })
    }

    /// The outcome at significance level `alpha`, with at least `min_n` values per side.
    pub fn outcome(&self, alpha: f64, min_n: usize) -> Outcome {
        if self.a.n < min_n || self.b.n < min_n {
            Outcome::TooFew
        } else if self.test.p_value >= alpha {
            Outcome::NoSignificantDifference
        } else if self.test.b_over_a > 0.5 {
            Outcome::BHigher
        } else {
            Outcome::BLower
        }
    }
}

/// A standard deviation estimated from weighted values, with how many values it is worth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub sd: f64,
    /// Kish's effective sample size `W^2 / sum w^2`: the count for equal weights, less when a
    /// few values carry most of the weight; `effective_n - 1` are its degrees of freedom.
    pub effective_n: f64,
}

/// The standard deviation of `(value, weight)` pairs, weights of reliability (an interval's
/// length): `sum w (x - m)^2 / (W - sum w^2 / W)`, `m` the weighted mean and `W = sum w`,
/// which is the sample standard deviation when the weights are equal. `None` with fewer than
/// 2 values of positive weight.
pub fn weighted_sd(values: &[(f64, f64)]) -> Option<Spread> {
    let kept: Vec<(f64, f64)> = values.iter().copied().filter(|&(_, w)| w > 0.0).collect();
    if kept.len() < 2 {
        return None;
    }
    let total: f64 = kept.iter().map(|(_, w)| w).sum();
    let mean = kept.iter().map(|(x, w)| x * w).sum::<f64>() / total;
    let squares: f64 = kept.iter().map(|(x, w)| w * (x - mean).powi(2)).sum();
    let sum_of_squared_weights: f64 = kept.iter().map(|(_, w)| w * w).sum();
    let denominator = total - sum_of_squared_weights / total;
    (denominator > 0.0)
        .then(|| Spread { sd: (squares / denominator).sqrt(), effective_n: total * total / sum_of_squared_weights })
}

/// Holm's step-down procedure over `p_values` (Holm 1979): sorted ascending, the i-th
/// smallest (from 0) of m is tested at `alpha / (m - i)` until one is not below its level;
/// it and all after it are tested at that last level and none of them is rejected. The
/// chance of rejecting any true null is at most `alpha`. For each p-value, in the order
/// given: the level it was tested at and its adjusted p-value (`max over j <= i of (m - j)
/// p_(j)`, at most 1), below `alpha` exactly when it is rejected.
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<(f64, f64)> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p_values[x].total_cmp(&p_values[y]));
    let mut out = vec![(alpha, 1.0); m];
    let (mut rejecting, mut level, mut adjusted) = (true, alpha, 0.0f64);
    for (i, &at) in order.iter().enumerate() {
        let remaining = (m - i) as f64;
        if rejecting {
            level = alpha / remaining;
            rejecting = p_values[at] < level;
        }
        adjusted = adjusted.max((remaining * p_values[at]).min(1.0));
        out[at] = (level, adjusted);
    }
    out
}

/// One side of a between-run comparison: one value per run, and the least standard deviation a
/// run's value is taken to have (the stated noise floor, or the noise measured within the run).
#[derive(Debug, Clone, Copy)]
pub struct Runs<'a> {
    pub values: &'a [f64],
    pub floor_sd: f64,
    /// The degrees of freedom of `floor_sd` when it was estimated (from a few intervals);
    /// `None` when it is known (a stated floor): the test then treats it as exact.
    pub floor_df: Option<f64>,
}

/// B's mean against A's over runs, with the confidence interval and the p-value of one test
/// (see [`mean_shift`]), so that they can never disagree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanShift {
    pub a_mean: f64,
    pub b_mean: f64,
    /// `b_mean - a_mean`.
    pub difference: f64,
    pub standard_error: f64,
    /// Welch-Satterthwaite degrees of freedom; `None` when no side's spread was measured
    /// above its floor (the noise is taken as known: the normal distribution).
    pub degrees_of_freedom: Option<f64>,
    /// At level `1 - alpha`: it holds 0 exactly when `p_value >= alpha`.
    pub ci: ConfidenceInterval,
    pub p_value: f64,
}

impl MeanShift {
    pub fn significant(&self) -> bool {
        !self.ci.contains(0.0)
    }
}

/// Welch's t test of the means of two sets of run values, two-sided, with a floor on each
/// side's noise: a side's standard deviation is the larger of the one measured between its
/// runs (from 2 runs on) and `floor_sd`; a side whose floor wins (always, with one run) counts
/// as known noise and adds no term to the Welch-Satterthwaite degrees of freedom, unless the
/// floor was itself estimated (`floor_df`): then its degrees of freedom are the term's. The interval
/// `difference ± q SE` and the p-value use the same distribution and quantile, so the interval
/// holds 0 exactly when p >= alpha. `None` when a side is empty or a value is not finite.
pub fn mean_shift(a: Runs, b: Runs, alpha: f64) -> Option<MeanShift> {
    use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
    struct Side {
        mean: f64,
        variance_of_mean: f64,
        /// Its degrees of freedom when the spread was estimated (`n - 1` between runs, or the
        /// floor's own); `None` for known noise.
        measured: Option<f64>,
    }
    let side = |r: Runs| -> Option<Side> {
        if r.values.is_empty() || r.values.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = r.values.len() as f64;
        let mean = r.values.iter().sum::<f64>() / n;
        let measured = (r.values.len() >= 2)
            .then(|| (r.values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
        let floor = r.floor_sd.max(0.0);
        Some(match measured {
            Some(sd) if sd > floor => Side { mean, variance_of_mean: sd * sd / n, measured: Some(n - 1.0) },
            _ => Side { mean, variance_of_mean: floor * floor / n, measured: r.floor_df.filter(|df| *df > 0.0) },
        })
    };
    let (sa, sb) = (side(a)?, side(b)?);
    let difference = sb.mean - sa.mean;
    let variance = sa.variance_of_mean + sb.variance_of_mean;
    let standard_error = variance.sqrt();
    let terms: f64 = [&sa, &sb].iter().filter_map(|s| s.measured.map(|df| s.variance_of_mean.powi(2) / df)).sum();
    let degrees_of_freedom = (terms > 0.0).then(|| variance * variance / terms);
    let tail = (alpha / 2.0).clamp(1e-12, 0.5);
    let (q, p_value) = if standard_error > 0.0 {
        let z = difference.abs() / standard_error;
        match degrees_of_freedom {
            Some(df) => {
                let t = StudentsT::new(0.0, 1.0, df).ok()?;
                (t.inverse_cdf(1.0 - tail), 2.0 * t.sf(z))
            }
            None => {
                let normal = Normal::new(0.0, 1.0).ok()?;
                (normal.inverse_cdf(1.0 - tail), 2.0 * normal.sf(z))
            }
        }
    } else {
        // No noise on either side: equal means are no difference, any other is certain.
        (0.0, if difference == 0.0 { 1.0 } else { 0.0 })
    };
    let half = q * standard_error;
    Some(MeanShift {
        a_mean: sa.mean,
        b_mean: sb.mean,
        difference,
        standard_error,
        degrees_of_freedom,
        ci: ConfidenceInterval { low: difference - half, high: difference + half },
        p_value: p_value.min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n normal values with mean `mean` and standard deviation `sd` (Box-Muller).
    fn normal(rng: &mut StdRng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
                mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect()
    }

    /// Per-interval values of a service whose level is `level` with 10 % noise (coefficient
    /// of variation 0.1): what per-interval p50s or throughputs look like.
    fn intervals(rng: &mut StdRng, n: usize, level: f64) -> Vec<f64> {
        normal(rng, n, level, 0.1 * level)
    }

    #[test]
    fn weighted_sd_is_the_sample_sd_for_equal_weights() {
        // 1 2 3 4: mean 2.5, sum of squares 5, sample variance 5/3.
        let equal: Vec<(f64, f64)> = [1.0, 2.0, 3.0, 4.0].iter().map(|&x| (x, 0.5)).collect();
        let spread = weighted_sd(&equal).unwrap();
        assert!((spread.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12 && (spread.effective_n - 4.0).abs() < 1e-12);
        // Weights 1 1 1 0.25 on 0 0 0 4: W = 3.25, m = 1/3.25, sum w (x - m)^2 = 3 m^2 + 0.25 (4 - m)^2,
        // denominator 3.25 - 3.0625/3.25.
        let m: f64 = 1.0 / 3.25;
        let want = ((3.0 * m * m + 0.25 * (4.0 - m) * (4.0 - m)) / (3.25 - 3.0625 / 3.25)).sqrt();
        let got = weighted_sd(&[(0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (4.0, 0.25)]).unwrap();
        assert!((got.sd - want).abs() < 1e-12, "{got:?} {want}");
        assert!((got.effective_n - 3.25 * 3.25 / 3.0625).abs() < 1e-12, "{got:?}");
        assert_eq!(weighted_sd(&[(1.0, 1.0), (5.0, 0.0)]), None);
    }

    #[test]
    fn holm_steps_down_until_one_is_not_rejected() {
        // 4 p-values: sorted 0.001 (x4 = 0.004 < 0.05: rejected at 0.0125), 0.013 (x3 = 0.039:
        // rejected at 0.01667), 0.03 (x2 = 0.06: not rejected at 0.025), 0.04 (tested at 0.025).
        let got = holm(&[0.04, 0.001, 0.03, 0.013], 0.05);
        let want = [(0.025, 0.06), (0.0125, 0.004), (0.025, 0.06), (0.05 / 3.0, 0.039)];
        for (g, w) in got.iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-12 && (g.1 - w.1).abs() < 1e-12, "{got:?}");
        }
        for &(level, adjusted) in &got {
            assert!(adjusted <= 1.0 && level <= 0.05);
        }
        // Rejected exactly when the adjusted p-value is below alpha.
        let p = [0.04, 0.001, 0.03, 0.013];
        for (x, (level, adjusted)) in p.iter().zip(&got) {
            assert_eq!(x < level, *adjusted < 0.05, "{got:?}");
        }
        assert_eq!(holm(&[0.2], 0.05), vec![(0.05, 0.2)]);
        assert!(holm(&[], 0.05).is_empty());
    }

    #[test]
    fn medians_mad_and_quantiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // |x - 2| = 1 1 0 2 7 -> median 1.
        assert_eq!(mad(&[1.0, 3.0, 2.0, 4.0, 9.0]), Some(1.0));
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&s, 0.25), Some(1.75));
        assert_eq!(quantile_sorted(&s, 1.0), Some(4.0));
        assert_eq!(quantile_sorted(&s, 0.0), Some(1.0));
    }

    #[test]
    fn mann_whitney_matches_a_hand_computed_example() {
        // Hollander & Wolfe (1973), p. 69 (the example of R's ?wilcox.test): permeability at
        // term (A) and at 12-26 weeks (B). No ties. B's ranks in the pooled 15 values:
        // 0.74 -> 2, 0.88 -> 5, 0.90 -> 6, 1.15 -> 8, 1.21 -> 9; sum 30.
        // U_B = 30 - 5*6/2 = 15 (so U_A = 50 - 15 = 35, R's W = 35); mean 25;
        // variance 10*5*16/12 = 66.667, sd 8.1650; z = (10 - 0.5) / 8.1650 = 1.16351;
        // p = 2 (1 - Phi(1.16351)) = 0.24463 (R: wilcox.test(x, y, exact = FALSE)).
        let a = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let b = [1.15, 0.88, 0.90, 0.74, 1.21];
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!(t.u_b, 15.0);
        assert!((t.z + 1.16351).abs() < 1e-4, "{t:?}");
        assert!((t.p_value - 0.24463).abs() < 1e-4, "{t:?}");
        assert_eq!(t.b_over_a, 0.3);

        // With ties: A = 1 2 2 3 3 3, B = 3 4 4 5 5 6. Pooled ranks: 1 -> 1, 2 -> 2.5 (x2),
        // 3 -> 5.5 (x4), 4 -> 8.5 (x2), 5 -> 10.5 (x2), 6 -> 12. B's rank sum
        // 5.5 + 8.5*2 + 10.5*2 + 12 = 55.5, U_B = 55.5 - 21 = 34.5, mean 18.
        // Ties: sum(t^3 - t) = 6 + 60 + 6 + 6 = 78; variance = 36/12 x (13 - 78/132) = 37.2273,
        // sd 6.10142; z = (16.5 - 0.5) / 6.10142 = 2.62234; p = 0.0087328.
        let a = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0];
        let b = [3.0, 4.0, 4.0, 5.0, 5.0, 6.0];
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!(t.u_b, 34.5);
        assert!((t.z - 2.62234).abs() < 1e-4, "{t:?}");
        assert!((t.p_value - 0.0087328).abs() < 1e-6, "{t:?}");

        // Nothing to tell apart, and nothing to test.
        assert_eq!(mann_whitney(&[1.0; 6], &[1.0; 6]).unwrap().p_value, 1.0);
        assert_eq!(mann_whitney(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap().p_value, 1.0);
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[f64::NAN], &[1.0]).is_none());
    }

    #[test]
    fn erfc_is_accurate() {
        for (x, want) in
            [(0.0, 1.0), (0.5, 0.4795001222), (1.0, 0.1572992071), (2.0, 0.004677734981), (-1.0, 1.8427007929)]
        {
            assert!((erfc(x) - want).abs() < 2e-7 * want.max(1e-3), "erfc({x}) = {}", erfc(x));
        }
    }

    #[test]
    fn a_ten_percent_shift_at_n_30_is_detected_in_at_least_90_of_100_seeds() {
        // Coefficient of variation 0.1 and a 10 % shift: an effect of one standard deviation,
        // where the U test's power at n = 30 per side and alpha 0.05 is about 0.96.
        let detected = (0..100u64)
            .filter(|&seed| {
                let mut rng = StdRng::seed_from_u64(seed);
                let (a, b) = (intervals(&mut rng, 30, 100.0), intervals(&mut rng, 30, 110.0));
                let c = Comparison::of(&a, &b, &Bootstrap { resamples: 200, ..Bootstrap::default() }).unwrap();
                c.outcome(0.05, 5) == Outcome::BHigher
            })
            .count();
        assert!(detected >= 90, "detected in {detected} of 100");
    }

    #[test]
    fn a_a_pairs_are_flagged_in_at_most_8_of_100_seeds() {
        // Expected 5 at alpha 0.05 (a little fewer with the continuity correction); 8 is the
        // bound: P(Binomial(100, 0.05) > 8) is about 0.06, and the seeds are fixed.
        let flagged = (0..100u64)
            .filter(|&seed| {
                let mut rng = StdRng::seed_from_u64(1000 + seed);
                let (a, b) = (intervals(&mut rng, 30, 100.0), intervals(&mut rng, 30, 100.0));
                mann_whitney(&a, &b).unwrap().p_value < 0.05
            })
            .count();
        assert!(flagged <= 8, "A/A flagged in {flagged} of 100");
    }

    #[test]
    fn the_bootstrap_interval_covers_the_true_shift() {
        // True difference of medians 10, true ratio 1.1; a 95 % interval should cover them in
        // about 95 of 100 trials (the percentile bootstrap of a median at n = 30 runs a little
        // short, so the bound is 88).
        let how = Bootstrap { resamples: 1000, ..Bootstrap::default() };
        let (mut difference_covered, mut ratio_covered) = (0, 0);
        for seed in 0..100u64 {
            let mut rng = StdRng::seed_from_u64(2000 + seed);
            let (a, b) = (normal(&mut rng, 30, 100.0, 10.0), normal(&mut rng, 30, 110.0, 11.0));
            let s = median_shift(&a, &b, &Bootstrap { seed, ..how }).unwrap();
            assert!(s.difference_ci.contains(s.difference) && s.difference_ci.low < s.difference_ci.high, "{s:?}");
            difference_covered += s.difference_ci.contains(10.0) as usize;
            ratio_covered += s.ratio_ci.unwrap().contains(1.1) as usize;
        }
        assert!(difference_covered >= 88, "difference covered in {difference_covered} of 100");
        assert!(ratio_covered >= 88, "ratio covered in {ratio_covered} of 100");
    }

    #[test]
    fn the_bootstrap_is_reproducible_and_the_ratio_needs_a_positive_median() {
        let mut rng = StdRng::seed_from_u64(7);
        let (a, b) = (intervals(&mut rng, 20, 100.0), intervals(&mut rng, 20, 90.0));
        let how = Bootstrap::default();
        assert_eq!(median_shift(&a, &b, &how), median_shift(&a, &b, &how));
        assert_ne!(median_shift(&a, &b, &how), median_shift(&a, &b, &Bootstrap { seed: 1, ..how }));
        // Error rates of zero: a difference, no ratio.
        let zeros = [0.0; 10];
        let s = median_shift(&zeros, &[0.0, 0.01, 0.02, 0.0, 0.01, 0.0, 0.03, 0.0, 0.0, 0.01], &how).unwrap();
        assert_eq!((s.ratio, s.ratio_ci), (None, None));
        assert!(s.difference_ci.high > 0.0);
        // Mostly positive A: a ratio, but a resample may have median 0, so no interval.
        let a = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let s = median_shift(&a, &a, &how).unwrap();
        assert_eq!((s.ratio, s.ratio_ci), (Some(1.0), None));
    }

    #[test]
    fn hodges_lehmann_is_the_median_pairwise_difference() {
        // Differences b - a: 10-1 10-2 10-3 20-1 20-2 20-3 = 9 8 7 19 18 17 -> median 13.
        assert_eq!(hodges_lehmann(&[1.0, 2.0, 3.0], &[10.0, 20.0]), Some(13.0));
        assert_eq!(hodges_lehmann(&[], &[1.0]), None);
    }

    #[test]
    fn tukey_fences_flag_without_dropping() {
        // Quartiles (type 7) of 1..=9 and 30: q1 = 3.25, q3 = 7.75, IQR 4.5, fences -3.5 and 14.5.
        let xs = [1.0, 2.0, 3.0, 4.0, 30.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let f = TukeyFences::of(&xs).unwrap();
        assert_eq!((f.q1, f.q3, f.lower, f.upper), (3.25, 7.75, -3.5, 14.5));
        assert_eq!(f.outliers(&xs), vec![4]);
        let r = Robust::of(&xs).unwrap();
        assert_eq!((r.n, r.median, r.tukey_outliers.clone()), (10, 5.5, vec![4]));
        assert_eq!(without(&xs, &r.tukey_outliers).len(), 9);
    }

    #[test]
    fn z_score_passes_repeat_until_none_is_flagged() {
        // 20 values near 10, one at 20 and one at 100. Pass 1: mean 14.55, sd 19.22; only 100
        // has |z| > 3 (4.45), and 20 hides behind it (z 0.28). Pass 2 without 100: mean 10.48,
        // sd 2.29, 20 has z 4.15. Pass 3: nothing beyond 3 sd of the 20 values near 10.
        let mut xs: Vec<f64> = (0..20).map(|i| 9.0 + (i % 5) as f64 * 0.5).collect();
        xs.push(20.0);
        xs.push(100.0);
        let z = z_score_outliers(&xs, 3.0);
        assert_eq!(z.passes, vec![vec![21], vec![20]]);
        assert_eq!(z.flagged(), vec![20, 21]);
        assert_eq!(xs.len(), 22, "flags, never drops");
        // Too few values, or all equal: nothing to flag.
        assert!(z_score_outliers(&[1.0, 100.0], 3.0).passes.is_empty());
        assert!(z_score_outliers(&[5.0; 30], 3.0).passes.is_empty());
        // No |z| can pass 3 below 11 values.
        assert!(z_score_outliers(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1e9], 3.0).passes.is_empty());
    }

    #[test]
    fn outcomes_follow_p_and_direction() {
        let mut rng = StdRng::seed_from_u64(3);
        let (a, b) = (intervals(&mut rng, 30, 100.0), intervals(&mut rng, 30, 70.0));
        let how = Bootstrap { resamples: 200, ..Bootstrap::default() };
        assert_eq!(Comparison::of(&a, &b, &how).unwrap().outcome(0.05, 5), Outcome::BLower);
        assert_eq!(Comparison::of(&b, &a, &how).unwrap().outcome(0.05, 5), Outcome::BHigher);
        assert_eq!(Comparison::of(&a, &a, &how).unwrap().outcome(0.05, 5), Outcome::NoSignificantDifference);
        assert_eq!(Comparison::of(&a[..4], &b, &how).unwrap().outcome(0.05, 5), Outcome::TooFew);
    }

    #[test]
    fn mean_shift_interval_and_p_value_agree() {
        let mut rng = StdRng::seed_from_u64(11);
        for trial in 0..300 {
            let (na, nb) = (1 + trial % 4, 1 + (trial / 4) % 4);
            let a = normal(&mut rng, na, 0.0, 0.02);
            let b = normal(&mut rng, nb, 0.01 * (trial % 7) as f64, 0.02);
            let floor = [0.0, 0.005, 0.02][trial % 3];
            let Some(s) = mean_shift(
                Runs { values: &a, floor_sd: floor, floor_df: None },
                Runs { values: &b, floor_sd: floor, floor_df: None },
                0.05,
            ) else {
                continue;
            };
            assert_eq!(s.significant(), s.p_value < 0.05, "{s:?}");
            assert!(s.ci.contains(s.difference));
        }
    }

    #[test]
    fn mean_shift_matches_welch_and_the_floor() {
        // Welch by hand: A = 1 2 3 (mean 2, var 1), B = 4 5 6 7 (mean 5.5, var 1.6667).
        // SE^2 = 1/3 + 1.6667/4 = 0.75; df = 0.75^2 / ((1/3)^2/2 + (0.41667)^2/3) = 4.9592;
        // t = 3.5 / 0.86603 = 4.0415; p = 2 P(T > 4.0415) = 0.01008 with 4.9592 df.
        let s = mean_shift(
            Runs { values: &[1.0, 2.0, 3.0], floor_sd: 0.0, floor_df: None },
            Runs { values: &[4.0, 5.0, 6.0, 7.0], floor_sd: 0.0, floor_df: None },
            0.05,
        )
        .unwrap();
        assert!((s.degrees_of_freedom.unwrap() - 4.9592).abs() < 1e-3, "{s:?}");
        assert!((s.p_value - 0.01008).abs() < 1e-4, "{s:?}");
        // 3.5 -+ t(0.975; 4.9592) x 0.86603 = 3.5 -+ 2.5771 x 0.86603.
        assert!((s.ci.low - 1.2683).abs() < 1e-3 && (s.ci.high - 5.7317).abs() < 1e-3, "{s:?}");

        // One run a side: the floor is the noise, known: SE = 0.02 sqrt 2, the normal quantile.
        let one = |x: f64| [x];
        let (a, b) = (one(0.0), one(0.05));
        let s = mean_shift(
            Runs { values: &a, floor_sd: 0.02, floor_df: None },
            Runs { values: &b, floor_sd: 0.02, floor_df: None },
            0.05,
        )
        .unwrap();
        assert_eq!(s.degrees_of_freedom, None);
        assert!((s.ci.high - s.ci.low - 2.0 * 1.959964 * 0.028284).abs() < 1e-5, "{s:?}");
        assert!(!s.significant() && s.p_value > 0.05, "5% under a 5.5% floor: {s:?}");
        let b = one(0.06);
        assert!(mean_shift(
            Runs { values: &a, floor_sd: 0.02, floor_df: None },
            Runs { values: &b, floor_sd: 0.02, floor_df: None },
            0.05
        )
        .unwrap()
        .significant());
        // Two identical runs a side still have the floor's noise, not none.
        let s = mean_shift(
            Runs { values: &[1.0, 1.0], floor_sd: 0.02, floor_df: None },
            Runs { values: &[1.01, 1.01], floor_sd: 0.02, floor_df: None },
            0.05,
        )
        .unwrap();
        assert!(!s.significant(), "{s:?}");
        // A floor estimated from few values (2 degrees of freedom) is less certain than a stated
        // one: Student's t, a wider interval, a larger p.
        let known = mean_shift(
            Runs { values: &a, floor_sd: 0.02, floor_df: None },
            Runs { values: &[0.06], floor_sd: 0.02, floor_df: None },
            0.05,
        )
        .unwrap();
        let estimated = mean_shift(
            Runs { values: &a, floor_sd: 0.02, floor_df: Some(2.0) },
            Runs { values: &[0.06], floor_sd: 0.02, floor_df: None },
            0.05,
        )
        .unwrap();
        assert!(known.significant() && !estimated.significant(), "{known:?} {estimated:?}");
        assert!(estimated.degrees_of_freedom.is_some() && estimated.p_value > known.p_value);
        // No noise at all: equal is no difference, unequal is certain.
        let zero = Runs { values: &[0.0], floor_sd: 0.0, floor_df: None };
        assert_eq!(mean_shift(zero, zero, 0.05).unwrap().p_value, 1.0);
        assert!(mean_shift(zero, Runs { values: &[1.0], floor_sd: 0.0, floor_df: None }, 0.05).unwrap().significant());
        assert!(mean_shift(Runs { values: &[], floor_sd: 0.0, floor_df: None }, zero, 0.05).is_none());
        assert!(mean_shift(Runs { values: &[f64::NEG_INFINITY], floor_sd: 0.0, floor_df: None }, zero, 0.05).is_none());
    }
}
