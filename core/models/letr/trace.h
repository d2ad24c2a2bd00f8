#pragma once
// LetrTrace: one LETR run on one image, answering views without the model
// ("capture, then inspect", docs/formats.md "Trace"). A typed wrapper over glimpse::Trace.
//
// Stored (family "letr"; S = coarse | fine; l = decoder layer, 0-based; N entities, d width,
// h x w the stage's un-padded feature map, H x W the network input):
//   input/image                           uint8 [H, W, 3]   resized RGB the network saw
//   S/mask                                uint8 [h, w]      1 = padding (all 0: traces are cropped)
//   S/memory, S/pos                       [h*w, d]          encoder output, sine encoding
//   S/query_pos                           [N, d]            coarse: query_embed; fine: coarse last output
//   S/layer_l/self_in                     [N, d]            tgt entering layer l (absent for l = 0: zeros)
//   S/layer_l/cross_in                    [N, d]            tgt after the self-attn block
//   S/layer_l/self_attn/in_proj_weight_qk [2d, d]           rows q, k of self_attn.in_proj_weight
//   S/layer_l/self_attn/in_proj_bias_qk   [2d]
//   S/layer_l/cross_attn/in_proj_weight_qk, S/layer_l/cross_attn/in_proj_bias_qk
//                                                           same for multihead_attn
//   S/layer_l/endpoints                   float32 [N, 4]    (x1, y1, x2, y2) in original pixels
//   S/layer_l/scores                      float32 [N]       softmax probability of class 0
// States (memory, pos, query_pos, self_in, cross_in) are float32, or float16 with
// LetrTracePrecision::Float16; weights and predictions are always float32.
// meta: {"model": "letr", "config": {...}, "original_size": [H0, W0], "input_size": [H, W],
//        "stages": ["coarse", "fine"], "decoder_layers": [6, 6], "num_queries", "hidden_dim",
//        "nheads", "feature_size": {"coarse": [h, w], "fine": [h, w]},
//        "levels": {"coarse": 5, "fine": 4}, "precision": "float32" | "float16", ...}
//
// Attention is recomputed exactly on demand: the cross-attention of entity e at layer l is
// softmax_j(q_e . k_j / sqrt(d_head)) with q = W_q (cross_in_e + query_pos_e) + b_q and
// k_j = W_k (memory_j + pos_j) + b_k, per head; self-attention the same over the N entities
// with q = k = self_in + query_pos.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/letr/model.h"
#include "core/trace.h"

namespace glimpse::letr {

enum class LetrTracePrecision { Float32, Float16 };

struct LetrLine {
    float x1, y1, x2, y2, score;
    int64_t entity;
};

class LetrTrace {
public:
    LetrTrace() = default;
    // Wraps a loaded glimpse::Trace; throws glimpse::Error if it is not a complete LETR trace.
    explicit LetrTrace(Trace trace);

    // Builds the trace of image `index` of a forward run made with options.record = true.
    static LetrTrace capture(const LetrModel& model, const LetrOutput& out, int64_t index,
                             const LetrImage& image,
                             LetrTracePrecision precision = LetrTracePrecision::Float32);

    static LetrTrace load(const std::string& path);
    void save(const std::string& path) const { trace_.save(path); }

    const Trace& raw() const { return trace_; }
    // Mutable access (e.g. to add meta); drops the cached attention keys.
    Trace& raw() {
        cache_ = std::make_shared<Cache>();
        return trace_;
    }
    int64_t bytes() const { return trace_.bytes(); }

    int numStages() const;
    int numLayers(Stage s) const;             // decoder layers of the stage
    int numHeads() const;
    int64_t numQueries() const;
    int64_t hiddenDim() const;
    std::array<int64_t, 2> featureSize(Stage s) const;   // (h, w)
    std::array<int64_t, 2> originalSize() const;         // (H0, W0)
    std::array<int64_t, 2> inputSize() const;            // (H, W)
    LetrTracePrecision precision() const;
    // Views of the flip ensemble whose merged lines and scores the trace holds (meta "flips";
    // 1 when absent: a plain run, as every trace written before it existed).
    int flips() const;

    torch::Tensor image() const;                               // uint8 [H, W, 3]
    torch::Tensor endpoints(Stage s, int layer) const;         // [N, 4] original pixels
    torch::Tensor scores(Stage s, int layer) const;            // [N]
    // Lines with score >= threshold, highest score first.
    std::vector<LetrLine> lines(Stage s, int layer, float threshold) const;
    // The last decoder layer of the last stage.
    Stage lastStage() const { return numStages() == 2 ? Stage::Fine : Stage::Coarse; }
    int lastLayer() const { return numLayers(lastStage()) - 1; }

    // Cross-attention of `entity` over the stage's feature map: [h, w] float32, sums to 1.
    // head in [0, nheads) or -1 for the mean over heads.
    torch::Tensor attention(Stage s, int layer, int head, int64_t entity) const;
    // The same for every head at once: [nheads, h, w], each head's map summing to 1 (one key
    // product for all heads; attention(..., -1, ...) is its mean over dim 0).
    torch::Tensor attentionHeads(Stage s, int layer, int64_t entity) const;
    // Self-attention of `entity` over all N entities at that decoder layer: [N].
    torch::Tensor selfAttention(Stage s, int layer, int head, int64_t entity) const;

private:
    void validate() const;
    void checkArgs(Stage s, int layer, int head, int64_t entity) const;
    std::string layerKey(Stage s, int layer, const std::string& what) const;
    torch::Tensor state(const std::string& name) const;   // float32 view of a stored state
    // Per head softmax over keys of q_e . W_k x_j: [S, heads] (all heads for head -1, else 1).
    torch::Tensor attendHeads(const torch::Tensor& queryIn, const torch::Tensor& keysIn,
                              const torch::Tensor& wqk, const torch::Tensor& bqk, int head,
                              const torch::Tensor& keyMask) const;
    // The cross-attention of `entity` at a decoder layer: attendHeads on the stage's keys, [S, heads'].
    torch::Tensor crossAttendHeads(Stage s, int layer, int head, int64_t entity) const;
    // Shared by attention() and selfAttention(): attendHeads' mean over the heads.
    torch::Tensor attend(const torch::Tensor& queryIn, const torch::Tensor& keysIn,
                         const torch::Tensor& wqk, const torch::Tensor& bqk, int head,
                         const torch::Tensor& keyMask) const;

    // float32 keys (memory + pos) per stage, computed on first use; shared by copies.
    struct Cache {
        std::mutex mutex;
        torch::Tensor keys[2];
    };
    torch::Tensor stageKeys(Stage s) const;

    Trace trace_{"letr"};
    std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

struct LetrRunOptions {
    LetrTracePrecision precision = LetrTracePrecision::Float32;
    LetrTimings* timings = nullptr;   // when set, receives the forward pass's stage timings
    // 2 or 4: each image runs with its mirror images and every layer's lines and scores are
    // the flip ensemble's (core/models/letr/flips.h); states and attention stay the image's.
    int flips = 1;
    // Inference path (docs/performance.md). kBFloat16: the backbone's layers and the
    // transformers' products in bfloat16 (a CPU with AVX512-BF16 / AMX; endpoints within 0.5 px
    // of float32). foldedBackbone (float32): the backbone in channels-last layout with its frozen
    // batch norms folded into the convolutions (the same outputs within rounding). The defaults
    // are the reference implementations' float32 path, for exact comparisons.
    torch::ScalarType compute = torch::kFloat;
    bool foldedBackbone = false;
    // The input size for these images (LetrModel::preprocess); 0 = the model's config
    // (short_side, max_long_side). A larger input gives finer lines at more cost.
    int64_t shortSide = 0, maxLongSide = 0;
};

// Preprocesses `images` (RGB CV_8UC3), runs them as one batch in eval mode without grad and
// returns one trace per image (the model's training flag is restored afterwards).
std::vector<LetrTrace> runLetr(LetrModel& model, const std::vector<cv::Mat>& images,
                               const LetrRunOptions& options = {});
LetrTrace runLetr(LetrModel& model, const cv::Mat& image, const LetrRunOptions& options = {});

} // namespace glimpse::letr
