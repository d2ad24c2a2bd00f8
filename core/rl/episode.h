#pragma once
// Recorded episodes in HDF5 (kind "glimpse.episode"; layout in docs/formats.md "Episode").
// Format version 2 (written since the replay viewer): frames chunked a few per chunk and
// compressed, per-step flags (terminals, life losses), optional observations, lives and model
// outputs. Version 1 files (`glimpse play --record` before version 2) are still read.
//
// Any source can write this format (the built-in games, ALE frames, imported datasets) through
// Episode + writeEpisode. An episode too large for memory is written with a FrameSource that
// produces frames in batches. For viewing, core/replay/episode_reader.h opens a file without
// loading its frames.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace glimpse::h5 {
class File;
}

namespace glimpse::rl {

constexpr const char* kEpisodeKind = "glimpse.episode";
constexpr int64_t kEpisodeVersion = 2;   // the version written; 1 and 2 are read
// The largest frame (and observation map) side written or read: larger ones are refused.
constexpr int64_t kMaxFrameSide = 8192;

struct EpisodeModel {
    std::string family;          // e.g. "efficientzero"
    std::string checkpoint;      // path of the checkpoint used
    std::string config;          // the model config, JSON
    int64_t simulations = 0;
    // Each optional in version 2 (undefined: not recorded); version 1 files have the first five.
    torch::Tensor rootValues;    // float32 [T]: value of the search root
    torch::Tensor visitCounts;   // int32 [T, A]: visits of the root's children
    torch::Tensor value;         // float32 [T]: the network's predicted value
    torch::Tensor valuePrefix;   // float32 [T]
    torch::Tensor policy;        // float32 [T, A]: softmax of the policy logits
    torch::Tensor childrenQ;     // float32 [T, A]: Q of the root's children (0 if unvisited)
    torch::Tensor childrenPrior; // float32 [T, A]: prior of the root's children
};

// Where an episode was played during a training run (self-play recorded by the trainer,
// EfficientZero's `record_interval`): the learner's update count and the run's environment
// steps at each step and, for XTRA finetuning, the offline tasks' weights in force then.
struct EpisodeTraining {
    std::string run;             // the run folder
    std::string trainer;         // "efficientzero" or "xtra"
    torch::Tensor updates;       // int64 [T]: learner updates done before step t was played
    torch::Tensor envSteps;      // int64 [T]: the run's environment steps before step t
    std::vector<std::string> taskNames;       // m offline tasks (XTRA), else empty
    std::vector<std::string> taskCategories;  // m ("shooter", "maze", ...) or empty
    torch::Tensor taskWeights;   // float32 [T, m] (defined when m > 0)
};

struct Episode {
    std::string env;             // game name, e.g. "breakout"
    std::string source;          // where it came from ("glimpse play", "minari:F#episode_3", ...)
    int64_t seed = 0;
    int64_t frameSkip = 1, maxEpisodeSteps = 0;
    double stickyActionProb = 0;
    std::vector<std::string> actionNames;   // A
    std::vector<std::string> channelNames;  // C of the observations (empty without them)
    double episodeReturn = 0;
    bool terminal = false;       // the game ended (else the recording was cut: truncated)
    torch::Tensor frames;        // uint8 [T, H, W, C], C = 3 (RGB) or 1 (grey)
    torch::Tensor observations;  // optional: float32 [T, C, h, w], what the agent saw
    torch::Tensor actions;       // int64 [T]
    torch::Tensor rewards;       // float32 [T]
    torch::Tensor lives;         // optional: int32 [T], lives left after each step
    // Optional bool [T]. terminals: the game ended after this step (default: the last step
    // when `terminal`); lifeLoss: a life was lost in this step (default: from `lives`).
    torch::Tensor terminals;
    torch::Tensor lifeLoss;
    bool hasModel = false;
    EpisodeModel model;
    bool hasTraining = false;
    EpisodeTraining training;

    int64_t length() const { return actions.defined() ? actions.size(0) : 0; }
};

// Throws glimpse::Error (naming `where`) when lengths, dtypes or shapes disagree.
void validateEpisode(const Episode& e, const std::string& where);

// Frames produced in batches, for episodes larger than memory: frames(first, count) returns
// uint8 [count, height, width, channels]; observations (optional) float32 [count, C, h, w].
struct FrameSource {
    int64_t height = 0, width = 0, channels = 3;
    std::function<torch::Tensor(int64_t first, int64_t count)> frames;
    std::vector<int64_t> observationShape;   // {C, h, w}; empty: no observations
    std::function<torch::Tensor(int64_t first, int64_t count)> observations;
    int64_t batch = 256;                     // frames asked for at once
};

// Atomic write (temp file + rename) of format version 2; frames chunked and compressed.
void writeEpisode(const std::string& path, const Episode& e);
// Same, with e.frames / e.observations undefined and the pixels coming from `src`.
void writeEpisode(const std::string& path, const Episode& e, const FrameSource& src);
// Reads everything (frames included) and validates; errors name the file and the problem.
// For large episodes use replay::EpisodeReader instead.
Episode readEpisode(const std::string& path);

// Everything but frames and observations (left undefined) of an open episode file of format
// `version` (1 or 2), validated; the frames' and observations' dataset shapes are checked too.
Episode readEpisodeSteps(const h5::File& f, int64_t version);

// Frames per HDF5 chunk for frames of `frameBytes` bytes (about 32 KiB a chunk, 1..64 frames).
int64_t framesPerChunk(int64_t frameBytes);
// Life losses from lives after each step: step t loses a life when lives[t] < lives[t-1].
torch::Tensor lifeLossFromLives(const torch::Tensor& lives);

} // namespace glimpse::rl
