#include "core/replay/model_view.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/rl/env.h"

namespace glimpse::replay {

using efficientzero::Network;
using torch::Tensor;
namespace fs = std::filesystem;

namespace {

std::string shapeText(int64_t c, int64_t h, int64_t w) {
    return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
}

void requireObservations(const EpisodeReader& ep) {
    if (!ep.hasObservations())
        throw Error(ep.path() + ": this episode has no observations the network can read (imported episodes keep only "
                                "the screens, from which the game's observations cannot be rebuilt)");
}

void checkStepIndex(const EpisodeReader& ep, int64_t t, const char* what) {
    if (t < 0 || t >= ep.length())
        throw Error(ep.path() + ": " + what + ": step " + std::to_string(t) + " is outside the episode (" +
                    std::to_string(ep.length()) + " steps)");
}

// Errors for what every function here needs: observations, a step inside the episode, a
// network in eval mode whose input fits the observations.
void checkReady(const Network& net, const EpisodeReader& ep, int64_t t, const char* what) {
    requireObservations(ep);
    checkStepIndex(ep, t, what);
    if (net.isTraining())
        throw Error(std::string(what) + ": the network is in training mode (call train(false)); BatchNorm would use batch "
                                        "statistics");
    const auto& c = net.config();
    const auto s = ep.observationShape();
    if (s[0] != c.obsChannels || s[1] != c.obsHeight || s[2] != c.obsWidth)
        throw Error(ep.path() + ": the episode's observations are " + shapeText(s[0], s[1], s[2]) +
                    ", the network expects " + shapeText(c.obsChannels, c.obsHeight, c.obsWidth));
}

void checkCancel(const std::atomic<bool>* cancel, const char* what) {
    if (cancel && cancel->load()) throw Error(std::string(what) + ": cancelled");
}

// A relative checkpoint path that does not exist from the working directory: beside the episode.
std::string resolveCheckpoint(const std::string& path, const std::string& episodePath) {
    const fs::path p(path);
    if (p.is_absolute() || fs::exists(p)) return path;
    const fs::path beside = fs::path(episodePath).parent_path() / p;
    return fs::exists(beside) ? beside.string() : path;
}

// An efficientzero checkpoint for a game that is not built in (no Env to check against).
bool isBuiltInGame(const std::string& game) {
    return rl::isKnownEnv(game);
}

Tensor actionTensor(const Network& net, int64_t a) {
    return torch::tensor(std::vector<int64_t>{a}, torch::kLong).to(net.device());
}

} // namespace

std::shared_ptr<Network> loadEpisodeNetwork(const EpisodeReader& ep, const std::string& checkpoint) {
    const std::string given = checkpoint.empty() ? ep.meta().model.checkpoint : checkpoint;
    if (given.empty())
        throw Error(ep.path() + ": no checkpoint is recorded in this episode; choose one");
    requireObservations(ep);
    const std::string path = resolveCheckpoint(given, ep.path());
    std::shared_ptr<Network> net;
    try {
        net = std::make_shared<Network>(isBuiltInGame(ep.game()) ? efficientzero::loadForEnv(path, *rl::makeEnv(ep.game()))
                                                                  : efficientzero::loadNetwork(path));
    } catch (const Error& e) {
        throw Error(ep.path() + ": " + e.what());
    }
    const auto& c = net->config();
    const int64_t A = int64_t(ep.actionNames().size());
    if (c.numActions != A)
        throw Error(ep.path() + ": " + path + " has " + std::to_string(c.numActions) + " actions, the episode's game '" +
                    ep.game() + "' has " + std::to_string(A));
    const auto s = ep.observationShape();
    if (s[0] != c.obsChannels || s[1] != c.obsHeight || s[2] != c.obsWidth)
        throw Error(ep.path() + ": " + path + " expects " + shapeText(c.obsChannels, c.obsHeight, c.obsWidth) +
                    " observations, the episode has " + shapeText(s[0], s[1], s[2]));
    return net;
}

Tensor stackedObservation(EpisodeReader& ep, int64_t t, int stack) {
    requireObservations(ep);
    checkStepIndex(ep, t, "observation");
    if (stack < 1) throw Error("stackedObservation: stack must be >= 1, got " + std::to_string(stack));
    // The first step of t's game within the stack's reach (a game starts after a terminal step).
    int64_t start = t;
    for (int i = 1; i < stack && start > 0 && !ep.isTerminal(start - 1); ++i) --start;
    std::vector<Tensor> frames;
    for (int k = 0; k < stack; ++k) frames.push_back(ep.observation(std::max(start, t - stack + 1 + k)));
    return torch::cat(frames, 0).unsqueeze(0).to(torch::kFloat32).contiguous();
}

StepPrediction predictStep(Network& net, EpisodeReader& ep, int64_t t) {
    checkReady(net, ep, t, "predict");
    torch::NoGradGuard noGrad;
    const auto out = net.initialInference(stackedObservation(ep, t, net.config().stack).to(net.device()));
    const auto next = net.recurrentInference(out.state, actionTensor(net, ep.action(t)), net.initialLstm(1));
    StepPrediction p;
    p.value = out.value.item<float>();
    p.valuePrefix = next.valuePrefix.item<float>();
    const Tensor pol = torch::softmax(out.policyLogits[0].to(torch::kCPU, torch::kFloat), 0).contiguous();
    p.policy.assign(pol.data_ptr<float>(), pol.data_ptr<float>() + pol.numel());
    return p;
}

namespace {

// The reward of step i and whether a return ends there, under `targets`.
double targetReward(const EpisodeReader& ep, int64_t i, Targets targets) {
    const double r = ep.reward(i);
    return targets == Targets::AsTrained ? double((r > 0) - (r < 0)) : r;
}
bool endsReturn(const EpisodeReader& ep, int64_t i, Targets targets) {
    return ep.isTerminal(i) || (targets == Targets::AsTrained && ep.lifeLost(i));
}

// Discounted return from each step t..t+K (0 at length()), stopping at the end of each game
// (and, as trained, at each lost life).
std::vector<float> actualReturns(const EpisodeReader& ep, int64_t t, int K, double discount, Targets targets) {
    const int64_t T = ep.length();
    const int64_t last = std::min(t + K, T - 1);
    int64_t end = T - 1;   // the first step >= last that ends a return, else the last step
    for (int64_t i = last; i < T; ++i)
        if (endsReturn(ep, i, targets)) {
            end = i;
            break;
        }
    std::vector<float> out(size_t(K) + 1, 0.f);
    double g = 0;
    for (int64_t i = end; i >= t; --i) {
        g = targetReward(ep, i, targets) + (endsReturn(ep, i, targets) ? 0.0 : discount * g);
        if (i <= t + K) out[size_t(i - t)] = float(g);
    }
    return out;
}

} // namespace

Imagined imagine(Network& net, EpisodeReader& ep, int64_t t, int K, double discount, const std::atomic<bool>* cancel,
                 int lstmHorizon, Targets targets) {
    checkReady(net, ep, t, "imagine");
    if (K < 1) throw Error("imagine: K must be >= 1, got " + std::to_string(K));
    if (t + K > ep.length())
        throw Error(ep.path() + ": imagine: " + std::to_string(K) + " steps from step " + std::to_string(t) +
                    " go past the episode's end (" + std::to_string(ep.length()) + " steps)");
    if (!(discount >= 0 && discount <= 1)) throw Error("imagine: discount must be in [0, 1], got " + std::to_string(discount));
    if (lstmHorizon < 1) throw Error("imagine: lstmHorizon must be >= 1, got " + std::to_string(lstmHorizon));
    torch::NoGradGuard noGrad;
    Imagined im;
    const auto out = net.initialInference(stackedObservation(ep, t, net.config().stack).to(net.device()));
    im.predictedValue.push_back(out.value.item<float>());
    Tensor state = out.state;
    efficientzero::LstmState lstm = net.initialLstm(1);
    float prefix = 0.f;
    for (int k = 0; k < K; ++k) {
        checkCancel(cancel, "imagine");
        const bool reset = k % lstmHorizon == 0;   // the parent at depth k starts a new prefix
        if (reset) lstm = net.initialLstm(1);
        const auto r = net.recurrentInference(state, actionTensor(net, ep.action(t + k)), lstm);
        const float vp = r.valuePrefix.item<float>();
        im.predictedReward.push_back(reset ? vp : vp - prefix);
        im.predictedValue.push_back(r.value.item<float>());
        im.actualReward.push_back(float(targetReward(ep, t + k, targets)));
        prefix = vp;
        state = r.nextState;
        lstm = r.lstm;
    }
    im.actualReturn = actualReturns(ep, t, K, discount, targets);
    return im;
}

Tensor valueSaliency(Network& net, EpisodeReader& ep, int64_t t, const std::atomic<bool>* cancel) {
    checkReady(net, ep, t, "saliency");
    checkCancel(cancel, "saliency");
    const Tensor obs = stackedObservation(ep, t, net.config().stack).to(net.device()).requires_grad_(true);
    Tensor grad;
    {
        torch::AutoGradMode withGrad(true);
        const auto out = net.initialInference(obs);
        grad = torch::autograd::grad({out.value.sum()}, {obs})[0];
    }
    checkCancel(cancel, "saliency");
    namespace F = torch::nn::functional;
    const Tensor s = grad.detach().abs().sum(1, true);   // [1, 1, h, w]
    const Tensor up = F::interpolate(s, F::InterpolateFuncOptions()
                                            .size(std::vector<int64_t>{ep.frameHeight(), ep.frameWidth()})
                                            .mode(torch::kBilinear)
                                            .align_corners(false));
    return up[0][0].to(torch::kCPU, torch::kFloat32).contiguous();
}

} // namespace glimpse::replay
