#pragma once
// The Training panel's CoaT trainer (coat::trainCoat on the job's worker thread), and the
// runner the main window gives its TrainingJob: it picks the trainer by TrainingSpec::model.
#include "app/training/training_job.h"

namespace glimpse::app {

// Loads the config JSON (empty path: CoatTrainConfig defaults) and calls trainCoat.
TrainingJob::Runner coatRunner();
// spec.model "coat" -> coatRunner(), anything else ("letr") -> letrRunner().
TrainingJob::Runner modelRunner();

} // namespace glimpse::app
