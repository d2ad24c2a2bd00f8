#include "core/models/efficientzero/recorder.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/rl/episode.h"

namespace glimpse::efficientzero {

namespace fs = std::filesystem;

EpisodeRecorder::EpisodeRecorder(std::string runDir, std::string trainer, std::string game, std::string networkConfig,
                                 int simulations, std::vector<std::string> taskNames,
                                 std::vector<std::string> taskCategories)
    : runDir_(std::move(runDir)), trainer_(std::move(trainer)), game_(std::move(game)),
      networkConfig_(std::move(networkConfig)), simulations_(simulations), taskNames_(std::move(taskNames)),
      taskCategories_(std::move(taskCategories)) {}

void EpisodeRecorder::begin(int env, uint64_t seed, const rl::Env& e, int64_t maxEpisodeSteps) {
    for (auto* v : {&renders_, &observations_}) v->clear();
    for (auto* v : {&actions_, &updates_, &envSteps_}) v->clear();
    for (auto* v : {&rewards_, &rootValues_, &childrenQ_, &childrenPrior_, &weights_}) v->clear();
    for (auto* v : {&lives_, &visits_}) v->clear();
    env_ = env;
    seed_ = seed;
    maxEpisodeSteps_ = maxEpisodeSteps;
    actionNames_ = e.actionNames();
    channelNames_ = e.channelNames();
}

void EpisodeRecorder::beforeMove(const rl::Env& e, const rl::SearchResult& res, size_t row, const RecordedTraining& training) {
    if (!active()) throw Error("episode recorder: beforeMove without an episode");
    if (training.taskWeights.size() != taskNames_.size())
        throw Error("episode recorder: " + std::to_string(training.taskWeights.size()) + " task weights for " +
                    std::to_string(taskNames_.size()) + " tasks");
    cv::Mat img = e.render(8);
    renders_.push_back(torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kUInt8).clone());
    const auto s = e.observationShape();
    observations_.push_back(torch::tensor(e.observation(), torch::kFloat32).reshape({s.channels, s.height, s.width}));
    rootValues_.push_back(res.rootValues[row]);
    for (int v : res.visitCounts[row]) visits_.push_back(v);
    for (float q : res.rootQ[row]) childrenQ_.push_back(std::isfinite(q) ? q : 0.f);
    childrenPrior_.insert(childrenPrior_.end(), res.rootPriors[row].begin(), res.rootPriors[row].end());
    if (updates_.empty()) firstUpdate_ = training.updates;
    updates_.push_back(training.updates);
    envSteps_.push_back(training.envSteps);
    weights_.insert(weights_.end(), training.taskWeights.begin(), training.taskWeights.end());
}

void EpisodeRecorder::afterMove(int action, float reward, int lives) {
    actions_.push_back(action);
    rewards_.push_back(reward);
    lives_.push_back(lives);
}

std::string EpisodeRecorder::finish(bool terminal) {
    if (!active() || actions_.empty()) throw Error("episode recorder: finish without a recorded step");
    const int64_t T = int64_t(actions_.size()), A = int64_t(actionNames_.size()), m = int64_t(taskNames_.size());
    rl::Episode e;
    e.env = game_;
    e.source = "self-play of " + trainer_ + " run " + runDir_;
    e.seed = int64_t(seed_);
    e.maxEpisodeSteps = maxEpisodeSteps_;
    e.actionNames = actionNames_;
    e.channelNames = channelNames_;
    double ret = 0;
    for (float r : rewards_) ret += r;
    e.episodeReturn = ret;
    e.terminal = terminal;
    e.frames = torch::stack(renders_);
    e.observations = torch::stack(observations_);
    e.actions = torch::tensor(actions_, torch::kInt64);
    e.rewards = torch::tensor(rewards_, torch::kFloat32);
    e.lives = torch::tensor(lives_, torch::kInt32);
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.config = networkConfig_;
    e.model.simulations = simulations_;
    e.model.rootValues = torch::tensor(rootValues_, torch::kFloat32);
    e.model.visitCounts = torch::tensor(visits_, torch::kInt32).reshape({T, A});
    e.model.childrenQ = torch::tensor(childrenQ_, torch::kFloat32).reshape({T, A});
    e.model.childrenPrior = torch::tensor(childrenPrior_, torch::kFloat32).reshape({T, A});
    e.hasTraining = true;
    e.training.run = runDir_;
    e.training.trainer = trainer_;
    e.training.updates = torch::tensor(updates_, torch::kInt64);
    e.training.envSteps = torch::tensor(envSteps_, torch::kInt64);
    e.training.taskNames = taskNames_;
    e.training.taskCategories = taskCategories_;
    if (m > 0) e.training.taskWeights = torch::tensor(weights_, torch::kFloat32).reshape({T, m});
    char name[64];
    std::snprintf(name, sizeof name, "update_%07lld.h5", static_cast<long long>(firstUpdate_));
    const fs::path dir = fs::path(runDir_) / "episodes";
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    env_ = -1;
    rl::writeEpisode(path, e);
    return path;
}

} // namespace glimpse::efficientzero
