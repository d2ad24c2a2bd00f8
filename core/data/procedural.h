#pragma once
// The built-in line dataset: procedurally rendered one-point-perspective rooms (back wall,
// side walls, floor, ceiling) with windows, doors, picture frames, boxes on the floor and
// clutter (ellipses, curves, blobs), textured, lit unevenly, blurred, noisy and slightly
// rotated, with the exact visible ground-truth segments (occluded parts removed, clipped to
// the image). Sample i of seed s depends only on (s, i): deterministic, any number of images.
#include <cstdint>
#include <string>

#include "core/data/lines.h"

namespace glimpse::data {

struct ProceduralOptions {
    int64_t count = 1000;
    uint64_t seed = 0;
    int width = 256;
    int height = 256;
    double minLength = 8.0;   // visible pieces shorter than this (pixels) are not ground truth
};

// Renders one scene (what ProceduralLines::get returns for that seed and index).
LineSample renderProceduralScene(uint64_t seed, int64_t index, int width, int height,
                                 double minLength = 8.0);

class ProceduralLines : public LineDataset {
public:
    explicit ProceduralLines(const ProceduralOptions& opts);   // throws Error on bad sizes
    int64_t size() const override { return opts_.count; }
    LineSample get(int64_t index) const override;
    std::string describe() const override;
    const ProceduralOptions& options() const { return opts_; }

private:
    ProceduralOptions opts_;
};

} // namespace glimpse::data
