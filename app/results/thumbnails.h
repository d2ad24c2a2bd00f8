#pragma once
// The results dock's thumbnail grid: a list model showing the table's visible samples in the
// table's order, whose pictures (the image with its overlay, at most kThumbSide pixels) are
// made on worker threads of a pool of their own (two threads: model runs keep the global
// pool) and cached (LRU, by sample, for the current overlay settings). The view asks only for
// the items it paints; a miss queues a request (newest first, so scrolling fast makes the
// items in view first and the ones scrolled past are dropped from the queue) and shows a
// placeholder until the picture is there. The UI thread only looks up the cache.
#include <QAbstractListModel>
#include <QCache>
#include <QImage>
#include <QSet>
#include <QThreadPool>
#include <deque>
#include <functional>
#include <memory>

namespace glimpse::app {

class ResultsTableModel;

constexpr int kThumbSide = 112;

class ThumbnailModel : public QAbstractListModel {
    Q_OBJECT
public:
    // Makes the picture of a sample (worker thread; may throw: the item then says why).
    using Maker = std::function<QImage(int64_t sample)>;
    ThumbnailModel(ResultsTableModel* table, QObject* parent = nullptr);
    ~ThumbnailModel() override;

    // New pictures (other overlay settings, another file): the cache is dropped and requests
    // made with the old maker are ignored when they finish.
    void setMaker(Maker maker);
    // Captions (under the picture) per sample.
    void setCaption(std::function<QString(int64_t)> caption) { caption_ = std::move(caption); }
    bool cached(int64_t sample) const { return cache_.contains(sample); }
    int pending() const { return running_ + int(queue_.size()); }
    int64_t made() const { return made_; }
    int64_t requested() const { return requested_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

Q_SIGNALS:
    void thumbnailReady(qlonglong sample);

private:
    void request(int64_t sample) const;
    void pump() const;

    ResultsTableModel* table_;
    Maker maker_;
    std::function<QString(int64_t)> caption_;
    mutable QCache<qint64, QImage> cache_{600};
    mutable QHash<qint64, QString> errors_;
    mutable std::deque<int64_t> queue_;   // newest at the front
    mutable QSet<qint64> queued_;
    mutable int running_ = 0;
    mutable int64_t requested_ = 0;
    int64_t made_ = 0;
    int generation_ = 0;
    QImage placeholder_;
    mutable QThreadPool pool_;
};

} // namespace glimpse::app
