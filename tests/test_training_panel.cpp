// app/training: the Training panel following run logs (finished ones overlaid; a live one
// written by another process; one written by a TrainingJob's worker thread), the job's
// start / pause / stop / resume, and the model preview. Offscreen platform.
#include <QApplication>
#include <QComboBox>
#include <QLineEdit>
#include <QScrollArea>
#include <QSlider>
#include <QTabWidget>
#include <QFileInfo>
#include <QPen>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "app/letr/trainer.h"
#include "app/mainwindow.h"
#include "app/training/training_view.h"
#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "core/io/demo_image.h"
#include "core/models/letr/model.h"
#include "core/models/letr/train.h"
#include "core/train/state.h"
#include "core/runlog.h"
#include "widgets/live_chart.h"

using namespace glimpse;
using glimpse::app::TrainingJob;
using glimpse::app::TrainingPanel;
using glimpse::app::TrainingSpec;
using glimpse::app::TrainingView;

namespace {

int points(TrainingPanel& p, const char* series, int run) {
    auto* c = p.charts()->chart(series);
    return c ? c->pointCount(run) : 0;
}

// A tiny LETR trainer config (coarse stage only, 64 px images) for real runs in tests.
void writeTinyConfig(const QString& path, int64_t coarseSteps) {
    nlohmann::json j = {
        {"model", {{"backbone", "resnet10"}, {"hidden_dim", 32}, {"nheads", 2}, {"dim_feedforward", 64},
                   {"coarse_enc_layers", 1}, {"coarse_dec_layers", 1}, {"num_queries", 8}, {"short_side", 64},
                   {"max_long_side", 128}, {"stages", "coarse"}}},
        {"batch_size", 1}, {"coarse_steps", coarseSteps}, {"checkpoint_every", 2}, {"threads", 1},
        {"val_every", 2}, {"val_images", 2},
        {"augment", {{"min_short_side", 56}, {"max_short_side", 72}, {"max_long_side", 128}}}};
    std::ofstream(path.toStdString()) << j.dump(2);
}

// Every chart line of `run` equals the run log on disk (steps and values), and every series
// of the log with rows has a chart.
void chartsMatchDisk(TrainingPanel& panel, int run, const QString& path, int minSeries = 4) {
    const RunLog log = RunLog::load(path.toStdString());
    int checked = 0;
    for (const auto& [name, s] : log.series) {
        auto* c = panel.charts()->chart(QString::fromStdString(name));
        if (s.size() == 0) {
            QVERIFY(!c || c->pointCount(run) == 0);
            continue;
        }
        QVERIFY2(c, name.c_str());
        const QVector<QPointF> pts = c->points(run);
        QCOMPARE(pts.size(), int(s.size()));
        for (size_t i = 0; i < s.size(); ++i) {
            QCOMPARE(pts[int(i)].x(), double(s.steps[i]));
            QCOMPARE(pts[int(i)].y(), s.values[i]);
        }
        ++checked;
    }
    QVERIFY(checked >= minSeries);
}

// The writer side of followsALiveRunFromAnotherProcess, run as a child process: writes rows,
// says so on stdout, waits for a line on stdin before going on.
int runlogWriterChild(const std::string& path) {
    try {
        std::string line;
        auto w = RunLogWriter::create(path, {{"model", "letr"}}, {"loss/total", "lr"});
        for (int i = 0; i < 5; ++i) w.append("loss/total", i, 1.0 / (i + 1));
        w.flush();
        std::cout << "first" << std::endl;
        if (!std::getline(std::cin, line)) return 3;
        for (int i = 5; i < 12; ++i) w.append("loss/total", i, 1.0 / (i + 1));
        w.append("lr", 11, 1e-4);
        w.flush();
        std::cout << "second" << std::endl;
        if (!std::getline(std::cin, line)) return 3;
        w.finish();
        std::cout << "done" << std::endl;
        return 0;
    } catch (const std::exception& e) {
        std::cerr << e.what() << std::endl;
        return 1;
    }
}

} // namespace

class TestTrainingPanel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const QString& name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void overlaysFinishedRuns() {
        for (int k = 0; k < 2; ++k) {
            RunLog log;
            log.status = RunStatus::Finished;
            for (int i = 0; i < 10 + 5 * k; ++i) {
                log.series["loss/total"].append(i * 10, i, 2.0 / (i + 1 + k));
                log.series["lr"].append(i * 10, i, 1e-4);
            }
            log.save(file(QStringLiteral("run%1.h5").arg(k)));
        }
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(dir_.filePath("run0.h5"), &err), qPrintable(err));
        QVERIFY2(panel.openRun(dir_.filePath("run1.h5"), &err), qPrintable(err));
        QCOMPARE(panel.runCount(), 2);
        QCOMPARE(panel.runStatus(0), QString("finished"));
        QCOMPARE(panel.charts()->seriesNames(), QStringList({"loss/total", "lr"}));
        QCOMPARE(points(panel, "loss/total", 0), 10);
        QCOMPARE(points(panel, "loss/total", 1), 15);
        auto* c = panel.charts()->chart("loss/total");
        QCOMPARE(c->lastPoint(1), QPointF(140, 2.0 / 16));
        QVERIFY(c->runLabel(0) != c->runLabel(1));
        QVERIFY(c->runPen(0).style() != c->runPen(1).style());
        // Polling a finished log adds nothing.
        panel.pollNow();
        QCOMPARE(points(panel, "loss/total", 0), 10);
        panel.closeRuns();
        QCOMPARE(panel.runCount(), 0);
        QCOMPARE(points(panel, "loss/total", 0), 0);
    }

    void startsWithTheSmallDemoConfig() {
        // The form's config is the source tree's small trainer config (not the full-size
        // library defaults), and it is a valid trainer config.
        TrainingPanel panel(nullptr);
        const QString cfg = panel.configPath();
        QVERIFY2(cfg.endsWith("letr_demo_train.json") && QFileInfo(cfg).isFile(), qPrintable(cfg));
        const auto c = letr::LetrTrainConfig::fromFile(cfg.toStdString());
        QVERIFY(c.model.hiddenDim < letr::LetrTrainConfig{}.model.hiddenDim);
    }

    // XTRA: the task weights of a run being written go live into one chart with a line per
    // offline game, shooters in warm colours and mazes in cool ones; the per-game losses likewise.
    void plotsTaskWeightsLive() {
        const nlohmann::json config = {
            {"trainer", "xtra"}, {"total_steps", 20}, {"offline_games", {"breakout", "invaders", "pellets"}},
            {"game_categories", {{"breakout", "shooter"}, {"invaders", "shooter"}, {"pellets", "maze"}}}};
        const std::vector<std::string> games{"breakout", "invaders", "pellets"};
        std::vector<std::string> series{"loss"};
        for (const auto& g : games) {
            series.push_back("task_weight/" + g);
            series.push_back("task_loss/" + g);
        }
        auto w = RunLogWriter::create(file("xtra.h5"), config, series);
        auto write = [&](int from, int to) {
            for (int s = from; s < to; ++s) {
                w.append("loss", s, 1.0 / s);
                w.append("task_weight/breakout", s, s < 5 ? 1.0 : 0.5);
                w.append("task_weight/invaders", s, 1.0);
                w.append("task_weight/pellets", s, s < 5 ? 1.0 : 0.0);
                for (const auto& g : games) w.append("task_loss/" + g, s, 2.0 / s);
            }
            w.flush();
        };
        write(1, 6);
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(dir_.filePath("xtra.h5"), &err), qPrintable(err));
        auto* c = panel.charts()->chart("task weights");
        QVERIFY(c);
        QVERIFY(!panel.charts()->chart("task_weight/breakout"));   // grouped, not a chart per game
        QVERIFY(panel.charts()->chart("task losses"));
        // Losses first (the target's, then the tasks'), then the task weights' group.
        const QStringList order = panel.charts()->layoutOrder();
        QCOMPARE(order.mid(0, 3), QStringList({"loss", "task losses", "task weights"}));
        QCOMPARE(panel.charts()->groupTitles(), QStringList({"Losses", "Task weights"}));
        QCOMPARE(c->runs().size(), 3);
        QMap<QString, int> line;
        for (int k : c->runs()) line[c->runLabel(k).section(' ', 0, 0)] = k;
        QCOMPARE(line.keys(), QStringList({"breakout", "invaders", "pellets"}));
        QCOMPARE(c->runLabel(line["pellets"]), QString("pellets (maze)"));
        QCOMPARE(c->pointCount(line["breakout"]), 5);
        QCOMPARE(c->lastPoint(line["breakout"]), QPointF(5, 0.5));
        QCOMPARE(c->lastPoint(line["pellets"]), QPointF(5, 0.0));
        const QColor b = c->runPen(line["breakout"]).color(), i = c->runPen(line["invaders"]).color(),
                     p = c->runPen(line["pellets"]).color();
        QVERIFY(b.red() > b.blue() && i.red() > i.blue());   // shooters warm
        QVERIFY(p.blue() > p.red());                         // maze cool
        QVERIFY(b != i);
        // Live: rows written after opening arrive at the next poll.
        write(6, 11);
        panel.pollNow();
        QCOMPARE(c->pointCount(line["invaders"]), 10);
        QCOMPARE(c->lastPoint(line["breakout"]), QPointF(10, 0.5));
        w.finish();
        panel.closeRuns();
        QVERIFY(c->runs().isEmpty());
    }

    // Opening a run sets the form to the run's own model, config and dataset, read-only (Start
    // and Resume wait until Close runs); closing it brings back what the user had typed.
    void fieldsFollowTheOpenedRun() {
        QDir().mkpath(dir_.filePath("coatrun"));
        RunLog log;
        log.status = RunStatus::Finished;
        log.config = {{"trainer", "coat"}, {"data", "fashion-mnist:/data/fm"}, {"total_steps", 4}};
        for (int i = 1; i <= 4; ++i) log.series["loss/train"].append(i, i, 1.0 / i);
        log.series["val/acc"].append(4, 4, 0.75);
        log.save(file("coatrun/run.h5"));
        TrainingJob job([](const TrainingSpec&, train::Control&, const train::ProgressFn&) {});
        TrainingPanel panel(&job);
        panel.setDataSpec("procedural:5");
        panel.setOutDir(dir_.filePath("mine"));
        QCOMPARE(panel.model(), QString("letr"));
        QVERIFY(panel.startButton()->isEnabled());
        QVERIFY(!panel.fieldsFollowRun());
        const QString path = dir_.filePath("coatrun/run.h5");
        QVERIFY(panel.openRun(path));
        QVERIFY(panel.fieldsFollowRun());
        QCOMPARE(panel.model(), QString("coat"));
        QCOMPARE(panel.configPath(), path);   // its config is the one its log records
        QCOMPARE(panel.dataSpec(), QString("fashion-mnist:/data/fm"));
        QCOMPARE(panel.outDir(), QFileInfo(path).absolutePath());
        QVERIFY(!panel.findChild<QComboBox*>()->isEnabled());
        for (QLineEdit* e : panel.findChildren<QLineEdit*>())
            if (e->text() == path || e->text() == "fashion-mnist:/data/fm") QVERIFY(e->isReadOnly());
        QVERIFY(!panel.startButton()->isEnabled());
        QVERIFY(!panel.resumeButton()->isEnabled());
        // The view groups its charts as CoaT's registry entry says.
        QCOMPARE(panel.chartsView()->family(), QString("coat"));
        QCOMPARE(panel.charts()->layoutOrder(), QStringList({"loss/train", "val/acc"}));
        panel.closeRuns();
        QVERIFY(!panel.fieldsFollowRun());
        QCOMPARE(panel.model(), QString("letr"));
        QCOMPARE(panel.dataSpec(), QString("procedural:5"));
        QCOMPARE(panel.outDir(), dir_.filePath("mine"));
        QVERIFY(panel.findChild<QComboBox*>()->isEnabled());
        QVERIFY(panel.startButton()->isEnabled());
    }

    // The view's tool row drives every chart: the smoothing slider (the EMA the formula gives),
    // the run regex, the x axis.
    void viewToolsDriveTheCharts() {
        for (int k = 0; k < 2; ++k) {
            RunLog log;
            log.status = RunStatus::Finished;
            log.config = {{"trainer", "letr"}};
            log.startTime = 1.7e9 + 100 * k;
            for (int i = 0; i < 30; ++i) {
                log.series["loss/total"].append(i, 2.0 * i, (i % 3) + k);
                log.series["lr"].append(i, 2.0 * i, 1e-4);
            }
            log.save(file(QStringLiteral("tools%1.h5").arg(k)));
        }
        TrainingPanel panel(nullptr);
        QVERIFY(panel.openRun(dir_.filePath("tools0.h5")));
        QVERIFY(panel.openRun(dir_.filePath("tools1.h5")));
        TrainingView* view = panel.chartsView();
        auto* loss = panel.charts()->chart("loss/total");
        view->smoothingSlider()->setValue(90);
        QCOMPARE(loss->smoothing(), 0.9);
        std::vector<double> y;
        for (int i = 0; i < 30; ++i) y.push_back(i % 3);
        const auto ref = widgets::emaSmooth(y, 0.9);
        const QVector<double> sm = loss->smoothedValues(0);
        for (int i = 0; i < 30; ++i) QVERIFY(std::abs(sm[i] - ref[size_t(i)]) < 1e-12);
        view->runFilterEdit()->setText("tools1");
        QVERIFY(!loss->lineVisible(0) && loss->lineVisible(1));
        view->runFilterEdit()->setText("");
        QVERIFY(loss->lineVisible(0));
        view->xAxisBox()->setCurrentIndex(1);   // relative time: the rows' wall times
        QCOMPARE(loss->xRange(), QPointF(0, 58));
        view->xAxisBox()->setCurrentIndex(2);   // wall time: the runs' own start times added
        QCOMPARE(loss->xRange(), QPointF(1.7e9, 1.7e9 + 158));
    }

    // In the main window the charts are a central tab that fills the main area; they resize
    // with the window, one chart maximizes with a double-click and comes back with Escape.
    void chartsFillTheMainArea() {
        RunLog log;
        log.status = RunStatus::Finished;
        log.config = {{"trainer", "letr"}};
        for (const char* s : {"loss/total", "loss/cls", "loss/l1", "val/sAP10", "lr", "throughput"})
            for (int i = 0; i < 50; ++i) log.series[s].append(i * 10, i, 1.0 / (1 + i));
        log.save(file("main.h5"));
        app::MainWindow w;
        w.resize(1280, 860);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* tabs = qobject_cast<QTabWidget*>(w.centralWidget());
        QVERIFY(tabs);
        QVERIFY(tabs->tabBar()->isHidden());   // the image alone: no tab bar
        QVERIFY(w.openRun(dir_.filePath("main.h5")));
        TrainingView* view = w.trainingPanel()->chartsView();
        QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(view));
        QTRY_VERIFY(view->isVisible());
        QTRY_VERIFY(view->width() >= tabs->width() - 8 && view->height() >= tabs->height() - tabs->tabBar()->height() - 8);
        auto* grid = view->grid();
        QTRY_VERIFY(grid->width() >= view->width() - 40);
        const auto charts = grid->charts();
        QCOMPARE(charts.size(), 6);
        QTRY_VERIFY(charts.front()->isVisible() && charts.front()->width() >= 300);
        const int cols = grid->columns();
        QVERIFY(cols >= 1);
        w.resize(1900, 1000);
        QTRY_VERIFY(grid->columns() > cols);
        const int wide = grid->columns();
        w.resize(1280, 860);
        QTRY_VERIFY(grid->columns() < wide);
        if (qEnvironmentVariableIsSet("GLIMPSE_TEST_SHOTS"))
            w.grab().save(QDir(qEnvironmentVariable("GLIMPSE_TEST_SHOTS")).filePath("training_view.png"));
        widgets::LiveChart* lr = grid->chart("lr");
        QTest::mouseDClick(lr, Qt::LeftButton, Qt::NoModifier, lr->rect().center());
        QCOMPARE(grid->maximized(), QString("lr"));
        QTRY_VERIFY(lr->width() >= view->width() - 40 && lr->height() >= view->height() * 0.7);
        QTRY_VERIFY(!grid->chart("loss/total")->isVisible());
        QTest::keyClick(lr, Qt::Key_Escape);
        QCOMPARE(grid->maximized(), QString());
        QTRY_VERIFY(grid->chart("loss/total")->isVisible());
        // Close runs: the tab goes, the image is the main area again.
        w.trainingPanel()->closeRuns();
        QCOMPARE(tabs->indexOf(view), -1);
    }

    // A long log is read on a worker (issue 55's scale target): openRun returns at once with
    // every chart laid out and saying it is being read; the charts then get every row, the same
    // as a synchronous read, and the run is followed (polled) from there. Close runs cancels.
    void longLogsAreReadOnAWorker() {
        const int64_t rows = TrainingPanel::kAsyncRows / 2;
        {
            RunLog log;
            log.config = {{"trainer", "letr"}};
            log.startTime = 1.7e9;
            for (int64_t i = 0; i < rows; ++i) {
                log.series["loss/total"].append(i, 0.5 * double(i), 1.0 / (1.0 + double(i)) + (i == 4321 ? 7.0 : 0.0));
                log.series["lr"].append(i, 0.5 * double(i), 1e-3);
            }
            log.save(file("long.h5"));
        }
        TrainingPanel panel(nullptr);
        panel.resize(900, 700);
        panel.show();
        QVERIFY(panel.openRun(dir_.filePath("long.h5")));
        QVERIFY(panel.loading());
        QCOMPARE(panel.charts()->seriesNames(), QStringList({"loss/total", "lr"}));   // laid out at once
        QVERIFY(panel.runListText(0).contains("reading"));
        QSignalSpy done(&panel, &TrainingPanel::loadingFinished);
        QTRY_VERIFY_WITH_TIMEOUT(!panel.loading(), 20000);
        QCOMPARE(done.count(), 1);
        widgets::LiveChart* loss = panel.charts()->chart("loss/total");
        QCOMPARE(loss->pointCount(0), int(rows));
        QCOMPARE(panel.charts()->chart("lr")->pointCount(0), int(rows));
        QCOMPARE(loss->lastPoint(0), QPointF(double(rows - 1), 1.0 / double(rows)));
        QCOMPARE(loss->wallTimes(0).back(), 0.5 * double(rows - 1));
        const double hi = 7.0 + 1.0 / 4322.0, lo = 1.0 / double(rows);   // the spike counts for the axis (5 % pad)
        QVERIFY(std::abs(loss->yRange().y() - (hi + 0.05 * (hi - lo))) < 1e-9);
        QVERIFY(!panel.runListText(0).contains("reading"));
        // The smoothing prepared on the worker is the chart's own.
        const QVector<double> sm = loss->smoothedValues(0);
        std::vector<double> y;
        for (const QPointF& p : loss->points(0)) y.push_back(p.y());
        const auto ref = widgets::emaSmooth(y, panel.charts()->smoothing());
        QCOMPARE(sm.size(), int(rows));
        for (int64_t i = 0; i < rows; i += 997) QVERIFY(std::abs(sm[int(i)] - ref[size_t(i)]) < 1e-12);
        // Opened again and closed while it is read: nothing arrives afterwards.
        panel.closeRuns();
        QVERIFY(panel.openRun(dir_.filePath("long.h5")));
        QVERIFY(panel.loading());
        panel.closeRuns();
        QVERIFY(!panel.loading());
        QTest::qWait(300);
        for (widgets::LiveChart* c : panel.charts()->charts())
            for (int k : c->runs()) QCOMPARE(c->pointCount(k), 0);
    }

    void openRunErrorsNameTheFile() {
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY(!panel.openRun(dir_.filePath("missing.h5"), &err));
        QVERIFY2(err.contains("missing.h5"), qPrintable(err));
        std::ofstream(file("text.h5")) << "not hdf5";
        QVERIFY(!panel.openRun(dir_.filePath("text.h5"), &err));
        QVERIFY2(err.contains("text.h5"), qPrintable(err));
        QCOMPARE(panel.runCount(), 0);
    }

    void followsALiveRunFromAnotherProcess() {
        // The writer is this test program started again as a plain child process (no fork of a
        // process that already runs Qt's threads); parent and child take turns over stdin/stdout.
        const QString path = dir_.filePath("live.h5");
        QProcess child;
        child.setProcessChannelMode(QProcess::SeparateChannels);
        child.start(QCoreApplication::applicationFilePath(), {"--runlog-writer-child", path});
        QVERIFY2(child.waitForStarted(30000), qPrintable(child.errorString()));
        auto turn = [&](const char* expect) {
            QString got;
            while (!got.contains('\n')) {
                if (!child.waitForReadyRead(60000)) break;
                got += QString::fromUtf8(child.readAllStandardOutput());
            }
            if (got.trimmed() != expect)
                qWarning("writer child said '%s' (stderr: %s)", qPrintable(got.trimmed()),
                         qPrintable(QString::fromUtf8(child.readAllStandardError())));
            return got.trimmed() == expect;
        };
        QVERIFY(turn("first"));
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(path, &err), qPrintable(err));
        QCOMPARE(panel.runStatus(0), QString("running"));
        QCOMPARE(points(panel, "loss/total", 0), 5);
        QCOMPARE(points(panel, "lr", 0), 0);

        child.write("go\n");
        QVERIFY(turn("second"));
        QSignalSpy polled(&panel, &TrainingPanel::polled);
        panel.pollNow();
        QCOMPARE(polled.count(), 1);
        QCOMPARE(polled.first().first().toBool(), true);
        QCOMPARE(points(panel, "loss/total", 0), 12);
        QCOMPARE(points(panel, "lr", 0), 1);
        QCOMPARE(panel.charts()->chart("loss/total")->lastPoint(0), QPointF(11, 1.0 / 12));
        // A running run's lines are live: the x axis ends past the last step (headroom).
        QVERIFY(panel.charts()->chart("loss/total")->lineLive(0));
        QVERIFY(panel.charts()->chart("loss/total")->xRange().y() > 11);

        child.write("go\n");
        QVERIFY(turn("done"));
        QVERIFY(child.waitForFinished(60000));
        QCOMPARE(child.exitStatus(), QProcess::NormalExit);
        QCOMPARE(child.exitCode(), 0);
        panel.pollNow();   // the final file replaced the live one
        QCOMPARE(panel.runStatus(0), QString("finished"));
        QCOMPARE(points(panel, "loss/total", 0), 12);
        QVERIFY(!panel.charts()->chart("loss/total")->lineLive(0));   // finished: the axis ends at the last step
        QCOMPARE(panel.charts()->chart("loss/total")->xRange(), QPointF(0, 11));
    }

    // A distributed run's log (rank 0's): the run list names its world size, the progress line
    // shows each rank's latest throughput, and every rank's throughput has a chart.
    void showsTheRanksOfADistributedRun() {
        const std::string path = file("dist.h5");
        RunLogWriter w = RunLogWriter::create(
            path, {{"trainer", "coat"}, {"world_size", 2}, {"total_steps", 10}},
            {"loss/train", "dist/world_size", "dist/throughput_rank0", "dist/throughput_rank1"});
        for (int step = 1; step <= 3; ++step) {
            w.append("loss/train", step, 1.0 / step);
            w.append("dist/world_size", step, 2);
            w.append("dist/throughput_rank0", step, 100.0 + step);
            w.append("dist/throughput_rank1", step, 90.0 + step);
        }
        w.flush();
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(QString::fromStdString(path), &err), qPrintable(err));
        panel.pollNow();
        QVERIFY2(panel.runListText(0).contains("[running, 2 ranks]"), qPrintable(panel.runListText(0)));
        QVERIFY2(panel.progressText().contains("step 3 / 10") && panel.progressText().contains("2 ranks: 103 | 93 img/s"),
                 qPrintable(panel.progressText()));
        QCOMPARE(points(panel, "dist/throughput_rank1", 0), 3);
        w.append("loss/train", 4, 0.25);
        w.append("dist/throughput_rank0", 4, 120.0);
        w.append("dist/throughput_rank1", 4, 80.5);
        w.flush();
        panel.pollNow();
        QVERIFY2(panel.progressText().contains("2 ranks: 120 | 80 img/s") || panel.progressText().contains("2 ranks: 120 | 81 img/s"),
                 qPrintable(panel.progressText()));
        w.finish();
        // EfficientZero's self-play ranks count environment steps (its log says so).
        const std::string ez = file("ez-dist.h5");
        RunLogWriter e = RunLogWriter::create(
            ez, {{"family", "efficientzero"}, {"world_size", 2}, {"throughput_unit", "env steps/s"}, {"steps", 10}},
            {"loss", "dist/world_size", "dist/throughput_rank0", "dist/throughput_rank1"});
        e.append("loss", 5, 1.0);
        e.append("dist/throughput_rank0", 5, 0.0);
        e.append("dist/throughput_rank1", 5, 212.0);
        e.flush();
        TrainingPanel panel2(nullptr);
        QVERIFY2(panel2.openRun(QString::fromStdString(ez), &err), qPrintable(err));
        panel2.pollNow();
        QVERIFY2(panel2.progressText().contains("2 ranks: 0.0 | 212 env steps/s"), qPrintable(panel2.progressText()));
        // Its preview is asked of EfficientZero (which has none), not of the LETR preview.
        panel2.refreshPreview();
        QVERIFY2(panel2.previewCaption() == "no preview for EfficientZero runs", qPrintable(panel2.previewCaption()));
        QCOMPARE(panel2.previewBoxText(), QString("no preview"));   // not "no preview yet"
        // Its total is the config's "steps" (EfficientZero logs have no "total_steps").
        QVERIFY2(panel2.progressText().contains("step 5 / 10"), qPrintable(panel2.progressText()));
        QCOMPARE(panel2.progressValue(), 500);
        e.finish();
    }

    // An XTRA finetuning run (issue 55's screenshots): the progress bar of a finished run is
    // full, the preview box and its caption agree that XTRA has no preview, and closing the
    // run clears them.
    void xtraRunShowsItsProgressAndNoPreview() {
        const std::string path = file("xtra-done.h5");
        RunLogWriter w = RunLogWriter::create(
            path, {{"trainer", "xtra"}, {"family", "efficientzero"}, {"steps", 4}},
            {"loss", "task_weight/invaders", "task_weight/pellets"});
        for (int step = 1; step <= 4; ++step) {
            w.append("loss", step, 1.0 / step);
            w.append("task_weight/invaders", step, 0.5);
            w.append("task_weight/pellets", step, 0.5);
        }
        w.finish();
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(QString::fromStdString(path), &err), qPrintable(err));
        QVERIFY2(panel.progressText().contains("step 4 / 4  (finished)"), qPrintable(panel.progressText()));
        QCOMPARE(panel.progressValue(), 1000);
        QVERIFY(!panel.previewBusy());
        QCOMPARE(panel.previewCaption(), QString("no preview for XTRA runs"));
        QCOMPARE(panel.previewBoxText(), QString("no preview"));
        QVERIFY(panel.previewImage().isNull());
        panel.closeRuns();
        QCOMPARE(panel.previewBoxText(), QString("no preview yet"));
        QCOMPARE(panel.previewCaption(), QString());
        // A finished log that records no total at all: full, and the bar names the step.
        const std::string bare = file("xtra-nototal.h5");
        RunLogWriter b = RunLogWriter::create(bare, {{"trainer", "xtra"}}, {"loss"});
        b.append("loss", 3, 1.0);
        b.finish();
        QVERIFY2(panel.openRun(QString::fromStdString(bare), &err), qPrintable(err));
        QVERIFY2(panel.progressText().contains("step 3  (finished)"), qPrintable(panel.progressText()));
        QCOMPARE(panel.progressValue(), 1000);
        QCOMPARE(panel.findChild<QProgressBar*>()->text(), QString("step 3"));
    }

    void jobTrainsOnAWorkerThreadAndPlotsLive() {
        QSemaphore gate;
        std::atomic<bool> sawStop{false}, sawResume{false};
        std::atomic<bool> onUiThread{false};
        const auto uiThread = std::this_thread::get_id();
        auto runner = [&](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
            onUiThread = std::this_thread::get_id() == uiThread;
            auto w = RunLogWriter::create(QDir(spec.outDir).filePath("run.h5").toStdString(),
                                          {{"data", spec.dataSpec.toStdString()}}, {"loss/total", "lr"});
            const int n = spec.resume ? 3 : 5;
            if (spec.resume) sawResume = true;
            for (int i = 0; i < n; ++i) {
                w.append("loss/total", i, 1.0 / (i + 1));
                w.append("lr", i, 1e-4);
                train::Progress p;
                p.step = i + 1;
                p.totalSteps = 10;
                p.phase = "coarse";
                p.eta = 90;
                progress(p);
            }
            w.flush();
            if (!spec.resume) {
                gate.tryAcquire(1, 60000);         // the test looks at the live plot here
                if (!control.checkpoint()) sawStop = true;   // paused, then stopped
            }
            w.finish();
        };
        TrainingJob job(runner);
        TrainingPanel panel(&job);
        panel.setDataSpec("procedural:10");
        panel.setOutDir(dir_.filePath("job"));
        QVERIFY(panel.startButton()->isEnabled());
        QVERIFY(!panel.stopButton()->isEnabled());

        QSignalSpy finished(&job, &TrainingJob::finished);
        panel.startButton()->click();
        QVERIFY(job.running());
        QVERIFY(!panel.startButton()->isEnabled());
        QVERIFY(panel.stopButton()->isEnabled());
        QVERIFY(QTest::qWaitFor([&] {
            panel.pollNow();
            return points(panel, "loss/total", 0) == 5;
        }, 20000));
        QCOMPARE(panel.runStatus(0), QString("running"));
        QVERIFY(!onUiThread);
        QVERIFY(QTest::qWaitFor([&] { return panel.progressValue() == 500; }, 20000));
        QVERIFY2(panel.progressText().contains("step 5 / 10") && panel.progressText().contains("ETA 1 min 30 s"),
                 qPrintable(panel.progressText()));

        panel.pauseButton()->click();
        QVERIFY(job.paused());
        gate.release();
        panel.stopButton()->click();
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.first().at(0).toBool(), true);
        QVERIFY(sawStop);
        QVERIFY(!job.running());
        QVERIFY(panel.startButton()->isEnabled());
        QCOMPARE(panel.runStatus(0), QString("finished"));

        // Resume: the job's run is followed again from its first row.
        panel.resumeButton()->click();
        QVERIFY(finished.wait(20000));
        QVERIFY(sawResume);
        panel.pollNow();
        QCOMPARE(panel.runCount(), 1);
        QCOMPARE(points(panel, "loss/total", 0), 3);

        // A trainer error reaches the panel.
        TrainingJob failing([](const TrainingSpec&, train::Control&, const train::ProgressFn&) {
            throw std::runtime_error("dataset procedural:x: bad count");
        });
        TrainingPanel p2(&failing);
        p2.setOutDir(dir_.filePath("fail"));
        QSignalSpy errors(&p2, &TrainingPanel::errorOccurred);
        QSignalSpy f2(&failing, &TrainingJob::finished);
        p2.startButton()->click();
        QVERIFY(f2.wait(20000));
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.first().first().toString().contains("bad count"));

        // No trainer: Start is disabled; no output directory: refused.
        TrainingJob none(TrainingJob::Runner{});
        TrainingPanel p3(&none);
        QVERIFY(!p3.startButton()->isEnabled());
        QString err;
        QVERIFY(!none.start(TrainingSpec{}, &err));
        QVERIFY(!err.isEmpty());
    }

    void replacedLogIsReadAgain() {
        // A stopped run's log, then (another process resumes it from an earlier checkpoint)
        // replaced by a live log with fewer rows, then by its finished log with more.
        const auto write = [&](int rows, RunStatus st, double scale) {
            RunLog log;
            log.status = st;
            for (int i = 1; i <= rows; ++i) log.series["loss/total"].append(i, i, scale / i);
            log.save(file("replaced.h5"));
        };
        write(6, RunStatus::Failed, 1.0);
        TrainingPanel panel(nullptr);
        QVERIFY(panel.openRun(dir_.filePath("replaced.h5")));
        QCOMPARE(panel.runStatus(0), QString("failed"));
        QCOMPARE(points(panel, "loss/total", 0), 6);
        write(4, RunStatus::Running, 2.0);
        panel.pollNow();
        QCOMPARE(panel.runStatus(0), QString("running"));
        QCOMPARE(points(panel, "loss/total", 0), 4);
        QCOMPARE(panel.charts()->chart("loss/total")->lastPoint(0), QPointF(4, 0.5));
        write(9, RunStatus::Finished, 2.0);
        panel.pollNow();
        QCOMPARE(panel.runStatus(0), QString("finished"));
        chartsMatchDisk(panel, 0, dir_.filePath("replaced.h5"), 1);
    }

    void realRunStartedFromThePanelPlotsLive() {
        // The real LETR trainer (app::letrRunner -> trainLetr) on a worker thread, driven only
        // through the panel's widgets; the panel's own poll timer draws the charts.
        const QString cfg = dir_.filePath("tiny.json"), out = dir_.filePath("gui_run");
        writeTinyConfig(cfg, 1000000);   // never ends by itself: the test stops it
        TrainingJob job(app::letrRunner());
        // Owned here (destroyed before the job even when a check fails and returns early).
        auto panel = std::make_unique<TrainingPanel>(&job);
        panel->resize(800, 900);
        panel->show();
        panel->setConfigPath(cfg);
        panel->setDataSpec("procedural:8:0:64x64");
        panel->setOutDir(out);
        QSignalSpy finished(&job, &TrainingJob::finished);
        panel->startButton()->click();
        QVERIFY(job.running());
        QTRY_VERIFY_WITH_TIMEOUT(points(*panel, "loss/total", 0) >= 3 && points(*panel, "val/sAP10", 0) >= 1, 120000);
        QTRY_VERIFY_WITH_TIMEOUT(panel->progressText().contains("/ 1000000") && panel->progressText().contains("ETA"),
                                 60000);
        QVERIFY(panel->progressValue() >= 0);
        // Headline charts first: total loss, then the loss terms, then validation (sAP10 first),
        // then optimizer and system charts - the groups of the family registry.
        const QStringList order = panel->charts()->layoutOrder();
        QCOMPARE(order.value(0), QString("loss/total"));
        QCOMPARE(panel->charts()->groupTitles().mid(0, 2), QStringList({"Losses", "Validation metrics"}));
        const int firstVal = int(order.indexOf("val/sAP10"));
        QVERIFY(firstVal > 0);
        for (int i = 0; i < firstVal; ++i) QVERIFY2(order[i].startsWith("loss/"), qPrintable(order[i]));
        QVERIFY(order.indexOf("lr") > firstVal);

        // Closing the panel does not stop the run; its charts keep following.
        panel->close();
        int seen = points(*panel, "loss/total", 0);
        QTRY_VERIFY_WITH_TIMEOUT(points(*panel, "loss/total", 0) > seen, 60000);
        QVERIFY(job.running());
        panel->show();

        // Pause / unpause through the button; rows keep arriving after the unpause.
        panel->pauseButton()->click();
        QVERIFY(job.paused());
        QTRY_VERIFY(panel->progressText().contains("(paused)"));
        panel->pauseButton()->click();
        QVERIFY(!job.paused());
        seen = points(*panel, "loss/total", 0);
        QTRY_VERIFY_WITH_TIMEOUT(points(*panel, "loss/total", 0) > seen, 60000);

        // The preview appears while the run goes on, drawn from a mid-run checkpoint.
        QTRY_VERIFY_WITH_TIMEOUT(!panel->previewImage().isNull(), 60000);
        QVERIFY2(panel->previewCaption().startsWith("checkpoint.h5"), qPrintable(panel->previewCaption()));
        QVERIFY(job.running());

        // For looking at it (not a check): GLIMPSE_TEST_SHOTS=DIR saves the panel mid-run.
        if (qEnvironmentVariableIsSet("GLIMPSE_TEST_SHOTS")) {
            QTRY_VERIFY_WITH_TIMEOUT(points(*panel, "val/sAP10", 0) >= 3, 120000);
            panel->grab().save(QDir(qEnvironmentVariable("GLIMPSE_TEST_SHOTS")).filePath("training_panel_run.png"));
        }

        // Stop: the trainer writes its checkpoint; the charts equal the log on disk.
        panel->stopButton()->click();
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.last().at(0).toBool(), true);
        panel->pollNow();
        QCOMPARE(panel->runStatus(0), QString("stopped"));   // "stopped at step N", resumable
        chartsMatchDisk(*panel, 0, out + "/run.h5");
        const int64_t done = train::loadTrainState((out + "/checkpoint.h5").toStdString(), "letr-train")
                                 .meta["step"].get<int64_t>();
        QCOMPARE(int64_t(points(*panel, "loss/total", 0)), done);
        QVERIFY(!QFileInfo::exists(out + "/model.h5"));
        // The preview (refreshed when the run ends) comes from the mid-run checkpoint.
        QSignalSpy preview(panel.get(), &TrainingPanel::previewUpdated);
        QTRY_VERIFY_WITH_TIMEOUT(!panel->previewImage().isNull(), 60000);
        QVERIFY2(panel->previewCaption().contains("checkpoint.h5"), qPrintable(panel->previewCaption()));

        // Resume (a shorter schedule that agrees with the steps done) runs to the end.
        writeTinyConfig(cfg, done + 3);
        finished.clear();
        panel->resumeButton()->click();
        QVERIFY(finished.wait(120000));
        QCOMPARE(finished.last().at(0).toBool(), true);
        panel->pollNow();
        QCOMPARE(panel->runStatus(0), QString("finished"));
        QCOMPARE(int64_t(points(*panel, "loss/total", 0)), done + 3);
        chartsMatchDisk(*panel, 0, out + "/run.h5");
        QVERIFY(QFileInfo::exists(out + "/model.h5"));
    }

    void followsGlimpseTrainInAnotherProcess() {
        const QString cfg = dir_.filePath("tiny_cli.json"), out = dir_.filePath("cli_run");
        writeTinyConfig(cfg, 1000000);
        QProcess proc;
        proc.start(GLIMPSE_EXE, {"train", "letr", "--config", cfg, "--data", "procedural:8:1:64x64", "--out", out});
        QVERIFY(proc.waitForStarted(30000));
        TrainingPanel panel(nullptr);
        const QString log = out + "/run.h5";
        // The log appears once the trainer has built its model; open it as soon as it can be.
        QTRY_VERIFY_WITH_TIMEOUT(QFileInfo::exists(log) && panel.openRun(log), 120000);
        QCOMPARE(panel.runStatus(0), QString("running"));
        // Rows are plotted as they arrive (the panel's poll timer).
        QTRY_VERIFY_WITH_TIMEOUT(points(panel, "loss/total", 0) >= 2, 120000);
        const int seen = points(panel, "loss/total", 0);
        QTRY_VERIFY_WITH_TIMEOUT(points(panel, "loss/total", 0) > seen + 2 && points(panel, "val/APH", 0) >= 1, 120000);
        QCOMPARE(panel.runStatus(0), QString("running"));
        QTRY_VERIFY2_WITH_TIMEOUT(panel.progressText().contains("/ 1000000") && panel.progressText().contains("ETA"),
                                  qPrintable(panel.progressText()), 30000);
        // Ctrl-C: the trainer stops cleanly (checkpoint, log marked stopped).
        ::kill(pid_t(proc.processId()), SIGINT);
        QVERIFY(proc.waitForFinished(60000));
        QCOMPARE(proc.exitStatus(), QProcess::NormalExit);
        QCOMPARE(proc.exitCode(), 0);
        QTRY_COMPARE_WITH_TIMEOUT(panel.runStatus(0), QString("stopped"), 30000);
        chartsMatchDisk(panel, 0, log);
        QVERIFY(panel.progressText().contains("(stopped)"));
    }

    void previewDrawsTheLatestModel() {
        letr::LetrConfig c;
        c.backbone = "resnet18";
        c.hiddenDim = 32;
        c.nheads = 2;
        c.dimFeedforward = 64;
        c.coarseEncLayers = c.coarseDecLayers = c.fineEncLayers = c.fineDecLayers = 1;
        c.numQueries = 8;
        c.shortSide = 64;
        QDir().mkpath(dir_.filePath("prev"));
        RunLog log;
        log.save(file("prev/run.h5"));
        TrainingPanel panel(nullptr);
        QVERIFY(panel.openRun(dir_.filePath("prev/run.h5")));
        QSignalSpy updated(&panel, &TrainingPanel::previewUpdated);
        panel.refreshPreview();   // no model yet: a message, no image
        QVERIFY(updated.wait(20000));
        QVERIFY(panel.previewImage().isNull());
        QCOMPARE(panel.previewBoxText(), QString("no preview"));
        QVERIFY2(panel.previewCaption().startsWith("no preview: no model.h5 or checkpoint.h5"), qPrintable(panel.previewCaption()));
        // A trainer checkpoint (family letr-train) mid-run: every query made confident and
        // every query's line set to the same segment (0.1, 0.2) - (0.9, 0.8) of the image, so
        // the preview must draw exactly that segment over the fixed image.
        letr::LetrModel trained(c, 2);
        {
            torch::NoGradGuard ng;
            const auto logit = [](float v) { return std::log(v / (1 - v)); };
            for (auto& p : trained.named_parameters()) {
                const std::string& k = p.key();
                const auto endsWith = [&](const std::string& e) {
                    return k.size() >= e.size() && k.compare(k.size() - e.size(), e.size(), e) == 0;
                };
                if (endsWith("class_embed.bias")) p.value().copy_(torch::tensor({8.f, -8.f}));
                if (endsWith("lines_embed.layers.2.weight")) p.value().zero_();
                if (endsWith("lines_embed.layers.2.bias"))
                    p.value().copy_(torch::tensor({logit(0.1f), logit(0.2f), logit(0.9f), logit(0.8f)}));
            }
        }
        train::TrainState st;
        st.meta["config"] = {{"model", c.toJson()}};
        st.meta["step"] = 7;
        st.meta["phase"] = "fine";
        st.model = train::moduleTensors(trained);
        train::saveTrainState(file("prev/checkpoint.h5"), "letr-train", st);
        panel.refreshPreview();
        // Drawn on a worker; meanwhile the box says so (--screenshot waits for previewBusy()).
        QVERIFY(panel.previewBusy());
        QCOMPARE(panel.previewBoxText(), QString("drawing the preview..."));
        QVERIFY(updated.wait(20000));
        QVERIFY(!panel.previewBusy());
        QCOMPARE(panel.previewImage().size(), QSize(320, 240));
        QVERIFY2(panel.previewCaption().startsWith("checkpoint.h5: 8 lines"), qPrintable(panel.previewCaption()));
        const cv::Mat plain = makeDemoImage(320, 240, 7);
        const QImage shown = panel.previewImage().convertToFormat(QImage::Format_RGB888);
        // Pixels that differ from the plain image lie on the segment (32, 48) - (288, 192).
        const double ax = 32, ay = 48, bx = 288, by = 192;
        int changed = 0, offLine = 0;
        for (int y = 0; y < 240; ++y)
            for (int x = 0; x < 320; ++x) {
                const cv::Vec3b q = plain.at<cv::Vec3b>(y, x);
                const QColor p = shown.pixelColor(x, y);
                if (std::abs(p.red() - q[0]) + std::abs(p.green() - q[1]) + std::abs(p.blue() - q[2]) <= 60) continue;
                ++changed;
                const double t = std::clamp(((x - ax) * (bx - ax) + (y - ay) * (by - ay)) /
                                                ((bx - ax) * (bx - ax) + (by - ay) * (by - ay)), 0.0, 1.0);
                offLine += std::hypot(x - (ax + t * (bx - ax)), y - (ay + t * (by - ay))) > 2.5;
            }
        QVERIFY2(changed > 150 && offLine == 0, qPrintable(QString("%1 changed, %2 off the line").arg(changed).arg(offLine)));

        // A newer final model.h5 wins.
        letr::LetrModel model(c, 1);
        letr::saveLetr(model, file("prev/model.h5"));
        panel.refreshPreview();
        QVERIFY(updated.wait(20000));
        QCOMPARE(panel.previewImage().size(), QSize(320, 240));
        QVERIFY2(panel.previewCaption().startsWith("model.h5"), qPrintable(panel.previewCaption()));
    }
};

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--runlog-writer-child") return runlogWriterChild(argv[2]);
    QApplication app(argc, argv);
    TestTrainingPanel tc;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&tc, argc, argv);
}
#include "test_training_panel.moc"
