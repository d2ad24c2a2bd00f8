// The replay viewer's network functions (core/replay/model_view.h) on an episode recorded by the
// real `glimpse play --record` path (efficientzero::evaluate) with a small random network:
// predictions equal direct inference on the stacked observations (and what the recorder saw),
// imagined rollouts equal hand-made recurrent inference, saliency equals an autograd gradient
// computed separately, and the recorder now writes the root children's Q and prior.
#include <QtTest>

#include <atomic>
#include <cmath>
#include <filesystem>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "core/rl/env.h"
#include "core/rl/episode.h"
#include "tests/support.h"
#include "tests/ez_support.h"

using namespace glimpse;
using namespace glimpse::replay;
using efficientzero::Network;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

constexpr int kSimulations = 6;
constexpr double kSearchDiscount = 0.997;   // rl::MctsConfig's default, what evaluate() searches with


// A network with every parameter perturbed: the zero-initialised heads of a fresh network would
// predict value 0, value prefix 0 and a uniform policy everywhere.
Network randomNetwork(const std::string& game, uint64_t seed) {
    torch::manual_seed(seed);
    Network net(glimpse::testing::tinyEfficientZeroConfig(game));
    torch::NoGradGuard noGrad;
    for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.5);
    net.train(false);
    return net;
}

void saveNetwork(Network& net, const std::string& path) {
    saveCheckpoint(path, checkpointFromModule(net.module(), "efficientzero", net.config().toJson().dump()));
}

// The network input at step t built here from the whole observations tensor [T, C, h, w].
torch::Tensor stackByHand(const torch::Tensor& observations, int64_t t, int stack) {
    std::vector<torch::Tensor> frames;
    for (int k = 0; k < stack; ++k) frames.push_back(observations[std::max<int64_t>(0, t - stack + 1 + k)]);
    return torch::cat(frames, 0).unsqueeze(0);
}

torch::Tensor oneAction(int64_t a) { return torch::tensor(std::vector<int64_t>{a}, torch::kLong); }

} // namespace

class TestReplayModel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const std::string& n) { return dir_.path().toStdString() + "/" + n; }
    std::string episode_;      // recorded by evaluate()
    rl::Episode recorded_;     // the same, read whole
    std::unique_ptr<Network> net_;

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        net_ = std::make_unique<Network>(randomNetwork("breakout", 7));
        saveNetwork(*net_, path("model.h5"));
        efficientzero::EvalOptions o;
        o.episodes = 1;
        o.parallel = 1;
        o.simulations = kSimulations;
        o.env.maxEpisodeSteps = 14;
        o.recordDir = path("episodes");
        o.checkpointPath = path("model.h5");
        const auto r = efficientzero::evaluate(*net_, "breakout", o);
        QCOMPARE(int(r.recorded.size()), 1);
        episode_ = r.recorded[0];
        recorded_ = rl::readEpisode(episode_);
        QVERIFY(recorded_.length() >= 8);
    }

    void loadsTheRecordedCheckpoint() {
        EpisodeReader ep(episode_);
        const auto net = loadEpisodeNetwork(ep);
        QVERIFY(!net->isTraining());
        const auto a = net->parameters(), b = net_->parameters();
        QCOMPARE(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) QVERIFY(torch::equal(a[i], b[i]));
        // A relative checkpoint path is found beside the episode.
        std::filesystem::copy_file(path("model.h5"), path("episodes/beside.h5"));
        QVERIFY(loadEpisodeNetwork(ep, "beside.h5") != nullptr);
    }

    void loadErrors() {
        EpisodeReader ep(episode_);
        auto e = errorOf([&] { loadEpisodeNetwork(ep, path("missing.h5")); });
        QVERIFY2(contains(e, {"episode_0000.h5", "missing.h5"}), e.c_str());
        // A checkpoint of another game (invaders: 6 actions, breakout 4).
        Network other = randomNetwork("invaders", 1);
        saveNetwork(other, path("invaders.h5"));
        e = errorOf([&] { loadEpisodeNetwork(ep, path("invaders.h5")); });
        QVERIFY2(contains(e, {"episode_0000.h5", "invaders.h5", "actions"}), e.c_str());
        // No checkpoint recorded and none given.
        rl::Episode copy = recorded_;
        copy.model.checkpoint.clear();
        rl::writeEpisode(path("nockpt.h5"), copy);
        EpisodeReader nockpt(path("nockpt.h5"));
        e = errorOf([&] { loadEpisodeNetwork(nockpt); });
        QVERIFY2(contains(e, {"nockpt.h5", "no checkpoint"}), e.c_str());
    }

    void episodeWithoutObservations() {
        rl::Episode copy = recorded_;
        copy.observations = torch::Tensor();
        copy.channelNames.clear();
        rl::writeEpisode(path("noobs.h5"), copy);
        EpisodeReader ep(path("noobs.h5"));
        const std::string want = "this episode has no observations the network can read";
        auto e = errorOf([&] { loadEpisodeNetwork(ep); });
        QVERIFY2(contains(e, {"noobs.h5", want}), e.c_str());
        e = errorOf([&] { predictStep(*net_, ep, 0); });
        QVERIFY2(contains(e, {"noobs.h5", want}), e.c_str());
        e = errorOf([&] { imagine(*net_, ep, 0, 2, 0.99); });
        QVERIFY2(contains(e, {want}), e.c_str());
        e = errorOf([&] { valueSaliency(*net_, ep, 0); });
        QVERIFY2(contains(e, {want}), e.c_str());
    }

    // predictStep is initial inference on the stacked observation, and it reproduces what the
    // recorder saw while playing (value, policy, and the chosen child's value prefix).
    void predictStepEqualsDirectInference() {
        EpisodeReader ep(episode_);
        const auto net = loadEpisodeNetwork(ep);
        const int stack = net->config().stack;
        QCOMPARE(stack, 4);
        torch::NoGradGuard noGrad;
        for (int64_t t = 0; t < ep.length(); ++t) {
            const auto p = predictStep(*net, ep, t);
            const auto obs = stackByHand(recorded_.observations, t, stack);
            QVERIFY(torch::equal(stackedObservation(ep, t, stack), obs));
            const auto out = net->initialInference(obs);
            const auto next = net->recurrentInference(out.state, oneAction(ep.action(t)), net->initialLstm(1));
            QCOMPARE(p.value, out.value.item<float>());
            QCOMPARE(p.valuePrefix, next.valuePrefix.item<float>());
            const auto pol = torch::softmax(out.policyLogits[0], 0);
            QCOMPARE(int64_t(p.policy.size()), int64_t(4));
            for (int a = 0; a < 4; ++a) QCOMPARE(p.policy[size_t(a)], pol[a].item<float>());
            // What evaluate() recorded from its own (batched) inference.
            QVERIFY(std::abs(p.value - recorded_.model.value[t].item<float>()) < 1e-5);
            for (int a = 0; a < 4; ++a)
                QVERIFY(std::abs(p.policy[size_t(a)] - recorded_.model.policy[t][a].item<float>()) < 1e-5);
            if (recorded_.model.visitCounts[t][ep.action(t)].item<int>() > 0)
                QVERIFY(std::abs(p.valuePrefix - recorded_.model.valuePrefix[t].item<float>()) < 1e-5);
        }
        // Not every prediction is 0: the test would otherwise prove little.
        QVERIFY(std::abs(predictStep(*net, ep, 3).value) > 1e-3);
    }

    void imagineMatchesRecurrentInference() {
        EpisodeReader ep(episode_);
        const auto net = loadEpisodeNetwork(ep);
        const int64_t t = 1;
        const int K = 7;   // crosses the LSTM reset at depth 5
        const auto im = imagine(*net, ep, t, K, 0.9);
        QCOMPARE(int(im.predictedReward.size()), K);
        QCOMPARE(int(im.actualReward.size()), K);
        QCOMPARE(int(im.predictedValue.size()), K + 1);
        QCOMPARE(int(im.actualReturn.size()), K + 1);
        QCOMPARE(im.predictedValue[0], predictStep(*net, ep, t).value);
        torch::NoGradGuard noGrad;
        const auto out = net->initialInference(stackByHand(recorded_.observations, t, 4));
        auto state = out.state;
        auto lstm = net->initialLstm(1);
        float prefix = 0;
        for (int k = 0; k < K; ++k) {
            if (k == 5) lstm = net->initialLstm(1);
            const auto r = net->recurrentInference(state, oneAction(recorded_.actions[t + k].item<int64_t>()), lstm);
            const float vp = r.valuePrefix.item<float>();
            const float reward = (k == 0 || k == 5) ? vp : vp - prefix;
            QVERIFY2(std::abs(im.predictedReward[size_t(k)] - reward) < 1e-6, qPrintable(QString::number(k)));
            QVERIFY(std::abs(im.predictedValue[size_t(k) + 1] - r.value.item<float>()) < 1e-6);
            QCOMPARE(im.actualReward[size_t(k)], recorded_.rewards[t + k].item<float>());
            prefix = vp;
            state = r.nextState;
            lstm = r.lstm;
        }
        // Up to the last step is allowed; beyond it, and K < 1, are errors.
        const int64_t T = ep.length();
        const auto toEnd = imagine(*net, ep, T - 3, 3, 0.9);
        QCOMPARE(toEnd.actualReturn[3], 0.f);
        auto e = errorOf([&] { imagine(*net, ep, T - 3, 4, 0.9); });
        QVERIFY2(contains(e, {"episode_0000.h5", "past the episode's end"}), e.c_str());
        e = errorOf([&] { imagine(*net, ep, 0, 0, 0.9); });
        QVERIFY2(contains(e, {"K must be >= 1"}), e.c_str());
        e = errorOf([&] { imagine(*net, ep, -1, 1, 0.9); });
        QVERIFY2(contains(e, {"outside the episode"}), e.c_str());
    }

    // As trained (the viewer's charts, the world-model table): rewards clipped to their sign, and a
    // lost life ends a return as the game's end does; the predictions are the same.
    void imagineAsTrained() {
        rl::Episode copy = recorded_;
        const int64_t T = copy.length();
        QVERIFY(T >= 9);
        copy.rewards = torch::zeros({T}, torch::kFloat32);
        copy.rewards[1] = 2.5f;
        copy.rewards[2] = -0.5f;
        copy.rewards[3] = 3.f;
        copy.rewards[6] = 0.25f;
        copy.terminals = torch::zeros({T}, torch::kBool);
        copy.terminals[5] = true;            // two games: steps 0..5 and 6..T-1
        copy.lifeLoss = torch::zeros({T}, torch::kBool);
        copy.lifeLoss[2] = true;             // a life lost in step 2
        rl::writeEpisode(path("as_trained.h5"), copy);
        EpisodeReader ep(path("as_trained.h5"));
        QVERIFY(ep.lifeLost(2));
        const double g = 0.9;
        const auto raw = imagine(*net_, ep, 1, 6, g);
        const auto trained = imagine(*net_, ep, 1, 6, g, nullptr, 5, Targets::AsTrained);
        QCOMPARE(trained.predictedReward, raw.predictedReward);
        QCOMPARE(trained.predictedValue, raw.predictedValue);
        const std::vector<float> clipped{1.f, -1.f, 1.f, 0.f, 0.f, 1.f};   // steps 1..6
        QCOMPARE(trained.actualReward, clipped);
        QCOMPARE(raw.actualReward[0], 2.5f);
        // Returns from steps 1..7, as trained: segments 0..2 | 3..5 | 6..T-1.
        const std::vector<double> want{1 + g * -1, -1, 1, 0, 0, 1 + 0, 0};
        // Raw: to the game's end (step 5), unclipped.
        const std::vector<double> wantRaw{2.5 + g * (-0.5 + g * 3), -0.5 + g * 3, 3, 0, 0, 0.25, 0};
        for (int k = 0; k <= 6; ++k) {
            QVERIFY2(std::abs(trained.actualReturn[size_t(k)] - want[size_t(k)]) < 1e-5, qPrintable(QString::number(k)));
            QVERIFY2(std::abs(raw.actualReturn[size_t(k)] - wantRaw[size_t(k)]) < 1e-5, qPrintable(QString::number(k)));
        }
    }

    // The real value: discounted returns of the recorded rewards to the end of the game.
    void imagineActualReturns() {
        rl::Episode copy = recorded_;
        const int64_t T = copy.length();
        copy.rewards = torch::arange(T, torch::kFloat32) * 0.5f + 1.f;
        copy.terminals = torch::zeros({T}, torch::kBool);
        copy.terminals[4] = true;   // two games: steps 0..4 and 5..T-1
        rl::writeEpisode(path("returns.h5"), copy);
        EpisodeReader ep(path("returns.h5"));
        const double g = 0.9;
        const auto im = imagine(*net_, ep, 1, 6, g);
        auto returnFrom = [&](int64_t s) {
            double sum = 0, w = 1;
            for (int64_t i = s; i < T; ++i) {
                sum += w * copy.rewards[i].item<float>();
                w *= g;
                if (i == 4) break;
            }
            return sum;
        };
        for (int k = 0; k <= 6; ++k)
            QVERIFY2(std::abs(im.actualReturn[size_t(k)] - returnFrom(1 + k)) < 1e-4, qPrintable(QString::number(k)));
        QCOMPARE(im.actualReward[3], copy.rewards[4].item<float>());
        // The stack restarts with the second game's first observation.
        const int64_t C = recorded_.observations.size(1);
        const auto obs = stackedObservation(ep, 6, 4)[0];
        QVERIFY(torch::equal(obs.slice(0, 0, C), recorded_.observations[5]));
        QVERIFY(torch::equal(obs.slice(0, 2 * C, 3 * C), recorded_.observations[5]));
        QVERIFY(torch::equal(obs.slice(0, 3 * C, 4 * C), recorded_.observations[6]));
    }

    void cancelled() {
        EpisodeReader ep(episode_);
        std::atomic<bool> cancel{true};
        auto e = errorOf([&] { imagine(*net_, ep, 0, 3, 0.9, &cancel); });
        QVERIFY2(contains(e, {"cancelled"}), e.c_str());
        e = errorOf([&] { valueSaliency(*net_, ep, 0, &cancel); });
        QVERIFY2(contains(e, {"cancelled"}), e.c_str());
        cancel = false;
        QCOMPARE(int(imagine(*net_, ep, 0, 3, 0.9, &cancel).predictedReward.size()), 3);
    }

    // Saliency equals |d value / d input| summed over channels and resized, computed here
    // through represent() + predict() + supportToScalar with Tensor::backward().
    void saliencyEqualsAutograd() {
        EpisodeReader ep(episode_);
        const auto net = loadEpisodeNetwork(ep);
        for (int64_t t : {int64_t(0), int64_t(5)}) {
            const auto s = valueSaliency(*net, ep, t);
            QCOMPARE(s.sizes().vec(), (std::vector<int64_t>{ep.frameHeight(), ep.frameWidth()}));
            QCOMPARE(s.scalar_type(), torch::kFloat32);
            QVERIFY(torch::isfinite(s).all().item<bool>());
            QVERIFY(s.min().item<float>() >= 0.f);
            QVERIFY(s.max().item<float>() > 0.f);

            // valueSaliency leaves the parameters' gradients alone.
            for (const auto& p : net->parameters()) QVERIFY(!p.grad().defined());

            auto obs = stackByHand(recorded_.observations, t, 4).clone().requires_grad_(true);
            const auto logits = net->predict(net->represent(obs)).first;
            efficientzero::supportToScalar(logits, net->config().supportSize).sum().backward();
            const auto g = obs.grad().abs().sum(1, true);
            namespace F = torch::nn::functional;
            const auto want = F::interpolate(g, F::InterpolateFuncOptions()
                                                    .size(std::vector<int64_t>{ep.frameHeight(), ep.frameWidth()})
                                                    .mode(torch::kBilinear)
                                                    .align_corners(false))[0][0];
            QVERIFY2(glimpse::testing::maxDiff(s, want) < 1e-5, qPrintable(QString::number(glimpse::testing::maxDiff(s, want))));
            for (auto& p : net->parameters())
                if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
        }
        // Grid frames are the observation cells scaled up: 8x8 pixels per cell.
        QCOMPARE(ep.frameHeight(), 8 * ep.observationShape()[1]);
    }

    // evaluate() records the root children's Q (0 when unvisited) and prior.
    void recorderWritesChildren() {
        const auto& m = recorded_.model;
        const int64_t T = recorded_.length(), A = 4;
        QVERIFY(m.childrenQ.defined() && m.childrenPrior.defined());
        QCOMPARE(m.childrenQ.sizes().vec(), (std::vector<int64_t>{T, A}));
        QCOMPARE(m.childrenPrior.sizes().vec(), (std::vector<int64_t>{T, A}));
        QVERIFY(torch::allclose(m.childrenPrior.sum(1), torch::ones({T}), 1e-5, 1e-5));
        // No noise in evaluation: the priors are the network's policy.
        QVERIFY(torch::allclose(m.childrenPrior, m.policy, 1e-5, 1e-6));
        EpisodeReader ep(episode_);
        QVERIFY(ep.has(PerAction::ChildQ) && ep.has(PerAction::ChildPrior));
        // A child visited once is a leaf expanded once: Q = its value prefix (the reward from a
        // fresh LSTM state) + discount * its value.
        torch::NoGradGuard noGrad;
        int checked = 0;
        for (int64_t t = 0; t < T; ++t) {
            const auto out = net_->initialInference(stackByHand(recorded_.observations, t, 4));
            for (int64_t a = 0; a < A; ++a) {
                const int visits = m.visitCounts[t][a].item<int>();
                const float q = m.childrenQ[t][a].item<float>();
                if (visits == 0) {
                    QCOMPARE(q, 0.f);
                } else if (visits == 1) {
                    const auto r = net_->recurrentInference(out.state, oneAction(a), net_->initialLstm(1));
                    const double want = r.valuePrefix.item<float>() + kSearchDiscount * r.value.item<float>();
                    QVERIFY2(std::abs(q - want) < 1e-5, qPrintable(QString("t %1 a %2: %3 vs %4").arg(t).arg(a).arg(q).arg(want)));
                    ++checked;
                }
            }
        }
        QVERIFY(checked > 0);
    }
};

QTEST_APPLESS_MAIN(TestReplayModel)
#include "test_replay_model.moc"
