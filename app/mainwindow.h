#pragma once
#include <QMainWindow>
#include <QString>
#include <QStringList>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "widgets/viewport.h"

class QAction;
class QLabel;
class QListWidget;
class QMenu;
class QFormLayout;
class QSlider;
class QTimer;
class QToolBar;
class QToolButton;
class QCheckBox;
class QDockWidget;

namespace glimpse {
class VideoReader;
struct FileKind;
}


namespace glimpse::app {

class FileProbe;
class TrainingJob;
class TrainingPanel;
class LetrInspector;
class CoatInspector;
class ModelPanel;
class ReplayPanel;
class ResultsPanel;
struct ModelFamily;

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
    TrainingPanel* trainingPanel() const { return trainingPanel_; }
    TrainingJob* trainingJob() const { return trainingJob_; }
    bool busy() const;
    // The model panels, one per family that has one (app/family.h), in registry order.
    std::vector<ModelPanel*> panels() const;
    ModelPanel* panel(const std::string& family) const;
    // The panel that draws the viewport now (its dock is the raised one).
    ModelPanel* activePanel() const;
    LetrInspector* letrInspector() const;
    CoatInspector* coatInspector() const;
    widgets::ImageViewport* compareViewport() const { return compare_; }
    // Video: frames of the open video (0 when the current source is not a video).
    int videoFrameCount() const;
    int videoFrame() const { return videoFrame_; }
    // The replay viewer (episodes opened by openImage / openGlimpseFile show there).
    ReplayPanel* replayPanel() const { return replay_; }
    // Identifies .h5 files in a child process before they are opened (app/file_probe.h).
    FileProbe* fileProbe() const { return probe_; }
    // The Results dock (results files open there: app/results/results_panel.h).
    ResultsPanel* resultsPanel() const { return results_; }

public Q_SLOTS:
    // Loads on a worker thread; emits imageLoaded or loadFailed.
    void openImage(const QString& path);
    void openDemoImage();
    // First launch: shows the demo scene; with a LETR checkpoint (main passes --checkpoint or
    // the shipped letr_demo.h5) loads it on a worker thread, runs LETR on the scene once it is
    // loaded and selects `entity` (-1: the highest-scoring line), saying so in Messages.
    void startDemo(const QString& checkpoint, int entity = -1);
    // Opens a video (OpenCV) on a worker thread and shows frame 0; emits videoOpened or
    // loadFailed. Files with a video extension given to openImage() come here too.
    void openVideo(const QString& path);
    // Shows frame `index` of the open video (decoded on a worker thread; emits frameShown).
    void showVideoFrame(int index);
    void setPlaying(bool on);
    // Renders the current view offscreen at the image's resolution and writes a PNG
    // (atomically) on a worker thread; emits exported or exportFailed.
    void exportViewPng(const QString& path);
    // Follows a run log in the Training panel (live or finished; a second one overlays).
    bool openRun(const QString& path);
    // Opens a Glimpse HDF5 file by its kind and family: a trace in its family's panel, a run
    // log in the Training panel, a checkpoint into its family's panel, an episode in the replay
    // viewer (opened on a worker thread); anything else is reported. The kind is read by a child
    // process first (fileProbe()), so a file that crashes or hangs libhdf5 is only reported;
    // emits loadFailed when the file is refused.
    void openGlimpseFile(const QString& path);
    // Shows `message` in Messages, the status bar and a non-blocking box; lastError() keeps it.
    void reportError(const QString& message);

Q_SIGNALS:
    void imageLoaded(const QString& path);
    void loadFailed(const QString& path, const QString& message);
    void exported(const QString& path);
    void exportFailed(const QString& path, const QString& message);
    void videoOpened(const QString& path, int frames);
    void frameShown(int index);
    void busyChanged(bool busy);
    // An .h5 file's kind was read (before it is opened by kind): "glimpse.checkpoint", ...
    void fileIdentified(const QString& path, const QString& kind);

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;
    void closeEvent(QCloseEvent* e) override;

private:
    void buildMenus();
    void buildDocks();
    // Shows `image` (keepView: same view as before, e.g. the next video frame; pixelExact:
    // nearest-neighbour at every zoom, for game frames) and tells every panel the source `key`.
    void showImage(const QString& label, widgets::RgbImage image, const QString& key = QString(),
                   bool keepView = false, bool pixelExact = false);
    void buildVideoBar();
    void closeVideo();
    void runOnShownFrame();   // "Run the model on shown frames": the active panel, when it has no trace
    void log(const QString& message);
    int messagesDefaultHeight() const;   // the Messages dock on a first start: five lines
    void buildPanelDocks(QDockWidget* below);
    void connectPanel(ModelPanel* panel, QDockWidget* dock);
    void activatePanel(ModelPanel* panel);
    void buildFileMenu();
    void buildModelMenu();
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void buildReplayDock(QDockWidget* beside);
    void buildResultsDock();
    void openIdentified(const QString& path, const FileKind& k);

    widgets::ImageViewport* viewport_ = nullptr;
    widgets::ImageViewport* compare_ = nullptr;
    struct PanelSlot {
        const ModelFamily* family;
        ModelPanel* panel;
        QDockWidget* dock;
    };
    std::vector<PanelSlot> panels_;
    std::pair<QDockWidget*, QDockWidget*> panelColumn_{nullptr, nullptr};   // the Image dock, the panels' first dock
    std::shared_ptr<VideoReader> video_;
    QString videoPath_;
    int videoFrame_ = -1;
    int decodeRunning_ = 0;
    int decodeWanted_ = -1;
    QToolBar* videoBar_ = nullptr;
    QSlider* frameSlider_ = nullptr;
    QLabel* frameLabel_ = nullptr;
    QToolButton* playButton_ = nullptr;
    QCheckBox* runEachFrame_ = nullptr;
    QTimer* playTimer_ = nullptr;
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
    ReplayPanel* replay_ = nullptr;
    ResultsPanel* results_ = nullptr;
    FileProbe* probe_ = nullptr;
};

} // namespace glimpse::app
