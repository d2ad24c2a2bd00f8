#pragma once
// Do detected lines follow visible edges? (issue 19's photo measure; docs/decisions.md
// "LETR on photos: edge support"). Photos have no ground truth, so a line detector's top lines
// are scored against the image's own gradients:
//   - the image, as gray float in [0, 1], is blurred (Gaussian, sigma 1 px) and its Sobel
//     gradient (3x3) computed; "strong" means a magnitude at or above the image's 90th
//     percentile of magnitudes;
//   - a line is sampled once per pixel of its length (at least twice) at pixel centres, the
//     gradient read bilinearly; a sample supports the line when its magnitude is strong and the
//     gradient is within 22.5 degrees of the line's normal (an edge across the line, not along);
//   - a line is on an edge when at least 70% of its samples support it.
// Reported per image for the K best lines by score: the fraction on an edge and the mean
// fraction of supporting samples. LSD is measured the same way.
#include <vector>

#include <opencv2/core.hpp>

#include "core/eval/lsd.h"

namespace glimpse::eval {

struct EdgeSupportOptions {
    double blurSigma = 1.0;
    double strongPercentile = 0.90;
    double angleToleranceDeg = 22.5;
    double minSupport = 0.7;
    int topK = 50;
};

struct EdgeSupport {
    int lines = 0;                     // lines measured (min(topK, given))
    double threshold = 0;              // gradient magnitude that counts as strong
    std::vector<double> support;       // per measured line: fraction of supporting samples
    double onEdge = 0;                 // fraction of measured lines with support >= minSupport
    double meanSupport = 0;
};

// `lines` sorted by score, highest first (as detectLsd and LetrTrace::lines give them), in the
// image's pixel coordinates. RGB or gray 8-bit images; glimpse::Error otherwise.
EdgeSupport edgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupportOptions& options = {});

// A picture of the measure (`glimpse eval edges --figure`): `image` (8-bit RGB or gray) as RGB,
// resized to `height` rows (0: as it is), with the `measured.lines` best of `lines` (the lines
// and the result edgeSupport gave) drawn over it in a colour that says their support:
//   green  (kOnEdgeColour):  on an edge, support >= options.minSupport;
//   yellow (kPartialColour): support >= 0.3 but below that;
//   red    (kOffEdgeColour): less.
// The best line is drawn last (on top). glimpse::Error for a bad image, height or result.
inline const cv::Vec3b kOnEdgeColour{40, 200, 40}, kPartialColour{240, 200, 0}, kOffEdgeColour{230, 40, 40};
cv::Mat drawEdgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupport& measured,
                        const EdgeSupportOptions& options = {}, int height = 0);

} // namespace glimpse::eval
