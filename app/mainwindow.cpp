#include "app/mainwindow.h"
#include "app/demo/demo_menu.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QKeySequence>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QCheckBox>
#include <QSlider>
#include <QSplitter>
#include <QTabWidget>
#include <QStatusBar>
#include <QStyle>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>

#include <opencv2/core.hpp>

#include "app/async.h"
#include "app/family.h"
#include "app/file_probe.h"
#include "app/help.h"
#include "app/panel.h"
#include "app/replay/replay_panel.h"
#include "app/results/results_panel.h"
#include "app/resources.h"
#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "app/training/training_view.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "core/io/video.h"
#include "core/run_files.h"
#include "app/letr/inspector.h"
#include "app/coat/inspector.h"
#include "renderer/renderer.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kMaxRecent = 10;

// A model panel's scroll area: it scrolls vertically only, so it asks for the panel's minimum
// width (plus its scroll bar) and the dock column never cuts the panel's controls off; a panel
// whose content grows (a trace's module names) asks again.
class PanelScroll : public QScrollArea {
public:
    using QScrollArea::QScrollArea;
    QSize minimumSizeHint() const override {
        QSize s = QScrollArea::minimumSizeHint();
        if (widget())
            s.setWidth(std::max(s.width(), widget()->minimumSizeHint().width() + verticalScrollBar()->sizeHint().width() +
                                               2 * frameWidth()));
        return s;
    }

protected:
    bool eventFilter(QObject* o, QEvent* e) override {
        if (o == widget() && e->type() == QEvent::LayoutRequest) updateGeometry();
        return QScrollArea::eventFilter(o, e);
    }
};

// The Image dock's Source: the file's name first (bold), then its folder in smaller type with
// break points after each '/', so that a narrow dock wraps the folder instead of cutting off the
// name; the full path is the tool tip.
void showSource(QLabel* label, const QString& path, const QString& suffix = QString()) {
    const QFileInfo fi(path);
    QString dir = fi.absolutePath().toHtmlEscaped();
    dir.replace('/', QStringLiteral("/&#8203;"));
    label->setText("<b>" + fi.fileName().toHtmlEscaped() + "</b>" + suffix.toHtmlEscaped() + "<br><small>" + dir +
                   "</small>");
    label->setToolTip(fi.absoluteFilePath());
}

} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("Glimpse");
    setAcceptDrops(true);
    viewport_ = new widgets::ImageViewport(this);
    // Split view: the compare pane (another layer or the LSD baseline) beside the main one.
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(viewport_);
    compare_ = new widgets::ImageViewport(split);
    compare_->setOverlayTitle("compare");
    split->addWidget(compare_);
    compare_->hide();
    // The main area: the image (with its compare pane) and, once a run is opened or started,
    // the training charts as a tab of their own (issue 55); the tab bar hides with one tab.
    auto* central = new QTabWidget(this);
    central->setObjectName("central.tabs");
    central->setDocumentMode(true);
    central->setTabBarAutoHide(true);
    central->addTab(split, "Image");
    setCentralWidget(central);
    buildDocks();
    buildMenus();
    buildVideoBar();

    cursorLabel_ = new QLabel(this);
    zoomLabel_ = new QLabel(this);
    cursorLabel_->setMinimumWidth(260);
    statusBar()->addPermanentWidget(cursorLabel_);
    statusBar()->addPermanentWidget(zoomLabel_);
    connect(viewport_, &widgets::ImageViewport::cursorPixel, this,
            [this](int x, int y, const QString& value) {
                cursorLabel_->setText(x < 0 ? QString() : QStringLiteral("x %1  y %2   %3").arg(x).arg(y).arg(value));
            });
    connect(viewport_, &widgets::ImageViewport::viewChanged, this, [this](double zoom) {
        zoomLabel_->setText(QStringLiteral("%1 %").arg(zoom * 100.0, 0, 'f', 1));
    });
    if (!viewport_->vulkanError().isEmpty()) log(viewport_->vulkanError());

    // Each family's shipped checkpoint loads on its panel's first use, not at start (a launch on
    // an episode or a run log loads no model; startDemo loads LETR's for the demo scene).
    for (const auto& slot : panels_)
        if (!slot.family->defaultCheckpoint.isEmpty())
            slot.panel->setShippedCheckpoint(resourceFile(slot.family->defaultCheckpoint));

    QSettings settings;
    if (!restoreGeometry(settings.value("window/geometry").toByteArray())) resize(1280, 860);
    if (!restoreState(settings.value("window/state").toByteArray()) && panelColumn_.second) {
        // First start: the panels scroll, so they do not claim height by themselves; give their
        // tab group most of the dock column (deferred: the dock layout settles once shown).
        // Messages starts five lines tall (it took a fifth of the default window before); the
        // image gets the rest. Dragging its edge or a saved layout changes that.
        QTimer::singleShot(0, this, [this] {
            auto [below, panels] = panelColumn_;
            resizeDocks({below, panels}, {below->minimumSizeHint().height(), height()}, Qt::Vertical);
            if (auto* messages = findChild<QDockWidget*>("dock.messages"))
                resizeDocks({messages}, {messagesDefaultHeight()}, Qt::Vertical);
        });
    }
}

MainWindow::~MainWindow() = default;

int MainWindow::messagesDefaultHeight() const {
    // Five lines of the list, its frame and the dock's title bar.
    return 5 * messages_->fontMetrics().lineSpacing() + 2 * messages_->frameWidth() + 8 +
           messages_->parentWidget()->style()->pixelMetric(QStyle::PM_TitleBarHeight);
}

void MainWindow::buildMenus() {
    buildFileMenu();
    QMenu* view = menuBar()->addMenu("&View");
    view->addAction("&Fit to window", QKeySequence("Ctrl+0"), viewport_, &widgets::ImageViewport::fitToWindow);
    view->addAction("&Actual pixels (1:1)", QKeySequence("Ctrl+1"), viewport_, &widgets::ImageViewport::oneToOne);
    view->addAction("Zoom &in", QKeySequence::ZoomIn, viewport_, &widgets::ImageViewport::zoomIn);
    view->addAction("Zoom &out", QKeySequence::ZoomOut, viewport_, &widgets::ImageViewport::zoomOut);
    view->addAction("&Previous view", QKeySequence("Backspace"), this, [this] {
        if (!viewport_->previousView()) statusBar()->showMessage("No earlier view", 2000);
    });
    view->addSeparator();
    QAction* overlay = view->addAction("&Overlay");
    overlay->setCheckable(true);
    overlay->setChecked(true);
    overlay->setShortcut(QKeySequence("F2"));
    connect(overlay, &QAction::toggled, viewport_, &widgets::ImageViewport::setOverlayVisible);
    view->addSeparator();
    for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
    buildModelMenu();
    addDemoMenu(this);   // one click each: LETR, CoaT, ConstellationNet, replayed agents, XTRA (app/demo/demo_menu.h)
    QMenu* help = menuBar()->addMenu("&Help");
    addHelpActions(help, this);   // the command line and the keyboard shortcuts (app/help.h)
    help->addSeparator();
    help->addAction("&About Glimpse", this, [this] {
        QMessageBox::about(this, "About Glimpse",
                           QStringLiteral("<b>Glimpse %1</b><p>A desktop lab for attention models "
                                          "and world models.</p>").arg(GLIMPSE_VERSION));
    });
}

void MainWindow::buildFileMenu() {
    QMenu* file = menuBar()->addMenu("&File");
    QAction* open = file->addAction("&Open...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, "Open", QString(),
            "Images, videos and Glimpse files (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.webp *.ppm *.pgm *.mp4 *.avi "
            "*.mkv *.mov *.webm *.m4v *.mpg *.mpeg *.wmv *.ogv *.mjpeg *.h5);;All files (*)");
        if (!path.isEmpty()) openImage(path);
    });
    open->setShortcut(QKeySequence::Open);
    file->addAction("Open &demo image", this, &MainWindow::openDemoImage);
    // "Training run": Model > Run / Cancel inference are the model passes on the shown image.
    file->addAction("Open training r&un...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open run log", QString(),
                                                          "Run logs (*.h5);;All files (*)");
        if (!path.isEmpty()) openRun(path);
    });
    file->addAction("Open &episode...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open episode", QString(),
                                                          "Glimpse episodes (*.h5);;All files (*)");
        if (!path.isEmpty()) openImage(path);
    });
    file->addAction("Open &trace...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open trace", QString(),
                                                          "Glimpse traces (*.h5);;All files (*)");
        if (!path.isEmpty()) openGlimpseFile(path);
    });
    recentMenu_ = file->addMenu("Open &recent");
    rebuildRecentMenu();
    file->addSeparator();
    QAction* exportAct = file->addAction("&Export view as PNG...", this, [this] {
        if (!viewport_->hasImage()) return reportError("Nothing to export: open an image first.");
        const QString path = QFileDialog::getSaveFileName(this, "Export view as PNG", "view.png", "PNG images (*.png)");
        if (!path.isEmpty()) exportViewPng(path);
    });
    exportAct->setShortcut(QKeySequence("Ctrl+E"));
    file->addAction("&Save trace...", QKeySequence::Save, this, [this] {
        ModelPanel* p = activePanel();
        if (!p || !p->hasTrace()) return reportError("No trace to save: run a model first.");
        const QString path = QFileDialog::getSaveFileName(this, "Save " + p->title() + " trace",
                                                          p->title().toLower() + "_trace.h5", "Glimpse traces (*.h5)");
        if (!path.isEmpty()) p->saveTrace(path);
    });
    for (ModelPanel* p : panels()) p->addFileActions(file);
    file->addSeparator();
    QAction* quit = file->addAction("&Quit", this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
}

void MainWindow::buildModelMenu() {
    QMenu* model = menuBar()->addMenu("&Model");
    QToolBar* tools = addToolBar("Model");
    tools->setObjectName("toolbar.model");
    for (const auto& slot : panels_) {
        ModelPanel* p = slot.panel;
        model->addAction("Open " + p->title() + " &checkpoint...", this, [p] { p->openCheckpointDialog(); });
        QAction* run = model->addAction("&Run " + p->title(), this, [p] { p->run(true); });
        run->setShortcut(slot.family->runShortcut);
        tools->addAction(run);
        model->addSeparator();
    }
    QAction* cancelAct = model->addAction("&Cancel inference", this, [this] {
        for (ModelPanel* p : panels()) p->cancel();
    });
    cancelAct->setShortcut(QKeySequence("Ctrl+."));
    tools->addAction(cancelAct);
}

void MainWindow::buildDocks() {
    auto* propsDock = new QDockWidget("Image", this);
    propsDock->setObjectName("dock.image");
    auto* props = new QWidget(propsDock);
    auto* form = new QFormLayout(props);
    propPath_ = new QLabel("-", props);
    propPath_->setWordWrap(true);
    propPath_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    propSize_ = new QLabel("-", props);
    form->addRow("Source", propPath_);
    form->addRow("Size", propSize_);
    propsDock->setWidget(props);
    addDockWidget(Qt::RightDockWidgetArea, propsDock);

    buildPanelDocks(propsDock);

    auto* msgDock = new QDockWidget("Messages", this);
    msgDock->setObjectName("dock.messages");
    messages_ = new QListWidget(msgDock);
    msgDock->setWidget(messages_);
    addDockWidget(Qt::BottomDockWidgetArea, msgDock);
    msgDock->setMaximumHeight(160);
    probe_ = new FileProbe(this);

    trainingJob_ = new TrainingJob(modelRunner(), this);   // the family the panel's Model names
    auto* trainDock = new QDockWidget("Training", this);
    trainDock->setObjectName("dock.training");
    trainingPanel_ = new TrainingPanel(trainingJob_, trainDock);
    trainDock->setWidget(trainingPanel_);
    addDockWidget(Qt::RightDockWidgetArea, trainDock);
    tabifyDockWidget(propsDock, trainDock);
    trainDock->hide();   // View > Training, File > Open training run... or a started run shows it
    connect(trainingPanel_, &TrainingPanel::message, this, &MainWindow::log);
    connect(trainingPanel_, &TrainingPanel::errorOccurred, this, &MainWindow::reportError);
    // The charts are a central tab while runs are followed; the dock keeps the form, the runs
    // and the preview.
    connect(trainingPanel_, &TrainingPanel::runsChanged, this, [this, view = trainingPanel_->detachChartsView()] {
        auto* tabs = qobject_cast<QTabWidget*>(centralWidget());
        if (!tabs) return;
        const int i = tabs->indexOf(view);
        if (trainingPanel_->runCount() > 0 && i < 0) tabs->setCurrentIndex(tabs->addTab(view, "Training"));
        else if (trainingPanel_->runCount() == 0 && i >= 0) tabs->removeTab(i);
    });
    buildReplayDock(trainDock);
    buildResultsDock();
    // The first model panel's tab is the raised one (tabbing the hidden Replay dock into the
    // group must not leave another tab current).
    if (!panels_.empty()) {
        panels_.front().dock->raise();
        activatePanel(panels_.front().panel);
    }
}

// The replay viewer: hidden until an episode opens; its frames go through showImage.
void MainWindow::buildReplayDock(QDockWidget* beside) {
    auto* dock = new QDockWidget("Replay", this);
    dock->setObjectName("dock.replay");
    replay_ = new ReplayPanel(viewport_, dock);
    dock->setWidget(replay_);
    addDockWidget(Qt::RightDockWidgetArea, dock);
    tabifyDockWidget(panels_.empty() ? beside : panels_.front().dock, dock);   // the tall tab group
    dock->hide();
    connect(replay_, &ReplayPanel::frameReady, this,
            [this](const QString& label, const widgets::RgbImage& image, const QString& key, bool keepView) {
                showImage(label, image, key, keepView, /*pixelExact=*/true);   // game frames: exact pixels at every zoom
            });
    connect(replay_, &ReplayPanel::episodeOpened, this, [this](const QString& path) {
        closeVideo();
        currentPath_ = path;
        addRecent(path);
        showSource(propPath_, path, " (episode)");
    });
    // While the Replay tab is raised no model panel draws the viewport (the replay does).
    connect(dock, &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (!visible) return;
        for (ModelPanel* p : panels()) p->setActive(false);
    });
    connect(replay_, &ReplayPanel::activateRequested, this, [this, dock] {
        dock->show();
        dock->raise();
        if (dock->width() < 420) resizeDocks({dock}, {std::max(420, width() / 3)}, Qt::Horizontal);
    });
    connect(replay_, &ReplayPanel::openFailed, this, [this](const QString& path, const QString& message) {
        reportError(message);
        Q_EMIT loadFailed(path, message);
    });
    connect(replay_, &ReplayPanel::failed, this, &MainWindow::reportError);
    connect(replay_, &ReplayPanel::exportFailed, this, [this](const QString&, const QString& m) { reportError(m); });
    connect(replay_, &ReplayPanel::message, this, [this](const QString& m) {
        log(m);
        statusBar()->showMessage(m, 4000);
    });
    connect(replay_, &ReplayPanel::busyChanged, this, [this] { Q_EMIT busyChanged(busy()); });
}

// The results browser (issue 53): below the image, hidden until a results file opens; the
// samples it shows go through showImage (the model panels learn the source, the dock draws).
void MainWindow::buildResultsDock() {
    auto* dock = new QDockWidget("Results", this);
    dock->setObjectName("dock.results");
    results_ = new ResultsPanel(this, dock);
    dock->setWidget(results_);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    // The full width above Messages (the table, thumbnails and chart need it).
    if (auto* messages = findChild<QDockWidget*>("dock.messages")) splitDockWidget(dock, messages, Qt::Vertical);
    dock->hide();
    connect(results_, &ResultsPanel::showImageRequested, this,
            [this](const QString& label, const widgets::RgbImage& image, const QString& key) {
                closeVideo();
                showImage(label, image, key);
                showSource(propPath_, key.startsWith("results:") ? label : key, " (results sample)");
            });
    connect(results_, &ResultsPanel::activateRequested, this, [this, dock] {
        dock->show();
        dock->raise();
        resizeDocks({dock}, {std::max(320, height() * 9 / 20)}, Qt::Vertical);
    });
    connect(results_, &ResultsPanel::openFailed, this, [this](const QString& path, const QString& message) {
        reportError(message);
        Q_EMIT loadFailed(path, message);
    });
    connect(results_, &ResultsPanel::failed, this, &MainWindow::reportError);
    connect(results_, &ResultsPanel::message, this, [this](const QString& m) {
        log(m);
        statusBar()->showMessage(m, 4000);
    });
    connect(results_, &ResultsPanel::busyChanged, this, [this] { Q_EMIT busyChanged(busy()); });
}

void MainWindow::buildPanelDocks(QDockWidget* below) {
    QDockWidget* first = nullptr;
    for (const auto& family : modelFamilies()) {
        if (!family.makePanel) continue;
        auto* dock = new QDockWidget(family.title, this);
        dock->setObjectName(QString::fromStdString("dock." + family.name));
        // In a scroll area: a panel may be tall (selectors, tables, galleries) and must not force
        // the window's minimum height.
        auto* scroll = new PanelScroll(dock);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        ModelPanel* panel = family.makePanel(viewport_, compare_, scroll);
        scroll->setWidget(panel);
        dock->setWidget(scroll);
        addDockWidget(Qt::RightDockWidgetArea, dock);
        if (first) tabifyDockWidget(first, dock);
        else first = dock;
        panels_.push_back({&family, panel, dock});
        connectPanel(panel, dock);
    }
    if (first) first->raise();
    if (!panels_.empty()) activatePanel(panels_.front().panel);
    panelColumn_ = {below, first};
}

void MainWindow::connectPanel(ModelPanel* panel, QDockWidget* dock) {
    connect(panel, &ModelPanel::failed, this, &MainWindow::reportError);
    connect(panel, &ModelPanel::message, this, [this, panel](const QString& m) {
        log(m);
        // The status bar speaks for the panel in view: another panel's news (e.g. its model
        // finished loading after this one's run) goes to Messages only.
        if (panel->active()) statusBar()->showMessage(m, 4000);
    });
    connect(panel, &ModelPanel::showImageRequested, this,
            [this, panel](const QString& label, const widgets::RgbImage& image) {
                closeVideo();
                currentPath_ = QString();
                propPath_->setText(label + " (" + panel->title() + " trace)");
                propPath_->setToolTip(QString());
                showImage(label, image, panel->sourceKey());
            });
    connect(panel, &ModelPanel::activateRequested, this, [this, panel, dock] {
        dock->show();
        dock->raise();
        activatePanel(panel);
    });
    // The raised panel draws the shared viewport.
    connect(dock, &QDockWidget::visibilityChanged, this, [this, panel](bool visible) {
        if (visible) activatePanel(panel);
    });
    connect(panel, &ModelPanel::busyChanged, this, [this] { Q_EMIT busyChanged(busy()); });
}

void MainWindow::activatePanel(ModelPanel* panel) {
    for (const auto& slot : panels_)
        if (slot.panel != panel) slot.panel->setActive(false);
    panel->setActive(true);
}

std::vector<ModelPanel*> MainWindow::panels() const {
    std::vector<ModelPanel*> out;
    for (const auto& slot : panels_) out.push_back(slot.panel);
    return out;
}

ModelPanel* MainWindow::panel(const std::string& family) const {
    for (const auto& slot : panels_)
        if (slot.family->name == family) return slot.panel;
    return nullptr;
}

ModelPanel* MainWindow::activePanel() const {
    for (const auto& slot : panels_)
        if (slot.panel->active()) return slot.panel;
    return nullptr;
}

LetrInspector* MainWindow::letrInspector() const { return qobject_cast<LetrInspector*>(panel("letr")); }
CoatInspector* MainWindow::coatInspector() const { return qobject_cast<CoatInspector*>(panel("coat")); }

void MainWindow::openGlimpseFile(const QString& path) {
    ++pending_;
    Q_EMIT busyChanged(true);
    statusBar()->showMessage("Checking " + path + " ...");
    probe_->probe(path, [this, path](const ProbeResult& r) {
        --pending_;
        Q_EMIT busyChanged(busy());
        statusBar()->clearMessage();
        if (!r.ok()) {
            reportError(r.error);
            Q_EMIT loadFailed(path, lastError_);
            return;
        }
        openIdentified(path, r.kind);
    });
}

void MainWindow::openIdentified(const QString& path, const FileKind& k) {
    const ModelFamily* family = findFamily(k.family);
    const QString what = QString::fromStdString(k.kind);
    ModelPanel* p = family ? panel(family->name) : nullptr;
    Q_EMIT fileIdentified(path, what);
    if (k.kind == "glimpse.runlog") {
        if (openRun(path)) addRecent(path);
        return;
    }
    if ((k.kind == "glimpse.trace" || k.kind == "glimpse.checkpoint") && p) {
        addRecent(path);
        if (k.kind == "glimpse.trace") return p->openTrace(path);
        p->loadCheckpoint(path);   // first: raising the panel then loads no shipped model
        Q_EMIT p->activateRequested();
        return;
    }
    if (k.kind == "glimpse.episode") return replay_->openEpisode(path);
    if (k.kind == results::kKind) {
        addRecent(path);
        return results_->open(path);
    }
    QString why;
    if (k.kind == "glimpse.trace" || k.kind == "glimpse.checkpoint")
        why = QStringLiteral("a %1 of the family '%2', which has no panel here")
                  .arg(what, QString::fromStdString(k.family));
    else
        why = "a " + what + ", which the GUI does not open";
    reportError(path + " is " + why + ".");
    Q_EMIT loadFailed(path, lastError_);
}

bool MainWindow::openRun(const QString& given) {
    // Either run log name (run.h5, runlog.h5) or the run folder (core/run_files.h).
    const QString path = QString::fromStdString(findRunLog(given.toStdString()));
    QString err;
    if (!trainingPanel_->openRun(path, &err)) {
        reportError(err);
        return false;
    }
    if (auto* dock = qobject_cast<QDockWidget*>(trainingPanel_->parentWidget())) {
        dock->show();
        dock->raise();
        resizeDocks({dock}, {420}, Qt::Horizontal);   // the charts have the main area
    }
    return true;
}

void MainWindow::log(const QString& message) {
    messages_->addItem(QDateTime::currentDateTime().toString("HH:mm:ss  ") + message);
    messages_->scrollToBottom();
}

void MainWindow::reportError(const QString& message) {
    lastError_ = message;
    log("Error: " + message);
    statusBar()->showMessage(message, 8000);
    auto* box = new QMessageBox(QMessageBox::Warning, "Glimpse", message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();   // non-blocking: the app keeps running
}

void MainWindow::openImage(const QString& path) {
    if (isVideoFileName(path.toStdString())) return openVideo(path);
    if (path.endsWith(".h5", Qt::CaseInsensitive) || path.endsWith(".hdf5", Qt::CaseInsensitive))
        return openGlimpseFile(path);
    ++pending_;
    statusBar()->showMessage("Loading " + path + " ...");
    runAsync(
        this, [p = path.toStdString()] { return toRgbImage(loadImageRGB(p)); },
        [this, path](Outcome<widgets::RgbImage> r) {
            --pending_;
            if (!r.ok()) {
                reportError(r.error);
                Q_EMIT loadFailed(path, r.error);
                return;
            }
            closeVideo();
            currentPath_ = path;
            addRecent(path);
            showImage(QFileInfo(path).fileName(), std::move(r.value), QFileInfo(path).absoluteFilePath());
            showSource(propPath_, path);
            Q_EMIT imageLoaded(path);
        });
}

void MainWindow::openDemoImage() {
    closeVideo();
    currentPath_ = QString();
    showImage("demo", toRgbImage(makeDemoImage()), "demo");
    propPath_->setText("built-in demo scene");
    propPath_->setToolTip(QString());
    Q_EMIT imageLoaded(QString());
}

void MainWindow::startDemo(const QString& checkpoint, int entity) {
    openDemoImage();
    if (checkpoint.isEmpty()) {
        log("Demo: no LETR model installed (letr_demo.h5); open a checkpoint to run LETR.");
        return;
    }
    log("Demo: loading the LETR model " + checkpoint + " in the background; it runs on the demo scene "
        "when loaded.");
    LetrInspector* letr = letrInspector();
    letr->loadCheckpoint(checkpoint);
    letr->runWhenReady(entity);
}

void MainWindow::showImage(const QString& label, widgets::RgbImage image, const QString& key,
                           bool keepView, bool pixelExact) {
    propSize_->setText(QStringLiteral("%1 x %2").arg(image.width).arg(image.height));
    if (!keepView) log(QStringLiteral("Opened %1 (%2 x %3)").arg(label).arg(image.width).arg(image.height));
    viewport_->setOverlayTitle(label);
    viewport_->setPixelExact(pixelExact);
    viewport_->setImage(std::move(image), keepView);
    setWindowTitle(label + " - Glimpse");
    if (!keepView) statusBar()->showMessage("Opened " + label, 3000);
    for (ModelPanel* p : panels()) p->sourceChanged(key);
    replay_->sourceChanged(key);
}

bool MainWindow::busy() const {
    if (pending_ > 0 || decodeRunning_ > 0 || replay_->busy() || results_->busy()) return true;
    for (ModelPanel* p : panels())
        if (p->busy()) return true;
    return false;
}

void MainWindow::exportViewPng(const QString& path) {
    if (!viewport_->hasImage()) {
        reportError("Nothing to export: open an image first.");
        Q_EMIT exportFailed(path, lastError_);
        return;
    }
    ++pending_;
    auto image = viewport_->image();   // copies: the worker must not touch widget state
    auto scene = viewport_->scene();
    runAsync(
        this,
        [image = std::move(image), scene = std::move(scene), p = path.toStdString()] {
            // The image with the lines and heatmap of the current view, at image resolution.
            widgets::RgbImage out = widgets::renderSceneAtImageResolution(image, scene);
            cv::Mat rgb(out.height, out.width, CV_8UC3, out.rgb.data());
            saveImagePNG(p, rgb);
        },
        [this, path](Outcome<std::monostate> r) {
            --pending_;
            if (!r.ok()) {
                const QString err = QStringLiteral("Export to %1 failed: %2").arg(path, r.error);
                reportError(err);
                Q_EMIT exportFailed(path, err);
            } else {
                log("Exported view to " + path);
                Q_EMIT exported(path);
            }
        });
}

QStringList MainWindow::recentFiles() const {
    return QSettings().value("recentFiles").toStringList();
}

void MainWindow::addRecent(const QString& path) {
    QStringList list = recentFiles();
    const QString abs = QFileInfo(path).absoluteFilePath();
    list.removeAll(abs);
    list.prepend(abs);
    while (list.size() > kMaxRecent) list.removeLast();
    QSettings().setValue("recentFiles", list);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recentMenu_->clear();
    const QStringList list = recentFiles();
    for (const QString& p : list)
        recentMenu_->addAction(QFileInfo(p).fileName() + "    " + p, this, [this, p] { openImage(p); });
    if (list.isEmpty()) recentMenu_->addAction("(none)")->setEnabled(false);
    else {
        recentMenu_->addSeparator();
        recentMenu_->addAction("Clear list", this, [this] {
            QSettings().remove("recentFiles");
            rebuildRecentMenu();
        });
    }
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const auto urls = e->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile()) openImage(urls.first().toLocalFile());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    QMainWindow::closeEvent(e);
}

// --- video ------------------------------------------------------------------------


void MainWindow::buildVideoBar() {
    videoBar_ = new QToolBar("Video", this);
    videoBar_->setObjectName("toolbar.video");
    playButton_ = new QToolButton(videoBar_);
    playButton_->setText("Play");
    playButton_->setCheckable(true);
    playButton_->setToolTip("Play / pause (Space)");
    playButton_->setShortcut(QKeySequence("Space"));
    frameSlider_ = new QSlider(Qt::Horizontal, videoBar_);
    frameSlider_->setMinimumWidth(300);
    frameLabel_ = new QLabel(videoBar_);
    frameLabel_->setMinimumWidth(110);
    runEachFrame_ = new QCheckBox("Run the model on shown frames", videoBar_);
    runEachFrame_->setToolTip("When paused, run the active panel's model on each frame shown that has no cached trace");
    videoBar_->addWidget(playButton_);
    videoBar_->addWidget(frameSlider_);
    videoBar_->addWidget(frameLabel_);
    videoBar_->addWidget(runEachFrame_);
    addToolBar(Qt::BottomToolBarArea, videoBar_);
    videoBar_->hide();
    playTimer_ = new QTimer(this);
    connect(playTimer_, &QTimer::timeout, this, [this] {
        if (!video_ || decodeRunning_ > 0) return;   // wait for the previous frame
        const int next = videoFrame_ + 1;
        if (next >= video_->frameCount()) return setPlaying(false);
        frameSlider_->setValue(next);
    });
    connect(playButton_, &QToolButton::toggled, this, &MainWindow::setPlaying);
    connect(frameSlider_, &QSlider::valueChanged, this, &MainWindow::showVideoFrame);
}

void MainWindow::runOnShownFrame() {
    ModelPanel* p = activePanel();
    if (runEachFrame_->isChecked() && p && !p->hasTrace() && p->hasModel()) p->run(false);
}

int MainWindow::videoFrameCount() const { return video_ ? video_->frameCount() : 0; }

void MainWindow::closeVideo() {
    setPlaying(false);
    video_.reset();
    videoPath_.clear();
    videoFrame_ = -1;
    if (videoBar_) videoBar_->hide();
}

void MainWindow::setPlaying(bool on) {
    if (on && !video_) on = false;
    if (playButton_->isChecked() != on) {
        const QSignalBlocker b(playButton_);
        playButton_->setChecked(on);
    }
    playButton_->setText(on ? "Pause" : "Play");
    if (on) playTimer_->start(int(1000.0 / std::max(1.0, video_->fps())));
    else playTimer_->stop();
    if (!on && video_) runOnShownFrame();
}

void MainWindow::openVideo(const QString& path) {
    ++pending_;
    statusBar()->showMessage("Opening video " + path + " ...");
    struct Opened {
        std::shared_ptr<VideoReader> reader;
        widgets::RgbImage first;
    };
    runAsync(
        this,
        [p = path.toStdString()] {
            Opened r;
            r.reader = std::make_shared<VideoReader>(p);
            r.first = toRgbImage(r.reader->frame(0));
            return r;
        },
        [this, path](Outcome<Opened> o) {
        --pending_;
        if (!o.ok()) {
            reportError(o.error);
            Q_EMIT loadFailed(path, o.error);
            return;
        }
        Opened& r = o.value;
        closeVideo();
        video_ = r.reader;
        videoPath_ = QFileInfo(path).absoluteFilePath();
        currentPath_ = path;
        addRecent(path);
        showSource(propPath_, path);
        {
            const QSignalBlocker b(frameSlider_);
            frameSlider_->setRange(0, video_->frameCount() - 1);
            frameSlider_->setValue(0);
        }
        videoFrame_ = 0;
        frameLabel_->setText(QStringLiteral("frame 1 / %1").arg(video_->frameCount()));
        videoBar_->show();
        showImage(QFileInfo(path).fileName(), std::move(r.first), videoPath_ + "#0");
        log(QStringLiteral("Video: %1 frames at %2 fps").arg(video_->frameCount()).arg(video_->fps()));
        Q_EMIT videoOpened(path, video_->frameCount());
        Q_EMIT frameShown(0);
    });
}

void MainWindow::showVideoFrame(int index) {
    if (!video_) return;
    index = std::clamp(index, 0, video_->frameCount() - 1);
    if (frameSlider_->value() != index) {
        frameSlider_->setValue(index);   // comes back here
        return;
    }
    if (decodeRunning_ > 0) {   // coalesce: decode the latest request when the current one ends
        decodeWanted_ = index;
        return;
    }
    ++decodeRunning_;
    decodeWanted_ = -1;
    runAsync(
        this, [reader = video_, index] { return toRgbImage(reader->frame(index)); },   // only this worker reads
            [this, index, reader = video_](Outcome<widgets::RgbImage> r) {
                --decodeRunning_;
                if (reader == video_) {
                    if (!r.ok()) {
                        setPlaying(false);
                        reportError(r.error);
                    } else {
                        videoFrame_ = index;
                        frameLabel_->setText(QStringLiteral("frame %1 / %2").arg(index + 1).arg(video_->frameCount()));
                        showImage(QFileInfo(videoPath_).fileName(), std::move(r.value),
                                  videoPath_ + "#" + QString::number(index), true);
                        if (!playTimer_->isActive()) runOnShownFrame();
                        Q_EMIT frameShown(index);
                    }
                    if (decodeWanted_ >= 0 && decodeWanted_ != index) showVideoFrame(decodeWanted_);
                }
            });
}

} // namespace glimpse::app
