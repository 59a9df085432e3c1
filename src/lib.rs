//! rpcmeter: a gRPC measurement lab in one binary. The layout follows the data flow of
//! docs/design.md, "Architecture (the way data flows)":
//! `cli` (flags, made into typed, validated settings) -> `app` (one orchestration per
//! subcommand, from those settings) ->
//! `schema` (method and requests) -> `load` (pacer, engine) over `grpc` (wire, transport) ->
//! `record` (histograms, counts, own cost) -> `sink` (live consumers) and `stats` + `report`
//! (numbers, then text). `lab` holds the reference services that `serve` runs. The modules
//! import each other as a DAG (tests/module_layers.rs); `units` and `sys` are leaves.
pub mod analysis;
pub mod app;
pub mod calibrate;
pub mod cli;
pub mod error;
pub mod experiments;
pub mod grpc;
pub mod history;
pub mod input;
pub mod kube;
pub mod lab;
pub mod load;
pub mod ping;
pub mod record;
pub mod replay;
pub mod report;
pub mod result;
pub mod schema;
pub mod sink;
pub mod stats;
pub mod sys;
pub mod units;
