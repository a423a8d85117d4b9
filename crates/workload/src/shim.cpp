// The parts of libtorch that tch does not expose, behind a C ABI.
//
// - InferenceMode (and bf16 autocast) around a Rust callback: the guards are RAII objects that
//   live on this function's stack while the callback runs, so entering them allocates nothing.
// - SGD with momentum through the multi-tensor `_foreach_*` kernels, the same three calls
//   PyTorch's `torch.optim.SGD` makes on CUDA by default (foreach implementation), and
//   `zero_grad(set_to_none=True)`.
// - Device synchronize, the caching allocator's peak, and the library versions.
// - The channels-last memory format (tch has no memory-format argument).
// - FlashAttention's variable-length forward (`at::_flash_attention_forward`, which tch does not
//   expose: it returns five tensors), for decode attention over each sequence's own keys.
// - libtorch's Kineto profiler (what `torch.profiler.profile` drives from Python): start it, stop
//   it, save its chrome trace and hand each event to a Rust callback.
// - Whole-step CUDA graphs (when built against a libtorch with CUDA): warm up on a side stream,
//   capture one step through `at::cuda::CUDAGraph`, replay it. See "CUDA graphs" below for why
//   the class is declared here rather than included.
//
// No C++ exception crosses into Rust: every entry point catches and returns a status code with
// the message copied into the caller's buffer. Tensors arrive as tch's `C_tensor` pointers,
// which are `torch::Tensor*` (see torch-sys's torch_api.h).

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// ---- CUDA graphs -------------------------------------------------------------------------------
//
// `ATen/cuda/CUDAGraph.h` pulls in `c10/cuda/CUDACachingAllocator.h` and through it the CUDA
// runtime's `cuda_runtime.h`, which needs `crt/host_config.h` from the CUDA toolkit: the PyPI
// torch wheel ships `cuda_runtime_api.h` (nvidia-cuda-runtime) but not `crt/` (nvidia-cuda-crt),
// so the header cannot be compiled against the provisioned wheel. The class itself is exported
// from libtorch_cuda.so with these exact signatures (checked with `nm -DC libtorch_cuda.so` for
// libtorch 2.11.0: `at::cuda::CUDAGraph::CUDAGraph(bool)`, `capture_begin(std::pair<unsigned long
// long, unsigned long long>, cudaStreamCaptureMode)`, `capture_end()`, `replay()`, `~CUDAGraph()`),
// so the shim declares the members it calls and links them by name; a signature that changed in
// another libtorch fails the link loudly rather than misbehaving. The object is opaque here: the
// declaration reserves more bytes than the real class has (104 bytes in libtorch 2.11.0, read
// from the stores of its constructor), and only libtorch's own constructor, methods and
// destructor touch them. Streams go through the device-generic c10 stream API, which needs no
// CUDA header. Everything is compiled only when build.rs found libtorch_cuda.so
// (COLOAD_CUDA_GRAPH=1).
#if defined(COLOAD_CUDA_GRAPH) && COLOAD_CUDA_GRAPH

// As in the CUDA runtime's driver_types.h; only the name enters the mangled symbol.
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};

namespace at {
namespace cuda {
struct CUDAGraph {
  explicit CUDAGraph(bool keep_graph);
  ~CUDAGraph();
  void capture_begin(std::pair<unsigned long long, unsigned long long> pool,
                     cudaStreamCaptureMode capture_mode);
  void capture_end();
  void replay();
  CUDAGraph(const CUDAGraph &) = delete;
  CUDAGraph &operator=(const CUDAGraph &) = delete;

 private:
  // Ten times the real size (104 bytes in libtorch 2.11.0), aligned for any member.
  alignas(16) unsigned char storage_[1024];
};
}  // namespace cuda
}  // namespace at

#endif

namespace {

// Status codes shared with src/shim.rs.
constexpr int kOk = 0;
constexpr int kError = 1;
constexpr int kOutOfMemory = 2;

void copy_message(const char *message, char *err, size_t err_len) {
  if (err == nullptr || err_len == 0) {
    return;
  }
  std::strncpy(err, message, err_len - 1);
  err[err_len - 1] = '\0';
}

// Runs `body`, turning any exception into a status code and a message.
template <typename F>
int guarded(char *err, size_t err_len, F &&body) {
  try {
    body();
    return kOk;
  } catch (const c10::OutOfMemoryError &e) {
    copy_message(e.what_without_backtrace(), err, err_len);
    return kOutOfMemory;
  } catch (const c10::Error &e) {
    copy_message(e.what_without_backtrace(), err, err_len);
    return kError;
  } catch (const std::bad_alloc &e) {
    copy_message("host out of memory (std::bad_alloc)", err, err_len);
    return kOutOfMemory;
  } catch (const std::exception &e) {
    copy_message(e.what(), err, err_len);
    return kError;
  } catch (...) {
    copy_message("unknown C++ exception", err, err_len);
    return kError;
  }
}

// Restores the autocast state of one device type on scope exit, the way Python's
// `torch.autocast.__exit__` does (including clearing the cast cache at the outermost level).
class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, bool enabled) : device_(device), enabled_(enabled) {
    if (!enabled_) {
      return;
    }
    prev_enabled_ = at::autocast::is_autocast_enabled(device_);
    prev_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_dtype(device_, at::kBFloat16);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) {
      return;
    }
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(device_, prev_enabled_);
    at::autocast::set_autocast_dtype(device_, prev_dtype_);
  }
  AutocastScope(const AutocastScope &) = delete;
  AutocastScope &operator=(const AutocastScope &) = delete;

 private:
  at::DeviceType device_;
  bool enabled_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

// Status of a Rust callback that failed (its error stays on the Rust side).
constexpr int kCallbackFailed = 3;

struct CallbackFailed : std::runtime_error {
  CallbackFailed() : std::runtime_error("the step failed (see the workload's own error)") {}
};

// Runs `callback(ctx, phase)` under the guards in `flags` (see coload_with_guard), throwing
// CallbackFailed when it reports a failure.
void run_with_flags(int flags, int (*callback)(void *, int), void *ctx, int phase) {
  c10::InferenceMode inference((flags & 1) != 0);
  AutocastScope cuda(at::kCUDA, (flags & 2) != 0);
  AutocastScope cpu(at::kCPU, (flags & 4) != 0);
  if (callback(ctx, phase) != 0) {
    throw CallbackFailed();
  }
}

}  // namespace

#if defined(COLOAD_CUDA_GRAPH) && COLOAD_CUDA_GRAPH
struct CoGraph {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};
#else
struct CoGraph {};
#endif

struct CoSgd {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;
  std::vector<at::Tensor> bufs;
  double lr;
  double momentum;
  bool first_step;
};

extern "C" {

// Guard flags for coload_with_guard.
// 1: c10::InferenceMode; 2: bf16 autocast on CUDA; 4: bf16 autocast on CPU.
int coload_with_guard(int flags, void (*callback)(void *), void *ctx, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    c10::InferenceMode inference((flags & 1) != 0);
    AutocastScope cuda(at::kCUDA, (flags & 2) != 0);
    AutocastScope cpu(at::kCPU, (flags & 4) != 0);
    callback(ctx);
  });
}

// Whether this shim was built with CUDA graph support (against a libtorch with libtorch_cuda).
int coload_cuda_graph_built() {
#if defined(COLOAD_CUDA_GRAPH) && COLOAD_CUDA_GRAPH
  return 1;
#else
  return 0;
#endif
}

// Captures one step in a CUDA graph on CUDA device `device_index`, the way PyTorch's
// documentation captures a whole network (torch.cuda.graphs):
//   1. on a side stream from the pool (the legacy default stream cannot be captured), run
//      `callback(ctx, 0)` `warmup_steps` times: lazy initialization (cuBLAS workspaces, cuDNN
//      autotuning, the optimizer's momentum buffers) must happen before capture, not in it;
//   2. `callback(ctx, 1)` once outside capture, to prepare (training: zero_grad(set_to_none),
//      so that backward allocates the gradients from the graph's private pool);
//   3. capture `callback(ctx, 2)`: the step's kernels are recorded, not run.
// Every callback runs under the guards in `flags` (as coload_with_guard). Returns the graph, or
// null with the status in `*status` (kCallbackFailed when a callback failed) and the message in
// `err`.
CoGraph *coload_graph_capture(int64_t device_index, int warmup_steps, int flags,
                              int (*callback)(void *, int), void *ctx, int *status, char *err,
                              size_t err_len) {
  CoGraph *out = nullptr;
  int callback_failed = 0;
  *status = guarded(err, err_len, [&] {
#if defined(COLOAD_CUDA_GRAPH) && COLOAD_CUDA_GRAPH
    const auto index = static_cast<c10::DeviceIndex>(device_index);
    const c10::Device device(c10::DeviceType::CUDA, index);
    const auto *impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    at::accelerator::synchronizeDevice(index);
    auto built = std::make_unique<CoGraph>();
    {
      c10::StreamGuard side(impl->getStreamFromGlobalPool(device, false));
      try {
        for (int i = 0; i < warmup_steps; ++i) {
          run_with_flags(flags, callback, ctx, 0);
        }
        run_with_flags(flags, callback, ctx, 1);
      } catch (const CallbackFailed &) {
        callback_failed = 1;
        throw;
      }
      at::accelerator::synchronizeDevice(index);
      // The graph's constructor reads the current stream, so it is made on the side stream.
      built->graph = std::make_unique<at::cuda::CUDAGraph>(false);
      // Autocast's cast cache stays off while recording, as torch.cuda.graphs recommends, so
      // no cached cast made outside the capture is baked into the graph.
      const bool cache_was_enabled = at::autocast::is_autocast_cache_enabled();
      at::autocast::set_autocast_cache_enabled(false);
      built->graph->capture_begin({0, 0}, cudaStreamCaptureModeGlobal);
      // On failure, end the capture so the allocator leaves capture mode; its own error (the
      // capture was invalidated) says less than the first one. libtorch's capture_end throws on
      // the invalidated capture before its generator epilogue, so the process's CUDA RNG stays
      // in capture mode afterwards (seen on the H200: later random initialisation fails with
      // "Offset increment outside graph capture"). The worker ends at this refusal anyway.
      const auto abandon = [&] {
        at::autocast::set_autocast_cache_enabled(cache_was_enabled);
        try {
          built->graph->capture_end();
        } catch (...) {
        }
      };
      try {
        run_with_flags(flags, callback, ctx, 2);
      } catch (const CallbackFailed &) {
        abandon();
        callback_failed = 1;
        throw;
      } catch (...) {
        abandon();
        throw;
      }
      at::autocast::set_autocast_cache_enabled(cache_was_enabled);
      built->graph->capture_end();
    }
    at::accelerator::synchronizeDevice(index);
    out = built.release();
#else
    (void)device_index;
    (void)warmup_steps;
    (void)flags;
    (void)callback;
    (void)ctx;
    TORCH_CHECK(false,
                "this build has no CUDA graph support: the shim was compiled against a libtorch "
                "without libtorch_cuda.so");
#endif
  });
  if (*status != kOk && callback_failed) {
    *status = kCallbackFailed;
  }
  return *status == kOk ? out : nullptr;
}

// One replay of the captured step on the current stream (the caller synchronizes).
int coload_graph_replay(CoGraph *graph, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
#if defined(COLOAD_CUDA_GRAPH) && COLOAD_CUDA_GRAPH
    graph->graph->replay();
#else
    (void)graph;
    TORCH_CHECK(false, "this build has no CUDA graph support");
#endif
  });
}

void coload_graph_free(CoGraph *graph) {
  try {
    delete graph;
  } catch (...) {
  }
}

// Whether c10::InferenceMode is enabled on this thread right now (for tests).
int coload_inference_mode_enabled() { return c10::InferenceMode::is_enabled() ? 1 : 0; }

int coload_synchronize(int64_t device_index, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    at::accelerator::synchronizeDevice(static_cast<c10::DeviceIndex>(device_index));
  });
}

// Peak bytes reserved by the CUDA caching allocator on `device_index` since the process started
// (or the last reset). `*available` is 0 when no CUDA is present.
int coload_peak_reserved_bytes(int64_t device_index, uint64_t *out, int *available, char *err,
                               size_t err_len) {
  *out = 0;
  *available = 0;
  return guarded(err, err_len, [&] {
    if (!at::hasCUDA()) {
      return;
    }
    const auto stats =
        at::accelerator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    *out = static_cast<uint64_t>(stats.reserved_bytes[aggregate].peak);
    *available = 1;
  });
}

int coload_reset_peak(int64_t device_index, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (at::hasCUDA()) {
      at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(device_index));
    }
  });
}

// libtorch's version string (TORCH_VERSION), NUL-terminated.
void coload_torch_version(char *out, size_t out_len) { copy_message(TORCH_VERSION, out, out_len); }

// CUDA runtime and cuDNN versions libtorch was built with; -1 when unknown (no CUDA library).
void coload_cuda_versions(int64_t *cudart, int64_t *cudnn) {
  *cudart = -1;
  *cudnn = -1;
  try {
    const auto &hooks = at::detail::getCUDAHooks();
    if (!hooks.hasCUDA()) {
      return;
    }
    *cudart = static_cast<int64_t>(hooks.versionCUDART());
    if (hooks.hasCuDNN()) {
      *cudnn = static_cast<int64_t>(hooks.versionCuDNN());
    }
  } catch (...) {
  }
}

CoSgd *coload_sgd_new(void **params, size_t n, double lr, double momentum, char *err,
                      size_t err_len) {
  CoSgd *sgd = nullptr;
  int rc = guarded(err, err_len, [&] {
    auto built = new CoSgd{};
    built->params.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      built->params.push_back(*static_cast<at::Tensor *>(params[i]));
    }
    built->grads.resize(n);
    built->lr = lr;
    built->momentum = momentum;
    built->first_step = true;
    sgd = built;
  });
  return rc == kOk ? sgd : nullptr;
}

void coload_sgd_free(CoSgd *sgd) { delete sgd; }

// optimizer.zero_grad(set_to_none=True)
int coload_sgd_zero_grad(CoSgd *sgd, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    for (auto &p : sgd->params) {
      p.mutable_grad().reset();
    }
  });
}

// One step of torch.optim.SGD(lr, momentum, dampening=0, nesterov=False, weight_decay=0) in its
// foreach form (torch/optim/sgd.py, _multi_tensor_sgd).
int coload_sgd_step(CoSgd *sgd, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    at::NoGradGuard no_grad;
    const size_t n = sgd->params.size();
    for (size_t i = 0; i < n; ++i) {
      sgd->grads[i] = sgd->params[i].grad();
      TORCH_CHECK(sgd->grads[i].defined(), "parameter ", i, " has no gradient after backward");
    }
    if (sgd->momentum != 0.0) {
      if (sgd->first_step) {
        sgd->bufs.clear();
        sgd->bufs.reserve(n);
        for (size_t i = 0; i < n; ++i) {
          sgd->bufs.push_back(sgd->grads[i].detach().clone());
        }
      } else {
        at::_foreach_mul_(sgd->bufs, sgd->momentum);
        at::_foreach_add_(sgd->bufs, sgd->grads, 1.0);
      }
      at::_foreach_add_(sgd->params, sgd->bufs, -sgd->lr);
    } else {
      at::_foreach_add_(sgd->params, sgd->grads, -sgd->lr);
    }
    sgd->first_step = false;
    // Drop this step's references so that zero_grad really frees the gradients.
    for (auto &g : sgd->grads) {
      g.reset();
    }
  });
}

// Lays every four-dimensional tensor of `tensors` out channels-last (NHWC strides) in place,
// as `module.to(memory_format=torch.channels_last)` does to a module's parameters and buffers:
// `set_data` swaps the storage under the same tensor, so every handle sharing it (the model's
// layers, the optimizer) sees the new layout. Other ranks are left as they are.
int coload_channels_last_(void **tensors, size_t n, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < n; ++i) {
      auto &t = *static_cast<at::Tensor *>(tensors[i]);
      if (t.dim() == 4) {
        t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
      }
    }
  });
}

// 1 when `tensor` is four-dimensional and dense in channels-last order, 0 when not, -1 on error.
int coload_is_channels_last(void *tensor) {
  try {
    const auto &t = *static_cast<at::Tensor *>(tensor);
    return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// ---- Decode attention --------------------------------------------------------------------------
//
// One query position per sequence attending over that sequence's first `used_k[i]` keys, through
// FlashAttention's variable-length forward (the kernel `flash_attn_varlen_func` calls in the
// flash-attn package): queries `[b, heads, d]`, keys and values `[rows, kv_heads, d]` with any
// row and head strides (sequence i's keys start at row `cu_k[i]`), `cu_q` = 0..b. With fewer KV
// heads than query heads the kernel folds each KV head's query group into its query length and
// splits the keys across thread blocks (split-KV), so a decode step fills the card. Reads only
// each sequence's keys up to its length, where a masked attention reads the whole cache. Writes
// a new `[b, heads, d]` tensor to `*out`. CPU has no such kernel: the call fails there (so does a
// card older than Ampere, or fp32), and the caller keeps scaled_dot_product_attention.
int coload_flash_decode(void *query, void *keys, void *values, void *cu_q, void *cu_k,
                        void *used_k, int64_t max_k, void **out, char *err, size_t err_len) {
  *out = nullptr;
  return guarded(err, err_len, [&] {
    const auto &q = *static_cast<at::Tensor *>(query);
    const auto &k = *static_cast<at::Tensor *>(keys);
    const auto &v = *static_cast<at::Tensor *>(values);
    const std::optional<at::Tensor> cq(*static_cast<at::Tensor *>(cu_q));
    const std::optional<at::Tensor> ck(*static_cast<at::Tensor *>(cu_k));
    const std::optional<at::Tensor> used(*static_cast<at::Tensor *>(used_k));
    auto result = at::_flash_attention_forward(q, k, v, cq, ck, /*max_q=*/1, max_k,
                                               /*dropout_p=*/0.0, /*is_causal=*/false,
                                               /*return_debug_mask=*/false, std::nullopt,
                                               std::nullopt, std::nullopt, used, std::nullopt);
    *out = new at::Tensor(std::move(std::get<0>(result)));
  });
}

// ---- Profiler ----------------------------------------------------------------------------------
//
// The calls `torch.profiler.profile(activities=[CPU, CUDA])` makes through torch/autograd/profiler.py:
// prepareProfiler, then enableProfiler with ProfilerState::KINETO, and disableProfiler, whose
// result saves the chrome trace (`export_chrome_trace`). CUDA activities (kernels, copies and
// fills on the device, through CUPTI, graph replays' kernels included) are asked for only when
// `cuda` is set and libtorch sees a CUDA device; without them Kineto records the CPU operators.

// Starts the profiler on this thread; `*cuda_on` says whether device activities were asked for.
int coload_profiler_start(int cuda, int *cuda_on, char *err, size_t err_len) {
  *cuda_on = 0;
  return guarded(err, err_len, [&] {
    namespace prof = torch::profiler::impl;
    TORCH_CHECK(!prof::profilerEnabled(), "a profiler is already running in this process");
    std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
    if (cuda != 0 && at::hasCUDA()) {
      activities.insert(prof::ActivityType::CUDA);
      *cuda_on = 1;
    }
    const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  });
}

// Stops the profiler, saves its chrome trace to `trace_path` (when not null) and calls
// `on_event(ctx, name, name_len, on_device, start_ns, duration_ns)` for every event it recorded
// (`on_device`: 1 for a device activity: a kernel, a copy or a fill).
int coload_profiler_stop(const char *trace_path,
                         void (*on_event)(void *, const char *, size_t, int, uint64_t, uint64_t),
                         void *ctx, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto result = torch::autograd::profiler::disableProfiler();
    TORCH_CHECK(result != nullptr, "the profiler returned no result");
    for (const auto &event : result->events()) {
      const std::string name = event.name();
      const bool on_device = event.deviceType() != c10::DeviceType::CPU;
      on_event(ctx, name.data(), name.size(), on_device ? 1 : 0, event.startNs(),
               event.durationNs());
    }
    if (trace_path != nullptr) {
      result->save(trace_path);
    }
  });
}

}  // extern "C"
