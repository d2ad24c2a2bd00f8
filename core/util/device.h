#pragma once
// The compute device named on a command line: "cpu", "cuda" or "cuda:N".
#include <string>

#include <torch/types.h>

namespace glimpse {

// Throws glimpse::Error for other names, and for CUDA when this LibTorch has no CUDA support,
// no GPU is visible or N is out of range.
torch::Device parseDevice(const std::string& name);

} // namespace glimpse
