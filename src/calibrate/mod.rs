//! `rpcmeter calibrate`: the floors of this machine and of rpcmeter itself (clock, timers,
//! wake-ups, loopback, a null gRPC call, one client thread's most calls/s, scheduler
//! hiccups), each from an HDR histogram, cached per machine. Durations here, units only in
//! `units`.
use crate::error::internal;
use crate::grpc::{wire, CallSpec, Connection, Connector, PreparedCall, Target};
use crate::lab::{LabConfig, LabServer};
use crate::record::hiccup::HiccupMeter;
use crate::stats::Statistic;
use crate::units::{duration, fine_duration};
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Sample counts and time bounds: every step ends at whichever comes first.
const CLOCK_PAIRS: u64 = 10_000;
const SLEEP: Duration = Duration::from_millis(1);
const SLEEPS: u64 = 200;
const WAKEUPS: u64 = 1_000;
/// How long the writer waits before each wake-up, so that the reader is blocked again.
const WAKEUP_PAUSE: Duration = Duration::from_micros(200);
const BUSY_PINGS: u64 = 5_000;
const IDLE_PINGS: u64 = 300;
const NULL_RPC_WARMUP: u64 = 200;
const NULL_RPCS: u64 = 2_000;
/// Calls in flight on one connection for the most calls/s of one client thread.
const IN_FLIGHT: usize = 8;
const THROUGHPUT_WARMUP: Duration = Duration::from_millis(100);
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(1);
const STEP_LIMIT: Duration = Duration::from_millis(500);
const HICCUP_WINDOW: Duration = Duration::from_millis(500);

/// One measured floor: sample count, median, 99th percentile and maximum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub count: u64,
    #[serde(with = "micros")]
    pub p50: Duration,
    #[serde(with = "micros")]
    pub p99: Duration,
    #[serde(with = "micros")]
    pub max: Duration,
}

impl Floor {
    /// From a histogram of nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Floor {
        Floor {
            count: h.len(),
            p50: Statistic::Percentile(50.0).of(h),
            p99: Statistic::Percentile(99.0).of(h),
            max: Statistic::Max.of(h),
        }
    }
}

/// Facts about the machine that qualify the numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    /// Cores this process may use (`std::thread::available_parallelism`).
    pub cores: usize,
    /// The `hypervisor` flag of /proc/cpuinfo: a virtual machine.
    pub hypervisor: bool,
    /// cpu0's cpufreq scaling governor, "unknown" when the kernel does not say.
    pub governor: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
}

impl Machine {
    pub fn read() -> Machine {
        let (hostname, kernel) = crate::sys::host_and_kernel();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let governor = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into());
        Machine {
            hostname,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            hypervisor: has_hypervisor_flag(&cpuinfo),
            governor,
            kernel,
        }
    }

    /// What the cache is keyed by: hostname, cores and kernel, and how the floors are
    /// measured (`METHOD`), so that a cache measured another way is measured again.
    pub fn fingerprint(&self) -> String {
        format!("{}/{} cores/{}/method {METHOD}", self.hostname, self.cores, self.kernel)
    }
}

/// Bumped when a floor is measured differently. 2: timers without the kernel's timer slack;
/// 3: the open loop's own timer instead of thread::sleep; 4: a loopback round trip measured
/// beside the null gRPC calls.
const METHOD: u32 = 4;

/// Where a calibration came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    #[default]
    Measured,
    Cached,
}

/// Every floor, with the machine it was measured on. JSON keys: latencies in µs under `*_us`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub rpcmeter_version: String,
    pub fingerprint: String,
    /// RFC 3339, UTC.
    pub measured_at: String,
    #[serde(rename = "measured_in_s", with = "secs")]
    pub measured_in: Duration,
    #[serde(default)]
    pub source: Source,
    pub machine: Machine,
    /// The time between two consecutive `Instant::now()` reads.
    #[serde(rename = "clock_read_us")]
    pub clock_read: Floor,
    /// tokio `sleep(1 ms)` on a current-thread runtime: actual minus asked.
    #[serde(rename = "tokio_sleep_overshoot_us")]
    pub tokio_sleep_overshoot: Floor,
    /// rpcmeter's open-loop timer (`load::timer`: a timerfd, then the last stretch spun),
    /// sends due 1 ms apart on an idle thread: actual minus due, the floor of schedule lag.
    #[serde(rename = "pacer_lateness_us")]
    pub pacer_lateness: Floor,
    /// A thread blocked on a Unix socket: from the writer's write to the reader's wake-up.
    #[serde(rename = "idle_wakeup_us")]
    pub idle_wakeup: Floor,
    /// 1-byte TCP ping-pong on 127.0.0.1, back to back, between two blocked threads.
    #[serde(rename = "loopback_rtt_busy_us")]
    pub loopback_rtt_busy: Floor,
    /// The same with 1 ms between pings.
    #[serde(rename = "loopback_rtt_idle_us")]
    pub loopback_rtt_idle: Floor,
    /// EchoService/echo with an empty message on the in-process lab, one call at a time.
    #[serde(rename = "null_rpc_us")]
    pub null_rpc: Floor,
    /// 1-byte TCP ping-pong on 127.0.0.1 under the null call's wake-up conditions: from the
    /// same runtime thread, to a runtime thread as the lab's, each ping just before a null
    /// call. The floor printed beside the null call: a call is at least this round trip.
    #[serde(rename = "loopback_rtt_beside_rpc_us", default)]
    pub loopback_rtt_beside_rpc: Floor,
    /// Null calls/s of one client thread, `in_flight` calls on one connection (closed loop).
    pub max_calls_per_s: f64,
    pub in_flight: usize,
    /// jHiccup's method: sleep 1 ms in a loop, record the overshoot.
    #[serde(rename = "hiccup_us")]
    pub hiccup: Floor,
    /// What qualifies the numbers (a virtual machine, a cache that could not be written).
    #[serde(default)]
    pub notices: Vec<String>,
}

/// The calibration of this machine: the cached one when it was measured on the same
/// machine (fingerprint), else measured now (a few seconds) and cached. `fresh` skips the
/// cache. A cache that cannot be written is a notice, not an error. Blocks: call it from
/// outside any tokio runtime.
pub fn cached_or_measure(fresh: bool) -> anyhow::Result<Calibration> {
    let machine = Machine::read();
    let path = cache_path(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"));
    if !fresh {
        if let Some(cached) = path.as_deref().and_then(|p| read_cache(p, &machine.fingerprint())) {
            return Ok(cached);
        }
    }
    let mut calibration = measure(machine)?;
    match &path {
        Some(path) => {
            if let Err(e) = write_cache(path, &calibration) {
                calibration.notices.push(format!("cache not written: {}: {e}", path.display()));
            }
        }
        None => calibration.notices.push("no cache: neither XDG_CACHE_HOME nor HOME is set".into()),
    }
    Ok(calibration)
}

/// The cached calibration of this machine, if `rpcmeter calibrate` has made one; never
/// measures (a run must not load the machine for seconds before it starts).
pub fn cached() -> Option<Calibration> {
    let machine = Machine::read();
    let path = cache_path(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))?;
    read_cache(&path, &machine.fingerprint())
}

/// One line for other reports, e.g. "null RPC p50 45.0 µs p99 90.0 µs,
/// loopback RTT 20.0 µs, open-loop timer p99 1.0 µs, hiccup p99 80.0 µs" (loopback RTT:
/// p50 of the one measured beside the null calls, under their wake-up conditions, so that
/// it is comparable; timer: the lateness of the one `run --rps` paces with).
pub fn floor_line(c: &Calibration) -> String {
    format!(
        "null RPC p50 {} p99 {}, loopback RTT {}, open-loop timer p99 {}, hiccup p99 {}",
        duration(c.null_rpc.p50),
        duration(c.null_rpc.p99),
        duration(c.loopback_rtt_beside_rpc.p50),
        duration(c.pacer_lateness.p99),
        duration(c.hiccup.p99),
    )
}

/// The human table.
pub fn table(c: &Calibration, cache: Option<&Path>) -> String {
    let mut o = String::new();
    let m = &c.machine;
    let _ = match c.source {
        Source::Measured => {
            writeln!(o, "Calibration of {} (measured in {:.1} s)", m.hostname, c.measured_in.as_secs_f64())
        }
        Source::Cached => writeln!(
            o,
            "Calibration of {} (cached, measured at {}{}; --fresh to measure again)",
            m.hostname,
            c.measured_at,
            cache.map(|p| format!(", {}", p.display())).unwrap_or_default()
        ),
    };
    let _ = writeln!(
        o,
        "Machine: {} cores, hypervisor {}, governor {}, kernel {}\n",
        m.cores,
        if m.hypervisor { "yes" } else { "no" },
        m.governor,
        m.kernel
    );
    let _ = writeln!(o, "  {:<44} {:>7} {:>10} {:>10} {:>10}", "floor", "samples", "p50", "p99", "max");
    let rows = [
        ("clock read (Instant::now pair)", &c.clock_read),
        ("tokio sleep(1 ms) overshoot", &c.tokio_sleep_overshoot),
        ("open-loop timer lateness (1 ms apart)", &c.pacer_lateness),
        ("idle wake-up through a socket", &c.idle_wakeup),
        ("loopback TCP RTT, busy", &c.loopback_rtt_busy),
        ("loopback TCP RTT, idle (1 ms apart)", &c.loopback_rtt_idle),
        ("null gRPC call (in-process lab, 1 at a time)", &c.null_rpc),
        ("loopback TCP RTT, beside the null calls", &c.loopback_rtt_beside_rpc),
        ("hiccup (1 ms sleep loop)", &c.hiccup),
    ];
    for (name, f) in rows {
        let _ = writeln!(
            o,
            "  {:<44} {:>7} {:>10} {:>10} {:>10}",
            name,
            f.count,
            fine_duration(f.p50),
            fine_duration(f.p99),
            fine_duration(f.max)
        );
    }
    let _ = writeln!(
        o,
        "\n  One client thread: {:.0} null calls/s ({} in flight on one connection)",
        c.max_calls_per_s, c.in_flight
    );
    let _ = writeln!(o, "  Floor: {}", floor_line(c));
    for notice in &c.notices {
        let _ = writeln!(o, "  Notice: {notice}");
    }
    o
}

/// `$XDG_CACHE_HOME/rpcmeter/calibration.json` (see `cache_dir`).
pub fn cache_path(xdg_cache_home: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> Option<PathBuf> {
    Some(cache_dir(xdg_cache_home, home)?.join("calibration.json"))
}

/// rpcmeter's cache directory: `$XDG_CACHE_HOME/rpcmeter` (an absolute XDG_CACHE_HOME only, as
/// the XDG Base Directory specification says), else `$HOME/.cache/rpcmeter`; None when neither
/// is set. The calibration and the labs' built servers live there.
pub fn cache_dir(xdg_cache_home: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> Option<PathBuf> {
    let nonempty = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    let base =
        nonempty(xdg_cache_home).filter(|p| p.is_absolute()).or_else(|| nonempty(home).map(|h| h.join(".cache")))?;
    Some(base.join("rpcmeter"))
}

/// The cached calibration, when the file parses and was measured on this machine.
pub fn read_cache(path: &Path, fingerprint: &str) -> Option<Calibration> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut c: Calibration = serde_json::from_str(&text).ok()?;
    (c.fingerprint == fingerprint).then(|| {
        c.source = Source::Cached;
        c
    })
}

/// Writes atomically (a temporary file renamed), so that a reader never sees half a file.
pub fn write_cache(path: &Path, c: &Calibration) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(to_json(c).as_bytes())?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

pub fn to_json(c: &Calibration) -> String {
    // Serializing plain fields cannot fail.
    serde_json::to_string_pretty(c).unwrap_or_default() + "\n"
}

/// Measures every floor, one after the other (a few seconds).
pub fn measure(machine: Machine) -> anyhow::Result<Calibration> {
    let started = Instant::now();
    let measured_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let clock_read = clock_read();
    let tokio_sleep_overshoot = current_thread_runtime()?.block_on(tokio_sleep_overshoot());
    let pacer_lateness = Floor::of(&pacer_lateness(SLEEPS));
    let idle_wakeup = idle_wakeup()?;
    let (loopback_rtt_busy, loopback_rtt_idle) = loopback_rtt()?;
    let grpc = null_rpc()?;
    let hiccup = Floor::of(&HiccupMeter::measure_for(HICCUP_WINDOW).ok_or_else(|| internal("cannot start a thread"))?);
    let mut notices = Vec::new();
    if machine.hypervisor {
        notices.push("a virtual machine (hypervisor flag): the host's scheduling is in every number".into());
    }
    if cfg!(debug_assertions) {
        notices
            .push("a debug build of rpcmeter: its own floors (null RPC, calls/s) are those of unoptimized code".into());
    }
    Ok(Calibration {
        rpcmeter_version: env!("CARGO_PKG_VERSION").into(),
        fingerprint: machine.fingerprint(),
        measured_at,
        measured_in: started.elapsed(),
        source: Source::Measured,
        machine,
        clock_read,
        tokio_sleep_overshoot,
        pacer_lateness,
        idle_wakeup,
        loopback_rtt_busy,
        loopback_rtt_idle,
        null_rpc: grpc.null_rpc,
        loopback_rtt_beside_rpc: grpc.loopback_rtt,
        max_calls_per_s: grpc.calls_per_s,
        in_flight: IN_FLIGHT,
        hiccup,
        notices,
    })
}

fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start a runtime: {e}")))
}

/// Nanoseconds from 0 to 60 s, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_nanos().min(u64::MAX as u128) as u64);
}

fn clock_read() -> Floor {
    let mut h = histogram();
    for _ in 0..CLOCK_PAIRS {
        let a = Instant::now();
        let b = Instant::now();
        record(&mut h, b - a);
    }
    Floor::of(&h)
}

async fn tokio_sleep_overshoot() -> Floor {
    let mut h = histogram();
    for _ in 0..SLEEPS {
        let start = Instant::now();
        tokio::time::sleep(SLEEP).await;
        record(&mut h, start.elapsed().saturating_sub(SLEEP));
    }
    Floor::of(&h)
}

/// `n` sends paced 1 ms apart by the open loop's own timer, after as many again to learn this
/// machine's wake-up lateness as a run does: how late each left. On a thread of its own
/// without timer slack, as an open-loop worker thread.
fn pacer_lateness(n: u64) -> Histogram<u64> {
    use crate::load::timer::Timer;
    use crate::sys::no_timer_slack;
    let measure = move || {
        no_timer_slack();
        let mut h = histogram();
        let Ok(runtime) = current_thread_runtime() else { return h };
        runtime.block_on(async {
            let timer = Timer::new();
            timer
                .driving(
                    async {
                        let mut due = Instant::now();
                        for i in 0..2 * n {
                            due += SLEEP;
                            timer.sleep_until(due).await;
                            if i >= n {
                                record(&mut h, Instant::now().saturating_duration_since(due));
                            }
                        }
                    },
                    || false,
                )
                .await
        });
        h
    };
    std::thread::scope(|scope| scope.spawn(measure).join()).unwrap_or_else(|_| histogram())
}

fn io_failed(what: &str) -> impl FnOnce(std::io::Error) -> anyhow::Error + '_ {
    move |e| internal(format!("{what}: {e}"))
}

/// The writer sends its clock reading (ns since `base`); the blocked reader subtracts it
/// from its own when it wakes.
fn idle_wakeup() -> anyhow::Result<Floor> {
    let (mut writer, mut reader) = UnixStream::pair().map_err(io_failed("cannot open a socket pair"))?;
    let base = Instant::now();
    let woken = std::thread::Builder::new()
        .name("calibrate-wakeup".into())
        .spawn(move || {
            let mut h = histogram();
            let mut sent = [0u8; 8];
            while reader.read_exact(&mut sent).is_ok() {
                let now = base.elapsed().as_nanos() as u64;
                h.saturating_record(now.saturating_sub(u64::from_le_bytes(sent)));
            }
            h
        })
        .map_err(io_failed("cannot start a thread"))?;
    let start = Instant::now();
    let mut i = 0;
    while i < WAKEUPS && start.elapsed() < STEP_LIMIT {
        std::thread::sleep(WAKEUP_PAUSE);
        let sent = base.elapsed().as_nanos() as u64;
        writer.write_all(&sent.to_le_bytes()).map_err(io_failed("socket pair write"))?;
        i += 1;
    }
    drop(writer);
    let h = woken.join().map_err(|_| internal("the wake-up thread panicked"))?;
    Ok(Floor::of(&h))
}

/// 1-byte ping-pong against an echo thread on 127.0.0.1: (back to back, 1 ms apart).
fn loopback_rtt() -> anyhow::Result<(Floor, Floor)> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_failed("cannot listen on 127.0.0.1"))?;
    let addr = listener.local_addr().map_err(io_failed("no local address"))?;
    let echo = std::thread::Builder::new()
        .name("calibrate-echo".into())
        .spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            s.set_nodelay(true)?;
            let mut b = [0u8; 1];
            while s.read(&mut b)? == 1 {
                s.write_all(&b)?;
            }
            Ok(())
        })
        .map_err(io_failed("cannot start a thread"))?;
    let mut s = TcpStream::connect(addr).map_err(io_failed("cannot connect on 127.0.0.1"))?;
    s.set_nodelay(true).map_err(io_failed("TCP_NODELAY"))?;
    let mut ping = |n: u64, pause: Duration| -> anyhow::Result<Floor> {
        let mut h = histogram();
        let start = Instant::now();
        let mut b = [1u8; 1];
        let mut i = 0;
        while i < n && start.elapsed() < STEP_LIMIT {
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            let sent = Instant::now();
            s.write_all(&b).map_err(io_failed("loopback write"))?;
            s.read_exact(&mut b).map_err(io_failed("loopback read"))?;
            record(&mut h, sent.elapsed());
            i += 1;
        }
        Ok(Floor::of(&h))
    };
    let busy = ping(BUSY_PINGS, Duration::ZERO)?;
    let idle = ping(IDLE_PINGS, SLEEP)?;
    drop(s);
    echo.join().map_err(|_| internal("the echo thread panicked"))?.map_err(io_failed("loopback echo"))?;
    Ok((busy, idle))
}

struct Grpc {
    null_rpc: Floor,
    loopback_rtt: Floor,
    calls_per_s: f64,
}

/// A 1-byte echo on 127.0.0.1:0 served by a runtime thread of its own, as the lab serves
/// (woken through epoll, not a blocked read); ends when its one client closes.
fn async_echo() -> anyhow::Result<(std::net::SocketAddr, std::thread::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_failed("cannot listen on 127.0.0.1"))?;
    let addr = listener.local_addr().map_err(io_failed("no local address"))?;
    listener.set_nonblocking(true).map_err(io_failed("a non-blocking listener"))?;
    let runtime = current_thread_runtime()?;
    let echo = std::thread::Builder::new()
        .name("calibrate-async-echo".into())
        .spawn(move || {
            runtime.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut s, _) = tokio::net::TcpListener::from_std(listener)?.accept().await?;
                s.set_nodelay(true)?;
                let mut b = [0u8; 1];
                while s.read(&mut b).await? == 1 {
                    s.write_all(&b).await?;
                }
                Ok(())
            })
        })
        .map_err(io_failed("cannot start a thread"))?;
    Ok((addr, echo))
}

/// One 1-byte round trip on `s`.
async fn ping(s: &mut tokio::net::TcpStream) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut b = [1u8; 1];
    s.write_all(&b).await.map_err(io_failed("loopback write"))?;
    s.read_exact(&mut b).await.map_err(io_failed("loopback read"))?;
    Ok(())
}

/// The lab on 127.0.0.1:0 (one runtime thread) and rpcmeter's own transport: one call at a
/// time, each after a loopback ping from the same thread (the round trip under the same
/// wake-up conditions, at the same moments), then `IN_FLIGHT` at a time for
/// `THROUGHPUT_WINDOW`.
fn null_rpc() -> anyhow::Result<Grpc> {
    let config =
        LabConfig { addr: "127.0.0.1:0".into(), threads: 1, per_thread: 64, db_pool: 1, ..LabConfig::default() };
    let server = LabServer::start(config).map_err(|e| internal(format!("cannot start the lab server: {e:#}")))?;
    let target = Target::new("127.0.0.1", server.local_addr().port());
    let spec = CallSpec {
        path: "/EchoService/echo".parse().expect("a valid path"),
        metadata: Default::default(),
        deadline: None,
        messages: Default::default(),
    };
    let call = PreparedCall::new(&spec);
    let body = wire::frame(&[]);
    let (echo_addr, echo) = async_echo()?;
    let runtime = current_thread_runtime()?;
    let result = runtime.block_on(async {
        let connector = Connector::new(&target).map_err(|e| internal(format!("{e:#}")))?;
        let conn = connector.connect().await.map_err(|e| internal(format!("{e:#}")))?;
        let mut echo =
            tokio::net::TcpStream::connect(echo_addr).await.map_err(io_failed("cannot connect on 127.0.0.1"))?;
        echo.set_nodelay(true).map_err(io_failed("TCP_NODELAY"))?;
        let (h, rtt) = paired_latencies(&conn, &mut echo, &call, &body).await?;
        drop(echo);
        let calls_per_s = closed_loop_rate(&conn, &call, &body).await?;
        anyhow::Ok(Grpc { null_rpc: Floor::of(&h), loopback_rtt: Floor::of(&rtt), calls_per_s })
    });
    // The connection's driver task lives on this runtime: gone first, so that the server's
    // shutdown does not wait its drain for a goodbye no one reads (LabServer::shutdown).
    drop(runtime);
    drop(server);
    // The echo ends as its client closes; one that never came (a failure before) is stood in
    // for by a connection closed at once.
    if result.is_err() {
        let _ = TcpStream::connect(echo_addr);
    }
    let _ = echo.join();
    result
}

/// One echo call of the lab; an answer other than OK is an error.
async fn echo_once(conn: Connection, call: &PreparedCall, body: Bytes) -> anyhow::Result<()> {
    let reply = conn.call(call, body, false).await;
    match reply.status {
        tonic::Code::Ok => Ok(()),
        code => Err(internal(format!("the lab's echo failed: {code:?} {}", reply.message.unwrap_or_default()))),
    }
}

/// One call at a time, each after a loopback ping from the same thread: the histograms of
/// the calls' and the pings' times, after `NULL_RPC_WARMUP` unrecorded pairs.
async fn paired_latencies(
    conn: &Connection,
    echo: &mut tokio::net::TcpStream,
    call: &PreparedCall,
    body: &Bytes,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)> {
    for _ in 0..NULL_RPC_WARMUP {
        ping(echo).await?;
        echo_once(conn.clone(), call, body.clone()).await?;
    }
    let (mut h, mut rtt) = (histogram(), histogram());
    let start = Instant::now();
    let mut i = 0;
    while i < NULL_RPCS && start.elapsed() < STEP_LIMIT {
        let sent = Instant::now();
        ping(echo).await?;
        let pinged = Instant::now();
        echo_once(conn.clone(), call, body.clone()).await?;
        record(&mut rtt, pinged - sent);
        record(&mut h, pinged.elapsed());
        i += 1;
    }
    Ok((h, rtt))
}

/// Calls per second with `IN_FLIGHT` at a time over `THROUGHPUT_WINDOW`, after
/// `THROUGHPUT_WARMUP` of the same.
async fn closed_loop_rate(conn: &Connection, call: &PreparedCall, body: &Bytes) -> anyhow::Result<f64> {
    // Closed loop: each of IN_FLIGHT loops sends its next call when its last one ends.
    let closed_loop = |window: Duration| {
        let end = Instant::now() + window;
        let loops = (0..IN_FLIGHT).map(|_| {
            let conn = conn.clone();
            async move {
                let mut calls = 0u64;
                while Instant::now() < end {
                    echo_once(conn.clone(), call, body.clone()).await?;
                    calls += 1;
                }
                anyhow::Ok(calls)
            }
        });
        futures::future::try_join_all(loops)
    };
    closed_loop(THROUGHPUT_WARMUP).await?;
    let start = Instant::now();
    let calls: u64 = closed_loop(THROUGHPUT_WINDOW).await?.iter().sum();
    // To 0.1 call/s: more digits would be noise.
    Ok((crate::stats::rate(calls, start.elapsed()) * 10.0).round() / 10.0)
}

/// True when a `flags` line of /proc/cpuinfo holds the word `hypervisor`.
fn has_hypervisor_flag(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_once(':').is_some_and(|(_, flags)| flags.split_whitespace().any(|f| f == "hypervisor")))
}

/// Durations as µs numbers, exact to the nanosecond both ways.
mod micros {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(crate::units::micros(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let us = f64::deserialize(d)?;
        Ok(Duration::from_nanos((us.max(0.0) * 1e3).round() as u64))
    }
}

/// Durations as s numbers, to the microsecond.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(crate::units::secs(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = f64::deserialize(d)?;
        Ok(Duration::from_micros((s.max(0.0) * 1e6).round() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(us: u64) -> Floor {
        Floor {
            count: 100,
            p50: Duration::from_nanos(us * 1000 + 1),
            p99: Duration::from_micros(2 * us),
            max: Duration::from_micros(3 * us),
        }
    }

    fn sample() -> Calibration {
        let machine = Machine {
            hostname: "h".into(),
            cores: 2,
            hypervisor: true,
            governor: "unknown".into(),
            kernel: "6.1.0".into(),
        };
        Calibration {
            rpcmeter_version: "0".into(),
            fingerprint: machine.fingerprint(),
            measured_at: "2025-01-01T00:00:00Z".into(),
            measured_in: Duration::from_micros(3_456_789),
            source: Source::Measured,
            machine,
            clock_read: Floor { p50: Duration::from_nanos(23), ..floor(0) },
            tokio_sleep_overshoot: floor(1000),
            pacer_lateness: floor(60),
            idle_wakeup: floor(30),
            loopback_rtt_busy: floor(20),
            loopback_rtt_idle: floor(40),
            null_rpc: floor(45),
            loopback_rtt_beside_rpc: floor(25),
            max_calls_per_s: 12_345.5,
            in_flight: IN_FLIGHT,
            hiccup: floor(80),
            notices: vec![],
        }
    }

    #[test]
    fn cache_round_trips_exactly_and_only_on_the_same_machine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpcmeter").join("calibration.json");
        let c = sample();
        write_cache(&path, &c).unwrap();
        let back = read_cache(&path, &c.fingerprint).unwrap();
        assert_eq!(back, Calibration { source: Source::Cached, ..c.clone() });
        assert_eq!(read_cache(&path, "other/2 cores/6.1.0"), None);
        std::fs::write(&path, "{ half a file").unwrap();
        assert_eq!(read_cache(&path, &c.fingerprint), None);
    }

    #[test]
    fn json_keys_carry_units() {
        let v: serde_json::Value = serde_json::from_str(&to_json(&sample())).unwrap();
        assert_eq!(v["null_rpc_us"]["p50"], 45.001);
        assert_eq!(v["clock_read_us"]["p50"], 0.023);
        assert_eq!(v["measured_in_s"], 3.456789);
        assert_eq!(v["source"], "measured");
        assert_eq!(v["machine"]["cores"], 2);
    }

    #[test]
    fn floor_line_names_each_floor() {
        assert_eq!(
            floor_line(&sample()),
            "null RPC p50 45.0 µs p99 90.0 µs, loopback RTT 25.0 µs, \
             open-loop timer p99 120.0 µs, hiccup p99 160.0 µs"
        );
    }

    #[test]
    fn cache_path_follows_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| cache_path(x.map(Into::into), h.map(Into::into));
        assert_eq!(p(Some("/c"), Some("/home/u")), Some(PathBuf::from("/c/rpcmeter/calibration.json")));
        assert_eq!(p(Some("rel"), Some("/home/u")), Some(PathBuf::from("/home/u/.cache/rpcmeter/calibration.json")));
        assert_eq!(p(Some(""), Some("/home/u")), Some(PathBuf::from("/home/u/.cache/rpcmeter/calibration.json")));
        assert_eq!(p(None, None), None);
    }

    #[test]
    fn hypervisor_flag_is_a_whole_word_of_flags() {
        assert!(has_hypervisor_flag("processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n"));
        assert!(!has_hypervisor_flag("flags\t\t: fpu vme\nmodel name\t: hypervisor-ish\n"));
        assert!(!has_hypervisor_flag("flags\t\t: fpu xhypervisor\n"));
    }

    #[test]
    fn floors_of_a_short_real_run_are_sane() {
        let c = clock_read();
        assert_eq!(c.count, CLOCK_PAIRS);
        assert!(c.p50 <= c.p99 && c.p99 <= c.max);
        let h = pacer_lateness(5);
        assert_eq!(h.len(), 5);
    }
}
