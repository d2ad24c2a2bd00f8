#include "core/models/efficientzero/search.h"

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

std::vector<rl::Prediction> SearchAdapter::start(const torch::Tensor& obs) {
    checkEval();
    torch::NoGradGuard noGrad;
    InitialOutput out = net_.initialInference(obs.to(net_.device()));
    LstmState zero = net_.initialLstm(obs.size(0));
    states_.assign(1, out.state);
    h_.assign(1, zero.first.squeeze(0));
    c_.assign(1, zero.second.squeeze(0));
    return toPredictions(torch::zeros_like(out.value), out.value, out.policyLogits);
}

std::vector<rl::Prediction> SearchAdapter::recurrent(const std::vector<rl::StateRef>& parents,
                                                     const std::vector<int>& actions,
                                                     const std::vector<uint8_t>& resetHidden) {
    checkEval();
    if (states_.empty()) throw Error("efficientzero: SearchAdapter::recurrent before start()");
    if (actions.size() != parents.size() || resetHidden.size() != parents.size())
        throw Error("efficientzero: SearchAdapter::recurrent got " + std::to_string(parents.size()) + " parents, " +
                    std::to_string(actions.size()) + " actions and " + std::to_string(resetHidden.size()) +
                    " reset flags");
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> s, h, c;
    for (size_t i = 0; i < parents.size(); ++i) {
        const auto [slot, row] = parents[i];
        if (slot < 0 || slot >= int(states_.size()) || row < 0 || row >= states_[size_t(slot)].size(0))
            throw Error("efficientzero: no latent state at slot " + std::to_string(slot) + ", row " + std::to_string(row));
        s.push_back(states_[size_t(slot)][row]);
        h.push_back(resetHidden[i] ? torch::zeros_like(h_[size_t(slot)][row]) : h_[size_t(slot)][row]);
        c.push_back(resetHidden[i] ? torch::zeros_like(c_[size_t(slot)][row]) : c_[size_t(slot)][row]);
    }
    const torch::Tensor a = torch::tensor(std::vector<int64_t>(actions.begin(), actions.end()), torch::kLong)
                                .to(net_.device());
    const LstmState lstm{torch::stack(h).unsqueeze(0), torch::stack(c).unsqueeze(0)};
    RecurrentOutput out = net_.recurrentInference(torch::stack(s), a, lstm);
    states_.push_back(out.nextState);
    h_.push_back(out.lstm.first.squeeze(0));
    c_.push_back(out.lstm.second.squeeze(0));
    return toPredictions(out.valuePrefix, out.value, out.policyLogits);
}

rl::SearchResult searchBatch(Network& network, rl::Mcts& mcts, const torch::Tensor& obs, bool addNoise,
                             const std::vector<std::vector<int>>& legalActions) {
    SearchAdapter adapter(network);
    const std::vector<rl::Prediction> roots = adapter.start(obs);
    return mcts.search(adapter, roots, addNoise, legalActions);
}

} // namespace glimpse::efficientzero
