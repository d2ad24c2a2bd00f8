#pragma once
// EfficientZero training on the arcade suite (docs/rl.md "Training"): self-play with batched
// MCTS over several environments, prioritized replay with n-step value targets reanalyzed by a
// target network, and the learner (SGD with momentum, warmup + cosine or step schedule,
// gradient clipping). Everything goes to a RunLog as it happens; atomic checkpoints hold all
// that is needed to resume. Evaluation (playing episodes with a trained network) is in eval.h,
// included here for the callers of evaluate() and loadForEnv() that include this header.
#include <cstdint>

#include "core/models/efficientzero/loss.h"
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/models/efficientzero/config.h"
#include "core/models/efficientzero/eval.h"
#include "core/rl/env.h"
#include "core/rl/replay.h"
#include "core/train/control.h"

namespace glimpse::dist {
class Communicator;
}

namespace glimpse::efficientzero {

class Network;

struct TrainConfig {
    std::string env = "breakout";
    int64_t steps = 5000;              // learner updates
    uint64_t seed = 0;
    int numEnvs = 8;                   // self-play environments searched in one batch
    int simulations = 16;              // MCTS simulations per move (the paper uses 50)
    int maxEpisodeSteps = 1000;
    int batchSize = 64;
    int unroll = 5, tdSteps = 5;
    double discount = 0.997;
    // Self-play's visit temperature: 0 (default) follows the schedule over the run's fraction
    // done (rl::visitTemperature: 1, then 0.5 from half way, 0.25 from three quarters, as the
    // paper's 50k / 75k of 100k updates); > 0 keeps that temperature for the whole run (short
    // runs otherwise anneal while the agent is still exploring).
    double selfPlayTemperature = 0;
    // Table 5.8: rewards are clipped to their sign in training (the RunLog's returns are the
    // game's own), and a lost life ends the game history (no value bootstrap across it; the
    // environment plays on and a new history starts from the current frame).
    bool clipRewards = true;
    bool lifeLossTerminal = true;
    // Policy target stored for each self-play move: "visits" (the paper: the root's visit
    // distribution) or "completed_q" (SearchResult::improvedPolicies, Gumbel MuZero). In a
    // 15-minute breakout run completed_q drove self-play onto one action (docs/rl.md).
    std::string policyTarget = "visits";
    // EfficientZero's policy reanalyze (reanalyze.h): the fraction of each batch's samples whose
    // policy targets come from a fresh search with the target network instead of the stored
    // visit distribution (the paper: 0.99). 0 = off: on this CPU a search of every unrolled step
    // costs more than the update itself (docs/rl.md "Reanalyze").
    double reanalyzePolicyRatio = 0;
    // Ablation levers (docs/rl.md "Lever ablation"): ALE v5's sticky actions in self-play (each
    // frame repeats the previous action with this probability; evaluation is unaffected), and
    // the weights of eq. 5.3's terms ("loss_weights": {"value_prefix", "policy", "value",
    // "consistency"}; a missing key keeps the paper's 1 / 1 / 0.25 / 2).
    double stickyActionProb = 0;
    LossWeights lossWeights;
    double lr = 0.1, lrFinal = 0.01;   // peak and final learning rate
    std::string lrSchedule = "cosine"; // "cosine" or "step" (x0.1 at 50% and 75%)
    int64_t warmupSteps = 200;         // linear warmup from 0 to lr
    double momentum = 0.9, weightDecay = 1e-4, gradClip = 5.0;
    double priorityAlpha = 0.6, priorityBetaStart = 0.4;
    int64_t replayCapacity = 100000;   // transitions
    int64_t minReplay = 1000;          // transitions before the first update
    double updatesPerEnvStep = 0.25;   // replay ratio: learner updates per environment step
    int64_t selfPlayUpdateInterval = 100;  // updates between copies into the self-play network
    int64_t targetUpdateInterval = 200;    // updates between copies into the target network
    int64_t checkpointInterval = 500;      // updates between checkpoints (and at the end)
    int64_t logInterval = 10;              // updates between loss rows in the RunLog
    // Distributed runs (docs/distributed.md "EfficientZero"): moves each self-play rank plays
    // between two exchanges with the learner (rank 0). No effect in one process.
    int roundMoves = 4;
    // Every record_interval learner updates, the next self-play episode to start is recorded to
    // RUN/episodes/update_NNNNNNN.h5 (recorder.h); 0 = never. One-process runs only.
    int64_t recordInterval = 0;
    // An EfficientZero checkpoint whose weights start a new run (its network must be this run's,
    // e.g. an XTRA student for a shared game); ignored when the run resumes. "" = random init.
    std::string init;
    nlohmann::json network = nlohmann::json::object();  // overrides of cpuNetwork()'s keys

    nlohmann::json toJson() const;
    // Missing keys keep defaults; unknown keys, wrong types and absurd values are errors.
    static TrainConfig fromJson(const nlohmann::json& j);
    void validate() const;
};

// Loss terms a learner adds to its own at every update: XTRA's concurrent offline tasks
// (core/models/xtra/finetune.h). Runs on the learner's thread (rank 0).
class ExtraObjective {
public:
    virtual ~ExtraObjective() = default;
    // The run-log series it writes (declared when the log opens).
    virtual std::vector<std::string> series() const = 0;
    // Entries added to the run log's config.
    virtual nlohmann::json describe() const = 0;
    // The loss added to the target task's `targetLoss` (eq. 5.3 of this update's batch) at learner
    // update `update` (0-based), with gradients; `metrics` receives the values to log at this
    // update (series -> value).
    virtual torch::Tensor loss(Network& net, const torch::Tensor& targetLoss, int64_t update,
                               std::map<std::string, double>& metrics) = 0;
    // Resumable state (saved in state.h5 with the learner).
    virtual nlohmann::json state() const = 0;
    virtual void restore(const nlohmann::json& state, const std::string& source) = 0;
    // The offline tasks' names and categories, and the weights the next update gives them
    // (recorded with self-play episodes); empty when the objective has no task weights.
    virtual std::vector<std::string> taskNames() const { return {}; }
    virtual std::vector<std::string> taskCategories() const { return {}; }
    virtual std::vector<float> taskWeightsNow() const { return {}; }
};

// The CPU network for a game: Config::grid reduced to 16 latent channels, LSTM 32, projection
// 128 -> 128 -> 64 (head 64 -> 32 -> 64), then the overrides of `overrides`.
Config cpuNetwork(const rl::Env& env, const nlohmann::json& overrides = nlohmann::json::object());

// Self-play's visit temperature after `updates` learner updates of config.steps.
double selfPlayTemperature(const TrainConfig& config, int64_t updates);

struct TrainResult {
    int64_t updates = 0, envSteps = 0, episodes = 0;
    bool stopped = false;              // stopped by Control before `steps`
    double seconds = 0;
    // Distributed runs: this process's rank and the world size; on rank 0 the games received
    // from the self-play ranks and the weight broadcasts; on a self-play rank the environment
    // steps and games it played.
    int rank = 0, worldSize = 1;
    int64_t gamesReceived = 0, weightBroadcasts = 0, playedSteps = 0, playedGames = 0;
    // Where this process's CPU time went (single-process runs; this invocation only, not a
    // resumed run's earlier ones), in seconds, in this order: "search" (self-play MCTS with its
    // network), "environment" (moves, histories, stacking), "targets" (replay sampling, n-step
    // targets, reanalyze), "forward" (the loss), "backward", "optimizer" (clipping, the SGD step,
    // priorities), "other" (logs, checkpoints, network copies, start-up of the loop). Also in the
    // run log's eval group as cpu_seconds/<part>. Empty for distributed runs.
    std::vector<std::pair<std::string, double>> cpuSeconds;
};

// "search 41% (25.0 s), environment 3% (1.8 s), ...": `cpuSeconds` as one line.
std::string cpuBreakdownText(const std::vector<std::pair<std::string, double>>& cpuSeconds);

// The replay buffer a run saved in RUN/state.h5, with the run's configs (for offline datasets).
struct RunReplay {
    TrainConfig config;
    Config network;
    std::vector<rl::GameHistory> games;
};
RunReplay readRunReplay(const std::string& runDir);

// Files in runDir: model.h5 (glimpse.checkpoint, family "efficientzero", for play),
// state.h5 (glimpse.ez_state: everything to resume), runlog.h5. When state.h5 exists the run
// resumes from it (its env and network must match), continuing to config.steps updates.
// With `comm` of W > 1 ranks (docs/distributed.md "EfficientZero"): rank 0 is the learner
// (replay, updates, files) and plays no games; ranks 1..W-1 each play config.numEnvs
// environments with the self-play network. In rounds of config.roundMoves moves the self-play
// ranks send their finished games to the learner, which adds them to its replay, trains as the
// replay ratio allows while the next round is played, and broadcasts the self-play network
// whenever it changed (every self_play_update_interval updates). A resumed run may change W.
// `extra`: loss terms added at every learner update (null: plain EfficientZero).
TrainResult trainAgent(const TrainConfig& config, const std::string& runDir, train::Control* control = nullptr,
                       const train::ProgressFn& progress = {}, dist::Communicator* comm = nullptr,
                       ExtraObjective* extra = nullptr);

} // namespace glimpse::efficientzero
