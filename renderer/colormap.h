#pragma once
// The heatmap colour maps as 256-entry RGBA8 tables (entry i is the colour of t = i / 255),
// usable outside the renderer too, e.g. for a colour bar.
#include <array>
#include <cstdint>

#include "renderer/renderer.h"

namespace glimpse::render {

constexpr int kColormapCount = 4;   // Viridis, Magma, Jet, Gray

// Colour at t in 0..1 (clamped), components in 0..1.
Color colormapColor(Colormap map, double t);
// 256 entries x RGBA (alpha 255).
std::array<uint8_t, 256 * 4> colormapTable(Colormap map);
const char* colormapName(Colormap map);

} // namespace glimpse::render
