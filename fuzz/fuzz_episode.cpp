// Fuzz target: recorded episodes (rl::readEpisode, describeEpisode, replay::EpisodeReader with
// its per-step accessors, frames and observations).
#include <torch/torch.h>

#include "core/info.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

namespace {
void readAll(const std::string& path) {
    replay::EpisodeReader r(path);
    const int64_t T = r.length();
    for (int s = 0; s < 6; ++s)
        if (r.has(replay::Series(s))) (void)r.series(replay::Series(s));
    for (int p = 0; p < 4; ++p)
        if (r.has(replay::PerAction(p)) && T > 0) (void)r.perAction(replay::PerAction(p), T - 1);
    (void)r.nextReward(-1);
    (void)r.previousLifeLoss(T);
    (void)r.nextTerminal(-1);
    (void)r.totalReturn();
    if (T > 0) {
        (void)r.actionName(T - 1);
        (void)r.frame(0);
        (void)r.frame(T - 1);
        if (r.hasObservations()) (void)r.observation(T - 1);
    }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("episode.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)rl::readEpisode(path); });
    fuzz::expectClearError([&] { (void)describeEpisode(path); });
    fuzz::expectClearError([&] { readAll(path); });
    return 0;
}
