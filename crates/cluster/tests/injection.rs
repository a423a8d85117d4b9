//! Rendered text is data, never code: a path, a node name or an image holding line breaks of any
//! kind (LF, CR, NEL, U+2028/2029), NUL or terminal controls reaches the Kubernetes Job and the
//! Polyaxon operations as a quoted value or an escaped comment, so a YAML reader finds exactly
//! the document rendered and `sh` runs exactly the commands rendered.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use coload_cluster::{ResourceKey, Site, kubernetes, polyaxon};
use coload_cohort_schema::{InputShape, Mode};
use coload_spec::{CohortSpec, Mix};
use proptest::prelude::*;

fn python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-tools/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/provision-tools.sh (CI does) before this test",
        python.display()
    );
    python
}

/// Every YAML document in each of `yamls`, as PyYAML (a YAML 1.1 reader: NEL and U+2028 break
/// lines there) reads them, as JSON; one Python for them all.
fn yaml_documents(yamls: &[&str], dir: &Path) -> Vec<Vec<serde_json::Value>> {
    let path = dir.join("docs.json");
    std::fs::write(&path, serde_json::to_vec(yamls).unwrap()).unwrap();
    let out = Command::new(python())
        .args([
            "-c",
            "import json, sys, yaml\n\
             docs = json.load(open(sys.argv[1], encoding='utf-8'))\n\
             print(json.dumps([list(yaml.safe_load_all(d)) for d in docs]))",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "PyYAML cannot read a rendered document: {}\n{yamls:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn site(node: &str, image: &str) -> Site {
    Site {
        node: node.into(),
        resource: ResourceKey::parse("nvidia.com/gpu").unwrap(),
        image: image.into(),
        namespace: None,
    }
}

/// A cohort that reads a model file and an arrivals file at these paths (both created).
fn spec_with_files(dir: &Path, model_name: &str, trace_name: &str) -> CohortSpec {
    let model = dir.join(model_name);
    std::fs::write(&model, b"not really torchscript").unwrap();
    let trace = dir.join(trace_name);
    std::fs::write(&trace, b"0.1\n0.2\n").unwrap();
    let mut spec = CohortSpec::new(&Mix::parse("serve=1,train=1").unwrap(), Mode::Timeslice);
    spec.flags.model_file = Some(model);
    spec.flags.input_shape = Some(InputShape([3, 32, 32]));
    spec.flags.num_classes = Some(10);
    spec.serve.arrivals_file = Some(trace);
    spec.serve.rate = None;
    spec
}

/// Runs `launch.sh` with a `polyaxon` that only logs its calls; returns the log.
fn run_launch_script(script: &str, dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("polyaxon");
    std::fs::write(&fake, "#!/bin/sh\necho \"polyaxon $*\" >> \"$CALLS\"\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ops = dir.join("ops");
    std::fs::create_dir_all(&ops).unwrap();
    std::fs::write(ops.join("launch.sh"), script).unwrap();
    let calls = dir.join("calls.log");
    let out = Command::new("/bin/sh")
        .arg(ops.join("launch.sh"))
        .args(["project", "queue"])
        .current_dir(dir)
        .env("CALLS", &calls)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "launch.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&calls).unwrap_or_default()
}

/// A newline in a model-file path used to end the `# first copy ...` comment of launch.sh, and
/// the rest of the path ran as a command.
#[test]
fn a_newline_in_a_path_does_not_run_in_launch_sh() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_with_files(
        dir.path(),
        "m\ntouch INJECTED\n.pt",
        "t\rtouch INJECTED2\u{2028}x",
    );
    let ops =
        polyaxon::render_operations(&spec, &site("n1", kubernetes::DEFAULT_IMAGE), "e-1").unwrap();
    let calls = run_launch_script(&ops.launch_script, dir.path());
    assert!(
        !dir.path().join("INJECTED").exists() && !dir.path().join("INJECTED2").exists(),
        "the path ran as a command:\n{}",
        ops.launch_script
    );
    assert_eq!(calls.lines().count(), 2, "{calls}");
}

/// A CR in a path used to end the Job's header comment for a YAML reader: the text after it
/// became a Pod document of its own ahead of the Job.
#[test]
fn a_carriage_return_in_a_path_adds_no_yaml_document() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "x\rapiVersion: v1\rkind: Pod\rmetadata:\r  name: evil\r---\r#";
    let spec = spec_with_files(dir.path(), evil, "t\u{85}kind: Pod\u{2029}y");
    let job = kubernetes::render_job(&spec, &site("n1", kubernetes::DEFAULT_IMAGE), "e-1").unwrap();
    let docs = yaml_documents(&[&job.yaml], dir.path());
    assert_eq!(docs, vec![vec![job.manifest.clone()]], "{}", job.yaml);
}

/// Arbitrary Unicode, weighted towards the characters that end lines or move a terminal.
fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '\n', '\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{1b}', '\u{7f}', '\u{0}', '\t', '#', '\'',
        '"', '\\', '$', '`', ';', ':', '-', ' ', '\u{feff}', '\u{fffe}', '\u{ffff}',
    ]);
    prop::collection::vec(prop_oneof![special, any::<char>()], 1..max)
        .prop_map(|cs| cs.into_iter().collect())
}

/// A file name made of `text`: no `/`, no NUL, at most 200 bytes (what Linux allows).
fn file_name(text: &str, fallback: &str) -> String {
    let mut name = String::new();
    for c in text.chars().filter(|&c| c != '/' && c != '\0') {
        if name.len() + c.len_utf8() > 200 {
            break;
        }
        name.push(c);
    }
    if name.is_empty() || name == "." || name == ".." {
        fallback.to_owned()
    } else {
        name
    }
}

/// The script's lines that are not comments.
fn commands(script: &str) -> Vec<&str> {
    script
        .split('\n')
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the paths of the input files hold (the spec's only free-text fields; names,
    /// nodes and images are checked against their grammars first), every rendered YAML file is
    /// exactly the manifest rendered (one document, the same values), and launch.sh passes
    /// `sh -n` and holds exactly the commands of the same cohort with plain names.
    #[test]
    fn rendered_text_is_data(
        folder in hostile_text(30),
        model in hostile_text(40),
        trace in hostile_text(40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join(file_name(&folder, "d"));
        std::fs::create_dir_all(&inside).unwrap();
        let spec = spec_with_files(&inside, &file_name(&model, "m"), &file_name(&trace, "t"));
        let site = site("n1", kubernetes::DEFAULT_IMAGE);
        let job = kubernetes::render_job(&spec, &site, "e-1").unwrap();
        let ops = polyaxon::render_operations(&spec, &site, "e-1").unwrap();
        let mut texts = vec![job.yaml.as_str()];
        let mut want = vec![vec![job.manifest.clone()]];
        for ((_, text), value) in ops.operations.iter().zip(&ops.values) {
            texts.push(text);
            want.push(vec![value.clone()]);
        }
        // Each file is one document, the manifest it was rendered from.
        prop_assert_eq!(yaml_documents(&texts, dir.path()), want);
        let script = dir.path().join("launch.sh");
        std::fs::write(&script, &ops.launch_script).unwrap();
        let check = Command::new("/bin/sh").arg("-n").arg(&script).output().unwrap();
        prop_assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
        let plain_dir = tempfile::tempdir().unwrap();
        let plain = spec_with_files(plain_dir.path(), "m.pt", "t.txt");
        let plain_ops = polyaxon::render_operations(&plain, &site, "e-1").unwrap();
        prop_assert_eq!(commands(&ops.launch_script), commands(&plain_ops.launch_script));
    }

    /// A node or image name holding any of these characters is refused by name, never
    /// rendered.
    #[test]
    fn hostile_node_and_image_names_are_refused(node in hostile_text(30), image in hostile_text(30)) {
        let spec = CohortSpec::new(&Mix::parse("train=1").unwrap(), Mode::Timeslice);
        for site in [site(&node, kubernetes::DEFAULT_IMAGE), site("n1", &image)] {
            if let Err(e) = kubernetes::render_job(&spec, &site, "e-1") {
                prop_assert!(e.to_string().contains("is not a valid"), "{}", e);
            } else {
                prop_assert!(coload_cohort_schema::text::first_unsafe(&site.node).is_none());
                prop_assert!(coload_cohort_schema::text::first_unsafe(&site.image).is_none());
            }
        }
    }
}

/// `render --arrivals-file /dev/zero` hashed the device for 725 s: only a regular file is an
/// input.
#[test]
fn a_device_is_never_hashed_as_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec_with_files(dir.path(), "m.pt", "t.txt");
    spec.serve.arrivals_file = Some("/dev/zero".into());
    let started = std::time::Instant::now();
    let e = kubernetes::render_job(&spec, &site("n1", kubernetes::DEFAULT_IMAGE), "e-1")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/dev/zero") && e.contains("not a regular file"),
        "{e}"
    );
    assert!(started.elapsed().as_secs() < 5);
}
