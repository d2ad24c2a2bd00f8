// ConstellationNet panel GUI test, offscreen (no window, no Vulkan surface): a small random
// ConstellationNet saved as a checkpoint, the panel on a viewport, driven through its slots and
// the viewport's click/hover signals. The pixels are checked by rendering the panel's scene
// offscreen (renderSceneAtImageResolution, lavapipe) against the trace: the cluster map's colour
// at cell centres, the relation view's hottest cell, hover text, the no-relation message, the
// cluster gallery, the episode view against runEpisode, a foreign checkpoint, the Training
// panel preview and the shipped model offered on first show.
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <memory>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/constellation/episode_view.h"
#include "app/constellation/inspector.h"
#include "app/domain_check.h"
#include "app/family.h"
#include "core/data/fewshot.h"
#include "core/models/coat/model.h"
#include "core/models/constellation/fewshot.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "core/models/constellation/train.h"
#include "core/train/state.h"
#include "renderer/colormap.h"
#include "widgets/viewport.h"

using glimpse::app::ConstellationInspector;
using glimpse::app::ConstellationMode;
using glimpse::app::ModelPanel;
using glimpse::widgets::ImageViewport;
using namespace glimpse::constellation;

namespace {

constexpr int kW = 96, kH = 64;   // the test image; the network sees it resized to 32 x 32

ConstellationConfig smallConfig() {
    ConstellationConfig c;
    c.backbone = "conv4";
    c.channels = {8, 8, 8, 8};
    c.clusters = 16;
    c.heads = 4;
    c.imageSize = 32;
    c.numClasses = 6;
    c.classNames = {"zero", "one", "two", "three", "four", "five"};
    return c;
}

cv::Mat testImage() {
    cv::Mat rgb(kH, kW, CV_8UC3, cv::Scalar(30, 60, 90));
    cv::rectangle(rgb, cv::Rect(10, 8, 30, 40), cv::Scalar(220, 200, 40), cv::FILLED);
    cv::circle(rgb, {66, 30}, 18, cv::Scalar(40, 180, 220), cv::FILLED);
    cv::line(rgb, {0, 60}, {95, 2}, cv::Scalar(250, 250, 250), 2);
    return rgb;
}

// The panel on a viewport (no compare pane), offscreen.
struct Rig {
    ImageViewport vp;
    ConstellationInspector in{&vp, nullptr};
};

} // namespace

class TestConstellationInspector : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString checkpoint_;
    cv::Mat image_;

    // Loads the checkpoint, shows the test image and runs the model; true when a trace is shown.
    bool runOn(Rig& r) {
        QSignalSpy ck(&r.in, &ModelPanel::checkpointLoaded);
        QSignalSpy ready(&r.in, &ModelPanel::traceReady);
        QSignalSpy failed(&r.in, &ModelPanel::failed);
        r.vp.setImage(glimpse::app::toRgbImage(image_));
        r.in.sourceChanged("scene.png");
        r.in.loadCheckpoint(checkpoint_);
        if (!QTest::qWaitFor([&] { return ck.count() + failed.count() > 0; }, 20000) || !failed.isEmpty()) return false;
        r.in.run(false);
        return QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 20000) && failed.isEmpty() &&
               r.in.trace() != nullptr;
    }

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        qputenv("GLIMPSE_RESOURCES", dir_.path().toUtf8());   // no shipped models from the tree
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
        image_ = testImage();
        ConstellationModel model(smallConfig(), 5);
        checkpoint_ = dir_.filePath("tiny_constellation.h5");
        saveConstellation(model, checkpoint_.toStdString());
    }

    // The renderer's categorical heatmap (what the cluster map uses): each texel the colour of
    // the cell under its centre, NaN and unknown indices transparent.
    void paletteTexture() {
        const float nan = std::nanf("");
        const std::vector<float> grid = {0, 1, 2, nan, 1.2f, 5, -1, 0};   // 4 x 2
        const std::vector<uint8_t> pal = {255, 0, 0, 0, 255, 0, 0, 0, 255};
        std::vector<uint8_t> rgba(8 * 4 * 4);
        glimpse::render::colorPaletteTexture(grid.data(), 4, 2, pal.data(), 3, 8, 4, rgba.data());
        auto at = [&](int x, int y) { return &rgba[(size_t(y) * 8 + x) * 4]; };
        for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 8; ++x) {
                const float v = grid[size_t(y / 2) * 4 + x / 2];
                const uint8_t* p = at(x, y);
                if (std::isnan(v) || v < -0.5f || v > 2.5f) {
                    QVERIFY(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0);
                } else {
                    const int k = int(std::lround(v));
                    QVERIFY(p[0] == pal[size_t(k) * 3] && p[1] == pal[size_t(k) * 3 + 1] && p[2] == pal[size_t(k) * 3 + 2]);
                    QCOMPARE(int(p[3]), 255);
                }
            }
        glimpse::render::ViewportScene sc;
        sc.heatW = 4;
        sc.heatH = 2;
        sc.heat = grid;
        sc.heatPalette = pal;
        QCOMPARE(sc.heatAt(3.9, 0.5, 8, 4), 1.0f);   // the cell's own value, not interpolated
        QCOMPARE(sc.heatAt(4.1, 0.5, 8, 4), 2.0f);
    }

    // The cluster map: cells in clusterColour(assignment) blended at the opacity over the image,
    // at every cell's centre pixel of an offscreen render; the legend counts the cells.
    void clusterMapColoursCells() {
        Rig r;
        QVERIFY(runOn(r));
        const auto trace = r.in.trace();
        QVERIFY(trace->numModules() == 4);
        QCOMPARE(r.in.moduleBox()->count(), 4);
        QCOMPARE(r.in.headBox()->count(), 5);   // mean + 4 heads
        QCOMPARE(r.in.settings().mode, ConstellationMode::Clusters);
        const float opacity = 0.7f;
        r.in.setOpacity(opacity);
        for (int m : {0, 1, 3}) {
            r.in.moduleBox()->setCurrentIndex(m);
            QCOMPARE(r.in.settings().module, m);
            const auto& scene = r.vp.scene();
            QVERIFY(scene.hasHeatmap());
            QCOMPARE(scene.heatPalette.size(), size_t(16 * 3));
            const auto a = trace->assignment(m);
            const int64_t h = a.size(0), w = a.size(1);
            const auto shot = glimpse::widgets::renderSceneAtImageResolution(r.vp.image(), scene);
            QCOMPARE(shot.width, kW);
            int checked = 0;
            for (int64_t y = 0; y < h; ++y)
                for (int64_t x = 0; x < w; ++x) {
                    const int px = int((x + 0.5) * kW / w), py = int((y + 0.5) * kH / h);
                    const cv::Vec3b c = clusterColour(a[y][x].item<int64_t>());
                    const cv::Vec3b img = image_.at<cv::Vec3b>(py, px);
                    for (int ch = 0; ch < 3; ++ch) {
                        const double want = img[ch] * (1 - opacity) + c[ch] * opacity;
                        const int got = shot.rgb[(size_t(py) * kW + px) * 3 + ch];
                        QVERIFY2(std::abs(got - want) <= 3.0, qPrintable(QStringLiteral("module %1 cell (%2, %3) ch %4: %5 vs %6")
                                                                             .arg(m).arg(y).arg(x).arg(ch).arg(got).arg(want)));
                    }
                    ++checked;
                }
            QCOMPARE(checked, int(h * w));
            // The legend: the clusters present, cell counts summing to the grid.
            int64_t total = 0;
            for (int i = 0; i < r.in.legendList()->count(); ++i) {
                const auto* item = r.in.legendList()->item(i);
                const int64_t k = item->data(Qt::UserRole).toLongLong();
                const int64_t n = a.eq(k).sum().item<int64_t>();
                QVERIFY(n > 0);
                QVERIFY(item->text().startsWith(QStringLiteral("#%1 ").arg(k)));
                QVERIFY(item->text().contains(QStringLiteral("%1 cell").arg(n)));
                total += n;
            }
            QCOMPARE(total, h * w);
        }
        // The top-5 table as the trace has it.
        const auto top = trace->top5();
        QCOMPARE(r.in.top5Table()->rowCount(), 5);
        for (int i = 0; i < 5; ++i)
            QCOMPARE(r.in.top5Table()->item(i, 1)->text(), QString::fromStdString(top[size_t(i)].name));
    }

    // Hover: the cell under the cursor's top 3 clusters and similarities, in the panel and overlay.
    void hoverNamesTopClusters() {
        Rig r;
        QVERIFY(runOn(r));
        const auto trace = r.in.trace();
        r.in.setModule(2);
        const int64_t h = trace->module(2).h, w = trace->module(2).w;
        const int64_t y = h - 2, x = 1;
        const int px = int((x + 0.5) * kW / w), py = int((y + 0.5) * kH / h);
        Q_EMIT r.vp.cursorPixel(px, py, QString());
        const auto top = trace->topClusters(2, y, x, 3);
        QCOMPARE(top.size(), size_t(3));
        QString want = QStringLiteral("cell (%1, %2):").arg(y).arg(x);
        for (size_t i = 0; i < 3; ++i)
            want += QStringLiteral("%1#%2 %3").arg(i ? ", " : " ").arg(top[i].cluster).arg(double(top[i].similarity), 0, 'f', 3);
        QCOMPARE(r.in.hoverLabelText(), want);
        bool row = false;
        for (const auto& rr : r.vp.scene().overlayRows) row = row || (rr.first == "top 3" && QString::fromStdString(rr.second) == want);
        QVERIFY(row);
        Q_EMIT r.vp.cursorPixel(-1, -1, QString());
        QCOMPARE(r.in.hoverLabelText(), QString("-"));
    }

    // Clicking a cell of a relation module shows its relation attention: the hottest cell of
    // the heatmap (and of the render, gray map at full opacity) is the argmax of the relation.
    void clickShowsRelation() {
        Rig r;
        QVERIFY(runOn(r));
        const auto trace = r.in.trace();
        const int m = 2;   // conv4: relation after convs 3 and 4
        QVERIFY(trace->module(m).relation);
        r.in.setModule(m);
        r.in.setColormap(glimpse::render::Colormap::Gray);
        r.in.setOpacity(1.0);
        const int64_t h = trace->module(m).h, w = trace->module(m).w;   // 4 x 4
        const int64_t cy = 1, cx = 2;
        Q_EMIT r.vp.imageClicked(int((cx + 0.5) * kW / w), int((cy + 0.5) * kH / h));
        QCOMPARE(r.in.settings().mode, ConstellationMode::Relation);
        QVERIFY(r.in.relationMessage().isEmpty());
        for (int head : {-1, 2}) {
            r.in.setHead(head);
            const auto rel = trace->relation(m, head, cy, cx);
            const int64_t best = rel.flatten().argmax().item<int64_t>();
            const auto& scene = r.vp.scene();
            QVERIFY(scene.hasHeatmap());
            QVERIFY(scene.heatPalette.empty());
            const auto hottest = std::max_element(scene.heat.begin(), scene.heat.end()) - scene.heat.begin();
            const int64_t hx = int64_t((hottest % scene.heatW + 0.5) * w / scene.heatW);
            const int64_t hy = int64_t((hottest / scene.heatW + 0.5) * h / scene.heatH);
            QCOMPARE(hy * w + hx, best);
            QCOMPARE(double(scene.heatMax), rel.max().item<double>());
            // The brightest pixel of the render lies in that cell.
            const auto shot = glimpse::widgets::renderSceneAtImageResolution(r.vp.image(), scene);
            int bx = 0, by = 0, bv = -1;
            for (int y = 0; y < kH; ++y)
                for (int x = 0; x < kW; ++x) {
                    const uint8_t* p = &shot.rgb[(size_t(y) * kW + x) * 3];
                    if (p[0] == p[1] && p[1] == p[2] && p[0] > bv) bv = p[0], bx = x, by = y;
                }
            QVERIFY(bv >= 250);
            QCOMPARE(int64_t(by * h / kH) * w + int64_t(bx * w / kW), best);
        }
    }

    // A module without relation: a click says so in the panel, and so does the relation view.
    void moduleWithoutRelationSaysSo() {
        Rig r;
        QVERIFY(runOn(r));
        r.in.setModule(0);
        QVERIFY(!r.in.trace()->module(0).relation);
        Q_EMIT r.vp.imageClicked(40, 30);
        QCOMPARE(r.in.settings().mode, ConstellationMode::Clusters);
        QVERIFY2(r.in.relationMessage().contains("has no cell relation attention"), qPrintable(r.in.relationMessage()));
        for (int m = 0; m < r.in.trace()->numModules(); ++m)   // where to look instead
            QCOMPARE(r.in.relationMessage().contains(QString::fromStdString(r.in.trace()->module(m).name)),
                     m == 0 || r.in.trace()->module(m).relation);
        r.in.modeBox()->setCurrentIndex(int(ConstellationMode::Relation));
        QVERIFY(!r.vp.scene().hasHeatmap());
        bool row = false;
        for (const auto& rr : r.vp.scene().overlayRows) row = row || rr.first == "no map";
        QVERIFY(row);
        QVERIFY(r.in.relationMessage().contains("no cell relation"));
    }

    // The gallery of a cluster fills N patches from a worker scan; a bad data spec shows its error.
    void galleryAndBadData() {
        Rig r;
        QVERIFY(runOn(r));
        QSignalSpy ready(&r.in, &ConstellationInspector::galleryReady);
        QSignalSpy failed(&r.in, &ModelPanel::failed);
        r.in.galleryScanBox()->setValue(48);
        r.in.galleryCountBox()->setValue(5);
        r.in.setModule(3);
        const int64_t k = r.in.legendList()->item(0)->data(Qt::UserRole).toLongLong();
        r.in.legendList()->setCurrentRow(0);
        Q_EMIT r.in.legendList()->itemClicked(r.in.legendList()->item(0));
        QVERIFY(r.in.galleryRunning());
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 20000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QCOMPARE(r.in.galleryCluster(), k);
        QCOMPARE(r.in.clusterBox()->value(), int(k));
        QCOMPARE(r.in.gallery()->count(), 5);
        for (int i = 1; i < 5; ++i)
            QVERIFY(r.in.gallery()->item(i - 1)->text().toDouble() >= r.in.gallery()->item(i)->text().toDouble());
        QVERIFY(!r.in.busy());

        const std::string bad = (dir_.path() + "/no_such_dataset").toStdString();
        std::string expected;
        try {
            glimpse::data::openFewShotDataset(bad, 32);
        } catch (const std::exception& e) {
            expected = e.what();
        }
        QVERIFY(!expected.empty());
        r.in.dataEdit()->setText(QString::fromStdString(bad));
        r.in.showGallery(1);
        QVERIFY(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 20000));
        QVERIFY2(failed.last().first().toString().contains(QString::fromStdString(expected)),
                 qPrintable(failed.last().first().toString()));
        QVERIFY(r.in.galleryStatus()->text().contains(QString::fromStdString(expected)));
        QVERIFY(r.in.problemText().contains(QString::fromStdString(expected)));
    }

    // The episode view: ways*shots support and ways*queries query tiles, runEpisode's accuracy.
    void episodeMatchesRunEpisode() {
        Rig r;
        QSignalSpy ck(&r.in, &ModelPanel::checkpointLoaded);
        r.in.loadCheckpoint(checkpoint_);
        QVERIFY(ck.wait(20000));
        auto* ev = r.in.episodeView();
        QSignalSpy ready(ev, &glimpse::app::EpisodeView::episodeReady);
        QSignalSpy failed(ev, &glimpse::app::EpisodeView::failed);
        ev->waysBox()->setValue(3);
        ev->shotsBox()->setValue(2);
        ev->queriesBox()->setValue(4);
        ev->episodeBox()->setValue(6);
        ev->newEpisode();   // the first: runs index 6
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 20000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QCOMPARE(ev->supportList()->count(), 3 * 2);
        QCOMPARE(ev->queryList()->count(), 3 * 4);
        QCOMPARE(ev->waysTable()->rowCount(), 3);

        auto model = loadConstellation(checkpoint_.toStdString());
        const auto splits = glimpse::data::openFewShotDataset("procedural", 32);
        const glimpse::data::EpisodeSampler sampler(splits.novel, "novel");
        const glimpse::data::EpisodeSpec spec{3, 2, 4};
        const auto ep = sampler.sample(spec, glimpse::app::EpisodeView::kSeed, 6);
        const auto direct = runEpisode(*model, *splits.novel, spec, ep);
        const auto* shown = ev->result();
        QVERIFY(shown);
        QCOMPARE(shown->accuracy, direct.accuracy);
        QCOMPARE(shown->predicted, direct.predicted);
        QVERIFY(ev->statusLabel()->text().contains(QStringLiteral("Accuracy %1 %").arg(100.0 * direct.accuracy, 0, 'f', 1)));
        for (int w = 0; w < 3; ++w) {
            QCOMPARE(ev->waysTable()->item(w, 1)->text(), QString::fromStdString(direct.classNames[size_t(w)]));
            const auto ids = ev->waysTable()->item(w, 2)->data(Qt::UserRole).toList();
            QCOMPARE(ids.size(), 3);
            for (int i = 0; i < 3; ++i) QCOMPARE(ids[i].toLongLong(), qlonglong(direct.prototypeClusters[size_t(w)][size_t(i)].cluster));
        }
        for (int q = 0; q < 12; ++q)
            QCOMPARE(ev->queryList()->item(q)->data(Qt::UserRole).toBool(), direct.predicted[size_t(q)] == q / 4);
        if (qEnvironmentVariableIsSet("GLIMPSE_SAVE_EPISODE")) {   // a look at the tab (offscreen)
            ev->resize(380, 760);
            ev->grab().save(qEnvironmentVariable("GLIMPSE_SAVE_EPISODE"));
        }
        // "New episode" moves to the next index.
        ready.clear();
        ev->newEpisode();
        QCOMPARE(ev->episodeIndex(), 7);
        QVERIFY(QTest::qWaitFor([&] { return ready.count() + failed.count() > 0; }, 20000));
        QCOMPARE(ev->result()->episode.query, sampler.sample(spec, 0, 7).query);
    }

    // A saved trace reopens without the model: the stored input is shown and the maps are the same.
    void traceRoundTrip() {
        QString path;
        std::shared_ptr<const ConstellationTrace> live;
        {
            Rig r;
            QVERIFY(runOn(r));
            live = r.in.trace();
            QSignalSpy saved(&r.in, &ModelPanel::traceSaved);
            path = dir_.filePath("constellation_trace.h5");
            r.in.saveTrace(path);
            QVERIFY(saved.wait(20000));
        }
        Rig r;
        connect(&r.in, &ModelPanel::showImageRequested, &r.vp,
                [&r](const QString&, const glimpse::widgets::RgbImage& im) { r.vp.setImage(im); });
        QSignalSpy ready(&r.in, &ModelPanel::traceReady);
        r.in.openTrace(path);
        QVERIFY(ready.wait(20000));
        QCOMPARE(r.vp.image().width, 32);
        r.in.setModule(1);
        const auto& sc = r.vp.scene();
        const auto a = live->assignment(1).to(torch::kFloat32).flatten();
        QCOMPARE(sc.heat.size(), size_t(a.numel()));
        for (int64_t i = 0; i < a.numel(); ++i) QCOMPARE(sc.heat[size_t(i)], a[i].item<float>());
        // Cells map to the 32 x 32 input: the hover of pixel (5, 9) names the cell under it.
        const int64_t h = live->module(1).h, w = live->module(1).w;
        r.in.hoverAt(5.5, 9.5);
        QVERIFY(r.in.hoverLabelText().startsWith(QStringLiteral("cell (%1, %2):").arg(9 * h / 32).arg(5 * w / 32)));
    }

    // A checkpoint whose classes are not the procedural family's base classes (a converted
    // official one, or this test's): the panel says the training data is not known, and does
    // not claim "Trained on procedural" as it once did.
    void unknownTrainingDataIsNotClaimed() {
        Rig r;
        QSignalSpy ck(&r.in, &ModelPanel::checkpointLoaded);
        r.in.loadCheckpoint(checkpoint_);
        QVERIFY(ck.wait(20000));
        glimpse::app::DomainCheck* dc = r.in.domainCheck();
        QVERIFY(QTest::qWaitFor([&] { return !dc->measuring(); }, 20000));
        QVERIFY(!dc->profile());
        QVERIFY2(dc->text().startsWith("Training data not known: the checkpoint does not say what it was trained on"),
                 qPrintable(dc->text()));
        QVERIFY2(!dc->text().contains("Trained on"), qPrintable(dc->text()));
    }

    // A checkpoint of another family: an error naming the file.
    void foreignCheckpointIsRefused() {
        Rig r;
        glimpse::coat::CoatConfig c;
        c.variant = "custom";
        c.embedDims = {16, 16, 16, 16};
        c.serialDepths = {1, 1, 1, 1};
        c.parallelDepth = 0;
        c.numHeads = 8;
        c.mlpRatios = {2, 2, 2, 2};
        c.numClasses = 3;
        c.imageSize = 32;
        c.resize = 32;
        const QString path = dir_.filePath("a_coat_model.h5");
        glimpse::coat::saveCoat(glimpse::coat::CoatModel(c, 1), path.toStdString());
        QSignalSpy failed(&r.in, &ModelPanel::failed);
        r.in.loadCheckpoint(path);
        QVERIFY(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 20000));
        QVERIFY2(failed.last().first().toString().contains("a_coat_model.h5"), qPrintable(failed.last().first().toString()));
        QVERIFY(!r.in.hasModel());
        QCOMPARE(r.in.problemText(), failed.last().first().toString());   // shown in the panel too
        // Without a model the gallery and episode say what is missing.
        r.in.showGallery(0);
        QVERIFY(failed.last().first().toString().contains("no ConstellationNet checkpoint"));
    }

    // The Training panel's preview: model.h5 of a finished run, and a checkpoint.h5 mid-run.
    void previewRendersRunFolders() {
        const auto* family = glimpse::app::findFamily("constellation");
        QVERIFY(family && family->training.preview);
        QCOMPARE(family->defaultCheckpoint, QString("constellation_demo.h5"));
        namespace fs = std::filesystem;
        const fs::path done = fs::path(dir_.path().toStdString()) / "run_done";
        fs::create_directories(done);
        fs::copy_file(checkpoint_.toStdString(), done / "model.h5");
        const auto p = family->training.preview(done.string(), "procedural");
        QVERIFY(!p.image.isNull());
        if (qEnvironmentVariableIsSet("GLIMPSE_SAVE_PREVIEW")) p.image.save(qEnvironmentVariable("GLIMPSE_SAVE_PREVIEW"));
        QVERIFY(p.image.width() > 100 && p.image.height() > 50);
        const QString last = QString::fromStdString(loadConstellation(checkpoint_.toStdString())->constellationModules().back().name);
        QVERIFY2(p.caption.contains("model.h5") && p.caption.contains(last), qPrintable(p.caption));

        const fs::path mid = fs::path(dir_.path().toStdString()) / "run_mid";
        fs::create_directories(mid);
        ConstellationTrainConfig cfg;
        cfg.model = {{"channels", {8, 8, 8, 8}}, {"clusters", 16}, {"heads", 4}};
        const auto splits = glimpse::data::openFewShotDataset("procedural", 32);
        ConstellationModel m(cfg.modelConfig(splits.base->classNames(), 32), 2);
        glimpse::train::TrainState st;
        st.meta = {{"config", cfg.toJson()}, {"data", "procedural"}, {"step", 7}};
        st.model = glimpse::train::moduleTensors(m);
        glimpse::train::saveTrainState((mid / "checkpoint.h5").string(), "constellation-train", st);
        const auto q = family->training.preview(mid.string(), "procedural");
        QVERIFY(!q.image.isNull());
        QVERIFY2(q.caption.contains("checkpoint.h5") && q.caption.contains("step 7"), qPrintable(q.caption));
        // Nothing there yet: an error, not a crash.
        QVERIFY_THROWS_EXCEPTION(std::exception, family->training.preview((dir_.path() + "/empty").toStdString(), "procedural"));
    }

    // The shipped model is offered on first use: loaded when the panel is first shown, and not
    // an error when it is not installed.
    void shippedModelOfferedOnFirstShow() {
        {
            Rig r;
            QSignalSpy failed(&r.in, &ModelPanel::failed);
            r.in.show();
            QCoreApplication::processEvents();
            QVERIFY(!r.in.modelLoading());
            QVERIFY(failed.isEmpty());
            QVERIFY(r.in.shippedModelButton()->isHidden());
        }
        const QString shipped = dir_.filePath("constellation_demo.h5");
        QVERIFY(QFile::copy(checkpoint_, shipped));
        Rig r;
        QVERIFY(!r.in.shippedModelButton()->isHidden());
        QSignalSpy ck(&r.in, &ModelPanel::checkpointLoaded);
        r.in.show();
        QVERIFY(ck.count() > 0 || ck.wait(20000));
        QCOMPARE(QFileInfo(ck.first().first().toString()).fileName(), QString("constellation_demo.h5"));
        QVERIFY(r.in.hasModel());
        QVERIFY(r.in.shippedModelButton()->isHidden());
        QFile::remove(shipped);
    }
};

QTEST_MAIN(TestConstellationInspector)
#include "test_constellation_inspector.moc"
