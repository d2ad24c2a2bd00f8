#pragma once
// XTRA stage 1, offline multi-task pretraining by distillation (dissertation 5.3.1; docs/xtra.md
// "glimpse train xtra-pretrain"): one student EfficientZero network in the suite's shared
// observation and action space learns every source game at once from its offline dataset and
// its teacher's targets (offline_task.h). Each update takes batch_size / m positions from each
// of the m games (data sampled uniformly over the games) and minimises the mean over the games
// of the EfficientZero loss (eq. 5.3). The student is an ordinary EfficientZero checkpoint
// (RUN/model.h5, family "efficientzero") of the shared space: `glimpse play --env shared:GAME`
// plays it, `glimpse train xtra` finetunes it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/xtra/offline_task.h"
#include "core/train/control.h"

namespace glimpse::dist {
class Communicator;
}

namespace glimpse::xtra {

struct PretrainConfig {
    std::vector<SourceSpec> sources;
    int64_t steps = 2000;
    uint64_t seed = 0;
    int batchSize = 96;            // over all games: batchSize / m positions of each
    int unroll = 5, tdSteps = 5;
    double discount = 0.997;
    bool clipRewards = true;
    // AdamW with linear warmup and cosine decay (a supervised stage: docs/xtra.md says why).
    double lr = 1e-3, minLr = 1e-4, weightDecay = 1e-4, gradClip = 5.0;
    int64_t warmupSteps = 100;
    int64_t checkpointEvery = 250, logEvery = 10;
    int threads = 0;               // LibTorch threads (0: leave as set)
    nlohmann::json network = nlohmann::json::object();  // overrides of the student's network keys

    void validate() const;         // glimpse::Error naming the key
    nlohmann::json toJson() const;
    // Missing keys keep their defaults; unknown keys and wrong types are errors naming `source`.
    static PretrainConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
};

struct PretrainResult {
    int64_t steps = 0;
    bool finished = false;
    double seconds = 0;
    std::vector<std::string> games;
    int rank = 0, worldSize = 1;
};

// Files in runDir: checkpoint.h5 (resume state), run.h5 (the RunLog: loss and task_loss/<game> per
// update), and at the end model.h5. `resume` continues from checkpoint.h5 (a run killed before
// its first checkpoint starts anew). With `comm` of W > 1 ranks each rank takes its rows of every
// game's batch and gradients are averaged (docs/distributed.md).
PretrainResult pretrain(const PretrainConfig& config, const std::string& runDir, bool resume, train::Control& control,
                        const train::ProgressFn& progress = {}, dist::Communicator* comm = nullptr);

// The student network config for the shared space (efficientzero::cpuNetwork of a shared game).
nlohmann::json studentNetworkConfig(const nlohmann::json& overrides);

} // namespace glimpse::xtra
