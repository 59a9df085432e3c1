//! The two ways a command fails, each with its exit code (DESIGN.md, "Exit codes").
use std::fmt;

/// A failure that carries its exit code: 2 for bad usage or bad input, 1 for a run that failed.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Bad usage or bad input (a broken .proto, malformed JSON, a nonsense rate): exit code 2.
pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    Failure { code: 2, message: message.into() }.into()
}

/// A run that failed (target unreachable, every call failed, an assertion breached): exit code 1.
pub fn run_failed(message: impl Into<String>) -> anyhow::Error {
    Failure { code: 1, message: message.into() }.into()
}

/// The exit code an error maps to: its own when it is a `Failure` anywhere in the chain,
/// else 2, since an error not classified is almost always input we could not use.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain().find_map(|e| e.downcast_ref::<Failure>()).map_or(2, |f| f.code)
}
