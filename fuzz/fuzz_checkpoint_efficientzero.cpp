// Fuzz target: EfficientZero checkpoints (loadCheckpoint, the config as loadNetwork parses it:
// parseJsonText + Config::fromJson, applyCheckpoint).
#include "core/models/efficientzero/model.h"
#include "core/util/json_file.h"
#include "fuzz/checkpoint_target.h"
#include "fuzz/small_models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static glimpse::efficientzero::Network net(glimpse::fuzz::smallEfficientZero());
    return glimpse::fuzz::checkpointInput(data, size, net.module(), "efficientzero", [](const std::string& json, const std::string& src) {
        (void)glimpse::efficientzero::Config::fromJson(glimpse::parseJsonText(json, src, "the checkpoint's config"));
    });
}
