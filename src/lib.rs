//! rpcmeter: a gRPC measurement lab in one binary. The layout follows the data flow of
//! docs/design.md, "Architecture (the way data flows)": `cli` parses and validates, `schema`
//! resolves methods and builds requests, `load` paces and calls, `record` measures, `stats`
//! and `report` turn results into text. `lab` holds the reference services that `serve` runs.
pub mod cli;
pub mod error;
pub mod lab;
pub mod load;
pub mod record;
pub mod report;
pub mod schema;
pub mod stats;
