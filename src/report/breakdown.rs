//! A run's breakdowns (by call name, by flow, by backend) as rows: the one renderer of them,
//! read from the result's typed slices, that the run table, merge's table (as `text`) and
//! the HTML report (from `rows`) print.
use crate::result::Slice;
use crate::stats::Statistic;
use std::fmt::Write as _;
use std::time::Duration;

/// Which breakdown: what its rows are and what each adds to its name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `calls_by_name`: each call name, with its method.
    Names,
    /// `flows`: each flow's whole runs, with its steps and early ends.
    Flows,
    /// `backends`: each backend address.
    Backends,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Names, Kind::Flows, Kind::Backends];

    /// The result's key (`result::BREAKDOWNS`).
    pub fn key(self) -> &'static str {
        match self {
            Kind::Names => "calls_by_name",
            Kind::Flows => "flows",
            Kind::Backends => "backends",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::Names => "By call name",
            Kind::Flows => "By flow",
            Kind::Backends => "By backend",
        }
    }

    /// The columns' headers: the name's, the count's, and what a row adds (none for a backend).
    pub fn headers(self) -> (&'static str, &'static str, Option<&'static str>) {
        match self {
            Kind::Names => ("name", "requests", Some("method")),
            Kind::Flows => ("flow", "flows", Some("steps")),
            Kind::Backends => ("backend", "requests", None),
        }
    }
}

/// One row: a name's counts and latency (µs, as the result holds them).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    /// A call name's method, a flow's steps ("put -> get"); empty for a backend.
    pub detail: String,
    pub total: u64,
    pub failed: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
    /// A flow ended early with every call OK, and why (the statuses would not say).
    pub stopped: Option<String>,
}

/// The rows of a breakdown, in the order given.
pub fn rows<'a>(kind: Kind, slices: impl IntoIterator<Item = (&'a str, &'a Slice)>) -> Vec<Row> {
    slices
        .into_iter()
        .map(|(name, s)| {
            let (by_check, by_capture) = s.stopped();
            // A slice without calls has no latency, though a result file writes its summary
            // as zeros (a call due but never sent is counted in it: docs/results.md).
            let called = s.requests.total > 0 || s.latency_us.count > 0;
            let stat = |stat: Statistic| s.latency_us.micros(stat).filter(|us| called && us.is_finite());
            Row {
                name: name.to_string(),
                detail: match kind {
                    Kind::Names => s.method.clone().unwrap_or_default(),
                    Kind::Flows => s.steps.as_deref().unwrap_or_default().join(" -> "),
                    Kind::Backends => String::new(),
                },
                total: s.requests.total,
                failed: s.requests.failed,
                p50_us: stat(Statistic::Percentile(50.0)),
                p99_us: stat(Statistic::Percentile(99.0)),
                max_us: stat(Statistic::Max),
                stopped: (by_check + by_capture > 0)
                    .then(|| crate::analysis::notices::stop_reasons(by_check, by_capture)),
            }
        })
        .collect()
}

/// More backends than this that took no call are gathered in one row.
const GATHERED_IDLE_BACKENDS: usize = 5;

/// A breakdown's rows as every table prints them (the run's, merge's, the HTML report's).
/// Backends add up to the run's `total` calls: those that took no call are one row when
/// there are many (a long list, most of it down), and the calls that found no ready
/// backend, in no backend's slice, have a row of their own.
pub fn table_rows<'a>(kind: Kind, slices: impl IntoIterator<Item = (&'a str, &'a Slice)>, total: u64) -> Vec<Row> {
    let mut rows = rows(kind, slices);
    // A run without backends (one plain address) has no rows to add up.
    if kind != Kind::Backends || rows.is_empty() {
        return rows;
    }
    let placed: u64 = rows.iter().map(|r| r.total).sum();
    let idle = rows.iter().filter(|r| r.total == 0).count();
    if idle > GATHERED_IDLE_BACKENDS {
        rows.retain(|r| r.total > 0);
        rows.push(Row::without_latency(format!("({idle} backends)"), 0));
    }
    let unplaced = total.saturating_sub(placed);
    if unplaced > 0 {
        rows.push(Row::without_latency("(no ready backend)".into(), unplaced));
    }
    rows
}

impl Row {
    /// A row of `calls` that no backend answered (each failed), or of backends that took none.
    fn without_latency(name: String, calls: u64) -> Row {
        let (p50_us, p99_us, max_us, stopped) = (None, None, None, None);
        Row { name, detail: String::new(), total: calls, failed: calls, p50_us, p99_us, max_us, stopped }
    }
}

/// A latency in µs as the table writes durations; "-" when there is none.
fn duration(us: Option<f64>) -> String {
    us.and_then(|us| Duration::try_from_secs_f64(us / 1e6).ok()).map_or_else(|| "-".into(), crate::units::duration)
}

/// The most of a name the text table prints.
const NAME_CHARS: usize = 48;

/// The breakdown as the text tables print it (the run's and merge's); empty without rows.
/// `total`: the run's calls, which the backends' rows add up to (`table_rows`).
pub fn text<'a>(kind: Kind, slices: impl IntoIterator<Item = (&'a str, &'a Slice)>, total: u64) -> String {
    let rows = table_rows(kind, slices, total);
    if rows.is_empty() {
        return String::new();
    }
    let title = match kind {
        Kind::Flows => "By flow (latency: from its start to its last answer)",
        other => other.title(),
    };
    let mut o = format!("\n{title}:\n");
    // The name column is as wide as its longest name (a longer one pushed its row's numbers
    // out of line), up to NAME_CHARS; a name past that shows its start.
    let names: Vec<String> = rows
        .iter()
        .map(|r| super::printable::printable(&crate::units::abridged(&r.name, NAME_CHARS)).to_string())
        .collect();
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let width = longest.max(if kind == Kind::Backends { 24 } else { 16 });
    let line = |o: &mut String, cells: [&str; 7]| {
        let [name, count, failed, p50, p99, max, detail] = cells;
        let text = format!("  {name:<width$} {count:>9} {failed:>9} {p50:>11} {p99:>11} {max:>11}  {detail}");
        let _ = writeln!(o, "{}", text.trim_end());
    };
    let (name, count, detail) = kind.headers();
    line(&mut o, [name, count, "failed", "p50", "p99", "max", detail.unwrap_or("")]);
    for (r, name) in rows.iter().zip(&names) {
        let detail = super::printable::printable(&r.detail).to_string();
        let (total, failed) = (r.total.to_string(), r.failed.to_string());
        let [p50, p99, max] = [r.p50_us, r.p99_us, r.max_us].map(duration);
        line(&mut o, [name, &total, &failed, &p50, &p99, &max, &detail]);
        if let Some(why) = &r.stopped {
            let _ = writeln!(o, "  {:<width$} {why}", "");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(total: u64, failed: u64) -> Slice {
        let mut s = Slice::default();
        s.requests.total = total;
        s.requests.failed = failed;
        s.latency_us.stats = [("p50".into(), 684.031), ("p99".into(), 1500.0), ("max".into(), 2e6)].into();
        s
    }

    #[test]
    fn a_long_name_widens_its_column_and_the_numbers_stay_in_line() {
        let (short, long) = (slice(10, 0), slice(20, 1));
        let text = text(Kind::Names, [("put", &short), ("a_rather_long_call_name", &long)], 30);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
        let at = |l: &str, what: &str| l.find(what).unwrap_or_else(|| panic!("{what} in {l}"));
        // The count column ends at one place in the header and every row.
        let ends: Vec<usize> = lines.iter().zip(["requests", "10", "20"]).map(|(l, w)| at(l, w) + w.len()).collect();
        assert!(ends.windows(2).all(|w| w[0] == w[1]), "{text}");
        let huge = "n".repeat(200);
        let text = super::text(Kind::Names, [(huge.as_str(), &short)], 10);
        assert!(text.lines().all(|l| l.chars().count() < 160), "{text}");
    }

    #[test]
    fn a_flow_row_has_its_steps_and_why_it_ended_early() {
        let flow = Slice { steps: Some(vec!["put".into(), "get".into()]), stopped_by_check: Some(2), ..slice(60, 0) };
        let rows = rows(Kind::Flows, [("put-then-get", &flow)]);
        assert_eq!((rows[0].detail.as_str(), rows[0].total, rows[0].p50_us), ("put -> get", 60, Some(684.031)));
        assert!(rows[0].stopped.as_deref().is_some_and(|w| w.contains("2 by a failed check")), "{rows:?}");
        let text = text(Kind::Flows, [("put-then-get", &flow)], 60);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "By flow (latency: from its start to its last answer):");
        assert!(lines[2].trim_start().starts_with("flow") && lines[2].ends_with("steps"), "{text}");
        let row: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            row,
            ["put-then-get", "60", "0", "684.0", "µs", "1.50", "ms", "2.000", "s", "put", "->", "get"],
            "{text}"
        );
        assert!(lines[4].contains("2 by a failed check"), "{text}");
    }

    /// A backend down from the start (or a name never called) as a result file has it: no
    /// calls and a latency summary of zeros. Its cells are "-" (merge's table printed
    /// `0.0 µs`, the HTML report `0`, issue 41).
    #[test]
    fn a_slice_without_calls_has_no_latency() {
        let mut down = slice(0, 0);
        down.latency_us.stats = [("p50".into(), 0.0), ("p99".into(), 0.0), ("max".into(), 0.0)].into();
        let rows = rows(Kind::Backends, [("10.0.0.2:50051", &down)]);
        assert_eq!((rows[0].p50_us, rows[0].p99_us, rows[0].max_us), (None, None, None));
        let text = text(Kind::Backends, [("10.0.0.2:50051", &down)], 0);
        let row: Vec<&str> = text.lines().nth(3).unwrap().split_whitespace().collect();
        assert_eq!(row, ["10.0.0.2:50051", "0", "0", "-", "-", "-"], "{text}");
    }

    /// Merge's By backend table had neither the row of calls that found no ready backend nor
    /// the idle backends gathered, so its column did not add up to the calls (issue 41).
    #[test]
    fn backends_add_up_to_the_runs_calls_and_idle_ones_are_one_row() {
        let (up, idle) = (slice(10, 0), slice(0, 0));
        let names: Vec<String> = (1..=6).map(|i| format!("10.0.0.{i}:50051")).collect();
        let slices = std::iter::once(("10.0.0.9:50051", &up)).chain(names.iter().map(|n| (n.as_str(), &idle)));
        let text = text(Kind::Backends, slices, 15);
        let rows: Vec<Vec<&str>> = text.lines().skip(3).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert_eq!(rows[0][..3], ["10.0.0.9:50051", "10", "0"], "{text}");
        assert_eq!(rows[1], ["(6", "backends)", "0", "0", "-", "-", "-"], "{text}");
        assert_eq!(rows[2], ["(no", "ready", "backend)", "5", "5", "-", "-", "-"], "{text}");
        // A few idle backends keep a row each; every call placed, no extra row.
        let few = super::text(Kind::Backends, [("10.0.0.9:50051", &up), ("10.0.0.1:50051", &idle)], 10);
        assert_eq!(few.lines().count(), 5, "{few}");
    }

    #[test]
    fn no_rows_no_table_and_a_backend_has_no_detail() {
        assert_eq!(text(Kind::Names, [], 0), "");
        let b = slice(10, 1);
        let text = text(Kind::Backends, [("10.0.0.1:50051", &b)], 10);
        assert!(text.contains("By backend:") && text.lines().nth(2).unwrap().ends_with("max"), "{text}");
    }
}
