#include "core/util/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "core/error.h"

// LibTorch 2.4 replaced the CUDA-only autocast switches by per-device-type ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define GLIMPSE_AUTOCAST_PER_DEVICE 1
#else
#define GLIMPSE_AUTOCAST_PER_DEVICE 0
#endif

namespace glimpse {

torch::ScalarType parseAutocast(const std::string& name, const std::string& flag) {
    if (name == "fp32") return torch::kFloat;
    if (name == "bf16") return torch::kBFloat16;
    if (name == "fp16") return torch::kHalf;
    throw Error(flag + ": expected fp32, bf16 or fp16, got '" + name + "'");
}

AutocastGuard::AutocastGuard(const torch::Device& device, torch::ScalarType dtype) {
    if (dtype == torch::kFloat) return;
    if (device.is_cpu() && dtype == torch::kBFloat16) {
        cpu_ = true;
#if GLIMPSE_AUTOCAST_PER_DEVICE
        wasEnabled_ = at::autocast::is_autocast_enabled(at::kCPU);
        wasDtype_ = at::autocast::get_autocast_dtype(at::kCPU);
        at::autocast::set_autocast_dtype(at::kCPU, dtype);
        at::autocast::set_autocast_enabled(at::kCPU, true);
#else
        wasEnabled_ = at::autocast::is_cpu_enabled();
        wasDtype_ = at::autocast::get_autocast_cpu_dtype();
        at::autocast::set_autocast_cpu_dtype(dtype);
        at::autocast::set_cpu_enabled(true);
#endif
        at::autocast::increment_nesting();
        on_ = true;
        return;
    }
    if (!device.is_cuda())
        throw Error(std::string("autocast ") + c10::toString(dtype) + " runs on a CUDA device (bfloat16 also on the CPU), not " +
                    device.str());
#if GLIMPSE_AUTOCAST_PER_DEVICE
    wasEnabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    wasDtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
    wasEnabled_ = at::autocast::is_enabled();
    wasDtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
#endif
    at::autocast::increment_nesting();
    on_ = true;
}

AutocastGuard::~AutocastGuard() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cpu_) {
#if GLIMPSE_AUTOCAST_PER_DEVICE
        at::autocast::set_autocast_enabled(at::kCPU, wasEnabled_);
        at::autocast::set_autocast_dtype(at::kCPU, wasDtype_);
#else
        at::autocast::set_cpu_enabled(wasEnabled_);
        at::autocast::set_autocast_cpu_dtype(wasDtype_);
#endif
        return;
    }
#if GLIMPSE_AUTOCAST_PER_DEVICE
    at::autocast::set_autocast_enabled(at::kCUDA, wasEnabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, wasDtype_);
#else
    at::autocast::set_enabled(wasEnabled_);
    at::autocast::set_autocast_gpu_dtype(wasDtype_);
#endif
}

} // namespace glimpse
