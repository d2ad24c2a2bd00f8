#pragma once
// Resumable training state shared by every trainer: model tensors, optimizer state and a JSON
// of everything else a trainer needs to continue (step, phase, config, data position), in one
// HDF5 checkpoint (core/io/checkpoint.h layout; family "<trainer>-train"; tensors "model.<name>",
// "optim.<key>" and, for training-only modules, "aux.<name>"; the JSON is the checkpoint's config string). Written atomically.
//
// Trainers draw every random number from (seed, step) (data order, augmentation, dropout), so
// the state needs no RNG snapshot: continuing from step s repeats what an uninterrupted run
// does from step s.
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace torch::nn {
class Module;
}

namespace glimpse::train {

struct TrainState {
    nlohmann::json meta = nlohmann::json::object();
    std::map<std::string, torch::Tensor> model;       // parameter/buffer name -> tensor
    std::map<std::string, torch::Tensor> optimizer;   // AdamW::state()
    // Training-only modules (e.g. LETR's dense auxiliary head), stored as "aux.<name>": not part
    // of the model, so a model loaded from the checkpoint never sees them.
    std::map<std::string, torch::Tensor> aux;
};

// Atomic (temp file + rename).
void saveTrainState(const std::string& path, const std::string& family, const TrainState& state);
// Throws glimpse::Error naming the file when it is missing, corrupt, of another family, or
// has no meta JSON.
TrainState loadTrainState(const std::string& path, const std::string& family);

// Module <-> tensor map (copies; CPU).
std::map<std::string, torch::Tensor> moduleTensors(const torch::nn::Module& m);
// Copies tensors into the module's parameters and buffers; every name and shape must match
// (else glimpse::Error naming `source`; nothing is modified).
void loadModuleTensors(torch::nn::Module& m, const std::map<std::string, torch::Tensor>& t,
                       const std::string& source);

// Deterministic per-step seeds: splitmix64 of (seed, a, b).
uint64_t mixSeed(uint64_t seed, uint64_t a, uint64_t b = 0);

// The index of the sample at position `pos` of an endless stream over a dataset of `size`
// items, reshuffled every epoch from (seed, epoch). Stateless, so resuming needs no state.
int64_t shuffledIndex(uint64_t seed, int64_t size, int64_t pos);

} // namespace glimpse::train
