#pragma once
// The Training panel's LETR trainer: letr::trainLetr on the job's worker thread.
#include "app/training/training_job.h"

namespace glimpse::app {

// An empty Runner when this build has no LETR trainer (the panel then disables Start).
TrainingJob::Runner letrRunner();

} // namespace glimpse::app
