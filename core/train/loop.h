#pragma once
// The step-loop helpers every trainer uses: a reporter that appends each metric to the RunLog
// as it is produced and tells the caller (Progress with ETA), and the RunLog (re)opening rule
// for resumed runs.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runlog.h"
#include "core/train/control.h"

namespace glimpse::train {

class StepReporter {
public:
    // startStep: steps already done when this process started (resume); the ETA uses only
    // steps done by this process.
    StepReporter(RunLogWriter& log, ProgressFn progress, int64_t totalSteps, int64_t startStep);
    // Appends every metric (a declared series) at `step` (steps done so far, 1-based), updates
    // Progress (latest values, elapsed, ETA) and calls the progress callback.
    void report(int64_t step, const std::string& phase, const std::map<std::string, double>& metrics);
    // Progress without new metrics (e.g. "saving checkpoint").
    void notify(const std::string& phase);
    // The latest value of a metric shown in Progress, not logged here (for series a trainer
    // logs on another cadence or step axis itself).
    void setLatest(const std::string& name, double value);
    // Progress at `step` (elapsed, ETA) without new rows; calls the progress callback.
    void advance(int64_t step, const std::string& phase);
    const Progress& progress() const { return progress_; }
    double elapsed() const;

private:
    RunLogWriter& log_;
    ProgressFn fn_;
    Progress progress_;
    int64_t startStep_;
    std::chrono::steady_clock::time_point t0_;
};

// Creates the live run log at `path`. When `keepUpToStep` >= 0 and an old log exists there
// (a resumed run), its rows with step <= keepUpToStep are copied into the new file first, with
// their original wall times, so the charts continue where the checkpoint was written.
RunLogWriter openRunLog(const std::string& path, const nlohmann::json& config,
                        const std::vector<std::string>& series, int64_t keepUpToStep);

// The old run log a resumed run continues: the file at `path`, or an empty RunLog when there is
// none or it cannot be read (it is then replaced).
RunLog previousRunLog(const std::string& path);

// Creates the live run log at `path` and first copies the rows of `previous` (a resumed run's
// old log) whose step is at most keepUpTo(series name), with their original wall times. For
// trainers whose series count steps on different axes (updates, environment steps).
RunLogWriter openRunLog(const std::string& path, const nlohmann::json& config,
                        const std::vector<std::string>& series, const RunLog& previous,
                        const std::function<int64_t(const std::string& series)>& keepUpTo);

} // namespace glimpse::train
