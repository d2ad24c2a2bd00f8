#pragma once
// XTRA stage 2, online finetuning with concurrent cross-task learning (dissertation 5.3.2 and
// Appendix 5.7.2; docs/xtra.md "glimpse train xtra"): EfficientZero trains online on a target
// game of the shared space, usually starting from a distilled student (the EfficientZero key
// "init"), while it keeps learning the offline tasks of pretraining from their datasets and
// teachers: the objective of each learner update is
//   L = L_ez(target) + sum_i eta_i L_ez(offline task i)                               (eq. 5.1)
// with the target's targets from reanalysis and the offline tasks' from their teachers. The
// weights eta_i are "adaptive" (the gradient-similarity rule of task_weights.h) or "constant"
// (all 1, the ablation). Every update logs task_weight/<game>, task_loss/<game> and, in the
// measuring windows, task_similarity/<game>.
//
// The variants of the study are configs of this one command: EfficientZero from scratch (no
// init, no sources), pretraining without concurrent finetuning (init, no sources), constant
// weights (weights "constant") and XTRA (init, sources, weights "adaptive").
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/efficientzero/train.h"
#include "core/models/xtra/offline_task.h"
#include "core/models/xtra/task_weights.h"

namespace glimpse::xtra {

struct FinetuneConfig {
    efficientzero::TrainConfig ez;       // the online training on the target game (env shared:GAME)
    std::vector<SourceSpec> sources;     // the offline tasks (none: plain finetuning)
    std::string weights = "adaptive";    // "adaptive" or "constant"
    TaskWeightConfig taskWeights;
    int offlineBatchSize = 32;           // positions of each offline task per update

    // The EfficientZero keys at the top level, XTRA's under "xtra": {"sources", "weights",
    // "task_weights", "offline_batch_size"}. Errors name `source` and the key.
    static FinetuneConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    nlohmann::json toJson() const;
    void validate() const;
};

// Finetunes (files as efficientzero::trainAgent: model.h5, state.h5, runlog.h5; the log's
// trainer is "xtra"). Errors: a target outside the shared space, the target game among the
// offline tasks, two datasets of one game, a teacher or init checkpoint that does not fit.
efficientzero::TrainResult finetune(const FinetuneConfig& config, const std::string& runDir,
                                    train::Control* control = nullptr, const train::ProgressFn& progress = {},
                                    dist::Communicator* comm = nullptr);

} // namespace glimpse::xtra
