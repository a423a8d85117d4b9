//! A kernel profile of coload's `decode` step, the counterpart of
//! `scripts/perf/pytorch_decode.py --profile-steps` for PyTorch's side: builds the preset at a
//! batch, warms up, then profiles `--steps` decode iterations of a fresh cycle under libtorch's
//! profiler, eager and (on CUDA) one CUDA-graph replay per iteration; prints per step the device
//! activities (kernels, copies, fills), their time and the names that take the most, and writes
//! for each execution a chrome trace and a JSON summary into `--out`.
//!
//! ```text
//! cargo build --release -p coload-workload --example decode_profile
//! decode_profile --model tinyllama-1.1b --batch-size 8 --steps 20 --out out/profiles \
//!     [--device cuda:0] [--execution both|eager|cuda-graph] [--prompt-tokens 512] \
//!     [--output-tokens 128] [--warmup-iterations 256] [--top 15]
//! ```
//!
//! Files: `coload-<model>-b<B>-<eager|graph>.json` (the summary) and `...trace.json` (open in
//! Perfetto or chrome://tracing). Without CUDA (a CPU-only libtorch, `--device cpu`) it profiles
//! eager on the CPU and counts CPU operators, nested ones included, and says so.
//!
//! `--attention sdpa|flash-eager|flash` picks the kernel decode attends through (default: the
//! model's, `LlmModel::decode_attention`). `--compare-attention ROUNDS` instead times eager
//! decode through `sdpa` and through `flash-eager` in this one process, no profiler: both steps
//! built and warmed up, then ROUNDS rounds, each timing `--cycles` (default 4) whole cycles of
//! each (prefill included, as the worker's tokens/s counts them), the order alternating from
//! round to round; it prints tokens/s per round and writes
//! `coload-<model>-b<B>-eager-attention.json`. One process holds both sides, so the spread that
//! separates eager runs of different processes does not enter the comparison.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line program prints its answer"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

use coload_cohort_schema::{DeviceChoice, Execution};
use coload_timing::Step;
use coload_workload::profile::{Counted, ProfileSummary};
use coload_workload::{DecodeAttention, DecodeOptions, DecodeStep, LlmPreset};

const USAGE: &str = "usage: decode_profile --model MODEL --batch-size B --steps N --out DIR \
                     [--device auto|cpu|cuda:N] [--execution both|eager|cuda-graph] \
                     [--prompt-tokens P] [--output-tokens G] [--warmup-iterations W] [--top K] \
                     [--attention sdpa|flash-eager|flash] [--compare-attention ROUNDS] \
                     [--cycles C]";

struct Args {
    model: LlmPreset,
    batch: u32,
    steps: u32,
    out: PathBuf,
    device: DeviceChoice,
    executions: Vec<Execution>,
    prompt: u32,
    output: u32,
    warmup: Option<u32>,
    top: usize,
    attention: Option<DecodeAttention>,
    compare_rounds: Option<u32>,
    cycles: u32,
}

fn number<T: FromStr>(flag: &str, text: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    text.parse::<T>()
        .map_err(|e| format!("{flag} `{text}` is no whole number: {e}"))
}

fn parse(args: &[String]) -> Result<Args, String> {
    let (mut model, mut batch, mut steps, mut out) = (None, None, None, None);
    let mut parsed = Args {
        model: LlmPreset::Gpt2Small,
        batch: 0,
        steps: 0,
        out: PathBuf::new(),
        device: DeviceChoice::Auto,
        executions: vec![],
        prompt: 512,
        output: 128,
        warmup: None,
        top: 15,
        attention: None,
        compare_rounds: None,
        cycles: 4,
    };
    let mut execution = "both".to_owned();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--model" => model = Some(LlmPreset::from_str(value).map_err(|e| e.to_string())?),
            "--batch-size" => batch = Some(number(flag, value)?),
            "--steps" => steps = Some(number(flag, value)?),
            "--out" => out = Some(PathBuf::from(value)),
            "--device" => {
                parsed.device = DeviceChoice::from_str(value).map_err(|e| e.to_string())?;
            }
            "--execution" => execution.clone_from(value),
            "--prompt-tokens" => parsed.prompt = number(flag, value)?,
            "--output-tokens" => parsed.output = number(flag, value)?,
            "--warmup-iterations" => parsed.warmup = Some(number(flag, value)?),
            "--top" => parsed.top = number(flag, value)?,
            "--attention" => {
                parsed.attention =
                    Some(DecodeAttention::from_str(value).map_err(|e| e.to_string())?);
            }
            "--compare-attention" => parsed.compare_rounds = Some(number(flag, value)?),
            "--cycles" => parsed.cycles = number(flag, value)?,
            other => return Err(format!("unknown flag `{other}`\n{USAGE}")),
        }
    }
    let missing = |what: &str| format!("{what} is required\n{USAGE}");
    parsed.model = model.ok_or_else(|| missing("--model"))?;
    parsed.batch = batch.ok_or_else(|| missing("--batch-size"))?;
    parsed.steps = steps.ok_or_else(|| missing("--steps"))?;
    parsed.out = out.ok_or_else(|| missing("--out"))?;
    parsed.executions = match execution.as_str() {
        "both" => vec![Execution::Eager, Execution::CudaGraph],
        one => vec![Execution::from_str(one).map_err(|e| e.to_string())?],
    };
    Ok(parsed)
}

/// `eager` or `graph`, as scripts/perf/pytorch_decode.py names its `--impl`.
fn short(execution: Execution) -> &'static str {
    match execution {
        Execution::Eager => "eager",
        Execution::CudaGraph => "graph",
    }
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The summary in the shape of pytorch_decode.py's `profile` object (plus what was counted).
fn summary_json(args: &Args, execution: Execution, s: &ProfileSummary, step_ms: f64) -> String {
    let top: Vec<String> = s
        .top
        .iter()
        .map(|l| {
            format!(
                "{{\"name\": {}, \"calls_per_step\": {}, \"us_per_step\": {}}}",
                json_string(&l.name),
                l.calls_per_step,
                l.us_per_step
            )
        })
        .collect();
    let device = s.counted == Counted::DeviceActivities;
    format!(
        "{{\"impl\": \"coload-{}\", \"model\": \"{}\", \"batch_size\": {}, \"prompt_tokens\": {}, \
         \"output_tokens\": {}, \"profile\": {{\"decode_steps\": {}, \"counted\": {}, \
         \"device_events_per_step\": {}, \"device_us_per_step\": {}, \"events_per_step\": {}, \
         \"us_per_step\": {}, \"wall_ms_per_step_profiled\": {}, \"top\": [{}]}}}}\n",
        short(execution),
        args.model,
        args.batch,
        args.prompt,
        args.output,
        s.steps,
        json_string(s.counted.as_str()),
        if device {
            s.events_per_step.to_string()
        } else {
            "null".into()
        },
        if device {
            s.us_per_step.to_string()
        } else {
            "null".into()
        },
        s.events_per_step,
        s.us_per_step,
        step_ms,
        top.join(", ")
    )
}

/// The decode step the arguments ask for, run `execution`, attending through `attention`
/// (`None`: the model's default).
fn decode_options(
    args: &Args,
    execution: Execution,
    attention: Option<DecodeAttention>,
) -> DecodeOptions {
    DecodeOptions {
        model: args.model,
        device: args.device,
        batch_size: args.batch,
        prompt_tokens: args.prompt,
        generate_tokens: args.output,
        precision: None,
        seed: 0,
        execution,
        attention,
    }
}

fn profile(args: &Args, execution: Execution) -> Result<(), String> {
    let options = decode_options(args, execution, args.attention);
    let name = format!("coload-{}-b{}-{}", args.model, args.batch, short(execution));
    let fail = |e: &dyn std::fmt::Display| format!("{name}: {e}");
    let mut step = DecodeStep::new(&options).map_err(|e| fail(&e))?;
    // Two whole cycles by default: every attention length twice, as the comparison warms up.
    let warmup = args.warmup.unwrap_or(2 * args.output);
    for _ in 0..warmup {
        step.step().map_err(|e| fail(&e))?;
    }
    let trace = args.out.join(format!("{name}.trace.json"));
    let began = std::time::Instant::now();
    let profile = step
        .profile_decode(args.steps, Some(&trace))
        .map_err(|e| fail(&e))?;
    // Includes the profiler's own stop and trace writing: only a sanity figure.
    let wall_ms = began.elapsed().as_secs_f64() * 1e3 / f64::from(args.steps);
    let summary = profile
        .summary(args.steps, args.top)
        .map_err(|e| fail(&e))?;
    let attention = step.model().decode_attention();
    println!("== {name} ({execution}, decode attention: {attention})");
    print!("{summary}");
    let path = args.out.join(format!("{name}.json"));
    write(&path, &summary_json(args, execution, &summary, wall_ms))?;
    println!("wrote {} and {}", path.display(), trace.display());
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Eager decode through `sdpa` against `flash-eager` in this one process (see the module doc).
fn compare_attention(args: &Args, rounds: u32) -> Result<(), String> {
    let sides = [DecodeAttention::Sdpa, DecodeAttention::FlashEager];
    let name = format!("coload-{}-b{}-eager-attention", args.model, args.batch);
    let fail = |e: &dyn std::fmt::Display| format!("{name}: {e}");
    let mut steps = Vec::new();
    for attention in sides {
        let options = decode_options(args, Execution::Eager, Some(attention));
        let mut step = DecodeStep::new(&options).map_err(|e| fail(&e))?;
        for _ in 0..args.warmup.unwrap_or(2 * args.output) {
            step.step().map_err(|e| fail(&e))?;
        }
        steps.push(step);
    }
    let iterations = args.cycles * args.output;
    let tokens = f64::from(args.cycles) * f64::from(args.output) * f64::from(args.batch);
    let mut rates = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let step = &mut steps[i];
            step.restart();
            // Reading the tokens waits for the device: the clock starts and stops on an idle card.
            step.tokens().map_err(|e| fail(&e))?;
            let began = std::time::Instant::now();
            for _ in 0..iterations {
                step.step().map_err(|e| fail(&e))?;
            }
            step.tokens().map_err(|e| fail(&e))?;
            rates[i].push(tokens / began.elapsed().as_secs_f64());
        }
        println!(
            "round {round}: sdpa {:.0} tokens/s, flash-eager {:.0} tokens/s",
            rates[0][round as usize], rates[1][round as usize]
        );
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let json = format!(
        "{{\"model\": {}, \"batch_size\": {}, \"prompt_tokens\": {}, \"output_tokens\": {}, \
         \"cycles_per_round\": {}, \"tokens_per_s\": {{\"sdpa\": [{}], \"flash-eager\": [{}]}}}}\n",
        json_string(args.model.as_str()),
        args.batch,
        args.prompt,
        args.output,
        args.cycles,
        list(&rates[0]),
        list(&rates[1])
    );
    let path = args.out.join(format!("{name}.json"));
    write(&path, &json)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    if let Some(rounds) = args.compare_rounds {
        return compare_attention(&args, rounds);
    }
    let cuda = match args.device {
        DeviceChoice::Cpu => false,
        DeviceChoice::Cuda(_) => true,
        DeviceChoice::Auto => tch::Cuda::is_available(),
    };
    let mut failures = Vec::new();
    for &execution in &args.executions {
        if execution == Execution::CudaGraph && !cuda {
            println!(
                "== {} b{} graph: skipped (CUDA missing)",
                args.model, args.batch
            );
            continue;
        }
        // One execution failing (a capture refused) still leaves the other's profile.
        if let Err(e) = profile(&args, execution) {
            eprintln!("error: {e}");
            failures.push(e);
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} profile(s) failed", failures.len()))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
