//! The summarize benchmark: 7 workers x 1,000,000 batches each, timed, with peak memory.
//!
//! `cargo run --release -p coload-analysis --example summarize_bench [-- WORKERS BATCHES]`
//! generates the cohort once under the system temp folder (about 95 bytes a batch), then runs
//! the summary in a child process so that its peak resident memory (`VmHWM`) covers the summary
//! alone, not the generation. Goal: under 3 s on a 2-core machine, memory bounded by
//! 8 bytes a kept batch.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark prints its figures"
)]

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use coload_analysis::{Options, summarize_dirs};

const T0: u64 = 1_700_000_000_000_000_000;
const SAMPLES: u32 = 32;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--measure") {
        measure(Path::new(&args[1]));
        return;
    }
    let workers: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(7);
    let batches: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("coload-summarize-bench-{workers}x{batches}"));
    if !dir.join("complete").exists() {
        let t = Instant::now();
        generate(&dir, workers, batches).expect("generate the cohort");
        eprintln!(
            "generated {} in {:.1} s",
            dir.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let status = std::process::Command::new(std::env::current_exe().expect("own path"))
        .arg("--measure")
        .arg(&dir)
        .status()
        .expect("run the measurement");
    #[expect(
        clippy::disallowed_methods,
        reason = "a benchmark's main passes on its measuring child's exit status"
    )]
    std::process::exit(status.code().unwrap_or(1));
}

fn measure(dir: &Path) {
    let t = Instant::now();
    let summary = summarize_dirs(&[dir.to_owned()], &Options::default()).expect("summarize");
    let secs = t.elapsed().as_secs_f64();
    let batches: u64 = summary.workers.iter().map(|w| w.batches).sum();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    println!(
        "summarize: {} workers, {batches} kept batches in {secs:.3} s ({:.1} M batches/s), \
         peak resident memory {peak}",
        summary.workers.len(),
        batches as f64 / secs / 1e6
    );
}

fn generate(dir: &Path, workers: u32, batches: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Batches of 1 ms, 2 ms apart in the pattern below: the window fits them all.
    let window_ns = batches * 1_100_000 + 1_000_000;
    for r in 0..workers {
        let w: PathBuf = dir.join(format!("worker-{r}"));
        std::fs::create_dir_all(&w)?;
        let mut out =
            BufWriter::with_capacity(1 << 20, std::fs::File::create(w.join("batches.jsonl"))?);
        let mut t = T0;
        let mut line = String::with_capacity(128);
        for i in 0..batches {
            // A spread of durations so that percentiles differ: 0.9 .. 1.1 ms.
            let d = 900_000 + (i * 7919 + u64::from(r) * 104_729) % 200_000;
            line.clear();
            let _ = writeln!(
                line,
                "{{\"index\":{i},\"start_unix_ns\":{t},\"end_unix_ns\":{},\"samples\":{SAMPLES}}}",
                t + d
            );
            out.write_all(line.as_bytes())?;
            t += 1_100_000;
        }
        out.flush()?;
        let report = serde_json::json!({
            "schema_version": 1, "experiment": "bench", "replica": r, "status": "complete",
            "failure": null,
            "config": {"mode": "timeslice", "workload": "train", "count": workers,
                       "model": "resnet18", "batch_size": SAMPLES, "image_size": 224,
                       "precision": "fp32", "warmup_batches": 20,
                       "window_s": window_ns as f64 / 1e9, "start_lead_s": 5.0, "seed": 0},
            "identity": {"hostname": "bench", "node_name": null, "pod_name": null,
                         "pod_uid": null, "run_uuid": null, "pid": 1},
            "device": null, "barrier": null,
            "window": {"start_unix_ns": T0, "end_unix_ns": T0 + window_ns,
                       "batches": batches, "samples": batches * u64::from(SAMPLES)},
            "memory": null, "host": null, "telemetry": null
        });
        std::fs::write(w.join("worker.json"), serde_json::to_vec_pretty(&report)?)?;
    }
    std::fs::write(dir.join("complete"), b"")
}
