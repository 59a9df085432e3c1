//! The load engine: a pacer says when, workers call, recorders measure.
pub mod balance;
pub mod engine;
pub mod flow;
pub mod logged;
pub mod pacer;
pub mod plan;
pub mod retry;
pub mod stage;
pub mod timer;
pub mod workload;
