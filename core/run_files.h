#pragma once
// Where a training run's log is. `glimpse train` writes RUN/run.h5 for LETR, CoaT and
// ConstellationNet and RUN/runlog.h5 for EfficientZero and XTRA (docs/decisions.md "One rule
// for the command line"): the openers (--run, FILE, Open run...) accept the run folder and
// either name.
#include <string>
#include <vector>

namespace glimpse {

// The run log names a run folder may hold, in the order they are looked for.
const std::vector<std::string>& runLogNames();

// `path` itself when it is an existing file; for a folder, the run log in it; for a missing
// RUN/run.h5 or RUN/runlog.h5, the other name beside it when that exists; else `path`
// unchanged (its opener then reports it missing).
std::string findRunLog(const std::string& path);

} // namespace glimpse
