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
        const double x = x1 + t * dx - 0.5, y = y1 + t * dy - 0.5;
        const double g1 = bilinear(f.gx, x, y), g2 = bilinear(f.gy, x, y), m = std::hypot(g1, g2);
        if (m >= f.threshold && std::abs(g1 * nx + g2 * ny) >= cosTol * m) ++good;
    }
    return double(good) / n;
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
