//! The workload mix: `infer=1,train=6` -> one workload per replica, in the order given.

use coload_cohort_schema::Workload;

/// Expands a mix spec into one workload per replica.
pub(crate) fn parse_mix(spec: &str) -> Result<Vec<Workload>, String> {
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
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in --workers is not a count (e.g. train=6)"))?;
        if n == 0 {
            return Err(format!(
                "--workers asks for 0 {workload} workers; leave it out instead"
            ));
        }
        out.extend(std::iter::repeat_n(workload, n as usize));
    }
    if out.is_empty() {
        return Err("--workers is empty (e.g. --workers infer=1,train=6)".into());
    }
    if out.len() > 256 {
        return Err(format!(
            "--workers asks for {} workers; at most 256 on one node",
            out.len()
        ));
    }
    Ok(out)
}

/// A short label for ids and folder names: `infer1-train6`.
pub(crate) fn label(mix: &[Workload]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < mix.len() {
        let w = mix[i];
        let n = mix[i..].iter().take_while(|x| **x == w).count();
        parts.push(format!("{w}{n}"));
        i += n;
    }
    parts.join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_in_order() {
        let mix = parse_mix("infer=1,train=3").unwrap();
        assert_eq!(
            mix,
            [
                Workload::Infer,
                Workload::Train,
                Workload::Train,
                Workload::Train
            ]
        );
        assert_eq!(label(&mix), "infer1-train3");
    }

    #[test]
    fn refuses_bad_specs() {
        assert!(parse_mix("").unwrap_err().contains("empty"));
        assert!(parse_mix("train").unwrap_err().contains("workload=count"));
        assert!(parse_mix("train=x").unwrap_err().contains("not a count"));
        assert!(parse_mix("train=0").unwrap_err().contains("0 train"));
        assert!(parse_mix("train=1,train=2").unwrap_err().contains("twice"));
        assert!(parse_mix("fly=1").unwrap_err().contains("unknown workload"));
    }
}
