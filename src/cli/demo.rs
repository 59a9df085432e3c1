//! `rpcmeter demo`: the README's main job. Serves the lab in-process on a free port, then
//! measures it the way the seeds should have: closed and open loop, echo and CPU, and the
//! server's own count beside the client's. Each step is a plain `rpcmeter run`.
use super::run::{self, RunArgs};
use crate::lab::{LabConfig, LabServer};
use clap::Parser;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Measured time of each step
    #[arg(long, default_value = "3s")]
    pub duration: String,
}

/// Parses `rpcmeter run` arguments, so that the demo shows commands a user can copy.
#[derive(Parser)]
struct RunOnly {
    #[command(flatten)]
    args: RunArgs,
}

pub fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    run::duration("--duration", &args.duration)?;
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() })?;
    let addr = server.local_addr().to_string();
    let z = args.duration.as_str();
    let steps: [(&str, Vec<&str>); 4] = [
        (
            "Echo, closed loop: 8 workers on one connection, 1 s warm-up excluded",
            vec!["--call", "EchoService/echo", "-d", r#"{"content":"hello"}"#, "-c", "8", "--warmup", "1s", "-z", z],
        ),
        (
            "Echo, open loop at 5000 calls/s: latency from the intended send time (no coordinated omission)",
            vec!["--call", "EchoService/echo", "-d", r#"{"content":"hello"}"#, "--rps", "5000", "-z", z],
        ),
        (
            "CPU (fib 30 per call), closed loop: 4 workers",
            vec!["--call", "rpcmeter.lab.v1.TestService/Cpu", "-c", "4", "-z", z],
        ),
        (
            "CPU, open loop at 100 calls/s with retries on RESOURCE_EXHAUSTED",
            vec!["--call", "rpcmeter.lab.v1.TestService.Cpu", "--rps", "100", "-z", z, "--max-retries", "3", "--retry-ms", "50"],
        ),
    ];
    for (title, flags) in steps {
        let mut argv = vec!["rpcmeter run", "--plaintext", "--quiet"];
        argv.extend(flags);
        argv.push(&addr);
        println!("\n=== {title}\n$ {} ", argv.join(" ").replace(r#"{"content":"hello"}"#, r#"'{"content":"hello"}'"#));
        let parsed = RunOnly::try_parse_from(&argv)?;
        run::main(parsed.args)?;
    }
    println!("\n=== The server's own count (seed 004: server-side throughput beside the client's)");
    print!("{}", super::serve::summary(&server.shutdown()));
    Ok(ExitCode::SUCCESS)
}
