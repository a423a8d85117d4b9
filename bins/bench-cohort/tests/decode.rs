//! A `decode` cohort on the CPU end to end, through the real bench-worker with the
//! tiny GPT-2 preset: the mix parser takes `decode`, the LLM flags reach every worker, each
//! record carries its phase, and the summary has each worker's tokens/s and TPOT.

use std::process::Command;

use coload_cohort_schema::{
    CohortSummary, DecodeAttention, Phase, Precision, WarmupStop, Workload, read_batches,
    read_document, read_worker_report,
};

mod common;

use common::{COHORT, worker_bin};

#[test]
fn a_decode_cohort_on_the_cpu_records_phases_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new(COHORT)
        .args([
            "--workers",
            "decode=2",
            "--mode",
            "timeslice",
            "--device",
            "cpu",
        ])
        .args(["--model", "gpt2-tiny", "--batch-size", "2"])
        .args(["--prompt-tokens", "16", "--output-tokens", "6"])
        .args([
            "--window-s",
            "2",
            "--warmup-batches",
            "1",
            "--start-lead-s",
            "2",
        ])
        .args(["--join-timeout-s", "120"])
        .arg("--worker-bin")
        .arg(worker_bin())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("2 workers (2 decode)"), "{table}");
    assert!(table.contains("tokens (decode workers):"), "{table}");
    for i in 0..2 {
        let w = out.join(format!("worker-{i}"));
        let report = read_worker_report(&w.join("worker.json")).unwrap();
        assert_eq!(report.config.workload, Workload::Decode);
        assert_eq!(report.config.model, "gpt2-tiny");
        let llm = report
            .config
            .llm
            .expect("a decode worker records config.llm");
        assert_eq!(
            (llm.batch_size, llm.prompt_tokens, llm.output_tokens),
            (2, 16, 6)
        );
        // fp32 on the CPU when --precision is not given.
        assert_eq!(llm.precision, Precision::Fp32);
        assert_eq!(llm.context_tokens, 64);
        // 2 layers x (keys + values) x 2 sequences x 64 positions x 64 wide x 4 bytes.
        assert_eq!(llm.kv_cache_bytes, Some(2 * 2 * 2 * 64 * 64 * 4));
        assert_eq!(report.config.parameter_count, Some(136_960));
        // What a decode step must read, mean over a cycle: the weights but the position table,
        // (136,960 - 64 x 64) x 4 = 531,456 bytes, and 2 sequences' keys and values over
        // 16 + 3 positions on average at 2 layers x 2 x 64 x 4 = 1,024 bytes each = 38,912.
        assert_eq!(llm.decode_read_bytes, Some(531_456 + 38_912));
        // The CPU has no FlashAttention kernel: decode attends as PyTorch's decoders do.
        assert_eq!(llm.decode_attention, Some(DecodeAttention::Sdpa));
        // The warmup: one batch asked for is one whole cycle of 6; judging one cycle against
        // the one before needs two, and it stops on a cycle's end, within 10 x 2 cycles.
        let warmup = report
            .runtime
            .as_ref()
            .and_then(|r| r.warmup)
            .expect("runtime.warmup");
        assert_eq!(
            (
                warmup.min_batches,
                warmup.block_batches,
                warmup.window_blocks
            ),
            (6, 6, 1)
        );
        assert!(
            (12..=120).contains(&warmup.batches) && warmup.batches.is_multiple_of(6),
            "{warmup:?}"
        );
        assert!(
            warmup.stop != WarmupStop::NoneAsked && warmup.last_median_ns.is_some(),
            "{warmup:?}"
        );
        // The window began at a cycle's start: a prefill, then five decode steps, again.
        let batches = read_batches(&w.join("batches.jsonl")).unwrap();
        assert!(batches.len() >= 12, "only {} batches", batches.len());
        for b in &batches {
            let want = if b.index % 6 == 0 {
                Phase::Prefill
            } else {
                Phase::Decode
            };
            assert_eq!(b.phase, Some(want), "{b:?}");
            assert_eq!(b.samples, 2);
        }
    }
    let summary: CohortSummary = read_document(&out.join("summary.json")).unwrap();
    for w in &summary.workers {
        let d = w.decode.as_ref().expect("a decode summary per worker");
        assert!(d.tokens_per_s > 0.0);
        assert!((d.tokens_per_s - w.samples_per_s).abs() < 1e-9);
        assert!(d.prefills > 0 && d.decode_steps >= 4 * d.prefills);
        let (prefill, tpot) = (d.prefill_ms.unwrap(), d.tpot_ms.unwrap());
        assert!(tpot.p50 > 0.0 && tpot.p50 <= tpot.p99 && prefill.p50 > 0.0);
    }
}

#[test]
fn decode_flags_are_refused_where_they_make_no_sense() {
    for (args, says) in [
        (
            &[
                "--workers",
                "decode=1",
                "--model",
                "gpt2-tiny",
                "--prompt-tokens",
                "64",
            ][..],
            "context of 64",
        ),
        (
            &["--workers", "decode=1", "--output-tokens", "0"],
            "at least 1 token",
        ),
        (
            &["--workers", "train=1", "--prompt-tokens", "8"],
            "the mix has none",
        ),
        (
            &["--workers", "decode=1", "--model", "resnet18"],
            "built-in LLM",
        ),
    ] {
        let output = Command::new(COHORT)
            .args(["--mode", "timeslice", "--device", "cpu", "--out"])
            .arg(tempfile::tempdir().unwrap().path().join("run"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
