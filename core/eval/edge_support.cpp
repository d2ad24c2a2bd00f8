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

EdgeSupport edgeSupport(const cv::Mat& image, const std::vector<ScoredLine>& lines, const EdgeSupportOptions& o) {
    if (image.empty() || image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
        throw Error("edge support: expected a non-empty 8-bit gray or RGB image");
    if (!(o.strongPercentile > 0 && o.strongPercentile < 1) || !(o.minSupport > 0 && o.minSupport <= 1) || o.topK < 1)
        throw Error("edge support: bad options");
    cv::Mat gray;
    if (image.channels() == 3) cv::cvtColor(image, gray, cv::COLOR_RGB2GRAY);
    else gray = image;
    gray.convertTo(gray, CV_32F, 1.0 / 255.0);
    if (o.blurSigma > 0) cv::GaussianBlur(gray, gray, cv::Size(0, 0), o.blurSigma);
    cv::Mat gx, gy, mag;
    cv::Sobel(gray, gx, CV_32F, 1, 0, 3);
    cv::Sobel(gray, gy, CV_32F, 0, 1, 3);
    cv::magnitude(gx, gy, mag);
    std::vector<float> all(mag.begin<float>(), mag.end<float>());
    const size_t k = std::min(all.size() - 1, size_t(o.strongPercentile * double(all.size())));
    std::nth_element(all.begin(), all.begin() + long(k), all.end());
    EdgeSupport r;
    r.threshold = std::max(double(all[k]), 1e-6);   // a flat image has no strong gradient
    const double cosTol = std::cos(o.angleToleranceDeg * M_PI / 180.0);
    r.lines = int(std::min<size_t>(size_t(o.topK), lines.size()));
    for (int i = 0; i < r.lines; ++i) {
        const ScoredLine& l = lines[size_t(i)];
        const double dx = l.x2 - l.x1, dy = l.y2 - l.y1, len = std::hypot(dx, dy);
        const int n = std::max(2, int(std::ceil(len)));
        const double nx = len > 0 ? -dy / len : 0, ny = len > 0 ? dx / len : 0;   // unit normal
        int good = 0;
        for (int s = 0; s < n; ++s) {
            const double t = (s + 0.5) / n;
            // Line coordinates: pixel (x, y) covers [x, x + 1); index coordinates are centres.
            const double x = l.x1 + t * dx - 0.5, y = l.y1 + t * dy - 0.5;
            const double g1 = bilinear(gx, x, y), g2 = bilinear(gy, x, y), m = std::hypot(g1, g2);
            if (len > 0 && m >= r.threshold && std::abs(g1 * nx + g2 * ny) >= cosTol * m) ++good;
        }
        const double support = double(good) / n;
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
        const double s = measured.support[size_t(i)];
        const cv::Vec3b c = s >= o.minSupport ? kOnEdgeColour : s >= 0.3 ? kPartialColour : kOffEdgeColour;
        cv::line(out, at(l.x1, l.y1), at(l.x2, l.y2), cv::Scalar(c[0], c[1], c[2]), thickness, cv::LINE_AA, kShift);
    }
    return out;
}

} // namespace glimpse::eval
