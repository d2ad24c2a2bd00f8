// XTRA's entry in the model-family registry (app/family.h): its commands. Its models are
// EfficientZero checkpoints of the shared space (their episodes open in the replay viewer).
#include "app/family.h"
#include "app/xtra/cli.h"

namespace glimpse::app {

ModelFamily xtraFamily() {
    ModelFamily f;
    f.name = "xtra";
    f.title = "XTRA";
    f.commands = {
        {"data", "offline", "--env GAME [--policy random|scripted|agent] [--epsilon E,...] --steps N --out D.h5",
         "an offline dataset for XTRA (or --from-run RUN)", cli::dataOffline},
        {"train", "xtra-pretrain", "--config C.json --out RUN", "distil EfficientZero teachers into one student (XTRA)",
         cli::trainXtraPretrain},
        {"train", "xtra", "--config C.json --out RUN", "finetune on a shared game with weighted offline tasks (XTRA)",
         cli::trainXtra},
    };
    return f;
}

} // namespace glimpse::app
