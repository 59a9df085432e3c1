//! Recording: what a run measured (latency histograms, counts) and what it cost, and what the
//! engine hands its sinks as it goes (each call, each interval): below both, so neither
//! imports the other for its types.
pub mod call;
pub mod early;
pub mod hiccup;
pub mod intervals;
pub mod resource;
pub mod shard;

pub use call::CallRecord;
pub use shard::{Counts, Tally};

/// What the engine feeds as a run goes: each interval as it closes and, to whoever asks,
/// each call. Declared here, below both, so the engine names no sink (`sink::Sinks` is fed).
pub trait Feed {
    fn interval(&mut self, interval: &intervals::Interval);

    /// A bounded channel for every call's record, when some consumer wants each call.
    fn calls(&self) -> Option<std::sync::mpsc::SyncSender<CallRecord>>;
}
