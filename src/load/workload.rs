//! `run --workload FILE`: a weighted mix of calls, read from TOML. Which call each started
//! call makes is decided by `Pick` from the call's run-wide start number alone, so every
//! thread agrees without a lock: smooth weighted round robin (nginx's), exact over every
//! whole cycle, or a seeded random draw.
use crate::error::bad_input;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    call: Vec<CallEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEntry {
    name: String,
    method: String,
    data: Option<toml::Value>,
    data_file: Option<PathBuf>,
    weight: u32,
}

/// One call of the mix, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadCall {
    pub name: String,
    pub method: String,
    pub data: crate::schema::DataSource,
    pub weight: u32,
}

/// Most calls a workload may name: each name costs one more latency histogram (about
/// 270 KiB at 3 digits over 1 ns..1 h) in every shard of every thread.
pub const MAX_CALLS: usize = 32;
/// The sum of the weights: one round-robin cycle is precomputed, so it stays small.
pub const MAX_TOTAL_WEIGHT: u64 = 100_000;

/// Reads and checks `path`; every problem is one line naming the file and the key.
pub fn read(path: &Path) -> anyhow::Result<Vec<WorkloadCall>> {
    let label = format!("--workload {}", path.display());
    let text = crate::input::read_string(path, crate::input::Kind::RequestData, &label)?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse(&text, base).map_err(|why| bad_input(format!("{label}: {why}")))
}

/// `text` as a workload; `data_file`s are relative to `base` (the workload file's folder).
fn parse(text: &str, base: &Path) -> Result<Vec<WorkloadCall>, String> {
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
        if entry.weight == 0 {
            return Err(format!("{at}: weight must be at least 1"));
        }
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
        calls.push(WorkloadCall { name: entry.name, method: entry.method, data, weight: entry.weight });
    }
    let total: u64 = calls.iter().map(|c| c.weight as u64).sum();
    if total > MAX_TOTAL_WEIGHT {
        return Err(format!("the weights add up to {total}, more than {MAX_TOTAL_WEIGHT}; scale them down"));
    }
    Ok(calls)
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

/// Which call of the mix a started call makes.
#[derive(Debug, Clone)]
pub enum Pick {
    /// Smooth weighted round robin: one cycle of sum(weights) picks, repeated; each name is
    /// picked exactly its weight times per cycle, spread evenly within it.
    RoundRobin(Vec<u8>),
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
                best as u8
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
        let calls = parse(ok, base).unwrap();
        assert_eq!(calls[0].data, crate::schema::DataSource::Json(r#"{"key":"k","value":"aGk="}"#.into()));
        assert_eq!(calls[1].data, crate::schema::DataSource::File("/w/get.jsonl".into()));
        let bad = |text: &str| parse(text, base).unwrap_err();
        let e = bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 1\nwieght = 2\n");
        assert!(e.contains("unknown field `wieght`") && !e.contains('\n'), "{e}");
        assert!(bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 0\n").contains("weight must be at least 1"));
        assert!(bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\n").contains("missing field `weight`"));
        assert!(bad("").contains("missing field `call`"));
        let twice = "[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 1\n".repeat(2);
        assert!(bad(&twice).contains("used twice"));
        assert!(bad("[[call]]\nname = \"a\"\nmethod = \"x/y\"\nweight = 100001\n").contains("add up to 100001"));
        let many: String =
            (0..=MAX_CALLS).map(|i| format!("[[call]]\nname = \"c{i}\"\nmethod = \"x/y\"\nweight = 1\n")).collect();
        assert!(bad(&many).contains("more than the 32"));
    }
}
