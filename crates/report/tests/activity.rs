//! GPM activity and energy over the common interval: the `activity-*` fixtures
//! against the answers in `fixtures/README.md`, computed by hand here, and the cases that must
//! not break a summary (no GPM at all, unsupported GPM, an unreadable file, missing energy).

use std::path::{Path, PathBuf};

use coload_analysis::{Options, compare, summarize_dirs};
use coload_cohort_schema::{ActivityScope, CohortSummary, Workload};
use coload_report::{
    render_comparison_markdown, render_markdown, render_report_html, render_table,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn ok_at(dir: &Path) -> CohortSummary {
    summarize_dirs(&[dir.to_owned()], &Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

fn ok(name: &str) -> CohortSummary {
    ok_at(&fixtures().join(name))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

macro_rules! assert_close {
    ($a:expr, $b:expr) => {{
        let (a, b): (f64, f64) = ($a, $b);
        assert!(close(a, b), "{} = {a}, expected {b}", stringify!($a));
    }};
}

/// A copy of fixture `name` in a temporary folder, to break one thing in.
fn copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let from = fixtures().join(name);
    for worker in std::fs::read_dir(&from).unwrap() {
        let worker = worker.unwrap().path();
        let to = tmp.path().join(worker.file_name().unwrap());
        std::fs::create_dir(&to).unwrap();
        for f in std::fs::read_dir(&worker).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    tmp
}

#[test]
fn timeslice_activity_by_hand() {
    let s = ok("activity-timeslice-2-train");
    // Replica 1 starts 500 ms late: common [T0 + 0.5 s, T0 + 10 s].
    assert_close!(s.common_interval.seconds, 9.5);
    assert_eq!(s.gpm.len(), 1);
    let g = &s.gpm[0];
    assert_eq!(g.device, "GPU-44444444-act");
    assert_eq!(g.scope, ActivityScope::Device);
    // Replica 0's readings [k, k+1] s for k = 1..9 lie inside; its figures, not replica 1's 99 %.
    assert_eq!(g.replica, Some(0));
    assert_eq!(g.samples, 9);
    assert_eq!(g.interval_s, Some(1.0));
    let occ = g.metrics.sm_occupancy_pct.unwrap();
    assert_close!(occ.mean, 25.0);
    assert_close!(occ.max, 29.0);
    let sm = g.metrics.sm_util_pct.unwrap();
    assert_close!(sm.mean, 55.0);
    assert_close!(sm.max, 59.0);
    assert_close!(g.metrics.dram_bw_util_pct.unwrap().mean, 15.0);
    assert_close!(g.metrics.pcie_rx_bytes_per_s.unwrap().mean, 4_194_304.0);
    assert!(g.metrics.nvlink_rx_bytes_per_s.is_none());
    assert!(g.reason.is_none());

    // 300 W for [0.5, 5] s and 500 W for [5, 10] s: 1350 + 2500 = 3850 J.
    let e = s.energy.as_ref().unwrap();
    assert_eq!(e.scope, ActivityScope::Device);
    assert_close!(e.joules, 3850.0);
    assert_close!(e.mean_power_w, 3850.0 / 9.5);
    assert_eq!(e.devices.len(), 1);
    assert_eq!(e.devices[0].replica, 0);
    // 19 kept batches of 32 samples per worker.
    let train = &s.groups[&Workload::Train];
    assert_close!(train.samples_per_device_joule.unwrap(), 1216.0 / 3850.0);
    assert!(
        s.warnings.iter().all(|w| w.kind == "few_batches"),
        "{:?}",
        s.warnings
    );
    assert!(s.caveats[0].contains("under time-slicing and MPS"));
}

#[test]
fn mig_activity_by_hand() {
    let s = ok("activity-mig-2-train");
    let got: Vec<(&str, ActivityScope, Option<u32>, u64)> = s
        .gpm
        .iter()
        .map(|g| (g.device.as_str(), g.scope, g.replica, g.samples))
        .collect();
    assert_eq!(
        got,
        [
            ("GPU-55555555-mig", ActivityScope::Device, Some(0), 10),
            ("MIG-55550000-mig", ActivityScope::Mig, Some(0), 10),
            ("MIG-55550001-mig", ActivityScope::Mig, None, 0),
        ]
    );
    assert_close!(s.gpm[0].metrics.sm_occupancy_pct.unwrap().mean, 30.0);
    assert_close!(s.gpm[1].metrics.sm_occupancy_pct.unwrap().mean, 12.0);
    assert_close!(s.gpm[1].metrics.dram_bw_util_pct.unwrap().max, 8.0);
    // Replica 1 could not read GPM; its worker.json says why, once, and so does the summary.
    let why = s.gpm[2].reason.as_deref().unwrap();
    assert!(why.contains("does not have permission"), "{why}");
    assert!(s.warnings.iter().all(|w| !w.message.contains("permission")));
    // 400 W over 10 s; 2 x 20 batches of 32 samples.
    let e = s.energy.as_ref().unwrap();
    assert_close!(e.joules, 4000.0);
    assert_close!(
        s.groups[&Workload::Train].samples_per_device_joule.unwrap(),
        1280.0 / 4000.0
    );
}

#[test]
fn cohorts_from_before_gpm_have_none_and_read_as_before() {
    let s = ok("homogeneous-4-train");
    assert!(s.gpm.is_empty() && s.energy.is_none());
    assert!(
        s.groups[&Workload::Train]
            .samples_per_device_joule
            .is_none()
    );
    assert!(!render_table(&s).contains("GPU activity"));
    let json = serde_json::to_value(&s).unwrap();
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("gpm");
    old.as_object_mut().unwrap().remove("energy");
    let back: CohortSummary = serde_json::from_value(old).unwrap();
    assert_eq!(back, s);
}

#[test]
fn an_unreadable_gpm_file_is_a_warning_and_the_next_replica_stands_in() {
    let tmp = copy("activity-timeslice-2-train");
    std::fs::write(
        tmp.path().join("worker-0/gpm.jsonl"),
        "{\"scope\":\"device\",oops\n",
    )
    .unwrap();
    let s = ok_at(tmp.path());
    let w: Vec<&str> = s
        .warnings
        .iter()
        .filter(|w| w.kind == "activity_unreadable")
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(w.len(), 1, "{:?}", s.warnings);
    assert!(w[0].contains("worker-0/gpm.jsonl:1:"), "{}", w[0]);
    // Replica 1's readings [k + 0.5, k + 1.5] s for k = 0..8 stand in.
    assert_eq!(s.gpm[0].replica, Some(1));
    assert_eq!(s.gpm[0].samples, 9);
    assert_close!(s.gpm[0].metrics.sm_occupancy_pct.unwrap().mean, 99.0);
    // The rates are untouched.
    assert_eq!(s.workers[0].samples, 608);
}

#[test]
fn gpm_unsupported_everywhere_is_a_reason_not_a_warning() {
    let tmp = copy("activity-mig-2-train");
    std::fs::remove_file(tmp.path().join("worker-0/gpm.jsonl")).unwrap();
    let path = tmp.path().join("worker-0/worker.json");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    report["gpm"] = serde_json::json!({
        "interval_s": 1.0, "supported": false,
        "reason": "this GPU does not support GPM (it needs Hopper or later)", "scopes": []
    });
    std::fs::write(&path, report.to_string()).unwrap();
    let s = ok_at(tmp.path());
    assert_eq!(s.gpm.len(), 3);
    assert!(s.gpm.iter().all(|g| g.samples == 0 && g.replica.is_none()));
    assert_eq!(
        s.gpm[0].reason.as_deref(),
        Some("this GPU does not support GPM (it needs Hopper or later)")
    );
    assert!(
        s.warnings.iter().all(|w| w.kind == "few_batches"),
        "{:?}",
        s.warnings
    );
    // Energy does not depend on GPM.
    assert!(s.energy.is_some());
    let cmp = compare(std::slice::from_ref(&s), &[]).unwrap();
    assert!(cmp.cohorts[0].gpm.is_none());
    assert!(cmp.cohorts[0].joules.is_some());
}

#[test]
fn energy_that_does_not_cover_the_interval_leaves_the_cohort_without_joules() {
    let tmp = copy("activity-timeslice-2-train");
    // Keep only the readings before T0 + 5 s: the end of the interval is not surrounded.
    let path = tmp.path().join("worker-0/telemetry.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(60).collect();
    std::fs::write(&path, kept.join("\n")).unwrap();
    let s = ok_at(tmp.path());
    assert!(s.energy.is_none());
    assert!(
        s.groups[&Workload::Train]
            .samples_per_device_joule
            .is_none()
    );
    // One GPU, none with energy: nothing to be incomplete about.
    assert!(s.warnings.iter().all(|w| w.kind != "energy_incomplete"));
    assert!(!s.gpm.is_empty());
}

#[test]
fn the_why_view_sits_beside_rate_and_tail() {
    let ts = ok("activity-timeslice-2-train");
    let mig = ok("activity-mig-2-train");
    let cmp = compare(&[ts.clone(), mig.clone()], &[]).unwrap();
    let c = &cmp.cohorts[0];
    assert_close!(c.gpm.unwrap().sm_occupancy_pct.unwrap().mean, 25.0);
    assert_close!(c.joules.unwrap(), 3850.0);
    assert_close!(
        c.groups[&Workload::Train].samples_per_device_joule.unwrap(),
        1216.0 / 3850.0
    );
    let md = render_comparison_markdown(&cmp);
    assert!(md.contains("## Why: GPU activity and energy"), "{md}");
    // mig sorts before timeslice.
    let why = &md[md.find("## Why").unwrap()..md.find("## Repeats").unwrap()];
    assert!(why.find("mig-2-train").unwrap() < why.find("timeslice-2-train").unwrap());
    insta::assert_snapshot!("activity_why_markdown", why);
    let html = render_report_html(&cmp);
    assert!(
        html.contains("<h2 id=\"why-gpu-activity-and-energy\">Why: GPU activity and energy</h2>")
    );
    assert!(
        html.contains("<td>25.0</td>"),
        "SM occupancy cell in the HTML"
    );
    insta::assert_snapshot!("activity_timeslice_table", render_table(&ts));
    insta::assert_snapshot!("activity_mig_markdown", render_markdown(&mig));
    insta::assert_json_snapshot!("activity_mig_summary_json", mig);
}

/// Sets `device.<field>` of every worker of the copied cohort at `dir`.
fn set_device_field(dir: &Path, field: &str, value: &[serde_json::Value]) {
    for (i, v) in value.iter().enumerate() {
        let path = dir.join(format!("worker-{i}/worker.json"));
        let mut report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        report["device"][field] = v.clone();
        std::fs::write(&path, report.to_string()).unwrap();
    }
}

#[test]
fn compute_instances_of_one_gpu_instance_get_its_gpm_and_memory_once() {
    // Both workers' MIG devices are compute instances of GPU instance 7: one GPM
    // entry and one memory entry for the instance, and mode mig does not fit.
    let tmp = copy("activity-mig-2-train");
    set_device_field(tmp.path(), "mig_gpu_instance_id", &[7.into(), 7.into()]);
    let s = ok_at(tmp.path());
    let instance = "GPU-55555555-mig GPU instance 7 (MIG-55550000-mig, MIG-55550001-mig)";
    let rows: Vec<(&str, ActivityScope, Option<u32>, u64)> = s
        .gpm
        .iter()
        .map(|g| (g.device.as_str(), g.scope, g.replica, g.samples))
        .collect();
    assert_eq!(
        rows,
        [
            ("GPU-55555555-mig", ActivityScope::Device, Some(0), 10),
            (instance, ActivityScope::Mig, Some(0), 10),
        ]
    );
    assert_eq!(s.colocation.devices.len(), 1);
    assert_eq!(s.colocation.devices[0].device, instance);
    assert_eq!(s.colocation.devices[0].replicas, [0, 1]);
    assert_eq!(s.colocation.fits_mode, Some(false));
    assert!(
        s.warnings.iter().any(|w| w.kind == "placement_mismatch"
            && w.message
                .contains("compute instances sharing one GPU instance")),
        "{:?}",
        s.warnings
    );
    // Refused under --strict, as every placement mismatch.
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    let err = summarize_dirs(&[tmp.path().to_owned()], &strict).unwrap_err();
    assert!(err.to_string().contains("GPU instance 7"), "{err}");

    // Distinct instances: one entry each, as before.
    set_device_field(tmp.path(), "mig_gpu_instance_id", &[7.into(), 8.into()]);
    let s = ok_at(tmp.path());
    assert_eq!(s.gpm.len(), 3);
    assert_eq!(s.gpm[1].device, "MIG-55550000-mig");
    assert_eq!(s.colocation.fits_mode, Some(true));
}

#[test]
fn a_mig_cohort_of_mixed_profiles_is_flagged_and_refused_under_strict() {
    let tmp = copy("activity-mig-2-train");
    set_device_field(
        tmp.path(),
        "mig_profile",
        &["1g.18gb".into(), "2g.35gb".into()],
    );
    let s = ok_at(tmp.path());
    assert_eq!(s.colocation.fits_mode, Some(false));
    let w = s
        .warnings
        .iter()
        .find(|w| w.kind == "placement_mismatch")
        .unwrap();
    assert!(w.message.contains("MIG profiles differ"), "{}", w.message);
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    assert!(summarize_dirs(&[tmp.path().to_owned()], &strict).is_err());
}
