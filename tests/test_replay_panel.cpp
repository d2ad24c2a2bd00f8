// The replay viewer (app/replay) driven through the main window under Xvfb: opening an
// episode by path (as File > Open, drag and drop, recent files and the command line do), the
// frame in the viewport pixel for pixel, stepping, scrubbing, reward and life-loss jumps,
// playback at 8x, the strip charts, bars and children table, CSV and video export, a
// truncated file, and the model section (predictions, imagined rollout, saliency) with a small
// random EfficientZero network on an episode recorded by evaluate().
#include <QDockWidget>
#include <QToolButton>
#include <QScreen>
#include <QScrollArea>
#include <QFile>
#include <QSignalSpy>
#include <QSlider>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextStream>
#include <QtTest>

#include <opencv2/videoio.hpp>
#include <torch/torch.h>

#include <filesystem>

#include "app/mainwindow.h"
#include "app/replay/replay_model.h"
#include "app/replay/replay_panel.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "core/replay/world_model_check.h"
#include "core/rl/env.h"
#include "core/rl/episode.h"
#include "renderer/colormap.h"
#include "widgets/live_chart.h"
#include "widgets/strip_chart.h"
#include "tests/ez_support.h"

using namespace glimpse;
using glimpse::app::MainWindow;
using glimpse::app::ReplayModelView;
using glimpse::app::ReplayPanel;

namespace {

constexpr int kT = 40, kH = 10, kW = 12, kA = 3;

// Frames where every step differs: a gradient shifted by the step, step number in pixel (0, 0).
rl::Episode syntheticEpisode() {
    rl::Episode e;
    e.env = "synthetic";
    e.source = "test_replay_panel";
    e.frameSkip = 4;
    e.actionNames = {"NOOP", "FIRE", "RIGHT"};
    e.frames = torch::zeros({kT, kH, kW, 3}, torch::kUInt8);
    auto f = e.frames.accessor<uint8_t, 4>();
    for (int t = 0; t < kT; ++t)
        for (int y = 0; y < kH; ++y)
            for (int x = 0; x < kW; ++x) {
                f[t][y][x][0] = uint8_t((x * 20 + t * 6) % 256);
                f[t][y][x][1] = uint8_t((y * 25 + t * 3) % 256);
                f[t][y][x][2] = uint8_t(t * 6);
            }
    e.actions = torch::arange(kT, torch::kInt64).remainder(kA);
    e.rewards = torch::zeros({kT});
    e.rewards[7] = 1.f;
    e.rewards[20] = 4.f;
    e.lives = torch::full({kT}, 3, torch::kInt32);
    e.lives.slice(0, 15).fill_(2);
    e.terminal = true;
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "none.h5";
    e.model.simulations = 8;
    e.model.value = torch::linspace(0, 1, kT);
    e.model.valuePrefix = torch::linspace(0, 2, kT);
    e.model.rootValues = torch::linspace(1, 0, kT);
    e.model.policy = torch::full({kT, kA}, 1.f / kA);
    e.model.visitCounts = torch::zeros({kT, kA}, torch::kInt32);
    e.model.visitCounts.select(1, 1).fill_(6);
    e.model.visitCounts.select(1, 2).fill_(2);
    e.model.childrenQ = torch::full({kT, kA}, 0.25f);
    e.model.childrenPrior = torch::full({kT, kA}, 1.f / kA);
    return e;
}

std::vector<uint8_t> framePixels(const rl::Episode& e, int t) {
    torch::Tensor f = e.frames[t].contiguous();
    return std::vector<uint8_t>(f.data_ptr<uint8_t>(), f.data_ptr<uint8_t>() + f.numel());
}

std::vector<QStringList> readCsv(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    std::vector<QStringList> rows;
    QTextStream in(&f);
    while (!in.atEnd()) rows.push_back(in.readLine().split(','));
    return rows;
}


} // namespace

class TestReplayPanel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    rl::Episode episode_ = syntheticEpisode();
    QString path_;

    QString path(const QString& name) const { return dir_.filePath(name); }

    // Opens the synthetic episode and waits for step 0 on screen.
    void openEpisode(MainWindow& w) {
        ReplayPanel* r = w.replayPanel();
        QSignalSpy shown(r, &ReplayPanel::frameShown);
        w.openImage(path_);
        QVERIFY(shown.wait(20000));
        QCOMPARE(shown.first().first().toInt(), 0);
        QVERIFY(w.viewport()->pixelExact());   // game frames: nearest-neighbour at every zoom
    }
    // Goes to step t through `action` and checks the viewport shows that frame.
    void expectFrame(MainWindow& w, int t) {
        QTRY_COMPARE_WITH_TIMEOUT(w.replayPanel()->shownStep(), t, 10000);
        QCOMPARE(w.replayPanel()->step(), t);
        QVERIFY(w.viewport()->image().rgb == framePixels(episode_, t));
    }

    // With GLIMPSE_REPLAY_SCREENSHOT=PNG: the window with the imagined rollout and the saliency
    // heatmap, for looking at (the test asserts nothing about it).
    // A tag goes before the extension (several tests may save one).
    void saveScreenshot(MainWindow& w, ReplayModelView* m, const QString& tag = QString()) {
        QString out = qEnvironmentVariable("GLIMPSE_REPLAY_SCREENSHOT");
        if (out.isEmpty()) return;
        if (!tag.isEmpty()) {
            if (out.endsWith(".png")) out.chop(4);
            out += tag + ".png";
        }
        QWidget* p = m;
        while (p && !qobject_cast<QScrollArea*>(p)) p = p->parentWidget();
        if (auto* scroll = qobject_cast<QScrollArea*>(p)) {
            QTest::qWait(0);
            QWidget* target = m->saliencyScale()->isVisible()  ? static_cast<QWidget*>(m->saliencyScale())
                              : m->valueChart()->isVisible() ? static_cast<QWidget*>(m->valueChart())
                                                             : static_cast<QWidget*>(m);
            scroll->ensureWidgetVisible(target);
        }
        const int drawn = w.viewport()->framesDrawn();
        QTRY_VERIFY_WITH_TIMEOUT((w.viewport()->requestRedraw(), w.viewport()->framesDrawn() > drawn + 2) ||
                                     !w.viewport()->vulkanError().isEmpty(),
                                 10000);
        QVERIFY(w.screen()->grabWindow(w.winId()).save(out, "PNG"));
    }

    // The timeline's button labelled `text` (exactly).
    static QToolButton* button(ReplayPanel* r, const QString& text) {
        for (auto* b : r->findChildren<QToolButton*>())
            if (b->text() == text) return b;
        return nullptr;
    }

    // A small random EfficientZero network saved as `name`, and one breakout episode played and
    // recorded with it by evaluate() (the episode records the checkpoint's path).
    QString recordedEpisodeWithNetwork(const QString& name) {
        torch::manual_seed(3);
        efficientzero::Network net(glimpse::testing::tinyEfficientZeroConfig("breakout"));
        {
            torch::NoGradGuard g;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.5);
        }
        net.train(false);
        const std::string ck = path(name + ".h5").toStdString();
        saveCheckpoint(ck, checkpointFromModule(net.module(), "efficientzero", net.config().toJson().dump()));
        efficientzero::EvalOptions o;
        o.episodes = 1;
        o.parallel = 1;
        o.simulations = 4;
        o.env.maxEpisodeSteps = 12;
        o.recordDir = path(name + "_episodes").toStdString();
        o.checkpointPath = ck;
        const auto result = efficientzero::evaluate(net, "breakout", o);
        return result.recorded.size() == 1 ? QString::fromStdString(result.recorded[0]) : QString();
    }

private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("GlimpseTest");
        QCoreApplication::setApplicationName("GlimpseTestReplayPanel");
        qputenv("GLIMPSE_RESOURCES", dir_.path().toUtf8());
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
        path_ = path("game.h5");
        rl::writeEpisode(path_.toStdString(), episode_);
    }

    // Opening through openImage shows step 0 pixel for pixel, raises the Replay dock, fills the
    // charts and the step view, and adds the episode to the recent files.
    void opensEpisodeInViewport() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        QVERIFY(r->hasEpisode());
        QCOMPARE(r->length(), kT);
        QCOMPARE(w.viewport()->image().width, kW);
        QCOMPARE(w.viewport()->image().height, kH);
        QVERIFY(w.viewport()->image().rgb == framePixels(episode_, 0));
        QVERIFY(r->displayed());
        QVERIFY(w.recentFiles().contains(QFileInfo(path_).absoluteFilePath()));
        auto* dock = qobject_cast<QDockWidget*>(r->parentWidget());
        QVERIFY(dock && dock->isVisible());
        // What is drawn: the frame, with nearest-neighbour sampling once zoomed in (fit: ~60x).
        QTRY_VERIFY_WITH_TIMEOUT(w.viewport()->framesDrawn() >= 2, 10000);
        if (w.viewport()->vulkanError().isEmpty()) {
            QVERIFY(w.viewport()->zoom() >= 2.0);
            const QImage grab = w.viewport()->grabFrame();
            QVERIFY(!grab.isNull());
            const double sx = w.viewport()->width() * 0.5 + 3, sy = w.viewport()->height() * 0.5 + 3;
            int px = -1, py = -1;
            QVERIFY(w.viewport()->pixelAt(sx, sy, px, py));
            const double dpr = double(grab.width()) / w.viewport()->width();
            const QColor c = grab.pixelColor(int(sx * dpr), int(sy * dpr));
            // Nearest-neighbour: every screen pixel inside that image pixel has the same colour.
            const double cell = w.viewport()->zoom();
            for (int dy = -2; dy <= 2; ++dy)
                for (int dx = -2; dx <= 2; ++dx) {
                    int qx = -1, qy = -1;
                    if (!w.viewport()->pixelAt(sx + dx * cell / 6, sy + dy * cell / 6, qx, qy) || qx != px || qy != py)
                        continue;
                    QCOMPARE(grab.pixelColor(int((sx + dx * cell / 6) * dpr), int((sy + dy * cell / 6) * dpr)), c);
                }
            // The frame's colour, as stored or sRGB-encoded (the swapchain's format decides).
            const uint8_t* want = episode_.frames[0][py][px].contiguous().data_ptr<uint8_t>();
            auto srgb = [](int v) {
                const double l = v / 255.0;
                return int(std::lround(255.0 * (l <= 0.0031308 ? 12.92 * l : 1.055 * std::pow(l, 1 / 2.4) - 0.055)));
            };
            auto near = [](int a, int b) { return std::abs(a - b) <= 3; };
            const bool same = near(c.red(), want[0]) && near(c.green(), want[1]) && near(c.blue(), want[2]);
            const bool encoded = near(c.red(), srgb(want[0])) && near(c.green(), srgb(want[1])) &&
                                 near(c.blue(), srgb(want[2]));
            QVERIFY2(same || encoded, qPrintable(QStringLiteral("screen %1,%2,%3 vs frame %4,%5,%6")
                                                     .arg(c.red()).arg(c.green()).arg(c.blue())
                                                     .arg(want[0]).arg(want[1]).arg(want[2])));
        }
        // Charts: reward, return, value (predicted and root), value prefix; cursor at step 0.
        auto* reward = r->chart("reward");
        QVERIFY(reward);
        QCOMPARE(reward->lines().size(), 1);
        QCOMPARE(reward->lines()[0].values[20], 4.0);
        QCOMPARE(r->chart("return")->lines()[0].values[kT - 1], 5.0);
        QCOMPARE(r->chart("value")->lines().size(), 2);
        QCOMPARE(r->chart("value prefix")->lines().size(), 1);
        QCOMPARE(reward->cursorStep(), 0);
        // Step view: the action by name, policy and visit bars, the children table.
        QVERIFY(r->stepText().contains("NOOP"));
        QCOMPARE(r->bars()->categories(), QStringList({"NOOP", "FIRE", "RIGHT"}));
        QCOMPARE(r->bars()->series().size(), 2);
        QCOMPARE(r->bars()->series()[1].values[1], 0.75);
        QCOMPARE(r->bars()->highlight(), 0);
        QCOMPARE(r->childrenTable()->rowCount(), kA);
        QCOMPARE(r->childrenTable()->item(1, 1)->text(), QString("6"));
        QCOMPARE(r->childrenTable()->item(2, 2)->text(), QString("0.25"));
    }

    // Step forward/back (buttons' slots and keys), scrub, jumps, chart clicks.
    void stepsScrubsAndJumps() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        r->stepBy(1);
        expectFrame(w, 1);
        QVERIFY(r->stepText().contains("FIRE"));
        QCOMPARE(r->bars()->highlight(), 1);
        r->stepBy(-1);
        expectFrame(w, 0);
        // Keys in the viewport's window.
        if (QWindow* vw = w.viewport()->viewWindow()) {
            QTest::keyClick(vw, Qt::Key_Right);
            expectFrame(w, 1);
            QTest::keyClick(vw, Qt::Key_Left);
            expectFrame(w, 0);
        }
        // Scrub: the slider.
        r->slider()->setValue(25);
        expectFrame(w, 25);
        QCOMPARE(r->chart("reward")->cursorStep(), 25);
        // Jumps: rewards at 7 and 20, a life lost at 15.
        r->seek(0);
        expectFrame(w, 0);
        r->nextReward();
        expectFrame(w, 7);
        r->nextReward();
        expectFrame(w, 20);
        r->previousReward();
        expectFrame(w, 7);
        r->nextLifeLoss();
        expectFrame(w, 15);
        r->previousLifeLoss();
        QCOMPARE(r->step(), 15);   // none before: stays
        // Clicking a strip chart seeks to the step under the mouse.
        auto* chart = r->chart("return");
        const int x = chart->width() - 8;
        const int want = chart->stepAt(x);
        QVERIFY(want > 30);
        QTest::mouseClick(chart, Qt::LeftButton, {}, QPoint(x, chart->height() / 2));
        expectFrame(w, want);
        // Many requests in a row are coalesced to the last one.
        for (int t = 0; t < kT; t += 3) r->seek(t);
        expectFrame(w, 39);
    }

    // Play at 8x advances on its own to the end, then stops.
    void playsAt8x() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        r->setSpeed(8);
        QCOMPARE(r->speed(), 8.0);
        QSignalSpy shown(r, &ReplayPanel::frameShown);
        r->setPlaying(true);
        QVERIFY(r->playing());
        QTRY_VERIFY_WITH_TIMEOUT(r->shownStep() >= 10, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(!r->playing(), 20000);
        QTRY_COMPARE_WITH_TIMEOUT(r->shownStep(), kT - 1, 10000);
        QVERIFY(shown.count() >= 5);
        QVERIFY(w.viewport()->image().rgb == framePixels(episode_, kT - 1));
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 10000);
    }

    // The CSV round-trips; the video has one frame per step of the range.
    void exportsCsvAndVideo() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        QSignalSpy exported(r, &ReplayPanel::exported);
        QSignalSpy failed(r, &ReplayPanel::exportFailed);
        const QString csv = path("steps.csv");
        r->exportCsv(csv);
        QVERIFY(exported.wait(20000));
        const auto rows = readCsv(csv);
        QCOMPARE(int(rows.size()), kT + 1);
        const QStringList& head = rows[0];
        QCOMPARE(head.mid(0, 7), QStringList({"step", "action", "action_name", "reward", "return", "life_lost", "terminal"}));
        for (const char* col : {"value", "value_prefix", "root_value", "lives", "policy_FIRE", "visits_RIGHT",
                                "child_q_NOOP", "child_prior_RIGHT"})
            QVERIFY2(head.contains(col), col);
        for (int t = 0; t < kT; ++t) {
            const QStringList& row = rows[size_t(t + 1)];
            QCOMPARE(row.size(), head.size());
            QCOMPARE(row[0].toInt(), t);
            QCOMPARE(row[2], QString::fromStdString(episode_.actionNames[size_t(t % kA)]));
            QCOMPARE(row[3].toFloat(), episode_.rewards[t].item<float>());
            QCOMPARE(row[head.indexOf("life_lost")], QString(t == 15 ? "1" : "0"));
            QCOMPARE(row[head.indexOf("visits_FIRE")], QString("6"));
            QVERIFY(std::abs(row[head.indexOf("value")].toDouble() - episode_.model.value[t].item<double>()) < 1e-6);
        }
        QCOMPARE(rows[kT][head.indexOf("return")].toDouble(), 5.0);

        const QString avi = path("clip.avi");
        QSignalSpy progress(r, &ReplayPanel::exportProgress);
        r->exportVideo(avi, 5, 14);
        QVERIFY(r->exporting());
        QVERIFY(exported.wait(60000));
        QCOMPARE(exported.last().first().toString(), avi);
        QVERIFY(!progress.isEmpty());
        QCOMPARE(failed.count(), 0);
        cv::VideoCapture cap(avi.toStdString());
        QVERIFY(cap.isOpened());
        int frames = 0;
        cv::Mat m;
        while (cap.read(m)) {
            ++frames;
            QCOMPARE(m.cols, kW * r->exportScale());
            QCOMPARE(m.rows, kH * r->exportScale() + 18);   // the caption bar
        }
        QCOMPARE(frames, 10);
        // Cancelled at once: no file.
        const QString cancelled = path("cancelled.avi");
        QSignalSpy cancelledSpy(r, &ReplayPanel::exportCancelled);
        r->exportVideo(cancelled, 0, kT - 1);
        r->cancelExport();
        QVERIFY(cancelledSpy.wait(30000) || cancelledSpy.count() == 1 || exported.count() == 3);
        if (cancelledSpy.count() == 1) QVERIFY(!QFile::exists(cancelled));
        // A bad range is refused with a message naming the file.
        r->exportVideo(path("empty.avi"), 30, 10);
        QVERIFY(failed.wait(20000));
        QVERIFY(failed.last().at(1).toString().contains("empty.avi"));
    }

    // A truncated episode: a clear error naming the file; the open episode stays.
    void truncatedEpisodeKeepsOpenOne() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        r->seek(3);
        expectFrame(w, 3);
        const QString bad = path("cut.h5");
        QFile::remove(bad);
        QVERIFY(QFile::copy(path_, bad));
        std::filesystem::resize_file(bad.toStdString(), std::filesystem::file_size(bad.toStdString()) / 2);
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        w.openImage(bad);   // refused when the file kind is read, or by the reader on the worker
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 20000);
        QVERIFY2(w.lastError().contains("cut.h5"), qPrintable(w.lastError()));
        QCOMPARE(r->episodePath(), QFileInfo(path_).absoluteFilePath());
        QCOMPARE(r->shownStep(), 3);
        r->stepBy(1);
        expectFrame(w, 4);
    }

    // An episode recorded during XTRA finetuning: the header names the run and its updates, the
    // "task weights" chart has one line per offline game (coloured by category) with the
    // recorded values, and the step view lists the weights in force at the step shown; an
    // episode without them hides the chart again.
    void showsTaskWeightsInForce() {
        rl::Episode e = syntheticEpisode();
        e.hasTraining = true;
        e.training.run = "/runs/xtra-demon";
        e.training.trainer = "xtra";
        e.training.updates = torch::arange(100, 100 + kT, torch::kInt64);
        e.training.envSteps = torch::arange(0, 2 * kT, 2, torch::kInt64);
        e.training.taskNames = {"invaders", "pellets"};
        e.training.taskCategories = {"shooter", "maze"};
        e.training.taskWeights = torch::ones({kT, 2});
        e.training.taskWeights.slice(0, 20).select(1, 0).fill_(0.25f);
        e.training.taskWeights.slice(0, 30).select(1, 1).fill_(0.f);
        const QString file = path("xtra_episode.h5");
        rl::writeEpisode(file.toStdString(), e);
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ReplayPanel* r = w.replayPanel();
        QSignalSpy shown(r, &ReplayPanel::frameShown);
        w.openImage(file);
        QVERIFY(shown.wait(20000));
        widgets::StripChart* chart = r->chart("task weights");
        QVERIFY(chart && chart->isVisible());
        QCOMPARE(chart->lines().size(), 2);
        QCOMPARE(chart->lines()[0].name, QString("invaders"));
        QCOMPARE(chart->lines()[1].name, QString("pellets"));
        QVERIFY(chart->toolTip().contains("invaders: shooter, pellets: maze"));
        QCOMPARE(chart->lines()[0].color, widgets::gameColour("shooter", 0));
        QCOMPARE(chart->lines()[1].color, widgets::gameColour("maze", 0));
        QCOMPARE(chart->lines()[0].values[19], 1.0);
        QCOMPARE(chart->lines()[0].values[20], 0.25);
        QCOMPARE(chart->lines()[1].values[30], 0.0);
        r->seek(25);
        QTRY_COMPARE_WITH_TIMEOUT(r->shownStep(), 25, 10000);
        QVERIFY2(r->stepText().contains("update 125, environment step 50"), qPrintable(r->stepText()));
        QVERIFY2(r->stepText().contains("task weights in force: invaders 0.25, pellets 1.00"), qPrintable(r->stepText()));
        QCOMPARE(chart->cursorStep(), 25);
        r->seek(35);
        QVERIFY2(r->stepText().contains("invaders 0.25, pellets 0.00"), qPrintable(r->stepText()));
        QVERIFY2(r->headerText().contains("recorded in self-play of the xtra run xtra-demon, learner updates 100-139"),
                 qPrintable(r->headerText()));
        // An episode without training information: no chart, no training line.
        w.openImage(path_);
        QTRY_COMPARE_WITH_TIMEOUT(r->episodePath(), QFileInfo(path_).absoluteFilePath(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(!chart->isVisible(), 10000);
        QVERIFY(!r->stepText().contains("task weights"));
    }

    // Issue 56 item 8: |< and >| go to the first and last step (from anywhere, step 5 included),
    // < and > step, and the reward / life-loss jumps are their own labelled buttons, enabled only
    // when there is such an event in their direction; Home and End in the viewport too.
    void transportMeansFirstPreviousNextLast() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        openEpisode(w);
        ReplayPanel* r = w.replayPanel();
        QToolButton* first = button(r, "|<");
        QToolButton* back = button(r, "<");
        QToolButton* forward = button(r, ">");
        QToolButton* last = button(r, ">|");
        QToolButton* prevReward = button(r, "< Reward");
        QToolButton* nextReward = button(r, "Reward >");
        QToolButton* prevLife = button(r, "< Life lost");
        QToolButton* nextLife = button(r, "Life lost >");
        for (QToolButton* b : {first, back, forward, last, prevReward, nextReward, prevLife, nextLife}) QVERIFY(b);
        QVERIFY(!button(r, "<<") && !button(r, ">>"));
        QVERIFY(first->toolTip().contains("First step") && last->toolTip().contains("Last step"));
        // At step 0 nothing lies before.
        QVERIFY(!first->isEnabled() && !back->isEnabled() && !prevReward->isEnabled() && !prevLife->isEnabled());
        QVERIFY(forward->isEnabled() && last->isEnabled() && nextReward->isEnabled() && nextLife->isEnabled());
        r->seek(5);
        expectFrame(w, 5);
        QVERIFY(first->isEnabled());
        QVERIFY(!prevLife->isEnabled());   // the only life loss is at 15
        QTest::mouseClick(first, Qt::LeftButton);
        expectFrame(w, 0);
        QTest::mouseClick(last, Qt::LeftButton);
        expectFrame(w, kT - 1);
        QVERIFY(!forward->isEnabled() && !last->isEnabled() && !nextReward->isEnabled() && !nextLife->isEnabled());
        QTest::mouseClick(back, Qt::LeftButton);
        expectFrame(w, kT - 2);
        QTest::mouseClick(forward, Qt::LeftButton);
        expectFrame(w, kT - 1);
        // The labelled jumps: rewards at 7 and 20, a life lost at 15.
        QTest::mouseClick(prevReward, Qt::LeftButton);
        expectFrame(w, 20);
        QTest::mouseClick(prevLife, Qt::LeftButton);
        expectFrame(w, 15);
        QTest::mouseClick(prevReward, Qt::LeftButton);
        expectFrame(w, 7);
        QTest::mouseClick(nextLife, Qt::LeftButton);
        expectFrame(w, 15);
        QTest::mouseClick(nextReward, Qt::LeftButton);
        expectFrame(w, 20);
        // Home and End where the viewport has focus.
        if (QWindow* vw = w.viewport()->viewWindow()) {
            QTest::keyClick(vw, Qt::Key_Home);
            expectFrame(w, 0);
            QTest::keyClick(vw, Qt::Key_End);
            expectFrame(w, kT - 1);
        }
        QTest::mouseClick(first, Qt::LeftButton);
        expectFrame(w, 0);
    }

    // Issue 56 item 9: an episode that records its checkpoint opens with that network loaded,
    // without pressing "Recorded"; a recorded checkpoint that is missing or does not fit the
    // episode is said in the Model section, not raised as an error.
    void loadsRecordedNetworkOnOpen() {
        const QString episode = recordedEpisodeWithNetwork("auto");
        QVERIFY(!episode.isEmpty());
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ReplayPanel* r = w.replayPanel();
        ReplayModelView* m = r->modelView();
        QSignalSpy loaded(m, &ReplayModelView::networkLoaded);
        QSignalSpy failed(m, &ReplayModelView::failed);
        w.openImage(episode);
        QTRY_VERIFY_WITH_TIMEOUT(m->hasNetwork(), 30000);
        QCOMPARE(loaded.count(), 1);
        QCOMPARE(QFileInfo(m->checkpoint()).fileName(), QString("auto.h5"));
        QVERIFY2(m->modelText().contains("auto.h5") && m->modelText().contains("recorded in the episode"),
                 qPrintable(m->modelText()));
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
        // The network works at once: a prediction at the shown step.
        QSignalSpy predicted(m, &ReplayModelView::predicted);
        m->predict();
        QVERIFY(predicted.wait(30000));
        saveScreenshot(w, m, "_autoload");
        // The synthetic episode records "none.h5", which does not exist: no network, said why.
        w.openImage(path_);
        QTRY_COMPARE_WITH_TIMEOUT(r->episodePath(), QFileInfo(path_).absoluteFilePath(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
        QVERIFY(!m->hasNetwork());
        QVERIFY2(m->modelText().contains("none.h5") && m->modelText().contains("not found"), qPrintable(m->modelText()));
        // A recorded checkpoint that exists but does not fit (this episode has no observations).
        rl::Episode e = syntheticEpisode();
        e.model.checkpoint = path("auto.h5").toStdString();
        const QString misfit = path("misfit.h5");
        rl::writeEpisode(misfit.toStdString(), e);
        w.openImage(misfit);
        QTRY_COMPARE_WITH_TIMEOUT(r->episodePath(), QFileInfo(misfit).absoluteFilePath(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(m->modelText().contains("does not fit"), 30000);
        QVERIFY(!m->hasNetwork());
        QCOMPARE(failed.count(), 0);
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
    }

    // Issue 56 item 10: the saliency heatmap is drawn in a chosen colour map over 0 .. the 99th
    // percentile of its values (computed here by sorting), with that range in an overlay row
    // and a colour scale in the panel whose ends are the colour map's ends.
    void saliencyHasColourMapAndRange() {
        const QString episode = recordedEpisodeWithNetwork("salient");
        QVERIFY(!episode.isEmpty());
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ReplayPanel* r = w.replayPanel();
        ReplayModelView* m = r->modelView();
        w.openImage(episode);
        QTRY_VERIFY_WITH_TIMEOUT(m->hasNetwork(), 30000);
        r->seek(3);
        QTRY_COMPARE_WITH_TIMEOUT(r->shownStep(), 3, 10000);
        QSignalSpy salient(m, &ReplayModelView::saliencyReady);
        m->setSaliency(true);
        QVERIFY(salient.wait(30000));
        QVERIFY(m->hasSaliency(3));
        const auto& scene = w.viewport()->scene();
        QVERIFY(scene.hasHeatmap());
        QCOMPARE(int(scene.colormap), int(render::Colormap::Viridis));
        std::vector<float> sorted = scene.heat;
        std::sort(sorted.begin(), sorted.end());
        const float p99 = sorted[size_t(std::ceil(0.99 * double(sorted.size()))) - 1];
        QVERIFY(p99 > 0);
        QCOMPARE(scene.heatMin, 0.f);
        QCOMPARE(scene.heatMax, p99);
        QCOMPARE(m->saliencyMax(3), sorted.back());
        bool row = false;
        for (const auto& [label, value] : scene.overlayRows)
            if (label == "saliency") {
                row = true;
                QVERIFY2(QString::fromStdString(value).contains(QString::number(double(p99), 'g', 3)), value.c_str());
            }
        QVERIFY(row);
        // The colour scale: visible, the same range, the colour map's ends at its ends.
        widgets::ColourScale* scale = m->saliencyScale();
        QTRY_VERIFY_WITH_TIMEOUT(scale->isVisible(), 5000);
        QCOMPARE(scale->low(), 0.0);
        QCOMPARE(scale->high(), double(p99));
        auto endColours = [](render::Colormap c) {
            const auto t = render::colormapTable(c);
            return std::make_pair(QColor(t[0], t[1], t[2]), QColor(t[255 * 4], t[255 * 4 + 1], t[255 * 4 + 2]));
        };
        auto checkScalePixels = [&](render::Colormap c) {
            QVERIFY(scale->width() > 60);
            const QImage img = scale->grab().toImage();
            const auto [lo, hi] = endColours(c);
            // Scan the middle row of the bar for its first and last pixels of the map's end colours.
            const int y = int((img.height() - 1) * 0.75);
            bool seenLo = false, seenHi = false;
            for (int x = 0; x < img.width(); ++x) {
                const QColor px = img.pixelColor(x, y);
                seenLo = seenLo || px == lo;
                seenHi = seenHi || px == hi;
            }
            QVERIFY2(seenLo && seenHi, render::colormapName(c));
        };
        checkScalePixels(render::Colormap::Viridis);
        m->setSaliencyColormap(render::Colormap::Jet);
        QCOMPARE(int(w.viewport()->scene().colormap), int(render::Colormap::Jet));
        QCOMPARE(scale->colours().front(), endColours(render::Colormap::Jet).first);
        QCOMPARE(scale->colours().back(), endColours(render::Colormap::Jet).second);
        checkScalePixels(render::Colormap::Jet);
        m->setSaliencyOpacity(0.3);
        QCOMPARE(w.viewport()->scene().opacity, 0.3f);
        m->setSaliencyOpacity(0.6);
        saveScreenshot(w, m, "_saliency");
        // Off: no heatmap, no scale.
        m->setSaliency(false);
        QVERIFY(!w.viewport()->scene().hasHeatmap());
        QVERIFY(!scale->isVisible());
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
    }

    // Issue 56 item 10: the strip charts' y labels are never cut: the plot starts right of the
    // widest label, and no label ink touches the widget's left edge.
    void stripChartLabelsFit() {
        for (const QVector<double>& values : {QVector<double>{0.0, 0.000738}, QVector<double>{-0.000738, 0.000738},
                                             QVector<double>{-12345.6, 98765.4}}) {
            widgets::StripChart chart("value");
            chart.addLine({"v", QColor(40, 110, 220), values});
            chart.resize(320, 84);
            chart.show();
            QVERIFY(QTest::qWaitForWindowExposed(&chart));
            const QFontMetrics fm(chart.labelFont());
            for (const QString& label : chart.yLabels())
                QVERIFY2(fm.horizontalAdvance(label) < chart.plotRect().left(), qPrintable(label));
            const QImage img = chart.grab().toImage();
            const QColor base = chart.palette().base().color();
            const QRect plot = chart.plotRect();
            int ink = 0;
            for (int y = plot.top() - 2; y < std::min(img.height(), plot.bottom() + 1); ++y) {
                for (int x = 0; x < 2; ++x)
                    QVERIFY2(img.pixelColor(x, y) == base, qPrintable(QStringLiteral("ink at %1,%2").arg(x).arg(y)));
                for (int x = 2; x < plot.left(); ++x) ink += img.pixelColor(x, y) != base;
            }
            QVERIFY(ink > 10);   // the labels are drawn
        }
    }

    // With a checkpoint: predictions, an imagined rollout, saliency over the frame, cancel.
    void modelSection() {
        torch::manual_seed(3);
        efficientzero::Network net(glimpse::testing::tinyEfficientZeroConfig("breakout"));
        {
            torch::NoGradGuard g;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.5);
        }
        net.train(false);
        const std::string ck = path("model.h5").toStdString();
        saveCheckpoint(ck, checkpointFromModule(net.module(), "efficientzero", net.config().toJson().dump()));
        efficientzero::EvalOptions o;
        o.episodes = 1;
        o.parallel = 1;
        o.simulations = 4;
        o.env.maxEpisodeSteps = 12;
        o.recordDir = path("episodes").toStdString();
        o.checkpointPath = ck;
        const auto result = efficientzero::evaluate(net, "breakout", o);
        QCOMPARE(int(result.recorded.size()), 1);

        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ReplayPanel* r = w.replayPanel();
        QSignalSpy shown(r, &ReplayPanel::frameShown);
        w.openImage(QString::fromStdString(result.recorded[0]));
        QVERIFY(shown.wait(20000));
        ReplayModelView* m = r->modelView();
        QSignalSpy loaded(m, &ReplayModelView::networkLoaded);
        QSignalSpy failed(m, &ReplayModelView::failed);
        m->loadCheckpoint();   // the one recorded in the episode
        QVERIFY(loaded.wait(30000));
        QVERIFY(m->hasNetwork());
        r->seek(2);
        QSignalSpy predicted(m, &ReplayModelView::predicted);
        m->predict();
        QVERIFY(predicted.wait(30000));
        QCOMPARE(m->predictedStep(), 2);
        QVERIFY(m->predictionText().contains("value"));
        QSignalSpy imagined(m, &ReplayModelView::imagined);
        m->imagine(3);
        QVERIFY(imagined.wait(30000));
        QCOMPARE(m->imaginedFrom(), 2);
        QCOMPARE(m->imaginedPredictedReward().size(), size_t(3));
        QCOMPARE(m->imaginedPredictedValue().size(), size_t(4));
        QCOMPARE(m->imaginedActualReward().size(), size_t(3));
        {
            // The charts compare with what the network was trained on, as the table does.
            replay::EpisodeReader ep(result.recorded[0]);
            m->setDiscount(0.9);
            m->imagine(3);
            QVERIFY(imagined.wait(30000));
            const auto direct = replay::imagine(net, ep, 2, 3, 0.9, nullptr, 5, replay::Targets::AsTrained);
            QCOMPARE(m->imaginedActualReward(), direct.actualReward);
            QCOMPARE(m->imaginedActualReturn(), direct.actualReturn);
            QCOMPARE(m->imaginedPredictedValue(), direct.predictedValue);
        }
        QCOMPARE(m->rewardChart()->lines().size(), 2);
        QVERIFY(m->rewardChart()->isVisible());
        // The world model against the whole episode: the table shows what the core computes
        // (the loaded network and an untrained one, depth = the K box's 5).
        QSignalSpy checked(m, &ReplayModelView::worldModelChecked);
        m->checkWorldModel();
        QVERIFY(checked.wait(30000));
        QVERIFY(m->hasWorldModelCheck());
        {
            replay::EpisodeReader ep(result.recorded[0]);
            const auto direct = replay::checkWorldModel(net, ep, {});
            QCOMPARE(m->worldModelTrained().starts, direct.starts);
            QTableWidget* t = m->worldModelTable();
            QVERIFY(t->isVisible());
            QCOMPARE(t->rowCount(), 6);
            QCOMPARE(t->horizontalHeaderItem(1)->text(), QString("reward"));
            for (int k = 0; k <= 5; ++k) {
                QCOMPARE(t->item(k, 0)->text(), QString::number(k));
                QCOMPARE(t->item(k, 3)->text(), QString::number(direct.depths[size_t(k)].valueMae, 'f', 3));
                if (k > 0) QCOMPARE(t->item(k, 1)->text(), QString::number(direct.depths[size_t(k)].rewardMae, 'f', 3));
                // The untrained network predicts 0: its error is the targets' mean size.
                QCOMPARE(t->item(k, 4)->text(), t->item(k, 8)->text());
            }
        }
        QSignalSpy salient(m, &ReplayModelView::saliencyReady);
        m->setSaliency(true);
        QVERIFY(salient.wait(30000));
        saveScreenshot(w, m);
        QVERIFY(m->hasSaliency(2));
        QVERIFY(w.viewport()->scene().hasHeatmap());
        QCOMPARE(int64_t(w.viewport()->scene().heatW), r->reader()->frameWidth());
        // Cancel drops the running job at once.
        QSignalSpy cancelled(m, &ReplayModelView::cancelled);
        m->imagine(5);
        QVERIFY(m->busy());
        m->cancel();
        QCOMPARE(cancelled.count(), 1);
        QVERIFY(!m->busy());
        QCOMPARE(failed.count(), 0);
        // Saliency goes into the video export of that step.
        QSignalSpy exported(r, &ReplayPanel::exported);
        r->exportVideo(path("salient.avi"), 2, 3);
        QVERIFY(exported.wait(60000));
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
    }
};

QTEST_MAIN(TestReplayPanel)
#include "test_replay_panel.moc"
