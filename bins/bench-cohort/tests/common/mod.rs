//! What every bench-cohort integration test needs: the binary under test and the real
//! bench-worker it launches.
#![allow(dead_code, reason = "each test binary uses a part")]

use std::path::{Path, PathBuf};

/// bench-cohort, built by cargo for this test.
pub(crate) const COHORT: &str = env!("CARGO_BIN_EXE_bench-cohort");

/// The real bench-worker, built next to bench-cohort by `cargo test --workspace`.
pub(crate) fn worker_bin() -> PathBuf {
    let p = Path::new(COHORT).with_file_name("bench-worker");
    assert!(
        p.exists(),
        "{} is missing: build it first (cargo build -p bench-worker, or cargo test --workspace)",
        p.display()
    );
    p
}
