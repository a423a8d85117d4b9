//! TorchScript modules made at test time by the provisioned PyTorch, shared by the workload's
//! tests and bench-worker's (which include this file by path).
//!
//! Nothing binary is committed and nothing is downloaded: `torch.jit.script(...).save()` writes
//! the modules into a temporary directory. The Python is found the same way from any clone:
//! `$COLOAD_PYTHON`, else the workspace's `.venv`, else `python3` on `PATH`
//! (`scripts/with-libtorch` puts `.venv/bin` first). Where none of them can `import torch` (a
//! user who set `LIBTORCH` and has no PyTorch), the tests say so on stderr and return; under CI
//! (`CI` set) or with `COLOAD_REQUIRE_TORCH_PYTHON=1` that is a failure instead, so CI never
//! counts a skipped test as a pass.
#![allow(dead_code, unreachable_pub, reason = "each test crate uses a part")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Writes the test modules into the directory given as `argv[1]` and prints, per file, its name,
/// its SHA-256 (Python's hashlib, independent of the Rust code under test) and its parameters
/// that require a gradient.
const MAKE_MODULES: &str = r#"
import hashlib, os, sys
import torch

out = sys.argv[1]
torch.manual_seed(0)

class Small(torch.nn.Module):
    """1x12x12 images -> 10 classes: conv, batch norm, pooling, linear."""
    def __init__(self):
        super().__init__()
        # No bias before batch norm (its gradient would be zero).
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)
    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))

class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(144, 10)
    def forward(self, x):
        y = self.fc(x.flatten(1))
        return y, y

class Syncing(torch.nn.Module):
    """Reads a value back to the host in its forward: cannot be captured in a CUDA graph."""
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(144, 10)
    def forward(self, x):
        y = self.fc(x.flatten(1))
        if bool(y.abs().sum() > 1e30):
            y = y * 0.5
        return y

class NoParams(torch.nn.Module):
    def forward(self, x):
        return x.flatten(1)[:, :10]

def save(module, name):
    path = os.path.join(out, name)
    torch.jit.script(module).save(path)

save(Small(), "small.pt")
frozen = Small()
for p in frozen.parameters():
    p.requires_grad_(False)
save(frozen, "frozen.pt")
save(Pair(), "pair.pt")
save(Syncing(), "syncing.pt")
save(NoParams(), "noparams.pt")
torch.save(Small().state_dict(), os.path.join(out, "state_dict.pt"))
with open(os.path.join(out, "garbage.pt"), "wb") as f:
    f.write(b"this is not a TorchScript archive\n" * 8)

for name in sorted(os.listdir(out)):
    with open(os.path.join(out, name), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    params = 0
    if name in ("small.pt", "frozen.pt"):
        params = sum(p.numel() for p in torch.jit.load(os.path.join(out, name)).parameters() if p.requires_grad)
    print(name, digest, params)
"#;

/// The modules, made once per test binary.
pub struct Modules {
    pub dir: tempfile::TempDir,
    /// `(file name, sha256, trainable parameters)` as Python saw them.
    pub facts: Vec<(String, String, u64)>,
}

impl Modules {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn facts(&self, name: &str) -> (&str, u64) {
        let (_, sha, params) = self
            .facts
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("python made no {name}"));
        (sha, *params)
    }
}

/// A Python that can `import torch`, found as the module doc says.
pub fn torch_python() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = std::env::var_os("COLOAD_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            workspace.join(".venv/bin/python3"),
            PathBuf::from("python3"),
        ]);
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import torch"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The modules, or `None` (after saying why) where no Python with torch exists outside CI.
#[expect(clippy::print_stderr, reason = "a skipped test says why on stderr")]
pub fn modules() -> Option<&'static Modules> {
    static MODULES: OnceLock<Option<Modules>> = OnceLock::new();
    MODULES
        .get_or_init(|| {
            let Some(python) = torch_python() else {
                let required = std::env::var_os("CI").is_some()
                    || std::env::var("COLOAD_REQUIRE_TORCH_PYTHON").as_deref() == Ok("1");
                assert!(
                    !required,
                    "no Python that can `import torch` (tried $COLOAD_PYTHON, the workspace's \
                     .venv and python3 on PATH); the TorchScript tests must run here (CI or \
                     COLOAD_REQUIRE_TORCH_PYTHON=1): run them through scripts/with-libtorch"
                );
                eprintln!(
                    "SKIPPED: the TorchScript tests need a Python that can `import torch` to \
                     make their modules (set COLOAD_PYTHON, or run through scripts/with-libtorch, \
                     which provisions .venv)"
                );
                return None;
            };
            let dir = tempfile::tempdir().expect("a temporary directory");
            // torch.jit.script reads the classes' source, so the script is a file (not `-c`),
            // outside the directory of modules.
            let script_dir = tempfile::tempdir().expect("a temporary directory");
            let script = script_dir.path().join("make_modules.py");
            std::fs::write(&script, MAKE_MODULES).expect("write the script");
            let out = Command::new(&python)
                .arg(&script)
                .arg(dir.path())
                .output()
                .expect("python runs");
            assert!(
                out.status.success(),
                "{} could not make the test modules: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let facts = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| {
                    let mut parts = l.split_whitespace();
                    Some((
                        parts.next()?.to_owned(),
                        parts.next()?.to_owned(),
                        parts.next()?.parse().ok()?,
                    ))
                })
                .collect();
            Some(Modules { dir, facts })
        })
        .as_ref()
}
