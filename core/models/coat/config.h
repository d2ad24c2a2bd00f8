#pragma once
// CoaT configuration (dissertation chapter 3, Table 3.1; facts in docs/models.md "CoaT").
//
// JSON form (every key optional; defaults are CoaT-Lite Tiny; "variant" first loads a preset
// and the other keys then override it):
//   {
//     "variant": "coat_lite_tiny",      // coat_lite_{tiny,mini,small,medium}, coat_{tiny,mini,small}
//                                       // or "custom" (informational after loading)
//     "embed_dims": [64, 128, 256, 320],// C1..C4
//     "serial_depths": [2, 2, 2, 2],    // conv-attentional modules per serial block
//     "parallel_depth": 0,              // parallel groups (CoaT: 6; needs C2 == C3 == C4)
//     "num_heads": 8,
//     "mlp_ratios": [8, 8, 4, 4],       // R1..R4 (parallel groups need R2 == R3 == R4)
//     "crpe_window": [[3, 2], [5, 3], [7, 3]],   // CRPE (kernel, heads) in head order
//     "use_crpe": true, "use_cpe": true,          // position-encoding ablation (Table 3.6)
//     "co_scale": "feature_interpolation",        // or "direct_cross_layer_attention"
//     "num_classes": 1000, "in_chans": 3,
//     "image_size": 224,                // network input side (square)
//     "resize": 256,                    // eval: resize the shorter side (bicubic), then center crop
//     "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
//     "class_names": []                 // optional, num_classes names (index order)
//   }
// Unknown keys are an error (they are usually typos).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace glimpse::coat {

enum class CoScale { FeatureInterpolation, DirectCrossLayerAttention };

struct CoatConfig {
    std::string variant = "coat_lite_tiny";
    std::array<int64_t, 4> embedDims{64, 128, 256, 320};
    std::array<int64_t, 4> serialDepths{2, 2, 2, 2};
    int64_t parallelDepth = 0;
    int64_t numHeads = 8;
    std::array<double, 4> mlpRatios{8, 8, 4, 4};
    std::vector<std::pair<int64_t, int64_t>> crpeWindow{{3, 2}, {5, 3}, {7, 3}};
    bool useCrpe = true;
    bool useCpe = true;
    CoScale coScale = CoScale::FeatureInterpolation;
    int64_t numClasses = 1000;
    int64_t inChans = 3;
    int64_t imageSize = 224;
    int64_t resize = 256;
    std::array<double, 3> mean{0.485, 0.456, 0.406};
    std::array<double, 3> std{0.229, 0.224, 0.225};
    std::vector<std::string> classNames;

    // The seven variants of Table 3.1 (ImageNet-1k head). Throws Error for unknown names.
    static CoatConfig preset(const std::string& name);
    static std::vector<std::string> presetNames();

    // Throws glimpse::Error with a message naming the field and the problem.
    void validate() const;

    nlohmann::json toJson() const;
    std::string toJsonString() const { return toJson().dump(); }
    // `source` names where the JSON came from (a file, "checkpoint X") for error messages.
    static CoatConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static CoatConfig fromJsonString(const std::string& text, const std::string& source = "config");
    static CoatConfig fromFile(const std::string& path);

    bool lite() const { return parallelDepth == 0; }
    int64_t headDim(int scale) const { return embedDims[size_t(scale)] / numHeads; }
    // Token grid (h, w) of scale 0..3 for an input of the given size: strides 4, 8, 16, 32
    // (each patch embedding is a conv with kernel = stride, floor division).
    std::array<int64_t, 2> gridSize(int scale, int64_t height, int64_t width) const;
    // Name of class k (class_names, or "class k" when none are configured).
    std::string className(int64_t k) const;
};

const char* coScaleName(CoScale c);   // "feature_interpolation" / "direct_cross_layer_attention"

// Reads one class name per line (the ImageNet-1k list in resources/imagenet_classes.txt is in
// the standard ILSVRC2012 index order). Empty lines are refused; errors name the file.
std::vector<std::string> loadClassNames(const std::string& path);

} // namespace glimpse::coat
