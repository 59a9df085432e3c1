//! The progress line: calls, rate, errors, p99, and how far the run is when its end is known
//! (a percentage and an ETA); warm-up calls are counted apart. On a terminal it is one line
//! redrawn in place; elsewhere (a CI log, a pipe) it is a plain line every `LINE_EVERY`, as
//! k6 prints in CI, so a long run shows it is alive without flooding the log.
use super::Sink;
use crate::record::intervals::Interval;
use crate::record::intervals::IntervalRow;
use crate::units::duration;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// Where progress goes: a redrawn line on a terminal, or plain lines in a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Terminal,
    Log,
}

impl Style {
    /// Progress for a run, as standard error is: None when `quiet`.
    pub fn of_stderr(quiet: bool) -> Option<Style> {
        use std::io::IsTerminal;
        (!quiet).then(|| match std::io::stderr().is_terminal() {
            true => Style::Terminal,
            false => Style::Log,
        })
    }

    /// How often a plain line is printed: each interval on a terminal, `LINE_EVERY` in a log.
    pub fn every(self) -> Duration {
        match self {
            Style::Terminal => Duration::ZERO,
            Style::Log => LINE_EVERY,
        }
    }
}

/// How often a log gets a progress line: often enough to tell a live run from a hung one,
/// rare enough that a 10-minute run adds 60 lines.
pub const LINE_EVERY: Duration = Duration::from_secs(10);

pub struct Progress {
    /// None: plain lines on stderr.
    bar: Option<ProgressBar>,
    /// Run time of the last plain line.
    last_line: Duration,
    /// The run's planned length (warm-up included), when it is known in time.
    planned: Option<Duration>,
    calls: u64,
    warmup_calls: u64,
    failed: u64,
    threads: u32,
    /// The client's CPU time at the end of the last interval.
    cpu_before: Duration,
}

impl Progress {
    pub fn new(style: Style, planned: Option<Duration>, threads: u32) -> Progress {
        let bar = (style == Style::Terminal).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            last_line: Duration::ZERO,
            planned,
            calls: 0,
            warmup_calls: 0,
            failed: 0,
            threads: threads.max(1),
            cpu_before: Duration::ZERO,
        }
    }
}

impl Sink for Progress {
    fn interval(&mut self, iv: &Interval, row: &IntervalRow) {
        if row.warmup {
            self.warmup_calls += row.calls;
        } else {
            self.calls += row.calls;
        }
        self.failed += row.failed;
        let rate = crate::stats::rate(row.calls, row.length);
        let done = match self.planned {
            Some(planned) if !planned.is_zero() => {
                let fraction = (iv.at.as_secs_f64() / planned.as_secs_f64()).min(1.0);
                format!(" {:>3.0}%, ETA {}s,", fraction * 100.0, planned.saturating_sub(iv.at).as_secs())
            }
            _ => String::new(),
        };
        // The client's own load, live: a busy client measures itself, not the server.
        let cpu = row.client_cpu_total.saturating_sub(self.cpu_before).as_secs_f64()
            / row.length.as_secs_f64().max(1e-9)
            / self.threads as f64;
        self.cpu_before = row.client_cpu_total;
        let busy = if cpu > 0.85 {
            format!(", client CPU {:.0}%: the client may be the bottleneck", cpu * 100.0)
        } else {
            String::new()
        };
        let warmup = if self.warmup_calls > 0 { format!(" (+{} warm-up)", self.warmup_calls) } else { String::new() };
        let message = format!(
            "{done} {} calls{warmup}, {rate:.0} calls/s, {} errors, p99 {}{busy}",
            self.calls,
            self.failed,
            duration(row.p99)
        );
        match &self.bar {
            Some(bar) => bar.set_message(message),
            None if iv.at.saturating_sub(self.last_line) >= LINE_EVERY => {
                self.last_line = iv.at;
                eprintln!("progress {:.1} s:{message}", iv.at.as_secs_f64());
            }
            None => {}
        }
    }

    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        Ok(())
    }
}
