#pragma once
// The Training panel's CoaT and EfficientZero trainers (on the job's worker thread), and the
// runner the main window gives its TrainingJob: it picks the trainer by TrainingSpec::model.
#include "app/training/training_job.h"

namespace glimpse::app {

// Loads the config JSON (empty path: CoatTrainConfig defaults) and calls trainCoat.
TrainingJob::Runner coatRunner();
// The EfficientZero self-play trainer: the config JSON (efficientzero::TrainConfig keys) with
// "env" taken from the spec's dataSpec (a game name); Start refuses a folder that already holds
// a run (state.h5) and Resume one that does not.
TrainingJob::Runner efficientZeroRunner();
// spec.model "coat" -> coatRunner(), "efficientzero" -> efficientZeroRunner(), anything else
// ("letr") -> letrRunner().
TrainingJob::Runner modelRunner();

} // namespace glimpse::app
