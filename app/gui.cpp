// The GUI of `glimpse`: its command-line options, the main window, the automatic LETR and CoaT
// runs they ask for, and --screenshot (for checks under Xvfb).
#include "core/util/threads.h"
#include "app/gui.h"

#include <QApplication>
#include <QComboBox>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QPixmap>
#include <QRegularExpression>
#include <QScreen>
#include <QSize>
#include <QTabWidget>
#include <QTimer>
#include <iostream>
#include <optional>
#include <tuple>

#include "app/coat/inspector.h"
#include "app/constellation/inspector.h"
#include "app/letr/inspector.h"
#include "app/letr/view.h"
#include "app/mainwindow.h"
#include "app/training/training_panel.h"
#include "widgets/live_chart.h"
#include "app/replay/replay_panel.h"
#include "app/results/results_launch.h"
#include "core/results/results.h"
#include "core/models/letr/trace.h"
#include "core/run_files.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

const char* kGuiOptions =
    "GUI options:\n"
    "  FILE               image, video, trace, run log, run folder, episode or checkpoint to open\n"
    "                     (default: the demo scene, where LETR runs at once; models load on first use)\n"
    "  --demo             open the built-in demo scene (also with --run)\n"
    "  --run RUN          follow a run log in the Training panel (repeat to overlay runs): RUN/run.h5,\n"
    "                     RUN/runlog.h5 (EfficientZero, XTRA) or the run folder RUN; without FILE or\n"
    "                     --demo no image is opened\n"
    "  --chart SERIES     with --run: maximize that chart of the Training tab (as a double-click\n"
    "                     on it does; Esc brings the grid back), e.g. --chart loss/total\n"
    "  --screenshot PNG   once the first frame is drawn, save a screenshot of the window\n"
    "                     and quit (for checks under Xvfb)\n"
    "  --maximized        open the window maximized: it fills the screen's available area, also\n"
    "                     without a window manager (Xvfb), e.g. for a full-screen screenshot\n"
    "  --window-size WxH  open the window W x H pixels large (default: its size when last closed,\n"
    "                     else 1280x860), e.g. --window-size 1920x1080\n"
    "  --checkpoint C.h5  load this LETR checkpoint (default: letr_demo.h5 when installed; on the\n"
    "                     demo scene LETR then runs at once and the best line is selected)\n"
    "  --run-letr         run LETR on the opened image once the model is loaded\n"
    "  --entity K         then select line entity K (K = -1: the highest-scoring line); needs\n"
    "                     --run-letr or the demo scene, and K within the trace's entities\n"
    "  --compare M        then show the compare pane: 'lsd', 'mlsd' (M-LSD tiny) or a layer\n"
    "                     position (1-based)\n"
    "  --layer N          then show layer position N (1-based: coarse 1.., then fine 1..)\n"
    "  --flips N          LETR's lines from a flip ensemble of N views (1, 2 or 4; default 1)\n"
    "  --letr-input S     LETR sees the image with short side S px (16-1024; the long side capped\n"
    "                     at 2S; default: the model's own), as the LETR panel's Input box\n"
    "                     (with --screenshot, the screenshot waits for the trace)\n"
    "  --precision P      LETR's and CoaT's runs compute in 'fp32' (default: exact) or 'auto'\n"
    "                     (bfloat16 on a CPU with AVX512-BF16 or AMX; else CoaT's MLP layers in\n"
    "                     int8), as their Precision boxes\n"
    "  --threshold T      then show LETR's lines scoring T or more (0-1; default: the checkpoint's)\n"
    "  --line-colour C    LETR's (and LSD's) lines coloured by 'score' (default) or 'edges': edge\n"
    "                     support, green on an edge of the image, yellow partly, red not\n"
    "  --coat-checkpoint C.h5  load this CoaT checkpoint (default: coat_fmnist.h5 when installed)\n"
    "  --run-coat         run CoaT on the opened image once the model is loaded\n"
    "  --query X,Y        then set the CoaT query pixel (image pixels)\n"
    "  --coat-view MODE   then show: attention, crpe, cls, cam or key\n"
    "  --coat-scale S     then select scale S (1-4)\n"
    "  --coat-compare S   then show scale S (1-4) in the compare pane\n"
    "  --constellation-checkpoint C.h5  load this ConstellationNet checkpoint (default:\n"
    "                     constellation_demo.h5 when installed)\n"
    "  --run-constellation  run ConstellationNet on the opened image once the model is loaded\n"
    "  --constellation-module M  then show constellation module M: its number (1-based) or its\n"
    "                     name as the panel's Module box shows it (e.g. branch1.2)\n"
    "  --cell X,Y         then click the cell under image pixel X,Y\n"
    "  --constellation-view V  then show: clusters or relation\n"
    "  --constellation-gallery K  then fill the cluster gallery with cluster K\n"
    "  --constellation-episode  run a few-shot episode and show the Episode tab\n"
    "  --step T           FILE is an episode: go to step T once it is open (0..its last step)\n"
    "  --sample N         FILE is a results file: select its sample N, or 'first': the first listed (the\n"
    "                     worst: the table opens sorted failures first; also the default with a pick)\n"
    "  --results-layer L  then show LETR row L of the results file ('fine 6', 'LSD')\n"
    "  --results-cell T,P then filter by the confusion matrix cell (true T, predicted P)\n"
    "  --results-bin B    then filter by bar B (0-9) of the episode accuracy histogram\n"
    "  --compare-results B.h5  then compare with another results file of the same data\n"
    "  --inspect          then run the family's inspector on the selected sample (LETR: attention\n"
    "                     of its best false positive; CoaT: Grad-CAM; few-shot: the Episode tab)\n";

// The GUI options after strict parsing: a bad value is refused before any window is made.
struct GuiOptions {
    QStringList files;
    QString screenshot;
    QStringList runs;
    bool demo = false;           // the demo scene (no FILE and no --run, or --demo)
    QString checkpoint;          // LETR (empty: none)
    bool checkpointGiven = false;   // --checkpoint (else the shipped model, loaded on first use)
    bool runLetr = false;
    int entity = -2;             // -2: leave the selection, -1: the best line, >= 0: that entity
    std::optional<int> compare;  // -1: LSD, -3: M-LSD, >= 0: a layer position
    int layer = -1;              // LETR's layer position after the first trace (-1: the last)
    int flips = 1;               // LETR's flip ensemble (1, 2 or 4 views)
    int letrInput = 0;           // LETR's input short side (0: the model's)
    int precision = 0;           // LETR's and CoaT's Precision boxes: 0 float32, 1 auto
    LineColour lineColour = LineColour::Score;
    std::optional<double> threshold;   // LETR's display threshold after the first trace
    QString coatCheckpoint;
    bool runCoat = false;
    std::optional<CoatMode> coatMode;
    double qx = -1, qy = -1;
    int coatScale = -1, coatCompare = -1;
    QString constellationCheckpoint;
    bool runConstellation = false;
    std::optional<ConstellationMode> constellationMode;
    QString constellationModule;   // a number (1-based) or a module name; "" = leave
    double cellX = -1, cellY = -1;
    int constellationGallery = -1;
    bool constellationEpisode = false;
    int step = -1;               // an episode: the step to show once it is open (-1: step 0)
    QString chart;               // --chart: the Training tab's chart to maximize
    bool maximized = false;      // --maximized
    QSize windowSize;            // --window-size (invalid: the saved or default size)
    ResultsLaunch results;       // a results file: pick, select, compare, inspect
};

struct OptionError {
    QString text;
};

int parseInt(const QString& opt, const QString& v, int lo, int hi) {
    bool ok = false;
    const int n = v.trimmed().toInt(&ok);
    if (!ok || n < lo || n > hi)
        throw OptionError{QStringLiteral("--%1 wants an integer in %2..%3, got '%4'").arg(opt).arg(lo).arg(hi).arg(v)};
    return n;
}

void parseCoatOptions(const QCommandLineParser& p, GuiOptions& o) {
    if (p.isSet("coat-view")) {
        try {
            o.coatMode = coatModeFromName(p.value("coat-view").toStdString());
        } catch (const std::exception& e) {
            throw OptionError{QStringLiteral("--coat-view: %1").arg(e.what())};
        }
    }
    if (p.isSet("query")) {
        const QStringList xy = p.value("query").split(',');
        bool ok1 = false, ok2 = false;
        if (xy.size() == 2) {
            o.qx = xy[0].toDouble(&ok1);
            o.qy = xy[1].toDouble(&ok2);
        }
        if (!ok1 || !ok2 || o.qx < 0 || o.qy < 0)
            throw OptionError{"--query wants X,Y (image pixels), got '" + p.value("query") + "'"};
    }
    if (p.isSet("coat-scale")) o.coatScale = parseInt("coat-scale", p.value("coat-scale"), 1, 4) - 1;
    if (p.isSet("coat-compare")) o.coatCompare = parseInt("coat-compare", p.value("coat-compare"), 1, 4) - 1;
}

std::pair<double, double> parsePoint(const QCommandLineParser& p, const QString& opt) {
    const QStringList xy = p.value(opt).split(',');
    bool ok1 = false, ok2 = false;
    double x = -1, y = -1;
    if (xy.size() == 2) {
        x = xy[0].toDouble(&ok1);
        y = xy[1].toDouble(&ok2);
    }
    if (!ok1 || !ok2 || x < 0 || y < 0)
        throw OptionError{"--" + opt + " wants X,Y (image pixels), got '" + p.value(opt) + "'"};
    return {x, y};
}

void parseConstellationOptions(const QCommandLineParser& p, GuiOptions& o) {
    o.constellationCheckpoint = p.value("constellation-checkpoint");
    o.runConstellation = p.isSet("run-constellation");
    if (p.isSet("constellation-view")) {
        try {
            o.constellationMode = constellationModeFromName(p.value("constellation-view").toStdString());
        } catch (const std::exception& e) {
            throw OptionError{QStringLiteral("--constellation-view: %1").arg(e.what())};
        }
    }
    if (p.isSet("constellation-module")) {   // a number or a name, checked against the model's modules
        o.constellationModule = p.value("constellation-module").trimmed();
        bool isNumber = false;
        o.constellationModule.toInt(&isNumber);
        if (isNumber) parseInt("constellation-module", o.constellationModule, 1, 1 << 20);
        else if (!QRegularExpression("^[A-Za-z_][A-Za-z0-9_.]*$").match(o.constellationModule).hasMatch())
            throw OptionError{"--constellation-module wants a module number (1-based) or name (e.g. branch1.2), got '" +
                              p.value("constellation-module") + "'"};
    }
    if (p.isSet("cell")) std::tie(o.cellX, o.cellY) = parsePoint(p, "cell");
    if (p.isSet("constellation-gallery"))
        o.constellationGallery = parseInt("constellation-gallery", p.value("constellation-gallery"), 0, 1 << 20);
    o.constellationEpisode = p.isSet("constellation-episode");
}

void parseResultsOptions(const QCommandLineParser& p, GuiOptions& o) {
    ResultsLaunch& r = o.results;
    if (p.isSet("sample"))
        r.sample = p.value("sample").trimmed() == "first" ? -2 : parseInt("sample", p.value("sample"), 0, 1 << 30);
    if (p.isSet("results-cell")) {
        const auto [t, q] = parsePoint(p, "results-cell");
        r.cellTrue = int(t);
        r.cellPredicted = int(q);
    }
    if (p.isSet("results-bin")) r.bin = parseInt("results-bin", p.value("results-bin"), 0, 9);
    r.layer = p.value("results-layer").trimmed();
    r.compare = p.value("compare-results");
    r.inspect = p.isSet("inspect");
    const QString f = o.files.value(0);
    if (r.any() && !f.endsWith(".h5", Qt::CaseInsensitive) && !f.endsWith(".hdf5", Qt::CaseInsensitive))
        throw OptionError{"--sample, --results-*, --compare-results and --inspect act on a results file: " +
                          (f.isEmpty() ? QStringLiteral("give it (R.h5)") : f + " is not one (.h5)")};
}

GuiOptions parseOptions(const QCommandLineParser& p) {
    GuiOptions o;
    o.files = p.positionalArguments();
    o.screenshot = p.value("screenshot");
    // Run logs under either name (run.h5, runlog.h5) or as their folder; a FILE that is a run
    // folder is followed like --run.
    for (const QString& r : p.values("run")) o.runs << QString::fromStdString(findRunLog(r.toStdString()));
    for (QString& f : o.files) {
        const QString log = QString::fromStdString(findRunLog(f.toStdString()));
        if (QFileInfo(f).isDir() && log != f) {
            o.runs << log;
            f.clear();
        } else {
            f = log;
        }
    }
    o.files.removeAll(QString());
    o.demo = p.isSet("demo") || (o.files.isEmpty() && o.runs.isEmpty());
    o.checkpointGiven = p.isSet("checkpoint");
    // The LETR model: --checkpoint, else the shipped letr_demo.h5 when there is one.
    o.checkpoint = p.isSet("checkpoint") ? p.value("checkpoint") : defaultLetrCheckpoint();
    o.runLetr = p.isSet("run-letr");
    if (o.runLetr && o.checkpoint.isEmpty())
        throw OptionError{p.isSet("checkpoint")
                              ? QStringLiteral("--run-letr: no LETR checkpoint given")
                              : QStringLiteral("--run-letr: no LETR checkpoint: give --checkpoint C.h5, or install "
                                               "letr_demo.h5 (looked in $GLIMPSE_RESOURCES, else <exe "
                                               "dir>/../share/glimpse and the source tree's resources/)")};
    if (p.isSet("entity")) {
        o.entity = parseInt("entity", p.value("entity"), -1, 1 << 30);
        if (!o.runLetr && !(o.demo && o.files.isEmpty()))
            throw OptionError{QStringLiteral("--entity selects a line of LETR's trace: add --run-letr (or open the "
                                             "demo scene)")};
    }
    if (p.isSet("compare")) {
        const QString m = p.value("compare").trimmed();
        o.compare = m.compare("lsd", Qt::CaseInsensitive) == 0    ? -1
                    : m.compare("mlsd", Qt::CaseInsensitive) == 0 ? -3
                                                                   : parseInt("compare", m, 1, 1 << 20) - 1;
    }
    if (p.isSet("layer")) {
        o.layer = parseInt("layer", p.value("layer"), 1, 1 << 20) - 1;
        if (!o.runLetr && !(o.demo && o.files.isEmpty()))
            throw OptionError{QStringLiteral("--layer shows a layer of LETR's trace: add --run-letr (or open the demo "
                                             "scene)")};
    }
    if (p.isSet("letr-input")) o.letrInput = parseInt("letr-input", p.value("letr-input"), 16, 1024);
    if (p.isSet("precision")) {
        const QString v = p.value("precision").trimmed().toLower();
        if (v != "fp32" && v != "auto")
            throw OptionError{QStringLiteral("--precision: expected fp32 or auto, got '%1'").arg(p.value("precision"))};
        o.precision = v == "auto" ? 1 : 0;
    }
    if (p.isSet("flips")) {
        o.flips = parseInt("flips", p.value("flips"), 1, 4);
        if (o.flips == 3) throw OptionError{QStringLiteral("--flips: expected 1, 2 or 4, got 3")};
    }
    if (p.isSet("threshold")) {
        bool ok = false;
        const double t = p.value("threshold").trimmed().toDouble(&ok);
        if (!ok || !(t >= 0.0 && t <= 1.0))
            throw OptionError{QStringLiteral("--threshold: expected a number from 0 to 1, got '%1'").arg(p.value("threshold"))};
        o.threshold = t;
    }
    if (p.isSet("line-colour")) {
        const QString c = p.value("line-colour").trimmed().toLower();
        if (c == "score") o.lineColour = LineColour::Score;
        else if (c == "edges" || c == "edge") o.lineColour = LineColour::EdgeSupport;
        else throw OptionError{QStringLiteral("--line-colour: expected 'score' or 'edges', got '%1'").arg(p.value("line-colour"))};
    }
    o.maximized = p.isSet("maximized");
    if (p.isSet("window-size")) {
        const QString v = p.value("window-size").trimmed();
        const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("^(\\d{1,5})[xX](\\d{1,5})$")).match(v);
        const int w = m.hasMatch() ? m.captured(1).toInt() : 0, h = m.hasMatch() ? m.captured(2).toInt() : 0;
        if (w < 320 || h < 240 || w > 16384 || h > 16384)
            throw OptionError{QStringLiteral("--window-size wants WxH in pixels (320x240 to 16384x16384), e.g. 1920x1080, got '%1'").arg(v)};
        o.windowSize = QSize(w, h);
    }
    if (o.maximized && o.windowSize.isValid())
        throw OptionError{QStringLiteral("--maximized and --window-size exclude each other: give one")};
    o.chart = p.value("chart");
    if (p.isSet("chart") && o.runs.isEmpty()) throw OptionError{QStringLiteral("--chart acts on a followed run: give --run RUN")};
    if (p.isSet("step")) {
        o.step = parseInt("step", p.value("step"), 0, 1 << 30);
        const QString f = o.files.value(0);
        if (!f.endsWith(".h5", Qt::CaseInsensitive) && !f.endsWith(".hdf5", Qt::CaseInsensitive))
            throw OptionError{"--step goes to a step of an episode: " +
                              (f.isEmpty() ? QStringLiteral("give the episode file (EPISODE.h5)")
                                           : f + " is not an episode (.h5)")};
    }
    parseResultsOptions(p, o);
    o.coatCheckpoint = p.value("coat-checkpoint");
    o.runCoat = p.isSet("run-coat");
    parseCoatOptions(p, o);
    parseConstellationOptions(p, o);
    return o;
}

void addOptions(QCommandLineParser& p) {
    p.addPositionalArgument("file", "Image, video or Glimpse file to open.");
    p.addOptions({{"demo", "Open the built-in demo scene."},
                  {"screenshot", "Save a screenshot once drawn, then quit.", "png"},
                  {"maximized", "Open the window maximized."},
                  {"window-size", "Open the window this large.", "WxH"},
                  {"run", "Follow a run log in the Training panel.", "run.h5"},
                  {"chart", "Maximize this chart of the Training tab.", "series"},
                  {"checkpoint", "LETR checkpoint to load.", "h5"},
                  {"run-letr", "Run LETR on the opened image."},
                  {"entity", "Select this line entity after the run.", "k"},
                  {"compare", "Compare pane after the run: lsd, mlsd or a layer position.", "m"},
                  {"layer", "LETR layer position (1-based) after the run.", "n"},
                  {"flips", "LETR flip ensemble: 1, 2 or 4 views.", "n"},
                  {"letr-input", "LETR input short side in px.", "s"},
                  {"precision", "LETR and CoaT precision: fp32 or auto.", "p"},
                  {"line-colour", "LETR line colours: score or edges.", "c"},
                  {"threshold", "LETR display threshold after the run (0-1).", "t"},
                  {"coat-checkpoint", "CoaT checkpoint to load.", "h5"},
                  {"run-coat", "Run CoaT on the opened image."},
                  {"query", "CoaT query pixel after the run.", "x,y"},
                  {"coat-view", "CoaT view after the run.", "mode"},
                  {"coat-scale", "CoaT scale (1-4) after the run.", "s"},
                  {"coat-compare", "CoaT compare scale (1-4) after the run.", "s"},
                  {"constellation-checkpoint", "ConstellationNet checkpoint to load.", "h5"},
                  {"run-constellation", "Run ConstellationNet on the opened image."},
                  {"constellation-module", "ConstellationNet module (1-based) after the run.", "m"},
                  {"cell", "ConstellationNet cell to click after the run (image pixels).", "x,y"},
                  {"constellation-view", "ConstellationNet view after the run.", "view"},
                  {"constellation-gallery", "ConstellationNet gallery cluster after the run.", "k"},
                  {"constellation-episode", "Run a ConstellationNet few-shot episode."},
                  {"step", "Episode step to show once the episode is open.", "t"},
                  {"sample", "Results file: the sample to select.", "n"},
                  {"results-layer", "Results file: the LETR row to show.", "name"},
                  {"results-cell", "Results file: the confusion cell to filter by.", "t,p"},
                  {"results-bin", "Results file: the accuracy bar to filter by.", "b"},
                  {"compare-results", "Results file: compare with this one.", "h5"},
                  {"inspect", "Results file: run the inspector on the selected sample."}});
}

// After the first LETR trace (--run-letr or the demo's): the threshold (--threshold, over the
// checkpoint's own) and the compare pane (--compare), checked against the trace's layers.
void wireLetrOptions(MainWindow& window, const GuiOptions& o) {
    if (!o.compare && !o.threshold && o.entity < 0 && o.layer < 0) return;
    LetrInspector* letr = window.letrInspector();
    const int mode = o.compare.value_or(-2);
    QObject::connect(letr, &ModelPanel::traceReady, &window, [&window, letr, mode, threshold = o.threshold,
                                                              entity = o.entity, layer = o.layer] {
        static bool done = false;
        if (done) return;
        done = true;
        if (threshold) letr->setThreshold(*threshold);
        const auto trace = letr->trace();
        if (entity >= 0 && trace && entity >= trace->numQueries())
            window.reportError(QStringLiteral("--entity %1: this trace has line entities 0..%2")
                                   .arg(entity)
                                   .arg(trace->numQueries() - 1));
        if (layer >= letr->positionCount())
            return window.reportError(QStringLiteral("--layer %1: this trace has layer positions 1..%2")
                                          .arg(layer + 1)
                                          .arg(letr->positionCount()));
        if (layer >= 0) letr->setPosition(layer);
        if (mode == -2) return;
        if (mode >= letr->positionCount())
            return window.reportError(QStringLiteral("--compare %1: this trace has layer positions 1..%2")
                                          .arg(mode + 1)
                                          .arg(letr->positionCount()));
        letr->setCompare(mode);
    });
}

// --step: once an episode is open, go to that step and bring the task-weight chart (when the
// episode has one) into view.
void wireReplayOptions(MainWindow& window, const GuiOptions& o) {
    if (o.step < 0) return;
    ReplayPanel* replay = window.replayPanel();
    const int step = o.step;
    QObject::connect(&window, &MainWindow::fileIdentified, &window, [&window, step](const QString& path, const QString& kind) {
        if (kind != "glimpse.episode")
            window.reportError(QStringLiteral("--step %1 goes to a step of an episode: %2 is a %3").arg(step).arg(path, kind));
    });
    QObject::connect(replay, &ReplayPanel::episodeOpened, &window, [&window, replay, step] {
        static bool done = false;
        if (done) return;
        done = true;
        if (step >= replay->length())
            return window.reportError(QStringLiteral("--step %1: this episode has steps 0..%2").arg(step).arg(replay->length() - 1));
        replay->seek(step);
        replay->revealChart("task weights");
    }, Qt::QueuedConnection);   // after the panel has shown step 0 of the new episode
}

// --run-coat: run once model and image are there, then apply the view options once.
void wireCoatOptions(MainWindow& window, const GuiOptions& o) {
    CoatInspector* coat = window.coatInspector();
    if (!o.coatCheckpoint.isEmpty()) coat->loadCheckpoint(o.coatCheckpoint);
    if (!o.runCoat) return;
    QObject::connect(coat, &ModelPanel::traceReady, &window, [coat, o] {
        static bool done = false;
        if (done) return;
        done = true;
        if (o.qx >= 0) coat->setQuery(o.qx, o.qy);
        if (o.coatMode) coat->setMode(*o.coatMode);
        if (o.coatScale >= 0) coat->setScale(o.coatScale);   // after the mode: Grad-CAM picks its own default
        if (o.coatCompare >= 0) coat->setCompareScale(o.coatCompare);
    });
    if (!coat->hasModel() && !coat->modelLoading() && coat->shippedCheckpoint().isEmpty()) {
        // Nothing to run with: say so (the screenshot, if any, shows the message) instead of waiting.
        QObject::connect(&window, &MainWindow::imageLoaded, coat, [coat] {
            if (!coat->hasModel() && !coat->modelLoading() && coat->lastFailure().isEmpty()) coat->run(false);
        });
        return;
    }
    coat->runWhenReady();
}

// The module `spec` names in the panel's Module box: its number (1-based) or its name (the
// first word of the box's entry); -1 when there is none such.
int constellationModuleIndex(ConstellationInspector* panel, const QString& spec) {
    const QComboBox* box = panel->moduleBox();
    bool isNumber = false;
    const int n = spec.toInt(&isNumber);
    if (isNumber) return n >= 1 && n <= box->count() ? n - 1 : -1;
    for (int i = 0; i < box->count(); ++i)
        if (box->itemText(i).section("  ", 0, 0) == spec) return i;
    return -1;
}

// --run-constellation: run once model and image are there, then apply the view options once;
// --constellation-episode: an episode once the model is loaded.
void wireConstellationOptions(MainWindow& window, const GuiOptions& o) {
    auto* panel = qobject_cast<ConstellationInspector*>(window.panel("constellation"));
    if (!panel) return;
    if (!o.constellationCheckpoint.isEmpty()) panel->loadCheckpoint(o.constellationCheckpoint);
    if (o.constellationEpisode) {
        auto runEpisode = [panel] {
            static bool done = false;
            if (done) return;
            done = true;
            Q_EMIT panel->activateRequested();
            panel->showEpisodeTab();
            panel->episodeView()->newEpisode();
        };
        QObject::connect(panel, &ModelPanel::checkpointLoaded, &window, runEpisode);
        if (panel->hasModel()) runEpisode();
        else panel->loadShippedOnFirstUse();   // the episode is its first use
    }
    if (!o.runConstellation) return;
    QObject::connect(panel, &ModelPanel::traceReady, &window, [&window, panel, o] {
        static bool done = false;
        if (done) return;
        done = true;
        if (!o.constellationModule.isEmpty()) {
            const int m = constellationModuleIndex(panel, o.constellationModule);
            if (m < 0) {
                QStringList names;
                for (int i = 0; i < panel->moduleBox()->count(); ++i)
                    names << panel->moduleBox()->itemText(i).section("  ", 0, 0);
                window.reportError(QStringLiteral("--constellation-module %1: this model has modules 1..%2 (%3)")
                                       .arg(o.constellationModule)
                                       .arg(names.size())
                                       .arg(names.join(", ")));
            } else {
                panel->setModule(m);
            }
        }
        if (o.cellX >= 0) panel->selectPoint(o.cellX + 0.5, o.cellY + 0.5);
        if (o.constellationMode) panel->setMode(*o.constellationMode);
        if (o.constellationGallery >= 0) {
            panel->tabs()->setCurrentIndex(1);   // the Gallery tab
            panel->showGallery(o.constellationGallery);
        }
        if (o.cellX >= 0) panel->hoverAt(o.cellX + 0.5, o.cellY + 0.5);
    });
    if (!panel->hasModel() && !panel->modelLoading() && panel->shippedCheckpoint().isEmpty()) {
        // Nothing to run with: say so instead of waiting.
        QObject::connect(&window, &MainWindow::imageLoaded, panel, [panel] {
            if (!panel->hasModel() && !panel->modelLoading() && panel->lastFailure().isEmpty()) panel->run(false);
        });
        return;
    }
    panel->runWhenReady();
}

// Whether the launch has settled without an image to wait for: FILE was a checkpoint or a run
// log (its kind read, no model still loading), or there is no FILE and no demo (--run alone).
// `kind` is FILE's kind once identified ("" before; FILE not .h5: never settles this way).
bool settledWithoutImage(MainWindow& window, const GuiOptions& o, const QString& kind) {
    if (window.trainingPanel()->loading()) return false;   // a long run log still being read
    if (window.trainingPanel()->previewBusy()) return false;   // the run's preview being drawn
    if (o.files.isEmpty()) return !o.demo;
    if (kind == results::kKind) return !o.results.any() && resultsLaunchDone(window, o.results);
    if (kind != "glimpse.checkpoint" && kind != "glimpse.runlog") return false;
    for (ModelPanel* p : window.panels())
        if (p->modelLoading()) return false;
    return true;
}

// --screenshot: once the image (and any asked-for trace) is drawn, grab the window and quit;
// the exit status says whether everything asked for worked. A checkpoint or run log given as
// FILE, or --run alone, shows no image: then once it is open.
void wireScreenshot(MainWindow& window, const GuiOptions& o, bool waitLetr) {
    const QString out = o.screenshot;
    auto* vp = window.viewport();
    LetrInspector* letr = window.letrInspector();
    CoatInspector* coat = window.coatInspector();
    ModelPanel* cst = window.panel("constellation");
    const bool wantLetr = o.runLetr, wantCoat = o.runCoat;
    const bool wantCst = cst && (o.runConstellation || o.constellationEpisode);
    ReplayPanel* replay = window.replayPanel();
    const int wantStep = o.step;
    auto kind = std::make_shared<QString>();
    QObject::connect(&window, &MainWindow::fileIdentified, &window,
                     [kind](const QString&, const QString& k) { *kind = k; });
    auto take = [&window, out, letr, coat, cst, wantLetr, wantCoat, wantCst] {
        QPixmap pm = window.screen()->grabWindow(window.winId());
        const bool ok = pm.save(out, "PNG");
        std::cerr << (ok ? "glimpse: screenshot saved to " : "glimpse: cannot write screenshot ") << out.toStdString()
                  << "\n";
        QStringList loaded;   // models load on first use: say which this launch loaded
        for (ModelPanel* p : window.panels())
            if (p->hasModel()) loaded << p->title();
        std::cerr << "glimpse: models loaded: " << (loaded.isEmpty() ? QStringLiteral("none") : loaded.join(", ")).toStdString()
                  << "\n";
        // A failed load or run makes the exit status non-zero (the screenshot shows it too).
        const bool letrFailed = wantLetr && !letr->hasTrace();
        const bool coatFailed = wantCoat && !coat->hasTrace();
        const bool cstFailed = wantCst && !cst->hasTrace() && !cst->hasModel();
        const bool failed = !window.lastError().isEmpty() || letrFailed || coatFailed || cstFailed;
        if (failed)
            std::cerr << "glimpse: "
                      << (!window.lastError().isEmpty() ? window.lastError().toStdString()
                          : letrFailed                  ? std::string("LETR produced no trace")
                          : coatFailed                  ? std::string("CoaT produced no trace")
                                                        : std::string("ConstellationNet has no model"))
                      << "\n";
        QApplication::exit(ok && !failed ? 0 : 1);
    };
    // Wait for the image to be drawn a few times (swapchain settled), then grab.
    QObject::connect(vp, &widgets::ImageViewport::frameDrawn, &window, [&window, o, kind, vp, take, waitLetr, letr,
                                                                        wantCoat, coat, wantCst, cst, replay, wantStep] {
        static bool scheduled = false;
        // Nothing to draw but the window (a checkpoint, a run log), or a refused option: take it.
        if (!scheduled && vp->framesDrawn() >= 3 &&
            (settledWithoutImage(window, o, *kind) || !window.lastError().isEmpty())) {
            scheduled = true;
            QTimer::singleShot(300, take);
            return;
        }
        const bool edgesDone = letr->settings().lineColour != LineColour::EdgeSupport || letr->edgeFieldReady();
        const bool letrDone = !waitLetr || (letr->hasTrace() && !letr->lsdRunning() && edgesDone) ||
                              !letr->lastFailure().isEmpty() ||
                              (!letr->busy() && !letr->runPending() && !letr->hasModel());
        const bool coatDone = !wantCoat || (coat->hasTrace() && !coat->busy()) || !coat->lastFailure().isEmpty();
        const bool cstDone = !wantCst || (!cst->busy() && !cst->runPending() && (cst->hasTrace() || cst->hasModel())) ||
                             !cst->lastFailure().isEmpty();
        const bool stepDone = wantStep < 0 || !replay->hasEpisode() ||
                              replay->shownStep() == std::min(wantStep, replay->length() - 1);
        const bool resultsDone = *kind != results::kKind || resultsLaunchDone(window, o.results);
        if (!scheduled && vp->hasImage() && vp->framesDrawn() >= 3 && letrDone && coatDone && cstDone && stepDone &&
            resultsDone) {
            scheduled = true;
            QTimer::singleShot(300, take);
        }
    });
    QObject::connect(&window, &MainWindow::loadFailed, &window, [take] { QTimer::singleShot(300, take); });
    if (!vp->vulkanError().isEmpty()) QTimer::singleShot(500, take);
    // Nudge redraws until the condition above is met.
    auto* kick = new QTimer(&window);
    QObject::connect(kick, &QTimer::timeout, vp, [vp] { vp->setOverlayVisible(vp->overlayVisible()); });
    kick->start(100);
}

// The window at --window-size, or maximized (--maximized), or as last closed. Without a window
// manager (Xvfb) showMaximized() only sets the state and the window keeps its size, so the
// window is first given the screen's available area, which a window manager then maximizes.
void showWindow(QWidget& window, const GuiOptions& o) {
    if (o.windowSize.isValid()) window.resize(o.windowSize);
    if (!o.maximized) {
        window.show();
        if (o.windowSize.isValid() && window.size() != o.windowSize)   // below the panels' minimum, or past the screen
            std::cerr << "glimpse: --window-size " << o.windowSize.width() << "x" << o.windowSize.height()
                      << ": the window is " << window.width() << "x" << window.height() << " (its smallest is "
                      << window.minimumSizeHint().width() << "x" << window.minimumSizeHint().height() << ")\n";
        return;
    }
    if (QScreen* screen = window.screen() ? window.screen() : QGuiApplication::primaryScreen())
        window.setGeometry(screen->availableGeometry());
    window.showMaximized();
}

} // namespace

std::string guiUsage() { return kGuiOptions; }

int runGui(int argc, char** argv) {
    // Parse before any window (or display connection) is made: a QCoreApplication suffices.
    GuiOptions o;
    {
        QStringList args;
        for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
        // --help anywhere (`glimpse photo.jpg --help`): the usage, status 0.
        for (int i = 1; i < args.size(); ++i)
            if (args[i] == "--help" || args[i] == "-h") {
                std::cout << "usage: glimpse [FILE] [GUI options]\n" << kGuiOptions
                          << "glimpse --help also lists the commands.\n";
                return 0;
            }
        QCommandLineParser parser;
        addOptions(parser);
        if (!parser.parse(args)) {   // names the option; the list is one --help away
            std::cerr << "glimpse: " << parser.errorText().toStdString() << " (glimpse --help lists the options)\n";
            return 2;
        }
        try {
            o = parseOptions(parser);
        } catch (const OptionError& e) {
            std::cerr << "glimpse: " << e.text.toStdString() << "\n";
            return 2;
        }
    }
    QApplication app(argc, argv);
    // OpenBLAS on the calling thread: the inspector computes attention maps on the UI thread
    // (see setBlasThreads); model passes on workers keep LibTorch's own threads.
    glimpse::setBlasThreads(1);
    QApplication::setOrganizationName("Glimpse");
    QApplication::setApplicationName("Glimpse");
    QApplication::setApplicationVersion(GLIMPSE_VERSION);

    MainWindow window;
    showWindow(window, o);
    LetrInspector* letr = window.letrInspector();
    letr->setFlips(o.flips);
    letr->setInputSize(o.letrInput);
    letr->setPrecision(o.precision);
    window.coatInspector()->setPrecision(o.precision);
    letr->setLineColour(o.lineColour);
    wireLetrOptions(window, o);
    wireCoatOptions(window, o);
    wireConstellationOptions(window, o);
    wireReplayOptions(window, o);
    wireResultsLaunch(window, o.results);
    // With --screenshot, wait for the trace when a run was asked for (or the demo runs one).
    // Wired before anything is opened, so that no early failure goes unseen.
    const bool demo = o.files.isEmpty() && o.demo;
    const bool waitLetr = o.runLetr || (demo && !o.checkpoint.isEmpty());
    if (!o.screenshot.isEmpty()) wireScreenshot(window, o, waitLetr);
    if (demo) {
        // The demo scene; with a model, LETR runs on it and the best line is selected.
        window.startDemo(o.checkpoint, o.entity == -2 ? -1 : o.entity);
    } else {
        // Models load on first use (ModelPanel::setShippedCheckpoint): only a --checkpoint given
        // loads now, and --run-letr loads the shipped one.
        if (o.checkpointGiven) letr->loadCheckpoint(o.checkpoint);
        if (!o.files.isEmpty()) window.openImage(o.files.first());
        if (o.runLetr) letr->runWhenReady(o.entity);
    }
    for (const QString& r : o.runs) window.openRun(r);
    if (!o.chart.isEmpty()) {
        widgets::ChartGrid* grid = window.trainingPanel()->charts();
        if (!grid->chart(o.chart)) {
            std::cerr << "glimpse: --chart: the runs have no chart '" << o.chart.toStdString() << "' (they have: "
                      << grid->layoutOrder().join(", ").toStdString() << ")\n";
            return 2;
        }
        grid->maximize(o.chart);
    }
    return app.exec();
}

} // namespace glimpse::app
