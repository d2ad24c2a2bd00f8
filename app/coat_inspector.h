#pragma once
// CoatInspector: the CoaT panel of the main window (issue 6, in the LETR inspector's pattern).
// It owns the CoaT model and the current CoatTrace, runs CoaT on a worker thread on the image
// the viewport shows, and turns the trace into viewport scenes through CoatView: scale, block
// and head selectors, a view mode (effective attention of the clicked query pixel, its CRPE
// window term, CLS attention, Grad-CAM of a class, a key channel's distribution), colour map
// and opacity, a top-5 table (a row picks the CAM's class), a key-channel gallery and a
// compare pane showing another scale with synchronized pan/zoom. Clicking the viewport sets
// the query pixel. Grad-CAMs of classes the trace does not hold are computed on a worker.
//
// The LETR and CoaT panels share the viewport: the panel that is active (its dock visible,
// see setActive) draws it.
#include <QHash>
#include <QString>
#include <QWidget>
#include <memory>
#include <mutex>

#include "app/coat_view.h"

class QComboBox;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;

namespace glimpse::coat {
class CoatModel;
}
namespace glimpse::widgets {
class ImageViewport;
struct RgbImage;
}

namespace glimpse::app {

// coat_fmnist.h5 in $GLIMPSE_RESOURCES, else <exe dir>/../share/glimpse/, else the source
// tree's resources/; empty when none exists.
QString defaultCoatCheckpoint();

class CoatInspector : public QWidget {
    Q_OBJECT
public:
    CoatInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent = nullptr);
    ~CoatInspector() override;

    bool hasModel() const { return bool(model_); }
    bool modelLoading() const { return loadingModel_ > 0; }
    QString checkpointPath() const { return checkpoint_; }
    bool running() const { return running_; }
    bool busy() const { return running_ || loadingModel_ > 0 || ioPending_ > 0 || camPending_ > 0; }
    bool hasTrace() const { return bool(view_); }
    std::shared_ptr<const coat::CoatTrace> trace() const;
    const CoatView* view() const { return view_.get(); }
    const CoatViewSettings& settings() const { return settings_; }
    bool active() const { return active_; }
    QString sourceKey() const { return sourceKey_; }
    QString lastFailure() const { return lastFailure_; }
    int compareScale() const { return compareScale_; }

    // Widgets (tests drive them).
    QComboBox* scaleBox() const { return scale_; }
    QComboBox* blockBox() const { return block_; }
    QComboBox* headBox() const { return head_; }
    QComboBox* modeBox() const { return mode_; }
    QComboBox* compareBox() const { return compareBox_; }
    QSpinBox* classBox() const { return class_; }
    QTableWidget* top5Table() const { return table_; }
    QListWidget* gallery() const { return gallery_; }

public Q_SLOTS:
    void openCheckpointDialog();
    void loadCheckpoint(const QString& path);   // worker thread
    void setModel(std::shared_ptr<coat::CoatModel> model, const QString& label);
    // Runs CoaT on the viewport's image (worker thread). Without a model it asks for a
    // checkpoint (a dialog unless `interactive` is false, then failed() is emitted).
    void run(bool interactive = true);
    void cancel();
    void sourceChanged(const QString& key);
    void setTrace(std::shared_ptr<const coat::CoatTrace> trace, bool shownIsCrop = false);
    void clearTrace();
    void saveTrace(const QString& path);   // worker thread, atomic
    void openTrace(const QString& path);   // worker thread; shows the trace's input crop
    // Whether this panel draws the viewport (the main window follows the docks' visibility).
    void setActive(bool on);

    void setMode(CoatMode mode);
    void setScale(int scale);          // 0..3
    void setBlock(int block);          // index within the scale, -1 = last
    void setHead(int head);            // -1 = mean
    // Query point in shown-image pixels (a viewport click); outside the crop it is ignored.
    void setQuery(double x, double y);
    void setCamClass(int64_t cls);     // -1 = top-1; computes the CAM on a worker when needed
    void setChannel(int channel);
    void setColormap(render::Colormap c);
    void setOpacity(double opacity);
    void setCompareScale(int scale);   // -1 off, else 0..3

Q_SIGNALS:
    void checkpointLoaded(const QString& path);
    void traceReady();
    void traceSaved(const QString& path);
    void camReady(qlonglong cls);
    void failed(const QString& message);
    void busyChanged(bool busy);
    void viewUpdated();
    void message(const QString& text);
    void showImageRequested(const QString& label, const widgets::RgbImage& image);
    // A run or an opened trace wants the panel shown (the main window raises its dock).
    void activateRequested();

private:
    void buildUi();
    void refresh();
    void refreshCompare();
    void refillSelectors();
    void refillTable();
    void refillGallery();
    void updateControls();
    void fail(const QString& message);
    void requestCam(int64_t cls);

    widgets::ImageViewport* viewport_;
    widgets::ImageViewport* compare_;
    std::shared_ptr<coat::CoatModel> model_;
    std::shared_ptr<std::mutex> modelMutex_;
    QString checkpoint_;
    std::unique_ptr<CoatView> view_;
    CoatViewSettings settings_;
    int compareScale_ = -1;
    bool active_ = true;
    QString sourceKey_;
    QString lastFailure_;
    QHash<QString, std::shared_ptr<const coat::CoatTrace>> cache_;
    QStringList cacheOrder_;
    QHash<QString, bool> cropKeys_;    // keys whose shown image is the trace's crop
    bool running_ = false;
    int runGeneration_ = 0;
    int loadingModel_ = 0;
    int ioPending_ = 0;
    int camPending_ = 0;
    bool updating_ = false;
    bool syncing_ = false;
    QString galleryKey_;

    QLabel* modelLabel_ = nullptr;
    QPushButton* runButton_ = nullptr;
    QPushButton* cancelButton_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QComboBox* mode_ = nullptr;
    QComboBox* scale_ = nullptr;
    QComboBox* block_ = nullptr;
    QComboBox* head_ = nullptr;
    QSpinBox* class_ = nullptr;
    QSpinBox* channel_ = nullptr;
    QComboBox* colormap_ = nullptr;
    QSlider* opacity_ = nullptr;
    QComboBox* compareBox_ = nullptr;
    QTableWidget* table_ = nullptr;
    QListWidget* gallery_ = nullptr;
};

} // namespace glimpse::app
