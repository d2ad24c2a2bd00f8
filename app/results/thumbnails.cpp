#include "app/results/thumbnails.h"

#include <QFutureWatcher>
#include <QPainter>
#include <QtConcurrent/QtConcurrentRun>

#include "app/results/results_table.h"

namespace glimpse::app {

namespace {
constexpr size_t kMaxQueued = 160;   // requests beyond these (scrolled past long ago) are dropped
constexpr int kWorkers = 2;

struct Made {
    QImage image;
    QString error;
};
} // namespace

ThumbnailModel::ThumbnailModel(ResultsTableModel* table, QObject* parent) : QAbstractListModel(parent), table_(table) {
    pool_.setMaxThreadCount(kWorkers);
    placeholder_ = QImage(kThumbSide, kThumbSide, QImage::Format_RGB888);
    placeholder_.fill(QColor(60, 60, 60));
    connect(table_, &QAbstractItemModel::modelReset, this, [this] {
        beginResetModel();
        endResetModel();
    });
    connect(table_, &ResultsTableModel::rowsRearranged, this, [this] {
        beginResetModel();
        endResetModel();
    });
}

ThumbnailModel::~ThumbnailModel() {
    queue_.clear();
    pool_.clear();
    pool_.waitForDone();
}

void ThumbnailModel::setMaker(Maker maker) {
    ++generation_;
    maker_ = std::move(maker);
    cache_.clear();
    errors_.clear();
    queue_.clear();
    queued_.clear();
    if (rowCount() > 0) Q_EMIT dataChanged(index(0), index(rowCount() - 1), {Qt::DecorationRole, Qt::ToolTipRole});
}

int ThumbnailModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : table_->rowCount();
}

QVariant ThumbnailModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= table_->rowCount()) return {};
    const int64_t s = table_->sampleAt(index.row());
    if (role == Qt::DecorationRole) {
        if (QImage* img = cache_.object(s)) return *img;
        if (!errors_.contains(s)) request(s);
        return placeholder_;
    }
    if (role == Qt::DisplayRole) return caption_ ? caption_(s) : QString::number(s);
    if (role == Qt::ToolTipRole) return errors_.value(s);
    if (role == Qt::UserRole) return qlonglong(s);
    return {};
}

void ThumbnailModel::request(int64_t sample) const {
    if (!maker_ || queued_.contains(sample)) return;
    ++requested_;
    queue_.push_front(sample);
    queued_.insert(sample);
    while (queue_.size() > kMaxQueued) {
        queued_.remove(queue_.back());
        queue_.pop_back();
    }
    pump();
}

void ThumbnailModel::pump() const {
    auto* self = const_cast<ThumbnailModel*>(this);
    while (running_ < kWorkers && !queue_.empty()) {
        const int64_t s = queue_.front();
        queue_.pop_front();
        ++running_;
        const int gen = generation_;
        auto* watcher = new QFutureWatcher<Made>(self);
        connect(watcher, &QFutureWatcher<Made>::finished, self, [self, watcher, s, gen] {
            Made m = watcher->result();
            watcher->deleteLater();
            --self->running_;
            self->queued_.remove(s);
            if (gen == self->generation_) {
                if (!m.error.isEmpty()) self->errors_.insert(s, m.error);
                else ++self->made_;
                self->cache_.insert(s, new QImage(std::move(m.image)));
                const int row = self->table_->rowOf(s);
                if (row >= 0 && row < self->rowCount())
                    Q_EMIT self->dataChanged(self->index(row), self->index(row), {Qt::DecorationRole, Qt::ToolTipRole});
                Q_EMIT self->thumbnailReady(s);
            }
            self->pump();
        });
        watcher->setFuture(QtConcurrent::run(&pool_, [maker = maker_, s] {
            Made m;
            try {
                m.image = maker(s);
            } catch (const std::exception& e) {
                m.error = QString::fromUtf8(e.what());
                QImage img(kThumbSide, kThumbSide, QImage::Format_RGB888);
                img.fill(QColor(90, 30, 30));
                m.image = img;
            }
            return m;
        }));
    }
}

} // namespace glimpse::app
