// A first launch as a new user tries it (issue 56): one rule for options and --help, and
// `glimpse FILE --screenshot` ends for every
// kind of FILE, options that cannot apply are refused with their valid range, the README's
// names work (module names, either run log name, a run folder), and models load on first use
// only. The glimpse executable runs as a child process under Xvfb; the main window in-process.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QRegularExpression>
#include <QScreen>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/command.h"
#include "app/coat/inspector.h"
#include "app/letr/inspector.h"
#include "app/mainwindow.h"
#include "app/panel.h"
#include "core/models/coat/model.h"
#include "core/models/constellation/model.h"
#include "core/rl/episode.h"
#include "core/runlog.h"

using glimpse::app::MainWindow;
using glimpse::app::ModelPanel;
namespace coat = glimpse::coat;

namespace {

coat::CoatConfig tinyCoat() {
    coat::CoatConfig c;
    c.variant = "custom";
    c.embedDims = {16, 16, 24, 32};
    c.serialDepths = {1, 1, 1, 1};
    c.parallelDepth = 0;
    c.numHeads = 8;
    c.mlpRatios = {2, 2, 2, 2};
    c.numClasses = 3;
    c.imageSize = 32;
    c.resize = 36;
    c.classNames = {"a", "b", "c"};
    return c;
}

glimpse::rl::Episode tinyEpisode() {
    glimpse::rl::Episode e;
    e.env = "breakout";
    e.source = "test";
    e.actionNames = {"NOOP", "FIRE"};
    e.frames = torch::zeros({3, 8, 8, 3}, torch::kUInt8);
    e.actions = torch::tensor({0, 1, 0}, torch::kInt64);
    e.rewards = torch::tensor({0.f, 1.f, 0.f});
    e.terminal = true;
    return e;
}

const QString kResources = QStringLiteral(GLIMPSE_SOURCE_DIR "/resources");

} // namespace

class TestFirstUse : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString image_, coatCk_, runDir_;

    struct Result {
        int code = -100;   // -100: it did not end (a hang), -101: it crashed
        QString err;
    };
    // glimpse ARGS with the given resources folder (empty: none) and a fresh settings folder.
    Result glimpse(const QStringList& args, const QString& resources = QString()) {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("GLIMPSE_RESOURCES", resources.isEmpty() ? dir_.filePath("no_resources") : resources);
        env.insert("XDG_CONFIG_HOME", dir_.filePath("config"));
        QProcess p;
        p.setProcessEnvironment(env);
        p.start(GLIMPSE_EXE, args);
        Result r;
        if (!p.waitForFinished(120000)) {   // a guard against a hang, not a timing
            p.kill();
            p.waitForFinished();
            return r;
        }
        r.err = QString::fromLocal8Bit(p.readAllStandardError());
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -101;
        return r;
    }
    // glimpse ARGS as a command (no display needed): exit code, stdout, stderr.
    struct Cli {
        int code = -100;
        QString out, err;
    };
    static Cli cli(const QStringList& args) {
        QProcess p;
        p.start(GLIMPSE_EXE, args);
        Cli r;
        if (!p.waitForFinished(120000)) {
            p.kill();
            p.waitForFinished();
            return r;
        }
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -101;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }
    // The same command line run in this process: main() hands `glimpse VERB ARGS...` to
    // cli::runCommand with the GUI build's command table (app/main.cpp), so the per-command checks
    // below call it directly, with stdout and stderr captured at the descriptors (printf and
    // iostreams alike). One start of glimpse costs ~1.2 s CPU (loading LibTorch, Qt and OpenCV);
    // ~80 of them were most of this test's time. The program-level cases still run glimpse.
    static Cli command(const QStringList& args) {
        struct Redirect {   // fds 1 and 2 into two temporary files, restored on every exit
            QTemporaryFile out, err;
            int saved1 = -1, saved2 = -1;
            bool ok = false;
            Redirect() {
                if (!out.open() || !err.open()) return;
                std::cout.flush(), std::cerr.flush(), std::fflush(stdout), std::fflush(stderr);
                saved1 = ::dup(1), saved2 = ::dup(2);
                ok = saved1 >= 0 && saved2 >= 0 && ::dup2(out.handle(), 1) >= 0 && ::dup2(err.handle(), 2) >= 0;
            }
            ~Redirect() {
                std::cout.flush(), std::cerr.flush(), std::fflush(stdout), std::fflush(stderr);
                if (saved1 >= 0) ::dup2(saved1, 1), ::close(saved1);
                if (saved2 >= 0) ::dup2(saved2, 2), ::close(saved2);
            }
        };
        Cli r;
        QByteArray out, err;
        {
            Redirect io;
            if (!io.ok) return r;
            std::vector<std::string> rest;
            for (int i = 1; i < args.size(); ++i) rest.push_back(args[i].toStdString());
            bool handled = false;
            r.code = glimpse::cli::runCommand(args.value(0).toStdString(), rest, &handled);
            if (!handled) r.code = -102;   // no such command
            std::cout.flush(), std::cerr.flush(), std::fflush(stdout), std::fflush(stderr);
            io.out.seek(0), io.err.seek(0);
            out = io.out.readAll(), err = io.err.readAll();
        }
        r.out = QString::fromUtf8(out);
        r.err = QString::fromUtf8(err);
        return r;
    }
    QString shot(const QString& name) {
        const QString path = dir_.filePath(name + ".png");
        QFile::remove(path);
        return path;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QCoreApplication::setOrganizationName("GlimpseTest");
        QCoreApplication::setApplicationName("GlimpseTestFirstUse");
        QVERIFY(QDir().mkpath(dir_.filePath("no_resources")));
        torch::set_num_threads(1);
        // What app/main.cpp adds to the command table in a GUI build (command() below).
        glimpse::cli::addCommands(glimpse::cli::guiCommands());
        glimpse::cli::setRunLogFollower(glimpse::cli::followRunLog);
        image_ = dir_.filePath("photo.png");
        QImage im(64, 48, QImage::Format_RGB888);
        im.fill(Qt::darkCyan);
        QVERIFY(im.save(image_));
        coatCk_ = dir_.filePath("tiny_coat.h5");
        coat::saveCoat(coat::CoatModel(tinyCoat(), 3), coatCk_.toStdString());
        // An EfficientZero-style run folder: its log is runlog.h5.
        runDir_ = dir_.filePath("ez_run");
        QVERIFY(QDir().mkpath(runDir_));
        glimpse::RunLog log;
        log.config = {{"env", "breakout"}};
        for (int s = 1; s <= 5; ++s) log.series["loss"].append(s, 0.1 * s, 1.0 / s);
        log.status = glimpse::RunStatus::Finished;
        log.save((runDir_ + "/runlog.h5").toStdString());
    }

    // Item 5: a checkpoint or a run log as FILE shows no image; the screenshot is still taken.
    void screenshotOfCheckpointAndRunLog() {
        QString png = shot("ck");
        Result r = glimpse({coatCk_, "--screenshot", png});
        QVERIFY2(r.code == 0, qPrintable(QString::number(r.code) + " " + r.err));
        QVERIFY(QImage(png).width() > 100);
        png = shot("log");
        r = glimpse({runDir_ + "/runlog.h5", "--screenshot", png});
        QVERIFY2(r.code == 0, qPrintable(QString::number(r.code) + " " + r.err));
        QVERIFY(QFileInfo::exists(png));
        // A file that does not open: the screenshot, and status 1 with the reason.
        png = shot("bad");
        r = glimpse({dir_.filePath("missing_model.h5"), "--screenshot", png});
        QVERIFY2(r.code == 1 && r.err.contains("missing_model.h5"), qPrintable(QString::number(r.code) + " " + r.err));
        QVERIFY(QFileInfo::exists(png));
    }

    // The window at a given size (--window-size WxH) or maximized (--maximized): the screenshot
    // is that large; maximized it fills the screen's available area also without a window
    // manager (this test's Xvfb has none). Bad sizes and both options together are refused.
    void windowSizeAndMaximized() {
        QString png = shot("size");
        Result r = glimpse({"--run", runDir_, "--window-size", "1200x900", "--screenshot", png});
        QVERIFY2(r.code == 0, qPrintable(QString::number(r.code) + " " + r.err));
        QCOMPARE(QImage(png).size(), QSize(1200, 900));
        // Below the panels' smallest window: the window is that, and says so.
        r = glimpse({"--run", runDir_, "--window-size", "400x300", "--screenshot", shot("small")});
        QVERIFY2(r.code == 0 && r.err.contains("--window-size 400x300: the window is"), qPrintable(r.err));
        png = shot("maximized");
        r = glimpse({"--run", runDir_, "--maximized", "--screenshot", png});
        QVERIFY2(r.code == 0, qPrintable(QString::number(r.code) + " " + r.err));
        const QSize screen = QGuiApplication::primaryScreen()->availableGeometry().size();
        QCOMPARE(QImage(png).size(), screen);
        for (const QString& bad : {QString("900"), QString("900x"), QString("10x10"), QString("0x700"), QString("axb")}) {
            r = glimpse({"--window-size", bad});
            QVERIFY2(r.code == 2 && r.err.contains("--window-size") && r.err.contains(bad), qPrintable(bad + ": " + r.err));
        }
        r = glimpse({"--maximized", "--window-size", "900x700"});
        QVERIFY2(r.code == 2 && r.err.contains("exclude each other"), qPrintable(r.err));
    }

    // Item 7: the run log under either name, or its folder, for --run and as FILE.
    void runLogUnderEitherName() {
        for (const QStringList& args : {QStringList{"--run", runDir_ + "/run.h5"}, QStringList{"--run", runDir_},
                                        QStringList{runDir_}, QStringList{runDir_ + "/run.h5"}}) {
            const QString png = shot("either");
            const Result r = glimpse(args + QStringList{"--screenshot", png});
            QVERIFY2(r.code == 0, qPrintable(args.join(' ') + ": " + QString::number(r.code) + " " + r.err));
            QVERIFY(QFileInfo::exists(png));
        }
        const Result r = glimpse({"--run", dir_.filePath("nowhere/run.h5"), "--screenshot", shot("nowhere")});
        QVERIFY2(r.code == 1 && r.err.contains("nowhere"), qPrintable(QString::number(r.code) + " " + r.err));
    }

    // Item 6: options that cannot apply are refused, with the valid range, not ignored.
    void inapplicableOptionsAreRefused() {
        Result r = glimpse({image_, "--step", "5"});
        QVERIFY2(r.code == 2 && r.err.contains("--step") && r.err.contains("not an episode"), qPrintable(r.err));
        r = glimpse({image_, "--entity", "999"});
        QVERIFY2(r.code == 2 && r.err.contains("--entity") && r.err.contains("--run-letr"), qPrintable(r.err));
        // Past an episode's end: its steps are named.
        const QString ep = dir_.filePath("game.h5");
        glimpse::rl::writeEpisode(ep.toStdString(), tinyEpisode());
        r = glimpse({ep, "--step", "9", "--screenshot", shot("step")});
        QVERIFY2(r.code == 1 && r.err.contains("--step 9: this episode has steps 0..2"), qPrintable(r.err));
        r = glimpse({ep, "--step", "2", "--screenshot", shot("step2")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // --step on a file that is no episode.
        r = glimpse({coatCk_, "--step", "1", "--screenshot", shot("step3")});
        QVERIFY2(r.code == 1 && r.err.contains("--step 1 goes to a step of an episode"), qPrintable(r.err));
    }

    // Items 6 and 7: --constellation-module takes a number within the model's modules or a name
    // as the panel shows it (README: branch1.2); anything else is refused with the list.
    void constellationModuleByNumberOrName() {
        const QString ck = kResources + "/constellation_demo.h5";
        if (!QFileInfo::exists(ck)) QSKIP("resources/constellation_demo.h5 is not present");
        const auto modules = glimpse::constellation::loadConstellation(ck.toStdString())->constellationModules();
        QVERIFY(!modules.empty());
        const QString n = QString::number(modules.size()), first = QString::fromStdString(modules.front().name);
        const QStringList base{image_, "--constellation-checkpoint", ck, "--run-constellation"};
        Result r = glimpse(base + QStringList{"--constellation-module", "9", "--screenshot", shot("m9")});
        QVERIFY2(r.code == 1 && r.err.contains("--constellation-module 9: this model has modules 1.." + n) &&
                     r.err.contains(first),
                 qPrintable(r.err));
        r = glimpse(base + QStringList{"--constellation-module", first, "--screenshot", shot("mname")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = glimpse(base + QStringList{"--constellation-module", "branch9.9", "--screenshot", shot("mbad")});
        QVERIFY2(r.code == 1 && r.err.contains("branch9.9") && r.err.contains(first), qPrintable(r.err));
    }

    // One rule for the command line: --help exits 0 for the program, every verb and every
    // command; an unknown option names itself and exits 2, with or without a value after it.
    void oneRuleForOptions() {
        Cli r = cli({"--help"});
        QCOMPARE(r.code, 0);
        QStringList commands;   // "verb" or "verb subject" (infer: "infer --model subject")
        for (const QString& line : r.out.split('\n')) {
            const QStringList w = line.trimmed().split(' ', Qt::SkipEmptyParts);
            if (w.size() < 2 || w[0] != "glimpse" || w[1].startsWith('-') || w[1].startsWith('[')) continue;
            if (w[1] == "infer" && w.size() > 3) commands << "infer --model " + w[3];
            else if (w.size() > 2 && QRegularExpression("^[a-z][a-z0-9-]*$").match(w[2]).hasMatch() &&
                     w[1] != "env" && w[1] != "play")
                commands << w[1] + " " + w[2];
            else commands << w[1];
        }
        commands.removeDuplicates();
        QVERIFY2(commands.size() > 25 && commands.contains("train coat") && commands.contains("info"),
                 qPrintable(commands.join(" | ")));
        QStringList verbs;
        for (const QString& c : commands) verbs << c.section(' ', 0, 0);
        verbs.removeDuplicates();
        // Every command and verb in this process (command()); a few through the executable below.
        for (const QString& c : commands + verbs) {
            const QStringList args = c.split(' ');
            r = command(args + QStringList{"--help"});
            QVERIFY2(r.code == 0 && !(r.out + r.err).isEmpty(), qPrintable(c + " --help: exit " + QString::number(r.code) + " " + r.err));
        }
        for (const QString& c : commands) {
            const QStringList args = c.split(' ');
            r = command(args + QStringList{"--bogus"});
            QVERIFY2(r.code == 2 && r.err.contains("--bogus"), qPrintable(c + " --bogus: exit " + QString::number(r.code) + " " + r.err));
        }
        for (const QString& c : QStringList{"train coat", "eval letr", "info", "infer --model letr", "data export"}) {
            r = cli(c.split(' ') + QStringList{"--bogus", "1"});   // with a value after it: the same
            QVERIFY2(r.code == 2 && r.err.contains("--bogus"), qPrintable(c + " --bogus 1: exit " + QString::number(r.code) + " " + r.err));
        }
        // The same rule through the executable (main()'s dispatch), for a command and a verb.
        r = cli({"train", "coat", "--help"});
        QVERIFY2(r.code == 0 && !(r.out + r.err).isEmpty(), qPrintable(r.err));
        r = cli({"eval", "--help"});
        QVERIFY2(r.code == 0 && !(r.out + r.err).isEmpty(), qPrintable(r.err));
        r = cli({"infer", "--model", "letr", "--bogus"});
        QVERIFY2(r.code == 2 && r.err.contains("unknown option --bogus"), qPrintable(r.err));
        r = cli({"train", "--help"});
        QVERIFY2(r.code == 0 && r.out.contains("glimpse train coat"), qPrintable(r.out + r.err));
        // The GUI's options: an unknown one is named, without the whole option list; --help anywhere.
        r = cli({"--bogus"});
        QVERIFY2(r.code == 2 && r.err.contains("bogus") && !r.err.contains("--coat-view"), qPrintable(r.err));
        r = cli({dir_.filePath("any.png"), "--help"});
        QVERIFY2(r.code == 0 && r.out.contains("--screenshot"), qPrintable(r.out + r.err));
    }

    // Item 18: a launch loads no model it does not use: the main window loads none at start,
    // a panel loads its shipped model when first raised; `glimpse --run` and an image without a
    // run load none (the screenshot line says which are loaded).
    void modelsLoadOnFirstUse() {
        qputenv("GLIMPSE_RESOURCES", kResources.toUtf8());
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTest::qWait(200);
        for (ModelPanel* p : w.panels()) QVERIFY2(!p->hasModel() && !p->modelLoading(), qPrintable(p->title()));
        ModelPanel* c = w.coatInspector();
        if (QFileInfo::exists(kResources + "/coat_fmnist.h5")) {
            QVERIFY(c->shippedCheckpoint().endsWith("coat_fmnist.h5"));
            QSignalSpy loaded(c, &ModelPanel::checkpointLoaded);
            Q_EMIT c->activateRequested();   // the user raises the CoaT panel
            QVERIFY(loaded.count() > 0 || loaded.wait(30000));
            QVERIFY(c->hasModel());
            QVERIFY(!w.letrInspector()->hasModel() && !w.letrInspector()->modelLoading());
        }
        qunsetenv("GLIMPSE_RESOURCES");

        Result r = glimpse({"--run", runDir_, "--screenshot", shot("run_only")}, kResources);
        QVERIFY2(r.code == 0 && r.err.contains("models loaded: none"), qPrintable(r.err));
        r = glimpse({image_, "--screenshot", shot("image_only")}, kResources);
        QVERIFY2(r.code == 0 && r.err.contains("models loaded: none"), qPrintable(r.err));
        r = glimpse({image_, "--coat-checkpoint", coatCk_, "--run-coat", "--screenshot", shot("coat_run")}, kResources);
        QVERIFY2(r.code == 0 && r.err.contains("models loaded: CoaT\n"), qPrintable(r.err));
    }
};

QTEST_MAIN(TestFirstUse)
#include "test_first_use.moc"
