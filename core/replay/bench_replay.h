#pragma once
// `glimpse bench replay`: writes a synthetic episode (Atari-like frames: flat background, moving
// sprites, a noisy patch), reopens it with EpisodeReader and measures open time, resident memory
// and frame access times (random scrubbing, sequential playback, cache hits).
#include <cstdint>
#include <functional>
#include <string>

#include "core/replay/frame_cache.h"
#include "core/rl/episode.h"

namespace glimpse::replay {

struct BenchReplayOptions {
    int64_t steps = 100000;
    int64_t height = 96, width = 96;     // RGB frames
    int64_t scrubs = 2000;               // random frame reads timed
    int64_t sequential = 1000;           // in-order frame reads timed (playback)
    size_t cacheBytes = size_t(64) << 20;
    std::string file;                    // an existing episode to measure instead of writing one
                                         // (its frames need not be synthetic); the file is kept
    std::string dir;                     // where the episode is written; "" = a temp folder
    bool keep = false;                   // keep the episode file (else it is removed)
    uint64_t seed = 1;                   // of the random scrub positions
    std::function<void(const std::string&)> log;   // progress lines (optional)
};

struct BenchReplayResult {
    std::string path;
    int64_t steps = 0, height = 0, width = 0;
    long long fileBytes = 0;
    double writeSeconds = 0;
    double openMs = 0;
    bool written = false;                // false: an existing file was measured
    long long rssStartKiB = 0, rssBeforeOpenKiB = 0, rssAfterOpenKiB = 0, rssAfterScrubKiB = 0, peakRssKiB = 0;
    double scrubP50Ms = 0, scrubP95Ms = 0, scrubMaxMs = 0;        // random frames (cache misses mostly)
    double sequentialP50Ms = 0, sequentialP95Ms = 0;               // frames t, t+1, ...
    double cachedP50Ms = 0, cachedP95Ms = 0;                       // frames already in the cache
    CacheStats cache;                                              // after the scrub
};

// The synthetic frame of step t (uint8 H x W x 3 into `out`), as written by benchReplay.
void syntheticFrame(int64_t t, int64_t height, int64_t width, uint8_t* out);

// The synthetic episode benchReplay writes: 4 actions in turn, a reward every `rewardEvery`
// steps, lives counting down, EfficientZero-shaped model outputs (value, policy, visits, ...);
// its frames are syntheticFrame's.
rl::Episode syntheticEpisode(int64_t steps, const std::string& source, int64_t rewardEvery);

BenchReplayResult benchReplay(const BenchReplayOptions& options);
std::string formatBenchReplay(const BenchReplayResult& r);

} // namespace glimpse::replay
