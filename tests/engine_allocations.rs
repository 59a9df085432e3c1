//! "Recording never allocates" (record/shard.rs), held to: the engine's worker threads take no
//! memory from the allocator once the clock has started, in a workload run that records
//! per call name, per flow and per backend (issue 38: those tallies were made at their first
//! use, on the worker thread, where allocating a tally once stalled a thread ~4 ms). A
//! counting allocator counts what threads named `rpcmeter-worker-*` take after the start,
//! which the test sees as the engine asks it for the agreed start (`Start::Agreed`).
mod common;
use common::*;
use rpcmeter::grpc::transport::{Addresses, CallKind, Lb, StreamLimits, Target};
use rpcmeter::load::engine::{self, Mix, MixCall, MixFlow};
use rpcmeter::load::pacer::Pacer;
use rpcmeter::load::plan::{Control, Plan, ShardOf, Start, StopAt};
use rpcmeter::load::workload::Pick;
use rpcmeter::schema::{DataSource, RequestSource, SchemaSource};
use rpcmeter::sink::Sinks;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Counting;

/// The smallest allocation counted. What a tally holds is far above it (a histogram's counts
/// are 264 KiB, a tally is 7 of them and one per call name, flow and backend); the transport
/// takes small blocks for each call (decoding a response's headers: 100 to 600 bytes), which
/// are not recording's and are left out.
const PAGE: usize = 4096;

/// Set once the engine asks for the start: from then on, worker threads' allocations count.
static ARMED: AtomicBool = AtomicBool::new(false);
static TAKEN: AtomicU64 = AtomicU64::new(0);
/// The sizes of the first few allocations counted, to say what they were.
static SIZES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

/// Whether this thread is one of the engine's workers, by the name the kernel holds for it
/// (read with prctl: no allocation, so it may run inside the allocator).
fn on_worker_thread() -> bool {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer given.
    let read = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    read == 0 && name.starts_with(b"rpcmeter-worke")
}

// SAFETY: every allocation and release is System's, with the caller's layout; the counting
// beside it touches atomics only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= PAGE && ARMED.load(SeqCst) && on_worker_thread() {
            let n = TAKEN.fetch_add(1, SeqCst) as usize;
            if let Some(size) = SIZES.get(n) {
                size.store(layout.size(), SeqCst);
            }
        }
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires it, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from System.alloc (above) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn worker_threads_allocate_nothing_after_the_start_of_a_workload_run() {
    let backends = [TestServer::start(Behaviour::Echo), TestServer::start(Behaviour::Echo)];
    let mut target = Target::new("127.0.0.1", backends[0].addr.port());
    target.addresses = Addresses::List(backends.iter().map(|b| b.addr).collect());
    target.lb = Lb::RoundRobin;
    assert!(target.by_backend(), "each call is recorded under its backend");
    let schema = SchemaSource::Proto { file: echo_proto(), import_paths: vec![] };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let method = runtime.block_on(rpcmeter::schema::resolve_method(&schema, "EchoService/echo", &target)).unwrap();
    let path: http::uri::PathAndQuery = "/EchoService/echo".parse().unwrap();
    // Three call names, in two flows: one of two steps, one of one.
    let calls = ["a", "b", "c"]
        .iter()
        .map(|content| MixCall {
            name: content.to_string(),
            method: method.full_name().to_owned(),
            schema: Some(method.clone()),
            path: path.clone(),
            requests: Arc::new(
                RequestSource::new(&method, &DataSource::Json(format!(r#"{{"content":"{content}"}}"#))).unwrap(),
            ),
            rules: None,
            kind: CallKind::Unary,
            stream: StreamLimits::default(),
        })
        .collect();
    let flows = vec![
        MixFlow { name: "ab".into(), steps: vec![0, 1], stop_on_check_failure: false },
        MixFlow { name: "c".into(), steps: vec![2], stop_on_check_failure: false },
    ];
    let mix = Mix { calls, pick: Pick::round_robin(&[1, 2]), named: true, flows, log: None };
    let agree = |_: &Control| {
        ARMED.store(true, SeqCst);
        Ok(Instant::now() + Duration::from_millis(20))
    };
    let plan = Plan {
        target,
        call: Default::default(),
        pacer: Pacer::Closed,
        workers: 4,
        threads: 2,
        connections: 2,
        // 20 hand-overs of each thread, each swapping in spare tallies: more messages than a
        // block of std's channel holds (31), the next of which its sender allocated.
        stop: StopAt { duration: Some(Duration::from_secs(2)), ..Default::default() },
        warmup: Duration::from_millis(100),
        active_workers: None,
        retry: Default::default(),
        interval: Duration::from_millis(100),
        drain: Duration::from_secs(2),
        keep_responses: false,
        shard: ShardOf::default(),
        start: Some(Start::Agreed(Arc::new(agree))),
        warmup_auto: false,
    };
    let recorded = engine::run(plan, mix, &mut Sinks::default(), &Control::default()).unwrap();
    ARMED.store(false, SeqCst);
    let measured = &recorded.measured;
    assert!(measured.counts.calls > 0 && measured.counts.failed() == 0, "{:?}", measured.counts);
    assert_eq!(measured.by_name.len(), 3);
    assert_eq!(measured.by_flow.len(), 2);
    assert_eq!(measured.by_backend.len(), 2);
    let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(SeqCst)).filter(|&s| s > 0).collect();
    assert_eq!(TAKEN.load(SeqCst), 0, "blocks allocated on worker threads after the start; the first sizes: {sizes:?}");
}
