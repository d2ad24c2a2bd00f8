#include "app/training/letr_runner.h"

namespace glimpse::app {

// letr::trainLetr (core/models/letr/train.h) is not on this branch yet.
TrainingJob::Runner letrRunner() { return {}; }

} // namespace glimpse::app
