#pragma once
// CoatTrace: one CoaT run on one image, answering views without the model ("capture, then
// inspect", docs/formats.md "Trace"). A typed wrapper over glimpse::Trace.
//
// Stored (family "coat"; b = conv-attentional module in execution order, 0-based; heads x N x C
// with N = 1 + h*w tokens of the block's scale, token 0 = CLS, token 1 + y*w + x = pixel (y, x)):
//   input/image               uint8   [S, S, 3]     the center crop the network saw (RGB)
//   block_b/q                 float32 [heads, N, C] queries
//   block_b/k_softmax         float32 [heads, N, C] softmax over tokens of the keys
//   block_b/v                 float32 [heads, N, C] values
//   crpe/scale_s/weight_g     float32 [n_g*C, 1, k_g, k_g]  CRPE depthwise kernels of group g
//   crpe/scale_s/bias_g       float32 [n_g*C]              (s = 1..4, absent without CRPE)
//   output/logits, output/probs         float32 [num_classes]
//   cam/maps                  float32 [K, h4, w4]  Grad-CAMs (max 1): the top-5 classes, then
//   cam/classes               int64   [K]          any extra classes asked for at capture
//   cam/maps_s1 .. maps_s3    float32 [K, hs, ws]  the same classes' Grad-CAMs at scales 1..3
//                                                  (absent in traces written before them)
// meta: {"model": "coat", "config": {...}, "original_size": [H0, W0], "input_size": [S, S],
//        "grids": [[h1, w1], ..., [h4, w4]], "num_heads", "head_dims": [C1..C4],
//        "blocks": [{"name": "serial_blocks1.0", "scale": 0, "grid": [h, w]}, ...],
//        "top5": [{"class": k, "name": "...", "prob": p}, ...], "co_scale": "...",
//        "compute": "float32" | "bfloat16" (the products' precision; absent in older traces:
//        float32)}
//
// Views (all exact recomputations of what the forward pass did):
//   effective attention of query token i, head h: w_j = q_i . softmax(K)_j / sqrt(C), so that
//   sum_j w_j v_j is the factorized-attention output of token i (eq. 3.3 written as weights);
//   CRPE window term of token i: t_d = sum_c q_ic W_c[d] v_(i+d),c over the kernel offsets d,
//   plus the bias term sum_c q_ic b_c (sum of the window + bias = sum over channels of CRPE_i).
//   With direct cross-layer attention the cross-scale terms are not part of these views.
// CAM: Grad-CAM on the tokens entering a scale's last block (its last serial block; for CoaT
// scales 2..4 the last parallel group): alpha_c = mean over image tokens of d logit_k / d x_jc,
// cam_j = ReLU(sum_c alpha_c x_jc), divided by its maximum (all zero when the maximum is 0).
// Scale 4 is the classic choice; at small inputs (32 px: a 1x1 grid) it has no spatial extent
// and is constant by construction, so every scale's map is kept.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/coat/model.h"
#include "core/trace.h"

namespace glimpse::coat {

struct CoatPrediction {
    int64_t classIndex = 0;
    std::string name;
    float prob = 0.0f;
};

struct CoatBlockInfo {
    std::string name;   // e.g. "serial_blocks2.1", "parallel_blocks.3.s4"
    int scale = 0;      // 0..3
    Grid grid{0, 0};
};

struct CrpeWindow {
    torch::Tensor window;   // [k, k] contribution of each neighbour (centre = the query pixel)
    float bias = 0.0f;      // sum_c q_ic b_c
    int64_t kernel = 0;
};

class CoatTrace {
public:
    static constexpr int kTopK = 5;

    CoatTrace() = default;
    // Wraps a loaded glimpse::Trace; throws glimpse::Error if it is not a complete CoaT trace.
    explicit CoatTrace(Trace trace);

    // Runs `model` on one preprocessed image (eval mode, grad on for the CAMs; the training flag
    // is restored) and keeps what the views need.
    // camClasses: classes whose Grad-CAM is kept besides the top-5 (checked, duplicates skipped).
    // compute: the precision of the linear layers' and attention's products
    // (CoatForwardOptions::productDtype; kBFloat16 needs a CPU with bfloat16 instructions).
    static CoatTrace capture(CoatModel& model, const CoatImage& image, const std::vector<int64_t>& camClasses = {},
                             torch::ScalarType compute = torch::kFloat);

    static CoatTrace load(const std::string& path);
    void save(const std::string& path) const { trace_.save(path); }
    const Trace& raw() const { return trace_; }
    Trace& raw() { return trace_; }
    int64_t bytes() const { return trace_.bytes(); }

    int numBlocks() const;
    CoatBlockInfo block(int b) const;
    std::vector<int> blocksOfScale(int scale) const;
    int numHeads() const;
    int64_t headDim(int scale) const;
    Grid grid(int scale) const;
    torch::Tensor image() const;   // uint8 [S, S, 3]

    // Effective attention weights of query token `token` (0 = CLS) over all N tokens: [N].
    // head in [0, heads) or -1 for the mean over heads.
    torch::Tensor effectiveWeights(int b, int head, int64_t token) const;
    // The same for the query pixel (y, x) of the block's grid, as a map over its image
    // tokens [h, w]; *clsWeight (optional) receives the weight of the CLS token.
    torch::Tensor effectiveAttention(int b, int head, int64_t y, int64_t x, float* clsWeight = nullptr) const;
    // CLS-token effective attention over the image tokens [h, w].
    torch::Tensor clsAttention(int b, int head) const;
    // CRPE window term of query pixel (y, x) for one head (throws without CRPE).
    CrpeWindow crpeWindow(int b, int head, int64_t y, int64_t x) const;
    bool hasCrpe() const;
    // softmax(K)[:, c] over the image tokens [h, w] (the per-channel key distribution).
    torch::Tensor keyDistribution(int b, int head, int64_t channel) const;
    // All channels of one head as a gallery: [C, h, w].
    torch::Tensor keyGallery(int b, int head) const;

    std::vector<CoatPrediction> top5() const;
    torch::Tensor probs() const;   // [num_classes]
    // The precision the run computed in: "float32" or "bfloat16" (meta "compute").
    std::string compute() const;
    torch::ScalarType computeDtype() const;   // the same as kFloat or kBFloat16
    // Grad-CAM map [h, w] of the k-th stored CAM (0..4: the top-5 classes, best first) at
    // `scale` (0..3; 3 = the last scale, [h4, w4]).
    torch::Tensor cam(int k, int scale = 3) const;
    // Whether the trace holds Grad-CAMs at `scale` (always for 3; older traces only there).
    bool hasCamScale(int scale) const;
    int64_t camClass(int k) const;
    int numCams() const;
    // The stored Grad-CAM of class `classIndex` at `scale`; Error listing the stored classes if
    // absent, or saying the trace has no maps at that scale.
    torch::Tensor camForClass(int64_t classIndex, int scale = 3) const;

private:
    void validate() const;
    void checkBlock(int b, int head) const;
    std::string key(int b, const char* what) const { return "block_" + std::to_string(b) + "/" + what; }
    static std::string camKey(int scale) { return scale == 3 ? "cam/maps" : "cam/maps_s" + std::to_string(scale + 1); }

    Trace trace_{"coat"};
};

// Grad-CAM of `classIndex` for a preprocessed image (definition above) at `scale` (0..3),
// [h, w] of that scale's grid, max 1.
// compute: the products' precision (CoatTrace::capture), that of the trace the map joins.
torch::Tensor gradCam(CoatModel& model, const torch::Tensor& image, int64_t classIndex, int scale = 3,
                      torch::ScalarType compute = torch::kFloat);

// Preprocesses `rgb`, captures the trace (see CoatTrace::capture).
CoatTrace runCoat(CoatModel& model, const cv::Mat& rgb, const std::vector<int64_t>& camClasses = {},
                  torch::ScalarType compute = torch::kFloat);

} // namespace glimpse::coat
