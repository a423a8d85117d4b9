//! Rendering a spec back into the command line that parses into it.
//!
//! Rendering follows one rule per value: a field `window_s: 45.0` becomes `--window-s 45`, a
//! `true` boolean becomes the bare flag, and `false` or `None` is left out (the parser's default
//! then applies). The field names are the flags' names with `_` for `-`, so the same serde view
//! of a spec is its plan TOML form ([`crate::plan`]) and its argv. The tests check, against
//! clap's own view of the flags, that every flag is rendered and that rendering then parsing
//! gives back the same values.

use serde::Serialize;

/// Why a set of flags could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The value does not serialize to a flat object of plain values.
    #[error("cannot render worker flags: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A field holds something other than a plain value (a list, a nested object).
    #[error("cannot render worker flag --{0}: only plain values can be passed on")]
    NotPlain(String),
    /// The flags are not an object.
    #[error("cannot render worker flags: they are not a set of named fields")]
    NotFlags,
}

/// Renders `flags` as the argv that parses back into them: `--name value` per field,
/// the bare `--name` for a `true` boolean, nothing for `false` or `None`.
///
/// Paths must be UTF-8 (serde cannot serialize others; the error says so), so every argument
/// is text, as a manifest needs it.
pub fn to_argv<T: Serialize>(flags: &T) -> Result<Vec<String>, RenderError> {
    render(flags, false)
}

/// [`to_argv`] with every value joined to its flag, `--name=value`, so that a value that starts
/// with `-` cannot be read as a flag of its own by a parser that does not know the flag (a
/// command line that passes through another program's).
pub fn to_argv_joined<T: Serialize>(flags: &T) -> Result<Vec<String>, RenderError> {
    render(flags, true)
}

fn render<T: Serialize>(flags: &T, joined: bool) -> Result<Vec<String>, RenderError> {
    let serde_json::Value::Object(fields) = serde_json::to_value(flags)? else {
        return Err(RenderError::NotFlags);
    };
    let mut argv = Vec::with_capacity(fields.len() * 2);
    for (name, value) in fields {
        let flag = format!("--{}", name.replace('_', "-"));
        let value = match value {
            serde_json::Value::Null | serde_json::Value::Bool(false) => continue,
            serde_json::Value::Bool(true) => {
                argv.push(flag);
                continue;
            }
            serde_json::Value::Number(n) => number_text(&n),
            serde_json::Value::String(s) => s,
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                return Err(RenderError::NotPlain(name.replace('_', "-")));
            }
        };
        if joined {
            argv.push(format!("{flag}={value}"));
        } else {
            argv.push(flag);
            argv.push(value);
        }
    }
    Ok(argv)
}

/// An error and its sources, outermost first, joined by `: ` (how the binaries print an error
/// on stderr and record it in `worker.json`): `workload: out of memory: CUDA out of memory ...`.
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    use std::fmt::Write as _;
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let _ = write!(text, ": {e}");
        source = e.source();
    }
    text
}

/// `45` rather than `45.0` for whole floats; anything else as serde_json writes it (which
/// round-trips exactly).
pub(crate) fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(x) if n.is_f64() && x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The joined form is the same rendering, value for value, and refuses what it refuses.
    #[test]
    fn the_joined_form_is_the_same_rendering() {
        #[derive(Serialize)]
        struct Flags {
            window_s: f64,
            offset: i32,
            strict: bool,
            quiet: bool,
            model: Option<String>,
            out: &'static str,
        }
        #[derive(Serialize)]
        struct Bad {
            devices: Vec<u32>,
        }
        let flags = Flags {
            window_s: 45.0,
            offset: -3,
            strict: true,
            quiet: false,
            model: None,
            out: "runs/a b",
        };
        assert_eq!(
            to_argv(&flags).unwrap(),
            [
                "--offset",
                "-3",
                "--out",
                "runs/a b",
                "--strict",
                "--window-s",
                "45"
            ]
        );
        assert_eq!(
            to_argv_joined(&flags).unwrap(),
            ["--offset=-3", "--out=runs/a b", "--strict", "--window-s=45"]
        );
        assert!(matches!(
            to_argv_joined(&Bad { devices: vec![1] }),
            Err(RenderError::NotPlain(flag)) if flag == "devices"
        ));
    }

    #[test]
    fn lists_are_refused_not_flattened() {
        #[derive(Serialize)]
        struct Bad {
            devices: Vec<u32>,
        }
        let err = to_argv(&Bad {
            devices: vec![1, 2],
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot render worker flag --devices: only plain values can be passed on"
        );
        assert!(matches!(to_argv(&3_u32), Err(RenderError::NotFlags)));
    }

    #[test]
    fn underscores_become_dashes_and_whole_floats_lose_their_point() {
        #[derive(Serialize)]
        struct Some_ {
            window_s: f64,
            strict: bool,
            quiet: bool,
            rate: Option<f64>,
        }
        let argv = to_argv(&Some_ {
            window_s: 45.0,
            strict: true,
            quiet: false,
            rate: None,
        })
        .unwrap();
        // In field-name order (serde_json sorts), which clap does not mind.
        assert_eq!(argv, ["--strict", "--window-s", "45"]);
    }
}
