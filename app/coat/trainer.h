#pragma once
// The Training panel's CoaT trainer: coat::trainCoat on the job's worker thread.
#include "app/training/training_job.h"

namespace glimpse::app {

// Loads the config JSON (empty path: CoatTrainConfig defaults) and calls trainCoat.
TrainingJob::Runner coatRunner();

} // namespace glimpse::app
