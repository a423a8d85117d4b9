//! Argument fidelity: for random cohort specs, the command each Pod of the rendered Job runs
//! (its container's `sh -c` script executed with JOB_COMPLETION_INDEX = i, and a `bench-worker`
//! that only prints its argv), parsed by bench-worker's own parser, gives back the spec: the
//! same worker flags, the serve flags for serve and serve-llm replicas only (each its own:
//! `ServeFlags::for_workload`), replica i of N, the experiment and
//! the claim's folders. Also: every YAML document the renderers write reads back (PyYAML) as
//! the manifest it was written from.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use coload_cluster::{ResourceKey, Site, kubernetes, polyaxon};
use coload_cohort_schema::{
    ByteSize, DeviceChoice, Execution, ExecutionDeclaration, InputShape, Mode, Precision,
    TimesliceInterval, Workload,
};
use coload_spec::{Arrivals, CohortSpec, Mix, Seconds, ServeFlags, WorkerFlags, WorkerPlace};
use proptest::prelude::*;

/// bench-worker's parser, as bins/bench-worker/src/cli.rs declares it.
#[derive(Debug, Parser)]
#[command(name = "bench-worker", args_override_self = true)]
struct WorkerArgs {
    #[command(flatten)]
    place: WorkerPlace,
    #[command(flatten)]
    flags: WorkerFlags,
    #[command(flatten)]
    serve: ServeFlags,
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,
    #[arg(long, short)]
    quiet: bool,
    #[arg(long, default_value = "text")]
    log_format: String,
}

fn default_serve() -> ServeFlags {
    WorkerArgs::parse_from([
        "w",
        "--experiment",
        "e",
        "--replica",
        "0",
        "--count",
        "1",
        "--workload",
        "train",
        "--out",
        "o",
        "--mode",
        "timeslice",
    ])
    .serve
}

/// Runs Pod `index`'s container command with `/mnt/benchmark-sync` mapped to `volume` and a
/// `bench-worker` that prints its argv; returns that argv.
fn pod_argv(
    container: &serde_json::Value,
    index: usize,
    volume: &Path,
    bin: &Path,
) -> Vec<OsString> {
    let map = |v: &serde_json::Value| {
        v.as_str()
            .unwrap()
            .replace("/mnt/benchmark-sync", &volume.display().to_string())
    };
    let mut argv: Vec<String> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(map)
        .collect();
    if let Some(args) = container["args"].as_array() {
        argv.extend(args.iter().map(map));
    }
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pod {index}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut words: Vec<OsString> = out
        .stdout
        .split(|b| *b == 0)
        .map(|w| OsString::from(String::from_utf8(w.to_vec()).unwrap()))
        .collect();
    words.pop(); // after the last NUL
    words
}

struct Fixture {
    dir: tempfile::TempDir,
    model: PathBuf,
    trace: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("bench-worker");
    std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\0' \"$@\"\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let model = dir.path().join("my model.pt");
    std::fs::write(&model, b"not really torchscript").unwrap();
    let trace = dir.path().join("offsets.txt");
    std::fs::write(&trace, b"0.1\n0.2\n").unwrap();
    Fixture { dir, model, trace }
}

const MODELS: [&str; 4] = [
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "train=resnet50,infer=resnet18",
];

prop_compose! {
    fn specs()(
        // No hog: a cluster backend refuses hog cohorts (kubernetes::refuse_hog).
        counts in (0u32..3, 0u32..3, 0u32..3),
        mode in 0usize..5,
        window in 1u32..200,
        lead in 1u32..20,
        warmup in 0u32..50,
        batch in 1u32..64,
        image in 32u32..300,
        precision in 0usize..2,
        seed in any::<u64>(),
        model in 0usize..6,
        graph in any::<bool>(),
        strict_device in any::<bool>(),
        telemetry in 0u32..100,
        rate in 1u32..5000,
        trace in any::<bool>(),
        uniform in any::<bool>(),
        max_batch in 1u32..128,
        delay in 0u32..100,
        slo in proptest::option::of(1u32..100),
        mps in 0usize..3,
        (llm, kv_budget, ttft, tpot) in (
            0u32..3,
            proptest::option::of(256u64..100_000),
            proptest::option::of(1u32..1000),
            proptest::option::of(1u32..100),
        ),
    ) -> (CohortSpec, bool, bool) {
        let (train, infer, serve) = counts;
        let train = if train + infer + serve + llm == 0 { 1 } else { train };
        let mut parts = Vec::new();
        for (w, n) in [
            ("serve", serve), ("serve-llm", llm), ("infer", infer), ("train", train),
        ] {
            if n > 0 { parts.push(format!("{w}={n}")); }
        }
        let mode = [Mode::Exclusive, Mode::Timeslice, Mode::Mps, Mode::Mig, Mode::MigTimeslice][mode];
        let mut s = CohortSpec::new(&Mix::parse(&parts.join(",")).unwrap(), mode);
        let f = &mut s.flags;
        f.window_s = Seconds::new(f64::from(window) / 4.0).unwrap();
        f.start_lead_s = Seconds::whole(lead);
        f.warmup_batches = warmup;
        f.batch_size = batch;
        f.image_size = image;
        f.precision = Some([Precision::Fp32, Precision::Bf16][precision]);
        f.seed = seed;
        // A serve-llm worker runs the default LLM beside the default vision model.
        let file = model >= MODELS.len() && llm == 0;
        if model < MODELS.len() && llm == 0 {
            f.model = Some(MODELS[model].parse().unwrap());
        }
        // A serve worker runs eager only; a serve-llm worker replays a graph per decode bucket.
        // Beside a serve worker, the others capture theirs through a per-workload declaration.
        f.execution = if graph && serve == 0 {
            ExecutionDeclaration::One(Execution::CudaGraph)
        } else if graph {
            let mut per = vec!["serve=eager".to_owned()];
            for (w, n) in [("serve-llm", llm), ("infer", infer), ("train", train)] {
                if n > 0 { per.push(format!("{w}=cuda-graph")); }
            }
            per.join(",").parse().unwrap()
        } else {
            ExecutionDeclaration::One(Execution::Eager)
        };
        // Two thirds of the time-sliced cohorts declare an interval, drawn from the seed.
        if matches!(mode, Mode::Timeslice | Mode::MigTimeslice) && seed % 3 != 0 {
            f.timeslice_interval = Some(TimesliceInterval::ALL[(seed % 4) as usize]);
        }
        f.strict_device = strict_device;
        f.telemetry_hz = f64::from(telemetry) / 2.0;
        f.device = DeviceChoice::Auto;
        if mode == Mode::Mps {
            match mps {
                0 => f.mps_replicas = Some(7),
                1 => f.mps_unlimited = true,
                _ => { f.mps_threads = Some(50); f.mps_memory = Some(ByteSize(20 << 30)); }
            }
        }
        if serve + llm > 0 {
            s.serve.rate = (!trace).then_some(f64::from(rate) / 8.0);
            s.serve.arrivals = if uniform { Arrivals::Uniform } else { Arrivals::Poisson };
            s.serve.max_batch = max_batch;
        }
        if serve > 0 {
            s.serve.max_queue_delay_ms = f64::from(delay) / 4.0;
            s.serve.slo_ms = slo.map(f64::from);
        }
        if llm > 0 {
            s.serve.kv_budget_tokens = kv_budget;
            s.serve.ttft_slo_ms = ttft.map(f64::from);
            s.serve.tpot_slo_ms = tpot.map(f64::from);
        }
        (s, file, serve + llm > 0 && trace)
    }
}

fn site(mode: Mode) -> Site {
    let key = match mode {
        Mode::Mig | Mode::MigTimeslice => "nvidia.com/mig-1g.18gb",
        Mode::Timeslice | Mode::Mps => "nvidia.com/gpu.shared",
        Mode::Exclusive => "nvidia.com/gpu",
    };
    Site {
        node: "gpu-node-1".into(),
        resource: ResourceKey::parse(key).unwrap(),
        image: kubernetes::DEFAULT_IMAGE.into(),
        namespace: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_pod_parses_back_into_the_spec((spec, file, trace) in specs()) {
        let fx = fixture();
        let mut spec = spec;
        if file {
            spec.flags.model = None;
            spec.flags.model_file = Some(fx.model.clone());
            spec.flags.input_shape = Some(InputShape([3, 32, 32]));
            spec.flags.num_classes = Some(10);
        }
        if trace {
            spec.serve.arrivals_file = Some(fx.trace.clone());
        }
        let valid = spec.validate();
        prop_assume!(valid.is_ok(), "{:?}", valid);
        let mix = valid.unwrap();
        let experiment = kubernetes::fresh_experiment(&spec, &mix);
        let job = kubernetes::render_job(&spec, &site(spec.flags.mode), &experiment).unwrap();
        // The staged files on the "claim", as the backend copies them there.
        let volume = fx.dir.path().join("volume");
        std::fs::create_dir_all(&volume).unwrap();
        for s in &job.staged {
            s.copy_to(&volume).unwrap();
        }
        let in_volume = |p: &Path| {
            let staged = job.staged.iter().find(|s| s.local == p).unwrap();
            volume.join(&staged.in_claim)
        };
        let container = &job.manifest["spec"]["template"]["spec"]["containers"][0];
        for (i, w) in mix.workloads().iter().enumerate() {
            let mut argv: Vec<OsString> = vec!["bench-worker".into()];
            argv.extend(pod_argv(container, i, &volume, &fx.dir.path().join("bin")));
            let parsed = WorkerArgs::try_parse_from(&argv).unwrap();
            let mut want_flags = spec.flags.clone();
            want_flags.model_file = spec.flags.model_file.as_deref().map(in_volume);
            prop_assert_eq!(&parsed.flags, &want_flags);
            prop_assert_eq!(parsed.place.replica as usize, i);
            prop_assert_eq!(parsed.place.count as usize, mix.len());
            prop_assert_eq!(parsed.place.workload, *w);
            prop_assert_eq!(&parsed.place.experiment, &experiment);
            prop_assert_eq!(&parsed.place.sync_dir, &volume);
            prop_assert_eq!(
                &parsed.place.out,
                &volume.join("coload-results").join(&experiment).join(format!("worker-{i}"))
            );
            if let Some(mut want) = spec.serve.for_workload(*w) {
                want.arrivals_file = spec.serve.arrivals_file.as_deref().map(in_volume);
                prop_assert_eq!(&parsed.serve, &want);
                if *w == Workload::ServeLlm {
                    prop_assert_eq!(parsed.serve.ttft_slo_ms, spec.serve.ttft_slo_ms);
                    prop_assert_eq!(parsed.serve.slo_ms, None);
                } else {
                    prop_assert!(!argv.iter().any(|a| a == "--ttft-slo-ms" || a == "--kv-budget-tokens"));
                }
            } else {
                prop_assert_eq!(&parsed.serve, &default_serve());
                prop_assert!(!argv.iter().any(|a| a == "--rate" || a == "--arrivals"));
            }
        }
        // The same spec as Polyaxon operations: each replica's literal argv.
        let ops = polyaxon::render_operations(&spec, &site(spec.flags.mode), &experiment).unwrap();
        prop_assert_eq!(ops.values.len(), mix.len());
        for (i, op) in ops.values.iter().enumerate() {
            let c = &op["component"]["run"]["container"];
            let mut argv: Vec<OsString> = vec!["bench-worker".into()];
            argv.extend(c["args"].as_array().unwrap().iter().map(|a| OsString::from(a.as_str().unwrap())));
            let parsed = WorkerArgs::try_parse_from(&argv).unwrap();
            let mut want_flags = spec.flags.clone();
            want_flags.model_file = job.staged.iter().find(|_| spec.flags.model_file.is_some())
                .map(|s| PathBuf::from(s.in_pod()));
            prop_assert_eq!(&parsed.flags, &want_flags);
            prop_assert_eq!(parsed.place.replica as usize, i);
            prop_assert_eq!(parsed.place.workload, mix.workloads()[i]);
        }
    }
}

/// A file whose bytes are not the rendered ones stops the Pod before the worker starts.
#[test]
fn a_changed_model_file_stops_the_pod() {
    let fx = fixture();
    let mut spec = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
    spec.flags.model_file = Some(fx.model.clone());
    spec.flags.input_shape = Some(InputShape([3, 32, 32]));
    spec.flags.num_classes = Some(10);
    let job = kubernetes::render_job(&spec, &site(Mode::Timeslice), "e-1").unwrap();
    let volume = fx.dir.path().join("volume");
    job.staged[0].copy_to(&volume).unwrap();
    std::fs::write(volume.join(&job.staged[0].in_claim), b"changed").unwrap();
    let container = &job.manifest["spec"]["template"]["spec"]["containers"][0];
    let script = container["command"][2]
        .as_str()
        .unwrap()
        .replace("/mnt/benchmark-sync", &volume.display().to_string());
    let out = Command::new("/bin/sh")
        .args(["-c", &script, "bench-worker"])
        .env("JOB_COMPLETION_INDEX", "0")
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", fx.dir.path().join("bin").display()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not the file rendered"), "{err}");
    assert!(out.stdout.is_empty(), "the worker started");
}

/// Every YAML document the renderers write reads back as the manifest it was written from.
#[test]
fn yaml_reads_back_as_the_manifest() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-tools/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/provision-tools.sh (CI does) before this test",
        python.display()
    );
    let fx = fixture();
    let mut pairs = Vec::new();
    for (k, workers) in ["serve=1,train=6", "infer=2", "train=1"].iter().enumerate() {
        let mut spec = CohortSpec::new(&Mix::parse(workers).unwrap(), Mode::Mps);
        spec.flags.mps_threads = Some(14);
        spec.flags.mps_memory = Some(ByteSize(20 << 30));
        if workers.starts_with("serve") {
            spec.serve.rate = Some(123.5);
            spec.serve.slo_ms = Some(25.0);
        } else {
            spec.flags.model_file = Some(fx.model.clone());
            spec.flags.input_shape = Some(InputShape([3, 32, 32]));
            spec.flags.num_classes = Some(10);
        }
        let job = kubernetes::render_job(&spec, &site(Mode::Mps), &format!("exp-{k}")).unwrap();
        pairs.push((job.yaml.clone(), job.manifest.clone()));
        let ops =
            polyaxon::render_operations(&spec, &site(Mode::Mps), &format!("exp-{k}")).unwrap();
        for ((_, text), value) in ops.operations.iter().zip(&ops.values) {
            pairs.push((text.clone(), value.clone()));
        }
    }
    let input = serde_json::to_string(
        &pairs
            .iter()
            .map(|(y, v)| serde_json::json!([y, v]))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let path = fx.dir.path().join("pairs.json");
    std::fs::write(&path, input).unwrap();
    let out = Command::new(&python)
        .args([
            "-c",
            "import json, sys, yaml\n\
             bad = [i for i, (y, v) in enumerate(json.load(open(sys.argv[1]))) if yaml.safe_load(y) != v]\n\
             print(bad)\nsys.exit(1 if bad else 0)",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "documents that do not read back: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
