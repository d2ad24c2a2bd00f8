#pragma once
// The plain data a viewport shows: an RGB8 image and the scene drawn over it (lines, heatmap,
// overlay rows). No Qt, no LibTorch: whoever owns a model converts its results into these,
// and the Qt viewport (widgets/viewport.h), offscreen exports and tests all draw them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "renderer/renderer.h"

namespace glimpse::render {

// A plain RGB8 image (rows tightly packed): what viewports and exports show.
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<uint8_t> rgb;   // width * height * 3
    bool empty() const { return width <= 0 || height <= 0; }
};

// What the viewport draws over its image: line segments (each with an id used by hit-testing
// and a hover label), a heatmap stretched over the image, and extra overlay rows. Plain
// buffers: whoever owns a model converts its results into this.
struct ViewportScene {
    std::vector<LineSegment> lines;
    std::vector<int> lineIds;            // one per line (e.g. an entity number); -1 = not pickable
    std::vector<std::string> lineLabels; // hover text per line (may be empty)
    int heatW = 0, heatH = 0;            // heatmap grid; 0 = none
    std::vector<float> heat;             // heatW * heatH, row-major, top row first
    float heatMin = 0.f, heatMax = 1.f;
    std::string heatLabel = "heat";      // overlay row label of the value under the cursor
    Colormap colormap = Colormap::Viridis;
    // Not empty: a categorical heatmap (RGB8 per category, e.g. cluster colours): heat values
    // are category indices, each pixel shows the cell under it in its category's colour
    // (heatMin/heatMax and the colour map are not used; NaN or an unknown index: transparent).
    std::vector<uint8_t> heatPalette;
    float opacity = 0.6f;
    std::vector<std::pair<std::string, std::string>> overlayRows;   // appended to the overlay
    bool hasHeatmap() const { return heatW > 0 && heatH > 0 && heat.size() == size_t(heatW) * heatH; }
    // Heatmap value at continuous image coordinate (ix, iy) for an image of imageW x imageH,
    // bilinear between cell centres as the renderer draws it (with a palette: the value of the
    // cell under the point); NaN when there is no heatmap.
    float heatAt(double ix, double iy, int imageW, int imageH) const;
    // Index into `lines` of the pickable line nearest to image point (ix, iy) within
    // `maxDist` image pixels, or -1.
    int lineNear(double ix, double iy, double maxDist) const;
    // Sets everything except the image, view and overlay on `r`. With `previous` (what `r`
    // shows now), only what differs is handed over, so unchanged lines or heatmaps are not
    // uploaded again.
    void applyTo(Renderer& r, const ViewportScene* previous = nullptr) const;
};

// Renders `image` with `scene` (overlay hidden) offscreen at the image's own resolution (view
// 1:1) and returns RGB8 rows: what "export view as PNG" writes. Throws render::VulkanError.
RgbImage renderSceneAtImageResolution(const RgbImage& image, const ViewportScene& scene);

} // namespace glimpse::render
