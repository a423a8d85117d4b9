//! Copying a worker's folder from the shared claim into the study's folder.
//!
//! The claim is shared with every tenant that can mount it, so nothing found there is trusted:
//! no symbolic link is followed (a link at `coload-results/<experiment>/worker-<i>` would make
//! this host copy any folder it can read into the study, which travels with the repository),
//! only regular folders and regular files are copied, each file is opened without following a
//! link and checked again on the open handle, and sizes are capped. What is left out is named,
//! so the study's log says what the claim held that was not collected.

use std::fs::{self, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The largest file collected (a worker's records of a long window are tens of MB).
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;
/// The most files collected from one worker's folder (a worker writes fewer than ten).
pub(crate) const MAX_FILES: usize = 1000;
/// The deepest folder collected below a worker's folder (a worker writes none).
const MAX_DEPTH: usize = 4;

/// The caps of one collection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub(crate) file_bytes: u64,
    pub(crate) files: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            file_bytes: MAX_FILE_BYTES,
            files: MAX_FILES,
        }
    }
}

/// Whether `path` is a folder itself, not a link to one: `Err` says what it is instead.
pub(crate) fn real_dir(path: &Path) -> Result<(), String> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{} is a symbolic link on the shared claim (never followed)",
            path.display()
        )),
        Ok(_) => Err(format!("{} is not a folder", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(format!("{} does not exist", path.display()))
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Copies the folder `from` (checked with [`real_dir`] by the caller, with every folder above it
/// on the claim) into the new folder `to`; returns what it left out, each with the reason.
pub(crate) fn copy_worker(from: &Path, to: &Path, caps: Caps) -> io::Result<Vec<String>> {
    let mut skipped = Vec::new();
    let mut files = 0usize;
    copy_tree(from, to, caps, 0, &mut files, &mut skipped)?;
    Ok(skipped)
}

fn copy_tree(
    from: &Path,
    to: &Path,
    caps: Caps,
    depth: usize,
    files: &mut usize,
    skipped: &mut Vec<String>,
) -> io::Result<()> {
    fs::create_dir(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        // The entry's own type: a link is a link here, never what it points at.
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            if depth >= MAX_DEPTH {
                skipped.push(format!(
                    "{} (a folder deeper than {MAX_DEPTH} levels)",
                    path.display()
                ));
            } else {
                copy_tree(&path, &target, caps, depth + 1, files, skipped)?;
            }
        } else if !kind.is_file() {
            let what = if kind.is_symlink() {
                "a symbolic link, not followed"
            } else {
                "not a regular file"
            };
            skipped.push(format!("{} ({what})", path.display()));
        } else if *files >= caps.files {
            skipped.push(format!(
                "{} (more than {} files in a worker's folder)",
                path.display(),
                caps.files
            ));
        } else {
            *files += 1;
            if let Some(why) = copy_file(&path, &target, caps.file_bytes)? {
                skipped.push(format!("{} ({why})", path.display()));
            }
        }
    }
    Ok(())
}

/// Copies one regular file; `Ok(Some(why))` when it was left out.
fn copy_file(from: &Path, to: &Path, max_bytes: u64) -> io::Result<Option<String>> {
    // O_NOFOLLOW: a file swapped for a link after the listing is refused by the open itself;
    // O_NONBLOCK: one swapped for a FIFO does not hang the open.
    let src = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Some("a symbolic link, not followed".into()));
        }
        Err(e) => return Err(e),
    };
    let meta = src.metadata()?;
    if !meta.is_file() {
        return Ok(Some("not a regular file".into()));
    }
    if meta.len() > max_bytes {
        return Ok(Some(format!(
            "{} bytes, over the cap of {max_bytes} bytes for a collected file",
            meta.len()
        )));
    }
    let mut dst = OpenOptions::new().write(true).create_new(true).open(to)?;
    // A file that grows while it is copied stops at the cap.
    let copied = io::copy(&mut src.take(max_bytes + 1), &mut dst)?;
    if copied > max_bytes {
        drop(dst);
        fs::remove_file(to)?;
        return Ok(Some(format!(
            "grew over the cap of {max_bytes} bytes for a collected file while it was copied"
        )));
    }
    dst.sync_all()?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A worker folder with a result, a link to a secret and an oversized file.
    #[test]
    fn links_and_oversized_files_are_named_and_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("home");
        fs::create_dir(&secret).unwrap();
        fs::write(secret.join("id_rsa"), "PRIVATE KEY").unwrap();
        let worker = dir.path().join("worker-0");
        fs::create_dir(&worker).unwrap();
        fs::write(worker.join("worker.json"), "{}").unwrap();
        fs::write(worker.join("big.jsonl"), vec![b'x'; 100]).unwrap();
        symlink(secret.join("id_rsa"), worker.join("key")).unwrap();
        symlink(&secret, worker.join("home")).unwrap();
        let to = dir.path().join("out");
        let caps = Caps {
            file_bytes: 50,
            files: 10,
        };
        let skipped = copy_worker(&worker, &to, caps).unwrap();
        assert_eq!(fs::read_to_string(to.join("worker.json")).unwrap(), "{}");
        assert!(!to.join("key").exists() && !to.join("home").exists());
        assert!(!to.join("big.jsonl").exists());
        let text = skipped.join("\n");
        assert_eq!(skipped.len(), 3, "{text}");
        assert!(
            text.contains("key (a symbolic link, not followed)"),
            "{text}"
        );
        assert!(text.contains("over the cap of 50 bytes"), "{text}");
    }

    #[test]
    fn a_linked_worker_folder_is_not_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        symlink(dir.path(), dir.path().join("worker-0")).unwrap();
        let e = real_dir(&dir.path().join("worker-0")).unwrap_err();
        assert!(e.contains("is a symbolic link on the shared claim"), "{e}");
        assert!(real_dir(dir.path()).is_ok());
    }

    #[test]
    fn the_file_count_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let worker = dir.path().join("w");
        fs::create_dir(&worker).unwrap();
        for i in 0..5 {
            fs::write(worker.join(format!("f{i}")), "x").unwrap();
        }
        let caps = Caps {
            file_bytes: 10,
            files: 3,
        };
        let skipped = copy_worker(&worker, &dir.path().join("out"), caps).unwrap();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped[0].contains("more than 3 files"), "{skipped:?}");
    }
}
