//! `rpcmeter demo`: the README's main job. Starts `rpcmeter serve` on a free port, then
//! measures it the way the experiments of docs/experiments.md should have: closed and open
//! loop, echo and CPU, and the server's own count beside the client's. Each step is a plain
//! `rpcmeter run`. The server is a child process so that the client's cost printed is the
//! client's alone.
use crate::app::run::run;
use crate::experiments::servers::{self, Runtime, Server};
use std::io::Write as _;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Measured time of each step
    #[arg(long, value_parser = crate::cli::parse::positive_duration, default_value = "3s")]
    pub duration: std::time::Duration,
    /// Record the demo's runs in the run history (as `run` does); by default a demo leaves
    /// no trace there, since the user ran no measurement of their own
    #[arg(long)]
    pub save: bool,
}

pub fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let control = super::interruptible()?;
    let built = servers::build(Runtime::Rpcmeter).map_err(crate::error::internal)?;
    let server = Server::start(Runtime::Rpcmeter, &built, "rpcmeter serve", &[])?;
    let addr = server.addr.clone();
    let z = humantime::format_duration(args.duration).to_string();
    let z = z.as_str();
    let steps: [(&str, Vec<&str>); 4] = [
        (
            "Echo, closed loop: 8 workers on one connection, 1 s warm-up excluded",
            vec!["--call", "EchoService/echo", "-d", r#"{"content":"hello"}"#, "-c", "8", "--warmup", "1s", "-z", z],
        ),
        (
            "Echo, open loop at 5000 calls/s: a backlog counts from the intended send time (coordinated omission corrected)",
            vec!["--call", "EchoService/echo", "-d", r#"{"content":"hello"}"#, "--rps", "5000", "-z", z],
        ),
        (
            "CPU (fib 30 per call), closed loop: 4 workers",
            vec!["--call", "rpcmeter.lab.v1.TestService/Cpu", "-c", "4", "-z", z],
        ),
        (
            "CPU, open loop at 100 calls/s with retries on RESOURCE_EXHAUSTED",
            vec![
                "--call",
                "rpcmeter.lab.v1.TestService.Cpu",
                "--rps",
                "100",
                "-z",
                z,
                "--max-retries",
                "3",
                "--retry-ms",
                "50",
            ],
        ),
    ];
    for (title, flags) in steps {
        let mut argv = vec!["rpcmeter run", "--plaintext", "--quiet"];
        argv.extend(flags);
        argv.push(&addr);
        let words: Vec<String> = argv.iter().skip(1).map(|a| a.to_string()).collect();
        // writeln, not println: a closed pipe is an error to report quietly, not a panic.
        writeln!(std::io::stdout(), "\n=== {title}\n$ rpcmeter {}", crate::experiments::command_line(&words))?;
        // Read as `rpcmeter run` reads them, so that the demo shows commands a user can copy.
        let parsed = super::run::parse_words(&argv)?;
        let mut settings = parsed.settings(words)?;
        if !args.save {
            settings.history = None;
        }
        run(settings, control.clone())?;
    }
    let mut out = std::io::stdout();
    writeln!(out, "\n=== The server's own count (server-side throughput beside the client's)")?;
    write!(out, "{}", server.stop())?;
    Ok(ExitCode::SUCCESS)
}
