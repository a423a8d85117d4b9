//! How a cluster gives a cohort its GPUs: through the NVIDIA device plugin's resource keys, or
//! through Kubernetes Dynamic Resource Allocation (a claim per cohort). A worker measures the
//! same way under both; what differs is who configures the sharing, and when: the plugin once
//! per node (a ConfigMap and a restart), a DRA claim per cohort.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The cluster's sharing backend for a policy: `bench-cohort render kubernetes --sharing`, and
/// `sharing = "dra"` on a plan's `[[policy]]`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// Each worker requests one unit of the device plugin's resource key (`nvidia.com/gpu`,
    /// `nvidia.com/gpu.shared`, `nvidia.com/mig-1g.18gb`); the node is set up for one mode.
    #[default]
    DevicePlugin,
    /// The cohort's Pods name one ResourceClaim that sets the sharing (NVIDIA's DRA driver,
    /// `resource.k8s.io/v1`), or a ResourceClaimTemplate for exclusive GPUs.
    Dra,
}

impl Sharing {
    /// The name in a plan and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::DevicePlugin => "device-plugin",
            Sharing::Dra => "dra",
        }
    }
}

impl fmt::Display for Sharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_plans_and_on_the_command_line_agree() {
        use clap::ValueEnum as _;
        for s in Sharing::value_variants() {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(
                s.to_possible_value().unwrap().get_name(),
                s.as_str(),
                "clap and serde spell {s:?} alike"
            );
        }
        assert!(serde_json::from_str::<Sharing>("\"DRA\"").is_err());
    }
}
