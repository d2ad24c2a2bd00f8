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

    // New positions get the largest priority held now, as the reference's
    // `self.priorities.max()`: once an early large error is updated away or its game evicted,
    // new games no longer get it.
    void newPositionsGetTheBuffersCurrentMaximum() {
        ReplayConfig c;
        c.capacity = 6;
        ReplayBuffer rb(c);
        QCOMPARE(rb.maxPriority(), 1.0);            // empty: 1
        rb.add(makeGame({0, 0, 0}, true), {50.0, 0.2, 0.1});
        rb.add(makeGame({0, 0}, true), {0.3, 0.4});
        QCOMPARE(rb.maxPriority(), 50.0);
        // Lower the 50 (position 0 of game 0) by an update.
        SampledPosition first;
        first.game = 0;
        first.pos = 0;
        rb.updatePriorities({first}, {0.05});
        QCOMPARE(rb.maxPriority(), 0.4);
        rb.add(makeGame({0}, true));
        QCOMPARE(rb.priorities(2)[0], 0.4);
        // A non-finite update takes the current maximum.
        rb.updatePriorities({first}, {std::nan("")});
        QCOMPARE(rb.priorities(0)[0], 0.4);
        // Evicting the game that held the maximum lowers it.
        rb.updatePriorities({first}, {9.0});
        QCOMPARE(rb.maxPriority(), 9.0);
        rb.add(makeGame({0, 0}, true), {0.7, 0.6});  // 8 transitions > 6: game 0 goes
        QCOMPARE(rb.transitions(), int64_t(5));
        QCOMPARE(rb.maxPriority(), 0.7);
    }

    // A batch holds distinct positions when the buffer has enough, drawn successively among the
    // positions not yet taken: inclusion probabilities computed by enumeration.
    void samplesDistinctPositions() {
        ReplayConfig c;
        ReplayBuffer rb(c);
        const std::vector<double> p{8.0, 1.0, 0.5, 0.1};
        rb.add(makeGame({0, 0}, true), {p[0], p[1]});
        rb.add(makeGame({0, 0}, true), {p[2], p[3]});
        std::vector<double> w;
        double sum = 0;
        for (double v : p) {
            w.push_back(std::pow(v + c.priorityEps, 0.6));
            sum += w.back();
        }
        // Inclusion in a batch of 2: P(i first) + sum_j P(j first) w_i / (sum - w_j).
        std::vector<double> incl(4, 0.0);
        for (int i = 0; i < 4; ++i) {
            incl[size_t(i)] = w[size_t(i)] / sum;
            for (int j = 0; j < 4; ++j)
                if (j != i) incl[size_t(i)] += w[size_t(j)] / sum * w[size_t(i)] / (sum - w[size_t(j)]);
        }
        std::mt19937_64 rng(7);
        std::vector<int> counts(4, 0);
        const int R = 20000;
        for (int r = 0; r < R; ++r) {
            const auto s = rb.sample(2, 1.0, rng);
            const int a = s[0].game * 2 + s[0].pos, b = s[1].game * 2 + s[1].pos;
            QVERIFY(a != b);
            counts[size_t(a)]++;
            counts[size_t(b)]++;
            QVERIFY(std::abs(s[0].probability - w[size_t(a)] / sum) < 1e-12);  // P(i) of the whole
        }
        for (int i = 0; i < 4; ++i)
            QVERIFY2(std::abs(double(counts[size_t(i)]) / R - incl[size_t(i)]) < 0.015,
                     qPrintable(QString("%1: %2 vs %3").arg(i).arg(double(counts[size_t(i)]) / R).arg(incl[size_t(i)])));
        // A batch of the whole buffer takes every position once, even with one dominant
        // priority (the fallback draw); more than the buffer holds falls back to replacement.
        ReplayBuffer big(c);
        std::vector<double> skew(40, 1e-9);
        skew[0] = 1e6;
        big.add(makeGame(std::vector<float>(40, 0.f), true), skew);
        auto all = big.sample(40, 1.0, rng);
        std::vector<int> seen(40, 0);
        for (const auto& x : all) seen[size_t(x.pos)]++;
        QCOMPARE(std::count(seen.begin(), seen.end(), 1), long(40));
        QCOMPARE(int(big.sample(100, 1.0, rng).size()), 100);
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
