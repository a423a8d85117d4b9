//! The bytes one decode step of a built-in LLM must read, by the workload's own rule
//! (`LlmConfig::decode_cycle_read_bytes`), for records written before the worker recorded them:
//! scripts/perf/decode_table.py asks this rather than restating the rule.
//!
//! ```text
//! cargo run -q -p coload-workload --example decode_read_bytes -- MODEL BATCH PROMPT OUTPUT BYTES_PER_ELEMENT
//! ```
//!
//! Prints the bytes (mean over a cycle's decode steps) on one line.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line program prints its answer"
)]

use std::process::ExitCode;
use std::str::FromStr;

use coload_workload::LlmPreset;

fn number(what: &str, text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|e| format!("{what} `{text}` is no whole number: {e}"))
}

fn read_bytes(args: &[String]) -> Result<u64, String> {
    let [model, batch, prompt, output, element] = args else {
        return Err("usage: decode_read_bytes MODEL BATCH PROMPT OUTPUT BYTES_PER_ELEMENT".into());
    };
    let preset = LlmPreset::from_str(model).map_err(|e| e.to_string())?;
    let output = number("output", output)?;
    preset
        .config()
        .decode_cycle_read_bytes(
            u64::from(number("bytes per element", element)?),
            number("batch", batch)?,
            number("prompt", prompt)?,
            output,
        )
        .ok_or_else(|| format!("an output of {output} tokens has no decode step"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match read_bytes(&args) {
        Ok(bytes) => {
            println!("{bytes}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
