#include "app/constellation/episode_view.h"
#include "app/async.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHeaderView>
#include <QIcon>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

#include "core/error.h"
#include "core/models/constellation/model.h"

namespace glimpse::app {

namespace {

constexpr int kTilePx = 48;
constexpr int kSwatchPx = 14;

QImage toQImage(const cv::Mat& rgb) {
    return QImage(rgb.data, rgb.cols, rgb.rows, int(rgb.step), QImage::Format_RGB888).copy();
}

// An image tile of `px` pixels with a `frame`-coloured border (none when invalid).
QPixmap tile(const cv::Mat& rgb, int px, const QColor& frame) {
    QPixmap pm(px, px);
    pm.fill(frame.isValid() ? frame : QColor(40, 40, 40));
    QPainter p(&pm);
    const int b = frame.isValid() ? 3 : 0;
    p.drawImage(QRect(b, b, px - 2 * b, px - 2 * b), toQImage(rgb));
    return pm;
}

// The top clusters as swatches side by side.
QPixmap swatchRow(const std::vector<glimpse::constellation::ClusterScore>& top) {
    const int n = std::max<int>(1, int(top.size()));
    QPixmap pm(n * (kSwatchPx + 2), kSwatchPx);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    for (size_t i = 0; i < top.size(); ++i) p.drawPixmap(int(i) * (kSwatchPx + 2), 0, clusterSwatch(top[i].cluster, kSwatchPx));
    return pm;
}

} // namespace

QPixmap clusterSwatch(int64_t cluster, int size) {
    const cv::Vec3b c = glimpse::constellation::clusterColour(cluster);
    QPixmap pm(size, size);
    pm.fill(QColor(c[0], c[1], c[2]));
    QPainter p(&pm);
    p.setPen(QColor(30, 30, 30));
    p.drawRect(0, 0, size - 1, size - 1);
    return pm;
}

EpisodeView::EpisodeView(std::function<Source()> source, QWidget* parent) : QWidget(parent), source_(std::move(source)) {
    buildUi();
}

EpisodeView::~EpisodeView() = default;

void EpisodeView::buildUi() {
    auto* col = new QVBoxLayout(this);
    col->setContentsMargins(0, 0, 0, 0);
    auto* grid = new QGridLayout;
    col->addLayout(grid);
    split_ = new QComboBox(this);
    split_->addItems({"novel", "val", "base"});
    split_->setToolTip("The split whose classes the episode draws (novel: classes the model never trained on)");
    auto spin = [this](int lo, int hi, int v, const QString& tip) {
        auto* s = new QSpinBox(this);
        s->setRange(lo, hi);
        s->setValue(v);
        s->setToolTip(tip);
        return s;
    };
    ways_ = spin(2, 20, 5, "N: classes (ways) in the episode");
    shots_ = spin(1, 20, 1, "K: support images per way (the way's prototype is their mean feature)");
    queries_ = spin(1, 30, 5, "Query images per way");
    episode_ = spin(0, 1000000, 0, "Episode index (seed 0): the same index gives the same episode");
    // Split [   ] index [ ]
    // ways [ ] shots [ ] queries [ ]
    // [Run] [New episode]
    grid->addWidget(new QLabel("Split", this), 0, 0);
    grid->addWidget(split_, 0, 1, 1, 3);
    grid->addWidget(new QLabel("index", this), 0, 4);
    grid->addWidget(episode_, 0, 5);
    int c = 0;
    for (auto [label, box] : {std::pair<const char*, QSpinBox*>{"ways", ways_}, {"shots", shots_}, {"queries", queries_}}) {
        grid->addWidget(new QLabel(label, this), 1, c++);
        grid->addWidget(box, 1, c++);
    }
    runButton_ = new QPushButton("Run", this);
    runButton_->setToolTip("Run this episode through the model");
    newButton_ = new QPushButton("New episode", this);
    newButton_->setToolTip("The next episode index, run through the model");
    grid->addWidget(runButton_, 2, 0, 1, 2);
    grid->addWidget(newButton_, 2, 2, 1, 4);
    status_ = new QLabel("No episode yet: load a checkpoint and press New episode.", this);
    status_->setWordWrap(true);
    col->addWidget(status_);

    table_ = new QTableWidget(0, 3, this);
    table_->setHorizontalHeaderLabels({"way", "class", "prototype's top clusters"});
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->verticalHeader()->setVisible(false);
    table_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
    table_->setIconSize(QSize(3 * (kSwatchPx + 2), kSwatchPx));
    table_->setMinimumHeight(120);
    col->addWidget(table_);
    auto list = [this](const QString& tip) {
        auto* l = new QListWidget(this);
        l->setViewMode(QListView::IconMode);
        l->setIconSize(QSize(kTilePx, kTilePx));
        l->setResizeMode(QListView::Adjust);
        l->setMovement(QListView::Static);
        l->setSpacing(2);
        l->setUniformItemSizes(true);
        l->setMinimumHeight(kTilePx + 30);
        l->setToolTip(tip);
        return l;
    };
    col->addWidget(new QLabel("Support (way-major)", this));
    support_ = list("Support images, way by way");
    support_->setMaximumHeight(2 * (kTilePx + 26) + 6);   // two rows; the queries get the room
    col->addWidget(support_);
    col->addWidget(new QLabel("Queries: true -> predicted way (green: right, red: wrong)", this));
    query_ = list("Query images, way by way, framed by whether the model's prediction is right");
    query_->setMinimumHeight(2 * (kTilePx + 26) + 6);
    col->addWidget(query_, 1);
    connect(runButton_, &QPushButton::clicked, this, &EpisodeView::runEpisode);
    connect(newButton_, &QPushButton::clicked, this, &EpisodeView::newEpisode);
}

data::EpisodeSpec EpisodeView::spec() const { return {ways_->value(), shots_->value(), queries_->value()}; }
int EpisodeView::episodeIndex() const { return episode_->value(); }
QString EpisodeView::split() const { return split_->currentText(); }

void EpisodeView::newEpisode() {
    if (result_ || pending_ > 0) episode_->setValue(episode_->value() + 1);
    runEpisode();
}

void EpisodeView::clear() {
    ++generation_;   // a running episode's result is dropped
    result_.reset();
    table_->setRowCount(0);
    support_->clear();
    query_->clear();
    status_->setText("No episode yet: press New episode.");
}

void EpisodeView::runEpisode() {
    const Source src = source_();
    if (!src.model) {
        Q_EMIT failed("Episode: no ConstellationNet checkpoint loaded (Checkpoint... above).");
        return;
    }
    const data::EpisodeSpec spec = this->spec();
    const int index = episodeIndex();
    const std::string split = this->split().toStdString();
    const int gen = ++generation_;
    ++pending_;
    Q_EMIT busyChanged(true);
    const QString what = QStringLiteral("episode %1 of %2 (%3)")
                             .arg(index)
                             .arg(QString::fromStdString(split), QString::fromStdString(src.dataSpec));
    status_->setText("Running " + what + " ...");
    Q_EMIT message("Running ConstellationNet " + what + " ...");
    runAsync(
        this,
        [src, spec, index, split] {
            const auto opened = src.data->get(src.dataSpec, int(src.model->config().imageSize));
            const auto& sampler = opened->sampler(split);
            const data::Episode ep = sampler.sample(spec, kSeed, index);
            std::lock_guard<std::mutex> lock(*src.mutex);
            return std::make_shared<const glimpse::constellation::EpisodeResult>(
                glimpse::constellation::runEpisode(*src.model, sampler.dataset(), spec, ep));
        },
        [this, gen, what](Outcome<std::shared_ptr<const glimpse::constellation::EpisodeResult>> r) {
            --pending_;
            Q_EMIT busyChanged(pending_ > 0);
            if (gen != generation_) return;   // cleared or superseded meanwhile
            if (!r.ok()) {
                status_->setText("Episode failed: " + r.error);
                Q_EMIT failed("ConstellationNet " + what + ": " + r.error);
                return;
            }
            showResult(r.value, what);
        });
}

void EpisodeView::showResult(std::shared_ptr<const glimpse::constellation::EpisodeResult> r, const QString& what) {
    result_ = std::move(r);
    const auto& e = *result_;
    const int64_t n = int64_t(e.predicted.size());
    const int64_t right = int64_t(std::lround(e.accuracy * double(n)));
    status_->setText(QStringLiteral("%1: %2-way %3-shot, %4 queries per way. Accuracy %5 % (%6 / %7)%8")
                         .arg(what)
                         .arg(e.spec.ways)
                         .arg(e.spec.shots)
                         .arg(e.spec.queries)
                         .arg(100.0 * e.accuracy, 0, 'f', 1)
                         .arg(right)
                         .arg(n)
                         .arg(e.prototypeModule.empty()
                                  ? QString(" (a baseline without constellation modules: no prototype clusters)")
                                  : QStringLiteral("; prototype clusters of %1")
                                        .arg(QString::fromStdString(e.prototypeModule))));
    fillWays(e);
    fillTiles(e);
    Q_EMIT message(QStringLiteral("ConstellationNet %1: accuracy %2 %").arg(what).arg(100.0 * e.accuracy, 0, 'f', 1));
    Q_EMIT episodeReady();
}

void EpisodeView::fillWays(const glimpse::constellation::EpisodeResult& e) {
    table_->setRowCount(int(e.spec.ways));
    for (int w = 0; w < int(e.spec.ways); ++w) {
        table_->setItem(w, 0, new QTableWidgetItem(QString::number(w + 1)));
        table_->setItem(w, 1, new QTableWidgetItem(QString::fromStdString(e.classNames.at(size_t(w)))));
        QString text;
        auto* item = new QTableWidgetItem;
        if (size_t(w) < e.prototypeClusters.size()) {
            const auto& top = e.prototypeClusters[size_t(w)];
            QString tip;
            for (const auto& c : top) {
                text += QStringLiteral("#%1 ").arg(c.cluster);
                tip += QStringLiteral("\n#%1: %2").arg(c.cluster).arg(double(c.similarity), 0, 'f', 3);
            }
            item->setToolTip("Mean cosine similarity of the way's support cells to each cluster (best 3):" + tip);
            item->setIcon(QIcon(swatchRow(top)));
            QList<QVariant> ids;
            for (const auto& c : top) ids << qlonglong(c.cluster);
            item->setData(Qt::UserRole, ids);
        } else {
            text = "-";
        }
        item->setText(text.trimmed());
        table_->setItem(w, 2, item);
    }
    table_->resizeColumnToContents(0);
    table_->resizeColumnToContents(1);
    // Room for every way (the panel scrolls instead of the table).
    const int h = table_->horizontalHeader()->sizeHint().height() +
                  int(e.spec.ways) * table_->verticalHeader()->defaultSectionSize() + 2 * table_->frameWidth() + 2;
    table_->setMinimumHeight(h);
    table_->setMaximumHeight(h);
}

void EpisodeView::fillTiles(const glimpse::constellation::EpisodeResult& e) {
    support_->clear();
    query_->clear();
    for (size_t i = 0; i < e.support.size(); ++i) {
        const int64_t way = int64_t(i) / e.spec.shots;
        auto* item = new QListWidgetItem(QIcon(tile(e.support[i], kTilePx, QColor())), QStringLiteral("way %1").arg(way + 1));
        item->setToolTip(QStringLiteral("way %1: %2 (image %3)")
                             .arg(way + 1)
                             .arg(QString::fromStdString(e.classNames.at(size_t(way))))
                             .arg(e.episode.support.at(i)));
        item->setData(Qt::UserRole, qlonglong(way));
        support_->addItem(item);
    }
    for (size_t q = 0; q < e.query.size(); ++q) {
        const int64_t truth = int64_t(q) / e.spec.queries, pred = e.predicted.at(q);
        const bool ok = truth == pred;
        const QColor frame = ok ? QColor(40, 190, 70) : QColor(220, 40, 40);
        auto* item = new QListWidgetItem(QIcon(tile(e.query[q], kTilePx, frame)),
                                         QStringLiteral("%1 -> %2").arg(truth + 1).arg(pred + 1));
        item->setForeground(frame);
        QString logits;
        for (int64_t w = 0; w < e.spec.ways; ++w)
            logits += QStringLiteral("%1%2").arg(w ? ", " : "").arg(double(e.logits[int64_t(q)][w].item<float>()), 0, 'f', 3);
        item->setToolTip(QStringLiteral("true way %1 (%2), predicted way %3 (%4)%5\ncosine logits: %6")
                             .arg(truth + 1)
                             .arg(QString::fromStdString(e.classNames.at(size_t(truth))))
                             .arg(pred + 1)
                             .arg(QString::fromStdString(e.classNames.at(size_t(pred))))
                             .arg(ok ? " - right" : " - wrong")
                             .arg(logits));
        item->setData(Qt::UserRole, ok);
        query_->addItem(item);
    }
}

} // namespace glimpse::app
