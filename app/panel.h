#pragma once
// ModelPanel: what every model family's inspector panel shares (LETR, CoaT, and the families to
// come). A family's panel derives from it and provides a few hooks (load a checkpoint, run the
// model on an image, save/load a trace, build its view); the base does the rest the same way
// for all of them:
//   - the model: a checkpoint loaded on a worker thread, a "Checkpoint..." button and a label;
//   - runs: on a worker thread, one pass per model at a time, a busy bar and a status line;
//     cancel drops the pass's result at once (LibTorch cannot interrupt a forward pass, so a
//     run started meanwhile is queued behind it), runWhenReady() runs once model and image are
//     there (the demo, --run-letr, --run-coat);
//   - the trace cache: traces per source key (an image path, "video#frame", a trace file), so
//     going back to an image shows its trace at once;
//   - save/open trace files on a worker thread, with errors that name the file, keeping the
//     trace shown when opening fails;
//   - the compare pane (a second viewport beside the main one) with synchronized pan/zoom;
//   - activation: panels share the viewport, and only the active one draws it.
// The main window holds a list of panels and broadcasts source changes, cancel and busy state.
#include <QHash>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <opencv2/core.hpp>

#include "renderer/renderer.h"
#include "widgets/viewport.h"

class QComboBox;
class QTableWidget;
class QFormLayout;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QSlider;
class QVBoxLayout;

namespace glimpse::app {

// Copies between the viewport's RGB8 image and an OpenCV RGB matrix.
cv::Mat toMat(const widgets::RgbImage& image);
widgets::RgbImage toRgbImage(const cv::Mat& rgb);

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    using Erased = std::shared_ptr<const void>;   // a family's trace (or model), type-erased
    struct OpenedTrace {
        Erased trace;
        widgets::RgbImage image;   // what the viewport shows for it
    };
    // What a family gives the base: names and its model and trace I/O. The functions run on
    // worker threads and must only use their arguments; they throw glimpse::Error on bad input.
    struct Spec {
        QString title;             // "LETR": used in buttons and messages
        QString runTip;            // the Run button's tool tip
        int cacheSize = 16;        // traces kept (per source key)
        QString traceKeyPrefix;    // source keys of opened trace files: prefix + absolute path
        std::function<std::shared_ptr<void>(const std::string& path)> loadModel;
        std::function<Erased(void* model, const cv::Mat& rgb)> runModel;
        std::function<void(const void* trace, const std::string& path)> saveTrace;   // atomic
        std::function<OpenedTrace(const std::string& path)> loadTrace;
        // The model label's text (UI thread): the model and the checkpoint's file name.
        std::function<QString(const void* model, const QString& fileName)> describeModel;
        // The message after a run (e.g. "LETR finished in 80 ms (1000 entities)").
        std::function<QString(const void* trace, double ms)> describeRun;
    };
    ModelPanel(Spec spec, widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
               QWidget* parent = nullptr);
    ~ModelPanel() override;

    QString title() const { return spec_.title; }
    // Adds the family's own File menu actions (e.g. LETR's "Export lines...").
    virtual void addFileActions(QMenu* file) { (void)file; }
    // --- model ---
    bool hasModel() const { return bool(model_); }
    bool modelLoading() const { return loadingModel_ > 0; }
    QString checkpointPath() const { return checkpoint_; }
    // The family's shipped checkpoint (letr_demo.h5, coat_fmnist.h5, ...; "" when not installed).
    // It is not loaded at start but on the panel's first use: a run asked for without a model,
    // or the panel raised (setActive) for the first time.
    void setShippedCheckpoint(const QString& path);
    QString shippedCheckpoint() const { return shipped_; }
    // Starts loading the shipped checkpoint when there is no model, none is loading and it was
    // not loaded before; returns whether a load started.
    bool loadShippedOnFirstUse();
    // --- runs ---
    bool running() const { return running_; }
    // A run started while a cancelled pass is still finishing waits for it: true while so.
    bool queued() const { return running_ && abandoned_ > 0; }
    // Cancelled passes still finishing on the worker thread (their results are dropped).
    int abandonedRuns() const { return abandoned_; }
    // True while runWhenReady() waits for a model or an image.
    bool runPending() const { return pendingRun_; }
    // The one-line run state shown under the busy bar ("" when idle).
    QString runStatus() const;
    virtual bool busy() const { return running_ || loadingModel_ > 0 || ioPending_ > 0; }
    // --- traces ---
    bool hasTrace() const { return bool(shown_); }
    // The Precision row's choice, as if picked there: 0 float32 (exact), 1 auto (bfloat16 where
    // the CPU has it). False when the panel has no Precision row or `choice` is not 0 or 1.
    bool setPrecision(int choice);
    // Where the current image came from (a path, "path#frame" for video frames).
    QString sourceKey() const { return sourceKey_; }
    QString lastFailure() const { return lastFailure_; }
    bool active() const { return active_; }
    // The heatmap style every family's views share (head -1 = the mean over heads).
    int head() const { return head_; }
    render::Colormap colormap() const { return colormap_; }
    float opacity() const { return opacity_; }
    QComboBox* headBox() const { return headBox_; }
    QComboBox* compareBox() const { return compareBox_; }

public Q_SLOTS:
    void openCheckpointDialog();
    void loadCheckpoint(const QString& path);   // worker thread
    // Runs the model on the viewport's image (worker thread). Without a model it asks for a
    // checkpoint (a dialog unless `interactive` is false, then failed() is emitted).
    void run(bool interactive = true);
    // Abandons the running pass: the UI returns to idle at once, its result is dropped.
    void cancel();
    // Runs once a model is loaded and an image is shown (at once when both are; once), then calls
    // afterAutoRun(select). Dropped when the checkpoint fails to load or another image is shown
    // before it runs (the run belongs to the image it was asked for).
    void runWhenReady(int select = -2);
    // The viewport now shows a different image; `key` identifies it (see sourceKey()).
    void sourceChanged(const QString& key);
    void clearTrace();
    void saveTrace(const QString& path);        // worker thread, atomic
    void openTrace(const QString& path);        // worker thread; shows the trace's image
    // Whether this panel draws the viewport (the main window follows the docks' visibility).
    void setActive(bool on);
    // Draws this panel's scene again.
    void redraw();
    void setHead(int head);                  // -1 = mean; ignored outside the trace's heads
    void setColormap(render::Colormap c);
    void setOpacity(double opacity);         // clamped to 0..1

Q_SIGNALS:
    void checkpointLoaded(const QString& path);
    void traceReady();           // a trace is shown (after run, open or cache hit)
    void traceSaved(const QString& path);
    void failed(const QString& message);
    void busyChanged(bool busy);
    void viewUpdated();          // the viewport's scene was rebuilt
    void message(const QString& text);
    // Opening a trace wants its image shown (the main window shows it and calls sourceChanged).
    void showImageRequested(const QString& label, const widgets::RgbImage& image);
    // A run or an opened trace wants the panel shown (the main window raises its dock).
    void activateRequested();

protected:
    // --- what a family provides besides its Spec ---
    // Builds the view of `trace` (fromFile: opened from a trace file) and draws it; may throw.
    virtual void showTrace(const Erased& trace, bool fromFile) = 0;
    // Forgets the view of the shown trace (its widgets and scene).
    virtual void dropTrace() = 0;
    // Draws the active view into the viewport (and the compare pane); may throw.
    virtual void drawScene() = 0;
    // After a run finished on the shown image: `select` is runWhenReady's for an automatic run,
    // -2 for any other.
    virtual void afterAutoRun(int select) { (void)select; }
    // Enables the family's controls (a trace is shown or not).
    virtual void enableControls(bool haveTrace) { (void)haveTrace; }
    // The head, colour map or opacity changed (the default redraws).
    virtual void heatmapStyleChanged() { refresh(); }
    // The model changed: traces of another model are stale (the cache is already cleared).
    virtual void modelChanged() {}
    // The viewport is about to show the image with source key `key` (before the cache lookup).
    virtual void onSourceChanged(const QString& key) { (void)key; }

    // --- for the families ---
    template <class M>
    std::shared_ptr<M> modelAs() const { return std::static_pointer_cast<M>(model_); }
    std::shared_ptr<std::mutex> modelMutex() const { return modelMutex_; }
    const Erased& shownTrace() const { return shown_; }
    void setModelErased(std::shared_ptr<void> model, const QString& label);
    // Shows `trace` (fromFile: its image is the trace's own); emits traceReady.
    void presentTrace(Erased trace, bool fromFile);
    // Adds the Head, Colour map and Opacity rows to `form` (the family places them).
    void addHeatmapControls(QFormLayout* form);
    // The number of heads of the shown trace (0: none); keeps the head when it still exists.
    void setHeadCount(int heads);
    // The Compare row: "off" and then `choices` (what the compare pane can show).
    void addCompareControl(QFormLayout* form, const QStringList& choices, const QString& tip);
    void setCompareChoices(const QStringList& choices);
    // Shows choice `index` (0 = off) in the Compare row without calling compareChosen.
    void showCompareChoice(int index);
    // The user picked Compare choice `index` (0 = off).
    virtual void compareChosen(int index) { (void)index; }
    // A run setting (precision, LETR's flips and input size) changed: the cached traces are
    // dropped and, when a trace is shown or a run is under way, the model runs again; else
    // `nextRun` is said.
    void settingChanged(const QString& nextRun);
    // The Precision row (issue 57, docs/performance.md): "float32 (exact)" (0) or `autoLabel`
    // (1: bfloat16 on a CPU with AVX512-BF16 or AMX), bound to `setting`, which the family's run
    // reads on its worker. A change calls settingChanged. objectName "precision".
    void addPrecisionControl(QFormLayout* form, std::atomic<int>& setting, const QString& autoLabel,
                             const QString& tip);
    // The layout the family adds its controls to (below the model/run rows).
    QFormLayout* form() const { return form_; }
    QVBoxLayout* column() const { return column_; }
    void fail(const QString& message);
    // Forgets the cached traces (a run option changed: they no longer show what a run would).
    void clearTraceCache();
    void updateControls();
    // Draws (drawScene) when active, reporting errors; emits viewUpdated.
    void refresh();
    // Shows or hides the compare pane; on first show splits the window evenly and fits the view;
    // keeps the pane's image equal to the main viewport's. Returns whether the pane is shown.
    bool showComparePane(bool on);
    widgets::ImageViewport* viewport() const { return viewport_; }
    widgets::ImageViewport* comparePane() const { return compare_; }
    int ioPending() const { return ioPending_; }

private:
    void buildHeader();
    void startPendingRun();
    void finishRun(int gen, const QString& key, Erased trace, double ms, const QString& error);
    void cacheTrace(const QString& key, Erased trace, bool fromFile);

    Spec spec_;
    QComboBox* precisionBox_ = nullptr;   // addPrecisionControl's row, if any
    widgets::ImageViewport* viewport_;
    widgets::ImageViewport* compare_;
    std::shared_ptr<void> model_;
    std::shared_ptr<std::mutex> modelMutex_;
    QString checkpoint_;
    QString shipped_;
    bool shippedTried_ = false;
    bool openingTrace_ = false;   // activation by an opened trace file (no model wanted)
    Erased shown_;
    struct Cached {
        Erased trace;
        bool fromFile = false;
    };
    QHash<QString, Cached> cache_;
    QStringList cacheOrder_;
    QString sourceKey_;
    QString lastFailure_;
    bool active_ = true;
    bool running_ = false;
    int runGeneration_ = 0;
    int abandoned_ = 0;
    bool pendingRun_ = false;
    int pendingSelect_ = -2;
    QString pendingSource_;   // the image runWhenReady() was asked for
    bool pendingBound_ = false;
    int autoRunGeneration_ = -1;
    int autoSelect_ = -2;
    int loadingModel_ = 0;
    int ioPending_ = 0;
    bool syncing_ = false;
    int head_ = -1;
    int headCount_ = 0;
    render::Colormap colormap_ = render::Colormap::Viridis;
    float opacity_ = 0.6f;

    QVBoxLayout* column_ = nullptr;
    QFormLayout* form_ = nullptr;
    QLabel* modelLabel_ = nullptr;
    QPushButton* runButton_ = nullptr;
    QPushButton* cancelButton_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* runStatus_ = nullptr;
    QComboBox* headBox_ = nullptr;
    QComboBox* compareBox_ = nullptr;
    QComboBox* colormapBox_ = nullptr;
    QSlider* opacitySlider_ = nullptr;
};

// The top-k class table of a classifier panel (CoaT, ConstellationNet): columns class, name,
// p; five rows tall without scrolling; not editable. `selectable`: single-row selection.
struct ClassRow {
    int64_t classIndex = 0;
    std::string name;
    double prob = 0;
};
QTableWidget* makeClassTable(QWidget* parent, bool selectable, const QString& toolTip);
// Replaces the rows (class index also stored as Qt::UserRole).
void fillClassTable(QTableWidget* table, const std::vector<ClassRow>& rows);

} // namespace glimpse::app
