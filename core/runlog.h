#pragma once
// RunLog: the training log (docs/architecture.md; layout in docs/formats.md "Run log"): metric series, config, eval results
// and a status, in one HDF5 file that the GUI can follow while a trainer (possibly another
// process on another machine) is still writing it. Layout in docs/formats.md.
//
// Live files use HDF5 SWMR (single writer, multiple readers). SWMR forbids creating objects or
// attributes once writing has started, so:
//   * every metric series is declared when the writer is created (RunLogWriter::create(path,
//     config, seriesNames)); appending to an undeclared series throws. Each series is one
//     chunked, unlimited 1-D dataset /series/<name> of rows {step int64, wall_time float64,
//     value float64}; appends extend it and flush, readers refresh it;
//   * the live file says status = "running" and has no /eval group;
//   * finish() / fail() / stop() close the live file and atomically replace it (rename) with the
//     final file: the same series plus /eval and status = "finished" / "failed" / "stopped". A RunLogReader
//     notices the replacement in refresh() (the path names a new inode) and reopens.
// A writer that crashes leaves a readable file whose status stays "running"; the heartbeat tells
// readers it is dead (liveness()).
//
// Heartbeat: the writer records its host name and pid (root attributes writer_host, writer_pid,
// heartbeat_interval) and a background thread overwrites the scalar-like dataset /heartbeat
// (Unix time) every heartbeatInterval seconds, also during long steps and evaluations. A
// reader calls a run whose status is "running" dead when its process is gone (same host, pid
// no longer exists) or when the heartbeat is older than kDeadAfterIntervals intervals.
// Logs written before heartbeats existed have none: liveness() says Unknown.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace glimpse {

// Stopped: ended on request (pause/stop/Ctrl-C) with a checkpoint to resume from, not an error.
enum class RunStatus { Running, Finished, Failed, Stopped };
std::string statusName(RunStatus s);               // "running", "finished", "failed", "stopped"

// Whether the writer of a log whose status is "running" is still there.
enum class Liveness {
    Ended,     // status is not "running": the run ended (finished, failed or stopped)
    Alive,     // running, heartbeat recent (and, on the writer's host, its process exists)
    Dead,      // running, but the process is gone or the heartbeat stopped
    Unknown,   // running, no heartbeat recorded (a log written before heartbeats existed)
};
std::string livenessName(Liveness l);   // "ended", "alive", "dead", "unknown"

struct RunLiveness {
    Liveness state = Liveness::Unknown;
    double lastSeen = 0;    // Unix time of the last heartbeat; 0 when none is recorded
    double silentFor = 0;   // seconds from lastSeen to the time asked about (>= 0)
    bool processGone = false;   // same host and the writer's pid no longer exists
    // One line for people: "alive (heartbeat 1 s ago, pid 123 on host h)", "stopped responding
    // at 2026-11-24 18:55:12 UTC (40 s ago); the process is gone - resume with --resume", ...
    std::string description;
};

// Writer identity and heartbeat as stored in a run log (all empty/0 in logs without them).
struct RunWriterInfo {
    std::string host;
    int64_t pid = 0;
    double heartbeatInterval = 0;   // seconds; 0: no heartbeat recorded
    double heartbeat = 0;           // Unix time of the last heartbeat
};

// The rule readers apply (exposed for `glimpse info` and tests): `now` is Unix time, `host`
// the reader's host name. Dead after kDeadAfterIntervals heartbeat intervals of silence, or at
// once when `host` is the writer's and its pid does not exist.
constexpr double kDeadAfterIntervals = 5;
RunLiveness judgeLiveness(RunStatus status, const RunWriterInfo& writer, double now, const std::string& host);
std::string localHostName();
double unixTimeNow();

// One metric series, column-wise (what charts want).
struct MetricSeries {
    std::vector<int64_t> steps;
    std::vector<double> wallTimes;   // seconds since the run started
    std::vector<double> values;
    size_t size() const { return steps.size(); }
    void append(int64_t step, double wallTime, double value);
};

// One series column by column, steps as doubles: what charts draw (RunLogReader::columns).
struct SeriesColumns {
    std::vector<double> steps, wallTimes, values;
    size_t size() const { return steps.size(); }
};

// A whole run log in memory, with a plain (non-SWMR) save/load round trip.
struct RunLog {
    static constexpr int kFormatVersion = 1;

    nlohmann::json config = nlohmann::json::object();
    RunStatus status = RunStatus::Running;
    std::string statusMessage;                      // why it failed or stopped; "" otherwise
    double startTime = 0;                           // Unix time (seconds) of the run start
    std::map<std::string, MetricSeries> series;
    std::map<std::string, torch::Tensor> eval;      // '/' in a name makes sub-groups
    RunWriterInfo writer;                           // host, pid, heartbeat of the (last) writer

    void save(const std::string& path) const;       // atomic
    static RunLog load(const std::string& path);    // also reads a live file (SWMR)
};

// Appends to a live run log. Not thread-safe: use it from one thread (its own heartbeat thread
// is synchronized internally).
class RunLogWriter {
public:
    struct Options {
        double flushInterval = 1.0;       // append() flushes when this many seconds have passed
        double heartbeatInterval = 2.0;   // /heartbeat is refreshed this often (> 0)
    };
    // Creates (replacing any file at `path`) a live run log with the given series.
    static RunLogWriter create(const std::string& path, const nlohmann::json& config,
                               const std::vector<std::string>& seriesNames, Options opts);
    static RunLogWriter create(const std::string& path, const nlohmann::json& config,
                               const std::vector<std::string>& seriesNames) {
        return create(path, config, seriesNames, Options{});
    }
    // A writer that keeps its rows in memory and writes no file (path() is empty): the run log
    // of a distributed run's ranks other than 0, which share rank 0's log (docs/distributed.md).
    static RunLogWriter memoryOnly(const nlohmann::json& config, const std::vector<std::string>& seriesNames);
    RunLogWriter(RunLogWriter&&) noexcept;
    RunLogWriter& operator=(RunLogWriter&&) noexcept;
    // A writer destroyed before finish()/fail() marks the run failed ("the run ended without
    // finish()"), so an aborted run never looks finished; errors are swallowed here.
    ~RunLogWriter();

    const std::string& path() const;
    double elapsed() const;   // seconds since create()

    // Rows are buffered; append() writes them out (flush()) once flushInterval seconds have
    // passed since the last flush. Call flush() to make rows visible to readers at once.
    void append(const std::string& series, int64_t step, double value);
    void append(const std::string& series, int64_t step, double value, double wallTime);
    void flush();
    // Eval results are written into the final file by finish()/fail(); '/' makes sub-groups.
    void setEval(const std::string& name, const torch::Tensor& t);

    void finish();
    void fail(const std::string& message);
    // Ends a run that was asked to stop (status "stopped"), e.g. "stopped at step N; --resume ...".
    void stop(const std::string& message);
    bool closed() const;

private:
    struct Impl;
    explicit RunLogWriter(std::unique_ptr<Impl> impl);
    void close(RunStatus status, const std::string& message);
    std::unique_ptr<Impl> impl_;
};

// Follows a run log, live or finished.
class RunLogReader {
public:
    static RunLogReader open(const std::string& path);
    RunLogReader(RunLogReader&&) noexcept;
    RunLogReader& operator=(RunLogReader&&) noexcept;
    ~RunLogReader();

    // Picks up rows appended since the last call, and the final file once the writer has
    // finished. Returns true when anything changed.
    bool refresh();

    const std::string& path() const;
    std::vector<std::string> seriesNames() const;
    int64_t rowCount(const std::string& series) const;
    // Rows [firstRow, rowCount) of a series (firstRow > 0 lets charts read only new rows).
    MetricSeries series(const std::string& series, int64_t firstRow = 0) const;
    // Rows [firstRow, endRow) (endRow < 0: to rowCount) as three columns: whole rows are read in
    // blocks into one small buffer and split (a single pass over the file; a million-row
    // series costs its 24 MB once). Readers on other threads may read in pieces by endRow.
    SeriesColumns columns(const std::string& series, int64_t firstRow = 0, int64_t endRow = -1) const;
    const nlohmann::json& config() const;
    RunStatus status() const;
    const std::string& statusMessage() const;
    double startTime() const;
    std::vector<std::string> evalNames() const;
    torch::Tensor eval(const std::string& name) const;
    RunLog snapshot() const;   // everything as it is now
    // The writer's host, pid and last heartbeat as of the last open()/refresh().
    const RunWriterInfo& writer() const;
    // Whether a "running" log's writer is still there, judged at Unix time `now` (default:
    // the current time) from the heartbeat read by the last refresh().
    RunLiveness liveness(double now = -1) const;

private:
    struct Impl;
    explicit RunLogReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace glimpse
