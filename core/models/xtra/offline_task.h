#pragma once
// One offline (source) task of XTRA (dissertation 5.3.1; docs/xtra.md "Distillation targets"):
// an offline dataset of one game, seen in the suite's shared space, with the targets of its
// teacher, an EfficientZero agent of that game. At load the teacher runs once over every
// position of the dataset ("we store the model predictions (p, v) from each teacher"): its
// policy (softmax over the game's legal actions, mapped into the shared action space) is the
// policy target, and the value target of unroll step k is the n-step return of the real rewards
// bootstrapped from the teacher's value, z = sum_{i<n} g^i u_{t+k+i} + g^n v_teacher(t+k+n), so
// that the student learns the teacher's predictions rather than bootstrapping from its own
// (MuZero Reanalyze with the teacher in the target network's place). Value-prefix targets are
// the real rewards. Used by pretraining (xtra-pretrain) and by finetuning (xtra) alike.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/models/efficientzero/loss.h"
#include "core/rl/replay.h"
#include "core/rl/shared_space.h"
#include "core/train/control.h"

namespace glimpse::xtra {

struct SourceSpec {
    std::string dataset;   // a glimpse.rl_dataset file
    std::string teacher;   // an EfficientZero checkpoint (model.h5) of the dataset's game
};

// The suite's category of a game ("shooter", "maze"; "" for an unknown name), for run logs.
std::string gameCategory(const std::string& game);

// A JSON list of {"dataset": FILE, "teacher": FILE} (config key "sources"); errors name `where`.
std::vector<SourceSpec> sourcesFromJson(const nlohmann::json& j, const std::string& where);
nlohmann::json sourcesToJson(const std::vector<SourceSpec>& sources);

struct TargetOptions {
    int unroll = 5;
    int tdSteps = 5;
    double discount = 0.997;
    bool clipRewards = true;   // value-prefix and n-step rewards clipped to their sign
    int stack = 4;             // the student's frame stack
};

class OfflineTask {
public:
    // Loads the dataset and the teacher (errors name the file: a teacher of another game, action
    // space or observation shape; an unreadable or empty dataset) and computes the targets.
    OfflineTask(const SourceSpec& spec, const TargetOptions& options, const train::ProgressFn& progress = {});

    const std::string& game() const { return game_; }          // the base game ("demon")
    const std::string& datasetEnv() const { return env_; }     // as stored ("demon" or "shared:demon")
    const SourceSpec& spec() const { return spec_; }
    int64_t transitions() const { return transitions_; }
    const rl::ActionMap& actions() const { return map_; }
    const rl::ReplayBuffer& replay() const { return replay_; }
    // Teacher value of every frame of history g (length + 1 values).
    const std::vector<float>& teacherValues(int g) const { return values_.at(size_t(g)); }

    // `batch` positions (history, step) drawn uniformly (with replacement) over all transitions
    // from `seed` (same seed: same positions on every rank).
    std::vector<std::pair<int, int>> draw(int batch, uint64_t seed) const;
    // The student's batch at these positions: shared frames, teacher targets, weights 1. Row i
    // is row firstRow + i of the whole batch (it seeds the random actions past the end).
    efficientzero::Batch batchAt(const std::vector<std::pair<int, int>>& positions, uint64_t seed, int firstRow = 0) const;
    // Rows [rowBegin, rowEnd) of the batch of draw(batch, seed) (rowEnd -1: all).
    efficientzero::Batch sample(int batch, uint64_t seed, int rowBegin = 0, int rowEnd = -1) const;

private:
    SourceSpec spec_;
    TargetOptions opt_;
    std::string game_, env_;
    rl::ActionMap map_;
    rl::ReplayBuffer replay_;
    std::vector<std::vector<float>> values_;
    std::vector<int64_t> starts_;   // first transition index of each history
    int64_t transitions_ = 0;
};

} // namespace glimpse::xtra
