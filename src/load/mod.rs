//! The load engine: a pacer says when, workers call, recorders measure.
pub mod transport;
