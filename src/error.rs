//! The ways a command fails, each with its exit code (docs/design.md, "Exit codes"):
//! 2 bad usage or input, 1 a run that failed or whose results could not all be written,
//! 3 an internal failure of rpcmeter itself. Every error leaves as one line on stderr.
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad usage or bad input (a broken .proto, malformed JSON, a nonsense rate), found
    /// before anything is measured.
    #[error("{0}")]
    Usage(String),
    /// The run failed: target unreachable, every call failed, an assertion breached.
    #[error("{0}")]
    RunFailed(String),
    /// A result could not be written (disk full, closed pipe); what was measured is still
    /// in the primary report when that one could be written.
    #[error("{path}: {error}")]
    Output { path: String, error: std::io::Error },
    /// rpcmeter itself could not go on (no thread or runtime could be started).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::RunFailed(_) | Failure::Output { .. } => 1,
            Failure::Internal(_) => 3,
        }
    }
}

/// Bad usage or bad input: exit code 2.
pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    Failure::Usage(message.into()).into()
}

/// A run that failed: exit code 1.
pub fn run_failed(message: impl Into<String>) -> anyhow::Error {
    Failure::RunFailed(message.into()).into()
}

/// An output that could not be written, named: exit code 1.
pub fn output_failed(path: &Path, source: std::io::Error) -> anyhow::Error {
    let path = if path == Path::new("-") { "standard output".to_string() } else { path.display().to_string() };
    Failure::Output { path, error: source }.into()
}

/// An internal failure: exit code 3.
pub fn internal(message: impl std::fmt::Display) -> anyhow::Error {
    Failure::Internal(message.to_string()).into()
}

/// Whether `err` is a write to a closed pipe (`rpcmeter man | head`): the reader has all it
/// wanted, so the command ends quietly with exit 0, as cat, grep and git do.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| match e.downcast_ref::<Failure>() {
        Some(Failure::Output { error, .. }) => error.kind() == std::io::ErrorKind::BrokenPipe,
        _ => e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe),
    })
}

/// The exit code an error maps to: its own when it is a `Failure` anywhere in the chain.
/// An I/O error that no layer classified is an output that failed (1); anything else
/// unclassified is internal (3), since every input error is classified where it is found.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(f) = err.chain().find_map(|e| e.downcast_ref::<Failure>()) {
        return f.exit_code();
    }
    if err.chain().any(|e| e.is::<std::io::Error>()) {
        1
    } else {
        3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_its_code() {
        assert_eq!(exit_code(&bad_input("x")), 2);
        assert_eq!(exit_code(&run_failed("x")), 1);
        assert_eq!(exit_code(&output_failed(Path::new("a"), std::io::Error::other("full"))), 1);
        assert_eq!(exit_code(&internal("x")), 3);
        assert_eq!(exit_code(&anyhow::Error::from(std::io::Error::other("pipe"))), 1);
        assert_eq!(exit_code(&anyhow::anyhow!("unclassified")), 3);
        assert_eq!(exit_code(&bad_input("inner").context("outer")), 2);
    }
}
