// Fuzz target: Minari episode import (minariEpisodes, importMinari of episode 0 into a glimpse
// episode, which is then read back with EpisodeReader).
#include <cstdio>

#include <torch/torch.h>

#include "core/replay/episode_reader.h"
#include "core/replay/import.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/import_target.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("main_data.hdf5");
    const std::string out = fuzz::tempPath("minari-out.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)replay::minariEpisodes(path); });
    fuzz::importAndReadBack(out, [&] { (void)replay::importMinari(path, out); });
    return 0;
}
