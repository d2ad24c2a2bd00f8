#pragma once
// Replay for EfficientZero (docs/rl.md "Replay and targets"): finished and running game
// histories, prioritized sampling of positions (priority exponent alpha, importance weights with
// exponent beta annealed from 0.4 to 1), and the unrolled training targets: n-step value targets,
// value-prefix targets with the LSTM horizon, search-policy targets and masks past the end of
// the episode. No LibTorch here: targets are plain arrays the learner turns into tensors.
#include <cstdint>
#include <random>
#include <vector>

#include "core/rl/env.h"

namespace glimpse::rl {

// One episode (or the running part of one). Frames are the single observations [C, H, W]
// stored as bytes (the grid observations are 0/1); frame t is the observation before action t,
// frame T the one after the last action. The stacked observation at t repeats frame 0 for
// positions before the start.
struct GameHistory {
    ObsShape frame;
    int numActions = 0;
    std::vector<uint8_t> frames;        // (T + 1) * frame.numel()
    std::vector<int> actions;           // T
    std::vector<float> rewards;         // T
    std::vector<float> rootValues;      // T: search root value when the action was chosen
    std::vector<float> policies;        // T * numActions: search visit distribution
    bool terminal = false;              // the game ended (no bootstrap past the end)
    bool done = false;                  // finished (terminal or truncated)

    int length() const { return int(actions.size()); }
    int64_t frameCount() const { return frame.numel() > 0 ? int64_t(frames.size()) / frame.numel() : 0; }
    void addFrame(const float* obs);    // appends one frame (values rounded to bytes)
    // Writes the stack of `stack` frames ending at frame t into dst (stack * C*H*W floats).
    void stackedInto(int t, int stack, float* dst) const;
};

struct ReplayConfig {
    int64_t capacity = 100000;    // transitions; the oldest games are dropped beyond it
    double alpha = 0.6;           // priority exponent
    double betaStart = 0.4;       // importance-weight exponent, annealed linearly to 1
    double priorityEps = 1e-6;
    int unroll = 5;
    int tdSteps = 5;
    double discount = 0.997;
    int lstmHorizon = 5;
};

struct SampledPosition {
    int game = 0;                 // index into games()
    int pos = 0;                  // step within the game
    double probability = 0;       // P(i)
    double weight = 0;            // (N P(i))^-beta / max over the batch
};

// Targets of one sampled position for unroll steps k = 0..K (K = config.unroll).
struct PositionTargets {
    std::vector<int> actions;             // K: a_{t+k}, random past the end
    std::vector<float> valuePrefix;       // K: prefix after k + 1 steps (reset every horizon)
    std::vector<int> valueIndex;          // K + 1: step whose bootstrap value is needed (-1: none)
    std::vector<float> valueRewardPart;   // K + 1: discounted reward sum of the n-step target
    std::vector<float> valueDiscount;     // K + 1: discount applied to the bootstrap value
    std::vector<float> policy;            // (K + 1) * A: visit distribution, zeros past the end
    std::vector<float> mask;              // K + 1: 1 while t + k < T
};

class ReplayBuffer {
public:
    explicit ReplayBuffer(const ReplayConfig& config = {});
    const ReplayConfig& config() const { return config_; }

    // Adds a (finished or partial) game; its positions get maxPriority().
    // `priorities` (T values) may be given, e.g. when restoring a buffer.
    void add(GameHistory game, const std::vector<double>& priorities = {});
    const std::vector<GameHistory>& games() const { return games_; }
    int64_t transitions() const { return transitions_; }
    int64_t totalAdded() const { return totalAdded_; }
    void setTotalAdded(int64_t n) { totalAdded_ = n; }
    const std::vector<double>& priorities(int game) const { return priorities_.at(size_t(game)); }
    // The largest priority of the positions held now; 1 for an empty buffer.
    double maxPriority() const;

    // beta for training progress in [0, 1]: betaStart + (1 - betaStart) * progress.
    double beta(double progress) const;
    // Samples `batch` positions with probability p_i^alpha / sum p^alpha: distinct positions
    // (successive draws among those not yet taken) when the buffer holds at least `batch`,
    // with replacement otherwise. probability is P(i) of the whole distribution.
    std::vector<SampledPosition> sample(int batch, double beta, std::mt19937_64& rng) const;
    // New priorities (|predicted value - target| before the exponent).
    void updatePriorities(const std::vector<SampledPosition>& positions, const std::vector<double>& priorities);

    // n-step targets of one position; the value of step valueIndex[k] of the same game is to be
    // supplied by the caller (stored root value or a target-network reanalysis).
    PositionTargets targets(int game, int pos, std::mt19937_64& rng) const;

private:
    void evict();

    ReplayConfig config_;
    std::vector<GameHistory> games_;
    std::vector<std::vector<double>> priorities_;  // raw priorities per position
    int64_t transitions_ = 0;
    int64_t totalAdded_ = 0;
};

} // namespace glimpse::rl
