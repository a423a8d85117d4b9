//! Models and executions in the analysis: a mixed cohort that declared one model per workload
//! is summarized with each group labelled by its model, a worker that ran another model is
//! refused naming the field, a baseline of another model or execution is flagged, and repeats
//! never mix models or executions. Built from the synthetic fixtures (`fixtures/`), edited in a
//! temporary copy.

use std::path::{Path, PathBuf};

use coload_analysis::{AnalysisError, Options, compare, summarize_dirs};
use coload_cohort_schema::{CohortSummary, DeclaredShare, Execution, Mode, SharePolicy, Workload};
use coload_report::render_markdown;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn ok(name: &str) -> CohortSummary {
    summarize_dirs(&[fixtures().join(name)], &Options::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A copy of fixture `name` whose worker.json files `edit` changes (given the worker's folder
/// name, its workload and its config as JSON).
fn edited(name: &str, edit: impl Fn(&str, &str, &mut serde_json::Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let from = entry.unwrap().path();
        let to = dir.path().join(from.file_name().unwrap());
        std::fs::create_dir_all(&to).unwrap();
        for file in std::fs::read_dir(&from).unwrap() {
            let file = file.unwrap().path();
            std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
        }
        let report = to.join("worker.json");
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let workload = value["config"]["workload"].as_str().unwrap().to_owned();
        let folder = from.file_name().unwrap().to_string_lossy().into_owned();
        edit(&folder, &workload, &mut value["config"]);
        std::fs::write(&report, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    }
    dir
}

/// Declares `train=resnet50,infer=mobilenet_v2` and runs each worker's declared model.
fn declare(_folder: &str, workload: &str, config: &mut serde_json::Value) {
    config["model_by_workload"] = serde_json::json!({"train": "resnet50", "infer": "mobilenet_v2"});
    config["model"] = serde_json::json!(if workload == "train" {
        "resnet50"
    } else {
        "mobilenet_v2"
    });
}

#[test]
fn a_mixed_cohort_with_one_model_per_workload_is_labelled_by_group() {
    let dir = edited("mixed-1infer-6train", declare);
    let s = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap();
    assert_eq!(
        s.groups[&Workload::Train].model.as_deref(),
        Some("resnet50")
    );
    assert_eq!(
        s.groups[&Workload::Infer].model.as_deref(),
        Some("mobilenet_v2")
    );
    assert!(s.workers.iter().all(|w| w.model.is_some()));
    let md = render_markdown(&s);
    assert!(
        md.contains("models train resnet50, infer mobilenet_v2, eager"),
        "{md}"
    );
    assert!(md.contains("| train resnet50 |"), "{md}");
}

#[test]
fn a_worker_that_ran_another_model_than_declared_is_refused_naming_the_field() {
    let dir = edited("mixed-1infer-6train", |folder, workload, config| {
        declare(folder, workload, config);
        if folder == "worker-3" {
            config["model"] = serde_json::json!("resnet18");
        }
    });
    let err = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap_err();
    assert!(matches!(err, AnalysisError::Cohort(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("replica 3's config differs")
            && text.contains("model resnet18 != resnet50 (declared for train)"),
        "{text}"
    );
}

#[test]
fn the_execution_is_compared_like_any_other_field() {
    let dir = edited("homogeneous-4-train", |folder, _, config| {
        if folder == "worker-2" {
            config["execution"] = serde_json::json!("cuda-graph");
        }
    });
    let text = summarize_dirs(&[dir.path().to_owned()], &Options::default())
        .unwrap_err()
        .to_string();
    assert!(text.contains("execution cuda-graph != eager"), "{text}");
}

#[test]
fn a_baseline_of_another_model_or_execution_is_flagged() {
    let cohort = ok("repeat-a");
    let mut base = ok("solo-train");
    base.workers[0].model = Some("resnet50".into());
    base.groups.get_mut(&Workload::Train).unwrap().model = Some("resnet50".into());
    let cmp = compare(std::slice::from_ref(&cohort), &[base.clone()]).unwrap();
    let warning = cmp
        .warnings
        .iter()
        .find(|w| w.kind == "baseline_config")
        .expect("a baseline_config warning");
    assert!(
        warning.message.contains("model resnet18 != resnet50"),
        "{}",
        warning.message
    );
    assert_eq!(
        cmp.baselines[&Workload::Train].model.as_deref(),
        Some("resnet50")
    );

    let mut base = ok("solo-train");
    base.config.execution = Execution::CudaGraph;
    let cmp = compare(std::slice::from_ref(&cohort), &[base]).unwrap();
    let warning = cmp
        .warnings
        .iter()
        .find(|w| w.kind == "baseline_config")
        .expect("a baseline_config warning");
    assert!(
        warning.message.contains("execution eager != cuda-graph"),
        "{}",
        warning.message
    );
    assert_eq!(
        cmp.baselines[&Workload::Train].execution,
        Execution::CudaGraph
    );

    // The same model and execution: no warning.
    let cmp = compare(std::slice::from_ref(&cohort), &[ok("solo-train")]).unwrap();
    assert!(cmp.warnings.iter().all(|w| w.kind != "baseline_config"));
}

#[test]
fn repeats_never_mix_models_or_executions() {
    let a = ok("repeat-a");
    let mut b = ok("repeat-b");
    b.config.model = "resnet50".into();
    b.groups.get_mut(&Workload::Train).unwrap().model = Some("resnet50".into());
    let mut c = ok("repeat-c");
    c.config.execution = Execution::CudaGraph;
    let cmp = compare(&[a, b, c], &[]).unwrap();
    assert_eq!(cmp.repeats.len(), 3, "three shapes: {:?}", cmp.repeats);
    assert_eq!(cmp.repeats[1].models[&Workload::Train], "resnet50");
    assert_eq!(cmp.repeats[2].execution, Execution::CudaGraph);
    assert_eq!(cmp.cohorts[2].execution, Execution::CudaGraph);
    assert_eq!(
        cmp.cohorts[1].groups[&Workload::Train].model.as_deref(),
        Some("resnet50")
    );
}

#[test]
fn repeats_never_mix_mps_shares() {
    let share = |name: &str, s: DeclaredShare| {
        let mut c = ok(name);
        c.mode = Mode::Mps;
        c.config.mode = Mode::Mps;
        c.share = Some(s);
        c
    };
    let plugin = DeclaredShare {
        policy: SharePolicy::Replicas,
        replicas: Some(7),
        active_thread_percentage: Some(14),
        pinned_memory_limit_bytes: Some(20_538 << 20),
    };
    let cohorts = [
        share("repeat-a", plugin),
        share("repeat-b", DeclaredShare::unlimited()),
        share("repeat-c", plugin),
    ];
    let cmp = compare(&cohorts, &[]).unwrap();
    assert_eq!(cmp.repeats.len(), 2, "two policies: {:?}", cmp.repeats);
    assert_eq!(cmp.repeats[0].experiments.len(), 2);
    assert_eq!(cmp.repeats[0].share, Some(plugin));
    assert_eq!(cmp.repeats[1].share, Some(DeclaredShare::unlimited()));
    // Without a study's policy names, the report tells the two shares apart by label.
    let page = coload_report::render_comparison_markdown(&cmp);
    assert!(page.contains("mps (replicas 7)"), "{page}");
    assert!(page.contains("mps (unlimited)"), "{page}");
}

/// MIG cohorts of different profiles are different shapes (a 3g slice is not a 1g
/// slice), so repeats never pool them, and reports label MIG rows by profile as they label MPS
/// rows by share.
#[test]
fn repeats_never_mix_mig_profiles_and_rows_are_labelled_by_profile() {
    let mig = |name: &str, profile: &str| {
        let mut c = ok(name);
        c.mode = Mode::Mig;
        c.config.mode = Mode::Mig;
        c.colocation.mig_profiles = vec![profile.to_owned()];
        c
    };
    let cohorts = [
        mig("repeat-a", "1g.18gb"),
        mig("repeat-b", "3g.71gb"),
        mig("repeat-c", "1g.18gb"),
    ];
    let cmp = compare(&cohorts, &[]).unwrap();
    assert_eq!(cmp.repeats.len(), 2, "two profiles: {:?}", cmp.repeats);
    assert_eq!(cmp.repeats[0].mig_profile.as_deref(), Some("1g.18gb"));
    assert_eq!(cmp.repeats[0].experiments.len(), 2);
    assert_eq!(cmp.repeats[1].mig_profile.as_deref(), Some("3g.71gb"));
    assert_eq!(cmp.cohorts[1].mig_profile.as_deref(), Some("3g.71gb"));
    let page = coload_report::render_comparison_markdown(&cmp);
    assert!(page.contains("mig (1g.18gb)"), "{page}");
    assert!(page.contains("mig (3g.71gb)"), "{page}");
}
