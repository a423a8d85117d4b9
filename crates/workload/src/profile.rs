//! Where a step's time goes: libtorch's Kineto profiler (the one `torch.profiler.profile`
//! drives) around any work, and a per-step summary of what it recorded.
//!
//! [`Profiler::start`] enables the profiler on this thread, recording CPU operators and, when
//! asked and a CUDA device is present, the device's activities (kernels, copies, fills; the
//! kernels of a CUDA graph replay one by one, through CUPTI). [`Profiler::stop`] saves the chrome
//! trace (`chrome://tracing`, Perfetto) where asked and returns the events. [`Profile::summary`]
//! divides them by the steps profiled, as `scripts/perf/pytorch_decode.py --profile-steps` does
//! for PyTorch's side: events per step, time per step, and the events that take the most time.
//!
//! Without device activities (a CPU-only libtorch, or no GPU) the summary counts CPU operators
//! instead, as the nearest thing to kernels: those that launch no kernel on a device are left
//! out ([`NO_KERNEL_OPERATORS`]: views, allocations, no-op conversions), then of the rest only
//! the innermost ones count (`aten::linear` holds `aten::matmul`, which holds `aten::mm`: only
//! `aten::mm` computes); the summary says so ([`ProfileSummary::counted`]).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::error::WorkloadError;
use crate::shim;

/// One event the profiler recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfiledEvent {
    /// The kernel's or operator's name.
    pub name: String,
    /// A device activity (kernel, copy, fill), not a CPU operator.
    pub on_device: bool,
    /// Start, ns on the profiler's clock.
    pub start_ns: u64,
    /// Duration, ns.
    pub duration_ns: u64,
}

/// A running profiler; [`Profiler::stop`] ends it (dropping it stops it and discards the events).
#[derive(Debug)]
pub struct Profiler {
    device_activities: bool,
    running: bool,
}

impl Profiler {
    /// Starts libtorch's profiler on this thread: CPU operators, and device activities when
    /// `cuda` is set and libtorch sees a CUDA device ([`Profiler::device_activities`] says
    /// which). Refused while another profiler runs in the process.
    pub fn start(cuda: bool) -> Result<Self, WorkloadError> {
        let device_activities = shim::profiler_start(cuda)?;
        Ok(Profiler {
            device_activities,
            running: true,
        })
    }

    /// Whether device activities are being recorded.
    #[must_use]
    pub fn device_activities(&self) -> bool {
        self.device_activities
    }

    /// Stops the profiler, writes its chrome trace to `trace` when given, and returns what it
    /// recorded.
    pub fn stop(mut self, trace: Option<&Path>) -> Result<Profile, WorkloadError> {
        self.running = false;
        let mut events = Vec::new();
        shim::profiler_stop(trace, |e| {
            events.push(ProfiledEvent {
                name: e.name.to_owned(),
                on_device: e.on_device,
                start_ns: e.start_ns,
                duration_ns: e.duration_ns,
            });
        })?;
        Ok(Profile {
            events,
            device_activities: self.device_activities,
        })
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if self.running {
            // Nothing to report from a drop: the profiler is stopped so that a later one can
            // start, and its events are discarded.
            let _ = shim::profiler_stop(None, |_| {});
        }
    }
}

/// What a profiler recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Every event, in the profiler's order.
    pub events: Vec<ProfiledEvent>,
    /// Whether device activities were recorded.
    pub device_activities: bool,
}

/// CPU operators that launch no kernel on a device by themselves: views and metadata,
/// allocations, and conversions that return their input when there is nothing to do (when they
/// do copy, they hold the operator that copies, which counts).
pub const NO_KERNEL_OPERATORS: [&str; 33] = [
    "aten::as_strided",
    "aten::view",
    "aten::view_as",
    "aten::_unsafe_view",
    "aten::_reshape_alias",
    "aten::reshape",
    "aten::flatten",
    "aten::unflatten",
    "aten::select",
    "aten::slice",
    "aten::narrow",
    "aten::split",
    "aten::chunk",
    "aten::unbind",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::transpose",
    "aten::t",
    "aten::permute",
    "aten::expand",
    "aten::expand_as",
    "aten::detach",
    "aten::alias",
    "aten::lift_fresh",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::contiguous",
    "aten::to",
    "aten::type_as",
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::resize_",
];

/// What a [`ProfileSummary`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Device activities: kernels, copies and fills.
    DeviceActivities,
    /// Innermost CPU operators of those not in [`NO_KERNEL_OPERATORS`] (no device activities
    /// were recorded).
    CpuOperators,
}

impl Counted {
    /// What the counts are of, in words.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Counted::DeviceActivities => "device activities (kernels, copies, fills)",
            Counted::CpuOperators => "innermost computing CPU operators (no device activities)",
        }
    }
}

/// One name's share of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    /// The kernel's or operator's name.
    pub name: String,
    /// Calls per step.
    pub calls_per_step: f64,
    /// Time per step, µs.
    pub us_per_step: f64,
}

/// A profile divided by the steps it covered.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSummary {
    /// Steps profiled.
    pub steps: u32,
    /// What the counts are of.
    pub counted: Counted,
    /// Events per step.
    pub events_per_step: f64,
    /// Their time per step (the sum of their durations), µs.
    pub us_per_step: f64,
    /// Distinct names per step.
    pub distinct_names: usize,
    /// The names that take the most time, most first (ties by name).
    pub top: Vec<SummaryLine>,
}

impl Profile {
    /// Per step of `steps` (at least 1): the device activities when recorded, else the CPU
    /// operators, with the `top` names that take the most time.
    pub fn summary(&self, steps: u32, top: usize) -> Result<ProfileSummary, WorkloadError> {
        if steps == 0 {
            return Err(WorkloadError::InvalidOption(
                "a profile's summary needs at least one step, got 0".into(),
            ));
        }
        let counted = if self.device_activities {
            Counted::DeviceActivities
        } else {
            Counted::CpuOperators
        };
        let counted_events: Vec<&ProfiledEvent> = if self.device_activities {
            self.events.iter().filter(|e| e.on_device).collect()
        } else {
            innermost(
                self.events
                    .iter()
                    .filter(|e| !e.on_device && !NO_KERNEL_OPERATORS.contains(&e.name.as_str())),
            )
        };
        let mut by_name: HashMap<&str, (u64, u64)> = HashMap::new();
        let (mut events, mut total_ns) = (0_u64, 0_u64);
        for e in counted_events {
            let entry = by_name.entry(e.name.as_str()).or_default();
            entry.0 += 1;
            entry.1 += e.duration_ns;
            events += 1;
            total_ns += e.duration_ns;
        }
        let per = f64::from(steps);
        let distinct_names = by_name.len();
        let mut lines: Vec<(&str, (u64, u64))> = by_name.into_iter().collect();
        lines.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| a.0.cmp(b.0)));
        let top = lines
            .into_iter()
            .take(top)
            .map(|(name, (calls, ns))| SummaryLine {
                name: name.to_owned(),
                calls_per_step: calls as f64 / per,
                us_per_step: ns as f64 / 1e3 / per,
            })
            .collect();
        Ok(ProfileSummary {
            steps,
            counted,
            events_per_step: events as f64 / per,
            us_per_step: total_ns as f64 / 1e3 / per,
            distinct_names,
            top,
        })
    }
}

/// The events that hold no other: sorted by start (the longer first at one start), an event
/// holds another exactly when the next one starts before it ends, since operators on one thread
/// nest. (Every operator of a step runs on the calling thread; libtorch's intra-op threads record
/// none.)
fn innermost<'a>(events: impl Iterator<Item = &'a ProfiledEvent>) -> Vec<&'a ProfiledEvent> {
    let mut sorted: Vec<&ProfiledEvent> = events.collect();
    sorted.sort_by(|a, b| {
        a.start_ns
            .cmp(&b.start_ns)
            .then(b.duration_ns.cmp(&a.duration_ns))
    });
    let mut out = Vec::with_capacity(sorted.len());
    for (i, e) in sorted.iter().enumerate() {
        let end = e.start_ns.saturating_add(e.duration_ns);
        let holds_next = sorted.get(i + 1).is_some_and(|next| next.start_ns < end);
        if !holds_next {
            out.push(*e);
        }
    }
    out
}

impl fmt::Display for ProfileSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} steps; per step: {:.1} {}, {:.1} µs, {} distinct names",
            self.steps,
            self.events_per_step,
            self.counted.as_str(),
            self.us_per_step,
            self.distinct_names
        )?;
        writeln!(f, "{:>10} {:>8}  name", "µs/step", "calls")?;
        for line in &self.top {
            let name: String = line.name.chars().take(100).collect();
            writeln!(
                f,
                "{:>10.1} {:>8.2}  {name}",
                line.us_per_step, line.calls_per_step
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Counted, Profile, ProfiledEvent};

    fn event(name: &str, on_device: bool, duration_ns: u64) -> ProfiledEvent {
        at(name, on_device, 0, duration_ns)
    }

    fn at(name: &str, on_device: bool, start_ns: u64, duration_ns: u64) -> ProfiledEvent {
        ProfiledEvent {
            name: name.into(),
            on_device,
            start_ns,
            duration_ns,
        }
    }

    #[test]
    fn a_summary_divides_the_device_activities_by_the_steps() {
        let profile = Profile {
            events: vec![
                event("gemm", true, 3_000),
                event("gemm", true, 5_000),
                event("add", true, 1_000),
                event("aten::linear", false, 90_000),
                event("add", true, 1_000),
            ],
            device_activities: true,
        };
        let s = profile.summary(2, 1).unwrap();
        assert_eq!(s.counted, Counted::DeviceActivities);
        // Four device events over two steps; the CPU operator is not counted.
        assert!((s.events_per_step - 2.0).abs() < 1e-12);
        assert!((s.us_per_step - 5.0).abs() < 1e-12);
        assert_eq!(s.distinct_names, 2);
        assert_eq!(s.top.len(), 1);
        assert_eq!(s.top[0].name, "gemm");
        assert!((s.top[0].calls_per_step - 1.0).abs() < 1e-12);
        assert!((s.top[0].us_per_step - 4.0).abs() < 1e-12);
    }

    #[test]
    fn without_device_activities_a_summary_counts_the_innermost_cpu_operators() {
        let profile = Profile {
            events: vec![
                at("aten::add", false, 200, 20),
                at("aten::linear", false, 0, 100),
                at("aten::mm", false, 10, 40),
                // A view inside the linear, after its product: no kernel, and not what makes the
                // linear an outer operator.
                at("aten::view", false, 60, 1),
                at("aten::index_select", false, 150, 10),
                at("aten::empty", false, 151, 1),
                at("aten::mul", false, 300, 20),
            ],
            device_activities: false,
        };
        let s = profile.summary(1, 10).unwrap();
        assert_eq!(s.counted, Counted::CpuOperators);
        assert!((s.events_per_step - 4.0).abs() < 1e-12);
        assert!((s.us_per_step - 0.09).abs() < 1e-12);
        // Most time first, equal times by name.
        let names: Vec<&str> = s.top.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["aten::mm", "aten::add", "aten::mul", "aten::index_select"]
        );
    }

    #[test]
    fn a_summary_of_no_steps_is_refused() {
        let profile = Profile {
            events: vec![],
            device_activities: false,
        };
        let e = profile.summary(0, 10).unwrap_err();
        assert!(e.to_string().contains("at least one step"), "{e}");
    }
}
