#include "core/models/efficientzero/loss.h"

#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::efficientzero {

using torch::Tensor;

Tensor softCrossEntropy(const Tensor& logits, const Tensor& target) {
    return -(target * torch::log_softmax(logits, -1)).sum(-1);
}

Tensor scaleGradient(const Tensor& x, double scale) { return x * scale + x.detach() * (1.0 - scale); }

namespace {
void expectShape(const Tensor& t, const std::vector<int64_t>& shape, const char* name) {
    if (!t.defined()) throw Error(std::string("efficientzero loss: batch tensor '") + name + "' is missing");
    if (t.sizes().vec() != shape) {
        std::string want = "[", got = "[";
        for (auto s : shape) want += std::to_string(s) + ",";
        for (auto s : t.sizes()) got += std::to_string(s) + ",";
        throw Error(std::string("efficientzero loss: batch tensor '") + name + "' has shape " + got + "], expected " +
                    want + "]");
    }
}
} // namespace

void validateBatch(const Batch& b, const Config& c) {
    if (!b.obs.defined() || b.obs.dim() != 4) throw Error("efficientzero loss: 'obs' must be [B, stack*C, H, W]");
    if (!b.actions.defined() || b.actions.dim() != 2) throw Error("efficientzero loss: 'actions' must be [B, K]");
    const int64_t B = b.obs.size(0), K = b.actions.size(1);
    const int64_t in = c.inputChannels(), H = c.obsHeight, W = c.obsWidth, A = c.numActions;
    expectShape(b.obs, {B, in, H, W}, "obs");
    expectShape(b.nextObs, {B, K, in, H, W}, "nextObs");
    expectShape(b.actions, {B, K}, "actions");
    expectShape(b.valuePrefix, {B, K}, "valuePrefix");
    expectShape(b.value, {B, K + 1}, "value");
    expectShape(b.policy, {B, K + 1, A}, "policy");
    expectShape(b.mask, {B, K + 1}, "mask");
    expectShape(b.weights, {B}, "weights");
}

LossTerms computeLoss(Network& net, const Batch& b, const LossWeights& w) {
    const Config& c = net.config();
    validateBatch(b, c);
    const int64_t B = b.obs.size(0), K = b.actions.size(1);
    const int S = c.supportSize;

    // BatchNorm: in training mode each forward call normalizes with its own batch statistics,
    // while the running statistics (what the self-play and target networks use in eval mode)
    // average over all calls. Calling the prediction network on the root states and on each
    // unrolled state separately (and the representation on the observations and on the
    // consistency targets separately) let those differ: the eval-mode network predicted a
    // constant value and a different policy than the trained one (issue 7). So the
    // representation runs once on [observations; next observations] and the prediction once on
    // [root states; unrolled states]; their running statistics are then those of the very batch
    // the loss was computed with. (The dynamics runs once per unroll step: see below.)
    const Tensor flatNext = b.nextObs.reshape({B * K, b.nextObs.size(2), b.nextObs.size(3), b.nextObs.size(4)});
    const Tensor represented = net.represent(torch::cat({b.obs, flatNext}, 0));
    const Tensor state0 = represented.slice(0, 0, B);
    // Consistency targets: the representation of the real observations, projected without
    // gradients (the target side).
    Tensor targetProj;
    {
        torch::NoGradGuard ng;
        targetProj = net.project(represented.slice(0, B).detach(), false).reshape({B, K, -1});
    }

    // The dynamics cannot be batched that way (step k + 1 needs step k's output), and with
    // batch statistics per unroll step each depth was normalized by its own mean and variance
    // while the search's eval-mode network normalizes every depth with one running average: a
    // trained pellets network's eval-mode value prefix after one step was 1.64 for every state
    // (target 0.23; 0.29 in training mode) and 0.00 after 2-5 steps (issue 7). So the unroll
    // normalizes with the running statistics, exactly as the search does, and those statistics
    // are then updated once, without gradients, from all unrolled depths together.
    struct DynamicsEval {
        Network& net;
        bool was;
        explicit DynamicsEval(Network& n) : net(n), was(n.isDynamicsTraining()) { net.setDynamicsTraining(false); }
        ~DynamicsEval() { net.setDynamicsTraining(was); }
    };
    const bool updateDynamicsStats = net.isDynamicsTraining();
    std::vector<Tensor> dynStates, dynH, dynC, prefixLogitsAll;
    std::vector<Tensor> states{state0};
    Tensor prefixCe = torch::zeros({B}, b.obs.options());
    Tensor cons = torch::zeros({B}, b.obs.options());
    Tensor state = state0;
    LstmState lstm = net.initialLstm(B);
    {
    DynamicsEval dynamicsEval(net);
    for (int64_t k = 0; k < K; ++k) {
        dynStates.push_back(state.detach());
        dynH.push_back(lstm.first.detach());
        dynC.push_back(lstm.second.detach());
        auto [next, prefixLogits, nextLstm] = net.dynamics(state, b.actions.select(1, k), lstm);
        prefixLogitsAll.push_back(prefixLogits.detach());
        const Tensor mask = b.mask.select(1, k + 1);
        prefixCe = prefixCe + softCrossEntropy(prefixLogits, scalarToSupport(b.valuePrefix.select(1, k), S));
        cons = cons + negativeCosineSimilarity(net.project(next, true), targetProj.select(1, k)) * mask;
        states.push_back(next);
        state = scaleGradient(next, w.dynamicsGradScale);
        lstm = nextLstm;
        if ((k + 1) % 5 == 0) lstm = net.initialLstm(B);  // LSTM horizon (zeta = 5)
    }
    }
    if (updateDynamicsStats) {
        torch::NoGradGuard ng;
        const Tensor acts = b.actions.transpose(0, 1).reshape({K * B});
        net.dynamics(torch::cat(dynStates, 0), acts, {torch::cat(dynH, 1), torch::cat(dynC, 1)});
    }
    auto [valueLogits, policyLogits] = net.predict(torch::cat(states, 0));
    valueLogits = valueLogits.view({K + 1, B, -1});
    policyLogits = policyLogits.view({K + 1, B, -1});
    const Tensor valueTargets = scalarToSupport(b.value.transpose(0, 1), S);  // [K + 1, B, 2S + 1]
    const Tensor valueCe = softCrossEntropy(valueLogits, valueTargets).sum(0);
    const Tensor policyCe = softCrossEntropy(policyLogits, b.policy.transpose(0, 1)).sum(0);
    const Tensor value0 = supportToScalar(valueLogits[0].detach(), S);
    const Tensor priorities = (value0 - b.value.select(1, 0)).abs();

    const Tensor perSample = w.value * valueCe + w.policy * policyCe + w.valuePrefix * prefixCe + w.consistency * cons;
    LossTerms out;
    out.total = (perSample * b.weights).mean();
    out.value = valueCe.mean().item<double>();
    out.valuePrefix = prefixCe.mean().item<double>();
    out.policy = policyCe.mean().item<double>();
    out.consistency = cons.mean().item<double>();
    out.priorities = priorities;
    out.valueLogits0 = valueLogits[0].detach();
    out.valuePrefixLogits = torch::stack(prefixLogitsAll, 0);
    return out;
}

} // namespace glimpse::efficientzero
