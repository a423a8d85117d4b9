//! The barrier against its failure modes, with real processes on a local directory.
//!
//! Every test spawns `coload-barrier-probe` (preflight -> ready -> await start -> sleep until the
//! start, one JSON line out, the barrier's exit code) and asserts exact exit codes, kinds and
//! message fragments. No child may outlive [`BOUND`]: one that does is killed and the test
//! fails, so nothing hangs. Timeouts are short (join 3 s, lead 1.5 s, margin 0.3 s) but every
//! assertion leaves seconds of slack for a loaded two-core CI machine.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coload_cohort_schema::exit;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

const PROBE: &str = env!("CARGO_BIN_EXE_coload-barrier-probe");

/// No probe may run longer than this; the longest scenario needs about 5 s.
const BOUND: Duration = Duration::from_secs(45);

/// A probe process, killed if the test ends (or panics) while it still runs: a stopped or hung
/// child never outlives its test.
struct Worker {
    child: Option<Child>,
    spawned: Instant,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How a probe ended.
#[derive(Debug)]
struct Outcome {
    code: i32,
    line: Value,
    stderr: String,
    elapsed: Duration,
}

impl Outcome {
    fn str(&self, key: &str) -> &str {
        self.line[key].as_str().unwrap_or("")
    }

    fn message(&self) -> &str {
        self.str("message")
    }

    fn kind(&self) -> &str {
        self.str("kind")
    }

    fn u64(&self, key: &str) -> u64 {
        self.line[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} missing in {}", self.line))
    }

    /// Asserts the exit code and kind, with the whole outcome in the failure message.
    fn expect(&self, code: u8, kind: &str) -> &Self {
        assert_eq!(
            (self.code, self.kind()),
            (i32::from(code), kind),
            "unexpected outcome: {self:#?}"
        );
        self
    }

    fn expect_started(&self) -> &Self {
        assert_eq!(self.code, 0, "unexpected outcome: {self:#?}");
        assert_eq!(self.str("status"), "started");
        self
    }

    fn expect_message(&self, fragment: &str) -> &Self {
        assert!(
            self.message().contains(fragment),
            "message lacks {fragment:?}: {self:#?}"
        );
        self
    }
}

impl Worker {
    /// Waits for the probe to exit; kills it and fails the test if it outlives [`BOUND`].
    fn finish(mut self) -> Outcome {
        let mut child = self.child.take().expect("finished twice");
        loop {
            match child.try_wait().expect("wait for the probe") {
                Some(status) => {
                    let elapsed = self.spawned.elapsed();
                    let mut stdout = String::new();
                    let mut stderr = String::new();
                    child
                        .stdout
                        .take()
                        .unwrap()
                        .read_to_string(&mut stdout)
                        .unwrap();
                    child
                        .stderr
                        .take()
                        .unwrap()
                        .read_to_string(&mut stderr)
                        .unwrap();
                    let last = stdout.lines().last().unwrap_or("");
                    let line = serde_json::from_str(last).unwrap_or_else(|e| {
                        panic!("probe printed no JSON line ({e}): {stdout:?} / {stderr:?}")
                    });
                    return Outcome {
                        code: status.code().unwrap_or(-1),
                        line,
                        stderr,
                        elapsed,
                    };
                }
                None if self.spawned.elapsed() > BOUND => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("a probe outlived its {BOUND:?} bound and was killed");
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.as_ref().unwrap().id()).unwrap())
    }
}

/// One experiment in its own temporary shared directory.
struct Cohort {
    sync: tempfile::TempDir,
    experiment: String,
    count: u32,
    join_ms: u64,
    lead_ms: u64,
    margin_ms: u64,
    /// The probe binary the commands run.
    probe: PathBuf,
    /// Never read: keeps the copy of the probe that [`Cohort::reachable_by_others`] made alive
    /// as long as the cohort.
    staging: Option<tempfile::TempDir>,
}

impl Cohort {
    fn new(count: u32) -> Self {
        Cohort {
            sync: tempfile::tempdir().unwrap(),
            experiment: "exp-1".to_owned(),
            count,
            join_ms: 3000,
            lead_ms: 1500,
            margin_ms: 300,
            probe: PathBuf::from(PROBE),
            staging: None,
        }
    }

    /// Lets a probe that runs as another user ([`as_unprivileged`]) reach its own binary and the
    /// shared directory. The clone may sit under a directory only its owner can search (root's
    /// home is mode 0700), and then so do the target directory and the probe in it.
    /// So the probe runs from a copy, and the shared directory is made, in fresh directories
    /// that every user can search.
    fn reachable_by_others(mut self) -> Self {
        let (staging, probe) = stage(Path::new(PROBE));
        self.sync = searchable_tempdir();
        self.probe = probe;
        self.staging = Some(staging);
        self
    }

    fn join_ms(mut self, ms: u64) -> Self {
        self.join_ms = ms;
        self
    }

    fn lead_ms(mut self, ms: u64) -> Self {
        self.lead_ms = ms;
        self
    }

    fn dir(&self) -> PathBuf {
        self.sync.path().join(&self.experiment)
    }

    fn command(&self, sync_dir: &Path, experiment: &str, replica: u32, extra: &[&str]) -> Command {
        let mut cmd = Command::new(&self.probe);
        cmd.arg("--sync-dir")
            .arg(sync_dir)
            .args(["--experiment", experiment])
            .args(["--replica", &replica.to_string()])
            .args(["--count", &self.count.to_string()])
            .args(["--join-timeout-ms", &self.join_ms.to_string()])
            .args(["--lead-ms", &self.lead_ms.to_string()])
            .args(["--margin-ms", &self.margin_ms.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn spawn(&self, replica: u32, extra: &[&str]) -> Worker {
        spawn(self.command(self.sync.path(), &self.experiment, replica, extra))
    }

    fn run(&self, replica: u32, extra: &[&str]) -> Outcome {
        self.spawn(replica, extra).finish()
    }

    fn read_json(&self, name: &str) -> Value {
        let text = fs::read_to_string(self.dir().join(name)).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn has(&self, name: &str) -> bool {
        self.dir().join(name).exists()
    }

    fn wait_for(&self, name: &str) {
        let path = self.dir().join(name);
        let since = Instant::now();
        while !path.exists() {
            assert!(since.elapsed() < BOUND, "{} never appeared", path.display());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether other users may search `dir` and every directory above it (the execute bit for
/// others on each), so that a process of another user can reach what lies inside.
fn searchable_by_others(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    dir.ancestors()
        .all(|d| fs::metadata(d).is_ok_and(|m| m.is_dir() && m.mode() & 0o001 != 0))
}

/// A fresh temporary directory of mode 0755 that every user can reach: under the system's
/// temporary directory when every user can search it (`$TMPDIR` may be private), else under
/// `/tmp`.
fn searchable_tempdir() -> tempfile::TempDir {
    let candidates = [std::env::temp_dir(), PathBuf::from("/tmp")];
    let base = candidates
        .iter()
        .find(|d| searchable_by_others(d))
        .unwrap_or_else(|| {
            panic!(
                "neither {} nor /tmp can be searched by other users: set TMPDIR to a directory \
                 that can",
                candidates[0].display()
            )
        });
    let dir = tempfile::Builder::new()
        .prefix("coload-proof-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    assert!(searchable_by_others(dir.path()), "{}", dir.path().display());
    dir
}

/// Copies `binary` (mode 0755) into a fresh [`searchable_tempdir`]; returns the directory, which
/// removes the copy when dropped, and the copy's path.
fn stage(binary: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = searchable_tempdir();
    let copy = dir.path().join(binary.file_name().unwrap());
    fs::copy(binary, &copy).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
    (dir, copy)
}

/// Runs `cmd` as `nobody` (uid and gid 65534) when the tests run as root, who ignores permission
/// bits; as anyone else, unchanged. The working directory becomes `/`, which every user can
/// search (the test's own may be private).
fn as_unprivileged(mut cmd: Command) -> Command {
    // A directory we create is owned by our effective uid.
    let probe = tempfile::tempdir().unwrap();
    if fs::metadata(probe.path()).unwrap().uid() == 0 {
        cmd.uid(65534).gid(65534).current_dir("/");
    }
    cmd
}

fn spawn(mut cmd: Command) -> Worker {
    let child = cmd.spawn().expect("spawn coload-barrier-probe");
    Worker {
        child: Some(child),
        spawned: Instant::now(),
    }
}

fn finish_all(workers: Vec<Worker>) -> Vec<Outcome> {
    workers.into_iter().map(Worker::finish).collect()
}

fn now_unix_ns() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap()
}

/// Asserts a successful rendezvous: every worker started, at one instant, in the future of every
/// arrival by the lead, and was handed the start with at least the margin left.
fn assert_rendezvous(cohort: &Cohort, outcomes: &[Outcome]) {
    for o in outcomes {
        o.expect_started();
    }
    let start = cohort.read_json("start.json");
    let start_ns = start["start_unix_ns"].as_u64().unwrap();
    let published_ns = start["published_unix_ns"].as_u64().unwrap();
    assert_eq!(start_ns - published_ns, cohort.lead_ms * 1_000_000);
    let accepted: Vec<&str> = start["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["incarnation"].as_str().unwrap())
        .collect();
    assert_eq!(accepted.len(), outcomes.len());
    for o in outcomes {
        let replica = usize::try_from(o.u64("replica")).unwrap();
        assert_eq!(o.u64("start_unix_ns"), start_ns, "one start for all");
        assert_eq!(accepted[replica], o.str("incarnation"));
        assert!(
            o.u64("ready_unix_ns") < published_ns,
            "the start follows every arrival"
        );
        assert!(
            o.u64("returned_unix_ns") + cohort.margin_ms * 1_000_000 <= start_ns,
            "handed the start with at least the margin left: {o:#?}"
        );
        assert!(o.u64("woke_unix_ns") >= start_ns, "slept until the start");
    }
    assert!(!cohort.has("abort.json"));
}

#[test]
fn t01_all_arrive_and_share_one_start_in_the_future_by_the_lead() {
    let cohort = Cohort::new(4).lead_ms(2000);
    let workers = (0..4).map(|r| cohort.spawn(r, &[])).collect();
    let outcomes = finish_all(workers);
    assert_rendezvous(&cohort, &outcomes);
}

#[test]
fn t02_a_missing_replica_times_out_every_present_worker_naming_it() {
    // A missing follower: the leader and the other follower both fail with a timeout naming it.
    let cohort = Cohort::new(3).join_ms(2000);
    let workers = vec![cohort.spawn(0, &[]), cohort.spawn(2, &[])];
    for o in finish_all(workers) {
        o.expect(exit::BARRIER_TIMEOUT, "barrier_timeout")
            .expect_message("replica 1 never arrived at the barrier within 2 s (missing: 1)");
        assert!(
            o.elapsed >= Duration::from_secs(2),
            "not before the timeout"
        );
    }
    assert_eq!(cohort.read_json("abort.json")["kind"], "barrier_timeout");
    assert!(!cohort.has("start.json"));

    // A missing leader: the followers time out on their own clocks.
    let cohort = Cohort::new(3).join_ms(2000);
    let workers = vec![cohort.spawn(1, &[]), cohort.spawn(2, &[])];
    for o in finish_all(workers) {
        o.expect(exit::BARRIER_TIMEOUT, "barrier_timeout")
            .expect_message("replica 0 never arrived at the barrier within 2 s (missing: 0)");
    }
}

#[test]
fn t03_a_worker_that_sees_the_start_late_fails_alone() {
    // Replica 2 publishes its ready record but reaches await_start 4 s later, long after the
    // start (lead 1.5 s). It fails as late; the others run. A fresh process for replica 2 (a
    // restarted Pod) arriving after the start is refused at preflight.
    let cohort = Cohort::new(3).join_ms(15_000);
    let workers = vec![
        cohort.spawn(0, &[]),
        cohort.spawn(1, &[]),
        cohort.spawn(2, &["--pause-before-await-ms", "4000"]),
    ];
    let outcomes = finish_all(workers);
    outcomes[0].expect_started();
    outcomes[1].expect_started();
    assert_eq!(
        outcomes[0].u64("start_unix_ns"),
        outcomes[1].u64("start_unix_ns")
    );
    outcomes[2]
        .expect(exit::LATE_START, "late_start")
        .expect_message("replica 2 saw the start too late: ")
        .expect_message(" s after it, and the margin is 0.3 s; the cohort runs without it");
    assert!(
        !cohort.has("abort.json"),
        "a late worker does not abort the others"
    );

    cohort
        .run(2, &[])
        .expect(exit::PREFLIGHT_FAILED, "stale_experiment")
        .expect_message("start.json already exists")
        .expect_message("has already started without this worker");
}

#[test]
fn t04_two_processes_claiming_one_replica_abort_the_cohort() {
    let cohort = Cohort::new(3).join_ms(15_000);
    let leader = cohort.spawn(0, &[]);
    let first = cohort.spawn(1, &[]);
    cohort.wait_for("ready.0.json");
    cohort.wait_for("ready.1.json");
    let first_incarnation = cohort.read_json("ready.1.json")["incarnation"]
        .as_str()
        .unwrap()
        .to_owned();

    let second = cohort.run(1, &[]);
    second
        .expect(exit::DUPLICATE_REPLICA, "duplicate_replica")
        .expect_message(&format!(
            "replica 1 is claimed twice: incarnation {first_incarnation} published ready.1.json \
             first and incarnation {} tried again",
            second.str("incarnation")
        ));
    // The others learn it from abort.json, well before their 15 s join timeout.
    for o in finish_all(vec![leader, first]) {
        o.expect(exit::DUPLICATE_REPLICA, "duplicate_replica")
            .expect_message("the cohort was aborted by replica 1 (duplicate_replica): replica 1 is claimed twice");
        assert!(o.elapsed < Duration::from_secs(12), "{o:#?}");
    }
    // The first claim was never overwritten.
    assert_eq!(
        cohort.read_json("ready.1.json")["incarnation"],
        first_incarnation.as_str()
    );
    assert!(!cohort.has("start.json"));
}

#[test]
fn t05_a_differing_config_aborts_naming_the_field_and_values() {
    let cohort = Cohort::new(3);
    let workers = vec![
        cohort.spawn(0, &[]),
        cohort.spawn(1, &[]),
        cohort.spawn(2, &["--batch-size", "64"]),
    ];
    for o in finish_all(workers) {
        o.expect(exit::CONFIG_MISMATCH, "config_mismatch")
            .expect_message("replica 2: batch_size 64 != 32");
    }
    let abort = cohort.read_json("abort.json");
    assert_eq!(abort["kind"], "config_mismatch");
    assert_eq!(abort["by_replica"], 0);
    assert!(!cohort.has("start.json"));
}

#[test]
fn t06_truncated_or_garbage_ready_records_are_refused_without_panic() {
    let cases: [(&[u8], &str); 3] = [
        (
            b"{\"schema_version\":1,\"experiment\":\"exp-1\",\"replica\":2,\"incarn",
            "EOF while parsing",
        ),
        (b"\xff\xd8\x00garbage\x01", "it is not UTF-8 text"),
        (b"{\"experiment\":\"exp-1\"}", "no schema_version field"),
    ];
    // The three cohorts run side by side.
    let mut running = Vec::new();
    for (bytes, _) in &cases {
        let cohort = Cohort::new(3).join_ms(15_000);
        fs::create_dir_all(cohort.dir()).unwrap();
        fs::write(cohort.dir().join("ready.2.json"), bytes).unwrap();
        let workers = vec![cohort.spawn(0, &[]), cohort.spawn(1, &[])];
        running.push((cohort, workers));
    }
    for ((cohort, workers), (_, why)) in running.into_iter().zip(cases) {
        let outcomes = finish_all(workers);
        outcomes[0]
            .expect(exit::BARRIER_ABORTED, "invalid_record")
            .expect_message("ready.2.json is not a valid ready record: ")
            .expect_message(why);
        outcomes[1]
            .expect(exit::BARRIER_ABORTED, "invalid_record")
            .expect_message("the cohort was aborted by replica 0 (invalid_record)");
        for o in &outcomes {
            assert!(!o.stderr.contains("panicked"), "{o:#?}");
            assert!(
                o.elapsed < Duration::from_secs(12),
                "the grace, not the timeout: {o:#?}"
            );
        }
        assert!(!cohort.has("start.json"));
    }
}

#[test]
fn t07_a_stale_start_or_abort_from_an_earlier_run_is_refused() {
    for (name, content) in [
        (
            "start.json",
            r#"{"schema_version":1,"experiment":"exp-1","count":1,"start_unix_ns":1,"published_unix_ns":0,"accepted":[]}"#,
        ),
        (
            "abort.json",
            r#"{"schema_version":1,"experiment":"exp-1","kind":"barrier_timeout","reason":"old","by_replica":0,"published_unix_ns":0}"#,
        ),
    ] {
        let cohort = Cohort::new(1);
        fs::create_dir_all(cohort.dir()).unwrap();
        fs::write(cohort.dir().join(name), content).unwrap();
        cohort
            .run(0, &[])
            .expect(exit::PREFLIGHT_FAILED, "stale_experiment")
            .expect_message(&format!("{name} already exists"))
            .expect_message("launch every cohort under a fresh experiment id");
        assert!(
            !cohort.has("ready.0.json"),
            "nothing published into a stale directory"
        );
    }
}

#[test]
fn t08_a_missing_read_only_or_symlinked_directory_fails_preflight_fast() {
    let cohort = Cohort::new(1).reachable_by_others();

    // A missing mount: the shared directory itself is never created.
    let missing = cohort.sync.path().join("not-mounted");
    let o = spawn(cohort.command(&missing, "exp-1", 0, &[])).finish();
    o.expect(exit::PREFLIGHT_FAILED, "preflight_failed")
        .expect_message(&format!(
            "cannot open the shared directory {}: ENOENT",
            missing.display()
        ))
        .expect_message("is the shared volume mounted?");
    assert!(!missing.exists());
    assert!(o.elapsed < Duration::from_secs(10));

    // A file where the directory should be.
    let file = cohort.sync.path().join("a-file");
    fs::write(&file, b"").unwrap();
    spawn(cohort.command(&file, "exp-1", 0, &[]))
        .finish()
        .expect(exit::PREFLIGHT_FAILED, "preflight_failed")
        .expect_message("ENOTDIR");

    // A read-only shared directory, and a read-only experiment directory inside a writable one.
    // Root ignores permission bits, so as root the probe runs as `nobody`.
    let read_only = cohort.sync.path().join("ro");
    fs::create_dir(&read_only).unwrap();
    let writable = cohort.sync.path().join("rw");
    fs::create_dir(&writable).unwrap();
    fs::create_dir(writable.join("exp-1")).unwrap();
    fs::set_permissions(&writable, fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(&read_only, fs::Permissions::from_mode(0o555)).unwrap();
    fs::set_permissions(writable.join("exp-1"), fs::Permissions::from_mode(0o555)).unwrap();
    let o = spawn(as_unprivileged(cohort.command(&read_only, "exp-1", 0, &[]))).finish();
    o.expect(exit::PREFLIGHT_FAILED, "preflight_failed")
        .expect_message(&format!(
            "cannot create the experiment directory {}: EACCES",
            read_only.join("exp-1").display()
        ))
        .expect_message("this user may not write there");
    assert!(o.elapsed < Duration::from_secs(10));
    spawn(as_unprivileged(cohort.command(&writable, "exp-1", 0, &[])))
        .finish()
        .expect(exit::PREFLIGHT_FAILED, "preflight_failed")
        .expect_message("cannot create the probe file")
        .expect_message("EACCES");

    // An experiment directory that is a symlink is never followed.
    let elsewhere = cohort.sync.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cohort.sync.path().join("exp-1")).unwrap();
    cohort
        .run(0, &[])
        .expect(exit::PREFLIGHT_FAILED, "preflight_failed")
        .expect_message("ELOOP");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn t09_invalid_experiment_ids_are_rejected_before_touching_the_disk() {
    // The shared directory is one level down, so that `../x` would land in the temporary
    // directory, where we can see it.
    let cohort = Cohort::new(1);
    let sync = cohort.sync.path().join("sync");
    fs::create_dir(&sync).unwrap();
    let long = "x".repeat(200);
    for id in ["../x", "", long.as_str(), "a/b", ".", "..", "a b", "exp\n1"] {
        let o = spawn(cohort.command(&sync, id, 0, &[])).finish();
        o.expect(exit::INVALID_INPUT, "invalid_experiment")
            .expect_message(&format!("invalid experiment id {id:?}: "));
    }
    assert_eq!(fs::read_dir(&sync).unwrap().count(), 0, "nothing created");
    assert_eq!(fs::read_dir(cohort.sync.path()).unwrap().count(), 1);
}

#[test]
fn t10_a_worker_paused_between_ready_and_start_is_late() {
    // Replica 2 is stopped (SIGSTOP) right after its ready record appears, before the cohort is
    // complete (replica 1 is launched only then), and continued a second after the start.
    let cohort = Cohort::new(3).join_ms(15_000);
    let leader = cohort.spawn(0, &[]);
    let paused = cohort.spawn(2, &[]);
    cohort.wait_for("ready.2.json");
    kill(paused.pid(), Signal::SIGSTOP).unwrap();
    let follower = cohort.spawn(1, &[]);
    cohort.wait_for("start.json");
    let start_ns = cohort.read_json("start.json")["start_unix_ns"]
        .as_u64()
        .unwrap();
    while now_unix_ns() < start_ns + 1_000_000_000 {
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(paused.pid(), Signal::SIGCONT).unwrap();

    paused
        .finish()
        .expect(exit::LATE_START, "late_start")
        .expect_message("replica 2 saw the start too late: ")
        .expect_message(" s after it");
    for o in finish_all(vec![leader, follower]) {
        o.expect_started();
        assert_eq!(o.u64("start_unix_ns"), start_ns);
    }
}

#[test]
fn t11_sixteen_workers_rendezvous_within_a_bounded_time() {
    let cohort = Cohort::new(16).join_ms(30_000).lead_ms(3000);
    let began = Instant::now();
    let workers = (0..16).map(|r| cohort.spawn(r, &[])).collect();
    let outcomes = finish_all(workers);
    let took = began.elapsed();
    assert_rendezvous(&cohort, &outcomes);
    assert!(took < Duration::from_secs(30), "16 workers took {took:?}");
}

#[test]
fn t12_a_probe_built_in_a_private_directory_still_runs_as_another_user() {
    // The clone, and so the probe, under a directory only its owner may search (as
    // root, `nobody` got "spawn coload-barrier-probe: Permission denied").
    let private = tempfile::tempdir().unwrap();
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let hidden = private.path().join("coload-barrier-probe");
    fs::copy(PROBE, &hidden).unwrap();
    assert!(!searchable_by_others(private.path()));
    let (_staging, probe) = stage(&hidden);
    assert!(searchable_by_others(probe.parent().unwrap()));
    let mut cohort = Cohort::new(1);
    cohort.probe = probe;
    // An invalid experiment id stops the probe before it touches the disk: this checks only
    // that the process starts and answers.
    spawn(as_unprivileged(cohort.command(
        cohort.sync.path(),
        "../x",
        0,
        &[],
    )))
    .finish()
    .expect(exit::INVALID_INPUT, "invalid_experiment");
}
