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

// Inference precision, `--precision fp32|bf16|auto` (docs/performance.md): kFloat or kBFloat16.
// (kQInt8 for CoaT, below.)
// "auto" is bf16 on a CPU with bfloat16 instructions (AVX512-BF16 or AMX, cpuHasBf16()), fp32
// elsewhere (a GPU keeps float32; its mixed precision is --autocast). "bf16" on a CPU without the
// instructions, or on a GPU, is refused with a glimpse::Error naming the flag. float32 is the one
// for exact comparisons with reference code; bfloat16 changes the outputs within each model's
// stated bound. With int8LinearLayers (CoaT), "int8" is kQInt8: linear layers as int8 products
// (products.h; CoaT's MLPs) on the CPU, refused where LibTorch lacks the kernels; and "auto" is int8
// on a CPU without bfloat16 instructions where it has them. Without it "int8" is refused.
torch::ScalarType parsePrecision(const std::string& name, const torch::Device& device,
                                 const std::string& flag = "--precision", bool int8LinearLayers = false);
// "float32" / "bfloat16" / "int8 MLP layers" (what the GUI and the commands print).
const char* precisionName(torch::ScalarType precision);

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
