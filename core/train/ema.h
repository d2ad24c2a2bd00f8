#pragma once
// Exponential moving average of a model's weights (Polyak averaging), bias-corrected like
// Adam's moments: after n updates with weights w_1..w_n it is
//     sum_k d^(n-k) (1 - d) w_k / (1 - d^n),
// a weighted mean of the weights seen since the last reset in which each step counts d times
// the next one (window ~1 / (1 - d) steps; shorter runs get close to the plain mean). The
// recursive form used: avg <- d_n avg + (1 - d_n) w with d_n = d (1 - d^n) / (1 - d^(n+1)), so
// the first update replaces the starting weights. Integer buffers (batch norm's
// num_batches_tracked) are copied. The state is a map of named tensors plus the count, so
// checkpoints store it and a resumed run continues it exactly.
#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

namespace torch::nn {
class Module;
}

namespace glimpse::train {

class WeightEma {
public:
    explicit WeightEma(double decay);

    double decay() const { return decay_; }
    int64_t count() const { return count_; }
    // The decay the next update uses.
    double nextDecay() const;

    // Starts the average at the module's current weights (count 0).
    void reset(const torch::nn::Module& m);
    // One step of the average towards the module's current weights.
    void update(const torch::nn::Module& m);
    // Copies the averaged weights into the module.
    void copyTo(torch::nn::Module& m) const;

    // "<name>" for every tensor and "count" (int64 scalar); names must not be "count".
    std::map<std::string, torch::Tensor> state() const;
    // Throws glimpse::Error naming `source` when the state does not fit the module (a tensor
    // missing, extra or of another shape) or lacks its count.
    void loadState(const torch::nn::Module& m, const std::map<std::string, torch::Tensor>& state,
                   const std::string& source);

private:
    double decay_;
    int64_t count_ = 0;
    std::map<std::string, torch::Tensor> avg_;
};

} // namespace glimpse::train
