//! A lab's write-up as a few kinds of blocks, rendered twice: markdown (the summary a reader
//! pastes into an issue) and HTML (the top of the lab's report page). One model, so the two
//! never say different things.
use crate::report::svg::esc;
use std::fmt::Write as _;

#[derive(Debug, Clone)]
enum Block {
    Heading(String),
    Para(String),
    List(Vec<String>),
    Table {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// What the lab concludes: withheld when the lab was interrupted (its steps did not all run).
    Findings {
        heading: String,
        items: Vec<String>,
    },
    /// Already-rendered, already-escaped HTML (a plot); the markdown says where to see it.
    Figure {
        html: String,
        caption: String,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub title: String,
    blocks: Vec<Block>,
    /// Set when the lab was stopped before its end: said at the top, and no findings drawn.
    interrupted: Option<String>,
}

/// What stands in for the findings of an interrupted lab.
pub const NOT_DRAWN: &str =
    "Not drawn: the lab was interrupted, so some of its steps did not run (or ran only in part).";

impl Doc {
    pub fn new(title: impl Into<String>) -> Doc {
        Doc { title: title.into(), blocks: Vec::new(), interrupted: None }
    }

    pub fn heading(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Heading(text.into()));
    }

    pub fn para(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }

    pub fn list(&mut self, items: Vec<String>) {
        if !items.is_empty() {
            self.blocks.push(Block::List(items));
        }
    }

    pub fn table(&mut self, head: &[&str], rows: Vec<Vec<String>>) {
        self.blocks.push(Block::Table { head: head.iter().map(|h| h.to_string()).collect(), rows });
    }

    /// The lab's conclusions under `heading`; withheld if the lab is marked interrupted.
    pub fn findings(&mut self, heading: impl Into<String>, items: Vec<String>) {
        self.blocks.push(Block::Findings { heading: heading.into(), items });
    }

    /// Marks the write-up INTERRUPTED at its top, with `what` (which steps ran, which not).
    pub fn interrupted(&mut self, what: impl Into<String>) {
        self.interrupted = Some(what.into());
    }

    /// An SVG plot (from `report::svg`); the markdown names it and points at the HTML page.
    pub fn figure(&mut self, html: String, caption: impl Into<String>) {
        self.blocks.push(Block::Figure { html, caption: caption.into() });
    }

    pub fn markdown(&self) -> String {
        let mut m = format!("# {}\n", self.title);
        if let Some(what) = &self.interrupted {
            let _ = write!(m, "\n**INTERRUPTED**: {what}\n");
        }
        for block in &self.blocks {
            m.push('\n');
            match block {
                Block::Heading(t) => {
                    let _ = writeln!(m, "## {t}");
                }
                Block::Para(t) => {
                    let _ = writeln!(m, "{t}");
                }
                Block::List(items) => items.iter().for_each(|i| {
                    let _ = writeln!(m, "- {i}");
                }),
                Block::Table { head, rows } => {
                    let cell = |s: &String| s.replace('|', "\\|");
                    let _ = writeln!(m, "| {} |", head.iter().map(cell).collect::<Vec<_>>().join(" | "));
                    let _ = writeln!(m, "|{}", "---|".repeat(head.len()));
                    for row in rows {
                        let _ = writeln!(m, "| {} |", row.iter().map(cell).collect::<Vec<_>>().join(" | "));
                    }
                }
                Block::Figure { caption, .. } => {
                    let _ = writeln!(m, "*Figure: {caption} (in the HTML report).*");
                }
                Block::Findings { heading, items } => {
                    let _ = writeln!(m, "## {heading}\n");
                    match self.interrupted {
                        Some(_) => {
                            let _ = writeln!(m, "{NOT_DRAWN}");
                        }
                        None => items.iter().for_each(|i| {
                            let _ = writeln!(m, "- {i}");
                        }),
                    }
                }
            }
        }
        m
    }

    /// The blocks as HTML, every string escaped (server names and error texts come from outside).
    pub fn html(&self) -> String {
        let mut h = String::new();
        if let Some(what) = &self.interrupted {
            let _ = writeln!(h, "<div class=\"alert\" id=\"interrupted\"><p>INTERRUPTED: {}</p></div>", esc(what));
        }
        for block in &self.blocks {
            match block {
                Block::Heading(t) => {
                    let _ = writeln!(h, "<h2>{}</h2>", esc(t));
                }
                Block::Para(t) => {
                    let _ = writeln!(h, "<p>{}</p>", esc(t));
                }
                Block::List(items) => {
                    h.push_str("<ul>");
                    items.iter().for_each(|i| {
                        let _ = write!(h, "<li>{}</li>", esc(i));
                    });
                    h.push_str("</ul>\n");
                }
                Block::Table { head, rows } => {
                    h.push_str("<table class=\"lab\"><tr>");
                    head.iter().for_each(|c| {
                        let _ = write!(h, "<th>{}</th>", esc(c));
                    });
                    h.push_str("</tr>\n");
                    for row in rows {
                        h.push_str("<tr>");
                        row.iter().for_each(|c| {
                            let _ = write!(h, "<td>{}</td>", esc(c));
                        });
                        h.push_str("</tr>\n");
                    }
                    h.push_str("</table>\n");
                }
                Block::Figure { html, caption } => {
                    let _ =
                        writeln!(h, "<figure>{html}<figcaption class=\"small\">{}</figcaption></figure>", esc(caption));
                }
                Block::Findings { heading, items } => {
                    let _ = writeln!(h, "<h2>{}</h2>", esc(heading));
                    match self.interrupted {
                        Some(_) => {
                            let _ = writeln!(h, "<p><strong>{}</strong></p>", esc(NOT_DRAWN));
                        }
                        None => {
                            h.push_str("<ul>");
                            items.iter().for_each(|i| {
                                let _ = write!(h, "<li>{}</li>", esc(i));
                            });
                            h.push_str("</ul>\n");
                        }
                    }
                }
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_renderings_carry_every_block_and_html_is_escaped() {
        let mut d = Doc::new("Lab <x>");
        d.heading("Results");
        d.para("a <b>bold</b> claim");
        d.list(vec!["one".into(), "two|three".into()]);
        d.table(&["server", "calls/s"], vec![vec!["go|1".into(), "12.5".into()]]);
        d.figure("<svg></svg>".into(), "throughput");
        let md = d.markdown();
        assert!(md.starts_with("# Lab <x>\n"));
        assert!(md.contains("## Results") && md.contains("- two|three") && md.contains("| go\\|1 | 12.5 |"));
        assert!(md.contains("|---|---|") && md.contains("Figure: throughput"));
        let html = d.html();
        assert!(html.contains("a &lt;b&gt;bold&lt;/b&gt; claim") && html.contains("<svg></svg>"));
        assert!(html.contains("<td>go|1</td>") && !html.contains("<b>"));
    }

    #[test]
    fn an_interrupted_write_up_says_so_on_top_and_draws_no_findings() {
        let mut d = Doc::new("Lab");
        d.para("intro");
        d.findings("What it shows", vec!["async wins by 3x".into()]);
        assert!(d.markdown().contains("- async wins by 3x") && d.html().contains("<li>async wins by 3x</li>"));
        d.interrupted("ran a; b not run");
        let md = d.markdown();
        assert!(md.starts_with("# Lab\n\n**INTERRUPTED**: ran a; b not run\n"), "{md}");
        assert!(!md.contains("3x") && md.contains(NOT_DRAWN));
        let html = d.html();
        assert!(html.starts_with("<div class=\"alert\" id=\"interrupted\"><p>INTERRUPTED: ran a; b not run"));
        assert!(!html.contains("3x") && html.contains("Not drawn"));
    }
}
