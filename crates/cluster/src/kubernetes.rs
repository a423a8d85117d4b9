//! One cohort as a Kubernetes Indexed Job, rendered from its [`CohortSpec`].
//!
//! An Indexed Job has one Pod template for all its Pods, and each Pod learns only its index
//! (`JOB_COMPLETION_INDEX`). The flags every worker gets are the container's `args`, rendered by
//! [`coload_spec::to_argv`] from the spec's [`coload_spec::WorkerFlags`], so a flag added to the
//! spec reaches the Pods with no edit here. What differs by index (the workload, and the serve
//! flags, which only serve workers take) is chosen by a short `sh -c` `case` over the index that
//! appends those words to the arguments and `exec`s `bench-worker`, whose exit code is then the
//! container's. We chose the `case` over one environment variable per index (a Pod cannot pick
//! an index's variable without a shell anyway) because the `case` keeps every word a worker gets
//! visible in the manifest, quoted once, and needs no splitting of a variable's value.
//!
//! The rest is the article's protocol on a cluster: `completions = parallelism = N` (every
//! worker at once: the cohort meets at a barrier), the node pinned through
//! `kubernetes.io/hostname`, one unit of the policy's resource key per Pod, the
//! `gpu-benchmark-sync` claim at `/mnt/benchmark-sync`, `backoffLimit: 0` and a
//! `podFailurePolicy` that fails the whole Job on the first worker that exits non-zero (which
//! also stops its peers instead of leaving them at the barrier), and a fresh experiment id.

use std::fmt::Write as _;
use std::time::Duration;

use coload_cohort_schema::{Workload, exit, text};
use coload_spec::{CohortSpec, Mix, to_argv};
use serde_json::{Value, json};

use crate::error::ClusterError;
use crate::resource::ResourceKey;
use crate::stage::{CLAIM, RESULTS_DIR, SYNC_MOUNT, Staged, stage};
use crate::yaml;

/// The image the manifests run when none is given.
pub const DEFAULT_IMAGE: &str = "coload/bench-worker:0.1.0";

/// The longest Job name: its Pods are named `<job>-<index>-<5 chars>` and their hostname
/// `<job>-<index>` must be a DNS label (63 characters).
const MAX_JOB_NAME: usize = 52;

/// The uid and gid the Pods run as: the `coload` user of deploy/docker/Dockerfile.
pub const IMAGE_UID: u32 = 10001;

/// CPUs each worker's Pod requests (and is limited to).
pub const CPUS_PER_WORKER: &str = "2";
/// Host memory each worker's Pod requests (and is limited to).
pub const MEMORY_PER_WORKER: &str = "4Gi";

/// What a Job may take beyond its cohort's deadline (`WorkerFlags::deadline`): scheduling the
/// Pods, pulling the image, loading libtorch and the warmup.
pub(crate) const POD_START: Duration = Duration::from_secs(870);

/// Where a cohort runs on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The node's `kubernetes.io/hostname`.
    pub node: String,
    /// What each worker requests.
    pub resource: ResourceKey,
    /// The worker image.
    pub image: String,
    /// The namespace of the Job and the claim (`None`: kubectl's current one).
    pub namespace: Option<String>,
}

impl Site {
    /// Checks the node, image and namespace as Kubernetes will.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if !is_dns_subdomain(&self.node) {
            return Err(ClusterError::Usage(format!(
                "node `{}` is not a valid node name (lowercase letters, digits, '-' and '.', at \
                 most 253 characters)",
                self.node.escape_debug()
            )));
        }
        let image_ok = !self.image.is_empty()
            && self.image.len() <= 512
            && self.image.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@')
            })
            && self.image.starts_with(|c: char| c.is_ascii_alphanumeric());
        if !image_ok {
            return Err(ClusterError::Usage(format!(
                "image `{}` is not a valid image reference",
                self.image.escape_debug()
            )));
        }
        if let Some(ns) = &self.namespace
            && !is_dns_label(ns)
        {
            return Err(ClusterError::Usage(format!(
                "namespace `{}` is not a valid namespace name (a DNS label: lowercase letters, \
                 digits and '-', at most 63 characters)",
                ns.escape_debug()
            )));
        }
        Ok(())
    }
}

/// A rendered cohort: the Job's name and experiment, its manifest as data and as YAML, and the
/// files the claim must hold before it runs.
#[derive(Debug, Clone)]
pub struct RenderedJob {
    /// `metadata.name`.
    pub name: String,
    /// The cohort's experiment id (the barrier's, and the results folder's name).
    pub experiment: String,
    /// The number of workers.
    pub count: u32,
    /// The manifest as data.
    pub manifest: Value,
    /// The manifest as YAML, with a header saying what it is.
    pub yaml: String,
    /// Files to copy onto the claim first ([`Staged::copy_to`]).
    pub staged: Vec<Staged>,
}

/// How the Pod template names a DRA claim ([`crate::dra`]), for [`render_job_with`].
#[derive(Debug, Clone)]
pub(crate) struct PodClaim {
    /// The claim's name in the Pod.
    pub(crate) name: &'static str,
    /// The Pod's `spec.resourceClaims` entry.
    pub(crate) pod_entry: Value,
    /// What the Pods request, for the Job's header.
    pub(crate) describe: String,
    /// Every Pod sees several devices; replica i runs on the i-th.
    pub(crate) device_per_index: bool,
}

/// A fresh experiment id for a cohort of `mix` under the spec's mode: `<mode>-<mix>-<UTC
/// stamp>-<8 hex>`, at most 63 characters (it is also a label value).
#[must_use]
pub fn fresh_experiment(spec: &CohortSpec, mix: &Mix) -> String {
    // The launcher's one rule: the same ids on a node and on a cluster.
    coload_launch::experiment_id(spec.flags.mode, mix)
}

/// The Job's name for an experiment: `coload-<experiment>` lowercased, cut to 52 characters
/// keeping the experiment's random end (so two cohorts never share a name).
#[must_use]
pub fn job_name(experiment: &str) -> String {
    let lower: String = experiment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let tail_len = 8.min(lower.len());
    let (head, tail) = lower.split_at(lower.len() - tail_len);
    let room = MAX_JOB_NAME - "coload-".len() - tail.len() - 1;
    let head: String = head.chars().take(room).collect();
    let head = head.trim_matches('-');
    if head.is_empty() {
        format!("coload-{tail}")
    } else {
        format!("coload-{head}-{tail}")
    }
}

/// Renders `spec` as one Indexed Job at `site` with `experiment` (from [`fresh_experiment`]),
/// each worker requesting one unit of the site's device-plugin resource key.
pub fn render_job(
    spec: &CohortSpec,
    site: &Site,
    experiment: &str,
) -> Result<RenderedJob, ClusterError> {
    render_job_with(spec, site, experiment, None)
}

/// [`render_job`], with the Pods naming a DRA claim instead of requesting the resource key
/// when `claim` is given ([`crate::dra`]).
#[expect(
    clippy::too_many_lines,
    reason = "the manifest is one literal, read top to bottom as kubectl will"
)]
pub(crate) fn render_job_with(
    spec: &CohortSpec,
    site: &Site,
    experiment: &str,
    claim: Option<&PodClaim>,
) -> Result<RenderedJob, ClusterError> {
    let mix = spec.validate()?;
    site.validate()?;
    site.resource
        .check_mode(spec.flags.mode)
        .map_err(ClusterError::Usage)?;
    coload_barrier_id(experiment)?;
    if spec.capacity.find_capacity {
        return Err(ClusterError::Usage(
            "--find-capacity runs one cohort per probe, each chosen from the last; a cluster \
             backend renders one cohort: render it at one --rate per probe instead"
                .into(),
        ));
    }
    refuse_hog(&mix)?;
    let (spec, staged) = stage(spec)?;
    let count = mix.len() as u32;
    let name = job_name(experiment);

    let args = common_args(&spec, experiment, count)?;
    let device_per_index = claim.is_some_and(|c| c.device_per_index);
    let script = index_script(&spec, &mix, experiment, &staged, device_per_index)?;
    let deadline_s = job_deadline(&spec).as_secs_f64().ceil() as u64;

    let labels = json!({
        "app.kubernetes.io/name": "coload",
        "coload/experiment": experiment,
    });
    let mut metadata = json!({ "name": name, "labels": labels });
    if let Some(ns) = &site.namespace {
        metadata["namespace"] = json!(ns);
    }
    let fail = |values: &[u8], operator: &str| {
        json!({
            "action": "FailJob",
            "onExitCodes": { "containerName": "worker", "operator": operator, "values": values }
        })
    };
    let resource = site.resource.as_str();
    let resources = match claim {
        None => json!({
            "requests": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER, resource: 1 },
            "limits": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER, resource: 1 },
        }),
        Some(c) => json!({
            "requests": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER },
            "limits": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER },
            "claims": [{ "name": c.name }],
        }),
    };
    let requesting = claim.map_or_else(|| site.resource.to_string(), |c| c.describe.clone());
    let mut manifest = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": spec.cluster.ttl_after_finished_s.get().ceil() as u64,
            "podFailurePolicy": { "rules": [
                fail(&[exit::INTERNAL, exit::INVALID_INPUT], "In"),
                fail(&[
                    exit::PREFLIGHT_FAILED, exit::BARRIER_TIMEOUT, exit::CONFIG_MISMATCH,
                    exit::LATE_START, exit::DUPLICATE_REPLICA, exit::BARRIER_ABORTED,
                ], "In"),
                fail(&[exit::WORKLOAD_FAILED, exit::ALLOCATION_MISMATCH, exit::WRITE_FAILED], "In"),
                fail(&[0], "NotIn"),
                { "action": "FailJob",
                  "onPodConditions": [{ "type": "DisruptionTarget", "status": "True" }] },
            ]},
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": { "kubernetes.io/hostname": site.node },
                    "tolerations": [
                        { "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" }
                    ],
                    // The `restricted` Pod Security Standard, so that a namespace enforcing it
                    // admits the Pods: a non-root numeric user the image has
                    // (deploy/docker/Dockerfile creates uid/gid IMAGE_UID), the runtime's
                    // seccomp profile, and (on the container) no privilege escalation and no
                    // capabilities.
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID,
                        "fsGroup": IMAGE_UID, "fsGroupChangePolicy": "OnRootMismatch",
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "containers": [{
                        "name": "worker",
                        "image": site.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/bin/sh", "-c", script, "bench-worker"],
                        "args": args,
                        "env": [
                            field_env("NODE_NAME", "spec.nodeName"),
                            field_env("POD_NAME", "metadata.name"),
                            field_env("POD_UID", "metadata.uid"),
                            // A container sees every core of the node, but its limit allows
                            // CPUS_PER_WORKER: libtorch sizes its intra-op pool from
                            // OMP_NUM_THREADS, and a passive wait sleeps instead of spinning on
                            // a core a peer needs (as bench-cohort does on one node).
                            { "name": "OMP_NUM_THREADS", "value": CPUS_PER_WORKER },
                            { "name": "MKL_NUM_THREADS", "value": CPUS_PER_WORKER },
                            { "name": "OMP_WAIT_POLICY", "value": "PASSIVE" },
                        ],
                        "resources": resources,
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": { "drop": ["ALL"] },
                        },
                        "volumeMounts": [{ "name": "benchmark-sync", "mountPath": SYNC_MOUNT }],
                    }],
                    "volumes": [{
                        "name": "benchmark-sync",
                        "persistentVolumeClaim": { "claimName": CLAIM },
                    }],
                },
            },
        },
    });
    if let Some(c) = claim {
        manifest["spec"]["template"]["spec"]["resourceClaims"] = json!([c.pod_entry]);
    }
    let mut header = format!(
        "coload cohort {experiment}: {count} worker(s) ({}), mode {}, on node {} requesting {}.\n\
         Rendered by `bench-cohort render kubernetes` from the cohort spec: do not edit the flags\n\
         here, render again. Pod i is replica i (JOB_COMPLETION_INDEX); its results go to\n\
         {SYNC_MOUNT}/{RESULTS_DIR}/{experiment}/worker-<i>/ on the claim {CLAIM}.\n\
         The first worker that exits non-zero fails the Job (podFailurePolicy; exit codes in\n\
         crates/cohort-schema/src/exit.rs).",
        mix.label(),
        spec.flags.mode,
        site.node,
        requesting
    );
    for s in &staged {
        let _ = write!(
            header,
            "\nBefore creating it, copy {} onto the claim as {} (SHA-256 {}; the Pod checks it).",
            text::escaped(&s.local.display().to_string()),
            s.in_claim,
            s.sha256
        );
    }
    let yaml = yaml::document(&header, &manifest);
    Ok(RenderedJob {
        name,
        experiment: experiment.to_owned(),
        count,
        manifest,
        yaml,
        staged,
    })
}

/// A hog cohort is refused on a cluster. On a node, `bench-cohort` starts the hog first and the
/// other workers only once it holds its memory (`hold.json`). The waiting could be done in the
/// Pods' script, but where the hog runs cannot: the device plugin hands each Pod a device of its
/// own choosing, so under exclusive or MIG the hog holds memory on another device than the
/// workers it should squeeze, and on a time-sliced node of several GPUs it may get a replica of
/// another GPU. A hog result from a cluster could then say `contained` for a sharing policy that
/// contains nothing; refusing says so instead.
pub(crate) fn refuse_hog(mix: &Mix) -> Result<(), ClusterError> {
    if mix.workloads().contains(&Workload::Hog) {
        return Err(ClusterError::Usage(format!(
            "cohort `{}` has a hog, which a cluster backend does not run: a Job starts every \
             Pod at once and the device plugin picks each Pod's device, so nothing makes the hog \
             take its memory first, nor on the device the other workers use; run hog cohorts \
             with `bench-cohort` on the node (docs/deploy.md)",
            mix.label()
        )));
    }
    Ok(())
}

/// The experiment id must be a safe folder name (the barrier's rule) and a label value.
fn coload_barrier_id(experiment: &str) -> Result<(), ClusterError> {
    let ok = !experiment.is_empty()
        && experiment.len() <= 63
        && experiment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && experiment.starts_with(|c: char| c.is_ascii_alphanumeric())
        && experiment.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ClusterError::Usage(format!(
            "experiment id `{}` must be 1-63 characters of [A-Za-z0-9._-], starting and ending \
             with a letter or digit (it is a folder name and a label value)",
            experiment.escape_debug()
        )))
    }
}

/// The Job's `activeDeadlineSeconds`: the cohort's deadline and [`POD_START`].
pub(crate) fn job_deadline(spec: &CohortSpec) -> Duration {
    spec.flags.deadline() + POD_START
}

fn field_env(name: &str, path: &str) -> Value {
    json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } })
}

/// The flags every worker gets, as text: the spec's worker flags, then the cohort's place
/// (experiment, count, the claim as the barrier's folder) and the log format.
pub(crate) fn common_args(
    spec: &CohortSpec,
    experiment: &str,
    count: u32,
) -> Result<Vec<String>, ClusterError> {
    let mut args = to_argv(&spec.flags)?;
    args.extend([
        "--experiment".to_owned(),
        experiment.to_owned(),
        "--count".to_owned(),
        count.to_string(),
        "--sync-dir".to_owned(),
        SYNC_MOUNT.to_owned(),
        "--log-format".to_owned(),
        "json".to_owned(),
    ]);
    Ok(args)
}

/// What replica `workload` adds: its workload, and the serve flags for a serve or serve-llm
/// worker (each its own: `ServeFlags::for_workload`).
pub(crate) fn per_replica_args(
    spec: &CohortSpec,
    workload: Workload,
) -> Result<Vec<String>, ClusterError> {
    let mut args = vec!["--workload".to_owned(), workload.to_string()];
    if let Some(serve) = spec.serve.for_workload(workload) {
        args.extend(to_argv(&serve)?);
    }
    Ok(args)
}

/// `'text'` for `sh`, with `'` written as `'\''`.
pub(crate) fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The commands that check each staged file's SHA-256 on the claim before the worker starts.
pub(crate) fn sha_checks(staged: &[Staged]) -> String {
    let mut out = String::new();
    for s in staged {
        let path = s.in_pod();
        let _ = writeln!(
            out,
            "printf '%s  %s\\n' {sha} {p} | sha256sum -c --status || {{ echo {msg} >&2; exit {code}; }}",
            sha = sh_quote(&s.sha256),
            p = sh_quote(&path),
            msg = sh_quote(&format!(
                "error: {path} is missing on the claim or is not the file rendered (SHA-256 {}); \
                 copy it there again (docs/deploy.md)",
                s.sha256
            )),
            code = exit::INVALID_INPUT,
        );
    }
    out
}

/// The container's script: pick this index's words, check the staged files, exec the worker.
fn index_script(
    spec: &CohortSpec,
    mix: &Mix,
    experiment: &str,
    staged: &[Staged],
    device_per_index: bool,
) -> Result<String, ClusterError> {
    // Indexes with the same words share one `case` branch (`1|2|3`).
    let mut branches: Vec<(Vec<usize>, String)> = Vec::new();
    for (i, w) in mix.workloads().iter().enumerate() {
        let mut args = per_replica_args(spec, *w)?;
        if device_per_index {
            // Every Pod sees the claim's devices; replica i takes the i-th.
            args.extend(["--device".to_owned(), format!("cuda:{i}")]);
        }
        let words = args
            .iter()
            .map(|a| sh_quote(a))
            .collect::<Vec<_>>()
            .join(" ");
        match branches.iter_mut().find(|(_, b)| *b == words) {
            Some((indexes, _)) => indexes.push(i),
            None => branches.push((vec![i], words)),
        }
    }
    let n = mix.len();
    let mut s = String::from("set -eu\ni=\"$JOB_COMPLETION_INDEX\"\ncase \"$i\" in\n");
    for (indexes, words) in &branches {
        let pattern = indexes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("|");
        let _ = writeln!(s, "  {pattern}) set -- \"$@\" {words} ;;");
    }
    let _ = writeln!(
        s,
        "  *) echo \"error: index $i is outside this cohort of {n} (0..{last})\" >&2; exit {code} ;;\nesac",
        last = n - 1,
        code = exit::INVALID_INPUT
    );
    s.push_str(&sha_checks(staged));
    let out = sh_quote(&format!("{SYNC_MOUNT}/{RESULTS_DIR}/{experiment}/worker-"));
    let _ = writeln!(
        s,
        "exec bench-worker \"$@\" --replica \"$i\" --out {out}\"$i\""
    );
    Ok(s)
}

/// A DNS label (RFC 1123): a namespace, a Job name.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS subdomain (RFC 1123): a node name.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Mode;
    use coload_spec::{FINISH_SLACK, Seconds};

    use super::*;

    fn site() -> Site {
        Site {
            node: "gpu-ts-1".into(),
            resource: ResourceKey::parse("nvidia.com/gpu.shared").unwrap(),
            image: DEFAULT_IMAGE.into(),
            namespace: Some("bench".into()),
        }
    }

    /// The Job's deadline is the spec's rule and the Pods' start: it follows the window, the
    /// lead and the join timeout as `WorkerFlags::deadline` does, and nothing else.
    #[test]
    fn the_jobs_deadline_follows_the_cohorts() {
        let mut spec = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        let deadline = |spec: &CohortSpec| {
            let exp = fresh_experiment(spec, &spec.mix().unwrap());
            let r = render_job(spec, &site(), &exp).unwrap();
            r.manifest["spec"]["activeDeadlineSeconds"]
                .as_u64()
                .unwrap()
        };
        for (window, lead, join) in [(45, 5, 600), (300, 12, 60), (7, 1, 1)] {
            spec.flags.window_s = Seconds::whole(window);
            spec.flags.start_lead_s = Seconds::whole(lead);
            spec.flags.join_timeout_s = Seconds::whole(join);
            let rule = spec.flags.deadline() + POD_START;
            assert_eq!(deadline(&spec), rule.as_secs(), "window {window}");
            assert_eq!(
                rule,
                Duration::from_secs(u64::from(window + lead + join))
                    + FINISH_SLACK.duration()
                    + POD_START
            );
        }
    }

    #[test]
    fn an_indexed_job_with_every_invariant() {
        let mut spec = CohortSpec::new(&Mix::parse("serve=1,train=2").unwrap(), Mode::Timeslice);
        spec.serve.rate = Some(250.0);
        let exp = fresh_experiment(&spec, &spec.mix().unwrap());
        let r = render_job(&spec, &site(), &exp).unwrap();
        let m = &r.manifest;
        assert_eq!(m["spec"]["completionMode"], "Indexed");
        assert_eq!(m["spec"]["completions"], 3);
        assert_eq!(m["spec"]["parallelism"], 3);
        assert_eq!(m["spec"]["backoffLimit"], 0);
        assert_eq!(m["metadata"]["namespace"], "bench");
        let pod = &m["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["kubernetes.io/hostname"], "gpu-ts-1");
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu.shared"], 1);
        assert_eq!(c["volumeMounts"][0]["mountPath"], "/mnt/benchmark-sync");
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "gpu-benchmark-sync"
        );
        let script = c["command"][2].as_str().unwrap();
        assert!(
            script.contains("  0) set -- \"$@\" '--workload' 'serve' "),
            "{script}"
        );
        assert!(script.contains("'--rate' '250'"), "{script}");
        assert!(
            script.contains("  1|2) set -- \"$@\" '--workload' 'train' ;;"),
            "{script}"
        );
        // The restricted Pod Security Standard, and a TTL.
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], IMAGE_UID);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(m["spec"]["ttlSecondsAfterFinished"], 86_400);
        let rules = m["spec"]["podFailurePolicy"]["rules"].as_array().unwrap();
        assert!(rules.iter().all(|r| r["action"] == "FailJob"));
        assert!(
            r.name.len() <= MAX_JOB_NAME && is_dns_label(&r.name),
            "{}",
            r.name
        );
        assert!(r.yaml.contains("completionMode: \"Indexed\""));
        // A fresh id every time.
        assert_ne!(exp, fresh_experiment(&spec, &spec.mix().unwrap()));
        assert!(exp.len() <= 63, "{exp}");
    }

    #[test]
    fn bad_sites_and_mismatched_keys_are_refused() {
        let spec = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        let mut s = site();
        s.node = "Bad_Node".into();
        assert!(
            render_job(&spec, &s, "e-1")
                .unwrap_err()
                .to_string()
                .contains("node")
        );
        let mut s = site();
        s.resource = ResourceKey::parse("nvidia.com/mig-1g.18gb").unwrap();
        assert!(
            render_job(&spec, &s, "e-1")
                .unwrap_err()
                .to_string()
                .contains("MIG slice")
        );
        assert!(render_job(&spec, &site(), "../x").is_err());
    }

    #[test]
    fn hog_cohorts_are_refused_naming_why() {
        let spec = CohortSpec::new(&Mix::parse("hog=1,train=2").unwrap(), Mode::Timeslice);
        let e = render_job(&spec, &site(), "e-1").unwrap_err().to_string();
        assert!(
            e.contains("has a hog, which a cluster backend does not run"),
            "{e}"
        );
        assert!(
            e.contains("the device plugin picks each Pod's device"),
            "{e}"
        );
    }

    #[test]
    fn the_ttl_is_the_spec_s_rounded_up() {
        let mut spec = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        spec.cluster.ttl_after_finished_s = coload_spec::Seconds::new(90.5).unwrap();
        let r = render_job(&spec, &site(), "e-1").unwrap();
        assert_eq!(r.manifest["spec"]["ttlSecondsAfterFinished"], 91);
    }

    #[test]
    fn job_names_keep_the_random_end() {
        let n = job_name("mig-timeslice-hog1-infer1-serve1-train4-20261201t142000-0123abcd");
        assert!(n.ends_with("-0123abcd") && n.len() <= MAX_JOB_NAME, "{n}");
        assert!(is_dns_label(&n));
        assert_eq!(job_name("ab"), "coload-ab");
    }
}
