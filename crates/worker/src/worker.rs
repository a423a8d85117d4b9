//! The worker's life: preflight, model, warmup, barrier, window, artifacts.
//!
//! Every failure after argument validation still produces a `worker.json` with
//! `status: "failed"`, the stage, a kind and the message, plus whatever had been measured.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use coload_barrier::{Barrier, BarrierError, BarrierOptions};
use coload_cohort_schema::{
    BarrierTiming, BatchRecord, DeviceChoice, DeviceKind, Failure, FailureKind, GpmRecord,
    ReadyRecord, RuntimeInfo, SCHEMA_VERSION, Stage, Status, TelemetrySample, WarmupReport,
    WarmupStop, WindowInfo, WorkerConfig, WorkerReport, Workload, exit, files, write_json_atomic,
};
use coload_device::{
    ActivityOptions, MigTarget, NvmlSource, NvmlTarget, RealNvml, SharingFacts, TelemetrySampler,
};
use coload_timing::{BatchBuffer, Clock, SteadyRule, run_window_cancellable, warmup_until_steady};
use coload_workload::{ModelStep, WorkloadError, WorkloadInfo, WorkloadOptions};

use crate::args::WorkerArgs;
use crate::error::{WorkerError, chain};
use crate::load::Load;
use crate::progress::Progress;
use crate::serve_args::OpenLoop;
use crate::termination::Termination;

mod decode;
mod serve;
mod serve_llm;

/// Everything measured so far; written whatever happens.
pub(crate) struct Run {
    report: WorkerReport,
    /// Where the report goes, and the signal handler's view of it.
    out: std::path::PathBuf,
    termination: std::sync::Arc<Termination>,
    /// The NVML handle of the physical GPU, for the telemetry sampler.
    target: Option<NvmlTarget>,
    batches: Vec<BatchRecord>,
    telemetry: Vec<TelemetrySample>,
    /// The MIG device the worker runs on, for per-instance GPM and energy.
    mig: Option<MigTarget>,
    /// Raw GPM readings (`gpm.jsonl`).
    gpm: Vec<GpmRecord>,
    /// A serve worker's batches and schedule, written as `requests.jsonl`.
    serve_records: Option<serve::ServeRecords>,
    /// A `serve-llm` worker's requests and iterations, written as `llm_requests.jsonl`.
    llm_records: Option<serve_llm::LlmRecords>,
}

/// Runs the worker and returns the process exit code. `build` is what `worker.json` records
/// as the coload build that ran (`bench-worker --version`'s short line).
pub(crate) fn execute(
    args: &WorkerArgs,
    serve: Option<OpenLoop>,
    build: &str,
    progress: &Progress,
) -> u8 {
    if let Err(e) = prepare_out(&args.place.out) {
        progress.error("setup", &chain(&e));
        return e.exit_code();
    }
    let clock = Clock::anchor();
    let termination = Termination::install(progress);
    let mut report = initial_report(args, build);
    match &serve {
        Some(OpenLoop::Serve(p)) => report.config.serve = Some(p.config.clone()),
        Some(OpenLoop::Llm(p)) => report.config.serve_llm = Some(p.config.clone()),
        None => {}
    }
    termination.checkpoint(&report, Stage::Preflight, &args.place.out);
    let mut run = Run {
        report,
        out: args.place.out.clone(),
        termination,
        target: None,
        batches: Vec::new(),
        telemetry: Vec::new(),
        mig: None,
        gpm: Vec::new(),
        serve_records: None,
        llm_records: None,
    };
    let result = run.measure(args, &clock, progress, serve);
    let mut code = match &result {
        Ok(()) => {
            run.report.status = Status::Complete;
            exit::COMPLETE
        }
        Err(e) => {
            let message = chain(e);
            progress.error(e.stage().as_str(), &message);
            let mut failure = Failure::now(e.stage(), e.kind(), message);
            if failure.kind == FailureKind::Terminated {
                // When the signal came, not when the window noticed it.
                failure.at_unix_ns = run.termination.signalled_at().or(failure.at_unix_ns);
            }
            run.report.failure = Some(failure);
            e.exit_code()
        }
    };
    if let Err(e) = run.write(&args.place.out) {
        progress.error("write", &chain(&e));
        if code == exit::COMPLETE {
            code = e.exit_code();
        }
    } else {
        progress.phase(
            "write",
            &format!(
                "wrote {} ({} batches)",
                args.place.out.join(files::WORKER_REPORT).display(),
                run.batches.len()
            ),
        );
    }
    code
}

/// Creates `--out` and refuses to overwrite an earlier worker's report.
fn prepare_out(out: &Path) -> Result<(), WorkerError> {
    fs::create_dir_all(out)
        .map_err(|e| WorkerError::Output(format!("cannot create --out {}: {e}", out.display())))?;
    let report = out.join(files::WORKER_REPORT);
    if report.exists() {
        return Err(WorkerError::Output(format!(
            "{} already exists; refusing to overwrite an earlier worker's results (use a fresh --out)",
            report.display()
        )));
    }
    Ok(())
}

fn initial_report(args: &WorkerArgs, build: &str) -> WorkerReport {
    WorkerReport {
        schema_version: SCHEMA_VERSION,
        experiment: args.place.experiment.clone(),
        replica: args.place.replica,
        status: Status::Failed,
        failure: None,
        config: WorkerConfig {
            mode: args.flags.mode,
            workload: args.place.workload,
            count: args.place.count,
            model: args.model_name(),
            batch_size: args.flags.batch_size,
            image_size: args.recorded_image_size(),
            precision: args.flags.vision_precision(),
            memory_format: args.flags.memory_format(),
            warmup_batches: args.flags.warmup_batches,
            window_s: args.flags.window_s.get(),
            start_lead_s: args.flags.start_lead_s.get(),
            seed: args.flags.seed,
            execution: args.execution(),
            execution_by_workload: args.flags.execution.per_workload().cloned(),
            // Known once the model is built (see build_and_warm).
            parameter_count: None,
            model_by_workload: args
                .flags
                .model_file
                .is_none()
                .then(|| args.flags.model_declaration().per_workload().cloned())
                .flatten(),
            model_file: None,
            serve: None,
            llm: None,
            serve_llm: None,
            timeslice_interval: args.flags.timeslice_interval,
        },
        identity: coload_device::scheduler_identity(args.node_name.clone()),
        device: None,
        runtime: None,
        barrier: None,
        window: None,
        memory: None,
        host: None,
        telemetry: None,
        gpm: None,
        energy: None,
        warnings: Vec::new(),
        share: None,
        hog: None,
        serve: None,
        serve_llm: None,
        coload: Some(build.to_owned()),
    }
}

/// What one kind of load does that the others do not: how it is built and warmed up, and how
/// its window runs. Everything around the two (the preflight, telling the peers when the build
/// fails, the barrier, the artifacts) is [`Run::measure_with`]'s, once for every load: the
/// closed loop (a model's step, the hog, an LLM's decode cycle), the serve batcher and the LLM
/// server.
pub(crate) trait Measure {
    /// The load, built and warm, ready for its window.
    type Warm;

    /// Builds the load and warms it up, recording in `run` what only the built load knows.
    fn build_and_warm(&self, run: &mut Run, cx: &Cx<'_>) -> Result<Self::Warm, WorkerError>;

    /// The timed window from the common start, recording what it measured in `run`.
    fn window(
        self,
        warm: Self::Warm,
        run: &mut Run,
        start: Start,
        cx: &Cx<'_>,
    ) -> Result<(), WorkerError>;
}

/// What every step of a worker reads: its arguments, its clock and where it says what it does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub(crate) args: &'a WorkerArgs,
    pub(crate) clock: &'a Clock,
    pub(crate) progress: &'a Progress,
}

/// The common start the barrier gave, and how late a window may begin after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    pub(crate) unix_ns: u64,
    pub(crate) late_margin: Duration,
}

/// The closed loop: a model's training or inference step, the hog's hold, or an LLM's decode
/// cycle, timed batch after batch.
#[derive(Debug)]
struct ClosedLoop;

impl Measure for ClosedLoop {
    type Warm = (Load, BatchBuffer);

    fn build_and_warm(
        &self,
        run: &mut Run,
        cx: &Cx<'_>,
    ) -> Result<(Load, BatchBuffer), WorkerError> {
        run.build_and_warm(cx.args, cx.clock, cx.progress)
    }

    fn window(
        self,
        (step, buffer): (Load, BatchBuffer),
        run: &mut Run,
        start: Start,
        cx: &Cx<'_>,
    ) -> Result<(), WorkerError> {
        run.time_window(
            step,
            buffer,
            start.unix_ns,
            start.late_margin,
            cx.args,
            cx.clock,
            cx.progress,
        )
    }
}

impl Run {
    fn measure(
        &mut self,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
        serve: Option<OpenLoop>,
    ) -> Result<(), WorkerError> {
        let cx = Cx {
            args,
            clock,
            progress,
        };
        let barrier = self.preflight(args, clock, progress)?;
        self.checkpoint(Stage::Warmup);
        match serve {
            Some(OpenLoop::Serve(plan)) => self.measure_with(barrier, serve::Serve(plan), &cx),
            Some(OpenLoop::Llm(plan)) => self.measure_with(barrier, serve_llm::ServeLlm(plan), &cx),
            None => self.measure_with(barrier, ClosedLoop, &cx),
        }
    }

    /// The one sequence of every load: build and warm up (a failure tells the peers at once,
    /// rather than let them wait out their join timeout), meet the peers at the barrier, then
    /// the window from the common start.
    fn measure_with<M: Measure>(
        &mut self,
        mut barrier: Barrier,
        load: M,
        cx: &Cx<'_>,
    ) -> Result<(), WorkerError> {
        let warm = match load.build_and_warm(self, cx) {
            Ok(warm) => warm,
            Err(e) => return Err(tell_peers(&barrier, cx.args, e, cx.clock)),
        };
        let unix_ns = self.rendezvous(&mut barrier, cx.args, cx.clock, cx.progress)?;
        let start = Start {
            unix_ns,
            late_margin: barrier.options().late_margin,
        };
        load.window(warm, self, start, cx)
    }

    /// The shared directory must work before anything expensive happens.
    fn preflight(
        &mut self,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<Barrier, WorkerError> {
        let p = &args.place;
        let mut options = BarrierOptions::new(&p.sync_dir, &p.experiment, p.replica, p.count);
        options.join_timeout = args.flags.join_timeout_s.duration();
        options.start_lead = args.flags.start_lead_s.duration();
        let (barrier, preflight) =
            Barrier::preflight(options, clock).map_err(|source| WorkerError::Barrier {
                stage: Stage::Preflight,
                source,
            })?;
        self.report.barrier = Some(BarrierTiming {
            clock_offset_ns: Some(preflight.clock_offset_ns),
            clock_offset_uncertainty_ns: Some(preflight.clock_offset_uncertainty_ns),
            ..BarrierTiming::default()
        });
        progress.phase(
            "preflight",
            &format!(
                "ok: {} (clock offset {:+.3} ms +/- {:.3} ms)",
                preflight.dir.display(),
                preflight.clock_offset_ns as f64 / 1e6,
                preflight.clock_offset_uncertainty_ns as f64 / 1e6
            ),
        );
        Ok(barrier)
    }

    /// Publishes ready and waits for the common start; returns it.
    fn rendezvous(
        &mut self,
        barrier: &mut Barrier,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<u64, WorkerError> {
        let at_barrier = |source| WorkerError::Barrier {
            stage: Stage::Barrier,
            source,
        };
        let ready_unix_ns = clock.now_unix_ns();
        let ready = ReadyRecord {
            schema_version: SCHEMA_VERSION,
            experiment: args.place.experiment.clone(),
            replica: args.place.replica,
            incarnation: barrier.incarnation().to_owned(),
            config: self.report.config.clone(),
            hostname: self.report.identity.hostname.clone(),
            node_name: self.report.identity.node_name.clone(),
            pid: self.report.identity.pid,
            device: self.report.device.clone(),
            ready_unix_ns,
        };
        // The barrier stage is checkpointed before the ready record appears: whoever sees the
        // record and stops this worker finds its report saying it was at the barrier.
        let mut at_barrier_report = self.report.clone();
        at_barrier_report
            .barrier
            .get_or_insert_with(BarrierTiming::default)
            .ready_unix_ns = Some(ready_unix_ns);
        self.termination
            .checkpoint(&at_barrier_report, Stage::Barrier, &self.out);
        barrier.publish_ready(&ready, clock).map_err(at_barrier)?;
        self.report = at_barrier_report;
        let timing = self
            .report
            .barrier
            .get_or_insert_with(BarrierTiming::default);
        progress.phase(
            "barrier",
            &format!(
                "ready; waiting for {} peer(s) (join timeout {} s)",
                args.place.count - 1,
                args.flags.join_timeout_s
            ),
        );
        let start = match barrier.await_start(clock) {
            Ok(start) => start,
            Err(source) => {
                if let BarrierError::Late { left_ns, .. } = &source {
                    // It saw the start too late: its lateness is how far past the start it was.
                    timing.lateness_ns = Some(left_ns.saturating_neg());
                }
                return Err(at_barrier(source));
            }
        };
        timing.scheduled_start_unix_ns = Some(start.start_unix_ns);
        let lead_s = (start.start_unix_ns as f64 - clock.now_unix_ns() as f64) / 1e9;
        progress.phase(
            "barrier",
            &format!(
                "all {} workers ready; start at {} (in {lead_s:.2} s), window {} s",
                args.place.count,
                format_unix_ns(start.start_unix_ns),
                args.flags.window_s
            ),
        );
        Ok(start.start_unix_ns)
    }

    /// The timed window, with host facts and telemetry around it.
    ///
    /// A window that began more than `late_margin` after `start_unix_ns` fails as a late start
    /// (after running to its end, so the peers keep their load): it does not overlap its peers'
    /// windows, whatever it measured.
    #[expect(
        clippy::too_many_arguments,
        reason = "the window's inputs, each used once"
    )]
    fn time_window(
        &mut self,
        mut step: Load,
        mut buffer: BatchBuffer,
        start_unix_ns: u64,
        late_margin: Duration,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<(), WorkerError> {
        // Host facts and the telemetry sampler, both before the start.
        let host_start = coload_device::host_snapshot();
        let sampler = self.start_sampler(args, clock, progress);
        // A decode cycle starts with the window, so a record's index says its phase.
        let cycle = step.as_decode_mut().map(|d| {
            d.restart();
            d.cycle()
        });

        // The timed window: nothing else happens in this thread until it returns.
        self.termination.enter_window();
        let outcome = run_window_cancellable(
            &mut step,
            clock,
            start_unix_ns,
            args.flags.window_s.duration(),
            &mut buffer,
            &self.termination.cancel,
        );
        self.termination.leave_window();

        // After the window.
        self.after_window(
            sampler,
            &host_start,
            outcome.actual_start_unix_ns,
            outcome.end_unix_ns,
        );
        self.report.memory = step.peak_memory();
        self.batches = buffer.records(clock);
        if let Some(cycle) = cycle {
            decode::tag_phases(&mut self.batches, cycle);
            let read_bytes = self
                .report
                .config
                .llm
                .as_ref()
                .and_then(|l| l.decode_read_bytes);
            if let Some(line) =
                read_bytes.and_then(|b| decode::describe_decode_steps(&self.batches, b))
            {
                progress.phase("window", &line);
            }
        }
        let timing = self
            .report
            .barrier
            .get_or_insert_with(BarrierTiming::default);
        timing.actual_start_unix_ns = Some(outcome.actual_start_unix_ns);
        timing.lateness_ns = Some(outcome.lateness_ns);
        self.report.window = Some(WindowInfo {
            start_unix_ns: outcome.actual_start_unix_ns,
            end_unix_ns: outcome.end_unix_ns,
            batches: outcome.batches as u64,
            samples: outcome.samples,
        });
        if let Some(error) = outcome.error {
            return Err(WorkerError::Window(error));
        }
        check_lateness(outcome.lateness_ns, late_margin, outcome.batches)?;
        if outcome.batches == 0 {
            return Err(WorkerError::EmptyWindow {
                window_s: args.flags.window_s.get(),
            });
        }
        let rate = outcome.samples as f64 / args.flags.window_s.get();
        progress.phase(
            "window",
            &format!(
                "done: {} batches, {} samples ({rate:.1} samples/s), started {:.3} ms late",
                outcome.batches,
                outcome.samples,
                outcome.lateness_ns as f64 / 1e6
            ),
        );
        Ok(())
    }

    fn build_and_warm(
        &mut self,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<(Load, BatchBuffer), WorkerError> {
        let in_warmup = |source| WorkerError::Workload {
            stage: Stage::Warmup,
            source,
        };
        let build_start = clock.now_unix_ns();
        let f = &args.flags;
        // The share and what the runtime reports, before anything is allocated.
        self.report.share = crate::share::observe(f);
        if let Some(share) = &self.report.share {
            progress.phase("preflight", &crate::share::describe(share));
        }
        // A hog runs no model: a per-workload --model need not name one for it.
        // A hog runs no model, and an LLM worker a built-in LLM (`decode::build`).
        let model = if args.place.workload == Workload::Hog || args.place.workload.is_llm() {
            coload_workload::ModelSource::default()
        } else {
            args.model_source()
                .map_err(|e| in_warmup(WorkloadError::InvalidOption(e.to_string())))?
        };
        let options = WorkloadOptions {
            workload: args.place.workload,
            device: f.device,
            batch_size: f.batch_size,
            image_size: f.image_size,
            precision: f.vision_precision(),
            seed: f.seed,
            model,
            execution: args.execution(),
            memory_format: f.memory_format(),
        };
        let mut step = if args.place.workload == Workload::Hog {
            Load::Hog(crate::hog::allocate(args, clock).map_err(in_warmup)?)
        } else if args.place.workload.is_llm() {
            Load::Decode(Box::new(decode::build(args).map_err(in_warmup)?))
        } else {
            Load::Model(ModelStep::new(&options).map_err(in_warmup)?)
        };
        let info = step.info();
        if let Some(hog) = step.as_hog() {
            self.report.hog = Some(hog.report().clone());
            progress.phase("warmup", &crate::hog::describe(hog));
        } else {
            // What only the built model knows, in the configuration the barrier compares.
            self.report.config.parameter_count = Some(info.parameter_count);
            self.report.config.model_file.clone_from(&info.model_file);
        }
        // At least --warmup-batches, then on until the step time stops falling (bounded): a
        // fixed count does not always reach steady state. A decode worker judges whole cycles.
        let mut rule = SteadyRule::for_warmup(f.warmup_batches, 1);
        if let Some(d) = step.as_decode_mut() {
            let llm = decode::llm_config(d);
            if let Some(bytes) = llm.decode_read_bytes {
                progress.phase("warmup", &decode::describe_reads(bytes));
            }
            // The precision the LLM computes in (bf16 on CUDA unless --precision says not).
            self.report.config.precision = llm.precision;
            self.report.config.llm = Some(llm);
            rule = decode::warmup_rule(f.warmup_batches, d.cycle());
        }
        self.record_device(args, &info, build_start, clock, progress)?;
        if let Some(hog) = step.as_hog() {
            // The hog holds its memory now: say so before the barrier, so that a launcher can
            // start the other workers only after it (the hog always allocates first).
            crate::hog::publish_hold(args, hog)?;
            let interval_s = hog.report().hold_interval_s;
            let buffer =
                BatchBuffer::with_capacity(BatchBuffer::capacity_for(f.window_s.get(), interval_s));
            return Ok((step, buffer));
        }
        let (min, max) = (rule.min_batches(), rule.max_batches());
        let (stats, warmup) = warmup_until_steady(&mut step, rule, |done, d| {
            progress.live(&format!(
                "warmup {done} (at least {min}, at most {max}; {:.1} ms)",
                d.as_secs_f64() * 1e3
            ));
        })
        .map_err(in_warmup)?;
        progress.phase(
            "warmup",
            &format!(
                "done: {} batches in {:.2} s (median {:.2} ms, fastest {:.2} ms); {}",
                stats.batches,
                stats.total.as_secs_f64(),
                stats.median.as_secs_f64() * 1e3,
                stats.fastest.as_secs_f64() * 1e3,
                describe_stop(&warmup)
            ),
        );
        if let Some(runtime) = &mut self.report.runtime {
            runtime.warmup = Some(warmup);
        }
        let fastest_s = if stats.batches == 0 {
            // No warmup: size for a very fast step rather than guess low.
            1e-4
        } else {
            stats.fastest.as_secs_f64()
        };
        let buffer =
            BatchBuffer::with_capacity(BatchBuffer::capacity_for(f.window_s.get(), fastest_s));
        Ok((step, buffer))
    }

    /// Records the warnings of the allocation and share checks, or fails with the first check
    /// that refused (under strict checking).
    fn record_checks(
        &mut self,
        checks: [Result<Vec<coload_cohort_schema::WorkerWarning>, coload_device::DeviceError>; 2],
        progress: &Progress,
    ) -> Result<(), WorkerError> {
        for check in checks {
            let warnings = check.map_err(WorkerError::Allocation)?;
            for w in &warnings {
                progress.phase("preflight", &format!("warning: {}", w.message));
            }
            self.report.warnings.extend(warnings);
        }
        Ok(())
    }

    /// Identifies the device the workload runs on, checks it against the mode, and records it
    /// (with the runtime facts) in the report. Shared by the batch and the serve paths.
    fn record_device(
        &mut self,
        args: &WorkerArgs,
        info: &WorkloadInfo,
        build_start: u64,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<(), WorkerError> {
        let f = &args.flags;
        if f.device == DeviceChoice::Auto && info.device_kind == DeviceKind::Cpu {
            refuse_silent_cpu_fallback()?;
        }
        let mut device = coload_device::identify(info.device_kind, info.cuda_index);
        device.info.libtorch_version = Some(info.libtorch_version.clone());
        if device.info.cudnn_version.is_none() {
            device.info.cudnn_version.clone_from(&info.cudnn_version);
        }
        if device.info.cuda_version.is_none() {
            device.info.cuda_version.clone_from(&info.cuda_version);
        }
        let facts = SharingFacts {
            // The model is resident, so this process holds a context on the device now.
            other_compute_processes: coload_device::other_compute_processes(&device, true),
            mps_client: coload_device::mps_client(),
        };
        let allocation =
            coload_device::check_allocation(f.mode, &device.info, &facts, f.strict_device);
        self.mig = MigTarget::from_report(&device);
        self.report.warnings.extend(device.warnings);
        self.target = device.target;
        self.report.device = Some(device.info);
        self.report.runtime = Some(RuntimeInfo {
            inference_guard: info.inference_guard.clone(),
            cudnn_benchmark: Some(info.cudnn_benchmark),
            mps_client: facts.mps_client,
            torch_threads: Some(info.torch_threads),
            // Filled in once the warmup has run (build_and_warm).
            warmup: None,
        });
        // The MPS share the worker declared against what the runtime reported.
        let share = self.report.share.as_ref().map_or(Ok(Vec::new()), |s| {
            coload_device::check_share(s, info.device_kind, f.strict_device)
        });
        self.record_checks([allocation, share], progress)?;
        let built_s = (clock.now_unix_ns() - build_start) as f64 / 1e9;
        progress.phase(
            "warmup",
            &format!(
                "model ready on {} in {built_s:.2} s; running at least {} warmup batches",
                describe_device(&self.report),
                f.warmup_batches
            ),
        );
        Ok(())
    }

    /// Stops the sampler and records its telemetry, GPM and energy over `[start, end]`, and the
    /// host's facts across the window.
    fn after_window(
        &mut self,
        sampler: Option<TelemetrySampler>,
        host_start: &coload_device::HostSnapshot,
        start_unix_ns: u64,
        end_unix_ns: u64,
    ) {
        if let Some(sampler) = sampler {
            let out = sampler.stop_all();
            let (start, end) = (start_unix_ns, end_unix_ns);
            self.report.gpm = Some(out.activity.gpm_report(start, end));
            self.report.energy = Some(out.activity.energy_report(&out.samples, start, end));
            self.telemetry = out.samples;
            self.report.telemetry = out.summary;
            self.gpm = out.activity.gpm;
        }
        let host_end = coload_device::host_snapshot();
        self.report.host = Some(coload_device::host_info(host_start, &host_end));
    }

    /// Lets the signal handler write what is known so far if the worker is stopped in `stage`.
    fn checkpoint(&self, stage: Stage) {
        self.termination.checkpoint(&self.report, stage, &self.out);
    }

    /// Starts device telemetry (with the energy counter) and GPM on the worker's physical GPU
    /// (and its MIG instance), timestamped on the worker's clock, all on the sampler's thread.
    /// Telemetry is evidence, not a requirement: when it cannot start, the worker says so and
    /// goes on.
    fn start_sampler(
        &mut self,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Option<TelemetrySampler> {
        let f = &args.flags;
        let rate_hz = (f.telemetry_hz > 0.0).then_some(f.telemetry_hz);
        let gpm_interval_s = (f.gpm_interval_s > 0.0).then_some(f.gpm_interval_s);
        if rate_hz.is_none() && gpm_interval_s.is_none() {
            return None;
        }
        let target = self.target?;
        // Room for as long as the worker may run from the start decision (the spec's rule, the
        // one a launcher waits by), at the asked rate.
        let covered_s = f.finish_within().as_secs_f64();
        let capacity = (covered_s * f.telemetry_hz).ceil() as usize;
        let activity = ActivityOptions::for_duration(gpm_interval_s, covered_s, self.mig);
        let clock = *clock;
        let started = RealNvml::open().and_then(|nvml| {
            TelemetrySampler::start_with_activity(
                Box::new(nvml),
                target.gpu_index,
                rate_hz,
                capacity.max(1),
                activity,
                move || clock.now_unix_ns(),
            )
        });
        match started {
            Ok(sampler) => Some(sampler),
            Err(e) => {
                let message = format!("device telemetry not sampled: {e}");
                progress.phase("barrier", &message);
                self.report.gpm = Some(coload_device::gpm_not_sampled(
                    gpm_interval_s,
                    message.clone(),
                ));
                self.report
                    .warnings
                    .push(coload_cohort_schema::WorkerWarning {
                        kind: "telemetry_unavailable".to_owned(),
                        message,
                    });
                None
            }
        }
    }

    /// Writes batches.jsonl, telemetry.jsonl, gpm.jsonl, then worker.json last (atomically).
    fn write(&self, out: &Path) -> Result<(), WorkerError> {
        write_lines(&out.join(files::BATCHES), &self.batches).map_err(WorkerError::Write)?;
        if let Some(r) = &self.serve_records {
            write_lines(
                &out.join(files::REQUESTS),
                coload_timing::request_lines(&r.buffer, &r.plan.schedule, r.start_unix_ns),
            )
            .map_err(WorkerError::Write)?;
        }
        if let Some(r) = &self.llm_records {
            write_lines(&out.join(files::LLM_REQUESTS), r.lines()).map_err(WorkerError::Write)?;
        }
        if !self.telemetry.is_empty() {
            write_lines(&out.join(files::TELEMETRY), &self.telemetry)
                .map_err(WorkerError::Write)?;
        }
        if !self.gpm.is_empty() {
            write_lines(&out.join(files::GPM), &self.gpm).map_err(WorkerError::Write)?;
        }
        write_json_atomic(&out.join(files::WORKER_REPORT), &self.report)
            .map_err(|e| WorkerError::Write(e.to_string()))
    }
}

/// A window that began more than `late_margin` after the common start fails as a late start:
/// it does not overlap its peers' windows, whatever it measured.
fn check_lateness(
    lateness_ns: i64,
    late_margin: Duration,
    batches: usize,
) -> Result<(), WorkerError> {
    if lateness_ns > i64::try_from(late_margin.as_nanos()).unwrap_or(i64::MAX) {
        return Err(WorkerError::LateStart {
            lateness_ns,
            margin: late_margin,
            batches,
        });
    }
    Ok(())
}

/// A failure before the barrier: tells the peers at once (an abort of kind `peer_failed`) rather
/// than let them wait out their join timeout, and returns the failure.
fn tell_peers(barrier: &Barrier, args: &WorkerArgs, e: WorkerError, clock: &Clock) -> WorkerError {
    let reason = format!(
        "replica {} failed in {} ({}): {}",
        args.place.replica,
        e.stage(),
        e.kind(),
        chain(&e)
    );
    let _ = barrier.abort(FailureKind::PeerFailed, &reason, clock);
    e
}

/// `--device auto` picks the CPU when libtorch sees no CUDA device. On a host whose NVML lists
/// GPUs that is a misconfiguration (libtorch_cuda.so not loaded, `CUDA_VISIBLE_DEVICES` naming
/// nothing, an MPS server that cannot serve the device), and a CPU cohort would be measured
/// in its place; fail instead, and let `--device cpu` say it on purpose.
fn refuse_silent_cpu_fallback() -> Result<(), WorkerError> {
    let gpus = RealNvml::open()
        .ok()
        .and_then(|nvml| nvml.gpu_count().ok())
        .unwrap_or(0);
    if gpus == 0 {
        return Ok(());
    }
    Err(WorkerError::SilentCpuFallback {
        gpus,
        visible: std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".to_owned()),
    })
}

/// Why the warmup stopped, for the progress line.
fn describe_stop(w: &WarmupReport) -> String {
    let medians = match (w.previous_median_ns, w.last_median_ns) {
        (Some(p), Some(l)) => format!(
            " (median block time {:.3} ms over the last {} blocks, {:.3} ms over the {} before; \
             a block is {} batches)",
            l as f64 / 1e6,
            w.window_blocks,
            p as f64 / 1e6,
            w.window_blocks,
            w.block_batches
        ),
        _ => String::new(),
    };
    let why = match w.stop {
        WarmupStop::NoneAsked => "no warmup asked for",
        WarmupStop::Steady => "stopped: the step time stopped falling",
        WarmupStop::MaxBatches => "stopped at its most batches, still falling",
        WarmupStop::MaxTime => "stopped at its time bound, still falling",
    };
    format!("{why}{medians}")
}

fn describe_device(report: &WorkerReport) -> String {
    match &report.device {
        Some(d) => match (&d.gpu_name, &d.mig_profile) {
            (Some(name), Some(profile)) => format!("{name} MIG {profile}"),
            (Some(name), None) => name.clone(),
            _ => format!("{:?}", d.kind).to_lowercase(),
        },
        None => "an unknown device".to_owned(),
    }
}

fn write_lines<T: serde::Serialize>(
    path: &Path,
    items: impl IntoIterator<Item = T>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", path.display());
    let file = File::create(path).map_err(|e| err(&e))?;
    let mut w = BufWriter::with_capacity(1 << 16, file);
    for item in items {
        serde_json::to_writer(&mut w, &item).map_err(|e| err(&e))?;
        w.write_all(b"\n").map_err(|e| err(&e))?;
    }
    let file = w.into_inner().map_err(|e| err(&e))?;
    file.sync_all().map_err(|e| err(&e))
}

/// RFC 3339 time from unix nanoseconds, for people reading the log.
fn format_unix_ns(ns: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ns} ns"))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::Arc;

    use clap::Parser;

    use super::*;
    use crate::progress::QuietConsole;

    /// A load that builds (or fails to) and records the start its window was given.
    struct Fake {
        fails: bool,
        started: Rc<Cell<Option<u64>>>,
    }

    impl Measure for Fake {
        type Warm = u32;

        fn build_and_warm(&self, _: &mut Run, _: &Cx<'_>) -> Result<u32, WorkerError> {
            if self.fails {
                return Err(WorkerError::Workload {
                    stage: Stage::Warmup,
                    source: WorkloadError::OutOfMemory("CUDA out of memory".into()),
                });
            }
            Ok(7)
        }

        fn window(
            self,
            warm: u32,
            _: &mut Run,
            start: Start,
            _: &Cx<'_>,
        ) -> Result<(), WorkerError> {
            assert_eq!(warm, 7, "the window gets what the build made");
            self.started.set(Some(start.unix_ns));
            Ok(())
        }
    }

    /// Runs `measure_with` in this process for a cohort of `count` (this worker is replica 0),
    /// with the real barrier in a temporary folder; returns the outcome, the start the window
    /// got, the report and the barrier's folder.
    fn measure(
        fails: bool,
        count: u32,
    ) -> (
        Result<(), WorkerError>,
        Option<u64>,
        WorkerReport,
        tempfile::TempDir,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sync = dir.path().join("sync");
        std::fs::create_dir(&sync).unwrap();
        let out = dir.path().join("out");
        let count = count.to_string();
        let args = WorkerArgs::try_parse_from([
            "bench-worker",
            "--experiment",
            "e1",
            "--replica",
            "0",
            "--count",
            &count,
            "--workload",
            "train",
            "--mode",
            "timeslice",
            "--device",
            "cpu",
            "--sync-dir",
            sync.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--start-lead-s",
            "1",
            "--join-timeout-s",
            "2",
        ])
        .unwrap();
        let progress = Progress::new(args.log_format, true, 0, Arc::new(QuietConsole));
        let clock = Clock::anchor();
        let cx = Cx {
            args: &args,
            clock: &clock,
            progress: &progress,
        };
        let mut run = Run {
            report: initial_report(&args, "test"),
            out,
            termination: Termination::new(&progress),
            target: None,
            batches: Vec::new(),
            telemetry: Vec::new(),
            mig: None,
            gpm: Vec::new(),
            serve_records: None,
            llm_records: None,
        };
        let barrier = run.preflight(&args, &clock, &progress).unwrap();
        let started = Rc::new(Cell::new(None));
        let load = Fake {
            fails,
            started: Rc::clone(&started),
        };
        let outcome = run.measure_with(barrier, load, &cx);
        (outcome, started.get(), run.report, dir)
    }

    /// A built load meets its peers and times its window from the start the barrier published.
    #[test]
    fn a_built_load_gets_the_barriers_start() {
        let (outcome, started, report, _dir) = measure(false, 1);
        outcome.unwrap();
        let timing = report.barrier.unwrap();
        assert!(timing.ready_unix_ns.is_some());
        assert_eq!(started, timing.scheduled_start_unix_ns);
        assert!(started.is_some());
    }

    /// A load that fails to build tells its peers at once (the barrier's abort, naming it) and
    /// never reaches the barrier or its window.
    #[test]
    fn a_failed_build_tells_the_peers_and_never_starts() {
        let (outcome, started, report, dir) = measure(true, 3);
        let e = outcome.unwrap_err();
        assert_eq!(e.kind(), FailureKind::OutOfMemory);
        assert_eq!(started, None);
        assert!(report.barrier.unwrap().ready_unix_ns.is_none());
        let abort = std::fs::read_to_string(dir.path().join("sync/e1/abort.json")).unwrap();
        assert!(abort.contains("peer_failed"), "{abort}");
        assert!(abort.contains("replica 0 failed in warmup"), "{abort}");
    }

    #[test]
    fn formats_unix_time() {
        assert_eq!(format_unix_ns(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_unix_ns(1_796_005_867_250_000_000),
            "2026-11-30T02:31:07.25Z"
        );
    }
}
