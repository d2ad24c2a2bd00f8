#pragma once
// Training augmentations for line datasets (dissertation ch. 2.4.1: random horizontal/vertical
// flip, random resize, random crop, color jitter) with the ground-truth segments transformed
// and clipped exactly, plus the segment geometry they share with the procedural generator.
//
// Coordinates are continuous image coordinates: pixel (x, y) covers [x, x+1) x [y, y+1), so an
// image of width W spans [0, W]. Flipping maps x -> W - x; resizing by (sx, sy) maps
// x -> x * sx; cropping at (cx, cy) maps x -> x - cx and then clips to the crop.
#include <cstdint>
#include <random>

#include <opencv2/core.hpp>
#include <torch/types.h>

#include "core/data/lines.h"

namespace glimpse::data {

// Liang-Barsky: clips the segment to [x0, x1] x [y0, y1]. Returns false when nothing of it is
// inside (or only a point); otherwise updates the endpoints in place.
bool clipSegment(double& ax, double& ay, double& bx, double& by, double x0, double y0,
                 double x1, double y1);

// Clips every row of `lines` ([M, 4] float) to [0, width] x [0, height] and drops segments
// shorter than minLength afterwards. Returns a new [M', 4] float tensor.
torch::Tensor clipLines(const torch::Tensor& lines, double width, double height,
                        double minLength = 1.0);

struct AugmentConfig {
    double hflip = 0.5;          // probability of a horizontal flip
    double vflip = 0.5;          // probability of a vertical flip
    int64_t minShortSide = 224;  // random resize: the short side is drawn from
    int64_t maxShortSide = 288;  //   [minShortSide, maxShortSide]
    int64_t maxLongSide = 512;   // ... and the long side capped at this
    double crop = 0.5;           // probability of a random crop before resizing
    double cropMin = 0.6;        // crop side fraction drawn from [cropMin, 1]
    double brightness = 0.2;     // color jitter: factors drawn from [1 - b, 1 + b]
    double contrast = 0.2;
    double saturation = 0.2;
    double minLength = 2.0;      // segments shorter than this (pixels) after clipping are dropped
};

// The individual, deterministic transforms (tested one by one).
LineSample flipHorizontal(const LineSample& s);
LineSample flipVertical(const LineSample& s);
LineSample resizeSample(const LineSample& s, int width, int height);   // bilinear
LineSample cropSample(const LineSample& s, const cv::Rect& rect, double minLength);
// Brightness/contrast/saturation factors (1 = unchanged); lines are unchanged.
cv::Mat colorJitter(const cv::Mat& rgb, double brightness, double contrast, double saturation);

// The random pipeline: flips, crop, resize, color jitter, all drawn from `rng`.
LineSample augment(const LineSample& s, const AugmentConfig& cfg, std::mt19937_64& rng);

} // namespace glimpse::data
