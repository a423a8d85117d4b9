//! Files a cohort's workers read (`--model-file`, `--arrivals-file`) reach the Pods through the
//! shared claim, not a ConfigMap: a TorchScript model is tens to hundreds of MB and a ConfigMap
//! holds at most 1 MiB. Each file goes to `coload-files/<sha256>-<name>` on the claim, named by
//! its content, so two cohorts never fight over a name and a changed file is a new path. The
//! Pod checks the SHA-256 before it starts the worker (`sha256sum -c`), the worker then records
//! it in `worker.json` as it always does, and the barrier refuses a cohort whose workers loaded
//! different bytes (exit 12, config_mismatch).

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use coload_spec::CohortSpec;
use sha2::{Digest, Sha256};

use crate::error::ClusterError;

/// Where the claim is mounted in every Pod.
pub const SYNC_MOUNT: &str = "/mnt/benchmark-sync";
/// The ReadWriteMany claim (deploy/k8s/pvc.yaml).
pub const CLAIM: &str = "gpu-benchmark-sync";
/// The folder of the claim that holds the workers' results: `<experiment>/worker-<i>/`.
pub const RESULTS_DIR: &str = "coload-results";
/// The folder of the claim that holds staged input files.
pub const FILES_DIR: &str = "coload-files";

/// A local file a cohort needs on the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The file here.
    pub local: PathBuf,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// Its path relative to the claim's root: `coload-files/<sha256>-<name>`.
    pub in_claim: String,
}

impl Staged {
    /// Its path in a Pod.
    #[must_use]
    pub fn in_pod(&self) -> String {
        format!("{SYNC_MOUNT}/{}", self.in_claim)
    }

    /// Copies the file onto the claim mounted at `volume`, unless a file of the same content is
    /// already there. An existing file with other content is never overwritten.
    pub fn copy_to(&self, volume: &Path) -> Result<(), ClusterError> {
        let to = volume.join(&self.in_claim);
        if to.exists() {
            let there = sha256_file(&to)?;
            if there == self.sha256 {
                return Ok(());
            }
            return Err(ClusterError::Exists(to));
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ClusterError::Io {
                what: "cannot create",
                path: parent.to_owned(),
                source,
            })?;
        }
        std::fs::copy(&self.local, &to).map_err(|source| ClusterError::Io {
            what: "cannot copy the file onto the claim:",
            path: to.clone(),
            source,
        })?;
        Ok(())
    }
}

/// The SHA-256 of a file, lowercase hex (what the worker records as `model_file.sha256`).
pub fn sha256_file(path: &Path) -> Result<String, ClusterError> {
    let io = |source| ClusterError::Io {
        what: "cannot read",
        path: path.to_owned(),
        source,
    };
    // Only a regular file is an input: a device (`/dev/zero`) or a FIFO would be hashed
    // forever or hang the open.
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(ClusterError::Io {
            what: "not a regular file (a model file or a trace must be one):",
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        }))
}

/// Stages the spec's input files: returns the spec with their paths in the Pods, and the files.
pub fn stage(spec: &CohortSpec) -> Result<(CohortSpec, Vec<Staged>), ClusterError> {
    let mut out = spec.clone();
    let mut staged = Vec::new();
    if let Some(path) = &spec.flags.model_file {
        let s = one(path)?;
        out.flags.model_file = Some(PathBuf::from(s.in_pod()));
        staged.push(s);
    }
    if let Some(path) = &spec.serve.arrivals_file {
        let s = one(path)?;
        out.serve.arrivals_file = Some(PathBuf::from(s.in_pod()));
        staged.push(s);
    }
    Ok((out, staged))
}

fn one(path: &Path) -> Result<Staged, ClusterError> {
    let sha256 = sha256_file(path)?;
    // Only the name's safe characters: the name is for people, the hash is the identity.
    let name: String = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let name = name.trim_start_matches('.');
    Ok(Staged {
        local: path.to_owned(),
        in_claim: format!("{FILES_DIR}/{sha256}-{name}"),
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_by_content_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("my model.pt");
        std::fs::write(&model, b"abc").unwrap();
        let s = one(&model).unwrap();
        // SHA-256 of "abc".
        assert_eq!(
            s.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(s.in_claim, format!("coload-files/{}-my_model.pt", s.sha256));
        let volume = dir.path().join("volume");
        s.copy_to(&volume).unwrap();
        s.copy_to(&volume).unwrap();
        std::fs::write(volume.join(&s.in_claim), b"other").unwrap();
        assert!(matches!(s.copy_to(&volume), Err(ClusterError::Exists(_))));
        assert_eq!(std::fs::read(volume.join(&s.in_claim)).unwrap(), b"other");
    }
}
