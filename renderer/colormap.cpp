#include "renderer/colormap.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace glimpse::render {
namespace {

// Degree-6 polynomial fits of matplotlib's perceptually uniform maps, as published by Matt
// Zucker ("viridis/magma/... polynomial approximations", 2020): c0 + c1 t + ... + c6 t^6 per
// channel. They stay within about 2% of the original 256-entry tables.
struct Poly {
    double c[7][3];
};

constexpr Poly kViridis{{
    {0.2777273272234177, 0.005407344544966578, 0.3340998053353061},
    {0.1050930431085774, 1.404613529898575, 1.384590162594685},
    {-0.3308618287255563, 0.214847559468213, 0.09509516302823659},
    {-4.634230498983486, -5.799100973351585, -19.33244095627987},
    {6.228269936347081, 14.17993336680509, 56.69055260068105},
    {4.776384997670288, -13.74514537774601, -65.35303263337234},
    {-5.435455855934631, 4.645852612178535, 26.3124352495832},
}};

constexpr Poly kMagma{{
    {-0.002136485053939582, -0.000749655052795221, -0.005386127855323933},
    {0.2516605407371642, 0.6775232436837668, 2.494026599312351},
    {8.353717279216625, -3.577719514958484, 0.3144679030132573},
    {-27.66873308576866, 14.26473078096533, -13.64921318813922},
    {52.17613981234068, -27.94360607168351, 12.94416944238394},
    {-50.76852536473588, 29.04658282127291, 4.23415299384598},
    {18.65570506591883, -11.48977351997711, -5.601961508734096},
}};

double clamp01(double v) { return std::clamp(v, 0.0, 1.0); }

Color evalPoly(const Poly& p, double t) {
    double out[3];
    for (int ch = 0; ch < 3; ++ch) {
        double v = p.c[6][ch];
        for (int k = 5; k >= 0; --k)
            v = v * t + p.c[k][ch];
        out[ch] = clamp01(v);
    }
    return {float(out[0]), float(out[1]), float(out[2])};
}

// MATLAB's jet: piecewise linear through dark blue, blue, cyan, yellow, red, dark red
// (anchors at t = 0, 1/8, 3/8, 5/8, 7/8, 1).
Color jet(double t) {
    auto ramp = [t](double centre) { return clamp01(1.5 - std::abs(4.0 * t - centre)); };
    return {float(ramp(3.0)), float(ramp(2.0)), float(ramp(1.0))};
}

} // namespace

Color colormapColor(Colormap map, double t) {
    t = std::isnan(t) ? 0.0 : clamp01(t);
    switch (map) {
    case Colormap::Viridis: return evalPoly(kViridis, t);
    case Colormap::Magma: return evalPoly(kMagma, t);
    case Colormap::Jet: return jet(t);
    case Colormap::Gray: break;
    }
    return {float(t), float(t), float(t)};
}

std::array<uint8_t, 256 * 4> colormapTable(Colormap map) {
    std::array<uint8_t, 256 * 4> table{};
    for (int i = 0; i < 256; ++i) {
        const Color c = colormapColor(map, i / 255.0);
        table[i * 4 + 0] = uint8_t(std::lround(c.r * 255.0f));
        table[i * 4 + 1] = uint8_t(std::lround(c.g * 255.0f));
        table[i * 4 + 2] = uint8_t(std::lround(c.b * 255.0f));
        table[i * 4 + 3] = 255;
    }
    return table;
}

const char* colormapName(Colormap map) {
    switch (map) {
    case Colormap::Viridis: return "viridis";
    case Colormap::Magma: return "magma";
    case Colormap::Jet: return "jet";
    case Colormap::Gray: return "gray";
    }
    return "unknown";
}

void heatTextureSize(int imageW, int imageH, int& texW, int& texH) {
    if (imageW <= 0 || imageH <= 0) {
        texW = texH = 0;
        return;
    }
    const int side = std::max(imageW, imageH);
    if (side <= kMaxHeatTextureSide) {
        texW = imageW;
        texH = imageH;
        return;
    }
    const double s = double(kMaxHeatTextureSide) / side;
    texW = std::clamp(int(std::lround(imageW * s)), 1, kMaxHeatTextureSide);
    texH = std::clamp(int(std::lround(imageH * s)), 1, kMaxHeatTextureSide);
}

namespace {

// Where texel i of an axis of `texels` texels over `cells` grid cells samples the grid: its
// centre in cell units is s = (i + 0.5) * cells / texels - 0.5, between cell floor(s) and the
// next with weight f = s - floor(s); outside the first and last cell centres the field is
// constant (cell 0 or cells - 1, weight 0).
struct Axis {
    std::vector<int> i0;     // per texel
    std::vector<float> f;    // per texel, 0 <= f < 1
    std::vector<int> first;  // per cell c: first texel with i0 == c (size cells + 1)
};

void makeAxis(int cells, int texels, Axis& a) {
    a.i0.resize(size_t(texels));
    a.f.resize(size_t(texels));
    a.first.assign(size_t(cells) + 1, texels);
    const double step = double(cells) / texels;
    for (int i = texels - 1; i >= 0; --i) {
        const double s = (double(i) + 0.5) * step - 0.5;
        int i0;
        float f;
        if (s <= 0.0) {
            i0 = 0;
            f = 0.0f;
        } else if (s >= cells - 1) {
            i0 = cells - 1;
            f = 0.0f;
        } else {
            i0 = int(std::floor(s));
            f = float(s - i0);
        }
        a.i0[size_t(i)] = i0;
        a.f[size_t(i)] = f;
        a.first[size_t(i0)] = i;
    }
    for (int c = cells - 1; c >= 0; --c)   // cells no texel starts in: empty runs
        a.first[size_t(c)] = std::min(a.first[size_t(c)], a.first[size_t(c) + 1]);
}

// The four tables as RGBA words (alpha 255), built once, each with a 257th entry: transparent
// black (the colour of NaN).
constexpr int kTransparentEntry = 256;
const uint32_t* tableWords(Colormap map) {
    static const auto tables = [] {
        std::array<std::array<uint32_t, 257>, kColormapCount> all{};
        for (int m = 0; m < kColormapCount; ++m) {
            const auto bytes = colormapTable(Colormap(m));
            std::memcpy(all[size_t(m)].data(), bytes.data(), bytes.size());
            all[size_t(m)][kTransparentEntry] = 0u;
        }
        return all;
    }();
    const int m = std::clamp(int(map), 0, kColormapCount - 1);
    return tables[size_t(m)].data();
}

} // namespace

void colorHeatTexture(const float* grid, int w, int h, float vmin, float vmax, Colormap map, int texW, int texH,
                      uint8_t* rgba) {
    if (texW <= 0 || texH <= 0)
        return;
    if (w <= 0 || h <= 0 || !grid) {
        std::memset(rgba, 0, size_t(texW) * size_t(texH) * 4);
        return;
    }
    Axis ax, ay;
    makeAxis(w, texW, ax);
    makeAxis(h, texH, ay);
    const uint32_t* table = tableWords(map);
    const float* f = ax.f.data();
    // With a ramp the field is carried as its table position plus 0.5, (v - vmin) * 255 /
    // (vmax - vmin) + 0.5, which is affine in the value and so interpolates like it; the entry
    // is then its integer part clamped to 0..255 (= int(clamp(t, 0, 1) * 255 + 0.5)). Without
    // one (vmax <= vmin) the raw value is carried and stepped at vmax.
    const bool ramp = vmax > vmin;
    const float scale = ramp ? std::min(255.0f / (vmax - vmin), 3.0e38f) : 0.0f;
    auto entry = [&](float v) -> int {
        if (!(v == v))
            return kTransparentEntry;
        if (!ramp)
            return v >= vmax ? 255 : 0;
        return int(std::min(std::max(v, 0.0f), 255.0f));
    };
    std::vector<float> row(static_cast<size_t>(w));
    std::vector<int32_t> entries(static_cast<size_t>(texW));
    int32_t* idx = entries.data();
    for (int y = 0; y < texH; ++y) {
        // The row's field between the two grid rows, per column.
        const int gy = ay.i0[size_t(y)];
        const float fy = ay.f[size_t(y)];
        const float* r0 = grid + size_t(gy) * size_t(w);
        const float* r1 = fy > 0.0f ? r0 + w : r0;   // a zero weight takes one row (no NaN leak)
        for (int x = 0; x < w; ++x) {
            const float v = fy > 0.0f ? r0[x] + (r1[x] - r0[x]) * fy : r0[x];
            // Kept finite (NaN stays NaN), so an infinite cell cannot make inf - inf below.
            row[size_t(x)] = std::clamp(ramp ? (v - vmin) * scale + 0.5f : v, -1.0e30f, 1.0e30f);
        }
        // Each run of texels between two cell centres: v = a + (b - a) * f, first as table
        // entries (the common case, no NaN with a ramp, is a loop the compiler vectorizes),
        // then as colours.
        uint32_t* out = reinterpret_cast<uint32_t*>(rgba) + size_t(y) * size_t(texW);
        for (int c = 0; c < w; ++c) {
            const int x0 = ax.first[size_t(c)], x1 = ax.first[size_t(c) + 1];
            const float a = row[size_t(c)];
            const float b = c + 1 < w ? row[size_t(c) + 1] : a;
            if (ramp && a == a && b == b) {
                const float d = b - a;
                for (int x = x0; x < x1; ++x)
                    idx[x] = int(std::min(std::max(a + d * f[x], 0.0f), 255.0f));
            } else {
                for (int x = x0; x < x1; ++x)   // a zero weight takes `a` alone (no NaN leak)
                    idx[x] = entry(f[x] > 0.0f ? a + (b - a) * f[x] : a);
            }
            for (int x = x0; x < x1; ++x)
                out[x] = table[idx[x]];
        }
    }
}

void colorPaletteTexture(const float* grid, int w, int h, const uint8_t* paletteRgb, int entries, int texW, int texH,
                         uint8_t* rgba) {
    if (texW <= 0 || texH <= 0)
        return;
    std::memset(rgba, 0, size_t(texW) * size_t(texH) * 4);
    if (w <= 0 || h <= 0 || !grid || !paletteRgb || entries <= 0)
        return;
    // Texel i of an axis covers the cell floor((i + 0.5) * cells / texels).
    std::vector<int> col(static_cast<size_t>(texW));
    for (int x = 0; x < texW; ++x)
        col[size_t(x)] = std::min(w - 1, int((double(x) + 0.5) * w / texW));
    for (int y = 0; y < texH; ++y) {
        const float* row = grid + size_t(std::min(h - 1, int((double(y) + 0.5) * h / texH))) * size_t(w);
        uint8_t* out = rgba + size_t(y) * size_t(texW) * 4;
        for (int x = 0; x < texW; ++x) {
            const float v = row[col[size_t(x)]];
            if (!(v == v) || v < -0.5f || v >= float(entries) - 0.5f)
                continue;
            const uint8_t* c = paletteRgb + size_t(std::lround(v)) * 3;
            out[size_t(x) * 4 + 0] = c[0];
            out[size_t(x) * 4 + 1] = c[1];
            out[size_t(x) * 4 + 2] = c[2];
            out[size_t(x) * 4 + 3] = 255;
        }
    }
}

void buildHeatTexture(const float* grid, int w, int h, float vmin, float vmax, Colormap map, int texW, int texH,
                      HeatTexture& out) {
    out.width = std::max(1, texW);
    out.height = std::max(1, texH);
    out.rgba.resize(size_t(out.width) * size_t(out.height) * 4);
    colorHeatTexture(grid, w, h, vmin, vmax, map, out.width, out.height, out.rgba.data());
}

} // namespace glimpse::render
