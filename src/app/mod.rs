//! The application layer: raw flags (`cli`) become validated settings here, and one function
//! per subcommand orchestrates the parts (schema, load, sinks, report). Nothing below this
//! layer reads flags; nothing in it measures or renders.
pub mod compare;
pub mod coordinator;
pub mod history;
pub mod merge;
pub mod outputs;
pub mod ping;
pub mod redact;
pub mod report;
pub mod run;
pub mod server_side;
pub mod shards;
pub mod sweep;
