//! What the study's integration tests share: the command line they parse and a stand-in node
//! of one GPU.

use clap::Parser;
use coload_study::{Job, Offer, Placement, StudyArgs};

/// `bench-cohort study`'s own arguments, parsed as the binary parses them.
#[derive(Debug, Parser)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) study: StudyArgs,
}

/// One GPU that takes every cohort.
pub(crate) struct OneGpu;

impl Offer for OneGpu {
    fn is_cpu(&self) -> bool {
        false
    }

    fn place(&self, _job: &Job, free: &[u32]) -> Result<Placement, String> {
        if !free.contains(&0) {
            return Err("busy".into());
        }
        Ok(Placement {
            gpus: vec![0],
            visible: Some("0".into()),
            per_worker: Vec::new(),
            host_exclusive: false,
            mig_profile: None,
        })
    }
}
