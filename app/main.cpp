// glimpse: the GUI (no arguments, or a file to open) and the headless subcommands.
#include <QApplication>
#include <QCommandLineParser>
#include <QScreen>
#include <QTimer>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/letr_inspector.h"
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
    "  --checkpoint C.h5  load this LETR checkpoint (default: letr_demo.h5 when installed)\n"
    "  --run-letr         run LETR on the opened image once the model is loaded\n"
    "  --entity K         then select line entity K (K = -1: the highest-scoring line)\n"
    "  --compare M        then show the compare pane: 'lsd' or a layer position (1-based)\n"
    "                     (with --screenshot, the screenshot waits for the trace)\n"
    "Run 'glimpse COMMAND --help' for a subcommand's options.\n";

int runGui(int argc, char** argv) {
    QApplication app(argc, argv);
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

    glimpse::app::MainWindow window;
    window.show();
    const QStringList files = parser.positionalArguments();
    auto* inspector = window.letrInspector();
    const bool wantRun = parser.isSet(runLetr);
    if (wantRun) {
        // Run once both the image and the model are there (either may come second).
        auto tryRun = [&window, inspector] {
            static bool started = false;
            if (!started && inspector->hasModel() && window.viewport()->hasImage() && !window.busy()) {
                started = true;
                inspector->run(false);
            }
        };
        QObject::connect(&window, &glimpse::app::MainWindow::imageLoaded, &window, tryRun);
        QObject::connect(inspector, &glimpse::app::LetrInspector::checkpointLoaded, &window, tryRun);
        QObject::connect(inspector, &glimpse::app::LetrInspector::busyChanged, &window, tryRun);
        if (parser.isSet(compare)) {
            const QString m = parser.value(compare);
            const int mode = m.compare("lsd", Qt::CaseInsensitive) == 0 ? -1 : m.toInt() - 1;
            QObject::connect(inspector, &glimpse::app::LetrInspector::traceReady, &window,
                             [inspector, mode] { inspector->setCompare(mode); });
        }
        if (parser.isSet(entity)) {
            const int k = parser.value(entity).toInt();
            QObject::connect(inspector, &glimpse::app::LetrInspector::traceReady, &window, [inspector, k] {
                static bool done = false;
                if (done) return;
                done = true;
                int e = k;
                if (e < 0) {
                    const auto rows = inspector->tableEntities();   // sorted by score, highest first
                    e = rows.empty() ? 0 : rows.front();
                }
                inspector->setEntity(e);
            });
        }
    }
    if (parser.isSet(ckpt)) inspector->loadCheckpoint(parser.value(ckpt));
    if (!files.isEmpty()) window.openImage(files.first());
    else window.openDemoImage();
    for (const QString& r : parser.values(run)) window.openRun(r);

    if (parser.isSet(shot)) {
        const QString out = parser.value(shot);
        auto* vp = window.viewport();
        auto take = [&window, out] {
            QScreen* screen = window.screen();
            QPixmap pm = screen->grabWindow(window.winId());
            const bool ok = pm.save(out, "PNG");
            std::cerr << (ok ? "glimpse: screenshot saved to " : "glimpse: cannot write screenshot ")
                      << out.toStdString() << "\n";
            QApplication::exit(ok ? 0 : 1);
        };
        // Wait for the image to be drawn a few times (swapchain settled), then grab.
        QObject::connect(vp, &glimpse::widgets::ImageViewport::frameDrawn, &window, [vp, take, wantRun, inspector] {
            static bool scheduled = false;
            if (!scheduled && vp->hasImage() && vp->framesDrawn() >= 3 &&
                (!wantRun || inspector->hasTrace() || !inspector->lastFailure().isEmpty())) {
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
