//! A merge's interval series: interval i of every input added into interval i of the whole,
//! exactly (counts added, histograms added and read again), when the inputs' intervals cover
//! the same time: the same length, and starts that agree within `tolerance` (coordinated
//! shards start together). Each input's intervals carry their histograms for this (a
//! shard's result: record::intervals::Packed). Otherwise the series is left out, and why is
//! said (docs/results.md, "Merged intervals").
use super::Input;
use crate::record::shard::{from_text, to_text};
use crate::result::backend_intervals::{BackendIntervals, BackendSeries};
use crate::result::IntervalRow;
use crate::stats::Statistic;
use crate::units;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// How far apart the inputs' starts may be for their interval i to be one: 1 % of the
/// interval (10 ms of a 1 s interval, so each merged interval's edges are blurred by at most
/// 1 % of it), and never under 1 ms, the precision `meta.started_at` is written to (a
/// coordinator's shards start within microseconds of each other, which the text may round
/// 1 ms apart).
pub fn tolerance(interval: Duration) -> Duration {
    (interval / 100).max(Duration::from_millis(1))
}

/// Whether a result was written with its intervals' histograms (a shard's, or a merge of
/// shards'): a plain run's intervals have none (its start lines up with no other run's).
pub fn has_histograms(result: &crate::result::Run) -> bool {
    result.intervals.iter().flatten().any(|row| row.histogram.is_some())
}

/// The merged series, or why it was left out.
pub fn intervals(inputs: &[Input]) -> Result<Option<Vec<IntervalRow>>, String> {
    if inputs.iter().all(|i| i.result.intervals.as_ref().is_none_or(Vec::is_empty)) {
        return Ok(None);
    }
    aligned(inputs)?;
    let series: Vec<&[IntervalRow]> =
        inputs.iter().map(|i| i.result.intervals.as_deref().unwrap_or_default()).collect();
    let n = series.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..n).map(|k| row(inputs, &series, k)).collect::<Result<Vec<_>, _>>().map(Some)
}

/// The inputs' series may be added interval by interval: each has one, with its
/// histograms, of the same interval length, and their starts agree within `tolerance`.
fn aligned(inputs: &[Input]) -> Result<(), String> {
    let first = &inputs[0];
    let length = first.result.interval_s.unwrap_or(0.0);
    let interval = Duration::try_from_secs_f64(length).unwrap_or_default();
    let start = |i: &Input| i.result.started_at().ok_or_else(|| format!("{} says no start time", i.label));
    let first_start = start(first)?;
    for input in inputs {
        let r = &input.result;
        let rows = r.intervals.as_deref().unwrap_or_default();
        if rows.is_empty() {
            return Err(format!("{} has no interval series", input.label));
        }
        if rows.iter().any(|row| row.histogram.is_none()) {
            return Err(format!(
                "{}'s intervals carry no histograms (only a shard's result, rpcmeter 2.6 and later, has them)",
                input.label
            ));
        }
        let own = r.interval_s.unwrap_or(0.0);
        if (own - length).abs() > 1e-6 {
            return Err(format!("{} has {own} s intervals where {} has {length} s", input.label, first.label));
        }
        let apart = distance(start(input)?, first_start);
        if apart > tolerance(interval) {
            return Err(format!(
                "{} started {} from {} (more than the {} that intervals of {} s may be apart to be added as one)",
                input.label,
                units::duration(apart),
                first.label,
                units::duration(tolerance(interval)),
                length
            ));
        }
    }
    Ok(())
}

fn distance(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b).or_else(|_| b.duration_since(a)).unwrap_or_default()
}

/// Interval `k` of the whole: every input's interval k added. An input that ended before
/// it adds no calls; its client's CPU so far still counts.
fn row(inputs: &[Input], series: &[&[IntervalRow]], k: usize) -> Result<IntervalRow, String> {
    let mut out = IntervalRow { phase: "measured".into(), ok: Some(0), ..IntervalRow::default() };
    let (mut calls, mut service): (Option<Histogram<u64>>, Option<Histogram<u64>>) = (None, None);
    let mut service_differs = false;
    for (input, rows) in inputs.iter().zip(series) {
        let Some(r) = rows.get(k) else {
            let last = rows.last().expect("aligned: every input has a series");
            out.client_cpu_total_s += last.client_cpu_total_s;
            continue;
        };
        let at = |key: &str| format!("{}: intervals[{k}].{key}", input.label);
        let h = from_text(r.histogram.as_deref().unwrap_or_default())
            .map_err(|why| format!("{} {why}", at("histogram")))?;
        let s = match &r.service_histogram {
            Some(text) => {
                service_differs = true;
                from_text(text).map_err(|why| format!("{} {why}", at("service_histogram")))?
            }
            None => h.clone(),
        };
        add(&mut calls, h).map_err(|e| format!("{} {e}", at("histogram")))?;
        add(&mut service, s).map_err(|e| format!("{} {e}", at("service_histogram")))?;
        out.t_s = out.t_s.max(r.t_s);
        out.length_s = out.length_s.max(r.length_s);
        if r.phase != "measured" {
            out.phase = r.phase.clone();
        }
        out.calls = out.calls.saturating_add(r.calls);
        out.ok = out.ok.map(|ok| ok.saturating_add(r.ok.unwrap_or(r.calls.saturating_sub(r.failed))));
        out.failed = out.failed.saturating_add(r.failed);
        out.client_cpu_total_s += r.client_cpu_total_s;
        out.client_rss_bytes = out.client_rss_bytes.saturating_add(r.client_rss_bytes);
        out.messages_sent = out.messages_sent.saturating_add(r.messages_sent);
        out.messages_received = out.messages_received.saturating_add(r.messages_received);
    }
    // Sums of seconds kept to the µs they were written to (no 0.7954460000000001).
    out.client_cpu_total_s = (out.client_cpu_total_s * 1e6).round() / 1e6;
    let calls = calls.expect("interval k is some input's");
    let service = service.expect("beside the calls'");
    out.rps = crate::stats::rate(out.calls, Duration::try_from_secs_f64(out.length_s).unwrap_or_default());
    latency_columns(&mut out, &calls, &service);
    // The merged series carries its histograms too, so that it merges again.
    out.histogram = Some(to_text(&calls));
    out.service_histogram = service_differs.then(|| to_text(&service));
    Ok(out)
}

/// An interval row's latency columns, read from its call and service-time histograms (a
/// merged interval's, or a lost shard's rebuilt from the tallies it sent).
pub(crate) fn latency_columns(row: &mut IntervalRow, calls: &Histogram<u64>, service: &Histogram<u64>) {
    let us = |h: &Histogram<u64>, s: Statistic| units::micros(s.of(h));
    (row.p50_us, row.p90_us, row.p99_us) = (
        us(calls, Statistic::Percentile(50.0)),
        us(calls, Statistic::Percentile(90.0)),
        us(calls, Statistic::Percentile(99.0)),
    );
    row.max_us = us(calls, Statistic::Max);
    row.service_p99_us = us(service, Statistic::Percentile(99.0));
}

/// `h` added to `sum` (the first becomes the sum: its precision is the inputs').
fn add(sum: &mut Option<Histogram<u64>>, h: Histogram<u64>) -> Result<(), String> {
    match sum {
        Some(sum) => sum.add(&h).map_err(|e| format!("does not add: {e}")),
        None => {
            *sum = Some(h);
            Ok(())
        }
    }
}

/// The per-backend series merged line by line (a line is a backend's address; the folded
/// line stays one line), interval by interval as `intervals`; `n` is the merged series'
/// length. None when no input has one.
pub fn backend_intervals(inputs: &[Input], n: usize) -> Result<Option<BackendIntervals>, String> {
    let each: Vec<Option<&BackendIntervals>> = inputs.iter().map(|i| i.result.backend_intervals.as_ref()).collect();
    if each.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut names: Vec<(&str, bool)> = Vec::new();
    for (input, b) in inputs.iter().zip(&each) {
        let b = b.ok_or_else(|| format!("{} has no per-backend series", input.label))?;
        for line in &b.lines {
            if line.histograms.as_ref().is_none_or(|h| h.len() != line.calls.len()) {
                return Err(format!("{}'s backend lines carry no histograms", input.label));
            }
            if !names.iter().any(|(name, _)| *name == line.backend) {
                names.push((&line.backend, line.backends.is_some()));
            }
        }
    }
    // The folded lines last, as a run writes its own.
    names.sort_by_key(|(_, folded)| *folded);
    let mut lines = Vec::with_capacity(names.len());
    for (name, _) in names {
        let of_each: Vec<(&str, &BackendSeries)> = inputs
            .iter()
            .zip(&each)
            .filter_map(|(i, b)| Some((i.label.as_str(), b.as_ref()?.lines.iter().find(|l| l.backend == name)?)))
            .collect();
        lines.push(line(name, &of_each, n)?);
    }
    let mut no_backend = vec![0u64; n];
    for b in each.iter().flatten() {
        for (sum, v) in no_backend.iter_mut().zip(&b.no_backend) {
            *sum = sum.saturating_add(*v);
        }
    }
    Ok(Some(BackendIntervals { lines, no_backend }))
}

/// One line of the whole: the inputs' lines of that name added interval by interval.
fn line(name: &str, of_each: &[(&str, &BackendSeries)], n: usize) -> Result<BackendSeries, String> {
    let folded = of_each.iter().find_map(|(_, l)| l.backends);
    let mut out = BackendSeries {
        backends: folded,
        answering: folded.map(|_| Vec::with_capacity(n)),
        histograms: Some(Vec::with_capacity(n)),
        ..BackendSeries::named(name.to_string(), n)
    };
    for k in 0..n {
        let (mut calls, mut ok, mut answering) = (0u64, 0u64, 0u64);
        let mut failed: BTreeMap<&str, u64> = BTreeMap::new();
        let mut latency: Option<Histogram<u64>> = None;
        for (label, l) in of_each {
            calls = calls.saturating_add(l.calls.get(k).copied().unwrap_or(0));
            ok = ok.saturating_add(l.ok.get(k).copied().unwrap_or(0));
            for (status, column) in &l.failed {
                let sum = failed.entry(status.as_str()).or_default();
                *sum = sum.saturating_add(column.get(k).copied().unwrap_or(0));
            }
            // Which of the folded backends answered is not kept: the most any input saw.
            answering = answering.max(l.answering.as_ref().and_then(|a| a.get(k)).copied().unwrap_or(0));
            let text = l.histograms.as_ref().and_then(|h| h.get(k)).and_then(Option::as_deref);
            if let Some(text) = text {
                let at = format!("{label}: backend_intervals {name} [{k}] histogram");
                let h = from_text(text).map_err(|why| format!("{at} {why}"))?;
                add(&mut latency, h).map_err(|e| format!("{at} {e}"))?;
            }
        }
        let failed: Vec<(&str, u64)> = failed.into_iter().filter(|(_, n)| *n > 0).collect();
        let latency = latency.filter(|_| calls > 0);
        let p = |h: &Histogram<u64>, p: f64| units::micros(Statistic::Percentile(p).of(h));
        out.push(calls, ok, &failed, latency.as_ref().map(|h| (p(h, 50.0), p(h, 99.0))));
        if let Some(a) = &mut out.answering {
            a.push(answering);
        }
        out.histograms.get_or_insert_with(Vec::new).push(latency.as_ref().map(to_text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::shard::new_backend_histogram;

    /// `n` calls of 1 ms, in a backend's histogram.
    fn at_1ms(n: u64) -> Histogram<u64> {
        let mut h = new_backend_histogram();
        h.record_n(1_000_000, n).unwrap();
        h
    }

    /// A line of `calls` calls at 1 ms each per interval, with its histograms.
    fn line(backend: &str, calls: &[u64], folded: Option<(u64, &[u64])>) -> BackendSeries {
        let mut out = BackendSeries::named(backend.into(), calls.len());
        for &n in calls {
            out.push(n, n, &[], (n > 0).then_some((1000.0, 1000.0)));
            out.histograms.get_or_insert_with(Vec::new).push((n > 0).then(|| to_text(&at_1ms(n))));
        }
        if let Some((backends, answering)) = folded {
            (out.backends, out.answering) = (Some(backends), Some(answering.to_vec()));
        }
        out
    }

    fn input(label: &str, lines: Vec<BackendSeries>) -> Input {
        let n = lines[0].calls.len();
        let result = crate::result::Run {
            backend_intervals: Some(BackendIntervals { lines, no_backend: vec![1; n] }),
            ..Default::default()
        };
        Input { label: label.into(), result }
    }

    /// Lines add by address (one that only an input has keeps its values), the folded line
    /// stays one line, last, and says the most backends any input saw answering.
    #[test]
    fn backend_lines_add_by_address_and_the_folded_line_stays_folded() {
        let a = input("a", vec![line("x:1", &[2, 3], None), line("(3 other backends)", &[1, 0], Some((3, &[1, 0])))]);
        let b = input("b", vec![line("(3 other backends)", &[4, 1], Some((3, &[2, 1]))), line("y:1", &[5, 0], None)]);
        let merged = backend_intervals(&[a, b], 3).unwrap().unwrap();
        let names: Vec<&str> = merged.lines.iter().map(|l| l.backend.as_str()).collect();
        assert_eq!(names, ["x:1", "y:1", "(3 other backends)"]);
        let folded = &merged.lines[2];
        assert_eq!(
            (folded.calls.clone(), folded.backends, folded.answering.clone()),
            (vec![5, 1, 0], Some(3), Some(vec![2, 1, 0]))
        );
        assert_eq!(merged.lines[1].calls, [5, 0, 0]);
        let p99 = units::micros(Statistic::Percentile(99.0).of(&at_1ms(5)));
        assert_eq!(merged.lines[1].p99_us, [Some(p99), None, None]);
        assert_eq!(merged.no_backend, [2, 2, 0]);
    }

    #[test]
    fn the_tolerance_is_a_hundredth_of_the_interval_and_at_least_a_millisecond() {
        assert_eq!(tolerance(Duration::from_secs(1)), Duration::from_millis(10));
        assert_eq!(tolerance(Duration::from_millis(50)), Duration::from_millis(1));
    }
}
