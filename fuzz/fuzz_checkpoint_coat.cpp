// Fuzz target: CoaT checkpoints (loadCheckpoint, CoatConfig::fromJsonString, applyCheckpoint).
#include "core/models/coat/model.h"
#include "fuzz/checkpoint_target.h"
#include "fuzz/small_models.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static glimpse::coat::CoatModel model(glimpse::fuzz::smallCoat());
    return glimpse::fuzz::checkpointInput(data, size, model, "coat", [](const std::string& json, const std::string& src) {
        (void)glimpse::coat::CoatConfig::fromJsonString(json, src);
    });
}
