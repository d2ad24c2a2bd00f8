#include "core/data/procedural_draw.h"

#include <opencv2/imgproc.hpp>

namespace glimpse::data::procgen {

cv::Mat background(Draw& r, int w) {
    const int type = r.range(0, 2);
    const double h0 = r.uni(0, 6), s0 = r.uni(0, 0.45), v0 = r.uni(0.15, 0.95);
    const Rgb a = hsv(h0, s0, v0);
    cv::Mat bg(w, w, CV_8UC3, scalar(a));
    if (type == 1) {
        const double h1 = r.uni(0, 6), s1 = r.uni(0, 0.45), v1 = r.uni(0.15, 0.95);
        const Rgb b = hsv(h1, s1, v1);
        const Rot d = rotation(r.uni(-1, 1));
        for (int y = 0; y < w; ++y)
            for (int x = 0; x < w; ++x) {
                const double u = (x + 0.5) / w - 0.5, v = (y + 0.5) / w - 0.5;
                const double k = clamp01(0.5 + u * d.c + v * d.s);
                bg.at<cv::Vec3b>(y, x) = cv::Vec3b(byte(a.r + (b.r - a.r) * k), byte(a.g + (b.g - a.g) * k),
                                                   byte(a.b + (b.b - a.b) * k));
            }
    } else if (type == 2) {
        const int n = r.range(3, 7);
        for (int i = 0; i < n; ++i) {
            const double dr = r.uni(-45, 45), dg = r.uni(-45, 45), db = r.uni(-45, 45);
            const cv::Scalar c(byte(a.r + dr), byte(a.g + dg), byte(a.b + db));
            const double x0 = r.uni(0, 1), y0 = r.uni(0, 1), x1 = r.uni(0, 1), y1 = r.uni(0, 1);
            const double rad = r.uni(0.04, 0.15);
            const int thick = std::max(1, int(std::lround(r.uni(0.01, 0.04) * w)));
            auto at = [&](double x, double y) {
                return cv::Point(int(std::lround(x * w * (1 << kShift))), int(std::lround(y * w * (1 << kShift))));
            };
            if (i % 2 == 0) cv::line(bg, at(x0, y0), at(x1, y1), c, thick, cv::LINE_AA, kShift);
            else cv::circle(bg, at(x0, y0), int(std::lround(rad * w * (1 << kShift))), c, cv::FILLED, cv::LINE_AA, kShift);
        }
    }
    return bg;
}

cv::Mat sampleAffine(Draw& r, int w) {
    const Rot rot = rotation(r.uni(-0.17633, 0.17633));   // tan(10 deg): +-20 degrees
    const double s = r.uni(0.8, 1.2), tx = r.uni(-0.1, 0.1) * w, ty = r.uni(-0.1, 0.1) * w;
    const double c = w / 2.0, a = s * rot.c, b = s * rot.s;
    cv::Mat m(2, 3, CV_64F);
    m.at<double>(0, 0) = a;
    m.at<double>(0, 1) = -b;
    m.at<double>(0, 2) = c - a * c + b * c + tx;
    m.at<double>(1, 0) = b;
    m.at<double>(1, 1) = a;
    m.at<double>(1, 2) = c - b * c - a * c + ty;
    return m;
}

cv::Mat compositeSample(Draw& r, cv::Mat img, const cv::Mat& fg, const cv::Mat& mask, int size) {
    for (int y = 0; y < img.rows; ++y)   // premultiplied "over"
        for (int x = 0; x < img.cols; ++x) {
            const int a = mask.at<uint8_t>(y, x);
            const cv::Vec3b f = fg.at<cv::Vec3b>(y, x);
            cv::Vec3b& o = img.at<cv::Vec3b>(y, x);
            for (int c = 0; c < 3; ++c) o[c] = uint8_t(std::min(255, f[c] + (o[c] * (255 - a) + 127) / 255));
        }
    const double sigma = r.uni(0.3, 1.1);
    cv::GaussianBlur(img, img, cv::Size(0, 0), sigma, sigma, cv::BORDER_REFLECT);
    cv::Mat out;
    cv::resize(img, out, cv::Size(size, size), 0, 0, cv::INTER_AREA);
    const double noise = r.uni(2, 9);
    for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
            cv::Vec3b& o = out.at<cv::Vec3b>(y, x);
            for (int c = 0; c < 3; ++c) o[c] = byte(o[c] + noise * r.gauss());
        }
    return out;
}

} // namespace glimpse::data::procgen
