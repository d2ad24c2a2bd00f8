#include "app/constellation/trainer.h"

#include "core/models/constellation/train.h"

namespace glimpse::app {

TrainingJob::Runner constellationRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        using constellation::ConstellationTrainConfig;
        const ConstellationTrainConfig cfg = spec.configPath.isEmpty()
                                                 ? ConstellationTrainConfig{}
                                                 : ConstellationTrainConfig::fromFile(spec.configPath.toStdString());
        constellation::trainConstellation(cfg, spec.dataSpec.toStdString(), spec.outDir.toStdString(), spec.resume,
                                          control, progress);
    };
}

} // namespace glimpse::app
