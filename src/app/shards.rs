//! `run --shards N`: the load split over N local processes, each `run --shard I/N` joining
//! a coordinator in the parent (app/coordinator.rs), their results merged exactly. The same
//! path as a distributed run on Kubernetes (`rpcmeter kube`), on one machine: for a many-core host, and for tests. No
//! shard outlives the parent: signals are passed on, and the kernel ends shards whose parent died.
use super::coordinator::trust::{Credentials, Fingerprint, Secret, SECRET_ENV};
use super::coordinator::{conclude, Conclusion, Event, Hub, Outcome};
use super::merge;
use crate::error::run_failed;
use crate::history::SaveTo;
use crate::replay::source::Scan;
use crate::report::Format;
use crate::stats::assertions::Assertion;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Runs the shards as child processes that join a coordinator in this process (the same
/// hub as `--coordinator`'s: one start instant, results over its connections), passes on the
/// signals the parent gets, and merges what they measured (all of it, or what they had when
/// interrupted: marked partial), judged and recorded once.
///
/// What the parent of `run --shards` does with the merged run: the whole run's flags.
pub struct Whole {
    pub shards: u32,
    pub format: Format,
    pub output: Option<PathBuf>,
    pub join_timeout: Duration,
    /// `--assert`, judged once on the merged run (the shards never judge their share).
    pub checks: Vec<Assertion>,
    /// Where the merged run is recorded (the shards record nothing).
    pub history: Option<SaveTo>,
    /// The run's fingerprint, which every shard's must match.
    pub fingerprint: Fingerprint,
    /// Print the merged progress (None: `--quiet`).
    pub progress: Option<crate::sink::progress::Style>,
    /// A `--replay` log's scan, given to each shard on its standard input
    /// (`--replay-scan-stdin`): the shard reads the log only to send its calls.
    pub scan: Option<Arc<Scan>>,
}

/// `run --shards`: `arguments` are each child's `run` flags, the parent's own (--shards,
/// --join-timeout, -o, --format, -q, --history, --no-save) already taken out.
pub fn run_local(whole: Whole, arguments: &[String]) -> anyhow::Result<ExitCode> {
    let Whole { shards, format, output, join_timeout, checks, history, fingerprint, progress, scan } = whole;
    let exe = std::env::current_exe().map_err(|e| crate::error::internal(format!("cannot find rpcmeter: {e}")))?;
    // Before any child starts: from here on a signal is the parent's to pass on, never its end.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| crate::error::internal(format!("cannot handle signals: {e}")))?;
    // A secret of this run's own, handed to its children alone (their environment).
    let (secret, secret_text) = Secret::generate()?;
    let mut hub = Hub::listen("127.0.0.1:0", shards, join_timeout, Credentials { secret, fingerprint })?;
    hub.progress = progress;
    let (addr, closer) = (hub.local_addr().to_string(), hub.closer.clone());
    // The children are signalled by this process, never told to stop by the hub.
    let hub = std::thread::spawn(move || hub.run(None));
    let scan = scan.map(|scan| written(&scan)).transpose()?;
    let mut children = spawn(&exe, arguments, shards, (&addr, join_timeout), &secret_text, scan)?;
    let interrupted = pass_signals(&mut signals, &mut children);
    // Every child has ended: no result is coming that has not come.
    let _ = closer.send(Event::Closed);
    let gathered = hub.join().map_err(|_| crate::error::internal("the coordinator's thread panicked"))?;
    let mut outcome = gathered.unwrap_or_default();
    let mut failed = finish_shards(children, &mut outcome, shards);
    if outcome.results.is_empty() && outcome.intervals.is_empty() {
        return Err(run_failed(match interrupted {
            true => format!("interrupted before any shard had a result ({})", failed.join("; ")),
            false => failed.join("; "),
        }));
    }
    // A shard missing is named once, as missing, not again as failed.
    failed.retain(|f| !outcome.missing.keys().any(|i| f.starts_with(&format!("shard {i}/{shards}:"))));
    let end = Conclusion {
        count: shards,
        checks: &checks,
        format,
        output: output.as_deref(),
        history: history.as_ref(),
        interrupted,
        failed,
    };
    conclude(&outcome, end)
}

/// A scan as each shard reads it on its standard input.
fn written(scan: &Scan) -> anyhow::Result<Arc<Vec<u8>>> {
    let mut bytes = Vec::new();
    scan.write_to(&mut bytes).map_err(|e| crate::error::internal(format!("cannot write the log's scan: {e}")))?;
    Ok(Arc::new(bytes))
}

/// Starts the `shards` children, each told its index, the hub (`join`: its address and the
/// time to join it) and the secret, and given `scan` on its standard input; on a failure
/// kills those already started.
fn spawn(
    exe: &std::path::Path,
    arguments: &[String],
    shards: u32,
    (addr, join_timeout): (&str, Duration),
    secret_text: &str,
    scan: Option<Arc<Vec<u8>>>,
) -> anyhow::Result<Vec<Shard>> {
    let mut children = Vec::new();
    for index in 0..shards {
        let mut command = Command::new(exe);
        command
            .arg("run")
            .args(arguments)
            .args(["--shard", &format!("{index}/{shards}"), "--join", addr])
            .args(["--join-timeout", &humantime::format_duration(join_timeout).to_string()])
            // A shard's result is a part: only the whole run is worth recording. It comes back
            // over the hub's connection (or, if that fails, through a pipe), so no file is left
            // behind however the run ends.
            .args(["--format", "json", "-q", "--no-save"])
            .env(SECRET_ENV, secret_text)
            .stdin(if scan.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if scan.is_some() {
            command.arg("--replay-scan-stdin");
        }
        bound_to_parent(&mut command);
        match command.spawn() {
            Ok(child) => children.push(Shard::watch(index, child, scan.clone())),
            Err(e) => {
                stop(&mut children, libc::SIGKILL);
                return Err(crate::error::internal(format!("cannot start shard {index}: {e}")));
            }
        }
    }
    Ok(children)
}

/// Until every shard has ended: each signal passed on as `run` takes it (once: drain and
/// report; twice: stop now), a third and later kill the shards outright. Whether any came.
fn pass_signals(signals: &mut Signals, children: &mut [Shard]) -> bool {
    let mut received = 0;
    while children.iter_mut().any(|c| c.running()) {
        for signal in signals.pending() {
            received += 1;
            // A shard's `run` handles SIGINT and SIGTERM; a hang-up ends it like SIGTERM.
            let passed = match (received, signal) {
                (3.., _) => libc::SIGKILL,
                (_, SIGINT) => SIGINT,
                _ => SIGTERM,
            };
            stop(children, passed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    received > 0
}

/// Waits for each shard's end; a result it printed rather than gave the hub is taken from
/// its output, one it never gave is missing. The failed shards, each with what it said.
fn finish_shards(children: Vec<Shard>, outcome: &mut Outcome, shards: u32) -> Vec<String> {
    let mut failed = Vec::new();
    for child in children {
        let (index, success, stdout, said) = child.finish();
        let label = format!("shard {index}/{shards}");
        // A shard that could not give its result to the hub printed it.
        if let std::collections::btree_map::Entry::Vacant(place) = outcome.results.entry(index) {
            if let Some(input) = merge::read_stream(&stdout, &label).ok().and_then(|(read, _)| read.into_iter().next())
            {
                place.insert(input.result);
            }
        }
        if outcome.results.contains_key(&index) {
            outcome.missing.remove(&index);
        } else {
            outcome.missing.insert(index, said.clone());
        }
        if !success {
            failed.push(format!("{label}: {said}"));
        }
    }
    failed
}

/// How a shard that printed nothing on stderr ended: by which signal, or with which code.
fn ended_silently(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.signal(), status.code()) {
        (Some(signal), _) => format!("killed by signal {signal} without a word"),
        (None, Some(code)) => format!("exited with code {code} without a word"),
        (None, None) => format!("ended without a word ({status})"),
    }
}

/// Sends `signal` to every shard still running (not yet waited for, so its pid is still its).
fn stop(children: &mut [Shard], signal: i32) {
    for child in children.iter_mut().filter(|c| !c.ended) {
        crate::sys::signal(&child.child, signal);
    }
}

/// A shard in a process group of its own, so that a terminal's Ctrl-C reaches the parent
/// alone (which passes it on once: a shard that got it twice would stop instead of drain),
/// and, on Linux, sent SIGTERM by the kernel when the parent dies, even by SIGKILL.
fn bound_to_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    crate::sys::ended_with_parent(command);
}

/// A running shard, its output read on threads of its own (a shard blocked on a full pipe
/// would never end).
struct Shard {
    index: u32,
    child: Child,
    ended: bool,
    status: Option<std::process::ExitStatus>,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Shard {
    /// `input`: what the shard reads on its standard input, written on a thread of its own
    /// (a shard that failed before reading it ends the write, never the parent).
    fn watch(index: u32, mut child: Child, input: Option<Arc<Vec<u8>>>) -> Shard {
        fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = from.read_to_end(&mut all);
                all
            })
        }
        if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
            std::thread::spawn(move || stdin.write_all(&input));
        }
        let stdout = child.stdout.take().map(drain).unwrap_or_else(|| drain(std::io::empty()));
        let stderr = child.stderr.take().map(drain).unwrap_or_else(|| drain(std::io::empty()));
        Shard { index, child, ended: false, status: None, stdout, stderr }
    }

    fn running(&mut self) -> bool {
        if !self.ended {
            match self.child.try_wait() {
                Ok(status) => (self.ended, self.status) = (status.is_some(), status),
                // It cannot be waited for (never seen): counted as ended, and as failed.
                Err(_) => self.ended = true,
            }
        }
        !self.ended
    }

    /// Whether it succeeded, what it printed, the last line it said on stderr.
    fn finish(mut self) -> (u32, bool, String, String) {
        let status = self.status.take();
        let stdout = String::from_utf8_lossy(&self.stdout.join().unwrap_or_default()).into_owned();
        let stderr = self.stderr.join().unwrap_or_default();
        let last = String::from_utf8_lossy(&stderr).lines().last().unwrap_or("").trim().to_string();
        // A shard killed says nothing: its end says what happened to it.
        let said = match (last.is_empty(), status) {
            (false, _) => last,
            (true, Some(status)) => ended_silently(status),
            (true, None) => "it gave no exit status".to_string(),
        };
        (self.index, status.is_some_and(|s| s.success()), stdout, said)
    }
}
