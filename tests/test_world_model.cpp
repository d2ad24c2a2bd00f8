// The world-model check (core/replay/world_model_check.h) on a hand-made episode of breakout
// (two games, a lost life, rewards of several sizes, recorded root values) with a tiny random
// network: its batched per-depth errors equal those computed here another way, start by start
// with the viewer's own rollout (model_view.h `imagine`, one start at a time, batch 1) and
// targets summed forwards by hand; an untrained network's errors are the targets' mean sizes.
#include <QtTest>

#include <atomic>
#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "core/replay/world_model_check.h"
#include "core/rl/env.h"
#include "core/rl/episode.h"
#include "tests/ez_support.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::replay;
using efficientzero::Network;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

constexpr int64_t kT = 23;
constexpr int64_t kGameEnd = 9;    // the first game ends after step 9
constexpr int64_t kLifeLost = 15;  // a life is lost in step 15 of the second game

Network randomNetwork(uint64_t seed) {
    torch::manual_seed(int64_t(seed));
    Network net(glimpse::testing::tinyEfficientZeroConfig("breakout"));
    torch::NoGradGuard noGrad;
    for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.5);
    net.train(false);
    return net;
}

rl::Episode handMadeEpisode() {
    auto env = rl::makeEnv("breakout");
    const auto s = env->observationShape();
    torch::manual_seed(3);
    rl::Episode e;
    e.env = "breakout";
    e.source = "test";
    e.actionNames = env->actionNames();
    for (int c = 0; c < s.channels; ++c) e.channelNames.push_back("c" + std::to_string(c));
    e.frames = torch::zeros({kT, 4, 4, 3}, torch::kUInt8);
    e.observations = (torch::rand({kT, s.channels, s.height, s.width}) > 0.7).to(torch::kFloat32);
    e.actions = torch::randint(0, env->numActions(), {kT}, torch::kLong);
    const float r[kT] = {0, 2, 0, 0, -1, 0, 3, 0, 0, 1, 0, 0, 4, 0, 0, 1, 0, 0.5f, 0, 0, 2, 0, 1};
    e.rewards = torch::from_blob(const_cast<float*>(r), {kT}, torch::kFloat32).clone();
    e.lives = torch::full({kT}, 5, torch::kInt32);
    e.lives.slice(0, kLifeLost).fill_(4);
    e.terminals = torch::zeros({kT}, torch::kBool);
    e.terminals[kGameEnd] = true;
    e.terminal = false;   // the second game was cut
    for (double v : r) e.episodeReturn += v;
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.rootValues = torch::randn({kT}) * 2;
    return e;
}

// The reference: start by start with imagine() (batch 1), targets summed forwards.
struct Reference {
    std::vector<double> rewardMae, valueMae, rootMae;
    std::vector<int64_t> count, rootCount;
};

Reference reference(Network& net, EpisodeReader& ep, int K, double discount, bool clip, bool lifeLoss) {
    auto rew = [&](int64_t s) {
        const double r = ep.reward(s);
        return clip ? (r > 0 ? 1.0 : r < 0 ? -1.0 : 0.0) : r;
    };
    auto ends = [&](int64_t s) { return ep.isTerminal(s) || (lifeLoss && ep.lifeLost(s)); };
    // The discounted return from step s, summed forwards to the end of its segment.
    auto forwardReturn = [&](int64_t s) {
        double g = 0, w = 1;
        for (int64_t i = s; i < ep.length(); ++i) {
            g += w * rew(i);
            w *= discount;
            if (ends(i)) break;
        }
        return g;
    };
    Reference ref;
    ref.rewardMae.assign(size_t(K) + 1, 0);
    ref.valueMae.assign(size_t(K) + 1, 0);
    ref.rootMae.assign(size_t(K) + 1, 0);
    ref.count.assign(size_t(K) + 1, 0);
    ref.rootCount.assign(size_t(K) + 1, 0);
    const auto& root = ep.series(Series::RootValue);
    for (int64_t t = 0; t + K <= ep.length(); ++t) {
        const Imagined im = imagine(net, ep, t, K, discount);
        for (int k = 0; k <= K; ++k) {
            // Crossing: an end strictly before the last imagined action.
            bool crosses = false;
            for (int64_t s = t; s <= t + k - 2; ++s) crosses = crosses || ends(s);
            if (crosses) break;
            const bool ended = k >= 1 && ends(t + k - 1);
            const double target = ended || t + k >= ep.length() ? 0.0 : forwardReturn(t + k);
            ref.count[size_t(k)]++;
            ref.valueMae[size_t(k)] += std::abs(im.predictedValue[size_t(k)] - target);
            if (k >= 1) ref.rewardMae[size_t(k)] += std::abs(im.predictedReward[size_t(k) - 1] - rew(t + k - 1));
            if (!ended && t + k < ep.length()) {
                ref.rootCount[size_t(k)]++;
                ref.rootMae[size_t(k)] += std::abs(im.predictedValue[size_t(k)] - root[size_t(t + k)]);
            }
        }
    }
    for (int k = 0; k <= K; ++k) {
        ref.valueMae[size_t(k)] /= double(ref.count[size_t(k)]);
        ref.rewardMae[size_t(k)] /= double(ref.count[size_t(k)]);
        ref.rootMae[size_t(k)] /= double(ref.rootCount[size_t(k)]);
    }
    return ref;
}

} // namespace

class TestWorldModel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string episode_;

    void compare(bool clip, bool lifeLoss, double discount, int batch) {
        Network net = randomNetwork(11);
        EpisodeReader ep(episode_);
        const int K = 5;
        WorldModelCheckOptions o;
        o.depth = K;
        o.discount = discount;
        o.clipRewards = clip;
        o.lifeLossEnds = lifeLoss;
        o.batch = batch;
        const WorldModelCheck got = checkWorldModel(net, ep, o);
        const Reference ref = reference(net, ep, K, discount, clip, lifeLoss);
        QCOMPARE(got.starts, kT - K + 1);
        QCOMPARE(int(got.depths.size()), K + 1);
        for (int k = 0; k <= K; ++k) {
            const auto& d = got.depths[size_t(k)];
            QCOMPARE(d.depth, k);
            QCOMPARE(d.count, ref.count[size_t(k)]);
            QCOMPARE(d.rootCount, ref.rootCount[size_t(k)]);
            QVERIFY2(std::abs(d.valueMae - ref.valueMae[size_t(k)]) < 1e-4,
                     qPrintable(QString("depth %1 value %2 vs %3").arg(k).arg(d.valueMae).arg(ref.valueMae[size_t(k)])));
            QVERIFY(std::abs(d.rootValueMae - ref.rootMae[size_t(k)]) < 1e-4);
            if (k == 0) {
                QVERIFY(std::isnan(d.rewardMae));
            } else {
                QVERIFY2(std::abs(d.rewardMae - ref.rewardMae[size_t(k)]) < 1e-4,
                         qPrintable(QString("depth %1 reward %2 vs %3").arg(k).arg(d.rewardMae).arg(ref.rewardMae[size_t(k)])));
            }
        }
        // Rollouts stop at ends: depth 5 has fewer pairs than depth 1 (which counts every start).
        QCOMPARE(got.depths[1].count, got.starts);
        QVERIFY(got.depths[5].count < got.depths[1].count);
    }

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        episode_ = dir_.path().toStdString() + "/hand.h5";
        rl::writeEpisode(episode_, handMadeEpisode());
        EpisodeReader ep(episode_);
        QVERIFY(ep.isTerminal(kGameEnd));
        QVERIFY(ep.lifeLost(kLifeLost));
        QVERIFY(!ep.lifeLost(kLifeLost + 1));
    }

    // As trained: clipped rewards, a lost life ends the return; batches that split the starts.
    void matchesReferenceAsTrained() { compare(true, true, 0.97, 4); }
    // Raw rewards, only game ends; one batch for every start.
    void matchesReferenceRaw() { compare(false, false, 0.997, 64); }

    // An untrained network predicts value 0 and reward 0 everywhere (zero-initialised heads), so
    // its errors are the targets' mean sizes, and the trained-vs-untrained difference is what
    // the model learned.
    void untrainedPredictsZero() {
        Network net = untrainedNetwork(glimpse::testing::tinyEfficientZeroConfig("breakout"), 5);
        EpisodeReader ep(episode_);
        const WorldModelCheck c = checkWorldModel(net, ep, {});
        for (const auto& d : c.depths) {
            QVERIFY(std::abs(d.valueMae - d.meanAbsReturn) < 1e-6);
            if (d.depth > 0) QVERIFY(std::abs(d.rewardMae - d.meanAbsReward) < 1e-6);
        }
        QVERIFY(c.depths[1].meanAbsReward > 0);
        const std::string table = worldModelTable(c, &c, true);
        QVERIFY(contains(table, {"| depth |", "(untrained)", "value vs search MAE"}));
        QCOMPARE(int(std::count(table.begin(), table.end(), '\n')), 2 + 6);
    }

    void maxStartsAndErrors() {
        Network net = randomNetwork(2);
        EpisodeReader ep(episode_);
        WorldModelCheckOptions o;
        o.maxStarts = 4;
        QCOMPARE(checkWorldModel(net, ep, o).starts, int64_t(4));
        o = {};
        o.depth = int(kT) + 1;
        QVERIFY(contains(errorOf([&] { checkWorldModel(net, ep, o); }), {"too few", "depth"}));
        o = {};
        o.discount = 1.5;
        QVERIFY(contains(errorOf([&] { checkWorldModel(net, ep, o); }), {"discount"}));
        std::atomic<bool> cancel{true};
        QVERIFY(contains(errorOf([&] { checkWorldModel(net, ep, {}, &cancel); }), {"cancelled"}));
        net.train(true);
        QVERIFY(contains(errorOf([&] { checkWorldModel(net, ep, {}); }), {"training mode"}));
        Network other(glimpse::testing::tinyEfficientZeroConfig("pellets"));
        other.train(false);
        QVERIFY(contains(errorOf([&] { checkWorldModel(other, ep, {}); }), {"hand.h5", "observations"}));
    }
};

QTEST_GUILESS_MAIN(TestWorldModel)
#include "test_world_model.moc"
