//! The application layer: one function per subcommand orchestrates the parts (schema, load,
//! sinks, report) from typed settings that the command line (`cli`) made and checked. It
//! reads no flag struct and never imports `cli`; nothing in it measures. It renders only the
//! reports that are a command's own, not a run's (compare's, ping's and sweep's tables,
//! history's list, and their HTML pages in `pages`).
pub mod compare;
pub mod coordinator;
pub mod history;
pub mod interleave;
pub mod merge;
pub mod outputs;
pub mod pages;
pub mod ping;
pub mod redact;
pub(crate) mod replay;
pub mod report;
pub mod run;
pub mod server_side;
pub mod shards;
pub mod sweep;
