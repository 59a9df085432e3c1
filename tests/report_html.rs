//! `rpcmeter report`: two real runs against the lab, one HTML page with every plot, nothing
//! fetched, every string from the files escaped; then, when Chromium is installed (CI installs
//! it), a headless screenshot that must show a drawn page.
use rpcmeter::lab::{LabConfig, LabServer};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn rpcmeter(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(args).output().unwrap()
}

fn run_to(addr: &str, in_flight: &str, name: &str, warmup: &[&str], out: &Path) {
    let mut args = vec![
        "run",
        "--plaintext",
        "--quiet",
        "--call",
        "EchoService/echo",
        "-n",
        "2000",
        "--rps",
        "1000",
        "--max-in-flight",
        in_flight,
        "--interval",
        "200ms",
        "--name",
        name,
        "--tag",
        "note=<b>bold</b>",
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
        addr,
    ];
    args.extend(warmup);
    let o = rpcmeter(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every plot the page must draw, by id.
const PLOTS: [&str; 11] = [
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
    "ts-rss-0",
];

#[test]
fn report_draws_two_lab_runs_self_contained_and_escaped() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    run_to(&addr, "4", "in-flight 4", &["--warmup", "400ms"], &a);
    run_to(&addr, "32", "in-flight 32", &[], &b);
    server.shutdown();

    // A hostile notice, as a file from elsewhere could carry it.
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    json["notices"].as_array_mut().unwrap().push("<script>alert('x')</script> & more".into());
    std::fs::write(&a, serde_json::to_vec(&json).unwrap()).unwrap();

    let page = dir.path().join("r.html");
    let o = rpcmeter(&["report", a.to_str().unwrap(), b.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();

    // Self-contained: no scripts, nothing fetched (no http(s) reference, no import, no url()).
    assert!(!html.contains("http://") && !html.contains("https://"), "a network reference");
    assert!(!html.contains("@import") && !html.contains("<link") && !html.contains("<img"));
    assert!(!html.to_lowercase().contains("<script"), "a script, or an unescaped notice");
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"));
    assert!(html.contains("note=&lt;b&gt;bold&lt;/b&gt;"), "tags escaped");
    assert!(html.contains("id=\"summary\""));
    for i in 0..2 {
        for id in PLOTS.iter().map(|p| p.replace("-0", &format!("-{i}"))) {
            let tag = format!("<svg id=\"{id}\"");
            assert!(html.contains(&tag), "no {tag}");
        }
    }
    assert_eq!(html.matches("<svg ").count(), html.matches("</svg>").count());

    screenshot(&page);
    for width in [1280, 1024] {
        numbers_stay_whole(&page, width);
    }
}

/// A run whose every call failed (the lab's Cpu refuses n above 45) must say so on the
/// page: its status, the server's message, no OK throughput, and never "steady".
#[test]
fn report_of_an_all_failed_run_shows_statuses_and_messages_and_no_steady_state() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("failed.json");
    let o = rpcmeter(&[
        "run",
        "--plaintext",
        "--quiet",
        "--no-save",
        "--call",
        "TestService/Cpu",
        "-d",
        r#"{"n": 1000}"#,
        "-z",
        "2s",
        "--rps",
        "100",
        "--interval",
        "200ms",
        "--format",
        "json",
        "-o",
        result.to_str().unwrap(),
        &addr,
    ]);
    server.shutdown();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    assert_eq!(json["steady_state"]["verdict"], "not judged: no call succeeded", "the JSON calls it steady");
    let page = dir.path().join("failed.html");
    let o = rpcmeter(&["report", result.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<td>INVALID_ARGUMENT</td>"), "no status table");
    assert!(html.contains("n = 1000 is above 45"), "no error message");
    assert!(html.contains("Every call failed"), "no failure banner");
    assert!(html.contains("not judged: no call succeeded"), "steady state judged on failures");
    assert!(!html.contains("steady after") && !html.contains("<td>steady"), "an all-failed run called steady");
    assert!(html.contains("OK calls/s"), "no OK throughput");
    screenshot(&page);
}

#[test]
fn report_names_a_missing_or_foreign_file_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"hello": "world"}"#).unwrap();
    let missing = dir.path().join("missing.json");
    let out = dir.path().join("r.html");
    for (file, why) in [(&missing, "cannot read"), (&foreign, "not an rpcmeter result")] {
        let o = rpcmeter(&["report", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(file.to_str().unwrap()) && err.contains(why), "{err}");
    }
    assert!(!out.exists(), "a report was written from bad input");
}

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"].into_iter().map(String::from).find(|c| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Measured in Chromium's layout of the page `width` px wide: in the summary's target cells,
/// every run of digits (an IPv4 octet, a port) lies on one line. At 1280 px the cell read
/// `127.0.0.1:424` over `79`. The page has no script: a copy gets one that measures each run's
/// line boxes and writes what it found into the body, which `--dump-dom` prints.
fn numbers_stay_whole(page: &Path, width: u32) {
    let Some(browser) = chromium() else {
        eprintln!("report_html: skipped the layout check: no chromium on PATH (CI installs it)");
        return;
    };
    let measure = r#"<script>
const broken = [];
let checked = 0;
for (const row of document.querySelectorAll('#summary tr')) {
  const cell = row.cells[1];
  if (!cell || cell.tagName !== 'TD') continue;
  const texts = [];
  const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode()); ) texts.push(n);
  const at = (i, end) => {
    for (const n of texts) {
      if (i < n.length || (end && i === n.length)) return [n, i];
      i -= n.length;
    }
  };
  for (const m of cell.textContent.matchAll(/[0-9]+/g)) {
    const range = document.createRange();
    range.setStart(...at(m.index, false));
    range.setEnd(...at(m.index + m[0].length, true));
    const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
    checked += 1;
    if (tops.size > 1) broken.push(cell.textContent + ': ' + m[0]);
  }
}
document.body.setAttribute('data-checked', String(checked));
document.body.setAttribute('data-broken', broken.join(' | '));
</script></body>"#;
    let html = std::fs::read_to_string(page).unwrap();
    let copy = page.with_file_name(format!("measured-{width}.html"));
    std::fs::write(&copy, html.replace("</body>", measure)).unwrap();
    let dom = headless(&browser, &copy, (width, 900), "--dump-dom");
    let dom = String::from_utf8_lossy(&dom.stdout);
    let body = &dom[dom.find("<body").expect("no body in Chromium's DOM")..];
    let body = &body[..body.find('>').unwrap()];
    assert!(!body.contains("data-checked=\"0\"") && body.contains("data-checked="), "nothing measured: {body}");
    assert!(body.contains("data-broken=\"\""), "at {width} px a number is split across lines: {body}");
}

/// Headless Chromium on `page` in a `width` x `height` window, asked `what` (`--dump-dom`,
/// `--screenshot=FILE`), with a profile of its own beside the page. A browser stuck on a busy
/// machine fails the test after 120 s rather than holding the CI.
fn headless(browser: &str, page: &Path, (width, height): (u32, u32), what: &str) -> std::process::Output {
    let profile = page.with_file_name(format!("chromium-profile-{width}x{height}"));
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        &format!("--user-data-dir={}", profile.display()),
        &format!("--window-size={width},{height}"),
        what,
        &format!("file://{}", page.display()),
    ])
    .stderr(Stdio::null());
    let out = assert_cmd::Command::from_std(cmd).timeout(Duration::from_secs(120)).output().unwrap();
    assert!(out.status.success(), "{browser} {what} failed ({:?}, or 120 s passed)", out.status);
    out
}

/// Headless Chromium renders the page; the screenshot must be a real picture.
fn screenshot(page: &Path) {
    let Some(browser) = chromium() else {
        eprintln!("report_html: skipped the screenshot: no chromium on PATH (CI installs it)");
        return;
    };
    let shot = page.with_file_name("shot.png");
    headless(&browser, page, (1280, 4000), &format!("--screenshot={}", shot.display()));
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "screenshot {} is {size} bytes", shot.display());
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let pixel = info.color_type.samples() * (info.bit_depth as usize).div_ceil(8);
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(pixel).collect();
    assert!(colours.len() > 50, "the screenshot has {} colours: nothing drawn", colours.len());
    // To look at it: RPCMETER_KEEP_SCREENSHOT=/tmp/shot.png keeps the picture and the page.
    if let Ok(keep) = std::env::var("RPCMETER_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, &keep).unwrap();
        std::fs::copy(page, Path::new(&keep).with_extension("html")).unwrap();
    }
}
