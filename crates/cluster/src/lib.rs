//! coload on a cluster: one cohort rendered as a Kubernetes Indexed Job
//! ([`kubernetes::render_job`]) or as Polyaxon operations ([`polyaxon::render_operations`]) from
//! its typed [`coload_spec::CohortSpec`], never from a copy of the flags; and the Kubernetes
//! backend of a study ([`run_study`]), which runs a plan's cohorts as Jobs through `kubectl`
//! with the same index, resume and report as on one node. Under Dynamic Resource Allocation
//! ([`dra::render_cohort`]) a cohort's Pods name one claim that sets their sharing.
//!
//! # Example
//!
//! ```
//! use coload_cohort_schema::Mode;
//! use coload_cluster::{ResourceKey, Site, kubernetes};
//! use coload_spec::{CohortSpec, Mix};
//!
//! let spec = CohortSpec::new(&Mix::parse("infer=1,train=6").unwrap(), Mode::Timeslice);
//! let site = Site {
//!     node: "gpu-ts-1".into(),
//!     resource: ResourceKey::parse("nvidia.com/gpu").unwrap(),
//!     image: kubernetes::DEFAULT_IMAGE.into(),
//!     namespace: None,
//! };
//! let experiment = kubernetes::fresh_experiment(&spec, &spec.mix().unwrap());
//! let job = kubernetes::render_job(&spec, &site, &experiment).unwrap();
//! assert_eq!(job.manifest["spec"]["completions"], 7);
//! assert!(job.yaml.contains("completionMode: \"Indexed\""));
//! ```

mod collect;
pub mod dra;
mod error;
pub mod kubectl;
pub mod kubernetes;
mod mig_node;
pub mod polyaxon;
mod render;
mod resource;
pub mod stage;
mod study;
mod yaml;

pub use error::ClusterError;
pub use kubernetes::Site;
pub use render::{RenderArgs, RenderKind, render};
pub use resource::ResourceKey;
pub use study::{Backend, ClusterArgs, check_offers, run_study};
