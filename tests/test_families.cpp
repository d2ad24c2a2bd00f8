// The model-family registry and what is built from it: the main window's panels and their
// activation, opening any Glimpse HDF5 file by its kind and family, the Training panel's model
// list, the command table. Under Xvfb (the panels draw into the Vulkan viewport).
#include <QDockWidget>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <hdf5.h>
#include <torch/torch.h>

#include <set>

#include "app/cli/cli.h"
#include "app/coat/inspector.h"
#include "app/family.h"
#include "app/file_probe.h"
#include "app/letr/inspector.h"
#include "app/mainwindow.h"
#include "app/panel.h"
#include "app/replay/replay_panel.h"
#include "app/training/training_panel.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/rl/episode.h"

using namespace glimpse;
using glimpse::app::MainWindow;
using glimpse::app::ModelPanel;

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

rl::Episode tinyEpisode() {
    rl::Episode e;
    e.env = "breakout";
    e.source = "test";
    e.actionNames = {"NOOP", "FIRE"};
    e.frames = torch::zeros({3, 8, 8, 3}, torch::kUInt8);
    e.actions = torch::tensor({0, 1, 0}, torch::kInt64);
    e.rewards = torch::tensor({0.f, 1.f, 0.f});
    e.terminal = true;
    return e;
}

} // namespace

class TestFamilies : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private Q_SLOTS:
    void initTestCase() {
        QCoreApplication::setOrganizationName("GlimpseTest");
        QCoreApplication::setApplicationName("GlimpseTestFamilies");
        qputenv("GLIMPSE_RESOURCES", dir_.path().toUtf8());   // no demo checkpoints from the tree
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
    }

    // The registry: unique names; the panels, trainers and commands each family declares.
    void registryDescribesEveryFamily() {
        const auto& all = app::modelFamilies();
        std::set<std::string> names;
        for (const auto& f : all) {
            QVERIFY2(names.insert(f.name).second, f.name.c_str());
            QCOMPARE(app::findFamily(f.name), &f);
            for (const auto& c : f.commands) QVERIFY2(bool(c.run), (f.name + " " + c.verb).c_str());
        }
        QVERIFY(names.count("letr") && names.count("coat") && names.count("efficientzero"));
        QVERIFY(app::findFamily("nope") == nullptr);
        QVERIFY(app::defaultCheckpoint("nope").isEmpty());
        QVERIFY(app::defaultCheckpoint("letr").isEmpty());   // GLIMPSE_RESOURCES points at an empty folder
        // The Training panel's runner refuses a family it does not know, by name.
        train::Control control;
        app::TrainingSpec spec;
        spec.model = "nope";
        try {
            app::modelRunner()(spec, control, {});
            QFAIL("no error for an unknown family");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("'nope'"), e.what());
        }
        // Every command of every family is in the usage text and dispatches.
        const QString usage = QString::fromStdString(cli::commandsUsage());
        for (const auto& f : all)
            for (const auto& c : f.commands) QVERIFY2(usage.contains(QString::fromStdString("glimpse " + c.verb)), c.verb.c_str());
        bool handled = true;
        QCOMPARE(cli::runCommand("frobnicate", {}, &handled), 2);
        QVERIFY(!handled);
        QCOMPARE(cli::runCommand("train", {"nope"}, &handled), 2);
        QVERIFY(handled);
        // --help anywhere gives the command's own help (it used to be read as an option value).
        QCOMPARE(cli::runCommand("bench", {"letr", "--runs", "2", "--help"}, &handled), 0);
        QCOMPARE(cli::runCommand("eval", {"letr", "--help"}, &handled), 0);
    }

    // One panel per family that has one, in registry order, each in its own dock; the Training
    // panel offers every family with a trainer.
    void mainWindowIsBuiltFromTheRegistry() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        std::vector<std::string> withPanel, trainable;
        for (const auto& f : app::modelFamilies()) {
            if (f.makePanel) withPanel.push_back(f.name);
            if (f.trainer) trainable.push_back(f.name);
        }
        const auto panels = w.panels();
        QCOMPARE(panels.size(), withPanel.size());
        for (size_t i = 0; i < panels.size(); ++i) {
            QCOMPARE(w.panel(withPanel[i]), panels[i]);
            QCOMPARE(panels[i]->title(), app::findFamily(withPanel[i])->title);
        }
        QVERIFY(w.letrInspector() && w.coatInspector());
        for (const auto& name : trainable) {
            w.trainingPanel()->setModel(QString::fromStdString(name));
            QCOMPARE(w.trainingPanel()->model(), QString::fromStdString(name));
        }
        // Exactly one panel draws the viewport; a run or an opened trace activates its panel.
        auto activeCount = [&] {
            int n = 0;
            for (ModelPanel* p : panels) n += p->active();
            return n;
        };
        QCOMPARE(activeCount(), 1);
        QCOMPARE(w.activePanel(), static_cast<ModelPanel*>(w.letrInspector()));
        Q_EMIT w.coatInspector()->activateRequested();
        QTRY_COMPARE(w.activePanel(), static_cast<ModelPanel*>(w.coatInspector()));
        QCOMPARE(activeCount(), 1);
        Q_EMIT w.letrInspector()->activateRequested();
        QTRY_COMPARE(w.activePanel(), static_cast<ModelPanel*>(w.letrInspector()));
        QCOMPARE(activeCount(), 1);
    }

    // Opening .h5 files dispatches on kind and family: a checkpoint goes to its family's panel,
    // an episode to the replay viewer; a foreign HDF5 file and an unreadable one get clear
    // messages naming the file.
    void opensGlimpseFilesByKind() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QString ck = dir_.filePath("tiny_coat.h5");
        coat::saveCoat(coat::CoatModel(tinyCoat(), 3), ck.toStdString());
        QSignalSpy loaded(w.coatInspector(), &ModelPanel::checkpointLoaded);
        w.openImage(ck);
        QVERIFY(loaded.wait(30000));
        QCOMPARE(loaded.first().first().toString(), ck);
        QVERIFY(w.coatInspector()->hasModel());
        QVERIFY(!w.letrInspector()->hasModel());
        QTRY_COMPARE(w.activePanel(), static_cast<ModelPanel*>(w.coatInspector()));

        // An episode opens in the replay viewer (a source, not a family), its first frame in the viewport.
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        const QString ep = dir_.filePath("game.h5");
        rl::writeEpisode(ep.toStdString(), tinyEpisode());
        QSignalSpy shown(w.replayPanel(), &app::ReplayPanel::frameShown);
        w.openImage(ep);
        QVERIFY(shown.wait(20000));
        QCOMPARE(shown.first().first().toInt(), 0);
        QVERIFY(w.replayPanel()->hasEpisode());
        QCOMPARE(w.viewport()->image().width, 8);
        QCOMPARE(failed.count(), 0);
        // The Replay tab is raised: no model panel draws the viewport meanwhile.
        QTRY_VERIFY(w.activePanel() == nullptr);
        failed.clear();

        const QString foreign = dir_.filePath("foreign.h5");
        const hid_t f = H5Fcreate(foreign.toUtf8().constData(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        QVERIFY(f >= 0);
        H5Fclose(f);
        w.openImage(foreign);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 20000);
        QVERIFY2(w.lastError().contains("foreign.h5") && w.lastError().contains("not a Glimpse file"),
                 qPrintable(w.lastError()));

        const QString text = dir_.filePath("text.h5");
        {
            QFile t(text);
            QVERIFY(t.open(QIODevice::WriteOnly));
            t.write("not hdf5");
        }
        w.openImage(text);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 20000);
        QVERIFY2(w.lastError().contains("text.h5"), qPrintable(w.lastError()));
        // Nothing of the earlier state was lost.
        QVERIFY(w.coatInspector()->hasModel());
        QVERIFY(w.replayPanel()->hasEpisode());
    }

    // Files that crash or hang libhdf5 itself (fuzz/known_hdf5_crashes/: a corrupt global heap
    // behind a variable-length string; `glimpse info` dies with SIGSEGV on the first, loops for
    // minutes on the second). The GUI reads an .h5 file's kind in a child process first, so it
    // refuses both with a message naming the file, its event loop keeps turning meanwhile, what
    // was open stays open, and a good file still opens afterwards.
    void damagedFilesThatBreakHdf5AreRefused() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        app::FileProbe* probe = w.fileProbe();
        const QString exe = QStringLiteral(GLIMPSE_BINARY_DIR "/app/glimpse");
        QVERIFY2(QFileInfo(exe).isExecutable(), qPrintable(exe));
        probe->setProgram(exe);
        const QString ck = dir_.filePath("kept_coat.h5");
        coat::saveCoat(coat::CoatModel(tinyCoat(), 3), ck.toStdString());
        QSignalSpy loaded(w.coatInspector(), &ModelPanel::checkpointLoaded);
        w.openImage(ck);   // through the child process too
        QVERIFY(loaded.wait(30000));
        QVERIFY(w.coatInspector()->hasModel());

        QSignalSpy failed(&w, &MainWindow::loadFailed);
        int ticks = 0;
        QTimer tick;
        connect(&tick, &QTimer::timeout, [&ticks] { ++ticks; });
        tick.start(20);
        const QString src = QStringLiteral(GLIMPSE_SOURCE_DIR "/fuzz/known_hdf5_crashes/");
        const int defaultTimeout = probe->timeoutMs();
        int expected = 0;
        for (const char* name : {"h5hg-read-memcpy-overlap.h5", "h5hg-protect-slow.h5"}) {
            // 3 s only for the file that hangs libhdf5: the one that crashes keeps the default,
            // so that a slow start of the child on a loaded machine is not taken for a hang.
            const bool hangs = QByteArray(name) == "h5hg-protect-slow.h5";
            probe->setTimeoutMs(hangs ? 3000 : defaultTimeout);
            const QString bad = dir_.filePath(name);
            QFile::remove(bad);
            QVERIFY(QFile::copy(src + name, bad));
            ticks = 0;
            QElapsedTimer clock;
            clock.start();
            w.openImage(bad);
            ++expected;
            QTRY_COMPARE_WITH_TIMEOUT(failed.count(), expected, 30000);
            const QString msg = failed.last().at(1).toString();
            QVERIFY2(msg.contains(name) && msg.contains("damaged"), qPrintable(msg));
            // The UI thread was free while the child read: the 20 ms timer kept firing.
            QVERIFY2(ticks >= clock.elapsed() / 20 / 3, qPrintable(QString("%1 ticks in %2 ms").arg(ticks).arg(clock.elapsed())));
            QVERIFY(w.isVisible());
            QVERIFY(w.coatInspector()->hasModel());
        }
        QVERIFY2(failed.at(0).at(1).toString().contains("crashed"), qPrintable(failed.at(0).at(1).toString()));
        QVERIFY2(failed.at(1).at(1).toString().contains("did not finish within 3 s"),
                 qPrintable(failed.at(1).at(1).toString()));
        QVERIFY(!w.busy());
        probe->setTimeoutMs(defaultTimeout);

        loaded.clear();
        w.openImage(ck);
        QVERIFY(loaded.wait(30000));

        // A checker that cannot start (a moved executable): the kind is read in this process,
        // on a worker thread, and the file still opens.
        probe->setProgram(dir_.filePath("no-such-glimpse"));
        loaded.clear();
        w.openImage(ck);
        QVERIFY(loaded.wait(30000));
        QCOMPARE(failed.count(), 2);
    }

    // The probe's answer line: kind and family, an error, or something unexpected.
    void probeLineParsing() {
        app::ProbeResult r = app::parseProbeLine(
            R"({"file":"a.h5","kind":"glimpse.trace","format_version":2,"family":"letr"})");
        QVERIFY(r.ok());
        QCOMPARE(QString::fromStdString(r.kind.kind), QString("glimpse.trace"));
        QCOMPARE(r.kind.formatVersion, int64_t(2));
        QCOMPARE(QString::fromStdString(r.kind.family), QString("letr"));
        r = app::parseProbeLine(R"({"file":"a.h5","error":"a.h5: not HDF5"})");
        QCOMPARE(r.error, QString("a.h5: not HDF5"));
        r = app::parseProbeLine("Segmentation fault");
        QVERIFY(!r.ok());
        QVERIFY(r.error.contains("Segmentation fault"));
    }
};

QTEST_MAIN(TestFamilies)
#include "test_families.moc"
