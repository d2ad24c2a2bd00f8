#pragma once
// The classical baseline: OpenCV's Line Segment Detector (Grompone von Gioi et al.), used by
// the inspector's compare view and by `glimpse eval` next to LETR's numbers.
#include <vector>

#include <opencv2/core.hpp>

namespace glimpse::eval {

struct ScoredLine {
    float x1 = 0, y1 = 0, x2 = 0, y2 = 0;   // image pixels (pixel (x, y) covers [x, x+1))
    float score = 0;                       // higher = more confident
};

// Runs LSD (LSD_REFINE_ADV, OpenCV's default parameters) on an RGB or gray 8-bit image.
// score = -log10(NFA) as LSD reports it (the ranking L-CNN used for LSD's sAP); lines come
// back sorted by score, highest first. Throws glimpse::Error on an empty or non-8-bit image.
std::vector<ScoredLine> detectLsd(const cv::Mat& image);

} // namespace glimpse::eval
