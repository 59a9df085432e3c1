//! `rpcmeter compare A.json B.json` (or several runs a side: `compare a1 a2 a3 -- b1 b2 b3`):
//! is B better or worse than A, beyond the noise between runs? (`app::compare` reads,
//! computes and renders.)
use crate::app::compare::{Metric, ResultRef, Settings};
use crate::app::interleave::Interleave;
use crate::error::bad_input;
use crate::report::Format;
use std::path::PathBuf;
use std::process::ExitCode;

/// A metric compared, one value per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricArg {
    /// OK calls per second of the run.
    Throughput,
    /// The run's median latency of OK calls.
    P50,
    /// The run's 99th percentile of OK calls' latency.
    P99,
    /// The run's failed calls over its calls.
    #[value(alias = "error_rate", alias = "errors")]
    ErrorRate,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline: results of `rpcmeter run --format json` (or `--export json=FILE`, `merge`,
    /// a history id), one per run. Two files and no `--`: the first is A, the second B (with
    /// --runs: the two targets, A's and B's)
    #[arg(value_name = "A", required = true)]
    pub a: Vec<PathBuf>,
    /// The candidate's runs, after `--`: `compare a1.json a2.json a3.json -- b1.json b2.json b3.json`
    /// (with --runs: the flags of every run)
    #[arg(value_name = "B", last = true)]
    pub b: Vec<PathBuf>,
    /// Metrics to compare, repeatable or comma-separated (default: all).
    #[arg(long = "metric", value_enum, value_delimiter = ',')]
    pub metrics: Vec<MetricArg>,
    /// Family-wise significance level, in (0, 1): Holm-Bonferroni over the metrics tested, each
    /// tested (and its interval drawn) at its Holm level.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Exit 1 when a metric of B is a regression against A, or is not judged (a run's client was
    /// disturbed, a merged run alone, or an interval too wide to rule out a change that
    /// matters); stderr names each metric and why.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Smallest change that matters, e.g. 5% (default 10% for throughput and p50, 25% for p99):
    /// a significant change smaller than this is "no change"; an interval that cannot rule
    /// out a change this big is "not judged"
    #[arg(long, value_parser = parse_min_effect)]
    pub min_effect: Option<f64>,
    /// Compare one slice of each result instead of the whole: KEY=NAME, KEY one of
    /// calls_by_name, flows, backends (e.g. `--slice calls_by_name=put`)
    #[arg(long, value_name = "KEY=NAME", value_parser = crate::result::parse_slice)]
    pub slice: Option<(String, String)>,
    /// Make the runs: run A and B alternately N times each (A B B A A B ...) with the run flags
    /// after `--`, then compare them: `compare --runs 5 TARGET_A TARGET_B -- -c 8 -z 3s ...`.
    /// The two arguments are then targets; a run without -z or -n runs 10s [default N: 5]
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = crate::app::interleave::DEFAULT_RUNS,
          value_parser = parse_runs)]
    pub runs: Option<usize>,
    /// Where --runs keeps every result file (a1.json, b1.json, ...) [default: a new
    /// rpcmeter-compare-<unix time> in the current directory]
    #[arg(long, value_name = "DIR", requires = "runs")]
    pub out: Option<PathBuf>,
    /// Output format: the table, JSON, or one self-contained HTML page (the verdicts, a forest
    /// plot of B / A with its intervals, the runs and what went wrong in them); -o FILE.html
    /// makes it html
    #[arg(long, value_parser = super::parse::table_json_or_html(), default_value = "table")]
    pub format: Format,
    /// Write the report to FILE instead of standard output (FILE.html: the HTML page)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: crate::input::InputArgs,
}

fn parse_runs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (2..=1000).contains(&n) => Ok(n),
        _ => Err("a count of runs a side, from 2 to 1000 (`--runs 5 TARGET_A TARGET_B -- RUN FLAGS`)".into()),
    }
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(alpha) if alpha > 0.0 && alpha < 1.0 => Ok(alpha),
        _ => Err("a significance level between 0 and 1, such as 0.05".into()),
    }
}

/// `5%` (or the fraction `0.05`): a relative change of the median, from 0 to 100 %.
fn parse_min_effect(s: &str) -> Result<f64, String> {
    let text = s.trim();
    let fraction = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok().map(|p| p / 100.0),
        None => text.parse::<f64>().ok(),
    };
    match fraction {
        Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("a relative change of the median such as 5% (from 0% to 100%)".into()),
    }
}

pub fn main(args: CompareArgs) -> anyhow::Result<ExitCode> {
    args.input.apply();
    crate::app::compare::run(&args.settings()?)
}

impl CompareArgs {
    fn result_ref(&self, path: &std::path::Path) -> ResultRef {
        ResultRef { slice: self.slice.clone(), ..ResultRef::resolve(path) }
    }

    /// The comparison these flags ask for, checked.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let args = self;
        let mut metrics: Vec<Metric> = args.metrics.iter().map(|&m| Metric::from(m)).collect();
        if metrics.is_empty() {
            metrics = Metric::ALL.to_vec();
        }
        let mut seen = Vec::new();
        metrics.retain(|m| {
            !seen.contains(m) && {
                seen.push(*m);
                true
            }
        });
        let interleave = match (args.runs, args.a.as_slice()) {
            (None, _) => None,
            (Some(runs), [a, b]) => Some(Interleave {
                runs,
                out: args.out.clone().unwrap_or_else(crate::app::interleave::default_out),
                target_a: a.clone().into_os_string(),
                target_b: b.clone().into_os_string(),
                run_flags: args.b.iter().map(|f| f.clone().into_os_string()).collect(),
            }),
            (Some(_), a) => {
                return Err(bad_input(format!(
                    "compare --runs: {} argument(s) before `--`: give the two targets, then the run flags after \
                     `--` (`compare --runs 5 TARGET_A TARGET_B -- -c 8 -z 3s`)",
                    a.len()
                )))
            }
        };
        if interleave.is_some() {
            return Ok(Settings {
                a: vec![],
                b: vec![],
                interleave,
                slice: self.slice.clone(),
                metrics,
                alpha: args.alpha,
                min_effect: args.min_effect,
                fail_on_regression: args.fail_on_regression,
                format: self.format(),
                output: args.output.clone(),
            });
        }
        // `compare A B`, or `compare A... -- B...`.
        let (a, b) = match (args.a.as_slice(), args.b.as_slice()) {
            ([a, b], []) => (vec![a.clone()], vec![b.clone()]),
            (a, b) if !b.is_empty() => (a.to_vec(), b.to_vec()),
            (a, _) => {
                return Err(bad_input(format!(
                    "compare: {} result(s) given and no `--`: give A and B (`compare a.json b.json`), or each \
                     side's runs (`compare a1.json a2.json -- b1.json b2.json`)",
                    a.len()
                )))
            }
        };
        // After `--` everything is a file of B: a flag there is a mistake, not a file.
        if let Some(flag) = b.iter().find(|p| p.to_string_lossy().starts_with('-') && !p.exists()) {
            return Err(bad_input(format!(
                "compare: {} comes after `--`, where every argument is a result of B: put flags before `--`",
                flag.display()
            )));
        }
        Ok(Settings {
            a: a.iter().map(|p| self.result_ref(p)).collect(),
            b: b.iter().map(|p| self.result_ref(p)).collect(),
            interleave: None,
            slice: self.slice.clone(),
            metrics,
            alpha: args.alpha,
            min_effect: args.min_effect,
            fail_on_regression: args.fail_on_regression,
            format: self.format(),
            output: args.output.clone(),
        })
    }

    /// `--format`, or html for `-o FILE.html`, as `run` decides it.
    fn format(&self) -> Format {
        super::run_settings::primary_format(self.format, self.output.as_deref())
    }
}

impl From<MetricArg> for Metric {
    fn from(m: MetricArg) -> Metric {
        match m {
            MetricArg::Throughput => Metric::Throughput,
            MetricArg::P50 => Metric::P50,
            MetricArg::P99 => Metric::P99,
            MetricArg::ErrorRate => Metric::ErrorRate,
        }
    }
}
