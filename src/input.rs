//! Reading what rpcmeter is handed (result files, `-D` data, .proto files, standard input)
//! with a bound: a file larger than its kind's limit is refused with one line and exit 2
//! before its content is taken into memory, so `rpcmeter report /dev/zero` ends at once
//! instead of growing until the machine's OOM killer ends it. `--max-input-size` raises
//! the limits (docs/results.md, "Input limits").
use crate::error::bad_input;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A number of bytes, as `--max-input-size` takes it: `300MiB`, `1G`, `5000000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn mib(n: u64) -> ByteSize {
        ByteSize(n << 20)
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::units::bytes(self.0))
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    /// A whole or decimal number, then a unit as dd(1) reads them: none or B (bytes);
    /// K, M, G, T or KiB... (powers of 1024); KB, MB, GB, TB (powers of 1000). Case is ignored.
    fn from_str(text: &str) -> Result<ByteSize, String> {
        let bad = || format!("{text:?}: expected a size such as 300MiB, 1G or 5000000 (bytes)");
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kib" => 1024.0,
            "m" | "mib" => 1024f64.powi(2),
            "g" | "gib" => 1024f64.powi(3),
            "t" | "tib" => 1024f64.powi(4),
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            "tb" => 1e12,
            _ => return Err(bad()),
        };
        let bytes = number * scale;
        // u64::MAX as f64 rounds up to 2^64, which does not fit: stay below it.
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

/// What is read; each kind has its own default limit, far above what rpcmeter itself writes
/// (a result of a long run with details is a few MiB) and far below a machine's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A result JSON (report, merge, compare, a history row): 256 MiB.
    Result,
    /// `-D` request data: 64 MiB.
    RequestData,
    /// A .proto file or a protoset: 16 MiB.
    Proto,
    /// A PEM certificate or key (`--cacert`, `--cert`, `--key`, serve's `--tls-*`): 16 MiB.
    Pem,
}

impl Kind {
    pub const fn default_limit(self) -> ByteSize {
        match self {
            Kind::Result => ByteSize::mib(256),
            Kind::RequestData => ByteSize::mib(64),
            Kind::Proto | Kind::Pem => ByteSize::mib(16),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Result => "a result",
            Kind::RequestData => "request data",
            Kind::Proto => "a .proto file",
            Kind::Pem => "a PEM file",
        }
    }
}

/// `--max-input-size` of this process (0: not given, each kind's default holds).
static MAX: AtomicU64 = AtomicU64::new(0);

/// `--max-input-size`, for the commands that read files.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// Read input files (results, -D data, .proto and PEM files, standard input) up to SIZE
    /// each [default: 256MiB for results, 64MiB for -D data, 16MiB for .proto and PEM files]
    #[arg(long, global = true, value_name = "SIZE", value_parser = size)]
    pub max_input_size: Option<ByteSize>,
}

impl InputArgs {
    /// Makes the flag the limit of every read of this process.
    pub fn apply(&self) {
        MAX.store(self.max_input_size.map_or(0, |s| s.0.max(1)), Ordering::Relaxed);
    }
}

pub fn size(text: &str) -> Result<ByteSize, String> {
    text.parse()
}

/// The limit for `kind` in this process.
pub fn limit(kind: Kind) -> ByteSize {
    match MAX.load(Ordering::Relaxed) {
        0 => kind.default_limit(),
        max => ByteSize(max),
    }
}

/// The one line refusing an input of `size` (None: more than the limit, size unknown).
pub fn too_large(label: &str, size: Option<u64>, kind: Kind, limit: ByteSize) -> anyhow::Error {
    let size = size.map_or_else(String::new, |s| format!("{}, ", ByteSize(s)));
    bad_input(format!(
        "{label}: {size}larger than the {limit} allowed for {} (--max-input-size SIZE reads more)",
        kind.name()
    ))
}

/// The bytes of `path` (`-`: standard input), refused when larger than `kind`'s limit.
/// `label` names the input in errors (e.g. "-D data.json").
pub fn read(path: &Path, kind: Kind, label: &str) -> anyhow::Result<Vec<u8>> {
    read_with(path, kind, limit(kind), label)
}

/// `read`, as UTF-8 text.
pub fn read_string(path: &Path, kind: Kind, label: &str) -> anyhow::Result<String> {
    String::from_utf8(read(path, kind, label)?).map_err(|_| bad_input(format!("{label}: not UTF-8 text")))
}

fn read_with(path: &Path, kind: Kind, limit: ByteSize, label: &str) -> anyhow::Result<Vec<u8>> {
    let cannot = |e: std::io::Error| bad_input(format!("{label}: cannot read: {e}"));
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin().lock().take(limit.0.saturating_add(1)).read_to_end(&mut bytes).map_err(cannot)?;
    } else {
        let file = std::fs::File::open(path).map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        // A regular file says its size: refuse it unread. Devices and pipes do not; the
        // bounded read below stops them.
        if meta.is_file() && meta.len() > limit.0 {
            return Err(too_large(label, Some(meta.len()), kind, limit));
        }
        if meta.is_file() {
            bytes.reserve_exact(usize::try_from(meta.len()).unwrap_or(0));
        }
        file.take(limit.0.saturating_add(1)).read_to_end(&mut bytes).map_err(cannot)?;
    }
    if bytes.len() as u64 > limit.0 {
        return Err(too_large(label, None, kind, limit));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sizes_as_dd_reads_them() {
        let parse = |t: &str| t.parse::<ByteSize>();
        assert_eq!(parse("5000000"), Ok(ByteSize(5_000_000)));
        assert_eq!(parse("300MiB"), Ok(ByteSize(300 << 20)));
        assert_eq!(parse("1G"), Ok(ByteSize(1 << 30)));
        assert_eq!(parse("1.5 kb"), Ok(ByteSize(1500)));
        assert_eq!(parse("2TB"), Ok(ByteSize(2_000_000_000_000)));
        for bad in ["", "MiB", "-1", "1x", "1e3", "99999999999T", "nan", "1..2M"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(ByteSize::mib(256).to_string(), "256.0 MiB");
    }

    #[test]
    fn files_above_the_limit_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        // Sparse: 1 GiB said, no disk used.
        std::fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
        let err = read_with(&path, Kind::Result, ByteSize::mib(256), "big.json").unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert_eq!(
            err.to_string(),
            "big.json: 1.0 GiB, larger than the 256.0 MiB allowed for a result (--max-input-size SIZE reads more)"
        );
        let small = dir.path().join("small.json");
        std::fs::File::create(&small).unwrap().write_all(b"{}").unwrap();
        assert_eq!(read_with(&small, Kind::Result, ByteSize(2), "s").unwrap(), b"{}");
        assert!(read_with(&small, Kind::Result, ByteSize(1), "s").is_err());
    }

    #[test]
    fn endless_devices_stop_at_the_limit() {
        let err = read_with(Path::new("/dev/zero"), Kind::RequestData, ByteSize(1000), "-D /dev/zero").unwrap_err();
        assert!(err.to_string().starts_with("-D /dev/zero: larger than the 1000 B allowed for request data"), "{err}");
        let err = read_with(Path::new("/nonexistent"), Kind::Result, ByteSize(1000), "x").unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
    }
}
