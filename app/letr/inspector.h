#pragma once
// LetrInspector: the LETR panel of the main window, a ModelPanel (app/panel.h: model, runs,
// trace cache, save/open, compare pane). It turns the current LetrTrace into plain buffers for
// the viewport through LetrView: a layer stepper (coarse 1..L then fine 1..L), score threshold,
// head, colour map, opacity, the selected entity, an entity table, a compare pane (another
// layer, or OpenCV's LSD), and line colours by score or by edge support (how much of each line
// lies on an edge of the shown image; eval::edgeSupport, measured off the UI thread). The pattern for every family's panel: panel state here, drawing in
// widgets/ImageViewport, logic in view.h.
#include <QHash>
#include <QString>
#include <QWidget>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "app/letr/view.h"
#include "app/panel.h"

class QLabel;
class QMenu;
class QSlider;
class QSpinBox;
class QTableWidget;

namespace glimpse::letr {
class LetrModel;
}
namespace glimpse::widgets {
class ImageViewport;
class LayerStepper;
}

namespace glimpse::app {

// letr_demo.h5 in $GLIMPSE_RESOURCES when that is set (only there), else in
// <exe dir>/../share/glimpse/, else in the source tree's resources/; empty when none exists.
QString defaultLetrCheckpoint();

class LetrInspector : public ModelPanel {
    Q_OBJECT
public:
    // `viewport` shows the image and the trace; `compare` (may be null) is the second pane.
    LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                  QWidget* parent = nullptr);
    ~LetrInspector() override;

    std::shared_ptr<const letr::LetrTrace> trace() const;
    const LetrViewSettings& settings() const { return settings_; }
    int positionCount() const;
    widgets::LayerStepper* stepper() const { return stepper_; }
    QSlider* thresholdSlider() const { return threshold_; }
    // The threshold as the panel shows it (the value that filters, not rounded).
    QLabel* thresholdLabel() const { return thresholdLabel_; }
    QTableWidget* entityTable() const { return table_; }
    // Entities listed in the table, in the table's current (sorted) order.
    std::vector<int> tableEntities() const;
    // True while the LSD or M-LSD lines of the compare pane are being computed for the shown image.
    bool lsdRunning() const;
    // True once the shown image's edge field is known (the table's "edge" column is filled).
    bool edgeFieldReady() const;
    int flips() const { return *flips_; }
    void addFileActions(QMenu* file) override;   // Export lines...

public Q_SLOTS:
    void setModel(std::shared_ptr<letr::LetrModel> model, const QString& label);
    void setTrace(std::shared_ptr<const letr::LetrTrace> trace);
    void exportLines(const QString& path);          // current layer's visible lines, .json/.csv

    void setPosition(int index);
    void setEntity(int entity);                      // -1 = none
    void setThreshold(double t);
    // Views of the flip ensemble for the next runs (1, 2 or 4; core/models/letr/flips.h). A
    // change drops the cached traces and, when a trace is shown, runs again.
    void setFlips(int views);
    // LETR's input short side for the next runs (the Input box; 0 = the model's own, else
    // 16..1024 px, the long side capped at twice it: the encoders attend over every cell, so
    // memory grows with the square of the area). A change drops the cached traces and, when a
    // trace is shown, runs again.
    void setInputSize(int shortSide);
    int inputSize() const;
    // Compare pane: -2 off, -1 LSD, -3 M-LSD tiny (resources/mlsd_tiny.h5), >= 0 a layer position.
    void setCompare(int mode);
    // Colour lines by score or by edge support (both panes).
    void setLineColour(LineColour colour);

Q_SIGNALS:
    void linesExported(const QString& path);

protected:
    void showTrace(const Erased& trace, bool fromFile) override;
    void dropTrace() override;
    void drawScene() override;
    // After every run: a message when no line reaches the threshold; then select: >= 0 that
    // entity, -1 the highest-scoring entity of the shown layer, -2 nothing.
    void afterAutoRun(int select) override;
    void enableControls(bool haveTrace) override;
    void onSourceChanged(const QString& key) override;
    void heatmapStyleChanged() override;
    // A model that stores a display threshold (config "score_threshold") sets the slider.
    void modelChanged() override;
    // The Compare box: off, LSD, M-LSD, then the layers.
    void compareChosen(int index) override { setCompare(index == 2 ? -3 : index < 2 ? index - 2 : index - 3); }
    static int compareIndex(int mode) { return mode == -3 ? 2 : mode < 0 ? mode + 2 : mode + 3; }
    void keyPressEvent(QKeyEvent* e) override;

private:
    LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent,
                  std::shared_ptr<std::atomic<int>> flips);
    void buildUi();
    // Left/Right/Home/End step the layer; false for other keys (or without a trace).
    bool stepKey(int key);
    void refillTable();
    void refreshCompare();
    void requestEdgeField();
    const eval::EdgeField* shownEdgeField() const;   // the shown image's, or null

    std::unique_ptr<LetrView> view_;
    LetrViewSettings settings_;
    int compareMode_ = -2;
    QHash<QString, std::shared_ptr<std::vector<eval::ScoredLine>>> lsdCache_, mlsdCache_;
    bool updating_ = false;
    // The shown image's edge field: one image's only (a field is two float maps of its size).
    QString edgeKey_;
    std::shared_ptr<const eval::EdgeField> edgeField_;
    int edgeGeneration_ = 0;
    bool edgeRunning_ = false;

    widgets::LayerStepper* stepper_ = nullptr;
    QSlider* threshold_ = nullptr;
    QLabel* thresholdLabel_ = nullptr;
    QSpinBox* entity_ = nullptr;
    QTableWidget* table_ = nullptr;
    QComboBox* flipsBox_ = nullptr;
    QComboBox* inputBox_ = nullptr;
    QComboBox* colourBox_ = nullptr;
    // Read by the run on its worker thread when it starts.
    std::shared_ptr<std::atomic<int>> flips_;
};

} // namespace glimpse::app
