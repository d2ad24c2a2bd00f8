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

RunLogWriter openRunLog(const std::string& path, const nlohmann::json& config,
                        const std::vector<std::string>& series, int64_t keepUpToStep) {
    RunLog old;
    bool haveOld = false;
    std::error_code ec;
    if (keepUpToStep >= 0 && std::filesystem::exists(path, ec)) {
        try {
            old = RunLog::load(path);
            haveOld = true;
        } catch (const Error&) {
            haveOld = false;   // unreadable old log: start a fresh one
        }
    }
    RunLogWriter w = RunLogWriter::create(path, config, series);
    if (haveOld) {
        for (const auto& name : series) {
            auto it = old.series.find(name);
            if (it == old.series.end()) continue;
            const auto& s = it->second;
            for (size_t i = 0; i < s.size(); ++i)
                if (s.steps[i] <= keepUpToStep) w.append(name, s.steps[i], s.values[i], s.wallTimes[i]);
        }
        w.flush();
    }
    return w;
}

} // namespace glimpse::train
