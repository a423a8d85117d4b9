//! A private CUDA MPS control daemon for one cohort.
//!
//! The daemon gets its own pipe and log directories under the cohort's output folder, so it
//! neither needs nor touches a system-wide MPS setup, and no GPU setting changes. It is stopped
//! (`quit` on its control pipe) when the guard drops: after the cohort, on a worker failure and
//! on Ctrl-C alike.
//!
//! The daemon is started without `CUDA_VISIBLE_DEVICES`. A server started with it enumerates only
//! those devices, and its clients' `CUDA_VISIBLE_DEVICES` is then read relative to that list:
//! a client asking for GPU 1 of a server that sees only GPU 1 finds no device, and libtorch
//! reports CUDA unavailable (seen on a 2-GPU H200 host). Started without it, the server sees
//! every GPU and each worker's `CUDA_VISIBLE_DEVICES` keeps its usual meaning, which is also what
//! the worker's NVML identity assumes. Run one MPS cohort per host at a time.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CONTROL: &str = "nvidia-cuda-mps-control";

/// Why the private MPS daemon could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MpsError {
    /// The control program is not on `PATH`.
    #[error("--mode mps needs {CONTROL} on PATH (it ships with the NVIDIA driver); not found")]
    NotFound,
    /// The daemon's directories could not be created.
    #[error("cannot create MPS directories under {}", .dir.display())]
    Directories {
        /// The cohort's MPS folder.
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Running the control program failed.
    #[error("cannot run {CONTROL}")]
    Run(#[source] std::io::Error),
    /// The control program ran and reported failure.
    #[error("{CONTROL} {what} failed ({status}); see {}", .log_dir.display())]
    Failed {
        /// `-d` or `quit`.
        what: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Where the daemon logs.
        log_dir: PathBuf,
    },
}

/// A running MPS control daemon; stopped on drop.
#[derive(Debug)]
pub(crate) struct MpsDaemon {
    pipe_dir: PathBuf,
    log_dir: PathBuf,
    stopped: bool,
}

impl MpsDaemon {
    /// Starts `nvidia-cuda-mps-control -d` with private directories under `root`.
    pub(crate) fn start(root: &Path) -> Result<Self, MpsError> {
        let pipe_dir = root.join("pipe");
        let log_dir = root.join("log");
        std::fs::create_dir_all(&pipe_dir)
            .and_then(|()| std::fs::create_dir_all(&log_dir))
            .map_err(|source| MpsError::Directories {
                dir: root.to_owned(),
                source,
            })?;
        let status = Command::new(CONTROL)
            .arg("-d")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env("CUDA_MPS_PIPE_DIRECTORY", &pipe_dir)
            .env("CUDA_MPS_LOG_DIRECTORY", &log_dir)
            .status();
        match status {
            Ok(s) if s.success() => Ok(MpsDaemon {
                pipe_dir,
                log_dir,
                stopped: false,
            }),
            Ok(status) => Err(MpsError::Failed {
                what: "-d",
                status,
                log_dir,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(MpsError::NotFound),
            Err(e) => Err(MpsError::Run(e)),
        }
    }

    /// The environment a client needs.
    pub(crate) fn client_env(&self) -> [(&'static str, &Path); 2] {
        [
            ("CUDA_MPS_PIPE_DIRECTORY", &self.pipe_dir),
            ("CUDA_MPS_LOG_DIRECTORY", &self.log_dir),
        ]
    }

    /// Sends `quit` and waits for the control process to return.
    pub(crate) fn stop(&mut self) -> Result<(), MpsError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let mut child = Command::new(CONTROL)
            .env("CUDA_MPS_PIPE_DIRECTORY", &self.pipe_dir)
            .env("CUDA_MPS_LOG_DIRECTORY", &self.log_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(MpsError::Run)?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"quit\n");
        }
        let status = child.wait().map_err(MpsError::Run)?;
        if !status.success() {
            return Err(MpsError::Failed {
                what: "quit",
                status,
                log_dir: self.log_dir.clone(),
            });
        }
        Ok(())
    }
}

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("warning: {}", crate::error::chain(&e));
        }
    }
}
