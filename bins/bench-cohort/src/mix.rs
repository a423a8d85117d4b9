//! The workload mix: `infer=1,train=6` -> one workload per replica, in the order given.

use coload_cohort_schema::Workload;

/// At most this many workers on one node.
const MAX_WORKERS: usize = 256;

/// One workload per replica, in replica order; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mix(Vec<Workload>);

impl Mix {
    /// `count` workers of one workload.
    pub(crate) fn uniform(workload: Workload, count: u32) -> Self {
        Mix(vec![workload; count as usize])
    }

    /// Parses `infer=1,train=6`.
    pub(crate) fn parse(spec: &str) -> Result<Self, String> {
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

    /// The workloads in replica order.
    pub(crate) fn workloads(&self) -> &[Workload] {
        &self.0
    }

    /// Number of workers.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// A short label for ids and folder names: `infer1-train6`.
    pub(crate) fn label(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_in_order() {
        let mix = Mix::parse("infer=1,train=3").unwrap();
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
        assert_eq!(Mix::uniform(Workload::Train, 2).label(), "train2");
    }

    #[test]
    fn refuses_bad_specs() {
        assert!(Mix::parse("").unwrap_err().contains("empty"));
        assert!(Mix::parse("train").unwrap_err().contains("workload=count"));
        assert!(Mix::parse("train=x").unwrap_err().contains("not a count"));
        assert!(Mix::parse("train=0").unwrap_err().contains("0 train"));
        assert!(Mix::parse("train=1,train=2").unwrap_err().contains("twice"));
        assert!(
            Mix::parse("fly=1")
                .unwrap_err()
                .contains("unknown workload")
        );
        // A huge count is refused before anything is allocated for it.
        assert!(
            Mix::parse("train=18446744073709551615")
                .unwrap_err()
                .contains("at most 256")
        );
    }
}
