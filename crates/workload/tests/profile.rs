//! The profiler on the CPU path (what a CPU-only libtorch, or a host without a GPU, records):
//! decode steps profiled through `DecodeStep::profile_decode` count the innermost computing CPU
//! operators, one attention kernel per layer and step, and leave a chrome trace; bad step counts and a second profiler are
//! refused. The device path (kernels, graph replays) runs in `examples/decode_profile.rs` on the
//! GPU host.

use coload_cohort_schema::{DeviceChoice, Execution};
use coload_workload::profile::{Counted, Profiler};
use coload_workload::{DecodeOptions, DecodeStep, LlmPreset};

fn step(model: LlmPreset, generate: u32) -> DecodeStep {
    DecodeStep::new(&DecodeOptions {
        model,
        device: DeviceChoice::Cpu,
        batch_size: 2,
        prompt_tokens: 8,
        generate_tokens: generate,
        precision: None,
        seed: 0,
        execution: Execution::Eager,
        attention: None,
    })
    .unwrap()
}

// One test function: the profiler is one per process, and the test harness runs the functions
// of a file on parallel threads.
#[test]
fn decode_steps_are_profiled_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    for model in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let mut decode = step(model, 6);
        let trace = dir.path().join(format!("{model}.json"));
        let profile = decode.profile_decode(4, Some(&trace)).unwrap();
        assert!(!profile.device_activities);
        let summary = profile.summary(4, 50).unwrap();
        assert_eq!(summary.counted, Counted::CpuOperators);
        let attention = summary
            .top
            .iter()
            .find(|l| l.name.starts_with("aten::_scaled_dot_product"))
            .unwrap_or_else(|| panic!("{model}: no attention among\n{summary}"));
        // One attention per layer and decode step: the prefill ran outside the profiler.
        let layers = f64::from(model.config().layers);
        assert!(
            (attention.calls_per_step - layers).abs() < 1e-9,
            "{model}: {} attentions per step, {layers} layers",
            attention.calls_per_step
        );
        let text = std::fs::read_to_string(&trace).unwrap();
        assert!(
            text.contains("traceEvents"),
            "{model}: {}",
            &text[..200.min(text.len())]
        );
        assert!(text.contains("aten::scaled_dot_product_attention"));
    }

    // A cycle of 6 generated tokens has 5 decode steps.
    let mut decode = step(LlmPreset::Gpt2Tiny, 6);
    for steps in [0, 6] {
        let e = decode.profile_decode(steps, None).unwrap_err().to_string();
        assert!(
            e.contains(&format!("cannot profile {steps} decode steps")),
            "{e}"
        );
        assert!(e.contains("profile 1 to 5"), "{e}");
    }

    // One profiler at a time; dropping one stops it.
    let first = Profiler::start(false).unwrap();
    let e = Profiler::start(false).unwrap_err().to_string();
    assert!(e.contains("already running"), "{e}");
    drop(first);
    let again = Profiler::start(false).unwrap();
    let profile = again.stop(None).unwrap();
    assert!(!profile.device_activities);
}
