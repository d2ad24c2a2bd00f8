#include "app/constellation/inspector.h"
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
#include <QLineEdit>
#include <QListWidget>
#include <QPixmap>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

#include "core/data/fewshot.h"
#include "core/error.h"
#include "core/models/constellation/model.h"
#include "widgets/viewport.h"

namespace glimpse::app {

namespace {

constexpr int kTraceCacheSize = 16;
constexpr int kPatchPx = 56;
constexpr int kLegendSwatchPx = 14;
constexpr int kGalleryBatch = 64;   // clusterGallery's batch: its cancel check runs once per batch
const char* kDefaultData = "procedural";

using glimpse::constellation::ConstellationModel;
using glimpse::constellation::ConstellationTrace;

const ConstellationTrace& asTrace(const void* t) { return *static_cast<const ConstellationTrace*>(t); }

// The family's model and trace I/O (ModelPanel::Spec): on worker threads.
std::shared_ptr<void> loadModel(const std::string& path) {
    auto model = glimpse::constellation::loadConstellation(path);
    model->eval();
    return model;
}

ModelPanel::Erased runModel(void* model, const cv::Mat& rgb) {
    return std::make_shared<const ConstellationTrace>(ConstellationTrace::capture(*static_cast<ConstellationModel*>(model), rgb));
}

void saveTraceFile(const void* trace, const std::string& path) { asTrace(trace).save(path); }

ModelPanel::OpenedTrace loadTraceFile(const std::string& path) {
    auto t = std::make_shared<const ConstellationTrace>(ConstellationTrace::load(path));
    const torch::Tensor img = t->image().contiguous();   // what the network saw (S x S)
    ModelPanel::OpenedTrace r;
    r.image.width = int(img.size(1));
    r.image.height = int(img.size(0));
    r.image.rgb.assign(img.data_ptr<uint8_t>(), img.data_ptr<uint8_t>() + img.numel());
    r.trace = std::move(t);
    return r;
}

QString describeModel(const void* model, const QString& fileName) {
    const auto* m = static_cast<const ConstellationModel*>(model);
    const auto& c = m->config();
    QStringList ch;
    for (int64_t v : c.blockChannels()) ch << QString::number(v);
    int relation = 0;
    const auto mods = m->constellationModules();
    for (const auto& mod : mods) relation += mod.relation;
    return QStringLiteral("%1\n%2, channels %3, %4 clusters, %5 heads, %6 modules (%7 with relation), %8 classes, %9 px")
        .arg(fileName, QString::fromStdString(c.describe()), ch.join('/'))
        .arg(c.clusters)
        .arg(c.heads)
        .arg(mods.size())
        .arg(relation)
        .arg(c.numClasses)
        .arg(c.imageSize);
}

QString describeRun(const void* trace, double ms) {
    const auto top = asTrace(trace).top5();
    return QStringLiteral("ConstellationNet finished in %1 ms: %2 (p %3)")
        .arg(ms, 0, 'f', 0)
        .arg(top.empty() ? QString("-") : QString::fromStdString(top.front().name))
        .arg(top.empty() ? 0.0 : double(top.front().prob), 0, 'f', 3);
}

struct GalleryItem {
    QImage patch;
    QString text, tip;
};
struct GalleryResult {
    std::vector<GalleryItem> items;
    int64_t scanned = 0;
    QString module;
};

QImage toQImage(const cv::Mat& rgb) {
    return QImage(rgb.data, rgb.cols, rgb.rows, int(rgb.step), QImage::Format_RGB888).copy();
}

} // namespace

QString defaultConstellationCheckpoint() { return defaultCheckpoint("constellation"); }

ConstellationInspector::ConstellationInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                                               QWidget* parent)
    : ModelPanel({"ConstellationNet",
                  "Run ConstellationNet on the shown image and capture its cluster maps (Ctrl+Alt+R)", kTraceCacheSize,
                  "constellation-trace:", loadModel, runModel, saveTraceFile, loadTraceFile, describeModel,
                  describeRun},
                 viewport, compare, parent) {
    buildViewControls(form());
    tabs_ = new QTabWidget(this);
    tabs_->addTab(buildClustersTab(), "Clusters");
    tabs_->addTab(buildGalleryTab(), "Gallery");
    episode_ = new EpisodeView([this] { return episodeSource(); }, this);
    tabs_->addTab(episode_, "Episode");
    column()->addWidget(tabs_, 1);
    connect(episode_, &EpisodeView::failed, this, [this](const QString& m) { fail(m); });
    connect(episode_, &EpisodeView::message, this, &ModelPanel::message);
    connect(episode_, &EpisodeView::busyChanged, this, [this] { updateControls(); });
    connect(episode_, &EpisodeView::episodeReady, problem_, &QLabel::hide);
    // A click on the image (not a drag) selects a cell; hovering names its clusters.
    connect(viewport, &widgets::ImageViewport::imageClicked, this, [this](int px, int py) {
        if (active() && px >= 0) selectPoint(px + 0.5, py + 0.5);
    });
    connect(viewport, &widgets::ImageViewport::cursorPixel, this, [this](int px, int py, const QString&) {
        if (active()) hoverAt(px < 0 ? -1.0 : px + 0.5, py < 0 ? -1.0 : py + 0.5);
    });
    galleryTimer_ = new QTimer(this);
    galleryTimer_->setInterval(100);
    connect(galleryTimer_, &QTimer::timeout, this, [this] {
        if (galleryScanned_) galleryProgress_->setValue(int(std::min<int64_t>(galleryTotal_, galleryScanned_->load())));
    });
    updateControls();
}

ConstellationInspector::~ConstellationInspector() {
    if (galleryCancel_) *galleryCancel_ = true;
}

void ConstellationInspector::buildViewControls(QFormLayout* form) {
    // Failures (a checkpoint of another family, a data spec that does not open, ...) stay visible
    // here until something succeeds, besides the main window's message.
    problem_ = new QLabel(this);
    problem_->setWordWrap(true);
    problem_->setStyleSheet("color: #c02020;");
    problem_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    problem_->hide();
    form->addRow(problem_);
    connect(this, &ModelPanel::failed, this, [this](const QString& m) {
        problem_->setText(m);
        problem_->show();
    });
    for (auto ok : {&ModelPanel::checkpointLoaded, &ModelPanel::traceSaved})
        connect(this, ok, problem_, &QLabel::hide);
    connect(this, &ModelPanel::traceReady, problem_, &QLabel::hide);
    domain_ = new DomainCheck(this);
    form->addRow("Domain", domain_);
    connect(domain_, &DomainCheck::profileReady, this, [this] { updateControls(); });   // no longer busy
    shipped_ = new QPushButton("Load the shipped model (constellation_demo.h5)", this);
    shipped_->setToolTip("The small ConstellationNet that ships with Glimpse (trained on the procedural few-shot data)");
    shipped_->hide();
    form->addRow(shipped_);
    connect(shipped_, &QPushButton::clicked, this, &ConstellationInspector::loadShippedModel);
    mode_ = new QComboBox(this);
    for (int m = 0; m < kConstellationModeCount; ++m) mode_->addItem(constellationModeName(ConstellationMode(m)));
    mode_->setToolTip("Each cell coloured by its most similar cluster, or the cell relation attention of the "
                      "clicked cell over the module's cells");
    form->addRow("View", mode_);
    connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setMode(ConstellationMode(i));
    });
    module_ = new QComboBox(this);
    module_->setToolTip("Constellation module (cell feature clustering after a conv layer; some also model cell "
                        "relations)");
    form->addRow("Module", module_);
    connect(module_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setModule(i);
    });
    // Long module names must not widen the panel past its dock: the boxes elide, the list
    // shows them whole.
    for (QComboBox* c : {mode_, module_}) {
        c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        c->setMinimumContentsLength(14);
    }
    addHeatmapControls(form);
    headBox()->setToolTip("Relation attention head (mean: the mean over heads)");
    cell_ = new QLabel("Click a cell of the image to select it.", this);
    cell_->setWordWrap(true);
    form->addRow("Cell", cell_);
    hover_ = new QLabel("-", this);
    hover_->setWordWrap(true);
    hover_->setToolTip("The cell under the cursor: its 3 most similar clusters and cosine similarities");
    form->addRow("Hover", hover_);
    relationMsg_ = new QLabel(this);
    relationMsg_->setWordWrap(true);
    relationMsg_->setStyleSheet("color: #c05000;");
    relationMsg_->hide();
    form->addRow(relationMsg_);
    data_ = new QLineEdit(kDefaultData, this);
    data_->setToolTip("Few-shot dataset for the gallery and episodes: procedural[:SEED], composition[:SEED], "
                      "fashion-mnist[:DIR] or a mini-ImageNet-style folder (train/ val/ test/ class folders)");
    form->addRow("Data", data_);
}

QWidget* ConstellationInspector::buildClustersTab() {
    auto* w = new QWidget(this);
    auto* col = new QVBoxLayout(w);
    col->addWidget(new QLabel("Clusters in the map (click one for its gallery)", w));
    legend_ = new QListWidget(w);
    legend_->setIconSize(QSize(kLegendSwatchPx, kLegendSwatchPx));
    legend_->setToolTip("The clusters that are some cell's best cluster in the shown module, most cells first");
    legend_->setMinimumHeight(120);
    col->addWidget(legend_, 1);
    connect(legend_, &QListWidget::itemClicked, this, [this](QListWidgetItem* item) {
        if (!item) return;
        tabs_->setCurrentIndex(1);
        showGallery(item->data(Qt::UserRole).toLongLong());
    });
    table_ = makeClassTable(w, false, "Top-5 base classes of the linear head");
    col->addWidget(new QLabel("Top-5 (base classes)", w));
    col->addWidget(table_);
    return w;
}

QWidget* ConstellationInspector::buildGalleryTab() {
    auto* w = new QWidget(this);
    auto* col = new QVBoxLayout(w);
    auto* form = new QFormLayout;
    col->addLayout(form);
    cluster_ = new QSpinBox(w);
    cluster_->setRange(0, 0);
    cluster_->setToolTip("The cluster whose closest dataset patches to show (the legend picks it too)");
    count_ = new QSpinBox(w);
    count_->setRange(1, 64);
    count_->setValue(12);
    count_->setToolTip("Patches to show (at most one per image)");
    scan_ = new QSpinBox(w);
    scan_->setRange(8, 1000000);
    scan_->setValue(600);
    scan_->setSingleStep(100);
    scan_->setToolTip("Images of the novel split to scan, taken round-robin over its classes");
    // One control per row: side by side they made the panel wider than its dock.
    form->addRow("Cluster", cluster_);
    form->addRow("Patches", count_);
    form->addRow("Scan", scan_);
    galleryButton_ = new QPushButton("Show patches", w);
    galleryCancelButton_ = new QPushButton("Cancel", w);
    galleryCancelButton_->setEnabled(false);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(galleryButton_);
    buttons->addWidget(galleryCancelButton_);
    form->addRow(buttons);
    galleryProgress_ = new QProgressBar(w);
    galleryProgress_->setMaximumHeight(12);
    galleryProgress_->hide();
    col->addWidget(galleryProgress_);
    galleryStatus_ = new QLabel("Pick a cluster (here or in the legend) to see its closest patches of the novel split.", w);
    galleryStatus_->setWordWrap(true);
    col->addWidget(galleryStatus_);
    gallery_ = new QListWidget(w);
    gallery_->setViewMode(QListView::IconMode);
    gallery_->setIconSize(QSize(kPatchPx, kPatchPx));
    gallery_->setResizeMode(QListView::Adjust);
    gallery_->setMovement(QListView::Static);
    gallery_->setSpacing(2);
    gallery_->setUniformItemSizes(true);
    // Cells with room for the patch and its label (the labels were clipped).
    const int labelH = gallery_->fontMetrics().height();
    gallery_->setGridSize(QSize(std::max(kPatchPx, gallery_->fontMetrics().horizontalAdvance("0.000")) + 10,
                                kPatchPx + labelH + 10));
    gallery_->setWordWrap(true);
    gallery_->setMinimumHeight(2 * (kPatchPx + labelH + 10) + 8);   // two rows; the panel scrolls
    col->addWidget(gallery_, 1);
    connect(cluster_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) showGallery(v);
    });
    connect(galleryButton_, &QPushButton::clicked, this, [this] { showGallery(cluster_->value()); });
    connect(galleryCancelButton_, &QPushButton::clicked, this, &ConstellationInspector::cancelGallery);
    return w;
}

bool ConstellationInspector::busy() const {
    return ModelPanel::busy() || galleryPending_ > 0 || (episode_ && episode_->busy()) || (domain_ && domain_->measuring());
}

std::shared_ptr<const ConstellationTrace> ConstellationInspector::trace() const {
    return view_ ? view_->tracePtr() : nullptr;
}

std::string ConstellationInspector::dataSpec() const {
    const std::string s = data_->text().trimmed().toStdString();
    return s.empty() ? std::string(kDefaultData) : s;
}

QString ConstellationInspector::hoverText(double x, double y) const {
    if (!view_ || x < 0 || y < 0) return {};
    int64_t cy, cx;
    const int m = view_->moduleIndex(settings_);
    if (!view_->cellAt(m, x, y, cy, cx)) return {};
    return QString::fromStdString(view_->hoverText(m, cy, cx));
}

QString ConstellationInspector::hoverLabelText() const { return hover_->text(); }

QString ConstellationInspector::problemText() const { return problem_->isHidden() ? QString() : problem_->text(); }

QString ConstellationInspector::relationMessage() const { return relationMsg_->isHidden() ? QString() : relationMsg_->text(); }

EpisodeView::Source ConstellationInspector::episodeSource() const {
    return {modelAs<ConstellationModel>(), modelMutex(), dataSpec(), dataCache_};
}

// --- model -----------------------------------------------------------------------------

void ConstellationInspector::loadShippedModel() {
    const QString path = defaultConstellationCheckpoint();
    if (path.isEmpty()) {
        Q_EMIT message("constellation_demo.h5 is not installed; open a ConstellationNet checkpoint (Checkpoint...).");
        return;
    }
    loadCheckpoint(path);
}

void ConstellationInspector::showEvent(QShowEvent* e) {
    ModelPanel::showEvent(e);
    // Offered on first use: the first time the panel is shown without a model, the shipped one
    // loads (when installed; nothing is said when it is not).
    // Only while it draws the viewport: in the main window a panel shown behind another's tab
    // has not been used yet (the base loads it when raised, ModelPanel::setActive).
    if (offeredShipped_ || !active()) return;
    offeredShipped_ = true;
    if (!hasModel() && !modelLoading() && lastFailure().isEmpty() && !defaultConstellationCheckpoint().isEmpty())
        loadShippedModel();
}

void ConstellationInspector::modelChanged() {
    cancelGallery();
    gallery_->clear();
    galleryShown_ = -1;
    galleryStatus_->setText("Pick a cluster (here or in the legend) to see its closest patches of the novel split.");
    episode_->clear();
    const auto model = modelAs<ConstellationModel>();
    updating_ = true;
    cluster_->setRange(0, model ? int(model->config().clusters) - 1 : 0);
    updating_ = false;
    // The training data, when the checkpoint says which: its class names are the procedural
    // family's base classes (checkpoints record no dataset; docs/decisions.md "Out-of-domain
    // warnings").
    if (!model) return domain_->clear();
    domain_->loadProfile("procedural (base classes)", [names = model->config().classNames,
                                                       size = int(model->config().imageSize)] {
        const auto splits = data::openFewShotDataset("procedural", size);
        if (!splits.base || splits.base->classNames() != names)
            throw Error("the checkpoint does not say what it was trained on (its classes are not the procedural "
                        "family's base classes)");
        return data::profileImages(*splits.base, "procedural base classes");
    });
}

// --- traces ---------------------------------------------------------------------------

void ConstellationInspector::setTrace(std::shared_ptr<const ConstellationTrace> trace) {
    presentTrace(std::move(trace), false);
}

void ConstellationInspector::showTrace(const Erased& erased, bool) {
    const auto& img = viewport()->image();
    view_ = std::make_unique<ConstellationView>(std::static_pointer_cast<const ConstellationTrace>(erased),
                                                std::max(1, img.width), std::max(1, img.height));
    const auto& t = view_->trace();
    domain_->check(img);   // how far the image is from the training data
    // A new image: no cell selected, the cluster map.
    settings_.pointX = settings_.pointY = -1;
    settings_.mode = ConstellationMode::Clusters;
    if (settings_.module >= t.numModules()) settings_.module = -1;
    hoverText_.clear();
    hover_->setText("-");
    cell_->setText("Click a cell of the image to select it.");
    updating_ = true;
    mode_->setCurrentIndex(0);
    if (!hasModel()) cluster_->setRange(0, int(t.clusters()) - 1);
    updating_ = false;
    setHeadCount(t.numHeads());
    settings_.head = head();
    refillModules();
    refillLegend();
    refillTable();
    updateRelationMessage();
}

void ConstellationInspector::dropTrace() {
    view_.reset();
    domain_->clear();
    scene_ = {};
    hoverText_.clear();
    updating_ = true;
    legend_->clear();
    table_->setRowCount(0);
    module_->clear();
    updating_ = false;
    hover_->setText("-");
    cell_->setText("Click a cell of the image to select it.");
    relationMsg_->hide();
}

void ConstellationInspector::refillModules() {
    const auto& t = view_->trace();
    updating_ = true;
    module_->clear();
    for (int m = 0; m < t.numModules(); ++m) {
        const auto& mod = t.module(m);
        module_->addItem(QStringLiteral("%1  (layer %2, %3x%4%5)")
                             .arg(QString::fromStdString(mod.name))
                             .arg(mod.layer)
                             .arg(mod.h)
                             .arg(mod.w)
                             .arg(mod.relation ? ", relation" : ""));
    }
    module_->setCurrentIndex(view_->moduleIndex(settings_));
    updating_ = false;
}

void ConstellationInspector::refillLegend() {
    legend_->clear();
    if (!view_) return;
    const int m = view_->moduleIndex(settings_);
    const int64_t cells = view_->trace().module(m).h * view_->trace().module(m).w;
    for (const auto& e : view_->legend(m)) {
        auto* item = new QListWidgetItem(QIcon(clusterSwatch(e.cluster, kLegendSwatchPx)),
                                         QStringLiteral("#%1   %2 cell%3").arg(e.cluster).arg(e.cells).arg(e.cells == 1 ? "" : "s"));
        item->setData(Qt::UserRole, qlonglong(e.cluster));
        item->setToolTip(QStringLiteral("cluster %1: the best cluster of %2 of the %3 cells; click for its gallery")
                             .arg(e.cluster)
                             .arg(e.cells)
                             .arg(cells));
        legend_->addItem(item);
    }
}

void ConstellationInspector::refillTable() {
    if (!view_) return table_->setRowCount(0);
    std::vector<ClassRow> rows;
    for (const auto& t : view_->trace().top5()) rows.push_back({t.classIndex, t.name, double(t.prob)});
    fillClassTable(table_, rows);
}

// --- view settings -------------------------------------------------------------------

void ConstellationInspector::setMode(ConstellationMode mode) {
    settings_.mode = mode;
    if (mode_->currentIndex() != int(mode)) {
        updating_ = true;
        mode_->setCurrentIndex(int(mode));
        updating_ = false;
    }
    updateRelationMessage();
    refresh();
}

void ConstellationInspector::setModule(int module) {
    settings_.module = module;
    if (view_) {
        const int m = view_->moduleIndex(settings_);
        settings_.module = m;
        if (module_->currentIndex() != m) {
            updating_ = true;
            module_->setCurrentIndex(m);
            updating_ = false;
        }
        int64_t cy, cx;
        if (view_->clickedCell(settings_, cy, cx))
            cell_->setText(QString::fromStdString(view_->hoverText(m, cy, cx)));
    }
    refillLegend();
    updateRelationMessage();
    refresh();
}

void ConstellationInspector::selectPoint(double x, double y) {
    if (!view_) return;
    const int m = view_->moduleIndex(settings_);
    int64_t cy, cx;
    if (!view_->cellAt(m, x, y, cy, cx)) return;
    settings_.pointX = x;
    settings_.pointY = y;
    cell_->setText(QString::fromStdString(view_->hoverText(m, cy, cx)));
    // A click asks for the cell's relation: shown where the module has it, else the panel says why.
    if (view_->trace().module(m).relation && settings_.mode != ConstellationMode::Relation)
        return setMode(ConstellationMode::Relation);
    updateRelationMessage();
    refresh();
}

void ConstellationInspector::updateRelationMessage() {
    QString text;
    if (view_) {
        const int m = view_->moduleIndex(settings_);
        int64_t cy, cx;
        const bool clicked = view_->clickedCell(settings_, cy, cx);
        const bool relation = view_->trace().module(m).relation;
        if (settings_.mode == ConstellationMode::Relation || (clicked && !relation))
            text = QString::fromStdString(view_->relationProblem(settings_));
    }
    if (!text.isEmpty()) text[0] = text[0].toUpper();
    relationMsg_->setText(text);
    relationMsg_->setVisible(!text.isEmpty());
}

void ConstellationInspector::hoverAt(double x, double y) {
    const QString t = hoverText(x, y);
    if (t == hoverText_) return;
    hoverText_ = t;
    hover_->setText(t.isEmpty() ? QStringLiteral("-") : t);
    if (!active() || !view_ || !hasTrace()) return;
    widgets::ViewportScene sc = scene_;
    if (!t.isEmpty()) sc.overlayRows.push_back({"top 3", t.toStdString()});
    viewport()->setScene(std::move(sc));
}

void ConstellationInspector::heatmapStyleChanged() {
    settings_.head = head();
    settings_.colormap = colormap();
    settings_.opacity = opacity();
    refresh();
}

void ConstellationInspector::drawScene() {
    scene_ = view_->scene(settings_);
    widgets::ViewportScene sc = scene_;
    if (!hoverText_.isEmpty()) sc.overlayRows.push_back({"top 3", hoverText_.toStdString()});
    viewport()->setScene(std::move(sc));
    showComparePane(false);   // this panel has no compare view
}

void ConstellationInspector::enableControls(bool have) {
    mode_->setEnabled(have);
    module_->setEnabled(have);
    galleryButton_->setEnabled(hasModel());
    shipped_->setVisible(!hasModel() && !modelLoading() && !defaultConstellationCheckpoint().isEmpty());
}

void ConstellationInspector::showEpisodeTab() {
    tabs_->setCurrentWidget(episode_);
    // The panel sits in a scroll area: bring the tabs into view.
    for (QWidget* w = parentWidget(); w; w = w->parentWidget())
        if (auto* area = qobject_cast<QScrollArea*>(w)) {
            area->verticalScrollBar()->setValue(tabs_->mapTo(area->widget(), QPoint(0, 0)).y());
            break;
        }
}

// --- gallery -------------------------------------------------------------------------

void ConstellationInspector::showGallery(int64_t cluster) {
    const auto model = modelAs<ConstellationModel>();
    if (!model) return fail("Cluster gallery: no ConstellationNet checkpoint loaded (Checkpoint... above).");
    if (cluster < 0 || cluster >= model->config().clusters)
        return fail(QStringLiteral("Cluster gallery: no cluster %1 (the model has %2)").arg(cluster).arg(model->config().clusters));
    const auto mods = model->constellationModules();
    if (mods.empty()) return fail("Cluster gallery: this model has no constellation modules (a ProtoNet baseline).");
    // The module shown in the viewport (by name), else the model's last.
    std::string moduleName = mods.back().name;
    if (view_) moduleName = view_->trace().module(view_->moduleIndex(settings_)).name;
    if (galleryCancel_) *galleryCancel_ = true;   // an older scan stops at its next batch
    const int gen = ++galleryGeneration_;
    ++galleryPending_;
    galleryCancel_ = std::make_shared<std::atomic<bool>>(false);
    galleryScanned_ = std::make_shared<std::atomic<int64_t>>(0);
    galleryTotal_ = scan_->value();
    updating_ = true;
    cluster_->setValue(int(cluster));
    updating_ = false;
    galleryProgress_->setRange(0, int(galleryTotal_));
    galleryProgress_->setValue(0);
    galleryProgress_->show();
    galleryCancelButton_->setEnabled(true);
    galleryTimer_->start();
    const QString module = QString::fromStdString(moduleName);
    galleryStatus_->setText(QStringLiteral("Scanning %1 images of %2 (novel) for cluster %3 of %4 ...")
                                .arg(galleryTotal_)
                                .arg(QString::fromStdString(dataSpec()))
                                .arg(cluster)
                                .arg(module));
    updateControls();
    runAsync(
        this,
        [model, mutex = modelMutex(), cache = dataCache_, spec = dataSpec(), moduleName, cluster,
         count = count_->value(), scan = galleryTotal_, cancel = galleryCancel_, scanned = galleryScanned_] {
            const auto opened = cache->get(spec, int(model->config().imageSize));
            const InterleavedClasses ds(opened->novel, scan);
            int64_t batches = 0;
            auto cancelled = [&] {
                if (*cancel) return true;
                scanned->store(std::min(ds.size(), batches++ * kGalleryBatch));
                return false;
            };
            std::lock_guard<std::mutex> lock(*mutex);
            const auto patches = glimpse::constellation::clusterGallery(*model, ds, moduleName, cluster, count, ds.size(), cancelled);
            GalleryResult r;
            r.scanned = ds.size();
            r.module = QString::fromStdString(moduleName);
            for (const auto& p : patches) {
                const int64_t label = ds.labelOf(p.imageIndex);
                GalleryItem item;
                item.patch = toQImage(p.patch);
                item.text = QString::number(double(p.similarity), 'f', 3);
                item.tip = QStringLiteral("%1\nnovel image %2, cell (%3, %4), similarity %5")
                               .arg(QString::fromStdString(ds.classNames().at(size_t(label))))
                               .arg(ds.sourceIndex(p.imageIndex))
                               .arg(p.y)
                               .arg(p.x)
                               .arg(double(p.similarity), 0, 'f', 4);
                r.items.push_back(std::move(item));
            }
            return r;
        },
        [this, gen, cluster](Outcome<GalleryResult> r) {
            --galleryPending_;
            if (gen == galleryGeneration_ && r.ok()) {
                gallery_->clear();
                for (const auto& item : r.value.items) {
                    auto* it = new QListWidgetItem(QIcon(QPixmap::fromImage(item.patch.scaled(
                                                       kPatchPx, kPatchPx, Qt::KeepAspectRatio, Qt::FastTransformation))),
                                                   item.text);
                    it->setToolTip(item.tip);
                    gallery_->addItem(it);
                }
                galleryShown_ = cluster;
                galleryStatus_->setText(QStringLiteral("Cluster %1 of %2: the %3 closest cells in %4 novel images "
                                                       "(one per image; patch = the cell grown to twice its size)")
                                            .arg(cluster)
                                            .arg(r.value.module)
                                            .arg(r.value.items.size())
                                            .arg(r.value.scanned));
            }
            finishGallery(gen, cluster, r.error);
        });
}

void ConstellationInspector::finishGallery(int gen, int64_t cluster, const QString& error) {
    if (gen != galleryGeneration_) return updateControls();   // superseded or cancelled
    galleryTimer_->stop();
    galleryProgress_->hide();
    galleryCancelButton_->setEnabled(false);
    updateControls();
    if (!error.isEmpty()) {
        galleryStatus_->setText("Gallery failed: " + error);
        return fail(QStringLiteral("Cluster gallery of cluster %1: %2").arg(cluster).arg(error));
    }
    problem_->hide();
    Q_EMIT message(galleryStatus_->text());
    Q_EMIT galleryReady(qlonglong(cluster));
}

void ConstellationInspector::cancelGallery() {
    if (!galleryCancel_ || galleryPending_ == 0) return;
    *galleryCancel_ = true;
    ++galleryGeneration_;   // its result is dropped when the worker returns
    galleryTimer_->stop();
    galleryProgress_->hide();
    galleryCancelButton_->setEnabled(false);
    galleryStatus_->setText("Gallery scan cancelled.");
    Q_EMIT message("ConstellationNet cluster gallery cancelled.");
    updateControls();
}

} // namespace glimpse::app
