//! The experiment directory: exclusive publication and fresh reads, never following symlinks.
//!
//! Every operation goes through a descriptor of `<sync_dir>/<experiment>/` opened once with
//! `O_NOFOLLOW`, and every file inside is opened with `O_NOFOLLOW` too, so a symlink planted in
//! the shared directory can neither redirect a write nor feed a record from elsewhere.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use crate::error::BarrierError;
use crate::records::DECISION;

/// Records are small; anything bigger than this is garbage and is not read into memory whole.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// The result of reading a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No file of that name (yet).
    Missing,
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// The name exists but is not something a reader may trust (a symlink, a directory).
    Refused(String),
}

/// The result of an exclusive publication.
#[derive(Debug)]
pub(crate) enum Publish {
    /// The name now holds our bytes.
    Done,
    /// The name was already taken by someone else; ours was not written.
    Exists,
}

/// `<sync_dir>/<experiment>/`, opened once.
#[derive(Debug)]
pub(crate) struct SyncDir {
    path: PathBuf,
    fd: OwnedFd,
}

/// The open flags every file operation shares: never follow a symlink, never leak the
/// descriptor into a child.
fn base_flags() -> OFlag {
    OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// `EROFS: Read-only file system` plus what to do about it.
fn describe(errno: Errno) -> String {
    let hint = match errno {
        Errno::EROFS => "; the volume is mounted read-only: mount it read-write",
        Errno::EACCES | Errno::EPERM => {
            "; this user may not write there: fix the volume's ownership or the Pod's fsGroup"
        }
        Errno::ENOSPC | Errno::EDQUOT => "; the volume is full: free space or use a larger one",
        Errno::ENOENT => "; is the shared volume mounted?",
        Errno::ENOTDIR => "; the path must be a directory",
        Errno::ELOOP => "; it is a symbolic link and the barrier never follows one",
        _ => "",
    };
    // `Errno`'s Display is already `ENOENT: No such file or directory`.
    format!("{errno}{hint}")
}

/// The errno of an I/O error (`EIO` for the rare one that carries no OS code).
fn errno_of(e: &std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

impl SyncDir {
    /// Opens `<sync_dir>/<experiment>/`, creating the experiment directory if needed.
    ///
    /// The shared directory itself must exist (it is the mount point; creating it would hide a
    /// missing mount); the experiment directory is created and must not be a symlink. Errors
    /// are [`BarrierError::Preflight`] naming the path and the errno.
    pub(crate) fn open(sync_dir: &Path, experiment: &str) -> Result<SyncDir, BarrierError> {
        let fail = |path: &Path, what: &str, errno: Errno| BarrierError::Preflight {
            path: path.to_owned(),
            message: format!("cannot {what} {}: {}", path.display(), describe(errno)),
        };
        let base = openat(
            AT_FDCWD,
            sync_dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail(sync_dir, "open the shared directory", e))?;
        let path = sync_dir.join(experiment);
        match mkdirat(&base, experiment, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(fail(&path, "create the experiment directory", e)),
        }
        let fd = openat(
            &base,
            experiment,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | base_flags(),
            Mode::empty(),
        )
        .map_err(|e| {
            // O_DIRECTORY | O_NOFOLLOW on a symlink fails with ELOOP on Linux, ENOTDIR elsewhere.
            let e = if e == Errno::ENOTDIR && is_symlink(&base, experiment) {
                Errno::ELOOP
            } else {
                e
            };
            fail(&path, "open the experiment directory", e)
        })?;
        Ok(SyncDir { path, fd })
    }

    /// The directory's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of a file in the directory, for messages.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes, fsyncs, stats and removes a probe file; returns its mtime (the file server's
    /// clock), unix nanoseconds. Every failure is a [`BarrierError::Preflight`].
    pub(crate) fn probe(&self, name: &str) -> Result<u64, BarrierError> {
        let fail = |what: &str, errno: Errno| BarrierError::Preflight {
            path: self.file(name),
            message: format!(
                "cannot {what} the probe file {}: {}",
                self.file(name).display(),
                describe(errno)
            ),
        };
        let fd = openat(
            &self.fd,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | base_flags(),
            Mode::from_bits_truncate(0o644),
        )
        .map_err(|e| fail("create", e))?;
        let mut file = File::from(fd);
        let written = (|| {
            file.write_all(b"coload barrier probe\n")
                .map_err(|e| fail("write", errno_of(&e)))?;
            // ENOSPC and EDQUOT often surface only here on NFS, when the data reaches the server.
            file.sync_all().map_err(|e| fail("fsync", errno_of(&e)))?;
            file.metadata().map_err(|e| fail("stat", errno_of(&e)))
        })();
        drop(file);
        // Remove the probe whether or not it worked; a failure to remove is itself a preflight
        // failure (the directory would fill with probes).
        let removed = unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir);
        let meta = written?;
        removed.map_err(|e| fail("remove", e))?;
        let mtime_ns = u64::try_from(meta.mtime()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(meta.mtime_nsec()).unwrap_or(0);
        Ok(mtime_ns)
    }

    /// Whether `name` exists (without following a symlink).
    pub(crate) fn exists(&self, name: &str) -> Result<bool, Errno> {
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads `name` with a fresh open (which revalidates an NFS client's cache: close-to-open
    /// consistency), never following a symlink.
    pub(crate) fn read(&self, name: &str) -> Result<Found, BarrierError> {
        let fd = match openat(
            &self.fd,
            name,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | base_flags(),
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(Found::Missing),
            Err(Errno::ELOOP) => {
                return Ok(Found::Refused(
                    "it is a symbolic link and the barrier never follows one".to_owned(),
                ));
            }
            Err(e) => return Err(self.io_error(name, "open", e)),
        };
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| self.io_error(name, "stat", errno_of(&e)))?;
        if !meta.is_file() {
            return Ok(Found::Refused("it is not a regular file".to_owned()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_RECORD_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io_error(name, "read", errno_of(&e)))?;
        Ok(Found::Bytes(bytes))
    }

    /// Publishes `bytes` under `name` once, never replacing anything already there.
    ///
    /// The bytes go to a temporary file (`.<name>.<tag>.tmp`, which readers ignore), are
    /// fsynced, and the temporary is hard-linked to `name`: `link` fails with `EEXIST` rather
    /// than replace, and readers see either nothing or the whole record. If the link reports
    /// `EEXIST` but the name is our own inode (an NFS retransmission of a link that had
    /// succeeded), that is success. Where the file system has no hard links, the name is created
    /// with `O_EXCL` and written in place; readers then may briefly see a partial record, which
    /// they treat as not yet valid.
    pub(crate) fn publish(
        &self,
        name: &str,
        bytes: &[u8],
        tag: &str,
    ) -> Result<Publish, BarrierError> {
        let tmp = format!(".{name}.{tag}.tmp");
        let ino = self.write_new(&tmp, bytes)?;
        let linked = linkat(&self.fd, tmp.as_str(), &self.fd, name, AtFlags::empty());
        let result = match linked {
            Ok(()) => Ok(Publish::Done),
            Err(Errno::EEXIST) => match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if st.st_ino == ino => Ok(Publish::Done),
                _ => Ok(Publish::Exists),
            },
            Err(Errno::EPERM | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EMLINK) => {
                // No hard links here (some SMB and FUSE volumes): the exclusive create is the
                // claim instead.
                match self.write_new(name, bytes) {
                    Ok(_) => Ok(Publish::Done),
                    Err(BarrierError::Io { .. }) if self.exists(name).unwrap_or(false) => {
                        Ok(Publish::Exists)
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(self.io_error(name, "link", e)),
        };
        // The temporary is no longer needed either way. Closed before unlinking, so NFS leaves
        // no `.nfs*` file behind.
        let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        if matches!(result, Ok(Publish::Done)) {
            // Make the new name durable; a failure here only weakens crash safety.
            let _ = nix::unistd::fsync(&self.fd);
        }
        result
    }

    /// Publishes the cohort's one decision (`start.json` or `abort.json`) under `name`.
    ///
    /// First claims [`DECISION`] with the same bytes, exclusively; only the process whose claim
    /// succeeds publishes under `name`. A start and an abort racing each other (a leader
    /// deciding while a follower times out, or a launcher stops the cohort) therefore never
    /// both appear: `Exists` says someone else decided first, and [`SyncDir::read`] of
    /// [`DECISION`] says what.
    pub(crate) fn decide(
        &self,
        name: &str,
        bytes: &[u8],
        tag: &str,
    ) -> Result<Publish, BarrierError> {
        match self.publish(DECISION, bytes, tag)? {
            Publish::Exists => Ok(Publish::Exists),
            Publish::Done => self.publish(name, bytes, tag),
        }
    }

    /// Creates `name` exclusively, writes and fsyncs `bytes`; returns the inode number.
    fn write_new(&self, name: &str, bytes: &[u8]) -> Result<u64, BarrierError> {
        let fd = openat(
            &self.fd,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | base_flags(),
            Mode::from_bits_truncate(0o644),
        )
        .map_err(|e| self.io_error(name, "create", e))?;
        let mut file = File::from(fd);
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| file.metadata());
        match written {
            Ok(meta) => Ok(meta.ino()),
            Err(e) => {
                drop(file);
                let _ = unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir);
                Err(self.io_error(name, "write", errno_of(&e)))
            }
        }
    }

    /// Names of the directory's entries, skipping temporaries and NFS `.nfs*` leftovers (every
    /// name starting with a dot).
    pub(crate) fn names(&self) -> Result<Vec<String>, BarrierError> {
        let entries = std::fs::read_dir(&self.path).map_err(|e| BarrierError::Io {
            path: self.path.clone(),
            message: format!(
                "cannot list {}: {}",
                self.path.display(),
                describe(errno_of(&e))
            ),
        })?;
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.'))
            .collect())
    }

    fn io_error(&self, name: &str, what: &str, errno: Errno) -> BarrierError {
        let path = self.file(name);
        BarrierError::Io {
            message: format!("cannot {what} {}: {}", path.display(), describe(errno)),
            path,
        }
    }
}

fn is_symlink<Fd: AsFd>(dir: Fd, name: &str) -> bool {
    fstatat(dir, OsStr::new(name), AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_is_exclusive_and_leaves_no_temporaries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SyncDir::open(tmp.path(), "e").unwrap();
        assert!(matches!(
            dir.publish("r.json", b"one", "a").unwrap(),
            Publish::Done
        ));
        assert!(matches!(
            dir.publish("r.json", b"two", "b").unwrap(),
            Publish::Exists
        ));
        assert_eq!(dir.read("r.json").unwrap(), Found::Bytes(b"one".to_vec()));
        assert_eq!(dir.read("nothing.json").unwrap(), Found::Missing);
        let all: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(all, ["r.json"]);
    }

    #[test]
    fn only_the_first_decision_is_published() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SyncDir::open(tmp.path(), "e").unwrap();
        assert!(matches!(
            dir.decide("start.json", b"go", "leader").unwrap(),
            Publish::Done
        ));
        // An abort after the start is refused by the claim: no abort.json appears.
        assert!(matches!(
            dir.decide("abort.json", b"stop", "launcher").unwrap(),
            Publish::Exists
        ));
        assert_eq!(
            dir.read("start.json").unwrap(),
            Found::Bytes(b"go".to_vec())
        );
        assert_eq!(dir.read("abort.json").unwrap(), Found::Missing);
        assert_eq!(dir.read(DECISION).unwrap(), Found::Bytes(b"go".to_vec()));
    }

    #[test]
    fn symlinks_are_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("target.json"), b"secret").unwrap();
        let dir = SyncDir::open(tmp.path(), "e").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("target.json"), dir.file("r.json")).unwrap();
        assert!(
            matches!(dir.read("r.json").unwrap(), Found::Refused(m) if m.contains("symbolic link"))
        );

        // An experiment directory that is a symlink is refused at open.
        std::os::unix::fs::symlink(tmp.path().join("e"), tmp.path().join("link")).unwrap();
        let err = SyncDir::open(tmp.path(), "link").unwrap_err().to_string();
        assert!(err.contains("ELOOP"), "{err}");
    }

    #[test]
    fn names_skip_hidden_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SyncDir::open(tmp.path(), "e").unwrap();
        for n in ["ready.0.json", ".ready.1.json.x.tmp", ".nfs0000123"] {
            std::fs::write(dir.file(n), b"{}").unwrap();
        }
        assert_eq!(dir.names().unwrap(), ["ready.0.json"]);
    }

    #[test]
    fn probe_returns_a_recent_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SyncDir::open(tmp.path(), "e").unwrap();
        let mtime = dir.probe(".probe.x").unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(now.abs_diff(mtime) < 60_000_000_000, "{now} vs {mtime}");
        assert!(!dir.exists(".probe.x").unwrap());
    }
}
