use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {}

pub fn main(_args: DemoArgs) -> anyhow::Result<ExitCode> {
    Err(crate::error::bad_input("not built yet"))
}
