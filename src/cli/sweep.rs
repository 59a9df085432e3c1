//! `rpcmeter sweep`: a series of loads as one result: a range of closed-loop clients
//! (`--clients 1..25`), a list of open-loop rates (`--rates 100,200,400`), or the test_service
//! experiment's presets (`--preset S,M,L,XL,XXL` = 5/10/20/40/80 tasks x `--loop 20`; see
//! docs/experiments.md, "Threaded vs async servers"). Each step is a plain `run` with the
//! other flags given; the table shows client- and server-side throughput (all calls and OK
//! calls), latency, failed and unsent calls and retries per step, marks a step cut short
//! (partial, left out of the knee), and names the knee: where OK throughput stops growing
//! with load. The run's `-o FILE` and `--format json` are the sweep's output.
use super::run::RunArgs;
use crate::app::sweep::{self, Step, SweepOutput};
use crate::error::bad_input;
use crate::report::Format;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Closed-loop clients: FROM..TO (every count) or FROM..TO:STEP
    #[arg(long, conflicts_with_all = ["rates", "preset"])]
    pub clients: Option<String>,
    /// Open-loop rates, comma-separated calls/s
    #[arg(long, value_delimiter = ',', conflicts_with = "preset")]
    pub rates: Vec<f64>,
    /// Presets of the test_service experiment: S, M, L, XL, XXL (5, 10, 20, 40, 80 tasks, 20 calls each)
    #[arg(long, value_delimiter = ',')]
    pub preset: Vec<String>,
    /// Print the steps' results and the knee as JSON instead of the table (as `run ... --format json`)
    #[arg(long)]
    pub json: bool,
    /// `run` and its flags (without -c, --rps or --loop, which the sweep sets)
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub run: Vec<String>,
}

pub fn main(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let steps = steps(&args)?;
    // Every step's flags are checked before the first step runs.
    let parsed: Vec<(Step, RunArgs)> = steps
        .into_iter()
        .map(|step| Ok((step.clone(), super::run::nested("sweep", &args.run, &step.flags)?)))
        .collect::<anyhow::Result<_>>()?;
    if let Some((_, first)) = parsed.first() {
        first.input.apply();
    }
    let output = output(&args, parsed.first().map(|p| &p.1))?;
    // Every step's settings too: a step that cannot be run is refused before any runs.
    let steps =
        parsed.into_iter().map(|(step, run)| Ok((step, run.settings(vec![])?))).collect::<anyhow::Result<_>>()?;
    let control = super::interruptible()?;
    sweep::run(steps, control, output)
}

/// The run's own output flags name the sweep's output: `-o FILE` and `--format json` (or
/// `table`) are honoured; the per-run files make no sense for a series and are refused.
fn output(args: &SweepArgs, run: Option<&RunArgs>) -> anyhow::Result<SweepOutput> {
    let Some(run) = run else { return Ok(SweepOutput { json: args.json, file: None }) };
    let refuse = |flag: &str| {
        bad_input(format!(
            "sweep: {flag} is not available for a sweep (its steps are many runs): use -o FILE --format json for every step's full result"
        ))
    };
    if !run.export.is_empty() {
        return Err(refuse("--export"));
    }
    if run.csv_details.is_some() {
        return Err(refuse("--csv-details"));
    }
    if run.hdr_log.is_some() {
        return Err(refuse("--hdr-log"));
    }
    let json = match run.format {
        Format::Json => true,
        Format::Table => args.json,
        other => {
            return Err(bad_input(format!(
                "sweep: --format {}: a sweep writes a table or JSON (--format json)",
                format!("{other:?}").to_lowercase()
            )))
        }
    };
    Ok(SweepOutput { json, file: run.output.clone() })
}

fn steps(args: &SweepArgs) -> anyhow::Result<Vec<Step>> {
    let flags = |pairs: &[(&str, String)]| pairs.iter().flat_map(|(f, v)| [f.to_string(), v.clone()]).collect();
    if let Some(range) = &args.clients {
        let bad = || bad_input(format!("--clients {range:?}: expected FROM..TO or FROM..TO:STEP (e.g. 1..25)"));
        let (span, step) = range.split_once(':').map_or((range.as_str(), "1"), |(a, b)| (a, b));
        let (from, to) = span.split_once("..").ok_or_else(bad)?;
        let (from, to, step): (u32, u32, u32) =
            (from.parse().map_err(|_| bad())?, to.parse().map_err(|_| bad())?, step.parse().map_err(|_| bad())?);
        if from == 0 || to < from || step == 0 || (to - from) / step >= 1000 {
            return Err(bad());
        }
        return Ok((from..=to)
            .step_by(step as usize)
            .map(|c| Step { label: format!("-c {c}"), load: c as f64, flags: flags(&[("-c", c.to_string())]) })
            .collect());
    }
    if !args.rates.is_empty() {
        return Ok(args
            .rates
            .iter()
            .map(|r| Step { label: format!("--rps {r}"), load: *r, flags: flags(&[("--rps", r.to_string())]) })
            .collect());
    }
    if !args.preset.is_empty() {
        return args
            .preset
            .iter()
            .map(|name| {
                let tasks = match name.trim().to_ascii_uppercase().as_str() {
                    "S" => 5,
                    "M" => 10,
                    "L" => 20,
                    "XL" => 40,
                    "XXL" => 80,
                    other => return Err(bad_input(format!("--preset {other:?}: expected S, M, L, XL or XXL"))),
                };
                Ok(Step {
                    label: format!("{} ({tasks} x 20)", name.trim().to_ascii_uppercase()),
                    load: tasks as f64,
                    flags: flags(&[("-c", tasks.to_string()), ("--loop", "20".into())]),
                })
            })
            .collect();
    }
    Err(bad_input("sweep: give --clients, --rates or --preset"))
}
