//! The CUDA runtime, asked directly: free and total memory (`cudaMemGetInfo`) and the SM count
//! (`cudaDeviceGetAttribute`), as this process sees them.
//!
//! Under MPS these are the client's view: the pinned memory limit caps the free memory and the
//! active thread percentage lowers the SM count, which is how a worker proves the share it ran
//! under. tch and torch-sys expose neither call, and the wheel's headers lack the CUDA toolkit's
//! (`c10/cuda` needs them), so the shim cannot reach them either. `libtorch_cuda.so` links
//! `libcudart` dynamically, so the functions are already loaded when CUDA is: they are looked up
//! by name in the process (`dlsym(RTLD_DEFAULT, ...)`), and nothing links libcudart. Without
//! libtorch's CUDA library the lookup fails and the probe says so.
#![expect(
    unsafe_code,
    reason = "dlsym and calls through the CUDA runtime's C ABI; each carries its SAFETY note"
)]

use std::ffi::{CStr, c_char, c_int, c_void};

use coload_cohort_schema::DeviceChoice;

use crate::error::WorkloadError;

/// `cudaDevAttrMultiProcessorCount` (`driver_types.h`).
const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;

type GetDevice = unsafe extern "C" fn(*mut c_int) -> c_int;
type SetDevice = unsafe extern "C" fn(c_int) -> c_int;
type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> c_int;
type DeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// What the CUDA runtime reports for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaFacts {
    /// `cudaMemGetInfo` free, bytes.
    pub memory_free_bytes: u64,
    /// `cudaMemGetInfo` total, bytes.
    pub memory_total_bytes: u64,
    /// `cudaDevAttrMultiProcessorCount`, when the runtime answered.
    pub sm_count: Option<u32>,
}

/// Why the runtime could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The CUDA runtime is not loaded in this process (libtorch without CUDA).
    #[error("the CUDA runtime is not loaded in this process (`{0}` not found)")]
    NotLoaded(&'static str),
    /// A runtime call returned an error.
    #[error("{call} failed: {message} (cudaError {code})")]
    Cuda {
        /// The call.
        call: &'static str,
        /// The `cudaError_t`.
        code: i32,
        /// `cudaGetErrorString`'s text.
        message: String,
    },
}

/// The runtime's entry points, found in the process.
struct Runtime {
    get_device: GetDevice,
    set_device: SetDevice,
    mem_get_info: MemGetInfo,
    device_get_attribute: DeviceGetAttribute,
    get_error_string: GetErrorString,
}

fn symbol(name: &'static CStr) -> Result<*mut c_void, RuntimeError> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        Err(RuntimeError::NotLoaded(name.to_str().unwrap_or("?")))
    } else {
        Ok(p)
    }
}

impl Runtime {
    fn find() -> Result<Self, RuntimeError> {
        // SAFETY: each pointer is the named CUDA runtime function, whose C signature (from
        // cuda_runtime_api.h) is the function type it is turned into.
        unsafe {
            Ok(Runtime {
                get_device: std::mem::transmute::<*mut c_void, GetDevice>(symbol(
                    c"cudaGetDevice",
                )?),
                set_device: std::mem::transmute::<*mut c_void, SetDevice>(symbol(
                    c"cudaSetDevice",
                )?),
                mem_get_info: std::mem::transmute::<*mut c_void, MemGetInfo>(symbol(
                    c"cudaMemGetInfo",
                )?),
                device_get_attribute: std::mem::transmute::<*mut c_void, DeviceGetAttribute>(
                    symbol(c"cudaDeviceGetAttribute")?,
                ),
                get_error_string: std::mem::transmute::<*mut c_void, GetErrorString>(symbol(
                    c"cudaGetErrorString",
                )?),
            })
        }
    }

    fn check(&self, call: &'static str, code: c_int) -> Result<(), RuntimeError> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe { (self.get_error_string)(code) };
        let message = if text.is_null() {
            "unknown error".to_owned()
        } else {
            // SAFETY: non-null and NUL-terminated, as above.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Err(RuntimeError::Cuda {
            call,
            code,
            message,
        })
    }

    /// Runs `f` with `index` as the calling thread's current device, then restores the previous
    /// one (libtorch sets the device it needs per operation, but a caller may not expect ours).
    fn on_device<T>(
        &self,
        index: usize,
        f: impl FnOnce() -> Result<T, RuntimeError>,
    ) -> Result<T, RuntimeError> {
        let mut previous: c_int = 0;
        // SAFETY: a valid out pointer.
        self.check("cudaGetDevice", unsafe {
            (self.get_device)(&raw mut previous)
        })?;
        let index = c_int::try_from(index).unwrap_or(c_int::MAX);
        // SAFETY: plain value argument; an invalid ordinal is reported as an error code.
        self.check("cudaSetDevice", unsafe { (self.set_device)(index) })?;
        let result = f();
        if previous != index {
            // SAFETY: as above; `previous` was the current device a moment ago.
            let _ = unsafe { (self.set_device)(previous) };
        }
        result
    }

    fn memory(&self) -> Result<(u64, u64), RuntimeError> {
        let (mut free, mut total) = (0_usize, 0_usize);
        // SAFETY: valid out pointers.
        self.check("cudaMemGetInfo", unsafe {
            (self.mem_get_info)(&raw mut free, &raw mut total)
        })?;
        Ok((free as u64, total as u64))
    }

    fn sm_count(&self, index: usize) -> Option<u32> {
        let mut value: c_int = 0;
        let device = c_int::try_from(index).ok()?;
        // SAFETY: a valid out pointer and plain values.
        let code = unsafe {
            (self.device_get_attribute)(&raw mut value, ATTR_MULTIPROCESSOR_COUNT, device)
        };
        (code == 0).then(|| u32::try_from(value).ok()).flatten()
    }
}

/// Whether the CUDA runtime's entry points are loaded in this process.
#[must_use]
pub fn runtime_loaded() -> bool {
    Runtime::find().is_ok()
}

/// Free and total memory and the SM count of CUDA device `index` (the ordinal after
/// `CUDA_VISIBLE_DEVICES`), as this process sees them. Creates the device's primary context if
/// none exists yet (the one libtorch then uses), so under MPS this connects to the server.
pub fn probe_device(index: usize) -> Result<CudaFacts, RuntimeError> {
    let rt = Runtime::find()?;
    rt.on_device(index, || {
        let (free, total) = rt.memory()?;
        Ok(CudaFacts {
            memory_free_bytes: free,
            memory_total_bytes: total,
            sm_count: rt.sm_count(index),
        })
    })
}

/// The CUDA ordinal a workload on `choice` runs on, or `None` for the CPU: `auto` is `cuda:0`
/// when libtorch can use CUDA. Refuses `cuda:N` when CUDA is unavailable or N is not visible,
/// as the workloads do.
pub fn cuda_ordinal(choice: DeviceChoice) -> Result<Option<usize>, WorkloadError> {
    if choice == DeviceChoice::Cpu {
        return Ok(None);
    }
    let available = std::panic::catch_unwind(tch::Cuda::is_available).unwrap_or(false);
    match choice {
        DeviceChoice::Cpu => Ok(None),
        DeviceChoice::Auto => Ok(available.then_some(0)),
        DeviceChoice::Cuda(n) => {
            if !available {
                return Err(WorkloadError::CudaUnavailable(format!(
                    "cuda:{n} was asked for but libtorch sees no CUDA device"
                )));
            }
            let count = std::panic::catch_unwind(tch::Cuda::device_count).unwrap_or(0);
            if n as i64 >= count {
                return Err(WorkloadError::InvalidOption(format!(
                    "cuda:{n} was asked for but only {count} CUDA device(s) are visible"
                )));
            }
            Ok(Some(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup finds libcudart's functions wherever libtorch's CUDA library is loaded (this
    /// test binary keeps it, see build.rs), and a call without a GPU is an error, not a crash.
    #[test]
    fn the_runtime_is_found_in_the_process_and_fails_cleanly_without_a_gpu() {
        let expected = env!("COLOAD_LIBTORCH_CUDA_EXPECTED") == "1";
        assert_eq!(runtime_loaded(), expected);
        if !expected {
            assert!(matches!(
                probe_device(0),
                Err(RuntimeError::NotLoaded("cudaGetDevice"))
            ));
            return;
        }
        match probe_device(0) {
            Ok(facts) => {
                // A GPU host: the figures are the device's.
                assert!(tch::Cuda::is_available());
                assert!(facts.memory_total_bytes > 0);
                assert!(facts.memory_free_bytes <= facts.memory_total_bytes);
                assert!(facts.sm_count.is_some_and(|n| n > 0));
            }
            Err(e) => {
                assert!(!tch::Cuda::is_available(), "a GPU is visible, yet {e}");
                let RuntimeError::Cuda { code, message, .. } = &e else {
                    panic!("expected a CUDA error code, got {e}");
                };
                assert_ne!(*code, 0);
                assert!(!message.is_empty());
                assert!(e.to_string().contains("failed"), "{e}");
            }
        }
    }

    #[test]
    fn the_cpu_has_no_ordinal_and_missing_devices_are_refused() {
        assert_eq!(cuda_ordinal(DeviceChoice::Cpu).unwrap(), None);
        let auto = cuda_ordinal(DeviceChoice::Auto).unwrap();
        assert_eq!(auto.is_some(), tch::Cuda::is_available());
        let err = cuda_ordinal(DeviceChoice::Cuda(99)).unwrap_err();
        assert!(err.to_string().contains("cuda:99"), "{err}");
    }
}
