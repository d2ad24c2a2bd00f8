#pragma once
// CoatInspector: the CoaT panel of the main window, a ModelPanel (app/panel.h: model, runs,
// trace cache, save/open, compare pane). It turns the current CoatTrace into viewport scenes
// through CoatView: scale, block
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

#include "app/coat/view.h"
#include "app/panel.h"

class QComboBox;
class QFormLayout;
class QListWidget;
class QSpinBox;
class QTableWidget;

namespace glimpse::coat {
class CoatModel;
}
namespace glimpse::widgets {
class ImageViewport;
}

namespace glimpse::app {

class DomainCheck;

// coat_fmnist.h5 in $GLIMPSE_RESOURCES, else <exe dir>/../share/glimpse/, else the source
// tree's resources/; empty when none exists.
QString defaultCoatCheckpoint();

class CoatInspector : public ModelPanel {
    Q_OBJECT
public:
    CoatInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent = nullptr);
    ~CoatInspector() override;

    // Busy too while the training data's profile is measured (the Domain row waits for it).
    bool busy() const override;
    std::shared_ptr<const coat::CoatTrace> trace() const;
    const CoatView* view() const { return view_.get(); }
    const CoatViewSettings& settings() const { return settings_; }
    int compareScale() const { return compareScale_; }

    // Widgets (tests drive them).
    QComboBox* scaleBox() const { return scale_; }
    QComboBox* blockBox() const { return block_; }
    QComboBox* modeBox() const { return mode_; }
    QSpinBox* classBox() const { return class_; }
    QTableWidget* top5Table() const { return table_; }
    QListWidget* gallery() const { return gallery_; }
    // What the model was trained on and how far the shown image is from it.
    DomainCheck* domainCheck() const { return domain_; }

public Q_SLOTS:
    void setModel(std::shared_ptr<coat::CoatModel> model, const QString& label);
    // shownIsCrop: the viewport shows the trace's input crop (an opened trace file).
    void setTrace(std::shared_ptr<const coat::CoatTrace> trace, bool shownIsCrop = false);

    void setMode(CoatMode mode);
    void setScale(int scale);          // 0..3 (also the Grad-CAM's scale)
    void setBlock(int block);          // index within the scale, -1 = last
    // Query point in shown-image pixels (a viewport click); outside the crop it is ignored.
    void setQuery(double x, double y);
    void setCamClass(int64_t cls);     // -1 = top-1; computes the CAM on a worker when needed
    void setChannel(int channel);
    void setCompareScale(int scale);   // -1 off, else 0..3

Q_SIGNALS:
    void camReady(qlonglong cls);

protected:
    void showTrace(const Erased& trace, bool fromFile) override;
    void dropTrace() override;
    void drawScene() override;
    void enableControls(bool haveTrace) override;
    void heatmapStyleChanged() override;
    void compareChosen(int index) override { setCompareScale(index - 1); }
    void modelChanged() override;

private:
    void buildUi();
    void buildViewControls(QFormLayout* form);
    void buildLists();
    void refreshCompare();
    void refillSelectors();
    void refillTable();
    void refillGallery();
    void requestCam(int64_t cls);

    std::unique_ptr<CoatView> view_;
    CoatViewSettings settings_;
    int compareScale_ = -1;
    int camScale_ = -1;   // the scale last chosen while showing Grad-CAM (-1: the default)
    int camPending_ = 0;
    bool updating_ = false;
    QString galleryKey_;

    QComboBox* mode_ = nullptr;
    QComboBox* scale_ = nullptr;
    QComboBox* block_ = nullptr;
    QSpinBox* class_ = nullptr;
    QSpinBox* channel_ = nullptr;
    QTableWidget* table_ = nullptr;
    QListWidget* gallery_ = nullptr;
    DomainCheck* domain_ = nullptr;
};

} // namespace glimpse::app
