use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ProtosArgs {}

pub fn main(_args: ProtosArgs) -> anyhow::Result<ExitCode> {
    Err(crate::error::bad_input("not built yet"))
}
