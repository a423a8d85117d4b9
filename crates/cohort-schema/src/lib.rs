//! The artifact and record types of a coload cohort.
//!
//! Every file a worker, the barrier or the summarizer writes is described here as a plain serde
//! type, so that other tools can read coload's output without linking anything else. This crate
//! is to coload what `nextest-metadata` is to nextest: types only, no behaviour beyond reading
//! and validating documents.
//!
//! # Stability
//!
//! Every top-level document carries `schema_version` ([`SCHEMA_VERSION`]). Fields may be added in
//! a minor release (readers ignore unknown fields and default missing optional ones); renaming or
//! removing a field, or changing its meaning or unit, bumps the version. A reader refuses a
//! document whose version is newer than the one it knows, naming the file and both versions.
//!
//! # Example
//!
//! ```
//! use coload_cohort_schema::{BatchRecord, read_batches_str};
//!
//! let text = "{\"index\":0,\"start_unix_ns\":10,\"end_unix_ns\":25,\"samples\":32}\n";
//! let batches: Vec<BatchRecord> = read_batches_str("batches.jsonl", text).unwrap();
//! assert_eq!(batches[0].duration_ns(), 15);
//! ```

mod activity;
mod barrier;
mod batch;
mod cohort_failure;
mod config;
mod decision;
mod error;
pub mod exit;
mod failure;
mod hog;
mod llm_request;
mod read;
mod request;
mod share;
pub mod study;
mod summary;
mod telemetry;
pub mod text;
mod worker;

pub use activity::{
    ActivityScope, BYTES_PER_MIB, DEFAULT_GPM_INTERVAL_S, EnergyReport, EnergyScopeReport,
    EnergySpan, GPM_METRIC_NAMES, GpmMetrics, GpmRecord, GpmReport, GpmScopeReport, GpmStats,
    GpmValues, MAX_GPM_INTERVAL_S, MIN_GPM_INTERVAL_S,
};
pub use barrier::{AbortRecord, AcceptedWorker, ReadyRecord, StartRecord};
pub use batch::{BatchRecord, Phase};
pub use cohort_failure::{CohortFailure, WorkerOutcome};
pub use config::{
    ConfigDifference, DecodeAttention, DeviceChoice, Execution, ExecutionDeclaration,
    FCFS_PREFILL_FIRST, InputShape, LLM_LENGTHS_FILE, LLM_LENGTHS_FIXED, LLM_LENGTHS_UNIFORM,
    LlmConfig, MemoryFormat, Mode, ModelDeclaration, ModelFile, Precision, ServeConfig,
    ServeLlmConfig, TORCHSCRIPT_MODEL, TimesliceInterval, WorkerConfig, Workload,
};
pub use decision::{DecisionRow, DecisionTable, FrontierPoint};
pub use error::{SchemaError, ValueError};
pub use failure::{FailureKind, Stage, Status};
pub use hog::{HogReport, HogStop, HoldMarker, IsolationOutcome, IsolationResult, TenantOutcome};
pub use llm_request::{LlmRequestLine, LlmRequestReader};
pub use read::{
    BatchReader, MAX_DOCUMENT_BYTES, MAX_LINE_BYTES, MAX_LINES_FILE_BYTES, MAX_TRACE_BYTES,
    check_version, parse_document, read_batches, read_batches_str, read_document, read_lines,
    read_text, read_worker_report, write_atomic, write_json_atomic,
};
pub use request::{MAX_REQUESTS_PER_LINE, RequestBatchRecord, RequestReader};
pub use share::{ByteSize, DeclaredShare, MIB, ObservedShare, SharePolicy, ShareReport};
pub use summary::*;
pub use telemetry::{Max, MeanMax, MinMean, TelemetrySample, TelemetrySummary};
pub use worker::{
    BarrierTiming, DeviceInfo, DeviceKind, Failure, HostInfo, Identity, LlmServeWindowInfo,
    MemoryInfo, MemorySource, RuntimeInfo, ServeWindowInfo, WarmupReport, WarmupStop, WindowInfo,
    WorkerReport, WorkerWarning,
};

/// The version of every document this crate writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// File names inside a worker's output directory.
pub mod files {
    /// The worker's report, written last (temp file + rename).
    pub const WORKER_REPORT: &str = "worker.json";
    /// One JSON line per timed batch.
    pub const BATCHES: &str = "batches.jsonl";
    /// One JSON line per raw device telemetry sample (optional).
    pub const TELEMETRY: &str = "telemetry.jsonl";
    /// Written by a hog worker as soon as it holds its memory, before the barrier.
    pub const HOLD: &str = "hold.json";
    /// A hog cohort's memory-isolation result (beside `summary.json`).
    pub const ISOLATION: &str = "isolation.json";
    /// One JSON line per raw GPM reading and scope (optional).
    pub const GPM: &str = "gpm.jsonl";
    /// A serve worker's requests: one JSON line per dispatched batch with its requests' arrivals,
    /// then the requests never dispatched.
    pub const REQUESTS: &str = "requests.jsonl";
    /// A `serve-llm` worker's requests: one JSON line per request, in arrival order, with its
    /// admission and every output token's completion.
    pub const LLM_REQUESTS: &str = "llm_requests.jsonl";
    /// A failed cohort's [`crate::CohortFailure`], beside its worker folders.
    pub const COHORT_FAILURE: &str = "failure.json";
    /// A cohort's summary, beside its worker folders.
    pub const SUMMARY: &str = "summary.json";
    /// A capacity search's report, beside its probe folders.
    pub const CAPACITY: &str = "capacity.json";
}
