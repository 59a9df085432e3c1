//! The HTML pages of the commands that are not a run: `compare`, `history`, `ping` and
//! `sweep` given `--format html` or `-o FILE.html` (as `run -o FILE.html` draws `report`'s
//! page). Each is one self-contained page, drawn the one way the crate draws: the page and
//! its style are `report::html::render_page`'s, the plots `report::svg::Plot`. What went
//! wrong (failed calls, unsent calls, a frozen client, a run cut short) is said first, in
//! the same red box `report` uses, never only in a plot.
pub mod compare;
pub mod history;
pub mod ping;
pub mod sweep;

use super::outputs::WholeFile;
use crate::error::{bad_input, output_failed};
use crate::report::svg::esc;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// What these pages add to `report`'s style: verdict words in colour, and a box for what is
/// not wrong but not known either (`alert` is `report`'s red box).
const STYLE: &str = "<style>
.verdict { font-weight: bold; white-space: nowrap; } .v-regression, .v-failed { color: #c0392b; }
.v-improvement { color: #1e8449; } .v-no-change { color: #555; } .v-not-judged, .v-interrupted { color: #b9770e; }
.good { border-left: 6px solid #1e8449; background: #eafaf1; color: #145a32; padding: 8px 12px; margin: 8px 0; font-weight: bold; font-size: 15px; }
.unknown { border-left: 6px solid #d68910; background: #fef5e7; color: #7e5109; padding: 8px 12px; margin: 8px 0; font-size: 14px; }
.good p, .unknown p { margin: 2px 0; } tr.run-failed td { background: #fdecea; } tr.run-interrupted td { background: #fef5e7; }
td.wrap { overflow-wrap: anywhere; }
</style>\n";

/// A whole page titled `title` around `body` (HTML whose outside strings are escaped).
pub fn page(title: &str, body: &str) -> String {
    crate::report::html::render_page(title, &format!("{STYLE}{body}"), &[])
}

/// A box of lines (escaped here): `class` is `alert` (red: what went wrong), `unknown`
/// (orange) or `good` (green); nothing without lines.
pub fn boxed(id: &str, class: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut s = format!("<div class=\"{class}\" id=\"{id}\">");
    for line in lines {
        s += &format!("<p>{}</p>", esc(line));
    }
    s + "</div>\n"
}

/// A list of notes (escaped here) under a heading; nothing without notes.
pub fn notes(heading: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let items: String = lines.iter().map(|l| format!("<li>{}</li>", esc(l))).collect();
    format!("<h2>{}</h2><ul class=\"notices\">{items}</ul>\n", esc(heading))
}

/// Where a command's report goes: standard output, or a file created before the work (a bad
/// path costs no measuring) and put in place whole at the end.
pub enum Destination {
    Stdout,
    File(PathBuf, WholeFile),
}

impl Destination {
    pub fn open(path: Option<&Path>) -> anyhow::Result<Destination> {
        match path {
            None => Ok(Destination::Stdout),
            Some(p) if p == Path::new("-") => Ok(Destination::Stdout),
            Some(p) => {
                let file = WholeFile::create(p).map_err(|e| bad_input(format!("-o {}: {e}", p.display())))?;
                Ok(Destination::File(p.to_path_buf(), file))
            }
        }
    }

    /// Writes the whole text; `what` names the command in the line that says where it went.
    pub fn write(self, text: &str, what: &str) -> anyhow::Result<()> {
        match self {
            Destination::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| output_failed(Path::new("-"), e))
            }
            Destination::File(path, file) => {
                let mut w = file.file();
                w.write_all(text.as_bytes()).and_then(|_| file.commit()).map_err(|e| output_failed(&path, e))?;
                eprintln!("{what}: wrote {}", path.display());
                Ok(())
            }
        }
    }
}
