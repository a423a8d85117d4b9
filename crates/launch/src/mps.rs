//! A private CUDA MPS control daemon for one cohort.
//!
//! The daemon gets its own pipe and log directories under the cohort's output folder, so it
//! neither needs nor touches a system-wide MPS setup, and no GPU setting changes. The pipe
//! directory holds Unix sockets, whose paths must fit 107 bytes: when the cohort's folder is too
//! deep for that (a capacity probe inside a study inside a long `--out` easily is), the pipes go
//! to a private folder of the system's temporary directory instead (`coload-mps-XXXXXX`, mode
//! 0700, removed after the daemon quits), and `<cohort>/mps/pipe` is a symbolic link to it. It is stopped
//! (`quit` on its control pipe) when the guard drops: after the cohort, on a worker failure and
//! on Ctrl-C alike.
//!
//! The daemon is started without `CUDA_VISIBLE_DEVICES`. A server started with it enumerates only
//! those devices, and its clients' `CUDA_VISIBLE_DEVICES` is then read relative to that list:
//! a client asking for GPU 1 of a server that sees only GPU 1 finds no device, and libtorch
//! reports CUDA unavailable (seen on a 2-GPU H200 host). Started without it, the server sees
//! every GPU and each worker's `CUDA_VISIBLE_DEVICES` keeps its usual meaning, which is also what
//! the worker's NVML identity assumes. Run one MPS cohort per host at a time.
//!
//! Right after `-d`, before any client starts, the daemon gets the cohort's share
//! ([`crate::share::MpsPlan`]) with the device plugin's control commands, and each value is read
//! back (`get_default_device_pinned_mem_limit <index>`, `get_default_active_thread_percentage`)
//! and compared with what was sent; a daemon that reads back something else stops the cohort.
//! Because the daemon sees every GPU, the memory limit goes to each device index the cohort's
//! workers use. Every command and reply is kept in `<cohort>/mps/control.txt`. The GPU's compute
//! mode is never changed (see [`crate::share`] for why a cohort of MPS clients needs not).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::share::MpsPlan;

/// The control program, found on `PATH`.
pub const CONTROL: &str = "nvidia-cuda-mps-control";

/// Why the private MPS daemon could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum MpsError {
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
    /// Even the private pipe folder is too deep for a Unix socket's path.
    #[error(
        "the MPS pipe folder {} is too long for a Unix socket's path ({SOCKET_PATH_MAX} bytes \
         with the socket's name); set TMPDIR to a shorter folder",
        .dir.display()
    )]
    PipePathTooLong {
        /// The folder that was too long.
        dir: PathBuf,
    },
    /// Running the control program failed.
    #[error("cannot run {CONTROL}")]
    Run(#[source] std::io::Error),
    /// The control program ran and reported failure.
    #[error("{CONTROL} {what} failed ({status}); see {}", .log_dir.display())]
    Failed {
        /// `-d`, `quit` or the command sent.
        what: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Where the daemon logs.
        log_dir: PathBuf,
    },
    /// The daemon reads back another value than the one sent.
    #[error(
        "the MPS daemon did not take the share: `{query}` reads back `{reply}`, not the {sent} \
         sent; the cohort was not started (see {})",
        .log.display()
    )]
    NotApplied {
        /// The query.
        query: String,
        /// Its reply.
        reply: String,
        /// What was sent, in words.
        sent: String,
        /// The control log.
        log: PathBuf,
    },
    /// The control log could not be written.
    #[error("cannot write {}", .path.display())]
    Log {
        /// The log.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Parses a memory limit as the daemon prints it (`20G`, `20538M`, `0`) into bytes.
#[cfg(test)]
fn parse_limit(reply: &str) -> Option<u64> {
    parse_limit_with_unit(reply).map(|(bytes, _)| bytes)
}

/// A printed limit and the unit it was printed in, bytes. The daemon prints whole units of the
/// largest unit that fits: 20,538 MiB sent reads back as `20G` (seen on the H200, driver 580),
/// so a read-back is as precise as its unit and no more.
fn parse_limit_with_unit(reply: &str) -> Option<(u64, u64)> {
    let text = reply.trim();
    let (number, factor) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1_u64 << 10),
        (i, 'M' | 'm') => (&text[..i], 1 << 20),
        (i, 'G' | 'g') => (&text[..i], 1 << 30),
        (i, 'T' | 't') => (&text[..i], 1 << 40),
        _ => (text, 1),
    };
    let value: f64 = number.trim().parse().ok()?;
    (value >= 0.0).then(|| ((value * factor as f64).round() as u64, factor))
}

/// The longest path a Unix socket address holds (`sun_path` is 108 bytes with its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// Room left for the names of the sockets the daemon makes in its pipe directory
/// (`control_privileged` is the longest seen, 18 bytes; the rest is margin).
const SOCKET_NAME_ROOM: usize = 32;

/// A pipe directory whose sockets' paths fit, and the private folder that holds it when the
/// cohort's own folder is too deep (kept so that it is removed after the daemon quits).
fn pipe_directory(root: &Path) -> Result<(PathBuf, Option<tempfile::TempDir>), MpsError> {
    let fits = |dir: &Path| dir.as_os_str().len() + 1 + SOCKET_NAME_ROOM <= SOCKET_PATH_MAX;
    let in_cohort = root.join("pipe");
    if fits(&in_cohort) {
        return Ok((in_cohort, None));
    }
    let private = tempfile::Builder::new()
        .prefix("coload-mps-")
        .tempdir()
        .map_err(|source| MpsError::Directories {
            dir: std::env::temp_dir(),
            source,
        })?;
    if !fits(private.path()) {
        return Err(MpsError::PipePathTooLong {
            dir: private.path().to_owned(),
        });
    }
    // A pointer from the cohort's folder, for whoever looks there; the daemon does not need it.
    let _ = std::os::unix::fs::symlink(private.path(), &in_cohort);
    Ok((private.path().to_owned(), Some(private)))
}

/// A running MPS control daemon; stopped on drop.
#[derive(Debug)]
pub(crate) struct MpsDaemon {
    control: PathBuf,
    pipe_dir: PathBuf,
    log_dir: PathBuf,
    stopped: bool,
    /// The private pipe folder when the cohort's was too deep; dropped (removed) after
    /// [`Drop::drop`] has stopped the daemon.
    _private_pipes: Option<tempfile::TempDir>,
}

impl MpsDaemon {
    /// Starts `nvidia-cuda-mps-control -d` with private directories under `root`, then applies
    /// `plan` and reads it back.
    pub(crate) fn start(root: &Path, plan: &MpsPlan) -> Result<Self, MpsError> {
        Self::start_with(Path::new(CONTROL), root, plan)
    }

    /// [`MpsDaemon::start`] with another control program (a test's stand-in).
    pub(crate) fn start_with(
        control: &Path,
        root: &Path,
        plan: &MpsPlan,
    ) -> Result<Self, MpsError> {
        let daemon = Self::launch(control, root)?;
        // On an error below, dropping `daemon` stops it.
        daemon.apply(plan, &root.join("control.txt"))?;
        Ok(daemon)
    }

    fn launch(control: &Path, root: &Path) -> Result<Self, MpsError> {
        let log_dir = root.join("log");
        std::fs::create_dir_all(&log_dir).map_err(|source| MpsError::Directories {
            dir: root.to_owned(),
            source,
        })?;
        let (pipe_dir, private) = pipe_directory(root)?;
        std::fs::create_dir_all(&pipe_dir).map_err(|source| MpsError::Directories {
            dir: root.to_owned(),
            source,
        })?;
        let status = Command::new(control)
            .arg("-d")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env("CUDA_MPS_PIPE_DIRECTORY", &pipe_dir)
            .env("CUDA_MPS_LOG_DIRECTORY", &log_dir)
            .status();
        match status {
            Ok(s) if s.success() => Ok(MpsDaemon {
                control: control.to_owned(),
                pipe_dir,
                log_dir,
                stopped: false,
                _private_pipes: private,
            }),
            Ok(status) => Err(MpsError::Failed {
                what: "-d".to_owned(),
                status,
                log_dir,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(MpsError::NotFound),
            Err(e) => Err(MpsError::Run(e)),
        }
    }

    /// Sends the plan's commands, then reads every value back and compares; writes the
    /// exchange to `log`.
    fn apply(&self, plan: &MpsPlan, log: &Path) -> Result<(), MpsError> {
        let mut text = format!("# {}\n", plan.declared.describe());
        let result = self.apply_logged(plan, log, &mut text);
        std::fs::write(log, &text).map_err(|source| MpsError::Log {
            path: log.to_owned(),
            source,
        })?;
        result
    }

    fn apply_logged(&self, plan: &MpsPlan, log: &Path, text: &mut String) -> Result<(), MpsError> {
        let mut exchange = |command: &str| -> Result<String, MpsError> {
            let reply = self.send(command)?;
            let _ = writeln!(text, "> {command}");
            for line in reply.lines() {
                let _ = writeln!(text, "< {line}");
            }
            Ok(reply.trim().to_owned())
        };
        for command in plan.commands() {
            exchange(&command)?;
        }
        for limit in &plan.limits {
            let query = format!("get_default_device_pinned_mem_limit {}", limit.index);
            let reply = exchange(&query)?;
            let sent = limit.limit_mib << 20;
            let unit_ok = |(b, unit): (u64, u64)| b.abs_diff(sent) < unit.max(1 << 20);
            if !parse_limit_with_unit(&reply).is_some_and(unit_ok) {
                return Err(MpsError::NotApplied {
                    query,
                    reply,
                    sent: format!("{} MiB", limit.limit_mib),
                    log: log.to_owned(),
                });
            }
        }
        if let Some(p) = plan.active_thread_percentage {
            let query = "get_default_active_thread_percentage".to_owned();
            let reply = exchange(&query)?;
            if reply
                .parse::<f64>()
                .is_ok_and(|x| (x - f64::from(p)).abs() < 0.5)
            {
                return Ok(());
            }
            return Err(MpsError::NotApplied {
                query,
                reply,
                sent: format!("{p} %"),
                log: log.to_owned(),
            });
        }
        Ok(())
    }

    /// Sends one command on the control pipe and returns the reply.
    fn send(&self, command: &str) -> Result<String, MpsError> {
        let mut child = Command::new(&self.control)
            .env("CUDA_MPS_PIPE_DIRECTORY", &self.pipe_dir)
            .env("CUDA_MPS_LOG_DIRECTORY", &self.log_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(MpsError::Run)?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(format!("{command}\n").as_bytes());
        }
        let out = child.wait_with_output().map_err(MpsError::Run)?;
        if !out.status.success() {
            return Err(MpsError::Failed {
                what: command.to_owned(),
                status: out.status,
                log_dir: self.log_dir.clone(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
        let mut child = Command::new(&self.control)
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
                what: "quit".to_owned(),
                status,
                log_dir: self.log_dir.clone(),
            });
        }
        Ok(())
    }
}

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        // The normal path stops the daemon itself and reports a failure; a drop on an error
        // path has a more important error to report, so this one is dropped with it.
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::DeclaredShare;

    use super::*;
    use crate::share::DeviceLimit;

    fn fake() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-mps/nvidia-cuda-mps-control")
    }

    fn plugin7() -> MpsPlan {
        MpsPlan {
            declared: coload_measure::plugin_share(7, Some(143_771 << 20)),
            active_thread_percentage: Some(14),
            limits: vec![
                DeviceLimit {
                    index: 0,
                    limit_mib: 20_480,
                },
                DeviceLimit {
                    index: 1,
                    limit_mib: 20_538,
                },
            ],
        }
    }

    fn control_log(root: &Path) -> Vec<String> {
        std::fs::read_to_string(root.join("control.log"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A cohort folder too deep for a socket's path (a capacity probe of a study under a long
    /// `--out`, as on the H200 in round 4: 109 bytes) still gets a daemon: its pipes go to a
    /// short private folder, which the clients are pointed at, which `<cohort>/mps/pipe` links
    /// to, and which is gone after the daemon quits. The stand-in fails `-d` as the real daemon
    /// does when the socket's path is too long.
    #[test]
    fn a_deep_cohort_folder_gets_short_private_pipes() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = "decision/cohorts/mps-plugin-serve1-train6-capacity-10ms-r1/probe-1-300";
        let root = tmp.path().join(deep).join("mps");
        assert!(root.join("pipe/control_privileged").as_os_str().len() > SOCKET_PATH_MAX);
        let mut daemon = MpsDaemon::start_with(&fake(), &root, &plugin7()).unwrap();
        let pipes = daemon.client_env()[0].1.to_owned();
        assert!(!pipes.starts_with(tmp.path()), "{}", pipes.display());
        assert!(pipes.join("control_privileged").as_os_str().len() <= SOCKET_PATH_MAX);
        assert_eq!(std::fs::read_link(root.join("pipe")).unwrap(), pipes);
        assert_eq!(
            std::fs::read_to_string(pipes.join("threads")).unwrap(),
            "14\n"
        );
        daemon.stop().unwrap();
        drop(daemon);
        assert!(
            !pipes.exists(),
            "the private pipe folder outlived the daemon"
        );
        assert_eq!(control_log(&root).first().map(String::as_str), Some("-d"));
    }

    /// A shallow cohort folder keeps its pipes inside it.
    #[test]
    fn a_shallow_cohort_folder_keeps_its_pipes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("mps");
        let daemon = MpsDaemon::start_with(&fake(), &root, &plugin7()).unwrap();
        assert_eq!(daemon.client_env()[0].1, root.join("pipe"));
    }

    /// The commands go after `-d` and before anything else, in the plugin's order, one limit per
    /// device, and every value is read back; `quit` follows on stop.
    #[test]
    fn the_share_is_sent_after_start_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("mps");
        let mut daemon = MpsDaemon::start_with(&fake(), &root, &plugin7()).unwrap();
        daemon.stop().unwrap();
        assert_eq!(
            control_log(&root),
            [
                "-d",
                "set_default_device_pinned_mem_limit 0 20480M",
                "set_default_device_pinned_mem_limit 1 20538M",
                "set_default_active_thread_percentage 14",
                "get_default_device_pinned_mem_limit 0",
                "get_default_device_pinned_mem_limit 1",
                "get_default_active_thread_percentage",
                "quit",
            ]
        );
        let exchange = std::fs::read_to_string(root.join("control.txt")).unwrap();
        assert!(
            exchange.contains("> get_default_device_pinned_mem_limit 0\n< 20G\n"),
            "{exchange}"
        );
        assert!(exchange.contains("< 14.0\n"), "{exchange}");
    }

    /// A daemon that accepts the commands but reads back its defaults stops the cohort, and is
    /// itself stopped.
    #[test]
    fn a_share_that_does_not_take_is_refused_and_the_daemon_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("mps");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("ignore-sets"), "").unwrap();
        let err = MpsDaemon::start_with(&fake(), &root, &plugin7()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the MPS daemon did not take the share: `get_default_device_pinned_mem_limit 0` \
                 reads back `0M`, not the 20480 MiB sent; the cohort was not started (see {})",
                root.join("control.txt").display()
            )
        );
        assert_eq!(control_log(&root).last().map(String::as_str), Some("quit"));
    }

    #[test]
    fn an_unlimited_share_sends_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("mps");
        let plan = MpsPlan {
            declared: DeclaredShare::unlimited(),
            active_thread_percentage: None,
            limits: Vec::new(),
        };
        let mut daemon = MpsDaemon::start_with(&fake(), &root, &plan).unwrap();
        daemon.stop().unwrap();
        assert_eq!(control_log(&root), ["-d", "quit"]);
    }

    #[test]
    fn limits_parse_as_the_daemon_prints_them() {
        assert_eq!(parse_limit("20G"), Some(20 << 30));
        assert_eq!(parse_limit("20538M\n"), Some(20_538 << 20));
        assert_eq!(parse_limit("0"), Some(0));
        assert_eq!(parse_limit("1.5G"), Some(3 << 29));
        assert_eq!(parse_limit("unset"), None);
        // 20,538 MiB (the plugin's 1/7 of an H200) reads back in whole GiB.
        let (bytes, unit) = parse_limit_with_unit("20G").unwrap();
        assert!(bytes.abs_diff(20_538 << 20) < unit);
        let (bytes, unit) = parse_limit_with_unit("19G").unwrap();
        assert!(bytes.abs_diff(20_538 << 20) >= unit);
    }
}
