//! `--hdr-log FILE`: an HdrHistogram interval log of call latency (ns recorded, ms shown by
//! HdrHistogram's own tools), with the version header and legend line those tools write.
use super::Sink;
use crate::record::intervals::Interval;
use crate::record::intervals::IntervalRow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct HdrLog {
    path: PathBuf,
    out: BufWriter<File>,
    /// The first write error; later intervals are not written.
    error: Option<std::io::Error>,
}

/// Values are ns; HdrHistogram's tools show the max column in ms.
const MAX_VALUE_DIVISOR: f64 = 1e6;

impl HdrLog {
    /// Writes the header at once, so that a file that cannot be written fails before the run.
    pub fn new(path: PathBuf, file: File) -> anyhow::Result<HdrLog> {
        let mut out = BufWriter::new(file);
        let started = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let header = (|| {
            writeln!(out, "#[Histogram log format version 1.3]")?;
            writeln!(out, "#[StartTime: {started:.3} (seconds since epoch)]")?;
            writeln!(out, "#[BaseTime: {started:.3} (seconds since epoch)]")?;
            writeln!(out, "#[MaxValueDivisor: {MAX_VALUE_DIVISOR:.3}]")?;
            writeln!(out, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
            out.flush()
        })();
        header.map_err(|e| crate::error::output_failed(&path, e))?;
        Ok(HdrLog { path, out, error: None })
    }

    /// One line as HdrHistogram's interval log writers write it: tag, start and length in s
    /// (from the base time), the max in ms, the histogram.
    fn write(&mut self, iv: &Interval) -> std::io::Result<()> {
        let h = &iv.tally.call_latency;
        writeln!(
            self.out,
            "Tag={},{:.3},{:.3},{:.3},{}",
            if iv.warmup { "warmup" } else { "measured" },
            iv.at.saturating_sub(iv.length).as_secs_f64(),
            iv.length.as_secs_f64(),
            h.max() as f64 / MAX_VALUE_DIVISOR,
            crate::record::shard::to_text(h)
        )
    }
}

impl Sink for HdrLog {
    fn interval(&mut self, iv: &Interval, _row: &IntervalRow) {
        if self.error.is_none() {
            self.error = self.write(iv).err();
        }
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        let flushed = self.out.flush();
        match self.error.take().map_or(flushed, Err) {
            Ok(()) => Ok(()),
            Err(e) => Err(crate::error::output_failed(&self.path, e)),
        }
    }
}
