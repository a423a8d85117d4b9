//! A decode worker's tokens/s, prefill latency and time per output token, worked out
//! by hand from a synthetic cohort built on the `solo-infer` fixture's report.

use std::fmt::Write as _;
use std::path::Path;

use coload_analysis::{Options, summarize_dirs};
use coload_cohort_schema::{
    LlmConfig, Precision, WindowInfo, Workload, read_worker_report, write_json_atomic,
};
use coload_report::render_table;

const START_NS: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// One cycle of 200 ms: a 90 ms prefill, then decode steps of 20, 25, 30 and 35 ms; 50 cycles
/// fill the fixture's 10 s window. Every iteration generates 4 tokens (batch 4).
fn write_decode_worker(dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/solo-infer");
    let mut report = read_worker_report(&fixtures.join("worker-0/worker.json")).unwrap();
    report.experiment = "solo-decode".into();
    report.config.workload = Workload::Decode;
    report.config.model = "gpt2-tiny".into();
    report.config.batch_size = 4;
    report.config.llm = Some(LlmConfig {
        model: "gpt2-tiny".into(),
        batch_size: 4,
        prompt_tokens: 16,
        output_tokens: 5,
        precision: Precision::Fp32,
        context_tokens: 64,
        kv_cache_bytes: Some(1 << 20),
        decode_read_bytes: Some(50_000_000),
        decode_attention: None,
    });
    let mut lines = String::new();
    let mut t = START_NS;
    let mut index = 0u64;
    for _ in 0..50 {
        for (k, ms) in [90u64, 20, 25, 30, 35].into_iter().enumerate() {
            let phase = if k == 0 { "prefill" } else { "decode" };
            let end = t + ms * MS;
            writeln!(
                lines,
                r#"{{"index":{index},"start_unix_ns":{t},"end_unix_ns":{end},"samples":4,"phase":"{phase}"}}"#
            )
            .unwrap();
            t = end;
            index += 1;
        }
    }
    report.window = Some(WindowInfo {
        start_unix_ns: START_NS,
        end_unix_ns: START_NS + 10_000 * MS,
        batches: index,
        samples: index * 4,
    });
    let worker = dir.join("worker-0");
    std::fs::create_dir_all(&worker).unwrap();
    std::fs::write(worker.join("batches.jsonl"), lines).unwrap();
    write_json_atomic(&worker.join("worker.json"), &report).unwrap();
}

#[test]
fn a_decode_worker_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    write_decode_worker(dir.path());
    let s = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap();
    let w = &s.workers[0];
    let d = w
        .decode
        .as_ref()
        .expect("a decode worker has a decode summary");
    // 250 iterations of 4 tokens in 10 s.
    assert_eq!((w.batches, w.samples), (250, 1000));
    assert!((d.tokens_per_s - 100.0).abs() < 1e-9, "{}", d.tokens_per_s);
    assert_eq!((d.prefills, d.decode_steps), (50, 200));
    let prefill = d.prefill_ms.unwrap();
    assert!((prefill.p50 - 90.0).abs() < 1e-9 && (prefill.p99 - 90.0).abs() < 1e-9);
    // 50 each of 20, 25, 30, 35 ms: nearest ranks 100, 180, 198, 200 of 200.
    let tpot = d.tpot_ms.unwrap();
    for (got, want) in [
        (tpot.p50, 25.0),
        (tpot.p90, 35.0),
        (tpot.p99, 35.0),
        (tpot.p999, 35.0),
        (tpot.mean, 27.5),
        (tpot.min, 20.0),
    ] {
        assert!((got - want).abs() < 1e-9, "{tpot:?}");
    }
    assert_eq!((d.prompt_tokens, d.output_tokens, d.batch_size), (16, 5, 4));
    let table = render_table(&s);
    assert!(table.contains("tokens (decode workers):"), "{table}");
    assert!(table.contains("TPOT p99 ms"), "{table}");
    // The bytes a step reads, as the worker recorded them, over the median step of 25 ms:
    // 50 MB / 0.025 s = 2.00 GB/s.
    assert_eq!(d.decode_read_bytes, Some(50_000_000));
    let row = table
        .lines()
        .find(|l| l.starts_with("0 ") && l.contains("gpt2-tiny") && l.contains("25.000"))
        .unwrap_or_else(|| panic!("{table}"));
    let tail: Vec<&str> = row.split_whitespace().rev().take(2).collect();
    assert_eq!(tail, ["2.00", "50.00"], "{row}\n{table}");
    // The summary's JSON carries it; a summary without decode workers does not.
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"tpot_ms\""), "{json}");
}

#[test]
fn records_without_a_phase_leave_the_phases_empty() {
    let dir = tempfile::tempdir().unwrap();
    write_decode_worker(dir.path());
    let path = dir.path().join("worker-0/batches.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut stripped = String::new();
    for l in text.lines() {
        let cut = l.find(",\"phase\"").unwrap();
        writeln!(stripped, "{}}}", &l[..cut]).unwrap();
    }
    std::fs::write(&path, stripped).unwrap();
    let s = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap();
    let d = s.workers[0].decode.as_ref().unwrap();
    assert_eq!((d.prefills, d.decode_steps), (0, 0));
    assert_eq!((d.prefill_ms, d.tpot_ms), (None, None));
    assert!((d.tokens_per_s - 100.0).abs() < 1e-9);
}
