//! Test servers with known behaviour (ground truth for the run engine's accuracy):
//! a real tonic echo server on 127.0.0.1 port 0 with an optional stall or rejection rule.
#![allow(dead_code)]
pub mod lab_process;
pub mod wait;
use rpcmeter::lab::proto::echo::echo_service_server::{EchoService, EchoServiceServer};
use rpcmeter::lab::proto::echo::Message;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// What the echo server does besides echoing.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    Echo,
    /// When call number `at` (1-based) arrives, all handling stops for `stall`.
    StallAt {
        at: u64,
        stall: Duration,
    },
    /// Attempt number n (1-based, server-wide) is rejected with RESOURCE_EXHAUSTED unless n % every == 0.
    RejectUnlessMultipleOf {
        every: u64,
    },
    /// As `RejectUnlessMultipleOf`, with UNAVAILABLE, and each attempt's arrival time kept
    /// (`TestServer::arrivals`): the gaps between a call's attempts are its backoffs.
    UnavailableUnlessMultipleOf {
        every: u64,
    },
    /// Each call takes `slow` until `warm` after the first call, then `fast` (a warm-up).
    WarmsUp {
        slow: Duration,
        fast: Duration,
        warm: Duration,
    },
    /// Each call takes `d`, to some tens of µs (a thread's sleep: tokio's timer would round
    /// up to its next millisecond).
    Delay(Duration),
    /// Each call takes `base + per_second x seconds since the first call` (never steady).
    Drifts {
        base: Duration,
        per_second: Duration,
    },
    /// Call number n (1-based, server-wide) takes `slow` when n % every == 0, else no time:
    /// a tail that a client's deadline can cut off.
    SlowEvery {
        every: u64,
        slow: Duration,
    },
}

struct Echo {
    behaviour: Behaviour,
    calls: AtomicU64,
    stalled_until: Mutex<Option<Instant>>,
    first_call: std::sync::OnceLock<Instant>,
    arrivals: Mutex<Vec<Instant>>,
    /// Every call's arrival and request content, in order of arrival.
    contents: Mutex<Vec<(Instant, String)>>,
}

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        let arrived = Instant::now();
        let n = self.calls.fetch_add(1, SeqCst) + 1;
        self.contents.lock().unwrap().push((arrived, request.get_ref().content.clone()));
        let since_first = self.first_call.get_or_init(Instant::now).elapsed();
        match self.behaviour {
            Behaviour::WarmsUp { slow, fast, warm } => {
                take(if since_first < warm { slow } else { fast }).await;
            }
            Behaviour::Drifts { base, per_second } => {
                take(base + per_second.mul_f64(since_first.as_secs_f64())).await;
            }
            Behaviour::Delay(d) => {
                let _ = tokio::task::spawn_blocking(move || std::thread::sleep(d)).await;
            }
            Behaviour::Echo => {}
            Behaviour::SlowEvery { every, slow } => {
                if n.is_multiple_of(every) {
                    take(slow).await;
                }
            }
            Behaviour::StallAt { at, stall } => {
                let until = {
                    let mut s = self.stalled_until.lock().unwrap();
                    if n == at {
                        *s = Some(Instant::now() + stall);
                    }
                    *s
                };
                if let Some(until) = until.filter(|u| *u > Instant::now()) {
                    tokio::time::sleep_until(until.into()).await;
                }
            }
            Behaviour::RejectUnlessMultipleOf { every } => {
                if !n.is_multiple_of(every) {
                    return Err(Status::resource_exhausted("rejected by the test server"));
                }
            }
            Behaviour::UnavailableUnlessMultipleOf { every } => {
                self.arrivals.lock().unwrap().push(arrived);
                if !n.is_multiple_of(every) {
                    return Err(Status::unavailable("rejected by the test server"));
                }
            }
        }
        Ok(Response::new(request.into_inner()))
    }
}

/// Holds a call for `d` without taking a core (tokio's timer: up to a millisecond more;
/// a spin would take from the 2 cores the client measures with).
async fn take(d: Duration) {
    tokio::time::sleep(d).await;
}

/// A tonic server on a thread and runtime of its own, on 127.0.0.1 port 0, until stopped or
/// dropped.
pub struct ThreadServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ThreadServer {
    /// Serves what `routes` returns; it runs inside the server's runtime, so it may spawn
    /// tasks, which end with the server.
    pub fn start(routes: impl FnOnce() -> tonic::service::Routes + Send + 'static) -> ThreadServer {
        ThreadServer::start_on("127.0.0.1:0".parse().unwrap(), routes)
    }

    /// `start` on `addr` (a server restarted on the port it had).
    pub fn start_on(
        addr: SocketAddr,
        routes: impl FnOnce() -> tonic::service::Routes + Send + 'static,
    ) -> ThreadServer {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                let routes = routes();
                let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                // No Nagle: a response written in parts must not wait for the client's delayed ACK.
                let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                tonic::transport::Server::builder()
                    .add_routes(routes)
                    .serve_with_incoming_shutdown(incoming, async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        ThreadServer { addr: addr_rx.recv().unwrap(), stop: Some(stop_tx), thread: Some(thread) }
    }

    /// Stops serving and closes the connections, as a dying server does.
    pub fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        // Dropping the sender without waiting: a stalled server must not hang the test.
        self.stop.take();
    }
}

/// The echo server with a known behaviour.
pub struct TestServer {
    pub addr: SocketAddr,
    server: ThreadServer,
    calls: Arc<Echo>,
}

impl TestServer {
    pub fn start(behaviour: Behaviour) -> TestServer {
        TestServer::start_on("127.0.0.1:0".parse().unwrap(), behaviour)
    }

    /// `start` on `addr` (a server restarted on the port it had).
    pub fn start_on(addr: SocketAddr, behaviour: Behaviour) -> TestServer {
        let echo = Arc::new(Echo {
            behaviour,
            calls: AtomicU64::new(0),
            stalled_until: Mutex::new(None),
            first_call: std::sync::OnceLock::new(),
            arrivals: Mutex::new(Vec::new()),
            contents: Mutex::new(Vec::new()),
        });
        let service = EchoServiceServer::from_arc(echo.clone());
        let server = ThreadServer::start_on(addr, move || tonic::service::Routes::new(service));
        TestServer { addr: server.addr, server, calls: echo }
    }

    /// Calls that reached the server.
    pub fn calls(&self) -> u64 {
        self.calls.calls.load(SeqCst)
    }

    /// Stops serving and closes the connections, as a dying server does.
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// When each attempt arrived, in order (kept by `UnavailableUnlessMultipleOf` only).
    pub fn arrivals(&self) -> Vec<Instant> {
        self.calls.arrivals.lock().unwrap().clone()
    }

    /// Every call's arrival and request content, in order of arrival.
    pub fn contents(&self) -> Vec<(Instant, String)> {
        self.calls.contents.lock().unwrap().clone()
    }
}

/// The binary under test, for a test to add its arguments to.
pub fn rpcmeter() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
}

/// How long a finished command may take: one that hangs is killed and fails its test
/// (with what it printed) instead of stalling the suite.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// Runs `cmd` to its end with stdin closed: its exit code (None when a signal ended it),
/// standard output and standard error.
pub fn outcome(cmd: Command) -> (Option<i32>, String, String) {
    let out = assert_cmd::Command::from_std(cmd).timeout(COMMAND_LIMIT).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rpcmeter ARGS`, run to its end: see `outcome`.
pub fn rpcmeter_with<I, S>(args: I) -> (Option<i32>, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = rpcmeter();
    cmd.args(args);
    outcome(cmd)
}

pub fn echo_proto() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto/echo.proto")
}

/// `rpcmeter run` against `addr` on the echo method, with extra arguments.
pub fn run_echo(addr: SocketAddr, extra: &[&str]) -> Command {
    let mut cmd = rpcmeter();
    // --no-save: tests never record into the user's run history.
    cmd.args(["run", "--plaintext", "--quiet", "--no-save", "--proto"])
        .arg(echo_proto())
        .args(["--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#])
        .arg(addr.to_string())
        .args(extra);
    cmd
}

/// Runs to the end and parses `--format json` from stdout; panics with stderr on failure.
pub fn json_of(mut cmd: Command) -> serde_json::Value {
    let out = cmd.args(["--format", "json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run failed ({:?}): {stderr}", out.status);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Every call accounted once: total = ok + failed = sum of statuses.
pub fn assert_accounted(r: &serde_json::Value) {
    let q = &r["requests"];
    let total = q["total"].as_u64().unwrap();
    assert_eq!(total, q["ok"].as_u64().unwrap() + q["failed"].as_u64().unwrap(), "{r}");
    let sum: u64 = r["statuses"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, sum, "{r}");
}

/// The longest the run's client was held up beyond a 1 ms sleep (`client.hiccup_us.max`, its
/// own jHiccup-style meter; zero when the run did not measure it): how busy the machine was
/// for this run, measured by the run itself.
pub fn client_hiccup_max(r: &serde_json::Value) -> Duration {
    let us = r["client"]["hiccup_us"]["max"].as_f64().unwrap_or(0.0);
    Duration::from_secs_f64(us / 1e6)
}

/// Beyond this hiccup, a run's timing truth is not checked from above: the machine was busy
/// enough to delay a burst of answers by far more than its hiccups show (a 2-core machine at a
/// load of 22 held 500 answers released together 1.3 s, with hiccups of at most 0.23 s).
pub const TOO_BUSY: Duration = Duration::from_millis(100);

/// The machine's load (the 1-minute average of runnable tasks, /proc/loadavg) when it is
/// above its number of cores: a run's timing then depends on its share of them, which no
/// client measure bounds (a stalled server's 500 answers released together took 0.4 s more to
/// read with the client's hiccups under 62 ms, at a load of 22 on 2 cores). None when the
/// cores keep up, or the load cannot be read.
pub fn machine_busy() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    (load > cores).then_some(load)
}
