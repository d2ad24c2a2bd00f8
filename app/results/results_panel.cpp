#include "app/results/results_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <opencv2/imgproc.hpp>

#include "app/async.h"
#include "app/coat/inspector.h"
#include "app/constellation/inspector.h"
#include "app/letr/inspector.h"
#include "app/mainwindow.h"
#include "app/panel.h"
#include "app/results/overlay.h"
#include "app/results/results_table.h"
#include "app/results/summary_chart.h"
#include "app/results/thumbnails.h"
#include "core/error.h"
#include "core/io/image.h"
#include "core/models/letr/trace.h"

namespace glimpse::app {

using results::ResultsFile;
using results::ResultsType;
namespace rv = results_view;

namespace {

constexpr int kMaxSheetTiles = 64;

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString className(const ResultsFile& f, int64_t c) {
    const auto& names = f.classNames();
    if (c >= 0 && c < int64_t(names.size()) && !names[size_t(c)].empty()) return qs(names[size_t(c)]);
    return QString::number(c);
}

std::string settingText(const results::FewShotSetting& s) {
    return std::to_string(s.ways) + "-way " + std::to_string(s.shots) + "-shot";
}

// The default display score of a LETR row: where its PR curve's F-score is highest.
float defaultMinScore(const ResultsFile& f, int row, int thr) {
    const auto& m = f.letrSummary().metrics;
    if (row < 0 || size_t(row) >= m.size() || size_t(thr) >= m[size_t(row)].curves.size()) return 0.5f;
    const double s = eval::maxFScoreThreshold(m[size_t(row)].curves[size_t(thr)]);
    return s > 0 ? float(s) : 0.5f;
}

// The LETR row of `f` showing the last decoder layer (the model's answer), else row 0.
int defaultRow(const ResultsFile& f) {
    int best = 0;
    for (size_t r = 0; r < f.letrRows().size(); ++r)
        if (!f.letrRows()[r].baseline) best = int(r);
    return best;
}

size_t thresholdIndexIn(const ResultsFile& f, double value) {
    const auto& t = f.thresholds();
    for (size_t k = 0; k < t.size(); ++k)
        if (std::abs(t[k] - value) < 1e-9) return k;
    return 0;
}

cv::Mat sampleImageRgb(const ResultsFile& f, int64_t i) { return rv::toRgb8(f.image(i)); }

// Everything one side (A or B) of a shown sample needs, made on a worker.
struct SideOut {
    cv::Mat rgb;
    render::ViewportScene scene;
    std::vector<int> fps;
    std::string caption;
};

SideOut makeSide(const ResultsFile& f, int64_t i, int row, size_t thr, float minScore, const std::string& tag) {
    SideOut out;
    if (f.type() == ResultsType::Letr) {
        out.rgb = sampleImageRgb(f, i);
        const auto& info = f.letrRows().at(size_t(row));
        const rv::LetrOverlay o = rv::letrOverlay(f.lines(size_t(row), i), f.gtLines(i), thr, minScore, out.rgb.cols,
                                                  out.rgb.rows);
        char score[32];
        std::snprintf(score, sizeof score, "%.3f", minScore);
        std::vector<std::pair<std::string, std::string>> rows = {
            {"sample", f.sampleName(i)},
            {"row", tag + info.label},
            {"sAP threshold", std::to_string(int(std::lround(f.thresholds().at(thr))))},
            {"score >=", score}};
        out.scene = rv::letrScene(o, rows);
        out.fps = o.fpLines;
        out.caption = f.sampleName(i) + "  " + info.label + "  TP " + std::to_string(o.tp) + " FP " +
                      std::to_string(o.fp) + " missed " + std::to_string(o.missed);
    } else if (f.type() == ResultsType::Classification) {
        out.rgb = sampleImageRgb(f, i);
        const int64_t label = f.labels().at(size_t(i)), pred = f.predicted().at(size_t(i));
        const auto top = f.top5(i);
        const auto prob = f.top5Prob(i);
        std::vector<std::pair<std::string, float>> top5;
        for (size_t k = 0; k < top.size() && k < prob.size(); ++k)
            top5.push_back({className(f, top[k]).toStdString(), prob[k]});
        out.scene = rv::classScene(out.rgb.cols, out.rgb.rows, className(f, label).toStdString(),
                                   className(f, pred).toStdString(), label == pred, top5);
        out.scene.overlayRows.insert(out.scene.overlayRows.begin(), {"sample", tag + f.sampleName(i)});
        out.caption = className(f, label).toStdString() + " -> " + className(f, pred).toStdString();
    } else {
        const results::EpisodeIn e = f.episode(i);
        const auto& setting = f.settings().at(size_t(e.setting));
        std::vector<cv::Mat> tiles;
        for (int64_t idx : e.support) tiles.push_back(f.datasetImage(idx));
        for (int64_t idx : e.query) tiles.push_back(f.datasetImage(idx));
        rv::EpisodeMosaic m = rv::episodeMosaic(e, setting, tiles, f.classNames());
        out.rgb = m.rgb;
        out.scene = std::move(m.scene);
        out.scene.overlayRows.insert(out.scene.overlayRows.begin(), {"sample", tag + "episode " + std::to_string(i)});
        char acc[32];
        std::snprintf(acc, sizeof acc, "%.1f%%", 100.0 * e.accuracy);
        out.caption = "episode " + std::to_string(e.episode) + " " + settingText(setting) + " " + acc;
    }
    return out;
}

// A picture of a side with its overlay drawn (thumbnails, contact sheets), at most `side` px.
cv::Mat renderSide(const SideOut& s, int side) {
    // Small images (Fashion-MNIST's 28 x 28) are enlarged with their pixels kept square.
    const double scale = double(side) / std::max(s.rgb.cols, s.rgb.rows);
    cv::Mat out;
    cv::resize(s.rgb, out, cv::Size(std::max(1, int(s.rgb.cols * scale)), std::max(1, int(s.rgb.rows * scale))), 0, 0,
               scale < 1.0 ? cv::INTER_AREA : cv::INTER_NEAREST);
    rv::rasterizeLines(out, s.scene.lines, scale);
    return out;
}

QImage toQImage(const cv::Mat& rgb) {
    return QImage(rgb.data, rgb.cols, rgb.rows, int(rgb.step), QImage::Format_RGB888).copy();
}

} // namespace

struct ResultsPanel::Shown {
    widgets::RgbImage image, imageB;
    render::ViewportScene scene, sceneB;
    std::vector<int> fps;
    std::vector<results::LineRecord> lines;   // LETR: the row's stored lines of the sample
    QString label, key;
    bool hasB = false;
};

ResultsPanel::ResultsPanel(MainWindow* window, QWidget* parent) : QWidget(parent), window_(window) {
    table_ = new ResultsTableModel(this);
    thumbs_ = new ThumbnailModel(table_, this);
    connect(this, &ResultsPanel::inspected, this, [this] { inspecting_ = false; });
    connect(this, &ResultsPanel::failed, this, [this] { inspecting_ = false; });
    buildUi();
    updateButtons();
    // A click on a line of the shown LETR sample picks it for "Inspect" (while this dock draws).
    connect(window_->viewport(), &widgets::ImageViewport::lineClicked, this, [this](int id) {
        if (!shownData_ || !file_ || file_->type() != ResultsType::Letr || window_->activePanel()) return;
        picked_ = id;
        sampleLabel_->setText(sampleLabel_->text().section("  |", 0, 0) +
                              QStringLiteral("  |  picked line %1 for Inspect").arg(id));
    });
}

ResultsPanel::~ResultsPanel() = default;

void ResultsPanel::buildUi() {
    auto* column = new QVBoxLayout(this);
    column->setContentsMargins(4, 4, 4, 4);
    title_ = new QLabel("No results file open (File > Open... a results file, e.g. from glimpse eval letr --out R.h5)",
                        this);
    title_->setWordWrap(true);
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    column->addWidget(title_);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    column->addWidget(status_);
    auto* problemRow = new QHBoxLayout;
    problem_ = new QLabel(this);
    problem_->setWordWrap(true);
    problem_->setStyleSheet("color: #c0392b;");
    problem_->hide();
    locate_ = new QPushButton("Locate folder...", this);
    locate_->setToolTip("Point this results file at the folder its sources moved to");
    locate_->hide();
    problemRow->addWidget(problem_, 1);
    problemRow->addWidget(locate_);
    column->addLayout(problemRow);
    connect(locate_, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, "Folder the sources moved to");
        if (!dir.isEmpty()) relocateSources(dir);
    });
    column->addWidget(buildControls());

    auto* split = new QSplitter(Qt::Horizontal, this);
    tableView_ = new QTableView(split);
    tableView_->setModel(table_);
    tableView_->setSortingEnabled(true);
    tableView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    tableView_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    tableView_->verticalHeader()->setDefaultSectionSize(20);
    tableView_->verticalHeader()->hide();
    tableView_->horizontalHeader()->setSortIndicatorShown(true);
    tableView_->setWordWrap(false);
    thumbView_ = new QListView(split);
    thumbView_->setModel(thumbs_);
    thumbView_->setViewMode(QListView::IconMode);
    thumbView_->setIconSize(QSize(kThumbSide, kThumbSide));
    thumbView_->setGridSize(QSize(kThumbSide + 12, kThumbSide + 22));
    thumbView_->setResizeMode(QListView::Adjust);
    thumbView_->setMovement(QListView::Static);
    thumbView_->setUniformItemSizes(true);
    thumbView_->setLayoutMode(QListView::Batched);
    thumbView_->setBatchSize(400);
    thumbView_->setSelectionMode(QAbstractItemView::SingleSelection);
    chart_ = new SummaryChart(split);
    split->addWidget(tableView_);
    split->addWidget(thumbView_);
    split->addWidget(chart_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);
    column->addWidget(split, 1);
    buildButtons(column);

    connect(tableView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                if (cur.isValid() && !updating_) selectSample(table_->sampleAt(cur.row()));
            });
    connect(thumbView_, &QListView::clicked, this, [this](const QModelIndex& i) {
        if (!i.isValid()) return;
        tableView_->selectRow(i.row());
        tableView_->scrollTo(table_->index(i.row(), 0));
    });
    connect(chart_, &SummaryChart::seriesClicked, this, &ResultsPanel::pickSeries);
    connect(chart_, &SummaryChart::cellClicked, this, &ResultsPanel::pickCell);
    connect(chart_, &SummaryChart::binClicked, this, &ResultsPanel::pickBin);
    connect(table_, &ResultsTableModel::rowsRearranged, this, [this] {
        pickLabel_->setText(QStringLiteral("%1 of %2 samples%3")
                                .arg(table_->rowCount())
                                .arg(table_->samples())
                                .arg(table_->pickDescription().isEmpty() ? QString() : ": " + table_->pickDescription()));
        clearPick_->setEnabled(!table_->pickDescription().isEmpty() || !table_->textFilter().isEmpty());
        // Keep the shown sample selected when it is still listed.
        const int r = table_->rowOf(selected_);
        updating_ = true;
        if (r >= 0) tableView_->selectRow(r);
        updating_ = false;
    });
}

QWidget* ResultsPanel::buildControls() {
    auto* w = new QWidget(this);
    auto* row = new QHBoxLayout(w);
    row->setContentsMargins(0, 0, 0, 0);
    letrControls_ = new QWidget(w);
    auto* lr = new QHBoxLayout(letrControls_);
    lr->setContentsMargins(0, 0, 0, 0);
    rowBox_ = new QComboBox(letrControls_);
    rowBox_->setToolTip("The layer (or baseline) whose lines the table, the viewport and the thumbnails show");
    thresholdBox_ = new QComboBox(letrControls_);
    thresholdBox_->setToolTip("sAP distance threshold: a prediction within it of an unmatched ground-truth line is "
                              "a true positive (128 x 128 frame, squared pixels)");
    scoreBox_ = new QDoubleSpinBox(letrControls_);
    scoreBox_->setRange(0.0, 1.0);
    scoreBox_->setDecimals(3);
    scoreBox_->setSingleStep(0.05);
    scoreBox_->setToolTip("Lines scored at least this are shown and counted in TP / FP / missed (default: where "
                          "the row's F-score is highest)");
    lr->addWidget(new QLabel("Layer", letrControls_));
    lr->addWidget(rowBox_);
    lr->addWidget(new QLabel("sAP", letrControls_));
    lr->addWidget(thresholdBox_);
    lr->addWidget(new QLabel("score >=", letrControls_));
    lr->addWidget(scoreBox_);
    row->addWidget(letrControls_);
    compareLabel_ = new QLabel("vs", w);
    compareRowBox_ = new QComboBox(w);
    compareRowBox_->setToolTip("The row of the compare file (or of this file) compared with");
    row->addWidget(compareLabel_);
    row->addWidget(compareRowBox_);
    filter_ = new QLineEdit(w);
    filter_->setPlaceholderText("Filter by name...");
    filter_->setClearButtonEnabled(true);
    row->addWidget(filter_, 1);
    pickLabel_ = new QLabel(w);
    row->addWidget(pickLabel_);
    clearPick_ = new QPushButton("Show all", w);
    clearPick_->setToolTip("Clear the chart's pick and the name filter");
    row->addWidget(clearPick_);
    connect(rowBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setRow(i);
    });
    connect(thresholdBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setThreshold(i);
    });
    connect(scoreBox_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        if (!updating_) setMinScore(v);
    });
    connect(compareRowBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_ && i >= 0) setCompareRow(i);
    });
    connect(filter_, &QLineEdit::textChanged, table_, &ResultsTableModel::setTextFilter);
    connect(clearPick_, &QPushButton::clicked, this, &ResultsPanel::clearPick);
    return w;
}

void ResultsPanel::buildButtons(QVBoxLayout* column) {
    auto* row = new QHBoxLayout;
    sampleLabel_ = new QLabel("Select a sample", this);
    sampleLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    row->addWidget(sampleLabel_, 1);
    inspect_ = new QPushButton("Inspect", this);
    inspectTrue_ = new QPushButton("Grad-CAM: true class", this);
    inspectClusters_ = new QPushButton("Cluster map", this);
    compareButton_ = new QPushButton("Compare with...", this);
    compareButton_->setToolTip("Another results file of the same data (two checkpoints, model vs baseline); "
                               "Cancel: another row of this file");
    closeCompare_ = new QPushButton("End compare", this);
    csvButton_ = new QPushButton("Export CSV...", this);
    csvButton_->setToolTip("The filtered table, in its order");
    sheetButton_ = new QPushButton("Contact sheet...", this);
    sheetButton_->setToolTip("A PNG of the selected samples (or the first 24 listed) with their overlays");
    for (QPushButton* b : {inspect_, inspectTrue_, inspectClusters_, compareButton_, closeCompare_, csvButton_, sheetButton_})
        row->addWidget(b);
    column->addLayout(row);
    connect(inspect_, &QPushButton::clicked, this, [this] { inspect(false, false); });
    connect(inspectTrue_, &QPushButton::clicked, this, [this] { inspect(true, false); });
    connect(inspectClusters_, &QPushButton::clicked, this, [this] { inspect(false, true); });
    connect(compareButton_, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, "Compare with results file", QString(),
                                                       "Glimpse results (*.h5);;All files (*)");
        openCompare(p);
    });
    connect(closeCompare_, &QPushButton::clicked, this, &ResultsPanel::closeCompare);
    connect(csvButton_, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, "Export table as CSV", "results.csv", "CSV (*.csv)");
        if (!p.isEmpty()) exportCsv(p);
    });
    connect(sheetButton_, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, "Contact sheet", "contact_sheet.png", "PNG images (*.png)");
        if (!p.isEmpty()) exportContactSheet(p);
    });
}

void ResultsPanel::updateButtons() {
    const bool have = bool(file_);
    const auto type = have ? file_->type() : ResultsType::Letr;
    letrControls_->setVisible(have && type == ResultsType::Letr);
    const bool comparing = have && (fileB_ || rowB_ >= 0);
    compareLabel_->setVisible(comparing && compareRowBox_->count() > 0);
    compareRowBox_->setVisible(comparing && compareRowBox_->count() > 0);
    closeCompare_->setVisible(comparing);
    for (QPushButton* b : {compareButton_, csvButton_, sheetButton_}) b->setEnabled(have);
    const bool sample = have && shown_ >= 0;
    inspect_->setEnabled(sample);
    inspect_->setText(type == ResultsType::Letr             ? "Inspect: attention of a false positive"
                      : type == ResultsType::Classification ? "Grad-CAM: predicted class"
                                                            : "Episode tab");
    inspectTrue_->setVisible(have && type == ResultsType::Classification);
    inspectTrue_->setEnabled(sample);
    inspectClusters_->setVisible(have && type == ResultsType::FewShot);
    inspectClusters_->setEnabled(sample);
}

void ResultsPanel::setBusy(int delta) {
    const bool was = busy();
    pending_ += delta;
    if (busy() != was) Q_EMIT busyChanged(busy());
}

QString ResultsPanel::problemText() const { return problem_->isVisible() ? problem_->text() : QString(); }
QString ResultsPanel::sourcesMessage() const { return sourcesMsg_; }

// --- opening ------------------------------------------------------------------------------

namespace {
struct Opened {
    std::shared_ptr<ResultsFile> file;
    QString sources;   // "" when every source is there
};

Opened openChecked(const std::string& path, const std::string& remapRoot) {
    Opened o;
    o.file = ResultsFile::open(path);
    if (!remapRoot.empty()) o.file->remapSourceRoot(remapRoot);
    const results::MissingSources m = o.file->missingSources();
    if (m.any()) o.sources = qs(m.describe());
    return o;
}
} // namespace

void ResultsPanel::open(const QString& path) {
    setBusy(+1);
    Q_EMIT message("Opening results " + path + " ...");
    runAsync(
        this, [p = path.toStdString()] { return openChecked(p, {}); },
        [this, path](Outcome<Opened> r) {
            setBusy(-1);
            if (!r.ok()) return Q_EMIT openFailed(path, r.error);
            setFile(r.value.file, r.value.sources);
            Q_EMIT activateRequested();
            Q_EMIT message(QStringLiteral("Opened results %1: %2").arg(path, qs(file_->statusLine())));
            Q_EMIT opened(path);
        });
}

void ResultsPanel::relocateSources(const QString& folder) {
    if (!file_) return;
    setBusy(+1);
    runAsync(
        this, [p = file_->path(), f = folder.toStdString()] { return openChecked(p, f); },
        [this, folder](Outcome<Opened> r) {
            setBusy(-1);
            if (!r.ok()) return Q_EMIT failed(r.error);
            const auto keepB = fileB_;
            const int keepRow = row_, keepThr = threshold_;
            setFile(r.value.file, r.value.sources);
            if (keepRow < int(file_->letrRows().size())) setRow(keepRow);
            setThreshold(keepThr);
            if (keepB) openCompare(qs(keepB->path()));
            Q_EMIT message(r.value.sources.isEmpty() ? "Sources found in " + folder
                                                     : "Still missing after pointing at " + folder + ": " + r.value.sources);
        });
}

void ResultsPanel::setFile(std::shared_ptr<const ResultsFile> f, const QString& sourcesMsg) {
    ++showGeneration_;
    file_ = std::move(f);
    fileB_.reset();
    bIndex_.clear();
    rowB_ = -1;
    selected_ = shown_ = -1;
    shownData_.reset();
    picked_ = -1;
    sourcesMsg_ = sourcesMsg;
    const QFileInfo fi(qs(file_->path()));
    const auto& h = file_->header();
    title_->setText(QStringLiteral("<b>%1</b> &nbsp; %2 results of %3 on %4")
                        .arg(fi.fileName().toHtmlEscaped(), qs(results::typeName(file_->type())),
                             QFileInfo(qs(h.checkpoint)).fileName().toHtmlEscaped(),
                             qs(h.source.spec).toHtmlEscaped()));
    title_->setToolTip(fi.absoluteFilePath() + "\n" + qs(h.command));
    status_->setText(qs(file_->statusLine()));
    problem_->setText(sourcesMsg.isEmpty() ? QString() : "Sources moved: " + sourcesMsg);
    problem_->setVisible(!sourcesMsg.isEmpty());
    locate_->setVisible(!sourcesMsg.isEmpty());
    if (file_->type() == ResultsType::Letr) {
        row_ = defaultRow(*file_);
        threshold_ = int(thresholdIndexIn(*file_, 10.0));
        minScore_ = defaultMinScore(*file_, row_, threshold_);
    }
    filter_->clear();
    table_->setPickFilter(nullptr, QString());
    refillControls();
    rebuildColumns();
    refreshChart();
    refreshThumbnails();
    startCounts();
    sampleLabel_->setText("Select a sample");
    updateButtons();
}

void ResultsPanel::refillControls() {
    updating_ = true;
    rowBox_->clear();
    thresholdBox_->clear();
    compareRowBox_->clear();
    if (file_ && file_->type() == ResultsType::Letr) {
        for (const auto& r : file_->letrRows()) rowBox_->addItem(qs(r.label));
        for (double t : file_->thresholds()) thresholdBox_->addItem(QString::number(t));
        rowBox_->setCurrentIndex(row_);
        thresholdBox_->setCurrentIndex(threshold_);
        scoreBox_->setValue(minScore_);
        const ResultsFile* other = fileB_ ? fileB_.get() : file_.get();
        if (fileB_ || rowB_ >= 0) {
            for (const auto& r : other->letrRows()) compareRowBox_->addItem(qs(r.label) + (fileB_ ? " (B)" : ""));
            compareRowBox_->setCurrentIndex(std::max(0, rowB()));
        }
    }
    updating_ = false;
}

int ResultsPanel::rowB() const {
    if (!file_ || file_->type() != ResultsType::Letr) return -1;
    if (rowB_ >= 0) return rowB_;
    if (!fileB_) return -1;
    // The compare file's row of the same key, else its last layer.
    const auto& rows = fileB_->letrRows();
    for (size_t r = 0; r < rows.size(); ++r)
        if (rows[r].key == file_->letrRows().at(size_t(row_)).key) return int(r);
    return defaultRow(*fileB_);
}

int64_t ResultsPanel::matchB(int64_t sample) const {
    if (!fileB_) return rowB_ >= 0 ? sample : -1;
    return sample >= 0 && sample < int64_t(bIndex_.size()) ? bIndex_[size_t(sample)] : -1;
}

// --- table, chart, thumbnails --------------------------------------------------------------

void ResultsPanel::rebuildColumns() {
    std::vector<ResultsColumn> cols;
    const int64_t n = file_->size();
    std::vector<double> index(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) index[size_t(i)] = double(i);
    cols.push_back({"#", "The sample's number in the results file", index, 0, {}});
    auto f = file_;
    QStringList names;
    names.reserve(int(n));
    for (int64_t i = 0; i < n; ++i) names << qs(f->sampleName(i));
    // Counts at the display score: NaN ("...") until the worker has them for this file.
    for (auto* v : {&tpA_, &fpA_, &missA_, &fpB_})
        if (int64_t(v->size()) != n) v->assign(static_cast<size_t>(n), std::nan(""));
    auto B = fileB_;
    auto bIndex = bIndex_;
    const bool comparing = bool(B) || rowB_ >= 0;
    const ResultsFile* other = B ? B.get() : f.get();
    auto bValue = [bIndex, hasB = bool(B)](const std::vector<double>& bCol, int64_t i) {
        const int64_t j = hasB ? (i < int64_t(bIndex.size()) ? bIndex[size_t(i)] : -1) : i;
        return j >= 0 && j < int64_t(bCol.size()) ? bCol[size_t(j)] : std::nan("");
    };
    if (f->type() == ResultsType::Letr) {
        cols.push_back({"name", "The sample (image) name", {}, 0, [names](int64_t i) { return names.value(int(i)); }});
        std::vector<double> gt(f->gtCount().begin(), f->gtCount().end());
        cols.push_back({"GT", "Ground-truth lines", gt, 0, {}});
        std::vector<double> ap(static_cast<size_t>(n));
        const auto& a = f->sampleAp(size_t(row_), size_t(threshold_));
        for (int64_t i = 0; i < n; ++i) ap[size_t(i)] = 100.0 * a[size_t(i)];
        cols.push_back({"sAP", "The sample's own structural AP at the chosen threshold (percent)", ap, 1, {}});
        cols.push_back({"TP", "Predictions scored >= the display score that match a ground-truth line", tpA_, 0, {}});
        cols.push_back({"FP", "Predictions scored >= the display score that match none", fpA_, 0, {}});
        cols.push_back({"missed", "Ground-truth lines no such prediction matches", missA_, 0, {}});
        if (comparing) {
            const int rb = rowB();
            const size_t tb = thresholdIndexIn(*other, f->thresholds().at(size_t(threshold_)));
            const auto& apB = other->sampleAp(size_t(rb), tb);
            std::vector<double> colB(apB.size()), delta(static_cast<size_t>(n));
            for (size_t j = 0; j < apB.size(); ++j) colB[j] = 100.0 * apB[j];
            for (int64_t i = 0; i < n; ++i) delta[size_t(i)] = bValue(colB, i) - ap[size_t(i)];
            std::vector<double> sapB(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) sapB[size_t(i)] = bValue(colB, i);
            cols.push_back({"sAP B", "The compared row's sample sAP", sapB, 1, {}});
            cols.push_back({"FP B", "The compared row's false positives at the display score", fpB_, 0, {}});
            cols.push_back({"ΔsAP", "sAP B - sAP (negative: B regressed)", delta, 1, {}});
        }
    } else if (f->type() == ResultsType::Classification) {
        cols.push_back({"name", "The image", {}, 0, [names](int64_t i) { return names.value(int(i)); }});
        const auto& lab = f->labels();
        const auto& pred = f->predicted();
        std::vector<double> l(lab.begin(), lab.end()), p(pred.begin(), pred.end()), ok(static_cast<size_t>(n)), pl(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            ok[size_t(i)] = lab[size_t(i)] == pred[size_t(i)] ? 1 : 0;
            pl[size_t(i)] = f->labelProb()[size_t(i)];
        }
        cols.push_back({"label", "The true class", l, 0, [f](int64_t i) { return className(*f, f->labels()[size_t(i)]); }});
        cols.push_back({"predicted", "The top-1 class", p, 0,
                        [f](int64_t i) { return className(*f, f->predicted()[size_t(i)]); }});
        cols.push_back({"correct", "1 when the top-1 class is the label", ok, 0, {}});
        cols.push_back({"p(label)", "The softmax probability of the true class", pl, 3, {}});
        if (comparing && B) {
            std::vector<double> okB(static_cast<size_t>(n)), d(static_cast<size_t>(n)), dp(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
                const int64_t j = matchB(i);
                okB[size_t(i)] = j >= 0 ? double(B->labels()[size_t(j)] == B->predicted()[size_t(j)]) : std::nan("");
                d[size_t(i)] = okB[size_t(i)] - ok[size_t(i)];
                dp[size_t(i)] = j >= 0 ? B->labelProb()[size_t(j)] - pl[size_t(i)] : std::nan("");
            }
            cols.push_back({"correct B", "Compared file: 1 when correct", okB, 0, {}});
            cols.push_back({"Δp(label)", "p(label) B - p(label)", dp, 3, {}});
            // Sort key: a lost sample first, then the largest drop in p(label).
            std::vector<double> key(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) key[size_t(i)] = d[size_t(i)] + 0.5 * dp[size_t(i)];
            cols.push_back({"Δcorrect", "correct B - correct (-1: B got it wrong); sorted with Δp(label) as tiebreak", key,
                            0, [d](int64_t i) { return std::isnan(d[size_t(i)]) ? QString("...") : QString::number(d[size_t(i)]); }});
        }
    } else {
        const auto& acc = f->episodeAccuracy();
        const auto& set = f->episodeSetting();
        std::vector<double> a(static_cast<size_t>(n)), wrong(static_cast<size_t>(n)), s(set.begin(), set.end());
        for (int64_t i = 0; i < n; ++i) {
            a[size_t(i)] = 100.0 * acc[size_t(i)];
            const auto& st = f->settings().at(size_t(set[size_t(i)]));
            wrong[size_t(i)] = std::round((1.0 - acc[size_t(i)]) * double(st.ways * st.queries));
        }
        cols.push_back({"setting", "N-way K-shot", s, 0, [f](int64_t i) {
                            return qs(settingText(f->settings().at(size_t(f->episodeSetting()[size_t(i)]))));
                        }});
        cols.push_back({"accuracy", "The episode's query accuracy (percent)", a, 1, {}});
        cols.push_back({"wrong", "Queries classified into another way", wrong, 0, {}});
        if (comparing && B) {
            std::vector<double> aB(static_cast<size_t>(n)), d(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
                const int64_t j = matchB(i);
                aB[size_t(i)] = j >= 0 ? 100.0 * B->episodeAccuracy()[size_t(j)] : std::nan("");
                d[size_t(i)] = aB[size_t(i)] - a[size_t(i)];
            }
            cols.push_back({"accuracy B", "The compared file's accuracy on the same episode", aB, 1, {}});
            cols.push_back({"Δaccuracy", "accuracy B - accuracy (negative: B regressed)", d, 1, {}});
        }
    }
    table_->setColumns(std::move(cols), n, names);
    // Default order: failures first (compare: the largest regression first).
    int sortCol = -1;
    for (int c = table_->columnCount() - 1; c >= 0 && sortCol < 0; --c)
        if (table_->column(c).name.startsWith(QStringLiteral("Δ"))) sortCol = c;
    if (sortCol < 0)
        sortCol = table_->columnIndex(f->type() == ResultsType::Letr             ? "sAP"
                                      : f->type() == ResultsType::Classification ? "p(label)"
                                                                                 : "accuracy");
    tableView_->sortByColumn(sortCol, Qt::AscendingOrder);
    tableView_->resizeColumnsToContents();
}

void ResultsPanel::startCounts() {
    const int64_t n = file_ ? file_->size() : 0;
    const double nan = std::nan("");
    tpA_.assign(size_t(n), nan);
    fpA_.assign(size_t(n), nan);
    missA_.assign(size_t(n), nan);
    fpB_.assign(size_t(n), nan);
    ++countsGeneration_;
    if (!file_ || file_->type() != ResultsType::Letr) return;
    struct Counts {
        std::vector<double> tp, fp, miss, fpB;
    };
    const int gen = countsGeneration_;
    ++countsRunning_;
    setBusy(+1);
    const ResultsFile* other = fileB_ ? fileB_.get() : (rowB_ >= 0 ? file_.get() : nullptr);
    const size_t tb = other ? thresholdIndexIn(*other, file_->thresholds().at(size_t(threshold_))) : 0;
    runAsync(
        this,
        [f = file_, B = fileB_, other, row = size_t(row_), thr = size_t(threshold_), rb = rowB(), tb, s = minScore_,
         bIndex = fileB_ ? bIndex_ : std::vector<int64_t>{}, n, nan] {
            Counts c;
            c.tp.assign(size_t(n), nan);
            c.fp = c.miss = c.fpB = c.tp;
            for (int64_t i = 0; i < n; ++i) {
                const auto k = f->counts(row, thr, i, s);
                c.tp[size_t(i)] = double(k.tp);
                c.fp[size_t(i)] = double(k.fp);
                c.miss[size_t(i)] = double(k.missed);
                const int64_t j = B ? (i < int64_t(bIndex.size()) ? bIndex[size_t(i)] : -1) : i;
                if (other && rb >= 0 && j >= 0) c.fpB[size_t(i)] = double(other->counts(size_t(rb), tb, j, s).fp);
            }
            return c;
        },
        [this, gen](Outcome<Counts> r) {
            --countsRunning_;
            setBusy(-1);
            if (gen != countsGeneration_) return;
            if (!r.ok()) return Q_EMIT failed(r.error);
            tpA_ = r.value.tp;
            fpA_ = r.value.fp;
            missA_ = r.value.miss;
            fpB_ = r.value.fpB;
            table_->setColumnValues(table_->columnIndex("TP"), tpA_);
            table_->setColumnValues(table_->columnIndex("FP"), fpA_);
            table_->setColumnValues(table_->columnIndex("missed"), missA_);
            if (table_->columnIndex("FP B") >= 0) table_->setColumnValues(table_->columnIndex("FP B"), fpB_);
            Q_EMIT countsReady();
        });
}

void ResultsPanel::refreshChart() {
    if (!file_) return chart_->clear();
    const QString name = QFileInfo(qs(file_->path())).fileName();
    if (file_->type() == ResultsType::Letr) {
        const auto& sum = file_->letrSummary();
        std::vector<PrSeries> series;
        for (size_t r = 0; r < sum.rows.size() && r < sum.metrics.size(); ++r) {
            const auto& m = sum.metrics[r];
            PrSeries s;
            s.name = qs(sum.rows[r].label);
            if (size_t(threshold_) < m.curves.size()) {
                s.precision = m.curves[size_t(threshold_)].precision;
                s.recall = m.curves[size_t(threshold_)].recall;
                s.ap = m.sAP.at(size_t(threshold_));
            }
            series.push_back(std::move(s));
        }
        const double t = file_->thresholds().empty() ? 0 : file_->thresholds().at(size_t(threshold_));
        chart_->setCurves(std::move(series),
                          sum.metrics.empty() ? QStringLiteral("No summary yet (the eval did not finish)")
                                              : QStringLiteral("Precision-recall at sAP%1 (click a curve)").arg(t),
                          row_);
    } else if (file_->type() == ResultsType::Classification) {
        const auto& sum = file_->classSummary();
        QStringList names;
        for (const auto& c : file_->classNames()) names << qs(c);
        chart_->setConfusion(sum.confusion, int(file_->classNames().size()), names,
                             QStringLiteral("Confusion: top-1 %1%, top-5 %2% (click a cell)")
                                 .arg(100.0 * sum.accuracy, 0, 'f', 1)
                                 .arg(100.0 * sum.top5Accuracy, 0, 'f', 1));
    } else {
        QString title = "Episode accuracy";
        for (const auto& r : file_->fewShotSummary())
            title += QStringLiteral("  %1: %2 ± %3%")
                         .arg(qs(settingText(r.setting)))
                         .arg(100.0 * r.mean, 0, 'f', 1)
                         .arg(100.0 * r.ci95, 0, 'f', 1);
        chart_->setHistogram(file_->episodeAccuracy(), 10, title + " (click a bar)");
    }
    chart_->setToolTip(name);
}

void ResultsPanel::refreshThumbnails() {
    if (!file_) return thumbs_->setMaker(nullptr);
    auto f = file_;
    const int row = row_;
    const size_t thr = size_t(threshold_);
    const float s = minScore_;
    thumbs_->setMaker([f, row, thr, s](int64_t i) {
        return toQImage(renderSide(makeSide(*f, i, row, thr, s, ""), kThumbSide));
    });
    thumbs_->setCaption([f](int64_t i) {
        QString n = qs(f->sampleName(i));
        if (n.size() > 16) n = "..." + n.right(14);
        return n;
    });
}

// --- settings -------------------------------------------------------------------------------

void ResultsPanel::setRow(int row) {
    if (!file_ || file_->type() != ResultsType::Letr || row < 0 || row >= int(file_->letrRows().size())) return;
    row_ = row;
    minScore_ = defaultMinScore(*file_, row_, threshold_);
    refillControls();
    rebuildColumns();
    chart_->setHighlight(row_);
    refreshThumbnails();
    startCounts();
    if (selected_ >= 0) selectSample(selected_);
}

void ResultsPanel::setThreshold(int index) {
    if (!file_ || file_->type() != ResultsType::Letr || index < 0 || index >= int(file_->thresholds().size())) return;
    threshold_ = index;
    refillControls();
    rebuildColumns();
    refreshChart();
    refreshThumbnails();
    startCounts();
    if (selected_ >= 0) selectSample(selected_);
}

void ResultsPanel::setMinScore(double score) {
    if (!file_ || file_->type() != ResultsType::Letr) return;
    minScore_ = float(std::clamp(score, 0.0, 1.0));
    refillControls();
    refreshThumbnails();
    startCounts();
    if (selected_ >= 0) selectSample(selected_);
}

void ResultsPanel::setCompareRow(int row) {
    if (!file_ || file_->type() != ResultsType::Letr) return;
    const ResultsFile* other = fileB_ ? fileB_.get() : file_.get();
    if (row < 0 || row >= int(other->letrRows().size())) return;
    rowB_ = row;
    refillControls();
    rebuildColumns();
    startCounts();
    updateButtons();
    if (selected_ >= 0) selectSample(selected_);
}

// --- chart picks ----------------------------------------------------------------------------

void ResultsPanel::pickSeries(int row) {
    if (!file_ || file_->type() != ResultsType::Letr) return;
    if (row != row_) setRow(row);
    const auto& m = file_->letrSummary().metrics;
    if (size_t(row) >= m.size()) return;
    const double sap = m[size_t(row)].sAP.at(size_t(threshold_));
    table_->setPickFilter([f = file_, row, thr = size_t(threshold_), sap](int64_t i) {
        return f->sampleAp(size_t(row), thr)[size_t(i)] < sap;
    },
                          QStringLiteral("%1's sample sAP below its overall %2")
                              .arg(qs(file_->letrRows()[size_t(row)].label))
                              .arg(100.0 * sap, 0, 'f', 1));
    chart_->setHighlight(row);
}

void ResultsPanel::pickCell(int trueClass, int predicted) {
    if (!file_ || file_->type() != ResultsType::Classification) return;
    table_->setPickFilter([f = file_, trueClass, predicted](int64_t i) {
        return f->labels()[size_t(i)] == trueClass && f->predicted()[size_t(i)] == predicted;
    }, QStringLiteral("true %1, predicted %2").arg(className(*file_, trueClass), className(*file_, predicted)));
    chart_->setSelectedCell(trueClass, predicted);
}

void ResultsPanel::pickBin(int bin) {
    if (!file_ || file_->type() != ResultsType::FewShot || bin < 0 || bin >= chart_->bins()) return;
    const auto [lo, hi] = chart_->binRange(bin);
    table_->setPickFilter([f = file_, lo = lo, hi = hi](int64_t i) {
        const double a = f->episodeAccuracy()[size_t(i)];
        return a >= lo && a < hi;
    },
                          QStringLiteral("accuracy %1-%2%").arg(100 * lo, 0, 'f', 0).arg(std::min(100.0, 100 * hi), 0, 'f', 0));
    chart_->setSelectedBin(bin);
}

void ResultsPanel::clearPick() {
    filter_->clear();
    table_->clearFilters();
    chart_->setSelectedCell(-1, -1);
    chart_->setSelectedBin(-1);
}

// --- selecting a sample -----------------------------------------------------------------------

std::vector<int64_t> ResultsPanel::selectedSamples() const {
    std::vector<int64_t> out;
    if (!tableView_->selectionModel()) return out;
    auto rows = tableView_->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(), [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
    for (const QModelIndex& i : rows) out.push_back(table_->sampleAt(i.row()));
    return out;
}

void ResultsPanel::selectSample(int64_t sample) {
    if (!file_ || sample < 0 || sample >= file_->size()) return;
    selected_ = sample;
    const int r = table_->rowOf(sample);
    if (r >= 0 && tableView_->selectionModel() && tableView_->selectionModel()->currentIndex().row() != r) {
        updating_ = true;
        tableView_->selectRow(r);
        updating_ = false;
    }
    const int gen = ++showGeneration_;
    setBusy(+1);
    const ResultsFile* other = fileB_ ? fileB_.get() : (rowB_ >= 0 && file_->type() == ResultsType::Letr ? file_.get() : nullptr);
    const size_t tb = other && file_->type() == ResultsType::Letr
                          ? thresholdIndexIn(*other, file_->thresholds().at(size_t(threshold_)))
                          : 0;
    runAsync(
        this,
        [f = file_, B = fileB_, other, sample, j = matchB(sample), row = row_, thr = size_t(threshold_), rb = rowB(), tb,
         score = minScore_] {
            auto s = std::make_shared<Shown>();
            SideOut a = makeSide(*f, sample, row, thr, score, "");
            s->image = toRgbImage(a.rgb);
            s->scene = std::move(a.scene);
            s->fps = a.fps;
            if (f->type() == ResultsType::Letr) s->lines = f->lines(size_t(row), sample);
            if (other && j >= 0) {
                SideOut b = makeSide(*other, j, rb, tb, score, "B: ");
                s->imageB = toRgbImage(b.rgb);
                s->sceneB = std::move(b.scene);
                s->hasB = true;
            }
            s->label = qs(f->sampleName(sample));
            if (s->label.isEmpty()) s->label = QStringLiteral("episode %1").arg(sample);
            const std::string path = f->samplePath(sample);
            s->key = path.empty() ? QStringLiteral("results:%1#%2").arg(qs(f->path())).arg(sample) : qs(path);
            return s;
        },
        [this, gen, sample](Outcome<std::shared_ptr<Shown>> r) {
            setBusy(-1);
            if (gen != showGeneration_) return;
            if (!r.ok()) {
                sampleLabel_->setText("Sample " + QString::number(sample) + ": " + r.error);
                return Q_EMIT failed(r.error);
            }
            finishShow(sample, r.value);
        });
}

void ResultsPanel::finishShow(int64_t sample, std::shared_ptr<Shown> s) {
    shown_ = sample;
    shownData_ = std::move(s);
    shownFps_ = shownData_->fps;
    picked_ = -1;
    drawShown();
    QString text = QStringLiteral("Sample %1: %2").arg(sample).arg(shownData_->label);
    if (file_->type() == ResultsType::Letr)
        text += QStringLiteral("  (%1 false positives%2)")
                    .arg(shownFps_.size())
                    .arg(shownFps_.empty() ? QString() : QStringLiteral("; click a red line to pick one"));
    sampleLabel_->setText(text);
    updateButtons();
    Q_EMIT shown(sample);
}

void ResultsPanel::drawShown() {
    if (!shownData_) return;
    // This dock draws the viewport now (the model panels' views are theirs to redraw when raised).
    for (ModelPanel* p : window_->panels()) p->setActive(false);
    Q_EMIT showImageRequested(shownData_->label, shownData_->image, shownData_->key);
    widgets::ImageViewport* vp = window_->viewport();
    widgets::ImageViewport* cmp = window_->compareViewport();
    vp->setScene(shownData_->scene);
    if (shownData_->hasB && cmp) {
        const bool wasHidden = cmp->isHidden();
        cmp->setVisible(true);
        if (wasHidden) {
            if (auto* split = qobject_cast<QSplitter*>(cmp->parentWidget())) split->setSizes({1, 1});
            vp->fitToWindow();
            vp->fitWhenSized();
        }
        cmp->setImage(shownData_->imageB);
        cmp->setOverlayTitle("B: " + shownData_->label);
        cmp->setScene(shownData_->sceneB);
        if (shownData_->imageB.width == shownData_->image.width && shownData_->imageB.height == shownData_->image.height)
            cmp->followView(*vp);
        comparePaneOurs_ = true;
    } else if (comparePaneOurs_ && cmp) {
        cmp->hide();
        comparePaneOurs_ = false;
    }
}

// --- compare ----------------------------------------------------------------------------------

void ResultsPanel::openCompare(const QString& path) {
    if (!file_) return;
    if (path.isEmpty()) {   // another row of this file (LETR): the first baseline, else the first layer
        if (file_->type() != ResultsType::Letr)
            return Q_EMIT failed("Compare: choose a second results file of the same data (this " +
                                 qs(results::typeName(file_->type())) + " file has one result per sample)");
        fileB_.reset();
        bIndex_.clear();
        int rb = 0;
        for (size_t r = 0; r < file_->letrRows().size(); ++r)
            if (file_->letrRows()[r].baseline && int(r) != row_) {
                rb = int(r);
                break;
            }
        rowB_ = rb;
        refillControls();
        rebuildColumns();
        startCounts();
        updateButtons();
        if (selected_ >= 0) selectSample(selected_);
        return Q_EMIT compareOpened(qs(file_->path()));
    }
    setBusy(+1);
    struct Matched {
        std::shared_ptr<ResultsFile> file;
        std::vector<int64_t> index;
    };
    runAsync(
        this,
        [a = file_, p = path.toStdString()] {
            Matched m;
            m.file = ResultsFile::open(p);
            const ResultsFile& b = *m.file;
            if (b.type() != a->type())
                throw Error(p + " holds " + results::typeName(b.type()) + " results; " + a->path() + " holds " +
                            results::typeName(a->type()) + " results: compare files of one kind");
            if (b.source().spec != a->source().spec || b.source().split != a->source().split)
                throw Error(p + " was evaluated on '" + b.source().spec + "' and " + a->path() + " on '" +
                            a->source().spec + "': compare results of the same data");
            m.index.assign(size_t(a->size()), -1);
            if (a->type() == ResultsType::FewShot) {   // the same episodes when the settings (and seeds) agree
                for (int64_t i = 0; i < a->size() && i < b.size(); ++i) m.index[size_t(i)] = i;
            } else {
                std::unordered_map<int64_t, int64_t> where;
                for (int64_t j = 0; j < b.size(); ++j) where.emplace(b.datasetIndex(j), j);
                for (int64_t i = 0; i < a->size(); ++i) {
                    const auto it = where.find(a->datasetIndex(i));
                    if (it != where.end()) m.index[size_t(i)] = it->second;
                }
            }
            return m;
        },
        [this, path](Outcome<Matched> r) {
            setBusy(-1);
            if (!r.ok()) return Q_EMIT failed(r.error);
            fileB_ = r.value.file;
            bIndex_ = std::move(r.value.index);
            rowB_ = -1;
            const int64_t matched = std::count_if(bIndex_.begin(), bIndex_.end(), [](int64_t j) { return j >= 0; });
            refillControls();
            rebuildColumns();
            startCounts();
            updateButtons();
            if (selected_ >= 0) selectSample(selected_);
            Q_EMIT message(QStringLiteral("Comparing with %1: %2 of %3 samples matched").arg(path).arg(matched).arg(file_->size()));
            Q_EMIT compareOpened(path);
        });
}

void ResultsPanel::closeCompare() {
    fileB_.reset();
    bIndex_.clear();
    rowB_ = -1;
    if (comparePaneOurs_ && window_->compareViewport()) window_->compareViewport()->hide();
    comparePaneOurs_ = false;
    if (!file_) return;
    refillControls();
    rebuildColumns();
    startCounts();
    updateButtons();
    if (selected_ >= 0) selectSample(selected_);
}

// --- inspectors ----------------------------------------------------------------------------------

namespace {
// Loads `checkpoint` into `panel` unless it holds it already; false when there is none to load
// and the panel has no model. A checkpoint that is not there (moved, deleted) leaves the panel's
// own model in place (`note` says so).
bool ensureCheckpoint(ModelPanel* panel, const QString& checkpoint, QString* note = nullptr) {
    if (!checkpoint.isEmpty() && !QFileInfo::exists(checkpoint)) {
        if (!panel->hasModel() && !panel->modelLoading()) return false;
        if (note)
            *note = "The results file's checkpoint " + checkpoint + " is not there; inspecting with the " +
                    panel->title() + " panel's model (" + QFileInfo(panel->checkpointPath()).fileName() + ").";
        return true;
    }
    if (checkpoint.isEmpty()) return panel->hasModel() || panel->modelLoading();
    if (QFileInfo(checkpoint).absoluteFilePath() != QFileInfo(panel->checkpointPath()).absoluteFilePath())
        panel->loadCheckpoint(checkpoint);
    return true;
}

QString missingModel(const ResultsFile& f, const QString& family) {
    const QString ck = qs(f.header().checkpoint);
    return ck.isEmpty() ? "Inspect: the results file names no checkpoint; open the " + family +
                              " checkpoint in its panel (Checkpoint...) and Inspect again."
                        : "Inspect: the results file's checkpoint " + ck + " is not there; open it (or the model to "
                          "inspect with) in the " + family + " panel (Checkpoint...) and Inspect again.";
}

// Calls `f` once, on the next emission of `signal` by `sender`.
template <class Sender, class Signal, class F>
void once(QObject* context, Sender* sender, Signal signal, F f) {
    auto conn = std::make_shared<QMetaObject::Connection>();
    *conn = QObject::connect(sender, signal, context, [conn, f]() mutable {
        QObject::disconnect(*conn);
        f();
    });
}
} // namespace

void ResultsPanel::inspect(bool trueClass, bool clusterMap) {
    if (!file_ || shown_ < 0 || !shownData_) return Q_EMIT failed("Inspect: select a sample first.");
    inspecting_ = true;
    // A model panel's failure (no checkpoint, a failed run) ends the inspection too.
    for (ModelPanel* m : window_->panels()) once(this, m, &ModelPanel::failed, [this] { inspecting_ = false; });
    if (file_->type() == ResultsType::Letr) return inspectLetr();
    if (file_->type() == ResultsType::Classification) return inspectCoat(trueClass);
    inspectFewShot(clusterMap);
}

void ResultsPanel::inspectLetr() {
    const auto& info = file_->letrRows().at(size_t(row_));
    if (info.baseline)
        return Q_EMIT failed(qs(info.label) + " is a baseline without attention: choose a LETR layer in the Layer box.");
    LetrInspector* letr = window_->letrInspector();
    QString note;
    if (!ensureCheckpoint(letr, qs(file_->header().checkpoint), &note))
        return Q_EMIT failed(missingModel(*file_, "LETR"));
    if (!note.isEmpty()) Q_EMIT message(note);
    const auto& cfg = file_->header().config;
    if (cfg.is_object() && cfg.contains("flips") && cfg["flips"].is_number_integer()) letr->setFlips(cfg["flips"].get<int>());
    const int64_t sample = shown_;
    once(this, letr, &ModelPanel::traceReady, [this, sample] { applyLetrInspect(sample); });
    Q_EMIT letr->activateRequested();
    letr->runWhenReady(-2);
    Q_EMIT message(QStringLiteral("Running LETR on %1 for the attention of its false positive ...").arg(shownData_->label));
}

void ResultsPanel::applyLetrInspect(int64_t sample) {
    LetrInspector* letr = window_->letrInspector();
    const auto trace = letr->trace();
    if (sample != shown_ || !trace || !shownData_) return;
    const auto& info = file_->letrRows().at(size_t(row_));
    const auto positions = letrPositions(*trace);
    int pos = -1;
    for (size_t p = 0; p < positions.size(); ++p)
        if (positions[p].label() == info.label) pos = int(p);
    if (pos < 0) return Q_EMIT failed("Inspect: the LETR trace has no layer '" + qs(info.label) + "'.");
    const auto& lines = shownData_->lines;
    int line = picked_ >= 0 ? picked_ : (shownFps_.empty() ? 0 : shownFps_.front());
    if (line < 0 || line >= int(lines.size())) return Q_EMIT failed("Inspect: the sample has no stored lines.");
    const auto& rec = lines[size_t(line)];
    // The entity whose line at that layer is the stored one: nearest endpoints (either order).
    const torch::Tensor e = trace->endpoints(positions[size_t(pos)].stage, positions[size_t(pos)].layer)
                                .to(torch::kFloat32)
                                .contiguous();
    const float* ep = e.data_ptr<float>();
    int entity = -1;
    double best = 1e30;
    for (int64_t k = 0; k < e.size(0); ++k) {
        const float* q = ep + 4 * k;
        const double d1 = std::hypot(q[0] - rec.x1, q[1] - rec.y1) + std::hypot(q[2] - rec.x2, q[3] - rec.y2);
        const double d2 = std::hypot(q[0] - rec.x2, q[1] - rec.y2) + std::hypot(q[2] - rec.x1, q[3] - rec.y1);
        if (std::min(d1, d2) < best) {
            best = std::min(d1, d2);
            entity = int(k);
        }
    }
    letr->setPosition(pos);
    letr->setThreshold(std::min(double(minScore_), double(rec.score)));
    letr->setEntity(entity);
    Q_EMIT message(QStringLiteral("LETR attention of entity %1 at %2: the %3 line scored %4 (endpoints %5 px from the "
                                  "stored line)")
                       .arg(entity)
                       .arg(qs(info.label))
                       .arg(rec.isTp(size_t(threshold_)) ? "true positive" : "false positive")
                       .arg(rec.score, 0, 'f', 3)
                       .arg(best / 2, 0, 'f', 2));
    Q_EMIT inspected();
}

void ResultsPanel::inspectCoat(bool trueClass) {
    CoatInspector* coat = window_->coatInspector();
    QString note;
    if (!ensureCheckpoint(coat, qs(file_->header().checkpoint), &note)) return Q_EMIT failed(missingModel(*file_, "CoaT"));
    if (!note.isEmpty()) Q_EMIT message(note);
    const int64_t cls = trueClass ? file_->labels().at(size_t(shown_)) : file_->predicted().at(size_t(shown_));
    auto apply = [this, coat, cls] {
        coat->setMode(CoatMode::Cam);
        coat->setCamClass(cls);
        Q_EMIT message(QStringLiteral("CoaT Grad-CAM of class %1").arg(className(*file_, cls)));
        Q_EMIT inspected();
    };
    Q_EMIT coat->activateRequested();
    if (coat->hasTrace() && coat->sourceKey() == shownData_->key) return apply();
    once(this, coat, &ModelPanel::traceReady, apply);
    coat->runWhenReady();
}

void ResultsPanel::inspectFewShot(bool clusterMap) {
    auto* cst = qobject_cast<ConstellationInspector*>(window_->panel("constellation"));
    if (!cst) return Q_EMIT failed("Inspect: this Glimpse has no ConstellationNet panel.");
    QString note;
    if (!ensureCheckpoint(cst, qs(file_->header().checkpoint), &note))
        return Q_EMIT failed(missingModel(*file_, "ConstellationNet"));
    if (!note.isEmpty()) Q_EMIT message(note);
    const results::EpisodeIn e = file_->episode(shown_);
    const auto& st = file_->settings().at(size_t(e.setting));
    if (clusterMap) {   // the first query classified into another way
        size_t q = 0;
        while (q < e.predicted.size() && e.predicted[q] == int64_t(q) / st.queries) ++q;
        if (q == e.query.size()) q = 0;
        const cv::Mat rgb = rv::toRgb8(file_->datasetImage(e.query.at(q)));
        const QString label = QStringLiteral("episode %1 query %2").arg(e.episode).arg(q);
        for (ModelPanel* p : window_->panels()) p->setActive(false);
        Q_EMIT showImageRequested(label, toRgbImage(rgb),
                                  QStringLiteral("results:%1#%2:query%3").arg(qs(file_->path())).arg(shown_).arg(q));
        once(this, cst, &ModelPanel::traceReady, [this] { Q_EMIT inspected(); });
        Q_EMIT cst->activateRequested();
        cst->runWhenReady();
        return;
    }
    Q_EMIT cst->activateRequested();
    cst->showEpisodeTab();
    EpisodeView* ev = cst->episodeView();
    if (cst->dataSpec() != file_->source().spec) cst->dataEdit()->setText(qs(file_->source().spec));
    const int split = ev->splitBox()->findText(qs(file_->source().split));
    if (split >= 0) ev->splitBox()->setCurrentIndex(split);
    ev->waysBox()->setValue(int(st.ways));
    ev->shotsBox()->setValue(int(st.shots));
    ev->queriesBox()->setValue(int(st.queries));
    ev->episodeBox()->setValue(int(e.episode));
    if (st.seed != EpisodeView::kSeed)
        Q_EMIT message(QStringLiteral("The Episode tab samples with seed %1; this file's episodes used seed %2, so the "
                                      "tab shows episode %3 of seed %1.")
                           .arg(EpisodeView::kSeed)
                           .arg(st.seed)
                           .arg(e.episode));
    once(this, ev, &EpisodeView::episodeReady, [this] { Q_EMIT inspected(); });
    if (cst->hasModel()) ev->runEpisode();
    else once(this, cst, &ModelPanel::checkpointLoaded, [ev] { ev->runEpisode(); });
}

// --- export -------------------------------------------------------------------------------------

void ResultsPanel::exportCsv(const QString& path) {
    if (!file_) return Q_EMIT exportFailed(path, "Export CSV: no results file is open.");
    setBusy(+1);
    runAsync(
        this,
        [text = table_->csv().toUtf8(), path] {
            QSaveFile out(path);   // temp file + rename on commit
            if (!out.open(QIODevice::WriteOnly) || out.write(text) != text.size() || !out.commit())
                throw Error("cannot write " + path.toStdString() + ": " + out.errorString().toStdString());
        },
        [this, path, rows = table_->rowCount()](Outcome<std::monostate> r) {
            setBusy(-1);
            if (!r.ok()) {
                Q_EMIT failed(r.error);
                return Q_EMIT exportFailed(path, r.error);
            }
            Q_EMIT message(QStringLiteral("Exported %1 rows to %2").arg(rows).arg(path));
            Q_EMIT exported(path);
        });
}

void ResultsPanel::exportContactSheet(const QString& path) {
    if (!file_) return Q_EMIT exportFailed(path, "Contact sheet: no results file is open.");
    std::vector<int64_t> samples = selectedSamples();
    if (samples.size() <= 1) {   // one row is merely the current one: the first listed samples
        samples.clear();
        for (int r = 0; r < table_->rowCount() && r < 24; ++r) samples.push_back(table_->sampleAt(r));
    }
    if (samples.size() > size_t(kMaxSheetTiles)) samples.resize(size_t(kMaxSheetTiles));
    if (samples.empty()) return Q_EMIT exportFailed(path, "Contact sheet: no samples listed.");
    setBusy(+1);
    runAsync(
        this,
        [f = file_, samples, row = row_, thr = size_t(threshold_), s = minScore_, p = path.toStdString()] {
            std::vector<rv::SheetTile> tiles;
            for (int64_t i : samples) {
                SideOut side = makeSide(*f, i, row, thr, s, "");
                tiles.push_back({renderSide(side, 256), "#" + std::to_string(i) + " " + side.caption});
            }
            const int cols = int(std::ceil(std::sqrt(double(tiles.size()))));
            saveImagePNG(p, rv::contactSheet(tiles, cols, 256));
        },
        [this, path, n = samples.size()](Outcome<std::monostate> r) {
            setBusy(-1);
            if (!r.ok()) {
                const QString err = QStringLiteral("Contact sheet %1 failed: %2").arg(path, r.error);
                Q_EMIT failed(err);
                return Q_EMIT exportFailed(path, err);
            }
            Q_EMIT message(QStringLiteral("Wrote a contact sheet of %1 samples to %2").arg(n).arg(path));
            Q_EMIT exported(path);
        });
}

} // namespace glimpse::app
