#pragma once
// Replay subcommands (issue 17): `glimpse bench replay` and `glimpse data import-episode`.
// Same contract as app/cli/cli.h: args after the subcommand name; returns 0 success,
// 1 failure (message on stderr), 2 bad usage.
#include <string>
#include <vector>

namespace glimpse::cli {

// glimpse bench replay [--steps N] [--size S] [--scrubs K] [--cache-mb M] [--dir DIR] [--keep]
int benchReplay(const std::vector<std::string>& args);
// glimpse data import-episode --minari F.hdf5 [--episode N] --out E.h5 ...
// glimpse data import-episode --frames DIR [--csv F.csv] [--episode-id N] --out E.h5 ...
int importEpisode(const std::vector<std::string>& args);

extern const char* kBenchReplayUsage;
extern const char* kImportEpisodeUsage;

} // namespace glimpse::cli
