#include "core/rl/replay.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace glimpse::rl {

void GameHistory::addFrame(const float* obs) {
    const int64_t n = frame.numel();
    if (n <= 0) throw Error("replay: game history has no frame shape");
    const size_t base = frames.size();
    frames.resize(base + size_t(n));
    for (int64_t i = 0; i < n; ++i) frames[base + size_t(i)] = uint8_t(std::lround(std::clamp(obs[i], 0.f, 1.f) * 255.f));
}

void GameHistory::stackedInto(int t, int stack, float* dst) const {
    const int64_t n = frame.numel();
    const int64_t count = frameCount();
    if (t < 0 || t >= count) throw Error("replay: frame " + std::to_string(t) + " outside the game's " + std::to_string(count) + " frames");
    for (int s = 0; s < stack; ++s) {
        const int64_t f = std::max<int64_t>(0, t - (stack - 1) + s);
        const uint8_t* src = frames.data() + f * n;
        float* out = dst + int64_t(s) * n;
        for (int64_t i = 0; i < n; ++i) out[i] = float(src[i]) * (1.f / 255.f);
    }
}

ReplayBuffer::ReplayBuffer(const ReplayConfig& config) : config_(config) {
    if (config.unroll < 1 || config.tdSteps < 1 || config.lstmHorizon < 1)
        throw Error("replay: unroll, td steps and LSTM horizon must be at least 1");
    if (config.capacity < 1) throw Error("replay: capacity must be positive");
}

void ReplayBuffer::add(GameHistory game, const std::vector<double>& priorities) {
    const int T = game.length();
    if (T == 0) return;
    if (int64_t(game.rewards.size()) != T || int64_t(game.rootValues.size()) != T ||
        int64_t(game.policies.size()) != int64_t(T) * game.numActions || game.frameCount() != T + 1)
        throw Error("replay: inconsistent game history (" + std::to_string(T) + " actions, " +
                    std::to_string(game.rewards.size()) + " rewards, " + std::to_string(game.frameCount()) + " frames)");
    if (!priorities.empty() && int(priorities.size()) != T)
        throw Error("replay: " + std::to_string(priorities.size()) + " priorities for a game of " + std::to_string(T) + " steps");
    // As the reference's buffer: the largest priority of the positions held now (1 when empty),
    // not the largest ever seen, which early value errors would keep high for the whole run.
    std::vector<double> p = priorities.empty() ? std::vector<double>(size_t(T), maxPriority()) : priorities;
    games_.push_back(std::move(game));
    priorities_.push_back(std::move(p));
    transitions_ += T;
    totalAdded_ += T;
    evict();
}

void ReplayBuffer::evict() {
    size_t drop = 0;
    int64_t left = transitions_;
    while (drop + 1 < games_.size() && left > config_.capacity) left -= games_[drop++].length();
    if (drop == 0) return;
    games_.erase(games_.begin(), games_.begin() + long(drop));
    priorities_.erase(priorities_.begin(), priorities_.begin() + long(drop));
    transitions_ = left;
}

double ReplayBuffer::maxPriority() const {
    if (transitions_ == 0) return 1.0;
    double m = 0;
    for (const auto& ps : priorities_)
        for (double v : ps) m = std::max(m, v);
    return m;
}

double ReplayBuffer::beta(double progress) const {
    progress = std::clamp(progress, 0.0, 1.0);
    return config_.betaStart + (1.0 - config_.betaStart) * progress;
}

std::vector<SampledPosition> ReplayBuffer::sample(int batch, double beta, std::mt19937_64& rng) const {
    if (transitions_ == 0) throw Error("replay: cannot sample from an empty buffer");
    // Cumulative p^alpha over all positions (games in order).
    std::vector<double> cum;
    cum.reserve(size_t(transitions_));
    double total = 0;
    for (const auto& ps : priorities_)
        for (double p : ps) {
            total += std::pow(p + config_.priorityEps, config_.alpha);
            cum.push_back(total);
        }
    std::vector<int> gameStart(games_.size());
    int acc = 0;
    for (size_t g = 0; g < games_.size(); ++g) {
        gameStart[g] = acc;
        acc += games_[g].length();
    }
    // Without replacement when the buffer holds enough positions (as the reference's
    // np.random.choice(..., replace=False)): a drawn position is drawn again from the whole
    // distribution, which is drawing from the positions not yet taken in proportion to their
    // p^alpha. If repeats pile up (priorities concentrated on a few positions) the rest is drawn
    // from the renormalized remainder directly.
    const bool distinct = int64_t(batch) <= transitions_;
    std::vector<size_t> taken;
    taken.reserve(size_t(batch));
    auto isTaken = [&](size_t f) { return std::find(taken.begin(), taken.end(), f) != taken.end(); };
    std::uniform_real_distribution<double> uni01(0.0, 1.0);
    auto drawFlat = [&]() -> size_t {
        for (int attempt = 0; attempt < 64; ++attempt) {
            const double u = uni01(rng) * total;
            const size_t flat = std::min(size_t(std::upper_bound(cum.begin(), cum.end(), u) - cum.begin()), cum.size() - 1);
            if (!distinct || !isTaken(flat)) return flat;
        }
        auto weight = [&](size_t f) { return isTaken(f) ? 0.0 : cum[f] - (f ? cum[f - 1] : 0.0); };
        double rest = 0;  // p^alpha of the positions not taken
        for (size_t f = 0; f < cum.size(); ++f) rest += weight(f);
        double u = uni01(rng) * rest;
        size_t last = 0;
        for (size_t f = 0; f < cum.size(); ++f) {
            if (isTaken(f)) continue;
            last = f;
            if ((u -= weight(f)) < 0) return f;
        }
        return last;
    };
    std::vector<SampledPosition> out(static_cast<size_t>(batch));
    double maxW = 0;
    for (auto& s : out) {
        const size_t flat = drawFlat();
        taken.push_back(flat);
        const size_t g = size_t(std::upper_bound(gameStart.begin(), gameStart.end(), int(flat)) - gameStart.begin()) - 1;
        s.game = int(g);
        s.pos = int(flat) - gameStart[g];
        s.probability = std::pow(priorities_[g][size_t(s.pos)] + config_.priorityEps, config_.alpha) / total;
        s.weight = std::pow(double(transitions_) * s.probability, -beta);
        maxW = std::max(maxW, s.weight);
    }
    for (auto& s : out) s.weight /= maxW;
    return out;
}

void ReplayBuffer::updatePriorities(const std::vector<SampledPosition>& positions, const std::vector<double>& priorities) {
    if (positions.size() != priorities.size()) throw Error("replay: priorities do not match the sampled positions");
    for (size_t i = 0; i < positions.size(); ++i) {
        const auto& s = positions[i];
        if (s.game < 0 || size_t(s.game) >= games_.size() || s.pos < 0 || s.pos >= games_[size_t(s.game)].length())
            throw Error("replay: priority update for a position outside the buffer");
        const double p = std::isfinite(priorities[i]) ? std::max(priorities[i], 0.0) : maxPriority();
        priorities_[size_t(s.game)][size_t(s.pos)] = p;
    }
}

PositionTargets ReplayBuffer::targets(int game, int pos, std::mt19937_64& rng) const {
    const GameHistory& g = games_.at(size_t(game));
    const int T = g.length();
    const int K = config_.unroll, n = config_.tdSteps, A = g.numActions;
    const double gamma = config_.discount;
    if (pos < 0 || pos >= T) throw Error("replay: position outside the game");
    PositionTargets r;
    r.actions.resize(size_t(K));
    r.valuePrefix.resize(size_t(K));
    r.valueIndex.assign(size_t(K + 1), -1);
    r.valueRewardPart.assign(size_t(K + 1), 0.f);
    r.valueDiscount.assign(size_t(K + 1), 0.f);
    r.policy.assign(size_t((K + 1) * A), 0.f);
    r.mask.assign(size_t(K + 1), 0.f);
    std::uniform_int_distribution<int> randomAction(0, A - 1);
    for (int k = 0; k < K; ++k) {
        const int t = pos + k;
        r.actions[size_t(k)] = t < T ? g.actions[size_t(t)] : randomAction(rng);
    }
    // Value prefix after step k (k = 0..K-1): rewards since the last reset, reset every horizon.
    double prefix = 0;
    for (int k = 0; k < K; ++k) {
        if (k % config_.lstmHorizon == 0) prefix = 0;
        const int t = pos + k;
        if (t < T) prefix += g.rewards[size_t(t)];
        r.valuePrefix[size_t(k)] = float(prefix);
    }
    for (int k = 0; k <= K; ++k) {
        const int t = pos + k;
        if (t >= T) continue;  // past the end: value 0, no policy, masked
        r.mask[size_t(k)] = 1.f;
        std::copy(g.policies.begin() + long(t) * A, g.policies.begin() + long(t + 1) * A, r.policy.begin() + long(k) * A);
        const int boot = t + n;
        const int last = std::min(boot, T);
        double sum = 0, disc = 1;
        for (int i = t; i < last; ++i) {
            sum += disc * g.rewards[size_t(i)];
            disc *= gamma;
        }
        r.valueRewardPart[size_t(k)] = float(sum);
        if (boot < T) {
            r.valueIndex[size_t(k)] = boot;
            r.valueDiscount[size_t(k)] = float(disc);
        } else if (g.done && !g.terminal) {
            r.valueIndex[size_t(k)] = T;  // truncated: bootstrap from the last observation
            r.valueDiscount[size_t(k)] = float(disc);
        }
    }
    return r;
}

} // namespace glimpse::rl
