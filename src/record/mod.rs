//! Recording: what a run measured (latency histograms, counts) and what it cost, and what the
//! engine hands its sinks as it goes (each call, each interval): below both, so neither
//! imports the other for its types.
pub mod call;
pub mod hiccup;
pub mod intervals;
pub mod resource;
pub mod shard;

pub use call::CallRecord;
pub use shard::{Counts, Shard};
