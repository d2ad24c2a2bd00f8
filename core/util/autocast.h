#pragma once
// Mixed-precision inference on a GPU: while an AutocastGuard lives, LibTorch's CUDA autocast runs
// the matrix products and convolutions of this thread in bfloat16 or float16 (reductions,
// softmax and normalizations stay in float32; outputs come back as the ops produce them).
#include <string>

#include <torch/types.h>

namespace glimpse {

// "fp32" (off), "bf16" or "fp16"; glimpse::Error naming the flag otherwise.
torch::ScalarType parseAutocast(const std::string& name, const std::string& flag = "--autocast");

class AutocastGuard {
public:
    // kFloat: does nothing. Other dtypes need a CUDA device: glimpse::Error otherwise.
    AutocastGuard(const torch::Device& device, torch::ScalarType dtype);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    bool on_ = false;
    bool wasEnabled_ = false;
    torch::ScalarType wasDtype_ = torch::kFloat;
};

} // namespace glimpse
