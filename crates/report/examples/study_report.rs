//! Writes a study's report again from its folder, without running anything: the
//! page `bench-cohort study` writes at the end of a run, for a study folder whose data are
//! kept in the repository (`docs/results/data/<round>/<study>/`).
//!
//!     cargo run -p coload-report --example study_report -- STUDY_DIR
//!
//! Reads `STUDY_DIR/index.json` and the plan's title and description from `STUDY_DIR/plan.toml`
//! (its `name =` and `description =` lines), and writes `STUDY_DIR/report/`.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: it reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;

use coload_cohort_schema::study::Index;
use coload_report::study_report::{About, write};

/// The quoted value of a `key = "..."` line of the plan, where there is one.
fn plan_value(plan: &str, key: &str) -> Option<String> {
    plan.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: study_report STUDY_DIR");
        return ExitCode::from(2);
    };
    let index: Index = match coload_cohort_schema::read_document(&dir.join("index.json")) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap_or_default();
    let about = About {
        title: format!(
            "coload study: {}",
            plan_value(&plan, "name").unwrap_or_else(|| index.plan.clone())
        ),
        description: plan_value(&plan, "description")
            .unwrap_or_else(|| "a coload study".to_owned()),
        node: index.node.clone(),
    };
    match write(&dir, &about, &index) {
        Ok(w) => {
            for warning in &w.warnings {
                eprintln!("warning: {warning}");
            }
            match w.dir {
                Some(d) => println!("wrote {}", d.join("report.html").display()),
                None => println!("no complete cohort: no report"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
