//! What the node offers: its GPUs, their MIG mode and MIG devices, whether MPS can be started,
//! and so which of a plan's cohorts can run here and on which devices.
//!
//! The node is a [`coload_device::Topology`]: from NVML where the driver's library loads (MIG
//! mode, MIG devices with their GPU instance, compute instance and profile), else from
//! `nvidia-smi -L` with `nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv`, or
//! from those two saved files (`--node-listing`, `--node-query`) to plan for another node with
//! `--dry-run`. A node with no GPU is a CPU node.
//!
//! The rules (docs/study.md; MIG as NVIDIA documents it):
//! - A GPU in MIG mode is seen by CUDA only through its MIG devices (MIG User Guide, "CUDA Device
//!   Enumeration"), and NVIDIA's device plugin offers no MPS there: it never hosts an
//!   `exclusive`, `timeslice` or `mps` cohort. A GPU in MIG mode with no MIG device offers
//!   nothing at all.
//! - `exclusive` with one worker: one GPU (a lane). With N workers: N GPUs among the lanes, one
//!   per worker ("two real cards"), pinned with `--visible-devices`.
//! - `timeslice`: one GPU; all workers on it.
//! - `mps`: one GPU and `nvidia-cuda-mps-control` on PATH. One MPS cohort at a time on the host
//!   (the daemon sees every GPU).
//! - `mig`: one GPU instance per worker, all of one profile (the policy's `mig_profile` where it
//!   names one) and all on one parent GPU: rates from slices of different sizes, or from
//!   compute instances sharing one GPU instance's memory, are not one shape. `mig-timeslice`:
//!   one MIG device, shared by every worker.
//! - On a CPU node only `exclusive` solos and `timeslice` run (the mode is then a label: the
//!   workers share the CPU), with `--device cpu`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use coload_cohort_schema::Mode;
use coload_device::{MigFacts, MigProfile, Topology, TopologyGpu};

use crate::plan::Job;

/// What the node offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) topology: Topology,
    /// Whether each GPU's MIG mode is known (NVML, or the query csv); from `nvidia-smi -L` alone
    /// a GPU in MIG mode without instances looks like a plain GPU.
    pub(crate) mig_mode_known: bool,
    /// `nvidia-cuda-mps-control` found on PATH.
    pub(crate) mps_control: bool,
}

/// Where a cohort runs: the lanes (GPU indices) it holds while it runs, and how its workers are
/// placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Lanes held: GPU indices on this node (empty on a CPU node), or a cluster backend's
    /// node numbers.
    pub gpus: Vec<u32>,
    /// `CUDA_VISIBLE_DEVICES` for the whole cohort (one GPU), if any.
    pub visible: Option<String>,
    /// `--visible-devices`, one entry per worker, if the workers are pinned one by one.
    pub per_worker: Vec<String>,
    /// The host allows one such cohort at a time (MPS).
    pub host_exclusive: bool,
    /// The MIG profile of the devices, for a MIG cohort.
    pub mig_profile: Option<String>,
}

/// " (GPU 0, GPU 1)" for lanes 0 and 1; nothing for none.
fn gpu_words(lanes: &[u32]) -> String {
    if lanes.is_empty() {
        return String::new();
    }
    let gpus: Vec<String> = lanes.iter().map(|l| format!("GPU {l}")).collect();
    format!(" ({})", gpus.join(", "))
}

/// Why the node does not offer a cohort (the index's `not_offered` reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOffered {
    /// A CPU node: what needs a GPU.
    #[error("{0}; this node has none")]
    NoGpu(String),
    /// Every lane is in MIG mode.
    #[error(
        "mode {mode} needs a GPU that is not in MIG mode (on a MIG-enabled GPU CUDA sees only MIG \
         devices, and the device plugin offers no MPS there); MIG mode is enabled on {gpus}"
    )]
    AllMig {
        /// The mode.
        mode: Mode,
        /// The lanes, in words.
        gpus: String,
    },
    /// Not enough GPUs out of MIG mode.
    #[error(
        "exclusive with {need} workers needs {need} GPUs, one per worker; this node has {have} out \
         of MIG mode{}",
        gpu_words(.lanes)
    )]
    TooFewGpus {
        /// Workers.
        need: usize,
        /// GPUs that could host them.
        have: usize,
        /// The GPUs out of MIG mode among the lanes.
        lanes: Vec<u32>,
    },
    /// No MPS control program.
    #[error("mode mps needs nvidia-cuda-mps-control on PATH; not found")]
    NoMps,
    /// MIG: the lanes offer no fitting MIG devices.
    #[error("mode {mode} needs {need}; {found}")]
    Mig {
        /// The mode.
        mode: Mode,
        /// What it needs, in words.
        need: String,
        /// What the lanes offer, in words.
        found: String,
    },
    /// No lanes.
    #[error("no GPU lanes")]
    NoLanes,
}

/// What the lanes are and where a cohort fits: this node's GPUs ([`Node`]), or a
/// cluster's nodes.
pub trait Offer {
    /// No GPU: one lane, the CPU, one cohort at a time.
    fn is_cpu(&self) -> bool;
    /// Where `job` runs on the `free` lanes, or why it cannot.
    fn place(&self, job: &Job, free: &[u32]) -> Result<Placement, String>;
}

impl Offer for Node {
    fn is_cpu(&self) -> bool {
        Node::is_cpu(self)
    }

    fn place(&self, job: &Job, free: &[u32]) -> Result<Placement, String> {
        Node::place(self, job, free).map_err(|e| e.to_string())
    }
}

impl Node {
    /// Asks the machine: NVML where it loads, else `nvidia-smi`; and PATH for MPS.
    pub(crate) fn detect() -> Node {
        let mps_control = on_path("nvidia-cuda-mps-control");
        if let Ok(nvml) = coload_device::RealNvml::open()
            && let Ok(topology) = Topology::from_nvml(&nvml)
        {
            return Node {
                topology,
                mig_mode_known: true,
                mps_control,
            };
        }
        let run = |args: &[&str]| {
            Command::new("nvidia-smi")
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let listing = run(&["-L"]).unwrap_or_default();
        let query = run(&["--query-gpu=index,uuid,mig.mode.current", "--format=csv"]);
        Node::from_listing(&listing, query.as_deref(), mps_control).unwrap_or_else(|_| Node {
            topology: Topology::default(),
            mig_mode_known: false,
            mps_control,
        })
    }

    /// Reads `nvidia-smi -L` output, with the `--query-gpu=index,uuid,mig.mode.current` csv
    /// where given (without it, MIG mode is known only for GPUs that list MIG devices).
    pub(crate) fn from_listing(
        listing: &str,
        query_csv: Option<&str>,
        mps_control: bool,
    ) -> Result<Node, coload_device::ListingError> {
        // What nvidia-smi prints on a machine without a GPU.
        let listing = if listing.trim() == "No devices were found" {
            ""
        } else {
            listing
        };
        let mut topology = Topology::from_listing(listing)?;
        if let Some(csv) = query_csv {
            topology = topology.with_query_csv(csv)?;
        }
        Ok(Node {
            topology,
            mig_mode_known: query_csv.is_some(),
            mps_control,
        })
    }

    fn gpus(&self) -> &[TopologyGpu] {
        &self.topology.gpus
    }

    /// No GPU: the workers run on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        self.gpus().is_empty()
    }

    /// The GPUs to use as lanes: `wanted` (from the command line or the plan) if given, each
    /// checked against the node, else every GPU. `Err` names an index the node does not have.
    pub(crate) fn lanes(&self, wanted: Option<&[u32]>) -> Result<Vec<u32>, String> {
        let all: Vec<u32> = self.gpus().iter().map(|g| g.facts.index).collect();
        let Some(wanted) = wanted else {
            return Ok(all);
        };
        if self.is_cpu() {
            return Ok(Vec::new());
        }
        for w in wanted {
            if !all.contains(w) {
                return Err(format!("GPU {w} is not on this node (it lists {all:?})"));
            }
        }
        let mut out = wanted.to_vec();
        out.dedup();
        Ok(out)
    }

    /// Where `job` runs on this node with these `lanes`, or why it cannot.
    pub(crate) fn place(&self, job: &Job, lanes: &[u32]) -> Result<Placement, NotOffered> {
        let n = job.count as usize;
        if self.is_cpu() {
            if job.workers.split(',').any(|w| w.trim().starts_with("hog=")) {
                return Err(NotOffered::NoGpu(
                    "the hog takes device memory to test a GPU sharing mode".into(),
                ));
            }
            return match job.mode {
                Mode::Timeslice => Ok(Placement::cpu()),
                Mode::Exclusive if n == 1 => Ok(Placement::cpu()),
                Mode::Exclusive => Err(NotOffered::NoGpu(format!(
                    "exclusive with {n} workers needs {n} GPUs"
                ))),
                m => Err(NotOffered::NoGpu(format!("mode {m} needs a GPU"))),
            };
        }
        if lanes.is_empty() {
            return Err(NotOffered::NoLanes);
        }
        let on_lanes: Vec<&TopologyGpu> = self
            .gpus()
            .iter()
            .filter(|g| lanes.contains(&g.facts.index))
            .collect();
        match job.mode {
            Mode::Exclusive | Mode::Timeslice | Mode::Mps => self.place_whole(job, &on_lanes, n),
            Mode::Mig | Mode::MigTimeslice => place_mig(job, &on_lanes, n),
        }
    }

    /// A cohort on whole GPUs: never one in MIG mode.
    fn place_whole(
        &self,
        job: &Job,
        on_lanes: &[&TopologyGpu],
        n: usize,
    ) -> Result<Placement, NotOffered> {
        let whole: Vec<u32> = on_lanes
            .iter()
            .filter(|g| g.facts.mig_mode != Some(true))
            .map(|g| g.facts.index)
            .collect();
        let Some(&first) = whole.first() else {
            return Err(NotOffered::AllMig {
                mode: job.mode,
                gpus: on_lanes
                    .iter()
                    .map(|g| format!("GPU {}", g.facts.index))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let one = |gpu: u32, host_exclusive| Placement {
            gpus: vec![gpu],
            visible: Some(gpu.to_string()),
            per_worker: Vec::new(),
            host_exclusive,
            mig_profile: None,
        };
        match job.mode {
            Mode::Exclusive if n == 1 => Ok(one(first, false)),
            Mode::Exclusive => {
                if whole.len() < n {
                    return Err(NotOffered::TooFewGpus {
                        need: n,
                        have: whole.len(),
                        lanes: whole.clone(),
                    });
                }
                Ok(Placement {
                    gpus: whole[..n].to_vec(),
                    visible: None,
                    per_worker: whole[..n].iter().map(ToString::to_string).collect(),
                    host_exclusive: false,
                    mig_profile: None,
                })
            }
            Mode::Mps if !self.mps_control => Err(NotOffered::NoMps),
            Mode::Mps => Ok(one(first, true)),
            _ => Ok(one(first, false)),
        }
    }

    /// One line for people: `2 GPU(s) (GPU 0: NVIDIA H200; ...), MPS available`.
    pub(crate) fn describe(&self) -> String {
        if self.is_cpu() {
            return "no GPU (nvidia-smi lists none): CPU workers".to_owned();
        }
        let mut names: Vec<String> = Vec::new();
        for g in self.gpus() {
            let mig = match (g.facts.mig_mode, g.migs.len()) {
                (Some(true), 0) => {
                    ", MIG mode enabled with no MIG device: offers nothing".to_owned()
                }
                (Some(true), k) => format!(
                    ", MIG mode enabled: {k} MIG devices ({})",
                    profiles(&g.migs)
                ),
                (_, 0) if !self.mig_mode_known => String::new(),
                (_, 0) => ", MIG mode disabled".to_owned(),
                (_, k) => format!(", {k} MIG devices ({})", profiles(&g.migs)),
            };
            names.push(format!("GPU {}: {}{mig}", g.facts.index, g.facts.name));
        }
        format!(
            "{} GPU(s) ({}), MPS {}",
            self.gpus().len(),
            names.join("; "),
            if self.mps_control {
                "available"
            } else {
                "not available (no nvidia-cuda-mps-control)"
            }
        )
    }
}

/// The GPU-instance profile of a MIG device (`1c.3g.40gb` is a compute instance of a
/// `3g.40gb` GPU instance), from its profile or its name.
fn gi_profile(m: &MigFacts) -> Option<String> {
    m.profile
        .as_deref()
        .or(m.name.as_deref().and_then(|n| n.rsplit(' ').next()))
        .and_then(MigProfile::parse)
        .map(|p| p.gpu_instance_profile())
}

/// How a MIG device's GPU instance is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InstanceKey {
    /// Its GPU instance id.
    Id(u32),
    /// A whole GPU instance without a recorded id: the device is the instance.
    Device(u32),
    /// A compute instance without a recorded id: the run of compute instances it is listed in.
    Run(u32),
}

/// `7 x 1g.18gb` or `1 x 3g.40gb, 1 x 2g.20gb`.
fn profiles(migs: &[MigFacts]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for m in migs {
        *counts
            .entry(gi_profile(m).unwrap_or_else(|| "unknown profile".into()))
            .or_default() += 1;
    }
    counts
        .iter()
        .map(|(p, k)| format!("{k} x {p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A MIG cohort: `mig` on N distinct GPU instances of one profile of one parent GPU (the
/// policy's `mig_profile` where named); `mig-timeslice` on one MIG device shared by every worker.
fn place_mig(job: &Job, on_lanes: &[&TopologyGpu], n: usize) -> Result<Placement, NotOffered> {
    let wanted = job.mig_profile.as_deref();
    let need_instances = if job.mode == Mode::Mig { n } else { 1 };
    for g in on_lanes.iter().filter(|g| g.facts.mig_mode == Some(true)) {
        // Per GPU-instance profile: one MIG device per GPU instance (compute instances of one
        // GPU instance share its memory and bandwidth: they are not separate slices).
        let mut by_profile: BTreeMap<String, Vec<&MigFacts>> = BTreeMap::new();
        let mut seen_instances: Vec<(String, InstanceKey)> = Vec::new();
        let mut run_start: Option<(String, u32)> = None;
        for m in &g.migs {
            let Some(profile) = gi_profile(m) else {
                continue;
            };
            let partial = m
                .profile
                .as_deref()
                .or(m.name.as_deref().and_then(|n| n.rsplit(' ').next()))
                .and_then(MigProfile::parse)
                .is_some_and(|p| p.is_partial_compute_instance());
            // Which GPU instance the device belongs to: its id where recorded (NVML, or the
            // pre-R470 name); else a whole GPU instance is its own, and a run of compute
            // instances of one profile (`1c.3g.40gb` three times) is taken as one GPU instance,
            // the way `nvidia-smi -L` lists the compute instances of one instance together.
            let key = match (m.gpu_instance_id, partial) {
                (Some(id), _) => InstanceKey::Id(id),
                (None, false) => {
                    run_start = None;
                    InstanceKey::Device(m.index)
                }
                (None, true) => {
                    let start = match &run_start {
                        Some((p, start)) if *p == profile => *start,
                        _ => m.index,
                    };
                    run_start = Some((profile.clone(), start));
                    InstanceKey::Run(start)
                }
            };
            if wanted.is_some_and(|w| w != profile) {
                continue;
            }
            if seen_instances
                .iter()
                .any(|(p, k)| *p == profile && *k == key)
            {
                continue;
            }
            seen_instances.push((profile.clone(), key));
            by_profile.entry(profile).or_default().push(m);
        }
        // The profile with the most instances that fits (fewest leftovers is not a goal: a
        // node's owner partitions for the cohorts they mean to run).
        if let Some((profile, devices)) = by_profile
            .into_iter()
            .filter(|(_, d)| d.len() >= need_instances)
            .max_by_key(|(_, d)| d.len())
        {
            let per_worker = if job.mode == Mode::Mig {
                devices[..n].iter().map(|m| m.uuid.clone()).collect()
            } else {
                vec![devices[0].uuid.clone(); n]
            };
            return Ok(Placement {
                gpus: vec![g.facts.index],
                visible: None,
                per_worker,
                host_exclusive: false,
                mig_profile: Some(profile),
            });
        }
    }
    let need = match (job.mode, wanted) {
        (Mode::Mig, Some(p)) if n == 1 => format!("one GPU instance of profile {p}"),
        (Mode::Mig, Some(p)) => format!("{n} GPU instances of profile {p} on one GPU"),
        (Mode::Mig, None) if n == 1 => "one GPU instance".to_owned(),
        (Mode::Mig, None) => format!("{n} GPU instances of one profile on one GPU"),
        (_, Some(p)) => format!("one MIG device of profile {p}"),
        (_, None) => "one MIG device".to_owned(),
    };
    let found = on_lanes
        .iter()
        .map(|g| match (g.facts.mig_mode, g.migs.len()) {
            (Some(true), 0) => {
                format!("GPU {}: MIG mode enabled with no MIG device", g.facts.index)
            }
            (Some(true), _) => format!("GPU {}: {}", g.facts.index, profiles(&g.migs)),
            (Some(false), _) => format!("GPU {}: MIG mode disabled", g.facts.index),
            (None, _) => format!("GPU {}: no MIG device listed", g.facts.index),
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(NotOffered::Mig {
        mode: job.mode,
        need,
        found: format!("{found} (MIG is set up by the node's owner)"),
    })
}

impl Placement {
    fn cpu() -> Self {
        Placement {
            gpus: Vec::new(),
            visible: None,
            per_worker: Vec::new(),
            host_exclusive: false,
            mig_profile: None,
        }
    }

    /// The lanes as people read them: `0`, `0,1`, or `cpu`.
    #[must_use]
    pub fn label(&self) -> String {
        if self.gpus.is_empty() {
            "cpu".to_owned()
        } else {
            self.gpus
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(program)))
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    /// `nvidia-smi -L` on the 2-GPU H200 kind (UUIDs shortened).
    const TWO_H200: &str = "GPU 0: NVIDIA H200 (UUID: GPU-70a5ded9-aaaa)\n\
                            GPU 1: NVIDIA H200 (UUID: GPU-9a8ed216-bbbb)\n";

    fn fixture(name: &str) -> Node {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/mig")
            .join(name);
        let listing = std::fs::read_to_string(dir.join("nvidia-smi-L.txt")).unwrap();
        let query = std::fs::read_to_string(dir.join("query-gpu.csv")).unwrap();
        Node::from_listing(&listing, Some(&query), true).unwrap()
    }

    fn node(listing: &str, mps: bool) -> Node {
        Node::from_listing(listing, None, mps).unwrap()
    }

    fn job_with(mode: &str, workers: &str, policy_extra: &str) -> Job {
        let plan = Plan::parse(
            "t",
            &format!(
                "[[policy]]\nname = \"p\"\nmode = \"{mode}\"\n{policy_extra}{}[[cohort]]\nworkers = \"{workers}\"\n",
                // An MPS policy names its share.
                if mode == "mps" {
                    "flags = { mps_unlimited = true }\n"
                } else {
                    ""
                }
            ),
        )
        .unwrap();
        plan.jobs(false).remove(0)
    }

    fn job(mode: &str, workers: &str) -> Job {
        job_with(mode, workers, "")
    }

    #[test]
    fn reads_gpus_and_mig_devices() {
        let two = node(TWO_H200, true);
        assert_eq!(two.topology.gpus.len(), 2);
        assert_eq!(two.topology.gpus[1].facts.name, "NVIDIA H200");
        assert_eq!(two.topology.gpus[1].facts.uuid, "GPU-9a8ed216-bbbb");
        let mig = fixture("h100-mixed-3g-2g-1g");
        assert_eq!(mig.topology.gpus[0].migs.len(), 4);
        assert!(node("", true).is_cpu());
        assert!(node("No devices were found\n", true).is_cpu());
        assert!(
            mig.describe().contains("MIG mode enabled: 4 MIG devices"),
            "{}",
            mig.describe()
        );
    }

    #[test]
    fn exclusive_across_cards_needs_as_many_gpus_as_workers() {
        let two = node(TWO_H200, true);
        let p = two.place(&job("exclusive", "train=2"), &[0, 1]).unwrap();
        assert_eq!(p.per_worker, ["0", "1"]);
        assert_eq!(p.gpus, [0, 1]);
        assert_eq!(p.visible, None);
        let e = two.place(&job("exclusive", "train=2"), &[1]).unwrap_err();
        assert!(e.to_string().contains("needs 2 GPUs"), "{e}");
        let solo = two.place(&job("exclusive", "train=1"), &[1]).unwrap();
        assert_eq!(solo.visible.as_deref(), Some("1"));
    }

    #[test]
    fn mps_needs_its_control_program_and_holds_the_host() {
        let with = node(TWO_H200, true);
        let p = with.place(&job("mps", "train=4"), &[0, 1]).unwrap();
        assert!(p.host_exclusive);
        let without = node(TWO_H200, false);
        let e = without.place(&job("mps", "train=4"), &[0]).unwrap_err();
        assert!(e.to_string().contains("nvidia-cuda-mps-control"), "{e}");
    }

    /// On a MIG-enabled GPU CUDA sees only MIG devices; whole-GPU cohorts are not
    /// offered there, and a MIG-enabled GPU without instances offers nothing.
    #[test]
    fn a_mig_enabled_gpu_hosts_no_whole_gpu_cohort() {
        let h200 = fixture("h200-7x1g18gb");
        for mode in ["exclusive", "timeslice", "mps"] {
            let e = h200.place(&job(mode, "train=1"), &[0]).unwrap_err();
            assert!(
                e.to_string().contains("MIG mode is enabled on GPU 0"),
                "{mode}: {e}"
            );
        }
        // One GPU in MIG mode without instances, one not: whole-GPU cohorts go to GPU 1 only,
        // MIG cohorts nowhere.
        let mixed = fixture("h100-mig-no-instances");
        let p = mixed.place(&job("timeslice", "train=2"), &[0, 1]).unwrap();
        assert_eq!(p.visible.as_deref(), Some("1"));
        let e = mixed
            .place(&job("exclusive", "train=2"), &[0, 1])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("this node has 1 out of MIG mode (GPU 1)"),
            "{e}"
        );
        let e = mixed
            .place(&job("mig-timeslice", "train=1"), &[0, 1])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("GPU 0: MIG mode enabled with no MIG device"),
            "{e}"
        );
        assert!(
            mixed.describe().contains("offers nothing"),
            "{}",
            mixed.describe()
        );
    }

    /// A `mig` cohort gets N GPU instances of one profile, never a mix of sizes.
    #[test]
    fn mig_takes_instances_of_one_profile() {
        let a100 = fixture("a100-80gb-7x1g");
        let p = a100.place(&job("mig", "train=7"), &[0]).unwrap();
        assert_eq!(p.per_worker.len(), 7);
        assert_eq!(p.mig_profile.as_deref(), Some("1g.10gb"));
        let mixed = fixture("h100-mixed-3g-2g-1g");
        // 3g + 2g + 1g + 1g+me: no profile has three instances.
        let e = mixed.place(&job("mig", "train=3"), &[0]).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 GPU instances of one profile on one GPU"),
            "{e}"
        );
        // 1g.10gb and 1g.10gb+me are two profiles (the second holds the media engines): two
        // workers there would not be one shape either.
        let e = mixed.place(&job("mig", "train=2"), &[0]).unwrap_err();
        assert!(e.to_string().contains("1 x 1g.10gb, 1 x 1g.10gb+me"), "{e}");
        // The policy names the profile.
        let p = mixed
            .place(
                &job_with("mig", "train=1", "mig_profile = \"3g.40gb\"\n"),
                &[0],
            )
            .unwrap();
        assert_eq!(p.mig_profile.as_deref(), Some("3g.40gb"));
        assert_eq!(p.per_worker, ["MIG-23615e98-bd2b-c849-7268-1f509acb8c76"]);
        let e = mixed
            .place(
                &job_with("mig", "train=1", "mig_profile = \"7g.80gb\"\n"),
                &[0],
            )
            .unwrap_err();
        assert!(e.to_string().contains("of profile 7g.80gb"), "{e}");
    }

    /// Compute instances of one GPU instance share its memory and bandwidth; they
    /// are not separate slices for `mig`.
    #[test]
    fn compute_instances_of_one_gpu_instance_count_once() {
        let split = fixture("h100-ci-split-1c3g");
        // Three 1c.3g.40gb of one GPU instance, and one whole 3g.40gb: two GPU instances.
        let p = split.place(&job("mig", "train=2"), &[0]).unwrap();
        assert_eq!(p.per_worker.len(), 2);
        assert_ne!(p.per_worker[0], p.per_worker[1]);
        let e = split.place(&job("mig", "train=3"), &[0]).unwrap_err();
        assert!(e.to_string().contains("3 GPU instances"), "{e}");
        // Pre-R470 names carry the instance ids.
        let legacy = fixture("a100-40gb-pre-r470");
        assert_eq!(
            legacy
                .place(&job("mig", "train=2"), &[0])
                .unwrap()
                .per_worker
                .len(),
            2
        );
    }

    /// `mig-timeslice` of one worker is a valid shape (the solo row).
    #[test]
    fn mig_timeslice_shares_one_device_and_takes_one_worker() {
        let h200 = fixture("h200-7x1g18gb");
        let p = h200.place(&job("mig-timeslice", "train=4"), &[0]).unwrap();
        assert_eq!(p.per_worker.len(), 4);
        assert!(p.per_worker.iter().all(|d| *d == p.per_worker[0]));
        let p = h200.place(&job("mig-timeslice", "train=1"), &[0]).unwrap();
        assert_eq!(p.per_worker.len(), 1);
        let e = node(TWO_H200, true)
            .place(&job("mig", "train=2"), &[0])
            .unwrap_err();
        assert!(e.to_string().contains("no MIG device listed"), "{e}");
    }

    /// The article plan on a saved 8-GPU MIG node places only MIG cohorts,
    /// each on instances of one profile of one parent GPU; everything else is not offered,
    /// with the reason.
    #[test]
    fn the_article_plan_on_an_eight_gpu_mig_node() {
        let node = fixture("h200-node-8x7x1g");
        let lanes = node.lanes(None).unwrap();
        assert_eq!(lanes.len(), 8);
        let plan = Plan::load("article").unwrap();
        let (mut placed, mut refused) = (0, 0);
        for job in plan.jobs(false) {
            match node.place(&job, &lanes) {
                Ok(p) => {
                    placed += 1;
                    assert!(
                        matches!(job.mode, Mode::Mig | Mode::MigTimeslice),
                        "{}",
                        job.name
                    );
                    assert_eq!(p.gpus.len(), 1, "{}", job.name);
                    assert_eq!(p.mig_profile.as_deref(), Some("1g.18gb"), "{}", job.name);
                    assert_eq!(p.per_worker.len(), job.count as usize);
                    let gpu = &node.topology.gpus[p.gpus[0] as usize];
                    for d in &p.per_worker {
                        assert!(
                            gpu.migs.iter().any(|m| &m.uuid == d),
                            "{d} not on GPU {}",
                            p.gpus[0]
                        );
                    }
                }
                Err(why) => {
                    refused += 1;
                    assert!(
                        !matches!(job.mode, Mode::Mig | Mode::MigTimeslice),
                        "{}: {why}",
                        job.name
                    );
                    assert!(
                        why.to_string().contains("MIG mode is enabled"),
                        "{}: {why}",
                        job.name
                    );
                }
            }
        }
        assert!(
            placed > 0 && refused > 0,
            "{placed} placed, {refused} refused"
        );
    }

    /// The MIG checklist plan: on a MIG node every MIG cohort is placed, and the whole-GPU ones
    /// are named as not offered.
    #[test]
    fn the_mig_check_plan_places_every_mig_cohort() {
        for fixture_name in ["h200-7x1g18gb", "a100-80gb-7x1g", "h200-node-8x7x1g"] {
            let node = fixture(fixture_name);
            let lanes = node.lanes(None).unwrap();
            for job in Plan::load("mig-check").unwrap().jobs(false) {
                let placed = node.place(&job, &lanes);
                match job.mode {
                    Mode::Mig | Mode::MigTimeslice => {
                        assert!(placed.is_ok(), "{fixture_name}: {}: {placed:?}", job.name);
                    }
                    _ => assert!(placed.is_err(), "{fixture_name}: {}", job.name),
                }
            }
        }
    }

    #[test]
    fn a_cpu_node_runs_solos_and_time_slicing_only() {
        let cpu = node("", true);
        assert_eq!(
            cpu.place(&job("timeslice", "train=2"), &[])
                .unwrap()
                .label(),
            "cpu"
        );
        assert!(cpu.place(&job("exclusive", "train=1"), &[]).is_ok());
        assert!(cpu.place(&job("exclusive", "train=2"), &[]).is_err());
        assert!(
            cpu.place(&job("mps", "train=2"), &[])
                .unwrap_err()
                .to_string()
                .contains("needs a GPU")
        );
    }

    #[test]
    fn lanes_are_checked_against_the_node() {
        let two = node(TWO_H200, true);
        assert_eq!(two.lanes(None).unwrap(), [0, 1]);
        assert_eq!(two.lanes(Some(&[1])).unwrap(), [1]);
        assert!(
            two.lanes(Some(&[2]))
                .unwrap_err()
                .contains("GPU 2 is not on this node")
        );
    }
}
