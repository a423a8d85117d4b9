//! The serve summarize benchmark: one serve worker with 10,000,000 requests, timed, with peak
//! memory.
//!
//! `cargo run --release -p coload-analysis --example serve_summarize_bench [-- REQUESTS]`
//! generates the worker once under the system temp folder (`requests.jsonl` about 23 bytes a
//! request, batches of 1 to 16), then summarizes it in a child process so that its peak resident
//! memory (`VmHWM`) covers the summary alone. Goal: 10 M requests in seconds, with
//! memory that does not grow with the file (run it with 1 M and 10 M and compare).

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark prints its figures"
)]

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use coload_analysis::{Options, summarize_dirs};

const T0: u64 = 1_700_000_000_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--measure") {
        measure(Path::new(&args[1]));
        return;
    }
    let requests: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let dir = std::env::temp_dir().join(format!("coload-serve-bench-{requests}"));
    if !dir.join("complete").exists() {
        let t = Instant::now();
        generate(&dir, requests).expect("generate the worker");
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
    let options = Options {
        slo_ms: Some(5.0),
        ..Options::default()
    };
    let summary = summarize_dirs(&[dir.to_owned()], &options).expect("summarize");
    let secs = t.elapsed().as_secs_f64();
    let serve = summary.workers[0].serve.as_ref().expect("a serve worker");
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    println!(
        "serve summarize: {} requests in {} batches in {secs:.3} s ({:.1} M requests/s), \
         p99 {:?} ms, peak resident memory {peak}",
        serve.requests,
        serve.batches,
        serve.requests as f64 / secs / 1e6,
        serve.latency_ms.p99
    );
}

fn generate(dir: &Path, requests: u64) -> std::io::Result<()> {
    let w = dir.join("worker-0");
    std::fs::create_dir_all(&w)?;
    let mut req =
        BufWriter::with_capacity(1 << 20, std::fs::File::create(w.join("requests.jsonl"))?);
    let mut bat =
        BufWriter::with_capacity(1 << 20, std::fs::File::create(w.join("batches.jsonl"))?);
    // One request every 200 us; batches of 1 to 16 requests dispatched at their last arrival (or
    // when the previous batch completes) and served in 0.5 to 1 ms: a server that keeps up.
    let mut line = String::with_capacity(512);
    let mut first = 0u64;
    let mut t_free = T0;
    let mut batch = 0u64;
    while first < requests {
        let n = (1 + (batch * 7919) % 16).min(requests - first);
        let arrivals: Vec<u64> = (first..first + n).map(|i| T0 + i * 200_000).collect();
        let dispatch = t_free.max(*arrivals.last().unwrap_or(&T0));
        let complete = dispatch + 500_000 + (batch * 104_729) % 500_000;
        line.clear();
        let _ = write!(
            line,
            "{{\"batch\":{batch},\"first_request\":{first},\"dispatch_unix_ns\":{dispatch},\
             \"complete_unix_ns\":{complete},\"padded\":16,\"arrivals_unix_ns\":["
        );
        for (k, a) in arrivals.iter().enumerate() {
            let _ = write!(line, "{}{a}", if k == 0 { "" } else { "," });
        }
        line.push_str("]}\n");
        req.write_all(line.as_bytes())?;
        line.clear();
        let _ = writeln!(
            line,
            "{{\"index\":{batch},\"start_unix_ns\":{dispatch},\"end_unix_ns\":{complete},\"samples\":{n}}}"
        );
        bat.write_all(line.as_bytes())?;
        t_free = complete;
        first += n;
        batch += 1;
    }
    req.flush()?;
    bat.flush()?;
    let end = t_free + 1;
    let report = serde_json::json!({
        "schema_version": 1, "experiment": "serve-bench", "replica": 0, "status": "complete",
        "failure": null,
        "config": {"mode": "exclusive", "workload": "serve", "count": 1,
                   "model": "resnet18", "batch_size": 16, "image_size": 224,
                   "precision": "fp32", "warmup_batches": 20,
                   "window_s": (end - T0) as f64 / 1e9, "start_lead_s": 5.0, "seed": 0,
                   "serve": {"rate_per_s": 5_000.0, "arrivals": "uniform", "arrivals_file": null,
                             "max_batch": 16, "max_queue_delay_ms": 1.0,
                             "padded_sizes": [1, 2, 4, 8, 16], "slo_ms": 5.0}},
        "identity": {"hostname": "bench", "node_name": null, "pod_name": null,
                     "pod_uid": null, "run_uuid": null, "pid": 1},
        "device": null, "barrier": null,
        "window": {"start_unix_ns": T0, "end_unix_ns": end,
                   "batches": batch, "samples": requests},
        "memory": null, "host": null, "telemetry": null,
        "serve": {"requests": requests, "completed": requests, "in_flight_at_end": 0,
                  "queued_at_end": 0, "oldest_unfinished_age_ns": null,
                  "batches_dispatched": batch, "offsets_beyond_window": 0}
    });
    std::fs::write(w.join("worker.json"), serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(dir.join("complete"), b"")
}
