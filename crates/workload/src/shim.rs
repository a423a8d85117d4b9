//! Safe wrappers around the C++ shim (`src/shim.cpp`).
//!
//! Every shim entry point catches C++ exceptions and returns a status code with the message in a
//! caller-provided buffer; the buffers here live on the stack, so the success path allocates
//! nothing on the Rust side.
#![expect(
    unsafe_code,
    reason = "FFI to the C++ shim; each call carries its SAFETY note"
)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::NonNull;

use crate::error::WorkloadError;

/// A two-dimensional tensor's shape, read without allocating (tch's `Tensor::size` returns a
/// `Vec`, and the decode step checks its tokens' shape inside the timed window); `None` for a
/// tensor of another rank.
pub(crate) fn shape2(tensor: &tch::Tensor) -> Option<[i64; 2]> {
    if tensor.dim() != 2 {
        return None;
    }
    let mut shape = [0i64; 2];
    // SAFETY: `tensor` is borrowed, so its C tensor lives through the call; it has exactly two
    // dimensions, which `at_shape` writes into the two slots of `shape`. `at_shape` only reads
    // the tensor (the pointer is mutable in the C signature alone).
    unsafe { torch_sys::at_shape(tensor.as_ptr().cast_mut(), shape.as_mut_ptr()) };
    Some(shape)
}

const OK: c_int = 0;
const OUT_OF_MEMORY: c_int = 2;
/// A Rust callback of `coload_graph_capture` failed; its error is on the Rust side.
const CALLBACK_FAILED: c_int = 3;
const ERR_LEN: usize = 1024;

/// Guard flags of `coload_with_guard`.
pub(crate) const GUARD_INFERENCE_MODE: c_int = 1;
pub(crate) const GUARD_AUTOCAST_CUDA_BF16: c_int = 2;
pub(crate) const GUARD_AUTOCAST_CPU_BF16: c_int = 4;

#[repr(C)]
pub(crate) struct CoSgd {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct CoGraph {
    _private: [u8; 0],
}

/// The phase a capture callback is called in (see `coload_graph_capture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CapturePhase {
    /// An eager step on the side stream, before capture.
    Warmup,
    /// Outside capture, right before it (training: `zero_grad(set_to_none)`).
    Prepare,
    /// The step being captured: its kernels are recorded, not run.
    Capture,
}

unsafe extern "C" {
    fn coload_with_guard(
        flags: c_int,
        callback: extern "C" fn(*mut c_void),
        ctx: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn coload_inference_mode_enabled() -> c_int;
    fn coload_synchronize(device_index: i64, err: *mut c_char, err_len: usize) -> c_int;
    fn coload_peak_reserved_bytes(
        device_index: i64,
        out: *mut u64,
        available: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn coload_reset_peak(device_index: i64, err: *mut c_char, err_len: usize) -> c_int;
    fn coload_torch_version(out: *mut c_char, out_len: usize);
    fn coload_cuda_versions(cudart: *mut i64, cudnn: *mut i64);
    fn coload_sgd_new(
        params: *mut *mut c_void,
        n: usize,
        lr: f64,
        momentum: f64,
        err: *mut c_char,
        err_len: usize,
    ) -> *mut CoSgd;
    fn coload_sgd_free(sgd: *mut CoSgd);
    fn coload_cuda_graph_built() -> c_int;
    fn coload_graph_capture(
        device_index: i64,
        warmup_steps: c_int,
        flags: c_int,
        callback: extern "C" fn(*mut c_void, c_int) -> c_int,
        ctx: *mut c_void,
        status: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> *mut CoGraph;
    fn coload_graph_replay(graph: *mut CoGraph, err: *mut c_char, err_len: usize) -> c_int;
    fn coload_graph_free(graph: *mut CoGraph);
    fn coload_sgd_zero_grad(sgd: *mut CoSgd, err: *mut c_char, err_len: usize) -> c_int;
    fn coload_sgd_step(sgd: *mut CoSgd, err: *mut c_char, err_len: usize) -> c_int;
    fn coload_channels_last_(
        tensors: *mut *mut c_void,
        n: usize,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn coload_is_channels_last(tensor: *mut c_void) -> c_int;
    fn coload_flash_decode(
        query: *mut c_void,
        keys: *mut c_void,
        values: *mut c_void,
        cu_q: *mut c_void,
        cu_k: *mut c_void,
        used_k: *mut c_void,
        max_k: i64,
        out: *mut *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn coload_profiler_start(
        cuda: c_int,
        cuda_on: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn coload_profiler_stop(
        trace_path: *const c_char,
        on_event: extern "C" fn(*mut c_void, *const c_char, usize, c_int, u64, u64),
        ctx: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

/// A zeroed message buffer on the stack.
struct ErrBuf([c_char; ERR_LEN]);

impl ErrBuf {
    fn new() -> Self {
        ErrBuf([0; ERR_LEN])
    }

    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr()
    }

    /// The error for status `rc` (only called on failure, where allocating is fine).
    fn into_error(self, rc: c_int) -> WorkloadError {
        // SAFETY: the buffer was zeroed and the shim writes at most ERR_LEN - 1 bytes followed
        // by a NUL, so it always holds a NUL-terminated string.
        let message = unsafe { CStr::from_ptr(self.0.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if rc == OUT_OF_MEMORY {
            WorkloadError::OutOfMemory(message)
        } else {
            WorkloadError::from_libtorch(message)
        }
    }

    fn check(self, rc: c_int) -> Result<(), WorkloadError> {
        if rc == OK {
            Ok(())
        } else {
            Err(self.into_error(rc))
        }
    }
}

/// Runs `f` with the guards in `flags` held on the calling thread (`c10::InferenceMode`, bf16
/// autocast). `f` must not unwind: callers wrap their work in `catch_unwind`.
pub(crate) fn with_guard<F: FnMut()>(flags: c_int, mut f: F) -> Result<(), WorkloadError> {
    extern "C" fn trampoline<F: FnMut()>(ctx: *mut c_void) {
        // SAFETY: `ctx` is the `&mut F` passed below, alive for the whole call.
        let f = unsafe { &mut *ctx.cast::<F>() };
        // A panic must not unwind through C++ frames; `f` catches its own, this is a backstop.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            std::process::abort();
        }
    }
    let mut err = ErrBuf::new();
    // SAFETY: the callback and context stay valid for the duration of the call, which runs the
    // callback synchronously on this thread; the error buffer holds ERR_LEN bytes.
    let rc = unsafe {
        coload_with_guard(
            flags,
            trampoline::<F>,
            (&raw mut f).cast::<c_void>(),
            err.ptr(),
            ERR_LEN,
        )
    };
    err.check(rc)
}

/// Whether `c10::InferenceMode` is enabled on this thread.
pub(crate) fn inference_mode_enabled() -> bool {
    // SAFETY: reads a thread-local flag; no arguments.
    unsafe { coload_inference_mode_enabled() != 0 }
}

/// Waits until the device has finished all queued work.
pub(crate) fn synchronize(device_index: usize) -> Result<(), WorkloadError> {
    let mut err = ErrBuf::new();
    // SAFETY: plain value argument and a buffer of ERR_LEN bytes.
    let rc = unsafe { coload_synchronize(device_index as i64, err.ptr(), ERR_LEN) };
    err.check(rc)
}

/// Peak bytes reserved by the CUDA caching allocator, `None` without CUDA.
pub(crate) fn peak_reserved_bytes(device_index: usize) -> Result<Option<u64>, WorkloadError> {
    let (mut out, mut available) = (0_u64, 0 as c_int);
    let mut err = ErrBuf::new();
    // SAFETY: valid out pointers and a buffer of ERR_LEN bytes.
    let rc = unsafe {
        coload_peak_reserved_bytes(
            device_index as i64,
            &raw mut out,
            &raw mut available,
            err.ptr(),
            ERR_LEN,
        )
    };
    err.check(rc)?;
    Ok((available != 0).then_some(out))
}

/// Resets the caching allocator's peak statistics (no-op without CUDA).
pub(crate) fn reset_peak(device_index: usize) -> Result<(), WorkloadError> {
    let mut err = ErrBuf::new();
    // SAFETY: plain value argument and a buffer of ERR_LEN bytes.
    let rc = unsafe { coload_reset_peak(device_index as i64, err.ptr(), ERR_LEN) };
    err.check(rc)
}

/// libtorch's version (`2.11.0`).
pub(crate) fn torch_version() -> String {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the shim writes at most 63 bytes and a NUL into the 64-byte buffer.
    unsafe { coload_torch_version(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: NUL-terminated by the shim (the buffer was zeroed too).
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// The CUDA runtime and cuDNN versions libtorch was built with, as libtorch encodes them.
pub(crate) fn cuda_versions() -> (Option<i64>, Option<i64>) {
    let (mut cudart, mut cudnn) = (-1_i64, -1_i64);
    // SAFETY: valid out pointers; the shim catches everything.
    unsafe { coload_cuda_versions(&raw mut cudart, &raw mut cudnn) };
    ((cudart > 0).then_some(cudart), (cudnn > 0).then_some(cudnn))
}

/// Lays every four-dimensional tensor of `tensors` out channels-last in place (other ranks stay
/// as they are); every handle sharing a tensor's storage sees the new layout.
pub(crate) fn channels_last_(tensors: &mut [tch::Tensor]) -> Result<(), WorkloadError> {
    let mut ptrs: Vec<*mut c_void> = tensors
        .iter_mut()
        .map(|t| t.as_mut_ptr().cast::<c_void>())
        .collect();
    let mut err = ErrBuf::new();
    // SAFETY: each pointer is a live `torch::Tensor*` owned by `tensors`, which outlives the
    // call; the shim only swaps each tensor's data; the error buffer holds ERR_LEN bytes.
    let rc = unsafe { coload_channels_last_(ptrs.as_mut_ptr(), ptrs.len(), err.ptr(), ERR_LEN) };
    err.check(rc)
}

/// Whether `tensor` is four-dimensional and dense in channels-last (NHWC) order.
pub(crate) fn is_channels_last(tensor: &tch::Tensor) -> bool {
    // SAFETY: `tensor` is borrowed, so its C tensor lives through the call, which only reads
    // its sizes and strides (the pointer is mutable in the C signature alone) and catches
    // everything.
    unsafe { coload_is_channels_last(tensor.as_ptr().cast_mut().cast::<c_void>()) == 1 }
}

/// Decode attention through FlashAttention's variable-length forward (see `shim.cpp`): `query`
/// `[b, heads, d]`, `keys` and `values` `[rows, kv_heads, d]` (any row and head strides, the
/// last contiguous), `cu_q` (int32, `0..=b`), `cu_k` (int32, `b + 1`: sequence `i`'s first key
/// row), `used_k` (int32, `b`: keys each sequence attends over), `max_k` at least every
/// `used_k`. Returns `[b, heads, d]`. Fails on the CPU, in fp32 and on cards before Ampere.
pub(crate) fn flash_decode(
    query: &tch::Tensor,
    keys: &tch::Tensor,
    values: &tch::Tensor,
    cu_q: &tch::Tensor,
    cu_k: &tch::Tensor,
    used_k: &tch::Tensor,
    max_k: i64,
) -> Result<tch::Tensor, WorkloadError> {
    let ptr = |t: &tch::Tensor| t.as_ptr().cast_mut().cast::<c_void>();
    let mut out: *mut c_void = std::ptr::null_mut();
    let mut err = ErrBuf::new();
    // SAFETY: every tensor is borrowed, so its C tensor lives through the call, which only reads
    // them (the pointers are mutable in the C signature alone) and catches everything; on
    // success `out` holds a `torch::Tensor*` the shim allocated with `new`, which tch's `Tensor`
    // takes over (and deletes on drop, as it does every tensor its own C API returns).
    let rc = unsafe {
        coload_flash_decode(
            ptr(query),
            ptr(keys),
            ptr(values),
            ptr(cu_q),
            ptr(cu_k),
            ptr(used_k),
            max_k,
            &raw mut out,
            err.ptr(),
            ERR_LEN,
        )
    };
    err.check(rc)?;
    if out.is_null() {
        return Err(WorkloadError::Libtorch(
            "flash decode attention returned no tensor".into(),
        ));
    }
    // SAFETY: see above: a live `torch::Tensor*` that nothing else owns.
    Ok(unsafe { tch::Tensor::from_ptr(out.cast()) })
}

/// The foreach SGD optimizer held by the shim.
#[derive(Debug)]
pub(crate) struct Sgd(NonNull<CoSgd>);

// SAFETY: the shim's optimizer holds only `at::Tensor` handles (reference-counted atomically),
// doubles and vectors; it has no thread affinity, and `&mut self` serializes every use.
unsafe impl Send for Sgd {}

impl Sgd {
    /// An SGD optimizer over `params` (tch tensors sharing storage with the model's variables).
    pub(crate) fn new(
        params: &mut [tch::Tensor],
        lr: f64,
        momentum: f64,
    ) -> Result<Self, WorkloadError> {
        let mut ptrs: Vec<*mut c_void> = params
            .iter_mut()
            .map(|t| t.as_mut_ptr().cast::<c_void>())
            .collect();
        let mut err = ErrBuf::new();
        // SAFETY: each pointer is a live `torch::Tensor*` owned by `params`, which outlives the
        // call; the shim copies the tensor handles (sharing storage) before returning.
        let raw = unsafe {
            coload_sgd_new(
                ptrs.as_mut_ptr(),
                ptrs.len(),
                lr,
                momentum,
                err.ptr(),
                ERR_LEN,
            )
        };
        NonNull::new(raw).map(Sgd).ok_or_else(|| err.into_error(1))
    }

    /// `zero_grad(set_to_none=True)`.
    pub(crate) fn zero_grad(&mut self) -> Result<(), WorkloadError> {
        let mut err = ErrBuf::new();
        // SAFETY: `self.0` is a live optimizer from `coload_sgd_new`.
        let rc = unsafe { coload_sgd_zero_grad(self.0.as_ptr(), err.ptr(), ERR_LEN) };
        err.check(rc)
    }

    /// One foreach SGD step over the current gradients.
    pub(crate) fn step(&mut self) -> Result<(), WorkloadError> {
        let mut err = ErrBuf::new();
        // SAFETY: `self.0` is a live optimizer from `coload_sgd_new`.
        let rc = unsafe { coload_sgd_step(self.0.as_ptr(), err.ptr(), ERR_LEN) };
        err.check(rc)
    }
}

impl Drop for Sgd {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `coload_sgd_new` and is freed exactly once, here.
        unsafe { coload_sgd_free(self.0.as_ptr()) }
    }
}

/// Whether the shim was built against a libtorch with CUDA (and so with CUDA graphs).
pub(crate) fn cuda_graph_built() -> bool {
    // SAFETY: returns a compile-time constant; no arguments.
    unsafe { coload_cuda_graph_built() != 0 }
}

/// A step captured in a CUDA graph, owned by the shim.
#[derive(Debug)]
pub(crate) struct CudaGraph(NonNull<CoGraph>);

// SAFETY: the shim's graph holds an `at::cuda::CUDAGraph` (CUDA handles and a private memory
// pool id), which libtorch lets any thread replay; `&mut self` serializes every use.
unsafe impl Send for CudaGraph {}

impl CudaGraph {
    /// Warms up `warmup_steps` times on a side stream, prepares, then captures one step: `f` is
    /// called with each [`CapturePhase`] under the guards in `flags`. `f` must not unwind (the
    /// step catches its own panics). An error returned by `f` is returned as is, whichever phase
    /// it came from.
    pub(crate) fn capture<F>(
        device_index: usize,
        warmup_steps: u32,
        flags: c_int,
        f: F,
    ) -> Result<Self, WorkloadError>
    where
        F: FnMut(CapturePhase) -> Result<(), WorkloadError>,
    {
        struct Ctx<F> {
            f: F,
            error: Option<WorkloadError>,
        }
        extern "C" fn trampoline<F>(ctx: *mut c_void, phase: c_int) -> c_int
        where
            F: FnMut(CapturePhase) -> Result<(), WorkloadError>,
        {
            // SAFETY: `ctx` is the `&mut Ctx<F>` passed below, alive for the whole call.
            let ctx = unsafe { &mut *ctx.cast::<Ctx<F>>() };
            let phase = match phase {
                0 => CapturePhase::Warmup,
                1 => CapturePhase::Prepare,
                _ => CapturePhase::Capture,
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (ctx.f)(phase)))
                .unwrap_or_else(|_| {
                    // A panic must not unwind through C++ frames; `f` catches its own, this is a
                    // backstop.
                    std::process::abort()
                });
            match result {
                Ok(()) => 0,
                Err(e) => {
                    ctx.error = Some(e);
                    1
                }
            }
        }
        let mut ctx = Ctx { f, error: None };
        let mut status: c_int = OK;
        let mut err = ErrBuf::new();
        // SAFETY: the callback and its context stay valid for the duration of the call, which
        // runs the callback synchronously on this thread; the out pointer and the error buffer
        // (ERR_LEN bytes) are valid.
        let raw = unsafe {
            coload_graph_capture(
                device_index as i64,
                c_int::try_from(warmup_steps).unwrap_or(c_int::MAX),
                flags,
                trampoline::<F>,
                (&raw mut ctx).cast::<c_void>(),
                &raw mut status,
                err.ptr(),
                ERR_LEN,
            )
        };
        if let Some(graph) = NonNull::new(raw) {
            return Ok(CudaGraph(graph));
        }
        if status == CALLBACK_FAILED
            && let Some(e) = ctx.error
        {
            return Err(e);
        }
        Err(match err.into_error(status) {
            e @ WorkloadError::OutOfMemory(_) => e,
            other => WorkloadError::CudaGraph(format!(
                "the step cannot be captured: {}",
                other.to_string().trim_start_matches("libtorch error: ")
            )),
        })
    }

    /// Replays the captured step on the current stream (asynchronously: synchronize after).
    pub(crate) fn replay(&mut self) -> Result<(), WorkloadError> {
        let mut err = ErrBuf::new();
        // SAFETY: `self.0` is a live graph from `coload_graph_capture`.
        let rc = unsafe { coload_graph_replay(self.0.as_ptr(), err.ptr(), ERR_LEN) };
        err.check(rc)
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `coload_graph_capture` and is freed exactly once, here.
        unsafe { coload_graph_free(self.0.as_ptr()) }
    }
}

/// Starts libtorch's Kineto profiler on this thread (CPU operators, and device activities when
/// `cuda` is set and libtorch sees a CUDA device); returns whether device activities are
/// recorded. Refused while a profiler runs.
pub(crate) fn profiler_start(cuda: bool) -> Result<bool, WorkloadError> {
    let mut cuda_on: c_int = 0;
    let mut err = ErrBuf::new();
    // SAFETY: a valid out pointer and a buffer of ERR_LEN bytes.
    let rc =
        unsafe { coload_profiler_start(c_int::from(cuda), &raw mut cuda_on, err.ptr(), ERR_LEN) };
    err.check(rc)?;
    Ok(cuda_on != 0)
}

/// One event the profiler recorded: its name, whether it ran on the device, its start and its
/// duration (ns).
pub(crate) struct RawEvent<'a> {
    pub(crate) name: &'a str,
    pub(crate) on_device: bool,
    pub(crate) start_ns: u64,
    pub(crate) duration_ns: u64,
}

/// Stops the profiler, saves its chrome trace to `trace` (when given) and calls `f` for every
/// event it recorded.
pub(crate) fn profiler_stop<F>(trace: Option<&std::path::Path>, f: F) -> Result<(), WorkloadError>
where
    F: FnMut(RawEvent<'_>),
{
    extern "C" fn trampoline<F: FnMut(RawEvent<'_>)>(
        ctx: *mut c_void,
        name: *const c_char,
        name_len: usize,
        on_device: c_int,
        start_ns: u64,
        duration_ns: u64,
    ) {
        // SAFETY: `ctx` is the `&mut F` passed below, alive for the whole call.
        let f = unsafe { &mut *ctx.cast::<F>() };
        // SAFETY: the shim passes a pointer to `name_len` bytes of a string alive for the call.
        let bytes = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), name_len) };
        let name = String::from_utf8_lossy(bytes);
        let event = RawEvent {
            name: &name,
            on_device: on_device != 0,
            start_ns,
            duration_ns,
        };
        // A panic must not unwind through C++ frames.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(event))).is_err() {
            std::process::abort();
        }
    }
    // A path libtorch cannot take still stops the profiler (without a trace), then is refused.
    let path = trace
        .map(|path| {
            std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
                WorkloadError::InvalidOption(format!(
                    "trace path {} holds a NUL byte",
                    path.display()
                ))
            })
        })
        .transpose();
    let path_ptr = match &path {
        Ok(Some(p)) => p.as_ptr(),
        _ => std::ptr::null(),
    };
    let mut f = f;
    let mut err = ErrBuf::new();
    // SAFETY: the path is NUL-terminated or null; the callback and its context stay valid for
    // the call, which runs the callback synchronously on this thread; the error buffer holds
    // ERR_LEN bytes.
    let rc = unsafe {
        coload_profiler_stop(
            path_ptr,
            trampoline::<F>,
            (&raw mut f).cast::<c_void>(),
            err.ptr(),
            ERR_LEN,
        )
    };
    err.check(rc)?;
    path.map(|_| ())
}
