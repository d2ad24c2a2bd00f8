#include "app/letr/trainer.h"

#include "core/models/letr/train.h"

namespace glimpse::app {

TrainingJob::Runner letrRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        const letr::LetrTrainConfig cfg = spec.configPath.isEmpty()
                                              ? letr::LetrTrainConfig{}
                                              : letr::LetrTrainConfig::fromFile(spec.configPath.toStdString());
        letr::trainLetr(cfg, spec.dataSpec.toStdString(), spec.outDir.toStdString(), spec.resume, control,
                        progress);
    };
}

} // namespace glimpse::app
