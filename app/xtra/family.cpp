// XTRA's entry in the model-family registry (app/family.h): its commands. Its models are
// EfficientZero checkpoints of the shared space (their episodes open in the replay viewer).
#include <filesystem>

#include "app/family.h"
#include "app/xtra/cli.h"
#include "core/error.h"
#include "core/models/xtra/finetune.h"
#include "core/util/json_file.h"

namespace glimpse::app {

namespace {

// The Training panel's XTRA finetuning: the config file holds the offline tasks and the student
// (docs/xtra.md); the Dataset field names the target game (shared:GAME).
TrainingJob::Runner xtraRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        nlohmann::json j = nlohmann::json::object();
        std::string source = "the Training panel's settings";
        if (!spec.configPath.isEmpty()) {
            source = spec.configPath.toStdString();
            j = readJsonFile(source, "xtra config");
            if (!j.is_object()) throw Error(source + ": not a JSON object");
        }
        if (!spec.dataSpec.isEmpty()) j["env"] = spec.dataSpec.toStdString();
        const auto cfg = xtra::FinetuneConfig::fromJson(j, source);
        const std::string state = (std::filesystem::path(spec.outDir.toStdString()) / "state.h5").string();
        const bool have = std::filesystem::exists(state);
        if (have && !spec.resume)
            throw Error(spec.outDir.toStdString() +
                        " already holds a run (state.h5): Resume continues it, or choose another output directory");
        if (!have && spec.resume) throw Error(state + ": no training state to resume from");
        xtra::finetune(cfg, spec.outDir.toStdString(), &control, progress);
    };
}

} // namespace

ModelFamily xtraFamily() {
    ModelFamily f;
    f.name = "xtra";
    f.title = "XTRA";
    f.trainer = xtraRunner();
    f.training = {"XTRA (finetune with offline tasks)", "", "shared:demon",
                  "target game in the shared space (shared:GAME); the config file lists the offline tasks and the student",
                  "runlog.h5"};
    // The offline tasks' charts group by quantity, one line per game (the Training panel).
    f.training.losses = {"loss", "loss_offline", "task losses", "task policy losses", "loss_*"};
    f.training.metrics = {"episode_return", "normalized_score", "episode_length"};
    f.training.tasks = {"task weights", "task similarities"};
    f.commands = cli::xtraCommands();
    return f;
}

} // namespace glimpse::app
