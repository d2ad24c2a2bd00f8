#pragma once
// Reinforcement-learning environments (docs/rl.md): the Env interface, the registry of the
// built-in arcade suite, and VecEnv, which steps K environments with auto-reset and frame
// stacking. Headless: no Qt, no LibTorch in this header.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace glimpse::rl {

struct ObsShape {
    int channels = 0, height = 0, width = 0;
    int64_t numel() const { return int64_t(channels) * height * width; }
};

struct StepResult {
    float reward = 0.f;      // summed over the skipped frames
    bool terminal = false;   // the game ended (no lives left, or the game's own end)
    bool truncated = false;  // the episode step limit was reached first
    int lives = 0;           // lives left after the step
    bool done() const { return terminal || truncated; }
};

struct EnvOptions {
    // Agent steps per episode; reaching it ends the episode with truncated = true. 0: no limit.
    int maxEpisodeSteps = 1000;
    // ALE-style sticky actions: every frame repeats the previously executed action with this
    // probability instead of the chosen one (ALE v5 uses 0.25). Off by default.
    float stickyActionProb = 0.f;
    // Frames per agent step (rewards summed, stops at the end of the game). Grid games move
    // objects one cell per frame, so 1 is the default; Atari agents use 4.
    int frameSkip = 1;
};

class Env {
public:
    virtual ~Env() = default;
    virtual std::string name() const = 0;
    // Starts a new episode; the episode is a deterministic function of the seed and actions.
    virtual void reset(uint64_t seed) = 0;
    // Throws glimpse::Error for an action outside [0, numActions()) or after the episode ended.
    virtual StepResult step(int action) = 0;
    virtual int numActions() const = 0;
    virtual std::vector<int> legalActions() const = 0;
    virtual std::vector<std::string> actionNames() const = 0;
    virtual ObsShape observationShape() const = 0;
    virtual std::vector<std::string> channelNames() const = 0;
    // The display colour (RGB) of each observation channel, as render() paints it.
    virtual std::vector<std::array<uint8_t, 3>> channelColours() const = 0;
    // Writes the current observation, [C, H, W] floats in [0, 1], to dst (numel() floats).
    virtual void observationInto(float* dst) const = 0;
    std::vector<float> observation() const;
    // The observation for display: CV_8UC3 in RGB order (cv::cvtColor to BGR before imwrite),
    // each grid cell a scale x scale block of its foremost channel's colour.
    virtual cv::Mat render(int scale = 8) const = 0;
    virtual int lives() const = 0;
    virtual int episodeSteps() const = 0;
    virtual bool episodeOver() const = 0;
    virtual const EnvOptions& options() const = 0;
    // The game's scripted reference policy for the current state; throws glimpse::Error
    // when the environment has none.
    virtual int referenceAction() const;
};

struct GameInfo {
    std::string name;
    std::string category;  // "shooter" or "maze"
    std::string summary;
};
// The built-in arcade suite, in registry order.
const std::vector<GameInfo>& arcadeGames();
std::vector<std::string> envNames();
// A name makeEnv accepts: a built-in game, or one with the "shared:" prefix.
bool isKnownEnv(const std::string& name);
// Throws glimpse::Error listing the valid names for an unknown name, and for bad options.
// "shared:GAME" is GAME in the suite's shared observation and action space (shared_space.h).
std::unique_ptr<Env> makeEnv(const std::string& name, const EnvOptions& options = {});

// The seed of episode `episode` of environment `index` in a VecEnv seeded with `seed`.
uint64_t episodeSeed(uint64_t seed, int index, int64_t episode);

struct VecStep {
    StepResult result;        // the step that was taken
    bool reset = false;       // the episode ended and the environment was reset
    double episodeReturn = 0; // when reset: the finished episode's return
    int episodeLength = 0;    // when reset: its number of steps
};

// K environments of one game stepped one after another, each auto-reset with its own seeds,
// with the last `frameStack` observations stacked (oldest first; at reset the first
// observation fills the whole stack).
class VecEnv {
public:
    VecEnv(const std::string& game, int numEnvs, uint64_t seed, const EnvOptions& options = {},
           int frameStack = 4);
    int size() const { return int(envs_.size()); }
    int numActions() const { return envs_.front()->numActions(); }
    int frameStack() const { return stack_; }
    Env& env(int i) { return *envs_.at(size_t(i)); }
    const Env& env(int i) const { return *envs_.at(size_t(i)); }
    ObsShape frameShape() const { return envs_.front()->observationShape(); }
    ObsShape stackedShape() const;  // {frameStack * C, H, W}
    // [K, frameStack * C, H, W], row-major.
    std::vector<float> observations() const;
    void observationsInto(float* dst) const;
    // One action per environment; environments whose episode ends are reset at once, so the
    // observations afterwards are those of the new episodes.
    std::vector<VecStep> step(const std::vector<int>& actions);
    // Sum of rewards of the running episode of environment i.
    double runningReturn(int i) const { return returns_.at(size_t(i)); }

private:
    void resetEnv(int i);
    void pushFrame(int i, bool fill);

    std::vector<std::unique_ptr<Env>> envs_;
    uint64_t seed_;
    int stack_;
    std::vector<int64_t> episodes_;
    std::vector<double> returns_;
    std::vector<std::vector<float>> history_;  // per env: frameStack * C*H*W floats
};

} // namespace glimpse::rl
