//! The serve worker's life after the preflight: the serve step warmed at every padded size,
//! the barrier, then the serve window (`coload_timing::run_serve`) and its records.

use std::time::Duration;

use coload_cohort_schema::{BarrierTiming, ServeWindowInfo, Stage, WindowInfo, Workload};
use coload_timing::{Clock, MonotonicClock, ServeBuffer, run_serve, serve_batch_records};
use coload_workload::{ServeStep, WorkloadError, WorkloadOptions};

use super::{Cx, Measure, Run, Start, check_lateness};
use crate::args::WorkerArgs;
use crate::error::WorkerError;
use crate::progress::Progress;
use crate::serve_args::ServePlan;

/// What a serve window leaves to write: the batches and the schedule they index.
#[derive(Debug)]
pub(super) struct ServeRecords {
    pub(super) buffer: ServeBuffer,
    pub(super) plan: ServePlan,
    pub(super) start_unix_ns: u64,
}

/// A serve worker's load: the serve step behind the dynamic batcher, and its plan.
#[derive(Debug)]
pub(super) struct Serve(pub(super) ServePlan);

impl Measure for Serve {
    type Warm = ServeStep;

    fn build_and_warm(&self, run: &mut Run, cx: &Cx<'_>) -> Result<ServeStep, WorkerError> {
        run.build_and_warm_serve(&self.0, cx.args, cx.clock, cx.progress)
    }

    fn window(
        self,
        step: ServeStep,
        run: &mut Run,
        start: Start,
        cx: &Cx<'_>,
    ) -> Result<(), WorkerError> {
        run.serve_window(
            step,
            self.0,
            start.unix_ns,
            start.late_margin,
            cx.args,
            cx.clock,
            cx.progress,
        )
    }
}

impl Run {
    pub(super) fn build_and_warm_serve(
        &mut self,
        plan: &ServePlan,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<ServeStep, WorkerError> {
        let in_warmup = |source| WorkerError::Workload {
            stage: Stage::Warmup,
            source,
        };
        let build_start = clock.now_unix_ns();
        let f = &args.flags;
        // The MPS share and what the runtime reports, before anything is allocated.
        self.report.share = crate::share::observe(f);
        let model = args
            .model_source()
            .map_err(|e| in_warmup(WorkloadError::InvalidOption(e.to_string())))?;
        let options = WorkloadOptions {
            workload: Workload::Serve,
            device: f.device,
            batch_size: plan.policy.max_batch(),
            image_size: f.image_size,
            precision: f.vision_precision(),
            seed: f.seed,
            model,
            execution: args.execution(),
            memory_format: f.memory_format(),
        };
        let mut step = ServeStep::new(&options, plan.policy.sizes()).map_err(in_warmup)?;
        let info = step.info();
        self.report.config.parameter_count = Some(info.parameter_count);
        self.report.config.model_file.clone_from(&info.model_file);
        self.record_device(args, &info, build_start, clock, progress)?;
        let medians = step
            .warm_up(f.warmup_batches, |size, median| {
                progress.live(&format!(
                    "warmup: padded size {size} ready ({:.2} ms a batch)",
                    median.as_secs_f64() * 1e3
                ));
            })
            .map_err(in_warmup)?;
        let sizes: Vec<String> = medians
            .iter()
            .map(|(s, d)| format!("{s}: {:.2} ms", d.as_secs_f64() * 1e3))
            .collect();
        progress.phase(
            "warmup",
            &format!(
                "done: {} batches at each padded size (median {}); {} requests scheduled \
                 ({} arrivals, {:.1}/s), max batch {}, max queue delay {} ms",
                f.warmup_batches.max(1),
                sizes.join(", "),
                plan.schedule.len(),
                plan.schedule.kind(),
                plan.schedule.realized_rate_per_s(),
                plan.policy.max_batch(),
                plan.config.max_queue_delay_ms
            ),
        );
        Ok(step)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the window's inputs, each used once"
    )]
    pub(super) fn serve_window(
        &mut self,
        mut step: ServeStep,
        plan: ServePlan,
        start_unix_ns: u64,
        late_margin: Duration,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<(), WorkerError> {
        let host_start = coload_device::host_snapshot();
        let sampler = self.start_sampler(args, clock, progress);
        let mut buffer = ServeBuffer::for_schedule(&plan.schedule);
        let serve_clock = MonotonicClock::new(clock.to_instant(start_unix_ns));

        // The serve window: nothing else happens in this thread until it returns.
        self.termination.enter_window();
        let outcome = run_serve(
            &mut step,
            &serve_clock,
            &plan.schedule,
            &plan.policy,
            &mut buffer,
            &self.termination.cancel,
        );
        self.termination.leave_window();

        let window_ns = plan.schedule.window_ns();
        self.after_window(
            sampler,
            &host_start,
            start_unix_ns + outcome.actual_start_ns,
            start_unix_ns + window_ns,
        );
        self.report.memory = step.peak_memory();
        self.batches = serve_batch_records(&buffer, window_ns, start_unix_ns);
        let timing = self
            .report
            .barrier
            .get_or_insert_with(BarrierTiming::default);
        timing.actual_start_unix_ns = Some(start_unix_ns + outcome.actual_start_ns);
        timing.lateness_ns = Some(outcome.actual_start_ns as i64);
        self.report.window = Some(WindowInfo {
            start_unix_ns: start_unix_ns + outcome.actual_start_ns,
            end_unix_ns: start_unix_ns + window_ns,
            batches: outcome.batches_completed,
            samples: outcome.requests_completed,
        });
        self.report.serve = Some(ServeWindowInfo {
            requests: outcome.requests,
            completed: outcome.requests_completed,
            in_flight_at_end: outcome.requests_in_flight,
            queued_at_end: outcome.requests_not_dispatched,
            oldest_unfinished_age_ns: outcome.oldest_unfinished_age_ns,
            batches_dispatched: buffer.batches().len() as u64,
            offsets_beyond_window: plan.schedule.beyond_window(),
        });
        let latency = latency_line(&buffer, &plan, window_ns);
        self.serve_records = Some(ServeRecords {
            buffer,
            plan,
            start_unix_ns,
        });
        if let Some(error) = outcome.error {
            return Err(WorkerError::Window(error));
        }
        check_lateness(
            outcome.actual_start_ns as i64,
            late_margin,
            outcome.batches_completed as usize,
        )?;
        progress.phase(
            "window",
            &format!(
                "done: {} requests, {} completed in {} batches, {} running and {} queued at the \
                 end (oldest {:.3} ms); {latency}",
                outcome.requests,
                outcome.requests_completed,
                outcome.batches_completed,
                outcome.requests_in_flight,
                outcome.requests_not_dispatched,
                outcome
                    .oldest_unfinished_age_ns
                    .map_or(0.0, |a| a as f64 / 1e6),
            ),
        );
        Ok(())
    }
}

/// The completed requests' latency quantiles, for the log (after the window).
fn latency_line(buffer: &ServeBuffer, plan: &ServePlan, window_ns: u64) -> String {
    let arrivals = plan.schedule.offsets_ns();
    let mut latencies: Vec<u64> = buffer
        .batches()
        .iter()
        .filter(|b| b.complete_ns <= window_ns)
        .flat_map(|b| {
            let first = b.first_request as usize;
            arrivals[first..first + b.requests as usize]
                .iter()
                .map(move |a| b.complete_ns - a)
        })
        .collect();
    if latencies.is_empty() {
        return "no request completed".to_owned();
    }
    latencies.sort_unstable();
    let at = |q: f64| {
        let rank = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        Duration::from_nanos(latencies[rank - 1]).as_secs_f64() * 1e3
    };
    format!(
        "request latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (completed requests; \
         bench-summarize counts the rest)",
        at(0.5),
        at(0.99),
        at(1.0)
    )
}
