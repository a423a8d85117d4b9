//! The workload mix: `infer=1,train=6` -> one workload per replica, in the order given.

use std::fmt;

use coload_cohort_schema::Workload;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::SpecError;

/// At most this many workers on one node.
const MAX_WORKERS: usize = 256;

/// One workload per replica, in replica order; never empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mix(Vec<Workload>);

impl Mix {
    /// `count` workers of one workload.
    #[must_use]
    pub fn uniform(workload: Workload, count: u32) -> Self {
        Mix(vec![workload; count as usize])
    }

    /// Parses `infer=1,train=6`.
    pub fn parse(spec: &str) -> Result<Self, SpecError> {
        parse_text(spec).map_err(SpecError::Mix)
    }

    /// The workloads in replica order.
    #[must_use]
    pub fn workloads(&self) -> &[Workload] {
        &self.0
    }

    /// Number of workers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: a mix has at least one worker.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A short label for ids and folder names: `infer1-train6`.
    #[must_use]
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let w = self.0[i];
            let n = self.0[i..].iter().take_while(|x| **x == w).count();
            parts.push(format!("{w}{n}"));
            i += n;
        }
        parts.join("-")
    }
}

impl fmt::Display for Mix {
    /// The form `--workers` takes: `infer=1,train=6` (a mix names each workload once, in one
    /// run, so this parses back into the same mix).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        while i < self.0.len() {
            let w = self.0[i];
            let n = self.0[i..].iter().take_while(|x| **x == w).count();
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{w}={n}")?;
            i += n;
        }
        Ok(())
    }
}

impl std::str::FromStr for Mix {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        Mix::parse(s)
    }
}

impl Serialize for Mix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Mix::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn parse_text(spec: &str) -> Result<Mix, String> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, n) = part.split_once('=').ok_or_else(|| {
            format!("`{part}` in --workers is not of the form workload=count (e.g. train=6)")
        })?;
        let workload: Workload = name.trim().parse()?;
        if seen.contains(&workload) {
            return Err(format!("--workers names {workload} twice"));
        }
        seen.push(workload);
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in --workers is not a count (e.g. train=6)"))?;
        if n == 0 {
            return Err(format!(
                "--workers asks for 0 {workload} workers; leave it out instead"
            ));
        }
        if out.len() + n > MAX_WORKERS {
            return Err(format!(
                "--workers asks for more than {MAX_WORKERS} workers; at most {MAX_WORKERS} on \
                 one node"
            ));
        }
        out.extend(std::iter::repeat_n(workload, n));
    }
    if out.is_empty() {
        return Err("--workers is empty (e.g. --workers infer=1,train=6)".into());
    }
    Ok(Mix(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_in_order() {
        let mix = parse_text("infer=1,train=3").unwrap();
        assert_eq!(
            mix.workloads(),
            [
                Workload::Infer,
                Workload::Train,
                Workload::Train,
                Workload::Train
            ]
        );
        assert_eq!(mix.label(), "infer1-train3");
        assert_eq!(mix.to_string(), "infer=1,train=3");
        assert_eq!(mix.to_string().parse::<Mix>().unwrap(), mix);
        assert_eq!(Mix::uniform(Workload::Train, 2).label(), "train2");
    }

    #[test]
    fn refuses_bad_specs() {
        assert!(parse_text("").unwrap_err().contains("empty"));
        assert!(parse_text("train").unwrap_err().contains("workload=count"));
        assert!(parse_text("train=x").unwrap_err().contains("not a count"));
        assert!(parse_text("train=0").unwrap_err().contains("0 train"));
        assert!(parse_text("train=1,train=2").unwrap_err().contains("twice"));
        assert!(
            parse_text("fly=1")
                .unwrap_err()
                .contains("unknown workload")
        );
        // A huge count is refused before anything is allocated for it.
        assert!(
            parse_text("train=18446744073709551615")
                .unwrap_err()
                .contains("at most 256")
        );
    }
}
