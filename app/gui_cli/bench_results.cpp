// The GUI part of `glimpse bench results` (issue 53): the Results dock of the real main window
// on a results file (the core part writes a 10,000-sample LETR file and times the reader):
//   open     File > Open by kind -> the dock lists the samples (table, chart, thumbnails laid out);
//   sort     every numeric column, both orders (the model's re-order plus a synchronous repaint
//            of the table);
//   filter   a chart pick (the last layer's samples below its sAP), a name filter, clearing;
//   scroll   the thumbnail grid scrolled down a step every 16 ms for S seconds while its
//            thumbnails are made on the workers: per step the UI thread's work (scroll + paint),
//            and the event loop's lateness (app/ui_latency.h) over the whole scroll.
// Targets: open < 1 s, sort / filter < 100 ms, scroll step p95 < 16 ms.
#include <QApplication>
#include <QComboBox>
#include <QLineEdit>
#include <QElapsedTimer>
#include <QListView>
#include <QScrollBar>
#include <QTableView>
#include <QTimer>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <functional>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/gui_cli/bench_app.h"
#include "app/gui_cli/bench_results.h"
#include "app/mainwindow.h"
#include "app/results/results_panel.h"
#include "app/results/results_table.h"
#include "app/results/thumbnails.h"
#include "app/ui_latency.h"
#include "core/error.h"
#include "core/util/threads.h"

namespace glimpse::cli {

namespace {

double pct(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

void waitUntil(const std::function<bool()>& done, int timeoutMs) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < timeoutMs) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
}

// CPU time of the calling thread (ms): what the UI thread itself spent, whatever the load.
double threadCpuMs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string loadAverage() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}

struct Row {
    std::string what;
    std::vector<double> ms;
};

void print(const Row& r, double target) {
    const double worst = r.ms.empty() ? 0 : *std::max_element(r.ms.begin(), r.ms.end());
    std::printf("gui %-10s n %4zu  p50 %8.2f  p95 %8.2f  max %8.2f ms   target %.0f ms: %s\n", r.what.c_str(), r.ms.size(),
                pct(r.ms, 0.5), pct(r.ms, 0.95), worst, target, (r.what.rfind("scroll", 0) == 0 ? pct(r.ms, 0.95) : worst) < target ? "met" : "NOT met");
}

} // namespace

int benchResultsGui(const std::string& path, double scrollSeconds) {
    const auto app = makeBenchApplication("GlimpseBenchResults");
    app::MainWindow window;
    window.resize(1280, 900);
    window.show();
    waitUntil([] { return false; }, 300);   // the window settles
    app::ResultsPanel* p = window.resultsPanel();
    std::printf("gui: platform %s, %s, load average %s\n", QApplication::platformName().toStdString().c_str(),
                path.c_str(), loadAverage().c_str());

    // open: the reader on a worker, the columns, chart and views on the UI thread.
    bool opened = false, failed = false;
    QString error;
    QObject::connect(p, &app::ResultsPanel::opened, [&] { opened = true; });
    QObject::connect(p, &app::ResultsPanel::openFailed, [&](const QString&, const QString& m) {
        failed = true;
        error = m;
    });
    QElapsedTimer t;
    t.start();
    const double openCpu0 = threadCpuMs();
    p->open(QString::fromStdString(path));
    waitUntil([&] { return opened || failed; }, 60000);
    if (!opened) throw Error("bench results: the dock did not open " + path + ": " + error.toStdString());
    p->tableView()->viewport()->repaint();
    p->thumbnailView()->viewport()->repaint();
    Row open{"open", {t.nsecsElapsed() / 1e6}};
    std::printf("gui: open took %.0f ms of UI-thread CPU (the reader opens on a worker)\n", threadCpuMs() - openCpu0);
    waitUntil([&] { return !p->countsPending(); }, 120000);
    std::printf("gui: %lld samples; counts at the display score computed on a worker in %.0f ms after open\n",
                (long long)p->file()->size(), t.nsecsElapsed() / 1e6 - open.ms[0]);

    // sort: each numeric column, both orders.
    Row sort{"sort", {}}, sortCpu{"sort-cpu", {}};
    auto* table = p->tableModel();
    for (int c = 0; c < table->columnCount(); ++c) {
        if (table->column(c).text) continue;
        for (auto order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
            t.restart();
            const double cpu0 = threadCpuMs();
            p->tableView()->sortByColumn(c, order);
            p->tableView()->viewport()->repaint();
            sort.ms.push_back(t.nsecsElapsed() / 1e6);
            sortCpu.ms.push_back(threadCpuMs() - cpu0);
        }
    }
    // filter: a chart pick, a name filter, clearing.
    Row filter{"filter", {}}, filterCpu{"filter-cpu", {}};
    auto timed = [&](const std::function<void()>& f) {
        t.restart();
        const double cpu0 = threadCpuMs();
        f();
        p->tableView()->viewport()->repaint();
        filter.ms.push_back(t.nsecsElapsed() / 1e6);
        filterCpu.ms.push_back(threadCpuMs() - cpu0);
    };
    for (int k = 0; k < 3; ++k) {
        timed([&] { p->pickSeries(p->rowBox()->currentIndex()); });
        timed([&] { p->filterEdit()->setText(QStringLiteral("%1").arg(k + 1)); });
        timed([&] { p->clearPick(); });
    }

    // scroll: a step every 16 ms, thumbnails made meanwhile.
    QListView* grid = p->thumbnailView();
    QScrollBar* bar = grid->verticalScrollBar();
    Row scroll{"scroll", {}}, scrollCpu{"scroll-cpu", {}};
    app::UiLatencyProbe probe(nullptr, 5);
    QTimer stepper;
    stepper.setTimerType(Qt::PreciseTimer);
    const int step = std::max(1, bar->singleStep() * 3);
    QObject::connect(&stepper, &QTimer::timeout, [&] {
        QElapsedTimer f;
        f.start();
        const double cpu0 = threadCpuMs();
        bar->setValue(std::min(bar->maximum(), bar->value() + step));
        grid->viewport()->repaint();
        scroll.ms.push_back(f.nsecsElapsed() / 1e6);
        scrollCpu.ms.push_back(threadCpuMs() - cpu0);
    });
    const int64_t before = p->thumbnailModel()->made();
    probe.start();
    stepper.start(16);
    waitUntil([] { return false; }, int(scrollSeconds * 1000));
    stepper.stop();
    probe.stop();
    const app::LatencyStats lat = probe.stats();

    print(open, 1000);
    print(sort, 100);
    print(sortCpu, 100);
    print(filter, 100);
    print(filterCpu, 100);
    print(scroll, 16);
    print(scrollCpu, 16);
    std::printf("gui scroll: %d of %d px scrolled, %lld thumbnails made meanwhile; event loop lateness p50 %.2f "
                "p99 %.2f max %.2f ms (own p99 %.2f ms)\n",
                bar->value(), bar->maximum(), (long long)(p->thumbnailModel()->made() - before), lat.p50Ms, lat.p99Ms,
                lat.maxMs, lat.ownP99Ms);
    window.close();
    return 0;
}

int benchResultsGuiCommand(const std::vector<std::string>& args) {
    Args a(args, {"--help"});
    if (a.has("--help")) {
        std::cout << "usage: glimpse bench results-gui --file R.h5 [--scroll-seconds S]\n"
                     "The Results dock of the main window on R.h5 (e.g. the 10,000-sample LETR file that\n"
                     "'glimpse bench results --file R.h5' writes): open time, sort and filter times, and the UI\n"
                     "thread's work per thumbnail-scroll step (a step every 16 ms for S seconds, default 5) with\n"
                     "the event loop's lateness meanwhile. Targets: open < 1 s, sort / filter < 100 ms, scroll\n"
                     "step p95 < 16 ms. Without a display it uses Qt's offscreen platform.\n";
        return 0;
    }
    a.checkKnown({"--file", "--scroll-seconds"});
    const std::string file = a.get("--file", "");
    if (file.empty()) throw UsageError("--file R.h5 is required");
    const double seconds = a.getDouble("--scroll-seconds", 5);
    if (!(seconds > 0)) throw UsageError("--scroll-seconds must be positive");
    return benchResultsGui(file, seconds);
}

} // namespace glimpse::cli
