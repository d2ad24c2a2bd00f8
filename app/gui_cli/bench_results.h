#pragma once
// The GUI part of `glimpse bench results` (app/gui_cli/bench_results.cpp): the Results dock of
// the real main window on the results file `path` (open, sort, filter, thumbnail scrolling).
#include <string>
#include <vector>

namespace glimpse::cli {

int benchResultsGui(const std::string& path, double scrollSeconds);
// `glimpse bench results-gui --file R.h5 [--scroll-seconds S]`.
int benchResultsGuiCommand(const std::vector<std::string>& args);

} // namespace glimpse::cli
