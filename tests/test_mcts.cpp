// Batched MCTS on tiny hand-built models whose outputs are known exactly.
#include <QtTest>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "core/rl/mcts.h"

using namespace glimpse::rl;

namespace {

// A model over action paths: the reward of the last action (per tree row) and the value and
// policy of a state are functions of the path from the root; the "LSTM" accumulates rewards
// since its last reset and the value prefix is that accumulation, like the real head.
struct TinyModel : SearchModel {
    struct State {
        std::vector<int> path;
        float lstm = 0.f;
    };
    int numActions = 2;
    std::function<float(int, const std::vector<int>&)> reward = [](int, const std::vector<int>&) { return 0.f; };
    std::function<float(const std::vector<int>&)> value = [](const std::vector<int>&) { return 0.f; };
    std::function<std::vector<float>(const std::vector<int>&)> logits = [this](const std::vector<int>&) {
        return std::vector<float>(size_t(numActions), 0.f);
    };
    std::vector<std::vector<State>> slots;
    std::vector<std::pair<int, bool>> calls;  // (depth of the new state, reset flag) per row 0
    int batchCalls = 0;

    std::vector<Prediction> start(int batch) {
        slots.assign(1, std::vector<State>(static_cast<size_t>(batch)));
        std::vector<Prediction> roots(static_cast<size_t>(batch));
        for (auto& r : roots) {
            r.value = value({});
            r.policyLogits = logits({});
        }
        return roots;
    }

    std::vector<Prediction> recurrent(const std::vector<StateRef>& parents, const std::vector<int>& actions,
                                      const std::vector<uint8_t>& resetHidden) override {
        ++batchCalls;
        std::vector<State> made;
        std::vector<Prediction> out;
        for (size_t i = 0; i < parents.size(); ++i) {
            const State& parent = slots.at(size_t(parents[i].slot)).at(size_t(parents[i].row));
            State s{parent.path, resetHidden[i] ? 0.f : parent.lstm};
            s.path.push_back(actions[i]);
            s.lstm += reward(int(i), s.path);
            Prediction p;
            p.valuePrefix = s.lstm;
            p.value = value(s.path);
            p.policyLogits = logits(s.path);
            out.push_back(p);
            if (i == 0) calls.push_back({int(s.path.size()), resetHidden[i] != 0});
            made.push_back(std::move(s));
        }
        slots.push_back(std::move(made));
        return out;
    }
};

std::vector<float> softmax(const std::vector<float>& x) {
    float top = *std::max_element(x.begin(), x.end());
    std::vector<float> p;
    float sum = 0;
    for (float v : x) sum += std::exp(v - top);
    for (float v : x) p.push_back(std::exp(v - top) / sum);
    return p;
}

} // namespace

class TestMcts : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void puctFormulaMatchesHandComputation() {
        MctsConfig c;
        // (log((10 + 19652 + 1) / 19652) + 1.25) * sqrt(10) / (3 + 1) * 0.4
        QVERIFY(std::abs(puctPrior(c, 10, 3, 0.4) - 0.3954616631622508) < 1e-12);
        QCOMPARE(puctPrior(c, 0, 0, 0.7), 0.0);

        // ucbScore = prior term + normalized Q clipped to [0, 1].
        Mcts mcts(c);
        Node parent, child;
        parent.childVisits = 10;
        parent.valuePrefix = 0.5f;
        child.visits = 3;
        child.prior = 0.4f;
        child.valuePrefix = 1.5f;  // reward 1 from the parent's view
        child.valueSum = 3 * 2.0;  // value 2
        MinMaxStats stats;
        stats.update(0.0);
        stats.update(4.0);
        const double q = 1.0 + c.discount * 2.0;
        QVERIFY(std::abs(mcts.childQ(parent, child) - q) < 1e-9);
        QVERIFY(std::abs(mcts.ucbScore(parent, child, stats, 0.0) - (puctPrior(c, 10, 3, child.prior) + q / 4.0)) < 1e-9);
        parent.resetHidden = true;  // after an LSTM reset the child's prefix is the reward itself
        QVERIFY(std::abs(mcts.childQ(parent, child) - (1.5 + c.discount * 2.0)) < 1e-9);
        // Unvisited children take the given parent mean Q.
        child.visits = 0;
        QVERIFY(std::abs(mcts.ucbScore(parent, child, stats, 2.0) - (puctPrior(c, 10, 0, child.prior) + 0.5)) < 1e-9);
    }

    void minMaxNormalization() {
        MinMaxStats s;
        QCOMPARE(s.normalize(0.3), 0.3);  // nothing seen yet: unchanged
        s.update(0.2);
        s.update(0.5);
        QVERIFY(std::abs(s.normalize(0.35) - 0.5) < 1e-12);
        QVERIFY(std::abs(s.normalize(0.8) - 2.0) < 1e-12);  // ucbScore clips this to 1
        MinMaxStats narrow;
        narrow.update(1.0);
        narrow.update(1.005);  // range below the 0.01 floor
        QVERIFY(std::abs(narrow.normalize(1.005) - 0.5) < 1e-9);

        Mcts mcts;
        Node parent, child;
        child.visits = 1;
        child.valueSum = 10.0;
        parent.childVisits = 1;
        child.prior = 0.f;
        QCOMPARE(mcts.ucbScore(parent, child, s, 0.0), 1.0);
        child.valueSum = -10.0;
        QCOMPARE(mcts.ucbScore(parent, child, s, 0.0), 0.0);
    }

    void meanQOfChildren() {
        Mcts mcts;
        std::vector<Node> tree(3);
        tree[0].firstChild = 1;
        tree[0].numChildren = 2;
        tree[1].visits = 1;
        tree[1].valuePrefix = 1.f;
        tree[1].valueSum = 2.0;
        const double q = 1.0 + mcts.config().discount * 2.0;
        QVERIFY(std::abs(mcts.meanQ(tree, tree[0], true, 7.0) - q) < 1e-9);          // root: plain mean
        QVERIFY(std::abs(mcts.meanQ(tree, tree[0], false, 0.5) - (0.5 + q) / 2) < 1e-9);  // interior
        tree[1].visits = 0;
        QCOMPARE(mcts.meanQ(tree, tree[0], true, 0.0), 0.0);
    }

    void visitsConcentrateOnRewardingAction() {
        TinyModel model;
        model.reward = [](int, const std::vector<int>& path) { return path.back() == 1 ? 1.f : 0.f; };
        Mcts mcts;
        SearchResult r = mcts.search(model, model.start(1), false);
        QCOMPARE(model.batchCalls, 50);
        QCOMPARE(r.visitCounts[0][0] + r.visitCounts[0][1], 50);
        QVERIFY2(r.visitCounts[0][1] >= 40, qPrintable(QString::number(r.visitCounts[0][1])));
        QVERIFY(r.rootValues[0] > 0.5f);
        QVERIFY(std::abs(r.policies[0][1] - r.visitCounts[0][1] / 50.f) < 1e-6f);
        // Root Q: reward + discount * mean value of the child (values are 0 except rewards).
        const auto& tree = mcts.tree(0);
        for (int a = 0; a < 2; ++a) {
            const Node& c = tree[size_t(tree[0].firstChild + a)];
            QVERIFY(std::abs(r.rootQ[0][size_t(a)] - float(c.valuePrefix + 0.997 * c.value())) < 1e-5f);
        }
        QVERIFY(r.rootQ[0][1] > r.rootQ[0][0]);
    }

    void batchedTreesAreIndependent() {
        TinyModel model;
        model.numActions = 3;
        model.reward = [](int row, const std::vector<int>& path) { return path.back() == row ? 1.f : 0.f; };
        Mcts mcts;
        SearchResult r = mcts.search(model, model.start(3), false);
        QCOMPARE(model.batchCalls, 50);  // one batched call per simulation for all three trees
        QCOMPARE(int(r.visitCounts.size()), 3);
        for (int b = 0; b < 3; ++b) {  // tree b is rewarded for action b
            const auto& v = r.visitCounts[size_t(b)];
            QCOMPARE(int(std::max_element(v.begin(), v.end()) - v.begin()), b);
        }
    }

    void legalActionsRestrictTheRoot() {
        TinyModel model;
        model.numActions = 3;
        model.reward = [](int, const std::vector<int>& path) { return path.back() == 1 ? 1.f : 0.f; };
        Mcts mcts;
        SearchResult r = mcts.search(model, model.start(1), true, {{0, 2}});
        QCOMPARE(r.visitCounts[0][1], 0);
        QCOMPARE(r.visitCounts[0][0] + r.visitCounts[0][2], 50);
        QCOMPARE(r.rootPriors[0][1], 0.f);
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, mcts.search(model, model.start(1), false, {{0, 5}}));
    }

    void valuePrefixResetsEveryFiveLevels() {
        // One action: the tree is a chain, one level deeper per simulation. Every step earns
        // 1; the model's prefix restarts after each reset, so only a search that reads the
        // prefix alone after a reset recovers reward 1 at every depth.
        TinyModel model;
        model.numActions = 1;
        model.reward = [](int, const std::vector<int>&) { return 1.f; };
        MctsConfig c;
        c.numSimulations = 12;
        c.discount = 1.0;
        Mcts mcts(c);
        SearchResult r = mcts.search(model, model.start(1), false);
        QCOMPARE(int(model.calls.size()), 12);
        for (const auto& [depth, reset] : model.calls) QCOMPARE(reset, depth > 1 && (depth - 1) % 5 == 0);
        const auto& tree = mcts.tree(0);
        int checked = 0;
        for (const Node& parent : tree) {
            if (!parent.expanded()) continue;
            const Node& child = tree[size_t(parent.firstChild)];
            if (child.visits == 0) continue;
            QVERIFY(std::abs(mcts.childQ(parent, child) - child.value() - 1.0) < 1e-6);
            QCOMPARE(child.resetHidden, child.depth % 5 == 0);
            ++checked;
        }
        QCOMPARE(checked, 12);
        // Simulation k ends at depth k with return k: the root's mean is (1 + ... + 12) / 12.
        QVERIFY(std::abs(r.rootValues[0] - 6.5f) < 1e-5f);
    }

    void dirichletNoiseOnlyAtRootAndOnlyWhenEnabled() {
        TinyModel model;
        model.numActions = 4;
        model.logits = [](const std::vector<int>&) { return std::vector<float>{0.f, 1.f, 2.f, 3.f}; };
        const std::vector<float> expected = softmax({0.f, 1.f, 2.f, 3.f});
        MctsConfig c;
        c.numSimulations = 30;

        Mcts plain(c, 1);
        SearchResult r = plain.search(model, model.start(2), false);
        for (const auto& priors : r.rootPriors)
            for (int a = 0; a < 4; ++a) QVERIFY(std::abs(priors[size_t(a)] - expected[size_t(a)]) < 1e-6f);

        Mcts noisy(c, 1);
        r = noisy.search(model, model.start(2), true);
        for (const auto& priors : r.rootPriors) {
            float sum = 0, change = 0;
            for (int a = 0; a < 4; ++a) {
                sum += priors[size_t(a)];
                change += std::abs(priors[size_t(a)] - expected[size_t(a)]);
                QVERIFY(priors[size_t(a)] >= 0.75f * expected[size_t(a)] - 1e-6f);  // (1 - 0.25) prior + 0.25 noise
            }
            QVERIFY(std::abs(sum - 1.f) < 1e-5f);
            QVERIFY(change > 1e-3f);
        }
        QVERIFY(std::abs(r.rootPriors[0][0] - r.rootPriors[1][0]) > 1e-6f);  // independent noise per tree
        int interior = 0;
        for (int b = 0; b < 2; ++b)
            for (size_t i = 1; i < noisy.tree(b).size(); ++i) {
                const Node& node = noisy.tree(b)[i];
                if (!node.expanded()) continue;
                for (int a = 0; a < 4; ++a)
                    QVERIFY(std::abs(noisy.tree(b)[size_t(node.firstChild + a)].prior - expected[size_t(a)]) < 1e-6f);
                ++interior;
            }
        QCOMPARE(interior, 2 * 30);
    }

    void deterministicBySeed() {
        TinyModel model;
        model.numActions = 4;
        auto run = [&](uint64_t seed) {
            Mcts mcts(MctsConfig{}, seed);
            return mcts.search(model, model.start(2), true).visitCounts;
        };
        QCOMPARE(run(5), run(5));
        QVERIFY(run(5) != run(6));
    }

    // Completed-Q policy target (SearchResult::improvedPolicies): with Q values that carry no
    // information it is exactly the network's prior (no noise), whatever the simulation count,
    // while the 16-simulation visit distribution only quantizes the prior to multiples of 1/16;
    // with a rewarding action it moves the mass there, and illegal actions get none.
    void completedQPolicyTarget() {
        MctsConfig mc;
        mc.numSimulations = 16;
        const std::vector<float> logits = {0.4f, 0.2f, 0.f, -1.f, 0.f};
        TinyModel model;
        model.numActions = 5;
        model.logits = [&](const std::vector<int>& path) { return path.empty() ? logits : std::vector<float>(5, 0.f); };
        Mcts mcts(mc, 3);
        const SearchResult r = mcts.search(model, model.start(1), true);  // noise does not enter the target
        const auto prior = softmax(logits);
        for (int a = 0; a < 5; ++a) QVERIFY(std::abs(r.improvedPolicies[0][size_t(a)] - prior[size_t(a)]) < 1e-5f);

        TinyModel paying;
        paying.numActions = 3;
        paying.reward = [](int, const std::vector<int>& path) { return path.back() == 1 ? 1.f : 0.f; };
        Mcts mcts2(mc, 1);
        const SearchResult r2 = mcts2.search(paying, paying.start(1), false, {{0, 1}});
        QVERIFY(r2.improvedPolicies[0][1] > 0.9f);
        QCOMPARE(r2.improvedPolicies[0][2], 0.f);  // illegal
        QVERIFY(std::abs(r2.improvedPolicies[0][0] + r2.improvedPolicies[0][1] - 1.f) < 1e-5f);
        // By hand: sigma = (50 + max visits) * 0.1 times the min-max normalized Q (1 for the
        // paying action, 0 for the other, both visited), on top of equal logits.
        const auto& tree = mcts2.tree(0);
        const int maxN = std::max(tree[size_t(tree[0].firstChild)].visits, tree[size_t(tree[0].firstChild + 1)].visits);
        QVERIFY(tree[size_t(tree[0].firstChild)].visits > 0);
        const double sigma = (50.0 + maxN) * 0.1;
        QVERIFY(std::abs(r2.improvedPolicies[0][1] - float(1.0 / (1.0 + std::exp(-sigma)))) < 1e-4f);
    }

    void actionSelection() {
        std::mt19937_64 rng(0);
        QCOMPARE(selectAction({3, 9, 1, 1}, 0.0, rng), 1);  // argmax
        // Ties at temperature 0 must not always go to index 0 (NOOP in every game): with 8
        // simulations over 4 actions the counts are often 2/2/2/2, and a lowest-index rule made
        // the evaluated agent stand still (breakout never served, pellets waited for the ghosts).
        std::vector<int> picked(4, 0);
        for (int i = 0; i < 400; ++i) ++picked[size_t(selectAction({2, 2, 2, 2}, 0.0, rng))];
        for (int a = 0; a < 4; ++a) QVERIFY2(picked[size_t(a)] > 50, "every tied action is chosen");
        for (int i = 0; i < 50; ++i) {
            const int a = selectAction({3, 9, 9, 1}, 0.0, rng);
            QVERIFY(a == 1 || a == 2);
            QCOMPARE(selectAction({3, 9, 9, 1}, 0.0, rng, {5.f, 0.1f, 0.7f, 9.f}), 2);  // ties by score
        }
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, selectAction({1, 2}, 0.0, rng, {1.f}));
        QCOMPARE(selectAction({0, 10}, 1.0, rng), 1);
        auto frequency = [&](double t) {
            int ones = 0;
            for (int i = 0; i < 4000; ++i) ones += selectAction({10, 30}, t, rng);
            return ones / 4000.0;
        };
        QVERIFY(std::abs(frequency(1.0) - 0.75) < 0.03);
        QVERIFY(std::abs(frequency(0.5) - 0.9) < 0.03);  // 30^2 / (10^2 + 30^2)
        QCOMPARE(visitTemperature(0.1), 1.0);
        QCOMPARE(visitTemperature(0.6), 0.5);
        QCOMPARE(visitTemperature(0.9), 0.25);
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, selectAction({0, 0}, 1.0, rng));
    }
};

QTEST_APPLESS_MAIN(TestMcts)
#include "test_mcts.moc"
