#pragma once
// LETR configuration (dissertation chapter 2; facts in docs/models.md "LETR").
//
// JSON form (every key optional; defaults are the published LETR ResNet-50 model):
//   {
//     "backbone": "resnet50",          // resnet10 | resnet18 | resnet34 | resnet50 | resnet101
//                                      (resnet10: BasicBlock x [1,1,1,1], the small CPU model)
//                                      | mlsd_tiny: M-LSD tiny's pretrained MobileNetV2 encoder
//                                      (mlsd_backbone.h; C2..C5 24/32/64/128 channels; needs
//                                      mean = std = [0.5, 0.5, 0.5], its default)
//     "hidden_dim": 256,               // d: transformer width, input_proj output channels
//     "nheads": 8,                     // attention heads (hidden_dim % nheads == 0)
//     "dim_feedforward": 2048,         // FFN inner width
//     "coarse_enc_layers": 6, "coarse_dec_layers": 6,
//     "fine_enc_layers": 6,   "fine_dec_layers": 6,
//     "num_queries": 1000,             // N line entities
//     "num_classes": 1,                // class_embed has num_classes + 1 outputs (last = no-object)
//     "dropout": 0.1,                  // active in training mode only
//     "stages": "coarse+fine",         // "coarse" (stage-1 model) or "coarse+fine" (stage 2)
//     "coarse_level": 5,               // backbone level read by the coarse stage (C5; 3..5)
//     "fine_level": 4,                 // backbone level read by the fine stage (C4; 3..5)
//     "short_side": 512,               // test-time resize of the shorter image side
//     "max_long_side": 1333,           // cap on the longer side after resizing
//     "max_input_pixels": 268435456,   // guard: larger inputs are refused before resizing
//     "mean": [0.538, 0.494, 0.453], "std": [0.257, 0.263, 0.273],
//     "score_threshold": 0              // the score above which the app shows a line by default
//                                      // (0: not set, the app's own default; absent from the
//                                      // JSON then). Training sets it from validation
//                                      // (core/models/letr/train.h).
//     "position_in_values": "none"     // "coarse", "fine" or "coarse+fine": those stages add their
//                                      // sine position encoding to the projected features before
//                                      // the encoder, so the encoder memory (the cross-attention's
//                                      // values) carries position (DETR's "positional encoding at
//                                      // the input" variant, kept in the attention too). No
//                                      // parameters; absent from the JSON when "none" (published
//                                      // checkpoints).
//     "fine_lines": "absolute"         // "refine": the fine stage's lines are corrections of the
//                                      // coarse stage's last-layer lines, sigmoid(logit(coarse) +
//                                      // lines_embed(hs)), for every fine decoder layer (the
//                                      // coarse line is a constant there: no gradient into the
//                                      // coarse stage). No parameters; absent from the JSON when
//                                      // "absolute" (LETR's own head, published checkpoints).
//                                      // Without a fine stage it has nothing to act on.
//     "coarse_queries": "learned"      // "anchors": each coarse entity has a learned reference line
//                                      // (letr.query_anchor [N, 4], logits of x1, y1, x2, y2); its
//                                      // positional query is that line's sine encoding through an
//                                      // MLP (letr.anchor_encoder) instead of query_embed, which
//                                      // becomes the entity's initial content (DETR's is 0), and
//                                      // every coarse decoder layer's lines are corrections of the
//                                      // reference in logit space (as anchor-based DETRs do for
//                                      // boxes: the decoder no longer has to carry absolute
//                                      // position in its content). Absent from the JSON when
//                                      // "learned" (LETR's own queries, published checkpoints).
//                                      // "proposals" (backbone mlsd_tiny only): two-stage; the
//                                      // reference lines are per image, the top num_queries
//                                      // line candidates of M-LSD's own decoder (proposal.*,
//                                      // frozen, copied from the M-LSD checkpoint with the
//                                      // encoder) on the backbone's C2-C4, highest score first;
//                                      // positional query and logit-space corrections as for
//                                      // "anchors" (no letr.query_anchor).
//   }
// Unknown keys are an error (they are usually typos).
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace glimpse::letr {

struct LetrConfig {
    std::string backbone = "resnet50";
    int64_t hiddenDim = 256;
    int64_t nheads = 8;
    int64_t dimFeedforward = 2048;
    int64_t coarseEncLayers = 6;
    int64_t coarseDecLayers = 6;
    int64_t fineEncLayers = 6;
    int64_t fineDecLayers = 6;
    int64_t numQueries = 1000;
    int64_t numClasses = 1;
    double dropout = 0.1;
    bool fineStage = true;            // "stages": "coarse+fine" (true) or "coarse" (false)
    int coarseLevel = 5;
    int fineLevel = 4;
    int64_t shortSide = 512;
    int64_t maxLongSide = 1333;
    int64_t maxInputPixels = int64_t(1) << 28;
    std::array<double, 3> mean{0.538, 0.494, 0.453};
    std::array<double, 3> std{0.257, 0.263, 0.273};
    double scoreThreshold = 0;        // "score_threshold"; 0: not set
    bool posInValuesCoarse = false;   // "position_in_values" names "coarse"
    bool posInValuesFine = false;     // "position_in_values" names "fine"
    bool fineRefinesCoarse = false;   // "fine_lines": "refine"
    bool coarseAnchors = false;       // "coarse_queries": "anchors"
    bool coarseProposals = false;     // "coarse_queries": "proposals"
    // Anchor or proposal queries: positional queries from reference lines (letr.anchor_encoder).
    bool lineQueries() const { return coarseAnchors || coarseProposals; }

    // Throws glimpse::Error with a message naming the field and the problem.
    void validate() const;

    nlohmann::json toJson() const;
    std::string toJsonString() const { return toJson().dump(); }
    // `source` names where the JSON came from (a file, "checkpoint X") for error messages.
    static LetrConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static LetrConfig fromJsonString(const std::string& text, const std::string& source = "config");
    static LetrConfig fromFile(const std::string& path);

    // Derived facts about the backbone.
    bool bottleneck() const;                       // resnet50/101
    std::array<int, 4> blocksPerLayer() const;     // e.g. {3, 4, 6, 3}
    int64_t levelChannels(int level) const;        // channels of C3/C4/C5
    int numStages() const { return fineStage ? 2 : 1; }
    int64_t headDim() const { return hiddenDim / nheads; }

    // Resized input size (height, width) for an image of the given size: DETR's rule
    // (short side -> shortSide; if the long side would exceed maxLongSide, the short side is
    // reduced to round(maxLongSide * short / long)); long side truncated as in the reference;
    // every side at least 1 pixel and at most max(maxLongSide, shortSide).
    std::array<int64_t, 2> resizedSize(int64_t height, int64_t width) const;
};

} // namespace glimpse::letr
