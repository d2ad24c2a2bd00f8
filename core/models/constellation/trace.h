#pragma once
// ConstellationTrace: one ConstellationNet run on one image, answering the views without the
// model ("capture, then inspect", docs/formats.md "Trace"). A typed wrapper over glimpse::Trace.
//
// Stored (family "constellation"; m = constellation module in execution order, 0-based):
//   input/image        uint8   [S, S, 3]      what the network saw (RGB, resized to S x S)
//   module_m/similarity float32 [K, h, w]     cosine similarity of each cell to each center
//   module_m/attention  float32 [heads, hw, hw] cell relation weights (modules with relation)
//   output/probs       float32 [num_classes]  softmax of the base-class head
// meta: {"model": "constellation", "config": {...}, "original_size": [H0, W0],
//        "modules": [{"name", "layer", "branch", "grid": [h, w], "relation": bool}, ...],
//        "top5": [{"class", "name", "prob"}, ...]}
// A cell (y, x) of a module with grid (h, w) covers the input rows [y S/h, (y+1) S/h) and
// columns [x S/w, (x+1) S/w) (the image is resized to S x S, so also that fraction of the
// original image).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/constellation/model.h"
#include "core/trace.h"

namespace glimpse::data {
class ClassificationDataset;
}

namespace glimpse::constellation {

struct TraceModule {
    std::string name;
    int64_t layer = 0;
    int branch = 0;
    int64_t h = 0, w = 0;
    bool relation = false;
};

struct ClusterScore {
    int64_t cluster = 0;
    float similarity = 0;
};

struct ClassScore {
    int64_t classIndex = 0;
    std::string name;
    float prob = 0;
};

class ConstellationTrace {
public:
    ConstellationTrace() = default;
    // Wraps a loaded glimpse::Trace; throws glimpse::Error if it is not a complete trace.
    explicit ConstellationTrace(Trace trace);
    // Runs `model` (eval mode, no grad; its mode is restored) on any 8-bit image.
    static ConstellationTrace capture(ConstellationModel& model, const cv::Mat& image);

    static ConstellationTrace load(const std::string& path);
    void save(const std::string& path) const { trace_.save(path); }
    const Trace& raw() const { return trace_; }
    Trace& raw() { return trace_; }   // e.g. to add provenance to meta() before saving
    int64_t bytes() const { return trace_.bytes(); }

    int numModules() const { return int(modules_.size()); }
    const TraceModule& module(int m) const;
    int64_t clusters() const;
    int numHeads() const;               // 0 when no module has relation
    torch::Tensor image() const;        // uint8 [S, S, 3]
    int64_t inputSize() const;
    std::pair<int64_t, int64_t> originalSize() const;   // (H0, W0)

    torch::Tensor similarity(int m) const;   // [K, h, w]
    // Best cluster of every cell [h, w] int64.
    torch::Tensor assignment(int m) const;
    // The n most similar clusters of cell (y, x), best first.
    std::vector<ClusterScore> topClusters(int m, int64_t y, int64_t x, int n = 3) const;
    // Relation weights of query cell (y, x) over the module's cells [h, w]; head -1: mean.
    // Throws for a module without relation.
    torch::Tensor relation(int m, int head, int64_t y, int64_t x) const;
    std::vector<ClassScore> top5() const;

private:
    void checkModule(int m) const;
    static std::string key(int m, const char* what) { return "module_" + std::to_string(m) + "/" + what; }
    Trace trace_{"constellation"};
    std::vector<TraceModule> modules_;
};

// A stable colour per cluster (RGB), the same in every view and run: a golden-angle hue walk.
cv::Vec3b clusterColour(int64_t cluster);

// The dataset patches whose cells are most similar to one cluster of one module: scans the
// first `maxImages` images of `ds` (all when <= 0) in eval mode and keeps the `count` best cells
// (at most one per image), each as the RGB crop of its cell grown to twice the cell's size.
struct GalleryPatch {
    int64_t imageIndex = 0, y = 0, x = 0;
    float similarity = 0;
    cv::Mat patch;   // CV_8UC3 RGB
};
std::vector<GalleryPatch> clusterGallery(ConstellationModel& model, const data::ClassificationDataset& ds,
                                         const std::string& moduleName, int64_t cluster, int count,
                                         int64_t maxImages, const std::function<bool()>& cancelled = {});

} // namespace glimpse::constellation
