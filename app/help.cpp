#include "app/help.h"

#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QVBoxLayout>

#include <functional>

#include "app/cli/cli.h"
#include "app/gui.h"

namespace glimpse::app {

QString commandLineHelpText() {
    return QString::fromStdString("usage: glimpse [FILE] [GUI options]                          start the GUI\n" +
                                  cli::commandsUsage() + "       glimpse --help | --version\n\n" + guiUsage() +
                                  "Run 'glimpse COMMAND --help' for a command's options.\n");
}

QString shortcutsHelpText(const QMainWindow* window) {
    QStringList lines;
    // Menu items with a shortcut, as the menus name them ("File > Open...").
    std::function<void(const QMenu*, const QString&)> walk = [&](const QMenu* menu, const QString& path) {
        for (QAction* a : menu->actions()) {
            const QString name = path + " > " + a->text().remove('&');
            if (a->menu()) {
                walk(a->menu(), name);
                continue;
            }
            if (a->isSeparator() || a->shortcut().isEmpty()) continue;
            lines << QStringLiteral("%1  %2").arg(a->shortcut().toString(QKeySequence::NativeText), -14).arg(name);
        }
    };
    if (window && window->menuBar())
        for (QAction* top : window->menuBar()->actions())
            if (top->menu()) walk(top->menu(), top->text().remove('&'));
    lines << QString()
          << "In the viewport:"
          << "  drag            pan"
          << "  wheel           zoom about the cursor"
          << "  double-click    fit the image to the window"
          << "  click           LETR: select the line under it; CoaT: set the query pixel;"
          << "                  ConstellationNet: pick the cell"
          << QString()
          << "In the viewport or the LETR panel:"
          << "  Left / Right    previous / next decoder layer"
          << "  Home / End      first / last layer"
          << "  wheel over the layer stepper: one layer per notch";
    return lines.join('\n') + '\n';
}

namespace {

void showText(QMainWindow* window, const QString& title, const QString& text) {
    auto* dialog = new QDialog(window);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setWindowTitle(title);
    auto* col = new QVBoxLayout(dialog);
    auto* edit = new QPlainTextEdit(text, dialog);
    edit->setReadOnly(true);
    edit->setLineWrapMode(QPlainTextEdit::NoWrap);
    edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    col->addWidget(edit);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
    QObject::connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
    col->addWidget(buttons);
    dialog->resize(900, 560);
    dialog->show();   // non-modal: the window stays usable beside it
}

} // namespace

void addHelpActions(QMenu* help, QMainWindow* window) {
    help->addAction("&Command line...", window,
                    [window] { showText(window, "Glimpse command line", commandLineHelpText()); });
    QAction* keys = help->addAction("&Keyboard shortcuts...", window, [window] {
        showText(window, "Glimpse keyboard shortcuts", shortcutsHelpText(window));
    });
    keys->setShortcut(QKeySequence::HelpContents);   // F1
}

} // namespace glimpse::app
