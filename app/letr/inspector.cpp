#include "app/letr/inspector.h"
#include "app/async.h"
#include "app/family.h"
#include "app/resources.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <atomic>
#include <cmath>
#include <limits>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/models/mlsd/model.h"
#include "core/util/autocast.h"
#include "core/util/threads.h"
#include "app/letr/cli.h"
#include "renderer/colormap.h"
#include "widgets/layer_stepper.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kTraceCacheSize = 32;
constexpr int kThresholdSteps = 1000;   // the threshold slider's steps over 0..1

// The threshold as it filters (score >= t): every decimal the float holds up to 6, at least 2
// ("0.50", "0.375"), so that the label never shows a rounded value.
QString thresholdText(float t) {
    QString s = QString::number(double(t), 'f', 6);
    while (s.endsWith('0') && s.size() - s.indexOf('.') > 3) s.chop(1);
    return s;
}

// A table item that sorts by its numeric value.
class NumberItem : public QTableWidgetItem {
public:
    NumberItem(double v, int decimals) : QTableWidgetItem(QString::number(v, 'f', decimals)), v_(v) {
        setData(Qt::UserRole, v);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    }
    bool operator<(const QTableWidgetItem& o) const override {
        return v_ < o.data(Qt::UserRole).toDouble();
    }

private:
    double v_;
};

const letr::LetrTrace& asTrace(const void* t) { return *static_cast<const letr::LetrTrace*>(t); }

// The family's model and trace I/O (ModelPanel::Spec): on worker threads.
std::shared_ptr<void> loadModel(const std::string& path) { return letr::loadLetr(path); }

// The precision of this process's LETR runs (the panel's Precision box, docs/performance.md):
// 0 float32 as the reference implementations compute it (exact comparisons), 1 auto (bfloat16
// on a CPU with AVX512-BF16 / AMX, else float32 with the folded backbone).
std::atomic<int>& computeSetting() {
    static std::atomic<int> setting{0};
    return setting;
}

// The input size of this process's LETR runs (the panel's Input box): the short side in pixels,
// the long side capped at twice that; 0 = the model's own (config short_side, max_long_side).
std::atomic<int>& inputSetting() {
    static std::atomic<int> setting{0};
    return setting;
}

// The run with the panel's flip-ensemble, precision and input-size settings at the time it starts.
std::function<ModelPanel::Erased(void*, const cv::Mat&)> runModelWith(std::shared_ptr<std::atomic<int>> flips) {
    return [flips](void* model, const cv::Mat& rgb) -> ModelPanel::Erased {
        letr::LetrRunOptions o;
        o.flips = *flips;
        if (const int side = inputSetting(); side > 0) {
            o.shortSide = side;
            o.maxLongSide = 2 * side;
        }
        if (computeSetting() == 1) {
            o.compute = parsePrecision("auto", static_cast<letr::LetrModel*>(model)->device());
            o.foldedBackbone = true;
        }
        return std::make_shared<const letr::LetrTrace>(letr::runLetr(*static_cast<letr::LetrModel*>(model), rgb, o));
    };
}

void saveTraceFile(const void* trace, const std::string& path) { asTrace(trace).save(path); }

ModelPanel::OpenedTrace loadTraceFile(const std::string& path) {
    auto t = std::make_shared<const letr::LetrTrace>(letr::LetrTrace::load(path));
    // Show the image at its original size: the trace keeps the resized input.
    const torch::Tensor img = t->image().contiguous();
    cv::Mat in(int(img.size(0)), int(img.size(1)), CV_8UC3, img.data_ptr<uint8_t>());
    const auto orig = t->originalSize();
    cv::Mat shown;
    cv::resize(in, shown, cv::Size(int(orig[1]), int(orig[0])), 0, 0, cv::INTER_LINEAR);
    return {std::move(t), toRgbImage(shown)};
}

QString describeModel(const void* model, const QString& fileName) {
    const auto& c = static_cast<const letr::LetrModel*>(model)->config();
    // How the coarse entities start (short: the label has one line): LETR's learned queries,
    // learned anchor lines, or the image's own line proposals (two-stage).
    const QString queries = c.coarseProposals ? QStringLiteral("proposals")
                            : c.coarseAnchors ? QStringLiteral("anchors")
                                              : QStringLiteral("queries");
    return QStringLiteral("%1\n%2, d %3, %4 heads, %5 %6")
        .arg(fileName, QString::fromStdString(c.backbone))
        .arg(c.hiddenDim)
        .arg(c.nheads)
        .arg(c.numQueries)
        .arg(queries);
}

QString describeRun(const void* trace, double ms) {
    const auto& t = asTrace(trace);
    const QString flips = t.flips() > 1 ? QStringLiteral(", lines of a %1-view flip ensemble").arg(t.flips()) : QString();
    const auto& meta = t.raw().meta();
    const QString compute = QString::fromStdString(meta.contains("compute") && meta["compute"].is_string()
                                                       ? meta["compute"].get<std::string>()
                                                       : std::string("float32"));
    const torch::Tensor& input = t.image();   // [H, W, 3]: what the network saw
    return QStringLiteral("LETR finished in %1 ms (%2 entities, input %3x%4%5; %6)")
        .arg(ms, 0, 'f', 0)
        .arg(t.numQueries())
        .arg(input.size(1))
        .arg(input.size(0))
        .arg(flips, compute);
}

} // namespace

QString defaultLetrCheckpoint() { return defaultCheckpoint("letr"); }

LetrInspector::LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                             QWidget* parent)
    : LetrInspector(viewport, compare, parent, std::make_shared<std::atomic<int>>(1)) {}

LetrInspector::LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent,
                             std::shared_ptr<std::atomic<int>> flips)
    : ModelPanel({"LETR", "Run LETR on the shown image (Ctrl+R)", kTraceCacheSize, "trace:", loadModel,
                  runModelWith(flips), saveTraceFile, loadTraceFile, describeModel, describeRun},
                 viewport, compare, parent),
      flips_(std::move(flips)) {
    buildUi();
    connect(viewport, &widgets::ImageViewport::lineClicked, this, [this](int id) {
        if (active()) setEntity(id);
    });
    // The layer keys work while the image (either pane) or this panel has the focus, not only
    // the stepper (issue 56, item 13).
    setFocusPolicy(Qt::ClickFocus);
    for (widgets::ImageViewport* pane : {viewport, compare})
        if (pane)
            connect(pane, &widgets::ImageViewport::keyPressed, this, [this](int key, int modifiers) {
                if (active() && modifiers == Qt::NoModifier) stepKey(key);
            });
    if (compare)
        connect(compare, &widgets::ImageViewport::lineClicked, this, [this](int id) {
            if (active()) setEntity(id);
        });
    updateControls();
}

LetrInspector::~LetrInspector() = default;

void LetrInspector::buildUi() {
    QFormLayout* form = this->form();
    stepper_ = new widgets::LayerStepper(this);
    form->addRow("Layer", stepper_);
    connect(stepper_, &widgets::LayerStepper::positionChanged, this, &LetrInspector::setPosition);

    auto* thRow = new QHBoxLayout;
    threshold_ = new QSlider(Qt::Horizontal, this);
    // Steps of 0.001, so that a stored threshold such as 0.375 sits on the slider exactly.
    threshold_->setRange(0, kThresholdSteps);
    threshold_->setValue(int(std::lround(settings_.threshold * kThresholdSteps)));
    thresholdLabel_ = new QLabel(this);
    thresholdLabel_->setMinimumWidth(44);
    thRow->addWidget(threshold_, 1);
    thRow->addWidget(thresholdLabel_);
    form->addRow("Threshold", thRow);
    connect(threshold_, &QSlider::valueChanged, this, [this](int v) { setThreshold(v / double(kThresholdSteps)); });

    addHeatmapControls(form);

    entity_ = new QSpinBox(this);
    entity_->setRange(-1, 0);
    entity_->setSpecialValueText("none");
    form->addRow("Entity", entity_);
    connect(entity_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) setEntity(v);
    });

    addCompareControl(form, {}, "Show another layer, OpenCV's LSD or M-LSD tiny beside this one (synchronized pan/zoom)");

    flipsBox_ = new QComboBox(this);
    flipsBox_->addItem("off (the image only)", 1);
    flipsBox_->addItem("2 views (+ left-right mirror)", 2);
    flipsBox_->addItem("4 views (+ up-down mirrors)", 4);
    flipsBox_->setToolTip("Flip ensemble: run the image with its mirror images and merge each layer's lines over\n"
                          "the views (more precise endpoints, 2-4x the time). Attention stays the image's own.");
    form->addRow("Flips", flipsBox_);
    connect(flipsBox_, &QComboBox::activated, this, [this](int index) { setFlips(flipsBox_->itemData(index).toInt()); });

    addPrecisionControl(
        form, computeSetting(), cpuHasBf16() ? "auto: bfloat16 (this CPU has it)" : "auto: float32, folded (no bfloat16 here)",
        "Precision of the next runs (docs/performance.md). float32: as the reference code computes\n"
        "it, for exact comparisons. auto: bfloat16 on a CPU with AVX512-BF16 or AMX (line endpoints\n"
        "within half a pixel of float32, several times faster), else float32 with the backbone's\n"
        "batch norms folded (the same lines within rounding). The status line names the precision\n"
        "of the shown run.");

    inputBox_ = new QComboBox(this);
    inputBox_->setObjectName("inputSize");
    inputBox_->addItem("the model's", 0);
    for (const int side : {480, 512, 640}) inputBox_->addItem(QStringLiteral("short side %1 px").arg(side), side);
    inputBox_->setCurrentIndex(std::max(0, inputBox_->findData(inputSetting().load())));
    inputBox_->setToolTip("The size LETR sees the image at (the long side capped at twice the short; the status line\n"
                         "names it after a run). The model's: the size it was made for. A larger input costs more\n"
                         "and suits photographs: the shipped photo model scores sAP10 44.5 on the Wireframe photos at\n"
                         "its own 320 px and 54.1 at 512 px (docs/decisions.md); small drawn scenes lose.");
    form->addRow("Input", inputBox_);
    connect(inputBox_, &QComboBox::activated, this,
            [this](int index) { setInputSize(inputBox_->itemData(index).toInt()); });

    colourBox_ = new QComboBox(this);
    colourBox_->setObjectName("lineColour");
    colourBox_->addItem("score", int(LineColour::Score));
    colourBox_->addItem("edge support", int(LineColour::EdgeSupport));
    colourBox_->setToolTip("Score: cyan (low) to yellow (high).\n"
                           "Edge support: how much of each line lies on an edge of the shown image, measured as\n"
                           "'glimpse eval edges' does (a strong gradient, top 10% of the image's, across the line):\n"
                           "green on an edge (70% of its pixels or more), yellow partly (30-70%), red not.\n"
                           "The table's 'edge %' column gives the fraction for every line.");
    form->addRow("Colour", colourBox_);
    connect(colourBox_, &QComboBox::activated, this,
            [this](int index) { setLineColour(LineColour(colourBox_->itemData(index).toInt())); });

    table_ = new QTableWidget(0, 5, this);
    table_->setHorizontalHeaderLabels({"entity", "score", "length", "angle", "edge %"});
    table_->horizontalHeaderItem(4)->setToolTip("Percentage of the line's pixels on a strong gradient across it "
                                                "(the 'Colour: edge support' measure)");
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->setVisible(false);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->setSortingEnabled(true);
    table_->sortByColumn(1, Qt::DescendingOrder);
    column()->addWidget(table_, 1);
    connect(table_, &QTableWidget::itemSelectionChanged, this, [this] {
        if (updating_) return;
        const auto items = table_->selectedItems();
        if (items.isEmpty()) return;
        const QTableWidgetItem* first = table_->item(items.first()->row(), 0);
        if (first) setEntity(first->data(Qt::UserRole).toInt());
    });
}

std::shared_ptr<const letr::LetrTrace> LetrInspector::trace() const {
    return view_ ? view_->tracePtr() : nullptr;
}

int LetrInspector::positionCount() const { return view_ ? int(view_->positions().size()) : 0; }

std::vector<int> LetrInspector::tableEntities() const {
    std::vector<int> out;
    for (int r = 0; r < table_->rowCount(); ++r)
        if (const QTableWidgetItem* it = table_->item(r, 0)) out.push_back(it->data(Qt::UserRole).toInt());
    return out;
}

// --- the family's hooks -----------------------------------------------------------------

void LetrInspector::setModel(std::shared_ptr<letr::LetrModel> model, const QString& label) {
    setModelErased(std::move(model), label);
}

void LetrInspector::afterAutoRun(int entity) {
    if (!view_) return;
    // A run whose lines all score below the threshold shows none: say so, and how to see them.
    if (view_->visible(settings_.position, settings_.threshold).empty()) {
        const auto all = view_->visible(settings_.position, -std::numeric_limits<float>::infinity());
        if (!all.empty())
            Q_EMIT message(QStringLiteral("No line of layer %1 scores %2 or more (the best scores %3): lower the "
                                          "Threshold to see its lines.")
                               .arg(QString::fromStdString(view_->positions()[size_t(settings_.position)].label()))
                               .arg(double(settings_.threshold), 0, 'f', 3)
                               .arg(double(all.front().score), 0, 'f', 3));
    }
    if (entity < -1) return;
    if (entity < 0) {
        // The best line the threshold lets through (none when it hides them all).
        const auto best = view_->visible(settings_.position, settings_.threshold);
        if (best.empty()) return;
        entity = best.front().entity;
        setEntity(entity);
        Q_EMIT message(QStringLiteral("Selected entity %1 (score %2), the best line of layer %3.")
                           .arg(entity)
                           .arg(double(best.front().score), 0, 'f', 3)
                           .arg(QString::fromStdString(view_->positions()[size_t(settings_.position)].label())));
        return;
    }
    setEntity(entity);
}

void LetrInspector::onSourceChanged(const QString& key) {
    // LSD of an unnamed image is not reusable, and a trace file may have changed since it was
    // last opened.
    lsdCache_.remove(QString());
    mlsdCache_.remove(QString());
    if (key.startsWith("trace:")) {
        lsdCache_.remove(key);
        mlsdCache_.remove(key);
    }
    // The edge field belongs to one image: dropped for any other, and for an unnamed image or a
    // trace file (which may have changed), as LSD's lines are; a measurement under way is dropped.
    if (key != edgeKey_ || key.isEmpty() || key.startsWith("trace:")) {
        ++edgeGeneration_;
        edgeRunning_ = false;
        edgeField_.reset();
        edgeKey_.clear();
    }
}

bool LetrInspector::edgeFieldReady() const { return edgeField_ && edgeKey_ == sourceKey(); }

const eval::EdgeField* LetrInspector::shownEdgeField() const { return edgeFieldReady() ? edgeField_.get() : nullptr; }

void LetrInspector::requestEdgeField() {
    const QString key = sourceKey();
    if (edgeKey_ == key && (edgeField_ || edgeRunning_)) return;
    if (!viewport()->hasImage()) return;
    edgeKey_ = key;
    edgeField_.reset();
    edgeRunning_ = true;
    const int gen = ++edgeGeneration_;
    runAsync(
        this, [image = toMat(viewport()->image())] { return std::make_shared<const eval::EdgeField>(eval::edgeField(image)); },
        [this, gen](Outcome<std::shared_ptr<const eval::EdgeField>> r) {
            if (gen != edgeGeneration_) return;   // another image since
            edgeRunning_ = false;
            if (!r.ok()) {
                edgeKey_.clear();
                return fail("Edge support failed on the current image: " + r.error);
            }
            edgeField_ = r.value;
            if (!view_) return;
            view_->setEdgeField(edgeField_);
            refillTable();
            refresh();
        });
}

// --- traces ---------------------------------------------------------------------------

void LetrInspector::dropTrace() {
    view_.reset();
    settings_.entity = -1;
    updating_ = true;
    stepper_->setPositions({});
    table_->setRowCount(0);
    updating_ = false;
}

void LetrInspector::setTrace(std::shared_ptr<const letr::LetrTrace> trace) { presentTrace(std::move(trace), false); }

void LetrInspector::showTrace(const Erased& erased, bool) {
    const int oldCount = positionCount();
    view_ = std::make_unique<LetrView>(std::static_pointer_cast<const letr::LetrTrace>(erased));
    const auto& t = view_->trace();
    updating_ = true;
    QStringList labels;
    for (const auto& p : view_->positions()) labels << QString::fromStdString(p.label());
    if (settings_.position >= int(labels.size()) || oldCount != labels.size())
        settings_.position = int(labels.size()) - 1;   // start at the last layer: the prediction
    if (settings_.entity >= t.numQueries()) settings_.entity = -1;
    stepper_->setPositions(labels);
    stepper_->setPosition(settings_.position);
    setHeadCount(int(t.numHeads()));
    settings_.head = head();
    entity_->setRange(-1, int(t.numQueries()) - 1);
    entity_->setValue(settings_.entity);
    QStringList choices{"LSD (OpenCV)", "M-LSD tiny"};
    for (const QString& l : labels) choices << "layer " + l;
    setCompareChoices(choices);
    if (compareMode_ >= int(labels.size())) compareMode_ = -2;
    showCompareChoice(compareIndex(compareMode_));
    updating_ = false;
    if (edgeFieldReady()) view_->setEdgeField(edgeField_);
    else requestEdgeField();
    refillTable();
}

void LetrInspector::addFileActions(QMenu* file) {
    file->addAction("Export &lines...", this, [this] {
        if (!hasTrace()) return fail("No lines to export: run LETR first.");
        const QString path = QFileDialog::getSaveFileName(this, "Export lines of the current layer", "lines.json",
                                                          "JSON (*.json);;CSV (*.csv)");
        if (!path.isEmpty()) exportLines(path);
    });
}

void LetrInspector::exportLines(const QString& path) {
    if (!view_) return fail("Export lines: there is no trace yet (run LETR first).");
    try {
        writeLines(path.toStdString(), view_->positions()[size_t(settings_.position)].label(),
                   view_->visible(settings_.position, settings_.threshold));
        Q_EMIT message("Exported lines to " + path);
        Q_EMIT linesExported(path);
    } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
    }
}

// --- view settings -------------------------------------------------------------------

void LetrInspector::setPosition(int index) {
    if (!view_ || index < 0 || index >= positionCount()) return;
    if (stepper_->position() != index) {
        stepper_->setPosition(index);   // re-enters through positionChanged
        return;
    }
    if (settings_.position == index && !updating_) {
        refresh();
        return;
    }
    settings_.position = index;
    if (updating_) return;
    refillTable();
    refresh();
}

void LetrInspector::setEntity(int entity) {
    if (view_ && (entity < -1 || entity >= view_->trace().numQueries())) return;
    settings_.entity = entity;
    updating_ = true;
    entity_->setValue(entity);
    // Select its row when listed.
    table_->clearSelection();
    for (int r = 0; r < table_->rowCount(); ++r) {
        const QTableWidgetItem* it = table_->item(r, 0);
        if (it && it->data(Qt::UserRole).toInt() == entity) {
            table_->selectRow(r);
            table_->scrollToItem(table_->item(r, 0));
            break;
        }
    }
    updating_ = false;
    refresh();
}

void LetrInspector::modelChanged() {
    const auto m = modelAs<letr::LetrModel>();
    if (m && m->config().scoreThreshold > 0) setThreshold(m->config().scoreThreshold);
    // The Input box names the model's own size.
    inputBox_->setItemText(inputBox_->findData(0), m ? QStringLiteral("the model's (%1 px)").arg(m->config().shortSide)
                                                     : QStringLiteral("the model's"));
}

void LetrInspector::setFlips(int views) {
    if (views != 1 && views != 2 && views != 4) return fail(QStringLiteral("Flips: %1 views is not 1, 2 or 4.").arg(views));
    const int index = flipsBox_->findData(views);
    if (flipsBox_->currentIndex() != index) {
        const QSignalBlocker b(flipsBox_);
        flipsBox_->setCurrentIndex(index);
    }
    if (*flips_ == views) return;
    *flips_ = views;
    settingChanged(views > 1 ? QStringLiteral("LETR's next run merges %1 flipped views.").arg(views)
                             : QStringLiteral("LETR's next run uses the image only."));
}

int LetrInspector::inputSize() const { return inputSetting().load(); }

void LetrInspector::setInputSize(int side) {
    if (side != 0 && (side < 16 || side > 1024))
        return fail(QStringLiteral("Input: a short side of %1 px is not 16..1024 (0: the model's).").arg(side));
    int index = inputBox_->findData(side);
    if (index < 0) {   // a size the box does not list (--letr-input): added to it
        inputBox_->addItem(QStringLiteral("short side %1 px").arg(side), side);
        index = inputBox_->count() - 1;
    }
    if (inputBox_->currentIndex() != index) {
        const QSignalBlocker b(inputBox_);
        inputBox_->setCurrentIndex(index);
    }
    if (inputSetting().exchange(side) == side) return;
    settingChanged(QStringLiteral("LETR's next run sees the image at %1.").arg(inputBox_->itemText(index)));
}

bool LetrInspector::stepKey(int key) {
    if (!stepper_->isEnabled()) return false;
    switch (key) {
    case Qt::Key_Left: stepper_->stepBack(); return true;
    case Qt::Key_Right: stepper_->stepForward(); return true;
    case Qt::Key_Home: stepper_->setPosition(0); return true;
    case Qt::Key_End: stepper_->setPosition(stepper_->count() - 1); return true;
    default: return false;
    }
}

void LetrInspector::keyPressEvent(QKeyEvent* e) {
    // Keys the focused control did not use (a button, a combo box, the panel itself) come here;
    // the threshold slider, the entity box and the table keep their own Left/Right.
    if (e->modifiers() == Qt::NoModifier && stepKey(e->key())) return e->accept();
    ModelPanel::keyPressEvent(e);
}

void LetrInspector::setThreshold(double t) {
    // In the slider's steps (0.001): the value shown, in the label and in messages, is the one
    // that filters (a checkpoint's 0.374733 filters at 0.375, as shown).
    settings_.threshold = float(std::round(std::clamp(t, 0.0, 1.0) * kThresholdSteps) / kThresholdSteps);
    const int v = int(std::lround(settings_.threshold * kThresholdSteps));
    if (threshold_->value() != v) {
        const QSignalBlocker b(threshold_);
        threshold_->setValue(v);
    }
    thresholdLabel_->setText(thresholdText(settings_.threshold));
    refillTable();
    refresh();
}

void LetrInspector::heatmapStyleChanged() {
    settings_.head = head();
    settings_.colormap = colormap();
    settings_.opacity = opacity();
    refresh();
}

void LetrInspector::setCompare(int mode) {
    if (mode < -3 || mode >= positionCount()) mode = -2;
    compareMode_ = mode;
    showCompareChoice(compareIndex(mode));
    if (active()) refreshCompare();
}

void LetrInspector::setLineColour(LineColour colour) {
    const int index = colourBox_->findData(int(colour));
    if (index < 0) return;
    if (colourBox_->currentIndex() != index) {
        const QSignalBlocker b(colourBox_);
        colourBox_->setCurrentIndex(index);
    }
    if (settings_.lineColour == colour) return;
    settings_.lineColour = colour;
    refresh();
}

void LetrInspector::refillTable() {
    if (!view_) {
        table_->setRowCount(0);
        return;
    }
    const auto rows = view_->visible(settings_.position, settings_.threshold);
    updating_ = true;
    table_->setSortingEnabled(false);
    table_->setRowCount(int(rows.size()));
    int selectedRow = -1;
    for (int i = 0; i < int(rows.size()); ++i) {
        const auto& r = rows[size_t(i)];
        auto* e = new NumberItem(r.entity, 0);
        e->setData(Qt::UserRole, r.entity);
        table_->setItem(i, 0, e);
        table_->setItem(i, 1, new NumberItem(r.score, 3));
        table_->setItem(i, 2, new NumberItem(r.length, 1));
        table_->setItem(i, 3, new NumberItem(r.angle, 1));
        if (std::isnan(r.edge)) {
            auto* pending = new NumberItem(-1, 0);
            pending->setText(QStringLiteral("..."));
            table_->setItem(i, 4, pending);
        } else {
            table_->setItem(i, 4, new NumberItem(100.0 * double(r.edge), 0));
        }
        if (r.entity == settings_.entity) selectedRow = i;
    }
    table_->setSortingEnabled(true);
    table_->clearSelection();
    if (selectedRow >= 0) {
        for (int r = 0; r < table_->rowCount(); ++r)
            if (table_->item(r, 0)->data(Qt::UserRole).toInt() == settings_.entity) table_->selectRow(r);
    }
    updating_ = false;
}

void LetrInspector::drawScene() {
    viewport()->setScene(view_->scene(settings_));
    refreshCompare();
}

void LetrInspector::refreshCompare() {
    if (!showComparePane(view_ && compareMode_ != -2)) return;
    widgets::ImageViewport* pane = comparePane();
    if (compareMode_ >= 0) {
        LetrViewSettings s = settings_;
        s.position = compareMode_;
        pane->setScene(view_->scene(s));
        return;
    }
    // A baseline (LSD, or M-LSD: the shipped model, loaded once), computed once per image on a
    // worker thread.
    const bool mlsd = compareMode_ == -3;
    const int mode = compareMode_;
    const std::string name = mlsd ? "M-LSD tiny" : "LSD (OpenCV)";
    auto& cache = mlsd ? mlsdCache_ : lsdCache_;
    const QString key = sourceKey();
    auto it = cache.find(key);
    if (it != cache.end() && it.value()) {
        pane->setScene(lsdScene(*it.value(), settings_.lineColour, shownEdgeField(), name));
        return;
    }
    if (it != cache.end()) return;   // running
    cache.insert(key, nullptr);
    pane->setScene({});
    runAsync(
        this,
        [image = toMat(viewport()->image()), mlsd] {
            return std::make_shared<std::vector<eval::ScoredLine>>(
                mlsd ? mlsd::detectMlsd(*cli::shippedMlsd(), image) : eval::detectLsd(image));
        },
        [this, key, mode, name, &cache](Outcome<std::shared_ptr<std::vector<eval::ScoredLine>>> r) {
            if (!r.ok()) {
                cache.remove(key);
                return fail(QString::fromStdString(name) + " failed on the current image: " + r.error);
            }
            cache.insert(key, r.value);
            if (key == sourceKey() && compareMode_ == mode && active())
                comparePane()->setScene(lsdScene(*r.value, settings_.lineColour, shownEdgeField(), name));
        });
}

bool LetrInspector::lsdRunning() const {
    for (const auto* cache : {&lsdCache_, &mlsdCache_}) {
        const auto it = cache->find(sourceKey());
        if (it != cache->end() && !it.value()) return true;
    }
    return false;
}

void LetrInspector::enableControls(bool have) {
    for (QWidget* w : {static_cast<QWidget*>(threshold_), static_cast<QWidget*>(entity_), static_cast<QWidget*>(colourBox_)})
        w->setEnabled(have);
    thresholdLabel_->setText(thresholdText(settings_.threshold));
}

} // namespace glimpse::app
