use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {}

pub fn main(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    Err(crate::error::bad_input("not built yet"))
}
