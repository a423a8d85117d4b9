//! Links libtorch the way a shipped binary needs it, and records what it was built from.
//!
//! - Keeps libtorch_cuda.so as a runtime dependency. Nothing in the binary references a symbol
//!   of libtorch_cuda.so directly (CUDA kernels register themselves when the library loads), so
//!   the linker's `--as-needed` drops it and CUDA then reports unavailable at run time. See
//!   docs/design.md ("libtorch") and ../shared/docs/gpu.md.
//! - Embeds no RUNPATH by default. The builder's libtorch directory (a path inside its virtual
//!   environment) exists nowhere else and leaks the builder's layout, so the binary
//!   finds libtorch through `LD_LIBRARY_PATH`: `scripts/with-libtorch` sets it here, the dist
//!   tarball's `bin/bench-worker` launcher on a GPU host. `COLOAD_RUNPATH` opts in to one, e.g.
//!   `$ORIGIN/../lib` for a bundle that carries its own libtorch.
//! - Sets `COLOAD_GIT_REVISION`, `COLOAD_LIBTORCH_VERSION` and `COLOAD_TCH_VERSION` for
//!   `bench-worker --version` (and the dist tarball's VERSION file). Each is "unknown" when it
//!   cannot be found (a build outside git, a libtorch without version metadata).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=COLOAD_RUNPATH");
    println!("cargo:rerun-if-env-changed=COLOAD_GIT_REVISION");
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let lib_dir = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .ok()
        .map(PathBuf::from);

    if let Some(lib_dir) = &lib_dir
        && lib_dir.join("libtorch_cuda.so").exists()
    {
        println!("cargo:rustc-link-arg-bins=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
    match std::env::var("COLOAD_RUNPATH") {
        Ok(runpath) if !runpath.is_empty() => {
            println!("cargo:rustc-link-arg-bins=-Wl,--enable-new-dtags,-rpath,{runpath}");
        }
        _ => {}
    }

    let revision = std::env::var("COLOAD_GIT_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git_revision(&manifest_dir))
        .unwrap_or_else(|| "unknown".to_owned());
    let libtorch = lib_dir
        .as_deref()
        .and_then(libtorch_version)
        .unwrap_or_else(|| "unknown".to_owned());
    let tch =
        tch_version(&manifest_dir.join("../../Cargo.lock")).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=COLOAD_GIT_REVISION={revision}");
    println!("cargo:rustc-env=COLOAD_LIBTORCH_VERSION={libtorch}");
    println!("cargo:rustc-env=COLOAD_TCH_VERSION={tch}");
}

/// The commit this workspace is checked out at (12 hex digits), or `None` outside a git
/// checkout of this workspace. Asks cargo to rerun the build script when HEAD moves.
fn git_revision(manifest_dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg(manifest_dir)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        output.status.success().then(|| text.trim().to_owned())
    };
    // Only this workspace's own repository counts, not one that happens to enclose a copy of it.
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if !top.join("bins/bench-worker/build.rs").exists() {
        return None;
    }
    let revision = git(&["rev-parse", "--short=12", "HEAD"])?;
    // HEAD, the branch it points to, and packed-refs: a commit or checkout changes one of them.
    // Only existing files: cargo reruns the script every build for a missing one.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched.into_iter().flatten() {
        let path = manifest_dir.join(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(revision)
}

/// The version of the libtorch in `lib_dir`: `version.py` beside it in the PyPI torch wheel
/// (`__version__ = '2.11.0+cu130'`), `build-version` in a libtorch archive.
fn libtorch_version(lib_dir: &Path) -> Option<String> {
    let root = lib_dir.parent()?;
    let from_wheel = || {
        let text = fs::read_to_string(root.join("version.py")).ok()?;
        text.lines().find_map(|line| {
            let value = line.strip_prefix("__version__")?.trim_start();
            let value = value.strip_prefix('=')?.trim();
            Some(value.trim_matches(|c| c == '\'' || c == '"').to_owned())
        })
    };
    let from_archive = || {
        let text = fs::read_to_string(root.join("build-version")).ok()?;
        Some(text.trim().to_owned())
    };
    from_wheel()
        .or_else(from_archive)
        .filter(|v| !v.is_empty() && !v.contains(char::is_whitespace))
}

/// The tch version the lock file pins, or `None` without one.
fn tch_version(lock: &Path) -> Option<String> {
    let text = fs::read_to_string(lock).ok()?;
    println!("cargo:rerun-if-changed={}", lock.display());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"tch\"" {
            let version = lines.next()?.trim().strip_prefix("version = ")?;
            return Some(version.trim_matches('"').to_owned());
        }
    }
    None
}
