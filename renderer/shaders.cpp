#include "renderer/shaders.h"

namespace glimpse::render::shaders {
namespace {
// Each .inc is glslc's -mfmt=num output: the module's words, comma separated.
const uint32_t kQuadVert[] = {
#include "renderer/shaders/quad.vert.inc"
};
const uint32_t kImageFrag[] = {
#include "renderer/shaders/image.frag.inc"
};
const uint32_t kHeatmapFrag[] = {
#include "renderer/shaders/heatmap.frag.inc"
};
const uint32_t kLineVert[] = {
#include "renderer/shaders/line.vert.inc"
};
const uint32_t kLineFrag[] = {
#include "renderer/shaders/line.frag.inc"
};
} // namespace

const Spirv quadVert{kQuadVert, sizeof(kQuadVert)};
const Spirv imageFrag{kImageFrag, sizeof(kImageFrag)};
const Spirv heatmapFrag{kHeatmapFrag, sizeof(kHeatmapFrag)};
const Spirv lineVert{kLineVert, sizeof(kLineVert)};
const Spirv lineFrag{kLineFrag, sizeof(kLineFrag)};

} // namespace glimpse::render::shaders
