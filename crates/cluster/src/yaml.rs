//! A small YAML writer for manifests: block mappings and sequences, every string scalar written
//! as a JSON string (a double-quoted YAML scalar: JSON is YAML 1.2, so no value is ever read
//! back as another type, `"on"` stays a string and `"0"` is not a number), numbers and booleans
//! bare, and mapping keys bare where they are plain words.
//!
//! A manifest is built as a `serde_json::Value` (so a test can compare it as data) and written
//! here, with a comment header; kubectl, kubernetes-validate and polyaxon read it as YAML.

use std::fmt::Write as _;

use coload_cohort_schema::text;
use serde_json::Value;

/// `value` as a YAML document, after `header` as `# ` comment lines: the header is split on LF
/// only, and every other character that could end a line for some reader (CR, NEL, U+2028, ...)
/// is shown escaped, so no text in the header can end its comment and start YAML.
pub(crate) fn document(header: &str, value: &Value) -> String {
    let mut out = String::new();
    for line in header.split('\n') {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {}", text::escaped(line));
        }
    }
    write_block(&mut out, value, 0);
    out
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
        && k.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if plain {
        k.to_owned()
    } else {
        scalar(&Value::String(k.to_owned()))
    }
}

fn scalar(v: &Value) -> String {
    // serde_json's text of a scalar is a valid YAML flow scalar with the same meaning, once the
    // characters JSON leaves bare but a YAML 1.1 reader takes as line breaks or refuses (DEL,
    // C1 controls with NEL, U+2028/2029, U+FFFE/FFFF) are written as `\uXXXX` too, which both
    // read back as the same character.
    let json = v.to_string();
    if text::first_unsafe(&json).is_none() {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if text::is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_empty_collection(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty()) || matches!(v, Value::Object(o) if o.is_empty())
}

/// Writes `v` as the body of a block at `indent` spaces (a mapping's entries or a sequence's
/// items; a scalar on a line of its own).
fn write_block(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let _ = write!(out, "{pad}{}:", key(k));
                write_value_after(out, v, indent);
            }
        }
        Value::Array(items) => {
            for item in items {
                let _ = write!(out, "{pad}-");
                match item {
                    Value::Object(map) if !map.is_empty() => {
                        // The first entry on the dash's line, the rest under it.
                        let mut first = true;
                        for (k, v) in map {
                            if first {
                                let _ = write!(out, " {}:", key(k));
                                first = false;
                            } else {
                                let _ = write!(out, "{pad}  {}:", key(k));
                            }
                            write_value_after(out, v, indent + 2);
                        }
                    }
                    Value::Array(inner) if !inner.is_empty() => {
                        out.push('\n');
                        write_block(out, item, indent + 2);
                    }
                    _ => write_scalar_after(out, item, indent + 2),
                }
            }
        }
        _ => {
            let _ = writeln!(out, "{pad}{}", scalar(v));
        }
    }
}

/// After `key:` at `indent`: a scalar on the same line, a collection on the next lines.
fn write_value_after(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(_) | Value::Array(_) if !is_empty_collection(v) => {
            out.push('\n');
            // Sequences under a key are indented too (what kubectl and most YAML look like).
            write_block(out, v, indent + 2);
        }
        _ => write_scalar_after(out, v, indent + 2),
    }
}

/// A scalar after `key:` or `-`: a script of several lines as a literal block (`|`), so that it
/// reads as it runs; anything else in flow form.
fn write_scalar_after(out: &mut String, v: &Value, indent: usize) {
    match v.as_str().filter(|s| literal_block_ok(s)) {
        Some(text) => {
            out.push_str(" |\n");
            let pad = " ".repeat(indent);
            for line in text.lines() {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "{pad}{line}");
                }
            }
        }
        None => {
            let _ = writeln!(out, " {}", flow(v));
        }
    }
}

/// A literal block keeps the text exactly when it ends in one newline, has more than one line,
/// does not start with a space, and holds no other control character or trailing blank.
fn literal_block_ok(s: &str) -> bool {
    s.ends_with('\n')
        && !s.ends_with("\n\n")
        && s.trim_end_matches('\n').contains('\n')
        && !s.starts_with([' ', '\n'])
        && s.chars().all(|c| c == '\n' || !text::is_unsafe(c))
        && s.lines().all(|l| !l.ends_with([' ', '\t']))
}

/// A scalar, or an empty collection as `[]` / `{}`.
fn flow(v: &Value) -> String {
    match v {
        Value::Array(a) if a.is_empty() => "[]".to_owned(),
        Value::Object(o) if o.is_empty() => "{}".to_owned(),
        _ => scalar(v),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nested_blocks_and_quoted_scalars() {
        let v = json!({
            "apiVersion": "batch/v1",
            "spec": {
                "completions": 2,
                "list": ["a", "on", "0", "it's \"x\"\n", "set -eu\n  case x\n\nexec y\n"],
                "items": [{"name": "w", "n": [1, 2]}, {"k": {}}],
                "kubernetes.io/hostname": "n-1",
                "9bad key": true,
                "empty": []
            }
        });
        let text = document("one\n\ntwo", &v);
        assert_eq!(
            text,
            "# one\n#\n# two\napiVersion: \"batch/v1\"\nspec:\n  \"9bad key\": true\n  completions: 2\n  \
             empty: []\n  items:\n    - n:\n        - 1\n        - 2\n      name: \"w\"\n    - k: {}\n  \
             kubernetes.io/hostname: \"n-1\"\n  list:\n    - \"a\"\n    - \"on\"\n    - \"0\"\n    \
             - \"it's \\\"x\\\"\\n\"\n    - |\n      set -eu\n        case x\n\n      exec y\n"
        );
    }
}
