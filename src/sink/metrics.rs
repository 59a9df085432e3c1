//! `--metrics-addr HOST:PORT`: live Prometheus metrics while a run goes on. The sink adds each
//! interval into a small fixed state (counters, fixed histogram buckets: memory stays flat
//! whatever the run's length); a thread answers scrapes from it. Updated once per interval
//! (`--interval`), so a scrape sees the run as of the last closed interval. The endpoint
//! closes when the run ends.
//!
//! The HTTP side is a minimal HTTP/1.0 responder rather than hyper: one GET, no keep-alive,
//! no body to read, on a plain thread, so the run's collector never waits on a runtime and
//! no dependency is added for 30 lines. Every request gets the whole exposition and the
//! connection closes, which is all a Prometheus scrape (or curl) needs.
use super::Sink;
use crate::error::bad_input;
use crate::grpc::status::{self, PerStatus};
use crate::record::intervals::Interval;
use crate::record::intervals::IntervalRow;
use crate::report::prometheus::{bucket_counts, histogram_sum, Exposition, LATENCY_BUCKETS};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A cumulative histogram on the fixed buckets.
#[derive(Default, Clone)]
struct Buckets {
    counts: [u64; LATENCY_BUCKETS.len()],
    sum: Duration,
    count: u64,
}

impl Buckets {
    fn add(&mut self, h: &hdrhistogram::Histogram<u64>) {
        for (total, n) in self.counts.iter_mut().zip(bucket_counts(h)) {
            *total += n;
        }
        self.sum += histogram_sum(h);
        self.count += h.len();
    }
}

/// Everything served, summed since the run started (warm-up included: it is load too).
#[derive(Default)]
struct State {
    call: String,
    target: String,
    open_loop: bool,
    calls: PerStatus,
    latency: Buckets,
    schedule_lag: Buckets,
    in_flight: u64,
    cpu: Duration,
    rss_bytes: u64,
    intervals: u64,
}

impl State {
    fn exposition(&self) -> String {
        let labels = [("call", self.call.as_str()), ("target", self.target.as_str())];
        let mut out = Exposition::default();
        out.family("rpcmeter_calls_total", "counter", "Calls answered, by final gRPC status");
        for (code, n) in self.calls.nonzero() {
            out.sample("rpcmeter_calls_total", &[labels[0], labels[1], ("status", status::name(code))], n as f64);
        }
        let l = &self.latency;
        out.histogram("rpcmeter_call_latency_seconds", "Call latency", &labels, &l.counts, l.sum, l.count);
        if self.open_loop {
            let g = &self.schedule_lag;
            let help = "Open loop: actual minus intended send time";
            out.histogram("rpcmeter_schedule_lag_seconds", help, &labels, &g.counts, g.sum, g.count);
        }
        out.gauge("rpcmeter_in_flight", "Calls started and not yet answered", &labels, self.in_flight as f64)
            .family("rpcmeter_client_cpu_seconds_total", "counter", "The client's user+system CPU time")
            .sample("rpcmeter_client_cpu_seconds_total", &labels, self.cpu.as_secs_f64())
            .gauge("rpcmeter_client_rss_bytes", "The client's resident memory", &labels, self.rss_bytes as f64)
            .family("rpcmeter_intervals_total", "counter", "Intervals closed (how often these numbers changed)")
            .sample("rpcmeter_intervals_total", &labels, self.intervals as f64);
        out.finish()
    }
}

pub struct LiveMetrics {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl LiveMetrics {
    /// Listens on `addr` (port 0: any free port; `addr` says which) and starts answering.
    pub fn start(addr: SocketAddr, call: &str, target: &str, open_loop: bool) -> anyhow::Result<LiveMetrics> {
        let listener = TcpListener::bind(addr).map_err(|e| bad_input(format!("--metrics-addr {addr}: {e}")))?;
        let addr = listener.local_addr().map_err(|e| bad_input(format!("--metrics-addr {addr}: {e}")))?;
        // Polled, so that the end of the run closes the port without waiting for a scrape.
        listener.set_nonblocking(true).map_err(|e| bad_input(format!("--metrics-addr {addr}: {e}")))?;
        let state = Arc::new(Mutex::new(State {
            call: call.to_string(),
            target: target.to_string(),
            open_loop,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (state.clone(), stop.clone());
        let server = std::thread::Builder::new()
            .name("rpcmeter-metrics".into())
            .spawn(move || serve(listener, s, st))
            .map_err(|e| crate::error::internal(format!("cannot start the metrics thread: {e}")))?;
        Ok(LiveMetrics { state, stop, server: Some(server), addr })
    }
}

/// The responder: until `stop`, each connection gets the exposition (or 404) and is closed.
fn serve(listener: TcpListener, state: Arc<Mutex<State>>, stop: Arc<AtomicBool>) {
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = answer(stream, &state);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn answer(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    // The request line and headers; a body (there is none for GET) is not read.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        match stream.read(&mut buf)? {
            0 => break,
            n => request.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&request);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/metrics" | "/" => ("200 OK", state.lock().map(|s| s.exposition()).unwrap_or_default()),
        _ => ("404 Not Found", "not found: the metrics are at /metrics\n".to_string()),
    };
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

impl Drop for LiveMetrics {
    /// A run that ends before `finish` (an error) still closes the endpoint.
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

impl Sink for LiveMetrics {
    fn interval(&mut self, iv: &Interval, _row: &IntervalRow) {
        let Ok(mut s) = self.state.lock() else { return };
        s.calls.add(&iv.tally.counts.call_status);
        s.latency.add(&iv.tally.call_latency);
        if s.open_loop {
            s.schedule_lag.add(iv.tally.schedule_lag());
        }
        s.in_flight = iv.in_flight;
        s.cpu = iv.usage.cpu;
        s.rss_bytes = iv.usage.rss_bytes;
        s.intervals += 1;
    }

    /// The run is over: the endpoint closes.
    fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        self.stop.store(true, Relaxed);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        Ok(())
    }
}
