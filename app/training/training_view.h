#pragma once
// The Training view: the charts of the followed runs as a page of their own (the main window
// shows it as a central tab beside the image viewport; without a main window it sits in the
// Training panel). A tool row above the grid sets what applies to every chart - smoothing
// (EMA weight, raw lines faint behind), the x axis (step, relative time, wall time), a regex
// filter on run names - and exports the charts shown as PNG or SVG and their rows as CSV.
// The grid groups the charts as the family registry says (chartPlacement: losses, validation
// metrics, task weights, optimizer and system), each group collapsible; double-click maximizes
// a chart, Escape brings the grid back; each chart has its own log-scale toggle.
#include <QString>
#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QScrollArea;
class QSlider;
class QToolButton;

namespace glimpse::widgets {
class ChartGrid;
}

namespace glimpse::app {

class TrainingView : public QWidget {
    Q_OBJECT
public:
    explicit TrainingView(QWidget* parent = nullptr);

    widgets::ChartGrid* grid() const { return grid_; }
    // The family whose registry entry groups the charts (the first followed run's).
    void setFamily(const QString& family);
    QString family() const { return family_; }

    QSlider* smoothingSlider() const { return smoothing_; }   // 0..99: EMA weight x 100
    QComboBox* xAxisBox() const { return xAxis_; }
    QLineEdit* runFilterEdit() const { return filter_; }
    void setSmoothing(double w);
    void setRunFilter(const QString& pattern);

    // The export actions' work (the menu asks for a path, then calls these); errors name the file.
    bool exportPng(const QString& path, QString* error = nullptr) const;
    bool exportSvg(const QString& path, QString* error = nullptr) const;
    bool exportCsv(const QString& path, QString* error = nullptr) const;

Q_SIGNALS:
    void message(const QString& text);
    void errorOccurred(const QString& text);

private:
    void exportDialog(const QString& kind);
    widgets::ChartGrid* grid_ = nullptr;
    QScrollArea* scroll_ = nullptr;
    QSlider* smoothing_ = nullptr;
    QLabel* smoothingValue_ = nullptr;
    QComboBox* xAxis_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QString family_;
};

} // namespace glimpse::app
