#include "app/mainwindow.h"

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
#include <QFutureWatcher>
#include <QKeySequence>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QScrollArea>
#include <QSettings>
#include <QCheckBox>
#include <QSlider>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QtConcurrent/QtConcurrentRun>

#include <opencv2/core.hpp>

#include "app/training/coat_runner.h"
#include "app/training/letr_runner.h"
#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "core/io/video.h"
#include "app/letr_inspector.h"
#include "app/coat_inspector.h"
#include "renderer/renderer.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kMaxRecent = 10;

widgets::RgbImage toRgbImage(const cv::Mat& rgb) {
    widgets::RgbImage im;
    im.width = rgb.cols;
    im.height = rgb.rows;
    im.rgb.resize(size_t(rgb.cols) * rgb.rows * 3);
    for (int y = 0; y < rgb.rows; ++y)
        std::memcpy(&im.rgb[size_t(y) * rgb.cols * 3], rgb.ptr<uint8_t>(y), size_t(rgb.cols) * 3);
    return im;
}

// The family of a Glimpse trace file ("letr", "coat", ...), empty when it is not one (the
// opener then reports the problem). Reads one attribute: cheap enough for the UI thread.
QString traceFamily(const QString& path) {
    try {
        h5::File f = h5::openGlimpse(path.toStdString(), "glimpse.trace", 1);
        if (f.hasGroup("meta")) return QString::fromStdString(f.group("meta").attrString("family"));
    } catch (const std::exception&) {
    }
    return {};
}

struct LoadResult {
    widgets::RgbImage image;
    QString error;
};

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
    setCentralWidget(split);
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

    // The CoaT demo checkpoint (Fashion-MNIST), when installed, is loaded at start (worker
    // thread); the LETR demo checkpoint is loaded by startDemo or main().
    const QString coatDemo = defaultCoatCheckpoint();
    if (!coatDemo.isEmpty()) coat_->loadCheckpoint(coatDemo);

    QSettings settings;
    if (!restoreGeometry(settings.value("window/geometry").toByteArray())) resize(1280, 860);
    restoreState(settings.value("window/state").toByteArray());
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu("&File");
    QAction* open = file->addAction("&Open image...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, "Open image", QString(),
            "Images (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.webp *.ppm *.pgm);;All files (*)");
        if (!path.isEmpty()) openImage(path);
    });
    open->setShortcut(QKeySequence::Open);
    file->addAction("Open &demo image", this, &MainWindow::openDemoImage);
    file->addAction("Open r&un...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open run log", QString(),
                                                          "Run logs (*.h5);;All files (*)");
        if (!path.isEmpty()) openRun(path);
    });
    file->addAction("Open &video...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, "Open video", QString(),
            "Videos (*.mp4 *.avi *.mkv *.mov *.webm *.m4v *.mpg *.mpeg *.wmv *.ogv *.mjpeg);;All files (*)");
        if (!path.isEmpty()) openVideo(path);
    });
    file->addAction("Open &trace...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open LETR trace", QString(),
                                                          "Glimpse traces (*.h5);;All files (*)");
        if (!path.isEmpty()) inspector_->openTrace(path);
    });
    file->addAction("Open CoaT trace...", this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open CoaT trace", QString(),
                                                          "Glimpse traces (*.h5);;All files (*)");
        if (!path.isEmpty()) coat_->openTrace(path);
    });
    recentMenu_ = file->addMenu("Open &recent");
    rebuildRecentMenu();
    file->addSeparator();
    QAction* exportAct = file->addAction("&Export view as PNG...", this, [this] {
        if (!viewport_->hasImage()) {
            reportError("Nothing to export: open an image first.");
            return;
        }
        const QString path = QFileDialog::getSaveFileName(this, "Export view as PNG",
                                                          "view.png", "PNG images (*.png)");
        if (!path.isEmpty()) exportViewPng(path);
    });
    exportAct->setShortcut(QKeySequence("Ctrl+E"));
    file->addAction("&Save trace...", QKeySequence::Save, this, [this] {
        if (!inspector_->hasTrace()) return reportError("No trace to save: run LETR first.");
        const QString path = QFileDialog::getSaveFileName(this, "Save LETR trace", "trace.h5",
                                                          "Glimpse traces (*.h5)");
        if (!path.isEmpty()) inspector_->saveTrace(path);
    });
    file->addAction("Save CoaT trace...", this, [this] {
        if (!coat_->hasTrace()) return reportError("No CoaT trace to save: run CoaT first.");
        const QString path = QFileDialog::getSaveFileName(this, "Save CoaT trace", "coat_trace.h5",
                                                          "Glimpse traces (*.h5)");
        if (!path.isEmpty()) coat_->saveTrace(path);
    });
    file->addAction("Export &lines...", this, [this] {
        if (!inspector_->hasTrace()) return reportError("No lines to export: run LETR first.");
        const QString path = QFileDialog::getSaveFileName(this, "Export lines of the current layer",
                                                          "lines.json", "JSON (*.json);;CSV (*.csv)");
        if (!path.isEmpty()) inspector_->exportLines(path);
    });
    file->addSeparator();
    QAction* quit = file->addAction("&Quit", this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

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

    QMenu* model = menuBar()->addMenu("&Model");
    model->addAction("Open &checkpoint...", this, [this] { inspector_->openCheckpointDialog(); });
    QAction* runAct = model->addAction("&Run LETR", this, [this] { inspector_->run(true); });
    runAct->setShortcut(QKeySequence("Ctrl+R"));
    model->addSeparator();
    model->addAction("Open Co&aT checkpoint...", this, [this] { coat_->openCheckpointDialog(); });
    QAction* runCoat = model->addAction("Run C&oaT", this, [this] { coat_->run(true); });
    runCoat->setShortcut(QKeySequence("Ctrl+Shift+R"));
    model->addSeparator();
    QAction* cancelAct = model->addAction("&Cancel run", this, [this] {
        inspector_->cancel();
        coat_->cancel();
    });
    cancelAct->setShortcut(QKeySequence("Ctrl+."));
    QToolBar* tools = addToolBar("Model");
    tools->setObjectName("toolbar.model");
    tools->addAction(runAct);
    tools->addAction(runCoat);
    tools->addAction(cancelAct);

    QMenu* help = menuBar()->addMenu("&Help");
    help->addAction("&About Glimpse", this, [this] {
        QMessageBox::about(this, "About Glimpse",
                           QStringLiteral("<b>Glimpse %1</b><p>A desktop lab for attention models "
                                          "and world models.</p>").arg(GLIMPSE_VERSION));
    });
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

    auto* letrDock = new QDockWidget("LETR", this);
    letrDock->setObjectName("dock.letr");
    inspector_ = new LetrInspector(viewport_, compare_, letrDock);
    letrDock->setWidget(inspector_);
    addDockWidget(Qt::RightDockWidgetArea, letrDock);
    connect(inspector_, &LetrInspector::failed, this, &MainWindow::reportError);
    connect(inspector_, &LetrInspector::message, this, [this](const QString& m) {
        log(m);
        statusBar()->showMessage(m, 4000);
    });
    connect(inspector_, &LetrInspector::showImageRequested, this,
            [this](const QString& label, const widgets::RgbImage& image) {
                closeVideo();
                currentPath_ = QString();
                propPath_->setText(label);
                showImage(label, image, inspector_->sourceKey());
            });

    // CoaT panel, tabbed with the LETR one; the visible tab draws the shared viewport.
    auto* coatDock = new QDockWidget("CoaT", this);
    coatDock->setObjectName("dock.coat");
    // In a scroll area: the panel is tall (selectors, top-5, gallery) and must not force the
    // window's minimum height.
    auto* coatScroll = new QScrollArea(coatDock);
    coatScroll->setWidgetResizable(true);
    coatScroll->setFrameShape(QFrame::NoFrame);
    coatScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    coat_ = new CoatInspector(viewport_, compare_, coatScroll);
    coatScroll->setWidget(coat_);
    coatDock->setWidget(coatScroll);
    addDockWidget(Qt::RightDockWidgetArea, coatDock);
    tabifyDockWidget(letrDock, coatDock);
    letrDock->raise();
    coat_->setActive(false);
    connect(coat_, &CoatInspector::failed, this, &MainWindow::reportError);
    connect(coat_, &CoatInspector::message, this, [this](const QString& m) {
        log(m);
        statusBar()->showMessage(m, 4000);
    });
    connect(coat_, &CoatInspector::showImageRequested, this,
            [this](const QString& label, const widgets::RgbImage& image) {
                closeVideo();
                currentPath_ = QString();
                propPath_->setText(label + " (CoaT input crop)");
                showImage(label, image, coat_->sourceKey());
            });
    connect(coat_, &CoatInspector::activateRequested, this, [this, coatDock, propsDock] {
        const bool first = !coatDock->property("glimpse.sized").toBool();
        coatDock->show();
        coatDock->raise();
        if (first) {   // once: give the panel most of the dock column's height
            coatDock->setProperty("glimpse.sized", true);
            // Deferred (the dock layout settles after the dock is raised); both docks of the
            // column are named so that the Image dock gives up its spare height.
            QTimer::singleShot(0, this, [this, coatDock, propsDock] {
                resizeDocks({propsDock, coatDock}, {propsDock->minimumSizeHint().height(), height()}, Qt::Vertical);
            });
        }
        coat_->setActive(true);
    });
    connect(coatDock, &QDockWidget::visibilityChanged, this, [this](bool v) { coat_->setActive(v); });
    connect(letrDock, &QDockWidget::visibilityChanged, this, [this, coatDock](bool v) {
        if (v && !coatDock->isVisible()) inspector_->redraw();
    });

    auto* msgDock = new QDockWidget("Messages", this);
    msgDock->setObjectName("dock.messages");
    messages_ = new QListWidget(msgDock);
    msgDock->setWidget(messages_);
    addDockWidget(Qt::BottomDockWidgetArea, msgDock);
    msgDock->setMaximumHeight(160);

    trainingJob_ = new TrainingJob(modelRunner(), this);   // LETR or CoaT, by the panel's Model
    auto* trainDock = new QDockWidget("Training", this);
    trainDock->setObjectName("dock.training");
    trainingPanel_ = new TrainingPanel(trainingJob_, trainDock);
    trainDock->setWidget(trainingPanel_);
    addDockWidget(Qt::RightDockWidgetArea, trainDock);
    tabifyDockWidget(propsDock, trainDock);
    trainDock->hide();   // View > Training, File > Open run... or a started run shows it
    connect(trainingPanel_, &TrainingPanel::message, this, &MainWindow::log);
    connect(trainingPanel_, &TrainingPanel::errorOccurred, this, &MainWindow::reportError);
}

bool MainWindow::openRun(const QString& path) {
    QString err;
    if (!trainingPanel_->openRun(path, &err)) {
        reportError(err);
        return false;
    }
    if (auto* dock = qobject_cast<QDockWidget*>(trainingPanel_->parentWidget())) {
        dock->show();
        dock->raise();
        resizeDocks({dock}, {std::max(560, width() / 2)}, Qt::Horizontal);
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
    if (path.endsWith(".h5", Qt::CaseInsensitive)) {
        if (traceFamily(path) == "coat") return coat_->openTrace(path);
        return inspector_->openTrace(path);
    }
    ++pending_;
    statusBar()->showMessage("Loading " + path + " ...");
    auto* watcher = new QFutureWatcher<LoadResult>(this);
    connect(watcher, &QFutureWatcher<LoadResult>::finished, this, [this, watcher, path] {
        LoadResult r = watcher->result();
        watcher->deleteLater();
        --pending_;
        if (!r.error.isEmpty()) {
            reportError(r.error);
            Q_EMIT loadFailed(path, r.error);
            return;
        }
        closeVideo();
        currentPath_ = path;
        addRecent(path);
        showImage(QFileInfo(path).fileName(), std::move(r.image), QFileInfo(path).absoluteFilePath());
        propPath_->setText(path);
        Q_EMIT imageLoaded(path);
    });
    watcher->setFuture(QtConcurrent::run([p = path.toStdString()] {
        LoadResult r;
        try {
            r.image = toRgbImage(loadImageRGB(p));
        } catch (const std::exception& e) {
            r.error = QString::fromStdString(e.what());
        }
        return r;
    }));
}

void MainWindow::openDemoImage() {
    closeVideo();
    currentPath_ = QString();
    showImage("demo", toRgbImage(makeDemoImage()), "demo");
    propPath_->setText("built-in demo scene");
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
    inspector_->loadCheckpoint(checkpoint);
    inspector_->runWhenReady(entity);
}

void MainWindow::showImage(const QString& label, widgets::RgbImage image, const QString& key,
                           bool keepView) {
    propSize_->setText(QStringLiteral("%1 x %2").arg(image.width).arg(image.height));
    if (!keepView) log(QStringLiteral("Opened %1 (%2 x %3)").arg(label).arg(image.width).arg(image.height));
    viewport_->setOverlayTitle(label);
    viewport_->setImage(std::move(image), keepView);
    setWindowTitle(label + " - Glimpse");
    if (!keepView) statusBar()->showMessage("Opened " + label, 3000);
    inspector_->sourceChanged(key);
    coat_->sourceChanged(key);
}

bool MainWindow::busy() const { return pending_ > 0 || decodeRunning_ > 0 || inspector_->busy() || coat_->busy(); }

void MainWindow::exportViewPng(const QString& path) {
    if (!viewport_->hasImage()) {
        reportError("Nothing to export: open an image first.");
        Q_EMIT exportFailed(path, lastError_);
        return;
    }
    ++pending_;
    auto image = viewport_->image();   // copies: the worker must not touch widget state
    auto scene = viewport_->scene();
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher, path] {
        const QString err = watcher->result();
        watcher->deleteLater();
        --pending_;
        if (!err.isEmpty()) {
            reportError(err);
            Q_EMIT exportFailed(path, err);
        } else {
            log("Exported view to " + path);
            Q_EMIT exported(path);
        }
    });
    watcher->setFuture(QtConcurrent::run([image = std::move(image), scene = std::move(scene),
                                          p = path.toStdString()]() -> QString {
        try {
            // The image with the lines and heatmap of the current view, at image resolution.
            widgets::RgbImage out = widgets::renderSceneAtImageResolution(image, scene);
            cv::Mat rgb(out.height, out.width, CV_8UC3, out.rgb.data());
            saveImagePNG(p, rgb);
            return {};
        } catch (const std::exception& e) {
            return QStringLiteral("Export to %1 failed: %2").arg(QString::fromStdString(p), e.what());
        }
    }));
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

namespace {
struct VideoOpenResult {
    std::shared_ptr<VideoReader> reader;
    widgets::RgbImage first;
    QString error;
};
struct FrameResult {
    widgets::RgbImage image;
    QString error;
};
} // namespace

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
    runEachFrame_ = new QCheckBox("Run LETR on shown frames", videoBar_);
    runEachFrame_->setToolTip("When paused, run LETR on each frame shown that has no cached trace");
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
    if (!on && video_ && runEachFrame_->isChecked() && !inspector_->hasTrace() && inspector_->hasModel())
        inspector_->run(false);
}

void MainWindow::openVideo(const QString& path) {
    ++pending_;
    statusBar()->showMessage("Opening video " + path + " ...");
    auto* watcher = new QFutureWatcher<VideoOpenResult>(this);
    connect(watcher, &QFutureWatcher<VideoOpenResult>::finished, this, [this, watcher, path] {
        VideoOpenResult r = watcher->result();
        watcher->deleteLater();
        --pending_;
        if (!r.error.isEmpty()) {
            reportError(r.error);
            Q_EMIT loadFailed(path, r.error);
            return;
        }
        closeVideo();
        video_ = r.reader;
        videoPath_ = QFileInfo(path).absoluteFilePath();
        currentPath_ = path;
        addRecent(path);
        propPath_->setText(path);
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
    watcher->setFuture(QtConcurrent::run([p = path.toStdString()] {
        VideoOpenResult r;
        try {
            r.reader = std::make_shared<VideoReader>(p);
            r.first = toRgbImage(r.reader->frame(0));
        } catch (const std::exception& e) {
            r.error = QString::fromStdString(e.what());
        }
        return r;
    }));
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
    auto* watcher = new QFutureWatcher<FrameResult>(this);
    connect(watcher, &QFutureWatcher<FrameResult>::finished, this,
            [this, watcher, index, reader = video_] {
                FrameResult r = watcher->result();
                watcher->deleteLater();
                --decodeRunning_;
                if (reader == video_) {
                    if (!r.error.isEmpty()) {
                        setPlaying(false);
                        reportError(r.error);
                    } else {
                        videoFrame_ = index;
                        frameLabel_->setText(QStringLiteral("frame %1 / %2").arg(index + 1).arg(video_->frameCount()));
                        showImage(QFileInfo(videoPath_).fileName(), std::move(r.image),
                                  videoPath_ + "#" + QString::number(index), true);
                        if (!playTimer_->isActive() && runEachFrame_->isChecked() && !inspector_->hasTrace() &&
                            inspector_->hasModel())
                            inspector_->run(false);
                        Q_EMIT frameShown(index);
                    }
                    if (decodeWanted_ >= 0 && decodeWanted_ != index) showVideoFrame(decodeWanted_);
                }
            });
    watcher->setFuture(QtConcurrent::run([reader = video_, index] {
        FrameResult r;
        try {
            r.image = toRgbImage(reader->frame(index));   // only this worker reads: serialized
        } catch (const std::exception& e) {
            r.error = QString::fromStdString(e.what());
        }
        return r;
    }));
}

} // namespace glimpse::app
