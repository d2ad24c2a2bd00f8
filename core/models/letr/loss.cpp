#include "core/models/letr/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::letr {

std::vector<int64_t> hungarian(const std::vector<double>& cost, int64_t rows, int64_t cols) {
    if (rows < 0 || cols < 0 || int64_t(cost.size()) != rows * cols)
        throw Error("hungarian: cost has " + std::to_string(cost.size()) + " entries, expected " +
                    std::to_string(rows) + "x" + std::to_string(cols));
    std::vector<int64_t> result(size_t(rows), -1);
    if (rows == 0 || cols == 0) return result;
    for (double c : cost)
        if (!std::isfinite(c)) throw Error("hungarian: cost matrix holds NaN or infinite values");
    // Work on n <= m (rows of the working matrix are the smaller side).
    const bool transposed = rows > cols;
    const int64_t n = transposed ? cols : rows, m = transposed ? rows : cols;
    auto a = [&](int64_t i, int64_t j) {   // 1-based
        return transposed ? cost[size_t((j - 1) * cols + (i - 1))] : cost[size_t((i - 1) * cols + (j - 1))];
    };
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> u(size_t(n + 1), 0.0), v(size_t(m + 1), 0.0);
    std::vector<int64_t> p(size_t(m + 1), 0), way(size_t(m + 1), 0);
    for (int64_t i = 1; i <= n; ++i) {
        p[0] = i;
        int64_t j0 = 0;
        std::vector<double> minv(size_t(m + 1), inf);
        std::vector<char> used(size_t(m + 1), 0);
        do {
            used[size_t(j0)] = 1;
            const int64_t i0 = p[size_t(j0)];
            double delta = inf;
            int64_t j1 = -1;
            for (int64_t j = 1; j <= m; ++j) {
                if (used[size_t(j)]) continue;
                const double cur = a(i0, j) - u[size_t(i0)] - v[size_t(j)];
                if (cur < minv[size_t(j)]) {
                    minv[size_t(j)] = cur;
                    way[size_t(j)] = j0;
                }
                if (minv[size_t(j)] < delta) {
                    delta = minv[size_t(j)];
                    j1 = j;
                }
            }
            if (j1 < 0) throw Error("hungarian: cost matrix holds NaN or infinite values");
            for (int64_t j = 0; j <= m; ++j) {
                if (used[size_t(j)]) {
                    u[size_t(p[size_t(j)])] += delta;
                    v[size_t(j)] -= delta;
                } else {
                    minv[size_t(j)] -= delta;
                }
            }
            j0 = j1;
        } while (p[size_t(j0)] != 0);
        do {
            const int64_t j1 = way[size_t(j0)];
            p[size_t(j0)] = p[size_t(j1)];
            j0 = j1;
        } while (j0);
    }
    for (int64_t j = 1; j <= m; ++j) {
        if (p[size_t(j)] == 0) continue;
        const int64_t i = p[size_t(j)] - 1, col = j - 1;   // working row i -> column col
        if (transposed) result[size_t(col)] = i;
        else result[size_t(i)] = col;
    }
    return result;
}

torch::Tensor lineDistance(const torch::Tensor& pred, const torch::Tensor& gt) {
    auto direct = (pred - gt).abs().sum(-1);
    auto swapped = (pred - gt.index_select(-1, torch::tensor({2, 3, 0, 1}, torch::kLong).to(gt.device())))
                       .abs()
                       .sum(-1);
    return torch::minimum(direct, swapped);
}

LineMatch matchLines(const torch::Tensor& logits, const torch::Tensor& lines, const torch::Tensor& gt,
                     const LetrLossConfig& cfg) {
    LineMatch m;
    const int64_t n = lines.size(0), k = gt.numel() ? gt.size(0) : 0;
    if (k == 0 || n == 0) return m;
    torch::NoGradGuard ng;
    auto prob = torch::softmax(logits.to(torch::kDouble), -1).select(-1, 0);          // [N]
    auto pl = lines.to(torch::kDouble).unsqueeze(1).expand({n, k, 4});
    auto gl = gt.to(torch::kDouble).to(lines.device()).unsqueeze(0).expand({n, k, 4});
    auto c = cfg.costLine * lineDistance(pl, gl) - cfg.costClass * prob.unsqueeze(1);  // [N, K]
    c = c.cpu().contiguous();
    std::vector<double> cost(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    auto assign = hungarian(cost, n, k);
    for (int64_t i = 0; i < n; ++i)
        if (assign[size_t(i)] >= 0) {
            m.pred.push_back(i);
            m.gt.push_back(assign[size_t(i)]);
        }
    return m;
}

LossNormalizers batchNormalizers(const std::vector<torch::Tensor>& targets, int64_t numEntities, const LetrLossConfig& cfg) {
    double matched = 0, gt = 0;
    for (const auto& g : targets) {
        const int64_t m = g.numel() ? g.size(0) : 0;
        gt += double(m);
        matched += double(std::min(m, numEntities));
    }
    const double all = double(numEntities) * double(targets.size());
    return {matched + cfg.eosCoef * (all - matched), std::max(1.0, gt)};
}

LayerLoss layerLoss(const torch::Tensor& logits, const torch::Tensor& lines,
                    const std::vector<torch::Tensor>& targets, const LetrLossConfig& cfg, const LossNormalizers* norm) {
    const int64_t B = logits.size(0), N = logits.size(1), C1 = logits.size(2);
    if (int64_t(targets.size()) != B)
        throw Error("LETR loss: " + std::to_string(targets.size()) + " targets for a batch of " + std::to_string(B));
    const auto dev = logits.device();
    auto target = torch::full({B, N}, C1 - 1, torch::TensorOptions().dtype(torch::kLong).device(dev));
    std::vector<torch::Tensor> predSel, gtSel;
    auto quality = torch::ones({B, N}, logits.options());   // soft "line" target of matched entities
    int64_t numGt = 0;
    for (int64_t b = 0; b < B; ++b) {
        const auto& g = targets[size_t(b)];
        numGt += g.numel() ? g.size(0) : 0;
        auto m = matchLines(logits[b], lines[b], g, cfg);
        if (m.pred.empty()) continue;
        auto pi = torch::tensor(m.pred, torch::kLong).to(dev), gi = torch::tensor(m.gt, torch::kLong).to(dev);
        target[b].index_fill_(0, pi, 0);
        predSel.push_back(lines[b].index_select(0, pi));
        gtSel.push_back(g.to(dev, torch::kFloat).index_select(0, gi));
        if (cfg.qualityTau > 0) {
            torch::NoGradGuard ng;
            auto d = lineDistance(predSel.back().to(logits.dtype()), gtSel.back().to(logits.dtype()));
            quality[b].index_copy_(0, pi, torch::exp(-d / cfg.qualityTau));
        }
    }
    auto logp = torch::log_softmax(logits, -1);                    // [B, N, C+1]
    auto isObj = target.ne(C1 - 1);
    auto weight = torch::where(isObj, torch::ones({}, logits.options()), torch::full({}, cfg.eosCoef, logits.options()));
    auto logpT = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1);   // log prob of the target class
    torch::Tensor perEntity;
    if (cfg.focal) {
        // matched: -(1 - p)^g log p; unmatched: -p^g log(1 - p); p = prob of the line class.
        auto p = logp.select(-1, 0).exp();
        auto mod = torch::where(isObj, (1 - p).pow(cfg.gamma), p.pow(cfg.gamma));
        perEntity = -mod * logpT;
    } else if (cfg.qualityTau > 0) {
        // matched: -(q log p_line + (1 - q) log p_none); unmatched: -log p_none.
        auto soft = quality * logp.select(-1, 0) + (1 - quality) * logp.select(-1, C1 - 1);
        perEntity = torch::where(isObj, -soft, -logpT);
    } else {
        perEntity = -logpT;
    }
    LayerLoss out;
    out.cls = norm ? (weight * perEntity).sum() / norm->clsWeight : (weight * perEntity).sum() / weight.sum();
    const double l1Norm = norm ? norm->numGt : double(std::max<int64_t>(1, numGt));
    if (predSel.empty()) {
        out.l1 = lines.sum() * 0.0;
    } else {
        out.l1 = lineDistance(torch::cat(predSel), torch::cat(gtSel)).sum() / l1Norm;
    }
    return out;
}

LetrLoss letrLoss(const torch::Tensor& logits, const torch::Tensor& lines, const std::vector<torch::Tensor>& targets,
                  const LetrLossConfig& cfg, const LossNormalizers* norm) {
    LetrLoss out;
    const int64_t L = logits.size(0);
    for (int64_t l = 0; l < L; ++l) {
        auto ll = layerLoss(logits[l], lines[l], targets, cfg, norm);
        auto t = cfg.clsCoef * ll.cls + cfg.lineCoef * ll.l1;
        out.total = out.total.defined() ? out.total + t : t;
        out.clsPerLayer.push_back(ll.cls.item<double>());
        out.l1PerLayer.push_back(ll.l1.item<double>());
    }
    return out;
}

} // namespace glimpse::letr
