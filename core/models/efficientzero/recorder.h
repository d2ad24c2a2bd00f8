#pragma once
// Self-play episodes recorded while EfficientZero (or XTRA) trains (the train config's
// `record_interval`; docs/rl.md "Recorded self-play"): every `record_interval` learner updates
// the next episode that starts in one of the self-play environments is recorded in the episode
// format (core/rl/episode.h) to RUN/episodes/update_NNNNNNN.h5, with what the search saw and
// chose at each step and the training's state then: the learner's update count, the run's
// environment steps and, when the learner has offline tasks (XTRA), their weights in force.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/rl/env.h"
#include "core/rl/mcts.h"

namespace glimpse::efficientzero {

struct RecordedTraining {
    int64_t updates = 0, envSteps = 0;
    std::vector<float> taskWeights;   // m weights (empty without offline tasks)
};

class EpisodeRecorder {
public:
    // `trainer` names the run's trainer ("efficientzero", "xtra"); the tasks' names and
    // categories are the offline tasks' (empty without them).
    EpisodeRecorder(std::string runDir, std::string trainer, std::string game, std::string networkConfig, int simulations,
                    std::vector<std::string> taskNames, std::vector<std::string> taskCategories);

    bool active() const { return env_ >= 0; }
    int64_t steps() const { return int64_t(actions_.size()); }
    int env() const { return env_; }
    // Starts recording the episode of self-play environment `env`, which has just been reset
    // with `seed`.
    void begin(int env, uint64_t seed, const rl::Env& e, int64_t maxEpisodeSteps);
    // Before the move of row `row` of a search: the frame shown, the search's outputs and the
    // training's state.
    void beforeMove(const rl::Env& e, const rl::SearchResult& res, size_t row, const RecordedTraining& training);
    // After the move: the action taken and the game's own reward and lives.
    void afterMove(int action, float reward, int lives);
    // The episode ended (terminal: the game ended, else cut by the step limit): writes the file
    // (atomically) and returns its path; recording stops.
    std::string finish(bool terminal);

private:
    std::string runDir_, trainer_, game_, networkConfig_;
    int simulations_ = 0;
    std::vector<std::string> taskNames_, taskCategories_;
    int env_ = -1;
    uint64_t seed_ = 0;
    int64_t maxEpisodeSteps_ = 0, firstUpdate_ = 0;
    std::vector<std::string> actionNames_, channelNames_;
    std::vector<torch::Tensor> renders_, observations_;
    std::vector<int64_t> actions_, updates_, envSteps_;
    std::vector<float> rewards_, rootValues_, childrenQ_, childrenPrior_, weights_;
    std::vector<int32_t> lives_, visits_;
};

} // namespace glimpse::efficientzero
