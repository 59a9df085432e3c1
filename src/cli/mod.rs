//! The command line: one file per subcommand. Each turns its raw arguments into a
//! validated plan and hands it to the engine; only this layer and `report` print.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod demo;
pub mod protos;
pub mod run;
pub mod serve;

#[derive(Parser, Debug)]
#[command(name = "rpcmeter", version, about = "A gRPC measurement lab: load, serve, measure truthfully")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Serve the lab's reference services (echo, CPU, database, key/value, stats).
    Serve(serve::ServeArgs),
    /// Load a gRPC service and report latency, throughput, statuses and client cost.
    Run(run::RunArgs),
    /// Write the lab's .proto files for other tools (ghz, grpcurl).
    Protos(protos::ProtosArgs),
    /// Self-contained demo: serve the lab in-process, measure it, print the tables.
    Demo(demo::DemoArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => err.exit(), // --help, --version
        Err(err) => {
            // One line naming the problem (clap's first), not a page of usage.
            let text = err.render().to_string();
            let first = text.lines().next().unwrap_or("bad usage").trim_start_matches("error: ");
            eprintln!("rpcmeter: error: {first}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Run(args) => run::main(args),
        Command::Protos(args) => protos::main(args),
        Command::Demo(args) => demo::main(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("rpcmeter: error: {err:#}");
            ExitCode::from(crate::error::exit_code(&err))
        }
    }
}
