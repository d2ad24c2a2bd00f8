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

// The two halves of the measure, for a viewer that scores many lines against one image (the
// LETR inspector's edge-support colouring): the image's gradient field and its strong
// threshold, computed once, then each line's fraction of supporting samples (0 for a
// degenerate or non-finite line).
struct EdgeField {
    cv::Mat gx, gy;          // CV_32F Sobel gradients of the blurred gray image
    double threshold = 0;    // magnitude that counts as strong
    int rows() const { return gx.rows; }
    int cols() const { return gx.cols; }
};
EdgeField edgeField(const cv::Mat& image, const EdgeSupportOptions& options = {});
double lineSupport(const EdgeField& field, double x1, double y1, double x2, double y2,
                   const EdgeSupportOptions& options = {});

// Moves a line onto the image edge it nearly follows (the M-LSD photo labels' refinement,
// core/data/mlsd_lines.h; docs/decisions.md "LETR on photos: labels snapped to edges"). At each
// pixel of the line's length, the strongest edge across the line (gradient magnitude projected
// on the normal, strong and within the angle tolerance as in lineSupport) is searched within
// +-maxShift px along the normal in quarter pixels, its centre the centroid of the peak's upper
// half; the peaks of the majority polarity (dark-to-bright or the reverse) are fitted with a
// robust line (cv::fitLine, Huber) and the endpoints projected onto it. The line is changed only
// when at least minFound of its samples found a peak, the fit turns it by at most maxTurnDeg,
// moves neither endpoint further than maxShift across, and does not lower its support
// (lineSupport). Repeated `passes` times. Returns whether the line moved; a degenerate or
// non-finite line is left as it is.
struct EdgeSnapOptions {
    double maxShift = 3.0;     // px, across the line
    double maxTurnDeg = 6.0;
    double minFound = 0.5;     // fraction of samples with an edge peak
    int passes = 2;
    // Then, for a line that moved: each end shortened to where its support starts (the first of
    // two supported samples in a row), by at most this fraction of the length (0: not trimmed).
    double maxTrim = 0.0;
};
bool snapToEdge(const EdgeField& field, ScoredLine& line, const EdgeSupportOptions& options = {},
                const EdgeSnapOptions& snap = {});

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
constexpr double kPartialSupport = 0.3;
// The colour of a line with this support (the figure's and the inspector's).
inline cv::Vec3b edgeSupportColour(double support, const EdgeSupportOptions& options = {}) {
    return support >= options.minSupport ? kOnEdgeColour : support >= kPartialSupport ? kPartialColour : kOffEdgeColour;
}
cv::Mat drawEdgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupport& measured,
                        const EdgeSupportOptions& options = {}, int height = 0);

} // namespace glimpse::eval
