//! Property tests of the parsers that read what users and other tools write (issue 30, item
//! 12): result JSON (merge, compare, report, history), templates and `-D` data, assertions,
//! targets, durations, rates, stages and sizes. For every input: no panic, no hang (a
//! watchdog aborts the process), and no allocation beyond a bound (a counting allocator,
//! per thread). A few hundred cases each, seeded by proptest; the whole file takes seconds.
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

/// A real result of `run --format json` (2 s at 100 calls/s against the lab's echo).
const BASE: &str = include_str!("data/result.json");

/// The most one case may hold at once beyond what it started with.
const ALLOCATION_BOUND: usize = 256 << 20;

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every allocation and release is System's, with the caller's layout; the counting
// beside it touches thread-locals only (try_with: never during a thread's teardown).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|live| {
            live.set(live.get() + layout.size());
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
        });
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires it, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Freed on another thread than it was taken on: saturate rather than wrap.
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(layout.size())));
        // SAFETY: ptr came from System.alloc (above) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `check` on `input`, failing when it allocates more than `ALLOCATION_BOUND` at once.
fn bounded<T>(input: &T, check: impl FnOnce(&T)) -> Result<(), TestCaseError>
where
    T: std::fmt::Debug + ?Sized,
{
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    check(input);
    let peak = PEAK.with(Cell::get) - start;
    prop_assert!(peak <= ALLOCATION_BOUND, "{} MiB held at once for {:?}", peak >> 20, input);
    Ok(())
}

/// Aborts the whole test process if a property runs past `limit`: a hang must fail, not stall CI.
fn watchdog(name: &'static str, limit: Duration) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    // A longer search (FUZZ_CASES) takes as long as it needs.
    let limit = if std::env::var_os("FUZZ_CASES").is_some() { Duration::from_secs(86_400) } else { limit };
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            eprintln!("{name}: still running after {limit:?}: a parser hangs");
            std::process::abort();
        }
    });
    done
}

/// `cases` cases from a fixed seed, so that a failure comes back run after run; FUZZ_CASES=N
/// and FUZZ_SEED=N (or `random`) search further.
fn runner(cases: u32) -> TestRunner {
    use proptest::test_runner::RngSeed;
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(cases);
    let rng_seed = match std::env::var("FUZZ_SEED").ok() {
        Some(seed) if seed == "random" => RngSeed::Random,
        Some(seed) => RngSeed::Fixed(seed.parse().expect("FUZZ_SEED: a number or random")),
        None => RngSeed::Fixed(30),
    };
    TestRunner::new(Config { cases, rng_seed, failure_persistence: None, ..Config::default() })
}

/// Numbers at the edges: negative, zero, huge, tiny, beyond u64.
fn odd_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(-1.0),
        Just(1e300),
        Just(-1e300),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(1.8446744073709552e19),
        Just(9.3e18),
        Just(4e12),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |x| x.is_finite()),
    ]
    .prop_map(Value::from)
}

/// A JSON value of the kinds a hostile or broken file holds where a number or text was due.
fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => prop_oneof![Just(u64::MAX), Just(1 << 53), Just(i64::MAX as u64)].prop_map(Value::from),
        4 => odd_number(),
        1 => ".{0,20}".prop_map(Value::from),
        1 => "HISTFAAA[A-Za-z0-9+/=]{0,60}".prop_map(Value::from),
        1 => "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z?".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The base result as another run (merge refuses the same run twice).
fn other_run() -> String {
    let mut v: Value = serde_json::from_str(BASE).unwrap();
    v["meta"]["run_id"] = "another run".into();
    v.to_string()
}

/// Every JSON pointer into `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => map.iter().for_each(|(k, v)| pointers(v, format!("{at}/{k}"), out)),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| pointers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

/// The base result with 1-3 of its values (anywhere, the root included) replaced by odd ones,
/// or keys removed; or the base's text cut short; or any text at all.
fn result_text() -> impl Strategy<Value = String> {
    let base: Value = serde_json::from_str(BASE).unwrap();
    let mut all = Vec::new();
    pointers(&base, String::new(), &mut all);
    // Keys a result may hold that this one lacks.
    all.extend(["/warmup", "/warmup/duration_s", "/shards", "/streaming", "/histogram"].map(String::from));
    let edit = (prop::sample::select(all), prop_oneof![2 => odd_number(), 3 => odd_value()], any::<bool>());
    let mutated = prop::collection::vec(edit, 1..4).prop_map(move |edits| {
        let mut v = base.clone();
        for (pointer, value, remove) in edits {
            // A key that is absent: added (its parent must be there).
            if v.pointer(&pointer).is_none() {
                if let Some((parent, key)) = pointer.rsplit_once('/') {
                    if let Some(Value::Object(map)) = v.pointer_mut(parent) {
                        map.insert(key.to_string(), value);
                    }
                }
                continue;
            }
            if remove {
                if let Some((parent, key)) = pointer.rsplit_once('/') {
                    if let Some(Value::Object(map)) = v.pointer_mut(parent) {
                        map.remove(key);
                    }
                    continue;
                }
            }
            if let Some(slot) = v.pointer_mut(&pointer) {
                *slot = value;
            }
        }
        v.to_string()
    });
    prop_oneof![
        6 => mutated,
        1 => (0..BASE.len()).prop_map(|cut| BASE[..BASE.floor_char_boundary_compat(cut)].to_string()),
        1 => ".{0,64}",
        1 => "[\\[\\]{}\",:0-9a-z.eE+ \n-]{0,64}",
    ]
}

/// `str::floor_char_boundary` is unstable: the same, by hand.
trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, at: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut at: usize) -> usize {
        while !self.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
}

#[test]
fn result_json_never_panics_in_merge_report_compare_or_history() {
    let done = watchdog("result JSON", Duration::from_secs(120));
    // In memory where there is a tmpfs: the history's commits wait for no disk.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let history = dir.path().join("h.sqlite3");
    // Each case merges (deflate in a debug build: tens of ms) and writes a history: fewer cases.
    let mut runner = runner(96);
    runner
        .run(&(result_text(), any::<bool>()), |(text, beside)| {
            bounded(text.as_str(), |text| {
                // merge: alone or beside a good result, then its table.
                if let Ok((inputs, _)) = rpcmeter::app::merge::read_stream(text, "fuzz") {
                    let (mut all, _) = rpcmeter::app::merge::read_stream(&other_run(), "base").unwrap();
                    if !beside {
                        all.clear();
                    }
                    all.extend(inputs);
                    if let Ok(merged) = rpcmeter::app::merge::merge(&all) {
                        rpcmeter::app::merge::table(&merged);
                    }
                }
                // report: parsed and drawn.
                if let Ok(run) = rpcmeter::report::html::parse("fuzz", text) {
                    rpcmeter::report::html::render(&[run]);
                }
                // compare: read.
                let _ = rpcmeter::app::compare::RunResult::parse(text, "fuzz".into());
                // history: saved, listed and shown.
                if let Ok(value) = serde_json::from_str::<Value>(text) {
                    if let Ok(id) = rpcmeter::history::History::open(&history).and_then(|h| h.save(&value)) {
                        use rpcmeter::app::history::{run, Action};
                        use rpcmeter::report::Format;
                        let _ = run(Some(history.clone()), Action::Show { id, format: Format::Table });
                        let _ = run(Some(history.clone()), Action::List { limit: 3 });
                        let _ = run(Some(history.clone()), Action::Remove { id });
                    }
                }
            })
        })
        .unwrap();
    drop(done);
}

/// The commands end to end (compare's judgement and tables included), few cases: each is
/// a process. Exit 0, 1 or 2 with one line on stderr: never a panic (101) or a signal.
#[test]
fn result_json_never_panics_the_commands() {
    let done = watchdog("commands on result JSON", Duration::from_secs(240));
    let dir = tempfile::tempdir().unwrap();
    let (base, odd) = (dir.path().join("base.json"), dir.path().join("odd.json"));
    std::fs::write(&base, other_run()).unwrap();
    let (base, odd_arg) = (base.to_str().unwrap().to_string(), odd.to_str().unwrap().to_string());
    let mut runner = runner(12);
    runner
        .run(&result_text(), |text| {
            std::fs::write(&odd, &text).unwrap();
            for args in [
                vec!["compare", &base, &odd_arg],
                vec!["compare", &odd_arg, &base, "--format", "json"],
                vec!["merge", &base, &odd_arg],
                vec!["report", &odd_arg, "-o", "-"],
            ] {
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(&args).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                prop_assert!(matches!(out.status.code(), Some(0..=2)), "{args:?}: {:?} {err}", out.status);
                if out.status.code() == Some(2) {
                    prop_assert!(err.lines().count() == 1, "{args:?}: {err}");
                }
            }
            Ok(())
        })
        .unwrap();
    drop(done);
}

/// Request strings as `-d` and `-D` give them: templates mixed with text, odd brackets and
/// numbers at the edges of their types.
fn request_text() -> impl Strategy<Value = String> {
    let action = prop_oneof![
        Just(".RequestNumber".to_string()),
        Just(".WorkerID".to_string()),
        Just(".UUID".to_string()),
        Just(".TimestampUnixNano".to_string()),
        "randomString [0-9]{0,25}",
        "randomInt -?[0-9]{0,20} -?[0-9]{0,20}",
        "randomString -?[0-9a-z]{0,4} ?[0-9]{0,3}",
        ".{0,12}",
    ];
    let piece = prop_oneof![
        "[a-z \\\\\"]{0,6}",
        action.prop_map(|a| format!("{{{{{a}}}}}")),
        Just("{{".to_string()),
        Just("}}".to_string()),
    ];
    let template = prop::collection::vec(piece, 0..5).prop_map(|p| p.concat());
    prop_oneof![
        4 => template.clone().prop_map(|t| serde_json::json!({"content": t}).to_string()),
        1 => template.prop_map(|t| serde_json::json!([{"content": t}, {"content": "x"}]).to_string()),
        1 => ".{0,40}",
        1 => "[\\[\\]{}\",:0-9a-z \n]{0,40}",
    ]
}

#[test]
fn templates_and_data_files_never_panic() {
    let done = watchdog("templates", Duration::from_secs(120));
    let pool = prost_reflect::DescriptorPool::decode(rpcmeter::lab::proto::FILE_DESCRIPTOR_SET).unwrap();
    let echo = rpcmeter::schema::find_method(&pool, "EchoService/echo").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.json");
    let mut runner = runner(500);
    runner
        .run(&request_text(), |text| {
            bounded(text.as_str(), |text| {
                use rpcmeter::schema::{DataSource, RequestSource};
                if let Ok(source) = RequestSource::new(&echo, &DataSource::Json(text.to_string())) {
                    for call in [0, 1, u64::MAX] {
                        source.request(call, u32::MAX);
                    }
                }
                std::fs::write(&file, text).unwrap();
                if let Ok(source) = RequestSource::new(&echo, &DataSource::File(file.clone())) {
                    source.request(7, 0);
                }
            })
        })
        .unwrap();
    drop(done);
}

/// Flag values: any text, and text shaped like each flag's values.
fn flag_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,24}",
        "-?[0-9]{0,25}(\\.[0-9]{0,5})?(e-?[0-9]{1,3})? ?(ns|us|µs|ms|s|m|h|d|days|w|y|B|K|KiB|MB|G|T|%)?",
        "(p[0-9.]{0,6}|min|max|mean|stdev|rps|error_rate|errors)(<|>|<=|>=)-?[0-9.]{0,8}(ms|s|%|us)?(,|)",
        "([0-9]{1,22}(ms|s|h|days)?:[0-9e.+-]{0,8},?){0,4}",
        "[0-9.e+-]{0,8}:[0-9.e+-]{0,8}:[0-9]{0,20}(s|ms|days)?",
        "(http://|https://|dns:///|unix:|unix://|)\\[?[a-z0-9.:]{0,12}\\]?:?[0-9]{0,7}/?",
        "[0-9]{0,6}/[0-9]{0,6}",
        "[0-9]{0,12}(\\.[0-9]{0,12})?|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
    ]
}

#[test]
fn flag_values_never_panic() {
    let done = watchdog("flag values", Duration::from_secs(120));
    let mut runner = runner(1000);
    runner
        .run(&flag_text(), |text| {
            bounded(text.as_str(), |text| {
                use rpcmeter::cli::parse;
                let _ = parse::duration(text);
                let _ = parse::positive_duration(text);
                let _ = parse::warmup(text);
                let _ = parse::target(text);
                let _ = parse::shard(text);
                let _ = parse::shard_count(text);
                let _ = parse::start_at(text);
                let _ = parse::key_value(text);
                let _ = parse::retry_status(text);
                let _ = text.parse::<rpcmeter::input::ByteSize>();
                if let Ok(schedule) = parse::rate_schedule(text) {
                    for k in [0, 1, 1000, u64::MAX] {
                        schedule.send_time(k);
                    }
                    for t in [Duration::ZERO, Duration::from_secs(1), parse::MAX_DURATION] {
                        schedule.calls_due(t);
                    }
                }
                if let Ok(stages) = parse::stages(text) {
                    for t in [Duration::ZERO, stages.length() / 2, stages.length(), parse::MAX_DURATION] {
                        stages.value_at(t);
                        stages.integral(t);
                        stages.first_above(stages.peak() / 2.0, t);
                    }
                    stages.time_of_integral(stages.integral(stages.length()) / 2.0);
                }
                if let Ok(assertions) = rpcmeter::stats::assertions::parse(text) {
                    for a in &assertions {
                        a.holds(a.limit);
                    }
                }
            })
        })
        .unwrap();
    drop(done);
}

/// Inputs the properties above found or that are too rare to be drawn, kept as they are.
#[test]
fn inputs_that_broke_once() {
    // A warm-up or a duration beyond any Duration: merge and history show panicked; now such
    // a result is refused where it is read (result::bounds), naming the number.
    let mut odd: Value = serde_json::from_str(BASE).unwrap();
    odd["warmup"] = serde_json::json!({"duration_s": 1e300});
    odd["duration_s"] = 1e300.into();
    odd["latency_us"]["p50"] = 1e300.into();
    let refused = rpcmeter::app::merge::read_stream(&odd.to_string(), "odd").err().unwrap().to_string();
    assert!(refused.ends_with("duration_s 1e300 is not a duration in seconds (0 to 1e9)"), "{refused}");
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite3");
    let id = rpcmeter::history::History::open(&history).unwrap().save(&odd).unwrap();
    use rpcmeter::app::history::{run, Action};
    use rpcmeter::report::Format;
    let shown = run(Some(history.clone()), Action::Show { id, format: Format::Table }).unwrap();
    assert!(shown.contains("p50 -"), "{shown}");
    assert!(run(Some(history), Action::List { limit: 1 }).is_ok());
    // A rate near f64::MAX: the plot's axis, widened to round ticks, ended at infinity and
    // collected infinitely many ticks; now refused.
    let mut fast: Value = serde_json::from_str(BASE).unwrap();
    fast["intervals"][0]["rps"] = 1.5e308.into();
    let refused = rpcmeter::report::html::parse("fast", &fast.to_string()).err().unwrap();
    assert!(refused.ends_with("intervals[].rps 1.5e308 is not a rate per second (0 to 1e9)"), "{refused}");
    // Counts whose sum overflows: merge panicked.
    let mut huge: Value = serde_json::from_str(BASE).unwrap();
    huge["requests"]["ok"] = u64::MAX.into();
    let text = format!("{BASE}\n{huge}");
    let refused = rpcmeter::app::merge::read_stream(&text, "huge").err().unwrap().to_string();
    assert!(refused.ends_with("requests.ok 18446744073709551615 is not a count (at most 2^53)"), "{refused}");

    // Each {{randomString}} within its bound, 100 of them far beyond it: refused, not built.
    let pool = prost_reflect::DescriptorPool::decode(rpcmeter::lab::proto::FILE_DESCRIPTOR_SET).unwrap();
    let echo = rpcmeter::schema::find_method(&pool, "EchoService/echo").unwrap();
    let many = serde_json::json!({"content": "{{randomString 4194304}}".repeat(100)}).to_string();
    bounded(many.as_str(), |many| {
        use rpcmeter::schema::{DataSource, RequestSource};
        let refused = RequestSource::new(&echo, &DataSource::Json(many.to_string())).err().unwrap().to_string();
        assert!(refused.contains("add up to 419430400 characters"), "{refused}");
    })
    .unwrap();
}

/// An HdrHistogram header says how long its payload is; the reader made room for that much
/// before reading it, so 60 bytes of base64 in a result took 4 GiB.
#[test]
fn a_histogram_header_cannot_ask_for_gigabytes() {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut plain = Vec::new();
    for word in [0x1c84_9313u32, u32::MAX, 0, 3] {
        plain.extend(word.to_be_bytes());
    }
    plain.extend(1u64.to_be_bytes());
    plain.extend(3_600_000_000_000u64.to_be_bytes());
    plain.extend(1.0f64.to_be_bytes());
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(&plain).unwrap();
    let zlib = zlib.finish().unwrap();
    let mut compressed = Vec::new();
    compressed.extend(0x1c84_9314u32.to_be_bytes());
    compressed.extend((zlib.len() as u32).to_be_bytes());
    compressed.extend(zlib);
    for bytes in [plain, compressed] {
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        bounded(text.as_str(), |text| {
            assert!(rpcmeter::record::shard::from_text(text).is_err());
        })
        .unwrap();
    }
}
