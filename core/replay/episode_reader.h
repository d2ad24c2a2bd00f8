#pragma once
// Random access to a recorded episode (glimpse.episode, format version 1 or 2) for the replay
// viewer and the CLI. Opening reads the metadata and the small per-step arrays (actions,
// rewards, flags, model outputs) but no frames, so it takes about the same time for 100 or
// 100,000 steps. Frames are read on demand, one HDF5 chunk at a time, through a bounded LRU
// cache (64 MiB by default).
//
// Threads: every const accessor is safe from any thread; frame(), prefetch(), observation()
// and cache calls may run concurrently from several threads (file reads are serialized
// inside). A typical GUI: the UI thread calls cachedFrame(t) (never touches the file) and falls
// back to frame(t); a worker calls prefetch(t + 1, t + 16) as playback moves.
//
// Errors: a missing, foreign, truncated or inconsistent file throws glimpse::Error naming the
// file and the dataset, from the constructor; a frame that cannot be decoded (a damaged chunk)
// throws from frame() naming the file, the dataset and the step.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/replay/frame_cache.h"
#include "core/rl/episode.h"

namespace glimpse::replay {

struct ReaderOptions {
    size_t cacheBytes = size_t(64) << 20;
};

// Per-step series for strip charts (each has length() values).
enum class Series {
    Reward,        // reward of step t
    Return,        // cumulative return up to and including step t
    Value,         // the network's predicted value (model/value)
    ValuePrefix,   // predicted value prefix (model/value_prefix)
    RootValue,     // search root value (model/root_values)
    Lives,         // lives left after step t (lives)
};
// Per-action vectors at a step (each has actionNames().size() values).
enum class PerAction {
    Policy,        // network policy (model/policy)
    Visits,        // MCTS visit count of each root child (model/visit_counts)
    ChildQ,        // Q of each root child (model/children_q)
    ChildPrior,    // prior of each root child (model/children_prior)
};
const char* seriesName(Series s);        // "reward", "return", "value", "value_prefix", ...
const char* perActionName(PerAction p);  // "policy", "visits", "child_q", "child_prior"

class EpisodeReader {
public:
    explicit EpisodeReader(const std::string& path, const ReaderOptions& options = {});
    ~EpisodeReader();
    EpisodeReader(const EpisodeReader&) = delete;
    EpisodeReader& operator=(const EpisodeReader&) = delete;

    // ---- metadata ------------------------------------------------------------------------
    const std::string& path() const { return path_; }
    int64_t formatVersion() const { return version_; }
    int64_t length() const { return T_; }
    const std::string& game() const { return meta_.env; }
    const std::vector<std::string>& actionNames() const { return meta_.actionNames; }
    int64_t frameHeight() const { return H_; }
    int64_t frameWidth() const { return W_; }
    int64_t frameChannels() const { return C_; }
    bool terminal() const { return meta_.terminal; }
    bool hasModel() const { return meta_.hasModel; }
    // Every attribute and per-step tensor of the file (model family, checkpoint, config,
    // seed, ...); frames and observations are undefined here (use frame() / observation()).
    const rl::Episode& meta() const { return meta_; }

    // ---- per step (t in [0, length())); out of range throws glimpse::Error -----------------
    int64_t action(int64_t t) const;
    const std::string& actionName(int64_t t) const;
    float reward(int64_t t) const;
    double cumulativeReturn(int64_t t) const;   // sum of rewards 0..t
    double totalReturn() const;                 // sum of all rewards
    bool lifeLost(int64_t t) const;
    bool isTerminal(int64_t t) const;           // the game ended after step t

    bool has(Series s) const;
    const std::vector<float>& series(Series s) const;     // throws when not recorded
    bool has(PerAction p) const;
    std::vector<float> perAction(PerAction p, int64_t t) const;   // throws when not recorded

    // Navigation: the first step after t (the last before t) with a nonzero reward / a life
    // loss / a game end; -1 when there is none. t may be -1 (next from the start) or length().
    int64_t nextReward(int64_t t) const;
    int64_t previousReward(int64_t t) const;
    int64_t nextLifeLoss(int64_t t) const;
    int64_t previousLifeLoss(int64_t t) const;
    int64_t nextTerminal(int64_t t) const;

    // ---- the training run an episode was recorded in (recorded self-play) -------------------
    bool hasTraining() const { return meta_.hasTraining; }
    // The offline tasks whose weights were recorded (XTRA), else empty.
    const std::vector<std::string>& taskNames() const { return meta_.training.taskNames; }
    const std::vector<std::string>& taskCategories() const { return meta_.training.taskCategories; }
    // Learner updates done / the run's environment steps when step t was played (throws
    // without training information).
    int64_t trainingUpdate(int64_t t) const;
    int64_t trainingEnvSteps(int64_t t) const;
    // The task weights in force at step t (one per task), and task i's weight at every step.
    std::vector<float> taskWeights(int64_t t) const;
    std::vector<float> taskWeightSeries(int64_t task) const;

    // ---- frames ----------------------------------------------------------------------------
    // Frame t from the cache, or read from the file (and cached).
    FramePtr frame(int64_t t);
    // Frame t if cached, else nullptr; never reads the file (cheap enough for the UI thread).
    FramePtr cachedFrame(int64_t t) const;
    // Reads frames first..last (clamped) into the cache, stopping early when *cancel becomes
    // true or when the range would evict frames it just loaded; returns the frames loaded.
    int64_t prefetch(int64_t first, int64_t last, const std::atomic<bool>* cancel = nullptr);
    CacheStats cacheStats() const { return cache_.stats(); }
    void setCacheBytes(size_t bytes) { cache_.setCapacity(bytes); }

    // ---- observations (what the agent saw), read on demand, not cached ----------------------
    bool hasObservations() const { return !obsShape_.empty(); }
    std::vector<int64_t> observationShape() const { return obsShape_; }   // {C, h, w}
    torch::Tensor observation(int64_t t);   // float32 [C, h, w]

private:
    void checkStep(int64_t t, const char* what) const;
    FramePtr readFrame(int64_t t);

    std::string path_;
    int64_t version_ = 0, T_ = 0, H_ = 0, W_ = 0, C_ = 0;
    std::vector<int64_t> obsShape_;
    rl::Episode meta_;
    std::vector<int64_t> actions_;
    std::vector<double> cumulative_;
    std::vector<uint8_t> lifeLoss_, terminals_;
    std::vector<float> series_[6];
    bool hasSeries_[6] = {};
    std::vector<float> perAction_[4];
    bool hasPerAction_[4] = {};

    struct Io;
    std::unique_ptr<Io> io_;   // the open file and datasets, guarded by ioMutex_
    mutable std::mutex ioMutex_;
    FrameCache cache_;
};

} // namespace glimpse::replay
