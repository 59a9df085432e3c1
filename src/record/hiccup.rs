//! Scheduler hiccups, by jHiccup's method: a thread sleeps 1 ms in a loop and records how
//! much later than asked it woke. Run beside a load, it shows when the client's own threads
//! were held up (a busy machine, a stolen core): a stall the client adds to the latencies it
//! times. `calibrate` measures the same on an idle client, the floor to compare with.
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// jHiccup's resolution.
pub const SLEEP: Duration = Duration::from_millis(1);

/// A running meter; `stop` returns the overshoots (ns).
pub struct HiccupMeter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Histogram<u64>>>,
}

impl HiccupMeter {
    /// Starts the meter's thread; None when no thread can be started (the run goes on without).
    pub fn start() -> Option<HiccupMeter> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rpcmeter-hiccup".into())
            .spawn(move || {
                // Without timer slack, as the open loop's pacer sleeps: the meter then shows
                // the machine's wake-ups, not the 50 µs the kernel may add by default.
                crate::sys::no_timer_slack();
                // A fixed-size histogram: flat in memory however long the run.
                let mut h = super::shard::new_histogram();
                while !flag.load(Relaxed) {
                    let start = Instant::now();
                    std::thread::sleep(SLEEP);
                    h.saturating_record(start.elapsed().saturating_sub(SLEEP).as_nanos().min(u64::MAX as u128) as u64);
                }
                h
            })
            .ok()?;
        Some(HiccupMeter { stop, thread: Some(thread) })
    }

    pub fn stop(mut self) -> Option<Histogram<u64>> {
        self.stop.store(true, Relaxed);
        self.thread.take()?.join().ok()
    }

    /// Measures for `window` on an otherwise idle client.
    pub fn measure_for(window: Duration) -> Option<Histogram<u64>> {
        let meter = HiccupMeter::start()?;
        std::thread::sleep(window);
        meter.stop()
    }
}

impl Drop for HiccupMeter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_records_about_one_overshoot_per_millisecond() {
        let h = HiccupMeter::measure_for(Duration::from_millis(200)).unwrap();
        // At most one sample per ms; a loaded machine gives fewer, never none.
        assert!(h.len() > 10 && h.len() <= 200, "{} samples", h.len());
    }
}
