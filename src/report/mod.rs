//! Reports: the typed result (`result::Run`) that src/analysis finished from a run, or that
//! merge or a file holds, rendered by one `Export` per format (one file each). Measuring and printing stay apart, as hyperfine keeps them: nothing
//! here measures, and units (µs, MiB) appear only in the renderers (through `crate::units`).
pub mod breakdown;
pub mod csv;
pub mod html;
pub mod influx;
pub mod json;
pub mod junit;
pub mod printable;
pub mod prometheus;
pub mod rmeter;
pub mod svg;
pub mod table;

use crate::result::Run;

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
    fn render(&self, run: &Run) -> String;
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

/// A histogram a result holds (ns), as text. What reaches a renderer was made by a run or a
/// merge (which reads every input's histograms, refusing what is no histogram) or read by
/// `report` (which refuses the same): one that is not reads as empty, not as a panic.
pub(crate) fn histogram(text: &str) -> hdrhistogram::Histogram<u64> {
    crate::stats::histogram::from_text(text)
        .unwrap_or_else(|_| hdrhistogram::Histogram::new(3).expect("3 significant digits are valid"))
}
