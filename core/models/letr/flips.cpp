#include "core/models/letr/flips.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"

namespace glimpse::letr {

void checkFlipViews(int views, const char* what) {
    if (views != 1 && views != 2 && views != 4)
        throw Error(std::string(what) + " must be 1, 2 or 4 (views of the image), got " + std::to_string(views));
}

namespace {

void checkView(int view) {
    if (view < 0 || view > 3) throw Error("flip view must be 0..3, got " + std::to_string(view));
}

} // namespace

torch::Tensor flipView(const torch::Tensor& image, int view) {
    checkView(view);
    const int64_t d = image.dim();
    switch (view) {
    case 0: return image;
    case 1: return image.flip({d - 1});
    case 2: return image.flip({d - 2});
    default: return image.flip({d - 2, d - 1});
    }
}

torch::Tensor unflipLines(const torch::Tensor& lines, int view) {
    checkView(view);
    if (view == 0) return lines;
    torch::Tensor out = lines.clone();
    using torch::indexing::Slice;
    if (view == 1 || view == 3) {
        out.index_put_({"...", Slice(0, 4, 2)}, 1.0 - lines.index({"...", Slice(0, 4, 2)}));
    }
    if (view == 2 || view == 3) {
        out.index_put_({"...", Slice(1, 4, 2)}, 1.0 - lines.index({"...", Slice(1, 4, 2)}));
    }
    return out;
}

std::pair<torch::Tensor, torch::Tensor> mergeFlipViews(const torch::Tensor& lines, const torch::Tensor& probs,
                                                        double matchRadius) {
    if (lines.dim() != 3 || lines.size(2) != 4 || probs.dim() != 2 || probs.size(0) != lines.size(0) ||
        probs.size(1) != lines.size(1))
        throw Error("mergeFlipViews: lines must be [V, N, 4] and probs [V, N]");
    const int64_t V = lines.size(0), N = lines.size(1);
    if (V == 1) return {lines[0], probs[0]};
    const auto L = lines.to(torch::kCPU, torch::kDouble).contiguous();
    const auto P = probs.to(torch::kCPU, torch::kDouble).contiguous();
    const auto l = L.accessor<double, 3>();
    const auto p = P.accessor<double, 2>();
    const double r2 = matchRadius * matchRadius;

    std::vector<int64_t> order(static_cast<size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[0][a] > p[0][b]; });

    std::vector<std::array<double, 4>> sum(static_cast<size_t>(N));
    std::vector<double> count(static_cast<size_t>(N), 1.0), score(static_cast<size_t>(N));
    for (int64_t k = 0; k < N; ++k) {
        for (int c = 0; c < 4; ++c) sum[size_t(k)][size_t(c)] = l[0][k][c];
        score[size_t(k)] = p[0][k];
    }
    for (int64_t v = 1; v < V; ++v) {
        std::vector<char> taken(static_cast<size_t>(N), 0);
        for (int64_t k : order) {
            double best = std::numeric_limits<double>::infinity();
            int64_t bj = -1;
            bool bswap = false;
            for (int64_t j = 0; j < N; ++j) {
                if (taken[size_t(j)]) continue;
                double same = 0, swapped = 0;
                for (int c = 0; c < 4; ++c) {
                    const double ds = l[0][k][c] - l[v][j][c];
                    const double dw = l[0][k][c] - l[v][j][(c + 2) % 4];
                    same += ds * ds;
                    swapped += dw * dw;
                }
                const double d = std::min(same, swapped);
                if (d < best) {
                    best = d;
                    bj = j;
                    bswap = swapped < same;
                }
            }
            if (bj < 0 || best >= r2) continue;
            taken[size_t(bj)] = 1;
            for (int c = 0; c < 4; ++c) sum[size_t(k)][size_t(c)] += l[v][bj][bswap ? (c + 2) % 4 : c];
            count[size_t(k)] += 1;
            score[size_t(k)] += p[v][bj];
        }
    }
    torch::Tensor outLines = torch::empty({N, 4}, torch::kDouble);
    torch::Tensor outProbs = torch::empty({N}, torch::kDouble);
    auto ol = outLines.accessor<double, 2>();
    auto op = outProbs.accessor<double, 1>();
    for (int64_t k = 0; k < N; ++k) {
        for (int c = 0; c < 4; ++c) ol[k][c] = sum[size_t(k)][size_t(c)] / count[size_t(k)];
        op[k] = score[size_t(k)] / double(V);
    }
    return {outLines.to(lines.options()), outProbs.to(probs.options())};
}

namespace {

// logits [N, C + 1] whose softmax has class 0 = probs, the other classes in their old proportions.
torch::Tensor logitsFor(const torch::Tensor& logits, const torch::Tensor& probs) {
    const auto old = torch::softmax(logits.to(torch::kFloat), -1);
    const auto p0 = probs.to(torch::kFloat).clamp(1e-7, 1.0 - 1e-7);
    const auto rest = old.narrow(-1, 1, old.size(-1) - 1);
    const auto restSum = rest.sum(-1, true).clamp_min(1e-12);
    const auto scaled = rest / restSum * (1.0 - p0).unsqueeze(-1);
    return torch::cat({p0.unsqueeze(-1), scaled}, -1).clamp_min(1e-12).log().to(logits.dtype());
}

} // namespace

LetrOutput forwardFlipEnsemble(LetrModel& model, const torch::Tensor& image, int views,
                               const LetrForwardOptions& options, double matchRadius) {
    checkFlipViews(views);
    if (image.dim() != 3) throw Error("forwardFlipEnsemble: image must be [3, H, W]");
    std::vector<torch::Tensor> batch;
    for (int v = 0; v < views; ++v) batch.push_back(flipView(image, v).contiguous());
    LetrOutput out = model.forward(batch, options);
    if (views == 1) return out;
    torch::NoGradGuard noGrad;
    for (auto& stage : out.stages) {
        for (int64_t layer = 0; layer < stage.lines.size(0); ++layer) {
            std::vector<torch::Tensor> ls;
            for (int v = 0; v < views; ++v) ls.push_back(unflipLines(stage.lines[layer][v], v));
            const auto probs = torch::softmax(stage.logits[layer].to(torch::kFloat), -1).select(-1, 0);
            auto [ml, mp] = mergeFlipViews(torch::stack(ls), probs, matchRadius);
            stage.lines[layer][0].copy_(ml);
            stage.logits[layer][0].copy_(logitsFor(stage.logits[layer][0], mp));
        }
    }
    return out;
}

} // namespace glimpse::letr
