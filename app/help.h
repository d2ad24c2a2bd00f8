#pragma once
// The Help menu's texts: the command line (`glimpse --help`: the commands and the GUI options,
// from the same tables the command line uses) and the keyboard shortcuts (every menu action
// that has one, read from the window's menus, plus the keys of the viewport and the panels).
#include <QString>

class QMainWindow;
class QMenu;

namespace glimpse::app {

// `glimpse --help` as the terminal prints it.
QString commandLineHelpText();
// "Ctrl+O  File > Open..." lines for every menu action of `window` with a shortcut, then the
// viewport's and the panels' keys.
QString shortcutsHelpText(const QMainWindow* window);
// Adds "Command line..." and "Keyboard shortcuts..." to `help`; each opens a non-modal dialog
// with the text (selectable, monospace).
void addHelpActions(QMenu* help, QMainWindow* window);

} // namespace glimpse::app
