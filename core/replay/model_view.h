#pragma once
// What an EfficientZero network makes of a recorded episode, for the replay viewer
// (docs/formats.md "Episode", "Replaying with the network"): the network's predictions at a
// step, an imagined rollout of K steps with the recorded actions against what happened, and a
// value saliency map over the frame.
//
// Input: exactly what self-play and `glimpse play` feed the network. The episode's
// /observations row t is the single observation seen before action t (float32 [C, h, w] in
// [0, 1], the environment's own values); the network gets the last `stack` of them
// concatenated on channels, oldest first, [1, stack * C, h, w], with the first observation of
// the game repeated before it has `stack` of them (a game starts at step 0 and after every
// step marked terminal). They are passed raw: Network applies its obsScale.
// An episode without observations (imported Minari or PNG-folder episodes) cannot be read by
// the network: the frames are renders (RGB screens, or colour-coded grid cells), from which the
// built-in games' multi-channel observations are not derivable; every function here then
// throws glimpse::Error "<file>: this episode has no observations the network can read".
//
// Threads: run these on a worker thread, never the UI thread. A Network object must not be
// used by two threads at the same time (one worker per network); the EpisodeReader may be
// shared (its observation reads are serialized inside). The network must be in eval mode
// (loadEpisodeNetwork returns it so); a network in training mode is refused, because BatchNorm
// would use batch statistics. Nothing but valueSaliency builds an autograd graph.
//
// Cancellation: functions that take `cancel` check it between network calls and throw
// glimpse::Error("... cancelled") when it has become true; nothing is left half-changed.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/replay/episode_reader.h"

namespace glimpse::efficientzero {
class Network;
}

namespace glimpse::replay {

// The network of an episode: the checkpoint recorded in it (meta().model.checkpoint) or
// `checkpoint` when given. A relative path that does not exist from the working directory is
// also looked for beside the episode file. Checks that it is an efficientzero checkpoint whose
// action count equals the episode's (actionNames().size()) and whose observation shape
// (channels x height x width of one frame) equals the episode's observations and, for a
// built-in game, the game's. Errors name the episode and the checkpoint file. CPU, eval mode.
std::shared_ptr<efficientzero::Network> loadEpisodeNetwork(const EpisodeReader& ep, const std::string& checkpoint = "");

// The network input at step t: [1, stack * C, h, w] float32 (see above).
torch::Tensor stackedObservation(EpisodeReader& ep, int64_t t, int stack);

// The network at step t: initial inference on the observation of step t.
struct StepPrediction {
    float value = 0;            // predicted value of step t (what /model/value records)
    float valuePrefix = 0;      // value prefix after the recorded action a_t from a fresh LSTM
                                // state: the predicted reward of step t (/model/value_prefix)
    std::vector<float> policy;  // softmax of the policy logits, A values (/model/policy)
};
StepPrediction predictStep(efficientzero::Network& net, EpisodeReader& ep, int64_t t);

// Imagines K >= 1 steps ahead of step t (t + K <= length()) with the recorded actions
// a_t..a_{t+K-1}: initial inference on the observation of step t, then K recurrent inferences,
// the value-prefix LSTM reset every `lstmHorizon` levels as the search does (rl::MctsConfig's
// default, 5, what `glimpse play` searches with).
//   predictedValue[k], k = 0..K:  the value of imagined step t + k (k = 0: predictStep's value)
//   actualReturn[k],   k = 0..K:  what happened: the discounted return from step t + k,
//                                 sum_i discount^i rewards[t + k + i] up to the end of the game
//                                 (the next terminal step, else the episode's last step: a cut
//                                 recording is not bootstrapped)
//   predictedReward[k], k = 0..K-1: the reward of step t + k (action a_{t+k}), from value-prefix
//                                 differences as the search uses them: prefix(k + 1) - prefix(k),
//                                 or prefix(k + 1) alone after an LSTM reset (k % lstmHorizon == 0)
//   actualReward[k],   k = 0..K-1: rewards[t + k]
// So values have K + 1 entries and rewards K. Errors: K < 1, t or t + K outside the episode.
// Targets::AsTrained compares with what the network was trained on, as the world-model check
// does by default (world_model_check.h): rewards clipped to their sign, and a lost life ends a
// return as the game's end does. Targets::Raw: the game's own rewards, returns to the game's end.
enum class Targets { Raw, AsTrained };
struct Imagined {
    std::vector<float> predictedReward, predictedValue, actualReward, actualReturn;
};
Imagined imagine(efficientzero::Network& net, EpisodeReader& ep, int64_t t, int K, double discount,
                 const std::atomic<bool>* cancel = nullptr, int lstmHorizon = 5, Targets targets = Targets::Raw);

// Saliency of the value at step t: |d value(s_t) / d input| of the stacked network input
// (every stacked frame's every channel), summed over the stack * C channels -> [h, w], then
// resized bilinearly (align_corners false) to the frame size: float32 [frameHeight(),
// frameWidth()], non-negative and finite. The only function here that uses autograd (with
// respect to the input only: parameter gradients are not touched).
torch::Tensor valueSaliency(efficientzero::Network& net, EpisodeReader& ep, int64_t t,
                            const std::atomic<bool>* cancel = nullptr);

} // namespace glimpse::replay
