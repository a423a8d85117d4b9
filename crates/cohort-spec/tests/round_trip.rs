//! Every flag of every door survives the trips a spec makes: spec -> argv -> spec (what a
//! launcher gives a worker or `bench-cohort`), and spec -> plan TOML -> spec (what a study plan
//! says). Over random specs, with every field away from its default somewhere.

use clap::Parser;
use coload_cohort_schema::{
    ByteSize, DeviceChoice, Execution, ExecutionDeclaration, InputShape, MemoryFormat, Mode,
    ModelDeclaration, Precision, TimesliceInterval, Workload,
};
use coload_spec::{
    Arrivals, CapacityFlags, ClusterFlags, CohortSpec, Mix, Seconds, ServeFlags, WorkerFlags,
    WorkerPlace, plan, to_argv,
};
use proptest::prelude::*;

#[derive(Debug, Parser)]
struct CohortDoor {
    #[command(flatten)]
    spec: CohortSpec,
}

#[derive(Debug, Parser)]
struct WorkerDoor {
    #[command(flatten)]
    place: WorkerPlace,
    #[command(flatten)]
    flags: WorkerFlags,
    #[command(flatten)]
    serve: ServeFlags,
}

fn seconds() -> impl Strategy<Value = Seconds> {
    prop_oneof![
        (1u32..4000).prop_map(Seconds::whole),
        (0.001f64..1e6).prop_map(|s| Seconds::new(s).unwrap()),
    ]
}

fn positive() -> impl Strategy<Value = f64> {
    prop_oneof![(1u32..100_000).prop_map(f64::from), 0.001f64..1e5]
}

fn mix() -> impl Strategy<Value = Mix> {
    (
        0usize..7,
        1u32..4,
        prop::sample::select(vec![Workload::Train, Workload::Infer]),
    )
        .prop_map(|(serve, n, other)| {
            let text = match serve {
                0 => format!("{other}={n}"),
                1 => format!("serve=1,{other}={n}"),
                2 => format!("hog=1,{other}={n}"),
                3 => format!("decode={n},{other}=1"),
                4 => format!("serve-llm={n}"),
                5 => format!("serve-llm=1,serve=1,{other}={n}"),
                _ => format!("infer={n},train=2"),
            };
            Mix::parse(&text).unwrap()
        })
}

/// The MPS share flags: none, replicas, unlimited, or threads and memory.
#[derive(Debug, Clone, Copy)]
enum Share {
    None,
    Replicas(u32),
    Unlimited,
    Explicit(u32, u64),
}

fn share() -> impl Strategy<Value = Share> {
    prop_oneof![
        Just(Share::None),
        (1u32..=100).prop_map(Share::Replicas),
        Just(Share::Unlimited),
        (1u32..=100, 1u64..200_000).prop_map(|(p, mib)| Share::Explicit(p, mib << 20)),
    ]
}

/// A TorchScript file: its path, input shape and classes.
type ModelFileFlags = (String, [u32; 3], u32);

fn model() -> impl Strategy<Value = (Option<ModelDeclaration>, Option<ModelFileFlags>)> {
    prop_oneof![
        Just((None, None)),
        prop::sample::select(vec!["resnet18", "resnet50", "mobilenet_v2"])
            .prop_map(|m| (Some(m.parse().unwrap()), None)),
        Just((Some("train=resnet50,infer=resnet18".parse().unwrap()), None)),
        Just((
            Some("decode=gpt2-tiny,train=resnet50".parse().unwrap()),
            None
        )),
        Just((
            Some("serve-llm=llama-tiny,train=resnet50".parse().unwrap()),
            None
        )),
        (1u32..4, 8u32..300, 1u32..1000)
            .prop_map(|(c, hw, k)| (None, Some((format!("models dir/m{k}.pt"), [c, hw, hw], k)))),
    ]
}

prop_compose! {
    fn worker_flags()(
        (mode, share) in (
            prop::sample::select(vec![
                Mode::Exclusive, Mode::Timeslice, Mode::Mps, Mode::Mig, Mode::MigTimeslice,
            ]),
            share(),
        ),
        (window_s, start_lead_s, join_timeout_s) in (seconds(), seconds(), seconds()),
        warmup_batches in 0u32..100,
        device in prop_oneof![
            Just(DeviceChoice::Auto), Just(DeviceChoice::Cpu), (0usize..8).prop_map(DeviceChoice::Cuda)
        ],
        (batch_size, image_size) in (1u32..512, 32u32..512),
        precision in prop::option::of(prop::sample::select(vec![Precision::Fp32, Precision::Bf16])),
        memory_format in prop::option::of(prop::sample::select(vec![
            MemoryFormat::Contiguous, MemoryFormat::ChannelsLast,
        ])),
        seed in 0u64..(i64::MAX as u64),
        (model, file) in model(),
        graph in any::<bool>(),
        strict_device in any::<bool>(),
        hog_bytes in prop::option::of((1u64..1024).prop_map(|g| ByteSize(g << 30))),
        telemetry_hz in prop_oneof![Just(0.0), 0.1f64..1000.0],
        gpm_interval_s in prop_oneof![Just(0.0), 0.1f64..60.0],
        prompt_tokens in prop::option::of(1u32..4096),
        output_tokens in prop::option::of(1u32..4096),
    ) -> WorkerFlags {
        let share = if mode == Mode::Mps { share } else { Share::None };
        let share = if matches!((mode, share), (Mode::Mps, Share::None)) {
            Share::Unlimited
        } else {
            share
        };
        WorkerFlags {
            mode,
            window_s,
            warmup_batches,
            start_lead_s,
            join_timeout_s,
            device,
            batch_size,
            image_size,
            precision,
            memory_format,
            seed,
            model,
            model_file: file.as_ref().map(|f| f.0.clone().into()),
            input_shape: file.as_ref().map(|f| InputShape(f.1)),
            num_classes: file.as_ref().map(|f| f.2),
            // One execution, or (a third of the graph cases) one per workload.
            execution: match (graph, seed % 3) {
                (false, _) => ExecutionDeclaration::One(Execution::Eager),
                (true, 0) => "serve-llm=cuda-graph,train=eager,serve=eager".parse().unwrap(),
                (true, _) => ExecutionDeclaration::One(Execution::CudaGraph),
            },
            strict_device,
            mps_replicas: match share { Share::Replicas(n) => Some(n), _ => None },
            mps_unlimited: matches!(share, Share::Unlimited),
            mps_threads: match share { Share::Explicit(p, _) => Some(p), _ => None },
            mps_memory: match share { Share::Explicit(_, b) => Some(ByteSize(b)), _ => None },
            // Drawn from the seed: a time-sliced mode takes any interval, or none.
            timeslice_interval: matches!(mode, Mode::Timeslice | Mode::MigTimeslice)
                .then(|| TimesliceInterval::ALL.get((seed % 5) as usize).copied())
                .flatten(),
            hog_bytes,
            telemetry_hz,
            gpm_interval_s,
            prompt_tokens,
            output_tokens,
        }
    }
}

prop_compose! {
    fn serve_flags()(
        rate in prop::option::of(positive()),
        trace in any::<bool>(),
        uniform in any::<bool>(),
        max_batch in 1u32..256,
        max_queue_delay_ms in prop_oneof![Just(0.0), 0.01f64..100.0],
        slo_ms in prop::option::of(positive()),
        kv_budget_tokens in prop::option::of(1u64..1_000_000),
        prompt_tokens_max in prop::option::of(1u32..100_000),
        output_tokens_max in prop::option::of(1u32..100_000),
        ttft_slo_ms in prop::option::of(positive()),
        tpot_slo_ms in prop::option::of(positive()),
    ) -> ServeFlags {
        // A trace replaces the rate (clap refuses both).
        let (rate, arrivals_file) = if trace && rate.is_none() {
            (None, Some("traces/a b.txt".into()))
        } else {
            (rate, None)
        };
        ServeFlags {
            rate,
            arrivals: if uniform { Arrivals::Uniform } else { Arrivals::Poisson },
            arrivals_file,
            max_batch,
            max_queue_delay_ms,
            slo_ms,
            kv_budget_tokens,
            prompt_tokens_max,
            output_tokens_max,
            ttft_slo_ms,
            tpot_slo_ms,
        }
    }
}

prop_compose! {
    fn spec()(
        mix in mix(),
        as_count in any::<bool>(),
        flags in worker_flags(),
        serve in serve_flags(),
        slo_quantile in prop::option::of(0.5f64..0.9999),
        find_capacity in any::<bool>(),
        (rate_min, rate_max) in (positive(), positive()),
        max_probes in 2u32..40,
        capacity_tolerance in 0.001f64..1.0,
        strict in any::<bool>(),
        schedule_timeout_s in seconds(),
        ttl_after_finished_s in seconds(),
    ) -> CohortSpec {
        let uniform = mix.workloads().iter().all(|w| *w == mix.workloads()[0]);
        let (workers, count, workload) = if as_count && uniform {
            (None, Some(mix.len() as u32), Some(mix.workloads()[0]))
        } else {
            (Some(mix), None, None)
        };
        CohortSpec {
            workers,
            count,
            workload,
            capacity: CapacityFlags {
                slo_quantile,
                find_capacity,
                rate_min,
                rate_max,
                max_probes,
                capacity_tolerance,
            },
            flags,
            serve,
            strict,
            cluster: ClusterFlags {
                schedule_timeout_s,
                ttl_after_finished_s,
            },
        }
    }
}

fn parse<P: Parser>(argv: Vec<String>) -> Result<P, clap::Error> {
    let mut full: Vec<String> = vec!["door".into()];
    full.extend(argv);
    P::try_parse_from(full)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn spec_argv_spec(spec in spec()) {
        let argv = to_argv(&spec).unwrap();
        let back: CohortDoor = parse(argv.clone())
            .map_err(|e| TestCaseError::fail(format!("{e} in {argv:?}")))?;
        prop_assert_eq!(back.spec, spec);
    }

    #[test]
    fn spec_plan_toml_spec(spec in spec()) {
        let table = plan::to_table(&spec).unwrap();
        // Through the text, as a plan file holds it.
        let text = toml::to_string(&table).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let mix = spec.mix().unwrap();
        let mut back = CohortSpec::new(&mix, spec.flags.mode);
        // The reserved keys come from elsewhere (the cohort's `workers`, the policy, the node).
        back.workers = spec.workers.clone();
        back.count = spec.count;
        back.workload = spec.workload;
        back.flags.device = spec.flags.device;
        for (key, value) in &table {
            plan::overlay(&mut back, key, value)
                .map_err(|e| TestCaseError::fail(format!("{key}: {e}\n{text}")))?;
        }
        prop_assert_eq!(back, spec);
    }

    #[test]
    fn worker_flags_argv_worker_flags(
        flags in worker_flags(),
        serve in serve_flags(),
        replica in 0u32..7,
        workload in prop::sample::select(vec![Workload::Serve, Workload::ServeLlm]),
    ) {
        let place = WorkerPlace {
            experiment: "exp-1".into(),
            replica,
            count: 7,
            workload,
            sync_dir: "/sync dir".into(),
            out: "out/worker".into(),
        };
        let mut argv = to_argv(&place).unwrap();
        argv.extend(to_argv(&flags).unwrap());
        argv.extend(to_argv(&serve).unwrap());
        let back: WorkerDoor = parse(argv).unwrap();
        prop_assert_eq!(back.place, place);
        prop_assert_eq!(back.flags, flags);
        prop_assert_eq!(back.serve, serve);
    }

    /// What a worker of each workload gets of the serve flags: its own only, the rest as
    /// they were, and nothing for a closed-loop workload.
    #[test]
    fn each_open_loop_worker_gets_its_own_serve_flags(serve in serve_flags()) {
        let s = serve.for_workload(Workload::Serve).unwrap();
        prop_assert_eq!((s.kv_budget_tokens, s.ttft_slo_ms, s.tpot_slo_ms), (None, None, None));
        prop_assert_eq!((s.prompt_tokens_max, s.output_tokens_max), (None, None));
        prop_assert_eq!((s.rate, s.slo_ms, s.max_batch), (serve.rate, serve.slo_ms, serve.max_batch));
        let l = serve.for_workload(Workload::ServeLlm).unwrap();
        prop_assert_eq!(l.slo_ms, None);
        prop_assert_eq!(
            (l.rate, l.kv_budget_tokens, l.ttft_slo_ms, l.tpot_slo_ms, l.max_batch),
            (serve.rate, serve.kv_budget_tokens, serve.ttft_slo_ms, serve.tpot_slo_ms, serve.max_batch)
        );
        prop_assert_eq!(
            (l.prompt_tokens_max, l.output_tokens_max),
            (serve.prompt_tokens_max, serve.output_tokens_max)
        );
        for w in [Workload::Train, Workload::Infer, Workload::Hog, Workload::Decode] {
            prop_assert!(serve.for_workload(w).is_none());
        }
    }
}
