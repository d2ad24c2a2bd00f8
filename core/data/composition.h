#pragma once
// The "composition" procedural few-shot family (spec composition[:SEED], core/data/fewshot.h):
// classes that only shape, texture and arrangement tell apart. Colour gives nothing away.
//
// A class is a composition rule drawn from (seed, class id): 2 or 3 parts, each a shape (disc,
// square, triangle, ring, cross, bar) with a fill texture (solid, stripes, checker, dots,
// outline), its offset from the composition's centre, size, aspect, rotation and texture
// period and orientation, and the drawing order. Each image draws, independently of the class:
// every part's two colours (any hue and saturation; the values chosen to contrast with the
// background), the background (plain, gradient or clutter, any colour), the composition's
// position (+-12% of the image), scale (0.8-1.15) and rotation (+-25 degrees), small per-part
// offset and size jitter, blur and noise. Hence a colour histogram carries (almost) no class
// information: test_fewshot_composition checks that a nearest-centroid classifier on colour
// histograms stays near chance, while raw pixels and the colourful procedural family do not.
// Drawn at 2 x size with anti-aliasing, reduced with INTER_AREA; deterministic per (seed,
// class, sample) like the procedural family (core/data/procedural_draw.h).
#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "core/data/rendered_fewshot.h"

namespace glimpse::data {

// Classes of the family and its split (like the procedural family's 64/16/20).
constexpr int64_t kCompositionFewShotClasses = 100;
constexpr int64_t kCompositionBaseClasses = 64, kCompositionValClasses = 16, kCompositionNovelClasses = 20;

// The rule of class `cls` (>= 0) of `seed` in words, parts in drawing order:
// "striped triangle + dotted disc". Throws Error for a negative class.
std::string compositionFewShotRule(uint64_t seed, int64_t cls);

// Sample `sample` (>= 0) of class `cls` (>= 0): CV_8UC3 RGB, size x size (8..1024).
cv::Mat renderCompositionFewShot(uint64_t seed, int64_t cls, int64_t sample, int size);

// Classes [firstClass, firstClass + count), samplesPerClass images each, rendered on get().
// Index i is sample i % samplesPerClass of class firstClass + i / samplesPerClass, relabelled
// 0..count-1; class names "comp-017" (the family's class id).
class CompositionFewShotDataset : public RenderedFewShotDataset {
public:
    // Throws Error for firstClass < 0, count < 1, samplesPerClass < 1 or imageSize outside 8..1024.
    CompositionFewShotDataset(uint64_t seed, int64_t firstClass, int64_t count, int64_t samplesPerClass = 600,
                              int imageSize = 32);
};

} // namespace glimpse::data
