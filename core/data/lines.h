#pragma once
// Line-segment datasets (LETR training and evaluation): the interface shared by the Wireframe /
// YorkUrban JSON loaders and the built-in procedural wireframe generator.
#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>
#include <torch/types.h>

namespace glimpse::data {

struct LineSample {
    std::string name;       // image file name, or "procedural/<seed>/<index>"
    cv::Mat image;          // RGB, CV_8UC3
    torch::Tensor lines;    // float32 [M, 4]: (x1, y1, x2, y2) in image pixels, M may be 0
};

class LineDataset {
public:
    virtual ~LineDataset() = default;
    virtual int64_t size() const = 0;
    // Loads or generates sample `index` (0 <= index < size()); safe to call from several
    // threads at once. Throws glimpse::Error naming the file and record on bad data.
    virtual LineSample get(int64_t index) const = 0;
    // One line for logs and run configs, e.g. "wireframe /data/wf/valid.json (462 images)".
    virtual std::string describe() const = 0;
};

} // namespace glimpse::data
