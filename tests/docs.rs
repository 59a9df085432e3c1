//! The documentation holds together (issue 31, item 7): the README stays a guide of at most
//! 150 lines and links every page of docs/; every relative link leads to a file that exists
//! (and to a heading that exists, when it names one); and every `--flag` a page names is a
//! flag of some rpcmeter command, as `--help` lists them.
mod common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const README_MOST_LINES: usize = 150;

/// Flags the pages name that belong to other tools, beside rpcmeter's.
const OTHER_TOOLS_FLAGS: &[(&str, &str)] = &[
    ("--tail", "kubectl logs"),
    ("--server-side", "kubectl apply"),
    ("--release", "cargo run"),
    ("--path", "cargo install"),
    ("--port", "labs/servers/*"),
    ("--async", "labs/servers/ruby, and test_service's patch"),
    ("--tasks", "test_service's rmeter"),
    ("--target", "labs/servers/java's LatchClient"),
    ("--calls", "labs/servers/java's LatchClient"),
    ("--pause", "labs/servers/java's LatchClient"),
    ("--binlog", "labs/servers/go"),
    ("--echo-status", "labs/servers/go"),
    ("--separate-threads", "valgrind --tool=callgrind (docs/design.md's instruction counts)"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docs/*.md, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

/// Every markdown file the README leads to, and the README.
fn documents() -> Vec<PathBuf> {
    let mut docs =
        vec![root().join("README.md"), root().join("bench/README.md"), root().join("labs/servers/README.md")];
    docs.extend(pages());
    docs
}

/// The targets of the markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            found.push(rest[..end].to_owned());
        }
    }
    found
}

/// The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped,
/// spaces as hyphens; a repeated heading gets -1, -2...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut name = slug.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{slug}-{n}");
        }
        seen.insert(name);
    }
    seen
}

#[test]
fn the_readme_is_a_guide_of_at_most_150_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(lines <= README_MOST_LINES, "README.md has {lines} lines: the reference belongs in docs/");
}

#[test]
fn the_readme_links_every_page_of_docs() {
    let readme = links(&read(&root().join("README.md")));
    let missing: Vec<String> = pages()
        .iter()
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|page| !readme.iter().any(|l| l.split('#').next() == Some(page)))
        .collect();
    assert!(missing.is_empty(), "README.md does not link {missing:?}");
}

#[test]
fn every_link_leads_to_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    for doc in documents() {
        let dir = doc.parent().unwrap();
        for link in links(&read(&doc)) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').map_or((link.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { doc.clone() } else { dir.join(file) };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", doc.display()));
                continue;
            }
            if let Some(anchor) = anchor.filter(|_| target.extension().is_some_and(|x| x == "md")) {
                if !anchors(&read(&target)).contains(anchor) {
                    broken.push(format!("{}: {link} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `rpcmeter [COMMAND...] --help`.
fn help(command: &[&str]) -> String {
    let (code, stdout, stderr) = common::rpcmeter_with(command.iter().chain(&["--help"]));
    assert_eq!(code, Some(0), "{command:?} --help: {stderr}");
    stdout
}

/// The subcommands a help text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags (`--name`) in `text`.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let before = start.checked_sub(1).map(|b| bytes[b]);
        let mut end = start + 2;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase() || bytes[end].is_ascii_digit() || bytes[end] == b'-')
        {
            end += 1;
        }
        let name = &text[start..end];
        // Not a flag: `---`, a table rule `|---|`, or a word with a dash run inside.
        let is_flag = name.len() > 3
            && bytes[start + 2].is_ascii_lowercase()
            && !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-');
        if is_flag {
            flags.insert(name.trim_end_matches('-').to_owned());
        }
        i = end.max(start + 2);
    }
    flags
}

#[test]
fn every_flag_a_page_names_exists() {
    let mut known = long_flags(&help(&[]));
    for command in subcommands(&help(&[])) {
        let text = help(&[&command]);
        known.extend(long_flags(&text));
        for sub in subcommands(&text) {
            known.extend(long_flags(&help(&[&command, &sub])));
        }
    }
    known.extend(OTHER_TOOLS_FLAGS.iter().map(|(flag, _)| flag.to_string()));
    let mut unknown = Vec::new();
    for doc in [root().join("README.md")].into_iter().chain(pages()) {
        for flag in long_flags(&read(&doc)) {
            if !known.contains(&flag) {
                unknown.push(format!("{}: {flag}", doc.strip_prefix(root()).unwrap().display()));
            }
        }
    }
    assert!(unknown.is_empty(), "flags no rpcmeter command has:\n{}", unknown.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    let a = anchors("# `rpcmeter run`: load\n## The open loop at 80%\n```\n# not a heading\n```\n## Twice\n## Twice\n");
    let want = ["rpcmeter-run-load", "the-open-loop-at-80", "twice", "twice-1"];
    assert_eq!(a, want.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        long_flags("a --plaintext, `--lb round_robin` |---| x--y --- -c"),
        ["--lb", "--plaintext"].map(String::from).into()
    );
}
