//! What a server sends (a status message, names from its reflection) made safe for a
//! terminal or a text format: a control character could set the window title, clear the
//! screen or start a forged line. JSON (serde) and HTML (`html`) escape on their own; every
//! text output passes server strings through `printable`.
use std::borrow::Cow;

/// `text` with each control character (C0 with tab and newline, DEL, C1) and each character
/// that reorders or breaks lines (bidi overrides, U+2028/2029) written as an escape: `\n`,
/// `\r`, `\t`, `\x1b`, `\u{202e}`. Text without any is returned as it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            c if unsafe_char(c) && (c as u32) < 0x100 => out.push_str(&format!(r"\x{:02x}", c as u32)),
            c if unsafe_char(c) => out.push_str(&format!(r"\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

pub(crate) fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("\x1b]0;pwned\x07\nFAKE LINE"), r"\x1b]0;pwned\x07\nFAKE LINE");
        assert_eq!(printable("a\rb\tc\x7f\u{9b}d\u{202e}"), r"a\rb\tc\x7f\x9bd\u{202e}");
        assert!(matches!(printable("déjà vu: 3 µs \\n"), Cow::Borrowed("déjà vu: 3 µs \\n")));
    }
}
