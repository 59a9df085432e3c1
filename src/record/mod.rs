//! Recording: what a run measured (latency histograms, counts) and what it cost.
pub mod resource;
