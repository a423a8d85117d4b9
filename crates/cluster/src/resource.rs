//! The resource key a policy's workers request: what the NVIDIA device plugin advertises for
//! the node's sharing mode (docs/deploy.md, "Prepare one node per sharing mode").
//!
//! The names are the plugin's own (NVIDIA/k8s-device-plugin, `internal/rm/rm.go`,
//! `AddDefaultResourcesToConfig`):
//!
//! - whole GPUs, and every MIG device under the `single` MIG strategy: `nvidia.com/gpu`;
//! - under the `mixed` strategy, one resource per MIG GPU-instance profile: `"mig-" + profile`
//!   with every `+` replaced by `.`, so `1g.10gb` is `nvidia.com/mig-1g.10gb` and `1g.10gb+me`
//!   is `nvidia.com/mig-1g.10gb.me`. The profile is go-nvlib's `MigProfileInfo.String()`:
//!   `<G>g.<GB>gb`, then `+me`, `+me.all`, `+gfx` or `-me`. Profiles whose compute instance
//!   takes only part of its GPU instance (`1c.3g.40gb`) are skipped: the plugin advertises no
//!   resource for them;
//! - a shared resource renamed by time-slicing (`renameByDefault`): the name plus `.shared`.

use std::fmt;

use coload_cohort_schema::Mode;
use coload_device::MigProfile;

use crate::error::ClusterError;

/// A GPU resource key the NVIDIA device plugin advertises.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceKey(String);

/// The forms a key may take, for messages.
const FORMS: &str = "nvidia.com/gpu, nvidia.com/gpu.shared, or nvidia.com/mig-<G>g.<M>gb \
                     (e.g. nvidia.com/mig-1g.18gb; nvidia.com/mig-1g.10gb.me for the profile \
                     1g.10gb+me; with .shared when MIG devices are time-sliced and renamed)";

/// Whole GPUs, or MIG devices under the single strategy.
const GPU: &str = "nvidia.com/gpu";
/// The prefix of a MIG resource under the mixed strategy.
const MIG_PREFIX: &str = "nvidia.com/mig-";
/// What time-slicing's `renameByDefault` appends (the plugin's `DefaultSharedResourceNameSuffix`).
const SHARED: &str = ".shared";

/// GPU-instance profile attributes as go-nvlib writes them, and as they read in a resource name
/// (`+` replaced by `.`). Longest first: `.me.all` also ends in neither `.me` nor `.all` alone,
/// but is tried before `.me` all the same.
const ATTRIBUTES: [(&str, &str); 4] = [
    ("+me.all", ".me.all"),
    ("+me", ".me"),
    ("+gfx", ".gfx"),
    ("-me", "-me"),
];

/// GPU-instance compute slices go-nvlib knows (`GPU_INSTANCE_PROFILE_<n>_SLICE`).
const GPU_SLICES: [u32; 7] = [1, 2, 3, 4, 6, 7, 8];

impl ResourceKey {
    /// Parses a key: `nvidia.com/gpu`, `nvidia.com/gpu.shared`, or a MIG resource of the mixed
    /// strategy as the plugin names it (`nvidia.com/mig-1g.18gb`, `nvidia.com/mig-1g.10gb.me`),
    /// optionally `.shared`.
    pub fn parse(text: &str) -> Result<Self, ClusterError> {
        let ok = match text {
            "nvidia.com/gpu" | "nvidia.com/gpu.shared" => true,
            _ => text
                .strip_prefix(MIG_PREFIX)
                .map(|p| p.strip_suffix(SHARED).unwrap_or(p))
                .and_then(profile_of_resource)
                .is_some(),
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

    /// The key the device plugin advertises for MIG devices of `profile` under the mixed
    /// strategy: `1g.10gb+me` gives `nvidia.com/mig-1g.10gb.me`. (Under the single strategy
    /// every MIG device is `nvidia.com/gpu`.) A compute-instance profile (`1c.3g.40gb`) has no
    /// resource of its own and is refused.
    pub fn for_mig_profile(profile: &str) -> Result<Self, ClusterError> {
        let parsed = MigProfile::parse(profile).ok_or_else(|| {
            ClusterError::Usage(format!(
                "`{}` is no MIG profile (e.g. 1g.18gb, 3g.40gb, 1g.10gb+me)",
                profile.escape_debug()
            ))
        })?;
        if parsed.is_partial_compute_instance() {
            return Err(ClusterError::Usage(format!(
                "MIG profile `{profile}` is a compute instance of a `{}` GPU instance; the \
                 device plugin advertises no resource for such profiles (it skips those whose \
                 compute slices differ from the GPU instance's): request the GPU instance's",
                parsed.gpu_instance_profile()
            )));
        }
        let key = format!(
            "{MIG_PREFIX}{}",
            parsed.gpu_instance_profile().replace('+', ".")
        );
        ResourceKey::parse(&key)
    }

    /// The key's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A MIG resource of the mixed strategy (`nvidia.com/mig-...`).
    #[must_use]
    pub fn is_mig(&self) -> bool {
        self.0.starts_with(MIG_PREFIX)
    }

    /// A shared resource renamed by time-slicing (`... .shared`).
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.0.ends_with(SHARED)
    }

    /// The resource the key renames, without `.shared` (the name the node's labels use).
    #[must_use]
    pub fn unshared(&self) -> &str {
        self.0.strip_suffix(SHARED).unwrap_or(&self.0)
    }

    /// The GPU-instance profile of a mixed-strategy MIG key, in NVIDIA's spelling
    /// (`nvidia.com/mig-1g.10gb.me` gives `1g.10gb+me`); `None` for `nvidia.com/gpu`.
    #[must_use]
    pub fn mig_profile(&self) -> Option<MigProfile> {
        self.unshared()
            .strip_prefix(MIG_PREFIX)
            .and_then(profile_of_resource)
    }

    /// Checks the key against the policy's mode: a MIG slice for a mode that is not MIG is a
    /// different experiment than the plan says, and so is a renamed shared GPU for `exclusive`
    /// or a time-sliced device for `mig` (two workers could get one device).
    pub fn check_mode(&self, mode: Mode) -> Result<(), String> {
        match mode {
            Mode::Exclusive | Mode::Timeslice | Mode::Mps if self.is_mig() => Err(format!(
                "resource `{self}` is a MIG slice, but the policy's mode is {mode}; use mode mig \
                 (or mig-timeslice), or nvidia.com/gpu"
            )),
            Mode::Exclusive if self.is_shared() => Err(format!(
                "resource `{self}` is a shared GPU, but the policy's mode is exclusive"
            )),
            Mode::Mig if self.is_shared() => Err(format!(
                "resource `{self}` is a time-sliced device: two workers of a mig cohort could \
                 get one device; request the MIG resource itself (nvidia.com/mig-<profile> under \
                 the mixed strategy, nvidia.com/gpu under single), or use mode mig-timeslice"
            )),
            _ => Ok(()),
        }
    }
}

/// The GPU-instance profile a mixed-strategy resource name stands for (`1g.10gb.me` ->
/// `1g.10gb+me`), when the plugin could have written the name: `<G>g.<GB>gb` with G a
/// GPU-instance slice count, GB without leading zeros, and at most one known attribute.
fn profile_of_resource(name: &str) -> Option<MigProfile> {
    let (base, attribute) = ATTRIBUTES
        .iter()
        .find_map(|(nvidia, in_name)| name.strip_suffix(in_name).map(|b| (b, *nvidia)))
        .unwrap_or((name, ""));
    let (g, gb) = base.split_once("g.")?;
    let gb = gb.strip_suffix("gb")?;
    let digits = |s: &str| {
        !s.is_empty()
            && s.len() <= 4
            && s.bytes().all(|b| b.is_ascii_digit())
            && !s.starts_with('0')
    };
    if !digits(g) || !digits(gb) || !GPU_SLICES.iter().any(|n| n.to_string() == g) {
        return None;
    }
    let profile = MigProfile::parse(&format!("{base}{attribute}"))?;
    (profile.compute_slices.is_none()).then_some(profile)
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `nvidia.com/gpu`, for the single strategy's MIG devices and whole GPUs.
#[must_use]
pub(crate) fn is_gpu_key(key: &ResourceKey) -> bool {
    key.unshared() == GPU
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
            // `+` becomes `.` (rm.go: strings.ReplaceAll("mig-"+p.String(), "+", ".")).
            "nvidia.com/mig-1g.10gb.me",
            "nvidia.com/mig-1g.10gb.me.shared",
            "nvidia.com/mig-1g.18gb.me.all",
            "nvidia.com/mig-1g.23gb.gfx",
            "nvidia.com/mig-1g.23gb-me",
            "nvidia.com/mig-4g.24gb",
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
            // The plugin's names never hold a `+`, nor a compute-instance profile.
            "nvidia.com/mig-1g.10gb+me",
            "nvidia.com/mig-1c.3g.40gb",
            "nvidia.com/mig-1g.10gb.me.me",
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
    fn mig_profiles_become_the_plugins_names_and_back() {
        for (profile, key) in [
            ("1g.10gb", "nvidia.com/mig-1g.10gb"),
            ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
            ("1g.18gb+me.all", "nvidia.com/mig-1g.18gb.me.all"),
            ("2g.45gb+gfx", "nvidia.com/mig-2g.45gb.gfx"),
            ("1g.23gb-me", "nvidia.com/mig-1g.23gb-me"),
            ("7g.141gb", "nvidia.com/mig-7g.141gb"),
            // A compute instance that takes its whole GPU instance, written out.
            ("3c.3g.40gb", "nvidia.com/mig-3g.40gb"),
        ] {
            let k = ResourceKey::for_mig_profile(profile).unwrap();
            assert_eq!(k.as_str(), key, "{profile}");
            let back = k.mig_profile().unwrap().gpu_instance_profile();
            assert_eq!(
                back,
                MigProfile::parse(profile).unwrap().gpu_instance_profile()
            );
        }
        let shared = ResourceKey::parse("nvidia.com/mig-1g.10gb.me.shared").unwrap();
        assert_eq!(shared.unshared(), "nvidia.com/mig-1g.10gb.me");
        assert_eq!(
            shared.mig_profile().unwrap().gpu_instance_profile(),
            "1g.10gb+me"
        );
        assert_eq!(
            ResourceKey::parse("nvidia.com/gpu").unwrap().mig_profile(),
            None
        );
        let e = ResourceKey::for_mig_profile("1c.3g.40gb")
            .unwrap_err()
            .to_string();
        assert!(e.contains("advertises no resource"), "{e}");
        assert!(ResourceKey::for_mig_profile("1g").is_err());
    }

    #[test]
    fn keys_fit_their_mode() {
        let mig = ResourceKey::parse("nvidia.com/mig-1g.18gb").unwrap();
        let mig_shared = ResourceKey::parse("nvidia.com/mig-1g.18gb.shared").unwrap();
        let gpu = ResourceKey::parse("nvidia.com/gpu").unwrap();
        let shared = ResourceKey::parse("nvidia.com/gpu.shared").unwrap();
        assert!(mig.check_mode(Mode::Mig).is_ok());
        assert!(mig.check_mode(Mode::Timeslice).is_err());
        assert!(gpu.check_mode(Mode::Mig).is_ok());
        assert!(shared.check_mode(Mode::Mps).is_ok());
        assert!(shared.check_mode(Mode::Exclusive).is_err());
        assert!(shared.check_mode(Mode::Mig).is_err());
        // Single strategy with time-slicing renamed: MIG devices as nvidia.com/gpu.shared.
        assert!(shared.check_mode(Mode::MigTimeslice).is_ok());
        assert!(mig_shared.check_mode(Mode::MigTimeslice).is_ok());
        let e = mig_shared.check_mode(Mode::Mig).unwrap_err();
        assert!(
            e.contains("two workers of a mig cohort could get one device"),
            "{e}"
        );
    }
}
