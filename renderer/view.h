#pragma once
// View math shared by the renderer and the widgets: no Vulkan, no Qt.
#include <algorithm>
#include <cmath>

namespace glimpse::render {

// Which part of the image is shown: the image pixel coordinate that sits at the centre of the
// viewport, and the zoom in screen pixels per image pixel. Image pixel (x, y) covers
// [x, x+1) x [y, y+1); its centre is (x + 0.5, y + 0.5).
struct View {
    double centerX = 0.0;
    double centerY = 0.0;
    double zoom = 1.0;

    static constexpr double kMinZoom = 1.0 / 64.0;
    static constexpr double kMaxZoom = 256.0;

    // Screen (viewport pixel, origin top-left) -> image pixel coordinate (continuous).
    void screenToImage(double sx, double sy, int vw, int vh, double& ix, double& iy) const {
        ix = centerX + (sx - vw * 0.5) / zoom;
        iy = centerY + (sy - vh * 0.5) / zoom;
    }
    void imageToScreen(double ix, double iy, int vw, int vh, double& sx, double& sy) const {
        sx = (ix - centerX) * zoom + vw * 0.5;
        sy = (iy - centerY) * zoom + vh * 0.5;
    }
    // Zoom by `factor` keeping the image point under screen (sx, sy) fixed.
    void zoomAt(double factor, double sx, double sy, int vw, int vh) {
        double ix, iy;
        screenToImage(sx, sy, vw, vh, ix, iy);
        zoom = std::clamp(zoom * factor, kMinZoom, kMaxZoom);
        centerX = ix - (sx - vw * 0.5) / zoom;
        centerY = iy - (sy - vh * 0.5) / zoom;
    }
    void panByScreen(double dx, double dy) {
        centerX -= dx / zoom;
        centerY -= dy / zoom;
    }
    static View fit(int imageW, int imageH, int vw, int vh) {
        View v;
        v.centerX = imageW * 0.5;
        v.centerY = imageH * 0.5;
        if (imageW > 0 && imageH > 0 && vw > 0 && vh > 0)
            v.zoom = std::clamp(std::min(double(vw) / imageW, double(vh) / imageH), kMinZoom, kMaxZoom);
        return v;
    }
    static View oneToOne(int imageW, int imageH) {
        View v;
        v.centerX = imageW * 0.5;
        v.centerY = imageH * 0.5;
        v.zoom = 1.0;
        return v;
    }
    bool operator==(const View& o) const {
        return centerX == o.centerX && centerY == o.centerY && zoom == o.zoom;
    }
};

} // namespace glimpse::render
