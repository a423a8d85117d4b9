//! `bench-cohort render kubernetes|polyaxon`: one cohort's manifests from its flags.

use std::path::PathBuf;

use coload_cohort_schema::Mode;
use coload_launch::Console;
use coload_spec::{CohortSpec, Sharing};

use crate::dra::{DraSite, render_cohort};
use crate::error::ClusterError;
use crate::kubernetes::{DEFAULT_IMAGE, Site, fresh_experiment, render_job};
use crate::polyaxon::render_operations;
use crate::resource::ResourceKey;
use crate::study::write_new;

/// What to render one cohort as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RenderKind {
    /// One Indexed Job (YAML), on stdout or into --out FILE.
    Kubernetes,
    /// One Polyaxon operation per replica and launch.sh, into the new folder --out DIR.
    Polyaxon,
}

/// Render one cohort as a Kubernetes Indexed Job or as Polyaxon operations, from the same flags
/// as `bench-cohort run`. Example: `bench-cohort render kubernetes --node gpu-ts-1 --resource
/// nvidia.com/gpu --workers infer=1,train=6 --mode timeslice | kubectl create -f -`
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// kubernetes (one Indexed Job) or polyaxon (one operation per replica and launch.sh)
    #[arg(value_enum)]
    pub kind: RenderKind,

    /// What the cohort is (the flags of `bench-cohort run`).
    #[command(flatten)]
    pub spec: CohortSpec,

    /// The node prepared for the mode (its kubernetes.io/hostname label)
    #[arg(long)]
    pub node: String,

    /// What each worker requests: nvidia.com/gpu, nvidia.com/gpu.shared or
    /// nvidia.com/mig-<profile> as the device plugin names it (e.g. nvidia.com/mig-1g.18gb,
    /// nvidia.com/mig-1g.10gb.me) [default: nvidia.com/gpu; required with --mode mig and
    /// mig-timeslice]
    #[arg(long)]
    pub resource: Option<String>,

    /// How the Pods get their GPUs: device-plugin (each requests one unit of --resource) or
    /// dra (they name one ResourceClaim that sets the sharing, or a ResourceClaimTemplate for
    /// exclusive; the claim is written before the Job)
    #[arg(long, value_enum, default_value_t = Sharing::DevicePlugin)]
    pub sharing: Sharing,

    /// --sharing dra with --mode mig or mig-timeslice: the MIG profile the claim selects
    /// (e.g. 1g.18gb)
    #[arg(long, value_name = "PROFILE")]
    pub mig_profile: Option<String>,

    /// The worker image
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,

    /// The namespace of the Job and the claim
    #[arg(long)]
    pub namespace: Option<String>,

    /// Use this experiment id instead of a fresh one (never reuse an earlier cohort's)
    #[arg(long)]
    pub experiment: Option<String>,

    /// kubernetes: write the Job to this new file instead of stdout; polyaxon: the new folder
    /// for replica-<i>.yaml and launch.sh (required)
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Renders as `args` asks; the manifest goes to the console's output or to `--out`.
pub fn render(args: &RenderArgs, console: &dyn Console) -> Result<u8, ClusterError> {
    if args.sharing == Sharing::Dra {
        return render_dra(args, console);
    }
    if args.mig_profile.is_some() {
        return Err(ClusterError::Usage(
            "--mig-profile is for --sharing dra; under the device plugin give the MIG resource \
             with --resource (e.g. nvidia.com/mig-1g.18gb)"
                .into(),
        ));
    }
    let resource = match (&args.resource, args.spec.flags.mode) {
        (Some(key), _) => ResourceKey::parse(key)?,
        (None, mode @ (Mode::Mig | Mode::MigTimeslice)) => {
            return Err(ClusterError::Usage(format!(
                "--mode {mode} needs --resource: the MIG resource each worker requests \
                 (nvidia.com/mig-<profile> under the device plugin's mixed strategy, e.g. \
                 nvidia.com/mig-1g.18gb; nvidia.com/gpu under single)"
            )));
        }
        (None, _) => ResourceKey::parse("nvidia.com/gpu")?,
    };
    let site = Site {
        node: args.node.clone(),
        resource,
        image: args.image.clone(),
        namespace: args.namespace.clone(),
    };
    let mix = args.spec.validate()?;
    let experiment = args
        .experiment
        .clone()
        .unwrap_or_else(|| fresh_experiment(&args.spec, &mix));
    match args.kind {
        RenderKind::Kubernetes => {
            let job = render_job(&args.spec, &site, &experiment)?;
            match &args.out {
                Some(path) => {
                    write_new(path, job.yaml.as_bytes())?;
                    console.progress(&format!(
                        "wrote job {} (experiment {}) to {}",
                        job.name,
                        job.experiment,
                        path.display()
                    ));
                }
                None => console.output(&job.yaml),
            }
            for s in &job.staged {
                console.progress(&format!(
                    "before creating it, copy {} onto the claim as {} (SHA-256 {})",
                    s.local.display(),
                    s.in_claim,
                    s.sha256
                ));
            }
        }
        RenderKind::Polyaxon => {
            let dir = args.out.as_ref().ok_or_else(|| {
                ClusterError::Usage(
                    "render polyaxon writes one file per replica: give --out DIR (a new folder)"
                        .into(),
                )
            })?;
            let ops = render_operations(&args.spec, &site, &experiment)?;
            std::fs::create_dir(dir).map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    ClusterError::Exists(dir.clone())
                } else {
                    ClusterError::Io {
                        what: "cannot create",
                        path: dir.clone(),
                        source,
                    }
                }
            })?;
            for (name, text) in &ops.operations {
                write_new(&dir.join(name), text.as_bytes())?;
            }
            write_new(&dir.join("launch.sh"), ops.launch_script.as_bytes())?;
            console.progress(&format!(
                "wrote {} operation(s) and launch.sh for experiment {} into {}; submit with: sh \
                 {}/launch.sh PROJECT QUEUE",
                ops.operations.len(),
                ops.experiment,
                dir.display(),
                dir.display()
            ));
        }
    }
    Ok(coload_cohort_schema::exit::COMPLETE)
}

/// `render kubernetes --sharing dra`: the cohort's claim and its Job, one YAML stream.
fn render_dra(args: &RenderArgs, console: &dyn Console) -> Result<u8, ClusterError> {
    if args.kind != RenderKind::Kubernetes {
        return Err(ClusterError::Usage(
            "--sharing dra renders Kubernetes claims: use `render kubernetes`".into(),
        ));
    }
    if let Some(key) = &args.resource {
        return Err(ClusterError::Usage(format!(
            "--resource {key} is the device plugin's resource key; under --sharing dra the Pods \
             name a claim instead (MIG: --mig-profile PROFILE)"
        )));
    }
    let site = Site {
        node: args.node.clone(),
        resource: ResourceKey::parse("nvidia.com/gpu")?,
        image: args.image.clone(),
        namespace: args.namespace.clone(),
    };
    let mix = args.spec.validate()?;
    let experiment = args
        .experiment
        .clone()
        .unwrap_or_else(|| fresh_experiment(&args.spec, &mix));
    let dra = DraSite {
        mig_profile: args.mig_profile.clone(),
    };
    let cohort = render_cohort(&args.spec, &site, &dra, &experiment)?;
    match &args.out {
        Some(path) => {
            write_new(path, cohort.yaml.as_bytes())?;
            console.progress(&format!(
                "wrote {} {} and job {} (experiment {}) to {}",
                cohort.claim.kind.kind(),
                cohort.claim.name,
                cohort.job.name,
                cohort.job.experiment,
                path.display()
            ));
        }
        None => console.output(&cohort.yaml),
    }
    for s in &cohort.job.staged {
        console.progress(&format!(
            "before creating it, copy {} onto the claim as {} (SHA-256 {})",
            s.local.display(),
            s.in_claim,
            s.sha256
        ));
    }
    console.progress(&format!(
        "after the Job has ended, delete the claim: kubectl delete {} {}",
        cohort.claim.kind.resource(),
        cohort.claim.name
    ));
    Ok(coload_cohort_schema::exit::COMPLETE)
}
