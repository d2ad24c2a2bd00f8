#pragma once
// XTRA's task weights (dissertation 5.3.2 and Appendix 5.7.2; issue 20): while a model
// finetunes on an online target task M it keeps learning from m offline tasks M~_i with the
// objective L = L_ez(M) + sum_i eta_i L_ez(M~_i) (eq. 5.1). The weights come from how well each
// offline task's gradient agrees with the target task's:
//   Sim(M~_i, M) = G~_i . G / (|G~_i| |G|)                                      (eq. 5.2)
// over all trained parameters. Training is cut into cycles of T learner updates; in the first N
// updates of a cycle each task's counter s_i grows by 1 whenever Sim > threshold (eq. 5.4); at
// the end of those N updates eta_i = s_i / N, which then holds for the rest of the cycle and the
// first N updates of the next one. Before `warmup` updates every eta_i is 1 and nothing is
// measured. A gradient of zero norm has similarity 0.
//
// Steps here are learner updates (the similarity is measured per update; the paper's runs take
// one update per environment step, so its 10k-step warm-up is 10k updates there).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace glimpse::xtra {

struct TaskWeightConfig {
    int64_t cycle = 2000;      // T
    int64_t window = 200;      // N (<= T)
    double threshold = 0.1;    // similarity above which an update counts for a task
    int64_t warmup = 10000;    // updates with all weights 1 before the first window

    void validate() const;     // glimpse::Error naming the key
    nlohmann::json toJson() const;
    static TaskWeightConfig fromJson(const nlohmann::json& j, const std::string& source);
};

// Cosine similarity of two gradients given per parameter (same shapes); 0 when either is zero.
double gradientCosine(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);

// Gradients of `loss` with respect to `params` (autograd; the graph is kept for the next
// call). A parameter the loss does not reach gets zeros.
std::vector<torch::Tensor> lossGradient(const torch::Tensor& loss, const std::vector<torch::Tensor>& params);

// Sim(M~_i, M) for every offline loss against the target loss.
std::vector<double> taskSimilarities(const torch::Tensor& targetLoss, const std::vector<torch::Tensor>& offlineLosses,
                                     const std::vector<torch::Tensor>& params);

class TaskWeights {
public:
    TaskWeights(int numOfflineTasks, const TaskWeightConfig& config);

    // Whether learner update `step` (0-based) lies in a measuring window.
    bool measuring(int64_t step) const;
    // At a measuring step: counts the similarities (one per offline task); at the window's last
    // step sets the weights to s_i / N and clears the counters. Other steps: glimpse::Error.
    void observe(int64_t step, const std::vector<double>& similarities);
    // eta_i in force at the current step (1 before any window has ended).
    const std::vector<double>& weights() const { return weights_; }
    const std::vector<int64_t>& counters() const { return counters_; }
    const TaskWeightConfig& config() const { return config_; }

    // Resumable state (weights, counters).
    nlohmann::json state() const;
    void restore(const nlohmann::json& state, const std::string& source);

private:
    TaskWeightConfig config_;
    std::vector<double> weights_;
    std::vector<int64_t> counters_;
};

} // namespace glimpse::xtra
