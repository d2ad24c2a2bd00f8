#include "core/data/augment.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::data {

bool clipSegment(double& ax, double& ay, double& bx, double& by, double x0, double y0,
                 double x1, double y1) {
    const double dx = bx - ax, dy = by - ay;
    double t0 = 0.0, t1 = 1.0;
    const double p[4] = {-dx, dx, -dy, dy};
    const double q[4] = {ax - x0, x1 - ax, ay - y0, y1 - ay};
    for (int i = 0; i < 4; ++i) {
        if (p[i] == 0.0) {
            if (q[i] < 0.0) return false;   // parallel and outside
            continue;
        }
        const double r = q[i] / p[i];
        if (p[i] < 0.0) {
            if (r > t1) return false;
            t0 = std::max(t0, r);
        } else {
            if (r < t0) return false;
            t1 = std::min(t1, r);
        }
    }
    if (t1 <= t0) return false;
    // Rounding in a + t d can land an endpoint a few ulps outside the box (-7e-15 for 0):
    // the clipped segment is inside by definition, so clamp.
    const double nax = std::clamp(ax + t0 * dx, x0, x1), nay = std::clamp(ay + t0 * dy, y0, y1);
    const double nbx = std::clamp(ax + t1 * dx, x0, x1), nby = std::clamp(ay + t1 * dy, y0, y1);
    ax = nax; ay = nay; bx = nbx; by = nby;
    return true;
}

torch::Tensor clipLines(const torch::Tensor& lines, double width, double height, double minLength) {
    auto in = lines.to(torch::kDouble).contiguous();
    const int64_t m = in.numel() ? in.size(0) : 0;
    std::vector<float> out;
    out.reserve(size_t(m) * 4);
    auto a = in.accessor<double, 2>();
    for (int64_t i = 0; i < m; ++i) {
        double ax = a[i][0], ay = a[i][1], bx = a[i][2], by = a[i][3];
        if (!clipSegment(ax, ay, bx, by, 0.0, 0.0, width, height)) continue;
        if (std::hypot(bx - ax, by - ay) < minLength) continue;
        out.insert(out.end(), {float(ax), float(ay), float(bx), float(by)});
    }
    return torch::from_blob(out.data(), {int64_t(out.size() / 4), 4}, torch::kFloat).clone();
}

namespace {

torch::Tensor linesOf(const LineSample& s) {
    if (!s.lines.defined() || s.lines.numel() == 0) return torch::zeros({0, 4}, torch::kFloat);
    return s.lines.to(torch::kFloat).reshape({-1, 4});
}

// Mirrors the image and its lines: horizontally (x -> width - x) or vertically (y -> height - y).
LineSample flipped(const LineSample& s, bool horizontal) {
    LineSample r;
    r.name = s.name;
    cv::flip(s.image, r.image, horizontal ? 1 : 0);
    auto l = linesOf(s).clone();
    const double size = horizontal ? s.image.cols : s.image.rows;
    const int64_t c = horizontal ? 0 : 1;   // the x or y column of each endpoint
    l.select(1, c) = size - l.select(1, c);
    l.select(1, c + 2) = size - l.select(1, c + 2);
    r.lines = l;
    return r;
}

} // namespace

LineSample flipHorizontal(const LineSample& s) { return flipped(s, true); }

LineSample flipVertical(const LineSample& s) { return flipped(s, false); }

LineSample resizeSample(const LineSample& s, int width, int height) {
    if (width < 1 || height < 1 || s.image.empty())
        throw Error("resize of " + s.name + ": bad target size " + std::to_string(width) + "x" +
                    std::to_string(height));
    LineSample r;
    r.name = s.name;
    cv::resize(s.image, r.image, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
    auto l = linesOf(s).to(torch::kDouble).clone();
    const double sx = double(width) / s.image.cols, sy = double(height) / s.image.rows;
    l.select(1, 0) *= sx;
    l.select(1, 2) *= sx;
    l.select(1, 1) *= sy;
    l.select(1, 3) *= sy;
    r.lines = l.to(torch::kFloat);
    return r;
}

LineSample cropSample(const LineSample& s, const cv::Rect& rect, double minLength) {
    const cv::Rect full(0, 0, s.image.cols, s.image.rows);
    if (rect.width < 1 || rect.height < 1 || (rect & full) != rect)
        throw Error("crop of " + s.name + ": rectangle outside the image");
    LineSample r;
    r.name = s.name;
    r.image = s.image(rect).clone();
    auto l = linesOf(s).to(torch::kDouble).clone();
    l.select(1, 0) -= rect.x;
    l.select(1, 2) -= rect.x;
    l.select(1, 1) -= rect.y;
    l.select(1, 3) -= rect.y;
    r.lines = clipLines(l, rect.width, rect.height, minLength);
    return r;
}

cv::Mat colorJitter(const cv::Mat& rgb, double brightness, double contrast, double saturation) {
    cv::Mat f;
    rgb.convertTo(f, CV_32FC3);
    f *= brightness;
    cv::Mat gray;
    cv::cvtColor(f, gray, cv::COLOR_RGB2GRAY);
    const double mean = cv::mean(gray)[0];
    f = (f - cv::Scalar::all(mean)) * contrast + cv::Scalar::all(mean);
    cv::cvtColor(f, gray, cv::COLOR_RGB2GRAY);
    cv::Mat gray3;
    cv::cvtColor(gray, gray3, cv::COLOR_GRAY2RGB);
    f = gray3 + (f - gray3) * saturation;
    cv::Mat out;
    f.convertTo(out, CV_8UC3);   // saturates to [0, 255]
    return out;
}

LineSample augment(const LineSample& s, const AugmentConfig& cfg, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    LineSample r = s;
    if (u(rng) < cfg.hflip) r = flipHorizontal(r);
    if (u(rng) < cfg.vflip) r = flipVertical(r);
    if (u(rng) < cfg.crop) {
        const double fw = cfg.cropMin + (1.0 - cfg.cropMin) * u(rng);
        const double fh = cfg.cropMin + (1.0 - cfg.cropMin) * u(rng);
        const int cw = std::max(1, int(std::lround(r.image.cols * fw)));
        const int ch = std::max(1, int(std::lround(r.image.rows * fh)));
        const int cx = int(std::floor(u(rng) * (r.image.cols - cw + 1)));
        const int cy = int(std::floor(u(rng) * (r.image.rows - ch + 1)));
        r = cropSample(r, cv::Rect(std::min(cx, r.image.cols - cw), std::min(cy, r.image.rows - ch), cw, ch),
                       cfg.minLength);
    }
    std::uniform_int_distribution<int64_t> side(cfg.minShortSide, std::max(cfg.minShortSide, cfg.maxShortSide));
    const int64_t target = side(rng);
    const int h = r.image.rows, w = r.image.cols;
    double scale = double(target) / std::min(h, w);
    if (std::max(h, w) * scale > cfg.maxLongSide) scale = double(cfg.maxLongSide) / std::max(h, w);
    const int nw = std::max(1, int(std::lround(w * scale))), nh = std::max(1, int(std::lround(h * scale)));
    if (nw != w || nh != h) r = resizeSample(r, nw, nh);
    r.lines = clipLines(r.lines.numel() ? r.lines : torch::zeros({0, 4}), nw, nh, cfg.minLength);
    const double b = 1.0 + cfg.brightness * (2 * u(rng) - 1);
    const double c = 1.0 + cfg.contrast * (2 * u(rng) - 1);
    const double sat = 1.0 + cfg.saturation * (2 * u(rng) - 1);
    r.image = colorJitter(r.image, b, c, sat);
    return r;
}

} // namespace glimpse::data
