//! Recording: what a run measured (latency histograms, counts) and what it cost.
pub mod hiccup;
pub mod resource;
pub mod shard;

pub use shard::{Counts, Tally};
