//! `rpcmeter lab NAME`: the experiments of docs/experiments.md, one command each. A lab starts
//! its servers (servers.rs), measures them with plain `run`s (the same `app::run::measure` as
//! the CLI, so a lab's numbers are a user's numbers), and writes what it found twice: a
//! markdown summary and an HTML report (`report::html`, with the lab's write-up on top).
pub mod doc;
mod kv_consistency;
mod kv_throughput;
mod ping_vs_grpc;
pub mod servers;
mod threaded_vs_async;
mod warmup;

use crate::app::outputs::write_whole;
use crate::app::run::{measure_step, Settings};
use crate::error::{bad_input, output_failed};
use crate::load::plan::Control;
use crate::report::html;
use crate::result::Run;
use doc::Doc;
use servers::{Built, Runtime, Server};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The labs, in the order `all` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Name {
    /// docs/experiments.md, "Echo warm-up: the latch benchmark": cold and warm servers and clients
    Warmup,
    /// docs/experiments.md, "Threaded vs async servers": Cpu and Db under both models, retries counted once
    ThreadedVsAsync,
    /// docs/experiments.md, "Throughput measured by the client": client- vs server-side throughput
    KvThroughput,
    /// docs/experiments.md, "Reads that miss the write just made": put-then-get flows checked per consistency mode
    KvConsistency,
    /// docs/experiments.md, "Ping vs gRPC latency": ICMP beside gRPC, loopback and network namespaces
    PingVsGrpc,
    /// Every lab, one after the other
    All,
}

impl Name {
    pub fn slug(self) -> &'static str {
        match self {
            Name::Warmup => "warmup",
            Name::ThreadedVsAsync => "threaded-vs-async",
            Name::KvThroughput => "kv-throughput",
            Name::KvConsistency => "kv-consistency",
            Name::PingVsGrpc => "ping-vs-grpc",
            Name::All => "all",
        }
    }
}

/// What every lab is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// Each lab in under a minute (smaller loads, fewer rounds), for CI and a first look.
    pub quick: bool,
    /// Where the reports go.
    pub out: PathBuf,
    /// The runtimes to include (others are skipped and the report says so).
    pub runtimes: Vec<Runtime>,
    /// postgres://... for the Db calls; SQLite otherwise.
    pub db: Option<String>,
    /// A runtime asked for whose server cannot be built fails the lab (CI), instead of being skipped.
    pub strict: bool,
    /// How a step's `rpcmeter run ...` words become its settings: the command line's own
    /// reader, so that a lab's step is read exactly as a user's run of the same words.
    pub read_run: fn(&[String]) -> anyhow::Result<Settings>,
}

/// One lab in progress: its write-up, its runs, and where they are written.
pub struct Lab {
    pub options: Options,
    pub doc: Doc,
    runs: Vec<html::Run>,
    results: PathBuf,
    control: Arc<Control>,
    name: &'static str,
    /// The steps that ran, in order, "(cut short)" on one stopped during it: what an
    /// interrupted write-up names.
    ran: Vec<String>,
}

impl Lab {
    fn new(name: Name, title: &str, options: &Options, control: Arc<Control>) -> anyhow::Result<Lab> {
        let results = options.out.join(name.slug());
        std::fs::create_dir_all(&results).map_err(|e| output_failed(&results, e))?;
        Ok(Lab {
            options: options.clone(),
            doc: Doc::new(title),
            runs: Vec::new(),
            results,
            control,
            name: name.slug(),
            ran: Vec::new(),
        })
    }

    /// Where this lab's results go (DIR/NAME/).
    pub fn results_dir(&self) -> &std::path::Path {
        &self.results
    }

    /// Whether the user asked to stop (Ctrl-C): the lab then writes what it has.
    pub fn interrupted(&self) -> bool {
        self.control.interrupts.load(Relaxed) > 0
    }

    /// Records a step that ran (for the write-up of an interrupted lab); `measure` does it for
    /// its runs, a lab that measures otherwise calls it.
    pub fn ran(&mut self, label: &str, cut_short: bool) {
        self.ran.push(if cut_short { format!("{label} (cut short)") } else { label.to_string() });
    }

    /// Builds (or finds built) each runtime the user allowed; the ones that cannot be are
    /// listed in the write-up with the reason, and left out.
    pub fn servers(&mut self, wanted: &[Runtime]) -> anyhow::Result<Vec<(Runtime, Built)>> {
        let mut ready = Vec::new();
        let mut skipped = Vec::new();
        for &runtime in wanted {
            if !self.options.runtimes.contains(&runtime) {
                skipped.push(format!("{}: not asked for (--runtimes)", runtime.name()));
                continue;
            }
            match servers::build(runtime) {
                Ok(built) => ready.push((runtime, built)),
                Err(why) if self.options.strict => {
                    return Err(crate::error::run_failed(format!("lab {}: {why}", self.name)));
                }
                Err(why) => {
                    eprintln!("lab {}: skipping {}: {why}", self.name, runtime.name());
                    skipped.push(format!("{}: {why}", runtime.name()));
                }
            }
        }
        if !skipped.is_empty() {
            self.doc.para("Skipped here:");
            self.doc.list(skipped);
        }
        Ok(ready)
    }

    /// One `rpcmeter run` with `flags` against `server`, labelled `label`: its result is
    /// written to DIR/NAME/LABEL.json and shown in the report. A run that failed as a whole
    /// (nothing reachable) is an error; failed calls are results. `None`: the lab was
    /// interrupted before the step ran (while it resolved its schema, say): the step was not
    /// run, as `sweep` counts such a step, and the lab goes on to its write-up.
    pub fn measure(&mut self, label: &str, server: &Server, flags: &[String]) -> anyhow::Result<Option<Run>> {
        let mut argv: Vec<String> = ["rpcmeter run", "--plaintext", "--quiet", "--no-save", "--name", label]
            .iter()
            .map(|s| s.to_string())
            .collect();
        argv.extend(flags.iter().cloned());
        argv.push(server.addr.clone());
        let settings =
            (self.options.read_run)(&argv).map_err(|e| bad_input(format!("lab {}: {label}: {e:#}", self.name)))?;
        eprintln!("lab {}: {label}: rpcmeter {}", self.name, command_line(&argv[1..]));
        // The lab owns the server: each step's server-side count and throughput start at zero.
        if let Some(target) = server.target() {
            crate::app::server_side::reset(&target);
        }
        let result = match measure_step(settings, &self.control, true) {
            Ok(result) => result,
            Err(_) if self.interrupted() => return Ok(None),
            Err(e) => return Err(e),
        };
        self.ran(label, result.partial());
        let file = self.results.join(format!("{}.json", file_name(label)));
        write_whole(&file, result.to_json_pretty().as_bytes()).map_err(|e| output_failed(&file, e))?;
        let shown = format!("{}/{}", self.name, file.file_name().unwrap_or_default().to_string_lossy());
        self.runs.push(html::of_result(&shown, &result).map_err(crate::error::internal)?);
        Ok(Some(result))
    }

    /// Writes DIR/NAME.md and DIR/NAME.html; returns their paths.
    fn finish(mut self) -> anyhow::Result<(PathBuf, PathBuf)> {
        if self.interrupted() {
            let ran = if self.ran.is_empty() { "none".to_string() } else { self.ran.join(", ") };
            self.doc.interrupted(format!(
                "the lab was stopped (a signal) before its end. Steps that ran: {ran}. Every later step was not run: \
                 its rows are missing or shown \"–\", and no conclusion is drawn."
            ));
            eprintln!("lab {}: interrupted: the write-up is marked INTERRUPTED and draws no conclusion", self.name);
        }
        let md = self.options.out.join(format!("{}.md", self.name));
        let page = self.options.out.join(format!("{}.html", self.name));
        write_whole(&md, self.doc.markdown().as_bytes()).map_err(|e| output_failed(&md, e))?;
        let html = html::render_page(&self.doc.title, &self.doc.html(), &self.runs);
        write_whole(&page, html.as_bytes()).map_err(|e| output_failed(&page, e))?;
        Ok((md, page))
    }
}

/// `run` and its flags as a line a user can paste into a shell: each word quoted as it needs.
pub fn command_line(flags: &[String]) -> String {
    std::iter::once("run".to_string())
        .chain(flags.iter().map(|w| crate::app::history::shell_word(w)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A label as a file name: letters, digits, '-' and '.' kept, anything else '_'.
fn file_name(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

/// Runs the lab(s) `name`; prints where each report went.
pub fn run(name: Name, options: &Options, control: Arc<Control>) -> anyhow::Result<()> {
    let names = match name {
        Name::All => {
            vec![Name::Warmup, Name::ThreadedVsAsync, Name::PingVsGrpc, Name::KvThroughput, Name::KvConsistency]
        }
        one => vec![one],
    };
    for name in names {
        if control.interrupts.load(Relaxed) > 0 {
            println!("lab {}: not run (interrupted)", name.slug());
            continue;
        }
        let (md, page) = match name {
            Name::Warmup => warmup::run(Lab::new(name, warmup::TITLE, options, control.clone())?)?,
            Name::ThreadedVsAsync => {
                threaded_vs_async::run(Lab::new(name, threaded_vs_async::TITLE, options, control.clone())?)?
            }
            Name::KvThroughput => kv_throughput::run(Lab::new(name, kv_throughput::TITLE, options, control.clone())?)?,
            Name::KvConsistency => {
                kv_consistency::run(Lab::new(name, kv_consistency::TITLE, options, control.clone())?)?
            }
            Name::PingVsGrpc => ping_vs_grpc::run(Lab::new(name, ping_vs_grpc::TITLE, options, control.clone())?)?,
            Name::All => unreachable!("expanded above"),
        };
        // writeln, not println: a closed pipe is an error to report quietly, not a panic.
        writeln!(std::io::stdout(), "lab {}: {} and {}", name.slug(), md.display(), page.display())?;
    }
    Ok(())
}

/// A number of milliseconds as the tables show it.
fn ms(d: std::time::Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// A rate as the tables show it.
fn per_s(rate: f64) -> String {
    format!("{rate:.0}")
}

/// Lines of (x, y) points, one per named series, from zero on both axes; dots carry tooltips.
fn line_plot(id: &str, title: &str, x_title: &str, y_title: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    use crate::report::svg::{num, Axis, Mark, Plot};
    let max = |f: fn(&(f64, f64)) -> f64| series.iter().flat_map(|(_, p)| p.iter().map(f)).fold(0.0, f64::max);
    let x = Axis::linear(0.0, max(|p| p.0).max(1.0), x_title, num);
    let y = Axis::linear(0.0, max(|p| p.1).max(1e-9) * 1.1, y_title, num);
    let mut plot = Plot::new(id, "plot-lab", title, 720.0, 360.0, x, y);
    plot.legend_bottom = true;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = html::color(i);
        plot.line(points, color, 2.0, false);
        if points.len() <= 40 {
            for &(x, y) in points {
                plot.dot(x, y, 3.5, color, Some(&format!("{name}: {} at {}", num(y), num(x))));
            }
        }
        plot.legend(name, color, Mark::Line);
    }
    plot.finish()
}

#[cfg(test)]
mod tests {
    /// What the lab prints, given to `sh -c`, gives back the very words it ran with.
    #[test]
    fn printed_commands_round_trip_through_a_shell() {
        let flags: Vec<String> = [
            "--call",
            "EchoService/echo",
            "-d",
            r#"{"content":"it's {{.RequestNumber}} $HOME `x` \ ; | & *"}"#,
            "--name",
            "two words",
            "",
            "-z",
            "1s",
        ]
        .map(String::from)
        .to_vec();
        let line = super::command_line(&flags);
        let out = std::process::Command::new("sh").arg("-c").arg(format!("printf '%s\\0' {}", line)).output().unwrap();
        let words: Vec<String> =
            String::from_utf8(out.stdout).unwrap().split_terminator('\0').map(String::from).collect();
        assert_eq!(words[0], "run");
        assert_eq!(words[1..], flags[..], "{line}");
    }
}
