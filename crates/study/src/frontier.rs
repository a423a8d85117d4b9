//! The built-in `frontier` plan, made for a mix and an objective: "which policy, and how many
//! MPS replicas, for my mix?" (`bench-cohort study frontier --mix serve=1,train=6 --slo-ms 10`).
//!
//! It is one endpoint (a `serve` or `serve-llm` worker) beside other workers. The plan finds the
//! endpoint's capacity at the objective alone on a card (exclusive), and beside the others under
//! time-slicing, the device plugin's MPS share at replicas 2, 4 and 7, unlimited MPS and MIG (MIG
//! runs where the node's owner made the instances, and is `not_offered`, with the reason,
//! elsewhere); every probe also measures the other workers beside the endpoint, against three
//! exclusive solos of each of their workloads that bracket the searches. It is modelled on the
//! H200 plans `scripts/gpu/frontier-serve.toml` and `frontier-llm.toml`, whose comments say why
//! each number is what it is; their numbers are the constants below.
//!
//! The plan's text is rendered here, so the study folder's `plan.toml` holds the mix and the
//! objective (a resume with another mix is refused as another plan), and the built-in
//! `crates/study/plans/frontier.toml` is this rendering for `serve=1,train=6` at p99 <= 10 ms
//! (a test checks that it is).

use std::fmt::Write as _;

use coload_cohort_schema::Workload;
use coload_spec::Mix;

/// What the endpoint must meet at p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    /// A `serve` endpoint: request latency at most this, ms.
    Latency {
        /// `--slo-ms`.
        slo_ms: f64,
    },
    /// A `serve-llm` endpoint: time to first token and time per output token at most these, ms.
    Tokens {
        /// `--ttft-slo-ms`.
        ttft_slo_ms: f64,
        /// `--tpot-slo-ms`.
        tpot_slo_ms: f64,
    },
}

/// The mix and objective `bench-cohort study frontier` takes without flags: the H200 case.
pub const DEFAULT_MIX: &str = "serve=1,train=6";
/// The default objective: p99 <= 10 ms.
pub const DEFAULT_OBJECTIVE: Objective = Objective::Latency { slo_ms: 10.0 };

/// The frontier plan's name.
pub const NAME: &str = "frontier";

/// The objective from the command line's flags, for the endpoint of `mix`; `None` for all three:
/// the default objective of a `serve` endpoint, none for `serve-llm` (its objectives are named).
pub fn objective(
    mix: &Mix,
    slo_ms: Option<f64>,
    ttft_slo_ms: Option<f64>,
    tpot_slo_ms: Option<f64>,
) -> Result<Objective, String> {
    let endpoint = endpoint(mix)?;
    for (flag, v) in [
        ("--slo-ms", slo_ms),
        ("--ttft-slo-ms", ttft_slo_ms),
        ("--tpot-slo-ms", tpot_slo_ms),
    ] {
        if let Some(v) = v
            && !(v.is_finite() && v > 0.0 && v <= 3_600_000.0)
        {
            return Err(format!(
                "{flag} {v}: a positive number of milliseconds (at most an hour)"
            ));
        }
    }
    match (endpoint, slo_ms, ttft_slo_ms, tpot_slo_ms) {
        (Workload::Serve, slo, None, None) => Ok(Objective::Latency {
            slo_ms: slo.unwrap_or(10.0),
        }),
        (Workload::Serve, _, _, _) => Err(
            "--ttft-slo-ms and --tpot-slo-ms are a serve-llm endpoint's objectives; a serve \
             endpoint takes --slo-ms"
                .to_owned(),
        ),
        (_, None, Some(ttft), Some(tpot)) => Ok(Objective::Tokens {
            ttft_slo_ms: ttft,
            tpot_slo_ms: tpot,
        }),
        (_, Some(_), _, _) => Err(
            "--slo-ms is a serve endpoint's objective; a serve-llm endpoint takes --ttft-slo-ms \
             and --tpot-slo-ms"
                .to_owned(),
        ),
        _ => Err(
            "a serve-llm endpoint's frontier needs both --ttft-slo-ms and --tpot-slo-ms (e.g. \
             --ttft-slo-ms 500 --tpot-slo-ms 50)"
                .to_owned(),
        ),
    }
}

/// The mix's one endpoint, or why the mix is no frontier's: exactly one `serve` or `serve-llm`
/// worker, and at least one other worker, each `train` or `infer`.
fn endpoint(mix: &Mix) -> Result<Workload, String> {
    let endpoints: Vec<Workload> = mix
        .workloads()
        .iter()
        .copied()
        .filter(|w| matches!(w, Workload::Serve | Workload::ServeLlm))
        .collect();
    let [endpoint] = endpoints.as_slice() else {
        return Err(format!(
            "--mix {mix}: a frontier's mix holds exactly one serve or serve-llm worker (the \
             endpoint whose capacity it finds), this one holds {}; e.g. --mix serve=1,train=6",
            endpoints.len()
        ));
    };
    if mix.len() < 2 {
        return Err(format!(
            "--mix {mix}: a frontier places the endpoint beside other workers; add some (e.g. \
             --mix {mix},train=6); the endpoint alone is part of every frontier"
        ));
    }
    if let Some(other) = mix.workloads().iter().find(|w| {
        !matches!(
            w,
            Workload::Serve | Workload::ServeLlm | Workload::Train | Workload::Infer
        )
    }) {
        return Err(format!(
            "--mix {mix}: the frontier places the endpoint beside train and infer workers, whose \
             solos it runs as baselines; {other} is not one of them (write a plan of your own: \
             docs/study.md)"
        ));
    }
    Ok(*endpoint)
}

/// The plan's text for `mix` at `objective`, or why the mix is no frontier's.
#[expect(
    clippy::too_many_lines,
    reason = "the plan's text top to bottom, as it reads in the file it renders"
)]
pub fn plan_text(mix: &str, objective: Objective) -> Result<String, String> {
    let parsed = Mix::parse(mix).map_err(|e| format!("--mix {mix}: {e}"))?;
    let endpoint = endpoint(&parsed)?;
    match (endpoint, objective) {
        (Workload::Serve, Objective::Latency { .. })
        | (Workload::ServeLlm, Objective::Tokens { .. }) => {}
        (Workload::Serve, _) => {
            return Err("a serve endpoint's objective is --slo-ms".to_owned());
        }
        _ => {
            return Err(
                "a serve-llm endpoint's objectives are --ttft-slo-ms and --tpot-slo-ms".to_owned(),
            );
        }
    }
    let mix = parsed.to_string();
    let label = parsed.label();
    // Each other workload once, in mix order: its solo is the baseline of its workers.
    let mut others: Vec<Workload> = Vec::new();
    for w in parsed.workloads() {
        if *w != endpoint && !others.contains(w) {
            others.push(*w);
        }
    }
    let others_words: Vec<&str> = others.iter().map(|w| w.as_str()).collect();
    let flags = match objective {
        Objective::Latency { slo_ms } => format!("--slo-ms {slo_ms}"),
        Objective::Tokens {
            ttft_slo_ms,
            tpot_slo_ms,
        } => format!("--ttft-slo-ms {ttft_slo_ms} --tpot-slo-ms {tpot_slo_ms}"),
    };
    let (objective_words, search) = match objective {
        Objective::Latency { slo_ms } => (
            format!("p99 <= {slo_ms} ms"),
            format!(
                "find_capacity = true, slo_ms = {slo_ms}, slo_quantile = 0.99, max_probes = 4, \
                 capacity_tolerance = 0.3, rate_min = 50, rate_max = 16000, window_s = 10"
            ),
        ),
        Objective::Tokens {
            ttft_slo_ms,
            tpot_slo_ms,
        } => (
            format!("TTFT p99 <= {ttft_slo_ms} ms and TPOT p99 <= {tpot_slo_ms} ms"),
            format!(
                "prompt_tokens = 512, output_tokens = 128, find_capacity = true, ttft_slo_ms = \
                 {ttft_slo_ms}, tpot_slo_ms = {tpot_slo_ms}, slo_quantile = 0.99, max_batch = \
                 32, max_probes = 4, capacity_tolerance = 0.3, rate_min = 24, rate_max = 640, \
                 window_s = 20"
            ),
        ),
    };
    let llm = endpoint == Workload::ServeLlm;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Rendered by `bench-cohort study frontier --mix {mix} {flags}`\n# \
         (crates/study/src/frontier.rs): the capacity of one endpoint at its objective, alone on"
    );
    t.push_str(HEADER);
    let _ = write!(
        t,
        "name = \"{NAME}\"\ndescription = \"the frontier of {mix} at {objective_words}: the \
         endpoint alone, and beside the others under time-slicing, MPS at replicas 2, 4 and 7, \
         unlimited MPS and MIG, against exclusive solos of {} on the same card\"\nrepeats = 1\n",
        others_words.join(" and ")
    );
    t.push_str(FLAGS);
    t.push_str(POLICIES);
    for w in &others {
        let _ = write!(
            t,
            "\n[[cohort]]\nworkers = \"{w}=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n\
             repeats = 3\n"
        );
    }
    let (alone_rate, shared_rate) = if llm { (64, 32) } else { (4000, 400) };
    let endpoint_name = if llm { "serve-llm" } else { "serve" };
    let alone_execution = if llm {
        ", execution = \"cuda-graph\"".to_owned()
    } else {
        String::new()
    };
    // The endpoint graph-captured, the workers beside it eager, as the H200 plan ran them.
    let shared_execution = if llm {
        let mut e = String::from("serve-llm=cuda-graph");
        for w in &others {
            let _ = write!(e, ",{w}=eager");
        }
        format!(", execution = \"{e}\"")
    } else {
        String::new()
    };
    let cpu = |shared: bool| {
        if llm {
            let mut model = String::from("serve-llm=gpt2-tiny");
            if shared {
                for w in &others {
                    let _ = write!(model, ",{w}=resnet18");
                }
            }
            format!(
                "cpu = {{ model = \"{model}\", execution = \"eager\", prompt_tokens = 16, \
                 output_tokens = 8, max_batch = 4, rate = 4, rate_min = 2, rate_max = 16, \
                 max_probes = 2, window_s = 4, slo_quantile = 0.5 }}\n"
            )
        } else {
            "cpu = { rate = 20, rate_min = 10, rate_max = 80, max_probes = 2, window_s = 4, \
             slo_quantile = 0.5 }\n"
                .to_owned()
        }
    };
    let _ = write!(
        t,
        "\n# The endpoint alone: what a whole card serves at the objective.\n[[cohort]]\n\
         workers = \"{endpoint_name}=1\"\npolicies = [\"exclusive\"]\nname = \
         \"{endpoint_name}1-capacity\"\nflags = {{ {search}, rate = {alone_rate}{alone_execution} \
         }}\n{}",
        cpu(false)
    );
    let _ = write!(
        t,
        "\n# Beside the others, under every sharing policy.\n[[cohort]]\nworkers = \"{mix}\"\n\
         policies = [\"timeslice\", \"mps-replicas-2\", \"mps-replicas-4\", \"mps-replicas-7\", \
         \"mps-unlimited\", \"mig\"]\nname = \"{label}-capacity\"\nflags = {{ {search}, rate = \
         {shared_rate}{shared_execution} }}\n{}",
        cpu(true)
    );
    Ok(t)
}

const HEADER: &str = "\
# a card and beside the other workers of the mix under every sharing policy the node offers
# (time-slicing, the device plugin's MPS share at replicas 2, 4 and 7, unlimited MPS, MIG where
# the node has instances), with the other workers' throughput beside it in every probe, against
# three exclusive solos of each of their workloads on the same card that bracket the searches.
# One card, one run: like for like.
#
# Numbers as in scripts/gpu/frontier-serve.toml and frontier-llm.toml: 10 s probes for a serve
# endpoint (at the lowest rate, 50 requests/s, 500 requests: more than the 459 a p99 needs to
# pass the early-stopping test), 20 s for serve-llm (23 requests/s pass at 99 %, so its searches
# start no lower than 24); at most 4 probes a search, bracketing to 30 %. On a node without a GPU
# the shapes shrink (the [cpu] table and each search's `cpu`: a few requests a second, judged at
# the median, which a few dozen requests can pass) so the study runs in minutes: a rehearsal of
# the path, not a measurement.
";

const FLAGS: &str = "
[flags]
window_s = 8
warmup_batches = 10
start_lead_s = 2

[cpu]
window_s = 4
warmup_batches = 1
start_lead_s = 2
batch_size = 2
image_size = 32
join_timeout_s = 120
";

const POLICIES: &str = "
[[policy]]
name = \"exclusive\"
mode = \"exclusive\"

[[policy]]
name = \"timeslice\"
mode = \"timeslice\"

[[policy]]
name = \"mps-replicas-2\"
mode = \"mps\"
flags = { mps_replicas = 2 }

[[policy]]
name = \"mps-replicas-4\"
mode = \"mps\"
flags = { mps_replicas = 4 }

[[policy]]
name = \"mps-replicas-7\"
mode = \"mps\"
flags = { mps_replicas = 7 }

[[policy]]
name = \"mps-unlimited\"
mode = \"mps\"
flags = { mps_unlimited = true }

[[policy]]
name = \"mig\"
mode = \"mig\"
";

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn mix(s: &str) -> Mix {
        Mix::parse(s).unwrap()
    }

    /// The built-in `frontier.toml` is this rendering for the default mix and objective, so the
    /// file a user reads is the plan the flags make.
    #[test]
    fn the_built_in_file_is_the_default_rendering() {
        let text = plan_text(DEFAULT_MIX, DEFAULT_OBJECTIVE).unwrap();
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/frontier.toml");
        // `COLOAD_WRITE_FRONTIER=1 cargo test -p coload-study` renders the file again after a
        // change here.
        if std::env::var_os("COLOAD_WRITE_FRONTIER").is_some() {
            std::fs::write(file, &text).unwrap();
        }
        assert_eq!(text, include_str!("../plans/frontier.toml"));
    }

    #[test]
    fn a_serve_frontier_sweeps_every_policy_against_bracketing_solos() {
        let text = plan_text(
            "serve=1,train=6,infer=1",
            Objective::Latency { slo_ms: 25.0 },
        )
        .unwrap();
        let plan = Plan::parse(NAME, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let jobs = plan.jobs(false);
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        // Each other workload's solo opens, splits and closes the study.
        assert_eq!(names.first(), Some(&"exclusive-train1-r1"));
        assert_eq!(names[1], "exclusive-infer1-r1");
        assert_eq!(names.last(), Some(&"exclusive-infer1-r3"));
        for policy in [
            "timeslice",
            "mps-replicas-2",
            "mps-replicas-4",
            "mps-replicas-7",
            "mps-unlimited",
            "mig",
        ] {
            let j = jobs
                .iter()
                .find(|j| j.name == format!("{policy}-serve1-train6-infer1-capacity-r1"))
                .unwrap_or_else(|| panic!("{policy} missing: {names:?}"));
            assert!(j.finds_capacity());
            assert_eq!(j.spec.serve.slo_ms, Some(25.0));
            assert_eq!(j.spec.capacity.max_probes, 4);
            assert_eq!(j.spec.serve.rate, Some(400.0));
        }
        let alone = jobs
            .iter()
            .find(|j| j.name == "exclusive-serve1-capacity-r1")
            .unwrap();
        assert_eq!(alone.spec.serve.rate, Some(4000.0));
        assert_eq!(jobs.iter().filter(|j| j.baseline).count(), 6);
        // On a CPU node: small shapes, two probes.
        let cpu = plan.jobs(true);
        let alone = cpu
            .iter()
            .find(|j| j.name == "exclusive-serve1-capacity-r1")
            .unwrap();
        assert_eq!(alone.spec.capacity.max_probes, 2);
        assert_eq!(alone.spec.flags.image_size, 32);
    }

    #[test]
    fn an_llm_frontier_graph_captures_the_endpoint_and_shrinks_on_the_cpu() {
        let text = plan_text(
            "serve-llm=1,train=6",
            Objective::Tokens {
                ttft_slo_ms: 500.0,
                tpot_slo_ms: 50.0,
            },
        )
        .unwrap();
        let plan = Plan::parse(NAME, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let jobs = plan.jobs(false);
        let j = jobs
            .iter()
            .find(|j| j.name == "mps-replicas-4-serve-llm1-train6-capacity-r1")
            .unwrap();
        assert_eq!(
            (j.spec.serve.ttft_slo_ms, j.spec.serve.tpot_slo_ms),
            (Some(500.0), Some(50.0))
        );
        assert_eq!(j.spec.serve.rate, Some(32.0));
        assert!((j.spec.capacity.rate_min - 24.0).abs() < 1e-12);
        let cpu = plan.jobs(true);
        let j = cpu
            .iter()
            .find(|j| j.name == "timeslice-serve-llm1-train6-capacity-r1")
            .unwrap();
        assert_eq!(j.spec.flags.prompt_tokens, Some(16));
        assert_eq!(j.spec.capacity.max_probes, 2);
    }

    #[test]
    fn bad_mixes_and_objectives_are_refused_naming_the_problem() {
        let refused = |m: &str| plan_text(m, DEFAULT_OBJECTIVE).unwrap_err();
        assert!(
            refused("train=6").contains("holds 0"),
            "{}",
            refused("train=6")
        );
        assert!(refused("serve=2,train=6").contains("exactly one serve or serve-llm worker"));
        assert!(refused("serve=1,serve-llm=1,train=2").contains("holds 2"));
        assert!(refused("serve=1").contains("beside other workers"));
        assert!(refused("serve=1,hog=1").contains("hog is not one of them"));
        assert!(refused("serve=1,decode=2").contains("decode is not one of them"));
        assert!(refused("serve=x").contains("--mix serve=x"));
        let o = |m: &str, slo, ttft, tpot| objective(&mix(m), slo, ttft, tpot);
        assert_eq!(
            o("serve=1,train=6", None, None, None),
            Ok(DEFAULT_OBJECTIVE)
        );
        assert!(
            o("serve=1,train=6", None, Some(500.0), None)
                .unwrap_err()
                .contains("a serve endpoint takes --slo-ms")
        );
        assert!(
            o("serve-llm=1,train=6", Some(10.0), None, None)
                .unwrap_err()
                .contains("takes --ttft-slo-ms and --tpot-slo-ms")
        );
        assert!(
            o("serve-llm=1,train=6", None, Some(500.0), None)
                .unwrap_err()
                .contains("needs both")
        );
        assert!(
            o("serve=1,train=6", Some(-1.0), None, None)
                .unwrap_err()
                .contains("--slo-ms -1")
        );
        assert!(
            plan_text("serve-llm=1,train=1", DEFAULT_OBJECTIVE)
                .unwrap_err()
                .contains("serve-llm endpoint's objectives")
        );
    }
}
