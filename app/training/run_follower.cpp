#include "app/training/run_follower.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/runlog.h"

namespace glimpse::app {

RunFollower::RunFollower(QString path) : path_(std::move(path)) {}
RunFollower::~RunFollower() = default;

bool RunFollower::open(bool mustExist) {
    if (reader_) return false;
    const std::string p = path_.toStdString();
    if (!mustExist && !std::filesystem::exists(p)) return false;
    reader_ = std::make_unique<RunLogReader>(RunLogReader::open(p));
    return true;
}

QStringList RunFollower::seriesNames() const {
    QStringList out;
    if (reader_)
        for (const std::string& n : reader_->seriesNames()) out << QString::fromStdString(n);
    return out;
}

int64_t RunFollower::pendingRows(const QString& series) const {
    if (!reader_) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    return std::max<int64_t>(0, reader_->rowCount(series.toStdString()) - rows_.value(series, 0));
}

int64_t RunFollower::pendingRows() const {
    int64_t n = 0;
    for (const QString& s : seriesNames()) n += pendingRows(s);
    return n;
}

RunFollower::Rows RunFollower::readSeries(const QString& qn, int64_t maxRows) {
    Rows rows;
    if (!reader_) return rows;
    const std::string name = qn.toStdString();
    int64_t n = reader_->rowCount(name), seen = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);   // workers read different series at once
        seen = rows_.value(qn, 0);
        if (progressSeries_.isEmpty()) {
            const auto names = reader_->seriesNames();
            const bool hasTotal = std::find(names.begin(), names.end(), "loss/total") != names.end();
            progressSeries_ = hasTotal ? QStringLiteral("loss/total") : QString::fromStdString(names.front());
        }
    }
    if (maxRows >= 0) n = std::min(n, seen + maxRows);
    if (n <= seen) return rows;
    SeriesColumns s = reader_->columns(name, seen, n);
    std::lock_guard<std::mutex> lock(mutex_);
    if (qn == progressSeries_) {
        if (seen == 0) recent_.clear();
        for (size_t i = s.size() > 50 ? s.size() - 50 : 0; i < s.size(); ++i) {
            recent_.push_back({int64_t(s.steps[i]), s.wallTimes[i]});
            if (recent_.size() > 50) recent_.pop_front();
        }
    }
    if (qn.startsWith(QStringLiteral("dist/throughput_rank")) && s.size() > 0) {
        bool ok = false;
        const int rank = qn.mid(int(std::char_traits<char>::length("dist/throughput_rank"))).toInt(&ok);
        if (ok && rank >= 0 && rank < 65536) {
            if (rankThroughput_.size() <= rank) rankThroughput_.resize(rank + 1);
            rankThroughput_[rank] = s.values.back();
        }
    }
    rows.steps = std::move(s.steps);   // moved on to the charts, not copied (a long run's rows)
    rows.wallTimes = std::move(s.wallTimes);
    rows.values = std::move(s.values);
    rows_[qn] = n;
    return rows;
}

RunFollower::Update RunFollower::poll(bool mustExist) {
    Update u;
    if (!reader_) {
        if (!open(mustExist)) return u;
        u.opened = true;
    } else {
        reader_->refresh();
    }
    for (const std::string& name : reader_->seriesNames())
        if (reader_->rowCount(name) < rows_.value(QString::fromStdString(name), 0)) u.reset = true;
    if (u.reset) {   // a replaced file with fewer rows: read every series again
        rows_.clear();
        recent_.clear();
        rankThroughput_.clear();
    }
    for (const QString& qn : seriesNames()) {
        Rows r = readSeries(qn);
        if (r.size() > 0) u.rows[qn] = std::move(r);
    }
    const RunLiveness live = reader_->liveness();
    dead_ = live.state == Liveness::Dead;
    deadText_ = dead_ ? QString::fromStdString(live.description) : QString();
    const QString st = status();
    if (st != lastStatus_) {
        u.statusChanged = true;
        lastStatus_ = st;
    }
    return u;
}

int RunFollower::worldSize() const {
    if (!reader_) return 1;
    const auto& c = reader_->config();
    auto it = c.find("world_size");
    return it != c.end() && it->is_number_integer() && it->get<int64_t>() > 1 ? int(std::min<int64_t>(it->get<int64_t>(), 65536))
                                                                                : 1;
}

QString RunFollower::throughputUnit() const {
    if (reader_) {
        const auto& c = reader_->config();
        auto it = c.find("throughput_unit");
        if (it != c.end() && it->is_string() && !it->get<std::string>().empty() && it->get<std::string>().size() < 40)
            return QString::fromStdString(it->get<std::string>());
    }
    return QStringLiteral("img/s");
}

RunFollower::Progress RunFollower::progress() const {
    Progress p;
    if (!reader_) return p;
    const auto& c = reader_->config();
    // "total_steps" (LETR, CoaT, ConstellationNet, XTRA pretraining); EfficientZero and XTRA
    // finetuning logs record their config's "steps" only.
    for (const char* key : {"total_steps", "steps"}) {
        auto it = c.find(key);
        if (it == c.end() || !it->is_number_integer()) continue;
        p.total = it->get<int64_t>();
        break;
    }
    if (recent_.empty()) return p;
    p.step = recent_.back().first;
    if (reader_->status() != RunStatus::Running || dead_) {
        p.eta = 0;
    } else if (p.total >= 0 && recent_.size() >= 2) {
        const auto& a = recent_.front();
        const auto& b = recent_.back();
        if (b.first > a.first && b.second >= a.second)
            p.eta = double(std::max<int64_t>(0, p.total - p.step)) * (b.second - a.second) / double(b.first - a.first);
    }
    return p;
}

QString RunFollower::status() const {
    if (!reader_) return QStringLiteral("waiting");
    if (dead_ && reader_->status() == RunStatus::Running) return QStringLiteral("dead");
    return QString::fromStdString(statusName(reader_->status()));
}

QString RunFollower::statusMessage() const {
    if (!reader_) return {};
    if (dead_ && reader_->status() == RunStatus::Running) return deadText_;
    return QString::fromStdString(reader_->statusMessage());
}

QString RunFollower::configText() const {
    return reader_ ? QString::fromStdString(reader_->config().dump(2)) : QString();
}

QString RunFollower::family() const {
    if (!reader_) return {};
    const auto& c = reader_->config();
    for (const char* key : {"trainer", "family"}) {
        auto it = c.find(key);
        if (it != c.end() && it->is_string()) return QString::fromStdString(it->get<std::string>());
    }
    return {};
}

double RunFollower::startTime() const { return reader_ ? reader_->startTime() : 0.0; }

QMap<QString, QString> RunFollower::gameCategories() const {
    QMap<QString, QString> out;
    if (!reader_) return out;
    const auto& c = reader_->config();
    auto it = c.find("game_categories");
    if (it == c.end() || !it->is_object()) return out;
    for (auto g = it->begin(); g != it->end(); ++g)
        if (g.value().is_string()) out.insert(QString::fromStdString(g.key()), QString::fromStdString(g.value().get<std::string>()));
    return out;
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
