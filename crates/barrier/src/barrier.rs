//! The protocol: preflight, publish ready, await the start (leader and followers), abort.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coload_cohort_schema::{
    AbortRecord, FailureKind, ReadyRecord, SCHEMA_VERSION, StartRecord, WorkerConfig,
};
use coload_timing::Clock;
use serde::Serialize;

use crate::dir::{Found, Publish, SyncDir};
use crate::error::{BarrierError, seconds};
use crate::options::BarrierOptions;
use crate::options::validate_experiment_id;
use crate::poll::Backoff;
use crate::records::{
    ABORT, DECISION, START, parse, parse_ready_name, ready_name, validate_cohort,
};

/// How long a record may stay unparseable before it counts as invalid. A complete record never
/// is (it appears by hard link), but on a volume without hard links it is written in place and
/// a reader can catch it half-written; two seconds is far longer than writing a few hundred
/// bytes takes.
const INVALID_GRACE: Duration = Duration::from_secs(2);

/// What the preflight found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// `<sync_dir>/<experiment>/`.
    pub dir: PathBuf,
    /// This host's clock minus the file server's, nanoseconds: the local midpoint of the probe
    /// minus the probe's mtime.
    pub clock_offset_ns: i64,
    /// Half the probe's round trip, nanoseconds: the offset is known to within this much, plus
    /// the file server's timestamp granularity (often one kernel tick, up to 10 ms).
    pub clock_offset_uncertainty_ns: u64,
}

/// One worker's place in the rendezvous.
///
/// Made by [`Barrier::preflight`] before the warmup, then [`Barrier::publish_ready`] once after
/// it, then [`Barrier::await_start`]. Nothing runs in the background: between the calls and
/// after `await_start` returns, the barrier does not touch the shared directory.
#[derive(Debug)]
pub struct Barrier {
    options: BarrierOptions,
    dir: SyncDir,
    incarnation: String,
    /// This worker's own ready record and when it was published (the join timeout counts from
    /// there).
    ready: Option<(ReadyRecord, Instant)>,
    awaited: bool,
}

impl Barrier {
    /// Checks the options and the shared directory before the warmup.
    ///
    /// Validates the experiment id (before touching anything), `count >= 1`, `replica < count`
    /// and `start_lead > late_margin`; opens `<sync_dir>/<experiment>/` (creating it, never
    /// following a symlink); refuses a directory that already holds a `start.json` or
    /// `abort.json` (or the claim of either); writes, fsyncs, stats and removes a probe file, from which it takes this
    /// host's clock offset against the file server. Draws a fresh incarnation UUID.
    pub fn preflight(
        options: BarrierOptions,
        clock: &Clock,
    ) -> Result<(Barrier, Preflight), BarrierError> {
        options.validate()?;
        let dir = SyncDir::open(&options.sync_dir, &options.experiment)?;
        for name in [START, ABORT, DECISION] {
            match dir.exists(name) {
                Ok(false) => {}
                Ok(true) => {
                    return Err(BarrierError::StaleExperiment {
                        path: dir.file(name),
                    });
                }
                Err(errno) => {
                    return Err(BarrierError::Preflight {
                        path: dir.file(name),
                        message: format!("cannot look up {}: {errno}", dir.file(name).display()),
                    });
                }
            }
        }
        let incarnation = uuid::Uuid::new_v4().to_string();
        let before_ns = clock.now_unix_ns();
        let mtime_ns = dir.probe(&format!(".probe.{incarnation}"))?;
        let after_ns = clock.now_unix_ns();
        let midpoint_ns = before_ns + (after_ns.saturating_sub(before_ns)) / 2;
        let offset = i128::from(midpoint_ns) - i128::from(mtime_ns);
        let preflight = Preflight {
            dir: dir.path().to_owned(),
            clock_offset_ns: i64::try_from(offset).unwrap_or(if offset < 0 {
                i64::MIN
            } else {
                i64::MAX
            }),
            clock_offset_uncertainty_ns: after_ns.saturating_sub(before_ns) / 2,
        };
        let barrier = Barrier {
            options,
            dir,
            incarnation,
            ready: None,
            awaited: false,
        };
        Ok((barrier, preflight))
    }

    /// This process's incarnation: a fresh v4 UUID, distinct for every worker process.
    #[must_use]
    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    /// `<sync_dir>/<experiment>/`.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The options the barrier runs with.
    #[must_use]
    pub fn options(&self) -> &BarrierOptions {
        &self.options
    }

    /// A ready record for this worker with `config`, stamped now: experiment, replica,
    /// incarnation, host name and pid filled in; `node_name` and `device` left for the caller.
    #[must_use]
    pub fn ready_record(&self, config: WorkerConfig, clock: &Clock) -> ReadyRecord {
        ReadyRecord {
            schema_version: SCHEMA_VERSION,
            experiment: self.options.experiment.clone(),
            replica: self.options.replica,
            incarnation: self.incarnation.clone(),
            config,
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
            node_name: None,
            pid: std::process::id(),
            device: None,
            ready_unix_ns: clock.now_unix_ns(),
        }
    }

    /// Publishes `ready.<replica>.json` once, never overwriting.
    ///
    /// The record must carry this barrier's experiment, replica and incarnation and declare its
    /// count. If another process already holds the replica, the cohort is aborted
    /// (`duplicate_replica`, naming both incarnations) and that is the error. The join timeout
    /// counts from the moment this returns.
    pub fn publish_ready(
        &mut self,
        record: &ReadyRecord,
        clock: &Clock,
    ) -> Result<(), BarrierError> {
        if self.ready.is_some() {
            return Err(BarrierError::Misuse {
                message: "publish_ready was called twice; a worker publishes once".to_owned(),
            });
        }
        let o = &self.options;
        let mismatch = if record.experiment != o.experiment {
            Some(format!(
                "experiment {:?} != {:?}",
                record.experiment, o.experiment
            ))
        } else if record.replica != o.replica {
            Some(format!("replica {} != {}", record.replica, o.replica))
        } else if record.incarnation != self.incarnation {
            Some(format!(
                "incarnation {} != {} (use Barrier::incarnation)",
                record.incarnation, self.incarnation
            ))
        } else if record.config.count != o.count {
            Some(format!(
                "config.count {} != {}",
                record.config.count, o.count
            ))
        } else {
            None
        };
        if let Some(what) = mismatch {
            return Err(BarrierError::InvalidOptions {
                message: format!("the ready record does not match the barrier's options: {what}"),
            });
        }
        let name = ready_name(o.replica);
        match self
            .dir
            .publish(&name, &to_bytes(record)?, &self.incarnation)?
        {
            Publish::Done => {
                self.ready = Some((record.clone(), Instant::now()));
                Ok(())
            }
            Publish::Exists => {
                let existing = match self.dir.read(&name) {
                    Ok(Found::Bytes(bytes)) => parse::<ReadyRecord>(&self.dir.file(&name), &bytes)
                        .map_or_else(|_| "unknown".to_owned(), |r| r.incarnation),
                    _ => "unknown".to_owned(),
                };
                Err(self.fail_cohort(
                    BarrierError::DuplicateReplica {
                        replica: o.replica,
                        existing,
                        ours: self.incarnation.clone(),
                    },
                    clock,
                ))
            }
        }
    }

    /// Waits for the start and returns it with at least the late margin left before it.
    ///
    /// Replica 0 leads: it polls until every ready record exists, validates them and publishes
    /// `start.json` (`start = now + start_lead`, the accepted incarnations). Every worker then
    /// checks that the start admits its incarnation and leaves it at least `late_margin`. Any
    /// `abort.json` seen on the way ends the wait with its reason. When the join timeout fires,
    /// the worker aborts the cohort (`barrier_timeout`, naming the missing replicas), since a
    /// cohort missing a worker can never be complete. The caller then sleeps until
    /// `start_unix_ns` (for instance with `coload_timing::sleep_until`).
    pub fn await_start(&mut self, clock: &Clock) -> Result<StartRecord, BarrierError> {
        let Some((own, ready_at)) = self.ready.clone() else {
            return Err(BarrierError::Misuse {
                message: "await_start was called before publish_ready".to_owned(),
            });
        };
        if self.awaited {
            return Err(BarrierError::Misuse {
                message: "await_start was called twice".to_owned(),
            });
        }
        self.awaited = true;
        let deadline = ready_at + self.options.join_timeout;
        if self.options.replica == 0
            && let Some(start) = self.lead(own, deadline, clock)?
        {
            return self.admit(start, clock);
        }
        self.follow(deadline, clock)
    }

    /// Aborts the cohort: publishes `abort.json` with `kind` and `reason`, signed by this
    /// worker's replica, unless the cohort has already been decided (see [`AbortOutcome`]).
    pub fn abort(
        &self,
        kind: FailureKind,
        reason: &str,
        clock: &Clock,
    ) -> Result<AbortOutcome, BarrierError> {
        let record = AbortRecord {
            schema_version: SCHEMA_VERSION,
            experiment: self.options.experiment.clone(),
            kind,
            reason: reason.to_owned(),
            by_replica: self.options.replica,
            published_unix_ns: clock.now_unix_ns(),
        };
        publish_abort(&self.dir, &record, &self.incarnation)
    }

    /// Publishes an abort for a problem this worker found and returns the problem. If the abort
    /// cannot be written, the problem is still the more useful error to report.
    fn fail_cohort(&self, error: BarrierError, clock: &Clock) -> BarrierError {
        let _ = self.abort(error.kind(), &error.to_string(), clock);
        error
    }

    /// The leader's wait: `Some(start)` once it published the start, `None` if the cohort was
    /// decided by someone else first (an abort that won the race, or a start it did not write:
    /// it then follows like everyone else, and sees which).
    fn lead(
        &self,
        own: ReadyRecord,
        deadline: Instant,
        clock: &Clock,
    ) -> Result<Option<StartRecord>, BarrierError> {
        let count = self.options.count;
        let mut records: Vec<Option<ReadyRecord>> = vec![None; count as usize];
        records[0] = Some(own);
        let mut grace = Grace::default();
        let mut backoff = Backoff::new(self.poll_cap());
        loop {
            self.check_abort(&mut grace, clock)?;
            let mut progressed = false;
            for (replica, slot) in (0u32..).zip(records.iter_mut()) {
                if slot.is_some() {
                    continue;
                }
                let name = ready_name(replica);
                match self.poll_read(&name, clock)? {
                    Found::Missing => grace.clear(&name),
                    Found::Refused(why) => grace.note(&name, why),
                    Found::Bytes(bytes) => match parse(&self.dir.file(&name), &bytes) {
                        Ok(record) => {
                            *slot = Some(record);
                            grace.clear(&name);
                            progressed = true;
                        }
                        Err(why) => grace.note(&name, why),
                    },
                }
            }
            if let Some(error) = self.out_of_range()? {
                return Err(self.fail_cohort(error, clock));
            }
            if let Some(error) = grace.expired(&self.dir, "ready") {
                return Err(self.fail_cohort(error, clock));
            }
            if records.iter().all(Option::is_some) {
                let records: Vec<ReadyRecord> = records.into_iter().flatten().collect();
                let accepted =
                    match validate_cohort(self.dir.path(), &self.options.experiment, &records) {
                        Ok(accepted) => accepted,
                        Err(error) => return Err(self.fail_cohort(error, clock)),
                    };
                // A last look, so that an abort published while we validated is not overtaken.
                self.check_abort(&mut grace, clock)?;
                let now_ns = clock.now_unix_ns();
                let start = StartRecord {
                    schema_version: SCHEMA_VERSION,
                    experiment: self.options.experiment.clone(),
                    count,
                    start_unix_ns: now_ns + duration_ns(self.options.start_lead),
                    published_unix_ns: now_ns,
                    accepted,
                };
                return match self
                    .dir
                    .decide(START, &to_bytes(&start)?, &self.incarnation)?
                {
                    Publish::Done => Ok(Some(start)),
                    Publish::Exists => Ok(None),
                };
            }
            if Instant::now() >= deadline {
                let missing: Vec<u32> = (0u32..)
                    .zip(&records)
                    .filter(|(_, r)| r.is_none())
                    .map(|(i, _)| i)
                    .collect();
                let error = self.timeout(missing, &grace);
                return Err(self.fail_cohort(error, clock));
            }
            if progressed {
                backoff.reset();
            }
            backoff.sleep(deadline);
        }
    }

    /// Every worker's wait for `start.json` or `abort.json`.
    fn follow(&self, deadline: Instant, clock: &Clock) -> Result<StartRecord, BarrierError> {
        let mut grace = Grace::default();
        let mut backoff = Backoff::new(self.poll_cap());
        loop {
            self.check_abort(&mut grace, clock)?;
            match self.poll_read(START, clock)? {
                Found::Missing => {}
                Found::Refused(why) => grace.note(START, why),
                Found::Bytes(bytes) => match parse(&self.dir.file(START), &bytes) {
                    Ok(start) => return self.admit(start, clock),
                    Err(why) => grace.note(START, why),
                },
            }
            if let Some(error) = grace.expired(&self.dir, "start") {
                return Err(self.fail_cohort(error, clock));
            }
            if Instant::now() >= deadline {
                let missing = self.missing();
                let error = self.timeout(missing, &grace);
                return Err(self.fail_cohort(error, clock));
            }
            backoff.sleep(deadline);
        }
    }

    /// Whether the start admits this worker, with enough time left.
    fn admit(&self, start: StartRecord, clock: &Clock) -> Result<StartRecord, BarrierError> {
        let o = &self.options;
        if start.experiment != o.experiment || start.count != o.count {
            return Err(BarrierError::InvalidRecord {
                path: self.dir.file(START),
                message: format!(
                    "{} is for experiment {:?} with count {}, not {:?} with count {}",
                    self.dir.file(START).display(),
                    start.experiment,
                    start.count,
                    o.experiment,
                    o.count
                ),
            });
        }
        match start.accepted.iter().find(|a| a.replica == o.replica) {
            Some(a) if a.incarnation == self.incarnation => {}
            other => {
                return Err(BarrierError::NotAdmitted {
                    replica: o.replica,
                    incarnation: self.incarnation.clone(),
                    admitted: other.map_or_else(|| "nobody".to_owned(), |a| a.incarnation.clone()),
                });
            }
        }
        let left = i128::from(start.start_unix_ns) - i128::from(clock.now_unix_ns());
        let left_ns = i64::try_from(left).unwrap_or(if left < 0 { i64::MIN } else { i64::MAX });
        if left < i128::from(duration_ns(o.late_margin)) {
            // Late: this worker fails alone. Nobody else is told, because the others may already
            // be sleeping towards the start and the barrier never touches the shared directory
            // once it has handed out the start; the summarizer refuses the incomplete cohort.
            return Err(BarrierError::Late {
                replica: o.replica,
                left_ns,
                margin: o.late_margin,
            });
        }
        Ok(start)
    }

    /// Reads a record while polling. A worker that cannot read the shared directory any more
    /// will fail; it aborts the cohort on the way so that the others do not wait out their
    /// timeouts for it.
    fn poll_read(&self, name: &str, clock: &Clock) -> Result<Found, BarrierError> {
        self.dir.read(name).map_err(|e| self.fail_cohort(e, clock))
    }

    /// `Err(Aborted)` if `abort.json` exists; an unreadable one counts once its grace is over.
    fn check_abort(&self, grace: &mut Grace, clock: &Clock) -> Result<(), BarrierError> {
        match self.poll_read(ABORT, clock)? {
            Found::Missing => Ok(()),
            Found::Refused(why) => {
                grace.note(ABORT, why);
                grace.expired(&self.dir, "abort").map_or(Ok(()), Err)
            }
            Found::Bytes(bytes) => match parse::<AbortRecord>(&self.dir.file(ABORT), &bytes) {
                Ok(abort) => Err(BarrierError::Aborted {
                    record: Box::new(abort),
                }),
                Err(why) => {
                    grace.note(ABORT, why);
                    grace.expired(&self.dir, "abort").map_or(Ok(()), Err)
                }
            },
        }
    }

    /// A ready record for a replica outside `0..count` (a worker launched with another count).
    fn out_of_range(&self) -> Result<Option<BarrierError>, BarrierError> {
        let count = self.options.count;
        let mut strays: Vec<u32> = self
            .dir
            .names()?
            .iter()
            .filter_map(|n| parse_ready_name(n))
            .filter(|r| *r >= count)
            .collect();
        strays.sort_unstable();
        Ok(strays.first().map(|r| BarrierError::ReplicaOutOfRange {
            message: format!(
                "{} names replica {r}, outside 0..{} for count {count}; that worker was launched \
                 with a different count",
                self.dir.file(&ready_name(*r)).display(),
                count - 1
            ),
        }))
    }

    /// Replicas whose ready record is not there. A lookup that fails counts as missing: the
    /// worker is giving up anyway and the message is only better for naming more.
    fn missing(&self) -> Vec<u32> {
        (0..self.options.count)
            .filter(|r| !self.dir.exists(&ready_name(*r)).unwrap_or(false))
            .collect()
    }

    fn timeout(&self, missing: Vec<u32>, grace: &Grace) -> BarrierError {
        let within = seconds(duration_ns(self.options.join_timeout));
        let mut message = match missing.first() {
            Some(first) => {
                let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
                format!(
                    "replica {first} never arrived at the barrier within {within} s (missing: {})",
                    list.join(", ")
                )
            }
            None => format!(
                "every replica was ready but replica 0 published no start within {within} s of \
                 this worker's ready record; check replica 0's log"
            ),
        };
        for (name, why) in grace.notes() {
            let _ = write!(message, "; {name} is present but not valid: {why}");
        }
        BarrierError::Timeout { missing, message }
    }

    /// The longest poll interval: short enough that a follower polling at it still sees the
    /// start with time to spare (a quarter of lead minus margin), and never over a second.
    fn poll_cap(&self) -> Duration {
        self.options
            .start_lead
            .saturating_sub(self.options.late_margin)
            / 4
    }
}

/// Records that failed to parse, and since when.
#[derive(Debug, Default)]
struct Grace {
    invalid: Vec<(String, Instant, String)>,
}

impl Grace {
    fn note(&mut self, name: &str, why: String) {
        match self.invalid.iter_mut().find(|(n, _, _)| n == name) {
            Some(entry) => entry.2 = why,
            None => self.invalid.push((name.to_owned(), Instant::now(), why)),
        }
    }

    fn clear(&mut self, name: &str) {
        self.invalid.retain(|(n, _, _)| n != name);
    }

    /// The first record that has stayed invalid past the grace, as an error.
    fn expired(&self, dir: &SyncDir, what: &str) -> Option<BarrierError> {
        self.invalid
            .iter()
            .find(|(_, since, _)| since.elapsed() >= INVALID_GRACE)
            .map(|(name, _, why)| BarrierError::InvalidRecord {
                path: dir.file(name),
                message: format!(
                    "{} is not a valid {what} record: {why}; remove the experiment directory \
                     and rerun under a fresh experiment id",
                    dir.file(name).display()
                ),
            })
    }

    fn notes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.invalid
            .iter()
            .map(|(n, _, why)| (n.as_str(), why.as_str()))
    }
}

/// What an abort found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortOutcome {
    /// `abort.json` is ours: every worker still at the barrier fails with its kind and reason.
    Published,
    /// Another abort came first; it stands (the first abort wins).
    AlreadyAborted,
    /// The start was published first: the workers are timing or about to, and nothing is
    /// written. A cohort that must still be stopped is stopped by signals, not by the barrier.
    AlreadyStarted,
}

/// Aborts an experiment from outside the cohort (a launcher such as `bench-cohort`), the same
/// way a worker does: `abort.json` signed by [`AbortRecord::LAUNCHER`], published exclusively
/// under the decision claim, never following a symlink.
///
/// Creates `<sync_dir>/<experiment>/` if no worker has yet, so that a worker arriving later
/// fails its preflight at once instead of waiting for peers that will never come.
pub fn abort_experiment(
    sync_dir: &Path,
    experiment: &str,
    kind: FailureKind,
    reason: &str,
    clock: &Clock,
) -> Result<AbortOutcome, BarrierError> {
    validate_experiment_id(experiment)?;
    let dir = SyncDir::open(sync_dir, experiment)?;
    let record = AbortRecord {
        schema_version: SCHEMA_VERSION,
        experiment: experiment.to_owned(),
        kind,
        reason: reason.to_owned(),
        by_replica: AbortRecord::LAUNCHER,
        published_unix_ns: clock.now_unix_ns(),
    };
    publish_abort(&dir, &record, &format!("launcher.{}", std::process::id()))
}

/// Publishes `record` as the cohort's decision; if another decision came first, says which.
fn publish_abort(
    dir: &SyncDir,
    record: &AbortRecord,
    tag: &str,
) -> Result<AbortOutcome, BarrierError> {
    match dir.decide(ABORT, &to_bytes(record)?, tag)? {
        Publish::Done => Ok(AbortOutcome::Published),
        // The claim holds whichever record won; an abort carries a `kind`, a start does not.
        Publish::Exists => match dir.read(DECISION)? {
            Found::Bytes(bytes) if parse::<StartRecord>(&dir.file(DECISION), &bytes).is_ok() => {
                Ok(AbortOutcome::AlreadyStarted)
            }
            _ => Ok(AbortOutcome::AlreadyAborted),
        },
    }
}

fn to_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, BarrierError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| BarrierError::Misuse {
        message: format!("cannot serialize a record: {e}"),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{AcceptedWorker, exit};

    use super::*;
    use crate::records::tests::config;

    fn options(dir: &Path, replica: u32, count: u32) -> BarrierOptions {
        let mut o = BarrierOptions::new(dir, "e", replica, count);
        o.join_timeout = Duration::from_secs(5);
        o.start_lead = Duration::from_millis(400);
        o.late_margin = Duration::from_millis(100);
        o
    }

    #[test]
    fn calls_out_of_order_and_foreign_records_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Clock::anchor();
        let (mut b, pre) = Barrier::preflight(options(tmp.path(), 0, 2), &clock).unwrap();
        assert!(pre.clock_offset_ns.unsigned_abs() < 60_000_000_000);
        assert_eq!(
            b.await_start(&clock).unwrap_err().kind(),
            FailureKind::BarrierMisuse
        );

        let mut record = b.ready_record(config(2), &clock);
        record.replica = 1;
        let e = b.publish_ready(&record, &clock).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the ready record does not match the barrier's options: replica 1 != 0"
        );
        assert_eq!(e.exit_code(), exit::INVALID_INPUT);
        let e = b
            .publish_ready(&b.ready_record(config(3), &clock), &clock)
            .unwrap_err();
        assert!(e.to_string().ends_with("config.count 3 != 2"), "{e}");

        b.publish_ready(&b.ready_record(config(2), &clock), &clock)
            .unwrap();
        let again = b.publish_ready(&b.ready_record(config(2), &clock), &clock);
        assert_eq!(again.unwrap_err().kind(), FailureKind::BarrierMisuse);
    }

    #[test]
    fn the_first_abort_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Clock::anchor();
        let (b, _) = Barrier::preflight(options(tmp.path(), 1, 2), &clock).unwrap();
        assert_eq!(
            b.abort(FailureKind::ConfigMismatch, "first", &clock)
                .unwrap(),
            AbortOutcome::Published
        );
        assert_eq!(
            b.abort(FailureKind::BarrierTimeout, "second", &clock)
                .unwrap(),
            AbortOutcome::AlreadyAborted
        );
        let text = std::fs::read_to_string(b.dir().join("abort.json")).unwrap();
        let abort: AbortRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (abort.kind, abort.reason.as_str()),
            (FailureKind::ConfigMismatch, "first")
        );
        assert_eq!(abort.by_replica, 1);
    }

    #[test]
    fn a_launcher_abort_loses_to_a_published_start_and_stops_a_waiting_cohort() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Clock::anchor();
        // A cohort of one starts: the launcher's abort afterwards changes nothing.
        let mut o = options(tmp.path(), 0, 1);
        o.experiment = "started".into();
        let (mut b, _) = Barrier::preflight(o, &clock).unwrap();
        let ready = b.ready_record(config(1), &clock);
        b.publish_ready(&ready, &clock).unwrap();
        b.await_start(&clock).unwrap();
        let outcome = abort_experiment(
            tmp.path(),
            "started",
            FailureKind::PeerFailed,
            "late",
            &clock,
        )
        .unwrap();
        assert_eq!(outcome, AbortOutcome::AlreadyStarted);
        assert!(!b.dir().join("abort.json").exists());

        // A cohort of two still waiting: the launcher's abort ends replica 0's wait with it.
        let (mut b, _) = Barrier::preflight(options(tmp.path(), 0, 2), &clock).unwrap();
        let ready = b.ready_record(config(2), &clock);
        b.publish_ready(&ready, &clock).unwrap();
        let experiment = b.options().experiment.clone();
        let outcome = abort_experiment(
            tmp.path(),
            &experiment,
            FailureKind::LauncherStopped,
            "replica 1 could not be started",
            &clock,
        )
        .unwrap();
        assert_eq!(outcome, AbortOutcome::Published);
        let err = b.await_start(&clock).unwrap_err();
        assert_eq!(err.kind(), FailureKind::LauncherStopped);
        assert_eq!(
            err.to_string(),
            "the cohort was aborted by the launcher (launcher_stopped): replica 1 could not be started"
        );
        // No symlink is followed and no bad id is accepted.
        assert!(abort_experiment(tmp.path(), "../x", FailureKind::PeerFailed, "", &clock).is_err());
    }

    #[test]
    fn a_start_that_admits_another_incarnation_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Clock::anchor();
        let (mut b, _) = Barrier::preflight(options(tmp.path(), 1, 2), &clock).unwrap();
        b.publish_ready(&b.ready_record(config(2), &clock), &clock)
            .unwrap();
        let start = StartRecord {
            schema_version: SCHEMA_VERSION,
            experiment: "e".into(),
            count: 2,
            start_unix_ns: clock.now_unix_ns() + 5_000_000_000,
            published_unix_ns: clock.now_unix_ns(),
            accepted: vec![
                AcceptedWorker {
                    replica: 0,
                    incarnation: "a".into(),
                },
                AcceptedWorker {
                    replica: 1,
                    incarnation: "someone-else".into(),
                },
            ],
        };
        std::fs::write(b.dir().join(START), serde_json::to_vec(&start).unwrap()).unwrap();
        let e = b.await_start(&clock).unwrap_err();
        assert_eq!(
            (e.kind(), e.exit_code()),
            (FailureKind::NotAdmitted, exit::LATE_START)
        );
        assert!(
            e.to_string()
                .ends_with("the leader admitted someone-else for this replica; this process was not part of the cohort"),
            "{e}"
        );
    }
}
