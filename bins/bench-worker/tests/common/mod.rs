//! What the bench-worker integration tests share: waiting for a worker process within a hard
//! limit.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// No test may leave a worker running longer than this.
const HARD_LIMIT: Duration = Duration::from_secs(300);

/// Waits for a child within [`HARD_LIMIT`], killing it if it overstays; returns its status and
/// stderr.
pub(crate) fn finish(mut child: Child) -> (ExitStatus, String) {
    let deadline = Instant::now() + HARD_LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (status, String::from_utf8_lossy(&out.stderr).into_owned());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a worker ran past {HARD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
