//! The typed specification of a coload cohort.
//!
//! A cohort is described once, as a [`CohortSpec`]: the worker mix, the mode and MPS share, the
//! model and how it is executed, precision, batch and image size, window, warmup and lead, the
//! serve workers' arrivals, batcher and objective, telemetry and GPM. Every door parses into it
//! and renders from it:
//!
//! - `bench-cohort` flattens it into its clap parser;
//! - `bench-worker` flattens [`WorkerPlace`], [`WorkerFlags`] and [`ServeFlags`], and a launcher
//!   renders them into each worker's argv with [`to_argv`];
//! - a study plan lays its TOML keys over a spec ([`plan::overlay`]), so a plan can set every
//!   flag a cohort takes and no other;
//! - man pages and completions come from the same clap definitions ([`generate`]).
//!
//! It is checked once, by [`CohortSpec::validate`], with typed errors ([`SpecError`]); lengths
//! of time are [`Seconds`], valid from the moment they are parsed.
//!
//! # Example
//!
//! ```
//! use coload_cohort_schema::Mode;
//! use coload_spec::{CohortSpec, Mix, plan, to_argv};
//!
//! let mut spec = CohortSpec::new(&Mix::parse("serve=1,train=6").unwrap(), Mode::Timeslice);
//! plan::overlay(&mut spec, "rate", &toml::Value::Float(250.0)).unwrap();
//! plan::overlay(&mut spec, "execution", &toml::Value::String("cuda-graph".into())).unwrap();
//! // A serve worker runs eager only: refused here, not in every worker an hour later.
//! assert_eq!(spec.validate().unwrap_err().flag_name(), Some("--execution"));
//! let argv = to_argv(&spec).unwrap();
//! assert!(argv.iter().any(|a| a == "--rate"));
//! ```

mod argv;
mod cohort;
mod deadline;
mod error;
mod flags;
pub mod generate;
mod llm;
mod mix;
pub mod plan;
mod seconds;
mod sharing;

pub use argv::{RenderError, error_chain, to_argv, to_argv_joined};
pub use cohort::{
    CapacityFlags, ClusterFlags, CohortSpec, DEFAULT_SCHEDULE_TIMEOUT_S, DEFAULT_SLO_QUANTILE,
    DEFAULT_TTL_AFTER_FINISHED_S,
};
pub use deadline::FINISH_SLACK;
pub use error::SpecError;
pub use flags::{
    Arrivals, DEFAULT_MODEL, LlmLengths, MAX_BATCH, MAX_RATE_PER_S, MAX_WARMUP_BATCHES, ServeFlags,
    WorkerFlags, WorkerPlace,
};
pub use llm::{
    DEFAULT_LLM_MODEL, DEFAULT_OUTPUT_TOKENS, DEFAULT_PROMPT_TOKENS, LLM_MODELS, llm_context_tokens,
};
pub use mix::Mix;
pub use seconds::{Seconds, SecondsError};
pub use sharing::Sharing;
