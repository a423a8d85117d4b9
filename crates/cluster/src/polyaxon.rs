//! One cohort as Polyaxon operations, one per replica, as the article submits it: a
//! `polyaxon run` per replica, all with one experiment id. Each operation carries its worker's
//! whole command line (the spec's worker flags from [`coload_spec::to_argv`], its replica, its
//! workload and, for a serve worker, the serve flags), so no component keeps a second copy of
//! the flags. A launch script runs them in the article's loop.

use std::fmt::Write as _;

use coload_cohort_schema::text;
use coload_spec::CohortSpec;
use serde_json::{Value, json};

use crate::error::ClusterError;
use crate::kubernetes::{
    CPUS_PER_WORKER, MEMORY_PER_WORKER, Site, common_args, per_replica_args, sh_quote, sha_checks,
};
use crate::stage::{CLAIM, Staged, stage};
use crate::yaml;

/// The rendered operations of one cohort.
#[derive(Debug, Clone)]
pub struct RenderedOperations {
    /// The experiment id.
    pub experiment: String,
    /// `(file name, YAML)` per replica, `replica-<i>.yaml`, in replica order.
    pub operations: Vec<(String, String)>,
    /// The operations as data, in replica order.
    pub values: Vec<Value>,
    /// `launch.sh`: one `polyaxon run` per replica.
    pub launch_script: String,
    /// Files to copy onto the claim first.
    pub staged: Vec<Staged>,
}

/// Renders `spec` as one Polyaxon operation per replica at `site` (the namespace is the
/// agent's; `site.namespace` is not used).
pub fn render_operations(
    spec: &CohortSpec,
    site: &Site,
    experiment: &str,
) -> Result<RenderedOperations, ClusterError> {
    // The same checks as the Job (spec, site, key against the mode, experiment id).
    let job = crate::kubernetes::render_job(spec, site, experiment)?;
    let mix = spec.validate()?;
    crate::kubernetes::refuse_hog(&mix)?;
    let (spec, staged) = stage(spec)?;
    let count = job.count;
    let common = common_args(&spec, experiment, count)?;
    let checks = sha_checks(&staged);
    let short: String = experiment
        .rsplit('-')
        .next()
        .unwrap_or(experiment)
        .chars()
        .take(8)
        .collect();
    let resource = site.resource.as_str();
    let mut operations = Vec::new();
    let mut values = Vec::new();
    for (replica, workload) in (0u32..).zip(mix.workloads()) {
        let mut args = common.clone();
        args.extend(per_replica_args(&spec, *workload)?);
        args.extend([
            "--replica".to_owned(),
            replica.to_string(),
            // The run's outputs: Polyaxon keeps them, `polyaxon ops artifacts` downloads them.
            "--out".to_owned(),
            "{{ globals.run_outputs_path }}".to_owned(),
        ]);
        let command: Vec<String> = if checks.is_empty() {
            vec!["bench-worker".to_owned()]
        } else {
            vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                format!("set -eu\n{checks}exec bench-worker \"$@\"\n"),
                "bench-worker".to_owned(),
            ]
        };
        let op = json!({
            "version": 1.1,
            "kind": "operation",
            "name": format!("coload-{short}-r{replica}"),
            "tags": ["coload", experiment],
            "component": {
                "version": 1.1,
                "kind": "component",
                "name": "coload-bench-worker",
                "run": {
                    "kind": "job",
                    "connections": [CLAIM],
                    "environment": {
                        "nodeSelector": { "kubernetes.io/hostname": site.node },
                        "restartPolicy": "Never",
                    },
                    "container": {
                        "name": "worker",
                        "image": site.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": command,
                        "args": args,
                        "env": [
                            { "name": "NODE_NAME",
                              "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } },
                            { "name": "POD_NAME",
                              "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                            { "name": "POD_UID",
                              "valueFrom": { "fieldRef": { "fieldPath": "metadata.uid" } } },
                            { "name": "POLYAXON_RUN_UUID", "value": "{{ globals.uuid }}" },
                            { "name": "OMP_NUM_THREADS", "value": CPUS_PER_WORKER },
                            { "name": "MKL_NUM_THREADS", "value": CPUS_PER_WORKER },
                            { "name": "OMP_WAIT_POLICY", "value": "PASSIVE" },
                        ],
                        "resources": {
                            "requests": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER, resource: 1 },
                            "limits": { "cpu": CPUS_PER_WORKER, "memory": MEMORY_PER_WORKER, resource: 1 },
                        },
                    },
                },
            },
        });
        let header = format!(
            "coload cohort {experiment}, replica {replica} of {count} ({workload}), mode {}, node \
             {}.\nRendered by `bench-cohort render polyaxon` from the cohort spec; submit the \
             whole cohort with launch.sh.",
            spec.flags.mode, site.node
        );
        operations.push((
            format!("replica-{replica}.yaml"),
            yaml::document(&header, &op),
        ));
        values.push(op);
    }
    let launch_script = launch_script(experiment, count, &staged);
    Ok(RenderedOperations {
        experiment: experiment.to_owned(),
        operations,
        values,
        launch_script,
        staged,
    })
}

/// The article's loop: one `polyaxon run` per replica, then how to download and summarize.
fn launch_script(experiment: &str, count: u32, staged: &[Staged]) -> String {
    let mut s = format!(
        "#!/bin/sh\n\
         # Submits coload cohort {experiment}: one Polyaxon run per replica ({count}), rendered by\n\
         # `bench-cohort render polyaxon`. The queue must admit all {count} runs at once: the\n\
         # workers meet at a barrier on the claim and fail (exit 11) if their peers never start.\n\
         # usage: sh launch.sh PROJECT QUEUE\n\
         set -eu\n\
         [ \"$#\" -eq 2 ] || {{ echo 'usage: sh launch.sh PROJECT QUEUE (agent/queue)' >&2; exit 2; }}\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
    );
    for st in staged {
        // The local path is the user's text: escaped, so that no character of it can end the
        // comment and become a command.
        let _ = writeln!(
            s,
            "# first copy {} onto the claim as {} (SHA-256 {})",
            text::escaped(&st.local.display().to_string()),
            st.in_claim,
            st.sha256
        );
    }
    let _ = write!(
        s,
        "r=0\nwhile [ \"$r\" -lt {count} ]; do\n  \
         polyaxon run -f \"$here/replica-$r.yaml\" -p \"$1\" -q \"$2\"\n  \
         r=$((r + 1))\ndone\n\
         echo {done_msg}\n",
        done_msg = sh_quote(&format!(
            "submitted {count} run(s) of {experiment}; when all succeeded, download each run's \
             outputs into downloaded/worker-<i>/ (polyaxon ops artifacts) and run \
             bench-summarize on them (docs/deploy.md)"
        ))
    );
    s
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Mode;
    use coload_spec::Mix;

    use super::*;
    use crate::kubernetes::DEFAULT_IMAGE;
    use crate::resource::ResourceKey;

    /// The plugin advertises no `nvidia.com/gpu` for MIG devices under the mixed
    /// strategy; each operation must request the policy's own key, as the Job does.
    #[test]
    fn mig_operations_request_the_policys_key_and_no_whole_gpu() {
        let spec = CohortSpec::new(&Mix::parse("infer=1,train=2").unwrap(), Mode::Mig);
        let site = Site {
            node: "gpu-mig-1".into(),
            resource: ResourceKey::for_mig_profile("1g.10gb+me").unwrap(),
            image: DEFAULT_IMAGE.into(),
            namespace: None,
        };
        let ops = render_operations(&spec, &site, "mig-infer1-train2-x-0123abcd").unwrap();
        assert_eq!(ops.values.len(), 3);
        for op in &ops.values {
            let resources = &op["component"]["run"]["container"]["resources"];
            for kind in ["requests", "limits"] {
                let r = resources[kind].as_object().unwrap();
                assert_eq!(r["nvidia.com/mig-1g.10gb.me"], 1, "{kind}: {r:?}");
                assert!(!r.contains_key("nvidia.com/gpu"), "{kind}: {r:?}");
                let gpu_keys = r.keys().filter(|k| k.starts_with("nvidia.com/")).count();
                assert_eq!(gpu_keys, 1, "{kind}: {r:?}");
            }
        }
        assert!(
            ops.operations
                .iter()
                .all(|(_, text)| text.contains("nvidia.com/mig-1g.10gb.me")
                    && !text.contains("\"nvidia.com/gpu\""))
        );
    }
}
