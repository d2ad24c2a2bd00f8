#include "app/ui_latency_scenarios.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QEventLoop>
#include <QSlider>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include <torch/torch.h>

#include "app/async.h"
#include "app/letr/inspector.h"
#include "app/mainwindow.h"
#include "app/replay/replay_panel.h"
#include "app/training/training_panel.h"
#include "core/error.h"
#include "core/models/letr/model.h"
#include "core/replay/bench_replay.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "core/runlog.h"
#include "widgets/layer_stepper.h"

namespace glimpse::app {

void pumpEvents(int ms) {
    QEventLoop loop;
    QTimer::singleShot(std::max(0, ms), Qt::PreciseTimer, &loop, &QEventLoop::quit);
    loop.exec();
}

bool pumpUntil(const std::function<bool()>& pred, int timeoutMs) {
    QElapsedTimer clock;
    clock.start();
    while (!pred() && clock.elapsed() < timeoutMs) pumpEvents(2);
    return pred();
}

namespace {

void say(const UiScenarioOptions& o, const QString& text) {
    if (o.log) o.log(text);
}

[[noreturn]] void fail(const QString& text) { throw Error(text.toStdString()); }

QString workPath(const UiScenarioOptions& o, const QString& name) {
    const QString dir = o.workDir.isEmpty() ? QDir::tempPath() : o.workDir;
    QDir().mkpath(dir);
    return QDir(dir).filePath(name);
}

// --- letr --------------------------------------------------------------------------------------

letr::LetrConfig randomLetrConfig(int preset) {
    letr::LetrConfig c;
    c.backbone = "resnet18";
    c.coarseEncLayers = 1;
    c.fineEncLayers = 1;
    if (preset == 0) {   // small: a pass of a few hundred ms
        c.hiddenDim = 64;
        c.nheads = 4;
        c.dimFeedforward = 128;
        c.coarseDecLayers = 2;
        c.fineDecLayers = 3;
        c.numQueries = 50;
        c.shortSide = 256;
    } else {             // medium: resnet18, d 256, 8 heads, 6 + 6 decoder layers, 300 lines
        c.hiddenDim = 256;
        c.nheads = 8;
        c.dimFeedforward = 512;
        c.coarseDecLayers = 6;
        c.fineDecLayers = 6;
        c.numQueries = 300;
        c.shortSide = 512;
    }
    return c;
}

QString letrCheckpointFor(const UiScenarioOptions& o) {
    if (!o.letrCheckpoint.isEmpty()) return o.letrCheckpoint;
    const QString path = workPath(o, QStringLiteral("letr_random_%1.h5").arg(o.letrPreset));
    if (!QFileInfo::exists(path)) {
        letr::LetrModel model(randomLetrConfig(o.letrPreset), 7);
        letr::saveLetr(model, path.toStdString());
    }
    return path;
}

// The image shown and the checkpoint loaded (before the probe starts).
void prepareLetr(MainWindow& w, LetrInspector* in, const UiScenarioOptions& o, QString& failure) {
    if (o.image.isEmpty()) {
        w.openDemoImage();
    } else {
        bool loaded = false;
        QString why;
        auto c1 = QObject::connect(&w, &MainWindow::imageLoaded, [&](const QString&) { loaded = true; });
        auto c2 = QObject::connect(&w, &MainWindow::loadFailed, [&](const QString&, const QString& m) { why = m; });
        w.openImage(o.image);
        pumpUntil([&] { return loaded || !why.isEmpty(); }, 30000);
        QObject::disconnect(c1);
        QObject::disconnect(c2);
        if (!loaded) fail("bench ui: cannot open " + o.image + (why.isEmpty() ? QString() : ": " + why));
    }
    const QString checkpoint = letrCheckpointFor(o);
    say(o, "LETR checkpoint: " + checkpoint);
    bool ready = false;
    auto c = QObject::connect(in, &ModelPanel::checkpointLoaded, [&](const QString&) { ready = true; });
    in->loadCheckpoint(checkpoint);
    pumpUntil([&] { return ready || !failure.isEmpty(); }, 120000);
    QObject::disconnect(c);
    if (!ready) fail("bench ui: LETR checkpoint " + checkpoint + " did not load: " + failure);
}

// One run with the stepper used while it is on the worker.
LetrRunSample oneLetrRun(LetrInspector* in, UiLatencyProbe& probe, const UiScenarioOptions& o,
                         const QString& failure) {
    LetrRunSample s;
    const int mark = probe.ticks();
    double readyMs = -1;
    QElapsedTimer clock;
    auto c = QObject::connect(in, &ModelPanel::traceReady, [&] {
        if (readyMs < 0) readyMs = double(clock.nsecsElapsed()) * 1e-6;
    });
    clock.start();
    in->run(false);
    if (!in->running() && readyMs < 0) fail("bench ui: LETR did not start: " + failure);
    while (readyMs < 0 && failure.isEmpty() && clock.elapsed() < 600000) {
        pumpEvents(o.stepEveryMs);
        const int n = in->positionCount();
        if (n > 0 && readyMs < 0) {   // a user holding the Right key over the stepper
            in->stepper()->setPosition((std::max(0, in->stepper()->position()) + 1) % n);
            ++s.stepsDuring;
        }
    }
    QObject::disconnect(c);
    if (readyMs < 0) fail("bench ui: LETR run failed: " + (failure.isEmpty() ? QStringLiteral("timeout") : failure));
    s.runMs = readyMs;
    s.during = probe.stats(mark);
    return s;
}

} // namespace

LetrScenarioResult runLetrScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o) {
    LetrInspector* in = w.letrInspector();
    if (!in) fail("bench ui: no LETR panel");
    QString failure;
    auto cf = QObject::connect(in, &ModelPanel::failed, [&](const QString& m) { failure = m; });
    prepareLetr(w, in, o, failure);
    LetrScenarioResult r;
    widgets::ImageViewport* view = w.viewport();
    const long long frames0 = view->framesDrawn(), uploads0 = view->framesWithUploads(),
                    waits0 = view->uploadWaits();
    probe.start();
    QElapsedTimer clock;
    clock.start();
    while (int(r.runs.size()) < o.minRuns || clock.elapsed() < qint64(o.seconds * 1000)) {
        LetrRunSample s = oneLetrRun(in, probe, o, failure);
        r.steps += s.stepsDuring;
        say(o, QStringLiteral("  LETR run %1: %2 ms on the worker, UI max %3 ms over %4 ticks, %5 steps meanwhile")
                   .arg(r.runs.size() + 1).arg(s.runMs, 0, 'f', 0).arg(s.during.maxMs, 0, 'f', 1)
                   .arg(s.during.ticks).arg(s.stepsDuring));
        r.runs.push_back(s);
        r.positions = in->positionCount();
        for (int p = 0; p < r.positions; ++p, ++r.steps) {   // every layer, then a few entities
            in->stepper()->setPosition(p);
            pumpEvents(15);
        }
        for (int e : {0, 1, 2, -1}) {
            in->setEntity(e);
            pumpEvents(15);
        }
    }
    probe.stop();
    QObject::disconnect(cf);
    r.all = probe.stats();
    r.framesDrawn = view->framesDrawn() - frames0;
    r.framesWithUploads = view->framesWithUploads() - uploads0;
    r.uploadWaits = view->uploadWaits() - waits0;
    return r;
}

// --- follow ------------------------------------------------------------------------------------

namespace {

struct LogWriterThread {
    std::atomic<bool> stop{false}, created{false}, done{false};
    std::atomic<long long> rows{0};
    std::string error;
    std::thread thread;

    void start(const std::string& path, const UiScenarioOptions& o) {
        const int nSeries = std::max(1, o.series);
        const long long total = std::llround(std::max(1.0, o.seconds) * std::max(1, o.rowsPerSecond));
        const auto period = std::chrono::duration<double>(1.0 / std::max(1, o.rowsPerSecond));
        thread = std::thread([this, path, nSeries, total, period] {
            try {
                std::vector<std::string> names = {"loss/total"};
                for (int i = 1; i < nSeries; ++i) names.push_back("loss/part" + std::to_string(i));
                RunLogWriter::Options opt;
                opt.flushInterval = 0.05;
                auto w = RunLogWriter::create(path, {{"model", "letr"}, {"total_steps", total}}, names, opt);
                created = true;
                const auto t0 = std::chrono::steady_clock::now();
                int64_t step = 0;
                for (; !stop; ++step) {
                    for (size_t i = 0; i < names.size(); ++i)
                        w.append(names[i], step, 1.0 / (1.0 + 0.001 * double(step)) + 0.01 * double(i));
                    rows += (long long)names.size();
                    std::this_thread::sleep_until(t0 + (step + 1) * period);
                }
                w.flush();
                w.finish();
            } catch (const std::exception& e) {
                error = e.what();
            }
            created = true;
            done = true;
        });
    }
    ~LogWriterThread() {
        stop = true;
        if (thread.joinable()) thread.join();
    }
};

int runIndex(const TrainingPanel* p, const QString& path) {
    for (int i = 0; i < p->runCount(); ++i)
        if (p->runPath(i) == path) return i;
    return -1;
}

} // namespace

FollowScenarioResult runFollowScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o) {
    const QString path = workPath(o, "follow_run.h5");
    QFile::remove(path);
    TrainingPanel* panel = w.trainingPanel();
    FollowScenarioResult r;
    LogWriterThread writer;
    writer.start(path.toStdString(), o);
    pumpUntil([&] { return writer.created.load(); }, 30000);
    if (!writer.error.empty() || !writer.created) fail("bench ui: run log writer: " + QString::fromStdString(writer.error));
    probe.start();
    int lastMark = 0;
    auto c = QObject::connect(panel, &TrainingPanel::polled, [&](bool changed) {
        ++r.polls;
        say(o, QStringLiteral("  poll at %1 s (%2)").arg(probe.stats().seconds, 0, 'f', 2).arg(changed ? "new rows" : "nothing new"));
        if (!changed) return;
        ++r.pollsWithRows;
        r.ticksBetweenPolls.push_back(probe.ticks() - lastMark);
        lastMark = probe.ticks();
    });
    if (!w.openRun(path)) fail("bench ui: cannot follow " + path + ": " + w.lastError());
    lastMark = probe.ticks();
    say(o, QStringLiteral("  run opened at %1 s").arg(probe.stats().seconds, 0, 'f', 2));
    pumpEvents(int(o.seconds * 1000));
    writer.stop = true;
    pumpUntil([&] { return writer.done.load(); }, 30000);   // the final file replaces the live one
    say(o, QStringLiteral("  writer finished at %1 s").arg(probe.stats().seconds, 0, 'f', 2));
    const int i = runIndex(panel, path);
    pumpUntil([&] { return i >= 0 && panel->runStatus(i) == "finished"; }, 10000);
    probe.stop();
    QObject::disconnect(c);
    r.all = probe.stats();
    r.rowsWritten = writer.rows;
    r.finalStatus = i >= 0 ? panel->runStatus(i) : QString();
    if (!writer.error.empty()) fail("bench ui: run log writer: " + QString::fromStdString(writer.error));
    panel->closeRuns();
    return r;
}

// --- scrub -------------------------------------------------------------------------------------

namespace {

constexpr int64_t kFrameH = 210, kFrameW = 160;

// An Atari-sized episode with model outputs (charts, bars and the children table fill), frames
// from replay::syntheticFrame (moving sprites, noise), written by rl::writeEpisode.
void writeScrubEpisode(const std::string& path, int64_t T) {
    const rl::Episode e = replay::syntheticEpisode(T, "glimpse bench ui", 25);
    rl::FrameSource src;
    src.height = kFrameH;
    src.width = kFrameW;
    src.channels = 3;
    src.frames = [](int64_t first, int64_t n) {
        torch::Tensor t = torch::empty({n, kFrameH, kFrameW, 3}, torch::kUInt8);
        uint8_t* p = t.data_ptr<uint8_t>();
        for (int64_t i = 0; i < n; ++i) replay::syntheticFrame(first + i, kFrameH, kFrameW, p + i * kFrameH * kFrameW * 3);
        return t;
    };
    rl::writeEpisode(path, e, src);
}

// Frame reads (ms) by a reader of its own at random steps (cache misses), on a worker.
std::vector<float> timeDecodes(QObject* context, const QString& path, int64_t T) {
    Outcome<std::vector<float>> got;
    bool done = false;
    runAsync(
        context,
        [p = path.toStdString(), T] {
            replay::EpisodeReader reader(p);
            std::mt19937 rng(11);
            std::vector<float> ms;
            for (int i = 0; i < 100; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                (void)reader.frame(int64_t(rng() % uint32_t(T)));
                ms.push_back(float(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()));
            }
            return ms;
        },
        [&](Outcome<std::vector<float>> o) {
            got = std::move(o);
            done = true;
        });
    pumpUntil([&] { return done; }, 120000);
    if (!done || !got.ok()) fail("bench ui: reading " + path + ": " + got.error);
    return got.value;
}

QString prepareEpisode(MainWindow& w, const UiScenarioOptions& o) {
    const QString path = workPath(o, QStringLiteral("scrub_episode_%1.h5").arg(o.episodeSteps));
    if (QFileInfo::exists(path)) return path;
    bool done = false;
    QString error;
    runAsync(
        &w, [p = path.toStdString(), T = int64_t(std::max(2, o.episodeSteps))] { writeScrubEpisode(p, T); },
        [&](Outcome<std::monostate> r) {
            error = r.error;
            done = true;
        });
    pumpUntil([&] { return done; }, 300000);
    if (!done || !error.isEmpty()) fail("bench ui: writing " + path + ": " + error);
    return path;
}

// Moves the slider to t as a drag does; counts what the UI thread did synchronously.
void scrubTo(ReplayPanel* rp, int t, ScrubScenarioResult& r, std::vector<float>& callMs) {
    const bool cached = bool(rp->reader()->cachedFrame(t));
    QElapsedTimer c;
    c.start();
    rp->slider()->setValue(t);
    callMs.push_back(float(double(c.nsecsElapsed()) * 1e-6));
    ++r.seeks;
    if (!cached) {
        ++r.uncachedSeeks;
        if (rp->shownStep() == t) ++r.shownDuringSeek;
    }
}

} // namespace

ScrubScenarioResult runScrubScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o) {
    const QString path = prepareEpisode(w, o);
    ReplayPanel* rp = w.replayPanel();
    ScrubScenarioResult r;
    QString failure;
    auto c1 = QObject::connect(rp, &ReplayPanel::failed, [&](const QString& m) { failure = m; });
    auto c2 = QObject::connect(rp, &ReplayPanel::openFailed, [&](const QString&, const QString& m) { failure = m; });
    w.openImage(path);
    pumpUntil([&] { return (rp->hasEpisode() && rp->episodePath() == path && rp->shownStep() == 0) || !failure.isEmpty(); },
              60000);
    if (!rp->hasEpisode() || rp->shownStep() != 0) fail("bench ui: cannot open " + path + ": " + failure);
    const int T = rp->length();
    r.decode = summarize(timeDecodes(&w, path, T), 0, 0);
    auto c3 = QObject::connect(rp, &ReplayPanel::frameShown, [&](int) { ++r.framesShown; });
    std::vector<float> callMs;
    probe.start();
    for (int t = 1; t < T && failure.isEmpty(); ++t) {   // a drag through every frame
        scrubTo(rp, t, r, callMs);
        pumpEvents(o.scrubPaceMs);
    }
    std::mt19937 rng(5);
    for (int i = 0; i < o.randomSeeks && failure.isEmpty(); ++i) {   // clicks on the slider
        scrubTo(rp, int(rng() % uint32_t(T)), r, callMs);
        pumpEvents(10);
    }
    pumpUntil([&] { return rp->shownStep() == rp->step() || !failure.isEmpty(); }, 10000);
    probe.stop();
    for (auto c : {c1, c2, c3}) QObject::disconnect(c);
    if (!failure.isEmpty()) fail("bench ui: scrubbing " + path + ": " + failure);
    r.all = probe.stats();
    r.seekCall = summarize(callMs, 0, 0);
    return r;
}

} // namespace glimpse::app
