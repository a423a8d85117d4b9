//! One study per folder, and nothing left running: a second study on a running study's folder
//! is refused naming its pid; a study killed with SIGKILL takes its cohort and the cohort's
//! workers with it, and the folder is free for a resume once they are gone; and a study folder
//! refuses another plan naming the one it holds. With stand-in workers that only wait, at the
//! process seam.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::COHORT;

const ONE_COHORT: &str = r#"
name = "one"
[flags]
window_s = 2
start_lead_s = 1
join_timeout_s = 60
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=2"
"#;

/// A stand-in bench-worker that records its pid in `$COLOAD_TEST_PIDS` and waits, deaf to
/// SIGTERM and SIGINT: only SIGKILL ends it.
fn waiting_worker(dir: &Path) -> PathBuf {
    let fake = dir.join("waiting-worker");
    std::fs::write(
        &fake,
        "#!/bin/sh\ntrap '' TERM INT\necho $$ >> \"$COLOAD_TEST_PIDS\"\nexec sleep 600\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    fake
}

fn study(dir: &Path, plan: &Path, out: &Path, worker: &Path) -> Command {
    let listing = dir.join("no-gpu.txt");
    std::fs::write(&listing, "").unwrap();
    let mut cmd = Command::new(COHORT);
    cmd.arg("study")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .arg("--node-listing")
        .arg(&listing)
        .arg("--worker-bin")
        .arg(worker)
        .env("COLOAD_TEST_PIDS", dir.join("pids"))
        .stdin(Stdio::null());
    cmd
}

/// Whether `pid` is a process that has not ended (a zombie has ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
        })
        .unwrap_or(false)
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_study_leaves_nothing_running_and_a_running_one_keeps_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("one.toml");
    std::fs::write(&plan, ONE_COHORT).unwrap();
    let out = tmp.path().join("s");
    let worker = waiting_worker(tmp.path());
    let pids_file = tmp.path().join("pids");
    let mut first = study(tmp.path(), &plan, &out, &worker)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = || -> Vec<u32> {
        std::fs::read_to_string(&pids_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    wait_until("both workers start", Duration::from_secs(120), || {
        pids().len() == 2
    });

    // A second study on the folder while the first runs.
    let second = study(tmp.path(), &plan, &out, &worker).output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("the study of pid {}", first.id())) && stderr.contains("in use"),
        "{stderr}"
    );

    // SIGKILL: no cleanup runs in the study; its cohort and workers must end anyway.
    first.kill().unwrap();
    first.wait().unwrap();
    let workers = pids();
    wait_until(
        "the killed study's workers end",
        Duration::from_secs(10),
        || workers.iter().all(|p| !alive(*p)),
    );

    // Nothing holds the folder now: a resume runs (its workers are the same stand-ins; stop it
    // once they started, by SIGKILL again).
    std::fs::remove_file(&pids_file).unwrap();
    let mut resume = study(tmp.path(), &plan, &out, &worker)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the resume starts its workers",
        Duration::from_secs(120),
        || pids().len() == 2,
    );
    resume.kill().unwrap();
    resume.wait().unwrap();
    let workers = pids();
    wait_until(
        "the resumed study's workers end",
        Duration::from_secs(10),
        || workers.iter().all(|p| !alive(*p)),
    );
    // The killed run's folder was set aside, not run beside.
    assert!(
        out.join("cohorts/timeslice-train2-r1.interrupted-1")
            .is_dir()
    );
}

/// A different plan with the `--out` of an existing study exited 0 and replaced its index,
/// plan.toml and report.
#[test]
fn another_plan_into_a_study_folder_is_refused_naming_the_recorded_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("plan.toml"), ONE_COHORT).unwrap();
    let other = tmp.path().join("other.toml");
    std::fs::write(
        &other,
        ONE_COHORT.replace("name = \"one\"", "name = \"other\""),
    )
    .unwrap();
    let worker = waiting_worker(tmp.path());
    let o = study(tmp.path(), &other, &out, &worker).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("belongs to plan `one`"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("plan.toml")).unwrap(),
        ONE_COHORT
    );
    assert!(!out.join("index.json").exists());
}
