#pragma once
// EfficientZero networks (Ye et al. 2021; dissertation 5.2 and appendix 5.7.10; docs/models.md "EfficientZero"):
// representation h, dynamics g with the value-prefix LSTM, prediction f, and the projection
// and projection head of the self-supervised consistency loss. Value and value prefix are
// categorical over [-S, S] after the invertible transform h(x); the last layer of every
// value, value-prefix and policy head starts at zero, so a fresh network predicts value 0
// and a uniform policy. The heads' 1x1 convolutions have biases, as the official code's. Parameter names follow the reference implementation
// (representation_network.*, dynamics_network.*, prediction_network.*, projection.*,
// projection_head.*).
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "core/models/efficientzero/config.h"

namespace torch::nn {
class Module;
}

namespace glimpse::efficientzero {

// Checkpoints written before the heads' 1x1 convolutions (conv1x1_reward / value / policy) had
// biases lack those three tensors: adds zero biases where a head's weight is present and its
// bias is not (the old network's exact function). Returns how many were added.
int addMissingHeadBiases(std::map<std::string, torch::Tensor>& tensors);

// h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x, eps = 0.001, and its exact inverse.
torch::Tensor scalarTransform(const torch::Tensor& x);
torch::Tensor inverseScalarTransform(const torch::Tensor& y);
// Two-hot target [..., 2S + 1]: h(x) clamped to [-S, S], split between its two neighbouring
// integers in proportion to closeness.
torch::Tensor scalarToSupport(const torch::Tensor& x, int supportSize);
// Expectation of softmax(logits) over the support, inverse-transformed; |v| < 0.001 -> 0.
torch::Tensor supportToScalar(const torch::Tensor& logits, int supportSize);
// Per-sample negative cosine similarity, with the target detached: the consistency loss.
torch::Tensor negativeCosineSimilarity(const torch::Tensor& prediction, const torch::Tensor& target);

using LstmState = std::pair<torch::Tensor, torch::Tensor>;  // (h, c), each [1, B, lstmHidden]

struct InitialOutput {
    torch::Tensor state;         // [B, channels, h, w]
    torch::Tensor valueLogits;   // [B, 2S + 1]
    torch::Tensor value;         // [B]
    torch::Tensor policyLogits;  // [B, numActions]
};

struct RecurrentOutput {
    torch::Tensor nextState;
    torch::Tensor valuePrefixLogits, valuePrefix;  // [B, 2S + 1], [B]
    torch::Tensor valueLogits, value;
    torch::Tensor policyLogits;
    LstmState lstm;
};

class Network {
public:
    explicit Network(const Config& config);
    const Config& config() const;

    // obs: [B, stack * obsChannels, obsHeight, obsWidth], raw (obsScale is applied here).
    InitialOutput initialInference(const torch::Tensor& obs);
    // state: [B, channels, h, w]; actions: [B] integer; lstm: from initialLstm() or a
    // previous step.
    RecurrentOutput recurrentInference(const torch::Tensor& state, const torch::Tensor& actions,
                                       const LstmState& lstm);
    LstmState initialLstm(int64_t batch) const;
    // The three functions separately (the learner batches them so that every BatchNorm layer
    // sees one batch per update; see computeLoss): representation h(obs) -> state; dynamics
    // g(state, action, lstm) -> (next state, value-prefix logits, lstm); prediction f(state) ->
    // (value logits, policy logits).
    torch::Tensor represent(const torch::Tensor& obs);
    std::tuple<torch::Tensor, torch::Tensor, LstmState> dynamics(const torch::Tensor& state, const torch::Tensor& actions,
                                                                 const LstmState& lstm);
    std::pair<torch::Tensor, torch::Tensor> predict(const torch::Tensor& state);
    // Consistency branch: projection(flatten(state)), then the projection head when withGrad;
    // without it the projection is returned detached (the target side).
    torch::Tensor project(const torch::Tensor& state, bool withGrad = true);

    // Folded inference (docs/performance.md): in eval mode without gradients, initialInference
    // and recurrentInference run a copy of the network with every BatchNorm folded into the
    // convolution or linear layer before it (the same function within float32 rounding, without
    // the normalization passes). The copy is rebuilt when a weight or running statistic changed
    // (their version counters). Off by default (the layers as trained, for exact comparisons).
    void setFoldedInference(bool on);
    bool foldedInference() const;

    torch::nn::Module& module();  // for checkpoints, optimizers, train()/eval(), to(device)
    void train(bool on = true);
    bool isTraining() const;
    // Training flag of the dynamics network alone (its BatchNorm layers: batch statistics when
    // on, running statistics when off); computeLoss unrolls with it off (docs/rl.md "Loss").
    void setDynamicsTraining(bool on);
    bool isDynamicsTraining() const;
    std::vector<torch::Tensor> parameters() const;
    int64_t parameterCount() const;
    torch::Device device() const;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

} // namespace glimpse::efficientzero
