// EfficientZero's entry in the model-family registry (app/family.h). It has no image
// inspector: its episodes open in the replay viewer.
#include "app/efficientzero/cli.h"
#include "app/efficientzero/trainer.h"
#include "app/family.h"

#include "core/rl/env.h"

namespace glimpse::app {

ModelFamily efficientZeroFamily() {
    ModelFamily f;
    f.name = "efficientzero";
    f.title = "EfficientZero";
    f.trainer = efficientZeroRunner();
    QString games;
    for (const auto& g : rl::envNames()) games += (games.isEmpty() ? "" : ", ") + QString::fromStdString(g);
    f.training = {"EfficientZero (game self-play)", "", "breakout", "game: " + games, "runlog.h5"};
    f.training.losses = {"loss", "loss_*"};
    f.training.metrics = {"episode_return", "normalized_score", "episode_length"};
    f.commands = cli::efficientZeroCommands();
    return f;
}

} // namespace glimpse::app
