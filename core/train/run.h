#pragma once
// The run folder of a LETR or CoaT training run and the rules for resuming it. The folder holds
// checkpoint.h5 (the training state, core/train/state.h), run.h5 (the RunLog) and, once the
// run has finished, model.h5 (the trained model).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runlog.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/state.h"

namespace glimpse::train {

struct RunFiles {
    std::string checkpoint, runLog, model;
};

// Creates `outDir` when needed (glimpse::Error naming it when that fails) and names its files.
// Also removes temp files that killed writers left there (removeStaleTemps).
RunFiles runFiles(const std::string& outDir);

// Removes `<file>.tmp-<pid>-<n>` files in `dir` (the atomic writes' temp files) whose writer
// process no longer exists: a run killed while writing a checkpoint leaves one behind.
// Returns how many were removed.
int removeStaleTemps(const std::string& dir);

// Whether a run asked to resume (`resume`) can: true when `checkpoint` exists. A run killed
// before its first checkpoint has none: it then starts from step 0 (its stale run log is
// replaced) and a one-line note saying so goes to stderr. False when !resume.
bool resumeFrom(const std::string& checkpoint, bool resume);
// The one-line note of a resumed run on stderr: "<checkpoint>: resuming at step <step>".
void noteResumed(const std::string& checkpoint, int64_t step);

// The state a resumed run continues from: the training state at `path` of `family`. Errors name
// the file when it is missing or corrupt, was written with another config (`config` compared
// without the keys in `mayChange`) or trained on other data than `data`.
TrainState loadResumeState(const std::string& path, const std::string& family, const nlohmann::json& config,
                           const std::vector<std::string>& mayChange, const std::string& data);

// The training state after `step` steps: meta {config, data, step}, the model's tensors and the
// optimizer's state.
TrainState stepState(const nlohmann::json& config, const std::string& data, int64_t step, const torch::nn::Module& model,
                     const AdamW& optimizer);

// Throws "batch_size <b> does not divide by the world size <w> (every rank trains on batch_size /
// world size <what>)" unless it does. The CLIs call it before the rendezvous too, so that every
// rank of a misconfigured run stops with this message rather than a rank waiting for the others.
void checkBatchDividesWorld(int64_t batchSize, int worldSize, const std::string& what);

// Throws "<trainer>: the loss became <loss> at step <step> (lower the learning rate?)" unless
// the loss is finite.
void checkLossFinite(double loss, int64_t step, const std::string& trainer);

// Ends a run that stopped on request after its checkpoint was written: "stopped" progress, and
// the run log's status "stopped at step <step>; --resume continues from <checkpoint>".
void endStoppedRun(RunLogWriter& log, StepReporter& reporter, int64_t step, const std::string& checkpoint);

} // namespace glimpse::train
