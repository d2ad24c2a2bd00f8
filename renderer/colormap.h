#pragma once
// The heatmap colour maps as 256-entry RGBA8 tables (entry i is the colour of t = i / 255),
// usable outside the renderer too, e.g. for a colour bar.
#include <array>
#include <cstdint>
#include <vector>

#include "renderer/renderer.h"

namespace glimpse::render {

constexpr int kColormapCount = 4;   // Viridis, Magma, Jet, Gray

// Colour at t in 0..1 (clamped), components in 0..1.
Color colormapColor(Colormap map, double t);
// 256 entries x RGBA (alpha 255).
std::array<uint8_t, 256 * 4> colormapTable(Colormap map);
const char* colormapName(Colormap map);

// The heatmap coloured once on the CPU (the renderer's heat texture): the grid's bilinear field
// (half-cell-centred, constant in the outer half cells) sampled at the centre of each of
// width x height texels spread evenly over the grid's extent, mapped through the colour map's
// table (nearest entry of t = (v - vmin) / (vmax - vmin) clamped to 0..1; a step at vmax when
// vmax <= vmin). RGBA8, premultiplied: (rgb, 255), or (0, 0, 0, 0) where the field is NaN (a
// NaN cell with a non-zero weight). The renderer makes it the image's size (heatTextureSize),
// so at 1:1 every pixel shows the exact per-pixel value and the sampler filters ~1:1.
struct HeatTexture {
    int width = 0, height = 0;
    std::vector<uint8_t> rgba;     // width * height * 4
};
// The heat texture's size for an image: the image's size, scaled down (aspect kept) so that
// neither side exceeds kMaxHeatTextureSide; at least 1 x 1. 0 x 0 without an image.
constexpr int kMaxHeatTextureSide = 2048;
void heatTextureSize(int imageW, int imageH, int& texW, int& texH);
// Writes the texW x texH texels (rows tightly packed) to `rgba`. w, h >= 1.
void colorHeatTexture(const float* grid, int w, int h, float vmin, float vmax, Colormap map, int texW, int texH,
                      uint8_t* rgba);
// A categorical heatmap (a palette instead of a colour map, e.g. cluster assignments): each
// texel takes the value of the grid cell under its centre (no interpolation: a blend of two
// categories means nothing), rounded to the nearest integer, as an index into `paletteRgb`
// (RGB8, `entries` colours); NaN or an index outside 0..entries-1 is transparent. RGBA8 as
// colorHeatTexture writes it ((rgb, 255) or (0, 0, 0, 0)), same texel layout.
void colorPaletteTexture(const float* grid, int w, int h, const uint8_t* paletteRgb, int entries, int texW, int texH,
                         uint8_t* rgba);
// The same into `out` (reusing its storage); texW, texH below 1 count as 1.
void buildHeatTexture(const float* grid, int w, int h, float vmin, float vmax, Colormap map, int texW, int texH,
                      HeatTexture& out);

} // namespace glimpse::render
