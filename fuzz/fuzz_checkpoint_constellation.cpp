// Fuzz target: ConstellationNet checkpoints (loadCheckpoint, ConstellationConfig::fromJsonString,
// applyCheckpoint).
#include "core/models/constellation/model.h"
#include "fuzz/checkpoint_target.h"
#include "fuzz/small_models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static glimpse::constellation::ConstellationModel model(glimpse::fuzz::smallConstellation());
    return glimpse::fuzz::checkpointInput(data, size, model, "constellation", [](const std::string& json, const std::string& src) {
        (void)glimpse::constellation::ConstellationConfig::fromJsonString(json, src);
    });
}
