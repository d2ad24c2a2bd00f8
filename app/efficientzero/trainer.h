#pragma once
// The Training panel's EfficientZero trainer: self-play training on the job's worker thread.
#include "app/training/training_job.h"

namespace glimpse::app {

// The config JSON (efficientzero::TrainConfig keys) with "env" taken from the spec's dataSpec
// (a game name); Start refuses a folder that already holds a run (state.h5) and Resume one
// that does not.
TrainingJob::Runner efficientZeroRunner();

} // namespace glimpse::app
