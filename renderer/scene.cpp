#include "renderer/scene.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "renderer/view.h"

namespace glimpse::render {

// --- ViewportScene ------------------------------------------------------------------

float ViewportScene::heatAt(double ix, double iy, int imageW, int imageH) const {
    if (!hasHeatmap() || imageW <= 0 || imageH <= 0) return std::numeric_limits<float>::quiet_NaN();
    if (!heatPalette.empty()) {
        const int cx = std::clamp(int(std::floor(ix * heatW / imageW)), 0, heatW - 1);
        const int cy = std::clamp(int(std::floor(iy * heatH / imageH)), 0, heatH - 1);
        return heat[size_t(cy) * heatW + cx];
    }
    // Cell (i, j) has its centre at image ((j + 0.5) * W / w, (i + 0.5) * H / h).
    const double gx = std::clamp(ix * heatW / imageW - 0.5, 0.0, double(heatW - 1));
    const double gy = std::clamp(iy * heatH / imageH - 0.5, 0.0, double(heatH - 1));
    const int x0 = int(std::floor(gx)), y0 = int(std::floor(gy));
    const int x1 = std::min(x0 + 1, heatW - 1), y1 = std::min(y0 + 1, heatH - 1);
    const double fx = gx - x0, fy = gy - y0;
    auto at = [this](int x, int y) { return double(heat[size_t(y) * heatW + x]); };
    return float((at(x0, y0) * (1 - fx) + at(x1, y0) * fx) * (1 - fy) +
                 (at(x0, y1) * (1 - fx) + at(x1, y1) * fx) * fy);
}

int ViewportScene::lineNear(double ix, double iy, double maxDist) const {
    int best = -1;
    double bestD = maxDist;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i >= lineIds.size() || lineIds[i] < 0) continue;
        const auto& l = lines[i];
        const double dx = l.x2 - l.x1, dy = l.y2 - l.y1;
        const double len2 = dx * dx + dy * dy;
        double t = len2 > 0 ? ((ix - l.x1) * dx + (iy - l.y1) * dy) / len2 : 0.0;
        t = std::clamp(t, 0.0, 1.0);
        const double d = std::hypot(ix - (l.x1 + t * dx), iy - (l.y1 + t * dy));
        if (d <= bestD) {   // later lines are drawn on top: ties go to them
            bestD = d;
            best = int(i);
        }
    }
    return best;
}

void ViewportScene::applyTo(Renderer& r, const ViewportScene* previous) const {
    auto sameLines = [&] {
        return previous && previous->lines.size() == lines.size() &&
               (lines.empty() || std::memcmp(previous->lines.data(), lines.data(),
                                             lines.size() * sizeof(LineSegment)) == 0);
    };
    auto sameHeat = [&] {
        return previous && previous->hasHeatmap() == hasHeatmap() && previous->heatW == heatW &&
               previous->heatH == heatH && previous->heatMin == heatMin && previous->heatMax == heatMax &&
               previous->heat == heat && previous->heatPalette == heatPalette;
    };
    if (!sameLines()) r.setLines(lines);
    if (!sameHeat()) {
        if (hasHeatmap()) r.setHeatmap(heatW, heatH, heat.data(), heatMin, heatMax);
        else r.clearHeatmap();
        if (r.heatPalette() != heatPalette) r.setHeatPalette(heatPalette);
    }
    r.setColormap(colormap);
    r.setHeatmapOpacity(opacity);
}

RgbImage renderSceneAtImageResolution(const RgbImage& image, const ViewportScene& scene) {
    RgbImage out;
    if (image.empty()) return out;
    OffscreenTarget target(image.width, image.height);
    target.renderer().setImage(image.width, image.height, 3, image.rgb.data());
    scene.applyTo(target.renderer());
    target.renderer().setView(View::oneToOne(image.width, image.height));
    Overlay none;
    none.visible = false;
    target.renderer().setOverlay(none);
    const std::vector<uint8_t> rgba = target.render();
    out.width = image.width;
    out.height = image.height;
    out.rgb.resize(size_t(image.width) * image.height * 3);
    for (size_t i = 0, n = size_t(image.width) * image.height; i < n; ++i) {
        out.rgb[i * 3 + 0] = rgba[i * 4 + 0];
        out.rgb[i * 3 + 1] = rgba[i * 4 + 1];
        out.rgb[i * 3 + 2] = rgba[i * 4 + 2];
    }
    return out;
}

} // namespace glimpse::render
