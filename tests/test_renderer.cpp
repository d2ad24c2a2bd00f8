// Renderer tests: draw offscreen (Mesa's lavapipe where there is no GPU) and check pixels.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "renderer/colormap.h"
#include "renderer/renderer.h"

using namespace glimpse::render;

namespace {

struct Rgba {
    int r = 0, g = 0, b = 0, a = 0;
    bool operator==(const Rgba& o) const { return r == o.r && g == o.g && b == o.b && a == o.a; }
    bool operator!=(const Rgba& o) const { return !(*this == o); }
};

QString str(const Rgba& c) { return QString("(%1,%2,%3,%4)").arg(c.r).arg(c.g).arg(c.b).arg(c.a); }

Rgba pixel(const std::vector<uint8_t>& img, int width, int x, int y) {
    const size_t i = (size_t(y) * size_t(width) + size_t(x)) * 4;
    return {img[i], img[i + 1], img[i + 2], img[i + 3]};
}

// Background (0.2, 0.4, 0.6) is exactly (51, 102, 153) in UNORM8.
constexpr float kBgR = 0.2f, kBgG = 0.4f, kBgB = 0.6f;
const Rgba kBg{51, 102, 153, 255};

// An 8x8 RGB image of 2x2-pixel cells; every cell has its own colour so flips and shifts show.
constexpr int kCheckerSize = 8;
Rgba cellColor(int cx, int cy) { return {40 + 60 * cx, 30 + 70 * cy, ((cx + cy) & 1) ? 250 : 10, 255}; }
std::vector<uint8_t> checkerboardRgb() {
    std::vector<uint8_t> px(kCheckerSize * kCheckerSize * 3);
    for (int y = 0; y < kCheckerSize; ++y)
        for (int x = 0; x < kCheckerSize; ++x) {
            const Rgba c = cellColor(x / 2, y / 2);
            uint8_t* p = &px[(y * kCheckerSize + x) * 3];
            p[0] = uint8_t(c.r);
            p[1] = uint8_t(c.g);
            p[2] = uint8_t(c.b);
        }
    return px;
}

// What a nearest-sampled render must show at screen pixel (x, y): the image pixel under the
// pixel's centre, or the background.
template <typename ImagePixel>
Rgba expectedNearest(const View& v, int vw, int vh, int imgW, int imgH, int x, int y, ImagePixel imagePixel) {
    double ix, iy;
    v.screenToImage(x + 0.5, y + 0.5, vw, vh, ix, iy);
    if (ix < 0 || iy < 0 || ix >= imgW || iy >= imgH)
        return kBg;
    return imagePixel(int(std::floor(ix)), int(std::floor(iy)));
}

void savePpmIfAsked(const std::vector<uint8_t>& img, int w, int h, const char* name) {
    const char* env = std::getenv("GLIMPSE_TEST_SAVE");
    if (!env || !*env)
        return;
    std::string path = env;
    if (path.size() < 4 || path.compare(path.size() - 4, 4, ".ppm") != 0)
        path = std::string(name) + ".ppm";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
        qWarning("cannot write %s", path.c_str());
        return;
    }
    std::fprintf(f, "P6\n%d %d\n255\n", w, h);
    for (size_t i = 0; i < size_t(w) * size_t(h); ++i)
        std::fwrite(&img[i * 4], 1, 3, f);
    std::fclose(f);
    qInfo("saved %s", path.c_str());
}

} // namespace

class TestRenderer : public QObject {
    Q_OBJECT

    std::unique_ptr<OffscreenTarget> target_;
    static constexpr int kW = 64, kH = 48;

    Renderer& r() { return target_->renderer(); }
    std::vector<uint8_t> render() {
        auto img = target_->render();
        [&] { QCOMPARE(img.size(), size_t(target_->width()) * size_t(target_->height()) * 4); }();
        return img;
    }
    // Every pixel of a nearest-sampled render of the checkerboard under `v`.
    void compareCheckerboard(const std::vector<uint8_t>& img, const View& v, int w, int h) {
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const Rgba want = expectedNearest(v, w, h, kCheckerSize, kCheckerSize, x, y,
                                                  [](int ix, int iy) { return cellColor(ix / 2, iy / 2); });
                const Rgba got = pixel(img, w, x, y);
                if (got != want)
                    QFAIL(qPrintable(QString("pixel (%1,%2): got %3, want %4").arg(x).arg(y).arg(str(got), str(want))));
            }
    }

private Q_SLOTS:
    void initTestCase() {
        // Use the Khronos validation layer where it is installed: any error it reports fails
        // the test that caused it.
        if (qEnvironmentVariableIsEmpty("GLIMPSE_VK_VALIDATION"))
            qputenv("GLIMPSE_VK_VALIDATION", "1");
        try {
            target_ = std::make_unique<OffscreenTarget>(kW, kH);
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
        qInfo("Vulkan device: %s, validation %s", target_->deviceName().c_str(),
              target_->validationEnabled() ? "on" : "off (layer not installed)");
    }

    // Each test starts from an empty renderer at the default size.
    void init() {
        target_->resize(kW, kH);
        r().setImage(0, 0, 0, nullptr);
        r().clearHeatmap();
        r().setHeatmapOpacity(1.0f);
        r().setColormap(Colormap::Gray);
        r().setLines({});
        r().setOverlay(Overlay{false, {}, {}});
        r().setMousePos(-1, -1);
        r().setNearestAboveZoom(2.0);
        r().setBackground(kBgR, kBgG, kBgB);
        r().setView(View{});
    }

    void cleanup() { QCOMPARE(target_->validationErrors(), 0); }

    void cleanupTestCase() { target_.reset(); }

    void emptyShowsBackground() {
        const auto img = render();
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x)
                QCOMPARE(pixel(img, kW, x, y), kBg);
    }

    void checkerboardNearestAtZoom4() {
        const auto px = checkerboardRgb();
        r().setImage(kCheckerSize, kCheckerSize, 3, px.data());
        QCOMPARE(r().imageWidth(), kCheckerSize);
        const View v{4.0, 4.0, 4.0};   // image covers screen [16,48) x [8,40)
        r().setView(v);
        const auto img = render();
        // Cell centres: cell (cx, cy) spans screen x 16+8cx .. 24+8cx.
        for (int cy = 0; cy < 4; ++cy)
            for (int cx = 0; cx < 4; ++cx)
                QCOMPARE(pixel(img, kW, 20 + 8 * cx, 12 + 8 * cy), cellColor(cx, cy));
        QCOMPARE(pixel(img, kW, 15, 20), kBg);   // just left of the image
        QCOMPARE(pixel(img, kW, 16, 20), cellColor(0, 1));
        QCOMPARE(pixel(img, kW, 47, 39), cellColor(3, 3));
        QCOMPARE(pixel(img, kW, 48, 39), kBg);
        QCOMPARE(pixel(img, kW, 47, 40), kBg);
        compareCheckerboard(img, v, kW, kH);
        savePpmIfAsked(img, kW, kH, "test_renderer_checkerboard");
    }

    void panMovesPattern() {
        const auto px = checkerboardRgb();
        r().setImage(kCheckerSize, kCheckerSize, 3, px.data());
        r().setView(View{4.0, 4.0, 4.0});
        const auto before = render();
        View panned{4.0, 4.0, 4.0};
        panned.panByScreen(-8, 4);   // content moves 8 px left and 4 px down: centre (6, 3)
        QCOMPARE(panned.centerX, 6.0);
        QCOMPARE(panned.centerY, 3.0);
        r().setView(panned);
        const auto after = render();
        for (int y = 8; y < 40; ++y)
            for (int x = 16; x < 48; ++x) {
                if (x - 8 < 0 || y + 4 >= kH)
                    continue;
                QCOMPARE(pixel(after, kW, x - 8, y + 4), pixel(before, kW, x, y));
            }
        compareCheckerboard(after, panned, kW, kH);
    }

    void grayInput() {
        std::vector<uint8_t> gray(kCheckerSize * kCheckerSize);
        for (int i = 0; i < int(gray.size()); ++i)
            gray[i] = uint8_t(i * 4);
        r().setImage(kCheckerSize, kCheckerSize, 1, gray.data());
        const View v{4.0, 4.0, 4.0};
        r().setView(v);
        const auto img = render();
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x) {
                const Rgba want = expectedNearest(v, kW, kH, 8, 8, x, y, [&](int ix, int iy) {
                    const int g = gray[iy * 8 + ix];
                    return Rgba{g, g, g, 255};
                });
                QCOMPARE(pixel(img, kW, x, y), want);
            }
    }

    void rgbaInputBlendsOverBackground() {
        // Opaque cells except cell (1, 1), which is fully transparent: it shows the background.
        std::vector<uint8_t> rgba(kCheckerSize * kCheckerSize * 4);
        for (int y = 0; y < 8; ++y)
            for (int x = 0; x < 8; ++x) {
                const Rgba c = cellColor(x / 2, y / 2);
                uint8_t* p = &rgba[(y * 8 + x) * 4];
                p[0] = uint8_t(c.r);
                p[1] = uint8_t(c.g);
                p[2] = uint8_t(c.b);
                p[3] = (x / 2 == 1 && y / 2 == 1) ? 0 : 255;
            }
        r().setImage(8, 8, 4, rgba.data());
        const View v{4.0, 4.0, 4.0};
        r().setView(v);
        const auto img = render();
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x) {
                const Rgba want = expectedNearest(v, kW, kH, 8, 8, x, y, [](int ix, int iy) {
                    return (ix / 2 == 1 && iy / 2 == 1) ? kBg : cellColor(ix / 2, iy / 2);
                });
                QCOMPARE(pixel(img, kW, x, y), want);
            }
    }

    void invalidChannelsThrow() {
        const uint8_t px[4] = {};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, r().setImage(1, 1, 2, px));
    }

    void linearBelowNearestThreshold() {
        const auto px = checkerboardRgb();
        r().setImage(8, 8, 3, px.data());
        r().setView(View{4.0, 4.0, 1.5});
        auto isCellColour = [](const Rgba& c) {
            for (int cy = 0; cy < 4; ++cy)
                for (int cx = 0; cx < 4; ++cx)
                    if (c == cellColor(cx, cy))
                        return true;
            return c == kBg;
        };
        const auto linear = render();   // zoom 1.5 < 2: filtered, cell borders blend
        int blended = 0;
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x)
                blended += isCellColour(pixel(linear, kW, x, y)) ? 0 : 1;
        QVERIFY2(blended > 10, qPrintable(QString("only %1 blended pixels").arg(blended)));

        r().setNearestAboveZoom(1.5);   // now zoom 1.5 samples nearest: only cell colours
        const auto nearest = render();
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x)
                QVERIFY2(isCellColour(pixel(nearest, kW, x, y)),
                         qPrintable(QString("pixel (%1,%2) = %3").arg(x).arg(y).arg(str(pixel(nearest, kW, x, y)))));
    }

    void resizeTarget() {
        const auto px = checkerboardRgb();
        r().setImage(8, 8, 3, px.data());
        const View v{4.0, 4.0, 4.0};
        r().setView(v);
        target_->resize(100, 50);
        QCOMPARE(target_->width(), 100);
        QCOMPARE(target_->height(), 50);
        const auto img = render();
        QCOMPARE(img.size(), size_t(100 * 50 * 4));
        compareCheckerboard(img, v, 100, 50);
        target_->resize(30, 70);
        compareCheckerboard(render(), v, 30, 70);
    }

    void overlayChangesOnlyItsRegion() {
        target_->resize(320, 240);
        const int w = 320, h = 240;
        std::vector<uint8_t> gray(w * h);
        for (int i = 0; i < w * h; ++i)
            gray[i] = uint8_t((i % w) * 255 / w);
        r().setImage(w, h, 1, gray.data());
        r().setView(View::oneToOne(w, h));
        const auto plain = render();
        QVERIFY(r().overlayRect().empty());

        r().setOverlay(Overlay{true, "LETR", {{"layer", "3 / 6"}, {"head", "5"}, {"query", "417"}}});
        const auto withOverlay = render();
        const RectF rect = r().overlayRect();
        QVERIFY(!rect.empty());
        QVERIFY2(rect.x >= 0 && rect.y >= 0 && rect.x < 32 && rect.y < 32, "overlay is not in the top-left corner");
        QVERIFY2(rect.x + rect.w < w / 2 && rect.y + rect.h < h / 2, "overlay is unexpectedly large");
        QVERIFY2(rect.h > 3 * 13, "overlay window too short for a title and three rows");
        int inside = 0;
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const bool differs = pixel(plain, w, x, y) != pixel(withOverlay, w, x, y);
                if (!differs)
                    continue;
                if (!rect.contains(x + 0.5f, y + 0.5f))
                    QFAIL(qPrintable(QString("pixel (%1,%2) outside the overlay changed").arg(x).arg(y)));
                ++inside;
            }
        QVERIFY2(inside > int(rect.w * rect.h * 0.5f),
                 qPrintable(QString("only %1 pixels in the overlay changed").arg(inside)));

        // Same content again: the same pixels (the window is already sized).
        QCOMPARE(render(), withOverlay);

        // More rows: a taller window.
        r().setOverlay(Overlay{true, "LETR", {{"layer", "3 / 6"}, {"head", "5"}, {"query", "417"}, {"loss", "0.25"}}});
        render();
        QVERIFY(r().overlayRect().h > rect.h);

        r().setOverlay(Overlay{false, "LETR", {{"layer", "3"}}});
        QCOMPARE(render(), plain);
        QVERIFY(r().overlayRect().empty());
    }

    void overlaysOfTwoViewportsStayApart() {
        OffscreenTarget other(160, 120);
        target_->resize(160, 120);
        r().setOverlay(Overlay{true, "first viewport with a long title", {}});
        other.renderer().setBackground(kBgR, kBgG, kBgB);
        other.renderer().setOverlay(Overlay{true, "B", {{"k", "v"}}});
        const auto a1 = render();
        const auto b1 = other.render();
        const auto a2 = render();
        const auto b2 = other.render();
        QCOMPARE(a2, a1);
        QCOMPARE(b2, b1);
        const RectF ra = r().overlayRect(), rb = other.renderer().overlayRect();
        QVERIFY(ra.w > rb.w);   // each context laid out its own window
        QVERIFY(rb.h > ra.h);
        QCOMPARE(other.validationErrors(), 0);
    }

    // Overlays are rendered on more than one thread (the viewport on the GUI thread, a view
    // export on a worker) while Dear ImGui keeps one process-wide current context: two
    // targets rendered at the same time from two threads give the frames each gives alone.
    void overlaysRenderFromTwoThreads() {
        OffscreenTarget other(160, 120);
        target_->resize(160, 120);
        r().setOverlay(Overlay{true, "first viewport", {{"a", "1"}}});
        other.renderer().setBackground(kBgR, kBgG, kBgB);
        other.renderer().setOverlay(Overlay{true, "second", {{"k", "v"}, {"x", "y"}}});
        const auto a = render();
        const auto b = other.render();
        int sameA = 0, sameB = 0;
        std::thread worker([&] {
            for (int i = 0; i < 60; ++i) sameB += other.render() == b ? 1 : 0;
        });
        for (int i = 0; i < 60; ++i) sameA += render() == a ? 1 : 0;
        worker.join();
        QCOMPARE(sameA, 60);
        QCOMPARE(sameB, 60);
        QCOMPARE(other.validationErrors(), 0);
    }

    void heatmapGrayRamp() {
        const int w = 64, h = 32;
        std::vector<uint8_t> black(w * h, 0);
        r().setImage(w, h, 1, black.data());
        target_->resize(w, h);
        r().setView(View::oneToOne(w, h));
        const float values[2] = {0.0f, 1.0f};
        r().setHeatmap(2, 1, values, 0.0f, 1.0f);
        QVERIFY(r().hasHeatmap());
        r().setColormap(Colormap::Gray);
        r().setHeatmapOpacity(1.0f);
        const auto img = render();
        savePpmIfAsked(img, w, h, "test_renderer_heatmap");
        for (int y : {0, h / 2, h - 1}) {
            int previous = -1;
            for (int x = 0; x < w; ++x) {
                const Rgba c = pixel(img, w, x, y);
                QCOMPARE(c.g, c.r);
                QCOMPARE(c.b, c.r);
                QVERIFY2(c.r >= previous, qPrintable(QString("not monotonic at x=%1").arg(x)));
                previous = c.r;
                // Bilinear between cell centres at x = 16 and 48: value (u - 16) / 32, clamped.
                const double want = 255.0 * std::clamp((x + 0.5 - 16.0) / 32.0, 0.0, 1.0);
                QVERIFY2(std::abs(c.r - want) <= 2.0,
                         qPrintable(QString("x=%1: got %2, want %3").arg(x).arg(c.r).arg(want)));
            }
        }
        QVERIFY(pixel(img, w, 0, 16).r <= 2);
        QVERIFY(pixel(img, w, w - 1, 16).r >= 253);

        r().clearHeatmap();
        QVERIFY(!r().hasHeatmap());
        const auto cleared = render();
        for (int x = 0; x < w; ++x)
            QCOMPARE(pixel(cleared, w, x, 16), (Rgba{0, 0, 0, 255}));
    }

    // The heat texture's texels are the exact per-pixel formula at their centres: the bilinear
    // field (computed here directly from the grid) mapped to its nearest colour map entry; NaN
    // texels are transparent black. Its size is the image's, capped at kMaxHeatTextureSide.
    void heatTextureTexelsAreExact() {
        int tw = -1, th = -1;
        heatTextureSize(1024, 768, tw, th);
        QCOMPARE(tw, 1024);
        QCOMPARE(th, 768);
        heatTextureSize(2 * kMaxHeatTextureSide, kMaxHeatTextureSide, tw, th);   // capped, aspect kept
        QCOMPARE(tw, kMaxHeatTextureSide);
        QCOMPARE(th, kMaxHeatTextureSide / 2);
        heatTextureSize(3, 50000, tw, th);
        QCOMPARE(tw, 1);
        QCOMPARE(th, kMaxHeatTextureSide);
        heatTextureSize(0, 10, tw, th);
        QCOMPARE(tw, 0);
        QCOMPARE(th, 0);
        const int gw = 4, gh = 3;
        const float nan = std::nanf("");
        const float grid[gw * gh] = {0.1f, 0.9f, 0.4f, 0.3f,   //
                                     0.7f, -0.5f, 1.5f, 0.2f,  //
                                     0.0f, 0.6f, 0.5f, nan};
        // Texel (x, y) of a tw x th texture against the field computed directly.
        auto checkTexel = [&](const HeatTexture& t, Colormap map, int x, int y) {
            const auto table = colormapTable(map);
            // Texel centre in grid cells, clamped to the outer cell centres.
            const double gx = std::clamp((x + 0.5) * gw / t.width - 0.5, 0.0, gw - 1.0);
            const double gy = std::clamp((y + 0.5) * gh / t.height - 0.5, 0.0, gh - 1.0);
            const int x0 = int(gx), y0 = int(gy);
            const double fx = gx - x0, fy = gy - y0;
            auto g = [&](int cx, int cy, double w) {   // weighted cell, zero weights skipped
                return w == 0.0 ? 0.0 : w * grid[std::min(cy, gh - 1) * gw + std::min(cx, gw - 1)];
            };
            const double v = g(x0, y0, (1 - fx) * (1 - fy)) + g(x0 + 1, y0, fx * (1 - fy)) +
                             g(x0, y0 + 1, (1 - fx) * fy) + g(x0 + 1, y0 + 1, fx * fy);
            const uint8_t* got = &t.rgba[(size_t(y) * t.width + x) * 4];
            if (std::isnan(v))
                return got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 0;
            // The nearest entry; either neighbour where t * 255 is a half (float rounding).
            const double pos = std::clamp(v, 0.0, 1.0) * 255.0;
            const int e = int(pos + 0.5);
            const bool half = std::abs(pos - std::floor(pos) - 0.5) < 1e-4;
            const int alt = half ? (e == int(std::floor(pos)) ? e + 1 : e - 1) : e;
            return std::equal(got, got + 4, &table[size_t(e) * 4]) || std::equal(got, got + 4, &table[size_t(alt) * 4]);
        };
        for (Colormap map : {Colormap::Magma, Colormap::Jet}) {
            HeatTexture t;
            buildHeatTexture(grid, gw, gh, 0.0f, 1.0f, map, 13, 7, t);   // no whole texels per cell
            QCOMPARE(t.width, 13);
            QCOMPARE(t.height, 7);
            QCOMPARE(t.rgba.size(), size_t(13 * 7 * 4));
            for (int y = 0; y < t.height; ++y)
                for (int x = 0; x < t.width; ++x)
                    QVERIFY2(checkTexel(t, map, x, y),
                             qPrintable(QString("%1 texel %2,%3").arg(colormapName(map)).arg(x).arg(y)));
        }
        // A large texture (its rows are coloured by several threads): every texel.
        HeatTexture big;
        buildHeatTexture(grid, gw, gh, 0.0f, 1.0f, Colormap::Viridis, 601, 333, big);
        int bad = 0;
        for (int y = 0; y < big.height; ++y)
            for (int x = 0; x < big.width; ++x)
                bad += checkTexel(big, Colormap::Viridis, x, y) ? 0 : 1;
        QCOMPARE(bad, 0);
        // vmax <= vmin: a step at vmax applied to the interpolated field.
        const float ramp[2] = {0.0f, 1.0f};
        HeatTexture step;
        buildHeatTexture(ramp, 2, 1, 0.5f, 0.5f, Colormap::Gray, 10, 1, step);
        for (int x = 0; x < step.width; ++x) {
            const double v = std::clamp((x + 0.5) / 5.0 - 0.5, 0.0, 1.0);
            QCOMPARE(int(step.rgba[size_t(x) * 4]), v >= 0.5 ? 255 : 0);
        }
    }

    // A rendered heatmap against the exact per-pixel formula (bilinear field at the pixel
    // centre, nearest colour map entry, composited with the opacity), over an opaque and a
    // translucent image, within 2/255 per channel (8-bit rounding of the texture and the
    // blend) away from NaN borders: at 1:1 each pixel samples its own heat texel. The grid is
    // asymmetric and the expectations of a wrong map, flipped axes, another range or a full opacity differ
    // from the right one by far more than the tolerance (checked), so such faults fail.
    void heatmapMatchesExactFormula() {
        const int w = 120, h = 80, gw = 6, gh = 4;
        target_->resize(w, h);
        r().setView(View::oneToOne(w, h));
        std::vector<float> grid(gw * gh);
        for (int y = 0; y < gh; ++y)
            for (int x = 0; x < gw; ++x)
                grid[y * gw + x] = 0.05f + 0.13f * x + 0.06f * y + 0.04f * float((x * 7 + y * 3) % 5);
        grid[gw * gh - 1] = std::nanf("");   // bottom right cell
        const float vmin = 0.1f, vmax = 0.85f, opacity = 0.7f;
        std::vector<uint8_t> rgba(size_t(w) * h * 4);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                uint8_t* p = &rgba[(size_t(y) * w + x) * 4];
                p[0] = uint8_t(2 * x);
                p[1] = uint8_t(3 * y);
                p[2] = uint8_t((x * y) % 256);
                p[3] = uint8_t(128 + (x + y) % 128);
            }
        // The field at image point (px, py) for a grid, NaN where a NaN cell has weight.
        auto field = [&](const std::vector<float>& g, double px, double py) {
            const double gx = std::clamp(px / w * gw - 0.5, 0.0, gw - 1.0);
            const double gy = std::clamp(py / h * gh - 0.5, 0.0, gh - 1.0);
            const int x0 = std::min(int(gx), gw - 2), y0 = std::min(int(gy), gh - 2);
            const double fx = gx - x0, fy = gy - y0;
            double v = 0;
            const double wts[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
            const int cells[4] = {y0 * gw + x0, y0 * gw + x0 + 1, (y0 + 1) * gw + x0, (y0 + 1) * gw + x0 + 1};
            for (int i = 0; i < 4; ++i)
                if (wts[i] > 0) v += wts[i] * g[size_t(cells[i])];
            return v;
        };
        struct Setup {
            Colormap map;
            float vmin, vmax, opacity;
            bool flipX, flipY;
        };
        // Expected RGBA (0..255 doubles) of pixel (x, y) for the image with `channels`.
        auto expected = [&](const Setup& su, int channels, int x, int y, double out[4]) {
            std::vector<float> g = grid;
            if (su.flipX || su.flipY)
                for (int cy = 0; cy < gh; ++cy)
                    for (int cx = 0; cx < gw; ++cx)
                        g[size_t(cy * gw + cx)] = grid[size_t((su.flipY ? gh - 1 - cy : cy) * gw +
                                                              (su.flipX ? gw - 1 - cx : cx))];
            const double v = field(g, x + 0.5, y + 0.5);
            const auto table = colormapTable(su.map);
            const double a = std::isnan(v) ? 0.0 : su.opacity;
            const int e = std::isnan(v) ? 0 : int(std::clamp((v - su.vmin) / (su.vmax - su.vmin), 0.0, 1.0) * 255 + 0.5);
            const uint8_t* p = &rgba[(size_t(y) * w + x) * 4];
            const double ia = channels == 4 ? p[3] / 255.0 : 1.0;
            const double bg[3] = {double(kBg.r), double(kBg.g), double(kBg.b)};
            const double outA = a + ia * (1 - a);
            for (int c = 0; c < 3; ++c) {
                const double rgb = (table[size_t(e * 4 + c)] * a + p[c] * ia * (1 - a)) / outA;
                out[c] = rgb * outA + bg[c] * (1 - outA);   // over the background
            }
            out[3] = 255;
        };
        // Pixels whose neighbourhood (a pixel either way) crosses a NaN border are skipped.
        const double texel = 1.0;
        auto nearNanBorder = [&](int x, int y) {
            const bool centre = std::isnan(field(grid, x + 0.5, y + 0.5));
            for (double dx : {-texel, texel})
                for (double dy : {-texel, texel})
                    if (std::isnan(field(grid, x + 0.5 + dx, y + 0.5 + dy)) != centre) return true;
            return false;
        };
        for (Colormap map : {Colormap::Viridis, Colormap::Magma, Colormap::Jet, Colormap::Gray}) {
            const Setup right{map, vmin, vmax, opacity, false, false};
            const Colormap other = map == Colormap::Gray ? Colormap::Viridis : Colormap::Gray;
            const Setup wrong[] = {{other, vmin, vmax, opacity, false, false},
                                   {map, vmin, vmax, opacity, true, false},
                                   {map, vmin, vmax, opacity, false, true},
                                   {map, 0.0f, 1.0f, opacity, false, false},
                                   {map, vmin, vmax, 1.0f, false, false}};
            for (int channels : {3, 4}) {
                std::vector<uint8_t> img(size_t(w) * h * size_t(channels));
                for (size_t i = 0; i < size_t(w) * h; ++i)
                    for (int c = 0; c < channels; ++c) img[i * size_t(channels) + size_t(c)] = rgba[i * 4 + size_t(c)];
                r().setImage(w, h, channels, img.data());
                r().setHeatmap(gw, gh, grid.data(), vmin, vmax);
                r().setColormap(map);
                r().setHeatmapOpacity(opacity);
                const auto shot = render();
                const int tolerance = 2;
                int worst = 0, checked = 0;
                double wrongWorst[5] = {0, 0, 0, 0, 0};
                for (int y = 0; y < h; ++y)
                    for (int x = 0; x < w; ++x) {
                        if (nearNanBorder(x, y)) continue;
                        ++checked;
                        double want[4];
                        expected(right, channels, x, y, want);
                        const Rgba got = pixel(shot, w, x, y);
                        const int got3[3] = {got.r, got.g, got.b};
                        for (int c = 0; c < 3; ++c) {
                            const int d = int(std::lround(std::abs(got3[c] - want[c])));
                            if (d > worst) worst = d;
                            if (d > tolerance)
                                QFAIL(qPrintable(QString("%1, %2 channels, pixel (%3,%4) channel %5: got %6, want %7")
                                                     .arg(colormapName(map)).arg(channels).arg(x).arg(y).arg(c)
                                                     .arg(got3[c]).arg(want[c])));
                        }
                        for (int k = 0; k < 5; ++k) {
                            double bad[4];
                            expected(wrong[k], channels, x, y, bad);
                            for (int c = 0; c < 3; ++c) wrongWorst[k] = std::max(wrongWorst[k], std::abs(bad[c] - want[c]));
                        }
                    }
                QVERIFY(checked > w * h * 3 / 4);
                for (int k = 0; k < 5; ++k)
                    QVERIFY2(wrongWorst[k] > 12,
                             qPrintable(QString("%1: fault %2 would go unnoticed").arg(colormapName(map)).arg(k)));
                qInfo("%s, %d channels: worst difference %d/255 over %d pixels", colormapName(map), channels, worst,
                      checked);
            }
        }
        // Inside the NaN cell's region only the image shows (the last image: translucent, over
        // the background).
        double want[4];
        expected(Setup{Colormap::Gray, vmin, vmax, opacity, false, false}, 4, w - 2, h - 2, want);
        const Rgba nanPixel = pixel(render(), w, w - 2, h - 2);
        QVERIFY2(std::abs(nanPixel.r - want[0]) <= 1 && std::abs(nanPixel.g - want[1]) <= 1 &&
                     std::abs(nanPixel.b - want[2]) <= 1,
                 qPrintable(str(nanPixel)));
    }

    // Opacity is applied per frame: changing it alone rebuilds no heat texture but changes the
    // pixels. The colour map, the grid, its range and the image size rebuild it, and the next
    // frame shows the new colours (nothing stale).
    void heatTextureRebuildsOnlyWhenColoursChange() {
        const int w = 40, h = 30;
        target_->resize(w, h);
        r().setView(View::oneToOne(w, h));
        std::vector<uint8_t> black(size_t(w) * h, 0);
        r().setImage(w, h, 1, black.data());
        const float one[1] = {1.0f};
        r().setHeatmap(1, 1, one, 0.0f, 1.0f);
        r().setColormap(Colormap::Gray);
        r().setHeatmapOpacity(1.0f);
        QCOMPARE(pixel(render(), w, 20, 15), (Rgba{255, 255, 255, 255}));
        const uint64_t b0 = r().heatmapBuilds();
        QVERIFY(b0 > 0);
        QVERIFY(r().heatmapBuildMs() >= 0.0);
        QCOMPARE(r().heatmapTextureWidth(), w);   // the image's size
        QCOMPARE(r().heatmapTextureHeight(), h);

        r().setHeatmapOpacity(0.5f);
        const Rgba half = pixel(render(), w, 20, 15);
        QVERIFY2(std::abs(half.r - 128) <= 1 && half.g == half.r && half.b == half.r, qPrintable(str(half)));
        QCOMPARE(r().heatmapBuilds(), b0);
        (void)render();   // nothing changed
        QCOMPARE(r().heatmapBuilds(), b0);

        const auto jet = colormapTable(Colormap::Jet);
        r().setColormap(Colormap::Jet);
        const Rgba j = pixel(render(), w, 20, 15);
        QCOMPARE(r().heatmapBuilds(), b0 + 1);
        QVERIFY2(std::abs(j.r - (jet[255 * 4] + 1) / 2) <= 1 && j.g <= 1 && j.b <= 1, qPrintable(str(j)));

        const float zero[1] = {0.0f};
        r().setHeatmap(1, 1, zero, 0.0f, 1.0f);
        const Rgba z = pixel(render(), w, 20, 15);
        QCOMPARE(r().heatmapBuilds(), b0 + 2);
        QVERIFY2(z.r <= 1 && z.g <= 1 && std::abs(z.b - (jet[2] + 1) / 2) <= 1, qPrintable(str(z)));

        r().setHeatmap(1, 1, zero, -1.0f, 0.0f);   // same grid, new range: now the top entry
        const Rgba top = pixel(render(), w, 20, 15);
        QCOMPARE(r().heatmapBuilds(), b0 + 3);
        QVERIFY2(std::abs(top.r - (jet[255 * 4] + 1) / 2) <= 1 && top.b <= 1, qPrintable(str(top)));

        std::vector<uint8_t> narrow(size_t(10) * h, 0);   // 10 pixels wide: a 10-texel-wide texture
        r().setImage(10, h, 1, narrow.data());
        (void)render();
        QCOMPARE(r().heatmapBuilds(), b0 + 4);
        QCOMPARE(r().heatmapTextureWidth(), 10);
        r().setImage(10, h, 1, narrow.data());   // same size: same texture
        (void)render();
        QCOMPARE(r().heatmapBuilds(), b0 + 4);

        r().setImage(w, h, 1, black.data());
        r().clearHeatmap();
        QCOMPARE(pixel(render(), w, 20, 15), (Rgba{0, 0, 0, 255}));
        QCOMPARE(r().heatmapTextureWidth(), 0);
    }

    void heatmapColormapsAndOpacity() {
        const int w = 32, h = 16;
        std::vector<uint8_t> black(w * h, 0);
        r().setImage(w, h, 1, black.data());
        target_->resize(w, h);
        r().setView(View::oneToOne(w, h));
        // Uniform grids give one colour everywhere: the table entry, exactly (up to rounding).
        for (Colormap map : {Colormap::Viridis, Colormap::Magma, Colormap::Jet, Colormap::Gray}) {
            const auto table = colormapTable(map);
            for (float value : {0.0f, 0.5f, 1.0f}) {
                const float grid[4] = {value, value, value, value};
                r().setHeatmap(2, 2, grid, 0.0f, 1.0f);
                r().setColormap(map);
                const Rgba c = pixel(render(), w, 5, 7);
                const int i = int(std::lround(value * 255.0f));
                const Rgba want{table[i * 4], table[i * 4 + 1], table[i * 4 + 2], 255};
                QVERIFY2(std::abs(c.r - want.r) <= 2 && std::abs(c.g - want.g) <= 2 && std::abs(c.b - want.b) <= 2,
                         qPrintable(QString("%1(%2): got %3, want %4")
                                        .arg(colormapName(map)).arg(value).arg(str(c), str(want))));
            }
        }
        // Published end points: viridis #440154 .. #fde725, jet dark blue .. dark red.
        const auto viridis = colormapTable(Colormap::Viridis);
        QVERIFY(std::abs(viridis[0] - 0x44) <= 4 && std::abs(viridis[2] - 0x54) <= 4);
        QVERIFY(std::abs(viridis[255 * 4] - 0xfd) <= 4 && std::abs(viridis[255 * 4 + 1] - 0xe7) <= 4);
        const auto jet = colormapTable(Colormap::Jet);
        QCOMPARE(int(jet[2]), 128);
        QCOMPARE(int(jet[255 * 4]), 128);

        // Half opacity over black halves the colour; values outside vmin..vmax clamp.
        const float bright[1] = {7.0f};
        r().setColormap(Colormap::Gray);
        r().setHeatmap(1, 1, bright, 0.0f, 1.0f);
        r().setHeatmapOpacity(0.5f);
        const Rgba half = pixel(render(), w, 10, 10);
        QVERIFY2(std::abs(half.r - 128) <= 1, qPrintable(str(half)));
        // NaN is transparent.
        const float nan[1] = {std::nanf("")};
        r().setHeatmap(1, 1, nan, 0.0f, 1.0f);
        QCOMPARE(pixel(render(), w, 10, 10), (Rgba{0, 0, 0, 255}));
    }

    // The heatmap pass composites over opaque images with a plain mix (its opaque pipeline)
    // and over images with transparency with the general "over", then over the background;
    // vmax <= vmin is a step at vmax. Expected values computed here from the formulas.
    void heatmapOverOpaqueAndTransparentImages() {
        const int w = 32, h = 16;
        target_->resize(w, h);
        r().setView(View::oneToOne(w, h));
        r().setColormap(Colormap::Gray);
        r().setHeatmapOpacity(0.5f);
        const float one[1] = {1.0f};
        r().setHeatmap(1, 1, one, 0.0f, 1.0f);
        for (int alpha : {255, 128}) {
            std::vector<uint8_t> rgba(size_t(w) * h * 4);
            for (size_t i = 0; i < rgba.size(); i += 4) {
                rgba[i] = 200; rgba[i + 1] = 40; rgba[i + 2] = 90; rgba[i + 3] = uint8_t(alpha);
            }
            r().setImage(w, h, 4, rgba.data());
            const Rgba c = pixel(render(), w, 9, 6);
            const double ia = alpha / 255.0, a = 0.5, outA = a + ia * (1 - a);
            const double bg[3] = {kBg.r / 255.0, kBg.g / 255.0, kBg.b / 255.0};
            const double img[3] = {200 / 255.0, 40 / 255.0, 90 / 255.0};
            int want[3];
            for (int k = 0; k < 3; ++k) {
                const double rgb = (1.0 * a + img[k] * ia * (1 - a)) / outA;   // heat white
                want[k] = int(std::lround((rgb * outA + bg[k] * (1 - outA)) * 255.0));
            }
            QVERIFY2(std::abs(c.r - want[0]) <= 2 && std::abs(c.g - want[1]) <= 2 && std::abs(c.b - want[2]) <= 2,
                     qPrintable(QString("alpha %1: got %2, want %3,%4,%5")
                                    .arg(alpha).arg(str(c)).arg(want[0]).arg(want[1]).arg(want[2])));
        }
        // A step at vmax when vmax <= vmin: at or above it the top of the map, below it the bottom.
        std::vector<uint8_t> black(size_t(w) * h, 0);
        r().setImage(w, h, 1, black.data());
        r().setHeatmapOpacity(1.0f);
        for (float value : {0.4f, 0.5f, 0.6f}) {
            const float grid[1] = {value};
            r().setHeatmap(1, 1, grid, 0.5f, 0.5f);
            const Rgba c = pixel(render(), w, 9, 6);
            const int want = value >= 0.5f ? 255 : 0;
            QVERIFY2(std::abs(c.r - want) <= 1, qPrintable(QString("value %1: %2").arg(value).arg(str(c))));
        }
    }

    void lineKeepsScreenWidth_data() {
        QTest::addColumn<double>("zoom");
        QTest::addColumn<double>("centerY");
        QTest::addColumn<int>("row");   // screen row of the line's centre
        QTest::newRow("zoom 1") << 1.0 << 32.0 << 20;      // y 20.5 -> screen 20.5
        QTest::newRow("zoom 4") << 4.0 << 20.375 << 32;    // (20.5 - 20.375) * 4 + 32 = 32.5
    }
    void lineKeepsScreenWidth() {
        QFETCH(double, zoom);
        QFETCH(double, centerY);
        QFETCH(int, row);
        const int n = 64;
        target_->resize(n, n);
        std::vector<uint8_t> black(n * n, 0);
        r().setImage(n, n, 1, black.data());
        r().setView(View{32.0, centerY, zoom});
        LineSegment s;
        s.x1 = 8;
        s.y1 = 20.5f;
        s.x2 = 56;
        s.y2 = 20.5f;
        s.r = 1;
        s.g = 0;
        s.b = 0;
        s.a = 1;
        s.widthPx = 3;
        r().setLines({s});
        QCOMPARE(r().lines().size(), size_t(1));
        const auto img = render();
        const Rgba red{255, 0, 0, 255}, black4{0, 0, 0, 255};
        for (int x : {20, 32, 44}) {
            QCOMPARE(pixel(img, n, x, row), red);
            QCOMPARE(pixel(img, n, x, row - 1), red);
            QCOMPARE(pixel(img, n, x, row + 1), red);
            QCOMPARE(pixel(img, n, x, row - 2), black4);
            QCOMPARE(pixel(img, n, x, row + 2), black4);
            QCOMPARE(pixel(img, n, x, row - 5), black4);
            QCOMPARE(pixel(img, n, x, row + 5), black4);
            int touched = 0;
            for (int y = 0; y < n; ++y)
                touched += pixel(img, n, x, y) != black4 ? 1 : 0;
            QCOMPARE(touched, 3);
        }
    }

    void lineEdgesAreAntialiased() {
        const int n = 64;
        target_->resize(n, n);
        std::vector<uint8_t> black(n * n, 0);
        r().setImage(n, n, 1, black.data());
        r().setView(View::oneToOne(n, n));
        // Centre between two rows, 2 px wide: rows 19 and 20 fully covered, 18 and 21 not at
        // all; a half-pixel offset leaves half-covered rows on both sides.
        LineSegment s{8, 20.0f, 56, 20.0f, 1, 1, 1, 1, 2};
        r().setLines({s});
        auto img = render();
        QCOMPARE(pixel(img, n, 32, 19).r, 255);
        QCOMPARE(pixel(img, n, 32, 20).r, 255);
        QCOMPARE(pixel(img, n, 32, 18).r, 0);
        QCOMPARE(pixel(img, n, 32, 21).r, 0);
        s.y1 = s.y2 = 20.5f;
        r().setLines({s});
        img = render();
        QCOMPARE(pixel(img, n, 32, 20).r, 255);
        QVERIFY(std::abs(pixel(img, n, 32, 19).r - 128) <= 2);
        QVERIFY(std::abs(pixel(img, n, 32, 21).r - 128) <= 2);
        // A diagonal has partially covered pixels along its edges.
        r().setLines({LineSegment{4, 4, 60, 40, 1, 1, 1, 1, 2.5f}});
        img = render();
        int partial = 0;
        for (int y = 0; y < n; ++y)
            for (int x = 0; x < n; ++x) {
                const int v = pixel(img, n, x, y).r;
                partial += (v > 0 && v < 255) ? 1 : 0;
            }
        QVERIFY2(partial > 40, qPrintable(QString("%1 partially covered pixels").arg(partial)));
    }

    void manyLinesOneFrame() {
        const int n = 128;
        target_->resize(n, n);
        std::vector<uint8_t> black(n * n, 0);
        r().setImage(n, n, 1, black.data());
        r().setView(View::oneToOne(n, n));
        // 2000 horizontal segments stacked on rows 0..127, colour by index; then each row's
        // last segment wins where they overlap.
        std::vector<LineSegment> lines;
        for (int i = 0; i < 2000; ++i) {
            const float y = (i % n) + 0.5f;
            lines.push_back(LineSegment{2, y, float(n - 2), y, 0, 1, 0, 1, 1});
        }
        r().setLines(lines);
        const auto img = render();
        for (int y = 0; y < n; y += 7)
            QCOMPARE(pixel(img, n, n / 2, y), (Rgba{0, 255, 0, 255}));
        // Fewer lines afterwards reuse the buffer; the dropped ones are gone.
        lines.resize(10);
        r().setLines(lines);
        const auto fewer = render();
        QCOMPARE(pixel(fewer, n, n / 2, 5), (Rgba{0, 255, 0, 255}));
        QCOMPARE(pixel(fewer, n, n / 2, 50), (Rgba{0, 0, 0, 255}));
    }

    // The swapchain case, set up like QVulkanWindow's default render pass: 4x MSAA resolved,
    // a depth-stencil attachment, three frame slots, content changing every frame (textures
    // retired while other slots still hold frames, per-slot line buffers).
    void multisampledWithFramesInFlight() {
        OffscreenTarget::Options options;
        options.samples = VK_SAMPLE_COUNT_4_BIT;
        options.framesInFlight = 3;
        options.depthStencil = true;
        const int w = 128, h = 96;
        OffscreenTarget msaa(w, h, options);
        Renderer& m = msaa.renderer();
        m.setBackground(kBgR, kBgG, kBgB);
        const auto px = checkerboardRgb();
        m.setImage(8, 8, 3, px.data());
        const View v{-6.0, -3.0, 4.0};   // image at screen [88,120) x [60,92), clear of the overlay
        m.setView(v);
        // Quad edges lie on pixel edges, so every sample of a pixel agrees: exact colours.
        compareCheckerboard(msaa.render(), v, w, h);

        std::vector<uint8_t> gray(8 * 8);
        for (int frame = 0; frame < 7; ++frame) {
            std::fill(gray.begin(), gray.end(), uint8_t(20 + 30 * frame));
            m.setImage(8, 8, 1, gray.data());
            const float value = frame / 6.0f;
            const float grid[1] = {value};
            m.setHeatmap(1, 1, grid, 0.0f, 1.0f);
            m.setColormap(Colormap::Gray);
            m.setHeatmapOpacity(frame % 2 ? 0.0f : 0.5f);
            const float y = 1.5f + frame;
            m.setLines({LineSegment{0, y, 8, y, 1, 0, 0, 1, 3}});
            m.setOverlay(Overlay{true, "msaa", {{"frame", std::to_string(frame)}}});
            const auto img = msaa.render();
            QVERIFY(!m.overlayRect().empty());
            const RectF o = m.overlayRect();
            QVERIFY2(!o.contains(88, 60), qPrintable(QString("overlay %1,%2 %3x%4").arg(o.x).arg(o.y).arg(o.w).arg(o.h)));
            // Image pixel (6, 7), away from the line for every frame but the last.
            const int g = 20 + 30 * frame;
            const int want = frame % 2 ? g : int(std::lround(0.5 * g + 0.5 * (value * 255.0)));
            const Rgba c = pixel(img, w, 88 + 6 * 4 + 2, 60 + 7 * 4 + 2);
            if (frame < 6)
                QVERIFY2(std::abs(c.r - want) <= 2 && c.g == c.r,
                         qPrintable(QString("frame %1: %2, want %3").arg(frame).arg(str(c)).arg(want)));
            // The line's centre row.
            QCOMPARE(pixel(img, w, 104, int(60 + y * 4)), (Rgba{255, 0, 0, 255}));
        }
        QCOMPARE(msaa.validationErrors(), 0);
    }

    // Renderer::prepare (uploads recorded into the frame, as the app's viewport does) and the
    // synchronous path of record() draw the same pixels, frame after frame, while the image and
    // the heatmap (same size: its texture overwritten in place from a staging buffer the
    // deferred path must not reuse while a frame may still read it) change every frame; the
    // first never waits for an upload, the second waits once per frame with uploads.
    void deferredUploadsMatchSynchronous() {
        const int w = 96, h = 64;
        OffscreenTarget::Options deferred;
        deferred.framesInFlight = 2;
        OffscreenTarget::Options synchronous = deferred;
        synchronous.deferredUploads = false;
        OffscreenTarget a(w, h, deferred), b(w, h, synchronous);
        const int frames = 6;
        for (int frame = 0; frame < frames; ++frame) {
            std::vector<uint8_t> rgb(24 * 16 * 3);
            for (size_t i = 0; i < rgb.size(); ++i)
                rgb[i] = uint8_t((i * 7 + frame * 40) % 256);
            std::vector<float> grid(6 * 4);
            for (size_t i = 0; i < grid.size(); ++i)
                grid[i] = float((i + frame) % 5) / 4.0f;
            for (OffscreenTarget* t : {&a, &b}) {
                Renderer& m = t->renderer();
                m.setBackground(kBgR, kBgG, kBgB);
                if (frame % 2 == 0)   // the image changes every other frame, the heatmap always
                    m.setImage(24, 16, 3, rgb.data());
                m.setView(View::fit(24, 16, w, h));
                m.setHeatmap(6, 4, grid.data(), 0.0f, 1.0f);
                m.setColormap(Colormap::Viridis);
                m.setHeatmapOpacity(0.7f);
            }
            const auto pa = a.render(), pb = b.render();
            QCOMPARE(pa.size(), size_t(w * h * 4));
            if (pa != pb) {
                size_t i = 0;
                while (pa[i] == pb[i]) ++i;
                QFAIL(qPrintable(QString("frame %1: first difference at pixel (%2,%3)")
                                     .arg(frame).arg((i / 4) % w).arg((i / 4) / w)));
            }
            QVERIFY(pixel(pa, w, 10, 10) != pixel(pa, w, 50, 30));   // something was drawn
        }
        QCOMPARE(a.renderer().uploadWaits(), uint64_t(0));
        QCOMPARE(a.renderer().deferredUploads(), uint64_t(frames));
        QCOMPARE(b.renderer().uploadWaits(), uint64_t(frames));
        QCOMPARE(b.renderer().deferredUploads(), uint64_t(0));
        // A frame without changes uploads nothing in either mode.
        (void)a.render();
        (void)b.render();
        QCOMPARE(a.renderer().deferredUploads(), uint64_t(frames));
        QCOMPARE(b.renderer().uploadWaits(), uint64_t(frames));
        QCOMPARE(a.validationErrors(), 0);
        QCOMPARE(b.validationErrors(), 0);
    }

    void compositeOfAllLayers() {
        const int w = 256, h = 192;
        target_->resize(w, h);
        std::vector<uint8_t> rgb(w * h * 3);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                uint8_t* p = &rgb[(y * w + x) * 3];
                p[0] = uint8_t(x);
                p[1] = uint8_t(y);
                p[2] = uint8_t(128);
            }
        r().setImage(w, h, 3, rgb.data());
        r().setView(View::fit(w, h, w, h));
        std::vector<float> grid(32 * 24);
        for (int y = 0; y < 24; ++y)
            for (int x = 0; x < 32; ++x)
                grid[y * 32 + x] = std::sin(x * 0.3f) * std::cos(y * 0.4f);
        r().setHeatmap(32, 24, grid.data(), -1.0f, 1.0f);
        r().setColormap(Colormap::Viridis);
        r().setHeatmapOpacity(0.5f);
        std::vector<LineSegment> lines;
        for (int i = 0; i < 12; ++i)
            lines.push_back(LineSegment{10.0f + i * 20, 20, 240.0f - i * 15, 180, 1, 0.2f, 0.1f, 0.9f, 2});
        r().setLines(lines);
        r().setOverlay(Overlay{true, "composite", {{"layers", "image, heatmap, lines"}}});
        const auto img = render();
        QCOMPARE(img.size(), size_t(w * h * 4));
        savePpmIfAsked(img, w, h, "test_renderer_composite");
        for (size_t i = 3; i < img.size(); i += 4)
            QCOMPARE(int(img[i]), 255);   // opaque everywhere
    }
};

QTEST_APPLESS_MAIN(TestRenderer)
#include "test_renderer.moc"
