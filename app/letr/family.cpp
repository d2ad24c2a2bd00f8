// LETR's entry in the model-family registry (app/family.h).
#include "app/family.h"
#include "app/letr/cli.h"
#include "app/letr/inspector.h"
#include "app/letr/trainer.h"

namespace glimpse::app {

TrainingPreview letrTrainingPreview(const std::string& runDir, const std::string& dataSpec);   // training_preview.cpp

ModelFamily letrFamily() {
    ModelFamily f;
    f.name = "letr";
    f.title = "LETR";
    f.makePanel = panelFactory<LetrInspector>();
    f.runShortcut = QKeySequence("Ctrl+R");
    f.defaultCheckpoint = "letr_demo.h5";   // loaded for the demo scene, else on the panel's first use
    f.trainer = letrRunner();
    f.training = {"LETR (line segments)", "letr_demo_train.json", "procedural:2000",
                  "data.json, dataset folder, procedural:COUNT[:SEED[:WxH[:SCENES]]], lsd:PHOTOS, mlsd:PHOTOS or mix:A+B"};
    f.training.preview = letrTrainingPreview;
    f.training.losses = {"loss/total", "loss/*"};
    f.training.metrics = {"val/sAP10", "val/sAP15", "val/APH", "val/*"};
    f.commands = cli::letrCommands();
    for (auto& c : cli::guiCommands())   // bench inspector
        if (c.subject == "inspector") f.commands.push_back(c);
    return f;
}

} // namespace glimpse::app
