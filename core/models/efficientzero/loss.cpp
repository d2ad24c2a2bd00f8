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

    auto init = net.initialInference(b.obs);
    Tensor valueCe = softCrossEntropy(init.valueLogits, scalarToSupport(b.value.select(1, 0), S));
    Tensor policyCe = softCrossEntropy(init.policyLogits, b.policy.select(1, 0));
    Tensor prefixCe = torch::zeros({B}, b.obs.options());
    Tensor cons = torch::zeros({B}, b.obs.options());
    const Tensor priorities = (init.value.detach() - b.value.select(1, 0)).abs();

    // Consistency targets: the representation of the real observations, projected without
    // gradients (the target side).
    Tensor targetProj;
    {
        torch::NoGradGuard ng;
        auto flat = b.nextObs.reshape({B * K, b.nextObs.size(2), b.nextObs.size(3), b.nextObs.size(4)});
        targetProj = net.project(net.initialInference(flat).state, false).reshape({B, K, -1});
    }

    Tensor state = init.state;
    LstmState lstm = net.initialLstm(B);
    for (int64_t k = 0; k < K; ++k) {
        auto rec = net.recurrentInference(state, b.actions.select(1, k), lstm);
        const Tensor mask = b.mask.select(1, k + 1);
        valueCe = valueCe + softCrossEntropy(rec.valueLogits, scalarToSupport(b.value.select(1, k + 1), S));
        policyCe = policyCe + softCrossEntropy(rec.policyLogits, b.policy.select(1, k + 1));
        prefixCe = prefixCe + softCrossEntropy(rec.valuePrefixLogits, scalarToSupport(b.valuePrefix.select(1, k), S));
        cons = cons + negativeCosineSimilarity(net.project(rec.nextState, true), targetProj.select(1, k)) * mask;
        state = scaleGradient(rec.nextState, w.dynamicsGradScale);
        lstm = rec.lstm;
        if ((k + 1) % 5 == 0) lstm = net.initialLstm(B);  // LSTM horizon (zeta = 5)
    }
    const Tensor perSample = w.value * valueCe + w.policy * policyCe + w.valuePrefix * prefixCe + w.consistency * cons;
    LossTerms out;
    out.total = (perSample * b.weights).mean();
    out.value = valueCe.mean().item<double>();
    out.valuePrefix = prefixCe.mean().item<double>();
    out.policy = policyCe.mean().item<double>();
    out.consistency = cons.mean().item<double>();
    out.priorities = priorities;
    return out;
}

} // namespace glimpse::efficientzero
