#pragma once
// Results files on the command line (issue 53): what the evals' --out share, and
// `glimpse bench results` (a synthetic LETR results file of the size through the real
// writer: size, open time, per-sample column sort / filter times).
#include <string>
#include <vector>

namespace glimpse::cli {

// "glimpse eval letr --checkpoint c.h5 ...": the command line a results file records
// (arguments with spaces or quotes single-quoted).
std::string commandLine(const std::string& prefix, const std::vector<std::string>& args);
// Refuses (glimpse::Error naming the option) an output path whose folder does not exist or
// that is a folder, before an eval spends its time.
void checkOutputFolder(const std::string& path, const std::string& option);

int benchResults(const std::vector<std::string>& args);

} // namespace glimpse::cli
