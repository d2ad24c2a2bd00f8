#pragma once
// Model checkpoints in HDF5 (layout in docs/formats.md):
//   /                root attributes: kind = "glimpse.checkpoint", format_version (int)
//   /meta            attributes: family (string), config (JSON string), format_version (int)
//   /params/<name>   one dataset per parameter or buffer, <name> = its PyTorch name
//                    (dots kept, e.g. "backbone.0.body.layer1.0.conv1.weight")
#include <map>
#include <string>
#include <torch/types.h>

namespace torch::nn {
class Module;   // <torch/nn/module.h>; this header stays light (no <torch/torch.h>)
}

namespace glimpse {

struct Checkpoint {
    std::string family;                        // "letr", "coat", "efficientzero", ...
    std::string configJson;                    // the model config, as JSON text
    int formatVersion = 1;
    std::map<std::string, torch::Tensor> tensors;  // PyTorch name -> CPU tensor
};

// Throws glimpse::Error naming the file on: missing file, not HDF5, truncated, no /meta
// (foreign HDF5), unsupported format version.
Checkpoint loadCheckpoint(const std::string& path);
// loadCheckpoint for a model's weights, refusing a PyTorch file (.pth, .pt) with the command that
// converts it: "<path>: a PyTorch checkpoint; convert it first: /usr/bin/python3
// installer/<converter> <path> --out <convertedName>".
Checkpoint loadModelCheckpoint(const std::string& path, const std::string& converter, const std::string& convertedName);
// Atomic: writes a temp file beside `path` and renames it over `path`.
void saveCheckpoint(const std::string& path, const Checkpoint& ckpt);

// Copies `ckpt` tensors into `module`'s named_parameters()+named_buffers(). Checks every
// name, shape and dtype first and reports ALL mismatches (missing, unexpected, wrong shape,
// wrong dtype) in one Error naming `path`. Also refuses a checkpoint whose family differs
// from `family`. Nothing is modified if any check fails.
void applyCheckpoint(const Checkpoint& ckpt, torch::nn::Module& module,
                     const std::string& family, const std::string& path);
// Builds a Checkpoint from a module's parameters and buffers.
Checkpoint checkpointFromModule(const torch::nn::Module& module, const std::string& family,
                                const std::string& configJson);

} // namespace glimpse
