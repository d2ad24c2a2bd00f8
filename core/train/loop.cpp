#include "core/train/loop.h"

#include <filesystem>

#include "core/error.h"

namespace glimpse::train {

StepReporter::StepReporter(RunLogWriter& log, ProgressFn progress, int64_t totalSteps, int64_t startStep)
    : log_(log), fn_(std::move(progress)), startStep_(startStep), t0_(std::chrono::steady_clock::now()) {
    progress_.totalSteps = totalSteps;
    progress_.step = startStep;
}

double StepReporter::elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void StepReporter::report(int64_t step, const std::string& phase, const std::map<std::string, double>& metrics) {
    for (const auto& [name, value] : metrics) {
        log_.append(name, step, value);
        progress_.latest[name] = value;
    }
    advance(step, phase);
}

void StepReporter::setLatest(const std::string& name, double value) { progress_.latest[name] = value; }

void StepReporter::advance(int64_t step, const std::string& phase) {
    progress_.step = step;
    progress_.phase = phase;
    progress_.elapsed = elapsed();
    const int64_t done = step - startStep_;
    progress_.eta = done > 0 ? progress_.elapsed / double(done) * double(progress_.totalSteps - step) : -1.0;
    if (fn_) fn_(progress_);
}

void StepReporter::notify(const std::string& phase) {
    progress_.phase = phase;
    progress_.elapsed = elapsed();
    if (fn_) fn_(progress_);
}

RunLog previousRunLog(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return RunLog{};
    try {
        return RunLog::load(path);
    } catch (const Error&) {
        return RunLog{};   // unreadable old log: start a fresh one
    }
}

RunLogWriter openRunLog(const std::string& path, const nlohmann::json& config,
                        const std::vector<std::string>& series, const RunLog& previous,
                        const std::function<int64_t(const std::string& series)>& keepUpTo) {
    RunLogWriter w = RunLogWriter::create(path, config, series);
    if (previous.series.empty()) return w;
    for (const auto& name : series) {
        auto it = previous.series.find(name);
        if (it == previous.series.end()) continue;
        const auto& s = it->second;
        const int64_t last = keepUpTo(name);
        for (size_t i = 0; i < s.size(); ++i)
            if (s.steps[i] <= last) w.append(name, s.steps[i], s.values[i], s.wallTimes[i]);
    }
    w.flush();
    return w;
}

RunLogWriter openRunLog(const std::string& path, const nlohmann::json& config,
                        const std::vector<std::string>& series, int64_t keepUpToStep) {
    const RunLog old = keepUpToStep >= 0 ? previousRunLog(path) : RunLog{};
    return openRunLog(path, config, series, old, [keepUpToStep](const std::string&) { return keepUpToStep; });
}

} // namespace glimpse::train
