#pragma once
// Optimizer and schedule pieces shared by every trainer (LETR, CoaT, EfficientZero):
// AdamW (decoupled weight decay, PyTorch's update rule) whose whole state is a map of named
// tensors (so checkpoints store it in HDF5 and resume exactly), step decay, and gradient
// clipping by global norm.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace glimpse::train {

class AdamW {
public:
    struct Options {
        double lr = 1e-4;
        double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
        double weightDecay = 1e-4;
    };
    struct Param {
        std::string name;
        torch::Tensor tensor;   // a leaf that requires grad
        double lrScale = 1.0;   // this parameter's lr = lr() * lrScale
        double weightDecayScale = 1.0;   // this parameter's decay = weightDecay * this (0: none)
    };
    AdamW(std::vector<Param> params, Options opts);

    void setLr(double lr) { opts_.lr = lr; }
    double lr() const { return opts_.lr; }
    int64_t steps() const { return steps_; }
    const std::vector<Param>& params() const { return params_; }

    void zeroGrad();
    // p <- p - lr * (wd * p + m_hat / (sqrt(v_hat) + eps)); parameters without a gradient are
    // skipped (their moments stay).
    void step();

    // "step" (int64 scalar), "exp_avg.<name>", "exp_avg_sq.<name>".
    std::map<std::string, torch::Tensor> state() const;
    // Throws glimpse::Error naming `source` when a tensor is missing or has the wrong shape.
    void loadState(const std::map<std::string, torch::Tensor>& state, const std::string& source);

private:
    std::vector<Param> params_;
    std::vector<torch::Tensor> expAvg_, expAvgSq_;
    Options opts_;
    int64_t steps_ = 0;
};

// base * gamma^floor(step / every) (every <= 0: constant).
double stepDecay(double base, double gamma, int64_t every, int64_t step);

// Linear warmup then cosine decay (timm's CosineLRScheduler without restarts), for step
// 0..total-1: base * (step + 1) / warmup while step < warmup, then
// minLr + (base - minLr) * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2.
double warmupCosine(double base, double minLr, int64_t warmup, int64_t total, int64_t step);

// Scales the gradients of `params` so that their global L2 norm is at most maxNorm (if
// maxNorm > 0); returns the norm before clipping.
double clipGradNorm(const std::vector<AdamW::Param>& params, double maxNorm);

} // namespace glimpse::train
