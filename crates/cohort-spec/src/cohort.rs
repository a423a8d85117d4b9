//! [`CohortSpec`]: what one cohort is, whichever door it comes through.
//!
//! `bench-cohort` parses it from its flags, a study plan line overlays its TOML onto it
//! ([`crate::plan`]), and a Kubernetes or Polyaxon manifest is rendered from it. It is checked
//! once, by [`CohortSpec::validate`], with the cross-field rules no single flag can say (serve
//! with CUDA graphs, MPS shares without `--mode mps`, serve flags without a serve worker, a hog on
//! the CPU), so that a plan is refused at its line before anything runs rather than when every
//! worker fails an hour later.

use coload_cohort_schema::{DeviceChoice, Mode, Workload};
use serde::{Deserialize, Serialize};

use crate::error::SpecError;
use crate::flags::{ServeFlags, WorkerFlags};
use crate::mix::Mix;
use crate::seconds::Seconds;

/// The quantile of request latency that must meet `--slo-ms` when none is given.
pub const DEFAULT_SLO_QUANTILE: f64 = 0.99;

/// A cohort: its workers, the flags every worker gets, the serve workers' flags, the SLO's
/// quantile and the capacity search, and how strict the checks are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct CohortSpec {
    /// Workload mix in replica order, e.g. `infer=1,train=6` or `serve=1,train=6` (replica 0
    /// infers or serves, 1-6 train), `hog=1,train=6` (the hog takes device memory first, and
    /// the others start once it holds it), `decode=3` (LLM decode workers) or
    /// `serve-llm=1,train=6` (an LLM server with continuous batching beside trainers)
    #[arg(long, conflicts_with_all = ["count", "workload"])]
    pub workers: Option<Mix>,

    /// Number of workers of one workload (with --workload)
    #[arg(long, requires = "workload", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub count: Option<u32>,

    /// The workload of every worker (with --count): train, infer, serve, hog, decode or
    /// serve-llm
    #[arg(long, requires = "count")]
    pub workload: Option<Workload>,

    /// The flags every worker gets (--mode mps also starts a private MPS control daemon for
    /// the cohort, sets the share given by --mps-replicas, --mps-unlimited or --mps-threads and
    /// --mps-memory on it before any worker starts, and stops it afterwards).
    #[command(flatten)]
    #[serde(flatten)]
    pub flags: WorkerFlags,

    /// The serve workers' flags (given to serve workers only).
    #[command(flatten)]
    #[serde(flatten)]
    pub serve: ServeFlags,

    /// The SLO's quantile and the capacity search.
    #[command(flatten)]
    #[serde(flatten)]
    pub capacity: CapacityFlags,

    /// Fail workers whose device does not match --mode (--strict-device), and fail the summary
    /// on co-location mismatches
    #[arg(long)]
    pub strict: bool,

    /// How a cluster backend runs the cohort's Job.
    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterFlags,
}

/// How a cluster backend runs a cohort's Job: read by `render kubernetes` and `study --backend
/// kubernetes`; a cohort run on this node ignores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct ClusterFlags {
    /// Cluster backends: fail the cohort (pod_not_scheduled, pod_not_admitted) when a worker's
    /// Pod is still unscheduled or uncreated this long after its Job was created, with the
    /// scheduler's or the Job controller's message (image pulls are not counted: the Pod is
    /// scheduled by then)
    #[arg(long, default_value_t = DEFAULT_SCHEDULE_TIMEOUT_S)]
    #[serde(default = "default_schedule_timeout_s")]
    pub schedule_timeout_s: Seconds,

    /// Cluster backends: the Job's ttlSecondsAfterFinished (Kubernetes deletes a finished Job
    /// and its Pods this long after it ends, rounded up to whole seconds; a study deletes the
    /// Jobs it has collected at once unless --keep-jobs)
    #[arg(long, default_value_t = DEFAULT_TTL_AFTER_FINISHED_S)]
    #[serde(default = "default_ttl_after_finished_s")]
    pub ttl_after_finished_s: Seconds,
}

/// `--schedule-timeout-s` when none is given: five minutes, long enough for a scheduler to
/// place Pods on a busy node (or a cluster autoscaler to add one), short beside a Job's
/// deadline (the barrier's join timeout and the window, plus fifteen minutes).
pub const DEFAULT_SCHEDULE_TIMEOUT_S: Seconds = Seconds::whole(300);
/// `--ttl-after-finished-s` when none is given: a day, to read a failed Job's Pods the next
/// morning, without leaving them for ever.
pub const DEFAULT_TTL_AFTER_FINISHED_S: Seconds = Seconds::whole(86_400);

fn default_schedule_timeout_s() -> Seconds {
    DEFAULT_SCHEDULE_TIMEOUT_S
}

fn default_ttl_after_finished_s() -> Seconds {
    DEFAULT_TTL_AFTER_FINISHED_S
}

/// The launcher's serve flags: how the summary judges the SLO, and the capacity search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct CapacityFlags {
    /// The quantile that must meet --slo-ms (default 0.99)
    #[arg(long, value_name = "Q")]
    pub slo_quantile: Option<f64>,

    /// Search the highest --rate at which every serve worker meets --slo-ms (and every
    /// serve-llm worker --ttft-slo-ms and --tpot-slo-ms) at --slo-quantile, one full cohort per
    /// probe (each with a fresh experiment id, in <out>/probe-<k>-<rate>/); writes
    /// <out>/capacity.json
    #[arg(long)]
    pub find_capacity: bool,

    /// Capacity search: never probe below this rate
    #[arg(long, default_value_t = 1.0, value_name = "PER_S")]
    pub rate_min: f64,

    /// Capacity search: never probe above this rate
    #[arg(long, default_value_t = 100_000.0, value_name = "PER_S")]
    pub rate_max: f64,

    /// Capacity search: the most cohorts to run
    #[arg(long, default_value_t = 12)]
    pub max_probes: u32,

    /// Capacity search: stop when the bracket is within this fraction (0.05: 5 %)
    #[arg(long, default_value_t = 0.05)]
    pub capacity_tolerance: f64,
}

impl CapacityFlags {
    /// The rate the search starts from: `--rate` where given, else 100 requests/s kept within
    /// the bounds.
    #[must_use]
    pub fn start_per_s(&self, rate: Option<f64>) -> f64 {
        rate.unwrap_or(100.0_f64.clamp(self.rate_min, self.rate_max))
    }

    /// The numbers of the search, naming the flag at fault.
    fn validate(&self, rate: Option<f64>) -> Result<(), SpecError> {
        if let Some(q) = self.slo_quantile
            && !(q > 0.0 && q < 1.0)
        {
            return Err(SpecError::flag(
                "--slo-quantile",
                format!("--slo-quantile must be between 0 and 1 (0.99 is p99), got {q}"),
            ));
        }
        if !self.find_capacity {
            return Ok(());
        }
        for (flag, v) in [("--rate-min", self.rate_min), ("--rate-max", self.rate_max)] {
            if !(v.is_finite() && v > 0.0 && v <= crate::flags::MAX_RATE_PER_S) {
                return Err(SpecError::flag(
                    flag,
                    format!(
                        "{flag} must be a positive number of requests per second, at most {}, \
                         got {v}",
                        crate::flags::MAX_RATE_PER_S
                    ),
                ));
            }
        }
        let start = self.start_per_s(rate);
        if !(self.rate_min <= start && start <= self.rate_max) {
            return Err(SpecError::flag(
                "--rate-min",
                format!(
                    "the capacity search needs --rate-min <= --rate <= --rate-max, got {} <= {} \
                     <= {}",
                    self.rate_min, start, self.rate_max
                ),
            ));
        }
        if self.max_probes < 2 {
            return Err(SpecError::flag(
                "--max-probes",
                format!(
                    "--max-probes must be at least 2 (one passing and one failing rate), got {}",
                    self.max_probes
                ),
            ));
        }
        if !(self.capacity_tolerance.is_finite() && self.capacity_tolerance > 0.0) {
            return Err(SpecError::flag(
                "--capacity-tolerance",
                format!(
                    "--capacity-tolerance must be a positive fraction (0.05 is 5 %), got {}",
                    self.capacity_tolerance
                ),
            ));
        }
        Ok(())
    }
}

impl CohortSpec {
    /// The workload of every replica, in replica order.
    pub fn mix(&self) -> Result<Mix, SpecError> {
        match (&self.workers, self.count, self.workload) {
            (Some(mix), _, _) => Ok(mix.clone()),
            (None, Some(n), Some(w)) => Ok(Mix::uniform(w, n)),
            _ => Err(SpecError::Mix(
                "say which workers to run: --workers infer=1,train=6, or --count N --workload \
                 train|infer|serve|decode|serve-llm"
                    .to_owned(),
            )),
        }
    }

    /// Checks everything clap cannot, including the rules between flags; returns the mix.
    pub fn validate(&self) -> Result<Mix, SpecError> {
        self.flags.validate()?;
        self.serve.validate()?;
        let mix = self.mix()?;
        for w in mix.workloads() {
            self.flags.validate_for(*w)?;
        }
        self.validate_serve(&mix)?;
        self.capacity.validate(self.serve.rate)?;
        self.validate_hog(&mix)?;
        self.validate_llm(&mix)?;
        Ok(mix)
    }

    /// The LLM flags size an LLM worker's prompt and output: a cohort without one
    /// would carry them to no effect.
    fn validate_llm(&self, mix: &Mix) -> Result<(), SpecError> {
        if mix.workloads().iter().any(|w| w.is_llm()) {
            return Ok(());
        }
        for (given, flag) in [
            (self.flags.prompt_tokens.is_some(), "--prompt-tokens"),
            (self.flags.output_tokens.is_some(), "--output-tokens"),
        ] {
            if given {
                return Err(SpecError::flag(
                    flag,
                    format!(
                        "{flag} sizes an LLM worker, but the mix has none (e.g. --workers \
                         decode=2, decode=1,train=6 or serve-llm=1,train=6)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Serve flags need a serve (or serve-llm) worker, each workload's own flags its own
    /// worker; an open-loop worker needs a rate (or a trace, or a search), and a search needs
    /// the objectives of every open-loop workload in the mix.
    fn validate_serve(&self, mix: &Mix) -> Result<(), SpecError> {
        let (serve, capacity) = (&self.serve, &self.capacity);
        let has_serve = mix.workloads().contains(&Workload::Serve);
        let has_llm = mix.workloads().contains(&Workload::ServeLlm);
        self.validate_serve_flags_have_workers(has_serve, has_llm)?;
        if !has_serve && !has_llm {
            return Ok(());
        }
        if capacity.find_capacity && serve.arrivals_file.is_some() {
            return Err(SpecError::flag(
                "--find-capacity",
                "--find-capacity varies --rate; it cannot search a fixed --arrivals-file trace",
            ));
        }
        if capacity.find_capacity && has_serve && serve.slo_ms.is_none() {
            return Err(SpecError::flag(
                "--find-capacity",
                "--find-capacity needs --slo-ms for the serve workers",
            ));
        }
        if capacity.find_capacity
            && has_llm
            && (serve.ttft_slo_ms.is_none() || serve.tpot_slo_ms.is_none())
        {
            return Err(SpecError::flag(
                "--find-capacity",
                "--find-capacity needs --ttft-slo-ms and --tpot-slo-ms for the serve-llm workers \
                 (its objective is TTFT and TPOT at --slo-quantile, both at once)",
            ));
        }
        if has_llm {
            serve.kv_budget_tokens_for(&self.flags)?;
        }
        if capacity.find_capacity {
            // The search's slowest probe must schedule a request too.
            ServeFlags::rate_fits_window("--rate-min", capacity.rate_min, self.flags.window_s)?;
        } else {
            serve.rate_in_window(self.flags.window_s)?;
        }
        if serve.rate.is_none() && serve.arrivals_file.is_none() && !capacity.find_capacity {
            let (who, slo) = if has_serve {
                ("serve", "--slo-ms")
            } else {
                ("serve-llm", "--ttft-slo-ms and --tpot-slo-ms")
            };
            return Err(SpecError::flag(
                "--rate",
                format!(
                    "the cohort has {who} workers: give --rate R (requests per second each), \
                     --arrivals-file FILE, or --find-capacity with {slo}"
                ),
            ));
        }
        Ok(())
    }

    /// Each open-loop workload's flags need a worker of it in the mix.
    fn validate_serve_flags_have_workers(
        &self,
        has_serve: bool,
        has_llm: bool,
    ) -> Result<(), SpecError> {
        let (serve, capacity) = (&self.serve, &self.capacity);
        for (given, flag, present, example) in [
            (
                serve.rate.is_some(),
                "--rate",
                has_serve || has_llm,
                "serve=1,train=6 or serve-llm=1,train=6",
            ),
            (
                serve.arrivals_file.is_some(),
                "--arrivals-file",
                has_serve || has_llm,
                "serve=1,train=6 or serve-llm=1,train=6",
            ),
            (
                capacity.find_capacity,
                "--find-capacity",
                has_serve || has_llm,
                "serve=1,train=6 or serve-llm=1,train=6",
            ),
            (
                serve.slo_ms.is_some(),
                "--slo-ms",
                has_serve,
                "serve=1,train=6",
            ),
            (
                serve.kv_budget_tokens.is_some(),
                "--kv-budget-tokens",
                has_llm,
                "serve-llm=1,train=6",
            ),
            (
                serve.prompt_tokens_max.is_some(),
                "--prompt-tokens-max",
                has_llm,
                "serve-llm=1,train=6",
            ),
            (
                serve.output_tokens_max.is_some(),
                "--output-tokens-max",
                has_llm,
                "serve-llm=1,train=6",
            ),
            (
                serve.ttft_slo_ms.is_some(),
                "--ttft-slo-ms",
                has_llm,
                "serve-llm=1,train=6",
            ),
            (
                serve.tpot_slo_ms.is_some(),
                "--tpot-slo-ms",
                has_llm,
                "serve-llm=1,train=6",
            ),
        ] {
            if given && !present {
                let who = if example.starts_with("serve-llm") {
                    "a serve-llm worker"
                } else if example.contains(" or ") {
                    "a serve or serve-llm worker"
                } else {
                    "a serve worker"
                };
                return Err(SpecError::flag(
                    flag,
                    format!("{flag} needs {who} in the cohort (e.g. --workers {example})"),
                ));
            }
        }
        Ok(())
    }

    /// The hog takes device memory: it needs a GPU, and --hog-bytes needs a hog.
    fn validate_hog(&self, mix: &Mix) -> Result<(), SpecError> {
        let hogs = mix
            .workloads()
            .iter()
            .filter(|w| **w == Workload::Hog)
            .count();
        if hogs == 0 {
            if self.flags.hog_bytes.is_some() {
                return Err(SpecError::flag(
                    "--hog-bytes",
                    "--hog-bytes sizes the hog workload, but the mix has none (e.g. --workers \
                     hog=1,train=6)",
                ));
            }
            return Ok(());
        }
        if self.flags.device == DeviceChoice::Cpu {
            return Err(SpecError::flag(
                "--device",
                "the hog workload takes device memory to test a GPU sharing mode; --device cpu \
                 has none to take (leave --device at auto, or give cuda:N)",
            ));
        }
        if hogs == mix.len() {
            return Err(SpecError::flag(
                "--workers",
                "the mix is only hogs: a hog shows what it takes from the other workers, so add \
                 some (e.g. --workers hog=1,train=6)",
            ));
        }
        Ok(())
    }

    /// A spec of `workers` under `mode` with every other flag at its default: the base a plan
    /// overlays.
    #[must_use]
    pub fn new(mix: &Mix, mode: Mode) -> Self {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            spec: CohortSpec,
        }
        // clap builds its whole command to parse: once per process, not once per cohort (a
        // plan of 100k cohorts spent minutes here).
        static DEFAULTS: std::sync::OnceLock<CohortSpec> = std::sync::OnceLock::new();
        let defaults = DEFAULTS.get_or_init(|| {
            // Every flag has a default but the mode and the mix, so this parses; should clap
            // ever disagree, the error is a bug here, not the user's.
            match Defaults::try_parse_from([
                "coload",
                "--mode",
                "exclusive",
                "--workers",
                "train=1",
            ]) {
                Ok(d) => d.spec,
                Err(e) => unreachable!("the defaults of CohortSpec do not parse: {e}"),
            }
        });
        let mut spec = defaults.clone();
        spec.workers = Some(mix.clone());
        spec.flags.mode = mode;
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> Result<CohortSpec, String> {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            spec: CohortSpec,
        }
        let mut full = vec!["bench-cohort"];
        full.extend_from_slice(args);
        P::try_parse_from(full)
            .map(|p| p.spec)
            .map_err(|e| e.to_string())
    }

    /// What clap refuses on the command line, `validate` refuses in a spec built otherwise (a
    /// plan's lines): each with the flag it names.
    #[test]
    fn clap_ranges_hold_in_validate_too() {
        use coload_cohort_schema::{ByteSize, InputShape};
        let base = || CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        let with_file = || {
            let mut s = base();
            s.flags.model_file = Some("m.pt".into());
            s.flags.input_shape = Some(InputShape([3, 32, 32]));
            s.flags.num_classes = Some(10);
            s
        };
        assert!(with_file().validate().is_ok());
        let mps = |f: &dyn Fn(&mut CohortSpec)| {
            let mut s = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Mps);
            f(&mut s);
            s
        };
        let cases: Vec<(CohortSpec, &str)> = vec![
            (
                {
                    let mut s = with_file();
                    s.flags.num_classes = Some(0);
                    s
                },
                "--num-classes",
            ),
            (
                {
                    let mut s = with_file();
                    s.flags.input_shape = None;
                    s
                },
                "--model-file",
            ),
            (
                {
                    let mut s = base();
                    s.flags.input_shape = Some(InputShape([3, 8, 8]));
                    s
                },
                "--input-shape",
            ),
            (
                {
                    let mut s = base();
                    s.flags.num_classes = Some(3);
                    s
                },
                "--num-classes",
            ),
            (mps(&|s| s.flags.mps_replicas = Some(0)), "--mps-replicas"),
            (mps(&|s| s.flags.mps_replicas = Some(101)), "--mps-replicas"),
            (
                mps(&|s| s.flags.mps_replicas = Some(u32::MAX)),
                "--mps-replicas",
            ),
            (
                mps(&|s| {
                    s.flags.mps_replicas = Some(7);
                    s.flags.mps_unlimited = true;
                }),
                "--mps-replicas",
            ),
            (mps(&|s| s.flags.mps_threads = Some(50)), "--mps-threads"),
            (
                mps(&|s| {
                    s.flags.mps_threads = Some(0);
                    s.flags.mps_memory = Some(ByteSize(1 << 30));
                }),
                "--mps-threads",
            ),
            (
                {
                    let mut s = base();
                    s.flags.warmup_batches = u32::MAX;
                    s
                },
                "--warmup-batches",
            ),
        ];
        for (s, flag) in cases {
            let e = s.validate().unwrap_err();
            assert_eq!(e.flag_name(), Some(flag), "{e}");
        }
        assert!(
            mps(&|s| s.flags.mps_replicas = Some(100))
                .validate()
                .is_ok()
        );
    }

    /// A rate that schedules no request in the window, or one beyond any server, is refused;
    /// so is a capacity search's bound that is.
    #[test]
    fn rates_that_schedule_nothing_or_overflow_are_refused() {
        let serve = |rate: &str, extra: &[&str]| {
            let mut args = vec![
                "--mode",
                "timeslice",
                "--workers",
                "serve=1",
                "--rate",
                rate,
            ];
            args.extend_from_slice(extra);
            spec(&args).unwrap().validate()
        };
        let e = serve("1e-300", &[]).unwrap_err();
        assert_eq!(e.flag_name(), Some("--rate"));
        assert!(
            e.to_string()
                .contains("schedules no request in a 45 s window"),
            "{e}"
        );
        assert!(serve("0.03", &["--window-s", "40"]).is_ok());
        assert!(serve("0.02", &["--window-s", "40"]).is_err());
        assert_eq!(serve("1e7", &[]).unwrap_err().flag_name(), Some("--rate"));
        let e = serve(
            "100",
            &["--find-capacity", "--slo-ms", "10", "--rate-max", "1e290"],
        )
        .unwrap_err();
        assert_eq!(e.flag_name(), Some("--rate-max"), "{e}");
    }

    #[test]
    fn serve_with_cuda_graph_is_refused_naming_the_flag() {
        let s = spec(&[
            "--mode",
            "timeslice",
            "--workers",
            "serve=1,train=2",
            "--rate",
            "100",
            "--execution",
            "cuda-graph",
        ])
        .unwrap();
        let e = s.validate().unwrap_err();
        assert_eq!(e.flag_name(), Some("--execution"));
        assert!(e.to_string().contains("serve runs eager only"), "{e}");
        // The same without the serve worker is fine.
        let s = spec(&[
            "--mode",
            "timeslice",
            "--workers",
            "train=2",
            "--execution",
            "cuda-graph",
        ])
        .unwrap();
        assert!(s.validate().is_ok());
    }

    #[test]
    fn cross_field_rules() {
        for (args, flag) in [
            (
                &[
                    "--mode",
                    "timeslice",
                    "--workers",
                    "train=1",
                    "--mps-replicas",
                    "7",
                ][..],
                "--mps-replicas",
            ),
            (&["--mode", "mps", "--workers", "train=1"], "--mode"),
            (
                &["--mode", "timeslice", "--workers", "train=1", "--rate", "5"],
                "--rate",
            ),
            (&["--mode", "timeslice", "--workers", "serve=1"], "--rate"),
            (
                &["--mode", "timeslice", "--workers", "serve=1", "--rate=-5"],
                "--rate",
            ),
            (
                &[
                    "--mode",
                    "timeslice",
                    "--workers",
                    "hog=1,train=1",
                    "--device",
                    "cpu",
                ],
                "--device",
            ),
            (&["--mode", "timeslice", "--workers", "hog=1"], "--workers"),
            (
                &[
                    "--mode",
                    "timeslice",
                    "--workers",
                    "serve=1",
                    "--slo-ms",
                    "10",
                    "--find-capacity",
                    "--max-probes",
                    "1",
                ],
                "--max-probes",
            ),
        ] {
            let e = spec(args).unwrap().validate().unwrap_err();
            assert_eq!(e.flag_name(), Some(flag), "{args:?}: {e}");
        }
        assert!(spec(&["--mode", "timeslice"]).unwrap().validate().is_err());
    }

    /// The decode workload's flags and model, refused at the door with the flag at
    /// fault.
    #[test]
    fn decode_rules() {
        let check = |extra: &str| {
            let mut args = vec!["--mode", "timeslice", "--device", "cpu"];
            args.extend(extra.split_whitespace());
            spec(&args).and_then(|s| {
                s.validate()
                    .map_err(|e| format!("{}|{e}", e.flag_name().unwrap_or("-")))
            })
        };
        // Accepted: the default model, a tiny preset, a mix with one model per workload.
        assert!(check("--workers decode=2").is_ok());
        assert!(
            check("--workers decode=2 --model gpt2-tiny --prompt-tokens 32 --output-tokens 33")
                .is_ok()
        );
        let mix = check(
            "--workers decode=1,train=2 --model decode=llama-tiny,train=resnet18 --precision \
             bf16 --prompt-tokens 16 --output-tokens 16",
        )
        .unwrap();
        assert_eq!(mix.label(), "decode1-train2");
        for (extra, flag, says) in [
            ("--prompt-tokens 0", "--prompt-tokens", "at least 1 token"),
            ("--output-tokens 0", "--output-tokens", "at least 1 token"),
            // 33 + 33 - 1 = 65 positions in a context of 64.
            (
                "--model gpt2-tiny --prompt-tokens 33 --output-tokens 33",
                "--prompt-tokens",
                "context of 64",
            ),
            (
                "--model gpt2-tiny --output-tokens 200",
                "--output-tokens",
                "context of 64",
            ),
            (
                "--prompt-tokens 2000",
                "--prompt-tokens",
                "gpt2-small has a context of 1024",
            ),
            ("--model resnet18", "--model", "built-in LLM"),
        ] {
            let e = check(&format!("--workers decode=1 {extra}")).unwrap_err();
            let (got, message) = e.split_once('|').unwrap();
            assert_eq!(got, flag, "{extra}: {message}");
            assert!(message.contains(says), "{extra}: {message}");
        }
        for (extra, flag, says) in [
            (
                "--workers decode=1,train=1 --model gpt2-tiny --prompt-tokens 8 --output-tokens 8",
                "--model",
                "is an LLM",
            ),
            (
                "--workers train=2 --prompt-tokens 8",
                "--prompt-tokens",
                "the mix has none",
            ),
            (
                "--workers infer=2 --output-tokens 8",
                "--output-tokens",
                "the mix has none",
            ),
        ] {
            let e = check(extra).unwrap_err();
            let (got, message) = e.split_once('|').unwrap();
            assert_eq!(got, flag, "{extra}: {message}");
            assert!(message.contains(says), "{extra}: {message}");
        }
        // clap refuses a negative count before validation.
        assert!(check("--workers decode=1 --prompt-tokens=-1").is_err());
    }

    /// The serve-llm workload's flags, refused at the door with the flag at fault.
    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "one table of accepted specs and one of refusals, each naming its flag"
    )]
    fn serve_llm_rules() {
        let check = |extra: &str| {
            let mut args = vec!["--mode", "timeslice", "--device", "cpu"];
            args.extend(extra.split_whitespace());
            spec(&args).and_then(|s| {
                s.validate()
                    .map_err(|e| format!("{}|{e}", e.flag_name().unwrap_or("-")))
            })
        };
        let tiny = "--model gpt2-tiny --prompt-tokens 16 --output-tokens 16";
        let mix = check(&format!("--workers serve-llm=1 --rate 5 {tiny}")).unwrap();
        assert_eq!(mix.label(), "serve-llm1");
        // The longest request, 16 + 48, fills the context of 64 exactly, and a budget of 64.
        assert!(
            check(&format!(
                "--workers serve-llm=1 --rate 5 {tiny} --prompt-tokens-max 16 \
                 --output-tokens-max 48 --kv-budget-tokens 64"
            ))
            .is_ok()
        );
        let mix = check(
            "--workers serve-llm=1,train=2 --model serve-llm=gpt2-tiny,train=resnet18 --rate 2 \
             --prompt-tokens 8 --output-tokens 8 --ttft-slo-ms 500 --tpot-slo-ms 50 \
             --kv-budget-tokens 16",
        )
        .unwrap();
        assert_eq!(mix.to_string(), "serve-llm=1,train=2");
        assert!(
            check(&format!(
                "--workers serve-llm=1 {tiny} --find-capacity --ttft-slo-ms 500 --tpot-slo-ms 50"
            ))
            .is_ok()
        );
        // A serve-llm worker replays a CUDA graph per decode batch-size bucket, alone or beside
        // graph-captured trainers (the worker refuses a graph on the CPU, as decode's does).
        assert!(
            check(&format!(
                "--workers serve-llm=1 --rate 5 {tiny} --execution cuda-graph"
            ))
            .is_ok()
        );
        assert!(
            check(
                "--workers serve-llm=1,train=2 --model serve-llm=gpt2-tiny,train=resnet18 \
                 --rate 2 --prompt-tokens 8 --output-tokens 8 --execution cuda-graph"
            )
            .is_ok()
        );
        // A serve worker beside it still runs eager only.
        let e = check(
            "--workers serve=1,serve-llm=1 --model serve=resnet18,serve-llm=gpt2-tiny --rate 3 \
             --prompt-tokens 8 --output-tokens 8 --execution cuda-graph",
        )
        .unwrap_err();
        assert!(
            e.starts_with("--execution|") && e.contains("serve runs eager only"),
            "{e}"
        );
        // One execution per workload: the serve worker eager beside a graph-captured endpoint,
        // or the endpoint's graphs beside eager trainers; every workload of the mix declared.
        assert!(
            check(
                "--workers serve=1,serve-llm=1 --model serve=resnet18,serve-llm=gpt2-tiny --rate 3 \
                 --prompt-tokens 8 --output-tokens 8 --execution serve=eager,serve-llm=cuda-graph"
            )
            .is_ok()
        );
        assert!(
            check(
                "--workers serve-llm=1,train=2 --model serve-llm=gpt2-tiny,train=resnet18 \
                 --rate 2 --prompt-tokens 8 --output-tokens 8 \
                 --execution serve-llm=cuda-graph,train=eager"
            )
            .is_ok()
        );
        let e = check(
            "--workers serve-llm=1,train=2 --model serve-llm=gpt2-tiny,train=resnet18 --rate 2 \
             --prompt-tokens 8 --output-tokens 8 --execution serve-llm=cuda-graph",
        )
        .unwrap_err();
        assert!(
            e.starts_with("--execution|") && e.contains("names no execution for train workers"),
            "{e}"
        );
        let e =
            check("--workers serve=1,train=1 --rate 3 --execution serve=cuda-graph,train=eager")
                .unwrap_err();
        assert!(e.contains("serve runs eager only"), "{e}");
        // A cohort of both open-loop workloads takes both kinds of objective.
        assert!(
            check(&format!(
                "--workers serve=1,serve-llm=1 {} --rate 3 --slo-ms 20 --ttft-slo-ms 500 \
                 --tpot-slo-ms 50",
                "--model serve=resnet18,serve-llm=gpt2-tiny --prompt-tokens 8 --output-tokens 8"
            ))
            .is_ok()
        );
        for (extra, flag, says) in [
            ("--prompt-tokens 0", "--prompt-tokens", "at least 1 token"),
            ("--output-tokens 0", "--output-tokens", "at least 1 token"),
            // A request reserves prompt + output: 32 + 33 = 65 in a context of 64 (a decode
            // worker needs one position fewer).
            (
                "--model gpt2-tiny --prompt-tokens 32 --output-tokens 33",
                "--prompt-tokens",
                "needs 65 positions, but gpt2-tiny has a context of 64",
            ),
            (
                "--model gpt2-tiny --prompt-tokens 65 --output-tokens 1",
                "--prompt-tokens",
                "context of 64",
            ),
            (
                &format!("{tiny} --kv-budget-tokens 31"),
                "--kv-budget-tokens",
                "cannot hold one request: each reserves --prompt-tokens 16 plus --output-tokens \
                 16 = 32 tokens",
            ),
            (
                &format!("{tiny} --kv-budget-tokens 0"),
                "--kv-budget-tokens",
                "at least 1 token",
            ),
            // The default budget is --max-batch times the context.
            (
                "--model gpt2-tiny --prompt-tokens 60 --output-tokens 4 --max-batch 1 \
                 --kv-budget-tokens 63",
                "--kv-budget-tokens",
                "= 64 tokens",
            ),
            ("--model resnet18", "--model", "built-in LLM"),
            (
                &format!("{tiny} --ttft-slo-ms 0"),
                "--ttft-slo-ms",
                "positive",
            ),
            (
                &format!("{tiny} --tpot-slo-ms=-1"),
                "--tpot-slo-ms",
                "positive",
            ),
            (
                &format!("{tiny} --slo-ms 10"),
                "--slo-ms",
                "needs a serve worker",
            ),
            (
                &format!("{tiny} --find-capacity --ttft-slo-ms 500"),
                "--find-capacity",
                "needs --ttft-slo-ms and --tpot-slo-ms",
            ),
            // Lengths drawn from a range: the maximum at least the base, the longest request
            // (longest prompt plus longest output) within the context and the budget.
            (
                &format!("{tiny} --prompt-tokens-max 15"),
                "--prompt-tokens-max",
                "--prompt-tokens-max 15 is below --prompt-tokens 16",
            ),
            (
                &format!("{tiny} --output-tokens-max 0"),
                "--output-tokens-max",
                "--output-tokens-max 0 is below --output-tokens 16",
            ),
            (
                &format!("{tiny} --prompt-tokens-max 40 --output-tokens-max 25"),
                "--prompt-tokens-max",
                "the longest request, --prompt-tokens-max 40 with --output-tokens-max 25, needs \
                 65 positions, but gpt2-tiny has a context of 64",
            ),
            (
                &format!("{tiny} --output-tokens-max 49"),
                "--output-tokens-max",
                "the longest request, --prompt-tokens 16 with --output-tokens-max 49, needs 65",
            ),
            (
                &format!("{tiny} --prompt-tokens-max 24 --kv-budget-tokens 39"),
                "--kv-budget-tokens",
                "cannot hold the longest request: it reserves --prompt-tokens-max 24 plus \
                 --output-tokens 16 = 40 tokens; give at least 40",
            ),
            // The default budget, --max-batch times the context, holds any request the
            // context does; a budget of one context holds the longest.
            (
                &format!("{tiny} --output-tokens-max 48 --max-batch 1 --kv-budget-tokens 63"),
                "--kv-budget-tokens",
                "= 64 tokens",
            ),
        ] {
            let rate = if extra.contains("--find-capacity") {
                ""
            } else {
                "--rate 5"
            };
            let e = check(&format!("--workers serve-llm=1 {rate} {extra}")).unwrap_err();
            let (got, message) = e.split_once('|').unwrap();
            assert_eq!(got, flag, "{extra}: {message}");
            assert!(message.contains(says), "{extra}: {message}");
        }
        for (extra, flag, says) in [
            (
                format!("--workers serve-llm=1 {tiny}"),
                "--rate",
                "--ttft-slo-ms and --tpot-slo-ms",
            ),
            (
                "--workers train=2 --ttft-slo-ms 5".to_owned(),
                "--ttft-slo-ms",
                "needs a serve-llm worker",
            ),
            (
                format!("--workers decode=1 {tiny} --prompt-tokens-max 20"),
                "--prompt-tokens-max",
                "--prompt-tokens-max needs a serve-llm worker in the cohort",
            ),
            (
                "--workers serve=1 --rate 5 --output-tokens-max 20".to_owned(),
                "--output-tokens-max",
                "--output-tokens-max needs a serve-llm worker in the cohort",
            ),
            (
                format!("--workers decode=1 {tiny} --kv-budget-tokens 100"),
                "--kv-budget-tokens",
                "needs a serve-llm worker",
            ),
            (
                "--workers serve=1 --rate 5 --tpot-slo-ms 5".to_owned(),
                "--tpot-slo-ms",
                "needs a serve-llm worker",
            ),
            (
                "--workers serve=1 --find-capacity --ttft-slo-ms 5 --tpot-slo-ms 5".to_owned(),
                "--ttft-slo-ms",
                "needs a serve-llm worker",
            ),
        ] {
            let e = check(&extra).unwrap_err();
            let (got, message) = e.split_once('|').unwrap();
            assert_eq!(got, flag, "{extra}: {message}");
            assert!(message.contains(says), "{extra}: {message}");
        }
        // The worker refuses the other open-loop workload's flags.
        let serve = ServeFlags {
            ttft_slo_ms: Some(5.0),
            ..CohortSpec::new(&Mix::parse("serve=1").unwrap(), Mode::Timeslice).serve
        };
        let e = serve.validate_for(Workload::Serve).unwrap_err();
        assert_eq!(e.flag_name(), Some("--ttft-slo-ms"));
        for (serve, flag) in [
            (
                ServeFlags {
                    prompt_tokens_max: Some(5),
                    ..CohortSpec::new(&Mix::parse("serve=1").unwrap(), Mode::Timeslice).serve
                },
                "--prompt-tokens-max",
            ),
            (
                ServeFlags {
                    output_tokens_max: Some(5),
                    ..CohortSpec::new(&Mix::parse("serve=1").unwrap(), Mode::Timeslice).serve
                },
                "--output-tokens-max",
            ),
        ] {
            let e = serve.validate_for(Workload::Serve).unwrap_err();
            assert_eq!(e.flag_name(), Some(flag));
            assert_eq!(
                e.to_string(),
                format!("{flag} applies to --workload serve-llm, not serve")
            );
            assert!(serve.validate_for(Workload::ServeLlm).is_ok());
            let own = serve.for_workload(Workload::Serve).unwrap();
            assert_eq!((own.prompt_tokens_max, own.output_tokens_max), (None, None));
        }
        assert!(serve.validate_for(Workload::ServeLlm).is_ok());
        let e = ServeFlags {
            slo_ms: Some(5.0),
            ..serve
        }
        .validate_for(Workload::ServeLlm)
        .unwrap_err();
        assert_eq!(e.flag_name(), Some("--slo-ms"));
    }

    #[test]
    fn bad_seconds_are_refused_by_the_parser() {
        for bad in ["0", "-1", "nan", "inf", "1e300"] {
            let arg = format!("--window-s={bad}");
            let e = spec(&["--mode", "timeslice", "--workers", "train=1", &arg]).unwrap_err();
            assert!(e.contains("--window-s"), "{bad}: {e}");
        }
    }

    #[test]
    fn new_gives_the_defaults() {
        let s = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        assert_eq!(s.flags.window_s, crate::Seconds::whole(45));
        assert_eq!(s.flags.batch_size, 32);
        assert_eq!(s.mix().unwrap().len(), 2);
        assert!(s.validate().is_ok());
    }
}
