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
// A writer that crashes leaves a readable file whose status stays "running".
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

// One metric series, column-wise (what charts want).
struct MetricSeries {
    std::vector<int64_t> steps;
    std::vector<double> wallTimes;   // seconds since the run started
    std::vector<double> values;
    size_t size() const { return steps.size(); }
    void append(int64_t step, double wallTime, double value);
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

    void save(const std::string& path) const;       // atomic
    static RunLog load(const std::string& path);    // also reads a live file (SWMR)
};

// Appends to a live run log. Not thread-safe: use it from one thread.
class RunLogWriter {
public:
    struct Options {
        double flushInterval = 1.0;   // append() flushes when this many seconds have passed
    };
    // Creates (replacing any file at `path`) a live run log with the given series.
    static RunLogWriter create(const std::string& path, const nlohmann::json& config,
                               const std::vector<std::string>& seriesNames, Options opts);
    static RunLogWriter create(const std::string& path, const nlohmann::json& config,
                               const std::vector<std::string>& seriesNames) {
        return create(path, config, seriesNames, Options{});
    }
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
    const nlohmann::json& config() const;
    RunStatus status() const;
    const std::string& statusMessage() const;
    double startTime() const;
    std::vector<std::string> evalNames() const;
    torch::Tensor eval(const std::string& name) const;
    RunLog snapshot() const;   // everything as it is now

private:
    struct Impl;
    explicit RunLogReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace glimpse
