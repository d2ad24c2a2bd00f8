#include "core/models/efficientzero/search.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::efficientzero {

namespace {

std::vector<rl::Prediction> toPredictions(const torch::Tensor& valuePrefix, const torch::Tensor& value,
                                          const torch::Tensor& policyLogits) {
    const torch::Tensor vp = valuePrefix.to(torch::kCPU, torch::kFloat).contiguous();
    const torch::Tensor v = value.to(torch::kCPU, torch::kFloat).contiguous();
    const torch::Tensor p = policyLogits.to(torch::kCPU, torch::kFloat).contiguous();
    const int64_t b = p.size(0), a = p.size(1);
    std::vector<rl::Prediction> out(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) {
        out[size_t(i)].valuePrefix = vp.data_ptr<float>()[i];
        out[size_t(i)].value = v.data_ptr<float>()[i];
        out[size_t(i)].policyLogits.assign(p.data_ptr<float>() + i * a, p.data_ptr<float>() + (i + 1) * a);
    }
    return out;
}

} // namespace

void SearchAdapter::checkEval() const {
    if (net_.isTraining())
        throw Error("efficientzero: search needs the network in eval mode (call train(false)); in training mode "
                    "BatchNorm would mix statistics across the searched trees");
}

void SearchAdapter::append(const torch::Tensor& state, const torch::Tensor& h, const torch::Tensor& c) {
    const int64_t b = state.size(0);
    if (!states_.defined() || used_ + b > states_.size(0)) {
        const int64_t cap = std::max<int64_t>(used_ + b, states_.defined() ? 2 * states_.size(0) : 16 * b);
        auto grow = [&](const torch::Tensor& old, const torch::Tensor& like) {
            std::vector<int64_t> sizes = like.sizes().vec();
            sizes[0] = cap;
            torch::Tensor t = torch::empty(sizes, like.options());
            if (used_ > 0) t.narrow(0, 0, used_).copy_(old.narrow(0, 0, used_));
            return t;
        };
        states_ = grow(states_, state);
        h_ = grow(h_, h);
        c_ = grow(c_, c);
    }
    states_.narrow(0, used_, b).copy_(state);
    h_.narrow(0, used_, b).copy_(h);
    c_.narrow(0, used_, b).copy_(c);
    offset_.push_back(used_);
    size_.push_back(b);
    used_ += b;
}

std::vector<rl::Prediction> SearchAdapter::start(const torch::Tensor& obs) {
    checkEval();
    c10::InferenceMode inferenceMode;
    InitialOutput out = net_.initialInference(obs.to(net_.device()));
    LstmState zero = net_.initialLstm(obs.size(0));
    states_ = h_ = c_ = torch::Tensor();
    offset_.clear();
    size_.clear();
    used_ = 0;
    append(out.state, zero.first.squeeze(0), zero.second.squeeze(0));
    return toPredictions(torch::zeros_like(out.value), out.value, out.policyLogits);
}

std::vector<rl::Prediction> SearchAdapter::recurrent(const std::vector<rl::StateRef>& parents,
                                                     const std::vector<int>& actions,
                                                     const std::vector<uint8_t>& resetHidden) {
    checkEval();
    if (offset_.empty()) throw Error("efficientzero: SearchAdapter::recurrent before start()");
    if (actions.size() != parents.size() || resetHidden.size() != parents.size())
        throw Error("efficientzero: SearchAdapter::recurrent got " + std::to_string(parents.size()) + " parents, " +
                    std::to_string(actions.size()) + " actions and " + std::to_string(resetHidden.size()) +
                    " reset flags");
    c10::InferenceMode inferenceMode;
    std::vector<int64_t> rows, resets;
    rows.reserve(parents.size());
    for (size_t i = 0; i < parents.size(); ++i) {
        const auto [slot, row] = parents[i];
        if (slot < 0 || slot >= int(offset_.size()) || row < 0 || row >= size_[size_t(slot)])
            throw Error("efficientzero: no latent state at slot " + std::to_string(slot) + ", row " + std::to_string(row));
        rows.push_back(offset_[size_t(slot)] + row);
        if (resetHidden[i]) resets.push_back(int64_t(i));
    }
    const auto device = net_.device();
    const torch::Tensor idx = torch::tensor(rows, torch::kLong).to(device);
    const torch::Tensor a = torch::tensor(std::vector<int64_t>(actions.begin(), actions.end()), torch::kLong).to(device);
    torch::Tensor h = h_.index_select(0, idx), c = c_.index_select(0, idx);
    if (!resets.empty()) {
        const torch::Tensor r = torch::tensor(resets, torch::kLong).to(device);
        h.index_fill_(0, r, 0.0);
        c.index_fill_(0, r, 0.0);
    }
    RecurrentOutput out = net_.recurrentInference(states_.index_select(0, idx), a, {h.unsqueeze(0), c.unsqueeze(0)});
    append(out.nextState, out.lstm.first.squeeze(0), out.lstm.second.squeeze(0));
    return toPredictions(out.valuePrefix, out.value, out.policyLogits);
}

rl::SearchResult searchBatch(Network& network, rl::Mcts& mcts, const torch::Tensor& obs, bool addNoise,
                             const std::vector<std::vector<int>>& legalActions) {
    SearchAdapter adapter(network);
    const std::vector<rl::Prediction> roots = adapter.start(obs);
    return mcts.search(adapter, roots, addNoise, legalActions);
}

} // namespace glimpse::efficientzero
