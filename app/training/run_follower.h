#pragma once
// Follows one run log (core/runlog.h) for the charts: each poll() reads only the rows appended
// since the previous one. The file may not exist yet (a trainer about to create it): poll()
// then retries on each call until it appears.
#include <QMap>
#include <QPointF>
#include <QString>
#include <QVector>
#include <memory>
#include <string>

namespace glimpse {
class RunLogReader;
}

namespace glimpse::app {

class RunFollower {
public:
    explicit RunFollower(QString path);
    ~RunFollower();

    struct Update {
        QMap<QString, QVector<QPointF>> points;   // new (step, value) rows per series
        bool statusChanged = false;
        bool opened = false;                      // the file was opened by this poll
    };
    // Throws glimpse::Error for a file that exists but is not a run log (or is corrupt);
    // a missing file is not an error (waitForFile) unless mustExist.
    Update poll(bool mustExist = false);

    const QString& path() const { return path_; }
    bool isOpen() const { return reader_ != nullptr; }
    QString status() const;          // "running", "finished", "failed"; "waiting" before open
    QString statusMessage() const;
    QString configText() const;      // the run's config JSON, pretty-printed
    std::string dataSpec() const;    // config's "data" (or "data_spec") string, "" if none

private:
    QString path_;
    std::unique_ptr<RunLogReader> reader_;
    QMap<QString, int64_t> rows_;
    QString lastStatus_;
};

} // namespace glimpse::app
