//! What `bench-worker --version` prints: the facts a bug report or a results table needs to say
//! exactly which build ran, set by build.rs (and, for a dist tarball, by scripts/dist.sh, whose
//! VERSION file repeats these lines).

/// One line: `0.1.0 (git 0123456789ab, libtorch 2.11.0+cu130)`.
pub(crate) const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("COLOAD_GIT_REVISION"),
    ", libtorch ",
    env!("COLOAD_LIBTORCH_VERSION"),
    ")"
);

/// `--version`: the crate version, then one `key: value` line per fact.
pub(crate) const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ngit revision: ",
    env!("COLOAD_GIT_REVISION"),
    "\nlibtorch: ",
    env!("COLOAD_LIBTORCH_VERSION"),
    " (built against)\ntch: ",
    env!("COLOAD_TCH_VERSION"),
);

/// Sets this build's version strings on the command.
pub(crate) fn apply(command: clap::Command) -> clap::Command {
    command.version(SHORT).long_version(LONG)
}
