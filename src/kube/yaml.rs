//! YAML for Kubernetes manifests, from serde_json values: block style, with every string
//! that a YAML reader could take for something else (a number, `yes`, `null`, a `: `, a
//! leading `-`...) written as a JSON string, which is also a valid YAML double-quoted string.
//! Multi-line text (a .proto file in a ConfigMap) is a literal block, so it reads as the file.
//! tests/kube.rs decodes the output with the Kubernetes API's own YAML reader.
use serde_json::Value;
use std::fmt::Write;

/// One YAML document (no leading `---`), ending with a newline.
pub fn document(value: &Value) -> String {
    let mut out = String::new();
    node(&mut out, value, 0);
    out
}

/// Writes `value` as the content after a key or `- ` at `indent`: a scalar on the same line,
/// a collection on the following lines.
fn node(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (i, (key, v)) in map.iter().enumerate() {
                if !(i == 0 && out.ends_with("- ")) {
                    pad(out, indent);
                }
                let _ = write!(out, "{}:", scalar_text(key));
                after_key(out, v, indent);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                pad(out, indent);
                out.push_str("- ");
                match item {
                    Value::Object(m) if !m.is_empty() => node(out, item, indent + 2),
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        node(out, item, indent + 2)
                    }
                    _ => {
                        inline(out, item, indent + 2);
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            inline(out, value, indent);
            out.push('\n');
        }
    }
}

fn after_key(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            node(out, v, indent + 2);
        }
        // A sequence may sit at its key's indentation (kubectl's own style).
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            node(out, v, indent);
        }
        _ => {
            out.push(' ');
            inline(out, v, indent + 2);
            out.push('\n');
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A scalar (or an empty collection) on the current line; a literal block for multi-line
/// text, its lines at `indent`.
fn inline(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::String(s) if block_safe(s) => {
            // Chomping: `|` keeps one final newline, `|-` none, `|+` all of them.
            let trailing = s.len() - s.trim_end_matches('\n').len();
            let chomp = match trailing {
                0 => "-",
                1 => "",
                _ => "+",
            };
            // A first line starting with a space needs the indentation said.
            let hint = if s.starts_with(' ') { "2" } else { "" };
            let _ = write!(out, "|{hint}{chomp}");
            let body = s.strip_suffix('\n').unwrap_or(s);
            for line in body.split('\n') {
                out.push('\n');
                if !line.is_empty() {
                    pad(out, indent);
                    out.push_str(line);
                }
            }
        }
        Value::String(s) => out.push_str(&scalar_text(s)),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        other => out.push_str(&other.to_string()),
    }
}

/// Text with a newline and nothing a literal block cannot hold (control characters, `\r`,
/// the Unicode line breaks YAML 1.1 readers split on, a BOM).
fn block_safe(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with('\n')
        && s.chars().all(|c| c == '\n' || c == '\t' || !(c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')))
        // A line of only spaces before the first text line would set the indentation.
        && !s.lines().next().is_some_and(|l| l.trim().is_empty())
}

/// `s` plain when no YAML reader could read it as anything but this string, else quoted.
fn scalar_text(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./$()".contains(c))
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/' || c == '$')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "nan" | "inf"
        );
    if plain {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_and_quotes() {
        let v = json!({"a": {"b": [1, "x", {"c": "yes", "d": []}], "e": "line\n  two\n"}, "f": "10", "g": {}});
        let text = document(&v);
        assert_eq!(
            text,
            "a:\n  b:\n  - 1\n  - x\n  - c: \"yes\"\n    d: []\n  e: |\n    line\n      two\nf: \"10\"\ng: {}\n"
        );
    }
}
