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
    f.defaultCheckpoint = "letr_demo.h5";   // loaded by main() (the demo runs LETR on its scene)
    f.trainer = letrRunner();
    f.training = {"LETR (line segments)", "letr_demo_train.json", "procedural:2000",
                  "data.json, dataset folder or procedural:COUNT[:SEED[:WxH]]"};
    f.training.preview = letrTrainingPreview;
    f.commands = {
        {"infer", "letr", "(--checkpoint C.h5 | --random-seed S) --image I --out trace.h5",
         "run LETR headless, write a trace", cli::inferLetr},
        {"bench", "letr", "[--backbone resnet50] [--checkpoint C.h5]", "time LETR stage by stage", cli::benchLetr},
        {"bench", "inspector", "[--reps R] [--kinds layer,entity]", "LETR inspector redraw times",
         cli::benchInspector},
        {"train", "letr", "--data D --out RUN_DIR [--config C.json] [--resume]", "train LETR", cli::trainLetr},
        {"eval", "letr", "--checkpoint C.h5 --data D [--layers all|last]", "sAP/APH per decoder layer and LSD",
         cli::evalLetr},
        {"eval", "edges", "IMAGE... [--checkpoint C.h5] [--top K]", "do the top lines follow image edges (LETR, LSD)",
         cli::evalEdges},
    };
    return f;
}

} // namespace glimpse::app
