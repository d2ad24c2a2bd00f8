#include "app/efficientzero/trainer.h"

#include <filesystem>

#include "core/error.h"
#include "core/models/efficientzero/train.h"
#include "core/util/json_file.h"

namespace glimpse::app {

TrainingJob::Runner efficientZeroRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        nlohmann::json j = nlohmann::json::object();
        if (!spec.configPath.isEmpty()) {
            const std::string path = spec.configPath.toStdString();
            j = readJsonFile(path, "config file");
            if (!j.is_object()) throw Error(path + ": not a JSON object");
        }
        j["env"] = spec.dataSpec.toStdString();   // the panel's Dataset field names the game
        const auto cfg = efficientzero::TrainConfig::fromJson(j);
        // trainAgent resumes whenever state.h5 exists; the panel keeps Start and Resume apart.
        const std::string state = (std::filesystem::path(spec.outDir.toStdString()) / "state.h5").string();
        const bool have = std::filesystem::exists(state);
        if (have && !spec.resume)
            throw Error(spec.outDir.toStdString() +
                        " already holds an EfficientZero run (state.h5): Resume continues it, or choose another "
                        "output directory");
        if (!have && spec.resume) throw Error(state + ": no EfficientZero training state to resume from");
        efficientzero::trainAgent(cfg, spec.outDir.toStdString(), &control, progress);
    };
}

} // namespace glimpse::app
