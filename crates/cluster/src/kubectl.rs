//! The few `kubectl` verbs the backend uses, through the cluster's own client (found on PATH or
//! given with `--kubectl`): `get node NAME -o json`, `create -f FILE`, `get job NAME -o json
//! --ignore-not-found`, `get pods -l ... -o json`, `get events --field-selector
//! involvedObject.name=JOB -o json`, `delete job NAME`, and for DRA cohorts
//! `delete resourceclaim|resourceclaimtemplate NAME --wait=true`. A stand-in that implements
//! exactly these runs the backend's end-to-end test (deploy/tests/stubs/kubectl-standin).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::error::ClusterError;

/// A `kubectl` and the namespace it works in.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// The program.
    pub program: PathBuf,
    /// `--namespace`, when given.
    pub namespace: Option<String>,
}

/// What a node offers: its labels and allocatable resources.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeOffer {
    /// The node's name.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable`, as Kubernetes writes the quantities.
    pub allocatable: BTreeMap<String, String>,
}

/// Where a Job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Not finished.
    Running,
    /// Every index succeeded.
    Complete,
    /// The Job failed; its condition's reason and message.
    Failed(String),
}

/// One Pod of a Job, as far as the backend cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// Its completion index (the replica).
    pub index: u32,
    /// Its name.
    pub name: String,
    /// The worker container's exit code, once terminated.
    pub exit_code: Option<i32>,
    /// When it terminated (RFC 3339; the API server keeps whole seconds), for ordering.
    pub finished_at: Option<String>,
    /// Whether the scheduler has placed it on a node (its `PodScheduled` condition is true).
    pub scheduled: bool,
    /// Why the scheduler could not place it, when it says so (its `PodScheduled` condition is
    /// false: `Unschedulable: 0/1 nodes are available: persistentvolumeclaim ... not found`).
    pub unschedulable: Option<String>,
}

/// An event about an object (`kubectl get events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `Normal` or `Warning`.
    pub kind: String,
    /// `FailedCreate`, `FailedScheduling`, `SuccessfulCreate`, ...
    pub reason: String,
    /// What happened, in the component's words.
    pub message: String,
}

impl Kubectl {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        if let Some(ns) = &self.namespace {
            c.arg("--namespace").arg(ns);
        }
        c
    }

    fn run(&self, args: &[&str]) -> Result<String, ClusterError> {
        self.run_with_stderr(args).map(|(out, _)| out)
    }

    /// Runs `kubectl ARGS`; its stdout and its stderr (where kubectl prints the server's
    /// warnings even when the call succeeds).
    fn run_with_stderr(&self, args: &[&str]) -> Result<(String, String), ClusterError> {
        let verb = args
            .iter()
            .take_while(|a| !a.starts_with('-'))
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let output = self
            .command()
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| ClusterError::Kubectl {
                verb: verb.clone(),
                message: format!("cannot run {}: {e}", self.program.display()),
            })?;
        if !output.status.success() {
            return Err(ClusterError::Kubectl {
                verb,
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok((
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }

    fn json(&self, args: &[&str]) -> Result<Option<Value>, ClusterError> {
        let text = self.run(args)?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ClusterError::Kubectl {
                verb: args.join(" "),
                message: format!("its output is not JSON: {e}"),
            })
    }

    /// `kubectl get node NAME -o json`.
    pub fn node(&self, name: &str) -> Result<NodeOffer, ClusterError> {
        let v = self
            .json(&["get", "node", name, "-o", "json"])?
            .unwrap_or(Value::Null);
        Ok(NodeOffer::from_json(name, &v))
    }

    /// `kubectl create -f FILE`; returns what kubectl printed on stderr although it succeeded,
    /// one line each: the API server's warnings (`Warning: would violate PodSecurity ...`).
    pub fn create(&self, file: &Path) -> Result<Vec<String>, ClusterError> {
        let file = file.to_string_lossy();
        let (_, stderr) = self.run_with_stderr(&["create", "-f", &file])?;
        Ok(stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// The events about the object named `name` (the Job: the controller's `FailedCreate`).
    pub fn events(&self, name: &str) -> Result<Vec<Event>, ClusterError> {
        let selector = format!("involvedObject.name={name}");
        let v = self
            .json(&["get", "events", "--field-selector", &selector, "-o", "json"])?
            .unwrap_or(Value::Null);
        let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
        Ok(v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| Event {
                kind: text(e, "type"),
                reason: text(e, "reason"),
                message: text(e, "message"),
            })
            .collect())
    }

    /// The Job's state, `None` when there is no such Job.
    pub fn job(&self, name: &str) -> Result<Option<JobState>, ClusterError> {
        let Some(v) = self.json(&["get", "job", name, "-o", "json", "--ignore-not-found"])? else {
            return Ok(None);
        };
        let conditions = v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let is = |kind: &str| {
            conditions
                .iter()
                .find(|c| c["type"] == kind && c["status"] == "True")
        };
        Ok(Some(if let Some(c) = is("Failed") {
            JobState::Failed(format!(
                "{}: {}",
                c["reason"].as_str().unwrap_or("Failed"),
                c["message"].as_str().unwrap_or("")
            ))
        } else if is("Complete").is_some() {
            JobState::Complete
        } else {
            JobState::Running
        }))
    }

    /// The Job's Pods.
    pub fn pods(&self, job: &str) -> Result<Vec<PodState>, ClusterError> {
        let selector = format!("batch.kubernetes.io/job-name={job}");
        let v = self
            .json(&["get", "pods", "-l", &selector, "-o", "json"])?
            .unwrap_or(Value::Null);
        let mut out = Vec::new();
        for pod in v["items"].as_array().into_iter().flatten() {
            let index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| {
                    pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                });
            let Some(index) = index else { continue };
            let status = pod["status"]["containerStatuses"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == "worker"))
                .map(|c| &c["state"]["terminated"]);
            let condition = pod["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"));
            let unschedulable = condition.filter(|c| c["status"] == "False").map(|c| {
                format!(
                    "{}: {}",
                    c["reason"].as_str().unwrap_or("Unschedulable"),
                    c["message"].as_str().unwrap_or("")
                )
            });
            out.push(PodState {
                index,
                name: pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                exit_code: status
                    .and_then(|t| t["exitCode"].as_i64())
                    .and_then(|c| i32::try_from(c).ok()),
                finished_at: status.and_then(|t| t["finishedAt"].as_str().map(str::to_owned)),
                scheduled: condition.is_some_and(|c| c["status"] == "True")
                    || !pod["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .is_empty(),
                unschedulable,
            });
        }
        Ok(out)
    }

    /// `kubectl delete KIND NAME`, waiting until it is gone (a DRA claim is gone once the
    /// driver has released its devices, so the next cohort's claim finds the GPU free).
    pub fn delete_and_wait(&self, kind: &str, name: &str) -> Result<(), ClusterError> {
        self.run(&[
            "delete",
            kind,
            name,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=300s",
        ])
        .map(|_| ())
    }

    /// `kubectl delete job NAME` (its Pods go with it).
    pub fn delete_job(&self, name: &str) -> Result<(), ClusterError> {
        self.run(&["delete", "job", name, "--ignore-not-found", "--wait=false"])
            .map(|_| ())
    }
}

impl NodeOffer {
    /// The offer in a node object as `kubectl get node NAME -o json` prints it: its labels and
    /// allocatable resources (quantities kept as text).
    #[must_use]
    pub fn from_json(name: &str, node: &Value) -> NodeOffer {
        let strings = |v: &Value| -> BTreeMap<String, String> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                            (k.clone(), text)
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        NodeOffer {
            name: name.to_owned(),
            labels: strings(&node["metadata"]["labels"]),
            allocatable: strings(&node["status"]["allocatable"]),
        }
    }

    /// Units of `key` the node can allocate (0 when it advertises none).
    #[must_use]
    pub fn units(&self, key: &str) -> u64 {
        self.allocatable
            .get(key)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0)
    }

    /// Resource keys of MIG slices the node advertises.
    #[must_use]
    pub fn mig_keys(&self) -> Vec<&str> {
        self.allocatable
            .keys()
            .filter(|k| k.starts_with("nvidia.com/mig-"))
            .map(String::as_str)
            .collect()
    }

    /// MIG devices exposed as `nvidia.com/gpu` (the device plugin's single strategy).
    #[must_use]
    pub fn mig_single(&self) -> bool {
        self.labels
            .get("nvidia.com/mig.strategy")
            .is_some_and(|s| s == "single")
    }
}
