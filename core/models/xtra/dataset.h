#pragma once
// XTRA's offline datasets (dissertation 5.3.1 and 5.7.6; docs/xtra.md "Offline datasets"):
// trajectories of one game played by some behaviour policy, stored as the game histories a
// replay buffer holds (kind "glimpse.rl_dataset", layout in docs/formats.md). They come from
//   - a behaviour policy played here: uniform random, the game's scripted player, or a trained
//     EfficientZero agent, each epsilon-greedy with a list of epsilons cycled over episodes
//     (mixed quality: epsilon 1 is the random policy), or
//   - the replay buffer of an EfficientZero run (state.h5): what its agent played while it
//     learned, from the first random moves to the last.
// Histories end where an EfficientZero learner ends them: at the end of the game, at the step
// limit, and (life_loss_split) at a lost life, which counts as terminal.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rl/env.h"
#include "core/rl/replay.h"
#include "core/train/control.h"

namespace glimpse::xtra {

inline constexpr const char* kDatasetKind = "glimpse.rl_dataset";
inline constexpr int64_t kDatasetVersion = 1;

struct OfflineDataset {
    std::string env;                       // as makeEnv takes it ("demon" or "shared:demon")
    std::string source;                    // one line: how it was made
    nlohmann::json policy;                 // the behaviour policy ({"kind": ..., ...})
    rl::EnvOptions envOptions;
    std::vector<std::string> actionNames;  // of env
    std::vector<std::string> channelNames; // of env's observation
    rl::ObsShape frame;
    bool rewardsClipped = false;           // rewards were stored clipped to their sign
    bool lifeLossSplit = true;
    std::vector<rl::GameHistory> games;    // frames, actions, rewards, terminal (no search data)
    std::vector<float> epsilon;            // per game: the behaviour policy's epsilon (-1: unknown)
    std::vector<double> episodeReturns;    // complete episodes, the game's own rewards
    std::vector<int64_t> episodeLengths;

    int64_t transitions() const;
    int numActions() const { return int(actionNames.size()); }
};

// Atomic write (temp file + rename); frames gzip-compressed, every dataset checksummed.
void writeDataset(const std::string& path, const OfflineDataset& data);
// Reads and checks a dataset: the game must exist in this Glimpse with the same actions,
// channels and frame shape ("made with another version of 'demon'"), actions in range, sizes
// consistent, at least one transition. Errors name the file.
OfflineDataset readDataset(const std::string& path);

struct DatasetSpec {
    std::string env;
    std::string policy = "scripted";       // "random", "scripted" or "agent"
    std::string checkpoint;                // agent: an EfficientZero model.h5 for env
    int simulations = 16;                  // agent: MCTS simulations per move
    std::vector<double> epsilons{0.0};     // episode e uses epsilons[e % size]
    int64_t steps = 10000;                 // transitions to collect
    int numEnvs = 8;                       // environments played side by side
    uint64_t seed = 0;
    rl::EnvOptions envOptions;
    bool lifeLossSplit = true;

    void validate() const;                 // glimpse::Error naming the field
};

// Plays spec.steps environment steps (the running episodes are cut there, as truncated).
OfflineDataset generateDataset(const DatasetSpec& spec, train::Control* control = nullptr,
                               const train::ProgressFn& progress = {});
// The replay buffer of an EfficientZero run (RUN/state.h5), rewards as the run stored them.
OfflineDataset datasetFromRun(const std::string& runDir);

// Mean and 95% CI half-width of the complete episodes' returns, transitions, games: one line.
std::string describeDataset(const OfflineDataset& data);

} // namespace glimpse::xtra
