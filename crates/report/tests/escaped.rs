//! Control characters in recorded names (an experiment id, a model from worker.json) are shown
//! escaped on the terminal and in Markdown, never sent raw.

use std::path::Path;

use coload_analysis::{Options, summarize_dirs};
use coload_report::{render_markdown, render_table};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// Terminal escapes in an experiment id and a model name from worker.json are shown escaped.
#[test]
fn control_characters_from_recorded_files_are_escaped() {
    let mut s = summarize_dirs(&[fixture("solo-train")], &Options::default()).unwrap();
    s.experiment = "exp\u{1b}[2J\u{1b}[H".into();
    s.workers[0].model = Some("resnet\u{1b}]0;owned\u{7}\r\n| x |".into());
    for text in [render_table(&s), render_markdown(&s)] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
            "{text}"
        );
        assert!(text.contains("exp\\u{1b}[2J"), "{text}");
    }
}
