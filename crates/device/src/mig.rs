//! MIG profiles as NVIDIA names them.
//!
//! A MIG device is a compute instance (CI) of a GPU instance (GI). The GI owns the memory
//! slices (and the copy and media engines); its compute slices may be split into several CIs,
//! each a CUDA device of its own, which then share the GI's memory and memory bandwidth. The
//! device name says both (MIG User Guide, "MIG Device Names"):
//!
//! - `3g.40gb`: a GI of 3 compute slices and 40 GB holding one CI that takes all of it;
//! - `1c.3g.40gb`: a CI of 1 compute slice inside such a GI (the GI profile is `3g.40gb`);
//! - `1g.10gb+me`: a GI profile with an attribute (`+me`: with the media extensions; newer
//!   drivers also name `-me`, `+me.all` and `+gfx`), kept as part of the GI profile.

use std::fmt;

/// A MIG device profile, parsed (`1g.10gb`, `1c.3g.40gb`, `1g.10gb+me`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MigProfile {
    /// Compute slices of the compute instance, when the name gives them (`1` of
    /// `1c.3g.40gb`); `None` when the CI takes the whole GI.
    pub compute_slices: Option<u32>,
    /// Compute slices of the GPU instance (`3` of `3g.40gb`).
    pub gpu_slices: u32,
    /// Memory of the GPU instance in the profile's own rounded GB (`40` of `3g.40gb`).
    pub memory_gb: u32,
    /// Attributes of the GI profile after the memory, verbatim (`+me`, `-me`, `+me.all`,
    /// `+gfx`); empty for none.
    pub attributes: String,
}

impl MigProfile {
    /// Parses a profile (`1c.3g.40gb`, `7g.141gb`, `1g.18gb+me`); `None` when `text` is no
    /// MIG profile.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let split = text.find(['+', '-']).unwrap_or(text.len());
        let (base, attributes) = text.split_at(split);
        if attributes.len() == 1 {
            return None;
        }
        let parts: Vec<&str> = base.split('.').collect();
        let (compute, gpu, memory) = match parts.as_slice() {
            [g, m] => (None, *g, *m),
            [c, g, m] => (Some(*c), *g, *m),
            _ => return None,
        };
        let number = |s: &str, unit: &str| -> Option<u32> {
            let digits = s.strip_suffix(unit)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok().filter(|n| *n > 0)
        };
        let compute_slices = match compute {
            Some(c) => Some(number(c, "c")?),
            None => None,
        };
        let gpu_slices = number(gpu, "g")?;
        if compute_slices.is_some_and(|c| c > gpu_slices) {
            return None;
        }
        Some(MigProfile {
            compute_slices,
            gpu_slices,
            memory_gb: number(memory, "gb")?,
            attributes: attributes.to_owned(),
        })
    }

    /// The GPU instance's profile (`3g.40gb` for `1c.3g.40gb`, `1g.10gb+me` for itself).
    #[must_use]
    pub fn gpu_instance_profile(&self) -> String {
        format!(
            "{}g.{}gb{}",
            self.gpu_slices, self.memory_gb, self.attributes
        )
    }

    /// Whether the name says the compute instance takes only part of its GPU instance (other
    /// compute instances may then share the GI's memory).
    #[must_use]
    pub fn is_partial_compute_instance(&self) -> bool {
        self.compute_slices.is_some_and(|c| c < self.gpu_slices)
    }
}

impl fmt::Display for MigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.compute_slices {
            write!(f, "{c}c.")?;
        }
        f.write_str(&self.gpu_instance_profile())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_gpu_instance_profiles() {
        let p = MigProfile::parse("1g.10gb").unwrap();
        assert_eq!((p.compute_slices, p.gpu_slices, p.memory_gb), (None, 1, 10));
        assert_eq!(p.gpu_instance_profile(), "1g.10gb");
        assert!(!p.is_partial_compute_instance());
        assert_eq!(MigProfile::parse("7g.141gb").unwrap().memory_gb, 141);
    }

    #[test]
    fn compute_instance_profiles_name_their_gpu_instance() {
        let p = MigProfile::parse("1c.3g.40gb").unwrap();
        assert_eq!(p.compute_slices, Some(1));
        assert_eq!(p.gpu_instance_profile(), "3g.40gb");
        assert!(p.is_partial_compute_instance());
        assert_eq!(p.to_string(), "1c.3g.40gb");
        // A CI of the whole GI, written out.
        assert!(
            !MigProfile::parse("3c.3g.40gb")
                .unwrap()
                .is_partial_compute_instance()
        );
        let h200 = MigProfile::parse("2c.4g.71gb").unwrap();
        assert_eq!(h200.gpu_instance_profile(), "4g.71gb");
    }

    #[test]
    fn attributes_stay_with_the_gpu_instance_profile() {
        let me = MigProfile::parse("1g.10gb+me").unwrap();
        assert_eq!(me.attributes, "+me");
        assert_eq!(me.gpu_instance_profile(), "1g.10gb+me");
        assert_eq!(me.to_string(), "1g.10gb+me");
        assert_ne!(me, MigProfile::parse("1g.10gb").unwrap());
        let all = MigProfile::parse("1g.18gb+me.all").unwrap();
        assert_eq!(all.gpu_instance_profile(), "1g.18gb+me.all");
        assert_eq!(
            MigProfile::parse("1c.2g.35gb-me")
                .unwrap()
                .gpu_instance_profile(),
            "2g.35gb-me"
        );
    }

    #[test]
    fn what_is_no_profile_is_refused() {
        for bad in [
            "",
            "NVIDIA",
            "1g",
            "g.10gb",
            "1g.gb",
            "1x.10gb",
            "4c.3g.40gb",
            "0g.10gb",
            "1g.10gb+",
            "1c.2c.3g.40gb",
            "1g.10",
        ] {
            assert_eq!(MigProfile::parse(bad), None, "{bad}");
        }
    }
}
