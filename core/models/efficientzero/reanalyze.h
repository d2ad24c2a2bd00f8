#pragma once
// EfficientZero's reanalyze of policy targets (docs/rl.md "Replay and targets"): the policy
// target of a sampled position is not the visit distribution stored when the move was played by
// an older network, but that of a fresh search from the same observation with the current
// target network. The learner's value reanalysis (target-network values of the bootstrap
// observations) is in train.cpp; this is the policy half, on a fraction of each batch.
#include <string>
#include <utility>
#include <vector>

#include "core/models/efficientzero/model.h"
#include "core/rl/mcts.h"
#include "core/rl/replay.h"

namespace glimpse::efficientzero {

struct PolicyReanalyzeOptions {
    // Fraction of the batch's samples whose targets are searched afresh: the first
    // round(ratio * B) samples (the batch is drawn at random, so they are a random subset), every
    // unrolled step k = 0..K inside the game (t + k < T). EfficientZero uses 0.99 (Atari).
    double ratio = 0;
    int stack = 4;                      // frames per observation (the network's config().stack)
    bool addNoise = true;               // root Dirichlet noise, as EfficientZero's reanalyze
    std::string policyTarget = "visits";   // "visits" or "completed_q" (TrainConfig::policyTarget)
    std::vector<int> legalActions;      // the roots' legal actions (empty: all)
};

// One batched search (`net` in eval mode: the learner passes its target network) from the
// stacked observation at step `step` of game `game` of `replay`, for each position; returns each
// position's policy target over the network's actions: the root visit distribution ("visits") or
// SearchResult::improvedPolicies ("completed_q").
std::vector<std::vector<float>> searchPolicies(Network& net, rl::Mcts& mcts, const rl::ReplayBuffer& replay,
                                               const std::vector<std::pair<int, int>>& positions,
                                               const PolicyReanalyzeOptions& options);

// Replaces the policy targets of the first round(ratio * B) samples (targets[b].policy, step k
// for t + k < T) by searchPolicies() of those steps; the other samples and the steps past the end
// keep theirs. Returns the number of positions searched.
int reanalyzePolicyTargets(Network& net, rl::Mcts& mcts, const rl::ReplayBuffer& replay,
                           const std::vector<rl::SampledPosition>& samples, std::vector<rl::PositionTargets>& targets,
                           const PolicyReanalyzeOptions& options);

} // namespace glimpse::efficientzero
