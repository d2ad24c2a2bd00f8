// glimpse bench ui: the UI thread's event-loop latency (app/ui_latency.h) in the real main
// window through the three scenarios of app/ui_latency_scenarios.h; docs/ui-latency.md.
#include <QApplication>
#include <QTemporaryDir>

#include <cstdio>
#include <iostream>
#include <map>

#include "core/util/threads.h"
#include "app/cli/cli.h"
#include "app/letr/view.h"
#include "app/mainwindow.h"
#include "app/ui_latency.h"
#include "app/ui_latency_scenarios.h"
#include "core/error.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse bench ui [--seconds S] [--repeat N] [--scenarios letr,follow,scrub]\n"
    "                        [--checkpoint C.h5] [--image I.png] [--episode-steps N]\n"
    "                        [--rows-per-second R] [--interval MS] [--work-dir DIR]\n"
    "Opens the main window (on the current display; without one, Qt's offscreen platform, where\n"
    "the Vulkan viewport draws nothing) and measures how late a 5 ms timer on the UI thread is\n"
    "handled (--interval) while: letr - LETR runs on the image (default the demo scene) again\n"
    "and again for S seconds (default 6) with the layer stepper moving every 40 ms, every layer\n"
    "and a few entities shown after each run (--checkpoint, default a random resnet18 LETR,\n"
    "d 256, 6+6 decoder layers, 300 lines); follow - the Training panel follows a run log that\n"
    "a second thread writes for S seconds (R steps/s, default 500, 8 series) until it finishes;\n"
    "scrub - the replay viewer's slider is dragged through every frame of an N-step (default\n"
    "1500) 210x160 episode, then 200 random seeks. Prints per scenario the ticks and the mean,\n"
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

void runOnce(const app::UiScenarioOptions& o, const std::string& scenarios, Worst& worst) {
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
                  "--rows-per-second", "--interval", "--work-dir"});
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

    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
        qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char name[] = "glimpse";
    static char* argv[] = {name, nullptr};
    QApplication app(argc, argv);
    QApplication::setOrganizationName("Glimpse");
    QApplication::setApplicationName("GlimpseBenchUi");   // recent files stay the GUI's own
    glimpse::setBlasThreads(1);                               // as the GUI (app/gui.cpp)
    QTemporaryDir tmp;
    o.workDir = a.has("--work-dir") ? QString::fromStdString(*a.get("--work-dir")) : tmp.path();
    std::printf("platform %s, probe interval %d ms, work dir %s\n", QApplication::platformName().toStdString().c_str(),
                o.intervalMs, o.workDir.toStdString().c_str());
    Worst worst;
    for (long long i = 0; i < repeat; ++i) {
        if (repeat > 1) std::printf("-- repetition %lld / %lld\n", i + 1, repeat);
        runOnce(o, scenarios, worst);
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
