// glimpse: the GUI (no arguments, or a file to open) and the headless subcommands.
#include <QApplication>
#include <QCommandLineParser>
#include <QScreen>
#include <QTimer>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/coat_inspector.h"
#include "app/letr_inspector.h"
#include "app/letr_view.h"
#include "app/mainwindow.h"
#include "widgets/viewport.h"

namespace {

const char* kUsage =
    "usage: glimpse [FILE] [--demo] [--screenshot PNG]     start the GUI\n"
    "       glimpse info FILE.h5 ...                       describe a Glimpse HDF5 file\n"
    "       glimpse infer --model letr ...                 run a model headless, write a trace\n"
    "       glimpse bench letr ...                         time a model stage by stage\n"
    "       glimpse infer --model coat ...                 classify with CoaT, top-5, write a trace\n"
    "       glimpse bench coat [--variant V]               CoaT images/s and attention query time\n"
    "       glimpse bench rl [--threads T]                 environment and MCTS throughput\n"
    "       glimpse bench inspector [--reps R]             LETR inspector redraw times\n"
    "       glimpse env list | score [--episodes K]        the built-in arcade games\n"
    "       glimpse data export --data SPEC --out DIR      write a line dataset as images + JSON\n"
    "       glimpse train letr --config C.json --data D --out RUN_DIR   train LETR\n"
    "       glimpse eval letr --checkpoint C.h5 --data D   sAP/APH per decoder layer and LSD\n"
    "       glimpse train efficientzero --env NAME ...     train EfficientZero on a game\n"
    "       glimpse train coat --data fashion-mnist|DIR --out RUN [--ablation pe]   train CoaT\n"
    "       glimpse play --checkpoint C --env NAME         evaluate (and --record) episodes\n"
    "       glimpse --help | --version\n"
    "\n"
    "GUI options:\n"
    "  FILE               image to open (default: the built-in demo scene)\n"
    "  --demo             open the built-in demo scene\n"
    "  --run RUN.h5       follow a run log in the Training panel (repeat to overlay runs)\n"
    "  --screenshot PNG   once the first frame is drawn, save a screenshot of the window\n"
    "                     and quit (for checks under Xvfb)\n"
    "  --checkpoint C.h5  load this LETR checkpoint (default: letr_demo.h5 when installed; on the\n"
    "                     demo scene LETR then runs at once and the best line is selected)\n"
    "  --run-letr         run LETR on the opened image once the model is loaded\n"
    "  --entity K         then select line entity K (K = -1: the highest-scoring line)\n"
    "  --compare M        then show the compare pane: 'lsd' or a layer position (1-based)\n"
    "                     (with --screenshot, the screenshot waits for the trace)\n"
    "  --coat-checkpoint C.h5  load this CoaT checkpoint (default: coat_fmnist.h5 when installed)\n"
    "  --run-coat         run CoaT on the opened image once the model is loaded\n"
    "  --query X,Y        then set the CoaT query pixel (image pixels)\n"
    "  --coat-view MODE   then show: attention, crpe, cls, cam or key\n"
    "  --coat-scale S     then select scale S (1-4)\n"
    "  --coat-compare S   then show scale S (1-4) in the compare pane\n"
    "Run 'glimpse COMMAND --help' for a subcommand's options.\n";

// `--run-letr` needs a checkpoint: without --checkpoint and without an installed letr_demo.h5,
// say so and fail before any window (or display connection) is made.
bool runLetrWithoutCheckpoint(int argc, char** argv) {
    bool run = false, ckpt = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--run-letr") run = true;
        if (a == "--checkpoint" || a.rfind("--checkpoint=", 0) == 0) ckpt = true;
    }
    return run && !ckpt && glimpse::app::defaultLetrCheckpoint().isEmpty();
}

int runGui(int argc, char** argv) {
    if (runLetrWithoutCheckpoint(argc, argv)) {
        std::cerr << "glimpse: --run-letr: no LETR checkpoint: give --checkpoint C.h5, or install "
                     "letr_demo.h5 (looked in $GLIMPSE_RESOURCES, else <exe dir>/../share/glimpse and "
                     "the source tree's resources/)\n";
        return 2;
    }
    QApplication app(argc, argv);
    // OpenBLAS on the calling thread: the inspector computes attention maps on the UI thread
    // (see setBlasThreads); LETR passes on the worker keep LibTorch's own threads.
    glimpse::app::setBlasThreads(1);
    QApplication::setOrganizationName("Glimpse");
    QApplication::setApplicationName("Glimpse");
    QApplication::setApplicationVersion(GLIMPSE_VERSION);

    QCommandLineParser parser;
    parser.addPositionalArgument("file", "Image to open.");
    QCommandLineOption demo("demo", "Open the built-in demo scene.");
    QCommandLineOption shot("screenshot", "Save a screenshot once drawn, then quit.", "png");
    QCommandLineOption run("run", "Follow a run log in the Training panel.", "run.h5");
    parser.addOption(run);
    QCommandLineOption ckpt("checkpoint", "LETR checkpoint to load.", "h5");
    QCommandLineOption runLetr("run-letr", "Run LETR on the opened image.");
    QCommandLineOption entity("entity", "Select this line entity after the run.", "k");
    QCommandLineOption compare("compare", "Compare pane after the run: lsd or a layer position.", "m");
    QCommandLineOption coatCkpt("coat-checkpoint", "CoaT checkpoint to load.", "h5");
    QCommandLineOption runCoat("run-coat", "Run CoaT on the opened image.");
    QCommandLineOption query("query", "CoaT query pixel after the run.", "x,y");
    QCommandLineOption coatView("coat-view", "CoaT view after the run.", "mode");
    QCommandLineOption coatScale("coat-scale", "CoaT scale (1-4) after the run.", "s");
    QCommandLineOption coatCompare("coat-compare", "CoaT compare scale (1-4) after the run.", "s");
    for (const auto* o : {&coatCkpt, &runCoat, &query, &coatView, &coatScale, &coatCompare}) parser.addOption(*o);
    parser.addOption(demo);
    parser.addOption(shot);
    parser.addOption(ckpt);
    parser.addOption(runLetr);
    parser.addOption(entity);
    parser.addOption(compare);
    if (!parser.parse(QApplication::arguments())) {
        std::cerr << "glimpse: " << parser.errorText().toStdString() << "\n" << kUsage;
        return 2;
    }

    const bool wantRun = parser.isSet(runLetr);
    const QStringList files = parser.positionalArguments();
    // The LETR model: --checkpoint, else the shipped letr_demo.h5 when there is one.
    const QString checkpoint =
        parser.isSet(ckpt) ? parser.value(ckpt) : glimpse::app::defaultLetrCheckpoint();
    if (wantRun && checkpoint.isEmpty()) {   // e.g. --checkpoint ""
        std::cerr << "glimpse: --run-letr: no LETR checkpoint given\n";
        return 2;
    }

    glimpse::app::MainWindow window;
    window.show();
    auto* inspector = window.letrInspector();
    // What to select after the run: --entity K (K < 0: the highest-scoring line), else leave it.
    const int select = parser.isSet(entity) ? std::max(-1, parser.value(entity).toInt()) : -2;
    if (wantRun && parser.isSet(compare)) {
        const QString m = parser.value(compare);
        const int mode = m.compare("lsd", Qt::CaseInsensitive) == 0 ? -1 : m.toInt() - 1;
        QObject::connect(inspector, &glimpse::app::LetrInspector::traceReady, &window,
                         [inspector, mode] { inspector->setCompare(mode); });
    }
    auto* coat = window.coatInspector();
    const bool wantCoat = parser.isSet(runCoat);
    if (wantCoat) {
        // The view options are checked now, so that a typo fails before anything runs.
        glimpse::app::CoatMode mode = glimpse::app::CoatMode::Attention;
        const bool haveMode = parser.isSet(coatView);
        double qx = -1, qy = -1;
        int scale = -1, cmpScale = -1;
        try {
            if (haveMode) mode = glimpse::app::coatModeFromName(parser.value(coatView).toStdString());
        } catch (const std::exception& e) {
            std::cerr << "glimpse: --coat-view: " << e.what() << "\n";
            return 2;
        }
        if (parser.isSet(query)) {
            const QStringList xy = parser.value(query).split(',');
            bool ok1 = false, ok2 = false;
            if (xy.size() == 2) {
                qx = xy[0].toDouble(&ok1);
                qy = xy[1].toDouble(&ok2);
            }
            if (!ok1 || !ok2 || qx < 0 || qy < 0) {
                std::cerr << "glimpse: --query wants X,Y (image pixels), got '" << parser.value(query).toStdString() << "'\n";
                return 2;
            }
        }
        for (auto [opt, out] : {std::pair{&coatScale, &scale}, std::pair{&coatCompare, &cmpScale}}) {
            if (!parser.isSet(*opt)) continue;
            bool ok = false;
            *out = parser.value(*opt).toInt(&ok) - 1;
            if (!ok || *out < 0 || *out > 3) {
                std::cerr << "glimpse: --" << opt->names().first().toStdString() << " wants 1..4\n";
                return 2;
            }
        }
        auto tryRunCoat = [&window, coat] {
            static bool started = false;
            if (!started && coat->hasModel() && window.viewport()->hasImage() && !window.busy()) {
                started = true;
                coat->run(false);
            }
        };
        QObject::connect(&window, &glimpse::app::MainWindow::imageLoaded, &window, tryRunCoat);
        QObject::connect(coat, &glimpse::app::CoatInspector::checkpointLoaded, &window, tryRunCoat);
        QObject::connect(coat, &glimpse::app::CoatInspector::busyChanged, &window, tryRunCoat);
        QObject::connect(coat, &glimpse::app::CoatInspector::traceReady, &window,
                         [coat, mode, haveMode, qx, qy, scale, cmpScale] {
                             static bool done = false;
                             if (done) return;
                             done = true;
                             if (scale >= 0) coat->setScale(scale);
                             if (qx >= 0) coat->setQuery(qx, qy);
                             if (haveMode) coat->setMode(mode);
                             if (cmpScale >= 0) coat->setCompareScale(cmpScale);
                         });
        if (!parser.isSet(coatCkpt) && glimpse::app::defaultCoatCheckpoint().isEmpty()) {
            // Nothing to run: say so (the screenshot, if any, shows the message) instead of waiting.
            QObject::connect(&window, &glimpse::app::MainWindow::imageLoaded, coat, [coat] {
                if (!coat->hasModel() && !coat->modelLoading() && coat->lastFailure().isEmpty()) coat->run(false);
            });
        }
    }
    if (parser.isSet(coatCkpt)) coat->loadCheckpoint(parser.value(coatCkpt));
    if (files.isEmpty()) {
        // The demo scene; with a model, LETR runs on it and the best line is selected.
        window.startDemo(checkpoint, select == -2 ? -1 : select);
    } else {
        if (!checkpoint.isEmpty()) inspector->loadCheckpoint(checkpoint);
        window.openImage(files.first());
        if (wantRun) inspector->runWhenReady(select);
    }
    // With --screenshot, wait for the trace when a run was asked for (or the demo runs one).
    const bool waitTrace = wantRun || (files.isEmpty() && !checkpoint.isEmpty());
    for (const QString& r : parser.values(run)) window.openRun(r);

    if (parser.isSet(shot)) {
        const QString out = parser.value(shot);
        auto* vp = window.viewport();
        auto take = [&window, out, inspector, wantRun, wantCoat, coat] {
            QScreen* screen = window.screen();
            QPixmap pm = screen->grabWindow(window.winId());
            const bool ok = pm.save(out, "PNG");
            std::cerr << (ok ? "glimpse: screenshot saved to " : "glimpse: cannot write screenshot ")
                      << out.toStdString() << "\n";
            // A failed load or LETR run makes the exit status non-zero (the screenshot shows it too).
            const bool letrFailed = wantRun && !inspector->hasTrace();
            const bool coatFailed = wantCoat && !coat->hasTrace();
            const bool failed = !window.lastError().isEmpty() || letrFailed || coatFailed;
            if (failed)
                std::cerr << "glimpse: "
                          << (!window.lastError().isEmpty() ? window.lastError().toStdString()
                              : letrFailed                  ? std::string("LETR produced no trace")
                                                            : std::string("CoaT produced no trace"))
                          << "\n";
            QApplication::exit(ok && !failed ? 0 : 1);
        };
        // Wait for the image to be drawn a few times (swapchain settled), then grab.
        QObject::connect(vp, &glimpse::widgets::ImageViewport::frameDrawn, &window,
                         [vp, take, waitTrace, inspector, wantCoat, coat] {
            static bool scheduled = false;
            const bool traceDone = !waitTrace || inspector->hasTrace() || !inspector->lastFailure().isEmpty() ||
                                   (!inspector->busy() && !inspector->runPending() && !inspector->hasModel());
            const bool coatDone = !wantCoat || (coat->hasTrace() && !coat->busy()) || !coat->lastFailure().isEmpty();
            if (!scheduled && vp->hasImage() && vp->framesDrawn() >= 3 && traceDone && coatDone) {
                scheduled = true;
                QTimer::singleShot(300, take);
            }
        });
        QObject::connect(&window, &glimpse::app::MainWindow::loadFailed, &window,
                         [take] { QTimer::singleShot(300, take); });
        if (!vp->vulkanError().isEmpty()) QTimer::singleShot(500, take);
        // Nudge redraws until the condition above is met.
        auto* kick = new QTimer(&window);
        QObject::connect(kick, &QTimer::timeout, vp, [vp] { vp->setOverlayVisible(vp->overlayVisible()); });
        kick->start(100);
    }
    return app.exec();
}

} // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        const std::string cmd = argv[1];
        std::vector<std::string> rest(argv + 2, argv + argc);
        try {
            if (cmd == "--help" || cmd == "-h" || cmd == "help") {
                std::cout << kUsage;
                return 0;
            }
            if (cmd == "--version" || cmd == "-v") {
                std::cout << "glimpse " << GLIMPSE_VERSION << "\n";
                return 0;
            }
            if (cmd == "info") return glimpse::cli::info(rest);
            if (cmd == "infer") return glimpse::cli::infer(rest);
            if (cmd == "bench" && !rest.empty() && rest[0] == "rl")
                return glimpse::cli::benchRl(std::vector<std::string>(rest.begin() + 1, rest.end()));
            if (cmd == "bench" && !rest.empty() && rest[0] == "inspector")
                return glimpse::cli::benchInspector(std::vector<std::string>(rest.begin() + 1, rest.end()));
            if (cmd == "bench" && !rest.empty() && rest[0] == "coat")
                return glimpse::cli::benchCoat(std::vector<std::string>(rest.begin() + 1, rest.end()));
            if (cmd == "bench") return glimpse::cli::bench(rest);
            if (cmd == "env") return glimpse::cli::env(rest);
            if (cmd == "data") return glimpse::cli::data(rest);
            if (cmd == "train" && !rest.empty() && rest[0] == "efficientzero")
                return glimpse::cli::trainEfficientZero(std::vector<std::string>(rest.begin() + 1, rest.end()));
            if (cmd == "train" && !rest.empty() && rest[0] == "coat")
                return glimpse::cli::trainCoat(std::vector<std::string>(rest.begin() + 1, rest.end()));
            if (cmd == "train") return glimpse::cli::train(rest);
            if (cmd == "eval") return glimpse::cli::eval(rest);
            if (cmd == "play") return glimpse::cli::play(rest);
        } catch (const std::exception& e) {
            std::cerr << "glimpse " << cmd << ": " << e.what() << "\n";
            return 1;
        }
        if (cmd.rfind("-", 0) != 0 && !std::filesystem::exists(cmd) &&
            cmd.find('.') == std::string::npos && cmd.find('/') == std::string::npos) {
            std::cerr << "glimpse: unknown command '" << cmd << "'\n" << kUsage;
            return 2;
        }
    }
    return runGui(argc, argv);
}
