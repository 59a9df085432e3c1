//! `rpcmeter sweep`: a series of loads as one result: a range of closed-loop clients
//! (`--clients 1..25`), a list of open-loop rates (`--rates 100,200,400`), or the test_service
//! experiment's presets (`--preset S,M,L,XL,XXL` = 5/10/20/40/80 tasks x `--loop 20`; see
//! docs/experiments.md, "Threaded vs async servers"). Each step is a plain `run` with the
//! other flags given; the table shows client- and server-side throughput (all calls and OK
//! calls), latency, failed and unsent calls and retries per step, marks a step cut short
//! (partial, left out of the knee), and names the knee: where OK throughput stops growing
//! with load. The run's `-o FILE` and `--format json|html` are the sweep's output. Each step is
//! the run's flags with its load set (typed, not words added to the run's).
use super::run::RunArgs;
use crate::app::sweep::{self, Step, SweepOutput};
use crate::error::bad_input;
use crate::load::pacer::RateSchedule;
use crate::report::Format;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Closed-loop clients: FROM..TO (every count) or FROM..TO:STEP
    #[arg(long, conflicts_with_all = ["rates", "preset"])]
    pub clients: Option<String>,
    /// Open-loop rates, comma-separated calls/s
    #[arg(long, value_delimiter = ',', value_parser = super::parse::rate, conflicts_with = "preset")]
    pub rates: Vec<f64>,
    /// Presets of the test_service experiment: S, M, L, XL, XXL (5, 10, 20, 40, 80 tasks, 20 calls each)
    #[arg(long, value_delimiter = ',')]
    pub preset: Vec<String>,
    /// Print the steps' results and the knee as JSON instead of the table: the same as
    /// `run ... --format json`, kept hidden for the scripts that use it
    #[arg(long, hide = true)]
    pub json: bool,
    /// `run` and its flags (without -c, --rps or --loop, which the sweep sets); its -o FILE and
    /// --format table|json|html are the sweep's (-o FILE.html: a page of throughput and
    /// latency against the load, with the knee)
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub run: Vec<String>,
}

pub fn main(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let loads = loads(&args)?;
    let run = super::run::nested("sweep", &args.run, &[])?;
    run.input.apply();
    let output = output(&args, &run)?;
    // Every step's settings are made and checked before the first step runs; a `--replay`
    // log is read whole by the first step's, the others take its scan (each step reads the
    // log again only to send its calls).
    let mut scanned = None;
    let steps = loads
        .into_iter()
        .map(|load| {
            let settings = load.applied_to(&run)?.settings_scanned(vec![], scanned.clone())?;
            scanned = settings.replay.as_ref().map(|log| log.scan.clone());
            Ok((load.step(), settings))
        })
        .collect::<anyhow::Result<_>>()?;
    let control = super::interruptible()?;
    sweep::run(steps, control, output)
}

/// The run's own output flags name the sweep's output: `-o FILE` and `--format json`, `table`
/// or `html` (the default for -o FILE.html) are honoured; the per-run files make no sense for
/// a series and are refused.
fn output(args: &SweepArgs, run: &RunArgs) -> anyhow::Result<SweepOutput> {
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
    // As `run` decides it: -o FILE.html draws the sweep's page.
    let format = match super::run_settings::primary_format(run.format, run.output.as_deref()) {
        Format::Table if args.json => Format::Json,
        format @ (Format::Table | Format::Json | Format::Html) => format,
        other => {
            return Err(bad_input(format!(
                "sweep: --format {}: a sweep writes a table, JSON (--format json) or its HTML page (--format html)",
                format!("{other:?}").to_lowercase()
            )))
        }
    };
    Ok(SweepOutput { format, file: run.output.clone() })
}

/// The load of one step: what it sets of the run's flags.
#[derive(Debug, Clone, Copy)]
enum Load {
    /// `-c N`.
    Clients(u32),
    /// `--rps R`.
    Rate(f64),
    /// A preset of the test_service experiment: `-c TASKS --loop 20`.
    Preset(&'static str, u32),
}

impl Load {
    fn step(self) -> Step {
        match self {
            Load::Clients(c) => Step { label: format!("-c {c}"), load: c as f64 },
            Load::Rate(r) => Step { label: format!("--rps {r}"), load: r },
            Load::Preset(name, tasks) => Step { label: format!("{name} ({tasks} x 20)"), load: tasks as f64 },
        }
    }

    /// The run's flags with this load set; a run that sets a load of its own is refused (the
    /// sweep sets it at each step).
    fn applied_to(self, run: &RunArgs) -> anyhow::Result<RunArgs> {
        let given = [
            ("-c", run.concurrency.is_some()),
            ("--rps", run.rps.is_some()),
            ("--loop", run.loop_count.is_some()),
            ("--burst", run.burst.is_some()),
            ("--stages", run.stages.is_some()),
            // A ramp of workers has no open-loop meaning.
            ("--ramp", run.ramp.is_some() && matches!(self, Load::Rate(_))),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return Err(bad_input(format!(
                "sweep run: {flag}: the sweep sets each step's load (--clients, --rates, --preset); leave it out of the run's flags"
            )));
        }
        let mut run = run.clone();
        match self {
            Load::Clients(c) => run.concurrency = Some(c),
            Load::Rate(r) => run.rps = Some(RateSchedule::constant(r)),
            Load::Preset(_, tasks) => {
                run.concurrency = Some(tasks);
                run.loop_count = Some(20);
            }
        }
        Ok(run)
    }
}

fn loads(args: &SweepArgs) -> anyhow::Result<Vec<Load>> {
    if let Some(range) = &args.clients {
        let bad = || bad_input(format!("--clients {range:?}: expected FROM..TO or FROM..TO:STEP (e.g. 1..25)"));
        let (span, step) = range.split_once(':').map_or((range.as_str(), "1"), |(a, b)| (a, b));
        let (from, to) = span.split_once("..").ok_or_else(bad)?;
        let (from, to, step): (u32, u32, u32) =
            (from.parse().map_err(|_| bad())?, to.parse().map_err(|_| bad())?, step.parse().map_err(|_| bad())?);
        if from == 0 || to < from || step == 0 || (to - from) / step >= 1000 {
            return Err(bad());
        }
        return Ok((from..=to).step_by(step as usize).map(Load::Clients).collect());
    }
    if !args.rates.is_empty() {
        return Ok(args.rates.iter().map(|&r| Load::Rate(r)).collect());
    }
    if !args.preset.is_empty() {
        return args
            .preset
            .iter()
            .map(|name| match name.trim().to_ascii_uppercase().as_str() {
                "S" => Ok(Load::Preset("S", 5)),
                "M" => Ok(Load::Preset("M", 10)),
                "L" => Ok(Load::Preset("L", 20)),
                "XL" => Ok(Load::Preset("XL", 40)),
                "XXL" => Ok(Load::Preset("XXL", 80)),
                other => Err(bad_input(format!("--preset {other:?}: expected S, M, L, XL or XXL"))),
            })
            .collect();
    }
    Err(bad_input("sweep: give --clients, --rates or --preset"))
}
