//! Sinks: everything that consumes a run while it happens (progress, the interval series,
//! the HDR log, per-call details, live metrics), behind one trait. The engine
//! feeds them; none of them measures, and a failing one never loses the report.
pub mod details;
pub mod hdr_log;
pub mod metrics;
pub mod progress;

use crate::record::intervals::{Interval, IntervalRow};
use crate::record::{CallRecord, Feed};
use std::sync::mpsc;

pub trait Sink {
    /// Each interval as it closes, with its row of the interval series.
    fn interval(&mut self, interval: &Interval, row: &IntervalRow);

    /// A channel for every call's record, for a sink that wants each call (bounded: a slow
    /// consumer slows the run rather than growing memory).
    fn calls(&self) -> Option<mpsc::SyncSender<CallRecord>> {
        None
    }

    /// After the run: flush, and say what failed, naming the output.
    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The run's sinks, fed together; it keeps the interval series for the reports.
#[derive(Default)]
pub struct Sinks {
    list: Vec<Box<dyn Sink>>,
    pub rows: Vec<IntervalRow>,
    /// `--warmup auto`: the first intervals kept whole.
    pub early: Option<crate::record::early::EarlyIntervals>,
    /// Keep each row's histograms packed (`IntervalRow::packed`): a shard's run, whose
    /// result is merged interval by interval.
    pub keep_histograms: bool,
}

impl Sinks {
    pub fn add(&mut self, sink: Box<dyn Sink>) {
        self.list.push(sink);
    }

    /// Finishes every sink; the first failure is returned after all have finished.
    pub fn finish(self) -> Finished {
        let mut first = Ok(());
        for sink in self.list {
            if let (Err(e), true) = (sink.finish(), first.is_ok()) {
                first = Err(e);
            }
        }
        Finished { rows: self.rows, early: self.early, result: first }
    }
}

impl Feed for Sinks {
    fn interval(&mut self, interval: &Interval) {
        let row = IntervalRow::keeping(interval, self.keep_histograms);
        if let Some(early) = &mut self.early {
            early.keep(interval);
        }
        for sink in &mut self.list {
            sink.interval(interval, &row);
        }
        self.rows.push(row);
    }

    /// The per-call channel of the sink that wants calls (at most one does today).
    fn calls(&self) -> Option<mpsc::SyncSender<CallRecord>> {
        self.list.iter().find_map(|s| s.calls())
    }
}

/// What the sinks leave after a run.
pub struct Finished {
    pub rows: Vec<IntervalRow>,
    pub early: Option<crate::record::early::EarlyIntervals>,
    /// The first sink failure, naming its output.
    pub result: anyhow::Result<()>,
}
