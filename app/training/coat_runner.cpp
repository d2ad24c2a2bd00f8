#include "app/training/coat_runner.h"

#include "app/training/letr_runner.h"
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/models/coat/train.h"
#include "core/models/efficientzero/train.h"

namespace glimpse::app {

TrainingJob::Runner coatRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        const coat::CoatTrainConfig cfg = spec.configPath.isEmpty()
                                              ? coat::CoatTrainConfig{}
                                              : coat::CoatTrainConfig::fromFile(spec.configPath.toStdString());
        coat::trainCoat(cfg, spec.dataSpec.toStdString(), spec.outDir.toStdString(), spec.resume, control, progress);
    };
}

TrainingJob::Runner efficientZeroRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        nlohmann::json j = nlohmann::json::object();
        if (!spec.configPath.isEmpty()) {
            const std::string path = spec.configPath.toStdString();
            std::ifstream in(path);
            if (!in) throw Error(path + ": cannot open the config file");
            j = nlohmann::json::parse(in, nullptr, false);
            if (j.is_discarded() || !j.is_object()) throw Error(path + ": not a JSON object");
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

TrainingJob::Runner modelRunner() {
    return [letr = letrRunner(), coat = coatRunner(), ez = efficientZeroRunner()](
               const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        if (spec.model == "coat") coat(spec, control, progress);
        else if (spec.model == "efficientzero") ez(spec, control, progress);
        else letr(spec, control, progress);
    };
}

} // namespace glimpse::app
