#pragma once
// Dense auxiliary supervision of LETR's backbone during training (issue 19; docs/decisions.md
// "LETR training recipe"). Training-only: the head's weights live in the trainer's checkpoint
// ("aux.*" tensors), never in model.h5, so the inference architecture and the checkpoint
// layout stay LETR's.
//
// Set prediction converges slowly when the backbone starts from scratch: the decoder has to
// find lines in features that do not yet encode them. Dense per-cell targets computed from the
// exact ground truth (as line-heatmap / junction / direction-field methods such as L-CNN, AFM
// and HAWP use) give every cell of every image a gradient from the first step. The head reads
// only C4 and C5, the levels the fine and coarse stages read, so what it learns has to be in
// those features.
//
// Targets, on a grid of `stride`-pixel cells (cell (i, j) covers pixels [j*s, (j+1)*s) x
// [i*s, (i+1)*s); distances in cells, measured from the cell centre ((j + 0.5) s, (i + 0.5) s)):
//   line      max(0, 1 - d / lineRadius), d = distance to the nearest segment
//   junction  max over endpoints e of exp(-|c - e|^2 / (2 junctionSigma^2))
//   direction (cos 2t, sin 2t) of the nearest segment's angle t (a segment has no direction,
//             so the angle is doubled); defined where d < lineRadius (mask)
//   offset    (e - c) of the first endpoint e inside the cell, in cells, in [-0.5, 0.5);
//             defined in cells holding an endpoint (mask)
// Channels of the prediction: 0 line logit, 1 junction logit, 2-3 direction, 4-5 offset
// (tanh / 2).
//
// Loss (per image, then the mean over images): binary cross entropy with logits on line and
// junction (mean over cells), L1 on direction and offset over their masks (mean over masked
// cells; 0 when the mask is empty); total = line + junction + direction + offset, scaled by
// the config's coef in the trainer.
//
// Position (positionCoef > 0): LETR's line head regresses absolute endpoints from the decoder's
// content, which gets image content only through the cross-attention's values: the encoder
// memory without its positional encoding. So the backbone features must carry where they are.
// A 1x1 conv on C5 and one on C4 (no spatial context: the features themselves must hold it)
// regress each cell's centre ((j + 0.5) * stride / W, (i + 0.5) * stride / H), L1, mean over
// cells, positionCoef * (C4 + C5 term) added to the total.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace glimpse::letr {

struct DenseAuxConfig {
    bool enabled = false;
    double coef = 1.0;            // weight of the dense loss beside LETR's
    int64_t channels = 64;        // width of the head
    double lineRadius = 1.0;      // cells
    double junctionSigma = 1.0;   // cells
    int64_t stride = 8;           // pixels per target cell (the head upsamples C4 by 16 / stride)
    double positionCoef = 1.0;    // weight of the cell-position regression (0: off)

    void validate() const;        // glimpse::Error naming the key
    nlohmann::json toJson() const;
    static DenseAuxConfig fromJson(const nlohmann::json& j, const std::string& source);
};

struct DenseTargets {
    torch::Tensor line;        // [gh, gw] in [0, 1]
    torch::Tensor junction;    // [gh, gw] in [0, 1]
    torch::Tensor direction;   // [2, gh, gw]
    torch::Tensor dirMask;     // [gh, gw] bool
    torch::Tensor offset;      // [2, gh, gw]
    torch::Tensor offsetMask;  // [gh, gw] bool
};

// Targets for one image: `lines` [M, 4] in pixels (x1, y1, x2, y2) of an image whose grid has
// gh x gw cells of cfg.stride pixels. Degenerate (zero-length) segments count as points.
DenseTargets denseTargets(const torch::Tensor& lines, int64_t gh, int64_t gw, const DenseAuxConfig& cfg);

// The head: lateral 1x1 convs of C4 and C5 to `channels`, C5 upsampled to C4's size and added,
// 3x3 conv + ReLU, bilinear upsampling to the target grid, 3x3 conv + ReLU, 1x1 conv to 6
// channels.
class DenseLineHeadImpl : public torch::nn::Module {
public:
    DenseLineHeadImpl(int64_t c4Channels, int64_t c5Channels, const DenseAuxConfig& cfg, uint64_t seed);
    // One image: c4 [C4, h4, w4], c5 [C5, h5, w5] -> [6, gh, gw].
    torch::Tensor forward(const torch::Tensor& c4, const torch::Tensor& c5, int64_t gh, int64_t gw);

    // Cell centres regressed from the features alone (1x1 convs): [2, h, w] (x, y) per level.
    torch::Tensor position4(const torch::Tensor& c4) { return pos4(c4.unsqueeze(0)).squeeze(0); }
    torch::Tensor position5(const torch::Tensor& c5) { return pos5(c5.unsqueeze(0)).squeeze(0); }

    torch::nn::Conv2d lateral4{nullptr}, lateral5{nullptr}, fuse{nullptr}, refine{nullptr}, out{nullptr};
    torch::nn::Conv2d pos4{nullptr}, pos5{nullptr};
};
TORCH_MODULE(DenseLineHead);

struct DenseLoss {
    torch::Tensor total;   // scalar, differentiable (line + junction + direction + offset + positionCoef * position)
    double line = 0, junction = 0, direction = 0, offset = 0, position = 0;   // detached, means over images
};

// The normalized centres of an h x w grid of `stride`-pixel cells over an H x W image: [2, h, w].
torch::Tensor cellCentres(int64_t h, int64_t w, int64_t stride, int64_t H, int64_t W);

// pred [6, gh, gw] of one image against its targets.
DenseLoss denseLoss(const torch::Tensor& pred, const DenseTargets& t);

// The batch: per image, its C4 and C5 features (levels 4 and 5 of LetrOutput::features), its
// input size (H, W) and its lines [M, 4] normalized by (W, H, W, H); mean over images.
// `levels`: the backbone levels of the two feature lists (their strides are 2^level).
// `dtype` kBFloat16 runs the head's convolutions under autocast (bf16_backbone training); the
// maps, targets and losses stay float32.
DenseLoss denseBatchLoss(DenseLineHead& head, const std::vector<torch::Tensor>& c4,
                         const std::vector<torch::Tensor>& c5, const std::vector<std::array<int64_t, 2>>& inputSizes,
                         const std::vector<torch::Tensor>& targets, const DenseAuxConfig& cfg,
                         std::array<int, 2> levels = {4, 5}, torch::ScalarType dtype = torch::kFloat);

// ---- position in the encoder memory (training only) ------------------------------------------
// The C4 / C5 term above cannot be met everywhere: a cell whose receptive field does not reach
// the image border (resnet10's C5 sees 195 pixels, C4 99) computes the same features wherever
// it is, so nothing in the backbone can tell it its absolute position. The encoder can: its
// attention weights depend on the positional encoding, so a cell can mix what it reads from
// the borders in proportions set by its own position. What the decoder's values read is the
// encoder output (the memory), so that is where the position must be. This head regresses each
// memory cell's normalized centre ((j + 0.5) * stride / W, (i + 0.5) * stride / H) by one linear
// map of the memory per stage; loss: L1, mean over the un-padded cells and both coordinates,
// mean over the batch's images. Training-only ("mempos.*" tensors of checkpoint.h5).
class MemoryPositionHeadImpl : public torch::nn::Module {
public:
    MemoryPositionHeadImpl(int64_t hiddenDim, uint64_t seed);
    torch::nn::Linear coarse{nullptr}, fine{nullptr};
};
TORCH_MODULE(MemoryPositionHead);

// memory [B, h*w, d] of a stage reading backbone level `level` (stride 2^level); validSizes:
// per image the (h, w) of its un-padded part; inputSizes: per image (H, W) of its input.
// `map`: the stage's linear map. Returns the mean L1 (a differentiable scalar).
torch::Tensor memoryPositionLoss(torch::nn::Linear& map, const torch::Tensor& memory, int64_t h, int64_t w,
                                 const std::vector<std::array<int64_t, 2>>& validSizes,
                                 const std::vector<std::array<int64_t, 2>>& inputSizes, int level);

} // namespace glimpse::letr
