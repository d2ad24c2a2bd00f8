#include "core/models/efficientzero/reanalyze.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/search.h"

namespace glimpse::efficientzero {

std::vector<std::vector<float>> searchPolicies(Network& net, rl::Mcts& mcts, const rl::ReplayBuffer& replay,
                                               const std::vector<std::pair<int, int>>& positions,
                                               const PolicyReanalyzeOptions& o) {
    if (positions.empty()) return {};
    if (o.policyTarget != "visits" && o.policyTarget != "completed_q")
        throw Error("efficientzero reanalyze: policy target must be 'visits' or 'completed_q', got '" + o.policyTarget + "'");
    const auto& games = replay.games();
    const rl::ObsShape frame = games.at(size_t(positions.front().first)).frame;
    const int64_t stackNumel = int64_t(o.stack) * frame.numel();
    std::vector<float> obs(positions.size() * size_t(stackNumel));
    for (size_t j = 0; j < positions.size(); ++j) {
        const auto [g, t] = positions[j];
        if (g < 0 || size_t(g) >= games.size() || t < 0 || t >= games[size_t(g)].length())
            throw Error("efficientzero reanalyze: position (" + std::to_string(g) + ", " + std::to_string(t) +
                        ") is not a move of the replay buffer");
        games[size_t(g)].stackedInto(t, o.stack, obs.data() + int64_t(j) * stackNumel);
    }
    const torch::Tensor batch =
        torch::from_blob(obs.data(), {int64_t(positions.size()), int64_t(o.stack) * frame.channels, frame.height, frame.width});
    std::vector<std::vector<int>> legal;
    if (!o.legalActions.empty()) legal.assign(positions.size(), o.legalActions);
    rl::SearchResult res = searchBatch(net, mcts, batch, o.addNoise, legal);
    return o.policyTarget == "visits" ? std::move(res.policies) : std::move(res.improvedPolicies);
}

int reanalyzePolicyTargets(Network& net, rl::Mcts& mcts, const rl::ReplayBuffer& replay,
                           const std::vector<rl::SampledPosition>& samples, std::vector<rl::PositionTargets>& targets,
                           const PolicyReanalyzeOptions& o) {
    if (!(o.ratio >= 0 && o.ratio <= 1)) throw Error("efficientzero reanalyze: the policy ratio must be in [0, 1]");
    if (samples.size() != targets.size()) throw Error("efficientzero reanalyze: targets do not match the samples");
    const size_t count = std::min(samples.size(), size_t(std::lround(o.ratio * double(samples.size()))));
    const int A = net.config().numActions;
    std::vector<std::pair<int, int>> positions;   // (game, step) searched
    std::vector<std::pair<size_t, int>> slots;    // (sample, unroll step) each one replaces
    for (size_t b = 0; b < count; ++b) {
        const auto& g = replay.games().at(size_t(samples[b].game));
        const int steps = int(targets[b].mask.size());   // K + 1
        if (int(targets[b].policy.size()) != steps * A)
            throw Error("efficientzero reanalyze: a policy target has " + std::to_string(targets[b].policy.size()) +
                        " entries, expected " + std::to_string(steps * A));
        for (int k = 0; k < steps; ++k) {
            const int t = samples[b].pos + k;
            if (t >= g.length()) break;   // past the end: no policy target (masked)
            positions.emplace_back(samples[b].game, t);
            slots.emplace_back(b, k);
        }
    }
    const auto policies = searchPolicies(net, mcts, replay, positions, o);
    for (size_t j = 0; j < slots.size(); ++j) {
        const auto& p = policies[j];
        if (int(p.size()) != A) throw Error("efficientzero reanalyze: the search returned a policy of the wrong size");
        std::copy(p.begin(), p.end(), targets[slots[j].first].policy.begin() + long(slots[j].second) * A);
    }
    return int(positions.size());
}

} // namespace glimpse::efficientzero
