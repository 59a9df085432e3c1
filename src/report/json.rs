//! `--format json`: the Summary as one object (DESIGN.md's schema, plus fields).
use super::Summary;

pub fn render(summary: &Summary) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    serde_json::to_string_pretty(summary).unwrap_or_default() + "\n"
}
