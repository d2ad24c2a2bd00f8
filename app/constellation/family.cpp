// ConstellationNet's entry in the model-family registry (app/family.h).
#include "app/constellation/cli.h"
#include "app/constellation/inspector.h"
#include "app/constellation/trainer.h"
#include "app/family.h"

namespace glimpse::app {

TrainingPreview constellationTrainingPreview(const std::string& runDir, const std::string& dataSpec);   // training_preview.cpp

ModelFamily constellationFamily() {
    ModelFamily f;
    f.name = "constellation";
    f.title = "ConstellationNet";
    f.makePanel = panelFactory<ConstellationInspector>();
    f.runShortcut = QKeySequence("Ctrl+Alt+R");
    // The small procedural few-shot model (< 1 MB): loaded on the panel's first use (first
    // shown or raised, or a run) when installed.
    f.defaultCheckpoint = "constellation_demo.h5";
    f.trainer = constellationRunner();
    f.training = {"ConstellationNet (few-shot)", "", "procedural",
                  "procedural[:SEED], composition[:SEED], fashion-mnist[:DIR] or a mini-ImageNet-style folder "
                  "(train/ val/ test/ class folders)"};
    f.training.preview = constellationTrainingPreview;
    f.training.losses = {"loss/train", "loss/*"};
    f.training.metrics = {"val/acc", "val/ci95", "train/acc", "val/*"};
    f.commands = cli::constellationCommands();
    return f;
}

} // namespace glimpse::app
