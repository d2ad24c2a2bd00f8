// Fuzz target: LETR checkpoints (loadCheckpoint, LetrConfig::fromJsonString, applyCheckpoint).
#include "core/models/letr/model.h"
#include "fuzz/checkpoint_target.h"
#include "fuzz/small_models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static glimpse::letr::LetrModel model(glimpse::fuzz::smallLetr());
    return glimpse::fuzz::checkpointInput(data, size, model, "letr", [](const std::string& json, const std::string& src) {
        (void)glimpse::letr::LetrConfig::fromJsonString(json, src);
    });
}
