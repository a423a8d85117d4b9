//! No `worker.json` content may panic the reader: every input is a report or an error.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = coload_analysis::parse_worker_report(Path::new("worker.json"), data) {
        // What the summarizer does with a report must not panic either.
        let _ = report.config.differences(&report.config);
        let _ = report.window.map(|w| w.end_unix_ns.saturating_sub(w.start_unix_ns));
    }
});
