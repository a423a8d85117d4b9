// The parts of libtorch that tch does not expose, behind a C ABI.
//
// - InferenceMode (and bf16 autocast) around a Rust callback: the guards are RAII objects that
//   live on this function's stack while the callback runs, so entering them allocates nothing.
// - SGD with momentum through the multi-tensor `_foreach_*` kernels, the same three calls
//   PyTorch's `torch.optim.SGD` makes on CUDA by default (foreach implementation), and
//   `zero_grad(set_to_none=True)`.
// - Device synchronize, the caching allocator's peak, and the library versions.
//
// No C++ exception crosses into Rust: every entry point catches and returns a status code with
// the message copied into the caller's buffer. Tensors arrive as tch's `C_tensor` pointers,
// which are `torch::Tensor*` (see torch-sys's torch_api.h).

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

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

}  // namespace

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

}  // extern "C"
