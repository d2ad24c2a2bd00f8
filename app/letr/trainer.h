#pragma once
// The Training panel's LETR trainer: letr::trainLetr on the job's worker thread.
#include "app/training/training_job.h"

namespace glimpse::app {

// Loads the config JSON (empty path: LetrTrainConfig defaults) and calls trainLetr.
TrainingJob::Runner letrRunner();

} // namespace glimpse::app
