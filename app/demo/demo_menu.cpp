#include "app/demo/demo_menu.h"

#include <QAction>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>

#include "app/mainwindow.h"
#include "app/panel.h"
#include "app/replay/replay_model.h"
#include "app/replay/replay_panel.h"
#include "app/resources.h"

namespace glimpse::app {

namespace {

// The shipped agents' games: the shooter and the maze (tools/make_demo_content.sh), with the
// discount they were trained with (tools/ez_study_shooter.json / tools/ez_study.json), which the
// world-model check uses for the returns.
struct DemoGame {
    const char* game;
    const char* kind;
    double discount;
};
constexpr DemoGame kGames[] = {{"demon", "shooter", 0.97}, {"alien", "maze", 0.997}};

// opencv-doc's sample photos (installer/setup.sh installs the package), first found wins.
const char* kPhotos[] = {"/usr/share/doc/opencv-doc/examples/data/baboon.jpg",
                         "/usr/share/doc/opencv-doc/examples/data/fruits.jpg",
                         "/usr/share/doc/opencv-doc/examples/data/lena.jpg"};

DemoItem item(const QString& id, const QString& title, const QString& resource) {
    DemoItem d{id, title, resource.isEmpty() ? QString() : resourceFile(resource), true};
    d.available = resource.isEmpty() || !d.file.isEmpty();
    if (!d.available) d.file = resource;   // the name, for the tooltip
    return d;
}

// Shows `image` (the photo, or the demo scene) and runs `family`'s panel on it once shown.
void runOnPhoto(MainWindow* w, const std::string& family) {
    ModelPanel* p = w->panel(family);
    if (!p) return;
    auto run = [p] {
        Q_EMIT p->activateRequested();   // raises its dock; the shipped model loads on first use
        p->runWhenReady();
    };
    const QString photo = demoPhoto();
    if (photo.isEmpty()) {
        w->openDemoImage();
        run();
        return;
    }
    QObject::connect(w, &MainWindow::imageLoaded, p, run, Qt::SingleShotConnection);
    w->openImage(photo);
}

void replayAgent(MainWindow* w, const DemoGame& g, const QString& file) {
    ReplayPanel* r = w->replayPanel();
    ReplayModelView* m = r->modelView();
    // Once open: a step in mid-game (the frame with the policy bars), the trained discount;
    // once the recorded network has loaded, the world model against the game and an imagined
    // rollout from the shown step.
    QObject::connect(
        r, &ReplayPanel::episodeOpened, r,
        [r, m, g](const QString&, int steps) {
            m->setDiscount(g.discount);
            QObject::connect(
                m, &ReplayModelView::networkLoaded, m,
                [r, m, steps] {
                    r->seek(steps / 2);
                    m->checkWorldModel();
                    m->imagine(5);   // the imagined-vs-actual charts from the shown step
                },
                Qt::SingleShotConnection);
        },
        Qt::SingleShotConnection);
    w->openImage(file);
}

} // namespace

QString demoEpisodeName(const QString& game) { return "demo/" + game + "_episode.h5"; }
QString demoXtraRunName() { return "demo/xtra_finetune/runlog.h5"; }

QString demoPhoto() {
    for (const char* p : kPhotos)
        if (QFileInfo(p).isFile()) return p;
    return {};
}

QList<DemoItem> demoItems() {
    QList<DemoItem> items;
    items << item("letr", "LETR on a scene", "letr_demo.h5");
    items << item("coat", "CoaT on a photo", "");
    items << item("constellation", "ConstellationNet clusters", "");
    for (const auto& g : kGames)
        items << item(QStringLiteral("replay-%1").arg(g.game),
                      QStringLiteral("Replay an agent: %1 (%2)").arg(g.game, g.kind), demoEpisodeName(g.game));
    items << item("xtra", "XTRA task weights", demoXtraRunName());
    return items;
}

bool openDemoItem(MainWindow* w, const QString& id) {
    for (const DemoItem& d : demoItems()) {
        if (d.id != id) continue;
        if (!d.available) {
            w->reportError(QStringLiteral("Demo: %1 is not installed (tools/make_demo_content.sh makes it).").arg(d.file));
            return false;
        }
        if (id == "letr") w->startDemo(d.file);
        else if (id == "coat") runOnPhoto(w, "coat");
        else if (id == "constellation") runOnPhoto(w, "constellation");
        else if (id == "xtra") w->openRun(d.file);
        else
            for (const auto& g : kGames)
                if (id == QStringLiteral("replay-%1").arg(g.game)) replayAgent(w, g, d.file);
        return true;
    }
    return false;
}

QMenu* addDemoMenu(MainWindow* w) {
    QMenu* menu = w->menuBar()->addMenu("&Demo");
    for (const DemoItem& d : demoItems()) {
        QAction* a = menu->addAction(d.title, w, [w, id = d.id] { openDemoItem(w, id); });
        a->setData(d.id);
        a->setEnabled(d.available);
        if (!d.available) a->setToolTip(d.file + " is not installed (tools/make_demo_content.sh)");
        else if (!d.file.isEmpty()) a->setToolTip(d.file);
    }
    menu->setToolTipsVisible(true);
    return menu;
}

} // namespace glimpse::app
