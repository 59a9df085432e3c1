//! The servers a lab measures: `rpcmeter serve` (this binary, run as a child so that the
//! client's cost printed is the client's alone), and the reference servers in other runtimes
//! (labs/servers/: grpc-go, grpc-java, Python grpcio, Ruby grpc), each built by its own build.sh into
//! the user's cache directory, once per version of its sources.
use crate::calibrate::cache_dir;
use anyhow::Context;
use include_dir::{include_dir, Dir};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The sources of the other runtimes' servers and the protos they are built from, inside the
/// binary: `rpcmeter lab` works from an installed binary, not only from a clone.
static SOURCES: Dir = include_dir!("$CARGO_MANIFEST_DIR/labs/servers");
static PROTOS: Dir = include_dir!("$CARGO_MANIFEST_DIR/proto");

/// A server's runtime: rpcmeter's own, or one of labs/servers/.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// `rpcmeter serve` (Rust, tonic)
    Rpcmeter,
    /// labs/servers/go (grpc-go)
    Go,
    /// labs/servers/java (grpc-java, netty)
    Java,
    /// labs/servers/python (grpcio, thread pool or grpc.aio)
    Python,
    /// labs/servers/ruby (grpc's RpcServer, thread pool or the async gem's Fiber scheduler)
    Ruby,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Rpcmeter => "rpcmeter",
            Runtime::Go => "go",
            Runtime::Java => "java",
            Runtime::Python => "python",
            Runtime::Ruby => "ruby",
        }
    }
}

/// The commands a build printed: its server, and its client when it has one (Java's latch client).
#[derive(Debug, Clone)]
pub struct Built {
    pub server: String,
    pub client: Option<String>,
}

/// Startup of a JVM or a Python interpreter is slow on a busy machine, but never this slow.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds (or finds built) the server of `runtime`; `Err` says in one line why it cannot be
/// (a missing toolchain, a failed build), for the lab to report as skipped.
pub fn build(runtime: Runtime) -> Result<Built, String> {
    if runtime == Runtime::Rpcmeter {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the rpcmeter binary: {e}"))?;
        return Ok(Built { server: format!("{} serve", shell_word(&exe)), client: None });
    }
    let sources = SOURCES.get_dir(runtime.name()).ok_or_else(|| format!("no sources for {}", runtime.name()))?;
    let base = cache_dir(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
        .ok_or("no cache directory: neither XDG_CACHE_HOME nor HOME is set")?;
    let dir = base.join("labs").join(format!("{}-{:016x}", runtime.name(), version(sources)));
    let commands = dir.join("commands");
    if let Ok(text) = std::fs::read_to_string(&commands) {
        if let Some(built) = parse_commands(&text) {
            return Ok(built);
        }
    }
    let fail = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", dir.display());
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&src).map_err(|e| fail("cannot create", e))?;
    // Paths stay relative to labs/servers (and proto/): the runtime's files land in src/<name>.
    write_tree(sources, &src).map_err(|e| fail("cannot write the sources", e))?;
    let src = src.join(runtime.name());
    let protos = dir.join("proto");
    write_tree(&PROTOS, &protos).map_err(|e| fail("cannot write the protos", e))?;
    let out = dir.join("out");
    eprintln!("lab: building the {} server (once per version, into {})", runtime.name(), dir.display());
    let log = std::fs::File::create(dir.join("build.log")).map_err(|e| fail("cannot create build.log", e))?;
    let output = Command::new("bash")
        .arg("build.sh")
        .arg(&out)
        .current_dir(&src)
        .env("PROTO_DIR", &protos)
        .stdin(Stdio::null())
        .stderr(log)
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let log_tail = || {
        let text = std::fs::read_to_string(dir.join("build.log")).unwrap_or_default();
        text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
    };
    if !output.status.success() {
        return Err(format!(
            "the {} server did not build ({}): {} (log: {})",
            runtime.name(),
            output.status,
            log_tail(),
            dir.join("build.log").display()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let built =
        parse_commands(&text).ok_or_else(|| format!("{} build.sh printed no `server: CMD` line", runtime.name()))?;
    std::fs::write(&commands, &text).map_err(|e| fail("cannot write", e))?;
    Ok(built)
}

/// A hash of a runtime's sources and of the protos: a new version builds into a new directory.
fn version(sources: &Dir) -> u64 {
    // SipHash with fixed keys: stable for a given rpcmeter build, which is all a cache key needs.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    for dir in [sources, &PROTOS] {
        for file in files(dir) {
            file.path().hash(&mut h);
            file.contents().hash(&mut h);
        }
    }
    h.finish()
}

fn files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut all: Vec<_> = dir.files().collect();
    for sub in dir.dirs() {
        all.extend(files(sub));
    }
    all
}

fn write_tree(dir: &Dir, base: &Path) -> std::io::Result<()> {
    for file in files(dir) {
        let path = base.join(file.path());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, file.contents())?;
    }
    Ok(())
}

fn parse_commands(text: &str) -> Option<Built> {
    let find = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix)).map(|c| c.trim().to_string());
    Some(Built { server: find("server:")?, client: find("client:") })
}

/// The last lines a failed server wrote on stderr, joined into one (None when it said nothing).
fn last_lines(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let n = lines.len();
    (n > 0).then(|| lines[n.saturating_sub(3)..].join(" / "))
}

/// A path as one shell word.
fn shell_word(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A running server, stopped (SIGINT, then killed) when dropped.
pub struct Server {
    pub label: String,
    pub runtime: Runtime,
    /// HOST:PORT, from the server's first line (`listening on HOST:PORT`).
    pub addr: String,
    child: Child,
    stdout: Option<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `built`'s server with `args` on a free loopback port and waits for its first line.
    pub fn start(runtime: Runtime, built: &Built, label: &str, args: &[String]) -> anyhow::Result<Server> {
        let port_flag = match runtime {
            Runtime::Rpcmeter => "--addr 127.0.0.1:0",
            _ => "--port 0",
        };
        let words: Vec<String> = args.iter().map(|a| shell_word(Path::new(a))).collect();
        Server::spawn(runtime, label, &format!("exec {} {port_flag} {}", built.server, words.join(" ")))
    }

    /// `built`'s rpcmeter server listening on `addr` (an address of a network namespace).
    pub fn start_at(built: &Built, label: &str, addr: &str) -> anyhow::Result<Server> {
        Server::spawn(Runtime::Rpcmeter, label, &format!("exec {} --addr {addr}", built.server))
    }

    fn spawn(runtime: Runtime, label: &str, line: &str) -> anyhow::Result<Server> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(line)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {label}"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut stderr = child.stderr.take().context("no stderr")?;
        // Whatever the server says on stderr is drained from the start, so that it never
        // blocks on a full pipe, and kept: a server that fails to start says why there.
        let said = std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = stderr.read_to_end(&mut sink);
            sink
        });
        // The server's own words and class: exit 2 (it refused its arguments) stays a usage
        // error, anything else a failed run.
        let failed = |mut child: Child, said: std::thread::JoinHandle<Vec<u8>>, what: String| {
            let _ = child.kill();
            let usage = child.wait().ok().and_then(|s| s.code()) == Some(2);
            let text = match last_lines(&said.join().unwrap_or_default()) {
                Some(said) => format!("{label} did not start: {said}"),
                None => what,
            };
            if usage {
                crate::error::bad_input(text)
            } else {
                crate::error::run_failed(text)
            }
        };
        // The first line, with a timeout: a server that never says where it listens is an error.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut first = String::new();
            let read = reader.read_line(&mut first);
            let _ = tx.send((read.map(|_| first), reader));
        });
        let (first, reader) = match rx.recv_timeout(START_TIMEOUT) {
            Ok((Ok(first), reader)) => (first, reader),
            _ => {
                let what = format!("{label} did not start within {}", humantime::format_duration(START_TIMEOUT));
                return Err(failed(child, said, what));
            }
        };
        let Some(addr) = first.trim().strip_prefix("listening on ").map(str::to_string) else {
            let what = format!("{label} did not start: its first line was {:?}", first.trim());
            return Err(failed(child, said, what));
        };
        Ok(Server { label: label.to_string(), runtime, addr, child, stdout: Some(reader) })
    }

    /// The server as a plaintext target.
    pub fn target(&self) -> Option<crate::grpc::Target> {
        let (host, port) = self.addr.rsplit_once(':')?;
        Some(crate::grpc::Target::new(host, port.parse().ok()?))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, then up to 10 s for it to end (killed after that); what it printed after its first line.
    pub fn stop(mut self) -> String {
        self.interrupt_and_wait()
    }

    fn interrupt_and_wait(&mut self) -> String {
        crate::sys::signal(&self.child, libc::SIGINT);
        let Some(stdout) = self.stdout.take() else { return String::new() };
        let rest = read_all_within(stdout, Duration::from_secs(10)).unwrap_or_default();
        let _ = self.child.kill();
        let _ = self.child.wait();
        rest
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.stdout.is_some() {
            self.interrupt_and_wait();
        }
    }
}

/// Runs a client command (a build's `client:`) with `args` to its end, at most `limit`;
/// its standard output.
pub fn run_client(command: &str, args: &[String], limit: Duration) -> anyhow::Result<String> {
    let words: Vec<String> = args.iter().map(|a| shell_word(Path::new(a))).collect();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command} {}", words.join(" ")))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {command}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let Some(out) = read_all_within(stdout, limit) else {
        let _ = child.kill();
        let _ = child.wait();
        anyhow::bail!("{command} did not end within {}", humantime::format_duration(limit));
    };
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "{command} failed ({status})");
    Ok(out)
}

/// Everything `reader` gives until its end, read on a thread of its own; None when the end
/// has not come within `limit` (a child that hangs must not hang the lab).
fn read_all_within(mut reader: impl Read + Send + 'static, limit: Duration) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = reader.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx.recv_timeout(limit).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_output_names_server_and_client() {
        let b =
            parse_commands("noise\nserver: /x/venv/bin/python /x/server.py\nclient: java -cp /x/l.jar C\n").unwrap();
        assert_eq!(b.server, "/x/venv/bin/python /x/server.py");
        assert_eq!(b.client.as_deref(), Some("java -cp /x/l.jar C"));
        assert!(parse_commands("nothing here").is_none());
    }
}
