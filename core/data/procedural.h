#pragma once
// The built-in line dataset: procedurally rendered one-point-perspective rooms (back wall,
// side walls, floor, ceiling) with windows, doors, picture frames, boxes on the floor and
// clutter (ellipses, curves, blobs), textured, lit unevenly, blurred, noisy and slightly
// rotated, with the exact visible ground-truth segments (occluded parts removed, clipped to
// the image); or building facades (ProceduralScenes). Sample i of seed s depends only on
// (s, i, the scene kind): deterministic, any number of images.
#include <cstdint>
#include <string>

#include "core/data/lines.h"

namespace glimpse::data {

// Which scenes a procedural dataset renders: the rooms above; facades (one or two walls of a
// building in two-point perspective, covered with windows, ribbon windows or pilasters and
// ledges, sky, ground and trees: the dense parallel structure of photographs of buildings);
// or both, rooms at even indices and facades at odd ones.
enum class ProceduralScenes { Rooms, Facades, Mixed };
const char* proceduralScenesName(ProceduralScenes scenes);                 // "rooms", "facades", "mixed"
bool parseProceduralScenes(const std::string& name, ProceduralScenes& out);   // false on an unknown name

struct ProceduralOptions {
    int64_t count = 1000;
    uint64_t seed = 0;
    int width = 256;
    int height = 256;
    double minLength = 8.0;   // visible pieces shorter than this (pixels) are not ground truth
    ProceduralScenes scenes = ProceduralScenes::Rooms;
};

// Renders one scene (what ProceduralLines::get returns for that seed and index).
LineSample renderProceduralScene(uint64_t seed, int64_t index, int width, int height,
                                 double minLength = 8.0);

// Renders one facade scene (ProceduralScenes::Facades); deterministic in (seed, index) too.
LineSample renderFacadeScene(uint64_t seed, int64_t index, int width, int height, double minLength = 8.0);

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
