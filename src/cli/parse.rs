//! Value parsers for flags: each turns one piece of text into a typed, bounded value or
//! says in one line what is wrong with it. `run` and `serve` share them, so a duration is
//! read and refused the same way everywhere.
use crate::load::pacer::{RateSchedule, Stages};
use std::time::Duration;

/// The longest duration any flag takes: 30 days. Bounding it here means no sum of
/// durations and instants further down can overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// A duration such as `500ms`, `10s`, `2m`, at most `MAX_DURATION`.
pub fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|_| format!("invalid duration {text:?} (expected e.g. 500ms, 10s, 2m)"))?;
    if d > MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than the {} any duration may be",
            humantime::format_duration(MAX_DURATION)
        ));
    }
    Ok(d)
}

/// HOST:PORT to listen on; `:PORT` alone means every interface (0.0.0.0:PORT), as
/// Prometheus exporters take it (node_exporter's `--web.listen-address=:9100`).
pub fn listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    full.parse().map_err(|_| format!("{text:?} is not HOST:PORT (e.g. 127.0.0.1:9100), or :PORT for every interface"))
}

/// A duration above zero.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d.is_zero() => Err(format!("{text:?}: must be above zero")),
        d => Ok(d),
    }
}

/// `--cancel-after`: `begin`, `first-response` or a duration above zero.
pub fn cancel_after(text: &str) -> Result<crate::grpc::CancelAfter, String> {
    use crate::grpc::CancelAfter;
    match text.trim() {
        "begin" => Ok(CancelAfter::Begin),
        "first-response" => Ok(CancelAfter::FirstResponse),
        other => match positive_duration(other) {
            Ok(d) => Ok(CancelAfter::Time(d)),
            Err(_) => Err(format!("{text:?}: expected begin, first-response or a duration (e.g. 50ms)")),
        },
    }
}

/// The slowest rate worth pacing: one call every 1000 s.
const MIN_RATE: f64 = 0.001;
/// The fastest: a call every nanosecond, far beyond what any client sends.
const MAX_RATE: f64 = 1e9;

/// A rate in calls/s, from `MIN_RATE` to `MAX_RATE`.
pub fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r) => Ok(r),
        _ => Err(format!("{text:?} is not a rate from {MIN_RATE} to {MAX_RATE:e} calls/s")),
    }
}

/// `R` or `FROM:TO:DURATION` (a linear ramp of the rate).
pub fn rate_schedule(text: &str) -> Result<RateSchedule, String> {
    match text.split(':').collect::<Vec<_>>().as_slice() {
        [r] => Ok(RateSchedule::constant(rate(r)?)),
        [from, to, over] => Ok(RateSchedule::ramp(rate(from)?, rate(to)?, positive_duration(over)?)),
        _ => Err(format!("{text:?}: expected R or FROM:TO:DURATION (e.g. 100:1000:30s)")),
    }
}

/// `D:V,D:V,...` (`--stages`): each stage moves the rate or the workers linearly to V over D
/// (0s: a step), from 0 at the start. Whether V is a rate or a count is `run`'s to check.
pub fn stages(text: &str) -> Result<Stages, String> {
    let bad = |why: String| format!("--stages {text:?}: {why} (expected D:V,... e.g. 10s:100,30s:1000,10s:0)");
    let mut stages = Vec::new();
    let mut total = Duration::ZERO;
    for stage in text.split(',') {
        let (over, to) = stage.split_once(':').ok_or_else(|| bad(format!("{stage:?} is not D:V")))?;
        let over = duration(over).map_err(bad)?;
        let to = match to.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..=MAX_RATE).contains(&v) => v,
            _ => return Err(bad(format!("{to:?} is not a number from 0 to {MAX_RATE:e}"))),
        };
        total = total.saturating_add(over);
        stages.push((over, to));
    }
    if total.is_zero() {
        return Err(bad("the stages last no time".into()));
    }
    if total > MAX_DURATION {
        return Err(bad(format!("the stages last more than {}", humantime::format_duration(MAX_DURATION))));
    }
    Ok(Stages::new(0.0, &stages))
}

/// A gRPC status a call may be retried on (OK never is).
pub fn retry_status(text: &str) -> Result<tonic::Code, String> {
    match crate::grpc::status::parse(text) {
        Some(tonic::Code::Ok) => Err("OK is a success and is never retried".into()),
        Some(code) => Ok(code),
        None => Err(format!("unknown gRPC status {text:?} (known: {})", crate::grpc::status::names().join(", "))),
    }
}

/// `KEY=VALUE`.
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("{text:?}: expected KEY=VALUE")),
    }
}

/// `--warmup`: a fixed time, or `auto` (found by steady-state detection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    Fixed(Duration),
    Auto,
}

pub fn warmup(text: &str) -> Result<Warmup, String> {
    match text.trim() {
        "auto" => Ok(Warmup::Auto),
        other => duration(other).map(Warmup::Fixed),
    }
}

/// `I/N`: shard I (from 0) of N.
pub fn shard(text: &str) -> Result<crate::load::plan::ShardOf, String> {
    let bad = || format!("{text:?}: expected I/N with 0 <= I < N <= {MAX_SHARDS} (e.g. 0/4)");
    let (index, count) = text.split_once('/').ok_or_else(bad)?;
    let (index, count): (u32, u32) =
        (index.trim().parse().map_err(|_| bad())?, count.trim().parse().map_err(|_| bad())?);
    if count == 0 || count > MAX_SHARDS || index >= count {
        return Err(bad());
    }
    Ok(crate::load::plan::ShardOf { index, count })
}

/// More shards than this is a typo, not a load.
pub const MAX_SHARDS: u32 = 10_000;

/// `--shards N`: from 1 to `MAX_SHARDS`.
pub fn shard_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SHARDS).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: expected a number of shards from 1 to {MAX_SHARDS}")),
    }
}

/// A wall-clock time: Unix seconds (`1767225600.5`) or RFC 3339 (`2026-01-01T00:00:00Z`).
pub fn start_at(text: &str) -> Result<std::time::SystemTime, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        let since = Duration::try_from_secs_f64(secs).map_err(|_| format!("{text:?} is not a time"))?;
        return std::time::UNIX_EPOCH.checked_add(since).ok_or_else(|| format!("{text:?} is not a time"));
    }
    humantime::parse_rfc3339_weak(text).map_err(|_| format!("{text:?}: expected Unix seconds or an RFC 3339 time"))
}

/// What the user typed as a target, before any name is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetText {
    pub host: String,
    pub port: u16,
    /// `http://` (plaintext) or `https://` (TLS) was written before the address.
    pub scheme_plaintext: Option<bool>,
    /// `unix:PATH`: a Unix socket.
    pub unix: Option<std::path::PathBuf>,
    /// `ipv4:`, `ipv6:` lists and `dns:///` names (docs/targets.md); `host`/`port` are the
    /// first address's.
    pub addresses: crate::grpc::Addresses,
    /// The target was written with `USER:PASS@` before its host: kept out of `host` (and so
    /// out of every place a target is written), and refused with the credential redacted.
    pub userinfo: bool,
}

/// `HOST:PORT`, `[IPv6]:PORT`, also as grpcurl and browser users type it: `dns:///HOST:PORT`,
/// `http://HOST:PORT` (plaintext), `https://HOST:PORT` (TLS).
/// Schemes are case-insensitive (RFC 3986, 3.1): `IPV4:`, `HTTP://` and `Unix:` are read as
/// their lower-case selves.
pub fn target(text: &str) -> Result<TargetText, String> {
    use crate::grpc::Addresses;
    let bad = || format!("target {text:?}: expected HOST:PORT (e.g. 127.0.0.1:9000)");
    let scheme =
        |name: &str| text.get(..name.len()).filter(|s| s.eq_ignore_ascii_case(name)).map(|_| &text[name.len()..]);
    let mut addresses = Addresses::Host;
    let (rest, scheme_plaintext) = if let Some(r) = scheme("http://") {
        (r, Some(true))
    } else if let Some(r) = scheme("https://") {
        (r, Some(false))
    } else if let Some(r) = scheme("dns:") {
        // gRPC's dns:[//AUTHORITY/]HOST:PORT; a DNS server of the target's own is not supported.
        let r = match r.strip_prefix("//") {
            Some(rest) => match rest.split_once('/') {
                Some(("", name)) => name,
                _ => return Err(format!("target {text:?}: expected dns:///HOST:PORT (no DNS server of its own)")),
            },
            None => r,
        };
        addresses = Addresses::Dns;
        (r, None)
    } else if let Some((v6, list)) = scheme("ipv4:").map(|l| (false, l)).or_else(|| scheme("ipv6:").map(|l| (true, l)))
    {
        return address_list(text, v6, list);
    } else if let Some(path) = scheme("unix://").or_else(|| scheme("unix:")) {
        if path.is_empty() {
            return Err(format!("target {text:?}: expected unix:PATH"));
        }
        let unix = Some(std::path::PathBuf::from(path));
        return Ok(TargetText {
            host: "localhost".into(),
            port: 0,
            scheme_plaintext: None,
            unix,
            addresses,
            userinfo: false,
        });
    } else {
        (text, None)
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    // `user:pass@host`: the credential never reaches `host`, which every report writes.
    let (userinfo, host) = match host.rsplit_once('@') {
        Some((_, host)) => (true, host),
        None => (false, host),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 || host.contains('/') {
        return Err(bad());
    }
    Ok(TargetText { host: host.to_string(), port, scheme_plaintext, unix: None, addresses, userinfo })
}

/// gRPC's `ipv4:ADDR:PORT,ADDR:PORT` and `ipv6:[ADDR]:PORT,...`: literal addresses, each with
/// its port, none twice (each is a backend of its own in the results).
fn address_list(text: &str, v6: bool, list: &str) -> Result<TargetText, String> {
    let example = if v6 { "ipv6:[::1]:9000,[::1]:9001" } else { "ipv4:127.0.0.1:9000,127.0.0.1:9001" };
    let mut addrs: Vec<std::net::SocketAddr> = Vec::new();
    for item in list.split(',') {
        let addr: std::net::SocketAddr = item
            .parse()
            .ok()
            .filter(|a: &std::net::SocketAddr| a.is_ipv6() == v6 && a.port() != 0)
            .ok_or_else(|| format!("target {text:?}: {item:?} is not an address with its port (e.g. {example})"))?;
        if addrs.contains(&addr) {
            return Err(format!("target {text:?}: {addr} is listed twice"));
        }
        addrs.push(addr);
    }
    let first = addrs[0];
    Ok(TargetText {
        host: first.ip().to_string(),
        port: first.port(),
        scheme_plaintext: None,
        unix: None,
        addresses: crate::grpc::Addresses::List(addrs),
        userinfo: false,
    })
}

/// `--format` of a subcommand that prints one table, or the same as JSON: `report::Format`
/// (one format type everywhere) with only `table` and `json` offered.
pub fn table_or_json() -> impl clap::builder::TypedValueParser<Value = crate::report::Format> {
    formats(&["table", "json"])
}

/// `--format` of a command that also draws an HTML page of its own: table, json or html.
pub fn table_json_or_html() -> impl clap::builder::TypedValueParser<Value = crate::report::Format> {
    formats(&["table", "json", "html"])
}

/// `--format` limited to the formats a command writes (clap names them when refusing one).
pub fn formats(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = crate::report::Format> {
    use clap::builder::TypedValueParser as _;
    use clap::ValueEnum as _;
    clap::builder::PossibleValuesParser::new(names.iter().copied())
        .map(|name| crate::report::Format::from_str(&name, true).expect("a listed format"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_take_a_bare_port_as_every_interface() {
        assert_eq!(listen_addr(":9100"), Ok("0.0.0.0:9100".parse().unwrap()));
        assert_eq!(listen_addr("127.0.0.1:0"), Ok("127.0.0.1:0".parse().unwrap()));
        assert_eq!(listen_addr("[::1]:9100"), Ok("[::1]:9100".parse().unwrap()));
        for bad in ["localhost", ":", ":99999", "9100", ""] {
            assert!(listen_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_are_bounded() {
        assert_eq!(duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert!(duration("30days").is_ok());
        assert!(duration("31days").unwrap_err().contains("longer than"));
        assert!(duration("99999999999999999h").is_err());
        assert!(duration("5x").unwrap_err().contains("invalid duration"));
        assert!(positive_duration("0s").is_err());
    }

    #[test]
    fn rates_and_ramps() {
        assert_eq!(rate_schedule("100").unwrap(), RateSchedule::constant(100.0));
        assert_eq!(rate_schedule("100:300:2s").unwrap(), RateSchedule::ramp(100.0, 300.0, Duration::from_secs(2)));
        for bad in ["0", "-1", "nan", "inf", "1e300", "1:2", "1:2:0s", "1:2:3:4"] {
            assert!(rate_schedule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn stages_as_k6_writes_them() {
        let s = stages("10s:100,30s:1000,0s:50,10s:0").unwrap();
        assert_eq!(s.length(), Duration::from_secs(50));
        assert_eq!(s.peak(), 1000.0);
        assert_eq!(s.to_string(), "10s:100,30s:1000,0s:50,10s:0");
        for bad in ["", "10s", "10s:-1", "x:1", "10s:nan", "0s:5", "20days:1,20days:1", "10s:1e300"] {
            assert!(stages(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn targets_as_people_type_them() {
        let t = target("127.0.0.1:9000").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.scheme_plaintext), ("127.0.0.1", 9000, None));
        assert_eq!(target("http://localhost:80").unwrap().scheme_plaintext, Some(true));
        assert_eq!(target("https://example.com:443/").unwrap().scheme_plaintext, Some(false));
        assert_eq!(target("dns:///example.com:443").unwrap().host, "example.com");
        assert_eq!(target("[::1]:9000").unwrap().host, "::1");
        assert_eq!(target("unix:/tmp/lab.sock").unwrap().unix, Some("/tmp/lab.sock".into()));
        assert_eq!(target("unix:///tmp/lab.sock").unwrap().unix, Some("/tmp/lab.sock".into()));
        for bad in ["9000", "host:0", ":9000", "host:99999", "unix:", "http://a/b:1"] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn targets_as_grpc_names_them() {
        use crate::grpc::Addresses;
        // Schemes in any case (a host name never holds a colon before its port).
        assert_eq!(target("IPV4:127.0.0.1:9000").unwrap().addresses, target("ipv4:127.0.0.1:9000").unwrap().addresses);
        assert_eq!(target("Unix:/tmp/lab.sock").unwrap().unix, Some("/tmp/lab.sock".into()));
        assert_eq!(target("HTTP://h:1").unwrap().scheme_plaintext, Some(true));
        assert_eq!(target("DNS:///h:1").unwrap().addresses, crate::grpc::Addresses::Dns);
        let t = target("ipv4:127.0.0.1:9000,127.0.0.2:9001").unwrap();
        let list = vec!["127.0.0.1:9000".parse().unwrap(), "127.0.0.2:9001".parse().unwrap()];
        assert_eq!((t.host.as_str(), t.port, t.addresses), ("127.0.0.1", 9000, Addresses::List(list)));
        let t = target("ipv6:[::1]:9000,[::1]:9001").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 9000));
        assert_eq!(target("dns:///example.com:443").unwrap().addresses, Addresses::Dns);
        assert_eq!(target("dns:example.com:443").unwrap().host, "example.com");
        let errors = [
            ("ipv4:", "is not an address"),
            ("ipv4:127.0.0.1", "is not an address"),
            ("ipv4:127.0.0.1:9000,", "is not an address"),
            ("ipv4:[::1]:9000", "is not an address"),
            ("ipv6:127.0.0.1:9000", "is not an address"),
            ("ipv4:127.0.0.1:0", "is not an address"),
            ("ipv4:127.0.0.1:9000,127.0.0.1:9000", "listed twice"),
            ("dns://8.8.8.8/example.com:443", "no DNS server of its own"),
            ("dns:///example.com", "expected HOST:PORT"),
        ];
        for (bad, why) in errors {
            let err = target(bad).unwrap_err();
            assert!(err.contains(why) && !err.contains('\n'), "{bad}: {err}");
        }
    }

    #[test]
    fn retrying_ok_is_refused() {
        assert!(retry_status("OK").unwrap_err().contains("never retried"));
        assert_eq!(retry_status("unavailable"), Ok(tonic::Code::Unavailable));
        assert!(retry_status("NOPE").unwrap_err().contains("known:"));
    }
}
