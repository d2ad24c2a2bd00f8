#include "core/util/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include "core/error.h"

namespace glimpse {

torch::Device parseDevice(const std::string& name) {
    if (name == "cpu") return torch::Device(torch::kCPU);
    if (name != "cuda" && name.rfind("cuda:", 0) != 0)
        throw Error("--device: expected cpu, cuda or cuda:N, got '" + name + "'");
    if (!torch::cuda::is_available())
        throw Error("--device " + name + ": CUDA is not available (this LibTorch has no CUDA support or no GPU is visible)");
    setTf32(false);
    if (name == "cuda") return torch::Device(torch::kCUDA, 0);
    const std::string n = name.substr(5);
    char* end = nullptr;
    const long index = std::strtol(n.c_str(), &end, 10);
    const long count = long(torch::cuda::device_count());
    if (n.empty() || *end != '\0' || index < 0 || index >= count)
        throw Error("--device " + name + ": expected cuda:0.." + std::to_string(count - 1));
    return torch::Device(torch::kCUDA, torch::DeviceIndex(index));
}

void setTf32(bool on) {
    at::globalContext().setAllowTF32CuDNN(on);
    at::globalContext().setAllowTF32CuBLAS(on);
}

} // namespace glimpse
