#include "app/coat/inspector.h"
#include "app/async.h"
#include "app/domain_check.h"
#include "app/family.h"
#include "app/resources.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QPixmap>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

#include <opencv2/core.hpp>

#include "core/data/classification.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/util/autocast.h"
#include "core/util/products.h"
#include "core/util/threads.h"
#include "renderer/colormap.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kTraceCacheSize = 16;
constexpr int kThumbPx = 56;

const coat::CoatTrace& asTrace(const void* t) { return *static_cast<const coat::CoatTrace*>(t); }

// The family's model and trace I/O (ModelPanel::Spec): on worker threads.
std::shared_ptr<void> loadModel(const std::string& path) {
    auto model = coat::loadCoat(path);
    model->eval();
    return model;
}

// The precision of this process's CoaT runs (the panel's Precision box, docs/performance.md):
// 0 float32 as the reference implementation computes it (exact comparisons), 1 auto (bfloat16
// products on a CPU with AVX512-BF16 / AMX, else the MLPs as int8 products where LibTorch has the
// kernels, else float32).
std::atomic<int>& computeSetting() {
    static std::atomic<int> setting{0};
    return setting;
}

ModelPanel::Erased runModel(void* model, const cv::Mat& rgb) {
    auto& m = *static_cast<coat::CoatModel*>(model);
    const torch::ScalarType compute =
        computeSetting() == 1 ? parsePrecision("auto", m.device(), "--precision", /*int8LinearLayers=*/true) : torch::kFloat;
    return std::make_shared<const coat::CoatTrace>(coat::runCoat(m, rgb, {}, compute));
}

void saveTraceFile(const void* trace, const std::string& path) {
    asTrace(trace).save(path);   // glimpse::Trace::save writes atomically
}

ModelPanel::OpenedTrace loadTraceFile(const std::string& path) {
    auto t = std::make_shared<const coat::CoatTrace>(coat::CoatTrace::load(path));
    const torch::Tensor img = t->image().contiguous();   // the network's input crop
    ModelPanel::OpenedTrace r;
    r.image.width = int(img.size(1));
    r.image.height = int(img.size(0));
    r.image.rgb.assign(img.data_ptr<uint8_t>(), img.data_ptr<uint8_t>() + img.numel());
    r.trace = std::move(t);
    return r;
}

QString describeModel(const void* model, const QString& fileName) {
    const auto& c = static_cast<const coat::CoatModel*>(model)->config();
    return QStringLiteral("%1\n%2, dims %3/%4/%5/%6, %7 heads, %8 classes, %9 px")
        .arg(fileName, QString::fromStdString(c.variant))
        .arg(c.embedDims[0]).arg(c.embedDims[1]).arg(c.embedDims[2]).arg(c.embedDims[3])
        .arg(c.numHeads).arg(c.numClasses).arg(c.imageSize);
}

QString describeRun(const void* trace, double ms) {
    const auto top = asTrace(trace).top5();
    return QStringLiteral("CoaT finished in %1 ms: %2 (p %3; %4)")
        .arg(ms, 0, 'f', 0)
        .arg(top.empty() ? QString("-") : QString::fromStdString(top.front().name))
        .arg(top.empty() ? 0.0 : double(top.front().prob), 0, 'f', 3)
        .arg(QString::fromStdString(asTrace(trace).compute()));
}

} // namespace

QString defaultCoatCheckpoint() { return defaultCheckpoint("coat"); }

CoatInspector::CoatInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent)
    : ModelPanel({"CoaT", "Classify the shown image with CoaT and capture its trace (Ctrl+Shift+R)", kTraceCacheSize,
                  "coat-trace:", loadModel, runModel, saveTraceFile, loadTraceFile, describeModel,
                  describeRun},
                 viewport, compare, parent) {
    buildUi();
    // A click on the image (not a drag) sets the query pixel; in the compare pane too (same
    // image coordinates).
    connect(viewport, &widgets::ImageViewport::imageClicked, this, [this](int px, int py) {
        if (active() && px >= 0) setQuery(px + 0.5, py + 0.5);
    });
    if (compare)
        connect(compare, &widgets::ImageViewport::imageClicked, this, [this](int px, int py) {
            if (active() && px >= 0 && compareScale_ >= 0) setQuery(px + 0.5, py + 0.5);
        });
    updateControls();
}

CoatInspector::~CoatInspector() = default;

bool CoatInspector::busy() const { return ModelPanel::busy() || camPending_ > 0 || (domain_ && domain_->measuring()); }

void CoatInspector::buildUi() {
    domain_ = new DomainCheck(this);
    form()->addRow("Domain", domain_);
    connect(domain_, &DomainCheck::profileReady, this, [this] { updateControls(); });   // no longer busy
    addPrecisionControl(form(), computeSetting(),
                        cpuHasBf16()                ? "auto: bfloat16 (this CPU has it)"
                        : products::int8Available() ? "auto: int8 MLP layers (no bfloat16 here)"
                                                    : "auto: float32 (no bfloat16 here)",
                        "Precision of the next runs (docs/performance.md). float32: as the reference code computes\n"
                        "it, for exact comparisons. auto: the linear layers' and the attention's products in\n"
                        "bfloat16 on a CPU with AVX512-BF16 or AMX (the shipped model: the same top-1 on 9,998 of\n"
                        "10,000 test images, probabilities within 0.007), else the MLPs' linear layers as int8\n"
                        "products (the same top-1 on 9,990 of 10,000), else float32. The status line names the\n"
                        "precision of the shown run.");
    buildViewControls(form());
    buildLists();
}

void CoatInspector::buildViewControls(QFormLayout* form) {
    mode_ = new QComboBox(this);
    for (int m = 0; m < kCoatModeCount; ++m) mode_->addItem(coatModeName(CoatMode(m)));
    mode_->setToolTip("Effective attention w_j = q_i . softmax(K)_j / sqrt(C) of the clicked query pixel, its "
                      "CRPE window term, the CLS token's attention, a class activation map, or one channel of "
                      "softmax(K)");
    form->addRow("View", mode_);
    connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setMode(CoatMode(i));
    });

    scale_ = new QComboBox(this);
    for (int s = 0; s < 4; ++s) scale_->addItem(QStringLiteral("scale %1 (stride %2)").arg(s + 1).arg(4 << s));
    form->addRow("Scale", scale_);
    connect(scale_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setScale(i);
    });
    block_ = new QComboBox(this);
    form->addRow("Block", block_);
    connect(block_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setBlock(i);
    });
    class_ = new QSpinBox(this);
    class_->setRange(-1, 0);
    class_->setSpecialValueText("top-1");
    class_->setToolTip("Class of the Grad-CAM (a top-5 row picks it too)");
    form->addRow("CAM class", class_);
    connect(class_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) setCamClass(v);
    });
    channel_ = new QSpinBox(this);
    channel_->setRange(1, 1);
    channel_->setToolTip("Key channel c of softmax(K)[:, c] (the gallery below picks it too)");
    form->addRow("Key channel", channel_);
    connect(channel_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) setChannel(v - 1);
    });

    addHeatmapControls(form);

    addCompareControl(form, {"scale 1", "scale 2", "scale 3", "scale 4"},
                      "Show the same view at another scale beside this one (synchronized pan/zoom)");

}

void CoatInspector::buildLists() {
    QVBoxLayout* col = column();
    table_ = makeClassTable(this, true, "Top-5 classes; select a row to show its Grad-CAM");
    col->addWidget(new QLabel("Top-5", this));
    col->addWidget(table_);
    connect(table_, &QTableWidget::itemSelectionChanged, this, [this] {
        if (updating_) return;
        const auto items = table_->selectedItems();
        if (items.isEmpty()) return;
        const QTableWidgetItem* first = table_->item(items.first()->row(), 0);
        if (!first) return;
        setCamClass(first->data(Qt::UserRole).toLongLong());
        setMode(CoatMode::Cam);
    });

    col->addWidget(new QLabel("Key channels softmax(K)[:, c] (click one to show it)", this));
    gallery_ = new QListWidget(this);
    gallery_->setViewMode(QListView::IconMode);
    gallery_->setIconSize(QSize(kThumbPx, kThumbPx));
    gallery_->setResizeMode(QListView::Adjust);
    gallery_->setMovement(QListView::Static);
    gallery_->setSpacing(2);
    gallery_->setUniformItemSizes(true);
    gallery_->setMinimumHeight(kThumbPx + 28);
    col->addWidget(gallery_, 1);
    connect(gallery_, &QListWidget::currentRowChanged, this, [this](int row) {
        if (updating_ || row < 0) return;
        setChannel(row);
        setMode(CoatMode::KeyChannel);
    });
}

std::shared_ptr<const coat::CoatTrace> CoatInspector::trace() const {
    return view_ ? view_->tracePtr() : nullptr;
}

// --- the family's hooks -----------------------------------------------------------------

void CoatInspector::setModel(std::shared_ptr<coat::CoatModel> model, const QString& label) {
    setModelErased(std::move(model), label);
}

void CoatInspector::modelChanged() {
    // The training data, when the checkpoint says which: its class names are Fashion-MNIST's
    // (checkpoints record no dataset; docs/decisions.md "Out-of-domain warnings").
    const auto model = modelAs<coat::CoatModel>();
    if (!model) return domain_->clear();
    if (model->config().classNames != data::fashionMnistClassNames()) {
        domain_->loadProfile("unknown data", []() -> data::DomainProfile {
            throw Error("the checkpoint does not say what it was trained on (its classes are not Fashion-MNIST's)");
        });
        return;
    }
    domain_->loadProfile("fashion-mnist", [] {
        const auto splits = data::openClassificationDataset("fashion-mnist");
        return data::profileImages(*splits.train, "fashion-mnist");
    });
}

// --- traces ---------------------------------------------------------------------------

void CoatInspector::dropTrace() {
    view_.reset();
    domain_->clear();
    updating_ = true;
    table_->setRowCount(0);
    gallery_->clear();
    galleryKey_.clear();
    block_->clear();
    updating_ = false;
}

void CoatInspector::setTrace(std::shared_ptr<const coat::CoatTrace> trace, bool shownIsCrop) {
    presentTrace(std::move(trace), shownIsCrop);
}

void CoatInspector::showTrace(const Erased& erased, bool shownIsCrop) {
    const auto& img = viewport()->image();
    view_ = std::make_unique<CoatView>(std::static_pointer_cast<const coat::CoatTrace>(erased),
                                       std::max(1, img.width), std::max(1, img.height), shownIsCrop);
    const auto& t = view_->trace();
    if (settings_.camClass >= t.probs().size(0)) settings_.camClass = -1;
    // How far the image is from the training data (an opened trace shows the crop: its
    // original size is in the meta).
    {
        const auto& meta = t.raw().meta();
        int ow = 0, oh = 0;
        if (shownIsCrop && meta.contains("original_size") && meta["original_size"].is_array() &&
            meta["original_size"].size() == 2) {
            oh = meta["original_size"][0].get<int>();
            ow = meta["original_size"][1].get<int>();
        }
        domain_->check(img, ow, oh);
    }
    // A new image: the query starts at the crop's centre.
    settings_.queryX = settings_.queryY = -1;
    galleryKey_.clear();
    refillSelectors();
    refillTable();
}

// --- view settings -------------------------------------------------------------------

void CoatInspector::setMode(CoatMode mode) {
    const bool enteringCam = mode == CoatMode::Cam && settings_.mode != CoatMode::Cam;
    settings_.mode = mode;
    if (mode_->currentIndex() != int(mode)) {
        updating_ = true;
        mode_->setCurrentIndex(int(mode));
        updating_ = false;
    }
    // Grad-CAM is shown at the scale of the Scale box: on entering it, the scale last chosen
    // for it, else the model's sensible default (CoatView::defaultCamScale).
    if (enteringCam && view_) {
        const int s = camScale_ >= 0 ? camScale_ : view_->defaultCamScale();
        if (s != settings_.scale) {
            settings_.scale = s;
            settings_.block = -1;
            refillSelectors();
        }
    }
    if (mode == CoatMode::Cam && view_) {
        const int64_t c = view_->camClass(settings_);
        if (!view_->hasCam(c, settings_.scale)) requestCam(c);
    }
    updateControls();
    refresh();
}

void CoatInspector::setScale(int scale) {
    if (scale < 0 || scale > 3) return;
    settings_.scale = scale;
    settings_.block = -1;
    refillSelectors();
    if (settings_.mode == CoatMode::Cam && view_) {
        camScale_ = scale;
        const int64_t c = view_->camClass(settings_);
        if (!view_->hasCam(c, scale)) requestCam(c);
    }
    refresh();
}

void CoatInspector::setBlock(int block) {
    settings_.block = block;
    if (view_) {
        const int n = view_->blocksInScale(settings_.scale);
        if (block >= n) settings_.block = -1;
        const int idx = settings_.block < 0 ? n - 1 : settings_.block;
        if (block_->currentIndex() != idx) {
            updating_ = true;
            block_->setCurrentIndex(idx);
            updating_ = false;
        }
    }
    refresh();
}

void CoatInspector::setQuery(double x, double y) {
    if (view_) {
        int64_t ty, tx;
        if (!view_->tokenAt(settings_.scale, x, y, ty, tx)) {
            Q_EMIT message("The query must lie inside the network's input crop (the yellow frame).");
            return;
        }
    }
    settings_.queryX = x;
    settings_.queryY = y;
    // A click asks for the query's map: from the views without a query, go to attention.
    if (settings_.mode != CoatMode::Attention && settings_.mode != CoatMode::Crpe) setMode(CoatMode::Attention);
    else refresh();
}

void CoatInspector::setCamClass(int64_t cls) {
    if (view_ && cls >= view_->trace().probs().size(0)) return;
    settings_.camClass = cls < 0 ? -1 : cls;
    if (class_->value() != int(settings_.camClass)) {
        updating_ = true;
        class_->setValue(int(settings_.camClass));
        updating_ = false;
    }
    if (view_ && settings_.mode == CoatMode::Cam) {
        const int64_t c = view_->camClass(settings_);
        if (!view_->hasCam(c, settings_.scale)) requestCam(c);
    }
    refresh();
}

void CoatInspector::setChannel(int channel) {
    settings_.channel = std::max(0, channel);
    if (channel_->value() != settings_.channel + 1) {
        updating_ = true;
        channel_->setValue(settings_.channel + 1);
        updating_ = false;
    }
    if (gallery_->currentRow() != settings_.channel && settings_.channel < gallery_->count()) {
        updating_ = true;
        gallery_->setCurrentRow(settings_.channel);
        updating_ = false;
    }
    refresh();
}

void CoatInspector::heatmapStyleChanged() {
    if (settings_.colormap != colormap()) galleryKey_.clear();   // thumbnails use the colour map too
    settings_.head = head();
    settings_.colormap = colormap();
    settings_.opacity = opacity();
    refresh();
}

void CoatInspector::setCompareScale(int scale) {
    if (scale < -1 || scale > 3) scale = -1;
    compareScale_ = scale;
    showCompareChoice(scale + 1);
    if (active()) {
        try {
            refreshCompare();
        } catch (const std::exception& e) {
            fail(QString::fromStdString(e.what()));
        }
    }
}

void CoatInspector::requestCam(int64_t cls) {
    if (!view_) return;
    if (!hasModel()) {
        fail(QStringLiteral("Grad-CAM of class %1 at scale %2: not stored in this trace (it holds the top-5) and "
                            "no CoaT model is loaded to compute it.").arg(cls).arg(settings_.scale + 1));
        return;
    }
    if (modelAs<coat::CoatModel>()->config().numClasses != view_->trace().probs().size(0)) {
        fail("Grad-CAM: the loaded CoaT model has another number of classes than the model that made this trace.");
        return;
    }
    ++camPending_;
    updateControls();
    const int scale = settings_.scale;
    Q_EMIT message(QStringLiteral("Computing the Grad-CAM of class %1 at scale %2 ...").arg(cls).arg(scale + 1));
    auto traceRef = view_->tracePtr();
    runAsync(
        this,
        [model = modelAs<coat::CoatModel>(), mutex = modelMutex(), traceRef, cls, scale] {
            std::lock_guard<std::mutex> lock(*mutex);
            return coat::gradCam(*model, coatInputFromTrace(*traceRef, model->config()), cls, scale, traceRef->computeDtype());
        },
        [this, cls, scale, traceRef](Outcome<torch::Tensor> r) {
            --camPending_;
            updateControls();
            if (!r.ok()) return fail(QStringLiteral("Grad-CAM of class %1 failed: %2").arg(cls).arg(r.error));
            if (!view_ || view_->tracePtr() != traceRef) return;   // another trace meanwhile
            try {
                view_->addCam(cls, r.value, scale);
            } catch (const std::exception& e) {
                return fail(QString::fromStdString(e.what()));
            }
            refresh();
            Q_EMIT camReady(cls);
        });
}

// --- drawing -------------------------------------------------------------------------

void CoatInspector::refillSelectors() {
    if (!view_) return;
    const auto& t = view_->trace();
    updating_ = true;
    scale_->setCurrentIndex(settings_.scale);
    block_->clear();
    for (int b : t.blocksOfScale(settings_.scale)) block_->addItem(QString::fromStdString(t.block(b).name));
    const int n = block_->count();
    if (settings_.block >= n) settings_.block = -1;
    block_->setCurrentIndex(settings_.block < 0 ? n - 1 : settings_.block);
    setHeadCount(int(t.numHeads()));
    settings_.head = head();
    class_->setRange(-1, int(t.probs().size(0)) - 1);
    class_->setValue(int(settings_.camClass));
    const int C = int(t.headDim(settings_.scale));
    if (settings_.channel >= C) settings_.channel = C - 1;
    channel_->setRange(1, C);
    channel_->setValue(settings_.channel + 1);
    updating_ = false;
}

void CoatInspector::refillTable() {
    updating_ = true;
    table_->clearSelection();
    if (!view_) {
        table_->setRowCount(0);
        updating_ = false;
        return;
    }
    std::vector<ClassRow> rows;
    for (const auto& t : view_->trace().top5()) rows.push_back({t.classIndex, t.name, double(t.prob)});
    fillClassTable(table_, rows);
    updating_ = false;
}

void CoatInspector::refillGallery() {
    if (!view_) return;
    const int b = view_->blockIndex(settings_);
    const QString key = QStringLiteral("%1/%2/%3").arg(b).arg(settings_.head).arg(int(settings_.colormap));
    if (key == galleryKey_) return;
    galleryKey_ = key;
    // Thumbnails of softmax(K)[:, c]: slices of the trace, each normalized to its own range.
    const torch::Tensor g = view_->keyGallery(settings_);
    const int C = int(g.size(0)), h = int(g.size(1)), w = int(g.size(2));
    const int zoom = std::max(1, kThumbPx / std::max(h, w));
    updating_ = true;
    gallery_->clear();
    for (int c = 0; c < C; ++c) {
        const auto rgb = colorizeMap(g[c], settings_.colormap, zoom);
        QImage im(rgb.data(), w * zoom, h * zoom, w * zoom * 3, QImage::Format_RGB888);
        auto* item = new QListWidgetItem(QIcon(QPixmap::fromImage(im.copy())), QString::number(c + 1));
        item->setToolTip(QStringLiteral("channel %1").arg(c + 1));
        gallery_->addItem(item);
    }
    if (settings_.channel < C) gallery_->setCurrentRow(settings_.channel);
    updating_ = false;
}

void CoatInspector::drawScene() {
    try {
        refillGallery();
    } catch (const std::exception& e) {
        fail(QString::fromStdString(e.what()));
    }
    viewport()->setScene(view_->scene(settings_));
    refreshCompare();
}

void CoatInspector::refreshCompare() {
    if (!showComparePane(view_ && compareScale_ >= 0)) return;
    CoatViewSettings s = settings_;
    s.scale = compareScale_;
    s.block = -1;
    comparePane()->setScene(view_->scene(s));
}

void CoatInspector::enableControls(bool have) {
    for (QWidget* w : {static_cast<QWidget*>(mode_), static_cast<QWidget*>(scale_), static_cast<QWidget*>(block_),
                       static_cast<QWidget*>(class_),
                       static_cast<QWidget*>(channel_)})
        w->setEnabled(have);
}

} // namespace glimpse::app
