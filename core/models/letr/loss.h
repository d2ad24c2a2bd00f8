#pragma once
// LETR training losses (dissertation eqs. 2.2-2.7): Hungarian matching of line entities to
// ground truth, classification (cross entropy with a no-object weight, or the focal-style
// eqs. 2.4/2.5), L1 endpoint distance on matched entities (eq. 2.6), deep supervision over
// every decoder layer (heads are shared, so each layer's outputs come from the same heads).
//
// Lines are (x1, y1, x2, y2) normalized by the image's (w, h, w, h). A segment has no
// direction, so the endpoint distance d(a, b) is the smaller of the L1 distances to b and to b
// with its endpoints swapped; it is used both in the matching cost and in the loss.
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace glimpse::letr {

// Optimal assignment for a [R, C] cost matrix (any R, C): returns, for each row, its column
// (-1 for rows left unassigned when R > C). Minimizes the total cost over all assignments
// of min(R, C) pairs. O(min^2 * max) (Jonker-Volgenant style shortest augmenting paths).
std::vector<int64_t> hungarian(const std::vector<double>& cost, int64_t rows, int64_t cols);

struct LetrLossConfig {
    double costClass = 1.0;   // lambda_2 in eq. 2.2 (matching)
    double costLine = 5.0;    // lambda_1 in eq. 2.2 (matching)
    double clsCoef = 1.0;     // lambda_cls in eq. 2.7
    double lineCoef = 5.0;    // lambda_dist in eq. 2.7
    double eosCoef = 0.1;     // weight of no-object entities (alpha_2; alpha_1 = 1)
    bool focal = false;       // eqs. 2.4/2.5 instead of weighted cross entropy
    double gamma = 2.0;       // focal exponent
    // > 0: a matched entity's class target is soft, "line" with probability q = exp(-d / qualityTau)
    // (d: its endpoint L1 distance to its ground truth, not differentiated) and "no line" with
    // 1 - q, so that the score ranks lines by how precisely they are placed (sAP ranks by score).
    // 0: the hard target "line" (LETR's). Not with `focal`.
    double qualityTau = 0.0;
};

// Symmetric endpoint L1 distance of matching rows: pred [K, 4], gt [K, 4] -> [K].
torch::Tensor lineDistance(const torch::Tensor& pred, const torch::Tensor& gt);

struct LineMatch {
    std::vector<int64_t> pred;   // entity index
    std::vector<int64_t> gt;     // ground-truth index, same length
};

// One image: logits [N, C+1], lines [N, 4], gt [M, 4] -> min(N, M) pairs minimizing eq. 2.2:
// costLine * d(pred_i, gt_j) - costClass * p_i, p_i = softmax(logits_i)[0].
LineMatch matchLines(const torch::Tensor& logits, const torch::Tensor& lines, const torch::Tensor& gt,
                     const LetrLossConfig& cfg);

struct LayerLoss {
    torch::Tensor cls;   // scalar, differentiable
    torch::Tensor l1;    // scalar, differentiable
};

// The loss denominators of a batch: sum_i w_i over its entities (w = 1 for the min(N, M_b)
// matched ones of each image, eosCoef for the others) and max(1, its number of gt lines).
// A batch split over R processes (a distributed run) passes the whole batch's values divided
// by R instead of its own, so that the mean of the processes' gradients is the gradient of the
// whole batch's loss (docs/distributed.md).
struct LossNormalizers {
    double clsWeight = 0;
    double numGt = 0;
};
LossNormalizers batchNormalizers(const std::vector<torch::Tensor>& targets, int64_t numEntities, const LetrLossConfig& cfg);

// One decoder layer over a batch: logits [B, N, C+1], lines [B, N, 4], targets[b] = [M_b, 4].
// cls = sum_i w_i * l_i / sum_i w_i (w = 1 matched, eosCoef otherwise; l_i cross entropy, with
// the soft target of qualityTau for matched entities when it is > 0, or the focal terms); l1 = sum of matched distances / max(1, total number of gt lines). With
// `norm`, its clsWeight and numGt are the denominators.
LayerLoss layerLoss(const torch::Tensor& logits, const torch::Tensor& lines,
                    const std::vector<torch::Tensor>& targets, const LetrLossConfig& cfg,
                    const LossNormalizers* norm = nullptr);

struct LetrLoss {
    torch::Tensor total;               // sum over layers of clsCoef * cls + lineCoef * l1
    std::vector<double> clsPerLayer;   // detached values, layer 0 first
    std::vector<double> l1PerLayer;
};

// Deep supervision over a stage's outputs: logits [L, B, N, C+1], lines [L, B, N, 4].
LetrLoss letrLoss(const torch::Tensor& logits, const torch::Tensor& lines,
                  const std::vector<torch::Tensor>& targets, const LetrLossConfig& cfg,
                  const LossNormalizers* norm = nullptr);

} // namespace glimpse::letr
