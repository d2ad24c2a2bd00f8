#pragma once
// EfficientZero network sizes (docs/rl.md, docs/models.md "EfficientZero"), read from and written
// to JSON. Two presets: atari() is the paper's network (4 stacked 96x96 RGB frames, 64x6x6
// latent state); grid() is the CPU-sized network for the arcade suite (no downsampling).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glimpse::efficientzero {

struct Config {
    // Observation: `stack` frames of channels x height x width, multiplied by obsScale.
    int obsChannels = 3, obsHeight = 96, obsWidth = 96, stack = 4;
    float obsScale = 1.f / 255.f;
    int numActions = 18;
    // Action input of the dynamics: false = one plane filled with a / |A| (the paper and the
    // reference checkpoints); true = |A| one-hot planes, which give the actions no order (with the
    // scalar plane an untrained dynamics makes Q monotone in the action index; docs/rl.md).
    bool oneHotActions = false;
    int actionPlanes() const { return oneHotActions ? numActions : 1; }
    bool downsample = true;      // the strided Atari stem down to H/16 x W/16
    int channels = 64;           // latent state planes
    int blocks = 1;              // residual blocks after the stem, in dynamics and prediction
    int downsampleBlocks = 1;    // residual blocks per stage inside the downsampling stem
    int reducedChannelsReward = 16, reducedChannelsValue = 16, reducedChannelsPolicy = 16;
    int lstmHidden = 512;
    std::vector<int> rewardHidden{32}, valueHidden{32}, policyHidden{32};
    int supportSize = 300;       // categorical supports over [-supportSize, supportSize]
    int projHidden = 1024, projOut = 1024, predHidden = 512;  // consistency projection / head

    static Config atari(int numActions);
    static Config grid(int obsChannels, int obsHeight, int obsWidth, int numActions);

    int inputChannels() const { return obsChannels * stack; }
    int supportBins() const { return 2 * supportSize + 1; }
    int stateHeight() const;     // latent state resolution
    int stateWidth() const;
    int64_t stateNumel() const { return int64_t(channels) * stateHeight() * stateWidth(); }

    // Throws glimpse::Error naming the offending field.
    void validate() const;
    nlohmann::json toJson() const;
    // Missing keys keep their defaults; unknown keys and wrong types are errors.
    static Config fromJson(const nlohmann::json& j);
};

} // namespace glimpse::efficientzero
