#pragma once
// The Training panel's ConstellationNet trainer: constellation::trainConstellation on the job's
// worker thread.
#include "app/training/training_job.h"

namespace glimpse::app {

// Loads the config JSON (empty path: ConstellationTrainConfig defaults) and trains.
TrainingJob::Runner constellationRunner();

} // namespace glimpse::app
