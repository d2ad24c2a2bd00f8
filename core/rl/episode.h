#pragma once
// Recorded episodes in HDF5 (kind "glimpse.episode", format version 1; layout in
// docs/formats.md "Episode"): rendered frames, observations, actions, rewards, lives and,
// optionally, what a model predicted and what its search did at every step. Any source can
// write this format (the built-in games, or e.g. Atari frames from ALE) through Episode.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace glimpse::rl {

struct EpisodeModel {
    std::string family;          // e.g. "efficientzero"
    std::string checkpoint;      // path of the checkpoint used
    std::string config;          // the model config, JSON
    int64_t simulations = 0;
    torch::Tensor rootValues;    // float32 [T]
    torch::Tensor visitCounts;   // int32 [T, A]
    torch::Tensor value;         // float32 [T]
    torch::Tensor valuePrefix;   // float32 [T]
    torch::Tensor policy;        // float32 [T, A]
};

struct Episode {
    std::string env;
    int64_t seed = 0;
    int64_t frameSkip = 1, maxEpisodeSteps = 0;
    double stickyActionProb = 0;
    std::vector<std::string> actionNames;   // A
    std::vector<std::string> channelNames;  // C
    double episodeReturn = 0;
    bool terminal = false;
    torch::Tensor frames;        // uint8 [T, H, W, 3] RGB
    torch::Tensor observations;  // float32 [T, C, h, w]
    torch::Tensor actions;       // int64 [T]
    torch::Tensor rewards;       // float32 [T]
    torch::Tensor lives;         // int32 [T]
    bool hasModel = false;
    EpisodeModel model;

    int64_t length() const { return actions.defined() ? actions.size(0) : 0; }
};

// Throws glimpse::Error (naming `where`) when lengths, dtypes or shapes disagree.
void validateEpisode(const Episode& e, const std::string& where);
// Atomic write (temp file + rename); frames are chunked per frame and compressed.
void writeEpisode(const std::string& path, const Episode& e);
// Reads and validates; errors name the file and the problem.
Episode readEpisode(const std::string& path);

} // namespace glimpse::rl
