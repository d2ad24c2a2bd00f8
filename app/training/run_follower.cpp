#include "app/training/run_follower.h"

#include <filesystem>

#include "core/error.h"
#include "core/runlog.h"

namespace glimpse::app {

RunFollower::RunFollower(QString path) : path_(std::move(path)) {}
RunFollower::~RunFollower() = default;

RunFollower::Update RunFollower::poll(bool mustExist) {
    Update u;
    if (!reader_) {
        const std::string p = path_.toStdString();
        if (!mustExist && !std::filesystem::exists(p)) return u;
        reader_ = std::make_unique<RunLogReader>(RunLogReader::open(p));
        u.opened = true;
    } else {
        reader_->refresh();
    }
    for (const std::string& name : reader_->seriesNames()) {
        const QString qn = QString::fromStdString(name);
        const int64_t n = reader_->rowCount(name);
        int64_t& seen = rows_[qn];
        if (n < seen) seen = 0;   // a replaced file with fewer rows: read it again
        if (n == seen) continue;
        const MetricSeries s = reader_->series(name, seen);
        QVector<QPointF>& pts = u.points[qn];
        pts.reserve(int(s.size()));
        for (size_t i = 0; i < s.size(); ++i) pts.push_back(QPointF(double(s.steps[i]), s.values[i]));
        seen = n;
    }
    const QString st = status();
    if (st != lastStatus_) {
        u.statusChanged = true;
        lastStatus_ = st;
    }
    return u;
}

QString RunFollower::status() const {
    return reader_ ? QString::fromStdString(statusName(reader_->status())) : QStringLiteral("waiting");
}

QString RunFollower::statusMessage() const {
    return reader_ ? QString::fromStdString(reader_->statusMessage()) : QString();
}

QString RunFollower::configText() const {
    return reader_ ? QString::fromStdString(reader_->config().dump(2)) : QString();
}

std::string RunFollower::dataSpec() const {
    if (!reader_) return {};
    const auto& c = reader_->config();
    for (const char* key : {"data", "data_spec", "dataset"}) {
        auto it = c.find(key);
        if (it != c.end() && it->is_string()) return it->get<std::string>();
    }
    return {};
}

} // namespace glimpse::app
