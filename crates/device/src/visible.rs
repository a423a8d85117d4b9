//! The one resolver of visible-device lists: `CUDA_VISIBLE_DEVICES`-style text against a
//! [`Topology`].
//!
//! Every entry is one of ([`VisibleEntry`]):
//!
//! - an index (`3`): the GPU with that NVML index;
//! - a `GPU-` UUID or a prefix of one: the GPU it names, when exactly one GPU's UUID starts
//!   with it (CUDA refuses an ambiguous prefix, and so does this resolver);
//! - a `MIG-` UUID: that MIG device;
//! - the pre-R470 form `MIG-GPU-<uuid>/<gi>/<ci>`: the MIG device that is compute instance
//!   `<ci>` of GPU instance `<gi>` on that GPU.
//!
//! A GPU named by index or `GPU-` UUID stands for itself when MIG is off, and for its MIG devices
//! when MIG is on (none when MIG is on without instances: CUDA then sees nothing there).
//!
//! [`resolve`] is strict: the first entry that names nothing is a [`ResolveError`]. A launcher
//! or planner wants that. [`resolve_like_cuda`] does what the CUDA runtime does with the same
//! text: it stops at the first entry that names nothing and keeps what came before, saying
//! where it stopped; a worker describing what it got wants that.
//!
//! # Example
//!
//! ```
//! use coload_device::Topology;
//! use coload_device::visible::{ResolveError, resolve};
//!
//! let listing = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5d1c-0000)\n\
//!                GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-5d1c-1111)\n  \
//!                  MIG 3g.40gb     Device  0: (UUID: MIG-8a3f-0000)\n  \
//!                  MIG 1g.10gb     Device  1: (UUID: MIG-8a3f-0001)\n";
//! let node = Topology::from_listing(listing).unwrap();
//!
//! let devices = resolve(&node, "MIG-8a3f-0001,0").unwrap();
//! assert_eq!(devices[0].uuid(), "MIG-8a3f-0001");
//! assert_eq!(devices[0].gpu.uuid, "GPU-5d1c-1111");
//! assert_eq!(devices[1].uuid(), "GPU-5d1c-0000");
//! // GPU 1 is in MIG mode: naming it gives its MIG devices.
//! assert_eq!(resolve(&node, "GPU-5d1c-1").unwrap().len(), 2);
//! // `GPU-5d1c` starts both UUIDs.
//! assert!(matches!(
//!     resolve(&node, "GPU-5d1c"),
//!     Err(ResolveError::AmbiguousPrefix { .. })
//! ));
//! ```

use crate::nvml::{GpuFacts, MigFacts, NvmlTarget};
use crate::topology::{Topology, TopologyGpu, parse_legacy_mig_uuid};

/// One entry of a visible-device list, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VisibleEntry {
    /// A GPU by NVML index.
    Index(u32),
    /// A `GPU-` UUID or a prefix of one.
    GpuUuid(String),
    /// A `MIG-` UUID.
    MigUuid(String),
    /// `MIG-GPU-<uuid>/<gi>/<ci>` (drivers before R470).
    LegacyMig {
        /// The parent GPU's UUID.
        gpu_uuid: String,
        /// The GPU instance id.
        gpu_instance_id: u32,
        /// The compute instance id.
        compute_instance_id: u32,
    },
}

impl VisibleEntry {
    /// Parses one entry (surrounding blanks ignored).
    pub fn parse(entry: &str) -> Result<Self, ResolveError> {
        let entry = entry.trim();
        if let Ok(index) = entry.parse::<u32>() {
            return Ok(VisibleEntry::Index(index));
        }
        if let Some((gpu_uuid, gpu_instance_id, compute_instance_id)) = parse_legacy_mig_uuid(entry)
        {
            return Ok(VisibleEntry::LegacyMig {
                gpu_uuid,
                gpu_instance_id,
                compute_instance_id,
            });
        }
        if entry.starts_with("MIG-GPU-") {
            return Err(ResolveError::Malformed {
                entry: entry.to_owned(),
            });
        }
        if entry.len() > "MIG-".len() && entry.starts_with("MIG-") {
            return Ok(VisibleEntry::MigUuid(entry.to_owned()));
        }
        if entry.starts_with("GPU-") {
            return Ok(VisibleEntry::GpuUuid(entry.to_owned()));
        }
        Err(ResolveError::Malformed {
            entry: entry.to_owned(),
        })
    }
}

/// Why an entry resolves to nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Neither an index, nor a `GPU-` / `MIG-` UUID, nor `MIG-GPU-<uuid>/<gi>/<ci>`.
    #[error("visible device `{entry}` is no index, GPU- or MIG- UUID, or MIG-GPU-<uuid>/<gi>/<ci>")]
    Malformed {
        /// The entry.
        entry: String,
    },
    /// A `GPU-` prefix that starts several GPUs' UUIDs.
    #[error(
        "visible device `{entry}` starts the UUIDs of {} GPUs ({}); CUDA takes a UUID prefix only \
         when it is unique, so give more of the UUID",
        matches.len(),
        matches.join(", ")
    )]
    AmbiguousPrefix {
        /// The entry.
        entry: String,
        /// The UUIDs it starts.
        matches: Vec<String>,
    },
    /// The entry is well formed but names nothing on this node.
    #[error("visible device `{entry}` names no device of this node ({why})")]
    Unknown {
        /// The entry.
        entry: String,
        /// What was looked for.
        why: String,
    },
}

/// One device a visible-device list resolved to: a whole GPU, or one MIG device of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedDevice<'t> {
    /// The physical GPU (the MIG device's parent).
    pub gpu: &'t GpuFacts,
    /// The MIG device, when it is one.
    pub mig: Option<&'t MigFacts>,
    /// Whether it entered the list by position (an index, or every GPU of the node), not by a
    /// UUID: CUDA's order may then differ from NVML's.
    pub by_position: bool,
}

impl<'t> ResolvedDevice<'t> {
    /// The device's UUID (`MIG-...` for a MIG device, else `GPU-...`).
    #[must_use]
    pub fn uuid(&self) -> &'t str {
        self.mig.map_or(&self.gpu.uuid, |m| &m.uuid)
    }

    /// The NVML address of the device.
    #[must_use]
    pub fn target(&self) -> NvmlTarget {
        NvmlTarget {
            gpu_index: self.gpu.index,
            mig_index: self.mig.map(|m| m.index),
        }
    }
}

/// What [`resolve_like_cuda`] found: the devices before the first entry that names nothing,
/// and that entry's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution<'t> {
    /// The devices, in CUDA ordinal order.
    pub devices: Vec<ResolvedDevice<'t>>,
    /// Why the list stopped early, when it did (CUDA ignores that entry and all after it).
    pub stopped: Option<ResolveError>,
}

/// The devices a whole GPU offers: itself, or its MIG devices when MIG is on.
fn expand(gpu: &TopologyGpu, by_position: bool) -> Vec<ResolvedDevice<'_>> {
    if gpu.facts.mig_mode == Some(true) {
        gpu.migs
            .iter()
            .map(|m| ResolvedDevice {
                gpu: &gpu.facts,
                mig: Some(m),
                by_position,
            })
            .collect()
    } else {
        vec![ResolvedDevice {
            gpu: &gpu.facts,
            mig: None,
            by_position,
        }]
    }
}

/// Every device of the node, GPU by GPU in NVML order: what CUDA sees without
/// `CUDA_VISIBLE_DEVICES`.
#[must_use]
pub fn all_devices(topology: &Topology) -> Vec<ResolvedDevice<'_>> {
    topology.gpus.iter().flat_map(|g| expand(g, true)).collect()
}

/// The devices one entry names.
pub fn resolve_entry<'t>(
    topology: &'t Topology,
    entry: &str,
) -> Result<Vec<ResolvedDevice<'t>>, ResolveError> {
    let unknown = |why: String| ResolveError::Unknown {
        entry: entry.trim().to_owned(),
        why,
    };
    match VisibleEntry::parse(entry)? {
        VisibleEntry::Index(index) => {
            topology.gpu(index).map(|g| expand(g, true)).ok_or_else(|| {
                unknown(format!(
                    "no GPU has index {index}; the node has {}",
                    topology.gpus.len()
                ))
            })
        }
        VisibleEntry::GpuUuid(prefix) => {
            let hits: Vec<&TopologyGpu> = topology
                .gpus
                .iter()
                .filter(|g| g.facts.uuid.starts_with(&prefix))
                .collect();
            match hits.as_slice() {
                [one] => Ok(expand(one, false)),
                [] => Err(unknown("no GPU UUID starts with it".to_owned())),
                many => Err(ResolveError::AmbiguousPrefix {
                    entry: prefix.clone(),
                    matches: many.iter().map(|g| g.facts.uuid.clone()).collect(),
                }),
            }
        }
        VisibleEntry::MigUuid(uuid) => topology
            .gpus
            .iter()
            .find_map(|g| {
                g.migs
                    .iter()
                    .find(|m| m.uuid == uuid)
                    .map(|m| ResolvedDevice {
                        gpu: &g.facts,
                        mig: Some(m),
                        by_position: false,
                    })
            })
            .map(|d| vec![d])
            .ok_or_else(|| unknown("no MIG device has that UUID".to_owned())),
        VisibleEntry::LegacyMig {
            gpu_uuid,
            gpu_instance_id,
            compute_instance_id,
        } => {
            let gpu = topology
                .gpus
                .iter()
                .find(|g| g.facts.uuid == gpu_uuid)
                .ok_or_else(|| unknown(format!("no GPU has UUID {gpu_uuid}")))?;
            // The listing of an old driver names MIG devices this way, so the UUID itself may
            // match; otherwise the ids NVML gave.
            gpu.migs
                .iter()
                .find(|m| {
                    m.uuid == entry.trim()
                        || (m.gpu_instance_id == Some(gpu_instance_id)
                            && m.compute_instance_id == Some(compute_instance_id))
                })
                .map(|m| {
                    vec![ResolvedDevice {
                        gpu: &gpu.facts,
                        mig: Some(m),
                        by_position: false,
                    }]
                })
                .ok_or_else(|| {
                    unknown(format!(
                        "GPU {gpu_uuid} has no compute instance {compute_instance_id} of GPU \
                         instance {gpu_instance_id} (or its MIG devices' ids are unknown)"
                    ))
                })
        }
    }
}

fn entries(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// Resolves a whole list strictly: every entry must name something. An empty list names no
/// device (as `CUDA_VISIBLE_DEVICES=` hides every GPU).
pub fn resolve<'t>(
    topology: &'t Topology,
    list: &str,
) -> Result<Vec<ResolvedDevice<'t>>, ResolveError> {
    let mut out = Vec::new();
    for entry in entries(list) {
        out.extend(resolve_entry(topology, entry)?);
    }
    Ok(out)
}

/// Resolves a list as the CUDA runtime reads `CUDA_VISIBLE_DEVICES`: entries in order, stopping
/// at the first that names nothing.
#[must_use]
pub fn resolve_like_cuda<'t>(topology: &'t Topology, list: &str) -> Resolution<'t> {
    let mut devices = Vec::new();
    for entry in entries(list) {
        match resolve_entry(topology, entry) {
            Ok(found) => devices.extend(found),
            Err(e) => {
                return Resolution {
                    devices,
                    stopped: Some(e),
                };
            }
        }
    }
    Resolution {
        devices,
        stopped: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeNvml;

    fn node() -> Topology {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa-1111", "NVIDIA H100 80GB HBM3")
            .with_gpu("GPU-aaaa-2222", "NVIDIA H100 80GB HBM3")
            .with_mig_instance("1c.3g.40gb", "MIG-c0", 2, 0)
            .with_mig_instance("2c.3g.40gb", "MIG-c1", 2, 1)
            .with_gpu("GPU-bbbb-3333", "NVIDIA H100 80GB HBM3")
            .with_mig_enabled();
        Topology::from_nvml(&nvml).unwrap()
    }

    fn uuids(devices: &[ResolvedDevice<'_>]) -> Vec<String> {
        devices.iter().map(|d| d.uuid().to_owned()).collect()
    }

    #[test]
    fn entries_parse_into_their_kinds() {
        assert_eq!(VisibleEntry::parse(" 3 "), Ok(VisibleEntry::Index(3)));
        assert_eq!(
            VisibleEntry::parse("GPU-ab"),
            Ok(VisibleEntry::GpuUuid("GPU-ab".into()))
        );
        assert_eq!(
            VisibleEntry::parse("MIG-ab"),
            Ok(VisibleEntry::MigUuid("MIG-ab".into()))
        );
        assert_eq!(
            VisibleEntry::parse("MIG-GPU-ab/3/1"),
            Ok(VisibleEntry::LegacyMig {
                gpu_uuid: "GPU-ab".into(),
                gpu_instance_id: 3,
                compute_instance_id: 1
            })
        );
        for bad in ["-1", "cuda:0", "MIG-", "MIG-GPU-ab/3", "gpu-ab", "all"] {
            assert!(
                matches!(
                    VisibleEntry::parse(bad),
                    Err(ResolveError::Malformed { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn indices_uuids_and_prefixes_resolve() {
        let t = node();
        assert_eq!(uuids(&resolve(&t, "0").unwrap()), ["GPU-aaaa-1111"]);
        assert!(resolve(&t, "0").unwrap()[0].by_position);
        // A MIG-mode GPU stands for its MIG devices.
        assert_eq!(uuids(&resolve(&t, "1").unwrap()), ["MIG-c0", "MIG-c1"]);
        assert_eq!(
            uuids(&resolve(&t, "GPU-aaaa-2").unwrap()),
            ["MIG-c0", "MIG-c1"]
        );
        let d = resolve(&t, "MIG-c1,GPU-aaaa-1").unwrap();
        assert_eq!(uuids(&d), ["MIG-c1", "GPU-aaaa-1111"]);
        assert!(!d[0].by_position && !d[1].by_position);
        assert_eq!(
            d[0].target(),
            NvmlTarget {
                gpu_index: 1,
                mig_index: Some(1)
            }
        );
        // MIG on without instances: nothing, and no error.
        assert_eq!(resolve(&t, "2").unwrap(), []);
        assert_eq!(resolve(&t, "").unwrap(), []);
        assert_eq!(all_devices(&t).len(), 3);
    }

    #[test]
    fn an_ambiguous_prefix_is_refused_naming_the_matches() {
        let e = resolve(&node(), "GPU-aaaa").unwrap_err();
        assert_eq!(
            e,
            ResolveError::AmbiguousPrefix {
                entry: "GPU-aaaa".into(),
                matches: vec!["GPU-aaaa-1111".into(), "GPU-aaaa-2222".into()]
            }
        );
        assert!(
            e.to_string().contains("GPU-aaaa-1111, GPU-aaaa-2222"),
            "{e}"
        );
    }

    #[test]
    fn legacy_mig_names_resolve_by_instance_ids() {
        let t = node();
        let d = resolve(&t, "MIG-GPU-aaaa-2222/2/1").unwrap();
        assert_eq!(uuids(&d), ["MIG-c1"]);
        let e = resolve(&t, "MIG-GPU-aaaa-2222/2/5").unwrap_err();
        assert!(matches!(e, ResolveError::Unknown { .. }), "{e}");
        // The prefix form is not accepted for the parent of a legacy name.
        assert!(resolve(&t, "MIG-GPU-aaaa/2/1").is_err());
    }

    #[test]
    fn strict_and_cuda_like_differ_only_in_what_follows_a_bad_entry() {
        let t = node();
        for bad in ["7", "GPU-cccc", "MIG-none", "nonsense"] {
            let list = format!("0,{bad},MIG-c0");
            assert!(resolve(&t, &list).is_err(), "{list}");
            let r = resolve_like_cuda(&t, &list);
            assert_eq!(uuids(&r.devices), ["GPU-aaaa-1111"], "{list}");
            assert!(r.stopped.unwrap().to_string().contains(bad), "{list}");
        }
        let r = resolve_like_cuda(&t, "MIG-c0, 0");
        assert_eq!(uuids(&r.devices), ["MIG-c0", "GPU-aaaa-1111"]);
        assert_eq!(r.stopped, None);
    }
}
