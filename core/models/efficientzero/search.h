#pragma once
// Adapts an EfficientZero Network to rl::SearchModel: keeps the latent states and LSTM states
// of one search in slots (slot 0 = roots, slot k = the k-th simulation) and runs one batched
// recurrent inference per simulation, without gradients.
#include <vector>

#include <torch/types.h>

#include "core/models/efficientzero/model.h"
#include "core/rl/mcts.h"

namespace glimpse::efficientzero {

class SearchAdapter : public rl::SearchModel {
public:
    // The network must be in eval mode (BatchNorm batch statistics would mix the trees).
    explicit SearchAdapter(Network& network) : net_(network) {}

    // Initial inference on obs [B, stack * C, H, W]; starts a new search with these roots.
    std::vector<rl::Prediction> start(const torch::Tensor& obs);
    std::vector<rl::Prediction> recurrent(const std::vector<rl::StateRef>& parents, const std::vector<int>& actions,
                                          const std::vector<uint8_t>& resetHidden) override;

private:
    void checkEval() const;
    // Appends a slot's rows to the arenas (grown by doubling).
    void append(const torch::Tensor& state, const torch::Tensor& h, const torch::Tensor& c);

    Network& net_;
    // All slots' rows in one tensor per kind, so that a simulation step gathers its parents with
    // one index_select per kind instead of a select per parent and a stack (docs/performance.md):
    // rows [offset_[k], offset_[k] + size_[k]) are slot k's. [rows, ...], [rows, lstmHidden] x 2.
    torch::Tensor states_, h_, c_;
    std::vector<int64_t> offset_, size_;
    int64_t used_ = 0;
};

// Runs B searches at once: initial inference on obs, then MCTS.
rl::SearchResult searchBatch(Network& network, rl::Mcts& mcts, const torch::Tensor& obs, bool addNoise,
                             const std::vector<std::vector<int>>& legalActions = {});

} // namespace glimpse::efficientzero
