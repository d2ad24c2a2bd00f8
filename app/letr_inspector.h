#pragma once
// LetrInspector: the LETR panel of the main window (issue 4). It owns the model and the
// current LetrTrace, runs LETR on a worker thread on the image the viewport shows, and turns
// the trace into plain buffers for the viewport through LetrView: a layer stepper (coarse
// 1..L then fine 1..L), score threshold, head, colour map, opacity, the selected entity, an
// entity table, and a compare pane (another layer, or OpenCV's LSD). The pattern for every
// model's inspector: panel state here, drawing in widgets/ImageViewport, logic in *_view.
#include <QHash>
#include <QString>
#include <QWidget>
#include <memory>
#include <mutex>
#include <vector>

#include "app/letr_view.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;

namespace glimpse::letr {
class LetrModel;
}
namespace glimpse::widgets {
class ImageViewport;
class LayerStepper;
struct RgbImage;
}

namespace glimpse::app {

// letr_demo.h5 in $GLIMPSE_RESOURCES when that is set (only there), else in
// <exe dir>/../share/glimpse/, else in the source tree's resources/; empty when none exists.
QString defaultLetrCheckpoint();

class LetrInspector : public QWidget {
    Q_OBJECT
public:
    // `viewport` shows the image and the trace; `compare` (may be null) is the second pane.
    LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                  QWidget* parent = nullptr);
    ~LetrInspector() override;

    // --- model ---
    bool hasModel() const { return bool(model_); }
    bool modelLoading() const { return loadingModel_ > 0; }
    QString checkpointPath() const { return checkpoint_; }
    // --- state ---
    bool running() const { return running_; }
    // A run started while a cancelled pass is still finishing waits for it (one pass per model
    // at a time): true while that is the case, as far as the UI thread knows.
    bool queued() const { return running_ && abandoned_ > 0; }
    // Cancelled passes still finishing on the worker thread (their results are dropped).
    int abandonedRuns() const { return abandoned_; }
    // True while runWhenReady() waits for a model or an image.
    bool runPending() const { return pendingRun_; }
    // The one-line run state shown under the progress bar ("" when idle).
    QString runStatus() const;
    bool busy() const { return running_ || loadingModel_ > 0 || ioPending_ > 0; }
    bool hasTrace() const { return bool(view_); }
    std::shared_ptr<const letr::LetrTrace> trace() const;
    const LetrViewSettings& settings() const { return settings_; }
    int positionCount() const;
    widgets::LayerStepper* stepper() const { return stepper_; }
    QTableWidget* entityTable() const { return table_; }
    // Entities listed in the table, in the table's current (sorted) order.
    std::vector<int> tableEntities() const;
    // Where the current image came from (a path, "path#frame" for video frames); traces are
    // cached per key.
    QString sourceKey() const { return sourceKey_; }
    // The message of the last failure (empty if none yet).
    QString lastFailure() const { return lastFailure_; }

public Q_SLOTS:
    void openCheckpointDialog();
    void loadCheckpoint(const QString& path);       // worker thread
    void setModel(std::shared_ptr<letr::LetrModel> model, const QString& label);
    // Runs LETR on the viewport's image (worker thread). Without a model it asks for a
    // checkpoint (a dialog unless `interactive` is false, then failed() is emitted).
    void run(bool interactive = true);
    // Abandons the running pass: the UI returns to idle at once, its result is dropped.
    void cancel();
    // Runs LETR once a model is loaded and an image is shown (at once when both are; once),
    // then selects `entity`: >= 0 that entity, -1 the highest-scoring entity of the shown
    // layer, -2 leaves the selection alone. Dropped when the checkpoint fails to load or another
    // image is shown before it runs (the run belongs to the image it was asked for).
    void runWhenReady(int entity = -2);
    // The viewport now shows a different image; `key` identifies it (see sourceKey()).
    void sourceChanged(const QString& key);
    void setTrace(std::shared_ptr<const letr::LetrTrace> trace);
    void clearTrace();
    void saveTrace(const QString& path);            // worker thread, atomic
    void openTrace(const QString& path);            // worker thread; shows the trace's image
    void exportLines(const QString& path);          // current layer's visible lines, .json/.csv

    void setPosition(int index);
    void setHead(int head);                          // -1 = mean
    void setEntity(int entity);                      // -1 = none
    void setThreshold(double t);
    void setColormap(render::Colormap c);
    void setOpacity(double opacity);
    // Compare pane: -2 off, -1 LSD, >= 0 a layer position.
    void setCompare(int mode);
    // Draws this panel's scene again (the viewport is shared with other panels).
    void redraw();

Q_SIGNALS:
    void checkpointLoaded(const QString& path);
    void traceReady();           // a trace is shown (after run, open or cache hit)
    void traceSaved(const QString& path);
    void linesExported(const QString& path);
    void failed(const QString& message);
    void busyChanged(bool busy);
    void viewUpdated();          // the viewport's scene was rebuilt
    void message(const QString& text);
    // Opening a trace wants its image shown (the main window shows it and calls sourceChanged).
    void showImageRequested(const QString& label, const widgets::RgbImage& image);

private:
    void buildUi();
    void refresh();             // rebuild the scene(s)
    void refillTable();
    void refreshCompare();
    void updateControls();
    void fail(const QString& message);
    void startPendingRun();
    void selectAfterRun(int entity);

    widgets::ImageViewport* viewport_;
    widgets::ImageViewport* compare_;
    std::shared_ptr<letr::LetrModel> model_;
    std::shared_ptr<std::mutex> modelMutex_;
    QString checkpoint_;
    std::unique_ptr<LetrView> view_;
    LetrViewSettings settings_;
    int compareMode_ = -2;
    QString sourceKey_;
    QString lastFailure_;
    QHash<QString, std::shared_ptr<const letr::LetrTrace>> cache_;
    QStringList cacheOrder_;
    QHash<QString, std::shared_ptr<std::vector<eval::ScoredLine>>> lsdCache_;
    bool running_ = false;
    int runGeneration_ = 0;
    int abandoned_ = 0;          // cancelled passes whose workers have not finished
    bool pendingRun_ = false;    // runWhenReady() waiting
    int pendingEntity_ = -2;
    // The image runWhenReady() was asked for: the one shown then, or (none shown yet, e.g. a
    // file still loading) the next one shown.
    QString pendingSource_;
    bool pendingBound_ = false;
    int autoRunGeneration_ = -1; // the run started by runWhenReady(), and what it selects
    int autoEntity_ = -2;
    int loadingModel_ = 0;
    int ioPending_ = 0;
    bool updating_ = false;
    bool syncing_ = false;

    QLabel* modelLabel_ = nullptr;
    QPushButton* runButton_ = nullptr;
    QPushButton* cancelButton_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* runStatus_ = nullptr;
    widgets::LayerStepper* stepper_ = nullptr;
    QSlider* threshold_ = nullptr;
    QLabel* thresholdLabel_ = nullptr;
    QComboBox* head_ = nullptr;
    QComboBox* colormap_ = nullptr;
    QSlider* opacity_ = nullptr;
    QSpinBox* entity_ = nullptr;
    QComboBox* compareBox_ = nullptr;
    QTableWidget* table_ = nullptr;
};

} // namespace glimpse::app
