// LETR's headless commands (Qt-free; app/cli/command.h).
#include "app/cli/command.h"
#include "app/letr/cli.h"

namespace glimpse::cli {

std::vector<app::Command> letrCommands() {
    return {
        {"infer", "letr", "(--checkpoint C.h5 | --random-seed S) --image I --out trace.h5",
            "run LETR headless, write a trace", cli::inferLetr},
        {"infer", "mlsd", "[--checkpoint C.h5] --image I --out lines.json", "run M-LSD tiny, write its lines",
            cli::inferMlsd},
        {"bench", "letr", "[--backbone resnet50] [--checkpoint C.h5]", "time LETR stage by stage", cli::benchLetr},
        {"bench", "mlsd", "[--checkpoint C.h5] [--image I.png]", "time M-LSD tiny step by step, and LSD",
            cli::benchMlsd},
        {"train", "letr", "--data D --out RUN_DIR [--config C.json] [--resume]", "train LETR", cli::trainLetr},
        {"eval", "letr", "--checkpoint C.h5 --data D [--layers all|last]", "sAP/APH per decoder layer and LSD",
            cli::evalLetr},
        {"eval", "edges", "IMAGE... [--checkpoint C.h5] [--top K]", "do the top lines follow image edges (LETR, LSD)",
            cli::evalEdges},
    };
}

} // namespace glimpse::cli
