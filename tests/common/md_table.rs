//! The labs' markdown tables, read by tests/labs.rs and tests/lab_ruby.rs (each includes
//! this file as a module of its own).

/// The table rows whose first cells are `first`, each split into cells.
pub fn rows<'a>(md: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    md.lines()
        .filter(|l| l.starts_with(&format!("| {first} |")))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}
