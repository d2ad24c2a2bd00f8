#include "core/train/run.h"

#include <signal.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/error.h"

namespace glimpse::train {

namespace fs = std::filesystem;

RunFiles runFiles(const std::string& outDir) {
    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (ec) throw Error(outDir + ": cannot create the run folder (" + ec.message() + ")");
    RunFiles f;
    f.checkpoint = (fs::path(outDir) / "checkpoint.h5").string();
    f.runLog = (fs::path(outDir) / "run.h5").string();
    f.model = (fs::path(outDir) / "model.h5").string();
    removeStaleTemps(outDir);
    return f;
}

int removeStaleTemps(const std::string& dir) {
    int removed = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const size_t at = name.rfind(".tmp-");
        if (at == std::string::npos || at == 0) continue;
        // ".tmp-<pid>-<n>"
        const std::string rest = name.substr(at + 5);
        const size_t dash = rest.find('-');
        if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) continue;
        if (rest.find_first_not_of("0123456789-") != std::string::npos) continue;
        const long long pid = std::atoll(rest.substr(0, dash).c_str());
        if (pid <= 0 || pid > INT_MAX) continue;
        if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;   // its writer may still be at work
        std::error_code rm;
        if (fs::remove(it->path(), rm)) ++removed;
    }
    return removed;
}

bool resumeFrom(const std::string& checkpoint, bool resume) {
    if (!resume) return false;
    std::error_code ec;
    if (fs::exists(checkpoint, ec)) return true;
    std::cerr << checkpoint << ": no checkpoint yet (the run ended before its first one); starting from step 0\n";
    return false;
}

void checkBatchDividesWorld(int64_t batchSize, int worldSize, const std::string& what) {
    if (worldSize > 0 && batchSize % worldSize != 0)
        throw Error("batch_size " + std::to_string(batchSize) + " does not divide by the world size " +
                    std::to_string(worldSize) + " (every rank trains on batch_size / world size " + what + ")");
}

TrainState loadResumeState(const std::string& path, const std::string& family, const nlohmann::json& config,
                           const std::vector<std::string>& mayChange, const std::string& data) {
    TrainState s = loadTrainState(path, family);
    auto comparable = [&](nlohmann::json j) {
        for (const auto& k : mayChange) j.erase(k);
        return j;
    };
    if (!s.meta.contains("config") || comparable(s.meta["config"]) != comparable(config))
        throw Error(path + ": was written with a different training config; resume needs the same one");
    if (!s.meta.contains("data") || s.meta["data"] != data)
        throw Error(path + ": was trained on '" + s.meta.value("data", std::string("?")) + "', not '" + data + "'");
    return s;
}

TrainState stepState(const nlohmann::json& config, const std::string& data, int64_t step, const torch::nn::Module& model,
                     const AdamW& optimizer) {
    TrainState st;
    st.meta["config"] = config;
    st.meta["data"] = data;
    st.meta["step"] = step;
    st.model = moduleTensors(model);
    st.optimizer = optimizer.state();
    return st;
}

void checkLossFinite(double loss, int64_t step, const std::string& trainer) {
    if (!std::isfinite(loss))
        throw Error(trainer + ": the loss became " + std::to_string(loss) + " at step " + std::to_string(step) +
                    " (lower the learning rate?)");
}

void endStoppedRun(RunLogWriter& log, StepReporter& reporter, int64_t step, const std::string& checkpoint) {
    reporter.notify("stopped");
    log.stop("stopped at step " + std::to_string(step) + "; --resume continues from " + checkpoint);
}

void noteResumed(const std::string& checkpoint, int64_t step) {
    std::cerr << checkpoint << ": resuming at step " << step << "\n";
}

} // namespace glimpse::train
