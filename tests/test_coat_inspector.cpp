// CoaT inspector GUI test: the real MainWindow and CoatInspector under Xvfb (lavapipe), a
// small random CoaT-Lite saved as a checkpoint, driven through its widgets and mouse clicks;
// checks the viewport's rendered pixels against maps computed from core directly (the query's
// effective attention, its argmax where the render is hottest), the CRPE / CLS / CAM / key
// channel views, the top-5 table, the gallery, the compare pane, trace round trip, bad input.
#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QListWidget>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThreadPool>
#include <QtTest>

#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/coat/inspector.h"
#include "app/coat/view.h"
#include "app/domain_check.h"
#include "app/letr/inspector.h"
#include "app/mainwindow.h"
#include "core/data/classification.h"
#include "core/models/coat/model.h"
#include "core/models/coat/trace.h"
#include "core/trace.h"
#include "core/util/autocast.h"
#include "core/util/threads.h"
#include "renderer/colormap.h"
#include "renderer/view.h"
#include "widgets/viewport.h"

using glimpse::app::CoatInspector;
using glimpse::app::CoatMode;
using glimpse::app::MainWindow;
using glimpse::widgets::ImageViewport;
using namespace glimpse::coat;

namespace {

constexpr int kW = 120, kH = 90;   // test image; the network sees a 64 x 64 centre crop

CoatConfig smallConfig() {
    CoatConfig c;
    c.variant = "custom";
    c.embedDims = {16, 16, 24, 32};
    c.serialDepths = {1, 2, 1, 1};
    c.parallelDepth = 0;
    c.numHeads = 8;
    c.mlpRatios = {2, 2, 2, 2};
    c.numClasses = 7;
    c.imageSize = 64;
    c.resize = 72;
    c.classNames = {"zero", "one", "two", "three", "four", "five", "six"};
    return c;
}

// The crop in original pixels, worked out here from the preprocessing rule (shorter side 90 ->
// 72, so 120 -> 96; centre crop 64 at (16, 4) of the resized image; x 1.25 back to original).
constexpr double kScale = 96.0 / 120.0;   // resized / original
constexpr double kCropX = 16 / kScale, kCropY = 4 / kScale, kCropSide = 64 / kScale;

// Token of `scale` under original-image point (x, y).
std::pair<int64_t, int64_t> tokenOf(int scale, double x, double y) {
    const double cx = (x - kCropX) * kScale, cy = (y - kCropY) * kScale;
    const int st = 4 << scale;
    return {int64_t(std::floor(cy / st)), int64_t(std::floor(cx / st))};
}

// Centre (original pixels) of token (ty, tx) of `scale`.
std::pair<double, double> tokenCentre(int scale, int64_t ty, int64_t tx) {
    const int st = 4 << scale;
    return {kCropX + (double(tx) + 0.5) * st / kScale, kCropY + (double(ty) + 0.5) * st / kScale};
}

double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat32) - b.to(torch::kFloat32)).abs().max().item<double>();
}

} // namespace

class TestCoatInspector : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString checkpoint_, imagePath_;

    static bool waitFrames(ImageViewport* vp, int extra) {
        const int target = vp->framesDrawn() + extra;
        return QTest::qWaitFor([&] {
            vp->requestRedraw();
            return vp->framesDrawn() >= target;
        }, 20000);
    }

    static QPoint toScreen(ImageViewport* vp, const QImage& frame, double ix, double iy) {
        double sx, sy;
        vp->view().imageToScreen(ix, iy, frame.width(), frame.height(), sx, sy);
        return QPoint(int(std::floor(sx)), int(std::floor(sy)));
    }

    void runOn(MainWindow& w) {
        w.resize(1100, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY2(w.viewport()->vulkanError().isEmpty(), qPrintable(w.viewport()->vulkanError()));
        CoatInspector* in = w.coatInspector();
        QSignalSpy loaded(&w, &MainWindow::imageLoaded);
        QSignalSpy ck(in, &CoatInspector::checkpointLoaded);
        QSignalSpy ready(in, &CoatInspector::traceReady);
        QSignalSpy failed(in, &CoatInspector::failed);
        w.openImage(imagePath_);
        QVERIFY(loaded.wait(10000));
        in->loadCheckpoint(checkpoint_);
        QVERIFY(QTest::qWaitFor([&] { return ck.count() + failed.count() > 0; }, 30000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QVERIFY(in->hasModel());
        in->run(false);
        QVERIFY(in->running());
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 60000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QVERIFY(!in->running());
        QVERIFY(in->active());   // running raised the CoaT panel
    }

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName("GlimpseTest");
        QCoreApplication::setApplicationName("GlimpseTestCoatInspector");
        qputenv("GLIMPSE_RESOURCES", dir_.path().toUtf8());   // no demo checkpoints from the tree
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
        // A dark 120 x 90 scene (every pixel below 110, so a full-scale gray heat cell is the
        // brightest gray on screen) with some structure for the model to attend to.
        cv::Mat bgr(kH, kW, CV_8UC3, cv::Scalar(40, 55, 70));
        cv::rectangle(bgr, cv::Rect(30, 20, 40, 45), cv::Scalar(100, 90, 20), cv::FILLED);
        cv::circle(bgr, {85, 55}, 14, cv::Scalar(10, 100, 60), cv::FILLED);
        imagePath_ = dir_.filePath("scene.png");
        QVERIFY(cv::imwrite(imagePath_.toStdString(), bgr));
        CoatModel model(smallConfig(), 11);
        checkpoint_ = dir_.filePath("tiny_coat.h5");
        saveCoat(model, checkpoint_.toStdString());
        const QString keep = qEnvironmentVariable("GLIMPSE_KEEP_TEST_CHECKPOINT");
        if (!keep.isEmpty()) {
            QFile::remove(keep);
            QVERIFY(QFile::copy(checkpoint_, keep));
        }
    }

    void runSelectClickRender() {
        MainWindow w;
        runOn(w);
        if (QTest::currentTestFailed()) return;
        CoatInspector* in = w.coatInspector();
        ImageViewport* vp = w.viewport();
        auto trace = in->trace();
        QVERIFY(trace);
        QVERIFY(trace->grid(0) == (Grid{16, 16}));

        // Selectors: 4 scales, the blocks of the chosen scale, mean + 8 heads.
        QCOMPARE(in->scaleBox()->count(), 4);
        QCOMPARE(in->blockBox()->count(), 1);
        QCOMPARE(in->headBox()->count(), 9);
        in->scaleBox()->setCurrentIndex(1);
        QCOMPARE(in->settings().scale, 1);
        QCOMPARE(in->blockBox()->count(), 2);   // serial_blocks2.0, serial_blocks2.1
        QCOMPARE(in->blockBox()->currentIndex(), 1);
        in->blockBox()->setCurrentIndex(0);
        QCOMPARE(in->settings().block, 0);
        const int b = trace->blocksOfScale(1)[0];
        QCOMPARE(trace->block(b).name, std::string("serial_blocks2.0"));

        // The query: an image point inside the crop; its token at scale 2 worked out here.
        const int px = 40, py = 50;
        const auto [ty, tx] = tokenOf(1, px + 0.5, py + 0.5);
        QCOMPARE(ty, int64_t(4));   // crop pixel (16.4, 36.4) / stride 8
        QCOMPARE(tx, int64_t(2));
        // A head whose map has a clear maximum (so "the hottest region" is one token).
        int head = -1;
        for (int h = 0; h < trace->numHeads() && head < 0; ++h) {
            const auto m = trace->effectiveAttention(b, h, ty, tx).flatten();
            const auto top = std::get<0>(m.topk(2));
            const double range = (m.max() - m.min()).item<double>();
            if ((top[0] - top[1]).item<double>() > 0.1 * range) head = h;
        }
        QVERIFY2(head >= 0, "no head with a clear maximum");
        in->headBox()->setCurrentIndex(head + 1);
        QCOMPARE(in->settings().head, head);
        in->setColormap(glimpse::render::Colormap::Gray);
        in->setOpacity(1.0);
        vp->setOverlayVisible(false);
        QVERIFY(waitFrames(vp, 2));
        const QImage before = vp->grabFrame();

        // Click the pixel: the query moves there and the view shows its effective attention.
        QTest::mouseClick(vp->viewWindow(), Qt::LeftButton, Qt::NoModifier, toScreen(vp, before, px + 0.5, py + 0.5));
        QCOMPARE(in->settings().mode, CoatMode::Attention);
        QCOMPARE(in->settings().queryX, px + 0.5);
        QCOMPARE(in->settings().queryY, py + 0.5);
        const torch::Tensor att = trace->effectiveAttention(b, head, ty, tx);
        const auto idx = att.flatten().argmax().item<int64_t>();
        const int64_t ay = idx / att.size(1), ax = idx % att.size(1);
        const auto& scene = vp->scene();
        QVERIFY(scene.hasHeatmap());
        QCOMPARE(scene.heatLabel, std::string("w_j"));
        QCOMPARE(double(scene.heatMax), att.max().item<double>());
        bool queryRow = false;
        for (const auto& r : scene.overlayRows)
            if (r.first == "query") queryRow = r.second.find("token (4, 2)") != std::string::npos;
        QVERIFY(queryRow);
        // The heat under a token's centre is that token's weight; outside the crop nothing.
        for (int64_t y : {int64_t(0), ay, int64_t(7)})
            for (int64_t x : {int64_t(0), ax, int64_t(5)}) {
                const auto [cx, cy] = tokenCentre(1, y, x);
                QCOMPARE(scene.heatAt(cx, cy, kW, kH), att[y][x].item<float>());
            }
        QVERIFY(std::isnan(scene.heatAt(5, 45, kW, kH)));

        QVERIFY(waitFrames(vp, 2));
        const QImage frame = vp->grabFrame();
        int changed = 0;
        for (int y = 0; y < frame.height(); y += 2)
            for (int x = 0; x < frame.width(); x += 2)
                if (frame.pixel(x, y) != before.pixel(x, y)) ++changed;
        QVERIFY2(changed > 500, qPrintable(QString::number(changed)));
        // The hottest gray pixels of the render lie on the argmax token of the map from core.
        int best = -1;
        for (int y = 0; y < frame.height(); ++y)
            for (int x = 0; x < frame.width(); ++x) {
                const QColor c = frame.pixelColor(x, y);
                if (std::abs(c.red() - c.green()) <= 6 && std::abs(c.green() - c.blue()) <= 6)
                    best = std::max(best, c.green());
            }
        QVERIFY2(best >= 245, qPrintable(QString::number(best)));
        int hot = 0;
        for (int y = 0; y < frame.height(); ++y)
            for (int x = 0; x < frame.width(); ++x) {
                const QColor c = frame.pixelColor(x, y);
                if (!(std::abs(c.red() - c.green()) <= 6 && std::abs(c.green() - c.blue()) <= 6 &&
                      c.green() >= best - 3))
                    continue;
                double ix, iy;
                vp->view().screenToImage(x + 0.5, y + 0.5, frame.width(), frame.height(), ix, iy);
                const auto [hy, hx] = tokenOf(1, ix, iy);
                QVERIFY2(hy == ay && hx == ax, qPrintable(QStringLiteral("hot pixel %1,%2 on token %3,%4, argmax %5,%6")
                                                              .arg(x).arg(y).arg(hy).arg(hx).arg(ay).arg(ax)));
                ++hot;
            }
        QVERIFY(hot >= 4);
        // The query marker (magenta) is drawn at the clicked token.
        int marker = 0;
        {
            const QPoint c = toScreen(vp, frame, px + 0.5, py + 0.5);
            for (int y = c.y() - 40; y <= c.y() + 40; ++y)
                for (int x = c.x() - 40; x <= c.x() + 40; ++x) {
                    if (!frame.rect().contains(x, y)) continue;
                    const QColor q = frame.pixelColor(x, y);
                    if (q.red() > 200 && q.blue() > 150 && q.green() < 110) ++marker;
                }
        }
        QVERIFY2(marker > 10, qPrintable(QString::number(marker)));

        // Hovering the argmax token: the overlay gives its weight.
        vp->setOverlayVisible(true);
        {
            const auto [cx, cy] = tokenCentre(1, ay, ax);
            const QPoint p = toScreen(vp, frame, cx, cy);
            QTest::mouseMove(vp->viewWindow(), p + QPoint(30, 30));
            QTest::mouseMove(vp->viewWindow(), p);
            QVERIFY(QTest::qWaitFor([&] {
                for (const auto& row : vp->overlay().rows)
                    if (row.first == "w_j") return true;
                return false;
            }, 5000));
            for (const auto& row : vp->overlay().rows)
                if (row.first == "w_j")
                    QVERIFY(std::abs(std::stod(row.second) - att.max().item<double>()) <= 1e-3 * std::abs(att.max().item<double>()) + 1e-6);
        }

        // CRPE term of the same query (head `head`), shown separately.
        in->modeBox()->setCurrentIndex(int(CoatMode::Crpe));
        QCOMPARE(in->settings().mode, CoatMode::Crpe);
        {
            const auto win = trace->crpeWindow(b, head, ty, tx);
            const auto m = in->view()->map(in->settings());
            const int64_t r = win.kernel / 2;
            int finite = 0, inGrid = 0;
            for (int64_t y = 0; y < m.values.size(0); ++y)
                for (int64_t x = 0; x < m.values.size(1); ++x) {
                    const float v = m.values[y][x].item<float>();
                    if (std::abs(y - ty) <= r && std::abs(x - tx) <= r) {
                        ++inGrid;
                        QCOMPARE(v, win.window[y - ty + r][x - tx + r].item<float>());
                        ++finite;   // every in-grid neighbour of the window is drawn
                    } else {
                        QVERIFY(std::isnan(v));
                    }
                }
            QCOMPARE(finite, inGrid);
            QVERIFY(finite >= 9);
        }

        // CLS attention.
        in->modeBox()->setCurrentIndex(int(CoatMode::Cls));
        QVERIFY(maxAbsDiff(in->view()->map(in->settings()).values, trace->clsAttention(b, head)) == 0.0);

        // Top-5 table: rows as the trace has them; a row shows that class's Grad-CAM.
        const auto top = trace->top5();
        QCOMPARE(in->top5Table()->rowCount(), 5);
        for (int i = 0; i < 5; ++i)
            QCOMPARE(in->top5Table()->item(i, 0)->data(Qt::UserRole).toLongLong(), qlonglong(top[size_t(i)].classIndex));
        in->top5Table()->selectRow(2);
        QCOMPARE(in->settings().mode, CoatMode::Cam);
        QCOMPARE(in->settings().camClass, top[2].classIndex);
        // Grad-CAM at the scale the Scale box shows (issue 56, item 1): on entering it, the
        // coarsest scale with a grid of 7x7 or more, here scale 2 (8x8) of the 64 px input.
        QCOMPARE(in->settings().scale, 1);
        QCOMPARE(in->scaleBox()->currentIndex(), 1);
        QVERIFY(maxAbsDiff(in->view()->map(in->settings()).values, trace->camForClass(top[2].classIndex, 1)) == 0.0);
        QCOMPARE(vp->scene().heatLabel, std::string("CAM"));
        auto overlayRow = [&](const std::string& key) {
            for (const auto& r : vp->scene().overlayRows)
                if (r.first == key) return r.second;
            return std::string();
        };
        QCOMPARE(overlayRow("scale"), std::string("2 (8x8, Grad-CAM)"));
        // Another scale in the box: the CAM of that scale, overlay and box in agreement.
        in->scaleBox()->setCurrentIndex(2);
        QCOMPARE(in->settings().scale, 2);
        QVERIFY(maxAbsDiff(in->view()->map(in->settings()).values, trace->camForClass(top[2].classIndex, 2)) == 0.0);
        QCOMPARE(overlayRow("scale"), std::string("3 (4x4, Grad-CAM)"));
        in->scaleBox()->setCurrentIndex(1);
        in->blockBox()->setCurrentIndex(0);   // back to block serial_blocks2.0 (the views below use it)
        QCOMPARE(in->view()->blockIndex(in->settings()), b);
        // A class outside the top-5: computed on a worker, equal to Grad-CAM from core.
        int64_t other = -1;
        for (int64_t c = 0; c < 7 && other < 0; ++c) {
            bool inTop = false;
            for (const auto& p : top) inTop = inTop || p.classIndex == c;
            if (!inTop) other = c;
        }
        QSignalSpy camSpy(in, &CoatInspector::camReady);
        in->classBox()->setValue(int(other));
        QVERIFY(camSpy.count() > 0 || camSpy.wait(30000));
        {
            auto model = loadCoat(checkpoint_.toStdString());
            const auto expect = gradCam(*model, glimpse::app::coatInputFromTrace(*trace, model->config()), other, 1);
            QVERIFY(maxAbsDiff(in->view()->map(in->settings()).values, expect) < 1e-5);
        }

        // Gallery: one thumbnail per key channel of the block's head; a click shows it large.
        QCOMPARE(in->gallery()->count(), int(trace->headDim(1)));
        in->gallery()->setCurrentRow(1);
        QCOMPARE(in->settings().mode, CoatMode::KeyChannel);
        QCOMPARE(in->settings().channel, 1);
        QVERIFY(maxAbsDiff(in->view()->map(in->settings()).values, trace->keyDistribution(b, head, 1)) == 0.0);

        // Side by side: scale 4 in the compare pane, same view mode, synchronized pan/zoom.
        in->modeBox()->setCurrentIndex(int(CoatMode::Attention));
        vp->zoomIn();   // a single-pane zoom that would crop a half-width pane
        vp->zoomIn();
        in->compareBox()->setCurrentIndex(4);
        QCOMPARE(in->compareScale(), 3);
        ImageViewport* cmp = w.compareViewport();
        QVERIFY(cmp->isVisible());
        {
            // Opening the compare pane fits both panes at their new (half) widths: the whole
            // image is in view in each, at the fit zoom of the pane's own size (issue 56, item 12).
            QString why;
            auto fitted = [&](ImageViewport* pane, const char* name) {
                pane->requestRedraw();
                const QImage f = pane->grabFrame();
                if (f.isNull()) return false;
                const auto fit = glimpse::render::View::fit(kW, kH, f.width(), f.height());
                double x0, y0, x1, y1;
                pane->view().imageToScreen(0, 0, f.width(), f.height(), x0, y0);
                pane->view().imageToScreen(kW, kH, f.width(), f.height(), x1, y1);
                why = QStringLiteral("%1: zoom %2, fit %3, frame %4x%5, image at %6,%7 .. %8,%9")
                          .arg(name).arg(pane->zoom()).arg(fit.zoom).arg(f.width()).arg(f.height())
                          .arg(x0).arg(y0).arg(x1).arg(y1);
                // The whole image in view, at (about) the pane's own fit, in a half-width pane.
                return std::abs(pane->zoom() - fit.zoom) < 0.02 * fit.zoom && x0 >= -1.0 && y0 >= -1.0 &&
                       x1 <= f.width() + 1.0 && y1 <= f.height() + 1.0 && f.width() < w.width() * 2 / 3;
            };
            const bool both = QTest::qWaitFor([&] { return fitted(vp, "main") && fitted(cmp, "compare"); }, 20000);
            QVERIFY2(both, qPrintable(why));
        }
        QVERIFY(cmp->scene().hasHeatmap());
        {
            // At scale 4 one token is the whole crop: the query marker (token box and
            // crosshair arms) stays inside the crop the network saw.
            const auto* cv = in->view();
            const double x0 = cv->cropX() - 1e-3, x1 = cv->cropX() + cv->cropW() + 1e-3;
            const double y0 = cv->cropY() - 1e-3, y1 = cv->cropY() + cv->cropH() + 1e-3;
            QVERIFY(!cmp->scene().lines.empty());
            for (const auto& l : cmp->scene().lines) {
                QVERIFY2(l.x1 >= x0 && l.x1 <= x1 && l.x2 >= x0 && l.x2 <= x1, qPrintable(QString("x %1..%2").arg(l.x1).arg(l.x2)));
                QVERIFY2(l.y1 >= y0 && l.y1 <= y1 && l.y2 >= y0 && l.y2 <= y1, qPrintable(QString("y %1..%2").arg(l.y1).arg(l.y2)));
            }
        }
        {
            const int b4 = trace->blocksOfScale(3).back();
            const auto [t4y, t4x] = tokenOf(3, px + 0.5, py + 0.5);
            const auto a4 = trace->effectiveAttention(b4, head, t4y, t4x);
            const auto [cx, cy] = tokenCentre(3, 1, 0);
            QCOMPARE(cmp->scene().heatAt(cx, cy, kW, kH), a4[1][0].item<float>());
        }
        vp->zoomIn();
        QVERIFY(QTest::qWaitFor([&] { return std::abs(cmp->zoom() - vp->zoom()) < 1e-9; }, 5000));
        in->compareBox()->setCurrentIndex(0);
        QVERIFY(!cmp->isVisible());
    }

    // Issue 56, item 2: a model trained on Fashion-MNIST (its class names say so) shows what it
    // was trained on, and a warning when the image is far from it: the colour test scene is,
    // a Fashion-MNIST test image is not. A model with other classes says it cannot tell.
    void domainWarning() {
        if (!QFileInfo::exists(QString::fromStdString(glimpse::data::fashionMnistDefaultDir())))
            QSKIP("Fashion-MNIST is not installed here");
        CoatConfig c = smallConfig();
        c.numClasses = 10;
        c.classNames = glimpse::data::fashionMnistClassNames();
        c.imageSize = 32;
        c.resize = 32;
        CoatModel model(c, 3);
        const QString fm = dir_.filePath("fm_coat.h5");
        saveCoat(model, fm.toStdString());
        const auto test = glimpse::data::openClassificationDataset("fashion-mnist");
        const QString fmImage = dir_.filePath("fm_sample.png");
        QVERIFY(cv::imwrite(fmImage.toStdString(), test.val->get(0).image));   // 28x28 grayscale
        MainWindow w;
        w.resize(1100, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        CoatInspector* in = w.coatInspector();
        glimpse::app::DomainCheck* dc = in->domainCheck();
        QSignalSpy ck(in, &CoatInspector::checkpointLoaded);
        in->loadCheckpoint(fm);
        QVERIFY(ck.wait(30000));
        QVERIFY(QTest::qWaitFor([&] { return !dc->measuring(); }, 60000));
        QVERIFY(dc->profile());
        QVERIFY(dc->profile()->grayscale());
        QVERIFY2(dc->text().contains("Trained on fashion-mnist: 28x28, grayscale"), qPrintable(dc->text()));
        auto runOnImage = [&](const QString& path) {
            QSignalSpy loaded(&w, &MainWindow::imageLoaded);
            QSignalSpy ready(in, &CoatInspector::traceReady);
            w.openImage(path);
            if (!loaded.wait(10000)) return false;
            in->run(false);
            return ready.wait(60000);
        };
        QVERIFY(runOnImage(imagePath_));
        QVERIFY2(dc->warnings().join(" ").contains("colour: a colour image"), qPrintable(dc->warnings().join("; ")));
        QVERIFY2(dc->text().contains("Far from the training data"), qPrintable(dc->text()));
        QVERIFY(runOnImage(fmImage));
        QVERIFY2(dc->warnings().isEmpty(), qPrintable(dc->warnings().join("; ")));
        QVERIFY2(dc->text().contains("within the training data"), qPrintable(dc->text()));
        // Classes that are not Fashion-MNIST's: no claim about the data.
        in->loadCheckpoint(checkpoint_);
        QVERIFY(ck.wait(30000));
        QVERIFY(QTest::qWaitFor([&] { return !dc->measuring(); }, 30000));
        QVERIFY(!dc->profile());
        QVERIFY2(dc->text().contains("does not say what it was trained on"), qPrintable(dc->text()));
        QVERIFY2(!dc->text().contains("Trained on"), qPrintable(dc->text()));
    }

    // Issue 56, item 14: after a CoaT run the status bar speaks for CoaT; another panel's news
    // (LETR's model finishing its load later) goes to Messages only.
    void statusBarSpeaksForTheShownPanel() {
        MainWindow w;
        runOn(w);
        if (QTest::currentTestFailed()) return;
        const QString after = w.statusBar()->currentMessage();
        QVERIFY2(after.startsWith("CoaT finished"), qPrintable(after));
        Q_EMIT w.letrInspector()->message("LETR model ready: letr_demo.h5");
        QCOMPARE(w.statusBar()->currentMessage(), after);
        Q_EMIT w.coatInspector()->message("CoaT says so");
        QCOMPARE(w.statusBar()->currentMessage(), QString("CoaT says so"));
    }

    // The Precision box (issue 57): float32 runs give the core's float32 trace exactly; auto runs
    // again at once on the shown image, in bfloat16 where the CPU has it, else with int8 MLP layers
    // (the status line and the trace say which), within the stated bound; back to float32 gives
    // the first trace again.
    void precisionControl() {
        MainWindow w;
        runOn(w);
        if (QTest::currentTestFailed()) return;
        CoatInspector* in = w.coatInspector();
        auto model = loadCoat(checkpoint_.toStdString());
        cv::Mat rgb;
        cv::cvtColor(cv::imread(imagePath_.toStdString()), rgb, cv::COLOR_BGR2RGB);
        const CoatTrace ref = runCoat(*model, rgb);
        QCOMPARE(in->trace()->compute(), std::string("float32"));
        QVERIFY(maxAbsDiff(in->trace()->probs(), ref.probs()) == 0.0);
        QVERIFY2(w.statusBar()->currentMessage().endsWith("; float32)"), qPrintable(w.statusBar()->currentMessage()));

        auto* box = in->findChild<QComboBox*>("precision");
        QVERIFY(box);
        QCOMPARE(box->count(), 2);
        QCOMPARE(box->currentText(), QString("float32 (exact)"));
        QSignalSpy ready(in, &CoatInspector::traceReady);
        QVERIFY(!in->setPrecision(2));   // not a choice
        QVERIFY(in->setPrecision(1));    // as --precision auto does it
        QCOMPARE(box->currentIndex(), 1);
        QVERIFY(in->running());   // a trace was shown: it runs again with the new setting
        QVERIFY(QTest::qWaitFor([&] { return ready.count() > 0; }, 60000));
        const auto autoDtype = glimpse::parsePrecision("auto", torch::Device(torch::kCPU), "--precision", true);
        const std::string expected = glimpse::precisionName(autoDtype);
        QCOMPARE(in->trace()->compute(), expected);
        QVERIFY2(w.statusBar()->currentMessage().endsWith(QString("; %1)").arg(QString::fromStdString(expected))),
                 qPrintable(w.statusBar()->currentMessage()));
        const double dp = maxAbsDiff(in->trace()->probs(), ref.probs());
        QVERIFY2(autoDtype != torch::kFloat ? dp > 0 && dp < 0.02 : dp == 0.0, qPrintable(QString::number(dp)));

        box->setCurrentIndex(0);
        Q_EMIT box->activated(0);
        QVERIFY(QTest::qWaitFor([&] { return ready.count() > 1; }, 60000));
        QCOMPARE(in->trace()->compute(), std::string("float32"));
        QVERIFY(maxAbsDiff(in->trace()->probs(), ref.probs()) == 0.0);
        Q_EMIT box->activated(0);   // the same choice again: nothing to do
        QVERIFY(!in->running());
    }

    // Cancel: the running flag drops at once, the worker's result is discarded when it arrives
    // (no trace, no traceReady), and the next run works.
    void cancelDropsTheRun() {
        MainWindow w;
        w.resize(1100, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        CoatInspector* in = w.coatInspector();
        QSignalSpy loaded(&w, &MainWindow::imageLoaded);
        QSignalSpy ck(in, &CoatInspector::checkpointLoaded);
        QSignalSpy ready(in, &CoatInspector::traceReady);
        QSignalSpy failed(in, &CoatInspector::failed);
        w.openImage(imagePath_);
        QVERIFY(loaded.wait(10000));
        in->loadCheckpoint(checkpoint_);
        QVERIFY(QTest::qWaitFor([&] { return ck.count() + failed.count() > 0; }, 30000));
        QVERIFY(in->hasModel());
        in->run(false);
        QVERIFY(in->running());
        in->cancel();
        QVERIFY(!in->running());
        QThreadPool::globalInstance()->waitForDone();   // the cancelled worker has finished
        for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();   // its result delivered
        QCOMPARE(ready.count(), 0);
        QVERIFY(!in->hasTrace());
        QVERIFY(failed.isEmpty());
        in->run(false);
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 60000));
        QCOMPARE(ready.count(), 1);
        QVERIFY(in->hasTrace());
    }

    void traceRoundTripAndErrors() {
        MainWindow w;
        runOn(w);
        if (QTest::currentTestFailed()) return;
        CoatInspector* in = w.coatInspector();
        auto trace = in->trace();
        // The views of a query before saving (scale 2, head 3, original-image pixels), to be
        // compared with the same views of the reopened trace.
        const double qx = 70.5, qy = 41.5;
        const std::vector<CoatMode> modes = {CoatMode::Attention, CoatMode::Crpe, CoatMode::Cls,
                                             CoatMode::Cam, CoatMode::KeyChannel};
        auto viewsOf = [&](double x, double y) {
            std::vector<std::pair<torch::Tensor, std::string>> out;
            in->setScale(1);
            in->setBlock(0);
            in->setHead(3);
            in->setChannel(1);
            in->setQuery(x, y);
            for (CoatMode mode : modes) {
                in->setMode(mode);
                std::string query;
                for (const auto& r : w.viewport()->scene().overlayRows)
                    if (r.first == "query") query = r.second.substr(r.second.find("token"));
                out.emplace_back(in->view()->map(in->settings()).values.clone(), query);
            }
            return out;
        };
        const auto live = viewsOf(qx, qy);
        QVERIFY(live[0].second.find("token (") == 0);
        in->setMode(CoatMode::Attention);
        in->setBlock(-1);
        in->setHead(-1);
        QSignalSpy saved(in, &CoatInspector::traceSaved);
        QSignalSpy failed(in, &CoatInspector::failed);
        const QString tracePath = dir_.filePath("coat_trace.h5");
        in->saveTrace(tracePath);
        QVERIFY(saved.wait(20000));

        // Reopened without the model: the input crop is shown and the views answer as before.
        in->setModel(nullptr, QString());
        QSignalSpy ready(in, &CoatInspector::traceReady);
        w.openImage(tracePath);   // dispatched to the CoaT panel by the trace's family
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 20000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QCOMPARE(w.viewport()->image().width, 64);
        QCOMPARE(w.viewport()->image().height, 64);
        QCOMPARE(in->top5Table()->rowCount(), 5);
        QCOMPARE(in->trace()->top5().front().classIndex, trace->top5().front().classIndex);
        in->setScale(0);
        in->setHead(-1);
        in->setQuery(20.5, 33.5);   // crop pixels: token (8, 5) at scale 1
        const auto m = in->view()->map(in->settings());
        QVERIFY(maxAbsDiff(m.values, trace->effectiveAttention(0, -1, 8, 5)) < 1e-6);
        // The same query in crop pixels gives the same views (values and query token) as before
        // saving: attention, CRPE window, CLS, CAM (top-1, stored) and key channel.
        const auto reopened = viewsOf((qx - kCropX) * kScale, (qy - kCropY) * kScale);
        QCOMPARE(reopened.size(), live.size());
        for (size_t i = 0; i < live.size(); ++i) {
            QCOMPARE(reopened[i].second, live[i].second);
            QVERIFY2(reopened[i].first.sizes() == live[i].first.sizes(), qPrintable(QString::number(i)));
            const auto a = live[i].first, b = reopened[i].first;
            QVERIFY(torch::equal(torch::isnan(a), torch::isnan(b)));
            QVERIFY2(maxAbsDiff(torch::nan_to_num(a), torch::nan_to_num(b)) < 1e-6, qPrintable(QString::number(i)));
        }
        in->setScale(0);
        in->setBlock(-1);
        in->setHead(-1);
        // A CAM the trace does not hold, without a model: a clear message.
        failed.clear();
        int64_t other = -1;
        for (int64_t c = 0; c < 7 && other < 0; ++c) {
            bool inTop = false;
            for (const auto& p : trace->top5()) inTop = inTop || p.classIndex == c;
            if (!inTop) other = c;
        }
        in->setMode(CoatMode::Cam);
        in->setCamClass(other);
        QVERIFY(!failed.isEmpty());
        QVERIFY(failed.last().first().toString().contains("no CoaT model"));

        // Corrupt traces: a clear message naming the file; the panel keeps the trace it shows.
        const auto shown = in->trace();
        {
            QFile src(tracePath);
            QVERIFY(src.open(QIODevice::ReadOnly));
            const QByteArray bytes = src.readAll();
            QFile dst(dir_.filePath("truncated_trace.h5"));
            QVERIFY(dst.open(QIODevice::WriteOnly));
            dst.write(bytes.left(bytes.size() / 2));
        }
        {
            glimpse::Trace t = glimpse::Trace::load(tracePath.toStdString());
            t.set("cam/maps", torch::zeros({2, 3}));
            t.save(dir_.filePath("misshapen_trace.h5").toStdString());
            glimpse::Trace u = glimpse::Trace::load(tracePath.toStdString());
            u.meta().erase("grids");
            u.save(dir_.filePath("nogrids_trace.h5").toStdString());
        }
        for (const auto& [file, what] : {std::pair<QString, QString>{"truncated_trace.h5", ""},
                                         {"misshapen_trace.h5", "cam/maps"},
                                         {"nogrids_trace.h5", "grids"}}) {
            const QString before = w.lastError();
            w.openImage(dir_.filePath(file));
            QVERIFY(QTest::qWaitFor([&] { return w.lastError() != before && !w.busy(); }, 20000));
            QVERIFY2(w.lastError().contains(file) && w.lastError().contains(what), qPrintable(w.lastError()));
            QVERIFY(in->trace() == shown);
            QCOMPARE(w.viewport()->image().width, 64);
        }
        QVERIFY(QTest::qWaitFor([&] { return !w.busy(); }, 20000));

        // A bad checkpoint: a message naming the file, the panel keeps working.
        const QString bad = dir_.filePath("not_a_checkpoint.h5");
        {
            QFile f(bad);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("this is not HDF5");
        }
        failed.clear();
        in->loadCheckpoint(bad);
        QVERIFY(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 20000));
        QVERIFY2(failed.last().first().toString().contains("not_a_checkpoint.h5"),
                 qPrintable(failed.last().first().toString()));
        QVERIFY(!in->hasModel());
        // Running without a model (non-interactive): a message, no dialog, no hang.
        failed.clear();
        in->run(false);
        QVERIFY(!failed.isEmpty());
        QVERIFY(failed.last().first().toString().contains("no checkpoint"));
        QVERIFY(!in->running());
    }
};

QTEST_MAIN(TestCoatInspector)
#include "test_coat_inspector.moc"
