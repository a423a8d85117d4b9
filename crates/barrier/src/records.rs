//! File names, record parsing and the leader's validation of a complete set of ready records.

use std::collections::HashMap;
use std::path::Path;

use coload_cohort_schema::{AcceptedWorker, ReadyRecord, check_version};
use serde::de::DeserializeOwned;

use crate::error::BarrierError;

/// The leader's decision to start.
pub(crate) const START: &str = "start.json";
/// Any worker's (or the launcher's) decision that the cohort cannot run.
pub(crate) const ABORT: &str = "abort.json";
/// The claim that makes the start and an abort exclusive: whoever links it first decides, and
/// only then publishes `start.json` or `abort.json`. So a cohort never has both.
pub(crate) const DECISION: &str = "decision.json";

/// `ready.<replica>.json`.
pub(crate) fn ready_name(replica: u32) -> String {
    format!("ready.{replica}.json")
}

/// The replica of a `ready.<replica>.json` name; `None` for any other name.
pub(crate) fn parse_ready_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("ready.")?.strip_suffix(".json")?;
    // `u32::from_str` accepts a leading `+`; a replica id is digits only.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses a versioned record; the error says what is wrong without the path (the caller names
/// the file).
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
    if text.trim().is_empty() {
        return Err("it is empty".to_owned());
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    check_version(path, &value).map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Checks a complete set of ready records (`records[i]` read from `ready.<i>.json`) and returns
/// the incarnations to admit.
///
/// In order: every record names the experiment and the replica of its file; no two records share
/// an incarnation; every configuration equals replica 0's field by field except `workload`
/// (the one rule of [`coload_cohort_schema::WorkerConfig::differences`]).
pub(crate) fn validate_cohort(
    dir: &Path,
    experiment: &str,
    records: &[ReadyRecord],
) -> Result<Vec<AcceptedWorker>, BarrierError> {
    for (i, record) in (0u32..).zip(records) {
        let name = ready_name(i);
        let invalid = |message: String| BarrierError::InvalidRecord {
            path: dir.join(&name),
            message,
        };
        if record.replica != i {
            return Err(invalid(format!(
                "{name} claims replica {}; the file name and the record must agree",
                record.replica
            )));
        }
        if record.experiment != experiment {
            return Err(invalid(format!(
                "{name} is for experiment {:?}, not {experiment:?}",
                record.experiment
            )));
        }
    }

    let mut seen: HashMap<&str, u32> = HashMap::new();
    for (i, record) in (0u32..).zip(records) {
        if let Some(first) = seen.insert(&record.incarnation, i) {
            return Err(BarrierError::DuplicateIncarnation {
                message: format!(
                    "replicas {first} and {i} share incarnation {}; every worker process draws \
                     its own, so one process published twice",
                    record.incarnation
                ),
            });
        }
    }

    let Some(reference) = records.first() else {
        return Ok(Vec::new());
    };
    let clauses: Vec<String> = (0u32..)
        .zip(records)
        .skip(1)
        .filter_map(|(i, record)| {
            let diffs = record.config.differences(&reference.config);
            (!diffs.is_empty()).then(|| {
                let fields: Vec<String> = diffs.iter().map(ToString::to_string).collect();
                format!("replica {i}: {}", fields.join(", "))
            })
        })
        .collect();
    if !clauses.is_empty() {
        return Err(BarrierError::ConfigMismatch {
            message: format!(
                "{} (compared with replica 0; every worker of a cohort must declare the same \
                 configuration except its workload)",
                clauses.join("; ")
            ),
        });
    }

    Ok((0u32..)
        .zip(records)
        .map(|(replica, r)| AcceptedWorker {
            replica,
            incarnation: r.incarnation.clone(),
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use coload_cohort_schema::{Mode, SCHEMA_VERSION, WorkerConfig, Workload};

    use super::*;

    pub(crate) fn config(count: u32) -> WorkerConfig {
        WorkerConfig::article(Mode::Timeslice, Workload::Train, count)
    }

    fn record(replica: u32, count: u32) -> ReadyRecord {
        ReadyRecord {
            schema_version: SCHEMA_VERSION,
            experiment: "e".into(),
            replica,
            incarnation: format!("inc-{replica}"),
            config: config(count),
            hostname: "h".into(),
            node_name: None,
            pid: 1,
            device: None,
            ready_unix_ns: 1,
        }
    }

    fn cohort(count: u32) -> Vec<ReadyRecord> {
        (0..count).map(|r| record(r, count)).collect()
    }

    fn err(records: &[ReadyRecord]) -> BarrierError {
        validate_cohort(Path::new("/s/e"), "e", records).unwrap_err()
    }

    #[test]
    fn a_consistent_cohort_is_admitted() {
        let mut records = cohort(3);
        records[1].config.workload = Workload::Infer; // a mixed cohort is fine
        let accepted = validate_cohort(Path::new("/s/e"), "e", &records).unwrap();
        assert_eq!(accepted.len(), 3);
        assert_eq!(accepted[2].incarnation, "inc-2");
    }

    #[test]
    fn config_differences_name_replica_field_and_values() {
        let mut records = cohort(5);
        records[4].config.batch_size = 64;
        records[2].config.seed = 7;
        records[2].config.mode = Mode::Mig;
        let e = err(&records);
        assert_eq!(e.kind(), coload_cohort_schema::FailureKind::ConfigMismatch);
        assert!(
            e.to_string().starts_with(
                "replica 2: mode mig != timeslice, seed 7 != 0; replica 4: batch_size 64 != 32 ("
            ),
            "{e}"
        );
    }

    #[test]
    fn identity_problems_come_first() {
        let mut records = cohort(3);
        records[1].replica = 2;
        assert!(
            err(&records)
                .to_string()
                .contains("ready.1.json claims replica 2")
        );
        let mut records = cohort(3);
        records[2].experiment = "other".into();
        assert!(
            err(&records)
                .to_string()
                .contains("ready.2.json is for experiment \"other\", not \"e\"")
        );
        let mut records = cohort(3);
        records[2].incarnation = "inc-0".into();
        assert_eq!(
            err(&records).to_string(),
            "replicas 0 and 2 share incarnation inc-0; every worker process draws its own, so one \
             process published twice"
        );
    }

    #[test]
    fn ready_names_round_trip() {
        assert_eq!(parse_ready_name(&ready_name(12)), Some(12));
        for bad in [
            "ready..json",
            "ready.+1.json",
            "ready.1.json.tmp",
            "start.json",
            "ready.x.json",
        ] {
            assert_eq!(parse_ready_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_bytes_are_described_not_panicked_on() {
        let p = Path::new("ready.1.json");
        let good = serde_json::to_vec(&record(1, 2)).unwrap();
        assert!(parse::<ReadyRecord>(p, &good).is_ok());
        let truncated = parse::<ReadyRecord>(p, &good[..good.len() / 2]).unwrap_err();
        assert!(truncated.contains("EOF while parsing"), "{truncated}");
        assert_eq!(
            parse::<ReadyRecord>(p, b"\xff\xfe\x00").unwrap_err(),
            "it is not UTF-8 text"
        );
        assert_eq!(parse::<ReadyRecord>(p, b"").unwrap_err(), "it is empty");
        let wrong = parse::<ReadyRecord>(p, b"{\"schema_version\":1}").unwrap_err();
        assert!(wrong.contains("missing field"), "{wrong}");
        let future = parse::<ReadyRecord>(p, b"{\"schema_version\":9}").unwrap_err();
        assert!(
            future.contains("schema_version 9 is not supported"),
            "{future}"
        );
    }
}
