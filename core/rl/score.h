#pragma once
// Reference scores of the arcade suite: the random policy and each game's scripted policy,
// measured over K episodes, and the normalized score (score - random) / (scripted - random)
// computed from the table measured once and stored in score.cpp (see docs/rl.md).
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/rl/env.h"

namespace glimpse::rl {

enum class Policy { Random, Scripted };

struct ScoreStats {
    int episodes = 0;
    double mean = 0, std = 0;  // std: sample standard deviation (n - 1)
    double ci95 = 0;           // half-width of the 95% confidence interval of the mean (Student t)
    double min = 0, max = 0;
    double meanLength = 0;     // steps per episode
};

// Summary statistics of a list of episode returns.
ScoreStats summarize(const std::vector<double>& returns, const std::vector<int>& lengths = {});

// Plays `episodes` episodes of `game` (episode i from seed seed + i) with the policy: Random
// draws uniformly from legalActions() with an RNG seeded from `seed`; Scripted follows the
// game's referenceAction().
ScoreStats measureScore(const std::string& game, Policy policy, int episodes, uint64_t seed = 0,
                        const EnvOptions& options = {});

// Plays `episodes` episodes of `game` (episode i from seed seed + i) pressing `action` on every
// frame. With bestConstantAction() below, the baseline a learned agent should beat besides the
// random policy: a game with a one-button hole scores well with it (docs/rl.md "Reference
// scores"). Throws glimpse::Error for an action outside 0..numActions()-1.
ScoreStats measureConstantScore(const std::string& game, int action, int episodes, uint64_t seed = 0,
                                const EnvOptions& options = {});

struct ConstantBaseline {
    int action = -1;
    std::string actionName;
    ScoreStats stats;
};
// The constant action with the highest mean return over the episodes (ties: the lowest index).
ConstantBaseline bestConstantAction(const std::string& game, int episodes, uint64_t seed = 0,
                                    const EnvOptions& options = {});

struct ReferenceScore {
    std::string game;
    double random;    // mean episode return of the random policy
    double scripted;  // mean episode return of the scripted policy
};
// The stored table (default EnvOptions, 100 episodes, seed 0), in registry order.
const std::vector<ReferenceScore>& referenceScores();
// (score - random) / (scripted - random); throws glimpse::Error for a game not in the table.
double normalizedScore(const std::string& game, double score);

// Measures both policies and the best constant action on every game and prints a table (and
// the C++ rows of referenceScores()): the logic of `glimpse env score`.
void scoreTable(std::ostream& os, int episodes, uint64_t seed = 0, const EnvOptions& options = {});

} // namespace glimpse::rl
