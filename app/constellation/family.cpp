// ConstellationNet's entry in the model-family registry (app/family.h).
#include "app/constellation/cli.h"
#include "app/constellation/trainer.h"
#include "app/family.h"

namespace glimpse::app {

ModelFamily constellationFamily() {
    ModelFamily f;
    f.name = "constellation";
    f.title = "ConstellationNet";
    f.trainer = constellationRunner();
    f.training = {"ConstellationNet (few-shot)", "", "procedural",
                  "procedural[:SEED], fashion-mnist[:DIR] or a mini-ImageNet-style folder (train/ val/ test/ class "
                  "folders)"};
    f.commands = {
        {"train", "constellation", constellation::kTrainSynopsis,
         "train ConstellationNet or its ProtoNet baseline (few-shot)", constellation::trainCommand},
        {"eval", "fewshot", constellation::kEvalSynopsis, "N-way K-shot accuracy with 95% CI",
         constellation::evalFewShotCommand},
    };
    return f;
}

} // namespace glimpse::app
