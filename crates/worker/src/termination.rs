//! SIGTERM and SIGINT: a deleted Pod, a drained node or a Ctrl-C must still leave a
//! `worker.json` saying in which stage the worker was stopped: nothing measured is lost.
//!
//! The handler runs on its own thread (the `ctrlc` crate). Before the window it writes the
//! report as known at the last phase boundary, marked failed with kind `terminated`, and exits
//! with [`exit::TERMINATED`]. During the window it only sets a flag that the window runner reads
//! once per batch (a relaxed atomic load: no lock, no allocation); the worker then stops, writes
//! everything it measured and exits the same way. While the worker writes its artifacts the
//! handler does nothing, so the files are finished.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use coload_cohort_schema::{
    Failure, FailureKind, Stage, Status, WorkerReport, exit, files, write_json_atomic,
};

use crate::progress::Progress;

const BEFORE_WINDOW: u8 = 0;
const IN_WINDOW: u8 = 1;
const AFTER_WINDOW: u8 = 2;

/// Shared between the worker and the signal handler.
#[derive(Debug)]
pub(crate) struct Termination {
    /// Read by the window runner.
    pub(crate) cancel: AtomicBool,
    /// Where the handler says what it did.
    progress: Progress,
    /// When the first signal came (Unix ns; 0: none). The window runner notices it only at its
    /// next batch (or when the window begins, if it is waiting for the start), so the failure
    /// carries this time: a cluster backend orders its replicas' failures by it.
    signalled_unix_ns: AtomicU64,
    phase: AtomicU8,
    /// The report at the last phase boundary, the stage the worker is in, and where to write.
    snapshot: Mutex<Option<(WorkerReport, Stage, PathBuf)>>,
}

impl Termination {
    /// Installs the handler. Without it (another handler already installed) signals keep their
    /// default action and the worker simply dies, as before.
    pub(crate) fn install(progress: &Progress) -> Arc<Self> {
        let t = Self::new(progress);
        let handler = Arc::clone(&t);
        if let Err(e) = ctrlc::set_handler(move || handler.on_signal()) {
            progress.raw(&format!(
                "warning: no termination handler ({e}); a signal will leave no worker.json"
            ));
        }
        t
    }

    /// A state no signal reaches (in-process tests, a tool that handles signals itself).
    pub(crate) fn new(progress: &Progress) -> Arc<Self> {
        Arc::new(Termination {
            cancel: AtomicBool::new(false),
            progress: progress.clone(),
            signalled_unix_ns: AtomicU64::new(0),
            phase: AtomicU8::new(BEFORE_WINDOW),
            snapshot: Mutex::new(None),
        })
    }

    /// Records what the worker knows at a phase boundary (never called inside the window).
    pub(crate) fn checkpoint(&self, report: &WorkerReport, stage: Stage, out: &std::path::Path) {
        let mut s = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        *s = Some((report.clone(), stage, out.to_owned()));
    }

    pub(crate) fn enter_window(&self) {
        self.phase.store(IN_WINDOW, Ordering::SeqCst);
    }

    pub(crate) fn leave_window(&self) {
        self.phase.store(AFTER_WINDOW, Ordering::SeqCst);
    }

    /// When the first termination signal came, if one did.
    pub(crate) fn signalled_at(&self) -> Option<u64> {
        Some(self.signalled_unix_ns.load(Ordering::SeqCst)).filter(|ns| *ns != 0)
    }

    fn on_signal(&self) {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
            .unwrap_or(0);
        let _ =
            self.signalled_unix_ns
                .compare_exchange(0, now_ns, Ordering::SeqCst, Ordering::SeqCst);
        match self.phase.load(Ordering::SeqCst) {
            BEFORE_WINDOW => {
                let snapshot = self
                    .snapshot
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some((mut report, stage, out)) = snapshot {
                    report.status = Status::Failed;
                    let mut failure = Failure::now(
                        stage,
                        FailureKind::Terminated,
                        format!("stopped by a termination signal during {stage}"),
                    );
                    failure.at_unix_ns = self.signalled_at().or(failure.at_unix_ns);
                    report.failure = Some(failure);
                    let path = out.join(files::WORKER_REPORT);
                    if let Err(e) = write_json_atomic(&path, &report) {
                        self.progress.raw(&format!("error: terminated, and {e}"));
                    } else {
                        self.progress.raw(&format!(
                            "error: terminated during {stage}; wrote {}",
                            path.display()
                        ));
                    }
                }
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the signal thread ends the process: main is blocked in a libtorch call \
                              outside the window, and the failed report is written"
                )]
                std::process::exit(i32::from(exit::TERMINATED));
            }
            IN_WINDOW => self.cancel.store(true, Ordering::Relaxed),
            _ => {}
        }
    }
}
