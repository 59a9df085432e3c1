//! The sweep's steps, run one after the other through `app::run::measure_step`, and the knee.
use super::run::{measure_step, Settings};
use crate::error::run_failed;
use crate::load::plan::Control;
use crate::report::Format;
use crate::result::Run;
use crate::stats::Statistic;
use crate::units;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// One load of a sweep.
#[derive(Debug, Clone)]
pub struct Step {
    pub label: String,
    /// The size of the load (clients, calls/s), for the knee.
    pub load: f64,
}

/// More load that buys less than this much more throughput is past the knee (10%: the
/// step-to-step noise of a shared machine is a few %).
const KNEE_GAIN: f64 = 0.10;

/// The knee: the first step that no later step beats by `KNEE_GAIN` or more (more load after
/// it buys less than 10%). `None` for the last step alone: a sweep whose throughput still
/// grew at its end has no knee within it.
pub fn knee(throughputs: &[f64]) -> Option<usize> {
    (0..throughputs.len().saturating_sub(1)).find(|&k| {
        let later = throughputs[k + 1..].iter().copied().fold(0.0, f64::max);
        later < throughputs[k] * (1.0 + KNEE_GAIN)
    })
}

/// Where the sweep's result goes: the table or JSON, to standard output or a file (`run`'s
/// `-o` and `--format json`, given after `run`).
pub struct SweepOutput {
    /// Table, JSON or the HTML page (`pages::sweep`).
    pub format: Format,
    pub file: Option<PathBuf>,
}

/// A step that ran: its result, and whether it was cut short (Ctrl-C, SIGTERM).
pub(crate) struct Done {
    pub step: Step,
    pub result: Run,
}

impl Done {
    pub fn partial(&self) -> bool {
        self.result.partial()
    }
}

pub fn run(steps: Vec<(Step, Settings)>, control: Arc<Control>, output: SweepOutput) -> anyhow::Result<ExitCode> {
    // The file is made before the first step (a bad path costs no measuring) and put in place
    // whole at the end.
    let destination = super::pages::Destination::open(output.file.as_deref())?;
    let mut done: Vec<Done> = Vec::new();
    let mut not_run: Vec<String> = Vec::new();
    let mut failed_step: Option<String> = None;
    for (step, settings) in steps {
        if control.interrupts.load(Relaxed) > 0 || failed_step.is_some() {
            not_run.push(step.label);
            continue;
        }
        // A step that cannot run (the target went away) ends the sweep; the steps before it
        // are still reported.
        match measure_step(settings, &control, false) {
            Ok(result) => {
                eprintln!(
                    "sweep: {} {}: {:.1} calls/s ({:.1} OK/s)",
                    step.label,
                    if result.partial() { "interrupted" } else { "done" },
                    result.throughput_rps,
                    result.ok_calls_per_s()
                );
                done.push(Done { step, result });
            }
            // Stopped while the step was starting: it did not run.
            Err(_) if control.interrupts.load(Relaxed) > 0 && !done.is_empty() => not_run.push(step.label),
            Err(e) if done.is_empty() => return Err(e),
            Err(e) => {
                failed_step = Some(format!("{}: {e:#}", step.label));
                not_run.push(step.label);
            }
        }
    }
    let interrupted = done.iter().any(Done::partial) || (!not_run.is_empty() && failed_step.is_none());
    let text = match output.format {
        Format::Json => json(&done, &not_run, interrupted, failed_step.as_deref()),
        Format::Html => super::pages::sweep::render(&done, &not_run, failed_step.as_deref()),
        _ => table(&done, &not_run, failed_step.as_deref()),
    };
    destination.write(&text, "sweep")?;
    // As `run`: a sweep in which no call succeeded measured no service, whatever its table says.
    let answered: u64 = done.iter().map(|d| d.result.requests.total).sum();
    let ok: u64 = done.iter().map(|d| d.result.requests.ok).sum();
    match failed_step {
        Some(why) => Err(run_failed(format!("sweep: step {why}"))),
        None if ok == 0 => Err(run_failed(format!("sweep: no call of any step succeeded ({answered} failed)"))),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The knee among the steps that ran to their end, on OK calls per second (a step whose calls
/// fail fast is no capacity); an index into `points`, whose bool marks a partial step.
pub(crate) fn knee_of(points: &[(f64, bool)]) -> Option<usize> {
    let whole: Vec<usize> = (0..points.len()).filter(|&i| !points[i].1).collect();
    let throughputs: Vec<f64> = whole.iter().map(|&i| points[i].0).collect();
    knee(&throughputs).map(|k| whole[k])
}

/// The knee line of a sweep without one, given its last whole step (label, calls sent,
/// calls due but never sent): throughput grew to its end, unless that step did not keep its
/// rate, when the knee is at or before it (issue 39: "throughput still grew" of a last step
/// that sent 3.7 % of its rate).
fn no_knee(last: Option<(&str, u64, u64)>) -> String {
    match last {
        Some((label, sent, unsent)) if unsent > 0 => format!(
            "\nKnee: at or before {label}: it sent only {:.1}% of its due calls ({unsent} never sent), so the rate \
             was not kept there; no whole step before it stopped buying throughput\n",
            100.0 * sent as f64 / sent.saturating_add(unsent) as f64
        ),
        _ => "\nKnee: none within the sweep: throughput still grew at its last whole step\n".to_string(),
    }
}

pub(crate) fn knee_points(done: &[Done]) -> Vec<(f64, bool)> {
    done.iter().map(|d| (d.result.ok_calls_per_s(), d.partial())).collect()
}

/// The knee in words (a line with a blank line before it): where it is, or why there is none.
pub(crate) fn knee_text(done: &[Done]) -> String {
    let points = knee_points(done);
    match knee_of(&points) {
        Some(i) => format!(
            "\nKnee: {} at {:.1} OK calls/s: more load after it buys less than {:.0}% more throughput\n",
            done[i].step.label,
            points[i].0,
            KNEE_GAIN * 100.0
        ),
        None if points.iter().all(|p| p.1) => "\nKnee: none: no step ran to its end\n".to_string(),
        None => {
            let last = done.iter().rev().find(|d| !d.partial());
            no_knee(
                last.map(|d| (d.step.label.as_str(), d.result.requests.total, d.result.requests.unsent.unwrap_or(0))),
            )
        }
    }
}

fn json(done: &[Done], not_run: &[String], interrupted: bool, failed_step: Option<&str>) -> String {
    let steps: Vec<_> = done
        .iter()
        .map(|d| {
            serde_json::json!({
                "step": d.step.label,
                "load": d.step.load,
                "partial": d.partial(),
                "result": &d.result,
            })
        })
        .collect();
    let knee = knee_of(&knee_points(done)).map(|i| done[i].step.label.clone());
    let all = serde_json::json!({
        "steps": steps,
        "knee": knee,
        "knee_on": "OK calls/s of the steps that ran to their end",
        "interrupted": interrupted,
        "not_run": not_run,
        "error": failed_step,
    });
    serde_json::to_string_pretty(&all).unwrap_or_default() + "\n"
}

fn table(done: &[Done], not_run: &[String], failed_step: Option<&str>) -> String {
    let mut o = format!(
        "{:<16} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>8}  {}\n",
        "step", "calls", "calls/s", "OK/s", "server/s", "p50", "p99", "failed", "unsent", "retries", "ended"
    );
    for d in done {
        let s = &d.result;
        let latency = |p: f64| s.latency_us.get(Statistic::Percentile(p)).map_or("-".into(), units::duration);
        let server = s.server.as_ref().and_then(|v| v.throughput_rps).map_or("-".to_string(), |r| format!("{r:.1}"));
        o += &format!(
            "{:<16} {:>9} {:>12.1} {:>12.1} {:>12} {:>10} {:>10} {:>9} {:>9} {:>8}  {}\n",
            d.step.label,
            s.requests.total,
            s.throughput_rps,
            s.ok_calls_per_s(),
            server,
            latency(50.0),
            latency(99.0),
            s.requests.failed,
            s.requests.unsent.unwrap_or(0),
            s.requests.retries.unwrap_or(0),
            if d.partial() { "PARTIAL (interrupted; not in the knee)" } else { "whole" }
        );
    }
    for label in not_run {
        o += &format!("{label:<16} not run\n");
    }
    let unsent: Vec<&str> =
        done.iter().filter(|d| d.result.requests.unsent.unwrap_or(0) > 0).map(|d| d.step.label.as_str()).collect();
    if !unsent.is_empty() {
        o += &format!(
            "\nUnsent calls at {}: the rate was not kept there (calls due but never sent; not in calls or failed)\n",
            unsent.join(", ")
        );
    }
    o += &knee_text(done);
    if let Some(why) = failed_step {
        o += &format!("Stopped: step {why}\n");
    } else if !not_run.is_empty() || done.iter().any(Done::partial) {
        o += "Interrupted: the steps marked PARTIAL or not run are not a measurement of their load\n";
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_where_more_load_stops_buying_throughput() {
        assert_eq!(knee(&[100.0, 200.0, 390.0, 400.0, 398.0]), Some(2));
        assert_eq!(knee(&[100.0, 200.0, 300.0, 400.0]), None);
        assert_eq!(knee(&[500.0, 500.0, 500.0]), Some(0));
        // A later step a little higher (noise) does not move the knee.
        assert_eq!(knee(&[973.6, 1549.8, 1518.8, 1643.9]), Some(1));
        assert_eq!(knee(&[]), None);
        assert_eq!(knee(&[10.0]), None);
    }

    #[test]
    fn a_last_step_that_did_not_keep_its_rate_is_no_growth() {
        let text = no_knee(Some(("10000/s", 370, 9630)));
        assert!(text.contains("at or before 10000/s: it sent only 3.7% of its due calls"), "{text}");
        assert!(!text.contains("still grew"), "{text}");
        assert!(no_knee(Some(("400/s", 800, 0))).contains("still grew"));
    }

    #[test]
    fn a_partial_step_is_left_out_of_the_knee() {
        // The interrupted third step's low throughput would make the second the knee.
        assert_eq!(knee_of(&[(100.0, false), (200.0, false), (20.0, true)]), None);
        assert_eq!(knee_of(&[(100.0, false), (200.0, false), (20.0, false)]), Some(1));
        // Indices stay those of the steps given.
        assert_eq!(knee_of(&[(100.0, false), (5.0, true), (300.0, false), (305.0, false)]), Some(2));
        assert_eq!(knee_of(&[(5.0, true)]), None);
    }
}
