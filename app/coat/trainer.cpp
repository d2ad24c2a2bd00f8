#include "app/coat/trainer.h"

#include "core/models/coat/train.h"

namespace glimpse::app {

TrainingJob::Runner coatRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        const coat::CoatTrainConfig cfg = spec.configPath.isEmpty()
                                              ? coat::CoatTrainConfig{}
                                              : coat::CoatTrainConfig::fromFile(spec.configPath.toStdString());
        coat::trainCoat(cfg, spec.dataSpec.toStdString(), spec.outDir.toStdString(), spec.resume, control, progress);
    };
}

} // namespace glimpse::app
