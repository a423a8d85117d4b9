//! Command-line flags: the cohort protocol's flags (shared with `bench-cohort`, which passes
//! them on), plus this worker's own output settings.

use clap::{Parser, ValueEnum};
use coload_cohort_schema::{Execution, InputShape, TORCHSCRIPT_MODEL, Workload};
use coload_spec::{ServeFlags, WorkerFlags, WorkerPlace};
use coload_workload::{LlmPreset, ModelSource, TorchScriptSpec, ZooModel};

use crate::error::ArgsError;

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
pub struct WorkerArgs {
    /// Which worker of which cohort this is, and where its files go.
    #[command(flatten)]
    pub place: WorkerPlace,

    /// What every worker of the cohort measures, and how.
    #[command(flatten)]
    pub flags: WorkerFlags,

    /// A serve worker's arrivals, batching and objective.
    #[command(flatten)]
    pub serve: ServeFlags,

    /// Kubernetes node name, recorded in worker.json (default: $NODE_NAME)
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// Print only errors
    #[arg(long, short)]
    pub quiet: bool,

    /// Progress format on stderr: text for people, json (one object per line) for log collectors
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Progress output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per phase.
    Text,
    /// One JSON object per line.
    Json,
}

impl WorkerArgs {
    /// Checks what clap cannot: ranges and relations between flags, the models the flags name,
    /// and the experiment id.
    pub fn validate(&self) -> Result<(), ArgsError> {
        self.place.validate()?;
        self.flags.validate()?;
        self.flags.validate_for(self.place.workload)?;
        self.serve.validate_for(self.place.workload)?;
        self.serve.rate_in_window(self.flags.window_s)?;
        if self.flags.model_file.is_none() {
            // Every model the declaration names, not only this worker's: a typo in another
            // workload's entry is caught by every worker, before anything starts. An LLM
            // workload names a built-in LLM, the others a vision model.
            let declaration = self.flags.model_declaration();
            let entries: Vec<(Workload, String)> = match declaration.per_workload() {
                Some(map) => map.iter().map(|(w, m)| (*w, m.clone())).collect(),
                None => vec![(
                    self.place.workload,
                    self.flags.model_for(self.place.workload)?,
                )],
            };
            for (workload, name) in entries {
                if workload.is_llm() {
                    name.parse::<LlmPreset>()
                        .map_err(|e| ArgsError::value("--model", e))?;
                } else if workload != Workload::Hog || declaration.per_workload().is_some() {
                    name.parse::<ZooModel>()
                        .map_err(|e| ArgsError::value("--model", e))?;
                }
            }
            // A hog runs no model, an LLM no images.
            if self.place.workload != Workload::Hog && !self.place.workload.is_llm() {
                let own: ZooModel = self
                    .flags
                    .model_for(self.place.workload)?
                    .parse()
                    .map_err(|e| ArgsError::value("--model", e))?;
                own.check_image_size(self.flags.image_size)
                    .map_err(|e| ArgsError::value("--image-size", e))?;
            }
        }
        coload_barrier::validate_experiment_id(&self.place.experiment)
            .map_err(ArgsError::Experiment)
    }

    /// The model this worker runs, for the workload crate.
    pub(crate) fn model_source(&self) -> Result<ModelSource, ArgsError> {
        let f = &self.flags;
        match (&f.model_file, f.input_shape, f.num_classes) {
            (Some(path), Some(input_shape), Some(num_classes)) => {
                Ok(ModelSource::TorchScript(TorchScriptSpec {
                    path: path.clone(),
                    input_shape: input_shape.0,
                    num_classes,
                }))
            }
            (Some(_), _, _) => Err(ArgsError::said(
                "--model-file",
                "--model-file needs --input-shape and --num-classes",
            )),
            (None, _, _) => f
                .model_for(self.place.workload)?
                .parse()
                .map(ModelSource::Zoo)
                .map_err(|e| ArgsError::value("--model", e)),
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
    use clap::Parser;

    use super::WorkerArgs;

    /// Every refusal names its flag, whether the spec, a library or the barrier refused it,
    /// and exits with the invalid-input code.
    #[test]
    fn refused_arguments_name_their_flag() {
        let refused = |extra: &[&str]| {
            let mut argv = vec![
                "bench-worker",
                "--experiment",
                "e",
                "--replica",
                "0",
                "--count",
                "1",
                "--workload",
                "train",
                "--mode",
                "timeslice",
                "--out",
                "o",
            ];
            argv.extend_from_slice(extra);
            let parsed = WorkerArgs::try_parse_from(argv).unwrap();
            let e = parsed
                .validate()
                .and_then(|()| crate::serve_args::open_loop(&parsed).map(|_| ()))
                .unwrap_err();
            assert_eq!(e.exit_code(), coload_cohort_schema::exit::INVALID_INPUT);
            (e.flag_name(), e.to_string())
        };
        let (flag, message) = refused(&["--model", "resnet9000"]);
        assert_eq!(flag, Some("--model"));
        assert!(message.starts_with("--model: "), "{message}");
        assert_eq!(
            refused(&["--model", "densenet121", "--image-size", "64"]).0,
            Some("--image-size")
        );
        assert_eq!(
            refused(&["--gpm-interval-s", "0.01"]).0,
            Some("--gpm-interval-s")
        );
        assert_eq!(refused(&["--experiment", "a/../b"]).0, Some("--experiment"));
        let (flag, message) = refused(&[
            "--workload",
            "serve",
            "--arrivals-file",
            "/nonexistent/arrivals.txt",
        ]);
        assert_eq!(flag, Some("--arrivals-file"));
        assert!(
            message.starts_with("cannot read --arrivals-file"),
            "{message}"
        );
        assert_eq!(refused(&["--workload", "serve"]).0, Some("--rate"));
    }

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
