#include "core/eval/edge_support.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace glimpse::eval {

namespace {
// Bilinear read of a CV_32F image at (x, y) in index coordinates (clamped at the border).
float bilinear(const cv::Mat& m, double x, double y) {
    x = std::clamp(x, 0.0, double(m.cols - 1));
    y = std::clamp(y, 0.0, double(m.rows - 1));
    const int x0 = int(std::floor(x)), y0 = int(std::floor(y));
    const int x1 = std::min(x0 + 1, m.cols - 1), y1 = std::min(y0 + 1, m.rows - 1);
    const double fx = x - x0, fy = y - y0;
    const double top = m.at<float>(y0, x0) * (1 - fx) + m.at<float>(y0, x1) * fx;
    const double bottom = m.at<float>(y1, x0) * (1 - fx) + m.at<float>(y1, x1) * fx;
    return float(top * (1 - fy) + bottom * fy);
}
// Whether the gradient at (x, y) (index coordinates) is strong and across a line of unit
// normal (nx, ny): lineSupport's test of one sample.
bool supports(const EdgeField& f, double x, double y, double nx, double ny, double cosTol) {
    const double g1 = bilinear(f.gx, x, y), g2 = bilinear(f.gy, x, y), m = std::hypot(g1, g2);
    return m >= f.threshold && std::abs(g1 * nx + g2 * ny) >= cosTol * m;
}
} // namespace

EdgeField edgeField(const cv::Mat& image, const EdgeSupportOptions& o) {
    if (image.empty() || image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
        throw Error("edge support: expected a non-empty 8-bit gray or RGB image");
    if (!(o.strongPercentile > 0 && o.strongPercentile < 1)) throw Error("edge support: bad options");
    cv::Mat gray;
    if (image.channels() == 3) cv::cvtColor(image, gray, cv::COLOR_RGB2GRAY);
    else gray = image;
    gray.convertTo(gray, CV_32F, 1.0 / 255.0);
    if (o.blurSigma > 0) cv::GaussianBlur(gray, gray, cv::Size(0, 0), o.blurSigma);
    EdgeField f;
    cv::Sobel(gray, f.gx, CV_32F, 1, 0, 3);
    cv::Sobel(gray, f.gy, CV_32F, 0, 1, 3);
    cv::Mat mag;
    cv::magnitude(f.gx, f.gy, mag);
    std::vector<float> all(mag.begin<float>(), mag.end<float>());
    const size_t k = std::min(all.size() - 1, size_t(o.strongPercentile * double(all.size())));
    std::nth_element(all.begin(), all.begin() + long(k), all.end());
    f.threshold = std::max(double(all[k]), 1e-6);   // a flat image has no strong gradient
    return f;
}

double lineSupport(const EdgeField& f, double x1, double y1, double x2, double y2, const EdgeSupportOptions& o) {
    if (f.gx.empty() || f.gx.size() != f.gy.size() || f.gx.type() != CV_32F || f.gy.type() != CV_32F)
        throw Error("edge support: the gradient field is empty or malformed");
    if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(x2) || !std::isfinite(y2)) return 0.0;
    const double cosTol = std::cos(o.angleToleranceDeg * M_PI / 180.0);
    const double dx = x2 - x1, dy = y2 - y1, len = std::hypot(dx, dy);
    if (!(len > 0)) return 0.0;
    // Sampled once per pixel of length; a line far longer than the image (a diverged model's)
    // is capped so that one line costs at most a few image diagonals of samples.
    const double cap = 4.0 * std::hypot(double(f.gx.cols), double(f.gx.rows)) + 2.0;
    const int n = int(std::clamp(std::ceil(len), 2.0, cap));
    const double nx = -dy / len, ny = dx / len;   // unit normal
    int good = 0;
    for (int s = 0; s < n; ++s) {
        const double t = (s + 0.5) / n;
        // Line coordinates: pixel (x, y) covers [x, x + 1); index coordinates are centres.
        if (supports(f, x1 + t * dx - 0.5, y1 + t * dy - 0.5, nx, ny, cosTol)) ++good;
    }
    return double(good) / n;
}

namespace {
// One pass of snapToEdge; false when the line is left as it is.
bool snapOnce(const EdgeField& f, ScoredLine& l, const EdgeSupportOptions& o, const EdgeSnapOptions& s) {
    const double dx = double(l.x2) - l.x1, dy = double(l.y2) - l.y1, len = std::hypot(dx, dy);
    if (!(len >= 4.0) || !std::isfinite(len)) return false;
    const double cap = 4.0 * std::hypot(double(f.gx.cols), double(f.gx.rows)) + 2.0;
    const int n = int(std::clamp(std::ceil(len), 2.0, cap));
    const double ux = dx / len, uy = dy / len, nx = -uy, ny = ux;   // direction, unit normal
    const double cosTol = std::cos(o.angleToleranceDeg * M_PI / 180.0);
    constexpr double kStep = 0.25;
    const int reach = int(std::floor(s.maxShift / kStep));
    // The signed normal gradient at offset d from sample (x, y) (index coordinates); 0 where the
    // gradient is weak or runs along the line rather than across it.
    const auto across = [&](double x, double y, double d) {
        const double px = x + d * nx, py = y + d * ny;
        const double g1 = bilinear(f.gx, px, py), g2 = bilinear(f.gy, px, py), m = std::hypot(g1, g2);
        const double a = g1 * nx + g2 * ny;
        return (m >= f.threshold && std::abs(a) >= cosTol * m) ? a : 0.0;
    };
    std::vector<cv::Point2f> peaks[2];   // by polarity: normal gradient > 0, < 0
    std::vector<double> v(size_t(2 * reach + 1));
    for (int i = 0; i < n; ++i) {
        const double t = (i + 0.5) / n;
        const double x = l.x1 + t * dx - 0.5, y = l.y1 + t * dy - 0.5;
        int best = -1;
        for (int k = -reach; k <= reach; ++k) {
            v[size_t(k + reach)] = across(x, y, k * kStep);
            if (v[size_t(k + reach)] != 0.0 && (best < 0 || std::abs(v[size_t(k + reach)]) > std::abs(v[size_t(best)])))
                best = k + reach;
        }
        if (best < 0) continue;
        // The peak's centre: the centroid of the run of offsets around it (same polarity, at
        // least half its height), which is exact for the flat top that bilinear reads give
        // between two equal pixels.
        const double peak = v[size_t(best)];
        int lo = best, hi = best;
        while (lo > 0 && v[size_t(lo - 1)] * peak >= 0.5 * peak * peak) --lo;
        while (hi < 2 * reach && v[size_t(hi + 1)] * peak >= 0.5 * peak * peak) ++hi;
        double wsum = 0, dsum = 0;
        for (int k = lo; k <= hi; ++k) {
            wsum += std::abs(v[size_t(k)]);
            dsum += std::abs(v[size_t(k)]) * (k - reach) * kStep;
        }
        const double d = dsum / wsum;
        peaks[v[size_t(best)] > 0 ? 0 : 1].emplace_back(float(x + 0.5 + d * nx), float(y + 0.5 + d * ny));
    }
    const std::vector<cv::Point2f>& pts = peaks[0].size() >= peaks[1].size() ? peaks[0] : peaks[1];
    if (pts.size() < 2 || double(pts.size()) < s.minFound * n) return false;
    cv::Vec4f fit;
    cv::fitLine(pts, fit, cv::DIST_HUBER, 0, 0.01, 0.01);
    const double fx = fit[0], fy = fit[1], ox = fit[2], oy = fit[3];
    if (std::abs(fx * ux + fy * uy) < std::cos(s.maxTurnDeg * M_PI / 180.0)) return false;
    ScoredLine moved = l;
    const auto project = [&](float& x, float& y) {
        const double t = (x - ox) * fx + (y - oy) * fy;
        const double px = ox + t * fx, py = oy + t * fy;
        if (std::hypot(px - x, py - y) > s.maxShift) return false;
        x = float(px);
        y = float(py);
        return true;
    };
    if (!project(moved.x1, moved.y1) || !project(moved.x2, moved.y2)) return false;
    if (!(lineSupport(f, moved.x1, moved.y1, moved.x2, moved.y2, o) >= lineSupport(f, l.x1, l.y1, l.x2, l.y2, o)))
        return false;
    l = moved;
    return true;
}
} // namespace

// snapToEdge's trim: each end moved in to the first of two supported samples in a row, by at
// most maxTrim of the length.
bool trimEnds(const EdgeField& f, ScoredLine& l, const EdgeSupportOptions& o, double maxTrim) {
    const double dx = double(l.x2) - l.x1, dy = double(l.y2) - l.y1, len = std::hypot(dx, dy);
    if (!(len >= 4.0) || !std::isfinite(len)) return false;
    const double cap = 4.0 * std::hypot(double(f.gx.cols), double(f.gx.rows)) + 2.0;
    const int n = int(std::clamp(std::ceil(len), 2.0, cap));
    const double nx = -dy / len, ny = dx / len, cosTol = std::cos(o.angleToleranceDeg * M_PI / 180.0);
    std::vector<char> good(static_cast<size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
        const double t = (i + 0.5) / n;
        good[size_t(i)] = supports(f, l.x1 + t * dx - 0.5, l.y1 + t * dy - 0.5, nx, ny, cosTol);
    }
    const int most = int(std::floor(maxTrim * n));
    int first = 0, last = n - 1;
    while (first < most && !(good[size_t(first)] && good[size_t(first + 1)])) ++first;
    while (n - 1 - last < most && !(good[size_t(last)] && good[size_t(last - 1)])) --last;
    if (first >= last || (first == 0 && last == n - 1)) return false;
    const double t0 = double(first) / n, t1 = double(last + 1) / n;
    const ScoredLine old = l;
    l.x1 = float(old.x1 + t0 * dx), l.y1 = float(old.y1 + t0 * dy);
    l.x2 = float(old.x1 + t1 * dx), l.y2 = float(old.y1 + t1 * dy);
    return true;
}

bool snapToEdge(const EdgeField& f, ScoredLine& l, const EdgeSupportOptions& o, const EdgeSnapOptions& s) {
    if (f.gx.empty() || f.gx.size() != f.gy.size() || f.gx.type() != CV_32F || f.gy.type() != CV_32F)
        throw Error("edge snap: the gradient field is empty or malformed");
    if (!(s.maxShift > 0 && s.maxShift <= 64) || !(s.maxTurnDeg >= 0 && s.maxTurnDeg < 90) ||
        !(s.minFound > 0 && s.minFound <= 1) || s.passes < 1 || s.passes > 16 || !(s.maxTrim >= 0 && s.maxTrim < 0.5))
        throw Error("edge snap: bad options");
    bool moved = false;
    for (int p = 0; p < s.passes; ++p) {
        if (!snapOnce(f, l, o, s)) break;
        moved = true;
    }
    // Only a line that sits on its edge is trimmed to it (one that found none keeps its extent).
    if (moved && s.maxTrim > 0) trimEnds(f, l, o, s.maxTrim);
    return moved;
}

EdgeSupport edgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupportOptions& o) {
    if (!(o.strongPercentile > 0 && o.strongPercentile < 1) || !(o.minSupport > 0 && o.minSupport <= 1) || o.topK < 1)
        throw Error("edge support: bad options");
    const EdgeField f = edgeField(image, o);
    EdgeSupport r;
    r.threshold = f.threshold;
    r.lines = int(std::min<size_t>(size_t(o.topK), lines.size()));
    for (int i = 0; i < r.lines; ++i) {
        const ScoredLine& l = lines[size_t(i)];
        const double support = lineSupport(f, l.x1, l.y1, l.x2, l.y2, o);
        r.support.push_back(support);
        r.meanSupport += support;
        if (support >= o.minSupport) r.onEdge += 1;
    }
    if (r.lines > 0) {
        r.onEdge /= r.lines;
        r.meanSupport /= r.lines;
    }
    return r;
}

cv::Mat drawEdgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupport& measured,
                        const EdgeSupportOptions& o, int height) {
    if (image.empty() || image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
        throw Error("edge support figure: expected a non-empty 8-bit gray or RGB image");
    if (height < 0 || height > 16384) throw Error("edge support figure: bad height " + std::to_string(height));
    if (measured.lines < 0 || size_t(measured.lines) > lines.size() || measured.support.size() != size_t(measured.lines))
        throw Error("edge support figure: the measured result does not match the lines");
    cv::Mat out;
    if (image.channels() == 1) cv::cvtColor(image, out, cv::COLOR_GRAY2RGB);
    else out = image.clone();
    const double scale = height > 0 ? double(height) / image.rows : 1.0;
    if (height > 0 && height != image.rows)
        cv::resize(out, out, cv::Size(std::max(1, int(std::lround(image.cols * scale))), height), 0, 0,
                   scale < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
    const int thickness = std::max(2, int(std::lround(std::min(out.rows, out.cols) / 150.0)));
    // Line coordinates put pixel (x, y) at [x, x + 1); cv::line draws at pixel centres, with 4
    // fractional bits for sub-pixel endpoints.
    constexpr int kShift = 4;
    const auto at = [&](float x, float y) {
        return cv::Point(int(std::lround((x * scale - 0.5) * (1 << kShift))), int(std::lround((y * scale - 0.5) * (1 << kShift))));
    };
    for (int i = measured.lines - 1; i >= 0; --i) {
        const ScoredLine& l = lines[size_t(i)];
        const cv::Vec3b c = edgeSupportColour(measured.support[size_t(i)], o);
        cv::line(out, at(l.x1, l.y1), at(l.x2, l.y2), cv::Scalar(c[0], c[1], c[2]), thickness, cv::LINE_AA, kShift);
    }
    return out;
}

} // namespace glimpse::eval
