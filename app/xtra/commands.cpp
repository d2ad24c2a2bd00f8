// XTRA's headless commands (Qt-free; app/cli/command.h).
#include "app/cli/command.h"
#include "app/xtra/cli.h"

namespace glimpse::cli {

std::vector<app::Command> xtraCommands() {
    return {
        {"data", "offline", "--env GAME [--policy random|scripted|agent] [--epsilon E,...] --steps N --out D.h5",
            "an offline dataset for XTRA (or --from-run RUN)", cli::dataOffline},
        {"train", "xtra-pretrain", "--config C.json --out RUN", "distil EfficientZero teachers into one student (XTRA)",
            cli::trainXtraPretrain},
        {"train", "xtra", "--config C.json --out RUN", "finetune on a shared game with weighted offline tasks (XTRA)",
            cli::trainXtra},
    };
}

} // namespace glimpse::cli
