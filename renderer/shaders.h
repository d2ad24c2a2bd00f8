#pragma once
// SPIR-V of renderer/shaders/*, compiled by glslc at build time and embedded here.
#include <cstddef>
#include <cstdint>

namespace glimpse::render::shaders {

struct Spirv {
    const uint32_t* words;
    size_t bytes;
};

extern const Spirv quadVert;     // image rectangle, uv 0..1 (image and heatmap layers)
extern const Spirv imageFrag;
extern const Spirv heatmapFrag;
extern const Spirv lineVert;
extern const Spirv lineFrag;

} // namespace glimpse::render::shaders
