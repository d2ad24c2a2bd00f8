#include "app/panel.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSplitter>
#include <QHeaderView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "app/async.h"
#include "renderer/colormap.h"

namespace glimpse::app {

cv::Mat toMat(const widgets::RgbImage& im) {
    cv::Mat m(im.height, im.width, CV_8UC3);
    for (int y = 0; y < im.height; ++y)
        std::memcpy(m.ptr<uint8_t>(y), &im.rgb[size_t(y) * im.width * 3], size_t(im.width) * 3);
    return m;
}

widgets::RgbImage toRgbImage(const cv::Mat& m) {
    widgets::RgbImage im;
    im.width = m.cols;
    im.height = m.rows;
    im.rgb.resize(size_t(m.cols) * m.rows * 3);
    for (int y = 0; y < m.rows; ++y)
        std::memcpy(&im.rgb[size_t(y) * m.cols * 3], m.ptr<uint8_t>(y), size_t(m.cols) * 3);
    return im;
}

ModelPanel::ModelPanel(Spec spec, widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                       QWidget* parent)
    : QWidget(parent), spec_(std::move(spec)), viewport_(viewport), compare_(compare),
      modelMutex_(std::make_shared<std::mutex>()) {
    buildHeader();
    if (compare_) {
        // Synchronized pan/zoom: each pane follows the other, history included (undo works
        // from either pane).
        auto sync = [this](widgets::ImageViewport* from, widgets::ImageViewport* to) {
            if (syncing_ || !active_ || !to->isVisible()) return;
            syncing_ = true;
            to->followView(*from);
            syncing_ = false;
        };
        connect(viewport_, &widgets::ImageViewport::viewChanged, this, [this, sync] { sync(viewport_, compare_); });
        connect(compare_, &widgets::ImageViewport::viewChanged, this, [this, sync] { sync(compare_, viewport_); });
    }
}

ModelPanel::~ModelPanel() = default;

void ModelPanel::buildHeader() {
    column_ = new QVBoxLayout(this);
    form_ = new QFormLayout;
    column_->addLayout(form_);
    modelLabel_ = new QLabel("no checkpoint", this);
    modelLabel_->setWordWrap(true);
    form_->addRow("Model", modelLabel_);
    auto* runRow = new QHBoxLayout;
    auto* openCk = new QPushButton("Checkpoint...", this);
    runButton_ = new QPushButton("Run " + spec_.title, this);
    runButton_->setToolTip(spec_.runTip);
    cancelButton_ = new QPushButton("Cancel", this);
    runRow->addWidget(openCk);
    runRow->addWidget(runButton_);
    runRow->addWidget(cancelButton_);
    form_->addRow(runRow);
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 0);   // busy indicator: a forward pass reports no progress
    progress_->setTextVisible(false);
    progress_->setMaximumHeight(10);
    form_->addRow(progress_);
    runStatus_ = new QLabel(this);
    runStatus_->setWordWrap(true);
    form_->addRow(runStatus_);
    connect(openCk, &QPushButton::clicked, this, &ModelPanel::openCheckpointDialog);
    connect(runButton_, &QPushButton::clicked, this, [this] { run(true); });
    connect(cancelButton_, &QPushButton::clicked, this, &ModelPanel::cancel);
}

void ModelPanel::fail(const QString& message) {
    lastFailure_ = message;
    Q_EMIT failed(message);
}

QString ModelPanel::runStatus() const { return runStatus_->text(); }

// --- model ----------------------------------------------------------------------------

void ModelPanel::openCheckpointDialog() {
    const QString path = QFileDialog::getOpenFileName(this, "Open " + spec_.title + " checkpoint", QString(),
                                                      "Glimpse checkpoints (*.h5);;All files (*)");
    if (!path.isEmpty()) loadCheckpoint(path);
}

void ModelPanel::loadCheckpoint(const QString& path) {
    shippedTried_ = true;   // a model was asked for: the shipped one is no longer offered by itself
    ++loadingModel_;
    updateControls();
    Q_EMIT message("Loading " + spec_.title + " checkpoint " + path + " ...");
    runAsync(
        this, [load = spec_.loadModel, p = path.toStdString()] { return load(p); },
        [this, path](Outcome<std::shared_ptr<void>> r) {
            --loadingModel_;
            if (!r.ok()) {
                if (pendingRun_ && !model_ && loadingModel_ == 0) pendingRun_ = false;   // nothing to run with
                updateControls();
                // Messages from the loaders usually name the file already; avoid saying it twice.
                fail(r.error.contains(path) ? r.error
                                            : QStringLiteral("%1 checkpoint %2: %3").arg(spec_.title, path, r.error));
                return;
            }
            setModelErased(std::move(r.value), path);
            Q_EMIT checkpointLoaded(path);
        });
}

void ModelPanel::setShippedCheckpoint(const QString& path) {
    shipped_ = path;
    if (!model_ && loadingModel_ == 0 && !path.isEmpty())
        modelLabel_->setText(QFileInfo(path).fileName() + " (loads when first used)");
}

bool ModelPanel::loadShippedOnFirstUse() {
    if (model_ || loadingModel_ > 0 || shipped_.isEmpty() || shippedTried_) return false;
    shippedTried_ = true;
    loadCheckpoint(shipped_);
    return true;
}

void ModelPanel::setModelErased(std::shared_ptr<void> model, const QString& label) {
    model_ = std::move(model);
    checkpoint_ = label;
    cache_.clear();   // traces of another model are stale
    cacheOrder_.clear();
    modelChanged();
    if (model_) {
        modelLabel_->setText(spec_.describeModel(model_.get(), QFileInfo(label).fileName()));
        Q_EMIT message(spec_.title + " model ready: " + label);
    } else {
        modelLabel_->setText("no checkpoint");
    }
    updateControls();
    startPendingRun();
}

// --- runs -----------------------------------------------------------------------------

void ModelPanel::run(bool interactive) {
    if (running_) return;
    const QString t = spec_.title;
    if (!viewport_->hasImage()) return fail("Run " + t + ": open an image first.");
    if (!model_ && loadShippedOnFirstUse()) return runWhenReady();   // the shipped model, then the run
    if (!model_) {
        if (loadingModel_ > 0) return fail("Run " + t + ": the checkpoint is still loading; try again in a moment.");
        if (interactive) {
            Q_EMIT message("No " + t + " checkpoint loaded: choose one.");
            openCheckpointDialog();
            return;
        }
        return fail(QStringLiteral("Run %1: no checkpoint loaded (Model > Open %1 checkpoint).").arg(t));
    }
    running_ = true;
    const int gen = ++runGeneration_;
    const QString key = sourceKey_;
    updateControls();
    Q_EMIT activateRequested();
    const QString what = key.isEmpty() ? QStringLiteral("the image") : key;
    if (abandoned_ > 0)
        Q_EMIT message(QStringLiteral("%1 run on %2 queued: waiting for the cancelled pass to finish ...").arg(t, what));
    else
        Q_EMIT message("Running " + t + " on " + what + " ...");
    struct Ran {
        Erased trace;
        double ms = 0;
    };
    runAsync(
        this,
        [runModel = spec_.runModel, model = model_, mutex = modelMutex_, image = toMat(viewport_->image())] {
            std::lock_guard<std::mutex> lock(*mutex);   // one pass at a time per model
            const auto t0 = std::chrono::steady_clock::now();
            Ran r;
            r.trace = runModel(model.get(), image);
            r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            return r;
        },
        [this, gen, key](Outcome<Ran> r) { finishRun(gen, key, r.value.trace, r.value.ms, r.error); });
}

void ModelPanel::finishRun(int gen, const QString& key, Erased trace, double ms, const QString& error) {
    if (gen != runGeneration_) {   // cancelled: dropped
        --abandoned_;
        if (abandoned_ == 0 && running_)
            Q_EMIT message("The cancelled " + spec_.title + " pass finished (result dropped); the queued run starts.");
        updateControls();
        return;
    }
    running_ = false;
    const int select = gen == autoRunGeneration_ ? autoSelect_ : -2;
    updateControls();
    if (!error.isEmpty()) return fail(spec_.title + " failed: " + error);
    Q_EMIT message(spec_.describeRun(trace.get(), ms));
    cacheTrace(key, trace, false);
    if (key == sourceKey_) {
        presentTrace(trace, false);
        if (hasTrace()) afterAutoRun(select);
    }
}

void ModelPanel::cancel() {
    if (!running_) return;
    ++runGeneration_;
    ++abandoned_;   // its worker still finishes the forward pass (LibTorch cannot interrupt it)
    running_ = false;
    updateControls();
    Q_EMIT message(spec_.title + " run cancelled (the pass finishes in the background; its result is dropped).");
}

void ModelPanel::runWhenReady(int select) {
    loadShippedOnFirstUse();
    pendingRun_ = true;
    pendingSelect_ = select;
    pendingBound_ = viewport_->hasImage();
    pendingSource_ = pendingBound_ ? sourceKey_ : QString();
    startPendingRun();
    if (pendingRun_) updateControls();
}

void ModelPanel::startPendingRun() {
    if (!pendingRun_ || running_ || loadingModel_ > 0 || !model_ || !viewport_->hasImage()) return;
    pendingRun_ = false;
    run(false);
    if (running_) {
        autoRunGeneration_ = runGeneration_;
        autoSelect_ = pendingSelect_;
    }
}

// --- traces ---------------------------------------------------------------------------

void ModelPanel::clearTraceCache() {
    cache_.clear();
    cacheOrder_.clear();
}

void ModelPanel::cacheTrace(const QString& key, Erased trace, bool fromFile) {
    cache_.insert(key, Cached{std::move(trace), fromFile});
    cacheOrder_.removeAll(key);
    cacheOrder_.append(key);
    while (cacheOrder_.size() > spec_.cacheSize) cache_.remove(cacheOrder_.takeFirst());
}

void ModelPanel::sourceChanged(const QString& key) {
    onSourceChanged(key);
    sourceKey_ = key;
    auto it = cache_.find(key);
    if (!key.isEmpty() && it != cache_.end()) presentTrace(it->trace, it->fromFile);
    else clearTrace();
    if (pendingRun_ && !pendingBound_) {
        pendingSource_ = key;
        pendingBound_ = true;
    } else if (pendingRun_ && key != pendingSource_) {
        // The automatic run (demo, --run-letr) was for the image shown when it was asked for;
        // the user opened another one meanwhile, so it is dropped rather than run on that.
        pendingRun_ = false;
        updateControls();
        Q_EMIT message("The automatic " + spec_.title + " run was dropped because another image was opened; press "
                       "Run to run " + spec_.title + " on this one.");
    }
    startPendingRun();
}

void ModelPanel::clearTrace() {
    const bool had = bool(shown_);
    shown_.reset();
    dropTrace();
    // Only wipe what this panel drew (another panel may be showing its own trace).
    if (active_ && (had || !viewport_->scene().lines.empty() || viewport_->scene().hasHeatmap())) {
        viewport_->setScene({});
        showComparePane(false);
    }
    updateControls();
}

void ModelPanel::presentTrace(Erased trace, bool fromFile) {
    if (!trace) return clearTrace();
    shown_ = std::move(trace);
    try {
        showTrace(shown_, fromFile);
    } catch (const std::exception& e) {
        shown_.reset();
        dropTrace();
        updateControls();
        return fail(QString::fromUtf8(e.what()));
    }
    updateControls();
    refresh();
    Q_EMIT traceReady();
}

void ModelPanel::saveTrace(const QString& path) {
    if (!shown_) return fail("Save " + spec_.title + " trace: there is no trace yet (run " + spec_.title + " first).");
    ++ioPending_;
    updateControls();
    runAsync(
        this, [save = spec_.saveTrace, t = shown_, p = path.toStdString()] { save(t.get(), p); },
        [this, path](Outcome<std::monostate> r) {
            --ioPending_;
            updateControls();
            if (!r.ok()) return fail(r.error);
            Q_EMIT message("Saved " + spec_.title + " trace to " + path);
            Q_EMIT traceSaved(path);
        });
}

void ModelPanel::openTrace(const QString& path) {
    ++ioPending_;
    updateControls();
    runAsync(
        this, [load = spec_.loadTrace, p = path.toStdString()] { return load(p); },
        [this, path](Outcome<OpenedTrace> r) {
            --ioPending_;
            updateControls();
            if (!r.ok()) return fail(r.error);
            const QString key = spec_.traceKeyPrefix + QFileInfo(path).absoluteFilePath();
            cacheTrace(key, r.value.trace, true);
            openingTrace_ = true;   // showing a trace file needs no model
            Q_EMIT activateRequested();
            openingTrace_ = false;
            sourceKey_ = key;
            // The main window shows the image and calls sourceChanged(key): a cache hit.
            Q_EMIT showImageRequested(QFileInfo(path).fileName(), r.value.image);
            sourceKey_ = key;
            if (shown_ != r.value.trace) presentTrace(r.value.trace, true);
            Q_EMIT message("Opened " + spec_.title + " trace " + path);
        });
}

// --- drawing -------------------------------------------------------------------------

void ModelPanel::setActive(bool on) {
    if (active_ == on) return;
    active_ = on;
    if (on && !openingTrace_) loadShippedOnFirstUse();   // the panel raised: its first use
    if (on) redraw();
}

void ModelPanel::redraw() {
    if (!active_) return;
    if (shown_) return refresh();
    viewport_->setScene({});
    showComparePane(false);
}

void ModelPanel::refresh() {
    if (!shown_ || !active_) return;
    try {
        drawScene();
    } catch (const std::exception& e) {
        return fail(QString::fromUtf8(e.what()));
    }
    Q_EMIT viewUpdated();
}

bool ModelPanel::showComparePane(bool on) {
    if (!compare_) return false;
    const bool wasOn = !compare_->isHidden();
    compare_->setVisible(on);
    if (!on) return false;
    if (!wasOn) {
        // Side by side at equal widths, then fit both panes once they have their new sizes
        // (the compare pane follows the main one; a fitted view refits when its pane resizes).
        if (auto* split = qobject_cast<QSplitter*>(compare_->parentWidget())) split->setSizes({1, 1});
        viewport_->fitToWindow();     // at the pane's new (half) width, now
        viewport_->fitWhenSized();    // and again when it is drawn at it
    }
    const auto& a = compare_->image();
    const auto& b = viewport_->image();
    if (a.width != b.width || a.height != b.height || a.rgb != b.rgb) {
        compare_->setImage(b);
        compare_->followView(*viewport_);
    }
    return true;
}

// --- the heatmap style ------------------------------------------------------------------

void ModelPanel::addHeatmapControls(QFormLayout* form) {
    headBox_ = new QComboBox(this);
    form->addRow("Head", headBox_);
    connect(headBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && i - 1 != head_) setHead(i - 1);
    });
    colormapBox_ = new QComboBox(this);
    for (int c = 0; c < render::kColormapCount; ++c) colormapBox_->addItem(render::colormapName(render::Colormap(c)));
    form->addRow("Colour map", colormapBox_);
    connect(colormapBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && i != int(colormap_)) setColormap(render::Colormap(i));
    });
    opacitySlider_ = new QSlider(Qt::Horizontal, this);
    opacitySlider_->setRange(0, 100);
    opacitySlider_->setValue(int(std::lround(opacity_ * 100)));
    form->addRow("Opacity", opacitySlider_);
    connect(opacitySlider_, &QSlider::valueChanged, this, [this](int v) { setOpacity(v / 100.0); });
}

void ModelPanel::addCompareControl(QFormLayout* form, const QStringList& choices, const QString& tip) {
    compareBox_ = new QComboBox(this);
    compareBox_->setToolTip(tip);
    setCompareChoices(choices);
    form->addRow("Compare", compareBox_);
    connect(compareBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0) compareChosen(i);
    });
}

void ModelPanel::settingChanged(const QString& nextRun) {
    clearTraceCache();   // the cached traces were made with the other setting
    const bool wasRunning = running();
    if (wasRunning) cancel();   // its result would be the other setting's
    if ((hasTrace() || wasRunning) && hasModel()) run(false);
    else Q_EMIT message(nextRun);
}

void ModelPanel::addPrecisionControl(QFormLayout* form, std::atomic<int>& setting, const QString& autoLabel,
                                     const QString& tip) {
    auto* box = new QComboBox(this);
    box->setObjectName("precision");
    box->addItem("float32 (exact)", 0);
    box->addItem(autoLabel, 1);
    box->setCurrentIndex(std::max(0, box->findData(setting.load())));
    box->setToolTip(tip);
    form->addRow("Precision", box);
    connect(box, &QComboBox::activated, this, [this, box, &setting](int index) {
        const int v = box->itemData(index).toInt();
        if (setting.exchange(v) == v) return;
        settingChanged(QStringLiteral("%1's next run computes in %2.").arg(spec_.title, box->itemText(index)));
    });
    precisionBox_ = box;
}

bool ModelPanel::setPrecision(int choice) {
    if (!precisionBox_) return false;
    const int index = precisionBox_->findData(choice);
    if (index < 0) return false;
    precisionBox_->setCurrentIndex(index);
    Q_EMIT precisionBox_->activated(index);
    return true;
}

void ModelPanel::setCompareChoices(const QStringList& choices) {
    const QSignalBlocker b(compareBox_);
    compareBox_->clear();
    compareBox_->addItem("off");
    compareBox_->addItems(choices);
}

void ModelPanel::showCompareChoice(int index) {
    if (!compareBox_ || index < 0 || index >= compareBox_->count() || compareBox_->currentIndex() == index) return;
    const QSignalBlocker b(compareBox_);
    compareBox_->setCurrentIndex(index);
}

void ModelPanel::setHeadCount(int heads) {
    headCount_ = heads;
    if (head_ >= heads) head_ = -1;
    if (!headBox_) return;
    const QSignalBlocker b(headBox_);
    headBox_->clear();
    headBox_->addItem("mean");
    for (int h = 0; h < heads; ++h) headBox_->addItem(QStringLiteral("head %1").arg(h + 1));
    headBox_->setCurrentIndex(head_ + 1);
}

void ModelPanel::setHead(int head) {
    if (head < -1 || (shown_ && head >= headCount_)) return;
    head_ = head;
    if (headBox_ && headBox_->currentIndex() != head + 1) {
        const QSignalBlocker b(headBox_);
        headBox_->setCurrentIndex(head + 1);
    }
    heatmapStyleChanged();
}

void ModelPanel::setColormap(render::Colormap c) {
    colormap_ = c;
    if (colormapBox_ && colormapBox_->currentIndex() != int(c)) {
        const QSignalBlocker b(colormapBox_);
        colormapBox_->setCurrentIndex(int(c));
    }
    heatmapStyleChanged();
}

void ModelPanel::setOpacity(double opacity) {
    opacity_ = float(std::clamp(opacity, 0.0, 1.0));
    const int v = int(std::lround(opacity_ * 100));
    if (opacitySlider_ && opacitySlider_->value() != v) {
        const QSignalBlocker b(opacitySlider_);
        opacitySlider_->setValue(v);
    }
    heatmapStyleChanged();
}

void ModelPanel::updateControls() {
    runButton_->setEnabled(!running_ && loadingModel_ == 0);
    cancelButton_->setEnabled(running_);
    progress_->setVisible(busy());
    QString status;
    if (running_ && abandoned_ > 0) status = "Queued: waiting for the cancelled pass to finish.";
    else if (running_) status = "Running " + spec_.title + " ...";
    else if (loadingModel_ > 0)
        status = pendingRun_ ? "Loading the checkpoint; " + spec_.title + " runs when it is loaded."
                             : QStringLiteral("Loading the checkpoint ...");
    else if (abandoned_ > 0) status = "A cancelled pass is finishing in the background.";
    runStatus_->setText(status);
    runStatus_->setVisible(!status.isEmpty());
    for (QWidget* w : {static_cast<QWidget*>(headBox_), static_cast<QWidget*>(colormapBox_),
                       static_cast<QWidget*>(opacitySlider_), static_cast<QWidget*>(compareBox_)})
        if (w) w->setEnabled(hasTrace());
    enableControls(hasTrace());
    Q_EMIT busyChanged(busy());
}

QTableWidget* makeClassTable(QWidget* parent, bool selectable, const QString& toolTip) {
    auto* table = new QTableWidget(0, 3, parent);
    table->setHorizontalHeaderLabels({"class", "name", "p"});
    if (selectable) {
        table->setSelectionBehavior(QAbstractItemView::SelectRows);
        table->setSelectionMode(QAbstractItemView::SingleSelection);
    } else {
        table->setSelectionMode(QAbstractItemView::NoSelection);
    }
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->verticalHeader()->setVisible(false);
    table->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    // Room for the five rows (the dock may be short: the panel scrolls what follows instead).
    const int h = table->horizontalHeader()->sizeHint().height() + 5 * table->verticalHeader()->defaultSectionSize() +
                  2 * table->frameWidth();
    table->setMinimumHeight(h);
    table->setMaximumHeight(h);
    table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Nor a horizontal scroll bar, which would take the fifth row's place in a narrow dock: the
    // name column stretches and elides instead.
    table->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    table->setTextElideMode(Qt::ElideRight);
    table->setToolTip(toolTip);
    return table;
}

void fillClassTable(QTableWidget* table, const std::vector<ClassRow>& rows) {
    table->setRowCount(int(rows.size()));
    for (int i = 0; i < int(rows.size()); ++i) {
        const ClassRow& r = rows[size_t(i)];
        auto* c = new QTableWidgetItem(QString::number(r.classIndex));
        c->setData(Qt::UserRole, qlonglong(r.classIndex));
        table->setItem(i, 0, c);
        table->setItem(i, 1, new QTableWidgetItem(QString::fromStdString(r.name)));
        auto* p = new QTableWidgetItem(QString::number(r.prob, 'f', 4));
        p->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        table->setItem(i, 2, p);
    }
    table->resizeColumnToContents(0);
    table->resizeColumnToContents(2);
}

} // namespace glimpse::app
