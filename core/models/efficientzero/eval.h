#pragma once
// EfficientZero evaluation (docs/rl.md "Evaluation"): loads a trained network for a game and
// plays episodes with the search (no noise, the most visited action by default), several at
// once in one batched search, and can record them in the episode format (core/rl/episode.h).
#include <cstdint>
#include <string>
#include <vector>

#include "core/rl/env.h"
#include "core/rl/score.h"
#include "core/train/control.h"

namespace glimpse::efficientzero {

class Network;

// Loads model.h5 (or any efficientzero checkpoint) for `env`; errors when the checkpoint's
// action-set size or observation shape does not match the game.
Network loadForEnv(const std::string& checkpoint, const rl::Env& env);
// Loads an efficientzero checkpoint in eval mode; with `env`, checks that it fits that game (as
// loadForEnv), without, the caller checks (e.g. against a recorded episode of another game).
Network loadNetwork(const std::string& checkpoint, const rl::Env* env = nullptr);

struct EvalOptions {
    int episodes = 32;
    uint64_t seed = 1000000;           // episode i starts from episodeSeed(seed, i, 0)
    int simulations = 16;
    int parallel = 16;                 // episodes searched in one batch
    // Action choice: 0 = the most visited action (ties: highest root Q, then random), the
    // default; T > 0 samples proportionally to N^(1/T) like self-play. `noise` adds the
    // self-play root Dirichlet noise. Both exist to compare evaluation with self-play.
    double temperature = 0;
    bool noise = false;
    rl::EnvOptions env;
    std::string recordDir;             // when set: one episode file per episode
    std::string checkpointPath;        // stored in recorded episodes
    // When set: every search is run a second time from the same roots, with the same search
    // and tie-break random state, by this network (e.g. the same weights with their batch norms
    // as separate layers, `glimpse play --compare-reference`), and the two are compared
    // (EvalResult::compared...). The episodes follow `net`'s choices.
    Network* compareWith = nullptr;
};
struct EvalResult {
    std::vector<double> returns;
    std::vector<int> lengths;
    rl::ScoreStats stats;
    double normalizedMean = 0, normalizedMedian = 0;
    std::vector<std::string> recorded;  // episode files written
    // With EvalOptions::compareWith: searches compared, those whose chosen action was the same,
    // and the root values' relative differences |v - v_ref| / max(|v_ref|, 0.01) (median, max).
    // mostVisitedOfReference counts the searches whose chosen action has the reference search's
    // highest visit count: the same action, or another one tied with it at the top.
    int64_t compared = 0, sameAction = 0, mostVisitedOfReference = 0;
    double valueRelDiffMedian = 0, valueRelDiffMax = 0;
};
EvalResult evaluate(Network& net, const std::string& game, const EvalOptions& options,
                    train::Control* control = nullptr, const train::ProgressFn& progress = {});

} // namespace glimpse::efficientzero
