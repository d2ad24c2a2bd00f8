#pragma once
// Follows one run log (core/runlog.h) for the charts: each poll() reads only the rows appended
// since the previous one. The file may not exist yet (a trainer about to create it): poll()
// then retries on each call until it appears.
#include <QMap>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace glimpse {
class RunLogReader;
}

namespace glimpse::app {

class RunFollower {
public:
    explicit RunFollower(QString path);
    ~RunFollower();

    // New rows of one series, column-wise: steps, wall times (seconds since the run started)
    // and values.
    struct Rows {
        std::vector<double> steps, wallTimes, values;
        int size() const { return int(steps.size()); }
    };
    struct Update {
        QMap<QString, Rows> rows;                 // new rows per series
        bool statusChanged = false;
        bool opened = false;                      // the file was opened by this poll
        bool reset = false;   // the file was replaced by one with fewer rows (a run resumed
                              // from an earlier checkpoint): points hold every row again
    };
    // Throws glimpse::Error for a file that exists but is not a run log (or is corrupt);
    // a missing file is not an error (waitForFile) unless mustExist.
    Update poll(bool mustExist = false);

    // The pieces of a first poll, for reading a long log on a worker thread: open() opens the
    // file (its config, series names and row counts; no rows; throws as poll does) and says
    // whether it did; pendingRows() counts the rows not read yet; readSeries() reads one
    // series' unread rows (at most maxRows of them) and counts them as read; several workers
    // may call it at once for different series. While workers call readSeries(), the UI thread
    // may call only the config getters (family(),
    // configText(), dataSpec(), gameCategories(), startTime(), worldSize(), throughputUnit(),
    // status(), path()); poll() and progress() wait until it is done.
    bool open(bool mustExist);
    QStringList seriesNames() const;
    int64_t pendingRows() const;
    int64_t pendingRows(const QString& series) const;
    Rows readSeries(const QString& series, int64_t maxRows = -1);

    const QString& path() const { return path_; }
    bool isOpen() const { return reader_ != nullptr; }
    // "running", "finished", "failed", "stopped"; "dead" for a "running" log whose writer is
    // gone (killed: process gone or heartbeat stopped, as of the last poll); "waiting" before open.
    QString status() const;
    QString statusMessage() const;   // for "dead": "stopped responding at ...; ... resume with --resume"
    QString configText() const;      // the run's config JSON, pretty-printed
    // The family that wrote the run: the config's "trainer" (LETR, CoaT, ConstellationNet,
    // XTRA) or "family" (EfficientZero); "" when the log does not say or is not open.
    QString family() const;
    double startTime() const;        // Unix time of the run's start (0 when unknown)
    std::string dataSpec() const;
    // XTRA: the config's "game_categories" (game -> "shooter" / "maze"), empty if absent.
    QMap<QString, QString> gameCategories() const;    // config's "data" (or "data_spec") string, "" if none

    // Progress read from the log: the last step of its first series ("loss/total" when there
    // is one), the config's "total_steps" (else its "steps"; -1 if neither), and the ETA from the wall times of
    // the last rows (-1 when unknown, 0 once the run has ended).
    struct Progress {
        int64_t step = -1, total = -1;
        double eta = -1;
    };
    Progress progress() const;

    // A distributed run (docs/distributed.md): the config's "world_size" (1 when absent), and
    // each rank's latest throughput from the series dist/throughput_rank<N> (empty before the
    // first rows, or for a single-process run).
    int worldSize() const;
    QVector<double> rankThroughput() const { return rankThroughput_; }
    // The unit of those figures: the config's "throughput_unit" ("env steps/s" for
    // EfficientZero's self-play ranks), else "img/s".
    QString throughputUnit() const;

private:
    QVector<double> rankThroughput_;
    QString path_;
    std::unique_ptr<RunLogReader> reader_;
    QMap<QString, int64_t> rows_;
    mutable std::mutex mutex_;   // rows_, progressSeries_, recent_, rankThroughput_ in readSeries
    QString lastStatus_;
    bool dead_ = false;
    QString deadText_;
    QString progressSeries_;
    std::deque<std::pair<int64_t, double>> recent_;   // (step, wall time) of the last rows
};

} // namespace glimpse::app
