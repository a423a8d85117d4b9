//! Text that came from outside (a path, a name, a field of a recorded file) on its way into
//! something a program or a person reads line by line: a YAML manifest, a shell script, a TOML
//! plan, a comment in any of them, a terminal, a Markdown table.
//!
//! One rule decides which characters may not pass unchanged ([`is_unsafe`]): every control
//! character (NUL, CR, LF, ESC, DEL, the C1 block with NEL) and the Unicode line and paragraph
//! separators (U+2028, U+2029), which YAML 1.1 readers (PyYAML, and through it many tools) and
//! some terminals take as line breaks; and the noncharacters U+FFFE and U+FFFF, which a YAML
//! reader refuses anywhere in a stream. Text holding one of them can end a comment and start code,
//! or move a terminal's cursor. Renderers either refuse such text or write it through
//! [`escaped`], which shows each such character as `\u{..}`; the format's own escaping (a
//! double-quoted YAML or TOML string) is also fine where the text is a value, as long as it uses
//! this same rule for what must be escaped.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` may end a line for some reader, or is a control character a terminal acts on:
/// text holding it is never written unescaped into a rendered file, a comment, a terminal or
/// Markdown.
#[must_use]
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
}

/// The first character of `text` that [`is_unsafe`] refuses, if any.
#[must_use]
pub fn first_unsafe(text: &str) -> Option<char> {
    text.chars().find(|&c| is_unsafe(c))
}

/// `text` with every character [`is_unsafe`] refuses shown as `\u{..}` (a backslash already in
/// the text is left alone: the result is for reading, and the escape is unambiguous enough for
/// a person while it can never end a line). Borrowed when nothing needed escaping.
#[must_use]
pub fn escaped(text: &str) -> Cow<'_, str> {
    if first_unsafe(text).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text of several lines for a terminal or a Markdown file: every character [`is_unsafe`]
/// refuses is shown as `\u{..}` except the line feeds and tabs the text is laid out with, so a
/// field of a recorded file (an experiment id, a model name) cannot clear a screen, move the
/// cursor or end a table row.
#[must_use]
pub fn escaped_lines(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| is_unsafe(c) && !matches!(c, '\n' | '\t'))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split_inclusive('\n') {
        let (body, end) = line
            .strip_suffix('\n')
            .map_or((line, ""), |body| (body, "\n"));
        for part in body.split('\t').enumerate() {
            if part.0 > 0 {
                out.push('\t');
            }
            out.push_str(&escaped(part.1));
        }
        out.push_str(end);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_and_terminal_controls_are_escaped() {
        assert_eq!(
            escaped("a\nb\rc\u{85}d\u{2028}e\u{2029}f\0g\u{1b}[2Jh\u{7f}"),
            "a\\u{a}b\\u{d}c\\u{85}d\\u{2028}e\\u{2029}f\\u{0}g\\u{1b}[2Jh\\u{7f}"
        );
    }

    #[test]
    fn lines_keep_their_breaks_and_tabs_and_lose_their_escapes() {
        assert_eq!(
            escaped_lines("exp\u{1b}[2J\tx\r\nmodel\u{2028}\n"),
            "exp\\u{1b}[2J\tx\\u{d}\nmodel\\u{2028}\n"
        );
        assert!(matches!(escaped_lines("a\tb\nc\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        let text = "files/my model (v2).pt — ünïcode 😀 \\n stays";
        assert!(matches!(escaped(text), Cow::Borrowed(t) if t == text));
        assert_eq!(first_unsafe(text), None);
    }
}
