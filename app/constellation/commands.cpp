// ConstellationNet's headless commands (Qt-free; app/cli/command.h).
#include "app/cli/command.h"
#include "app/constellation/cli.h"

namespace glimpse::cli {

std::vector<app::Command> constellationCommands() {
    return {
        {"train", "constellation", app::constellation::kTrainSynopsis,
            "train ConstellationNet or its ProtoNet baseline (few-shot)", app::constellation::trainCommand},
        {"eval", "fewshot", app::constellation::kEvalSynopsis, "N-way K-shot accuracy with 95% CI",
            app::constellation::evalFewShotCommand},
        {"infer", "constellation", app::constellation::kInferSynopsis,
            "ConstellationNet cluster maps, top-5, traces", app::constellation::inferCommand},
        {"bench", "constellation", app::constellation::kBenchSynopsis,
            "ConstellationNet vs baseline forward/training images/s", app::constellation::benchCommand},
    };
}

} // namespace glimpse::cli
