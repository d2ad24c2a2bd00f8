#pragma once
// The body of the four checkpoint targets (fuzz_checkpoint_<family>.cpp): the input is written
// as a file, read with glimpse::loadCheckpoint, its /meta config parsed with the family's
// config parser, and its tensors applied to a small model of the family (built once), as
// load<Family>() does (without building a model of the file's own, possibly huge, config).
#include <string>

#include <torch/torch.h>

#include "core/io/checkpoint.h"
#include "fuzz/fuzz_util.h"

namespace glimpse::fuzz {

// ParseConfig: void(const std::string& json, const std::string& source), throws Error.
template <class ParseConfig>
int checkpointInput(const uint8_t* data, size_t size, torch::nn::Module& model, const std::string& family,
                    ParseConfig parseConfig) {
    const std::string path = tempPath("checkpoint.h5");
    writeFile(path, data, size);
    Checkpoint ck;
    bool loaded = false;
    expectClearError([&] {
        ck = loadCheckpoint(path);
        loaded = true;
    });
    if (!loaded) return 0;
    expectClearError([&] { parseConfig(ck.configJson, path); });
    expectClearError([&] { applyCheckpoint(ck, model, family, path); });
    return 0;
}

} // namespace glimpse::fuzz
