//! Reports: the `Summary` that src/analysis finished from a run's result, rendered by one
//! `Export` per format (one file each). Measuring and printing stay apart, as hyperfine keeps them: nothing
//! here measures, and units (µs, MiB) appear only in the renderers (through `crate::units`).
pub mod csv;
pub mod html;
pub mod influx;
pub mod json;
pub mod junit;
pub mod of_result;
pub mod printable;
pub mod prometheus;
pub mod rmeter;
pub mod svg;
pub mod table;

// The summary is the analysis's (src/analysis); renderers take it from here as before.
pub use crate::analysis::{
    Checked, Client, ErrorKind, Messages, Meta, Notice, NoticeKind, Phase, Requests, Round, ServerSide, SteadyState,
    Summary, NOT_JUDGED,
};
use crate::load::pacer::{Arrival, Pacer};

/// The report formats; each is one `Export`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    Rmeter,
    /// Prometheus text exposition of the result (as ghz's `prometheus`).
    Prometheus,
    /// InfluxDB line protocol: the run (as ghz's `influx-summary`) and its intervals.
    Influx,
    /// JUnit XML of the `--assert` checks, for CI.
    Junit,
    /// The HTML page `rpcmeter report` draws of the result (what `-o FILE.html` writes).
    Html,
}

/// Renders a whole run as one document.
pub trait Export {
    fn render(&self, summary: &Summary) -> String;
}

impl Format {
    pub fn exporter(self) -> &'static dyn Export {
        match self {
            Format::Table => &table::Table,
            Format::Json => &json::Json,
            Format::Csv => &csv::Csv,
            Format::Rmeter => &rmeter::Rmeter,
            Format::Prometheus => &prometheus::Prometheus,
            Format::Influx => &influx::Influx,
            Format::Junit => &junit::Junit,
            Format::Html => &html::Page,
        }
    }
}

/// The mode as words: "closed loop, 8 workers".
pub fn describe_load(s: &Summary) -> String {
    match &s.pacer {
        Pacer::Open(rate, Arrival::Uniform) => {
            format!("open loop at {} calls/s, at most {} in flight", rate, s.concurrency)
        }
        Pacer::Open(rate, Arrival::Poisson { seed }) => format!(
            "open loop, Poisson arrivals (seed {seed}) at {} calls/s, at most {} in flight",
            rate, s.concurrency
        ),
        Pacer::Open(rate, Arrival::Logged) => {
            format!("open loop on the log's schedule (mean {rate} calls/s), at most {} in flight", s.concurrency)
        }
        Pacer::Burst { .. } => format!("bursts of {}", s.concurrency),
        Pacer::Closed => match &s.active_workers {
            Some(stages) => format!("closed loop, {} workers, active in stages {stages}", s.concurrency),
            None => format!("closed loop, {} workers", s.concurrency),
        },
    }
}
