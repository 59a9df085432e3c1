//! `rpcmeter report`: result JSON files (`run --format json`) as one self-contained HTML page:
//! inline CSS and inline SVG drawn by `svg`, no scripts, no fonts, nothing fetched. Every
//! string that comes from a file is escaped.
use super::breakdown::Kind;
use super::svg::{esc, latency_us, num, Axis, Mark, Plot, Scale};
use crate::result::Slice;
use crate::result::{LatencySummary, Mode, Verdict, Word, Words};
use crate::stats::Statistic;
use hdrhistogram::Histogram;
use std::fmt::Write as _;

mod backends;
use backends::backend_plots;

/// Run colours, in file order (Tableau 10, readable on white and by most colour-blind readers).
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

pub fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// One row of the interval series.
#[derive(Debug, Clone, Default)]
pub struct IntervalPoint {
    pub t_s: f64,
    pub length_s: f64,
    pub warmup: bool,
    pub calls: f64,
    pub failed: f64,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub client_cpu_total_s: f64,
    pub client_rss_bytes: f64,
}

/// One result file, as much of it as the report shows.
#[derive(Debug, Clone)]
pub struct Run {
    /// `meta.name`, else the file name.
    pub label: String,
    pub file: String,
    pub started_at: String,
    pub tags: Vec<(String, String)>,
    pub target: String,
    pub call: String,
    pub mode: Word<Mode>,
    pub load: String,
    pub concurrency: Option<f64>,
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    /// Calls due before the end that were never sent (not in `total`; in the latency at
    /// their lower bound).
    pub unsent: u64,
    /// Open loop with unsent calls: p50 and p99 of the calls sent only, in µs.
    pub sent_p50_p99_us: Option<(f64, f64)>,
    /// Stopped before its end (Ctrl-C, a drain that timed out).
    pub partial: bool,
    /// Every call's final status by name, most frequent first.
    pub statuses: Vec<(String, u64)>,
    /// Failed calls by (status, message), most frequent first; messages as the server sent them.
    pub errors: Vec<(String, String, u64)>,
    /// All calls per second, failed ones included.
    pub throughput_rps: f64,
    /// OK calls per second.
    pub ok_rps: f64,
    /// `latency_us` as given: p50, p99, p999, ...
    pub latency_us: LatencySummary,
    pub cpu_us_per_call: Option<f64>,
    pub max_rss_bytes: Option<f64>,
    pub notices: Vec<String>,
    /// Streaming runs: messages each way and their per-message latency, in words.
    pub messages: Option<String>,
    pub steady: Word<Verdict>,
    pub steady_after_s: Option<f64>,
    pub server_rps: Option<f64>,
    pub intervals: Vec<IntervalPoint>,
    /// Call latency in ns, decoded from `histograms.call_latency`.
    pub histogram: Histogram<u64>,
    /// `--workload`: `calls_by_name`, name by name.
    pub by_name: Vec<(String, Slice)>,
    /// `run --replay`: the log's own slices of the calls sent, by the same names.
    pub recorded: Vec<(String, Slice)>,
    /// `--workload` flows and checks as given, one by one.
    pub flows: Vec<(String, Slice)>,
    pub checks: Vec<crate::result::CheckCount>,
    /// Targets broken down by backend: `backends` as given, address by address.
    pub backends: Vec<(String, Slice)>,
    /// The same, interval by interval (`backend_intervals`), aligned with `intervals`.
    pub backend_intervals: Option<crate::result::backend_intervals::BackendIntervals>,
}

/// Reads one result; the error says what makes it no rpcmeter result (the caller names the file).
pub fn parse(file: &str, json: &str) -> Result<Run, String> {
    use crate::result::NotAResult;
    let r = crate::result::Run::parse(json).map_err(|e| match e {
        NotAResult::Not(why) => format!("not an rpcmeter result (`run --format json`): {why}"),
        NotAResult::NotJson(why) => format!("not JSON ({why})"),
        newer => newer.to_string(),
    })?;
    of_result(file, &r)
}

/// What the report shows of a result (a run's, a merge's, a slice's).
pub fn of_result(file: &str, r: &crate::result::Run) -> Result<Run, String> {
    let histogram = r.call_histogram()?;
    let mut statuses: Vec<(String, u64)> =
        r.statuses.iter().filter(|s| *s.1 > 0).map(|(k, n)| (k.clone(), *n)).collect();
    statuses.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut errors: Vec<(String, String, u64)> =
        r.errors.iter().map(|e| (e.status.clone(), e.message.clone(), e.count)).collect();
    errors.sort_by_key(|e| std::cmp::Reverse(e.2));
    let q = &r.requests;
    let steady = r.steady_state.as_ref();
    let entries = |map: Option<&std::collections::BTreeMap<String, Slice>>| -> Vec<(String, Slice)> {
        map.into_iter().flatten().map(|(name, s)| (name.clone(), s.clone())).collect()
    };
    Ok(Run {
        backends: entries(r.backends.as_ref()),
        backend_intervals: r.backend_intervals.clone(),
        by_name: entries(r.calls_by_name.as_ref()),
        recorded: entries(r.replay.as_ref().map(|x| &x.recorded)),
        flows: entries(r.flows.as_ref()),
        checks: r.checks.clone().unwrap_or_default(),
        label: r
            .meta
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| file.rsplit('/').next().unwrap_or(file).to_string()),
        file: file.to_string(),
        started_at: r.meta.started_at.clone().unwrap_or_default(),
        tags: r.meta.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        target: r.target.clone(),
        call: r.call.clone(),
        mode: r.mode.clone(),
        load: r.load.clone(),
        concurrency: Some(r.concurrency as f64),
        total: q.total,
        ok: q.ok,
        failed: q.failed,
        unsent: q.unsent.unwrap_or(0),
        sent_p50_p99_us: r.sent_latency_us.as_ref().map(|l| {
            let stat = |key: &str| l.stats.get(key).copied().unwrap_or(0.0);
            (stat("p50"), stat("p99"))
        }),
        partial: r.partial,
        statuses,
        errors,
        throughput_rps: r.throughput_rps,
        ok_rps: r.ok_calls_per_s(),
        latency_us: r.latency_us.clone(),
        cpu_us_per_call: r.cpu_per_call().map(crate::units::micros),
        max_rss_bytes: r.client.as_ref().map(|c| c.max_rss_bytes as f64),
        notices: r.notices.texts().map(String::from).collect(),
        messages: r.messages.as_ref().map(messages_line),
        steady: steady.map(|s| s.verdict.clone()).unwrap_or_default(),
        steady_after_s: steady.and_then(|s| s.steady_after_s),
        server_rps: r.server.as_ref().and_then(|s| s.throughput_rps),
        intervals: r.intervals.iter().flatten().map(interval_point).collect(),
        histogram,
    })
}

fn interval_point(r: &crate::result::IntervalRow) -> IntervalPoint {
    IntervalPoint {
        t_s: r.t_s,
        length_s: r.length_s,
        warmup: r.phase == "warmup",
        calls: r.calls as f64,
        failed: r.failed as f64,
        rps: r.rps,
        p50_us: r.p50_us,
        p99_us: r.p99_us,
        client_cpu_total_s: r.client_cpu_total_s,
        client_rss_bytes: r.client_rss_bytes as f64,
    }
}

/// "bidi: 20000 sent (4000.0/s), 20000 received (4000.0/s); round trip p50 140 µs, p99 2.1 ms".
fn messages_line(m: &crate::result::Messages) -> String {
    let mut line = format!(
        "{}: {} sent ({:.1}/s), {} received ({:.1}/s)",
        m.kind, m.sent, m.sent_per_s, m.received, m.received_per_s
    );
    for (latency, what) in [(&m.round_trip_us, "round trip"), (&m.first_message_us, "first message")] {
        match latency {
            // No message came back (a silent ping-pong): no time to show as 0.
            Some(l) if l.is_empty() => line += &format!("; {what}: none (no message came back)"),
            Some(l) => {
                let p = |p: f64| l.micros(Statistic::Percentile(p)).map_or("–".into(), latency_us);
                line += &format!("; {what} p50 {}, p99 {}", p(50.0), p(99.0));
            }
            None => {}
        }
    }
    line
}

impl Run {
    /// A percentile of the call latency in µs, from the decoded histogram.
    fn q_us(&self, percent: f64) -> f64 {
        self.histogram.value_at_quantile(percent / 100.0) as f64 / 1e3
    }

    /// The steady-state verdict in words. A run with no OK call is never "steady": its
    /// latencies are those of failures (a refusal is fast and flat).
    fn steady_text(&self) -> String {
        if self.ok == 0 {
            return Verdict::NotJudged.as_str().into();
        }
        match self.steady_after_s {
            Some(s) => format!("{} after {} s", self.steady, num(s)),
            None => self.steady.to_string(),
        }
    }

    /// What went wrong, one line each, most serious first: empty for a clean run.
    fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let share = |n: u64| if self.total == 0 { 0.0 } else { n as f64 * 100.0 / self.total as f64 };
        let top: Vec<String> =
            self.statuses.iter().filter(|s| s.0 != "OK").take(4).map(|(c, n)| format!("{c} {n}")).collect();
        if self.total == 0 {
            out.push("No call was answered.".to_string());
        } else if self.ok == 0 {
            out.push(format!("Every call failed: {} of {} ({}).", self.failed, self.total, top.join(", ")));
        } else if self.failed > 0 {
            out.push(format!(
                "{} of {} calls failed ({:.2}%): {}.",
                self.failed,
                self.total,
                share(self.failed),
                top.join(", ")
            ));
        }
        if self.partial {
            out.push("Partial result: the run was stopped before its end.".to_string());
        }
        if self.unsent > 0 {
            let sent = self.sent_p50_p99_us.map_or(String::new(), |(p50, p99)| {
                format!("; the calls sent only: p50 {}, p99 {}", latency_us(p50), latency_us(p99))
            });
            out.push(format!(
                "{} calls were due before the end but never sent: the rate was not kept (they are not in the totals; \
                 the latency counts each at its lower bound, the end less its intended send time{sent}).",
                self.unsent
            ));
        }
        out.extend(self.workload_failures());
        out
    }

    /// Failed checks and flows ended early: not failed calls, so the statuses miss them.
    fn workload_failures(&self) -> Vec<String> {
        let checks = self.checks.iter().filter(|c| c.fail > 0).map(|c| {
            let name = format!("{}: {}", c.call, c.expression);
            let all = c.pass.saturating_add(c.fail);
            format!("Check \"{}\" failed {} of {all}.", crate::units::abridged(&name, 80), c.fail)
        });
        let flows = self.flows.iter().filter_map(|(name, f)| {
            let (by_check, by_capture) = f.stopped();
            (by_check + by_capture > 0).then(|| {
                let why = crate::analysis::notices::stop_reasons(by_check, by_capture);
                format!(
                    "Flow \"{}\": {} of {} ended early, every call OK: {why}.",
                    crate::units::abridged(name, 80),
                    by_check + by_capture,
                    f.requests.total
                )
            })
        });
        checks.chain(flows).collect()
    }

    /// A percentile of `latency_us` as text (from the file), else from the histogram.
    fn stat(&self, percent: f64) -> String {
        match self.latency_us.micros(Statistic::Percentile(percent)) {
            Some(us) => latency_us(us),
            None if self.histogram.is_empty() => "–".into(),
            None => latency_us(self.q_us(percent)),
        }
    }
}

const CSS: &str = r#"
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; margin: 24px 32px; color: #222; background: #fafafa; font-size: 14px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
p.small, .meta { color: #555; font-size: 13px; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } #summary td:nth-child(4) { min-width: 7em; }
#summary { font-size: 12px; } #summary th, #summary td { padding: 3px 5px; } #summary th { white-space: normal; }
#summary td:nth-child(2) { min-width: 6em; } .nobr { white-space: nowrap; }
.wide { overflow-x: auto; max-width: 100%; } #summary td:first-child { white-space: normal; overflow-wrap: anywhere; min-width: 8em; } #summary td:nth-child(3) { min-width: 8em; } td:first-child { white-space: nowrap; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
ul.notices { margin: 4px 0; padding-left: 20px; font-size: 13px; } ul.notices li { margin: 2px 0; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px; }
figure { margin: 12px 0; max-width: 900px; } table.lab td { font-variant-numeric: tabular-nums; }
.alert { border-left: 6px solid #c0392b; background: #fdecea; color: #7b1d12; padding: 8px 12px; margin: 8px 0; font-weight: bold; font-size: 15px; }
.alert p { margin: 2px 0; } td.bad { color: #c0392b; font-weight: bold; } table.statuses, table.errors { margin: 4px 0 8px; }
svg.plot { width: 100%; height: auto; background: #fff; border: 1px solid #ddd; border-radius: 4px; }
svg text { font-family: "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; fill: #222; }
svg text.title { font-size: 15px; font-weight: bold; } svg text.axis { font-size: 13px; }
svg text.tick, svg text.legend-text { font-size: 12px; } svg text.note { font-size: 11px; } svg text.empty { font-size: 14px; fill: #888; }
"#;

const W: f64 = 620.0;
const H: f64 = 320.0;

/// A run's own page, as `rpcmeter report` draws its JSON result: one way to draw a run.
pub struct Page;

impl super::Export for Page {
    fn render(&self, run: &crate::result::Run) -> String {
        match of_result("run", run) {
            Ok(run) => render(&[run]),
            // The JSON is rpcmeter's own: a failure here is a bug, shown rather than hidden.
            Err(why) => format!("<!DOCTYPE html>\n<p>rpcmeter could not draw this run: {}</p>\n", esc(&why)),
        }
    }
}

/// The whole report for the runs, in the order given.
pub fn render(runs: &[Run]) -> String {
    render_page("rpcmeter report", "", runs)
}

/// A page titled `title`: a write-up (HTML, every outside string in it already escaped; the
/// labs' pages) above the runs' report.
pub fn render_page(title: &str, write_up: &str, runs: &[Run]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n{write_up}",
        t = esc(title)
    );
    if runs.is_empty() {
        h.push_str("</body></html>\n");
        return h;
    }
    let _ = writeln!(
        h,
        "<p class=\"meta\">{} run(s), rpcmeter {}. Latency is call latency (first send to final answer; open loop: from the intended send time).</p>",
        runs.len(),
        env!("CARGO_PKG_VERSION")
    );
    // Failures first, above everything else: a page of plots must not hide them.
    let failing: Vec<String> =
        runs.iter().flat_map(|r| r.failures().into_iter().map(move |line| format!("{}: {line}", r.label))).collect();
    if !failing.is_empty() {
        h.push_str("<div class=\"alert\" id=\"failures\">");
        for line in &failing {
            let _ = write!(h, "<p>{}</p>", esc(line));
        }
        h.push_str("</div>\n");
    }
    h.push_str(&summary_table(runs));
    if runs.len() > 1 {
        h.push_str("<h2>Across runs</h2>\n");
        h.push_str(
            "<p class=\"small\">Box plots come from each run's whole call-latency histogram (not from the per-interval p50s): \
             box p25–p75, line p50, whiskers p10–p90, dots p99 and p99.9. The violins are the same histograms as densities \
             over log latency, each scaled to its own widest point.</p>\n<div class=\"grid\">",
        );
        let ds = distributions(runs);
        h.push_str(&box_plot("box-runs", "Call latency per run (box p25–p75, whiskers p10–p90)", &ds));
        h.push_str(&violins("violin-runs", "Call latency density per run", &ds));
        h.push_str(&percentile_plot("pct-all", "Latency by percentile, all runs", runs.iter().enumerate().collect()));
        if let Some(svg) = throughput_vs_concurrency(runs) {
            h.push_str(&svg);
        }
        h.push_str("</div>\n");
    }
    for (i, run) in runs.iter().enumerate() {
        h.push_str(&run_section(i, run));
    }
    h.push_str("</body></html>\n");
    h
}

fn summary_table(runs: &[Run]) -> String {
    // Unsent calls are rare: their column only when a run has some.
    let any_unsent = runs.iter().any(|r| r.unsent > 0);
    let mut t = format!(
        "<h2>Summary</h2>\n<div class=\"wide\"><table id=\"summary\"><tr><th>run</th><th>target</th><th>call</th><th>mode</th><th>calls</th><th>ok</th>\
         <th>failed</th>{}<th>calls/s (attempted)</th><th>OK calls/s</th><th>p50</th><th>p99</th><th>p99.9</th><th>client CPU/call</th><th>steady state</th><th>notices</th></tr>\n",
        if any_unsent { "<th>unsent</th>" } else { "" }
    );
    for (i, r) in runs.iter().enumerate() {
        let steady = r.steady_text();
        let bad = |n: u64| if n > 0 { "n bad" } else { "n" };
        let _ = writeln!(
            t,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span><a href=\"#run-{i}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{}\">{}</td>{}<td class=\"n\">{:.1}</td>\
             <td class=\"{}\">{:.1}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            color(i),
            esc(&r.label),
            address_html(&r.target),
            method_html(&r.call),
            esc(if r.load.is_empty() { r.mode.as_str() } else { &r.load }),
            r.total,
            r.ok,
            bad(r.failed),
            r.failed,
            if any_unsent { format!("<td class=\"{}\">{}</td>", bad(r.unsent), r.unsent) } else { String::new() },
            r.throughput_rps,
            if r.ok == 0 && r.total > 0 { "n bad" } else { "n" },
            r.ok_rps,
            r.stat(50.0),
            r.stat(99.0),
            r.stat(99.9),
            r.cpu_us_per_call.map_or("–".into(), latency_us),
            esc(&steady),
            r.notices.len(),
        );
    }
    t.push_str("</table></div>\n");
    t
}

/// A target as HTML that wraps only between its parts: after a scheme (`ipv4:`, `unix:`,
/// `dns:///`) and a list's commas, before a host name's or a path's dots and slashes, after
/// an IPv6 address's colons; never inside an IPv4 address or a port (at 1280 px the
/// summary's cell read `127.0.0.1:424` over `79`). Each part is a `nobr` span.
fn address_html(target: &str) -> String {
    nobr_html(&address_parts(target))
}

/// A method's name as HTML that wraps only before a dot or a slash (`rpcmeter.lab.v1`,
/// `.TestService`, `/Cpu`): the summary's call cell read `EchoService.ech` over `o`.
fn method_html(call: &str) -> String {
    nobr_html(&member_parts(call))
}

/// The parts, each a span no line breaks inside, with a break allowed between them.
fn nobr_html(parts: &[&str]) -> String {
    parts.iter().map(|p| format!("<span class=\"nobr\">{}</span>", esc(p))).collect::<Vec<_>>().join("<wbr>")
}

/// `address_html`'s parts, in order: joined they are `target`.
fn address_parts(target: &str) -> Vec<&str> {
    let (scheme, list) = match target.find(':').filter(|&at| is_scheme(&target[..at], &target[at + 1..])) {
        // "dns:///host": the slashes stay with the scheme; "unix:/tmp/x": the path's own stays with it.
        Some(at) if target[at + 1..].starts_with("//") => {
            target.split_at(target.len() - target[at + 1..].trim_start_matches('/').len())
        }
        Some(at) => target.split_at(at + 1),
        None => ("", target),
    };
    let mut parts: Vec<&str> = vec![scheme];
    for member in list.split_inclusive(',') {
        parts.extend(member_parts(member));
    }
    parts.retain(|p| !p.is_empty());
    parts
}

/// A scheme before the first colon: letters, digits, `+-.`, and not a host before its port.
fn is_scheme(head: &str, rest: &str) -> bool {
    !head.is_empty()
        && head.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.bytes().all(|b| b.is_ascii_digit())
}

/// One address of a list (its comma kept): an IPv4 address or a host with no dot is one
/// part; an IPv6 literal breaks after its colons (not in `::`, nor after the `]`); a host
/// name or a path breaks before each dot and slash. The port after the last colon is never
/// split, since none of these breaks falls in it.
fn member_parts(member: &str) -> Vec<&str> {
    let address = member.trim_end_matches(',');
    if address.parse::<std::net::SocketAddrV4>().is_ok() || address.parse::<std::net::Ipv4Addr>().is_ok() {
        return vec![member];
    }
    let bytes = member.as_bytes();
    let in_brackets = |i: usize| member[..i].contains('[') && !member[..i].contains(']');
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..bytes.len() {
        let before_dot_or_slash = matches!(bytes[i], b'.' | b'/') && !in_brackets(i);
        let after_colon = bytes[i - 1] == b':' && bytes[i] != b':' && in_brackets(i - 1);
        if before_dot_or_slash || after_colon {
            parts.push(&member[start..i]);
            start = i;
        }
    }
    parts.push(&member[start..]);
    parts
}

/// What went wrong, in red where no reader can miss it; nothing for a clean run.
fn failure_box(r: &Run) -> String {
    let lines = r.failures();
    if lines.is_empty() {
        return String::new();
    }
    let mut s = String::from("<div class=\"alert\">");
    for line in &lines {
        let _ = write!(s, "<p>{}</p>", esc(line));
    }
    s.push_str("</div>\n");
    s
}

/// `run --replay`: the log's numbers (latency on the logger's side) and the run's, name by name.
fn recorded_vs_replayed(r: &Run) -> String {
    let mut s = String::from(
        "<h3>Recorded vs replayed</h3><table class=\"names\"><tr><th>name</th><th>calls rec / now</th>\
         <th>failed rec / now</th><th>p50 rec / now</th><th>p99 rec / now</th></tr>",
    );
    let none = Slice::default();
    for (name, now) in &r.by_name {
        let rec = r.recorded.iter().find(|(n, _)| n == name).map_or(&none, |(_, v)| v);
        let pair = |v: &dyn Fn(&Slice) -> String| format!("{} / {}", v(rec), v(now));
        let stat = |p: f64| move |v: &Slice| latency_cell(v.latency_us.micros(Statistic::Percentile(p)));
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(name),
            pair(&|v| v.requests.total.to_string()),
            pair(&|v| v.requests.failed.to_string()),
            pair(&stat(50.0)),
            pair(&stat(99.0)),
        );
    }
    s.push_str("</table>\n");
    s
}

/// A breakdown's latency as the summary prints it ("689 µs", "12 ms"; it printed raw µs
/// with three decimals); "–" when the slice has none.
fn latency_cell(us: Option<f64>) -> String {
    us.filter(|v| v.is_finite()).map_or_else(|| "–".to_string(), latency_us)
}

/// One breakdown's table (report::breakdown's rows, as the text tables have them); none
/// without rows. `total`: the run's calls, which the backends' rows add up to.
fn breakdown_table(kind: Kind, slices: &[(String, Slice)], total: u64) -> String {
    let rows = super::breakdown::table_rows(kind, slices.iter().map(|(name, s)| (name.as_str(), s)), total);
    if rows.is_empty() {
        return String::new();
    }
    let (name, count, detail) = kind.headers();
    let class = if kind == Kind::Backends { "backends" } else { "names" };
    let detail_th = detail.map_or(String::new(), |d| format!("<th>{d}</th>"));
    let mut s = format!(
        "<h3>{}</h3><table class=\"{class}\"><tr><th>{name}</th>{detail_th}<th>{count}</th><th>failed</th>\
         <th>p50</th><th>p99</th><th>max</th></tr>",
        kind.title(),
    );
    for r in &rows {
        let bad = if r.failed == 0 { "n" } else { "n bad" };
        // Steps read as an arrow on the page.
        let detail = detail.map_or(String::new(), |_| format!("<td>{}</td>", esc(&r.detail.replace(" -> ", " → "))));
        let _ = write!(
            s,
            "<tr><td>{}</td>{detail}<td class=\"n\">{}</td><td class=\"{bad}\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&r.name),
            r.total,
            r.failed,
            latency_cell(r.p50_us),
            latency_cell(r.p99_us),
            latency_cell(r.max_us),
        );
    }
    s + "</table>\n"
}

/// Most kinds of error listed; the rest are counted in one row.
const ERROR_ROWS: usize = 20;

/// Every final status with its share, and the failed calls' messages (escaped: a server
/// writes them).
fn status_tables(r: &Run) -> String {
    let mut s = String::new();
    for (kind, slices) in [(Kind::Names, &r.by_name), (Kind::Flows, &r.flows), (Kind::Backends, &r.backends)] {
        s.push_str(&breakdown_table(kind, slices, r.total));
        if kind == Kind::Names && !r.recorded.is_empty() {
            s.push_str(&recorded_vs_replayed(r));
        }
    }
    if !r.checks.is_empty() {
        s.push_str(
            "<h3>Checks</h3><table class=\"names\"><tr><th>call</th><th>check</th><th>pass</th><th>fail</th></tr>",
        );
        for c in &r.checks {
            let class = if c.fail == 0 { "n" } else { "n bad" };
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"{class}\">{}</td></tr>",
                esc(&c.call),
                esc(&c.expression),
                c.pass,
                c.fail,
            );
        }
        s.push_str("</table>\n");
    }
    if !r.statuses.is_empty() {
        s.push_str("<h3>Statuses</h3><table class=\"statuses\"><tr><th>status</th><th>calls</th><th>share</th></tr>");
        let all: u64 = r.statuses.iter().map(|x| x.1).sum::<u64>().max(1);
        for (code, n) in &r.statuses {
            let class = if code == "OK" { "n" } else { "n bad" };
            let _ = write!(
                s,
                "<tr><td>{}</td><td class=\"{class}\">{n}</td><td class=\"{class}\">{:.2}%</td></tr>",
                esc(code),
                *n as f64 * 100.0 / all as f64
            );
        }
        s.push_str("</table>\n");
    }
    if !r.errors.is_empty() {
        s.push_str("<h3>Errors</h3><table class=\"errors\"><tr><th>status</th><th>message</th><th>calls</th></tr>");
        for (code, message, n) in r.errors.iter().take(ERROR_ROWS) {
            let _ = write!(s, "<tr><td>{}</td><td>{}</td><td class=\"n bad\">{n}</td></tr>", esc(code), esc(message));
        }
        if r.errors.len() > ERROR_ROWS {
            let rest: u64 = r.errors[ERROR_ROWS..].iter().map(|e| e.2).sum();
            let _ = write!(
                s,
                "<tr><td colspan=\"2\">{} more kinds of error</td><td class=\"n bad\">{rest}</td></tr>",
                r.errors.len() - ERROR_ROWS
            );
        }
        s.push_str("</table>\n");
    }
    if r.failed > 0 {
        let _ = writeln!(
            s,
            "<p class=\"small\">Latency counts every call, failed ones included{}.</p>",
            if r.ok == 0 { ": no call succeeded, so every latency below is a failure's" } else { "" }
        );
    }
    s
}

fn run_section(i: usize, r: &Run) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<section class=\"run\" id=\"run-{i}\"><h2><span class=\"swatch\" style=\"background:{}\"></span>{}</h2>\n<p class=\"meta\">{} · {} · {} · {} · started {}{}</p>\n",
        color(i),
        esc(&r.label),
        esc(&r.file),
        address_html(&r.target),
        esc(&r.call),
        esc(&r.load),
        esc(&r.started_at),
        if r.tags.is_empty() {
            String::new()
        } else {
            format!(
                " · tags: {}",
                r.tags.iter().map(|(k, v)| format!("{}={}", esc(k), esc(v))).collect::<Vec<_>>().join(", ")
            )
        }
    );
    s.push_str(&failure_box(r));
    s.push_str(&status_tables(r));
    if let Some(m) = &r.messages {
        let _ = writeln!(s, "<p class=\"meta\">Messages (streams): {}</p>", esc(m));
    }
    if !r.notices.is_empty() {
        s.push_str("<h3>Notices</h3><ul class=\"notices\">");
        for n in &r.notices {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("<div class=\"grid\">");
    s.push_str(&histogram_plot(i, r));
    s.push_str(&percentile_plot(&format!("pct-{i}"), &format!("Latency by percentile: {}", r.label), vec![(i, r)]));
    s.push_str(&series_plots(i, r));
    s.push_str("</div>");
    s.push_str(&backend_plots(i, r));
    s.push_str("</section>\n");
    s
}

/// Log-spaced bins over the recorded values: (low µs, high µs, count).
fn log_bins(h: &Histogram<u64>, per_decade: f64) -> Vec<(f64, f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let lo = (h.min().max(1) as f64 / 1e3).log10();
    let hi = (h.max().max(1) as f64 / 1e3).log10();
    let first = (lo * per_decade).floor();
    let last = (hi * per_decade).floor();
    let n = (last - first) as usize + 1;
    let mut bins: Vec<(f64, f64, u64)> = (0..n)
        .map(|k| (10f64.powf((first + k as f64) / per_decade), 10f64.powf((first + k as f64 + 1.0) / per_decade), 0))
        .collect();
    for v in h.iter_recorded() {
        let us = (h.median_equivalent(v.value_iterated_to()).max(1) as f64 / 1e3).log10();
        let k = ((us * per_decade).floor() - first).clamp(0.0, (n - 1) as f64) as usize;
        bins[k].2 += v.count_at_value();
    }
    bins
}

fn histogram_plot(i: usize, r: &Run) -> String {
    let h = &r.histogram;
    let bins = log_bins(h, 10.0);
    let total = h.len().max(1) as f64;
    let (lo, hi) = match (bins.first(), bins.last()) {
        (Some(a), Some(b)) => (a.0, b.1),
        _ => (1.0, 1e3),
    };
    let top = bins.iter().map(|b| b.2 as f64 / total * 100.0).fold(0.0, f64::max).max(1.0);
    let x = Axis::log(lo, hi, "call latency (log scale)", latency_us);
    let y = Axis::linear(0.0, top * 1.5, "share of calls per bin (%)", |v| num(v) + "%");
    let mut p =
        Plot::new(&format!("hist-{i}"), "plot-histogram", &format!("Latency histogram: {}", r.label), W, H, x, y);
    for &(a, b, n) in &bins {
        if n > 0 {
            let tip = format!("{} – {}: {} calls ({:.2}%)", latency_us(a), latency_us(b), n, n as f64 / total * 100.0);
            p.rect(a, b, 0.0, n as f64 / total * 100.0, color(i), 0.75, Some(&tip));
        }
    }
    if h.is_empty() {
        p.centered_note("no calls");
    } else {
        p.legend(&format!("{} calls, 10 bins per decade", h.len()), color(i), Mark::Area);
        for (q, name, c) in [(50.0, "p50", "#222"), (99.0, "p99", "#e67e22"), (99.9, "p99.9", "#8e44ad")] {
            let v = r.q_us(q);
            p.vline(v, c, "");
            p.legend(&format!("{name} {}", latency_us(v)), c, Mark::Dashed);
        }
    }
    p.finish()
}

/// The HdrHistogram percentile plot: latency against percentile on a log 1/(1-q) axis.
fn percentile_plot(id: &str, title: &str, runs: Vec<(usize, &Run)>) -> String {
    let most = runs.iter().map(|(_, r)| r.histogram.len()).max().unwrap_or(0) as f64;
    // Show as many nines as the calls can support (at least 99.9%, at most 99.9999%).
    let nines = (most.max(1.0).log10().ceil() as i32).clamp(3, 6);
    let x_max = 10f64.powi(nines);
    let label = |d: i32| match d {
        0 => "0%".to_string(),
        1 => "90%".to_string(),
        d => format!("99.{}%", "9".repeat(d as usize - 2)).replace("99.%", "99%"),
    };
    let ticks = (0..=nines).map(|d| (10f64.powi(d), Some(label(d)))).collect();
    let x = Axis::with_ticks(1.0, x_max, Scale::Log, ticks, "percentile (log scale of 1/(1−q))");
    let y_max = runs.iter().map(|(_, r)| r.histogram.max() as f64 / 1e3).fold(0.0, f64::max);
    let y = Axis::linear(0.0, y_max.max(1.0) * 1.05, "call latency", latency_us);
    let mut p = Plot::new(id, "plot-percentiles", title, W, H, x, y);
    p.legend_left = true;
    for (i, r) in &runs {
        let h = &r.histogram;
        if h.is_empty() {
            continue;
        }
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            if q >= 1.0 {
                break;
            }
            pts.push((1.0 / (1.0 - q), h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3));
        }
        pts.push((x_max, h.max() as f64 / 1e3));
        p.line(&pts, color(*i), 2.0, false);
        p.legend(&format!("{} (max {})", r.label, latency_us(h.max() as f64 / 1e3)), color(*i), Mark::Line);
    }
    p.finish()
}

/// One run's interval series as plots: throughput, latency, failures, client CPU and memory.
fn series_plots(i: usize, r: &Run) -> String {
    let series = Series { i, r, iv: &r.intervals };
    [Series::throughput, Series::latency, Series::errors, Series::cpu, Series::memory]
        .iter()
        .map(|plot| {
            let mut p = plot(&series);
            if series.iv.is_empty() {
                p.centered_note("no interval series in this file");
            }
            p.finish()
        })
        .collect()
}

/// The time axis of a run's interval plots: from the start to the last interval's end
/// (`ends`: each interval's end, seconds since the start).
fn time_axis(ends: impl Iterator<Item = f64>) -> Axis {
    let t_max = ends.fold(0.0, f64::max).max(0.001);
    Axis::linear(0.0, t_max, "time since start (s)", num)
}

/// The interval series of one run (the `i`-th), drawn on a shared time axis.
struct Series<'a> {
    i: usize,
    r: &'a Run,
    iv: &'a [IntervalPoint],
}

impl Series<'_> {
    /// A plot of the series over time, `y` its axis, the warm-up shaded and the steady
    /// state's start marked.
    fn plot(&self, id: &str, title: &str, y: Axis) -> Plot {
        let x = time_axis(self.iv.iter().map(|p| p.t_s));
        let mut p = Plot::new(&format!("{id}-{}", self.i), "plot-series", title, W, H, x, y);
        let mut any = false;
        for w in self.iv.iter().filter(|p| p.warmup) {
            p.band(w.t_s - w.length_s, w.t_s, "#f0ad4e", 0.25);
            any = true;
        }
        if any {
            p.legend("warm-up", "#f0ad4e", Mark::Area);
        }
        if let Some(after) = self.r.steady_after_s.filter(|&a| a > 0.0 && self.r.ok > 0) {
            p.vline(after, "#2a7", &format!("steady after {} s", num(after)));
        }
        p
    }

    /// The largest finite value of `f` over the intervals (0 without any).
    fn max_of(&self, f: &dyn Fn(&IntervalPoint) -> f64) -> f64 {
        self.iv.iter().map(f).filter(|v| v.is_finite()).fold(0.0, f64::max)
    }

    fn points(&self, f: &dyn Fn(&IntervalPoint) -> f64) -> Vec<(f64, f64)> {
        self.iv.iter().map(|p| (p.t_s, f(p))).collect()
    }

    fn throughput(&self) -> Plot {
        let y = Axis::linear(0.0, self.max_of(&|p| p.rps).max(1.0) * 1.1, "throughput (calls/s)", num);
        let mut p = self.plot("ts-rps", "Throughput per interval", y);
        p.legend_bottom = true;
        p.line(&self.points(&|p| p.rps), color(self.i), 2.0, false);
        p.legend("calls/s (attempted)", color(self.i), Mark::Line);
        if self.iv.iter().any(|p| p.failed > 0.0) {
            let ok = |p: &IntervalPoint| if p.calls > 0.0 { p.rps * (p.calls - p.failed) / p.calls } else { 0.0 };
            p.line(&self.points(&ok), "#2a7", 2.0, true);
            p.legend("OK calls/s", "#2a7", Mark::Dashed);
        }
        p
    }

    /// Latency p50 and p99.
    fn latency(&self) -> Plot {
        let y = Axis::linear(0.0, self.max_of(&|p| p.p99_us).max(1.0) * 1.1, "call latency", latency_us);
        let mut p = self.plot("ts-latency", "Latency per interval", y);
        p.line(&self.points(&|p| p.p50_us), color(self.i), 2.0, false);
        p.line(&self.points(&|p| p.p99_us), color(self.i), 1.6, true);
        p.legend("p50", color(self.i), Mark::Line);
        p.legend("p99", color(self.i), Mark::Dashed);
        p
    }

    fn errors(&self) -> Plot {
        let failed = self.max_of(&|p| p.failed);
        let y = Axis::linear(0.0, failed.max(1.0) * 1.1, "failed calls per interval", num);
        let mut p = self.plot("ts-errors", "Failed calls per interval", y);
        for w in self.iv.iter().filter(|p| p.failed > 0.0) {
            let tip = format!("{} failed of {} calls", w.failed, w.calls);
            p.rect(w.t_s - w.length_s, w.t_s, 0.0, w.failed, "#c0392b", 0.8, Some(&tip));
        }
        p.legend("failed calls", "#c0392b", Mark::Area);
        if failed == 0.0 && !self.iv.is_empty() {
            p.centered_note("no failed calls");
        }
        p
    }

    /// Client CPU: the delta of the cumulative CPU over each interval's length.
    fn cpu(&self) -> Plot {
        let mut last = 0.0;
        let cpu: Vec<(f64, f64)> = self
            .iv
            .iter()
            .map(|p| {
                let pct = (p.client_cpu_total_s - last) / p.length_s * 100.0;
                last = p.client_cpu_total_s;
                (p.t_s, if pct.is_finite() { pct.max(0.0) } else { f64::NAN })
            })
            .collect();
        let top = cpu.iter().map(|c| c.1).filter(|v| v.is_finite()).fold(0.0, f64::max);
        let y = Axis::linear(0.0, top.max(10.0) * 1.1, "client CPU (% of one core)", |v| num(v) + "%");
        let mut p = self.plot("ts-cpu", "Client CPU per interval", y);
        p.line(&cpu, "#555", 2.0, false);
        p.legend("user+sys CPU / interval length", "#555", Mark::Line);
        p
    }

    fn memory(&self) -> Plot {
        let mib = |b: f64| b / (1024.0 * 1024.0);
        let top = mib(self.max_of(&|p| p.client_rss_bytes)).max(1.0) * 1.1;
        let mut p = self.plot("ts-rss", "Client memory (RSS)", Axis::linear(0.0, top, "client RSS (MiB)", num));
        p.legend_bottom = true;
        p.line(&self.points(&|p| mib(p.client_rss_bytes)), "#8e44ad", 2.0, false);
        p.legend("resident set size", "#8e44ad", Mark::Line);
        p
    }
}

/// A latency axis covering every run's p10..p99.9 (box plot) or min..max (violins).
/// One distribution of the across-runs plots: a run's call latency, or a sample of round
/// trips (`rpcmeter lab ping-vs-grpc`); values in ns.
pub struct Distribution<'a> {
    pub label: &'a str,
    pub histogram: &'a Histogram<u64>,
}

impl Distribution<'_> {
    fn q_us(&self, percent: f64) -> f64 {
        self.histogram.value_at_quantile(percent / 100.0) as f64 / 1e3
    }
}

fn distributions(runs: &[Run]) -> Vec<Distribution<'_>> {
    runs.iter().map(|r| Distribution { label: &r.label, histogram: &r.histogram }).collect()
}

fn latency_axis(ds: &[Distribution], low: f64, high: f64) -> Axis {
    let nonempty = || ds.iter().filter(|r| !r.histogram.is_empty());
    let lo = nonempty().map(|r| r.q_us(low).max(0.001)).fold(f64::INFINITY, f64::min);
    let hi = nonempty().map(|r| r.q_us(high)).fold(0.0, f64::max);
    Axis::log(lo, hi, "latency (log scale)", latency_us)
}

fn run_axis(ds: &[Distribution], title: &str) -> Axis {
    let ticks = ds.iter().enumerate().map(|(i, r)| (i as f64, Some(short(r.label)))).collect();
    Axis::with_ticks(-0.6, ds.len() as f64 - 0.4, Scale::Linear, ticks, title)
}

fn short(label: &str) -> String {
    if label.chars().count() > 24 {
        label.chars().take(23).collect::<String>() + "…"
    } else {
        label.to_string()
    }
}

/// Box plots: box p25–p75, line p50, whiskers p10–p90, dots p99 and p99.9.
pub fn box_plot(id: &str, title: &str, runs: &[Distribution]) -> String {
    let mut p = Plot::new(id, "plot-box", title, W, H, run_axis(runs, "run"), latency_axis(runs, 10.0, 99.9));
    for (i, r) in runs.iter().enumerate() {
        if r.histogram.is_empty() {
            continue;
        }
        let x = i as f64;
        let q = |p: f64| r.q_us(p);
        let c = color(i);
        let tip = format!(
            "{}: p10 {} · p25 {} · p50 {} · p75 {} · p90 {} · p99 {} · p99.9 {}",
            r.label,
            latency_us(q(10.0)),
            latency_us(q(25.0)),
            latency_us(q(50.0)),
            latency_us(q(75.0)),
            latency_us(q(90.0)),
            latency_us(q(99.0)),
            latency_us(q(99.9))
        );
        p.segment((x, q(10.0)), (x, q(25.0)), c, 1.5);
        p.segment((x, q(75.0)), (x, q(90.0)), c, 1.5);
        p.segment((x - 0.08, q(10.0)), (x + 0.08, q(10.0)), c, 1.5);
        p.segment((x - 0.08, q(90.0)), (x + 0.08, q(90.0)), c, 1.5);
        p.rect(x - 0.2, x + 0.2, q(25.0), q(75.0), c, 0.35, Some(&tip));
        p.segment((x - 0.2, q(50.0)), (x + 0.2, q(50.0)), c, 3.0);
        p.dot(x, q(99.0), 4.0, c, Some(&format!("{} p99 {}", r.label, latency_us(q(99.0)))));
        p.dot(x, q(99.9), 4.0, "#333", Some(&format!("{} p99.9 {}", r.label, latency_us(q(99.9)))));
    }
    p.legend("p99 (run colour)", "#888", Mark::Dot);
    p.legend("p99.9", "#333", Mark::Dot);
    p.finish()
}

/// Violins: each histogram as a density over log latency, scaled to its own widest point.
pub fn violins(id: &str, title: &str, runs: &[Distribution]) -> String {
    let mut p = Plot::new(id, "plot-violin", title, W, H, run_axis(runs, "run"), latency_axis(runs, 0.0, 100.0));
    for (i, r) in runs.iter().enumerate() {
        let bins = log_bins(r.histogram, 20.0);
        let peak = bins.iter().map(|b| b.2).max().unwrap_or(0) as f64;
        if peak == 0.0 {
            continue;
        }
        // Smooth over neighbouring bins (1-2-1) so that the shape is a density, not a comb.
        let counts: Vec<f64> = (0..bins.len())
            .map(|k| {
                let at = |j: usize| bins.get(j).map_or(0.0, |b| b.2 as f64);
                (k.checked_sub(1).map_or(0.0, at) + 2.0 * at(k) + at(k + 1)) / 4.0
            })
            .collect();
        let peak = counts.iter().cloned().fold(0.0, f64::max);
        let x = i as f64;
        let half = |c: f64| 0.42 * c / peak;
        let mut outline: Vec<(f64, f64)> =
            bins.iter().zip(&counts).map(|(b, &c)| (x + half(c), (b.0 * b.1).sqrt())).collect();
        let back: Vec<(f64, f64)> = outline.iter().rev().map(|&(px, y)| (2.0 * x - px, y)).collect();
        outline.extend(back);
        p.polygon(&outline, color(i), 0.45, color(i));
        let med = r.q_us(50.0);
        p.segment((x - 0.12, med), (x + 0.12, med), "#222", 2.5);
    }
    p.legend("p50", "#222", Mark::Line);
    p.finish()
}

/// A run's place on the throughput-vs-concurrency plot, with its colour's index.
type Point<'a> = (f64, &'a Run, usize);

/// Whether the points differ in concurrency, so that a line through them says something.
fn spread(points: &[Point]) -> bool {
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    points.len() >= 2 && lo < hi
}

/// Throughput against the concurrency the user chose, when the runs differ in it: closed
/// loops' workers (a burst's size); open loops', against their most calls in flight, only when
/// no two closed loops differ (then `--max-in-flight` is what was varied). Client-side, and
/// the server's own count when the files carry one. The other runs are drawn apart, each a
/// dashed level at its throughput across the plot: an open loop joined the workers' line at
/// its `--max-in-flight`, a concurrency no one chose.
fn throughput_vs_concurrency(runs: &[Run]) -> Option<String> {
    let points = runs.iter().enumerate().filter_map(|(i, r)| r.concurrency.map(|c| (c, r, i)));
    let (open, others): (Vec<Point>, Vec<Point>) = points.partition(|p| p.1.mode.known() == Some(Mode::Open));
    let (chosen, unknown): (Vec<Point>, Vec<Point>) =
        others.into_iter().partition(|p| matches!(p.1.mode.known(), Some(Mode::Closed | Mode::Burst)));
    let (mut points, mut apart, what) = if spread(&chosen) {
        (chosen, open, "concurrency (workers, or a burst's calls)")
    } else if spread(&open) {
        (open, chosen, "most calls in flight (open loop)")
    } else {
        return None;
    };
    apart.extend(unknown);
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (lo, hi) = (points[0].0, points[points.len() - 1].0);
    let x = if hi / lo.max(1.0) >= 8.0 {
        Axis::log(lo.max(1.0), hi, &format!("{what}; log scale"), num)
    } else {
        Axis::linear(0.0, hi, what, num)
    };
    let top =
        points.iter().chain(&apart).map(|p| p.1.throughput_rps.max(p.1.server_rps.unwrap_or(0.0))).fold(0.0, f64::max);
    // A level crosses both corners at its height: room above the highest for the legend's
    // three rows (it hid a point at the bottom, a level at the top).
    let headroom = if apart.is_empty() { 1.15 } else { 1.5 };
    let y = Axis::linear(0.0, top.max(1.0) * headroom, "throughput (calls/s)", num);
    let mut p = Plot::new("tput-concurrency", "plot-scaling", "Throughput vs concurrency", W, H, x, y);
    p.legend_bottom = true;
    p.line(&points.iter().map(|(c, r, _)| (*c, r.throughput_rps)).collect::<Vec<_>>(), "#1f77b4", 2.0, false);
    for (c, r, i) in &points {
        let tip = format!("{}: concurrency {}, {:.1} calls/s", r.label, num(*c), r.throughput_rps);
        p.dot(*c, r.throughput_rps, 5.0, color(*i), Some(&tip));
    }
    p.legend("client-side throughput", "#1f77b4", Mark::Line);
    let server: Vec<(f64, f64)> = points.iter().filter_map(|(c, r, _)| r.server_rps.map(|s| (*c, s))).collect();
    if !server.is_empty() {
        p.line(&server, "#444", 1.6, true);
        for &(c, s) in &server {
            p.ring(c, s, 7.0, "#444", Some(&format!("server-side {s:.1} calls/s")));
        }
        p.legend("server-side throughput (lab Stats)", "#444", Mark::Ring);
    }
    levels(&mut p, &apart);
    Some(p.finish())
}

/// The runs off the concurrency axis, each a dashed level across the plot at its throughput,
/// in its colour, named at its right end; one legend entry says what the levels are.
fn levels(p: &mut Plot, apart: &[Point]) {
    for (_, r, i) in apart {
        p.hline(r.throughput_rps, color(*i), &format!("{}: {:.1} calls/s", short(&r.label), r.throughput_rps));
    }
    if !apart.is_empty() {
        let open = apart.iter().all(|(_, r, _)| r.mode.known() == Some(Mode::Open));
        p.legend(
            if open { "open loop at a rate (no concurrency)" } else { "runs off this axis" },
            "#888",
            Mark::Dashed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn result(notice: &str, concurrency: u32) -> String {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(100_000 + v * 1_000).unwrap();
        }
        let encoded = crate::record::shard::to_text(&h);
        serde_json::json!({
            "meta": {"name": "<b>run</b>", "tags": {"k": "<i>v</i>"}, "started_at": "2024-01-01T00:00:00Z"},
            "target": "127.0.0.1:1", "call": "EchoService/echo", "mode": "open", "concurrency": concurrency,
            "requests": {"total": 1000, "ok": 999, "failed": 1}, "duration_s": 2.0,
            "throughput_rps": 500.0, "latency_us": {"p50": 600.0, "p99": 1090.0, "p999": 1099.0},
            "notices": [notice],
            "steady_state": {"verdict": "steady", "steady_after_s": 0.4},
            "intervals": [
                {"t_s": 0.2, "length_s": 0.2, "phase": "warmup", "calls": 100, "ok": 100, "failed": 0, "rps": 500.0,
                 "p50_us": 700.0, "p99_us": 900.0, "client_cpu_total_s": 0.05, "client_rss_bytes": 10_000_000},
                {"t_s": 0.4, "length_s": 0.2, "phase": "measured", "calls": 100, "ok": 99, "failed": 1, "rps": 500.0,
                 "p50_us": 600.0, "p99_us": 800.0, "client_cpu_total_s": 0.08, "client_rss_bytes": 11_000_000}
            ],
            "histograms": {"call_latency": encoded},
        })
        .to_string()
    }

    #[test]
    fn strings_from_files_are_escaped_and_every_plot_is_drawn() {
        let a = parse("a.json", &result("<script>alert(1)</script>", 4)).unwrap();
        let b = parse("b.json", &result("fine", 16)).unwrap();
        let html = render(&[a, b]);
        assert!(!html.contains("<script"), "unescaped notice");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;b&gt;run&lt;/b&gt;") && html.contains("&lt;i&gt;v&lt;/i&gt;"));
        for id in [
            "summary",
            "box-runs",
            "violin-runs",
            "pct-all",
            "tput-concurrency",
            "hist-0",
            "pct-0",
            "ts-rps-0",
            "ts-latency-0",
            "ts-errors-0",
            "ts-cpu-0",
            "ts-rss-1",
        ] {
            assert!(html.contains(&format!("id=\"{id}\"")), "no {id}");
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
    }

    #[test]
    fn a_streaming_run_shows_its_messages() {
        let mut v: Value = serde_json::from_str(&result("fine", 4)).unwrap();
        v["messages"] = serde_json::json!({"kind": "bidi", "sent": 10, "received": 10, "sent_per_s": 5.0,
            "received_per_s": 5.0, "round_trip_us": {"p50": 140.0, "p99": 2100.0}});
        let html = render(&[parse("s.json", &v.to_string()).unwrap()]);
        assert!(
            html.contains("Messages (streams): bidi: 10 sent (5.0/s), 10 received (5.0/s); round trip p50"),
            "{html}"
        );
        assert!(!render(&[parse("u.json", &result("fine", 4)).unwrap()]).contains("Messages (streams)"));
        // A silent server's ping-pong: it drew "round trip p50 0, p99 0".
        v["messages"]["received"] = 0.into();
        v["messages"]["round_trip_us"] = serde_json::json!({"count": 0, "p50": 0.0, "p99": 0.0, "max": 0.0});
        let html = render(&[parse("s.json", &v.to_string()).unwrap()]);
        assert!(html.contains("0 received (5.0/s); round trip: none (no message came back)"), "{html}");
    }

    #[test]
    fn failed_calls_show_with_their_escaped_messages() {
        let mut v: Value = serde_json::from_str(&result("fine", 4)).unwrap();
        v["statuses"] = serde_json::json!({"OK": 999, "UNAVAILABLE": 1});
        v["errors"] = serde_json::json!([{"status": "UNAVAILABLE", "message": "<img src=x> & gone", "count": 1}]);
        v["requests"]["unsent"] = 7.into();
        v["sent_latency_us"] = serde_json::json!({"count": 993, "p50": 800.0, "p99": 2500.0});
        v["partial"] = true.into();
        let html = render(&[parse("f.json", &v.to_string()).unwrap()]);
        assert!(html.contains("the calls sent only: p50 800"), "{html}");
        assert!(html.contains("&lt;img src=x&gt; &amp; gone") && !html.contains("<img"), "message not escaped");
        assert!(html.contains("<td>UNAVAILABLE</td>") && html.contains("0.10%"));
        assert!(
            html.contains("1 of 1000 calls failed")
                && html.contains("Partial result")
                && html.contains("7 calls were due")
        );
        assert!(html.contains("<th>unsent</th>"));
        // A clean run has no alert and no unsent column.
        let mut clean: Value = serde_json::from_str(&result("fine", 4)).unwrap();
        clean["requests"] = serde_json::json!({"total": 1000, "ok": 1000, "failed": 0});
        let clean = render(&[parse("c.json", &clean.to_string()).unwrap()]);
        assert!(!clean.contains("class=\"alert\"") && !clean.contains("<th>unsent</th>"));
    }

    #[test]
    fn a_server_message_with_terminal_escapes_reaches_the_html_as_text() {
        // `report -o -` writes to a terminal: a raw ESC or BEL from the server could set its title.
        let mut v: Value = serde_json::from_str(&result("fine", 4)).unwrap();
        v["errors"] = serde_json::json!([{"status": "UNKNOWN", "message": "\x1b]0;PWNED\x07\u{9b}2J", "count": 1}]);
        let html = render(&[parse("e.json", &v.to_string()).unwrap()]);
        assert!(!html.contains(['\x1b', '\x07', '\u{9b}']), "raw control character in the HTML");
        assert!(html.contains(r"\x1b]0;PWNED\x07\x9b2J"), "escaped message missing");
    }

    /// The summary's target cell wraps between an address's parts only: at 1280 px it read
    /// `127.0.0.1:424` over `79` (any character could end a line).
    #[test]
    fn an_address_wraps_between_its_parts_never_in_a_port_or_an_octet() {
        let mut v: Value = serde_json::from_str(&result("fine", 4)).unwrap();
        v["target"] = "127.0.0.1:42479".into();
        let html = render(&[parse("a.json", &v.to_string()).unwrap()]);
        let cell = "</a></td><td><span class=\"nobr\">127.0.0.1:42479</span></td>";
        assert!(
            html.contains(cell),
            "the address is not one unbreakable part: {}",
            &html[html.find("id=\"summary\"").unwrap()..][..1200]
        );
        assert!(html.contains(".nobr { white-space: nowrap; }"));
        let cases: [(&str, &[&str]); 7] = [
            ("localhost:50051", &["localhost:50051"]),
            ("ipv4:127.0.0.1:1,127.0.0.1:2", &["ipv4:", "127.0.0.1:1,", "127.0.0.1:2"]),
            ("ipv6:[::1]:1,[2001:db8::7]:50051", &["ipv6:", "[::", "1]:1,", "[2001:", "db8::", "7]:50051"]),
            ("unix:/run/rpc/app.sock", &["unix:", "/run", "/rpc", "/app", ".sock"]),
            ("dns:///grpc.example.com:443", &["dns:///", "grpc", ".example", ".com:443"]),
            ("[::1]:1", &["[::", "1]:1"]),
            ("api.internal:8443", &["api", ".internal:8443"]),
        ];
        for (target, parts) in cases {
            assert_eq!(address_parts(target), parts, "{target}");
        }
        assert_eq!(address_html("a.b:1"), "<span class=\"nobr\">a</span><wbr><span class=\"nobr\">.b:1</span>");
        // The call's cell likewise: it read `EchoService.ech` over `o`.
        let call = "<td><span class=\"nobr\">EchoService</span><wbr><span class=\"nobr\">/echo</span></td>";
        assert!(html.contains(call), "the method's name may break anywhere");
    }

    /// A run of `mode` at `concurrency` and `rps` calls/s, named `name`.
    fn paced(name: &str, mode: &str, concurrency: u32, rps: f64) -> Run {
        let mut v: Value = serde_json::from_str(&result("fine", concurrency)).unwrap();
        (v["meta"]["name"], v["mode"], v["throughput_rps"]) = (name.into(), mode.into(), rps.into());
        parse(&format!("{name}.json"), &v.to_string()).unwrap()
    }

    /// The throughput-vs-concurrency plot's `<svg>`.
    fn scaling_plot(runs: &[Run]) -> String {
        let svg = throughput_vs_concurrency(runs).expect("a plot");
        assert!(svg.starts_with("<svg id=\"tput-concurrency\""), "{svg}");
        svg
    }

    /// The vertices of the plot's first path: the client-side line.
    fn line_points(svg: &str) -> usize {
        let d = svg.split("<path d=\"").nth(1).unwrap().split('"').next().unwrap();
        d.split_whitespace().count()
    }

    /// An open loop's `--max-in-flight` is no concurrency its user chose: it joined the closed
    /// loops' line there (at 32, between 16 and 64 workers). Now it is a level at its
    /// throughput across the plot, named, with a legend saying why.
    #[test]
    fn an_open_loop_is_drawn_apart_from_the_workers_line() {
        let runs = [
            paced("c1", "closed", 1, 2000.0),
            paced("c4", "closed", 4, 7000.0),
            paced("open500", "open", 32, 500.0),
            paced("c64", "closed", 64, 9000.0),
        ];
        let svg = scaling_plot(&runs);
        assert_eq!(line_points(&svg), 3, "the workers' line holds the 3 closed loops only: {svg}");
        assert!(!svg.contains("concurrency 32"), "the open loop is a point at its max in flight: {svg}");
        assert!(svg.contains(">open500: 500.0 calls/s</text>"), "{svg}");
        assert!(svg.contains(">open loop at a rate (no concurrency)</text>"), "{svg}");
        assert!(svg.contains("concurrency (workers, or a burst&#39;s calls)"), "{svg}");

        // Open loops alone, differing in --max-in-flight: that is what was varied, on its axis;
        // a single closed loop beside them is the level then.
        let runs = [paced("m4", "open", 4, 900.0), paced("m32", "open", 32, 1000.0), paced("c8", "closed", 8, 3000.0)];
        let svg = scaling_plot(&runs);
        assert_eq!(line_points(&svg), 2, "{svg}");
        assert!(
            svg.contains("most calls in flight (open loop)") && svg.contains(">c8: 3000.0 calls/s</text>"),
            "{svg}"
        );
        assert!(svg.contains(">runs off this axis</text>"), "{svg}");
        // The level is the highest mark: the legend fits above it (it hid a point below).
        let attr = |from: &str, name: &str| -> f64 {
            let rest = &svg[svg.find(from).unwrap()..];
            let at = rest.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            rest[at..].split('"').next().unwrap().parse().unwrap()
        };
        let (top, height) = (attr("<g class=\"legend\">", "y"), attr("<g class=\"legend\">", "height"));
        let level = attr("stroke-dasharray=\"6 4\"/><text", "y") + 4.0;
        assert!(top + height < level, "legend {top}+{height} over the level at {level}: {svg}");
        // Nothing varied that a line could show: no plot.
        assert!(throughput_vs_concurrency(&[paced("a", "open", 32, 500.0), paced("b", "closed", 4, 900.0)]).is_none());
    }

    #[test]
    fn what_is_no_result_says_so() {
        assert!(parse("x", "{").unwrap_err().contains("not JSON"));
        assert!(parse("x", "{\"a\":1}").unwrap_err().contains("not an rpcmeter result"));
    }

    #[test]
    fn log_bins_count_every_call() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [1_000u64, 2_000, 50_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let bins = log_bins(&h, 10.0);
        assert_eq!(bins.iter().map(|b| b.2).sum::<u64>(), 4);
        assert!(bins.first().unwrap().0 <= 1.0 && bins.last().unwrap().1 >= 1000.0);
    }
}
