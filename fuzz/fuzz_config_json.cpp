// Fuzz target: the JSON config parsers of every family (model and training configs), as the CLI
// and the checkpoints use them. The first byte picks the parser, the rest is the JSON text.
#include <string>

#include <torch/torch.h>

#include "core/models/coat/config.h"
#include "core/models/coat/train.h"
#include "core/models/constellation/config.h"
#include "core/models/constellation/train.h"
#include "core/models/efficientzero/config.h"
#include "core/models/efficientzero/train.h"
#include "core/models/letr/config.h"
#include "core/models/letr/train.h"
#include "core/util/json_file.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int which = data[0] % 8;
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    fuzz::expectClearError(
        [&] {
            switch (which) {
            case 0: (void)letr::LetrConfig::fromJsonString(text, "fuzz"); break;
            case 1: (void)coat::CoatConfig::fromJsonString(text, "fuzz"); break;
            case 2: (void)constellation::ConstellationConfig::fromJsonString(text, "fuzz"); break;
            case 3: (void)efficientzero::Config::fromJson(parseJsonText(text, "fuzz")); break;
            case 4: (void)letr::LetrTrainConfig::fromJson(parseJsonText(text, "fuzz"), "fuzz"); break;
            case 5: (void)coat::CoatTrainConfig::fromJson(parseJsonText(text, "fuzz"), "fuzz"); break;
            case 6: (void)constellation::ConstellationTrainConfig::fromJson(parseJsonText(text, "fuzz"), "fuzz"); break;
            default: (void)efficientzero::TrainConfig::fromJson(parseJsonText(text, "fuzz")); break;
            }
        },
        false);
    return 0;
}
