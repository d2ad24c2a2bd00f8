#pragma once
// Two line datasets built from others:
//  * LsdPhotoLines: photographs with pseudo ground truth, the long segments OpenCV's LSD finds
//    in each (core/eval/lsd.h). Photos have no line annotations; the procedural scenes are
//    exact but do not look like photos. Training on both lets LETR see real images while the
//    held-out evaluation stays on exact procedural ground truth (docs/decisions.md, issue 19).
//  * MixedLines: several datasets interleaved, sample i from part i % K.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/data/lines.h"

namespace glimpse::data {

struct LsdLabelOptions {
    double minLengthFraction = 0.04;   // keep segments at least this fraction of the image's long side
    int maxLines = 40;                 // ... the longest of them, at most this many
};

// LSD's segments of `rgb` (CV_8UC3) kept by `o`, longest first, as float [M, 4] in image pixels.
torch::Tensor lsdPseudoLines(const cv::Mat& rgb, const LsdLabelOptions& o = {});

class LsdPhotoLines : public LineDataset {
public:
    // The photos of a folder or .txt list (listImageFiles, core/io/image.h; a listed file that
    // does not exist is an error here, naming the list and its line).
    explicit LsdPhotoLines(const std::string& folderOrList, LsdLabelOptions o = {});
    int64_t size() const override { return int64_t(paths_.size()); }
    // Decodes the photo (errors name the file) and labels it; the labels of each image are
    // computed once and kept (thread-safe).
    LineSample get(int64_t index) const override;
    std::string describe() const override;
    const std::vector<std::string>& paths() const { return paths_; }

private:
    std::string source_;
    LsdLabelOptions opt_;
    std::vector<std::string> paths_;
    mutable std::mutex mutex_;
    mutable std::unordered_map<int64_t, torch::Tensor> labels_;
};

class MixedLines : public LineDataset {
public:
    // Throws glimpse::Error when `parts` is empty or one of them is empty.
    explicit MixedLines(std::vector<std::unique_ptr<LineDataset>> parts);
    // K parts of sizes n_k: K * max n_k samples; sample i is part (i % K)'s sample (i / K) % n_k,
    // so every part supplies 1/K of any long run of consecutive indices.
    int64_t size() const override;
    LineSample get(int64_t index) const override;
    // The parts' descriptions joined by " + " (the first part's first: the default validation
    // set of a training run is derived from it).
    std::string describe() const override;

private:
    std::vector<std::unique_ptr<LineDataset>> parts_;
    int64_t largest_ = 0;
};

} // namespace glimpse::data
