#include "app/letr_inspector.h"
#include "app/resources.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTimer>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <chrono>
#include <limits>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/models/letr/model.h"
#include "renderer/colormap.h"
#include "widgets/layer_stepper.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kTraceCacheSize = 32;

cv::Mat toMat(const widgets::RgbImage& im) {
    cv::Mat m(im.height, im.width, CV_8UC3);
    for (int y = 0; y < im.height; ++y)
        std::memcpy(m.ptr<uint8_t>(y), &im.rgb[size_t(y) * im.width * 3], size_t(im.width) * 3);
    return m;
}

widgets::RgbImage toRgb(const cv::Mat& m) {
    widgets::RgbImage im;
    im.width = m.cols;
    im.height = m.rows;
    im.rgb.resize(size_t(m.cols) * m.rows * 3);
    for (int y = 0; y < m.rows; ++y)
        std::memcpy(&im.rgb[size_t(y) * m.cols * 3], m.ptr<uint8_t>(y), size_t(m.cols) * 3);
    return im;
}

struct RunResult {
    std::shared_ptr<const letr::LetrTrace> trace;
    double ms = 0;
    QString error;
};

struct ModelResult {
    std::shared_ptr<letr::LetrModel> model;
    QString error;
};

struct TraceResult {
    std::shared_ptr<const letr::LetrTrace> trace;
    widgets::RgbImage image;
    QString error;
};

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

} // namespace

QString defaultLetrCheckpoint() { return resourceFile("letr_demo.h5"); }

LetrInspector::LetrInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                             QWidget* parent)
    : QWidget(parent), viewport_(viewport), compare_(compare),
      modelMutex_(std::make_shared<std::mutex>()) {
    buildUi();
    connect(viewport_, &widgets::ImageViewport::lineClicked, this, [this](int id) { setEntity(id); });
    if (compare_) {
        connect(compare_, &widgets::ImageViewport::lineClicked, this, [this](int id) { setEntity(id); });
        // Synchronized pan/zoom: each pane follows the other, history included (undo works
        // from either pane).
        auto sync = [this](widgets::ImageViewport* from, widgets::ImageViewport* to) {
            if (syncing_ || !to->isVisible()) return;
            syncing_ = true;
            to->followView(*from);
            syncing_ = false;
        };
        connect(viewport_, &widgets::ImageViewport::viewChanged, this, [this, sync] { sync(viewport_, compare_); });
        connect(compare_, &widgets::ImageViewport::viewChanged, this, [this, sync] { sync(compare_, viewport_); });
    }
    updateControls();
}

LetrInspector::~LetrInspector() = default;

void LetrInspector::buildUi() {
    auto* col = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    col->addLayout(form);

    modelLabel_ = new QLabel("no checkpoint", this);
    modelLabel_->setWordWrap(true);
    form->addRow("Model", modelLabel_);
    auto* runRow = new QHBoxLayout;
    auto* openCk = new QPushButton("Checkpoint...", this);
    runButton_ = new QPushButton("Run LETR", this);
    runButton_->setToolTip("Run LETR on the shown image (Ctrl+R)");
    cancelButton_ = new QPushButton("Cancel", this);
    runRow->addWidget(openCk);
    runRow->addWidget(runButton_);
    runRow->addWidget(cancelButton_);
    form->addRow(runRow);
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 0);   // busy indicator: a forward pass reports no progress
    progress_->setTextVisible(false);
    progress_->setMaximumHeight(10);
    form->addRow(progress_);
    runStatus_ = new QLabel(this);
    runStatus_->setWordWrap(true);
    form->addRow(runStatus_);
    connect(openCk, &QPushButton::clicked, this, &LetrInspector::openCheckpointDialog);
    connect(runButton_, &QPushButton::clicked, this, [this] { run(true); });
    connect(cancelButton_, &QPushButton::clicked, this, &LetrInspector::cancel);

    stepper_ = new widgets::LayerStepper(this);
    form->addRow("Layer", stepper_);
    connect(stepper_, &widgets::LayerStepper::positionChanged, this, &LetrInspector::setPosition);

    auto* thRow = new QHBoxLayout;
    threshold_ = new QSlider(Qt::Horizontal, this);
    threshold_->setRange(0, 100);
    threshold_->setValue(int(settings_.threshold * 100));
    thresholdLabel_ = new QLabel(this);
    thresholdLabel_->setMinimumWidth(36);
    thRow->addWidget(threshold_, 1);
    thRow->addWidget(thresholdLabel_);
    form->addRow("Threshold", thRow);
    connect(threshold_, &QSlider::valueChanged, this, [this](int v) { setThreshold(v / 100.0); });

    head_ = new QComboBox(this);
    form->addRow("Head", head_);
    connect(head_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setHead(i - 1);
    });

    colormap_ = new QComboBox(this);
    for (int c = 0; c < render::kColormapCount; ++c)
        colormap_->addItem(render::colormapName(render::Colormap(c)));
    form->addRow("Colour map", colormap_);
    connect(colormap_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setColormap(render::Colormap(i));
    });

    opacity_ = new QSlider(Qt::Horizontal, this);
    opacity_->setRange(0, 100);
    opacity_->setValue(int(settings_.opacity * 100));
    form->addRow("Opacity", opacity_);
    connect(opacity_, &QSlider::valueChanged, this, [this](int v) { setOpacity(v / 100.0); });

    entity_ = new QSpinBox(this);
    entity_->setRange(-1, 0);
    entity_->setSpecialValueText("none");
    form->addRow("Entity", entity_);
    connect(entity_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) setEntity(v);
    });

    compareBox_ = new QComboBox(this);
    form->addRow("Compare", compareBox_);
    connect(compareBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setCompare(i - 2);
    });

    table_ = new QTableWidget(0, 4, this);
    table_->setHorizontalHeaderLabels({"entity", "score", "length", "angle"});
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->setVisible(false);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->setSortingEnabled(true);
    table_->sortByColumn(1, Qt::DescendingOrder);
    col->addWidget(table_, 1);
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

void LetrInspector::fail(const QString& message) {
    lastFailure_ = message;
    Q_EMIT failed(message);
}

// --- model ----------------------------------------------------------------------------

void LetrInspector::openCheckpointDialog() {
    const QString path = QFileDialog::getOpenFileName(this, "Open LETR checkpoint", QString(),
                                                      "Glimpse checkpoints (*.h5);;All files (*)");
    if (!path.isEmpty()) loadCheckpoint(path);
}

void LetrInspector::loadCheckpoint(const QString& path) {
    ++loadingModel_;
    updateControls();
    Q_EMIT message("Loading LETR checkpoint " + path + " ...");
    auto* watcher = new QFutureWatcher<ModelResult>(this);
    connect(watcher, &QFutureWatcher<ModelResult>::finished, this, [this, watcher, path] {
        ModelResult r = watcher->result();
        watcher->deleteLater();
        --loadingModel_;
        if (!r.error.isEmpty()) {
            if (pendingRun_ && !model_ && loadingModel_ == 0) pendingRun_ = false;   // nothing to run with
            updateControls();
            fail(r.error);
            return;
        }
        setModel(std::move(r.model), path);
        Q_EMIT checkpointLoaded(path);
    });
    watcher->setFuture(QtConcurrent::run([p = path.toStdString()] {
        ModelResult r;
        try {
            r.model = letr::loadLetr(p);
        } catch (const std::exception& e) {
            r.error = QString::fromStdString(e.what());
        }
        return r;
    }));
}

void LetrInspector::setModel(std::shared_ptr<letr::LetrModel> model, const QString& label) {
    model_ = std::move(model);
    checkpoint_ = label;
    cache_.clear();   // traces of another model are stale
    cacheOrder_.clear();
    if (model_) {
        const auto& c = model_->config();
        modelLabel_->setText(QStringLiteral("%1\n%2, d %3, %4 heads, %5 queries")
                                 .arg(QFileInfo(label).fileName(), QString::fromStdString(c.backbone))
                                 .arg(c.hiddenDim).arg(c.nheads).arg(c.numQueries));
        Q_EMIT message("LETR model ready: " + label);
    } else {
        modelLabel_->setText("no checkpoint");
    }
    updateControls();
    startPendingRun();
}

void LetrInspector::run(bool interactive) {
    if (running_) return;
    if (!viewport_->hasImage()) {
        fail("Run LETR: open an image first.");
        return;
    }
    if (!model_) {
        if (loadingModel_ > 0) {
            fail("Run LETR: the checkpoint is still loading; try again in a moment.");
            return;
        }
        if (interactive) {
            Q_EMIT message("No LETR checkpoint loaded: choose one.");
            openCheckpointDialog();
            return;
        }
        fail("Run LETR: no checkpoint loaded (Model > Open checkpoint).");
        return;
    }
    running_ = true;
    const int gen = ++runGeneration_;
    const QString key = sourceKey_;
    updateControls();
    const QString what = key.isEmpty() ? QStringLiteral("the image") : key;
    if (abandoned_ > 0)
        Q_EMIT message(QStringLiteral("LETR run on %1 queued: waiting for the cancelled pass to finish ...").arg(what));
    else
        Q_EMIT message("Running LETR on " + what + " ...");
    cv::Mat image = toMat(viewport_->image());
    auto* watcher = new QFutureWatcher<RunResult>(this);
    connect(watcher, &QFutureWatcher<RunResult>::finished, this, [this, watcher, gen, key] {
        RunResult r = watcher->result();
        watcher->deleteLater();
        if (gen != runGeneration_) {   // cancelled: dropped
            --abandoned_;
            if (abandoned_ == 0 && running_)
                Q_EMIT message("The cancelled LETR pass finished (result dropped); the queued run starts.");
            updateControls();
            return;
        }
        running_ = false;
        const int select = gen == autoRunGeneration_ ? autoEntity_ : -2;
        updateControls();
        if (!r.error.isEmpty()) {
            fail(r.error);
            return;
        }
        Q_EMIT message(QStringLiteral("LETR finished in %1 ms (%2 entities)")
                           .arg(r.ms, 0, 'f', 0).arg(r.trace->numQueries()));
        cache_.insert(key, r.trace);
        cacheOrder_.removeAll(key);
        cacheOrder_.append(key);
        while (cacheOrder_.size() > kTraceCacheSize) cache_.remove(cacheOrder_.takeFirst());
        if (key == sourceKey_) {
            setTrace(r.trace);
            selectAfterRun(select);
        }
    });
    watcher->setFuture(QtConcurrent::run([model = model_, mutex = modelMutex_, image]() {
        RunResult r;
        try {
            std::lock_guard<std::mutex> lock(*mutex);   // one pass at a time per model
            const auto t0 = std::chrono::steady_clock::now();
            r.trace = std::make_shared<const letr::LetrTrace>(letr::runLetr(*model, image));
            r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        } catch (const std::exception& e) {
            r.error = QStringLiteral("LETR failed: %1").arg(e.what());
        }
        return r;
    }));
}

void LetrInspector::cancel() {
    if (!running_) return;
    ++runGeneration_;
    ++abandoned_;   // its worker still finishes the forward pass (LibTorch cannot interrupt it)
    running_ = false;
    updateControls();
    Q_EMIT message("LETR run cancelled (the forward pass finishes in the background; its result is dropped).");
}

void LetrInspector::runWhenReady(int entity) {
    pendingRun_ = true;
    pendingEntity_ = entity;
    pendingBound_ = viewport_->hasImage();
    pendingSource_ = pendingBound_ ? sourceKey_ : QString();
    startPendingRun();
    if (pendingRun_) updateControls();
}

void LetrInspector::startPendingRun() {
    if (!pendingRun_ || running_ || loadingModel_ > 0 || !model_ || !viewport_->hasImage()) return;
    pendingRun_ = false;
    run(false);
    if (running_) {
        autoRunGeneration_ = runGeneration_;
        autoEntity_ = pendingEntity_;
    }
}

void LetrInspector::selectAfterRun(int entity) {
    if (!view_ || entity < -1) return;
    if (entity < 0) {
        const auto best = view_->visible(settings_.position, -std::numeric_limits<float>::infinity());
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

QString LetrInspector::runStatus() const { return runStatus_->text(); }

// --- traces ---------------------------------------------------------------------------

void LetrInspector::sourceChanged(const QString& key) {
    sourceKey_ = key;
    lsdCache_.remove(QString());   // LSD of an unnamed image is not reusable
    auto it = cache_.find(key);
    if (!key.isEmpty() && it != cache_.end()) setTrace(it.value());
    else clearTrace();
    if (pendingRun_ && !pendingBound_) {
        pendingSource_ = key;
        pendingBound_ = true;
    } else if (pendingRun_ && key != pendingSource_) {
        // The automatic run (demo, --run-letr) was for the image shown when it was asked for;
        // the user opened another one meanwhile, so it is dropped rather than run on that.
        pendingRun_ = false;
        updateControls();
        Q_EMIT message("The automatic LETR run was dropped because another image was opened; press Run "
                       "to run LETR on this one.");
    }
    startPendingRun();
}

void LetrInspector::clearTrace() {
    view_.reset();
    settings_.entity = -1;
    updating_ = true;
    stepper_->setPositions({});
    table_->setRowCount(0);
    updating_ = false;
    viewport_->setScene({});
    if (compare_) compare_->setScene({});
    updateControls();
    refreshCompare();
}

void LetrInspector::setTrace(std::shared_ptr<const letr::LetrTrace> trace) {
    if (!trace) {
        clearTrace();
        return;
    }
    const int oldCount = positionCount();
    view_ = std::make_unique<LetrView>(std::move(trace));
    const auto& t = view_->trace();
    updating_ = true;
    QStringList labels;
    for (const auto& p : view_->positions()) labels << QString::fromStdString(p.label());
    if (settings_.position >= int(labels.size()) || oldCount != labels.size())
        settings_.position = int(labels.size()) - 1;   // start at the last layer: the prediction
    if (settings_.entity >= t.numQueries()) settings_.entity = -1;
    if (settings_.head >= t.numHeads()) settings_.head = -1;
    stepper_->setPositions(labels);
    stepper_->setPosition(settings_.position);
    head_->clear();
    head_->addItem("mean");
    for (int h = 0; h < t.numHeads(); ++h) head_->addItem(QStringLiteral("head %1").arg(h + 1));
    head_->setCurrentIndex(settings_.head + 1);
    entity_->setRange(-1, int(t.numQueries()) - 1);
    entity_->setValue(settings_.entity);
    compareBox_->clear();
    compareBox_->addItem("off");
    compareBox_->addItem("LSD (OpenCV)");
    for (const QString& l : labels) compareBox_->addItem("layer " + l);
    if (compareMode_ >= int(labels.size())) compareMode_ = -2;
    compareBox_->setCurrentIndex(compareMode_ + 2);
    updating_ = false;
    updateControls();
    refillTable();
    refresh();
    refreshCompare();
    Q_EMIT traceReady();
}

void LetrInspector::saveTrace(const QString& path) {
    auto t = trace();
    if (!t) {
        fail("Save trace: there is no trace yet (run LETR first).");
        return;
    }
    ++ioPending_;
    updateControls();
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher, path] {
        const QString err = watcher->result();
        watcher->deleteLater();
        --ioPending_;
        updateControls();
        if (!err.isEmpty()) return fail(err);
        Q_EMIT message("Saved trace to " + path);
        Q_EMIT traceSaved(path);
    });
    watcher->setFuture(QtConcurrent::run([t, p = path.toStdString()]() -> QString {
        try {
            t->save(p);
            return {};
        } catch (const std::exception& e) {
            return QString::fromStdString(e.what());
        }
    }));
}

void LetrInspector::openTrace(const QString& path) {
    ++ioPending_;
    updateControls();
    auto* watcher = new QFutureWatcher<TraceResult>(this);
    connect(watcher, &QFutureWatcher<TraceResult>::finished, this, [this, watcher, path] {
        TraceResult r = watcher->result();
        watcher->deleteLater();
        --ioPending_;
        updateControls();
        if (!r.error.isEmpty()) return fail(r.error);
        const QString key = "trace:" + QFileInfo(path).absoluteFilePath();
        cache_.insert(key, r.trace);
        cacheOrder_.removeAll(key);
        cacheOrder_.append(key);
        lsdCache_.remove(key);   // the file may have changed since it was last opened
        sourceKey_ = key;
        // The main window shows the image and calls sourceChanged(key): a cache hit.
        Q_EMIT showImageRequested(QFileInfo(path).fileName(), r.image);
        sourceKey_ = key;
        if (trace() != r.trace) setTrace(r.trace);
        Q_EMIT message("Opened trace " + path);
    });
    watcher->setFuture(QtConcurrent::run([p = path.toStdString()] {
        TraceResult r;
        try {
            auto t = std::make_shared<const letr::LetrTrace>(letr::LetrTrace::load(p));
            // Show the image at its original size: the trace keeps the resized input.
            const torch::Tensor img = t->image().contiguous();
            cv::Mat in(int(img.size(0)), int(img.size(1)), CV_8UC3, img.data_ptr<uint8_t>());
            const auto orig = t->originalSize();
            cv::Mat shown;
            cv::resize(in, shown, cv::Size(int(orig[1]), int(orig[0])), 0, 0, cv::INTER_LINEAR);
            r.image = toRgb(shown);
            r.trace = std::move(t);
        } catch (const std::exception& e) {
            r.error = QString::fromStdString(e.what());
        }
        return r;
    }));
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

void LetrInspector::setHead(int head) {
    if (view_ && (head < -1 || head >= view_->trace().numHeads())) return;
    settings_.head = head;
    if (head_->currentIndex() != head + 1) {
        updating_ = true;
        head_->setCurrentIndex(head + 1);
        updating_ = false;
    }
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

void LetrInspector::setThreshold(double t) {
    settings_.threshold = float(std::clamp(t, 0.0, 1.0));
    const int v = int(std::lround(settings_.threshold * 100));
    if (threshold_->value() != v) {
        const QSignalBlocker b(threshold_);
        threshold_->setValue(v);
    }
    thresholdLabel_->setText(QString::number(double(settings_.threshold), 'f', 2));
    refillTable();
    refresh();
}

void LetrInspector::setColormap(render::Colormap c) {
    settings_.colormap = c;
    if (colormap_->currentIndex() != int(c)) {
        updating_ = true;
        colormap_->setCurrentIndex(int(c));
        updating_ = false;
    }
    refresh();
}

void LetrInspector::setOpacity(double opacity) {
    settings_.opacity = float(std::clamp(opacity, 0.0, 1.0));
    const int v = int(std::lround(settings_.opacity * 100));
    if (opacity_->value() != v) {
        const QSignalBlocker b(opacity_);
        opacity_->setValue(v);
    }
    refresh();
}

void LetrInspector::setCompare(int mode) {
    if (mode < -2 || mode >= positionCount()) mode = -2;
    compareMode_ = mode;
    if (compareBox_->currentIndex() != mode + 2 && mode + 2 < compareBox_->count()) {
        updating_ = true;
        compareBox_->setCurrentIndex(mode + 2);
        updating_ = false;
    }
    refreshCompare();
}

void LetrInspector::redraw() {
    if (view_) refresh();
    else viewport_->setScene({});
    refreshCompare();
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

void LetrInspector::refresh() {
    if (!view_) return;
    try {
        viewport_->setScene(view_->scene(settings_));
    } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
        return;
    }
    if (compareMode_ >= 0) refreshCompare();
    Q_EMIT viewUpdated();
}

void LetrInspector::refreshCompare() {
    if (!compare_) return;
    const bool on = view_ && compareMode_ > -2;
    const bool wasOn = !compare_->isHidden();
    compare_->setVisible(on);
    if (!on) return;
    if (!wasOn) {
        // Side by side at equal widths, then fit once the panes have their new sizes.
        if (auto* split = qobject_cast<QSplitter*>(compare_->parentWidget())) split->setSizes({1, 1});
        QTimer::singleShot(50, viewport_, &widgets::ImageViewport::fitToWindow);
    }
    if (compare_->image().width != viewport_->image().width ||
        compare_->image().height != viewport_->image().height || compare_->image().rgb != viewport_->image().rgb) {
        compare_->setImage(viewport_->image());
        compare_->followView(*viewport_);
    }
    if (compareMode_ >= 0) {
        LetrViewSettings s = settings_;
        s.position = compareMode_;
        compare_->setScene(view_->scene(s));
        return;
    }
    // LSD baseline, computed once per image on a worker thread.
    const QString key = sourceKey_;
    auto it = lsdCache_.find(key);
    if (it != lsdCache_.end() && it.value()) {
        compare_->setScene(lsdScene(*it.value()));
        return;
    }
    if (it != lsdCache_.end()) return;   // running
    lsdCache_.insert(key, nullptr);
    compare_->setScene({});
    cv::Mat image = toMat(viewport_->image());
    auto* watcher = new QFutureWatcher<std::shared_ptr<std::vector<eval::ScoredLine>>>(this);
    connect(watcher, &QFutureWatcher<std::shared_ptr<std::vector<eval::ScoredLine>>>::finished, this,
            [this, watcher, key] {
                auto lines = watcher->result();
                watcher->deleteLater();
                if (!lines) {
                    lsdCache_.remove(key);
                    return fail("LSD failed on the current image.");
                }
                lsdCache_.insert(key, lines);
                if (key == sourceKey_ && compareMode_ == -1) compare_->setScene(lsdScene(*lines));
            });
    watcher->setFuture(QtConcurrent::run([image]() -> std::shared_ptr<std::vector<eval::ScoredLine>> {
        try {
            return std::make_shared<std::vector<eval::ScoredLine>>(eval::detectLsd(image));
        } catch (const std::exception&) {
            return nullptr;
        }
    }));
}

void LetrInspector::updateControls() {
    const bool have = bool(view_);
    runButton_->setEnabled(!running_ && loadingModel_ == 0);
    cancelButton_->setEnabled(running_);
    progress_->setVisible(running_ || loadingModel_ > 0 || ioPending_ > 0);
    QString status;
    if (running_ && abandoned_ > 0) status = "Queued: waiting for the cancelled pass to finish.";
    else if (running_) status = "Running LETR ...";
    else if (loadingModel_ > 0) status = pendingRun_ ? "Loading the checkpoint; LETR runs when it is loaded."
                                                     : "Loading the checkpoint ...";
    else if (abandoned_ > 0) status = "A cancelled pass is finishing in the background.";
    runStatus_->setText(status);
    runStatus_->setVisible(!status.isEmpty());
    for (QWidget* w : {static_cast<QWidget*>(threshold_), static_cast<QWidget*>(head_),
                       static_cast<QWidget*>(colormap_), static_cast<QWidget*>(opacity_),
                       static_cast<QWidget*>(entity_), static_cast<QWidget*>(compareBox_)})
        w->setEnabled(have);
    thresholdLabel_->setText(QString::number(double(settings_.threshold), 'f', 2));
    Q_EMIT busyChanged(busy());
}

} // namespace glimpse::app
