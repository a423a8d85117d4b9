//! Every document of the contract: its serialized form pinned by a snapshot (a rename or a unit
//! change shows up in review), a round trip through JSON, and the version check on reading.

use coload_cohort_schema::{
    AbortRecord, AcceptedWorker, ActivityScope, BarrierTiming, BatchRecord, DeclaredShare,
    DeviceInfo, DeviceKind, EnergyReport, EnergyScopeReport, EnergySpan, Failure, FailureKind,
    GpmRecord, GpmReport, GpmScopeReport, GpmStats, GpmValues, HogReport, HogStop, HoldMarker,
    HostInfo, Identity, MIB, Max, MeanMax, MemoryInfo, MemorySource, MinMean, Mode, ObservedShare,
    ReadyRecord, RuntimeInfo, SCHEMA_VERSION, SchemaError, SharePolicy, ShareReport, Stage,
    StartRecord, Status, TelemetrySample, TelemetrySummary, WindowInfo, WorkerConfig, WorkerReport,
    WorkerWarning, Workload, read_worker_report, write_json_atomic,
};
use std::collections::BTreeMap;

use coload_cohort_schema::{Execution, MemoryFormat, ModelFile, TORCHSCRIPT_MODEL};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn config() -> WorkerConfig {
    WorkerConfig {
        seed: 7,
        execution: Execution::CudaGraph,
        parameter_count: Some(11_689_512),
        model_by_workload: Some(BTreeMap::from([
            (Workload::Train, "resnet50".to_owned()),
            (Workload::Infer, "resnet18".to_owned()),
        ])),
        ..WorkerConfig::article(Mode::MigTimeslice, Workload::Infer, 7)
    }
}

fn device() -> DeviceInfo {
    DeviceInfo {
        kind: DeviceKind::Cuda,
        visible_devices: Some("MIG-2f5c".into()),
        gpu_uuid: Some("GPU-c10c9d0d".into()),
        gpu_name: Some("NVIDIA H200".into()),
        mig_mode: Some(true),
        mig_uuid: Some("MIG-2f5c".into()),
        mig_profile: Some("1g.18gb".into()),
        memory_total_bytes: Some(19_327_352_832),
        driver_version: Some("580.159.04".into()),
        cuda_version: Some("13.0".into()),
        libtorch_version: Some("2.11.0".into()),
        cudnn_version: Some("9.19.0".into()),
        pci_bus_id: Some("00000000:00:06.0".into()),
        compute_mode: Some("default".into()),
        mig_gpu_instance_id: Some(9),
        mig_compute_instance_id: Some(0),
        mig_gpu_instance_profile: Some("1g.18gb".into()),
    }
}

fn report() -> WorkerReport {
    WorkerReport {
        schema_version: SCHEMA_VERSION,
        experiment: "mig-ts-7".into(),
        replica: 3,
        status: Status::Failed,
        failure: Some(Failure {
            stage: Stage::Window,
            kind: FailureKind::OutOfMemory,
            message: "CUDA out of memory".into(),
            at_unix_ns: None,
        }),
        config: config(),
        identity: Identity {
            hostname: "node-a".into(),
            node_name: Some("node-a".into()),
            pod_name: Some("cohort-3-abcde".into()),
            pod_uid: None,
            run_uuid: None,
            pid: 42,
        },
        device: Some(device()),
        runtime: Some(RuntimeInfo {
            inference_guard: Some("inference_mode".into()),
            cudnn_benchmark: Some(true),
            mps_client: false,
            torch_threads: Some(16),
            warmup: None,
        }),
        barrier: Some(BarrierTiming {
            ready_unix_ns: Some(1_000),
            scheduled_start_unix_ns: Some(5_000_001_000),
            actual_start_unix_ns: Some(5_000_001_800),
            lateness_ns: Some(800),
            clock_offset_ns: Some(-1_200_000),
            clock_offset_uncertainty_ns: Some(300_000),
        }),
        window: Some(WindowInfo {
            start_unix_ns: 5_000_001_800,
            end_unix_ns: 50_000_001_000,
            batches: 2,
            samples: 64,
        }),
        memory: Some(MemoryInfo {
            peak_device_bytes: 3_362_839_552,
            source: MemorySource::CachingAllocator,
        }),
        host: Some(HostInfo {
            cpus_allowed: Some(2),
            cpu_quota: Some(2.0),
            psi_cpu_some_avg10_start: Some(0.5),
            psi_cpu_some_avg10_end: Some(1.25),
            loadavg_start: Some(0.75),
            loadavg_end: Some(3.5),
        }),
        telemetry: Some(TelemetrySummary {
            scope: "device".into(),
            samples: 450,
            rate_hz: Some(10.0),
            power_w: Some(MeanMax {
                mean: 375.5,
                max: 434.0,
            }),
            temperature_c: Some(Max { max: 53.0 }),
            sm_clock_mhz: Some(MinMean {
                min: 1980.0,
                mean: 1980.0,
            }),
            memory_used_bytes: Some(Max { max: 2.07e9 }),
            gpu_util_pct: Some(MeanMax {
                mean: 97.5,
                max: 100.0,
            }),
            throttle_reasons: vec![],
        }),
        gpm: Some(gpm_report()),
        energy: Some(energy_report()),
        warnings: vec![WorkerWarning {
            kind: "gpu_shared".into(),
            message: "mode `exclusive` but 2 other compute processes share the GPU".into(),
        }],
        share: None,
        hog: None,
        serve: None,
        serve_llm: None,
        coload: None,
    }
}

/// A MIG worker's GPM: device-wide supported, its own instance not.
fn gpm_report() -> GpmReport {
    GpmReport {
        interval_s: Some(1.0),
        supported: true,
        reason: None,
        scopes: vec![
            GpmScopeReport {
                scope: ActivityScope::Device,
                gpu_instance_id: None,
                supported: true,
                reason: None,
                samples: 44,
                failed_reads: 0,
                metrics: GpmStats {
                    sm_occupancy_pct: Some(MeanMax {
                        mean: 24.5,
                        max: 26.0,
                    }),
                    dram_bw_util_pct: Some(MeanMax {
                        mean: 17.9,
                        max: 19.0,
                    }),
                    ..GpmStats::default()
                },
            },
            GpmScopeReport {
                scope: ActivityScope::Mig,
                gpu_instance_id: Some(7),
                supported: false,
                reason: Some("nvmlGpmMigSampleGet: Not Supported".into()),
                samples: 0,
                failed_reads: 0,
                metrics: GpmStats::default(),
            },
        ],
    }
}

/// A MIG worker's energy: device-wide known, no per-instance counter.
fn energy_report() -> EnergyReport {
    EnergyReport {
        scopes: vec![
            EnergyScopeReport {
                scope: ActivityScope::Device,
                window: Some(EnergySpan {
                    start_mj: 1_000_000.0,
                    end_mj: 17_875_000.0,
                    joules: 16_875.0,
                    mean_power_w: 375.0,
                }),
                reason: None,
            },
            EnergyScopeReport {
                scope: ActivityScope::Mig,
                window: None,
                reason: Some("not available for a MIG device: Not Supported".into()),
            },
        ],
    }
}

/// A hog worker under plugin-style MPS: the share it declared and what it saw.
fn hog_report() -> WorkerReport {
    let mut r = report();
    r.status = Status::Complete;
    r.failure = None;
    r.config.mode = Mode::Mps;
    r.config.workload = Workload::Hog;
    r.share = Some(ShareReport {
        declared: Some(DeclaredShare {
            policy: SharePolicy::Replicas,
            replicas: Some(7),
            active_thread_percentage: Some(14),
            pinned_memory_limit_bytes: Some(143_771 * MIB / 7 / MIB * MIB),
        }),
        mps_environment: [(
            "CUDA_MPS_PIPE_DIRECTORY".to_owned(),
            "/tmp/mps/pipe".to_owned(),
        )]
        .into_iter()
        .collect(),
        observed: Some(ObservedShare {
            memory_free_bytes: 21_367_000_000,
            memory_total_bytes: 150_110_011_392,
            sm_count: Some(18),
            physical_sm_count: Some(132),
        }),
        observed_error: None,
    });
    r.hog = Some(HogReport {
        target_bytes: None,
        step_bytes: 1 << 30,
        min_step_bytes: 64 << 20,
        granted_bytes: 21_340_000_256,
        allocations: 25,
        stopped_by: HogStop::Refused,
        refusal: Some("CUDA out of memory. Tried to allocate 1.00 GiB".into()),
        memory_free_after_bytes: Some(27_000_000),
        holding_since_unix_ns: 1_500,
        hold_interval_s: 1.0,
    });
    r
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value);
}

#[test]
fn worker_report_is_pinned_and_round_trips() {
    let r = report();
    insta::assert_json_snapshot!("worker_report", r);
    round_trip(&r);
}

#[test]
fn share_and_hog_records_are_pinned_and_round_trip() {
    let r = hog_report();
    insta::assert_json_snapshot!("hog_worker_report", r);
    round_trip(&r);
    let marker = HoldMarker {
        schema_version: SCHEMA_VERSION,
        experiment: r.experiment.clone(),
        replica: r.replica,
        hog: r.hog.clone().unwrap(),
    };
    round_trip(&marker);
    // A document written before the share and hog sections has neither and still reads.
    let mut old = serde_json::to_value(report()).unwrap();
    let fields = old.as_object_mut().unwrap();
    assert!(!fields.contains_key("share") && !fields.contains_key("hog"));
    fields.remove("warnings");
    let back: WorkerReport = serde_json::from_value(old).unwrap();
    assert_eq!((back.share, back.hog), (None, None));
}

#[test]
fn barrier_records_are_pinned_and_round_trip() {
    let ready = ReadyRecord {
        schema_version: SCHEMA_VERSION,
        experiment: "mig-ts-7".into(),
        replica: 3,
        incarnation: "0f9e2c1a-5d7b-4e1f-9a3c-2b8d6e4f1a7c".into(),
        config: config(),
        hostname: "node-a".into(),
        node_name: Some("node-a".into()),
        pid: 42,
        device: Some(device()),
        ready_unix_ns: 1_000,
    };
    let start = StartRecord {
        schema_version: SCHEMA_VERSION,
        experiment: "mig-ts-7".into(),
        count: 2,
        start_unix_ns: 5_000_001_000,
        published_unix_ns: 1_000,
        accepted: vec![
            AcceptedWorker {
                replica: 0,
                incarnation: "a".into(),
            },
            AcceptedWorker {
                replica: 1,
                incarnation: "b".into(),
            },
        ],
    };
    let abort = AbortRecord {
        schema_version: SCHEMA_VERSION,
        experiment: "mig-ts-7".into(),
        kind: FailureKind::ConfigMismatch,
        reason: "replica 4: batch_size 64 != 32".into(),
        by_replica: 0,
        published_unix_ns: 2_000,
    };
    insta::assert_json_snapshot!("ready_record", ready);
    insta::assert_json_snapshot!("start_record", start);
    insta::assert_json_snapshot!("abort_record", abort);
    round_trip(&ready);
    round_trip(&start);
    round_trip(&abort);
}

#[test]
fn lines_are_pinned_and_round_trip() {
    let batch = BatchRecord {
        index: 0,
        start_unix_ns: 5_000_001_800,
        end_unix_ns: 5_008_871_800,
        samples: 32,
        phase: None,
        sequences: None,
        kv_reserved_tokens: None,
    };
    let sample = TelemetrySample {
        t_unix_ns: 5_000_100_000,
        power_w: Some(375.5),
        sm_clock_mhz: Some(1980),
        temperature_c: Some(53),
        memory_used_bytes: Some(2_070_000_000),
        gpu_util_pct: Some(100),
        memory_util_pct: Some(41),
        throttle_reasons: Some(0),
        energy_mj: Some(1_234_567),
        mig_energy_mj: None,
    };
    let gpm = GpmRecord {
        scope: ActivityScope::Mig,
        gpu_instance_id: Some(7),
        start_unix_ns: 5_000_000_000,
        end_unix_ns: 6_000_100_000,
        metrics: GpmValues {
            graphics_util_pct: Some(82.0),
            sm_occupancy_pct: Some(24.5),
            pcie_rx_bytes_per_s: Some(1_048_576.0),
            ..GpmValues::default()
        },
    };
    // One line each, as in batches.jsonl, telemetry.jsonl and gpm.jsonl.
    insta::assert_snapshot!("batch_line", serde_json::to_string(&batch).unwrap());
    insta::assert_snapshot!("telemetry_line", serde_json::to_string(&sample).unwrap());
    insta::assert_snapshot!("gpm_line", serde_json::to_string(&gpm).unwrap());
    round_trip(&batch);
    round_trip(&sample);
    round_trip(&gpm);
}

#[test]
fn documents_from_before_gpm_and_energy_still_read() {
    // A worker.json and a telemetry line as written before GPM and energy: no gpm, no energy.
    let mut old = serde_json::to_value(report()).unwrap();
    let map = old.as_object_mut().unwrap();
    map.remove("gpm");
    map.remove("energy");
    let back: WorkerReport = serde_json::from_value(old).unwrap();
    assert_eq!(back.gpm, None);
    assert_eq!(back.energy, None);
    let line: TelemetrySample = serde_json::from_str(
        "{\"t_unix_ns\":1,\"power_w\":null,\"sm_clock_mhz\":null,\"temperature_c\":null,\
         \"memory_used_bytes\":null,\"gpu_util_pct\":null,\"memory_util_pct\":null,\
         \"throttle_reasons\":null}",
    )
    .unwrap();
    assert_eq!(line.energy_mj, None);
    // A GPM line with a metric this reader does not know and one it misses.
    let gpm: GpmRecord = serde_json::from_str(
        "{\"scope\":\"device\",\"start_unix_ns\":1,\"end_unix_ns\":2,\"sm_util_pct\":50.0,\
         \"future_metric_pct\":1.0}",
    )
    .unwrap();
    assert_eq!(gpm.metrics.sm_util_pct, Some(50.0));
    assert_eq!(gpm.metrics.dram_bw_util_pct, None);
}

#[test]
fn reading_checks_the_version_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    write_json_atomic(&path, &report()).unwrap();
    assert_eq!(read_worker_report(&path).unwrap(), report());

    let mut newer = serde_json::to_value(report()).unwrap();
    newer["schema_version"] = serde_json::json!(SCHEMA_VERSION + 1);
    std::fs::write(&path, newer.to_string()).unwrap();
    let err = read_worker_report(&path).unwrap_err();
    assert!(matches!(
        err,
        SchemaError::UnsupportedVersion {
            found: 2,
            supported: 1,
            ..
        }
    ));
    let text = err.to_string();
    assert!(text.contains("worker.json"), "{text}");
    assert!(
        text.contains("schema_version 2") && text.contains("up to 1"),
        "{text}"
    );

    std::fs::write(&path, "{\"schema_version\": 1, \"experiment\": ").unwrap();
    let text = read_worker_report(&path).unwrap_err().to_string();
    assert!(text.contains("worker.json: invalid document"), "{text}");
}

#[test]
fn a_torchscript_config_is_pinned_and_round_trips() {
    let config = WorkerConfig {
        model: TORCHSCRIPT_MODEL.into(),
        image_size: 28,
        parameter_count: Some(1_234),
        model_file: Some(ModelFile {
            sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            input_shape: [1, 28, 28],
            num_classes: 10,
        }),
        ..WorkerConfig::article(Mode::Exclusive, Workload::Train, 1)
    };
    insta::assert_json_snapshot!("torchscript_config", config);
    let back: WorkerConfig =
        serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
    assert_eq!(back, config);
}

/// A decode worker's `config.llm` and its records' `phase` are pinned; a line
/// without `phase` (every other workload's, and every document written before) reads as none.
#[test]
fn a_decode_config_and_phased_lines_are_pinned_and_round_trip() {
    let config = WorkerConfig {
        model: "gpt2-small".into(),
        batch_size: 8,
        precision: coload_cohort_schema::Precision::Bf16,
        parameter_count: Some(124_439_808),
        llm: Some(coload_cohort_schema::LlmConfig {
            model: "gpt2-small".into(),
            batch_size: 8,
            prompt_tokens: 128,
            output_tokens: 128,
            precision: coload_cohort_schema::Precision::Bf16,
            context_tokens: 1024,
            kv_cache_bytes: Some(301_989_888),
            decode_read_bytes: None,
            decode_attention: Some(coload_cohort_schema::DecodeAttention::FlashEager),
        }),
        ..WorkerConfig::article(Mode::Timeslice, Workload::Decode, 2)
    };
    insta::assert_json_snapshot!("decode_config", config);
    let back: WorkerConfig =
        serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
    assert_eq!(back, config);
    assert_eq!("decode".parse::<Workload>().unwrap(), Workload::Decode);
    assert!(Workload::Decode.is_llm() && !Workload::Infer.is_llm());

    let line = r#"{"index":1,"start_unix_ns":10,"end_unix_ns":20,"samples":8,"phase":"decode"}"#;
    let batch: BatchRecord = serde_json::from_str(line).unwrap();
    assert_eq!(batch.phase, Some(coload_cohort_schema::Phase::Decode));
    assert_eq!(serde_json::to_string(&batch).unwrap(), line);
    let old = r#"{"index":1,"start_unix_ns":10,"end_unix_ns":20,"samples":8}"#;
    let batch: BatchRecord = serde_json::from_str(old).unwrap();
    assert_eq!(batch.phase, None);
    assert_eq!(serde_json::to_string(&batch).unwrap(), old);
    assert!(
        serde_json::from_str::<BatchRecord>(&old.replace('}', r#","phase":"warmup"}"#)).is_err()
    );
}

/// A decode worker beside trainers runs another kind of model at its own precision: not a
/// difference. Two decode workers running different presets are one.
#[test]
fn llm_and_vision_workers_differ_only_in_their_models() {
    let train = WorkerConfig::article(Mode::Timeslice, Workload::Train, 3);
    let decode = WorkerConfig {
        model: "gpt2-tiny".into(),
        precision: coload_cohort_schema::Precision::Bf16,
        parameter_count: Some(136_960),
        ..WorkerConfig::article(Mode::Timeslice, Workload::Decode, 3)
    };
    assert!(decode.differences(&train).is_empty());
    assert!(train.differences(&decode).is_empty());
    let other = WorkerConfig {
        model: "llama-tiny".into(),
        ..decode.clone()
    };
    let fields: Vec<&str> = other.differences(&decode).iter().map(|d| d.field).collect();
    assert_eq!(fields, ["model"]);
}

/// `config.memory_format`: `channels-last` is written and read back; the default, contiguous,
/// is left out (so every document written before the option reads as it was written), and two
/// workers of different layouts are not one cohort.
#[test]
fn the_memory_format_is_recorded_when_not_the_default_and_compared() {
    let nhwc = WorkerConfig {
        memory_format: MemoryFormat::ChannelsLast,
        ..config()
    };
    let text = serde_json::to_string(&nhwc).unwrap();
    assert!(
        text.contains("\"memory_format\":\"channels-last\""),
        "{text}"
    );
    round_trip(&nhwc);
    let nchw = serde_json::to_value(config()).unwrap();
    assert!(nchw.get("memory_format").is_none(), "{nchw}");
    let back: WorkerConfig = serde_json::from_value(nchw).unwrap();
    assert_eq!(back.memory_format, MemoryFormat::Contiguous);
    let differences = nhwc.differences(&config());
    assert_eq!(differences.len(), 1, "{differences:?}");
    assert_eq!(
        differences[0].to_string(),
        "memory_format channels-last != contiguous"
    );
    assert_eq!(
        "channels-last".parse::<MemoryFormat>().unwrap(),
        MemoryFormat::ChannelsLast
    );
    let err = "nhwc".parse::<MemoryFormat>().unwrap_err().to_string();
    assert!(err.contains("unknown memory format `nhwc`"), "{err}");
}
