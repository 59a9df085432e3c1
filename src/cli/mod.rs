//! The command line: clap types, one file per subcommand, each made here into the typed,
//! validated settings that `app` runs (run_settings.rs for `run`); only this layer and the
//! reports print. Nothing imports this module but main.
use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;

pub mod calibrate;
pub mod compare;
pub mod demo;
pub mod history;
pub mod kube;
pub mod lab;
pub mod merge;
pub mod parse;
pub mod ping;
pub mod protos;
pub mod replay;
pub mod report;
pub mod run;
pub mod run_settings;
pub mod serve;
pub mod sweep;
pub mod target;
pub mod words;

#[derive(Parser, Debug)]
#[command(name = "rpcmeter", version, about = "A gRPC measurement lab: load, serve, measure truthfully")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Serve the lab's reference services (echo, CPU, database, key/value, stats).
    Serve(serve::ServeArgs),
    /// Load a gRPC service and report latency, throughput, statuses and client cost.
    Run(run::RunArgs),
    /// Write the lab's .proto files for other tools (ghz, grpcurl).
    Protos(protos::ProtosArgs),
    /// Self-contained demo: serve the lab in-process, measure it, print the tables.
    Demo(demo::DemoArgs),
    /// Measure the floors of this machine and of rpcmeter (clock, timers, loopback, a null call).
    Calibrate(calibrate::CalibrateArgs),
    /// Merge results (the shards of one run, or runs of one call) into one, exactly.
    Merge(merge::MergeArgs),
    /// Print the Kubernetes manifest (an Indexed Job) of one run spread over N pods.
    Kube(kube::KubeArgs),
    /// Compare runs of B against runs of A beyond the noise between runs: ratios with confidence intervals, a verdict (-o FILE.html: a page).
    Compare(compare::CompareArgs),
    /// Draw result JSON files as one self-contained HTML report (inline SVG plots, no network).
    Report(report::ReportArgs),
    /// The recorded runs: list them (or draw their trend: -o FILE.html), show one (its whole JSON result), remove one.
    History(history::HistoryArgs),
    /// Run a series of loads (clients, rates or presets) as one result, with the knee.
    Sweep(sweep::SweepArgs),
    /// Rerun an experiment of docs/experiments.md on this machine (Go, Java, Python servers too): markdown + HTML.
    Lab(lab::LabArgs),
    /// A latency baseline: ICMP echo (else TCP connect) beside gRPC calls, interleaved, compared.
    Ping(ping::PingArgs),
    /// What a gRPC binary log holds (methods, calls, span, rate, sizes, statuses) before `run --replay` sends it.
    ReplayInfo(replay::ReplayInfoArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): rpcmeter(1), or with a command's name its own page,
    /// rpcmeter-COMMAND(1), as git ships one per command
    Man {
        /// The command whose page to print (run, merge, compare, ...)
        command: Option<String>,
    },
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    let result = match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Run(args) => run_command(args),
        Command::Protos(args) => protos::main(args),
        Command::Demo(args) => demo::main(args),
        Command::Merge(args) => merge::main(args),
        Command::Kube(args) => kube::main(args),
        Command::Sweep(args) => sweep::main(args),
        Command::Lab(args) => lab::main(args),
        Command::Ping(args) => ping::main(args),
        Command::ReplayInfo(args) => replay::info(args),
        Command::Calibrate(args) => calibrate::main(args),
        Command::Compare(args) => compare::main(args),
        Command::Report(args) => report::main(args),
        Command::History(args) => history::main(args),
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics on a failed write (a full disk).
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "rpcmeter", &mut text);
            to_stdout(&text)
        }
        Command::Man { command } => man_page(command.as_deref()).and_then(|text| to_stdout(&text)),
    };
    match result {
        Ok(code) => code,
        Err(err) if crate::error::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, whatever a server put in it (its messages reach errors). Best effort:
            // after a hang-up stderr may be gone, and eprintln! would panic.
            let line = crate::report::printable::printable(&format!("{err:#}")).into_owned();
            let _ = writeln!(std::io::stderr(), "rpcmeter: error: {line}");
            ExitCode::from(crate::error::exit_code(&err))
        }
    }
}

/// The roff page of rpcmeter, or of one of its commands (named `rpcmeter-COMMAND`, as
/// `man rpcmeter-run` finds it).
fn man_page(command: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let top = Cli::command();
    let page = match command {
        None => top,
        Some(name) => {
            let Some(sub) = top.find_subcommand(name).cloned() else {
                let names: Vec<&str> = top.get_subcommands().map(|c| c.get_name()).collect();
                return Err(crate::error::bad_input(format!(
                    "man {name}: no such command (one of: {})",
                    names.join(", ")
                )));
            };
            // Named rpcmeter-run(1) and used as `rpcmeter run`, as git's pages are.
            let (page, usage) = (format!("rpcmeter-{}", sub.get_name()), format!("rpcmeter {}", sub.get_name()));
            sub.name(page).bin_name(usage).version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut text = Vec::new();
    clap_mangen::Man::new(page).render(&mut text).map_err(crate::error::internal)?;
    Ok(text)
}

/// Writes `bytes` to standard output; a failed write is an output error (exit 1, one line).
fn to_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| crate::error::output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}

fn run_command(args: run::RunArgs) -> anyhow::Result<ExitCode> {
    args.input.apply();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if let Some(shards) = args.shards {
        // Validate the whole run's flags once, as shard 0 of N, before starting any child.
        let mut first = args.clone();
        first.shard = Some(crate::load::plan::ShardOf { index: 0, count: shards });
        let whole = first.settings(arguments.clone())?;
        // The children write no file and print JSON to the parent; the parent's own flags
        // stay with it (clap reads the words, so `-qo FILE` is seen as -q and -o).
        let after_run = arguments.iter().skip_while(|a| *a != "run").skip(1).cloned().collect::<Vec<_>>();
        let parents = ["shards", "join_timeout", "output", "format", "quiet", "history", "no_save"];
        let becomes: Vec<_> = parents.iter().map(|id| (*id, words::Becomes::Dropped)).collect();
        let children = words::rewrite(&run::command(), &after_run, &becomes);
        let whole = crate::app::shards::Whole {
            shards,
            // -o FILE.html: the merged run's page, as a run's (it got merge's text table).
            format: run_settings::primary_format(args.format, args.output.as_deref()),
            output: args.output.clone(),
            join_timeout: args.join_timeout,
            checks: whole.checks,
            history: whole.history,
            fingerprint: run_settings::fingerprint(&arguments)?,
            progress: crate::sink::progress::Style::of_stderr(args.quiet),
            // The log, read whole here, is not read whole again by each shard.
            scan: whole.replay.map(|log| log.scan),
        };
        return crate::app::shards::run_local(whole, &children);
    }
    let settings = args.settings(arguments.clone())?;
    match settings.coordination.clone() {
        Some(how) => {
            let credentials = run_settings::credentials(&args, &arguments)?;
            crate::app::coordinator::run_shard(settings, interruptible()?, &how, credentials)
        }
        None => crate::app::run::run(settings, interruptible()?),
    }
}

/// A run's outside control, counting SIGINT, SIGTERM and SIGHUP (Ctrl-C once: drain; twice: stop).
pub fn interruptible() -> anyhow::Result<std::sync::Arc<crate::load::plan::Control>> {
    let control = std::sync::Arc::new(crate::load::plan::Control::default());
    // A hang-up (the terminal closed, an ssh session lost) ends the run as SIGTERM does: the
    // measured part is reported, not lost.
    let signals = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];
    let mut signals = signal_hook::iterator::Signals::new(signals)
        .map_err(|e| crate::error::internal(format!("cannot handle signals: {e}")))?;
    // A thread counts them (signal-hook's safe interface: no code of ours in the handler).
    // Two of one kind delivered before it reads them count once: a person's two Ctrl-C are
    // far slower than its wake-up.
    let counted = control.clone();
    std::thread::Builder::new()
        .name("rpcmeter-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                counted.interrupts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .map_err(|e| crate::error::internal(format!("cannot handle signals: {e}")))?;
    Ok(control)
}

/// A usage error as clap words it (what is wrong, which arguments, a did-you-mean), without
/// its usage block; --help and --version print as usual. Exit code 2.
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !err.use_stderr() {
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // A bare `rpcmeter`: the help is the answer, not an error line.
        let _ = err.print();
        return ExitCode::from(2);
    }
    eprintln!("rpcmeter: error: {}", one_line(&err));
    ExitCode::from(2)
}

/// clap's words for a usage error in one line: what is wrong and which arguments (clap puts
/// those on lines of their own), without the usage block and the pointer to --help.
pub fn one_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    let message = kept.join(" ").replace("error: ", "");
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
