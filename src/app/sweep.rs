//! The sweep's steps, run one after the other through `app::run::measure_step`, and the knee.
use super::run::{measure_step, Settings};
use crate::cli::run::RunArgs;
use crate::error::{output_failed, run_failed};
use crate::load::engine::Control;
use crate::report::{units, Summary};
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// One load of a sweep.
#[derive(Debug, Clone)]
pub struct Step {
    pub label: String,
    /// The size of the load (clients, calls/s), for the knee.
    pub load: f64,
    /// The `run` flags that make it.
    pub flags: Vec<String>,
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

pub fn run(steps: Vec<(Step, RunArgs)>, control: Arc<Control>, json: bool) -> anyhow::Result<ExitCode> {
    let mut done: Vec<(Step, Summary)> = Vec::new();
    for (step, args) in steps {
        if control.interrupts.load(Relaxed) > 0 {
            break;
        }
        let summary = measure_step(Settings::from_args(&args, vec![])?, &control, false)?;
        eprintln!("sweep: {} done: {:.1} calls/s", step.label, summary.throughput_rps);
        done.push((step, summary));
    }
    if done.is_empty() {
        return Err(run_failed("sweep: no step ran"));
    }
    let text = if json {
        let steps: Vec<_> = done
            .iter()
            .map(|(step, s)| serde_json::json!({"step": step.label, "load": step.load, "result": crate::report::json::value(s)}))
            .collect();
        let throughputs: Vec<f64> = done.iter().map(|(_, s)| s.throughput_rps).collect();
        let knee = knee(&throughputs).map(|i| done[i].0.label.clone());
        serde_json::to_string_pretty(&serde_json::json!({"steps": steps, "knee": knee})).unwrap_or_default() + "\n"
    } else {
        table(&done)
    };
    std::io::stdout().write_all(text.as_bytes()).map_err(|e| output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}

fn table(done: &[(Step, Summary)]) -> String {
    let mut o = format!(
        "{:<16} {:>9} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8}\n",
        "step", "calls", "calls/s", "server/s", "p50", "p99", "errors", "retries"
    );
    for (step, s) in done {
        let server = s.server.as_ref().and_then(|v| v.throughput_rps).map_or("-".to_string(), |r| format!("{r:.1}"));
        o += &format!(
            "{:<16} {:>9} {:>12.1} {:>12} {:>10} {:>10} {:>8} {:>8}\n",
            step.label,
            s.requests.total,
            s.throughput_rps,
            server,
            units::duration(s.latency.percentile(50.0)),
            units::duration(s.latency.percentile(99.0)),
            s.requests.failed,
            s.requests.retries
        );
    }
    let throughputs: Vec<f64> = done.iter().map(|(_, s)| s.throughput_rps).collect();
    o += &match knee(&throughputs) {
        Some(i) => format!(
            "\nKnee: {} at {:.1} calls/s: more load after it buys less than {:.0}% more throughput\n",
            done[i].0.label,
            throughputs[i],
            KNEE_GAIN * 100.0
        ),
        None => "\nKnee: none within the sweep: throughput still grew at its last step\n".to_string(),
    };
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
}
