#include "core/data/composition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "core/data/procedural_draw.h"
#include "core/error.h"

namespace glimpse::data {

namespace {

using namespace procgen;

constexpr uint64_t kRuleTag = 0x636f6d70, kImageTag = 0x636f696d;

enum Shape { kDisc = 0, kSquare, kTriangle, kRing, kCross, kBar, kShapeCount };
enum Fill { kSolid = 0, kStripes, kChecker, kDots, kOutline, kFillCount };
const char* kShapeNames[kShapeCount] = {"disc", "square", "triangle", "ring", "cross", "bar"};
const char* kFillNames[kFillCount] = {"solid", "striped", "checkered", "dotted", "outlined"};

struct Part {
    int shape = kDisc, fill = kSolid;
    double dx = 0, dy = 0;   // offset from the composition's centre, in image widths
    double size = 0.15;      // half-extent, in image widths
    double aspect = 1;       // height / width of squares, triangles, bars and crosses
    Rot rot;                 // the part's own rotation
    double period = 0.12;    // texture period, in image widths
    Rot texRot;              // texture orientation in the part's frame
};

struct Rule {
    std::vector<Part> parts;   // in drawing order
};

void checkIds(int64_t cls, const char* what) {
    if (cls < 0) throw Error(std::string(what) + ": class id " + std::to_string(cls) + " is negative");
}

Rule makeRule(uint64_t seed, int64_t cls) {
    Draw r(idSeed(seed, kRuleTag, uint64_t(cls)));
    Rule g;
    const int n = r.range(2, 3);
    double mx = 0, my = 0;
    for (int i = 0; i < n; ++i) {
        Part p;
        p.shape = r.range(0, kShapeCount - 1);
        p.fill = r.range(0, kFillCount - 1);
        p.dx = r.uni(-0.2, 0.2);
        p.dy = r.uni(-0.2, 0.2);
        p.size = r.uni(0.13, 0.2);
        p.aspect = p.shape == kBar ? r.uni(0.3, 0.45) : r.uni(0.65, 1.0);
        p.rot = rotation(r.uni(-1, 1));
        p.period = r.uni(0.1, 0.14);
        p.texRot = rotation(r.uni(-1, 1));
        mx += p.dx / n;
        my += p.dy / n;
        g.parts.push_back(p);
    }
    for (Part& p : g.parts) {   // the composition is centred on its parts' mean offset
        p.dx -= mx;
        p.dy -= my;
    }
    return g;
}

// ---- drawing ------------------------------------------------------------------------------

// A part placed in the image: centre, half-extent, rotation (image widths, the composition's
// transform applied).
struct Placed {
    double cx, cy, size;
    Rot rot;
};

Rot compose(const Rot& a, const Rot& b) { return {a.c * b.c - a.s * b.s, a.s * b.c + a.c * b.s}; }

// The part's filled silhouette (255 inside, anti-aliased) on a w x w canvas.
void drawSilhouette(const Layer& L, const Part& p, const Placed& q, cv::Mat& m) {
    auto corner = [&](double u, double v) {
        return L.at(q.cx + u * q.rot.c - v * q.rot.s, q.cy + u * q.rot.s + v * q.rot.c);
    };
    auto poly = [&](const std::vector<std::pair<double, double>>& pts) {
        std::vector<std::vector<cv::Point>> ps(1);
        for (const auto& [u, v] : pts) ps[0].push_back(corner(u * q.size, v * q.size));
        cv::fillPoly(m, ps, cv::Scalar(255), cv::LINE_AA, kShift);
    };
    const double a = p.aspect;
    switch (p.shape) {
    case kDisc: cv::circle(m, L.at(q.cx, q.cy), L.len(q.size), cv::Scalar(255), cv::FILLED, cv::LINE_AA, kShift); break;
    case kRing: {
        const double t = q.size * 0.4;
        cv::circle(m, L.at(q.cx, q.cy), L.len(q.size - t / 2), cv::Scalar(255), L.px(t), cv::LINE_AA, kShift);
        break;
    }
    case kSquare: poly({{-1, -a}, {1, -a}, {1, a}, {-1, a}}); break;
    case kBar: poly({{-1.2, -a}, {1.2, -a}, {1.2, a}, {-1.2, a}}); break;
    case kTriangle: poly({{0, -1.15 * a}, {1.0, 0.58 * a}, {-1.0, 0.58 * a}}); break;
    default: {   // cross: two bars
        const double t = 0.32;
        poly({{-1, -t}, {1, -t}, {1, t}, {-1, t}});
        poly({{-t, -a}, {t, -a}, {t, a}, {-t, a}});
        break;
    }
    }
}

// Texture value in [0, 1] (0: colour A, 1: colour B) at image point (x, y) for a part.
double textureAt(const Part& p, const Placed& q, double phase, double x, double y) {
    const Rot t = compose(q.rot, p.texRot);
    const double u = x - q.cx, v = y - q.cy;
    const double per = p.period * (q.size / p.size);   // scales with the part
    const double s = (u * t.c + v * t.s) / per + phase, w = (-u * t.s + v * t.c) / per + phase;
    auto tri = [](double z) { return std::fabs(z - std::floor(z) - 0.5) * 2.0; };   // 0..1
    if (p.fill == kStripes) return clamp01((tri(s) - 0.5) * 6.0 + 0.5);
    if (p.fill == kChecker) return clamp01(0.5 + (tri(s) - 0.5) * (tri(w) - 0.5) * 14.0);
    const double fa = s - std::floor(s) - 0.5, fb = w - std::floor(w) - 0.5;   // dots
    return clamp01((0.09 - fa * fa - fb * fb) * 40.0 + 0.5);
}

// Puts one part over the layer (premultiplied "over"): its silhouette (or, outlined, the
// silhouette's rim) coloured A, or A and B through its texture.
void drawPart(Layer& L, const Part& p, const Placed& q, const Rgb& a, const Rgb& b, double phase) {
    cv::Mat m(L.w, L.w, CV_8UC1, cv::Scalar(0));
    drawSilhouette(L, p, q, m);
    if (p.fill == kOutline) {
        cv::Mat inner;
        const int k = std::max(1, int(std::lround(q.size * 0.3 * L.w)));
        cv::erode(m, inner, cv::getStructuringElement(cv::MORPH_ELLIPSE, cv::Size(2 * k + 1, 2 * k + 1)));
        m -= inner;
    }
    const cv::Rect box = cv::boundingRect(m);
    const bool textured = p.fill == kStripes || p.fill == kChecker || p.fill == kDots;
    for (int y = box.y; y < box.y + box.height; ++y)
        for (int x = box.x; x < box.x + box.width; ++x) {
            const int al = m.at<uint8_t>(y, x);
            if (al == 0) continue;
            const double k = textured ? textureAt(p, q, phase, (x + 0.5) / L.w, (y + 0.5) / L.w) : 0.0;
            const double col[3] = {a.r + (b.r - a.r) * k, a.g + (b.g - a.g) * k, a.b + (b.b - a.b) * k};
            cv::Vec3b& f = L.fg.at<cv::Vec3b>(y, x);
            for (int c = 0; c < 3; ++c) f[c] = byte((col[c] * al + f[c] * (255 - al)) / 255.0);
            uint8_t& cov = L.mask.at<uint8_t>(y, x);
            cov = uint8_t(al + (cov * (255 - al) + 127) / 255);
        }
}

// A part colour: any hue and saturation, a value in [lo, hi].
Rgb partColour(Draw& r, double lo, double hi) {
    const double h = r.uni(0, 6), s = r.uni(0, 1), v = r.uni(lo, hi);
    return hsv(h, s, v);
}

} // namespace

std::string compositionFewShotRule(uint64_t seed, int64_t cls) {
    checkIds(cls, "compositionFewShotRule");
    std::string out;
    for (const Part& p : makeRule(seed, cls).parts)
        out += (out.empty() ? "" : " + ") + std::string(kFillNames[p.fill]) + " " + kShapeNames[p.shape];
    return out;
}

cv::Mat renderCompositionFewShot(uint64_t seed, int64_t cls, int64_t sample, int size) {
    checkIds(cls, "renderCompositionFewShot");
    if (sample < 0) throw Error("renderCompositionFewShot: sample " + std::to_string(sample) + " is negative");
    if (size < 8 || size > 1024)
        throw Error("renderCompositionFewShot: image size " + std::to_string(size) + " is outside 8..1024");
    const Rule g = makeRule(seed, cls);
    Draw r(idSeed(seed, kImageTag, uint64_t(cls), uint64_t(sample)));
    const int w = 2 * size;
    cv::Mat bg = background(r, w);
    const cv::Scalar mean = cv::mean(bg);
    const bool darkBg = (0.299 * mean[0] + 0.587 * mean[1] + 0.114 * mean[2]) < 128;
    // Parts contrast with the background: values in the other half; a part's two texture
    // colours take the two bands of that half in random order.
    const double lo = darkBg ? 0.6 : 0.0, hi = darkBg ? 1.0 : 0.4, mid = (lo + hi) / 2;
    const double gx = 0.5 + r.uni(-0.12, 0.12), gy = 0.5 + r.uni(-0.12, 0.12), gs = r.uni(0.8, 1.15);
    const Rot grot = rotation(r.uni(-0.2217, 0.2217));   // tan(12.5 deg): +-25 degrees
    Layer L{cv::Mat(w, w, CV_8UC3, cv::Scalar::all(0)), cv::Mat(w, w, CV_8UC1, cv::Scalar(0)), w};
    for (const Part& p : g.parts) {
        const double dx = p.dx + r.uni(-0.015, 0.015), dy = p.dy + r.uni(-0.015, 0.015);
        Placed q;
        q.cx = gx + gs * (dx * grot.c - dy * grot.s);
        q.cy = gy + gs * (dx * grot.s + dy * grot.c);
        q.size = gs * p.size * r.uni(0.92, 1.08);
        q.rot = compose(grot, p.rot);
        const bool swap = r.uni() < 0.5;
        const Rgb c1 = partColour(r, lo, mid - 0.05), c2 = partColour(r, mid + 0.05, hi);
        drawPart(L, p, q, swap ? c2 : c1, swap ? c1 : c2, r.uni());
    }
    return compositeSample(r, bg, L.fg, L.mask, size);
}

// ---- CompositionFewShotDataset ------------------------------------------------------------

CompositionFewShotDataset::CompositionFewShotDataset(uint64_t seed, int64_t firstClass, int64_t count,
                                                     int64_t samplesPerClass, int imageSize)
    : RenderedFewShotDataset("composition", renderCompositionFewShot, seed, firstClass, count, samplesPerClass,
                             imageSize) {
    for (int64_t k = 0; k < count; ++k) {
        char id[32];
        std::snprintf(id, sizeof id, "comp-%03lld", static_cast<long long>(firstClass + k));
        classNames_.push_back(id);
    }
}

} // namespace glimpse::data
