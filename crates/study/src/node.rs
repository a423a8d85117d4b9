//! What the node offers: its GPUs (and their MIG instances), whether MPS can be started, and so
//! which of a plan's cohorts can run here and on which GPUs.
//!
//! The GPUs and MIG instances come from `nvidia-smi -L`, which ships with the driver like
//! `nvidia-cuda-mps-control` and lists exactly what NVML enumerates (GPU index, name and UUID,
//! and under a GPU in MIG mode one line per MIG device). Reading its text keeps this binary free
//! of NVML and makes the rule testable with recorded output ([`Node::from_listing`]). A node
//! where `nvidia-smi` is missing or lists no GPU is a CPU node.
//!
//! The rules (docs/study.md):
//! - `exclusive` with one worker: one GPU (a lane). With N workers: N GPUs among the lanes, one
//!   per worker ("two real cards"), pinned with `--visible-devices`.
//! - `timeslice`: one GPU; all workers on it.
//! - `mps`: one GPU and `nvidia-cuda-mps-control` on PATH. One MPS cohort at a time on the host
//!   (see `mps.rs`: the daemon sees every GPU).
//! - `mig`: one MIG instance per worker, all on one GPU of the lanes; `mig-timeslice`: one MIG
//!   instance, shared.
//! - On a CPU node only `exclusive` solos and `timeslice` run (the mode is then a label: the
//!   workers share the CPU), with `--device cpu`.

use std::path::Path;
use std::process::Command;

use coload_cohort_schema::Mode;
use serde::Serialize;

use crate::plan::Job;

/// One GPU of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Gpu {
    /// Its index, as `CUDA_VISIBLE_DEVICES` takes it.
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) uuid: String,
    /// UUIDs of its MIG devices (empty when MIG is off or no instance exists).
    pub(crate) mig: Vec<String>,
}

/// What the node offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Node {
    pub(crate) gpus: Vec<Gpu>,
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
        Node::place(self, job, free)
    }
}

impl Node {
    /// Asks the machine: `nvidia-smi -L` and PATH.
    pub(crate) fn detect() -> Node {
        let listing = Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        Node::from_listing(&listing, on_path("nvidia-cuda-mps-control"))
    }

    /// Reads `nvidia-smi -L` output:
    /// `GPU 0: NVIDIA H200 (UUID: GPU-...)` per GPU, and under it
    /// `  MIG 1g.18gb     Device  0: (UUID: MIG-...)` per MIG device.
    pub(crate) fn from_listing(listing: &str, mps_control: bool) -> Node {
        let mut gpus: Vec<Gpu> = Vec::new();
        for line in listing.lines() {
            let t = line.trim();
            let uuid = t
                .rsplit_once("(UUID: ")
                .map(|(_, u)| u.trim_end_matches(')').trim().to_owned());
            if let (Some(rest), Some(uuid)) = (t.strip_prefix("GPU "), uuid.clone()) {
                let Some((index, name)) = rest.split_once(':') else {
                    continue;
                };
                let Ok(index) = index.trim().parse() else {
                    continue;
                };
                let name = name
                    .rsplit_once("(UUID:")
                    .map_or(name, |(n, _)| n)
                    .trim()
                    .to_owned();
                gpus.push(Gpu {
                    index,
                    name,
                    uuid,
                    mig: Vec::new(),
                });
            } else if let (true, Some(uuid), Some(gpu)) =
                (t.starts_with("MIG "), uuid, gpus.last_mut())
            {
                gpu.mig.push(uuid);
            }
        }
        Node { gpus, mps_control }
    }

    /// No GPU: the workers run on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        self.gpus.is_empty()
    }

    /// The GPUs to use as lanes: `wanted` (from the command line or the plan) if given, each
    /// checked against the node, else every GPU. `Err` names an index the node does not have.
    pub(crate) fn lanes(&self, wanted: Option<&[u32]>) -> Result<Vec<u32>, String> {
        let all: Vec<u32> = self.gpus.iter().map(|g| g.index).collect();
        let Some(wanted) = wanted else {
            return Ok(all);
        };
        if self.is_cpu() {
            return Ok(Vec::new());
        }
        for w in wanted {
            if !all.contains(w) {
                return Err(format!(
                    "GPU {w} is not on this node (nvidia-smi -L lists {all:?})"
                ));
            }
        }
        let mut out = wanted.to_vec();
        out.dedup();
        Ok(out)
    }

    /// Where `job` runs on this node with these `lanes`, or why it cannot.
    pub(crate) fn place(&self, job: &Job, lanes: &[u32]) -> Result<Placement, String> {
        let n = job.count as usize;
        if self.is_cpu() {
            if job.workers.split(',').any(|w| w.trim().starts_with("hog=")) {
                return Err(
                    "the hog takes device memory to test a GPU sharing mode; this node has none"
                        .into(),
                );
            }
            return match job.mode {
                Mode::Timeslice => Ok(Placement::cpu()),
                Mode::Exclusive if n == 1 => Ok(Placement::cpu()),
                Mode::Exclusive => Err(format!(
                    "exclusive with {n} workers needs {n} GPUs; this node has none"
                )),
                m => Err(format!("mode {m} needs a GPU; this node has none")),
            };
        }
        let first = lanes
            .first()
            .copied()
            .ok_or_else(|| "no GPU lanes".to_owned())?;
        let one = |gpu: u32, host_exclusive| Placement {
            gpus: vec![gpu],
            visible: Some(gpu.to_string()),
            per_worker: Vec::new(),
            host_exclusive,
        };
        match job.mode {
            Mode::Exclusive if n == 1 => Ok(one(first, false)),
            Mode::Exclusive => {
                if lanes.len() < n {
                    return Err(format!(
                        "exclusive with {n} workers needs {n} GPUs, one per worker; {} lane(s) \
                         here ({lanes:?})",
                        lanes.len()
                    ));
                }
                Ok(Placement {
                    gpus: lanes[..n].to_vec(),
                    visible: None,
                    per_worker: lanes[..n].iter().map(ToString::to_string).collect(),
                    host_exclusive: false,
                })
            }
            Mode::Timeslice => Ok(one(first, false)),
            Mode::Mps if self.mps_control => Ok(one(first, true)),
            Mode::Mps => Err("mode mps needs nvidia-cuda-mps-control on PATH; not found".into()),
            Mode::Mig | Mode::MigTimeslice => {
                let need = if job.mode == Mode::Mig { n } else { 1 };
                let gpu = self
                    .gpus
                    .iter()
                    .filter(|g| lanes.contains(&g.index))
                    .find(|g| g.mig.len() >= need)
                    .ok_or_else(|| {
                        format!(
                            "mode {} needs {need} MIG instance(s) on one GPU; nvidia-smi -L \
                             lists {} on the lanes (MIG is set up by the node's owner)",
                            job.mode,
                            self.gpus
                                .iter()
                                .filter(|g| lanes.contains(&g.index))
                                .map(|g| g.mig.len())
                                .sum::<usize>()
                        )
                    })?;
                let per_worker = if job.mode == Mode::Mig {
                    gpu.mig[..n].to_vec()
                } else {
                    vec![gpu.mig[0].clone(); n]
                };
                Ok(Placement {
                    gpus: vec![gpu.index],
                    visible: None,
                    per_worker,
                    host_exclusive: false,
                })
            }
        }
    }

    /// One line for people: `1 x NVIDIA H200 (GPU 0), MPS available`.
    pub(crate) fn describe(&self) -> String {
        if self.is_cpu() {
            return "no GPU (nvidia-smi lists none): CPU workers".to_owned();
        }
        let mut names: Vec<String> = Vec::new();
        for g in &self.gpus {
            let mig = if g.mig.is_empty() {
                String::new()
            } else {
                format!(", {} MIG instances", g.mig.len())
            };
            names.push(format!("GPU {}: {}{mig}", g.index, g.name));
        }
        format!(
            "{} GPU(s) ({}), MPS {}",
            self.gpus.len(),
            names.join("; "),
            if self.mps_control {
                "available"
            } else {
                "not available (no nvidia-cuda-mps-control)"
            }
        )
    }
}

impl Placement {
    fn cpu() -> Self {
        Placement {
            gpus: Vec::new(),
            visible: None,
            per_worker: Vec::new(),
            host_exclusive: false,
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
    /// An A100 in MIG mode with three instances.
    const MIG_A100: &str = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5b-cccc)\n  \
        MIG 3g.40gb     Device  0: (UUID: MIG-aaaa-0000)\n  \
        MIG 2g.20gb     Device  1: (UUID: MIG-aaaa-0001)\n  \
        MIG 1g.10gb     Device  2: (UUID: MIG-aaaa-0002)\n";

    fn job(mode: &str, workers: &str) -> Job {
        let plan = Plan::parse(
            "t",
            &format!(
                "[[policy]]\nname = \"p\"\nmode = \"{mode}\"\n{}[[cohort]]\nworkers = \"{workers}\"\n",
                // An MPS policy names its share (issue 12).
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

    #[test]
    fn reads_gpus_and_mig_devices() {
        let node = Node::from_listing(TWO_H200, true);
        assert_eq!(node.gpus.len(), 2);
        assert_eq!(node.gpus[1].name, "NVIDIA H200");
        assert_eq!(node.gpus[1].uuid, "GPU-9a8ed216-bbbb");
        let mig = Node::from_listing(MIG_A100, false);
        assert_eq!(
            mig.gpus[0].mig,
            ["MIG-aaaa-0000", "MIG-aaaa-0001", "MIG-aaaa-0002"]
        );
        assert!(Node::from_listing("", true).is_cpu());
        assert!(Node::from_listing("No devices were found\n", true).is_cpu());
    }

    #[test]
    fn exclusive_across_cards_needs_as_many_gpus_as_workers() {
        let two = Node::from_listing(TWO_H200, true);
        let p = two.place(&job("exclusive", "train=2"), &[0, 1]).unwrap();
        assert_eq!(p.per_worker, ["0", "1"]);
        assert_eq!(p.gpus, [0, 1]);
        assert_eq!(p.visible, None);
        let e = two.place(&job("exclusive", "train=2"), &[1]).unwrap_err();
        assert!(e.contains("needs 2 GPUs"), "{e}");
        let solo = two.place(&job("exclusive", "train=1"), &[1]).unwrap();
        assert_eq!(solo.visible.as_deref(), Some("1"));
    }

    #[test]
    fn mps_needs_its_control_program_and_holds_the_host() {
        let with = Node::from_listing(TWO_H200, true);
        let p = with.place(&job("mps", "train=4"), &[0, 1]).unwrap();
        assert!(p.host_exclusive);
        let without = Node::from_listing(TWO_H200, false);
        let e = without.place(&job("mps", "train=4"), &[0]).unwrap_err();
        assert!(e.contains("nvidia-cuda-mps-control"), "{e}");
    }

    #[test]
    fn mig_takes_one_instance_per_worker() {
        let node = Node::from_listing(MIG_A100, false);
        let p = node.place(&job("mig", "train=3"), &[0]).unwrap();
        assert_eq!(
            p.per_worker,
            ["MIG-aaaa-0000", "MIG-aaaa-0001", "MIG-aaaa-0002"]
        );
        let e = node.place(&job("mig", "train=4"), &[0]).unwrap_err();
        assert!(e.contains("needs 4 MIG instance(s)"), "{e}");
        let p = node.place(&job("mig-timeslice", "train=4"), &[0]).unwrap();
        assert_eq!(p.per_worker, vec!["MIG-aaaa-0000"; 4]);
        let e = Node::from_listing(TWO_H200, true)
            .place(&job("mig", "train=2"), &[0])
            .unwrap_err();
        assert!(e.contains("lists 0 on the lanes"), "{e}");
    }

    #[test]
    fn a_cpu_node_runs_solos_and_time_slicing_only() {
        let cpu = Node::from_listing("", true);
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
                .contains("needs a GPU")
        );
    }

    #[test]
    fn lanes_are_checked_against_the_node() {
        let two = Node::from_listing(TWO_H200, true);
        assert_eq!(two.lanes(None).unwrap(), [0, 1]);
        assert_eq!(two.lanes(Some(&[1])).unwrap(), [1]);
        assert!(
            two.lanes(Some(&[2]))
                .unwrap_err()
                .contains("GPU 2 is not on this node")
        );
    }
}
