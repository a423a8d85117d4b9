//! The resource key a policy's workers request: what the NVIDIA device plugin advertises for
//! the node's sharing mode (docs/deploy.md, "Prepare one node per sharing mode").

use std::fmt;

use coload_cohort_schema::Mode;

use crate::error::ClusterError;

/// A GPU resource key the NVIDIA device plugin advertises.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceKey(String);

/// The forms a key may take, for messages.
const FORMS: &str = "nvidia.com/gpu, nvidia.com/gpu.shared, or nvidia.com/mig-<G>g.<M>gb \
                     (e.g. nvidia.com/mig-1g.18gb; with .shared when MIG slices are time-sliced \
                     and renamed)";

impl ResourceKey {
    /// Parses a key: `nvidia.com/gpu`, `nvidia.com/gpu.shared`, or `nvidia.com/mig-1g.18gb`
    /// (optionally `.shared`).
    pub fn parse(text: &str) -> Result<Self, ClusterError> {
        let ok = match text {
            "nvidia.com/gpu" | "nvidia.com/gpu.shared" => true,
            _ => text
                .strip_prefix("nvidia.com/mig-")
                .map(|p| p.strip_suffix(".shared").unwrap_or(p))
                .is_some_and(is_mig_profile),
        };
        if ok {
            Ok(ResourceKey(text.to_owned()))
        } else {
            Err(ClusterError::Usage(format!(
                "resource key `{}` is not one the NVIDIA device plugin advertises: {FORMS}",
                text.escape_debug()
            )))
        }
    }

    /// The key's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A MIG slice (`nvidia.com/mig-...`, the mixed strategy).
    #[must_use]
    pub fn is_mig(&self) -> bool {
        self.0.starts_with("nvidia.com/mig-")
    }

    /// Checks the key against the policy's mode: a MIG slice for a mode that is not MIG is a
    /// different experiment than the plan says, and so is a renamed shared GPU for `exclusive`.
    pub fn check_mode(&self, mode: Mode) -> Result<(), String> {
        match mode {
            Mode::Exclusive | Mode::Timeslice | Mode::Mps if self.is_mig() => Err(format!(
                "resource `{self}` is a MIG slice, but the policy's mode is {mode}; use mode mig \
                 (or mig-timeslice), or nvidia.com/gpu"
            )),
            Mode::Exclusive if self.0 == "nvidia.com/gpu.shared" => Err(format!(
                "resource `{self}` is a shared GPU, but the policy's mode is exclusive"
            )),
            Mode::Mig | Mode::MigTimeslice if self.0 == "nvidia.com/gpu.shared" => Err(format!(
                "resource `{self}` is a time-sliced whole GPU, not a MIG slice; use \
                 nvidia.com/mig-<profile> (mixed strategy) or nvidia.com/gpu (single strategy)"
            )),
            _ => Ok(()),
        }
    }
}

/// `1g.18gb`: G in 1..=7 compute slices, M gigabytes.
fn is_mig_profile(p: &str) -> bool {
    let Some((g, m)) = p.split_once("g.") else {
        return false;
    };
    let Some(m) = m.strip_suffix("gb") else {
        return false;
    };
    matches!(g, "1" | "2" | "3" | "4" | "7")
        && !m.is_empty()
        && m.len() <= 4
        && m.bytes().all(|b| b.is_ascii_digit())
        && !m.starts_with('0')
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_device_plugin_advertises() {
        for good in [
            "nvidia.com/gpu",
            "nvidia.com/gpu.shared",
            "nvidia.com/mig-1g.18gb",
            "nvidia.com/mig-1g.10gb",
            "nvidia.com/mig-2g.20gb.shared",
            "nvidia.com/mig-7g.141gb",
        ] {
            assert!(ResourceKey::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "nvidia.com/tpu",
            "gpu",
            "nvidia.com/mig-1g",
            "nvidia.com/mig-5g.10gb",
            "nvidia.com/mig-1g.0gb",
            "nvidia.com/mig-1g.10gb.x",
            "nvidia.com/gpu ",
            "",
        ] {
            let e = ResourceKey::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("is not one the NVIDIA device plugin advertises"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn keys_fit_their_mode() {
        let mig = ResourceKey::parse("nvidia.com/mig-1g.18gb").unwrap();
        let gpu = ResourceKey::parse("nvidia.com/gpu").unwrap();
        let shared = ResourceKey::parse("nvidia.com/gpu.shared").unwrap();
        assert!(mig.check_mode(Mode::Mig).is_ok());
        assert!(mig.check_mode(Mode::Timeslice).is_err());
        assert!(gpu.check_mode(Mode::Mig).is_ok());
        assert!(shared.check_mode(Mode::Mps).is_ok());
        assert!(shared.check_mode(Mode::Exclusive).is_err());
        assert!(shared.check_mode(Mode::Mig).is_err());
    }
}
