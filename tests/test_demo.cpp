// The Demo menu (app/demo/demo_menu.h, issue 52 part 3): each item opens with one click. Demo
// content made here in a resources folder of the test's own (GLIMPSE_RESOURCES): a tiny demon
// agent with its recorded episode (the checkpoint named relative to it, as
// tools/make_demo_content.sh writes it) and an XTRA run log with task weights. "Replay an agent"
// opens the episode in the replay viewer in mid-game, loads the agent and fills the world-model
// table; "XTRA task weights" follows the run log with its task-weight chart; a missing item is
// disabled; `glimpse eval worldmodel` prints the core's table and refuses bad input. With the shipped content (resources/demo/) and GLIMPSE_DEMO_SCREENSHOTS=DIR, the real
// episodes and run log are opened too and the window is saved as PNGs.
#include <QAction>
#include <QDir>
#include <QMenu>
#include <QMenuBar>
#include <QProcess>
#include <QScreen>
#include <QScrollArea>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include "app/demo/demo_menu.h"
#include "app/mainwindow.h"
#include "app/replay/replay_model.h"
#include "app/replay/replay_panel.h"
#include "app/training/training_panel.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "core/replay/world_model_check.h"
#include "core/runlog.h"
#include "tests/ez_support.h"
#include "widgets/live_chart.h"

using namespace glimpse;
using namespace glimpse::app;

namespace {

QAction* demoAction(MainWindow& w, const QString& id) {
    for (QMenu* m : w.menuBar()->findChildren<QMenu*>())
        if (m->title() == "&Demo")
            for (QAction* a : m->actions())
                if (a->data().toString() == id) return a;
    return nullptr;
}

void saveShot(MainWindow& w, const QString& name, QWidget* show = nullptr) {
    const QString dir = qEnvironmentVariable("GLIMPSE_DEMO_SCREENSHOTS");
    if (dir.isEmpty()) return;
    QDir().mkpath(dir);
    // Scroll the panel column to `show` (e.g. the world-model table), draw, grab the screen.
    QWidget* p = show;
    while (p && !qobject_cast<QScrollArea*>(p)) p = p->parentWidget();
    if (auto* scroll = qobject_cast<QScrollArea*>(p)) scroll->ensureWidgetVisible(show);
    const int drawn = w.viewport()->framesDrawn();
    QTRY_VERIFY_WITH_TIMEOUT((w.viewport()->requestRedraw(), w.viewport()->framesDrawn() > drawn + 2) ||
                                 !w.viewport()->vulkanError().isEmpty(),
                             10000);
    QVERIFY(w.screen()->grabWindow(w.winId()).save(dir + "/" + name, "PNG"));
}

} // namespace

class TestDemo : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    // Opens the replay item `id` and waits for the episode, its network and the world model.
    void replayItem(MainWindow& w, const QString& id) {
        ReplayPanel* r = w.replayPanel();
        ReplayModelView* m = r->modelView();
        QSignalSpy opened(r, &ReplayPanel::episodeOpened);
        QSignalSpy checked(m, &ReplayModelView::worldModelChecked);
        QSignalSpy imagined(m, &ReplayModelView::imagined);
        QAction* a = demoAction(w, id);
        QVERIFY(a && a->isEnabled());
        a->trigger();   // one click
        QVERIFY(opened.wait(30000));
        const int steps = opened.first().at(1).toInt();
        QVERIFY(checked.wait(120000));
        QTRY_COMPARE_WITH_TIMEOUT(imagined.count(), 1, 30000);
        QCOMPARE(m->imaginedFrom(), steps / 2);
        QVERIFY(m->hasNetwork());
        QCOMPARE(r->step(), steps / 2);
        QVERIFY(m->hasWorldModelCheck());
        QVERIFY(m->worldModelTable()->isVisible());
        QCOMPARE(m->worldModelTable()->rowCount(), 6);
        QCOMPARE(int(m->worldModelUntrained().depths.size()), 6);
    }

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        const QString res = dir_.filePath("resources");
        QDir().mkpath(res + "/demo/xtra_finetune");
        // A tiny demon agent and one recorded episode, the checkpoint named relative to it.
        torch::manual_seed(4);
        efficientzero::Network net(glimpse::testing::tinyEfficientZeroConfig("demon"));
        {
            torch::NoGradGuard g;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.3);
        }
        net.train(false);
        saveCheckpoint((res + "/demo/demon_agent.h5").toStdString(),
                       checkpointFromModule(net.module(), "efficientzero", net.config().toJson().dump()));
        efficientzero::EvalOptions o;
        o.episodes = 1;
        o.parallel = 1;
        o.simulations = 4;
        o.env.maxEpisodeSteps = 20;
        o.recordDir = dir_.filePath("rec").toStdString();
        o.checkpointPath = "demon_agent.h5";
        const auto result = efficientzero::evaluate(net, "demon", o);
        QCOMPARE(int(result.recorded.size()), 1);
        QVERIFY(QFile::copy(QString::fromStdString(result.recorded[0]), res + "/demo/demon_episode.h5"));
        // An XTRA run log with task weights.
        const nlohmann::json config = {{"trainer", "xtra"}, {"total_steps", 10},
                                       {"offline_games", {"invaders", "pellets"}},
                                       {"game_categories", {{"invaders", "shooter"}, {"pellets", "maze"}}}};
        auto log = RunLogWriter::create((res + "/demo/xtra_finetune/runlog.h5").toStdString(), config,
                                        {"loss", "task_weight/invaders", "task_weight/pellets"});
        for (int s = 1; s <= 10; ++s) {
            log.append("loss", s, 1.0 / s);
            log.append("task_weight/invaders", s, 1.0);
            log.append("task_weight/pellets", s, s < 5 ? 1.0 : 0.2);
        }
        log.finish();
        qputenv("GLIMPSE_RESOURCES", res.toUtf8());
    }

    void cleanupTestCase() { qunsetenv("GLIMPSE_RESOURCES"); }

    void menuItems() {
        const auto items = demoItems();
        QStringList ids;
        for (const auto& d : items) ids << d.id;
        QCOMPARE(ids, QStringList({"letr", "coat", "constellation", "replay-demon", "replay-alien", "xtra"}));
        MainWindow w;
        QVERIFY(demoAction(w, "replay-demon")->isEnabled());
        QVERIFY(demoAction(w, "xtra")->isEnabled());
        QVERIFY(demoAction(w, "coat")->isEnabled());
        // Not in this resources folder: disabled, the tooltip names the file and the command.
        QAction* alien = demoAction(w, "replay-alien");
        QVERIFY(!alien->isEnabled());
        QVERIFY(alien->toolTip().contains("demo/alien_episode.h5"));
        QVERIFY(alien->toolTip().contains("make_demo_content.sh"));
        QVERIFY(!demoAction(w, "letr")->isEnabled());   // no letr_demo.h5 here
        QVERIFY(!openDemoItem(&w, "replay-alien"));
        QVERIFY(w.lastError().contains("not installed"));
        QVERIFY(!openDemoItem(&w, "nonsense"));
    }

    void replayAnAgent() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        replayItem(w, "replay-demon");
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
    }

    void xtraTaskWeights() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        demoAction(w, "xtra")->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(w.trainingPanel()->runCount(), 1, 20000);
        auto* c = w.trainingPanel()->charts()->chart("task weights");
        QVERIFY(c);
        QCOMPARE(c->runs().size(), 2);
    }

    // `glimpse eval worldmodel` prints what the core computes (the agent beside an untrained
    // network), and refuses bad input with a message naming it.
    void evalWorldModelCommand() {
        const QString episode = dir_.filePath("resources/demo/demon_episode.h5");
        const QString glimpse = QStringLiteral(GLIMPSE_BINARY_DIR) + "/app/glimpse";
        auto run = [&](const QStringList& args, QString& out) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(glimpse, args);
            if (!p.waitForFinished(60000)) return -1;
            out = QString::fromUtf8(p.readAll());
            return p.exitCode();
        };
        QString out;
        QCOMPARE(run({"eval", "worldmodel", episode, "--markdown", "--threads", "1", "--discount", "0.97"}, out), 0);
        replay::EpisodeReader ep(episode.toStdString());
        auto net = replay::loadEpisodeNetwork(ep);
        replay::WorldModelCheckOptions o;
        o.discount = 0.97;
        const auto trained = replay::checkWorldModel(*net, ep, o);
        auto fresh = replay::untrainedNetwork(net->config(), 0);
        const auto untrained = replay::checkWorldModel(fresh, ep, o);
        QVERIFY2(out.contains(QString::fromStdString(replay::worldModelTable(trained, &untrained, true))), qPrintable(out));
        QVERIFY(out.contains("clipped rewards"));
        QCOMPARE(run({"eval", "worldmodel", dir_.filePath("missing.h5")}, out), 1);
        QVERIFY2(out.contains("missing.h5"), qPrintable(out));
        QVERIFY(run({"eval", "worldmodel", episode, "--depth", "0"}, out) != 0);
        QVERIFY2(out.contains("--depth"), qPrintable(out));
    }

    // The shipped content, when made (tools/make_demo_content.sh): both agents' episodes and the
    // XTRA run log open with one click each.
    void shippedContent() {
        const QString shipped = QStringLiteral(GLIMPSE_SOURCE_DIR) + "/resources";
        if (!QFileInfo::exists(shipped + "/demo/demon_episode.h5")) QSKIP("no shipped demo content (resources/demo)");
        qputenv("GLIMPSE_RESOURCES", shipped.toUtf8());
        MainWindow w;
        w.resize(1280, 860);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        for (const QString game : {"demon", "alien"}) {
            replayItem(w, "replay-" + game);
            saveShot(w, "demo_replay_" + game + ".png", w.replayPanel()->modelView()->worldModelTable());
        }
        demoAction(w, "xtra")->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(w.trainingPanel()->charts()->chart("task weights"), 20000);
        QTest::qWait(500);
        saveShot(w, "demo_xtra.png", w.trainingPanel()->charts()->chart("task weights"));
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 30000);
        qputenv("GLIMPSE_RESOURCES", dir_.filePath("resources").toUtf8());
    }
};

QTEST_MAIN(TestDemo)
#include "test_demo.moc"
