#pragma once
// Query denoising for LETR training (issue 19; as DN-DETR does for boxes): besides the N learned
// line entities, the coarse decoder gets one extra entity per ground-truth line whose
// positional query embeds that line with its endpoints noised. Its target is known (the line it
// came from), so it needs no Hungarian matching: it teaches the decoder to look where its query
// points and to regress the exact line, from the first step, which set prediction alone learns
// slowly. The learned entities cannot attend to the extra ones (LetrForwardOptions::
// denoiseQueryPos), and inference never has them: the checkpoint layout is LETR's. The encoder
// of noised lines into queries is training-only ("denoise.*" tensors of checkpoint.h5).
//
// Noise: each endpoint coordinate moves by U(-1, 1) * noise * max(length, 0.05) (normalized
// image units; a line's length in them), clamped to [0, 1].
// Loss per decoder layer over the real (unpadded) extra entities: cross entropy towards the
// line class, and the symmetric endpoint L1 distance to its line (loss.h lineDistance), both
// summed and divided by the number of ground-truth lines of the batch (LETR's L1 denominator;
// in a distributed run the whole batch's / W, as for LETR's loss); total = sum over layers of
// clsCoef * cls + lineCoef * l1, scaled by coef in the trainer. With loss.quality_tau > 0 the
// class target is the one a matched entity gets (LetrLossConfig::qualityTau): "line" with
// q = exp(-d / tau), d the entity's own endpoint distance (not differentiated), "no line" with
// 1 - q. The class head is shared: with the hard target it learned two rules for equally placed
// lines (denoising entities p = 1, matched ones p = q), i.e. to tell the two kinds apart.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/models/letr/loss.h"

namespace glimpse::letr {

struct DenoiseConfig {
    bool enabled = false;
    double coef = 1.0;            // weight of the denoising loss beside LETR's
    double noise = 0.2;           // endpoint noise, relative to the line's length
    int64_t maxQueries = 128;     // extra entities per image at most (lines beyond are skipped)

    void validate() const;
    nlohmann::json toJson() const;
    static DenoiseConfig fromJson(const nlohmann::json& j, const std::string& source);
};

// Noised lines of a batch: targets[b] = [M_b, 4] normalized lines; Q = min(max M_b, maxQueries).
struct DenoiseBatch {
    torch::Tensor noised;   // [B, Q, 4] in [0, 1]; zeros where invalid
    torch::Tensor target;   // [B, Q, 4]
    torch::Tensor valid;    // [B, Q] bool
};
// rngs[b] draws image b's noise (the trainer seeds it from (seed, step, row)).
DenoiseBatch makeDenoiseBatch(const std::vector<torch::Tensor>& targets, const DenoiseConfig& cfg,
                              std::vector<std::mt19937_64>& rngs);

// DETR's sine encoding of each coordinate (numFeats per coordinate: sin / cos pairs at
// temperature 10000, the value scaled by 2 pi) -> [..., 4 * numFeats], then an MLP to d.
class LineQueryEncoderImpl : public torch::nn::Module {
public:
    LineQueryEncoderImpl(int64_t hiddenDim, uint64_t seed, int64_t featsPerCoord = 32);
    torch::Tensor forward(const torch::Tensor& lines);   // [B, Q, 4] -> [B, Q, d]
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};

private:
    int64_t feats_;
};
TORCH_MODULE(LineQueryEncoder);
torch::Tensor sineLineEmbedding(const torch::Tensor& lines, int64_t featsPerCoord);

struct DenoiseLoss {
    torch::Tensor total;               // sum over layers, differentiable
    std::vector<double> clsPerLayer, l1PerLayer;
};
// dnLogits [L, B, Q, C+1], dnLines [L, B, Q, 4]; numGt: the denominator (> 0).
DenoiseLoss denoiseLoss(const torch::Tensor& dnLogits, const torch::Tensor& dnLines, const DenoiseBatch& batch,
                        const LetrLossConfig& cfg, double numGt);

} // namespace glimpse::letr
