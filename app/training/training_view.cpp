#include "app/training/training_view.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QScrollArea>
#include <QShortcut>
#include <QSlider>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/family.h"
#include "widgets/live_chart.h"

namespace glimpse::app {

namespace {
constexpr int kDefaultSmoothing = 60;   // TensorBoard's default weight, 0.6
}

TrainingView::TrainingView(QWidget* parent) : QWidget(parent) {
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    lay->setSpacing(4);

    auto* tools = new QHBoxLayout;
    tools->addWidget(new QLabel("Smoothing", this));
    smoothing_ = new QSlider(Qt::Horizontal, this);
    smoothing_->setObjectName("training.smoothing");
    smoothing_->setRange(0, 99);
    smoothing_->setMaximumWidth(160);
    smoothing_->setToolTip("Exponential moving average of each line (TensorBoard's); the raw line stays faint behind");
    smoothingValue_ = new QLabel(this);
    smoothingValue_->setMinimumWidth(fontMetrics().horizontalAdvance("0.00") + 4);
    tools->addWidget(smoothing_);
    tools->addWidget(smoothingValue_);
    tools->addSpacing(12);
    tools->addWidget(new QLabel("X axis", this));
    xAxis_ = new QComboBox(this);
    xAxis_->setObjectName("training.xaxis");
    xAxis_->addItem("Step");
    xAxis_->addItem("Relative time");
    xAxis_->addItem("Wall time");
    tools->addWidget(xAxis_);
    tools->addSpacing(12);
    tools->addWidget(new QLabel("Runs", this));
    filter_ = new QLineEdit(this);
    filter_->setObjectName("training.runfilter");
    filter_->setPlaceholderText("regex on run names");
    filter_->setClearButtonEnabled(true);
    filter_->setToolTip("Show only the runs whose name matches this regular expression (case-insensitive)");
    tools->addWidget(filter_, 1);
    auto* exportButton = new QToolButton(this);
    exportButton->setText("Export");
    exportButton->setPopupMode(QToolButton::InstantPopup);
    auto* menu = new QMenu(exportButton);
    menu->addAction("Charts as PNG...", this, [this] { exportDialog("png"); });
    menu->addAction("Charts as SVG...", this, [this] { exportDialog("svg"); });
    menu->addAction("Series as CSV...", this, [this] { exportDialog("csv"); });
    exportButton->setMenu(menu);
    tools->addWidget(exportButton);
    lay->addLayout(tools);

    grid_ = new widgets::ChartGrid(this, 0);
    setFamily(QString());
    scroll_ = new QScrollArea(this);
    scroll_->setWidgetResizable(true);
    scroll_->setFrameShape(QFrame::NoFrame);
    scroll_->setWidget(grid_);
    lay->addWidget(scroll_, 1);

    connect(smoothing_, &QSlider::valueChanged, this, [this](int v) {
        smoothingValue_->setText(QString::number(v / 100.0, 'f', 2));
        grid_->setSmoothing(v / 100.0);
    });
    smoothing_->setValue(kDefaultSmoothing);
    smoothingValue_->setText(QString::number(kDefaultSmoothing / 100.0, 'f', 2));
    grid_->setSmoothing(kDefaultSmoothing / 100.0);
    connect(xAxis_, &QComboBox::currentIndexChanged, this, [this](int i) {
        grid_->setXAxisMode(i == 1 ? widgets::XAxisMode::RelativeTime
                                   : i == 2 ? widgets::XAxisMode::WallTime : widgets::XAxisMode::Step);
    });
    connect(filter_, &QLineEdit::textChanged, this, [this](const QString& t) {
        const bool ok = grid_->setRunFilter(t);
        filter_->setStyleSheet(ok ? QString() : QStringLiteral("QLineEdit { background: #fdd; }"));
        filter_->setToolTip(ok ? QStringLiteral("Show only the runs whose name matches this regular expression")
                               : QStringLiteral("Not a valid regular expression: every run is still shown"));
    });
    // Escape anywhere in the view brings a maximized chart back into the grid.
    auto* esc = new QShortcut(QKeySequence(Qt::Key_Escape), this);
    esc->setContext(Qt::WidgetWithChildrenShortcut);
    connect(esc, &QShortcut::activated, grid_, &widgets::ChartGrid::restore);
}

void TrainingView::setFamily(const QString& family) {
    family_ = family;
    const std::string f = family.toStdString();
    grid_->setGrouping([f](const QString& series) {
        const ChartPlacement p = chartPlacement(f, series);
        return widgets::ChartGrid::Placement{p.group, p.groupTitle, p.rank};
    });
}

void TrainingView::setSmoothing(double w) { smoothing_->setValue(int(std::lround(w * 100))); }

void TrainingView::setRunFilter(const QString& pattern) { filter_->setText(pattern); }

bool TrainingView::exportPng(const QString& path, QString* error) const { return grid_->exportPng(path, error); }
bool TrainingView::exportSvg(const QString& path, QString* error) const { return grid_->exportSvg(path, error); }
bool TrainingView::exportCsv(const QString& path, QString* error) const { return grid_->exportCsv(path, error); }

void TrainingView::exportDialog(const QString& kind) {
    const QString filter = kind == "png" ? "PNG images (*.png)" : kind == "svg" ? "SVG drawings (*.svg)" : "CSV tables (*.csv)";
    const QString path = QFileDialog::getSaveFileName(this, "Export " + kind.toUpper(), "training." + kind, filter);
    if (path.isEmpty()) return;
    QString err;
    const bool ok = kind == "png" ? exportPng(path, &err) : kind == "svg" ? exportSvg(path, &err) : exportCsv(path, &err);
    if (ok) Q_EMIT message("Exported " + path);
    else Q_EMIT errorOccurred(err);
}

} // namespace glimpse::app
