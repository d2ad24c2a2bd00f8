#include "core/runlog.h"
#include "core/util/prefault.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/h5/walk.h"
#include "core/io/atomic_file.h"

namespace glimpse {

namespace {

constexpr const char* kKind = "glimpse.runlog";
constexpr hsize_t kChunkRows = 1024;

struct Row {
    int64_t step;
    double wall_time;
    double value;
};

h5::Id rowMemType() {
    h5::Id t(H5Tcreate(H5T_COMPOUND, sizeof(Row)), H5Tclose);
    H5Tinsert(t.get(), "step", offsetof(Row, step), H5T_NATIVE_INT64);
    H5Tinsert(t.get(), "wall_time", offsetof(Row, wall_time), H5T_NATIVE_DOUBLE);
    H5Tinsert(t.get(), "value", offsetof(Row, value), H5T_NATIVE_DOUBLE);
    return t;
}

h5::Id rowFileType() {
    h5::Id t(H5Tcreate(H5T_COMPOUND, 24), H5Tclose);
    H5Tinsert(t.get(), "step", 0, H5T_STD_I64LE);
    H5Tinsert(t.get(), "wall_time", 8, H5T_IEEE_F64LE);
    H5Tinsert(t.get(), "value", 16, H5T_IEEE_F64LE);
    return t;
}

RunStatus parseStatus(const std::string& s, const std::string& path) {
    if (s == "running") return RunStatus::Running;
    if (s == "finished") return RunStatus::Finished;
    if (s == "failed") return RunStatus::Failed;
    if (s == "stopped") return RunStatus::Stopped;
    throw Error(path + ": unknown run status '" + s + "' (expected running, finished, failed or stopped)");
}

void checkSeriesNames(const std::vector<std::string>& names, const std::string& path) {
    std::set<std::string> seen;
    for (const auto& n : names) {
        if (!h5::isValidRelativePath(n))
            throw Error(path + ": invalid series name '" + n + "' (non-empty parts separated by '/')");
        if (!seen.insert(n).second) throw Error(path + ": series '" + n + "' is declared twice");
    }
    for (const auto& a : names)
        for (const auto& b : names)
            if (b.size() > a.size() && b.compare(0, a.size() + 1, a + "/") == 0)
                throw Error(path + ": series names '" + a + "' and '" + b +
                            "' clash (a name cannot be the group of another)");
}

void writeHeartbeat(h5::Dataset& ds, double t) {
    ds.check(H5Dwrite(ds.id(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &t), "cannot write the heartbeat");
}

// Writes the root attributes, the heartbeat and the (empty) series datasets shared by live and
// final files.
void writeSkeleton(h5::File& f, const RunLog& log) {
    f.setAttr("status", statusName(log.status));
    f.setAttr("status_message", log.statusMessage);
    f.setAttr("config", log.config.dump());
    f.setAttr("start_time", log.startTime);
    f.setAttr("writer_host", log.writer.host);
    f.setAttr("writer_pid", log.writer.pid);
    f.setAttr("heartbeat_interval", log.writer.heartbeatInterval);
    // One chunked element, so that a SWMR writer may overwrite it and readers refresh it.
    h5::Dataset hb = f.createDataset("heartbeat", H5T_IEEE_F64LE, {1}, {1}, {1});
    writeHeartbeat(hb, log.writer.heartbeat);
    h5::Group series = f.createGroup("series");
    h5::Id type = rowFileType();
    for (const auto& kv : log.series)
        series.createDataset(kv.first, type.get(), {0}, {-1}, {int64_t(kChunkRows)});
}

// Appends rows at the end of a 1-D series dataset.
void appendRows(h5::Dataset& ds, const std::vector<Row>& rows) {
    if (rows.empty()) return;
    const hsize_t n0 = hsize_t(ds.shape().at(0)), k = rows.size(), n = n0 + k;
    ds.check(H5Dset_extent(ds.id(), &n), "cannot extend the series");
    h5::Id fileSpace(H5Dget_space(ds.id()), H5Sclose);
    ds.check(H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, &n0, nullptr, &k, nullptr), "cannot select rows");
    h5::Id memSpace(H5Screate_simple(1, &k, nullptr), H5Sclose);
    h5::Id mem = rowMemType();
    ds.check(H5Dwrite(ds.id(), mem.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, rows.data()),
             "cannot write rows");
}

MetricSeries readRows(const h5::Dataset& ds, int64_t first) {
    const auto shape = ds.shape();
    if (shape.size() != 1) ds.fail("a series must be 1-D, file has " + h5::shapeString(shape));
    MetricSeries s;
    const int64_t n = shape[0];
    first = std::clamp<int64_t>(first, 0, n);
    if (first == n) return s;
    const hsize_t start = hsize_t(first), count = hsize_t(n - first);
    std::vector<Row> rows(count);
    h5::Id fileSpace(H5Dget_space(ds.id()), H5Sclose);
    H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    h5::Id memSpace(H5Screate_simple(1, &count, nullptr), H5Sclose);
    h5::Id mem = rowMemType();
    ds.check(H5Dread(ds.id(), mem.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, rows.data()),
             "cannot read the series (expected rows of {step int64, wall_time float64, value float64})");
    s.steps.reserve(rows.size());
    s.wallTimes.reserve(rows.size());
    s.values.reserve(rows.size());
    for (const auto& r : rows) s.append(r.step, r.wall_time, r.value);
    return s;
}

// Rows [first, n) as three columns: whole rows (the file's own layout, so HDF5 converts nothing)
// read in blocks of kReadRows into one buffer and split. One pass over the chunks; reading each
// member on its own (a one-member compound memory type) went over every chunk three times and
// converted each field, about twice the time for a million rows.
constexpr hsize_t kReadRows = 16384;

void readColumns(const h5::Dataset& ds, int64_t first, int64_t n, SeriesColumns& c) {
    const size_t total = size_t(std::max<int64_t>(0, n - first));
    // A quarter more room: a followed run grows, and a chart that takes these vectors over then
    // appends its next rows without copying (and faulting in) a long series at once.
    const size_t room = c.steps.size() + total + total / 4;
    c.steps.reserve(room);
    c.wallTimes.reserve(room);
    c.values.reserve(room);
    if (total == 0) return;
    // Fresh memory for the rows written below: faulted in at once, not page by page.
    prefaultAppend(c.steps, total);
    prefaultAppend(c.wallTimes, total);
    prefaultAppend(c.values, total);
    std::vector<Row> buf(size_t(std::min<hsize_t>(kReadRows, hsize_t(total))));
    h5::Id fileSpace(H5Dget_space(ds.id()), H5Sclose);
    h5::Id mem = rowMemType();
    for (int64_t at = first; at < n;) {
        const hsize_t start = hsize_t(at), count = std::min<hsize_t>(buf.size(), hsize_t(n - at));
        H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
        h5::Id memSpace(H5Screate_simple(1, &count, nullptr), H5Sclose);
        ds.check(H5Dread(ds.id(), mem.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, buf.data()),
                 "cannot read the series (expected rows of {step int64, wall_time float64, value float64})");
        for (hsize_t i = 0; i < count; ++i) {
            c.steps.push_back(double(buf[i].step));
            c.wallTimes.push_back(buf[i].wall_time);
            c.values.push_back(buf[i].value);
        }
        at += int64_t(count);
    }
}

void collectDatasets(const h5::Group& g, const std::string& prefix, std::vector<std::string>& out,
                     h5::WalkGuard& walk) {
    const h5::WalkGuard::Scope in(walk, g);
    for (const auto& c : g.children()) {
        if (g.hasGroup(c)) collectDatasets(g.group(c), prefix + c + "/", out, walk);
        else if (g.hasDataset(c)) out.push_back(prefix + c);
    }
}

// Root attributes of a run log file, checked.
struct RootInfo {
    nlohmann::json config;
    RunStatus status = RunStatus::Running;
    std::string message;
    double startTime = 0;
    RunWriterInfo writer;
};

// The heartbeat of a file that has one (0 when it cannot be read).
double readHeartbeat(const h5::Dataset& ds) {
    double t = 0;
    if (ds.shape() != std::vector<int64_t>{1}) return 0;
    if (H5Dread(ds.id(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &t) < 0) return 0;
    return std::isfinite(t) ? t : 0;
}
RootInfo readRoot(const h5::File& f) {
    RootInfo r;
    r.status = parseStatus(f.attrString("status"), f.fileName());
    r.message = f.hasAttr("status_message") ? f.attrString("status_message") : "";
    r.startTime = f.hasAttr("start_time") ? f.attrDouble("start_time") : 0.0;
    // Writer identity and heartbeat: absent in logs written before heartbeats existed.
    if (f.hasAttr("writer_host")) r.writer.host = f.attrString("writer_host");
    if (f.hasAttr("writer_pid")) r.writer.pid = f.attrInt("writer_pid");
    if (f.hasAttr("heartbeat_interval")) r.writer.heartbeatInterval = f.attrDouble("heartbeat_interval");
    if (f.hasDataset("heartbeat")) r.writer.heartbeat = readHeartbeat(f.dataset("heartbeat"));
    try {
        r.config = nlohmann::json::parse(f.attrString("config"));
    } catch (const nlohmann::json::exception& e) {
        throw Error(f.fileName() + ": the 'config' attribute is not valid JSON: " + e.what());
    }
    return r;
}

// Opens a run log for following: SWMR-read first (a live file), plain read-only otherwise.
h5::File openRunLog(const std::string& path) {
    try {
        return h5::openGlimpse(path, kKind, RunLog::kFormatVersion, h5::File::Mode::SwmrRead);
    } catch (const Error&) {
        return h5::openGlimpse(path, kKind, RunLog::kFormatVersion, h5::File::Mode::Read);
    }
}

double unixNow() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool pidExists(int64_t pid) {
    if (pid <= 0 || pid > INT_MAX) return false;
    return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

std::string utcTime(double t) {
    // A heartbeat read from a damaged file may be anything: only years 1970..9999 are dates
    // (a larger value does not fit time_t; fuzz finding, docs/fuzzing.md).
    if (!(t >= 0 && t < 253402300800.0)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "an invalid time (%g)", t);
        return buf;
    }
    const std::time_t s = std::time_t(t);
    std::tm tm{};
    gmtime_r(&s, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

std::string agoText(double seconds) {
    char buf[64];
    if (seconds < 120) std::snprintf(buf, sizeof buf, "%.0f s ago", seconds);
    else if (seconds < 7200) std::snprintf(buf, sizeof buf, "%.0f min ago", seconds / 60);
    else std::snprintf(buf, sizeof buf, "%.1f h ago", seconds / 3600);
    return buf;
}

} // namespace

std::string livenessName(Liveness l) {
    switch (l) {
    case Liveness::Ended: return "ended";
    case Liveness::Alive: return "alive";
    case Liveness::Dead: return "dead";
    case Liveness::Unknown: return "unknown";
    }
    return "unknown";
}

std::string localHostName() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return {};
    return buf;
}

double unixTimeNow() { return unixNow(); }

RunLiveness judgeLiveness(RunStatus status, const RunWriterInfo& w, double now, const std::string& host) {
    RunLiveness r;
    r.lastSeen = w.heartbeat;
    r.silentFor = w.heartbeat > 0 ? std::max(0.0, now - w.heartbeat) : 0.0;
    const std::string who = w.pid > 0 ? "pid " + std::to_string(w.pid) + " on " + (w.host.empty() ? "?" : w.host) : "";
    if (status != RunStatus::Running) {
        r.state = Liveness::Ended;
        r.description = "ended (" + statusName(status) + ")";
        return r;
    }
    r.processGone = !host.empty() && host == w.host && w.pid > 0 && !pidExists(w.pid);
    if (w.heartbeatInterval <= 0 || w.heartbeat <= 0) {
        r.state = r.processGone ? Liveness::Dead : Liveness::Unknown;
        r.description = r.processGone ? "the writing process (" + who + ") is gone - resume with --resume"
                                      : "running (no heartbeat recorded: written by an older Glimpse)";
        return r;
    }
    const double deadAfter = kDeadAfterIntervals * w.heartbeatInterval;
    if (r.processGone || r.silentFor > deadAfter) {
        r.state = Liveness::Dead;
        r.description = "stopped responding at " + utcTime(w.heartbeat) + " (" + agoText(r.silentFor) + "); " +
                        (r.processGone ? "the process is gone (" + who + ")"
                                       : "no heartbeat for more than " + std::to_string(int64_t(std::ceil(deadAfter))) +
                                             " s (" + who + "): the process is gone or hung") +
                        " - resume with --resume";
        return r;
    }
    r.state = Liveness::Alive;
    r.description = "alive (heartbeat " + agoText(r.silentFor) + ", " + who + ")";
    return r;
}

std::string statusName(RunStatus s) {
    switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Finished: return "finished";
    case RunStatus::Failed: return "failed";
    case RunStatus::Stopped: return "stopped";
    }
    return "unknown";
}

void MetricSeries::append(int64_t step, double wallTime, double value) {
    steps.push_back(step);
    wallTimes.push_back(wallTime);
    values.push_back(value);
}

// ---- RunLog ------------------------------------------------------------------------------

void RunLog::save(const std::string& path) const {
    std::vector<std::string> names;
    for (const auto& kv : series) names.push_back(kv.first);
    checkSeriesNames(names, path);
    h5::File::CreateOptions opts;
    opts.latestFormat = true;   // so that readers may open it in SWMR mode like a live file
    h5::writeAtomically(path, kKind, kFormatVersion, [&](h5::File& f) {
        writeSkeleton(f, *this);
        h5::Group g = f.group("series");
        for (const auto& [name, s] : series) {
            std::vector<Row> rows(s.size());
            for (size_t i = 0; i < rows.size(); ++i) rows[i] = {s.steps[i], s.wallTimes[i], s.values[i]};
            h5::Dataset ds = g.dataset(name);
            appendRows(ds, rows);
        }
        if (!eval.empty()) {
            h5::Group e = f.createGroup("eval");
            for (const auto& [name, t] : eval) {
                if (!h5::isValidRelativePath(name)) throw Error(path + ": invalid eval name '" + name + "'");
                e.writeTensor(name, t);
            }
        }
    }, opts);
}

RunLog RunLog::load(const std::string& path) {
    return RunLogReader::open(path).snapshot();
}

// ---- RunLogWriter ------------------------------------------------------------------------

struct RunLogWriter::Impl {
    std::string path;
    Options opts;
    RunLog log;   // everything written so far: the final file is saved from it
    std::unique_ptr<h5::File> file;
    std::map<std::string, h5::Dataset> datasets;
    std::map<std::string, std::vector<Row>> pending;
    std::chrono::steady_clock::time_point start, lastFlush;
    bool closed = false;

    // Heartbeat: a thread overwrites /heartbeat every opts.heartbeatInterval seconds. `mutex`
    // guards the live file between it and the owner's flush()/close().
    std::mutex mutex;
    std::condition_variable wake;
    bool stopHeartbeat = false;
    std::optional<h5::Dataset> heartbeat;
    std::thread heartbeatThread;

    void beat() {
        std::lock_guard<std::mutex> lock(mutex);
        if (!file || !heartbeat) return;
        try {
            const double t = unixNow();
            writeHeartbeat(*heartbeat, t);
            heartbeat->check(H5Dflush(heartbeat->id()), "cannot flush the heartbeat");
            log.writer.heartbeat = t;
        } catch (...) {
            // A full disk or a vanished file: readers then see the heartbeat stop.
        }
    }
    std::chrono::steady_clock::time_point lastBeat = std::chrono::steady_clock::now();
    void startHeartbeat() {
#ifndef H5_HAVE_THREADSAFE
        // HDF5 without its global lock must not be called from two threads: beat from
        // append() instead (then long steps or evaluations go without heartbeat).
        return;
#endif
        heartbeatThread = std::thread([this] {
            const auto interval = std::chrono::duration<double>(opts.heartbeatInterval);
            std::unique_lock<std::mutex> lock(mutex);
            while (!stopHeartbeat) {
                if (wake.wait_for(lock, interval, [this] { return stopHeartbeat; })) break;
                lock.unlock();
                beat();
                lock.lock();
            }
        });
    }
    void endHeartbeat() {
        {
            std::lock_guard<std::mutex> lock(mutex);
            stopHeartbeat = true;
        }
        wake.notify_all();
        if (heartbeatThread.joinable()) heartbeatThread.join();
    }
    ~Impl() { endHeartbeat(); }
};

RunLogWriter::RunLogWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunLogWriter::RunLogWriter(RunLogWriter&&) noexcept = default;
RunLogWriter& RunLogWriter::operator=(RunLogWriter&& o) noexcept {
    if (this != &o) {
        if (impl_ && !impl_->closed) {
            try {
                close(RunStatus::Failed, "the run ended without finish()");
            } catch (...) {
            }
        }
        impl_ = std::move(o.impl_);
    }
    return *this;
}

RunLogWriter::~RunLogWriter() {
    if (impl_ && !impl_->closed) {
        try {
            close(RunStatus::Failed, "the run ended without finish()");
        } catch (...) {
        }
    }
}

RunLogWriter RunLogWriter::create(const std::string& path, const nlohmann::json& config,
                                  const std::vector<std::string>& seriesNames, Options opts) {
    checkSeriesNames(seriesNames, path);
    if (!(opts.heartbeatInterval > 0) || !std::isfinite(opts.heartbeatInterval))
        throw Error(path + ": the heartbeat interval must be a positive number of seconds");
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->opts = opts;
    impl->log.config = config;
    impl->log.startTime = unixNow();
    impl->log.writer = {localHostName(), int64_t(::getpid()), opts.heartbeatInterval, impl->log.startTime};
    for (const auto& n : seriesNames) impl->log.series[n];
    impl->start = impl->lastFlush = std::chrono::steady_clock::now();

    h5::File::CreateOptions copts;
    copts.latestFormat = true;
    // The live file is built under a temp name, switched to SWMR writing and renamed into
    // place while open: a reader never sees a half-built file.
    writeFileAtomically(path, [&](const std::string& tmp) {
        auto f = std::make_unique<h5::File>(h5::File::create(tmp, copts, path));
        h5::writeHeader(*f, kKind, RunLog::kFormatVersion);
        writeSkeleton(*f, impl->log);
        h5::Group g = f->group("series");
        for (const auto& n : seriesNames) impl->datasets.emplace(n, g.dataset(n));
        impl->heartbeat.emplace(f->dataset("heartbeat"));
        f->check(H5Fstart_swmr_write(f->fileId()), "cannot start SWMR writing");
        impl->file = std::move(f);
    });
    impl->startHeartbeat();
    return RunLogWriter(std::move(impl));
}

RunLogWriter RunLogWriter::memoryOnly(const nlohmann::json& config, const std::vector<std::string>& seriesNames) {
    checkSeriesNames(seriesNames, "run log");
    auto impl = std::make_unique<Impl>();
    impl->log.config = config;
    impl->log.startTime = unixNow();
    impl->log.writer = {localHostName(), int64_t(::getpid()), impl->opts.heartbeatInterval, impl->log.startTime};
    for (const auto& n : seriesNames) impl->log.series[n];
    impl->start = impl->lastFlush = std::chrono::steady_clock::now();
    return RunLogWriter(std::move(impl));
}

const std::string& RunLogWriter::path() const { return impl_->path; }

double RunLogWriter::elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
}

bool RunLogWriter::closed() const { return !impl_ || impl_->closed; }

void RunLogWriter::append(const std::string& series, int64_t step, double value) {
    append(series, step, value, elapsed());
}

void RunLogWriter::append(const std::string& series, int64_t step, double value, double wallTime) {
    if (closed()) throw Error(impl_ ? impl_->path + ": run log is closed" : "run log writer was moved from");
    auto it = impl_->log.series.find(series);
    if (it == impl_->log.series.end()) {
        std::string declared;
        for (const auto& kv : impl_->log.series) declared += (declared.empty() ? "" : ", ") + kv.first;
        throw Error(impl_->path + ": series '" + series + "' was not declared when the run log was created (declared: " +
                    (declared.empty() ? "none" : declared) + ")");
    }
    it->second.append(step, wallTime, value);
    impl_->pending[series].push_back({step, wallTime, value});
    if (!impl_->heartbeatThread.joinable() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->lastBeat).count() >=
            impl_->opts.heartbeatInterval) {
        impl_->lastBeat = std::chrono::steady_clock::now();
        impl_->beat();
    }
    const double sinceFlush =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->lastFlush).count();
    if (sinceFlush >= impl_->opts.flushInterval) flush();
}

void RunLogWriter::flush() {
    if (closed()) return;
    if (!impl_->file) {   // memoryOnly()
        impl_->pending.clear();
        return;
    }
    std::lock_guard<std::mutex> lock(impl_->mutex);
    h5::silenceErrors();
    for (auto& [name, rows] : impl_->pending) {
        if (rows.empty()) continue;
        h5::Dataset& ds = impl_->datasets.at(name);
        appendRows(ds, rows);
        ds.check(H5Dflush(ds.id()), "cannot flush the series");
        rows.clear();
    }
    impl_->lastFlush = std::chrono::steady_clock::now();
}

void RunLogWriter::setEval(const std::string& name, const torch::Tensor& t) {
    if (closed()) throw Error(impl_ ? impl_->path + ": run log is closed" : "run log writer was moved from");
    if (!h5::isValidRelativePath(name)) throw Error(impl_->path + ": invalid eval name '" + name + "'");
    if (!t.defined()) throw Error(impl_->path + ": eval result '" + name + "' is undefined");
    impl_->log.eval[name] = t.detach().to(torch::kCPU).contiguous().clone();
}

void RunLogWriter::finish() { close(RunStatus::Finished, ""); }
void RunLogWriter::fail(const std::string& message) { close(RunStatus::Failed, message); }
void RunLogWriter::stop(const std::string& message) { close(RunStatus::Stopped, message); }

void RunLogWriter::close(RunStatus status, const std::string& message) {
    if (closed()) throw Error(impl_ ? impl_->path + ": run log is already closed" : "run log writer was moved from");
    impl_->closed = true;   // whatever happens below, the live file is done
    impl_->endHeartbeat();
    if (!impl_->file) {   // memoryOnly(): nothing on disk
        impl_->pending.clear();
        impl_->log.status = status;
        impl_->log.statusMessage = message;
        return;
    }
    std::exception_ptr error;
    try {
        for (auto& [name, rows] : impl_->pending) {
            if (rows.empty()) continue;
            appendRows(impl_->datasets.at(name), rows);
            rows.clear();
        }
    } catch (...) {
        error = std::current_exception();
    }
    impl_->datasets.clear();
    impl_->heartbeat.reset();
    try {
        impl_->file->close();
    } catch (...) {
        if (!error) error = std::current_exception();
    }
    impl_->file.reset();
    impl_->log.status = status;
    impl_->log.statusMessage = message;
    impl_->log.writer.heartbeat = unixNow();   // the last sign of life: the end
    // The final file replaces the live one even if the live one could not be completed: it is
    // written from memory.
    impl_->log.save(impl_->path);
    if (error) std::rethrow_exception(error);
}

// ---- RunLogReader ------------------------------------------------------------------------

struct RunLogReader::Impl {
    std::string path;
    std::unique_ptr<h5::File> file;
    dev_t dev = 0;
    ino_t ino = 0;
    std::map<std::string, h5::Dataset> series;
    std::optional<h5::Dataset> heartbeat;
    std::map<std::string, int64_t> rows;
    RootInfo root;
    std::vector<std::string> evalNames;

    void open() {
        struct stat st {};
        const bool statted = ::stat(path.c_str(), &st) == 0;
        auto f = std::make_unique<h5::File>(openRunLog(path));
        RootInfo r = readRoot(*f);
        std::map<std::string, h5::Dataset> s;
        std::map<std::string, int64_t> n;
        if (!f->hasGroup("series")) throw Error(path + ": run log has no /series group");
        std::vector<std::string> names;
        h5::Group g = f->group("series");
        {
            h5::WalkGuard walk;
            collectDatasets(g, "", names, walk);
        }
        for (const auto& name : names) {
            h5::Dataset ds = g.dataset(name);
            n[name] = ds.shape().at(0);
            s.emplace(name, std::move(ds));
        }
        std::vector<std::string> evals;
        if (f->hasGroup("eval")) {
            h5::WalkGuard walk;
            collectDatasets(f->group("eval"), "", evals, walk);
        }
        std::optional<h5::Dataset> hb;
        if (f->hasDataset("heartbeat")) hb.emplace(f->dataset("heartbeat"));
        series.clear();
        heartbeat.reset();
        heartbeat = std::move(hb);
        file = std::move(f);
        series = std::move(s);
        rows = std::move(n);
        root = std::move(r);
        evalNames = std::move(evals);
        dev = statted ? st.st_dev : 0;
        ino = statted ? st.st_ino : 0;
    }
};

RunLogReader::RunLogReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunLogReader::RunLogReader(RunLogReader&&) noexcept = default;
RunLogReader& RunLogReader::operator=(RunLogReader&&) noexcept = default;
RunLogReader::~RunLogReader() = default;

RunLogReader RunLogReader::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->open();
    return RunLogReader(std::move(impl));
}

bool RunLogReader::refresh() {
    h5::silenceErrors();
    struct stat st {};
    if (::stat(impl_->path.c_str(), &st) == 0 && (st.st_ino != impl_->ino || st.st_dev != impl_->dev)) {
        impl_->open();   // the writer finished and replaced the live file
        return true;
    }
    if (impl_->root.status != RunStatus::Running) return false;
    if (impl_->heartbeat && H5Drefresh(impl_->heartbeat->id()) >= 0)
        impl_->root.writer.heartbeat = std::max(impl_->root.writer.heartbeat, readHeartbeat(*impl_->heartbeat));
    bool changed = false;
    for (auto& [name, ds] : impl_->series) {
        ds.check(H5Drefresh(ds.id()), "cannot refresh the series");
        const int64_t n = ds.shape().at(0);
        changed = changed || n != impl_->rows[name];
        impl_->rows[name] = n;
    }
    return changed;
}

const std::string& RunLogReader::path() const { return impl_->path; }

std::vector<std::string> RunLogReader::seriesNames() const {
    std::vector<std::string> out;
    for (const auto& kv : impl_->series) out.push_back(kv.first);
    return out;
}

int64_t RunLogReader::rowCount(const std::string& series) const {
    auto it = impl_->rows.find(series);
    if (it == impl_->rows.end()) throw Error(impl_->path + ": run log has no series '" + series + "'");
    return it->second;
}

MetricSeries RunLogReader::series(const std::string& series, int64_t firstRow) const {
    auto it = impl_->series.find(series);
    if (it == impl_->series.end()) throw Error(impl_->path + ": run log has no series '" + series + "'");
    MetricSeries s = readRows(it->second, firstRow);
    // Rows appended after the last refresh() may already be visible; report a stable view.
    const size_t keep = size_t(std::max<int64_t>(0, impl_->rows.at(series) - std::max<int64_t>(0, firstRow)));
    if (s.size() > keep) {
        s.steps.resize(keep);
        s.wallTimes.resize(keep);
        s.values.resize(keep);
    }
    return s;
}

SeriesColumns RunLogReader::columns(const std::string& series, int64_t firstRow, int64_t endRow) const {
    auto it = impl_->series.find(series);
    if (it == impl_->series.end()) throw Error(impl_->path + ": run log has no series '" + series + "'");
    const h5::Dataset& ds = it->second;
    const auto shape = ds.shape();
    if (shape.size() != 1) ds.fail("a series must be 1-D, file has " + h5::shapeString(shape));
    // A stable view: the rows as of the last refresh(), even if more are visible already.
    int64_t n = std::min<int64_t>(shape[0], impl_->rows.at(series));
    if (endRow >= 0) n = std::min(n, endRow);
    const int64_t first = std::clamp<int64_t>(firstRow, 0, std::max<int64_t>(0, n));
    SeriesColumns c;
    if (first >= n) return c;
    readColumns(ds, first, n, c);
    return c;
}

const nlohmann::json& RunLogReader::config() const { return impl_->root.config; }
const RunWriterInfo& RunLogReader::writer() const { return impl_->root.writer; }

RunLiveness RunLogReader::liveness(double now) const {
    return judgeLiveness(impl_->root.status, impl_->root.writer, now < 0 ? unixNow() : now, localHostName());
}
RunStatus RunLogReader::status() const { return impl_->root.status; }
const std::string& RunLogReader::statusMessage() const { return impl_->root.message; }
double RunLogReader::startTime() const { return impl_->root.startTime; }
std::vector<std::string> RunLogReader::evalNames() const { return impl_->evalNames; }

torch::Tensor RunLogReader::eval(const std::string& name) const {
    if (!impl_->file->hasGroup("eval")) throw Error(impl_->path + ": run log has no eval result '" + name + "'");
    h5::Group e = impl_->file->group("eval");
    if (!e.hasDataset(name)) throw Error(impl_->path + ": run log has no eval result '" + name + "'");
    return e.dataset(name).read();
}

RunLog RunLogReader::snapshot() const {
    RunLog log;
    log.config = impl_->root.config;
    log.status = impl_->root.status;
    log.statusMessage = impl_->root.message;
    log.startTime = impl_->root.startTime;
    log.writer = impl_->root.writer;
    for (const auto& kv : impl_->series) log.series[kv.first] = series(kv.first);
    for (const auto& n : impl_->evalNames) log.eval[n] = eval(n);
    return log;
}

} // namespace glimpse
