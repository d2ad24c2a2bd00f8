// EfficientZero's headless commands (Qt-free; app/cli/command.h).
#include "app/cli/command.h"
#include "app/efficientzero/cli.h"

namespace glimpse::cli {

std::vector<app::Command> efficientZeroCommands() {
    return {
        {"train", "efficientzero", "--env NAME --steps S --out RUN", "train EfficientZero on a game",
            cli::trainEfficientZero},
        {"play", "", "--checkpoint C --env NAME [--record DIR]", "evaluate (and record) episodes", cli::play},
        {"eval", "worldmodel", "EPISODE.h5 [--checkpoint C] [--depth K]",
            "imagined reward and value against the episode, per depth (vs untrained)", cli::evalWorldModel},
    };
}

} // namespace glimpse::cli
