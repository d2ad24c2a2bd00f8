#include "core/util/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "core/error.h"
#include "core/util/products.h"
#include "core/util/threads.h"

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

torch::ScalarType parsePrecision(const std::string& name, const torch::Device& device, const std::string& flag,
                                 bool int8LinearLayers) {
    // Asked only where int8 is in question: the first call selects LibTorch's quantized engine.
    auto int8Here = [&] { return int8LinearLayers && device.is_cpu() && products::int8Available(); };
    if (name == "fp32" || name == "float32") return torch::kFloat;
    if (name == "auto") {
        if (device.is_cpu() && cpuHasBf16()) return torch::kBFloat16;
        return int8Here() ? torch::kQInt8 : torch::kFloat;
    }
    if (name == "bf16" || name == "bfloat16") {
        if (!device.is_cpu())
            throw Error(flag + " bf16 is for the CPU; on a GPU, --autocast bf16 runs mixed precision");
        if (!cpuHasBf16())
            throw Error(flag + " bf16: this CPU has no bfloat16 instructions (AVX512-BF16 or AMX); "
                               "use fp32 or auto");
        return torch::kBFloat16;
    }
    if (int8LinearLayers && name == "int8") {
        if (!device.is_cpu()) throw Error(flag + " int8 is for the CPU");
        if (!int8Here())
            throw Error(flag + " int8: this LibTorch has no int8 linear kernels (its oneDNN quantized engine); "
                               "use fp32 or auto");
        return torch::kQInt8;
    }
    if (name == "int8")
        throw Error(flag + " int8: only CoaT has int8 linear layers (docs/performance.md); use fp32, bf16 or auto");
    throw Error(flag + ": expected fp32, bf16" + (int8LinearLayers ? ", int8" : "") + " or auto, got '" + name + "'");
}

const char* precisionName(torch::ScalarType precision) {
    return precision == torch::kBFloat16 ? "bfloat16"
           : precision == torch::kHalf   ? "float16"
           : precision == torch::kQInt8  ? "int8 MLP layers"
                                         : "float32";
}

namespace {
// The autocast state of one device type (kCPU or kCUDA), under either LibTorch API.
bool enabled(at::DeviceType t) {
#if GLIMPSE_AUTOCAST_PER_DEVICE
    return at::autocast::is_autocast_enabled(t);
#else
    return t == at::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

torch::ScalarType dtypeOf(at::DeviceType t) {
#if GLIMPSE_AUTOCAST_PER_DEVICE
    return at::autocast::get_autocast_dtype(t);
#else
    return t == at::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

void setState(at::DeviceType t, bool on, torch::ScalarType dtype) {
#if GLIMPSE_AUTOCAST_PER_DEVICE
    at::autocast::set_autocast_dtype(t, dtype);
    at::autocast::set_autocast_enabled(t, on);
#else
    if (t == at::kCPU) {
        at::autocast::set_autocast_cpu_dtype(dtype);
        at::autocast::set_cpu_enabled(on);
    } else {
        at::autocast::set_autocast_gpu_dtype(dtype);
        at::autocast::set_enabled(on);
    }
#endif
}
} // namespace

AutocastGuard::AutocastGuard(const torch::Device& device, torch::ScalarType dtype) {
    if (dtype == torch::kFloat) return;
    const bool cpuBf16 = device.is_cpu() && dtype == torch::kBFloat16;
    if (!device.is_cuda() && !cpuBf16)
        throw Error(std::string("autocast ") + c10::toString(dtype) + " runs on a CUDA device (bfloat16 also on the CPU), not " +
                    device.str());
    type_ = cpuBf16 ? at::kCPU : at::kCUDA;
    wasEnabled_ = enabled(type_);
    wasDtype_ = dtypeOf(type_);
    setState(type_, true, dtype);
    at::autocast::increment_nesting();
    on_ = true;
}

AutocastGuard::~AutocastGuard() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    setState(type_, wasEnabled_, wasDtype_);
}

} // namespace glimpse
