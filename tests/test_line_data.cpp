// core/data: augmentation line transforms and clipping (exact), the Wireframe JSON loader's
// validation (a bad record names the file and its index), export -> load round trip, the
// procedural generator (deterministic, exact ground truth inside the image), dataset specs.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <random>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/augment.h"
#include "core/data/open.h"
#include "core/data/photo_lines.h"
#include "core/data/procedural.h"
#include "core/data/wireframe.h"
#include "core/error.h"
#include "core/io/image.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::data;
using testing::contains;
using testing::errorOf;
using testing::maxDiff;

namespace {

void writeText(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

// A sample whose image marks each segment endpoint pixel, so image and line transforms can be
// checked against each other.
LineSample markedSample(int w, int h) {
    LineSample s;
    s.name = "marked";
    s.image = cv::Mat(h, w, CV_8UC3, cv::Scalar::all(0));
    s.lines = torch::tensor({{2.5f, 3.5f, 10.5f, 7.5f}, {20.5f, 1.5f, 20.5f, 13.5f}}, torch::kFloat);
    for (int i = 0; i < 2; ++i) {
        s.image.at<cv::Vec3b>(int(s.lines[i][1].item<float>()), int(s.lines[i][0].item<float>())) = cv::Vec3b(255, 0, 0);
        s.image.at<cv::Vec3b>(int(s.lines[i][3].item<float>()), int(s.lines[i][2].item<float>())) = cv::Vec3b(0, 255, 0);
    }
    return s;
}

// Mean gradient magnitude at points along the ground-truth segments (best within 1 px: anti-
// aliasing and blur) and the images' mean median gradient: segments lie on intensity edges
// when the first is well above the second.
std::pair<double, double> gradientOnLinesAndMedian(const LineDataset& ds) {
    double onLines = 0, count = 0, median = 0;
    for (int64_t i = 0; i < ds.size(); ++i) {
        auto s = ds.get(i);
        cv::Mat g, gx, gy, mag;
        cv::cvtColor(s.image, g, cv::COLOR_RGB2GRAY);
        cv::GaussianBlur(g, g, cv::Size(3, 3), 0);
        cv::Sobel(g, gx, CV_32F, 1, 0);
        cv::Sobel(g, gy, CV_32F, 0, 1);
        cv::magnitude(gx, gy, mag);
        cv::Mat flat = mag.reshape(1, 1).clone();
        cv::sort(flat, flat, cv::SORT_ASCENDING);
        median += flat.at<float>(0, flat.cols / 2);
        auto l = s.lines.accessor<float, 2>();
        for (int64_t k = 0; k < s.lines.size(0); ++k)
            for (double t = 0.2; t <= 0.8; t += 0.1) {
                const double x = l[k][0] + t * (l[k][2] - l[k][0]), y = l[k][1] + t * (l[k][3] - l[k][1]);
                float best = 0;
                for (int dy = -1; dy <= 1; ++dy)
                    for (int dx = -1; dx <= 1; ++dx) {
                        const int xi = std::clamp(int(x) + dx, 0, mag.cols - 1), yi = std::clamp(int(y) + dy, 0, mag.rows - 1);
                        best = std::max(best, mag.at<float>(yi, xi));
                    }
                onLines += best;
                count += 1;
            }
    }
    return {count > 0 ? onLines / count : 0.0, median / double(std::max<int64_t>(1, ds.size()))};
}

// A light image with a dark, slightly rotated quadrilateral (anti-aliased; LSD's advanced
// refinement drops exactly axis-aligned synthetic edges). Its corners in our coordinates
// (OpenCV's + 0.5): the edges are about 80 px (top, bottom) and 60 px (left, right) long.
const double kQuad[4][2] = {{40.5, 30.5}, {120.5, 34.5}, {116.5, 94.5}, {36.5, 90.5}};

cv::Mat rectanglePhoto() {
    cv::Mat m(120, 160, CV_8UC3, cv::Scalar::all(210));
    std::vector<cv::Point> pts;
    for (const auto& c : kQuad) pts.emplace_back(int((c[0] - 0.5) * 16), int((c[1] - 0.5) * 16));
    cv::fillConvexPoly(m, pts, cv::Scalar(40, 50, 60), cv::LINE_AA, 4);
    return m;
}

// Whether both endpoints of the segment lie within `tol` px of one edge of the quadrilateral
// (of its line, and within its extent).
bool onRectangleEdge(const float* l, double tol) {
    for (int e = 0; e < 4; ++e) {
        const double* p = kQuad[e];
        const double* q = kQuad[(e + 1) % 4];
        const double dx = q[0] - p[0], dy = q[1] - p[1], len = std::hypot(dx, dy);
        bool ok = true;
        for (int k = 0; k < 2; ++k) {
            const double x = l[2 * k] - p[0], y = l[2 * k + 1] - p[1];
            const double along = (x * dx + y * dy) / len, across = std::abs(x * dy - y * dx) / len;
            ok = ok && across <= tol && along >= -tol && along <= len + tol;
        }
        if (ok) return true;
    }
    return false;
}

} // namespace

class TestLineData : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void clipSegmentCases() {
        double ax = -10, ay = 5, bx = 30, by = 5;
        QVERIFY(clipSegment(ax, ay, bx, by, 0, 0, 20, 10));
        QCOMPARE(ax, 0.0);
        QCOMPARE(bx, 20.0);
        QCOMPARE(ay, 5.0);
        // Diagonal through a corner region: (−5, −5) -> (15, 15) in [0,10]^2 -> (0,0)-(10,10).
        ax = -5; ay = -5; bx = 15; by = 15;
        QVERIFY(clipSegment(ax, ay, bx, by, 0, 0, 10, 10));
        QCOMPARE(ax, 0.0);
        QCOMPARE(ay, 0.0);
        QCOMPARE(bx, 10.0);
        QCOMPARE(by, 10.0);
        // Entirely outside, and parallel outside.
        ax = 11; ay = 0; bx = 20; by = 5;
        QVERIFY(!clipSegment(ax, ay, bx, by, 0, 0, 10, 10));
        ax = -3; ay = -1; bx = 5; by = -1;
        QVERIFY(!clipSegment(ax, ay, bx, by, 0, 0, 10, 10));
        // Inside: unchanged.
        ax = 1; ay = 2; bx = 3; by = 4;
        QVERIFY(clipSegment(ax, ay, bx, by, 0, 0, 10, 10));
        QCOMPARE(ax, 1.0);
        QCOMPARE(by, 4.0);
        // Clipped endpoints are inside the box exactly, not a rounding error outside it, and
        // stay on the segment's line (to rounding).
        std::mt19937_64 rng(3);
        std::uniform_real_distribution<double> u(-60.0, 250.0);
        for (int i = 0; i < 20000; ++i) {
            const double a0 = u(rng), a1 = u(rng), b0 = u(rng), b1 = u(rng);
            ax = a0; ay = a1; bx = b0; by = b1;
            if (!clipSegment(ax, ay, bx, by, 0, 0, 192, 144)) continue;
            for (double x : {ax, bx}) QVERIFY2(x >= 0.0 && x <= 192.0, qPrintable(QString::number(x, 'g', 17)));
            for (double y : {ay, by}) QVERIFY2(y >= 0.0 && y <= 144.0, qPrintable(QString::number(y, 'g', 17)));
            const double cross = (b0 - a0) * (ay - a1) - (b1 - a1) * (ax - a0);
            QVERIFY(std::abs(cross) <= 1e-9 * (std::hypot(b0 - a0, b1 - a1) * 300.0));
        }
    }

    void clipLinesDropsShort() {
        auto l = torch::tensor({{-4.f, 2.f, 6.f, 2.f}, {9.f, 9.f, 30.f, 9.f}, {50.f, 50.f, 60.f, 60.f}});
        auto c = clipLines(l, 10, 10, 2.0);
        // Row 0 -> (0,2)-(6,2); row 1 -> (9,9)-(10,9) is 1 px long: dropped; row 2 outside.
        QCOMPARE(c.size(0), int64_t(1));
        QVERIFY(maxDiff(c[0], torch::tensor({0.f, 2.f, 6.f, 2.f})) < 1e-6);
    }

    void flipsAreExactAndInvolutive() {
        const auto s = markedSample(32, 16);
        auto h = flipHorizontal(s);
        QVERIFY(maxDiff(h.lines, torch::tensor({{29.5f, 3.5f, 21.5f, 7.5f}, {11.5f, 1.5f, 11.5f, 13.5f}})) < 1e-6);
        // The marked endpoint pixels moved with the lines.
        for (int i = 0; i < 2; ++i) {
            const int x = int(h.lines[i][0].item<float>()), y = int(h.lines[i][1].item<float>());
            QCOMPARE(h.image.at<cv::Vec3b>(y, x), cv::Vec3b(255, 0, 0));
        }
        auto v = flipVertical(s);
        QVERIFY(maxDiff(v.lines, torch::tensor({{2.5f, 12.5f, 10.5f, 8.5f}, {20.5f, 14.5f, 20.5f, 2.5f}})) < 1e-6);
        QCOMPARE(v.image.at<cv::Vec3b>(int(v.lines[0][3].item<float>()), int(v.lines[0][2].item<float>())),
                 cv::Vec3b(0, 255, 0));
        QVERIFY(maxDiff(flipHorizontal(h).lines, s.lines) < 1e-6);
        QCOMPARE(cv::norm(flipVertical(v).image, s.image, cv::NORM_INF), 0.0);
    }

    void resizeScalesLines() {
        const auto s = markedSample(32, 16);
        auto r = resizeSample(s, 64, 8);
        QCOMPARE(r.image.cols, 64);
        QCOMPARE(r.image.rows, 8);
        QVERIFY(maxDiff(r.lines, torch::tensor({{5.f, 1.75f, 21.f, 3.75f}, {41.f, 0.75f, 41.f, 6.75f}})) < 1e-5);
        QVERIFY(!errorOf([&] { resizeSample(s, 0, 8); }).empty());
    }

    void cropClipsExactly() {
        const auto s = markedSample(32, 16);
        // Crop x in [5, 25), y in [4, 14): line 0 (2.5,3.5)-(10.5,7.5) enters at x = 5
        // (t = 2.5 / 8: y = 3.5 + 4 * 0.3125 = 4.75); line 1 is cut at y = 4 and ends at 13.5.
        auto c = cropSample(s, cv::Rect(5, 4, 20, 10), 0.5);
        QCOMPARE(c.image.cols, 20);
        QCOMPARE(c.image.rows, 10);
        QCOMPARE(c.lines.size(0), int64_t(2));
        QVERIFY(maxDiff(c.lines[0], torch::tensor({0.f, 0.75f, 5.5f, 3.5f})) < 1e-5);
        QVERIFY(maxDiff(c.lines[1], torch::tensor({15.5f, 0.f, 15.5f, 9.5f})) < 1e-5);
        // Pixels agree with the crop.
        QCOMPARE(c.image.at<cv::Vec3b>(3, 5), s.image.at<cv::Vec3b>(7, 10));
        // A crop that leaves only a short stub drops the line.
        auto d = cropSample(s, cv::Rect(0, 0, 3, 4), 2.0);
        QCOMPARE(d.lines.size(0), int64_t(0));
        QVERIFY(contains(errorOf([&] { cropSample(s, cv::Rect(30, 0, 5, 5), 1.0); }), {"marked", "outside"}));
    }

    void colorJitterIdentityAndRange() {
        const cv::Mat img = testing::randomImage(12, 10, 3);
        QCOMPARE(cv::norm(colorJitter(img, 1.0, 1.0, 1.0), img, cv::NORM_INF) <= 1.0, true);
        cv::Mat bright = colorJitter(img, 2.0, 1.0, 1.0);
        QVERIFY(cv::mean(bright)[0] > cv::mean(img)[0]);
        cv::Mat gray = colorJitter(img, 1.0, 1.0, 0.0);   // saturation 0: all channels equal
        std::vector<cv::Mat> ch;
        cv::split(gray, ch);
        QVERIFY(cv::norm(ch[0], ch[1], cv::NORM_INF) <= 1.0);
    }

    void augmentPipelineKeepsLinesInside() {
        ProceduralLines ds({4, 3, 96, 80, 6.0});
        AugmentConfig cfg;
        cfg.minShortSide = 64;
        cfg.maxShortSide = 100;
        cfg.maxLongSide = 160;
        cfg.crop = 1.0;
        for (int64_t i = 0; i < ds.size(); ++i) {
            auto s = ds.get(i);
            std::mt19937_64 rng{uint64_t(i)};
            auto a = augment(s, cfg, rng);
            const int shortSide = std::min(a.image.rows, a.image.cols);
            QVERIFY(shortSide >= 64 && shortSide <= 100);
            QVERIFY(std::max(a.image.rows, a.image.cols) <= 160);
            if (a.lines.numel()) {
                const float minX = a.lines.select(1, 0).min().item().toFloat();
                const float maxX = a.lines.select(1, 2).max().item().toFloat();
                const float maxY = a.lines.select(1, 3).max().item().toFloat();
                QVERIFY(minX >= 0.f);
                QVERIFY(maxX <= float(a.image.cols) + 1e-4f);
                QVERIFY(maxY <= float(a.image.rows) + 1e-4f);
            }
            std::mt19937_64 rng2{uint64_t(i)};
            auto b = augment(s, cfg, rng2);   // same draws -> same result
            QCOMPARE(cv::norm(a.image, b.image, cv::NORM_INF), 0.0);
            QCOMPARE(a.lines.sizes(), b.lines.sizes());
        }
    }

    void proceduralIsDeterministic() {
        ProceduralLines a({10, 5, 128, 96, 8.0}), b({10, 5, 128, 96, 8.0}), c({10, 6, 128, 96, 8.0});
        int64_t total = 0;
        for (int64_t i : {0, 3, 9}) {
            auto x = a.get(i), y = b.get(i), z = c.get(i);
            QCOMPARE(x.image.cols, 128);
            QCOMPARE(x.image.rows, 96);
            QCOMPARE(x.image.type(), CV_8UC3);
            QCOMPARE(cv::norm(x.image, y.image, cv::NORM_INF), 0.0);
            QVERIFY(torch::equal(x.lines, y.lines));
            QVERIFY(cv::norm(x.image, z.image, cv::NORM_L1) > 0);
            QVERIFY(x.lines.size(0) >= 4);   // the back wall alone has 4 edges + rays
            total += x.lines.size(0);
            auto len = (x.lines.narrow(1, 0, 2) - x.lines.narrow(1, 2, 2)).norm(2, 1);
            QVERIFY(len.min().item<float>() >= 8.0f - 1e-3f);
            QVERIFY(x.lines.min().item<float>() >= 0.f);
            QVERIFY(x.lines.select(1, 0).max().item<float>() <= 128.f);
            QVERIFY(x.lines.select(1, 1).max().item<float>() <= 96.f);
        }
        QVERIFY(total > 12);
        QVERIFY(contains(errorOf([&] { a.get(10); }), {"index 10", "out of range"}));
        QVERIFY(contains(errorOf([] { ProceduralLines({1, 0, 8, 8, 8.0}); }), {"8x8", "outside"}));
    }

    void proceduralMatchesRecordedScenes() {
        // Scenes of seed 5 as the generator rendered them when this test was written: the
        // number of lines, their coordinate sum and the image's mean per channel (the tolerance
        // allows other SIMD paths in OpenCV's filters, not another scene).
        struct Golden { int64_t index; int64_t lines; double lineSum; double mean[3]; };
        const Golden golden[] = {
            {0, 7, 2425.2684, {198.994, 114.855, 149.635}},
            {1, 29, 9526.1325, {159.997, 162.418, 135.545}},
            {2, 10, 3327.0252, {191.362, 163.558, 178.867}},
            {3, 23, 7354.1633, {181.550, 154.340, 175.139}},
            {4, 19, 5498.9158, {113.811, 126.468, 114.836}},
            {5, 21, 6106.3736, {127.096, 143.197, 97.818}},
            {6, 18, 4431.1466, {75.953, 99.551, 143.849}},
            {7, 36, 9698.5690, {129.871, 147.784, 73.521}},
            {8, 5, 1493.3351, {136.387, 74.070, 140.959}},
            {9, 24, 5868.6732, {71.957, 81.110, 70.961}},
            {10, 32, 10766.7226, {81.592, 84.749, 132.912}},
            {11, 21, 6362.0913, {150.826, 151.451, 137.360}},
        };
        for (const auto& g : golden) {
            const auto s = renderProceduralScene(5, g.index, 160, 120, 8.0);
            const double sum = s.lines.to(torch::kDouble).sum().item<double>();
            const cv::Scalar mean = cv::mean(s.image);
            QCOMPARE(s.lines.size(0), g.lines);
            QVERIFY2(std::abs(sum - g.lineSum) < 1e-2, qPrintable(QString("scene %1: line sum %2").arg(g.index).arg(sum, 0, 'f', 4)));
            for (int c = 0; c < 3; ++c)
                QVERIFY2(std::abs(mean[c] - g.mean[c]) < 0.25,
                         qPrintable(QString("scene %1: channel %2 mean %3").arg(g.index).arg(c).arg(mean[c], 0, 'f', 3)));
        }
    }

    void proceduralEdgesAreImageEdges() {
        // Ground-truth segments lie on intensity edges: the gradient magnitude along them is
        // well above the image's median gradient.
        ProceduralLines ds({6, 11, 256, 256, 8.0});
        const auto [meanOn, med] = gradientOnLinesAndMedian(ds);
        QVERIFY2(meanOn > 2.5 * med, qPrintable(QString("on lines %1, median %2").arg(meanOn).arg(med)));
    }

    void facadeScenes() {
        ProceduralOptions o{12, 4, 192, 144, 8.0};
        o.scenes = ProceduralScenes::Facades;
        ProceduralLines a(o), b(o);
        int64_t total = 0, withParallelGroup = 0;
        for (int64_t i = 0; i < a.size(); ++i) {
            auto x = a.get(i), y = b.get(i);
            QCOMPARE(x.image.cols, 192);
            QCOMPARE(x.image.rows, 144);
            QCOMPARE(x.image.type(), CV_8UC3);
            QCOMPARE(cv::norm(x.image, y.image, cv::NORM_INF), 0.0);   // deterministic
            QVERIFY(torch::equal(x.lines, y.lines));
            QVERIFY(contains(x.name, {"facades/4/"}));
            // Not the room of the same seed and index: its own stream of draws.
            QVERIFY(cv::norm(x.image, renderProceduralScene(4, i, 192, 144).image, cv::NORM_L1) > 0);
            const int64_t n = x.lines.size(0);
            total += n;
            if (n == 0) continue;
            auto len = (x.lines.narrow(1, 0, 2) - x.lines.narrow(1, 2, 2)).norm(2, 1);
            QVERIFY(len.min().item<float>() >= 8.0f - 1e-3f);
            QVERIFY(x.lines.min().item<float>() >= 0.f);
            QVERIFY(x.lines.select(1, 0).max().item<float>() <= 192.f);
            QVERIFY(x.lines.select(1, 2).max().item<float>() <= 192.f);
            QVERIFY(x.lines.select(1, 1).max().item<float>() <= 144.f);
            QVERIFY(x.lines.select(1, 3).max().item<float>() <= 144.f);
            // Two-point perspective keeps a wall's vertical edges parallel in the image (the
            // optional rotation turns them all alike): some direction, to 1 degree, is shared
            // by at least 4 segments.
            auto acc = x.lines.accessor<float, 2>();
            std::vector<int> bins(180, 0);
            for (int64_t k = 0; k < n; ++k) {
                double deg = std::atan2(acc[k][3] - acc[k][1], acc[k][2] - acc[k][0]) * 180.0 / CV_PI;
                deg = std::fmod(deg + 360.0, 180.0);
                ++bins[int(std::lround(deg)) % 180];
            }
            int best = 0;
            for (int d = 0; d < 180; ++d) best = std::max(best, bins[d] + bins[(d + 1) % 180]);
            if (best >= 4) ++withParallelGroup;
        }
        // Dense structure: more segments per image than the rooms of the same size and seed.
        int64_t rooms = 0;
        for (int64_t i = 0; i < a.size(); ++i) rooms += renderProceduralScene(4, i, 192, 144).lines.size(0);
        QVERIFY2(total > rooms, qPrintable(QString("facades %1 segments, rooms %2").arg(total).arg(rooms)));
        QVERIFY2(withParallelGroup >= 10, qPrintable(QString("%1 of 12 scenes").arg(withParallelGroup)));
        // Their segments lie on image edges, as the rooms' do.
        const auto [meanOn, med] = gradientOnLinesAndMedian(a);
        QVERIFY2(meanOn > 2.5 * med, qPrintable(QString("on lines %1, median %2").arg(meanOn).arg(med)));
    }

    void mixedScenesAlternate() {
        ProceduralOptions o{6, 9, 128, 96, 8.0};
        o.scenes = ProceduralScenes::Mixed;
        ProceduralLines mixed(o);
        for (int64_t i = 0; i < mixed.size(); ++i) {
            const auto m = mixed.get(i);
            const auto ref = i % 2 == 0 ? renderProceduralScene(9, i, 128, 96) : renderFacadeScene(9, i, 128, 96);
            QCOMPARE(m.name, ref.name);
            QCOMPARE(cv::norm(m.image, ref.image, cv::NORM_INF), 0.0);
            QVERIFY(torch::equal(m.lines, ref.lines));
        }
    }

    void wireframeValidation() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        const std::string p = d + "/train.json";
        auto err = [&](const std::string& text) {
            writeText(p, text);
            return errorOf([&] { WireframeLines w(p); });
        };
        QVERIFY(contains(err("{not json"), {p, "not valid JSON"}));
        QVERIFY(contains(err("{\"a\": 1}"), {p, "list of records"}));
        QVERIFY(contains(err(R"([{"filename": "a.png", "lines": []}, {"lines": []}])"), {p, "record 1", "filename"}));
        QVERIFY(contains(err(R"([{"filename": "a.png", "lines": [[1, 2, 3]]}])"), {p, "record 0", "a.png", "line 0"}));
        QVERIFY(contains(err(R"([{"filename": "a.png", "lines": [[1, 2, 3, "x"]]}])"), {"record 0", "non-numeric"}));
        QVERIFY(contains(err(R"([{"filename": "a.png", "width": 10, "height": 10, "lines": [[1, 2, 3, 4], [1, 2, 30, 4]]}])"),
                         {"record 0", "line 1", "outside"}));
        QVERIFY(contains(err(R"([{"filename": "../a.png", "lines": []}])"), {"record 0", "relative"}));
        QVERIFY(contains(err(R"([{"filename": "a.png", "width": -3, "lines": []}])"), {"record 0", "width"}));
        QVERIFY(contains(err(R"([{"filename": "a.png"}])"), {"record 0", "lines"}));
        // Valid file, but the image is missing / of another size: reported at get().
        writeText(p, R"([{"filename": "a.png", "width": 16, "height": 8, "lines": [[1, 2, 3, 4]]}])");
        WireframeLines w(p);
        QCOMPARE(w.size(), int64_t(1));
        QVERIFY(contains(errorOf([&] { w.get(0); }), {p, "record 0", "a.png"}));
        saveImagePNG(d + "/a.png", cv::Mat(9, 16, CV_8UC3, cv::Scalar::all(7)));
        QVERIFY(contains(errorOf([&] { w.get(0); }), {"record 0", "16x9", "16x8"}));
        saveImagePNG(d + "/a.png", cv::Mat(8, 16, CV_8UC3, cv::Scalar::all(7)));
        auto s = w.get(0);
        QVERIFY(maxDiff(s.lines, torch::tensor({{1.f, 2.f, 3.f, 4.f}})) == 0);
        // A directory spec opens its train.json.
        QCOMPARE(openLineDataset(d)->size(), int64_t(1));
    }

    void exportRoundTrip() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString() + "/set";
        ProceduralLines ds({3, 9, 64, 48, 6.0});
        const std::string json = exportLineDataset(ds, d, "valid", {}, true);
        QVERIFY(QFile::exists(QString::fromStdString(d + "/overlays/000002.png")));
        auto back = openLineDataset(json);
        QCOMPARE(back->size(), int64_t(3));
        for (int64_t i = 0; i < 3; ++i) {
            auto a = ds.get(i), b = back->get(i);
            QCOMPARE(cv::norm(a.image, b.image, cv::NORM_INF), 0.0);   // PNG is lossless
            QVERIFY(maxDiff(a.lines, b.lines) < 1e-4);
        }
    }

    void lsdPseudoLinesFollowTheRectangle() {
        const cv::Mat img = rectanglePhoto();
        auto all = lsdPseudoLines(img);
        QVERIFY(all.size(0) >= 4);
        QVERIFY(all.size(0) <= 40);
        double prev = 1e9, horizontal = 0, vertical = 0;
        for (int64_t i = 0; i < all.size(0); ++i) {
            auto l = all[i].contiguous();
            const float* v = l.data_ptr<float>();
            QVERIFY2(onRectangleEdge(v, 1.5), qPrintable(QString("line %1 off the rectangle").arg(i)));
            const double len = std::hypot(v[2] - v[0], v[3] - v[1]);
            QVERIFY(len <= prev + 1e-4);   // longest first
            QVERIFY(len >= 0.04 * 160);
            prev = len;
            (std::abs(v[1] - v[3]) < std::abs(v[0] - v[2]) ? horizontal : vertical) += len;
        }
        // LSD covers the edges: about 2 x 80 px horizontal, 2 x 60 px vertical.
        QVERIFY2(horizontal > 140 && horizontal < 170, qPrintable(QString::number(horizontal)));
        QVERIFY2(vertical > 100 && vertical < 130, qPrintable(QString::number(vertical)));
        // maxLines keeps the longest: the two 80-px edges (nearly horizontal).
        auto two = lsdPseudoLines(img, {0.04, 2});
        QCOMPARE(two.size(0), int64_t(2));
        QVERIFY(maxDiff(two, all.slice(0, 0, 2)) == 0.0);
        for (int i = 0; i < 2; ++i) QVERIFY(std::abs(two[i][1].item<float>() - two[i][3].item<float>()) < 6);
        // minLengthFraction 0.45 (72 px of the 160-px long side): the 60-px edges drop out.
        auto longOnes = lsdPseudoLines(img, {0.45, 40});
        QVERIFY(longOnes.size(0) >= 1 && longOnes.size(0) <= 2);
        for (int64_t i = 0; i < longOnes.size(0); ++i)
            QVERIFY(std::abs(longOnes[i][1].item<float>() - longOnes[i][3].item<float>()) < 6);
        // A flat image has no lines; a gray one is refused with a message.
        QCOMPARE(lsdPseudoLines(cv::Mat(50, 60, CV_8UC3, cv::Scalar::all(128))).size(0), int64_t(0));
        QVERIFY(contains(errorOf([] { lsdPseudoLines(cv::Mat(50, 60, CV_8UC1, cv::Scalar(0))); }), {"RGB"}));
    }

    void lsdPhotoDatasets() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        cv::Mat a = rectanglePhoto(), b;
        cv::flip(a, b, 1);
        saveImagePNG(d + "/b.png", b);
        saveImagePNG(d + "/a.png", a);
        writeText(d + "/notes.txt", "not an image\n");
        auto ds = openLineDataset("lsd:" + d);
        QCOMPARE(ds->size(), int64_t(2));
        QVERIFY(contains(ds->describe(), {"lsd:" + d, "2 photos"}));
        auto s0 = ds->get(0), s1 = ds->get(1);
        QCOMPARE(s0.name, std::string("a.png"));   // sorted by name
        QCOMPARE(s1.name, std::string("b.png"));
        QCOMPARE(cv::norm(s0.image, a, cv::NORM_INF), 0.0);
        QVERIFY(maxDiff(s0.lines, lsdPseudoLines(a)) == 0.0);
        QVERIFY(maxDiff(ds->get(0).lines, s0.lines) == 0.0);   // the kept labels
        // b is a's mirror: its lines are a's mirrored (x -> 160 - x), as a set.
        auto mirrored = s0.lines.clone();
        mirrored.select(1, 0) = 160 - s0.lines.select(1, 0);
        mirrored.select(1, 2) = 160 - s0.lines.select(1, 2);
        QCOMPARE(s1.lines.size(0), s0.lines.size(0));
        for (int64_t i = 0; i < s1.lines.size(0); ++i) {
            double best = 1e9;
            for (int64_t j = 0; j < mirrored.size(0); ++j) {
                auto p = s1.lines[i], q = mirrored[j];
                const double direct = (p - q).abs().max().item<double>();
                const double swapped = (p - q.index({torch::tensor({2, 3, 0, 1})})).abs().max().item<double>();
                best = std::min(best, std::min(direct, swapped));
            }
            QVERIFY2(best < 1.0, qPrintable(QString::number(best)));
        }
        // A list: comments and blank lines skipped, paths relative to the list.
        QDir().mkpath(QString::fromStdString(d + "/lists"));
        writeText(d + "/lists/one.txt", "# photos\n\n  ../b.png  \n");
        auto one = openLineDataset("lsd:" + d + "/lists/one.txt");
        QCOMPARE(one->size(), int64_t(1));
        QCOMPARE(one->get(0).name, std::string("b.png"));
        writeText(d + "/lists/bad.txt", "../a.png\n../nope.png\n");
        QVERIFY(contains(errorOf([&] { openLineDataset("lsd:" + d + "/lists/bad.txt"); }),
                         {"bad.txt", "line 2", "nope.png"}));
        writeText(d + "/lists/empty.txt", "# nothing\n");
        QVERIFY(contains(errorOf([&] { openLineDataset("lsd:" + d + "/lists/empty.txt"); }), {"empty.txt", "no images"}));
        QVERIFY(contains(errorOf([&] { openLineDataset("lsd:" + d + "/lists"); }), {"lists", "no images"}));
        QVERIFY(contains(errorOf([] { openLineDataset("lsd:/no/such/photos"); }), {"/no/such/photos", "no such"}));
        QVERIFY(contains(errorOf([] { openLineDataset("lsd:"); }), {"lsd:FOLDER"}));
        // A corrupt photo is reported with its file when it is read.
        writeText(d + "/c.png", "not a png");
        auto withBad = openLineDataset("lsd:" + d);
        QCOMPARE(withBad->size(), int64_t(3));
        QVERIFY(contains(errorOf([&] { withBad->get(2); }), {"c.png"}));
    }

    void mixInterleavesParts() {
        auto m = openLineDataset("mix:procedural:3:1:64x48+procedural:5:2:64x48");
        QCOMPARE(m->size(), int64_t(10));   // 2 parts x the larger size
        const char* names[] = {"procedural/1/0", "procedural/2/0", "procedural/1/1", "procedural/2/1", "procedural/1/2",
                               "procedural/2/2", "procedural/1/0", "procedural/2/3", "procedural/1/1", "procedural/2/4"};
        for (int i = 0; i < 10; ++i) QCOMPARE(m->get(i).name, std::string(names[i]));
        auto direct = openLineDataset("procedural:5:2:64x48")->get(3);
        auto viaMix = m->get(7);
        QCOMPARE(cv::norm(direct.image, viaMix.image, cv::NORM_INF), 0.0);
        QVERIFY(maxDiff(direct.lines, viaMix.lines) == 0.0);
        QVERIFY(contains(m->describe(), {"procedural:3:1:64x48 (", " + procedural:5:2:64x48 ("}));
        QCOMPARE(m->describe().rfind("procedural:3:1:64x48", 0), size_t(0));   // the first part first
        QVERIFY(contains(errorOf([&] { m->get(10); }), {"out of range"}));
        for (const char* bad : {"mix:", "mix:procedural:3", "mix:procedural:3+", "mix:+procedural:3",
                                "mix:procedural:3+mix:procedural:2+procedural:2"})
            QVERIFY2(contains(errorOf([&] { openLineDataset(bad); }), {bad}), bad);
        QVERIFY(contains(errorOf([] { openLineDataset("mix:procedural:3+/no/such.json"); }), {"/no/such.json", "no such"}));
    }

    void specs() {
        auto p = openLineDataset("procedural:7");
        QCOMPARE(p->size(), int64_t(7));
        auto q = openLineDataset("procedural:5:3:64x48");
        QCOMPARE(q->get(0).image.cols, 64);
        QCOMPARE(q->get(0).image.rows, 48);
        QVERIFY(contains(q->describe(), {"procedural", "64x48"}));
        QVERIFY(contains(q->describe(), {"procedural:5:3:64x48 ("}));   // rooms: no scenes suffix
        auto f = openLineDataset("procedural:5:3:64x48:facades");
        QVERIFY(contains(f->describe(), {"procedural:5:3:64x48:facades ("}));
        QCOMPARE(f->get(1).name, std::string("facades/3/1"));
        auto m = openLineDataset("procedural:5:3:64x48:mixed");
        QVERIFY(contains(m->describe(), {"procedural:5:3:64x48:mixed ("}));
        QCOMPARE(m->get(0).name, std::string("procedural/3/0"));
        QCOMPARE(m->get(1).name, std::string("facades/3/1"));
        auto r = openLineDataset("procedural:5:3:64x48:rooms");
        QCOMPARE(cv::norm(r->get(2).image, q->get(2).image, cv::NORM_INF), 0.0);
        QVERIFY(contains(errorOf([] { openLineDataset("procedural:5:1:64x48:towers"); }), {"towers", "bad scenes"}));
        for (const char* bad : {"procedural:", "procedural:x", "procedural:0", "procedural:5:-1", "procedural:5:1:64",
                                "procedural:5:1:10x10", "procedural:5:1:64x48:9", "procedural:5:1:64x48:mixed:2"})
            QVERIFY2(contains(errorOf([&] { openLineDataset(bad); }), {bad}), bad);
        QVERIFY(contains(errorOf([] { openLineDataset("/no/such/file.json"); }), {"/no/such/file.json", "no such"}));
    }
};

QTEST_APPLESS_MAIN(TestLineData)
#include "test_line_data.moc"
