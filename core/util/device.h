#pragma once
// The compute device named on a command line: "cpu", "cuda" or "cuda:N".
#include <string>

#include <torch/types.h>

namespace glimpse {

// Throws glimpse::Error for other names, and for CUDA when this LibTorch has no CUDA support,
// no GPU is visible or N is out of range. A CUDA device also turns TF32 off (setTf32(false)):
// float32 on the GPU then means float32, as on the CPU (docs/gpu.md).
torch::Device parseDevice(const std::string& name);

// TF32 tensor-core math for float32 matrix products and convolutions on CUDA (LibTorch's default
// allows it for convolutions). Off: results within ~1e-4 of the CPU's; on: faster, ~1e-2 apart.
void setTf32(bool on);

} // namespace glimpse
