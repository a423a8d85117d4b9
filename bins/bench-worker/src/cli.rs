//! Command-line flags: the cohort protocol's flags (shared with `bench-cohort`, which passes
//! them on), plus this worker's own output settings.

use clap::{Parser, ValueEnum};
use coload_cohort_schema::{Execution, InputShape, TORCHSCRIPT_MODEL, Workload};
use coload_spec::{ServeFlags, WorkerFlags, WorkerPlace};
use coload_workload::{LlmPreset, ModelSource, TorchScriptSpec, ZooModel};

/// Run one coload worker: warm up, meet the cohort at the barrier, time a window of batches of a
/// model (ResNet18 by default), and write worker.json, batches.jsonl, telemetry.jsonl and
/// gpm.jsonl into --out.
#[derive(Debug, Parser)]
#[command(
    name = "bench-worker",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub(crate) struct Args {
    /// Which worker of which cohort this is, and where its files go.
    #[command(flatten)]
    pub(crate) place: WorkerPlace,

    /// What every worker of the cohort measures, and how.
    #[command(flatten)]
    pub(crate) flags: WorkerFlags,

    /// A serve worker's arrivals, batching and objective.
    #[command(flatten)]
    pub(crate) serve: ServeFlags,

    /// Kubernetes node name, recorded in worker.json (default: $NODE_NAME)
    #[arg(long, env = "NODE_NAME")]
    pub(crate) node_name: Option<String>,

    /// Print only errors
    #[arg(long, short)]
    pub(crate) quiet: bool,

    /// Progress format on stderr: text for people, json (one object per line) for log collectors
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

/// Progress output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One readable line per phase.
    Text,
    /// One JSON object per line.
    Json,
}

impl Args {
    /// Checks what clap cannot: ranges and relations between flags.
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.place.validate().map_err(|e| e.to_string())?;
        self.flags.validate().map_err(|e| e.to_string())?;
        self.flags
            .validate_for(self.place.workload)
            .map_err(|e| e.to_string())?;
        self.serve
            .validate_for(self.place.workload)
            .map_err(|e| e.to_string())?;
        self.serve
            .rate_in_window(self.flags.window_s)
            .map_err(|e| e.to_string())?;
        if self.flags.model_file.is_none() {
            // Every model the declaration names, not only this worker's: a typo in another
            // workload's entry is caught by every worker, before anything starts. An LLM
            // workload names a built-in LLM (issue 24), the others a vision model.
            let declaration = self.flags.model_declaration();
            let entries: Vec<(Workload, String)> = match declaration.per_workload() {
                Some(map) => map.iter().map(|(w, m)| (*w, m.clone())).collect(),
                None => vec![(
                    self.place.workload,
                    self.flags
                        .model_for(self.place.workload)
                        .map_err(|e| e.to_string())?,
                )],
            };
            for (workload, name) in entries {
                if workload.is_llm() {
                    name.parse::<LlmPreset>()
                        .map_err(|e| format!("--model: {e}"))?;
                } else if workload != Workload::Hog || declaration.per_workload().is_some() {
                    name.parse::<ZooModel>()
                        .map_err(|e| format!("--model: {e}"))?;
                }
            }
            // A hog runs no model (issue 12), an LLM no images.
            if self.place.workload != Workload::Hog && !self.place.workload.is_llm() {
                let own: ZooModel = declaration
                    .model_for(self.place.workload)?
                    .parse()
                    .map_err(|e| format!("--model: {e}"))?;
                own.check_image_size(self.flags.image_size)
                    .map_err(|e| format!("--image-size: {e}"))?;
            }
        }
        coload_barrier::validate_experiment_id(&self.place.experiment).map_err(|e| e.to_string())
    }

    /// The model this worker runs, for the workload crate.
    pub(crate) fn model_source(&self) -> Result<ModelSource, String> {
        let f = &self.flags;
        match (&f.model_file, f.input_shape, f.num_classes) {
            (Some(path), Some(input_shape), Some(num_classes)) => {
                Ok(ModelSource::TorchScript(TorchScriptSpec {
                    path: path.clone(),
                    input_shape: input_shape.0,
                    num_classes,
                }))
            }
            (Some(_), _, _) => Err("--model-file needs --input-shape and --num-classes".into()),
            (None, _, _) => f
                .model_declaration()
                .model_for(self.place.workload)?
                .parse()
                .map(ModelSource::Zoo)
                .map_err(|e| format!("--model: {e}")),
        }
    }

    /// How this worker issues its batches: `--execution`'s entry for its workload (checked by
    /// `validate`, so the fallback to eager is never taken).
    pub(crate) fn execution(&self) -> Execution {
        self.flags
            .execution_for(self.place.workload)
            .unwrap_or_default()
    }

    /// `config.model`: this worker's built-in model, or `torchscript`.
    pub(crate) fn model_name(&self) -> String {
        if self.flags.model_file.is_some() {
            return TORCHSCRIPT_MODEL.to_owned();
        }
        self.flags
            .model_for(self.place.workload)
            .unwrap_or_else(|_| self.flags.model_declaration().to_string())
    }

    /// `config.image_size`: `--image-size`, or the height of a TorchScript model's input.
    pub(crate) fn recorded_image_size(&self) -> u32 {
        match (&self.flags.model_file, self.flags.input_shape) {
            (Some(_), Some(InputShape([_, h, _]))) => h,
            _ => self.flags.image_size,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The spec refuses a `--max-batch` at the door (a plan's line) with the batcher's own limit.
    #[test]
    fn the_spec_and_the_batcher_agree_on_the_largest_batch() {
        assert_eq!(coload_spec::MAX_BATCH, coload_timing::MAX_BATCH_LIMIT);
    }

    /// The spec refuses a prompt longer than the model's context at the door: its list of LLMs
    /// and their contexts must be the workload crate's.
    #[test]
    fn the_spec_and_the_workload_agree_on_the_llms() {
        let spec: Vec<(String, u32)> = coload_spec::LLM_MODELS
            .iter()
            .map(|(n, c)| ((*n).to_owned(), *c))
            .collect();
        let workload: Vec<(String, u32)> = coload_workload::LlmPreset::ALL
            .iter()
            .map(|p| (p.as_str().to_owned(), p.config().context))
            .collect();
        assert_eq!(spec, workload);
        assert!(
            coload_spec::DEFAULT_LLM_MODEL
                .parse::<coload_workload::LlmPreset>()
                .is_ok()
        );
    }
}
