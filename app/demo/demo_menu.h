#pragma once
// The Demo menu (issue 52 part 3): one click opens each of the things users come for, with what
// ships in resources/ (resources/demo/ is made by tools/make_demo_content.sh):
//   "LETR on a scene"           the demo scene, LETR run on it (letr_demo.h5)
//   "CoaT on a photo"           a photo (opencv-doc's samples, else the demo scene), CoaT run on it
//   "ConstellationNet clusters" the same photo, ConstellationNet's clusters over it
//   "Replay an agent: GAME"     a recorded episode of a shipped agent in the replay viewer, its
//                               network loaded and the world model checked against the game
//   "XTRA task weights"         the run log of a short XTRA finetuning run in the Training view
// An item whose file is not installed is disabled, its tooltip naming the missing file.
#include <QList>
#include <QString>

class QAction;
class QMenu;

namespace glimpse::app {

class MainWindow;

struct DemoItem {
    QString id;      // "letr", "coat", "constellation", "replay-demon", "replay-alien", "xtra"
    QString title;   // the menu text
    QString file;    // what it opens ("" for the built-in scene); absolute when installed
    bool available = true;
};

// The items and the files they would open (resources looked up as app/resources.h does).
QList<DemoItem> demoItems();
// The shipped episodes and run log (relative to resources/).
QString demoEpisodeName(const QString& game);   // "demo/GAME_episode.h5"
QString demoXtraRunName();                      // "demo/xtra_finetune/runlog.h5"
// A photo for CoaT and ConstellationNet: the first of opencv-doc's sample photos installed, or "".
QString demoPhoto();

// Adds the Demo menu to `w`'s menu bar; returns it (its actions carry the item id as data).
QMenu* addDemoMenu(MainWindow* w);
// Runs demo item `id` in `w` (what its menu action does); false for an unknown or missing item.
bool openDemoItem(MainWindow* w, const QString& id);

} // namespace glimpse::app
