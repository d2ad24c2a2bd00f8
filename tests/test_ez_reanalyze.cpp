// EfficientZero's policy reanalyze (core/models/efficientzero/reanalyze.h): the targets it puts
// into a batch equal a search of observations stacked by hand from the game's frames, mapped
// back by hand; only the first round(ratio * B) samples and their steps inside the
// game change; a short training run with it writes finite losses; bad input is refused.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <random>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/reanalyze.h"
#include "core/models/efficientzero/search.h"
#include "core/models/efficientzero/train.h"
#include "core/rl/mcts.h"
#include "core/rl/replay.h"
#include "core/runlog.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::efficientzero;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

constexpr int kActions = 3, kUnroll = 3, kStack = 2, kSims = 12;
constexpr uint64_t kSeed = 5;

Config tinyConfig() {
    Config c = Config::grid(2, 4, 4, kActions);
    c.stack = kStack;
    c.channels = 4;
    c.lstmHidden = 8;
    c.reducedChannelsReward = c.reducedChannelsValue = c.reducedChannelsPolicy = 2;
    c.rewardHidden = c.valueHidden = c.policyHidden = {8};
    c.supportSize = 5;
    c.projHidden = 8;
    c.projOut = 8;
    c.predHidden = 4;
    c.oneHotActions = true;
    return c;
}

// A network with every weight random (the zero-initialised heads would make all priors equal
// and every selection a tie), in eval mode.
Network randomNetwork() {
    torch::manual_seed(11);
    Network net(tinyConfig());
    torch::NoGradGuard ng;
    for (auto& p : net.parameters()) p.normal_(0.0, 0.6);
    net.train(false);
    return net;
}

// A game of T moves with random 0/1 frames and one-hot stored policies (a = t % A).
rl::GameHistory randomGame(int T, std::mt19937& rng) {
    rl::GameHistory g;
    g.frame = {2, 4, 4};
    g.numActions = kActions;
    std::bernoulli_distribution bit(0.4);
    for (int t = 0; t <= T; ++t) {
        std::vector<float> f(32);
        for (auto& v : f) v = bit(rng) ? 1.f : 0.f;
        g.addFrame(f.data());
    }
    for (int t = 0; t < T; ++t) {
        g.actions.push_back(t % kActions);
        g.rewards.push_back(float(t % 2));
        g.rootValues.push_back(0.f);
        for (int a = 0; a < kActions; ++a) g.policies.push_back(a == t % kActions ? 1.f : 0.f);
    }
    g.terminal = true;
    g.done = true;
    return g;
}

// The observation at step t stacked by hand: frames t - stack + 1 .. t, frame 0 repeated before
// the start, bytes / 255.
torch::Tensor handStacked(const rl::GameHistory& g, int t) {
    const int64_t n = g.frame.numel();
    auto obs = torch::zeros({1, kStack * g.frame.channels, g.frame.height, g.frame.width});
    auto flat = obs.view({-1});
    for (int s = 0; s < kStack; ++s) {
        const int f = std::max(0, t - kStack + 1 + s);
        for (int64_t i = 0; i < n; ++i) flat[s * n + i] = float(g.frames[size_t(f * n + i)]) / 255.f;
    }
    return obs;
}

rl::MctsConfig mctsConfig() {
    rl::MctsConfig mc;
    mc.numSimulations = kSims;
    return mc;
}

struct Fixture {
    rl::ReplayBuffer replay;
    std::vector<rl::SampledPosition> samples;
    std::vector<rl::PositionTargets> targets;
};

Fixture fixture() {
    rl::ReplayConfig rc;
    rc.unroll = kUnroll;
    Fixture f{rl::ReplayBuffer(rc), {}, {}};
    std::mt19937 rng(3);
    f.replay.add(randomGame(5, rng));
    f.replay.add(randomGame(3, rng));
    // (game, position): sample 1's last step (t = 3) is past its game's end (T = 3).
    for (auto [g, p] : std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {0, 4}, {1, 0}}) {
        rl::SampledPosition s;
        s.game = g;
        s.pos = p;
        s.weight = 1;
        f.samples.push_back(s);
    }
    std::mt19937_64 trng(9);
    for (const auto& s : f.samples) f.targets.push_back(f.replay.targets(s.game, s.pos, trng));
    return f;
}

} // namespace

class TestEzReanalyze : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    // The reanalyze of the first half of the batch against a search computed here: the steps
    // inside the game listed by hand (sample by sample, step by step), their observations
    // stacked by hand from the game's bytes, one search of them all from a fresh MCTS of the
    // same seed (no noise; the first selection at every node is a tie broken by the search's
    // RNG, so the reference searches the same trees in the same order), its policies mapped back.
    void targetsEqualSearchOfHandStackedObservations() {
        for (const std::string target : {"visits", "completed_q"}) {
            Network net = randomNetwork();
            Fixture f = fixture();
            const auto before = f.targets;
            PolicyReanalyzeOptions o;
            o.ratio = 0.5;
            o.stack = kStack;
            o.addNoise = false;
            o.policyTarget = target;
            rl::Mcts mcts(mctsConfig(), kSeed);
            const int searched = reanalyzePolicyTargets(net, mcts, f.replay, f.samples, f.targets, o);
            QCOMPARE(searched, 4 + 2);   // sample 0: t = 1..4; sample 1: t = 1, 2 (t = 3 is the end)

            // Reference: (sample, step) pairs by hand, for the fixture's games of 5 and 3 moves.
            const std::vector<std::pair<int, int>> slots{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}};
            std::vector<torch::Tensor> obs;
            for (auto [b, k] : slots)
                obs.push_back(handStacked(f.replay.games()[size_t(f.samples[size_t(b)].game)], f.samples[size_t(b)].pos + k));
            rl::Mcts reference(mctsConfig(), kSeed);
            const auto res = searchBatch(net, reference, torch::cat(obs, 0), false);
            const auto& want = target == "visits" ? res.policies : res.improvedPolicies;
            int changed = 0;
            for (size_t b = 0; b < f.samples.size(); ++b) {
                for (int k = 0; k <= kUnroll; ++k) {
                    const float* got = f.targets[b].policy.data() + k * kActions;
                    const float* old = before[b].policy.data() + k * kActions;
                    const auto it = std::find(slots.begin(), slots.end(), std::pair<int, int>(int(b), k));
                    if (it == slots.end()) {   // not reanalyzed: unchanged (zeros past the end)
                        for (int a = 0; a < kActions; ++a) QCOMPARE(got[a], old[a]);
                        continue;
                    }
                    const auto& w = want[size_t(it - slots.begin())];
                    double sum = 0, diffOld = 0;
                    for (int a = 0; a < kActions; ++a) {
                        QVERIFY2(std::abs(got[a] - w[size_t(a)]) < 1e-6,
                                 qPrintable(QString("%1 sample %2 step %3 action %4: %5 vs %6")
                                                .arg(target.c_str()).arg(b).arg(k).arg(a).arg(got[a]).arg(w[size_t(a)])));
                        sum += got[a];
                        diffOld += std::abs(got[a] - old[a]);
                    }
                    QVERIFY(std::abs(sum - 1.0) < 1e-5);
                    if (diffOld > 1e-3) ++changed;
                }
                // Values, masks and actions are the replay's own.
                QCOMPARE(f.targets[b].mask, before[b].mask);
                QCOMPARE(f.targets[b].valueRewardPart, before[b].valueRewardPart);
                QCOMPARE(f.targets[b].actions, before[b].actions);
            }
            QVERIFY2(changed >= 3, "the searches replace the stored one-hot policies");
        }
    }

    // Ratio 1 covers every sample, 0 none; with noise the same call differs from without.
    void ratioAndNoise() {
        Network net = randomNetwork();
        PolicyReanalyzeOptions o;
        o.stack = kStack;
        o.addNoise = false;
        o.ratio = 1.0;
        Fixture all = fixture();
        rl::Mcts m1(mctsConfig(), kSeed);
        QCOMPARE(reanalyzePolicyTargets(net, m1, all.replay, all.samples, all.targets, o), 4 + 2 + 1 + 3);
        o.ratio = 0;
        Fixture none = fixture();
        const auto before = none.targets;
        rl::Mcts m2(mctsConfig(), kSeed);
        QCOMPARE(reanalyzePolicyTargets(net, m2, none.replay, none.samples, none.targets, o), 0);
        for (size_t b = 0; b < before.size(); ++b) QCOMPARE(none.targets[b].policy, before[b].policy);
        o.ratio = 1.0;
        o.addNoise = true;
        Fixture noisy = fixture();
        rl::Mcts m3(mctsConfig(), kSeed);
        reanalyzePolicyTargets(net, m3, noisy.replay, noisy.samples, noisy.targets, o);
        double diff = 0;
        for (size_t b = 0; b < before.size(); ++b)
            for (size_t i = 0; i < all.targets[b].policy.size(); ++i)
                diff += std::abs(noisy.targets[b].policy[i] - all.targets[b].policy[i]);
        QVERIFY2(diff > 1e-3, "root noise changes the searches");
    }

    void errors() {
        Network net = randomNetwork();
        Fixture f = fixture();
        rl::Mcts mcts(mctsConfig(), kSeed);
        PolicyReanalyzeOptions o;
        o.stack = kStack;
        o.ratio = 1.5;
        QVERIFY(contains(errorOf([&] { reanalyzePolicyTargets(net, mcts, f.replay, f.samples, f.targets, o); }),
                         {"ratio", "[0, 1]"}));
        o.ratio = 1;
        o.policyTarget = "argmax";
        QVERIFY(contains(errorOf([&] { searchPolicies(net, mcts, f.replay, {{0, 0}}, o); }), {"argmax"}));
        o.policyTarget = "visits";
        QVERIFY(contains(errorOf([&] { searchPolicies(net, mcts, f.replay, {{1, 3}}, o); }), {"(1, 3)", "not a move"}));
        QVERIFY(contains(errorOf([] { TrainConfig::fromJson(nlohmann::json{{"reanalyze_policy_ratio", 2}}); }),
                         {"reanalyze_policy_ratio"}));
        QCOMPARE(TrainConfig::fromJson(nlohmann::json{{"reanalyze_policy_ratio", 0.25}}).reanalyzePolicyRatio, 0.25);
        QCOMPARE(TrainConfig{}.reanalyzePolicyRatio, 0.0);
    }

    // The trainer with reanalyze on: a short run of a tiny network finishes with finite losses.
    void shortRunWithReanalyze() {
        QTemporaryDir dir;
        TrainConfig c;
        c.env = "breakout";
        c.steps = 4;
        c.numEnvs = 2;
        c.simulations = 2;
        c.maxEpisodeSteps = 25;
        c.batchSize = 4;
        c.minReplay = 30;
        c.updatesPerEnvStep = 1.0;
        c.checkpointInterval = 10;
        c.logInterval = 1;
        c.warmupSteps = 2;
        c.reanalyzePolicyRatio = 0.5;
        c.network = {{"channels", 4},       {"lstm_hidden", 8},  {"reduced_channels_reward", 2},
                     {"reduced_channels_value", 2}, {"reduced_channels_policy", 2}, {"support_size", 10},
                     {"proj_hidden", 8},    {"proj_out", 8},     {"pred_hidden", 4},
                     {"reward_hidden", {8}}, {"value_hidden", {8}}, {"policy_hidden", {8}}};
        const auto r = trainAgent(c, dir.path().toStdString() + "/run");
        QCOMPARE(r.updates, int64_t(4));
        const RunLog log = RunLog::load(dir.path().toStdString() + "/run/runlog.h5");
        QCOMPARE(log.config.at("reanalyze_policy_ratio").get<double>(), 0.5);
        for (double v : log.series.at("loss_policy").values) QVERIFY(std::isfinite(v) && v > 0);
    }
};

QTEST_APPLESS_MAIN(TestEzReanalyze)
#include "test_ez_reanalyze.moc"
