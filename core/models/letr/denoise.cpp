#include "core/models/letr/denoise.h"

#include <cmath>

#include "core/error.h"
#include "core/train/json_config.h"

namespace glimpse::letr {

void DenoiseConfig::validate() const {
    auto bad = [](const std::string& w) { throw Error("LETR training config: denoise." + w); };
    if (!(coef >= 0 && coef <= 1000)) bad("coef must be in [0, 1000]");
    if (!(noise >= 0 && noise <= 2)) bad("noise must be in [0, 2]");
    if (maxQueries < 1 || maxQueries > 4096) bad("max_queries must be in 1..4096");
}

nlohmann::json DenoiseConfig::toJson() const {
    return {{"enabled", enabled}, {"coef", coef}, {"noise", noise}, {"max_queries", maxQueries}};
}

DenoiseConfig DenoiseConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    const std::string w = source + " (denoise)";
    train::checkKeys(j, {"enabled", "coef", "noise", "max_queries"}, w);
    DenoiseConfig c;
    train::readKey(j, "enabled", c.enabled, w);
    train::readKey(j, "coef", c.coef, w);
    train::readKey(j, "noise", c.noise, w);
    train::readKey(j, "max_queries", c.maxQueries, w);
    return c;
}

DenoiseBatch makeDenoiseBatch(const std::vector<torch::Tensor>& targets, const DenoiseConfig& cfg,
                              std::vector<std::mt19937_64>& rngs) {
    const int64_t B = int64_t(targets.size());
    if (rngs.size() != targets.size()) throw Error("LETR denoising: one generator per image");
    int64_t Q = 0;
    for (const auto& t : targets) Q = std::max(Q, t.numel() ? t.size(0) : int64_t(0));
    Q = std::min(Q, cfg.maxQueries);
    DenoiseBatch d;
    d.noised = torch::zeros({B, Q, 4});
    d.target = torch::zeros({B, Q, 4});
    d.valid = torch::zeros({B, Q}, torch::kBool);
    auto nz = d.noised.accessor<float, 3>();
    auto tg = d.target.accessor<float, 3>();
    auto va = d.valid.accessor<bool, 2>();
    std::uniform_real_distribution<double> U(-1.0, 1.0);
    for (int64_t b = 0; b < B; ++b) {
        if (!targets[size_t(b)].numel()) continue;
        const torch::Tensor t = targets[size_t(b)].to(torch::kFloat32).reshape({-1, 4}).contiguous();
        auto ta = t.accessor<float, 2>();
        const int64_t M = std::min(t.size(0), Q);
        for (int64_t q = 0; q < M; ++q) {
            const double len = std::hypot(double(ta[q][2] - ta[q][0]), double(ta[q][3] - ta[q][1]));
            const double scale = cfg.noise * std::max(len, 0.05);
            va[b][q] = true;
            for (int k = 0; k < 4; ++k) {
                tg[b][q][k] = ta[q][k];
                nz[b][q][k] = float(std::clamp(double(ta[q][k]) + U(rngs[size_t(b)]) * scale, 0.0, 1.0));
            }
        }
    }
    return d;
}

torch::Tensor sineLineEmbedding(const torch::Tensor& lines, int64_t featsPerCoord) {
    const int64_t F = featsPerCoord;
    auto i = torch::arange(F, lines.options().dtype(torch::kFloat32));
    auto dimT = torch::pow(10000.0, 2 * torch::floor(i / 2) / double(F));   // DETR: T^(2 floor(i/2) / F)
    auto x = lines.to(torch::kFloat32).unsqueeze(-1) * (2 * M_PI) / dimT;    // [..., 4, F]
    auto even = torch::sin(x.index({"...", torch::indexing::Slice(0, torch::indexing::None, 2)}));
    auto odd = torch::cos(x.index({"...", torch::indexing::Slice(1, torch::indexing::None, 2)}));
    auto e = torch::stack({even, odd}, -1).flatten(-2);                      // [..., 4, F]: sin, cos interleaved
    return e.flatten(-2);                                                    // [..., 4 F]
}

LineQueryEncoderImpl::LineQueryEncoderImpl(int64_t hiddenDim, uint64_t seed, int64_t featsPerCoord) : feats_(featsPerCoord) {
    fc1 = register_module("fc1", torch::nn::Linear(4 * featsPerCoord, hiddenDim));
    fc2 = register_module("fc2", torch::nn::Linear(hiddenDim, hiddenDim));
    // PyTorch's default Linear init, drawn from `seed` (the global RNG is not touched).
    torch::NoGradGuard ng;
    at::Generator gen = at::detail::createCPUGenerator(seed ^ 0xde70);
    for (auto* l : {&fc1, &fc2}) {
        const double bound = 1.0 / std::sqrt(double((*l)->weight.size(1)));
        (*l)->weight.uniform_(-bound, bound, gen);
        (*l)->bias.uniform_(-bound, bound, gen);
    }
}

torch::Tensor LineQueryEncoderImpl::forward(const torch::Tensor& lines) {
    return fc2(torch::relu(fc1(sineLineEmbedding(lines, feats_).to(fc1->weight.device()))));
}

DenoiseLoss denoiseLoss(const torch::Tensor& dnLogits, const torch::Tensor& dnLines, const DenoiseBatch& batch,
                        const LetrLossConfig& cfg, double numGt) {
    if (dnLogits.dim() != 4 || dnLines.dim() != 4 || dnLines.size(2) != batch.valid.size(1) ||
        dnLines.size(1) != batch.valid.size(0))
        throw Error("LETR denoising loss: outputs and batch differ in shape");
    if (!(numGt > 0)) throw Error("LETR denoising loss: the denominator must be > 0");
    const auto dev = dnLines.device();
    const auto valid = batch.valid.to(dev);
    const auto w = valid.to(torch::kFloat32);                 // [B, Q]
    const auto target = batch.target.to(dev);
    DenoiseLoss out;
    for (int64_t l = 0; l < dnLogits.size(0); ++l) {
        const auto logp = torch::log_softmax(dnLogits[l], -1);
        const auto dist = lineDistance(dnLines[l], target);          // [B, Q]
        auto perEntity = -logp.select(-1, 0);                          // hard target: log p(line)
        if (cfg.qualityTau > 0) {
            // The matched entities' soft target (loss.h), so that both kinds of entity teach the
            // shared class head the same rule.
            const auto q = torch::exp(-dist.detach() / cfg.qualityTau);
            perEntity = -(q * logp.select(-1, 0) + (1 - q) * logp.select(-1, logp.size(-1) - 1));
        }
        auto cls = (perEntity * w).sum() / numGt;
        auto l1 = (dist * w).sum() / numGt;
        auto t = cfg.clsCoef * cls + cfg.lineCoef * l1;
        out.total = out.total.defined() ? out.total + t : t;
        out.clsPerLayer.push_back(cls.item<double>());
        out.l1PerLayer.push_back(l1.item<double>());
    }
    return out;
}

} // namespace glimpse::letr
