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
#include <QSettings>
#include <QStatusBar>
#include <QtConcurrent/QtConcurrentRun>

#include <opencv2/core.hpp>

#include "app/training/letr_runner.h"
#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "core/error.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
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

struct LoadResult {
    widgets::RgbImage image;
    QString error;
};

} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("Glimpse");
    setAcceptDrops(true);
    viewport_ = new widgets::ImageViewport(this);
    setCentralWidget(viewport_);
    buildDocks();
    buildMenus();

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

    auto* msgDock = new QDockWidget("Messages", this);
    msgDock->setObjectName("dock.messages");
    messages_ = new QListWidget(msgDock);
    msgDock->setWidget(messages_);
    addDockWidget(Qt::BottomDockWidgetArea, msgDock);
    msgDock->setMaximumHeight(160);

    trainingJob_ = new TrainingJob(letrRunner(), this);
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
        currentPath_ = path;
        addRecent(path);
        showImage(QFileInfo(path).fileName(), std::move(r.image));
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
    currentPath_ = QString();
    showImage("demo", toRgbImage(makeDemoImage()));
    propPath_->setText("built-in demo scene");
    Q_EMIT imageLoaded(QString());
}

void MainWindow::showImage(const QString& label, widgets::RgbImage image) {
    propSize_->setText(QStringLiteral("%1 x %2").arg(image.width).arg(image.height));
    log(QStringLiteral("Opened %1 (%2 x %3)").arg(label).arg(image.width).arg(image.height));
    viewport_->setOverlayTitle(label);
    viewport_->setImage(std::move(image));
    setWindowTitle(label + " - Glimpse");
    statusBar()->showMessage("Opened " + label, 3000);
}

void MainWindow::exportViewPng(const QString& path) {
    if (!viewport_->hasImage()) {
        reportError("Nothing to export: open an image first.");
        Q_EMIT exportFailed(path, lastError_);
        return;
    }
    ++pending_;
    auto image = viewport_->image();   // copy: the worker must not touch widget state
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
    watcher->setFuture(QtConcurrent::run([image = std::move(image), p = path.toStdString()]() -> QString {
        try {
            render::OffscreenTarget target(image.width, image.height);
            target.renderer().setImage(image.width, image.height, 3, image.rgb.data());
            target.renderer().setView(render::View::oneToOne(image.width, image.height));
            render::Overlay none;
            none.visible = false;
            target.renderer().setOverlay(none);
            std::vector<uint8_t> rgba = target.render();
            cv::Mat rgb(image.height, image.width, CV_8UC3);
            for (size_t i = 0, n = size_t(image.width) * image.height; i < n; ++i) {
                rgb.data[i * 3 + 0] = rgba[i * 4 + 0];
                rgb.data[i * 3 + 1] = rgba[i * 4 + 1];
                rgb.data[i * 3 + 2] = rgba[i * 4 + 2];
            }
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

} // namespace glimpse::app
