//! `--export junit=FILE` (or `--format junit`): the `--assert` checks as JUnit XML, the
//! report CI systems (GitLab, Jenkins, GitHub test reporters) show as tests, as k6's
//! `handleSummary` with its `jUnit` helper writes them: one testcase per assertion, a
//! failure naming what was measured against the bound. A first testcase, `calls answered`,
//! fails when no call was answered or every call failed, so a run without `--assert` still
//! says whether it worked. Written whenever the run measured, breached or not; a run that
//! could not start writes one errored testcase instead (`failed_to_start`).
use super::Export;
use crate::result::{Checked, Run};
use std::fmt::Write as _;
use std::time::Duration;

pub struct Junit;

/// Text for an XML attribute or element.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write other control characters.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// One testcase: its name and, when it failed, the failure's message.
struct Case {
    name: String,
    failure: Option<String>,
}

fn document(
    suite: &str,
    time: Duration,
    timestamp: &str,
    properties: &[(&str, &str)],
    cases: &[Case],
    error: Option<&str>,
) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let errors = usize::from(error.is_some());
    let tests = cases.len() + errors;
    let secs = format!("{:.3}", time.as_secs_f64());
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"rpcmeter\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{secs}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" \
         time=\"{secs}\" timestamp=\"{}\">",
        xml(suite),
        xml(timestamp)
    );
    out.push_str("    <properties>\n");
    for (name, value) in properties {
        let _ = writeln!(out, "      <property name=\"{}\" value=\"{}\"/>", xml(name), xml(value));
    }
    out.push_str("    </properties>\n");
    for case in cases {
        let head = format!("    <testcase classname=\"rpcmeter.run\" name=\"{}\" time=\"{secs}\"", xml(&case.name));
        match &case.failure {
            None => {
                let _ = writeln!(out, "{head}/>");
            }
            Some(message) => {
                let _ = writeln!(
                    out,
                    "{head}>\n      <failure message=\"{m}\" type=\"AssertionError\">{m}</failure>\n    </testcase>",
                    m = xml(message)
                );
            }
        }
    }
    if let Some(message) = error {
        let _ = writeln!(
            out,
            "    <testcase classname=\"rpcmeter.run\" name=\"run\" time=\"{secs}\">\n      \
             <error message=\"{m}\" type=\"RunFailed\">{m}</error>\n    </testcase>",
            m = xml(message)
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The suite's name: the run's `--name`, else its call and target.
fn suite_name(name: Option<&str>, call: &str, target: &str) -> String {
    name.map_or_else(|| format!("rpcmeter run {call} {target}"), |n| format!("rpcmeter run {n}"))
}

impl Export for Junit {
    fn render(&self, r: &Run) -> String {
        let q = &r.requests;
        let answered = match (q.total, q.ok) {
            (0, _) => Some("no call was answered".to_string()),
            (total, 0) => Some(format!("every call failed ({total} calls)")),
            _ => None,
        };
        let mut cases = vec![Case { name: "calls answered".into(), failure: answered }];
        cases.extend(r.assertions.iter().flatten().map(case));
        let calls = q.total.to_string();
        let throughput = format!("{:.1}", r.throughput_rps);
        let properties = [
            ("target", r.target.as_str()),
            ("call", r.call.as_str()),
            ("calls", &calls),
            ("throughput_rps", &throughput),
            ("ended", r.meta.ended.as_str()),
        ];
        let started = r.meta.started_at.as_deref().and_then(|t| humantime::parse_rfc3339(t).ok());
        let started = started.map_or_else(String::new, |t| humantime::format_rfc3339_seconds(t).to_string());
        document(
            &suite_name(r.meta.name.as_deref(), &r.call, &r.target),
            r.elapsed(),
            &started,
            &properties,
            &cases,
            None,
        )
    }
}

/// One `--assert` as a testcase; a breached one fails naming what was measured against the
/// bound, both as the assertion wrote them.
fn case(a: &Checked) -> Case {
    let text = &a.assertion;
    let failure = (!a.ok).then(|| {
        // The metric's name as written: what stands before the comparison.
        let metric = text.split(['<', '>']).next().unwrap_or(text).trim();
        let rest = text[metric.len()..].trim_start();
        let bound = rest.trim_start_matches(['<', '>', '=']);
        let symbol = rest[..rest.len() - bound.len()].trim();
        format!("measured {metric} = {}, bound {metric} {symbol} {}", a.value, bound.trim())
    });
    Case { name: text.clone(), failure }
}

/// The report of a run that failed before it measured anything (target unreachable, no such
/// method): one errored testcase naming why, so CI shows the failure rather than no tests.
pub fn failed_to_start(name: Option<&str>, call: &str, target: &str, why: &str) -> String {
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let properties = [("target", target), ("call", call)];
    document(&suite_name(name, call, target), Duration::ZERO, &started, &properties, &[], Some(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(xml("p99<10ms & \"x\"'"), "p99&lt;10ms &amp; &quot;x&quot;&apos;");
        assert_eq!(xml("a\u{1}b"), "a?b");
    }

    #[test]
    fn a_run_that_did_not_start_is_one_error() {
        let doc = failed_to_start(None, "EchoService/echo", "127.0.0.1:1", "cannot connect: refused");
        assert!(doc.contains("tests=\"1\" failures=\"0\" errors=\"1\""), "{doc}");
        assert!(doc.contains("<error message=\"cannot connect: refused\""), "{doc}");
    }
}
