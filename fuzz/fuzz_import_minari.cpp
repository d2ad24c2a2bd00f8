// Fuzz target: Minari episode import (minariEpisodes, importMinari of episode 0 into a glimpse
// episode, which is then read back with EpisodeReader).
#include <cstdio>

#include <torch/torch.h>

#include "core/replay/episode_reader.h"
#include "core/replay/import.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("main_data.hdf5");
    const std::string out = fuzz::tempPath("minari-out.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)replay::minariEpisodes(path); });
    bool imported = false;
    fuzz::expectClearError([&] {
        (void)replay::importMinari(path, out);
        imported = true;
    });
    if (imported) {
        // An import that succeeded must have written an episode the reader opens.
        try {
            replay::EpisodeReader r(out);
            if (r.length() > 0) (void)r.frame(r.length() - 1);
        } catch (const std::exception& e) {
            fuzz::finding("imported episode does not read back", e.what());
        }
        std::remove(out.c_str());
    }
    return 0;
}
