//! `rpcmeter protos [DIR]`: the lab's .proto files, for tools that need them (ghz, grpcurl).
use crate::error::bad_input;
use crate::lab::proto::SOURCES;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ProtosArgs {
    /// Directory to write into, created when missing; the files keep their import paths.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}

pub fn main(args: ProtosArgs) -> anyhow::Result<ExitCode> {
    for (name, text) in SOURCES {
        let path = args.dir.join(name);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|_| std::fs::write(&path, text));
        written.map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
        // writeln, not println: a closed pipe is an error to report quietly, not a panic.
        writeln!(std::io::stdout(), "{}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}
