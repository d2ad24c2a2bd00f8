#include "renderer/colormap.h"

#include <algorithm>
#include <cmath>

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

} // namespace glimpse::render
