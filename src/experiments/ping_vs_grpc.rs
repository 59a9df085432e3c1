//! `lab ping-vs-grpc`: docs/experiments.md, "Ping vs gRPC latency". `rpcmeter ping` (ICMP
//! echo beside gRPC echo calls, interleaved) on loopback against rpcmeter's server and the
//! grpc-go one, and across a pair of network namespaces joined by a veth link where this
//! machine allows it (root, `ip netns`), with `tc netem` delay and jitter standing in for a
//! WAN where the kernel has netem. The write-up's table per protocol, the gap with its
//! confidence interval, and box and violin plots with and without its z-score trimming,
//! side by side: trimming here is always shown, never silent.
use super::servers::{self, Runtime, Server};
use super::Lab;
use crate::report::html::{box_plot, violins, Distribution};
use crate::stats::compare;
use crate::stats::describe::Description;
use anyhow::Context;
use hdrhistogram::Histogram;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub const TITLE: &str = "Lab: ping vs gRPC latency";

/// The write-up's trimming: iterated passes dropping |z| > 3.
const Z: f64 = 3.0;

/// One `rpcmeter ping` series: the network probe's and gRPC's round trips.
struct Series {
    path: String,
    network_method: String,
    network: Vec<Duration>,
    grpc: Vec<Duration>,
    lost: (u64, u64),
    /// (median gRPC - median network, its confidence interval), µs.
    difference_us: Option<(f64, f64, f64)>,
}

pub fn run(mut lab: Lab) -> anyhow::Result<(PathBuf, PathBuf)> {
    let quick = lab.options.quick;
    let (count, interval) = if quick { (30, Duration::from_millis(30)) } else { (600, Duration::from_secs(1)) };
    lab.doc.para(format!(
        "The write-up sent one ICMP echo and one gRPC echo per second for an hour to a far server. Here: `rpcmeter ping`, \
         {count} samples of each at {} intervals{}, interleaved on one warmed gRPC connection, per path below. The table \
         has every sample; the plots show the samples as they are and after the write-up's z-score trimming (|z| > {Z}, \
         repeated passes).",
        humantime::format_duration(interval),
        if quick { " (quick mode; 600 at 1 s without --quick)" } else { "" }
    ));
    let ready = lab.servers(&[Runtime::Rpcmeter, Runtime::Go])?;
    let exe = std::env::current_exe().context("cannot find the rpcmeter binary")?;
    let ping_args = |target: &str| -> Vec<String> {
        let mut a: Vec<String> = ["ping", target, "--plaintext", "--format", "json", "-n"].map(String::from).to_vec();
        a.extend([count.to_string(), "--interval".into(), humantime::format_duration(interval).to_string()]);
        a
    };
    let mut series = Vec::new();
    for (runtime, built) in &ready {
        if lab.interrupted() {
            break;
        }
        let server = Server::start(*runtime, built, runtime.name(), &[])?;
        let path = format!("loopback, {} server", runtime.name());
        eprintln!("lab ping-vs-grpc: {path}");
        let out = Command::new(&exe).args(ping_args(&server.addr)).output().context("cannot run rpcmeter ping")?;
        series.push(parse_series(&path, &out.stdout).with_context(|| {
            format!("ping on {path}: {}", String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or(""))
        })?);
        let cut_short = lab.interrupted();
        lab.ran(&path, cut_short);
    }
    let notes = namespace_path(&mut lab, &exe, &ping_args, &mut series)?;
    lab.doc.list(notes);
    sample_table(&mut lab, &series);
    gap_table(&mut lab, &series);
    plots(&mut lab, &series);
    lab.doc.findings("What it shows", findings(&series));
    lab.finish()
}

/// The path across two network namespaces, with netem delay where the kernel has it; adds
/// its series when it runs and returns the notes saying what was and was not possible.
fn namespace_path(
    lab: &mut Lab,
    exe: &std::path::Path,
    ping_args: &dyn Fn(&str) -> Vec<String>,
    series: &mut Vec<Series>,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    match Namespaces::create() {
        Ok(ns) if !lab.interrupted() => {
            let netem = ns.delay("2ms", "500us");
            notes.push(match &netem {
                Ok(()) => "network namespaces: tc netem adds 2 ms ± 0.5 ms on the link, both ways".to_string(),
                Err(why) => format!("network namespaces: no added delay ({why}); the path is a bare veth link"),
            });
            let path = if netem.is_ok() { "namespaces, veth + netem 2ms±0.5ms" } else { "namespaces, veth" };
            eprintln!("lab ping-vs-grpc: {path}");
            match ns.ping_across(exe, ping_args) {
                Ok(out) => {
                    series.push(parse_series(path, &out)?);
                    let cut_short = lab.interrupted();
                    lab.ran(path, cut_short);
                }
                Err(why) => notes.push(format!("the namespace path did not run: {why:#}")),
            }
        }
        Ok(_) => {}
        Err(why) => notes.push(format!("no namespace path: {why}")),
    }
    Ok(notes)
}

/// The write-up's describe table per path and protocol, untrimmed and, where it dropped
/// samples, z-trimmed.
fn sample_table(lab: &mut Lab, series: &[Series]) {
    lab.doc.heading("The write-up's table, per path and protocol (every sample; trimmed below)");
    let mut rows = Vec::new();
    for s in series {
        for (name, sample) in [(s.network_method.as_str(), &s.network), ("gRPC echo", &s.grpc)] {
            rows.push(describe_row(&s.path, name, sample, "none"));
            let trimmed = z_trimmed(sample);
            if trimmed.len() < sample.len() {
                rows.push(describe_row(
                    &s.path,
                    name,
                    &trimmed,
                    &format!("z-score, {} dropped", sample.len() - trimmed.len()),
                ));
            }
        }
    }
    lab.doc.table(&["path", "protocol", "trimmed", "count", "mean", "std", "min", "25%", "50%", "75%", "max"], rows);
}

/// Per path, the gap between the medians with its bootstrap interval, and the losses.
fn gap_table(lab: &mut Lab, series: &[Series]) {
    lab.doc.heading("The gap: median gRPC - median network, 95% bootstrap interval");
    lab.doc.table(
        &["path", "network probe", "gap (µs)", "95% interval (µs)", "gRPC / network (medians)", "lost (network, gRPC)"],
        series
            .iter()
            .map(|s| {
                let med = |v: &[Duration]| Description::of(v).map(|d| d.q50.as_secs_f64());
                let ratio = match (med(&s.grpc), med(&s.network)) {
                    (Some(g), Some(n)) if n > 0.0 => format!("{:.2}x", g / n),
                    _ => "–".into(),
                };
                vec![
                    s.path.clone(),
                    s.network_method.clone(),
                    s.difference_us.map_or("–".into(), |d| format!("{:+.1}", d.0)),
                    s.difference_us.map_or("–".into(), |d| format!("[{:+.1}, {:+.1}]", d.1, d.2)),
                    ratio,
                    format!("{}, {}", s.lost.0, s.lost.1),
                ]
            })
            .collect(),
    );
}

/// Box and violin plots: as measured, then as the write-up trimmed them.
fn plots(lab: &mut Lab, series: &[Series]) {
    let mut plotted: Vec<(String, Histogram<u64>, Histogram<u64>)> = Vec::new();
    for s in series {
        for (name, sample) in [("net", &s.network), ("gRPC", &s.grpc)] {
            plotted.push((format!("{name} {}", short_path(&s.path)), histogram(sample), histogram(&z_trimmed(sample))));
        }
    }
    let all_d: Vec<Distribution> = plotted.iter().map(|(l, h, _)| Distribution { label: l, histogram: h }).collect();
    let trim_d: Vec<Distribution> = plotted.iter().map(|(l, _, h)| Distribution { label: l, histogram: h }).collect();
    lab.doc.figure(
        box_plot("ping-box-all", "Every sample (box p25–p75, whiskers p10–p90)", &all_d),
        "box plots, untrimmed",
    );
    lab.doc.figure(
        box_plot("ping-box-trimmed", "After z-score trimming (|z| > 3, passes)", &trim_d),
        "box plots, trimmed as the write-up did",
    );
    lab.doc.figure(violins("ping-violin-all", "Every sample: density", &all_d), "violins, untrimmed");
    lab.doc.figure(violins("ping-violin-trimmed", "After z-score trimming: density", &trim_d), "violins, trimmed");
}

/// One finding per path: the gap and whether its interval excludes zero.
fn findings(series: &[Series]) -> Vec<String> {
    series
        .iter()
        .filter_map(|s| {
            let (d, lo, hi) = s.difference_us?;
            let verdict =
                if lo > 0.0 { "gRPC is slower, the interval excludes zero" } else { "the interval includes zero" };
            Some(format!(
                "{}: the gap is {d:+.1} µs [{lo:+.1}, {hi:+.1}] over {}: {verdict}.",
                s.path, s.network_method
            ))
        })
        .collect()
}

fn short_path(path: &str) -> String {
    // Tick labels share a narrow axis: "lo rust", "lo go", "ns".
    let path = path.replace("rpcmeter", "rust");
    if path.starts_with("namespaces") {
        "ns".to_string()
    } else {
        path.replace("loopback, ", "lo ").replace(" server", "")
    }
}

fn histogram(sample: &[Duration]) -> Histogram<u64> {
    let mut h = crate::record::shard::new_histogram();
    for d in sample {
        h.saturating_record(d.as_nanos().min(u64::MAX as u128) as u64);
    }
    h
}

fn z_trimmed(sample: &[Duration]) -> Vec<Duration> {
    let ns: Vec<f64> = sample.iter().map(|d| d.as_nanos() as f64).collect();
    let flagged = compare::z_score_outliers(&ns, Z).flagged();
    compare::without(&ns, &flagged).into_iter().map(|x| Duration::from_nanos(x as u64)).collect()
}

fn describe_row(path: &str, protocol: &str, sample: &[Duration], trimmed: &str) -> Vec<String> {
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    let mut row = vec![path.to_string(), protocol.to_string(), trimmed.to_string()];
    match Description::of(sample) {
        Some(d) => {
            row.push(d.count.to_string());
            row.extend([d.mean, d.std, d.min, d.q25, d.q50, d.q75, d.max].map(ms));
        }
        None => row.extend(std::iter::once("0".to_string()).chain(std::iter::repeat_n("–".to_string(), 7))),
    }
    row
}

/// Reads `rpcmeter ping --format json`.
fn parse_series(path: &str, json: &[u8]) -> anyhow::Result<Series> {
    let v: Value = serde_json::from_slice(json).context("no JSON from rpcmeter ping")?;
    let samples = |side: &str| -> Vec<Duration> {
        v[side]["samples_us"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).map(|us| Duration::from_secs_f64(us.max(0.0) / 1e6)).collect())
            .unwrap_or_default()
    };
    let d = &v["difference"];
    let difference_us =
        match (d["difference_us"].as_f64(), d["difference_ci_us"][0].as_f64(), d["difference_ci_us"][1].as_f64()) {
            (Some(x), Some(lo), Some(hi)) => Some((x, lo, hi)),
            _ => None,
        };
    Ok(Series {
        path: path.to_string(),
        network_method: v["network"]["method"].as_str().unwrap_or("network").to_string(),
        network: samples("network"),
        grpc: samples("grpc"),
        lost: (v["network"]["lost"].as_u64().unwrap_or(0), v["grpc"]["lost"].as_u64().unwrap_or(0)),
        difference_us,
    })
}

/// Two network namespaces joined by a veth pair, removed when dropped (removing a namespace
/// removes its end of the link).
struct Namespaces {
    client: String,
    server: String,
}

const CLIENT_ADDR: &str = "10.231.7.1";
const SERVER_ADDR: &str = "10.231.7.2";

impl Namespaces {
    fn create() -> Result<Namespaces, String> {
        if !crate::sys::is_root() {
            return Err("not root (ip netns needs it)".into());
        }
        let id = std::process::id();
        let ns = Namespaces { client: format!("rpcmeter-c{id}"), server: format!("rpcmeter-s{id}") };
        let (vc, vs) = (format!("rmc{id}"), format!("rms{id}"));
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &ns.client],
            vec!["netns", "add", &ns.server],
            vec!["link", "add", &vc, "type", "veth", "peer", "name", &vs],
            vec!["link", "set", &vc, "netns", &ns.client],
            vec!["link", "set", &vs, "netns", &ns.server],
        ];
        for step in steps {
            ip(&step)?;
        }
        let cidr = |a: &str| format!("{a}/24");
        let (c, s) = (cidr(CLIENT_ADDR), cidr(SERVER_ADDR));
        for step in [
            vec!["-n", &ns.client, "addr", "add", &c, "dev", &vc],
            vec!["-n", &ns.server, "addr", "add", &s, "dev", &vs],
            vec!["-n", &ns.client, "link", "set", &vc, "up"],
            vec!["-n", &ns.server, "link", "set", &vs, "up"],
            vec!["-n", &ns.client, "link", "set", "lo", "up"],
            vec!["-n", &ns.server, "link", "set", "lo", "up"],
        ] {
            ip(&step)?;
        }
        Ok(ns)
    }

    /// netem delay and jitter on both ends of the link.
    fn delay(&self, delay: &str, jitter: &str) -> Result<(), String> {
        for ns in [&self.client, &self.server] {
            let dev = self.device(ns);
            let out = Command::new("tc")
                .args(["-n", ns, "qdisc", "add", "dev", &dev, "root", "netem", "delay", delay, jitter])
                .output()
                .map_err(|e| format!("tc: {e}"))?;
            if !out.status.success() {
                return Err(format!("tc netem: {}", String::from_utf8_lossy(&out.stderr).trim()));
            }
        }
        Ok(())
    }

    fn device(&self, ns: &str) -> String {
        let id = std::process::id();
        if ns == self.client {
            format!("rmc{id}")
        } else {
            format!("rms{id}")
        }
    }

    /// `rpcmeter serve` in the server namespace, `rpcmeter ping` from the client one.
    fn ping_across(&self, exe: &std::path::Path, args: &dyn Fn(&str) -> Vec<String>) -> anyhow::Result<Vec<u8>> {
        let built =
            servers::Built { server: format!("ip netns exec {} '{}' serve", self.server, exe.display()), client: None };
        // `serve --addr` takes the namespace's own address; the port is picked there.
        let server = Server::start_at(&built, "rpcmeter in a namespace", &format!("{SERVER_ADDR}:0"))?;
        let out =
            Command::new("ip").args(["netns", "exec", &self.client]).arg(exe).args(args(&server.addr)).output()?;
        anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr).trim());
        Ok(out.stdout)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [&self.client, &self.server] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z_trimming_drops_a_far_outlier_and_keeps_the_rest() {
        let mut sample: Vec<Duration> = (0..50).map(|i| Duration::from_micros(100 + i % 5)).collect();
        sample.push(Duration::from_millis(50));
        let kept = z_trimmed(&sample);
        assert_eq!(kept.len(), 50);
        assert!(kept.iter().all(|d| *d < Duration::from_millis(1)));
    }
}
