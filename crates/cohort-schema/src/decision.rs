//! The decision table a study's report opens with (`comparison.json`'s `decision`): for one
//! mix (a serving endpoint beside trainers), one point per sharing policy and share, the
//! Pareto frontier of serving capacity against the trainers' throughput, and one row per need
//! a user asks about, with the pick, what it gives, what it costs and how many cards it takes.
//! `coload_analysis::frontier` computes it; `coload-report` renders it.

use serde::{Deserialize, Serialize};

use crate::{DeclaredShare, Mode, RatioInterval};

/// The decision for one mix, from a study's capacity searches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionTable {
    /// The mix the table answers for (`serve=1,train=6`).
    pub mix: String,
    /// The tenants the mix places (its workers): what the cards column is counted for.
    pub tenants: u32,
    /// The serving objective of the capacity searches, in words (`p99 <= 10 ms`).
    pub objective: String,
    /// How each row picks, in one sentence.
    pub rule: String,
    /// One point per policy and share, the frontier's members marked.
    pub points: Vec<FrontierPoint>,
    /// One row per need, in the order a reader asks.
    pub rows: Vec<DecisionRow>,
}

/// One policy and share for the mix: what the endpoint sustained and what the trainers beside
/// it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierPoint {
    /// The study's policy name (`mps-replicas-4`).
    pub policy: String,
    /// The policy and share in a user's words (`MPS, 4 replicas (25 % of the threads each)`).
    pub label: String,
    /// The sharing mode.
    pub mode: Mode,
    /// The share each MPS client ran under, where declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<DeclaredShare>,
    /// The highest rate that met the objective, requests/s (`null`: none did).
    pub capacity_passed_per_s: Option<f64>,
    /// The lowest rate above it that failed, requests/s (`null`: none failed). The capacity
    /// lies in `[capacity_passed_per_s, capacity_failed_per_s)`.
    pub capacity_failed_per_s: Option<f64>,
    /// The probe whose trainers are reported: the highest passing one, else the lowest-rate
    /// probe (requests/s offered).
    pub probe_rate_per_s: f64,
    /// Whether that probe met the objective (`false`: no probe did, and the trainers are those
    /// of the lowest-rate probe).
    pub probe_passed: bool,
    /// The card (GPU UUID) that probe's trainers ran on, whose solos divide them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<String>,
    /// The LLM endpoint's output tokens/s in that probe (summed over its `serve-llm`
    /// workers); absent for a vision endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_tokens_per_s: Option<f64>,
    /// The trainers' aggregate samples/s in that probe.
    pub train_samples_per_s: Option<f64>,
    /// The trainers' aggregate over one exclusive solo trainer of the same card, with its 95 %
    /// interval (the solos' run-to-run noise carried); `null` without a solo on that card.
    pub train_vs_solo: Option<RatioInterval>,
    /// Training samples per joule of the whole device in that probe, where energy was recorded.
    pub train_samples_per_j: Option<f64>,
    /// The solo trainers' samples per joule on the same card (their mean), where recorded.
    pub solo_samples_per_j: Option<f64>,
    /// Each client's memory limit, bytes (`null`: none, every client may take the whole card).
    pub memory_limit_bytes: Option<u64>,
    /// Each client's share of the threads, percent (`null`: no limit).
    pub threads_pct: Option<u32>,
    /// Cards the mix's tenants take under this policy, as the device plugin places them.
    pub cards: u32,
    /// Whether no other point has capacity >= and training >= with one strictly greater.
    pub on_frontier: bool,
}

/// One need and what the data pick for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    /// The need, as a user asks it (`serve at the objective beside training`).
    pub need: String,
    /// The pick in a user's words; `null` when the data cannot answer.
    pub pick: Option<String>,
    /// The picked points' policy names (several when the data cannot tell them apart).
    #[serde(default)]
    pub policies: Vec<String>,
    /// What the pick gives, a figure with its unit and interval (or why nothing is measured:
    /// `not measured: ...`).
    pub get: String,
    /// What the pick gives up.
    pub give_up: String,
    /// Cards for the mix's tenants under the pick, in words.
    pub cards: String,
}
