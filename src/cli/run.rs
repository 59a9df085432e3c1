use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct RunArgs {}

pub fn main(_args: RunArgs) -> anyhow::Result<ExitCode> {
    Err(crate::error::bad_input("not built yet"))
}
