//! A study folder belongs to one study at a time and to one plan for its life.
//!
//! One study at a time: the study takes an exclusive `flock` on `OUT/.coload-study.lock` for as
//! long as it runs and writes its pid there. The lock's descriptor is inherited by every process
//! the study starts (its cohorts, and through them their workers), so the folder stays locked
//! until the last of them has ended: a second study, or a resume after the first was killed
//! while one of its cohorts still runs, is refused naming the pid that took the lock, instead of
//! setting aside the running cohort's folder and timing another cohort beside it.
//!
//! One plan: `plan.toml` records the plan's text on the first run; a later run with another
//! plan (another name, or the same name with other text) is refused naming the plan recorded.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::fd::AsFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::FlockArg;

use crate::plan::Plan;
use crate::study::StudyError;

/// The lock file's name in a study folder.
pub(crate) const LOCK_FILE: &str = ".coload-study.lock";
/// The plan's text, as the first run of the study wrote it.
pub(crate) const PLAN_FILE: &str = "plan.toml";
/// The most bytes read from a recorded plan (the largest built-in plan is a few KB).
const MAX_PLAN_BYTES: u64 = 1 << 20;

/// The study's hold on its folder; released when dropped (and when the last process the study
/// started has ended).
#[derive(Debug)]
pub(crate) struct StudyLock {
    _file: File,
}

/// Takes the folder `out` (created if missing) for this study, or says who holds it.
pub(crate) fn lock(out: &Path) -> Result<StudyLock, StudyError> {
    std::fs::create_dir_all(out).map_err(|source| StudyError::Io {
        what: "cannot create",
        path: out.to_owned(),
        source,
    })?;
    let path = out.join(LOCK_FILE);
    let io = |source| StudyError::Io {
        what: "cannot open the study's lock file",
        path: path.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(io)?;
    let mut file = file;
    if let Err(errno) = try_lock(&file) {
        if errno != nix::errno::Errno::EWOULDBLOCK {
            return Err(io(std::io::Error::from(errno)));
        }
        let mut text = String::new();
        let _ = (&mut file).take(64).read_to_string(&mut text);
        let holder = text.trim();
        let holder = if holder.is_empty() { "unknown" } else { holder };
        return Err(StudyError::Usage(format!(
            "study folder {} is in use: the study of pid {holder}, or a cohort or worker it \
             started, still runs there (it holds {}); wait until it ends or stop it, then run \
             again to resume",
            out.display(),
            path.display()
        )));
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    // Every process the study starts inherits the descriptor, and with it the lock.
    nix::fcntl::fcntl(
        file.as_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .map_err(|e| io(std::io::Error::from(e)))?;
    Ok(StudyLock { _file: file })
}

/// An exclusive `flock` on `file`, without waiting.
///
/// `nix::fcntl::Flock` would unlock on drop, which releases the lock for every process sharing
/// the descriptor, the cohorts still running included; this lock ends only when the last of
/// them has closed it.
#[expect(
    deprecated,
    reason = "Flock's drop unlocks for the children too; the lock must outlive this process"
)]
fn try_lock(file: &File) -> Result<(), nix::errno::Errno> {
    use std::os::fd::AsRawFd as _;
    nix::fcntl::flock(file.as_raw_fd(), FlockArg::LockExclusiveNonblock)
}

/// Refuses a folder whose recorded plan is not `plan`. A folder with no `plan.toml` is new.
pub(crate) fn check_plan(out: &Path, plan: &Plan) -> Result<(), StudyError> {
    let path = out.join(PLAN_FILE);
    let recorded = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StudyError::Io {
                what: "cannot read",
                path,
                source,
            });
        }
        Ok(m) if !m.file_type().is_file() => {
            return Err(StudyError::Usage(format!(
                "{} is not a regular file (a link or a folder): this is not a study folder this \
                 tool wrote; give a new --out",
                path.display()
            )));
        }
        Ok(m) if m.len() > MAX_PLAN_BYTES => {
            return Err(StudyError::Usage(format!(
                "{} is {} bytes, over the cap of {MAX_PLAN_BYTES} bytes for a plan",
                path.display(),
                m.len()
            )));
        }
        Ok(_) => std::fs::read_to_string(&path).map_err(|source| StudyError::Io {
            what: "cannot read",
            path: path.clone(),
            source,
        })?,
    };
    if recorded == plan.text {
        return Ok(());
    }
    let name = recorded_name(&recorded);
    let what = if name.as_deref() == Some(plan.name.as_str()) {
        format!("another text of plan `{}`", plan.name)
    } else {
        format!(
            "plan `{}`",
            name.as_deref().unwrap_or("(a plan without a name)")
        )
    };
    Err(StudyError::Usage(format!(
        "study folder {} belongs to {what} (recorded in {}), not to this plan `{}`: give a new \
         --out for another plan, or run the recorded one to resume",
        out.display(),
        path.display(),
        plan.name
    )))
}

/// The `name` of a recorded plan's text, when it has one.
fn recorded_name(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let name = table.get("name")?.as_str()?;
    Some(coload_cohort_schema::text::escaped(name).into_owned())
}

/// Writes the plan's text as `plan.toml`, atomically and never through a link.
pub(crate) fn write_plan(out: &Path, plan: &Plan) -> Result<(), StudyError> {
    let path: PathBuf = out.join(PLAN_FILE);
    coload_cohort_schema::write_atomic(&path, plan.text.as_bytes())
        .map_err(|e| StudyError::Write(path, Box::new(e)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    const PLAN: &str = "name = \"mine\"\n[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\n\
                        [[cohort]]\nworkers = \"train=2\"\n";

    fn plan(text: &str) -> Plan {
        Plan::parse("test.toml", text).unwrap()
    }

    #[test]
    fn a_second_study_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let e = lock(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("the study of pid {}", std::process::id())),
            "{e}"
        );
        drop(held);
        lock(dir.path()).unwrap();
    }

    /// A process the study started keeps the folder locked after the study is gone.
    #[test]
    fn a_child_still_running_keeps_the_folder_locked() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        drop(held);
        let e = lock(dir.path()).unwrap_err().to_string();
        assert!(e.contains("still runs there"), "{e}");
        child.kill().unwrap();
        child.wait().unwrap();
        lock(dir.path()).unwrap();
    }

    #[test]
    fn another_plan_is_refused_naming_the_recorded_one() {
        let dir = tempfile::tempdir().unwrap();
        let mine = plan(PLAN);
        check_plan(dir.path(), &mine).unwrap();
        write_plan(dir.path(), &mine).unwrap();
        check_plan(dir.path(), &mine).unwrap();
        let other = plan(&PLAN.replace("mine", "other"));
        let e = check_plan(dir.path(), &other).unwrap_err().to_string();
        assert!(e.contains("belongs to plan `mine`"), "{e}");
        let edited = plan(&PLAN.replace("train=2", "train=3"));
        let e = check_plan(dir.path(), &edited).unwrap_err().to_string();
        assert!(e.contains("another text of plan `mine`"), "{e}");
    }

    /// A link planted at plan.toml is refused by the check and replaced, never written
    /// through, by the writer.
    #[test]
    fn a_linked_plan_file_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let out = dir.path().join("study");
        std::fs::create_dir(&out).unwrap();
        symlink(&victim, out.join(PLAN_FILE)).unwrap();
        let mine = plan(PLAN);
        let e = check_plan(&out, &mine).unwrap_err().to_string();
        assert!(e.contains("is not a regular file"), "{e}");
        write_plan(&out, &mine).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(out.join(PLAN_FILE)).unwrap(), PLAN);
    }
}
