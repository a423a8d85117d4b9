//! Children that die with their parent.
//!
//! A study starts cohorts, and a cohort starts workers. When the parent is killed outright
//! (SIGKILL, the OOM killer), nothing it could run on the way out stops them: they would keep
//! timing on the GPU beside whatever runs next, and write into folders a resume has set aside.
//! Linux's parent-death signal ends them instead, the moment their parent ends.

use std::process::Command;

/// Makes the child that `cmd` starts receive SIGKILL when this process ends, however it ends.
///
/// The signal follows the thread that spawns the child: spawn from a thread that lives as long
/// as the child should (the study and the launcher spawn from their main thread).
#[cfg(target_os = "linux")]
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id();
    #[expect(
        unsafe_code,
        reason = "pre_exec runs in the forked child; prctl and getppid are async-signal-safe"
    )]
    // SAFETY: the closure only makes two system calls, allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between the fork and the prctl: then no signal comes.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other(
                    "the parent ended before its child started",
                ));
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal: the child is left as it is.
#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_cmd: &mut Command) {}
