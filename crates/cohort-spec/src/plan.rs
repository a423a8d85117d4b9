//! The plan TOML form of a [`CohortSpec`]: a study plan's `[flags]`, a policy's and a cohort's
//! `flags = { ... }` are laid over a spec, key by key, through the spec's own serde view.
//!
//! There is no second list of the flags a plan may set: a key is a plan flag exactly when it is
//! a field of [`CohortSpec`] (the flag's name with `_` for `-`: `window_s` is `--window-s`), so a
//! flag added to the spec is at once a plan key, with the same type and the same checks. A few
//! fields are set by something else ([`RESERVED`]) and refused with what sets them.

use serde_json::{Map, Value};

use crate::cohort::CohortSpec;
use crate::error::SpecError;

/// Fields of a spec a plan's flags may not set, and what sets them instead.
pub const RESERVED: [(&str, &str); 5] = [
    ("mode", "the policy's `mode`"),
    (
        "device",
        "the node (the study runs on the CPU where there is no GPU)",
    ),
    ("workers", "the cohort's `workers`"),
    ("count", "the cohort's `workers`"),
    ("workload", "the cohort's `workers`"),
];

/// The spec as plan keys and values: every field but the [`RESERVED`] ones, `None` left out.
pub fn to_table(spec: &CohortSpec) -> Result<toml::Table, SpecError> {
    let map = as_map(spec)?;
    let mut table = toml::Table::new();
    for (key, value) in map {
        if RESERVED.iter().any(|(k, _)| *k == key) || value.is_null() {
            continue;
        }
        let value = toml::Value::try_from(&value).map_err(|e| SpecError::PlanValue {
            key: key.clone(),
            message: e.to_string(),
        })?;
        table.insert(key, value);
    }
    Ok(table)
}

/// Lays `key = value` over `spec`: the key must be a field of the spec and not [`RESERVED`],
/// and the value must have the field's type and range (a seconds flag a positive number, a
/// size a `20GiB` string, ...). On error `spec` is unchanged.
pub fn overlay(spec: &mut CohortSpec, key: &str, value: &toml::Value) -> Result<(), SpecError> {
    if let Some((_, by)) = RESERVED.iter().find(|(k, _)| *k == key) {
        return Err(SpecError::PlanKey(format!(
            "`{key}` cannot be set in a plan's flags: {by} decides it"
        )));
    }
    let mut map = as_map(spec)?;
    if !map.contains_key(key) {
        return Err(SpecError::PlanKey(format!(
            "`{key}` is not a flag a plan can set; the flags are: {}",
            keys(&map).join(", ")
        )));
    }
    let json = serde_json::to_value(value).map_err(|e| SpecError::PlanValue {
        key: key.to_owned(),
        message: e.to_string(),
    })?;
    map.insert(key.to_owned(), json);
    *spec = serde_json::from_value(Value::Object(map)).map_err(|e| SpecError::PlanValue {
        key: key.to_owned(),
        message: e.to_string(),
    })?;
    Ok(())
}

/// Every key a plan's flags may set, in order.
#[must_use]
pub fn plan_keys() -> Vec<String> {
    let spec = CohortSpec::new(
        &crate::Mix::uniform(coload_cohort_schema::Workload::Train, 1),
        coload_cohort_schema::Mode::Exclusive,
    );
    as_map(&spec).map(|m| keys(&m)).unwrap_or_default()
}

fn keys(map: &Map<String, Value>) -> Vec<String> {
    map.keys()
        .filter(|k| !RESERVED.iter().any(|(r, _)| r == k))
        .cloned()
        .collect()
}

fn as_map(spec: &CohortSpec) -> Result<Map<String, Value>, SpecError> {
    match serde_json::to_value(spec) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(SpecError::PlanKey("a cohort spec is not a table".into())),
        Err(e) => Err(SpecError::PlanValue {
            key: "(spec)".into(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Mode;

    use super::*;
    use crate::Mix;

    fn base() -> CohortSpec {
        CohortSpec::new(&Mix::parse("serve=1,train=2").unwrap(), Mode::Mps)
    }

    #[test]
    fn a_plan_sets_the_batcher_and_arrivals() {
        let mut s = base();
        let t: toml::Table = toml::from_str(
            "arrivals = \"uniform\"\nmax_batch = 8\nmax_queue_delay_ms = 2.5\nrate = 100\n\
             window_s = 2\nmps_threads = 50\nmps_memory = \"20GiB\"",
        )
        .unwrap();
        for (k, v) in &t {
            overlay(&mut s, k, v).unwrap();
        }
        assert_eq!(s.serve.max_batch, 8);
        assert!((s.serve.max_queue_delay_ms - 2.5).abs() < 1e-12);
        assert_eq!(s.serve.arrivals, crate::Arrivals::Uniform);
        assert_eq!(s.flags.window_s, crate::Seconds::whole(2));
        assert_eq!(s.flags.mps_memory.unwrap().bytes(), 20 << 30);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn unknown_reserved_and_mistyped_keys_are_refused_and_leave_the_spec() {
        let mut s = base();
        let e = overlay(&mut s, "windows", &toml::Value::Integer(3)).unwrap_err();
        assert!(e.to_string().starts_with("`windows` is not a flag"), "{e}");
        assert!(e.to_string().contains("max_queue_delay_ms"), "{e}");
        let e = overlay(&mut s, "mode", &toml::Value::String("mig".into())).unwrap_err();
        assert!(e.to_string().contains("policy"), "{e}");
        let e = overlay(&mut s, "window_s", &toml::Value::Integer(-1)).unwrap_err();
        assert!(e.to_string().starts_with("`window_s`: "), "{e}");
        let e = overlay(&mut s, "batch_size", &toml::Value::Float(2.5)).unwrap_err();
        assert!(e.to_string().starts_with("`batch_size`: "), "{e}");
        assert_eq!(s, base());
    }

    #[test]
    fn every_field_is_a_plan_key_but_the_reserved() {
        let keys = plan_keys();
        for k in [
            "arrivals",
            "arrivals_file",
            "max_batch",
            "max_queue_delay_ms",
            "strict",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k} missing from {keys:?}");
        }
        for (r, _) in RESERVED {
            assert!(!keys.iter().any(|x| x == r));
        }
    }
}
