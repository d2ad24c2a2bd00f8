#pragma once
#include <QMainWindow>
#include <QString>
#include <QStringList>

class QAction;
class QLabel;
class QListWidget;
class QMenu;
class QFormLayout;

namespace glimpse::widgets {
class ImageViewport;
struct RgbImage;
}

namespace glimpse::app {

class TrainingJob;
class TrainingPanel;

// The main window: menus, the Vulkan image viewport in the centre, dockable panels
// (image properties, messages), status bar with cursor pixel/value and zoom.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    widgets::ImageViewport* viewport() const { return viewport_; }
    QString currentPath() const { return currentPath_; }
    QString lastError() const { return lastError_; }
    QStringList recentFiles() const;
    bool busy() const { return pending_ > 0; }
    TrainingPanel* trainingPanel() const { return trainingPanel_; }
    TrainingJob* trainingJob() const { return trainingJob_; }

public Q_SLOTS:
    // Loads on a worker thread; emits imageLoaded or loadFailed.
    void openImage(const QString& path);
    void openDemoImage();
    // Renders the current view offscreen at the image's resolution and writes a PNG
    // (atomically) on a worker thread; emits exported or exportFailed.
    void exportViewPng(const QString& path);
    // Follows a run log in the Training panel (live or finished; a second one overlays).
    bool openRun(const QString& path);

Q_SIGNALS:
    void imageLoaded(const QString& path);
    void loadFailed(const QString& path, const QString& message);
    void exported(const QString& path);
    void exportFailed(const QString& path, const QString& message);

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;
    void closeEvent(QCloseEvent* e) override;

private:
    void buildMenus();
    void buildDocks();
    void showImage(const QString& label, widgets::RgbImage image);
    void reportError(const QString& message);
    void log(const QString& message);
    void addRecent(const QString& path);
    void rebuildRecentMenu();

    widgets::ImageViewport* viewport_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QListWidget* messages_ = nullptr;
    QLabel* propPath_ = nullptr;
    QLabel* propSize_ = nullptr;
    QLabel* cursorLabel_ = nullptr;
    QLabel* zoomLabel_ = nullptr;
    QString currentPath_;
    QString lastError_;
    int pending_ = 0;
    TrainingJob* trainingJob_ = nullptr;       // owned here: runs outlive the panel
    TrainingPanel* trainingPanel_ = nullptr;
};

} // namespace glimpse::app
