//! `run --workload FILE`: a weighted mix of calls, read from TOML. Which call each started
//! call makes is decided by `Pick` from the call's run-wide start number alone, so every
//! thread agrees without a lock: smooth weighted round robin (nginx's), exact over every
//! whole cycle, or a seeded random draw. With `[[flow]]`s, a flow is picked the same way
//! and runs its steps in order; captures and checks are read here and applied by `flow.rs`.
use super::flow::Rules;
use super::stage::{stream_of, Mix, MixCall, MixFlow};
use crate::error::bad_input;
use crate::grpc::transport::{CallKind, StreamLimits};
use crate::schema::RequestSource;
use prost_reflect::MethodDescriptor;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    call: Vec<CallEntry>,
    #[serde(default)]
    flow: Vec<FlowEntry>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowEntry {
    name: String,
    steps: Vec<String>,
    /// One flow alone needs none.
    #[serde(default = "one")]
    weight: u32,
    #[serde(default)]
    stop_on_check_failure: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEntry {
    name: String,
    method: String,
    data: Option<toml::Value>,
    data_file: Option<PathBuf>,
    /// 1 when left out (flows pick the calls: then it is not used).
    weight: Option<u32>,
    /// Variable name -> where its value comes from (`response.version`).
    #[serde(default)]
    capture: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    check: Vec<String>,
}

/// A workload, checked: its calls and its flows (none: each call is picked by weight).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub calls: Vec<WorkloadCall>,
    pub flows: Vec<Flow>,
}

/// One call of the mix, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadCall {
    pub name: String,
    pub method: String,
    pub data: crate::schema::DataSource,
    pub weight: u32,
    pub captures: Vec<Capture>,
    pub checks: Vec<Check>,
}

/// A flow: calls (indexes into `Workload::calls`) made in order by one worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    pub steps: Vec<usize>,
    pub weight: u32,
    pub stop_on_check_failure: bool,
}

/// Where a captured value or a checked value is read.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// A field of the request sent (dotted path, protobuf field names).
    Request(String),
    /// A field of the response received.
    Response(String),
    /// A response header (lowercase key).
    Header(String),
    /// A response trailer (lowercase key).
    Trailer(String),
}

impl Field {
    /// `request.PATH`, `response.PATH`, `header.KEY`, `trailer.KEY`; a bare PATH is the
    /// response's when `bare_is_response` (checks), refused otherwise (captures).
    fn parse(text: &str, bare_is_response: bool) -> Result<Field, String> {
        let nonempty = |rest: &str| match rest.is_empty() {
            true => Err(format!("{text:?}: nothing after the dot")),
            false => Ok(rest.to_owned()),
        };
        match text.split_once('.') {
            Some(("request", rest)) => Ok(Field::Request(nonempty(rest)?)),
            Some(("response", rest)) => Ok(Field::Response(nonempty(rest)?)),
            Some(("header", rest)) => Ok(Field::Header(nonempty(rest)?.to_ascii_lowercase())),
            Some(("trailer", rest)) => Ok(Field::Trailer(nonempty(rest)?.to_ascii_lowercase())),
            _ if bare_is_response && !text.is_empty() => Ok(Field::Response(text.to_owned())),
            _ => Err(format!("{text:?} is not request.PATH, response.PATH, header.KEY or trailer.KEY")),
        }
    }
}

/// A captured variable: `{{.var}}` in the later steps of a flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub var: String,
    pub from: Field,
}

/// A check on each answer: counted pass or fail, apart from gRPC statuses.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// As written: the check's name in every report.
    pub text: String,
    pub field: Field,
    pub test: Test,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Exists,
    /// The value as written, `{{.var}}` templates included (rendered per call).
    Compare(Op, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    /// Whether `ordering` (the value's against the expected) passes.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => ordering == Equal,
            Op::Ne => ordering != Equal,
            Op::Lt => ordering == Less,
            Op::Le => ordering != Greater,
            Op::Gt => ordering == Greater,
            Op::Ge => ordering != Less,
        }
    }
}

impl Check {
    /// `PATH OP VALUE` (VALUE may hold spaces; double quotes around it are dropped) or
    /// `exists PATH`.
    fn parse(text: &str) -> Result<Check, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (field, test) = match words[..] {
            ["exists", path] => (path, Test::Exists),
            [path, op, ref value @ ..] if !value.is_empty() => {
                let op = match op {
                    "==" => Op::Eq,
                    "!=" => Op::Ne,
                    "<" => Op::Lt,
                    "<=" => Op::Le,
                    ">" => Op::Gt,
                    ">=" => Op::Ge,
                    other => return Err(format!("check {text:?}: {other:?} is not one of == != < <= > >=")),
                };
                let value = value.join(" ");
                let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(&value).to_owned();
                (path, Test::Compare(op, value))
            }
            _ => return Err(format!("check {text:?}: expected \"PATH OP VALUE\" or \"exists PATH\"")),
        };
        let field = Field::parse(field, true).map_err(|e| format!("check {text:?}: {e}"))?;
        Ok(Check { text: text.trim().to_owned(), field, test })
    }
}

/// Most flows a workload may have: each costs a latency histogram per shard, as a call name.
pub const MAX_FLOWS: usize = 32;
/// Most steps of one flow, and most checks of one call: the flow's state stays small.
pub const MAX_STEPS: usize = 64;
pub const MAX_CHECKS: usize = 32;
/// Longest captured value: a longer one fails its flow rather than growing memory.
pub const MAX_CAPTURE_BYTES: usize = 64 << 10;

/// Most calls a workload may name: each name costs one more latency histogram (about
/// 270 KiB at 3 digits over 1 ns..1 h) in every shard of every thread.
pub const MAX_CALLS: usize = 32;
/// The sum of the weights: one round-robin cycle is precomputed, so it stays small.
pub const MAX_TOTAL_WEIGHT: u64 = 100_000;

/// Reads and checks `path`; every problem is one line naming the file and the key.
pub fn read(path: &Path) -> anyhow::Result<Workload> {
    let label = format!("--workload {}", path.display());
    let text = crate::input::read_string(path, crate::input::Kind::RequestData, &label)?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse(&text, base).map_err(|why| bad_input(format!("{label}: {why}")))
}

/// `text` as a workload; `data_file`s are relative to `base` (the workload file's folder).
fn parse(text: &str, base: &Path) -> Result<Workload, String> {
    let document = toml::Deserializer::parse(text).map_err(|e| one_line(&e, text))?;
    // The path names the key at fault (`call[1].weight`), whatever serde's message says.
    let file: File = serde_path_to_error::deserialize(document).map_err(|e| match e.path().to_string() {
        path if path == "." => one_line(e.inner(), text),
        path => format!("{path}: {}", one_line(e.inner(), text)),
    })?;
    if file.call.is_empty() {
        return Err("no [[call]] in the file".into());
    }
    if file.call.len() > MAX_CALLS {
        return Err(format!("{} calls, more than the {MAX_CALLS} a workload may have", file.call.len()));
    }
    let mut calls = Vec::new();
    for (i, entry) in file.call.into_iter().enumerate() {
        let at = format!("call #{} ({:?})", i + 1, entry.name);
        if entry.name.trim().is_empty() {
            return Err(format!("call #{}: name is empty", i + 1));
        }
        if calls.iter().any(|c: &WorkloadCall| c.name == entry.name) {
            return Err(format!("{at}: the name is used twice"));
        }
        let weight = match entry.weight {
            Some(0) => return Err(format!("{at}: weight must be at least 1")),
            Some(w) => w,
            None => 1,
        };
        let mut captures = Vec::new();
        for (var, from) in entry.capture {
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("{at}: capture {var:?}: a variable name is letters, digits and _"));
            }
            let from = Field::parse(&from, false).map_err(|e| format!("{at}: capture {var:?}: {e}"))?;
            captures.push(Capture { var, from });
        }
        if !captures.is_empty() && file.flow.is_empty() {
            return Err(format!("{at}: capture is for the later steps of a [[flow]]; this workload has none"));
        }
        if entry.check.len() > MAX_CHECKS {
            return Err(format!("{at}: {} checks, more than the {MAX_CHECKS} a call may have", entry.check.len()));
        }
        let checks = entry
            .check
            .iter()
            .map(|c| Check::parse(c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{at}: {e}"))?;
        let data = match (entry.data, entry.data_file) {
            (Some(_), Some(_)) => return Err(format!("{at}: data and data_file together: give one")),
            (Some(toml::Value::String(json)), None) => crate::schema::DataSource::Json(json),
            // A TOML table (or array) is the request itself, as JSON would write it.
            (Some(value @ (toml::Value::Table(_) | toml::Value::Array(_))), None) => {
                crate::schema::DataSource::Json(serde_json::to_string(&value).map_err(|e| format!("{at}: data: {e}"))?)
            }
            (Some(other), None) => {
                return Err(format!("{at}: data must be a JSON string or a table, not a {}", other.type_str()))
            }
            (None, Some(file)) => crate::schema::DataSource::File(base.join(file)),
            (None, None) => crate::schema::DataSource::Empty,
        };
        calls.push(WorkloadCall { name: entry.name, method: entry.method, data, weight, captures, checks });
    }
    let flows = flows(file.flow, &calls)?;
    let workload = Workload { calls, flows };
    let total: u64 = workload.weights().iter().map(|&w| w as u64).sum();
    if total > MAX_TOTAL_WEIGHT {
        return Err(format!("the weights add up to {total}, more than {MAX_TOTAL_WEIGHT}; scale them down"));
    }
    Ok(workload)
}

impl Workload {
    /// What `Pick` picks by: each flow's weight, or without flows each call's.
    fn weights(&self) -> Vec<u32> {
        match self.flows.is_empty() {
            true => self.calls.iter().map(|c| c.weight).collect(),
            false => self.flows.iter().map(|f| f.weight).collect(),
        }
    }

    /// Whether some call has a check (`--assert checks...` counts them).
    pub fn has_checks(&self) -> bool {
        self.calls.iter().any(|c| !c.checks.is_empty())
    }

    /// The workload resolved, the rest of its checking done against the schema: each call's
    /// method from `resolve`, its data read, its stream limits (the flags, `given`) and its
    /// captures and checks checked against the method's kind and messages. Picked by weight
    /// in smooth round robin, or at random from `seed`.
    pub fn mix(
        &self,
        mut resolve: impl FnMut(&str) -> anyhow::Result<MethodDescriptor>,
        given: StreamLimits,
        seed: Option<u64>,
    ) -> anyhow::Result<Mix> {
        // Every variable the flows capture: a step's templates may name those captured before it.
        let mut vars: Vec<String> = self.calls.iter().flat_map(|c| c.captures.iter().map(|c| c.var.clone())).collect();
        vars.sort_unstable();
        vars.dedup();
        let mut calls: Vec<MixCall> = Vec::new();
        for call in &self.calls {
            let first_check = calls.iter().filter_map(|c| c.rules.as_ref()).map(Rules::checks).sum();
            calls.push(call.resolve(&mut resolve, &vars, given, first_check)?);
        }
        // Stream flags need a streaming call in the mix.
        if let (true, Some(method)) = (calls.iter().all(|c| c.kind == CallKind::Unary), &calls[0].schema) {
            stream_of(method, CallKind::Unary, given, 1)?;
        }
        let weights = self.weights();
        let pick = match seed {
            Some(seed) => Pick::random(&weights, seed),
            None => Pick::round_robin(&weights),
        };
        let flows = self
            .flows
            .iter()
            .map(|f| MixFlow {
                name: f.name.clone(),
                steps: f.steps.clone(),
                stop_on_check_failure: f.stop_on_check_failure,
            })
            .collect();
        Ok(Mix { calls, pick, named: true, flows, log: None })
    }
}

impl WorkloadCall {
    /// This call of the mix: its method resolved, its requests read, its stream limits and
    /// rules (its checks numbered from `first_check`) checked against the method.
    fn resolve(
        &self,
        resolve: impl FnOnce(&str) -> anyhow::Result<MethodDescriptor>,
        vars: &[String],
        given: StreamLimits,
        first_check: usize,
    ) -> anyhow::Result<MixCall> {
        let at = |e: anyhow::Error| {
            // The schema's messages speak of --call; here the method comes from the file.
            let why = format!("{e:#}");
            let why = why.strip_prefix("--call ").map_or(why.clone(), |rest| format!("method {rest}"));
            bad_input(format!("--workload: call {:?}: {why}", self.name))
        };
        let method = resolve(&self.method).map_err(at)?;
        let requests = Arc::new(RequestSource::with_vars(&method, &self.data, vars).map_err(at)?);
        // Each stream takes the run's stream flags (a client stream, by default, its records);
        // a unary call of a mix with streams ignores them.
        let given = match method.is_client_streaming() || method.is_server_streaming() {
            true => given,
            false => StreamLimits::default(),
        };
        let mut call = MixCall::new(&method, requests, given).map_err(at)?;
        call.rules = Rules::new(self, &method, vars, first_check)
            .map_err(|why| bad_input(format!("--workload: call {:?}: {why}", self.name)))?;
        call.name = self.name.clone();
        Ok(call)
    }
}

/// The `[[flow]]`s checked against the calls: every step a call, every call in a flow, and
/// every `{{.var}}` of a step captured by an earlier step (checks: by that step too).
fn flows(entries: Vec<FlowEntry>, calls: &[WorkloadCall]) -> Result<Vec<Flow>, String> {
    if entries.len() > MAX_FLOWS {
        return Err(format!("{} flows, more than the {MAX_FLOWS} a workload may have", entries.len()));
    }
    let mut flows: Vec<Flow> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let at = format!("flow #{} ({:?})", i + 1, entry.name);
        if entry.name.trim().is_empty() {
            return Err(format!("flow #{}: name is empty", i + 1));
        }
        if flows.iter().any(|f| f.name == entry.name) {
            return Err(format!("{at}: the name is used twice"));
        }
        if entry.weight == 0 {
            return Err(format!("{at}: weight must be at least 1"));
        }
        if entry.steps.is_empty() || entry.steps.len() > MAX_STEPS {
            return Err(format!("{at}: steps must name 1 to {MAX_STEPS} calls"));
        }
        let mut steps = Vec::new();
        let mut known: Vec<&str> = Vec::new();
        for step in &entry.steps {
            let index = calls
                .iter()
                .position(|c| &c.name == step)
                .ok_or_else(|| format!("{at}: step {step:?} is no [[call]]'s name"))?;
            let call = &calls[index];
            let unknown = |vars: Vec<String>, known: &[&str]| vars.into_iter().find(|v| !known.contains(&v.as_str()));
            if let Some(var) = unknown(data_vars(&call.data), &known) {
                return Err(format!("{at}: step {step:?} uses {{{{.{var}}}}}, which no earlier step captures"));
            }
            known.extend(call.captures.iter().map(|c| c.var.as_str()));
            let check_vars = call.checks.iter().flat_map(|c| match &c.test {
                Test::Compare(_, value) => template_vars(value),
                Test::Exists => vec![],
            });
            if let Some(var) = unknown(check_vars.collect(), &known) {
                return Err(format!(
                    "{at}: a check of step {step:?} uses {{{{.{var}}}}}, which no step up to it captures"
                ));
            }
            steps.push(index);
        }
        flows.push(Flow {
            name: entry.name,
            steps,
            weight: entry.weight,
            stop_on_check_failure: entry.stop_on_check_failure,
        });
    }
    if !flows.is_empty() {
        if let Some(call) = calls.iter().enumerate().find(|(i, _)| !flows.iter().any(|f| f.steps.contains(i))) {
            return Err(format!(
                "call {:?} is in no [[flow]]: with flows, calls are made only as their steps",
                call.1.name
            ));
        }
    }
    Ok(flows)
}

/// The `{{.name}}` variables a text names that are not ghz's own templates.
pub fn template_vars(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else { break };
        let action = rest[open + 2..open + close].trim();
        if let Some(name) = action.strip_prefix('.').filter(|n| !crate::schema::is_builtin_template(n)) {
            out.push(name.to_owned());
        }
        rest = &rest[open + close + 2..];
    }
    out
}

/// The variables an inline `data` names (a `data_file`'s are checked when it is read).
fn data_vars(data: &crate::schema::DataSource) -> Vec<String> {
    match data {
        crate::schema::DataSource::Json(text) => template_vars(text),
        _ => vec![],
    }
}

/// toml's errors span several lines (a snippet of the file): its message and line only.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let line = text.get(..span.start).map_or(0, |before| before.matches('\n').count()) + 1;
            format!("{message} (line {line})")
        }
        None => message,
    }
}

/// One pick of a round-robin cycle: the index of a call (or a flow) of the workload.
type Picked = u8;

// A cycle holds indices of calls and of flows in a `Picked`: every one must fit.
const _: () = assert!(MAX_CALLS <= Picked::MAX as usize + 1 && MAX_FLOWS <= Picked::MAX as usize + 1);

/// Which call of the mix a started call makes.
#[derive(Debug, Clone)]
pub enum Pick {
    /// Smooth weighted round robin: one cycle of sum(weights) picks, repeated; each name is
    /// picked exactly its weight times per cycle, spread evenly within it.
    RoundRobin(Vec<Picked>),
    /// `--seed`: each pick drawn by weight from the seed and the call's number.
    Random { seed: u64, cumulative: Vec<u64> },
}

impl Pick {
    pub fn round_robin(weights: &[u32]) -> Pick {
        let total: i64 = weights.iter().map(|&w| w as i64).sum();
        let mut current = vec![0i64; weights.len()];
        let cycle = (0..total)
            .map(|_| {
                // nginx's smooth weighted round robin (ngx_http_upstream_get_peer).
                for (c, &w) in current.iter_mut().zip(weights) {
                    *c += w as i64;
                }
                let best = (0..weights.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i))).unwrap_or(0);
                current[best] -= total;
                // Below MAX_CALLS or MAX_FLOWS, which fit (the assertion above).
                best as Picked
            })
            .collect();
        Pick::RoundRobin(cycle)
    }

    pub fn random(weights: &[u32], seed: u64) -> Pick {
        let cumulative = weights
            .iter()
            .scan(0u64, |sum, &w| {
                *sum += w as u64;
                Some(*sum)
            })
            .collect();
        Pick::Random { seed, cumulative }
    }

    /// The call (its index in the mix) of the run's `n`-th started call.
    pub fn pick(&self, n: u64) -> usize {
        match self {
            Pick::RoundRobin(cycle) if cycle.len() <= 1 => 0,
            Pick::RoundRobin(cycle) => cycle[(n % cycle.len() as u64) as usize] as usize,
            Pick::Random { seed, cumulative } => {
                let total = cumulative.last().copied().unwrap_or(1);
                let draw = splitmix64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % total;
                cumulative.partition_point(|&c| c <= draw)
            }
        }
    }
}

impl Pick {
    /// How many of the `n` calls numbered from `first` on each index is picked for: `each(index,
    /// count)`, an index possibly more than once. A round robin counts whole cycles at once.
    pub fn counts(&self, first: u64, n: u64, mut each: impl FnMut(usize, u64)) {
        match self {
            Pick::RoundRobin(cycle) if cycle.len() > 1 => {
                let len = cycle.len() as u64;
                let (whole, rest, at) = (n / len, n % len, first % len);
                for (i, &picked) in cycle.iter().enumerate() {
                    // Position i is among the `rest` picks after the whole cycles.
                    let extra = (i as u64 + len - at) % len < rest;
                    each(picked as usize, whole + extra as u64);
                }
            }
            Pick::RoundRobin(_) => each(0, n),
            Pick::Random { .. } => (first..first.saturating_add(n)).for_each(|k| each(self.pick(k), 1)),
        }
    }
}

/// A well-mixed 64-bit hash (SplitMix64's finalizer): a draw per call number, no shared state.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pick: &Pick, n: u64, names: usize) -> Vec<u64> {
        let mut out = vec![0; names];
        for i in 0..n {
            out[pick.pick(i)] += 1;
        }
        out
    }

    #[test]
    fn round_robin_is_exact_and_smooth() {
        let pick = Pick::round_robin(&[3, 7]);
        assert_eq!(counts(&pick, 1000, 2), vec![300, 700]);
        // Smooth: never three of the light call in a row, as nginx spreads them.
        let Pick::RoundRobin(cycle) = &pick else { unreachable!() };
        assert_eq!(cycle, &[1, 0, 1, 1, 0, 1, 1, 1, 0, 1]);
        assert_eq!(counts(&Pick::round_robin(&[5, 1, 1]), 7, 3), vec![5, 1, 1]);
    }

    /// `Pick::counts` over any stretch of numbers is what picking each one counts.
    #[test]
    fn counts_of_a_stretch_are_those_of_each_pick() {
        for pick in [Pick::round_robin(&[3, 7]), Pick::round_robin(&[1]), Pick::random(&[2, 1, 4], 9)] {
            for (first, n) in [(0, 0), (0, 25), (7, 3), (13, 1000), (999, 11)] {
                let mut by_stretch = vec![0; 3];
                pick.counts(first, n, |i, count| by_stretch[i] += count);
                let each: Vec<u64> =
                    (0..3).map(|i| (first..first + n).filter(|&k| pick.pick(k) == i).count() as u64).collect();
                assert_eq!(by_stretch, each, "{pick:?} from {first}, {n} calls");
            }
        }
    }

    #[test]
    fn random_pick_follows_the_weights_and_the_seed() {
        let pick = Pick::random(&[3, 7], 42);
        let got = counts(&pick, 100_000, 2);
        assert!((29_000..31_000).contains(&got[0]), "{got:?}");
        assert_eq!(got, counts(&Pick::random(&[3, 7], 42), 100_000, 2));
        assert_ne!(got, counts(&Pick::random(&[3, 7], 43), 100_000, 2));
    }

    #[test]
    fn a_workload_reads_and_checks() {
        let base = Path::new("/w");
        let ok = r#"
            [[call]]
            name = "put"
            method = "rpcmeter.lab.v1.Storage/PutValue"
            data = { key = "k", value = "aGk=" }
            weight = 3
            [[call]]
            name = "get"
            method = "rpcmeter.lab.v1.Storage/GetValue"
            data_file = "get.jsonl"
            weight = 7
        "#;
        let calls = parse(ok, base).unwrap().calls;
        assert_eq!(calls[0].data, crate::schema::DataSource::Json(r#"{"key":"k","value":"aGk="}"#.into()));
        assert_eq!(calls[1].data, crate::schema::DataSource::File("/w/get.jsonl".into()));
        let bad = |text: &str| parse(text, base).unwrap_err();
        let e = bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 1\nwieght = 2\n");
        assert!(e.contains("unknown field `wieght`") && !e.contains('\n'), "{e}");
        assert!(bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 0\n").contains("weight must be at least 1"));
        // A weight left out is 1: one call alone needs none (was refused: missing field `weight`).
        assert_eq!(parse("[[call]]\nname = \"a\"\nmethod = \"x/y\"\n", base).unwrap().calls[0].weight, 1);
        assert!(bad("").contains("missing field `call`"));
        let twice = "[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 1\n".repeat(2);
        assert!(bad(&twice).contains("used twice"));
        assert!(bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 100001\n").contains("add up to 100001"));
        let many: String =
            (0..=MAX_CALLS).map(|i| format!("[[call]]\nname = \"c{i}\"\nmethod = \"x/y\"\nweight = 1\n")).collect();
        assert!(bad(&many).contains("more than the 32"));
    }

    #[test]
    fn checks_and_fields_read_as_written() {
        let c = Check::parse("version >= {{.version}}").unwrap();
        assert_eq!(c.field, Field::Response("version".into()));
        assert_eq!(c.test, Test::Compare(Op::Ge, "{{.version}}".into()));
        let c = Check::parse("header.X-Trace != \"a b\"").unwrap();
        assert_eq!((c.field, c.test), (Field::Header("x-trace".into()), Test::Compare(Op::Ne, "a b".into())));
        assert_eq!(Check::parse("exists trailer.grpc-status").unwrap().test, Test::Exists);
        assert!(Check::parse("found").unwrap_err().contains("expected \"PATH OP VALUE\""));
        assert!(Check::parse("found =~ x").unwrap_err().contains("is not one of"));
        assert!(Field::parse("version", false).unwrap_err().contains("not request.PATH"));
        use std::cmp::Ordering::*;
        assert!(Op::Le.holds(Equal) && Op::Le.holds(Less) && !Op::Le.holds(Greater));
        assert!(Op::Ne.holds(Less) && !Op::Eq.holds(Greater) && Op::Gt.holds(Greater));
    }

    #[test]
    fn flows_name_calls_and_use_only_values_captured_before() {
        let calls = r#"
            [[call]]
            name = "put"
            method = "x/Put"
            data = '{"key":"k{{.RequestNumber}}"}'
            capture = { key = "request.key" }
            [[call]]
            name = "get"
            method = "x/Get"
            data = '{"key":"{{.key}}"}'
            check = ["found == true"]
        "#;
        let w = parse(&format!("{calls}[[flow]]\nname = \"f\"\nsteps = [\"put\", \"get\", \"get\"]\n"), Path::new(""))
            .unwrap();
        assert_eq!(
            w.flows,
            vec![Flow { name: "f".into(), steps: vec![0, 1, 1], weight: 1, stop_on_check_failure: false }]
        );
        assert_eq!(w.calls[0].captures, vec![Capture { var: "key".into(), from: Field::Request("key".into()) }]);
        let bad = |steps: &str| {
            parse(&format!("{calls}[[flow]]\nname = \"f\"\nsteps = {steps}\n"), Path::new("")).unwrap_err()
        };
        assert!(bad(r#"["get", "put"]"#).contains("uses {{.key}}, which no earlier step captures"));
        assert!(bad("[]").contains("steps must name 1 to 64 calls"));
        assert!(bad(r#"["put"]"#).contains("\"get\" is in no [[flow]]"));
        let many: String =
            (0..=MAX_FLOWS).map(|i| format!("[[flow]]\nname = \"f{i}\"\nsteps = [\"put\", \"get\"]\n")).collect();
        assert!(parse(&format!("{calls}{many}"), Path::new("")).unwrap_err().contains("more than the 32"));
    }
}
