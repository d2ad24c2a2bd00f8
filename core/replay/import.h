#pragma once
// Importing episodes recorded elsewhere into Glimpse episode files (glimpse.episode, format
// version 2), which EpisodeReader then opens like any recorded episode. Layouts read are
// documented in docs/formats.md ("Importing episodes"). Imports are atomic: a failure leaves no
// output file, and every error names the input file and the dataset, column or line at fault.
#include <cstdint>
#include <string>
#include <vector>

#include "core/rl/episode.h"

namespace glimpse::replay {

// The 18 actions of the Atari 2600 full action set, in ALE's order (NOOP, FIRE, UP, ...).
const std::vector<std::string>& aleActionNames();

// ---- Minari (HDF5 storage) --------------------------------------------------------------
struct MinariImportOptions {
    int64_t episode = 0;                   // imports group episode_<episode>
    std::string game;                      // default: dataset_id from the metadata, else the file name
    std::vector<std::string> actionNames;  // default: ALE's 18 names for Discrete(18), else "0", "1", ...
};
// `path`: a Minari main_data.hdf5, its data/ folder or the dataset folder holding data/.
// Returns the main_data.hdf5 path.
std::string findMinariFile(const std::string& path);
// The episode numbers N of the groups episode_N, ascending.
std::vector<int64_t> minariEpisodes(const std::string& path);
// Imports one episode; returns what was written (frames and observations left undefined).
rl::Episode importMinari(const std::string& path, const std::string& out, const MinariImportOptions& options = {});

// ---- a folder of PNG frames with a CSV of actions and rewards ----------------------------
struct FramesImportOptions {
    std::string csv;                       // default: the one *.csv (else *.txt) file in the folder
    std::string game;                      // default: the folder's name
    std::vector<std::string> actionNames;  // default: ALE's 18 names
    int64_t episodeId = -1;                // >= 0: only rows with this episode_id
};
rl::Episode importFrames(const std::string& dir, const std::string& out, const FramesImportOptions& options = {});

} // namespace glimpse::replay
