// CoaT's entry in the model-family registry (app/family.h).
#include "app/coat/cli.h"
#include "app/coat/inspector.h"
#include "app/coat/trainer.h"
#include "app/family.h"

namespace glimpse::app {

TrainingPreview coatTrainingPreview(const std::string& runDir, const std::string& dataSpec);   // training_preview.cpp

ModelFamily coatFamily() {
    ModelFamily f;
    f.name = "coat";
    f.title = "CoaT";
    f.makePanel = panelFactory<CoatInspector>();
    f.runShortcut = QKeySequence("Ctrl+Shift+R");
    f.defaultCheckpoint = "coat_fmnist.h5";   // the Fashion-MNIST model, loaded on the panel's first use
    f.trainer = coatRunner();
    f.training = {"CoaT (image classification)", "coat_fmnist_train.json", "fashion-mnist",
                  "fashion-mnist, fashion-mnist:DIR or a folder of class folders"};
    f.training.preview = coatTrainingPreview;
    f.training.losses = {"loss/train", "loss/*"};
    f.training.metrics = {"val/acc", "train/acc", "val/loss", "val/*"};
    f.commands = cli::coatCommands();
    return f;
}

} // namespace glimpse::app
