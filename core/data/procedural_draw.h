#pragma once
// Deterministic drawing helpers shared by the procedural few-shot families (core/data/fewshot.h:
// procedural[:SEED]; core/data/composition.h: composition[:SEED]). Random numbers come from
// std::mt19937_64 raw draws turned into numbers with plain arithmetic (no std::*_distribution,
// no sin/cos/log), and OpenCV's 8-bit drawing, warping, blurring and area resizing are
// fixed-point, so the same ids give the same bytes on every run and build. Internal to core/data.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include <opencv2/core.hpp>

namespace glimpse::data::procgen {

inline uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

inline uint64_t idSeed(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b = 0) {
    return splitmix(splitmix(splitmix(splitmix(seed) ^ tag) ^ a) ^ (b * 0x632be59bd9b4e019ULL));
}

// Raw mt19937_64 draws turned into numbers with plain arithmetic only (std::*_distribution
// differ between standard libraries), so every build draws the same values.
class Draw {
public:
    explicit Draw(uint64_t seed) : g_(seed) {}
    double uni() { return double(g_() >> 11) * (1.0 / 9007199254740992.0); }   // [0, 1)
    double uni(double a, double b) {
        const double u = uni();
        return a + (b - a) * u;
    }
    // Uniform in [0, n), unbiased (rejection).
    int64_t below(int64_t n) {
        const uint64_t un = uint64_t(n), limit = UINT64_MAX - UINT64_MAX % un;
        uint64_t v = g_();
        while (v >= limit) v = g_();
        return int64_t(v % un);
    }
    int range(int a, int b) { return a + int(below(int64_t(b) - a + 1)); }   // [a, b]
    // Approximately standard normal (sum of four uniforms, Irwin-Hall), arithmetic only.
    double gauss() {
        double s = 0;
        for (int i = 0; i < 4; ++i) s += uni();
        return (s - 2.0) * 1.7320508075688772;
    }

private:
    std::mt19937_64 g_;
};

// A rotation by the angle whose half-angle tangent is t (|t| <= 1: -90..90 degrees), without
// trigonometric functions: cos = (1 - t^2) / (1 + t^2), sin = 2t / (1 + t^2).
struct Rot {
    double c = 1, s = 0;
};
inline Rot rotation(double t) {
    const double d = 1.0 + t * t;
    return {(1.0 - t * t) / d, 2.0 * t / d};
}

struct Rgb {
    double r = 0, g = 0, b = 0;
};

// HSV (h in [0, 6), s, v in [0, 1]) to RGB 0..255.
inline Rgb hsv(double h, double s, double v) {
    const int i = int(h) % 6;
    const double f = h - std::floor(h), p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    const double tab[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    return {255 * tab[i][0], 255 * tab[i][1], 255 * tab[i][2]};
}

inline cv::Scalar scalar(const Rgb& c) { return cv::Scalar(c.r, c.g, c.b); }

inline double clamp01(double v) { return v < 0 ? 0 : (v > 1 ? 1 : v); }
inline uint8_t byte(double v) { return uint8_t(v <= 0 ? 0 : (v >= 255 ? 255 : std::lround(v))); }


constexpr int kShift = 4;   // sub-pixel bits of OpenCV drawing coordinates

struct Layer {
    cv::Mat fg, mask;   // premultiplied colour (CV_8UC3, black outside) and coverage (CV_8UC1)
    int w;
    cv::Point at(double x, double y) const {
        return {int(std::lround(x * w * (1 << kShift))), int(std::lround(y * w * (1 << kShift)))};
    }
    int len(double v) const { return int(std::lround(v * w * (1 << kShift))); }
    int px(double v) const { return std::max(1, int(std::lround(v * w))); }
};

// The background: plain, a linear gradient, or clutter (faint random strokes and blobs), w x w
// RGB; its colours come from `r` only (no class information).
cv::Mat background(Draw& r, int w);

// Forward map of a sample's random affine transform about the image centre (rotation +-20
// degrees, scale 0.8-1.2, translation up to 10%).
cv::Mat sampleAffine(Draw& r, int w);

// Puts the premultiplied fg (CV_8UC3) with coverage `mask` (CV_8UC1) over `img` (w x w RGB),
// then a slight blur, INTER_AREA reduction to size x size and Gaussian noise (from `r`).
cv::Mat compositeSample(Draw& r, cv::Mat img, const cv::Mat& fg, const cv::Mat& mask, int size);

} // namespace glimpse::data::procgen
