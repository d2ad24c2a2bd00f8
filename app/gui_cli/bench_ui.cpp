// glimpse bench ui: the UI thread's event-loop latency (app/ui_latency.h) in the real main
// window through the three scenarios of app/ui_latency_scenarios.h; docs/ui-latency.md.
#include <QApplication>
#include <QDir>
#include <QPainter>
#include <QElapsedTimer>
#include <QFile>
#include <QScrollArea>
#include <QTemporaryDir>
#include <QThread>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

#include "core/util/threads.h"
#include "core/util/timing.h"
#include "app/cli/cli.h"
#include "app/gui_cli/bench_app.h"
#include "app/letr/view.h"
#include "app/mainwindow.h"
#include "app/training/training_panel.h"
#include "app/training/training_view.h"
#include "core/runlog.h"
#include "widgets/live_chart.h"
#include "app/ui_latency.h"
#include "app/ui_latency_scenarios.h"
#include "core/error.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse bench ui [--seconds S] [--repeat N] [--scenarios letr,follow,scrub]\n"
    "                        [--checkpoint C.h5] [--image I.png] [--episode-steps N]\n"
    "                        [--rows-per-second R] [--interval MS] [--work-dir DIR]\n"
    "                        [--chart-steps N] [--chart-series S] [--chart-workers W]\n"
    "Opens the main window (on the current display; without one, Qt's offscreen platform, where\n"
    "the Vulkan viewport draws nothing) and measures how late a 5 ms timer on the UI thread is\n"
    "handled (--interval) while: letr - LETR runs on the image (default the demo scene) again\n"
    "and again for S seconds (default 6) with the layer stepper moving every 40 ms, every layer\n"
    "and a few entities shown after each run (--checkpoint, default a random resnet18 LETR,\n"
    "d 256, 6+6 decoder layers, 300 lines); follow - the Training panel follows a run log that\n"
    "a second thread writes for S seconds (R steps/s, default 500, 8 series) until it finishes;\n"
    "scrub - the replay viewer's slider is dragged through every frame of an N-step (default\n"
    "1500) 210x160 episode, then 200 random seeks; charts (only when named in --scenarios) - a\n"
    "thread writes a live run log of --chart-steps (default 1000000) steps x --chart-series\n"
    "(default 20) series, the window opens it (UI thread: openRun + first paint of the charts\n"
    "tab; then the worker's progress: the charts on screen full, every row read, with the UI\n"
    "thread's lateness meanwhile, and the process's CPU time by then: the writer waits; the\n"
    "log is read by W workers, default one per core),\n"
    "meanwhile), then the writer goes on at R steps/s while every 100 ms the\n"
    "UI thread reads the new rows and repaints the charts tab (per refresh p50 / p95 / max, wall\n"
    "clock and the UI thread's CPU time; the lines decimated in full or from their last column\n"
    "meanwhile), and all the charts are\n"
    "drawn once offscreen (every chart, not only those on screen). Prints per scenario the ticks and the mean,\n"
    "99th percentile and maximum lateness in ms (a UI-thread stall of B ms shows as B - interval\n"
    "to B); for the worst tick the UI thread's CPU time and run-queue wait (runnable, but the\n"
    "cores were busy) in its gap; 'own': lateness minus run-queue wait (what the UI thread\n"
    "caused: its work, locks, I/O); and the worst overall. 'idle' is the event loop doing\n"
    "nothing (the timer's own jitter). --repeat: the whole set N times. Exits 1 only when a\n"
    "scenario cannot run, never because the UI is slow.\n";

void printRow(const char* name, const app::LatencyStats& s, const std::string& note) {
    std::printf("%-8s %7d %7.2f %7.2f %8.1f %8.1f %8.1f %8.1f %8.1f   %s\n", name, s.ticks, s.meanMs, s.p99Ms, s.maxMs,
                s.maxCpuMs, s.maxQueueMs, s.ownP99Ms, s.ownMaxMs, note.c_str());
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, f, a, b, c);
    return buf;
}

struct Worst {
    std::map<std::string, std::pair<double, double>> max;   // per scenario over repeats: lateness, own
    void add(const std::string& n, const app::LatencyStats& s) {
        auto& m = max[n];
        m = {std::max(m.first, s.maxMs), std::max(m.second, s.ownMaxMs)};
    }
};

struct ChartsOptions {
    int64_t steps = 1000000;
    int series = 20;
    int workers = 0;   // loading workers (0: one per core)
};

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[size_t(std::min<double>(double(v.size() - 1), std::floor(q * double(v.size()))))];
}

// What this machine charges for fresh memory (page faults), for reading the open time: the
// charts keep 3 doubles a row (step, wall time, value).
void printMemoryCost(size_t doubles) {
    QElapsedTimer t;
    t.start();
    std::vector<double> touch(doubles, 1.0);
    std::printf("charts: this machine fills %.0f MB of new memory in %.0f ms\n", double(touch.size()) * 8 / 1e6,
                t.nsecsElapsed() / 1e6);
}

// Every chart drawn once at 480 x 300 (what an export of all the charts costs).
void printOffscreenDraw(const QList<widgets::LiveChart*>& charts) {
    QImage img(480, 300, QImage::Format_RGB32);
    std::vector<double> each;
    for (auto* c : charts) {
        QElapsedTimer t;
        t.start();
        QPainter p(&img);
        c->draw(p, img.rect());
        p.end();
        each.push_back(t.nsecsElapsed() / 1e6);
    }
    double sum = 0;
    for (double v : each) sum += v;
    std::printf("charts: all %zu charts drawn offscreen in %.1f ms (per chart p50 %.2f max %.2f ms)\n", each.size(), sum,
                percentile(each, 0.5), percentile(each, 1.0));
    std::fflush(stdout);
}

// The live refreshes of the charts scenario, on the wall clock and in UI-thread CPU time.
struct LiveRefreshTimes {
    std::vector<double> refresh, paint, refreshCpu, paintCpu;
};

// Every 100 ms for liveSeconds: the UI thread reads the new rows (poll) and repaints the
// charts tab, timed on the wall clock and in the UI thread's own CPU time.
static void measureLiveRefreshes(app::TrainingPanel* panel, app::TrainingView* view, double liveSeconds,
                                 LiveRefreshTimes& times) {
    QElapsedTimer live;
    live.start();
    const auto cpuMs = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    };
    while (live.elapsed() < liveSeconds * 1000) {
        app::pumpEvents(100);
        QElapsedTimer t;
        t.start();
        const double c0 = cpuMs();
        panel->pollNow();
        const double pollMs = t.nsecsElapsed() / 1e6, pollCpu = cpuMs() - c0;
        view->repaint();
        const double all = t.nsecsElapsed() / 1e6, allCpu = cpuMs() - c0;
        times.refresh.push_back(all);
        times.paint.push_back(all - pollMs);
        times.refreshCpu.push_back(allCpu);
        times.paintCpu.push_back(allCpu - pollCpu);
    }
}

static void printLiveRefreshes(const LiveRefreshTimes& t) {
    std::printf("charts: %zu live refreshes (read new rows + repaint) p50 %.1f p95 %.1f max %.1f ms; repaint alone p50 %.1f p95 %.1f max %.1f ms\n",
                t.refresh.size(), percentile(t.refresh, 0.5), percentile(t.refresh, 0.95), percentile(t.refresh, 1.0),
                percentile(t.paint, 0.5), percentile(t.paint, 0.95), percentile(t.paint, 1.0));
    std::printf("charts: the same in UI-thread CPU time: refresh p50 %.1f p95 %.1f max %.1f ms; repaint alone p50 %.1f p95 %.1f max %.1f ms\n",
                percentile(t.refreshCpu, 0.5), percentile(t.refreshCpu, 0.95), percentile(t.refreshCpu, 1.0),
                percentile(t.paintCpu, 0.5), percentile(t.paintCpu, 0.95), percentile(t.paintCpu, 1.0));
}

// The charts scenario's writer thread: o.steps x o.series rows, then (once `live` is set)
// rowsPerSecond steps per second until `stop`.
struct ChartsWriter {
    std::atomic<bool> prefilled{false}, live{false}, stop{false}, done{false};
    std::atomic<int64_t> written{0};
    std::string error;
    void run(const QString& path, const std::vector<std::string>& names, const ChartsOptions& o, int rowsPerSecond) {
        const auto value = [](int k, int64_t i) {   // a decaying loss with noise and rare spikes
            const double noise = std::sin(double(i) * 12.9898 + k * 78.233) * 43758.5453;
            return (1.0 + k) / (1.0 + double(i) * 1e-4) * (1.0 + 0.1 * (noise - std::floor(noise))) + (i % 99991 == 7 ? 5.0 : 0.0);
        };
        try {
            RunLogWriter::Options opts;
            opts.flushInterval = 0.25;
            auto log = RunLogWriter::create(path.toStdString(), {{"trainer", "letr"}, {"total_steps", o.steps * 2}}, names, opts);
            int64_t i = 0;
            for (; i < o.steps; ++i)
                for (int k = 0; k < o.series; ++k) log.append(names[size_t(k)], i, value(k, i), double(i) * 0.01);
            log.flush();
            written = i;
            prefilled = true;
            while (!live && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            const auto t0 = std::chrono::steady_clock::now();
            while (!stop) {   // live: rowsPerSecond steps per second
                const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                const int64_t want = o.steps + int64_t(el * rowsPerSecond);
                for (; i < want; ++i)
                    for (int k = 0; k < o.series; ++k) log.append(names[size_t(k)], i, value(k, i), double(i) * 0.01);
                written = i;
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            log.finish();
        } catch (const std::exception& e) {
            error = e.what();
            prefilled = true;
        }
        done = true;
    }
};

// Training charts at scale (issue 55): a run log of o.steps x o.series rows opened, then
// followed live; the UI thread's cost of opening it and of each refresh. The writer appends
// nothing while the log is opened and read (the process's CPU time then is the open's).
void runChartsScenario(app::MainWindow& w, app::UiLatencyProbe& probe, const app::UiScenarioOptions& uo,
                       const ChartsOptions& o) {
    const QString path = QDir(uo.workDir).filePath("charts_run.h5");
    QFile::remove(path);
    std::vector<std::string> names;
    for (int k = 0; k < o.series; ++k)
        names.push_back(k == 0 ? "loss/total" : k < 6 ? "loss/term" + std::to_string(k) : k < 9 ? "val/metric" + std::to_string(k)
                                                                                             : "sys/series" + std::to_string(k));
    ChartsWriter cw;
    std::atomic<bool>&prefilled = cw.prefilled, &stop = cw.stop, &done = cw.done;
    std::atomic<int64_t>& written = cw.written;
    const std::string& error = cw.error;
    QElapsedTimer prefillClock;
    prefillClock.start();
    std::thread writer([&] { cw.run(path, names, o, uo.rowsPerSecond); });
    app::pumpUntil([&] { return prefilled.load(); }, 600000);
    std::printf("charts: wrote %lld steps x %d series in %.1f s\n", (long long)o.steps, o.series,
                prefillClock.elapsed() / 1000.0);
    if (!error.empty()) {
        stop = true;
        writer.join();
        throw Error("bench ui charts: run log writer: " + error);
    }
    printMemoryCost(size_t(o.steps) * size_t(o.series) * 3);
    app::TrainingPanel* panel = w.trainingPanel();
    panel->setLoadWorkers(o.workers);
    app::TrainingView* view = panel->chartsView();
    // Open: what the UI thread spends in openRun (the rows of a long log are read and prepared
    // on a worker), then the first paint (the page of charts, still being read).
    QElapsedTimer clock;
    clock.start();
    const double cpu0 = 1e3 * processCpuSeconds();
    const bool opened = w.openRun(path);
    const double openMs = clock.nsecsElapsed() / 1e6;
    view->repaint();
    const double firstPaintMs = clock.nsecsElapsed() / 1e6 - openMs;
    if (!opened) {
        stop = true;
        writer.join();
        throw Error("bench ui charts: cannot open " + path.toStdString() + ": " + w.lastError().toStdString());
    }
    const auto onScreen = [&] {
        QList<widgets::LiveChart*> out;
        for (auto* c : view->grid()->charts())
            if (!c->visibleRegion().isEmpty()) out << c;
        return out;
    };
    const auto hasRows = [](widgets::LiveChart* c) {
        for (int k : c->runs())
            if (c->pointCount(k) > 0) return true;
        return false;
    };
    // Meanwhile the UI thread runs its event loop (the probe measures how late it is); the
    // charts on screen fill first.
    probe.start();
    app::pumpUntil([&] { const auto v = onScreen(); return !v.isEmpty() && std::all_of(v.begin(), v.end(), hasRows); }, 600000);
    const double visibleMs = clock.nsecsElapsed() / 1e6, visibleCpu = 1e3 * processCpuSeconds() - cpu0;
    app::pumpUntil([&] { return !panel->loading(); }, 600000);
    const double loadedMs = clock.nsecsElapsed() / 1e6, loadedCpu = 1e3 * processCpuSeconds() - cpu0;
    view->repaint();
    const double paintedMs = clock.nsecsElapsed() / 1e6;
    probe.stop();
    const app::LatencyStats ls = probe.stats();
    const auto shownNow = onScreen();
    std::printf("charts: UI thread: openRun %.0f ms + first paint %.1f ms; worker: the %d charts on screen have every row "
                "after %.0f ms, all %lld rows read and prepared after %.0f ms (painted %.0f ms); UI-thread lateness "
                "meanwhile p99 %.1f max %.1f ms (%d ticks)\n",
                openMs, firstPaintMs, int(shownNow.size()), visibleMs, (long long)(o.steps * o.series), loadedMs, paintedMs,
                ls.p99Ms, ls.maxMs, ls.ticks);
    std::printf("charts: the process's CPU time (every thread, user + system) from openRun: %.0f ms when the charts on "
                "screen are full, %.0f ms when all rows are read and prepared (loading workers: %d)\n",
                visibleCpu, loadedCpu, o.workers > 0 ? o.workers : std::min(QThread::idealThreadCount(), app::TrainingPanel::kLoadWorkers));
    std::fflush(stdout);
    cw.live = true;
    // Live: every 100 ms the UI thread reads the new rows (poll) and repaints the charts tab,
    // timed on the wall clock and in the UI thread's own CPU time (the wall time also counts
    // waiting for a core on a loaded machine).
    LiveRefreshTimes times;
    const auto decimations = [&] {
        widgets::LiveChart::DecimationStats sum;
        for (auto* c : view->grid()->charts()) {
            const auto d = c->decimationStats();
            sum.full += d.full, sum.incremental += d.incremental, sum.columns += d.columns;
        }
        return sum;
    };
    const widgets::LiveChart::DecimationStats dec0 = decimations();
    probe.start();
    measureLiveRefreshes(panel, view, uo.seconds, times);
    probe.stop();
    const widgets::LiveChart::DecimationStats dec1 = decimations();
    stop = true;
    app::pumpUntil([&] { return done.load(); }, 60000);
    writer.join();
    printLiveRefreshes(times);
    std::printf("charts: decimation meanwhile (every chart's lines, raw and smoothed): %d full, %d incremental, %lld pixel "
                "columns computed\n",
                dec1.full - dec0.full, dec1.incremental - dec0.incremental, (long long)(dec1.columns - dec0.columns));
    const app::LatencyStats s = probe.stats();
    std::printf("charts: probe meanwhile: %d ticks, lateness mean %.2f p99 %.2f max %.1f ms; %lld steps written in all\n",
                s.ticks, s.meanMs, s.p99Ms, s.maxMs, (long long)written.load());
    printOffscreenDraw(view->grid()->charts());
    panel->closeRuns();
}

void runOnce(const app::UiScenarioOptions& o, const std::string& scenarios, Worst& worst, const ChartsOptions& co) {
    app::MainWindow w;
    w.resize(1280, 900);
    w.show();
    app::pumpEvents(500);
    if (!w.viewport()->vulkanError().isEmpty())
        std::printf("(viewport: %s)\n", w.viewport()->vulkanError().toStdString().c_str());
    app::UiLatencyProbe probe(nullptr, o.intervalMs);
    std::printf("%-8s %7s %7s %7s %8s %8s %8s %8s %8s\n", "scenario", "ticks", "mean", "p99", "max", "cpu@max",
                "queue@max", "own p99", "own max");
    probe.start();
    app::pumpEvents(1000);
    probe.stop();
    printRow("idle", probe.stats(), "event loop with nothing to do");
    std::fflush(stdout);
    const auto want = [&](const char* n) { return ("," + scenarios + ",").find(std::string(",") + n + ",") != std::string::npos; };
    if (want("letr")) {
        const auto r = app::runLetrScenario(w, probe, o);
        double runMs = 0;
        for (const auto& s : r.runs) runMs = std::max(runMs, s.runMs);
        printRow("letr", r.all, fmt("%.0f runs (longest %.0f ms on the worker), %.0f stepper moves", double(r.runs.size()), runMs,
                                    double(r.steps)) +
                                    fmt(", %.0f frames (%.0f with uploads, %.0f upload waits)", double(r.framesDrawn),
                                        double(r.framesWithUploads), double(r.uploadWaits)));
        worst.add("letr", r.all);
    }
    std::fflush(stdout);
    if (want("follow")) {
        const auto r = app::runFollowScenario(w, probe, o);
        printRow("follow", r.all, fmt("%.0f rows written, %.0f polls with new rows, final status ", double(r.rowsWritten),
                                      double(r.pollsWithRows)) + r.finalStatus.toStdString());
        worst.add("follow", r.all);
    }
    std::fflush(stdout);
    if (want("charts")) runChartsScenario(w, probe, o, co);
    if (want("scrub")) {
        const auto r = app::runScrubScenario(w, probe, o);
        printRow("scrub", r.all, fmt("%.0f seeks (slider call max %.1f ms), %.0f frames shown", double(r.seeks),
                                     r.seekCall.maxMs, double(r.framesShown)) +
                                     fmt(", decode off-thread p50 %.2f max %.1f ms", r.decode.p50Ms, r.decode.maxMs));
        worst.add("scrub", r.all);
    }
    std::fflush(stdout);
}

} // namespace

int benchUi(const std::vector<std::string>& args) {
    Args a(args, {"--help"});
    if (a.has("--help")) {
        std::cout << kUsage;
        return 0;
    }
    a.checkKnown({"--seconds", "--repeat", "--scenarios", "--checkpoint", "--image", "--episode-steps",
                  "--rows-per-second", "--interval", "--work-dir", "--chart-steps", "--chart-series", "--chart-workers"});
    app::UiScenarioOptions o;
    o.seconds = a.getDouble("--seconds", 6);
    const long long repeat = a.getInt("--repeat", 1);
    if (o.seconds <= 0 || repeat < 1) throw Error("--seconds and --repeat must be positive");
    o.letrCheckpoint = QString::fromStdString(a.get("--checkpoint", ""));
    o.image = QString::fromStdString(a.get("--image", ""));
    o.episodeSteps = int(a.getInt("--episode-steps", 1500));
    o.rowsPerSecond = int(a.getInt("--rows-per-second", 500));
    o.intervalMs = int(a.getInt("--interval", 5));
    if (o.episodeSteps < 2 || o.rowsPerSecond < 1 || o.intervalMs < 1)
        throw Error("--episode-steps must be at least 2, --rows-per-second and --interval at least 1");
    const std::string scenarios = a.get("--scenarios", "letr,follow,scrub");
    o.log = [](const QString& s) { std::printf("%s\n", s.toStdString().c_str()); };
    ChartsOptions co;
    co.steps = a.getInt("--chart-steps", 1000000);
    co.series = int(a.getInt("--chart-series", 20));
    co.workers = int(a.getInt("--chart-workers", 0));
    if (co.workers < 0 || co.workers > app::TrainingPanel::kLoadWorkers)
        throw Error("--chart-workers must be in 0.." + std::to_string(app::TrainingPanel::kLoadWorkers) + " (0: one per core)");
    if (co.steps < 1 || co.series < 1 || co.series > 1000) throw Error("--chart-steps must be positive, --chart-series in 1..1000");

    const auto app = makeBenchApplication("GlimpseBenchUi");
    QTemporaryDir tmp;
    o.workDir = a.has("--work-dir") ? QString::fromStdString(*a.get("--work-dir")) : tmp.path();
    std::printf("platform %s, probe interval %d ms, work dir %s\n", QApplication::platformName().toStdString().c_str(),
                o.intervalMs, o.workDir.toStdString().c_str());
    Worst worst;
    for (long long i = 0; i < repeat; ++i) {
        if (repeat > 1) std::printf("-- repetition %lld / %lld\n", i + 1, repeat);
        runOnce(o, scenarios, worst, co);
    }
    std::string which, whichOwn;
    double overall = -1, overallOwn = -1;
    for (const auto& [n, v] : worst.max) {
        std::printf("max %-7s %8.1f ms (own %.1f ms)\n", n.c_str(), v.first, v.second);
        if (v.first > overall) overall = v.first, which = n;
        if (v.second > overallOwn) overallOwn = v.second, whichOwn = n;
    }
    if (overall >= 0)
        std::printf("worst overall: %.1f ms (%s); own %.1f ms (%s)\n", overall, which.c_str(), overallOwn, whichOwn.c_str());
    return 0;
}

} // namespace glimpse::cli
