#pragma once
// Mixed precision: while an AutocastGuard lives, LibTorch's autocast runs the matrix products and
// convolutions of this thread in a lower precision (reductions, softmax and normalizations stay
// in float32; outputs come back as the ops produce them). On a GPU bfloat16 or float16 (inference,
// `--autocast`); on the CPU bfloat16 (LETR training's backbone, `bf16_backbone`: on processors with
// AMX or AVX512-BF16, oneDNN runs bfloat16 convolutions several times faster than float32 ones).
#include <string>

#include <torch/types.h>

namespace glimpse {

// "fp32" (off), "bf16" or "fp16"; glimpse::Error naming the flag otherwise.
torch::ScalarType parseAutocast(const std::string& name, const std::string& flag = "--autocast");

class AutocastGuard {
public:
    // kFloat: does nothing. kBFloat16 on a CUDA device or the CPU, kHalf on a CUDA device;
    // glimpse::Error otherwise.
    AutocastGuard(const torch::Device& device, torch::ScalarType dtype);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    bool on_ = false;
    c10::DeviceType type_ = c10::DeviceType::CUDA;
    bool wasEnabled_ = false;
    torch::ScalarType wasDtype_ = torch::kFloat;
};

} // namespace glimpse
