//! The command line: arguments (clap derive; the `///` comments are the help) and `run`.

use std::io::Write as _;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use coload_analysis::{Options, compare, isolation_dirs, load_compare_input, summarize_dirs};
use coload_cohort_schema::{IsolationResult, exit, read_document, write_json_atomic};
use coload_report::{
    render_comparison_markdown, render_isolation_markdown, render_isolation_table, render_markdown,
    render_table, write_report,
};

/// Summarize a coload cohort from its worker folders, or compare cohorts.
///
/// Without a subcommand, summarizes one cohort: `bench-summarize downloaded/worker-0 ...
/// downloaded/worker-6 --out summary.json`, or `bench-summarize downloaded/` for a folder holding
/// `worker-*` folders. An incomplete or inconsistent cohort is refused with every problem named
/// (exit 30); malformed input exits 2.
#[derive(Debug, Parser)]
#[command(
    name = "bench-summarize",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    summarize: SummarizeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarize one cohort (the default).
    Summarize(SummarizeArgs),
    /// Compare cohorts against solo baselines and against each other; writes
    /// comparison.json, comparison.md and report.html.
    Compare(CompareArgs),
    /// The memory-isolation result of hog cohorts (bench-cohort --workers hog=1,train=6), one
    /// per cohort so that modes read side by side: who failed, at what allocation, with what
    /// error. Failed cohorts are read too (their failures are the result).
    Isolation(IsolationArgs),
    /// Render the repository's results page (docs/results.md) from the recorded data under
    /// docs/results/data, with the report's rules; with --check, fail (exit 1, naming the first
    /// differing line) where the committed page differs from what the data give.
    ResultsPage(ResultsPageArgs),
}

#[derive(Debug, Args)]
struct ResultsPageArgs {
    /// The folder holding each round's data (round 1's comparison.json is beside it).
    #[arg(long, value_name = "DIR", default_value = "docs/results/data")]
    data: PathBuf,
    /// The page to write, or with --check to compare.
    #[arg(long, value_name = "FILE", default_value = "docs/results.md")]
    out: PathBuf,
    /// Compare with --out instead of writing it.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// The summary.json document.
    Json,
    /// A Markdown document.
    Markdown,
}

#[derive(Debug, Args)]
struct SummarizeArgs {
    /// Worker folders (each holding worker.json and batches.jsonl), or folders holding them.
    #[arg(value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Also write the summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Refuse a cohort whose devices do not fit its declared mode (exit 21) instead of warning.
    #[arg(long)]
    strict: bool,
    /// Threads reading batches.jsonl files (default: every available core).
    #[arg(long, value_name = "N")]
    threads: Option<NonZeroUsize>,
    /// Judge serve workers' request latency against this objective, milliseconds (overrides
    /// the one they recorded); refused when the cohort has no serve worker.
    #[arg(long, value_name = "MS")]
    slo_ms: Option<f64>,
    /// The quantile that must meet --slo-ms, --ttft-slo-ms and --tpot-slo-ms (default 0.99:
    /// p99 <= the objective).
    #[arg(long, value_name = "Q")]
    slo_quantile: Option<f64>,
    /// Judge serve-llm workers' time to first token against this objective, milliseconds
    /// (overrides the one they recorded; with --tpot-slo-ms); refused without a serve-llm worker.
    #[arg(long, value_name = "MS")]
    ttft_slo_ms: Option<f64>,
    /// Judge serve-llm workers' time per output token against this objective, milliseconds.
    #[arg(long, value_name = "MS")]
    tpot_slo_ms: Option<f64>,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// summary.json files or cohort folders to compare.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<PathBuf>,
    /// Solo baselines (one-worker summary.json files or cohort folders): several per workload
    /// (repeats, and one set per card); each cohort is divided by the runs on its own card.
    #[arg(long, value_name = "INPUT", num_args = 1..)]
    baseline: Vec<PathBuf>,
    /// Folder to write comparison.json, comparison.md and report.html into.
    #[arg(long, value_name = "DIR", default_value = "report")]
    out: PathBuf,
    /// Refuse cohort folders whose devices do not fit their declared mode.
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Args)]
struct IsolationArgs {
    /// One per cohort: a folder holding its worker-* folders, or an isolation.json file.
    #[arg(value_name = "COHORT", required = true)]
    cohorts: Vec<PathBuf>,
    /// Also write the results as a JSON array to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Parses the command line and runs it.
pub(crate) fn run() -> anyhow::Result<ExitCode> {
    // Parses like `Cli::parse()`, and answers the hidden `--generate` (man page, completions).
    let cli: Cli = match coload_spec::generate::parse(std::convert::identity) {
        Ok(cli) => cli,
        Err(generated) => return Ok(generated.finish()),
    };
    match cli.command {
        None => summarize(&cli.summarize),
        Some(Command::Summarize(args)) => summarize(&args),
        Some(Command::Compare(args)) => run_compare(&args),
        Some(Command::Isolation(args)) => run_isolation(&args),
        Some(Command::ResultsPage(args)) => run_results_page(&args),
    }
}

fn run_results_page(args: &ResultsPageArgs) -> anyhow::Result<ExitCode> {
    let page = match coload_report::results_page::render(&args.data) {
        Ok(page) => page,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(exit::INVALID_INPUT));
        }
    };
    if !args.check {
        std::fs::write(&args.out, &page)
            .with_context(|| format!("writing {}", args.out.display()))?;
        eprintln!("wrote {}", args.out.display());
        return Ok(ExitCode::from(exit::COMPLETE));
    }
    let committed = std::fs::read_to_string(&args.out)
        .with_context(|| format!("reading {}", args.out.display()))?;
    match coload_report::results_page::first_difference(&committed, &page) {
        None => {
            eprintln!("{} matches the data", args.out.display());
            Ok(ExitCode::from(exit::COMPLETE))
        }
        Some(d) => {
            print(&format!("{d}\n"))?;
            eprintln!(
                "error: {} differs from what the data give: edit the data or the template \
                 (crates/report/src/results_page/results.md.tmpl), then run \
                 `bench-summarize results-page`",
                args.out.display()
            );
            // As diff(1): 1 when the texts differ.
            Ok(ExitCode::from(1))
        }
    }
}

fn run_isolation(args: &IsolationArgs) -> anyhow::Result<ExitCode> {
    let mut results: Vec<IsolationResult> = Vec::with_capacity(args.cohorts.len());
    for cohort in &args.cohorts {
        let result = if cohort.is_file() {
            read_document(cohort).with_context(|| format!("reading {}", cohort.display()))?
        } else {
            isolation_dirs(std::slice::from_ref(cohort))?
        };
        results.push(result);
    }
    if let Some(out) = &args.out {
        write_json_atomic(out, &results)?;
    }
    let text = match args.format {
        Format::Table => render_isolation_table(&results),
        Format::Markdown => render_isolation_markdown(&results),
        Format::Json => {
            let mut s =
                serde_json::to_string_pretty(&results).context("serializing isolation results")?;
            s.push('\n');
            s
        }
    };
    print(&text)?;
    Ok(ExitCode::from(exit::COMPLETE))
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing stdout"),
        _ => Ok(()),
    }
}

fn summarize(args: &SummarizeArgs) -> anyhow::Result<ExitCode> {
    let options = Options {
        strict: args.strict,
        threads: args.threads,
        slo_ms: args.slo_ms,
        slo_quantile: args.slo_quantile,
        ttft_slo_ms: args.ttft_slo_ms,
        tpot_slo_ms: args.tpot_slo_ms,
    };
    let summary = summarize_dirs(&args.dirs, &options)?;
    if let Some(out) = &args.out {
        write_json_atomic(out, &summary)?;
    }
    let text = match args.format {
        Format::Table => render_table(&summary),
        Format::Markdown => render_markdown(&summary),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&summary).context("serializing summary")?;
            s.push('\n');
            s
        }
    };
    print(&text)?;
    Ok(ExitCode::from(exit::COMPLETE))
}

fn run_compare(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let options = Options {
        strict: args.strict,
        ..Options::default()
    };
    let load = |paths: &[PathBuf]| -> anyhow::Result<Vec<_>> {
        paths
            .iter()
            .map(|p| {
                load_compare_input(p, &options)
                    .map(|(s, _)| s)
                    .with_context(|| format!("reading {}", p.display()))
            })
            .collect()
    };
    let cohorts = load(&args.inputs)?;
    let baselines = load(&args.baseline)?;
    let comparison = compare(&cohorts, &baselines)?;
    write_report(&args.out, &comparison)?;
    print(&render_comparison_markdown(&comparison))?;
    eprintln!(
        "wrote {0}/comparison.json, {0}/comparison.md and {0}/report.html",
        args.out.display()
    );
    Ok(ExitCode::from(exit::COMPLETE))
}
