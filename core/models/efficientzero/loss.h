#pragma once
// The EfficientZero training loss (dissertation eq. 5.3 with the coefficients of Table 5.8;
// docs/rl.md "Loss"): over an unroll of K steps from a sampled position,
//   sum_k [ lambda2 CE(value_k, z_{t+k}) + lambda1 CE(policy_k, pi_{t+k}) ]        k = 0..K
// + sum_k [ CE(value_prefix_k, u_{t+k}) + lambda3 mask_k (-cos(proj head(s_k), proj(s'_{t+k}))) ] k = 1..K
// with categorical cross-entropies against two-hot supports of h(target) for value and value
// prefix and against the search's visit distribution for the policy; lambda1 = 1, lambda2 =
// 0.25, lambda3 = 2. Gradients into the unrolled dynamics are halved at every step (MuZero);
// samples are weighted by their importance weights. The learner backpropagates total / K
// (EfficientZero's gradient scale 1 / unroll) plus weight decay in the optimizer.
#include <torch/types.h>

#include "core/models/efficientzero/model.h"

namespace glimpse::efficientzero {

struct LossWeights {
    double valuePrefix = 1.0;
    double policy = 1.0;          // lambda1
    double value = 0.25;          // lambda2
    double consistency = 2.0;     // lambda3
    double dynamicsGradScale = 0.5;
};

// One training batch; B samples, K unroll steps, A actions.
struct Batch {
    torch::Tensor obs;           // [B, stack*C, H, W] at t
    torch::Tensor nextObs;       // [B, K, stack*C, H, W] at t+1..t+K (consistency targets)
    torch::Tensor actions;       // [B, K] int64
    torch::Tensor valuePrefix;   // [B, K] scalar targets
    torch::Tensor value;         // [B, K+1] scalar n-step targets
    torch::Tensor policy;        // [B, K+1, A] visit distributions (zeros past the end)
    torch::Tensor mask;          // [B, K+1] 1 while t+k is inside the episode
    torch::Tensor weights;       // [B] importance weights
};

struct LossTerms {
    torch::Tensor total;         // weighted batch mean of the per-sample loss (with grad)
    // Unweighted batch means of each term (summed over the unroll), detached:
    double value = 0, valuePrefix = 0, policy = 0, consistency = 0;
    torch::Tensor priorities;    // [B] |predicted value - target| at k = 0, detached
    torch::Tensor valueLogits0;  // [B, 2S + 1] predicted value logits at k = 0, detached
    torch::Tensor valuePrefixLogits;  // [K, B, 2S + 1] predicted value-prefix logits, detached
};

// -sum(target * log_softmax(logits)) over the last dimension.
torch::Tensor softCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target);
// x in the forward pass, gradient multiplied by `scale` in the backward pass.
torch::Tensor scaleGradient(const torch::Tensor& x, double scale);

// Checks the batch's shapes against the network's config (glimpse::Error naming the tensor).
void validateBatch(const Batch& batch, const Config& config);
LossTerms computeLoss(Network& net, const Batch& batch, const LossWeights& weights = {});

} // namespace glimpse::efficientzero
