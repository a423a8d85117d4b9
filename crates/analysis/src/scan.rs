//! Streaming each worker's `batches.jsonl` once, keeping only what the statistics need.
//!
//! A record is read, validated (by `coload_cohort_schema::BatchReader`: shape, order, no
//! overlap), and reduced at once to its duration when it lies inside the common interval. Memory
//! is therefore 8 bytes per kept batch (the durations, which exact nearest-rank percentiles
//! need) instead of a struct per record, and the file is never held in memory. Workers are
//! spread over the available cores with scoped threads; each file is read by one thread.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use coload_cohort_schema::{BatchReader, Phase, SchemaError};

use crate::interval::Span;

/// The most durations reserved up front from a worker's declared batch count; a larger or
/// forged count grows the vector as records actually arrive instead.
const MAX_RESERVED_DURATIONS: u64 = 1 << 22;

/// What one worker's batches reduce to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Durations of the kept batches, nanoseconds, ascending.
    pub(crate) sorted_durations_ns: Vec<u64>,
    /// Samples in the kept batches.
    pub(crate) kept_samples: u64,
    /// Every record in the file.
    pub(crate) recorded_batches: u64,
    /// The kept durations by phase, ascending, when the records carry one (an LLM worker's);
    /// `None` for records without a phase.
    pub(crate) phases: Option<PhaseDurations>,
}

/// An LLM worker's kept durations by phase, nanoseconds, ascending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PhaseDurations {
    /// Prefills.
    pub(crate) prefill_ns: Vec<u64>,
    /// Decode steps.
    pub(crate) decode_ns: Vec<u64>,
}

/// Reads `path`, keeping the batches entirely inside `common`.
pub(crate) fn scan_file(
    path: &Path,
    common: Span,
    declared_batches: u64,
) -> Result<Scan, SchemaError> {
    let reader = BatchReader::open(path)?;
    let mut durations = Vec::with_capacity(declared_batches.min(MAX_RESERVED_DURATIONS) as usize);
    let mut kept_samples = 0u64;
    let mut recorded = 0u64;
    let mut phases: Option<PhaseDurations> = None;
    for record in reader {
        let record = record?;
        recorded += 1;
        if common.contains(record.start_unix_ns, record.end_unix_ns) {
            durations.push(record.duration_ns());
            kept_samples += u64::from(record.samples);
            if let Some(phase) = record.phase {
                let by_phase = phases.get_or_insert_with(PhaseDurations::default);
                match phase {
                    Phase::Prefill => by_phase.prefill_ns.push(record.duration_ns()),
                    Phase::Decode => by_phase.decode_ns.push(record.duration_ns()),
                }
            }
        }
    }
    durations.sort_unstable();
    if let Some(p) = &mut phases {
        p.prefill_ns.sort_unstable();
        p.decode_ns.sort_unstable();
    }
    Ok(Scan {
        sorted_durations_ns: durations,
        kept_samples,
        recorded_batches: recorded,
        phases,
    })
}

/// Scans every `(path, declared batches)` job on up to `threads` threads; results come back in
/// the order of `jobs`.
pub(crate) fn scan_all(
    jobs: &[(PathBuf, u64)],
    common: Span,
    threads: NonZeroUsize,
) -> Vec<Result<Scan, SchemaError>> {
    let threads = threads.get().min(jobs.len()).max(1);
    if threads == 1 {
        return jobs.iter().map(|(p, n)| scan_file(p, common, *n)).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Scan, SchemaError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((path, declared)) = jobs.get(i) else {
                        break;
                    };
                    let r = scan_file(path, common, *declared);
                    // A poisoned lock means another scan thread panicked; keep its data anyway.
                    let mut guard = results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    guard[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .zip(jobs)
        .map(|(r, (path, _))| {
            r.unwrap_or_else(|| {
                Err(SchemaError::Io {
                    path: path.clone(),
                    source: std::io::Error::other("scan thread did not finish"),
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    #[test]
    fn keeps_only_batches_inside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("batches.jsonl");
        let lines = [
            (0, 0, 10),
            (1, 10, 20), // starts at the common start: kept
            (2, 20, 31), // ends after the common end: dropped
        ];
        let mut text = String::new();
        for (i, a, b) in lines {
            writeln!(
                text,
                "{{\"index\":{i},\"start_unix_ns\":{a},\"end_unix_ns\":{b},\"samples\":4}}"
            )
            .unwrap();
        }
        std::fs::write(&p, text).unwrap();
        let common = Span {
            start_unix_ns: 10,
            end_unix_ns: 30,
        };
        let s = scan_file(&p, common, 3).unwrap();
        assert_eq!(s.sorted_durations_ns, [10]);
        assert_eq!((s.kept_samples, s.recorded_batches), (4, 3));
        let all = scan_all(
            &[(p.clone(), 3), (p.clone(), 3), (dir.path().join("none"), 0)],
            common,
            NonZeroUsize::new(2).unwrap(),
        );
        assert_eq!(all[0].as_ref().unwrap(), &s);
        assert_eq!(all[1].as_ref().unwrap(), &s);
        assert!(all[2].is_err());
    }
}
