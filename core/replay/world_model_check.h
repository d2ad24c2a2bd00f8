#pragma once
// The world model checked against the game (issue 52 part 4): over a recorded episode, the
// replay viewer's imagined rollouts (model_view.h `imagine`: initial inference at step t, then
// K recurrent inferences with the recorded actions) from every step t, against what happened.
// For each depth k = 1..K (and k = 0 for the value: the representation's own estimate) the mean
// absolute error of
//   - the predicted reward of step t + k - 1 (value-prefix difference, as the search uses it)
//     against the recorded reward,
//   - the predicted value of imagined step t + k against the discounted return from t + k,
//   - the same predicted value against the search's root value recorded at step t + k (when the
//     episode has root values): how far imagination drifts from what the search estimated
//     from the real observation there.
// A trained network against an untrained one (its heads start at zero: value 0, reward 0) shows
// what the world model learned; the untrained rows equal the error of predicting 0 everywhere.
//
// What "reality" is, as the network was trained (docs/rl.md "Replay and targets"):
//   - clipRewards: rewards compared (and summed into returns) as their sign, what the learner
//     stored (train config `clip_rewards`, default on);
//   - lifeLossEnds: a lost life ends the return and the rollout, as it ends a training history
//     (`life_loss_terminal`, default on); a game end (terminal step) always does;
//   - discount: the run's discount (train config `discount`, 0.997 by default, 0.97 in the
//     shooter config).
// A rollout never crosses an end: depth k of start t counts only when none of the steps
// t .. t + k - 2 ends a segment (the last imagined action may be the one that ends it; the
// value after it is then compared with 0, the terminal state's value). A recording cut before
// the game ended is not bootstrapped (the returns near its end are what was recorded), as in
// the viewer's imagined chart. Starts are every t with t + K <= length (or `maxStarts` evenly
// spaced ones); they are batched `batch` at a time through the network (eval mode).
//
// Threads: a worker thread (never the UI thread); the Network is not to be used by another
// thread meanwhile. `cancel` is checked between network calls ("world model check: cancelled").
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/replay/episode_reader.h"

namespace glimpse::efficientzero {
class Network;
struct Config;
}

namespace glimpse::replay {

struct WorldModelCheckOptions {
    int depth = 5;               // K
    double discount = 0.997;
    bool clipRewards = true;
    bool lifeLossEnds = true;
    int lstmHorizon = 5;         // the search's value-prefix LSTM reset interval
    int batch = 64;              // starts per network call
    int64_t maxStarts = 0;       // 0: every start; else at most this many, evenly spaced
};

struct WorldModelDepth {
    int depth = 0;
    int64_t count = 0;           // (start, depth) pairs counted
    double rewardMae = 0;        // depth >= 1; NaN at depth 0
    double valueMae = 0;         // predicted value vs the discounted return from t + k
    int64_t rootCount = 0;       // pairs with a recorded root value at t + k (t + k < length)
    double rootValueMae = 0;     // predicted value vs the recorded root value; NaN without
    double meanAbsReward = 0;    // mean |actual reward| over the same pairs (predicting 0 scores this)
    double meanAbsReturn = 0;    // mean |actual return|
};

struct WorldModelCheck {
    std::string episode, checkpoint;   // what was checked (checkpoint: "untrained" for a fresh network)
    WorldModelCheckOptions options;
    int64_t starts = 0;
    std::vector<WorldModelDepth> depths;   // depth 0..K
};

// progress(done, total) after each batch of starts (may be empty).
WorldModelCheck checkWorldModel(efficientzero::Network& net, EpisodeReader& ep, const WorldModelCheckOptions& options,
                                const std::atomic<bool>* cancel = nullptr,
                                const std::function<void(int64_t, int64_t)>& progress = {});

// A freshly initialised network of `config` (seeded), in eval mode, on the CPU: the untrained
// side of the comparison.
efficientzero::Network untrainedNetwork(const efficientzero::Config& config, uint64_t seed = 0);

// The per-depth table as text: one row per depth, the trained figures and (when given) the
// untrained ones beside them. Markdown when `markdown`, else aligned columns.
std::string worldModelTable(const WorldModelCheck& trained, const WorldModelCheck* untrained, bool markdown = false);

} // namespace glimpse::replay
