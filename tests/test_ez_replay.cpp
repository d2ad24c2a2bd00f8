// Prioritized replay and n-step targets (core/rl/replay.h) against hand computation.
#include <QtTest>

#include <cmath>

#include "core/error.h"
#include "core/rl/replay.h"
#include "tests/support.h"

using namespace glimpse::rl;

namespace {

GameHistory makeGame(const std::vector<float>& rewards, bool terminal, int A = 3) {
    GameHistory g;
    g.frame = {1, 2, 2};
    g.numActions = A;
    const int T = int(rewards.size());
    for (int t = 0; t <= T; ++t) {
        std::vector<float> f(4, (t % 2) ? 1.f : 0.f);
        g.addFrame(f.data());
    }
    for (int t = 0; t < T; ++t) {
        g.actions.push_back(t % A);
        g.rewards.push_back(rewards[size_t(t)]);
        g.rootValues.push_back(0.f);
        for (int a = 0; a < A; ++a) g.policies.push_back(a == t % A ? 1.f : 0.f);
    }
    g.terminal = terminal;
    g.done = true;
    return g;
}

} // namespace

class TestEzReplay : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void prioritiesAndBeta() {
        ReplayConfig c;
        ReplayBuffer rb(c);
        rb.add(makeGame({1, 0}, true), {1.0, 4.0});
        rb.add(makeGame({0, 0, 0}, true), {2.0, 0.5, 3.0});
        QCOMPARE(rb.transitions(), int64_t(5));
        QCOMPARE(rb.beta(0.0), 0.4);
        QCOMPARE(rb.beta(0.5), 0.7);
        QCOMPARE(rb.beta(2.0), 1.0);
        // P(i) = p_i^0.6 / sum p^0.6.
        const std::vector<double> p{1.0, 4.0, 2.0, 0.5, 3.0};
        double sum = 0;
        for (double v : p) sum += std::pow(v + c.priorityEps, 0.6);
        std::mt19937_64 rng(1);
        std::vector<int> counts(5, 0);
        const int N = 20000;
        auto s = rb.sample(N, 0.4, rng);
        double maxW = 0;
        for (double v : p) maxW = std::max(maxW, std::pow(5.0 * std::pow(v + c.priorityEps, 0.6) / sum, -0.4));
        for (const auto& x : s) {
            const int flat = x.game == 0 ? x.pos : 2 + x.pos;
            counts[size_t(flat)]++;
            const double P = std::pow(p[size_t(flat)] + c.priorityEps, 0.6) / sum;
            QVERIFY(std::abs(x.probability - P) < 1e-12);
            QVERIFY(std::abs(x.weight - std::pow(5.0 * P, -0.4) / maxW) < 1e-9);
        }
        for (int i = 0; i < 5; ++i) {
            const double P = std::pow(p[size_t(i)] + c.priorityEps, 0.6) / sum;
            QVERIFY2(std::abs(double(counts[size_t(i)]) / N - P) < 0.015, qPrintable(QString::number(i)));
        }
        // Updates: new priorities replace the old ones; new games get the maximum.
        rb.updatePriorities({s[0]}, {10.0});
        QCOMPARE(rb.maxPriority(), 10.0);
        rb.add(makeGame({1}, true));
        QCOMPARE(rb.priorities(2)[0], 10.0);
    }

    void nStepTargetsTerminal() {
        ReplayConfig c;
        c.discount = 0.5;
        c.tdSteps = 2;
        c.unroll = 3;
        c.lstmHorizon = 2;
        ReplayBuffer rb(c);
        rb.add(makeGame({1, 2, 4, 8}, true));
        std::mt19937_64 rng(0);
        auto t = rb.targets(0, 1, rng);  // positions 1..4, T = 4
        // k = 0 (t=1): 2 + 0.5*4, bootstrap v(3) * 0.25.
        QCOMPARE(t.valueRewardPart[0], 4.f);
        QCOMPARE(t.valueIndex[0], 3);
        QCOMPARE(t.valueDiscount[0], 0.25f);
        // k = 1 (t=2): 4 + 0.5*8, bootstrap index 4 = T on a terminal game: none.
        QCOMPARE(t.valueRewardPart[1], 8.f);
        QCOMPARE(t.valueIndex[1], -1);
        // k = 2 (t=3): 8, none; k = 3 (t=4): past the end.
        QCOMPARE(t.valueRewardPart[2], 8.f);
        QCOMPARE(t.valueIndex[2], -1);
        QCOMPARE(t.valueRewardPart[3], 0.f);
        QCOMPARE(t.mask, (std::vector<float>{1, 1, 1, 0}));
        // Value prefix with horizon 2: r1, r1 + r2, (reset) r3.
        QCOMPARE(t.valuePrefix, (std::vector<float>{2, 6, 8}));
        QCOMPARE(t.actions[0], 1);
        QCOMPARE(t.actions[1], 2);
        QCOMPARE(t.actions[2], 0);
        // Policy: the stored distribution, zeros past the end.
        QCOMPARE(t.policy[0 * 3 + 1], 1.f);
        QCOMPARE(t.policy[3 * 3 + 0] + t.policy[3 * 3 + 1] + t.policy[3 * 3 + 2], 0.f);
        // Past the end, prefixes stay, actions are random but legal.
        auto late = rb.targets(0, 3, rng);
        QCOMPARE(late.valuePrefix, (std::vector<float>{8, 8, 0}));
        QVERIFY(late.actions[1] >= 0 && late.actions[1] < 3);
        QCOMPARE(late.mask, (std::vector<float>{1, 0, 0, 0}));
    }

    void truncatedBootstrapsFromLastFrame() {
        ReplayConfig c;
        c.discount = 0.5;
        c.tdSteps = 5;
        c.unroll = 1;
        ReplayBuffer rb(c);
        rb.add(makeGame({1, 1, 1}, false));
        std::mt19937_64 rng(0);
        auto t = rb.targets(0, 1, rng);
        QCOMPARE(t.valueRewardPart[0], 1.5f);
        QCOMPARE(t.valueIndex[0], 3);
        QCOMPARE(t.valueDiscount[0], 0.25f);
    }

    void stackingAndEviction() {
        ReplayConfig c;
        c.capacity = 4;
        ReplayBuffer rb(c);
        rb.add(makeGame({0, 0, 0}, true));
        rb.add(makeGame({0, 0}, true));
        QCOMPARE(int(rb.games().size()), 1);  // the oldest game was dropped
        QCOMPARE(rb.transitions(), int64_t(2));
        std::vector<float> st(3 * 4);
        rb.games()[0].stackedInto(1, 3, st.data());
        // Frames 0 (repeated before the start) and 1: 0, 0, 1.
        QCOMPARE(st[0], 0.f);
        QCOMPARE(st[4], 0.f);
        QCOMPARE(st[8], 1.f);
        GameHistory bad = makeGame({1, 1}, true);
        bad.rewards.pop_back();
        QVERIFY(glimpse::testing::contains(glimpse::testing::errorOf([&] { rb.add(bad); }), {"inconsistent"}));
    }
};

QTEST_APPLESS_MAIN(TestEzReplay)
#include "test_ez_replay.moc"
