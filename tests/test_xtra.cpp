// XTRA's task weights (core/models/xtra/task_weights.h; dissertation 5.3.2, Appendix 5.7.2):
// gradient cosine similarities against hand-computed gradients of a tiny network, and the
// cycle / window / counter / warm-up schedule step by step.
#include <QtTest>

#include <cmath>

#include <torch/torch.h>

#include "core/models/xtra/task_weights.h"
#include "tests/support.h"

using namespace glimpse;
using testing::contains;
using testing::errorOf;

class TestXtra : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void cosineOfGradients() {
        QVERIFY(std::abs(xtra::gradientCosine({torch::tensor({1.0, 0.0}), torch::tensor({0.0})},
                                              {torch::tensor({1.0, 1.0}), torch::tensor({0.0})}) -
                         1 / std::sqrt(2.0)) < 1e-12);
        QCOMPARE(xtra::gradientCosine({torch::zeros({3})}, {torch::ones({3})}), 0.0);
        QVERIFY(contains(errorOf([] { xtra::gradientCosine({torch::zeros({3})}, {torch::zeros({2})}); }), {"shape"}));
    }

    // A linear model y = w . x + b: the gradient of sum_k c_k y(x_k) is (sum c_k x_k, sum c_k),
    // so every task's gradient and their cosines are known in closed form.
    void similaritiesOfTaskLosses() {
        auto w = torch::tensor({0.3, -0.2, 0.5}, torch::kFloat64).requires_grad_(true);
        auto b = torch::tensor({0.1}, torch::kFloat64).requires_grad_(true);
        auto y = [&](std::vector<double> x) { return (w * torch::tensor(x, torch::kFloat64)).sum() + b.sum(); };
        auto target = y({1, 2, 0}) + y({0, 1, 1});                 // grad (1, 3, 1 | 2)
        auto same = 2.0 * target;                                    // parallel: cos 1
        auto opposite = -y({1, 2, 0});                               // grad (-1, -2, 0 | -1)
        auto unused = torch::zeros({}, torch::kFloat64) * w.sum();   // zero gradient: 0
        const auto sims = xtra::taskSimilarities(target, {same, opposite, unused}, {w, b});
        QCOMPARE(int(sims.size()), 3);
        QVERIFY(std::abs(sims[0] - 1.0) < 1e-12);
        const double expected = -(1 * 1 + 3 * 2 + 1 * 0 + 2 * 1) / (std::sqrt(1 + 9 + 1 + 4.0) * std::sqrt(1 + 4 + 0 + 1.0));
        QVERIFY2(std::abs(sims[1] - expected) < 1e-12, qPrintable(QString::number(sims[1])));
        QCOMPARE(sims[2], 0.0);
        // A parameter a loss does not reach contributes zeros.
        auto onlyW = (w * w).sum();
        const auto g = xtra::lossGradient(onlyW, {w, b});
        QCOMPARE(g[1].abs().sum().item<double>(), 0.0);
        QVERIFY(std::abs(g[0][2].item<double>() - 1.0) < 1e-12);
    }

    // T = 10, N = 4, warm-up 5: weights 1 through update 8; updates 5-8 measure; the weights of
    // update 8's window hold through 9-18 (the next window measures 15-18 under them).
    void cycleWindowAndCounters() {
        xtra::TaskWeightConfig c;
        c.cycle = 10;
        c.window = 4;
        c.warmup = 5;
        c.threshold = 0.1;
        xtra::TaskWeights tw(3, c);
        for (int64_t s = 0; s < 5; ++s) QVERIFY(!tw.measuring(s));
        for (int64_t s = 5; s < 9; ++s) QVERIFY(tw.measuring(s));
        for (int64_t s = 9; s < 15; ++s) QVERIFY(!tw.measuring(s));
        for (int64_t s = 15; s < 19; ++s) QVERIFY(tw.measuring(s));
        QVERIFY(contains(errorOf([&] { tw.observe(4, {0, 0, 0}); }), {"not in a measuring window"}));
        QVERIFY(contains(errorOf([&] { tw.observe(5, {0, 0}); }), {"2 similarities for 3"}));
        // Task 0 always agrees, task 1 sits exactly on the threshold (not above), task 2 agrees
        // every other update.
        const std::vector<std::vector<double>> first{{0.5, 0.1, 0.9}, {0.2, 0.1, -0.3}, {0.9, 0.1, 0.8}, {0.3, 0.1, 0.0}};
        for (int k = 0; k < 4; ++k) {
            QCOMPARE(tw.weights(), std::vector<double>({1, 1, 1}));   // warm-up weights until the window ends
            tw.observe(5 + k, first[size_t(k)]);
        }
        QCOMPARE(tw.weights(), std::vector<double>({1.0, 0.0, 0.5}));
        QCOMPARE(tw.counters(), std::vector<int64_t>({0, 0, 0}));
        // Next window: counters grow while the old weights stay in force; resumable halfway.
        tw.observe(15, {-0.5, 0.7, 0.2});
        tw.observe(16, {-0.5, 0.7, 0.2});
        QCOMPARE(tw.weights(), std::vector<double>({1.0, 0.0, 0.5}));
        QCOMPARE(tw.counters(), std::vector<int64_t>({0, 2, 2}));
        xtra::TaskWeights resumed(3, c);
        resumed.restore(tw.state(), "state.h5");
        for (auto* t : {&tw, &resumed}) {
            t->observe(17, {0.5, 0.7, -1.0});
            t->observe(18, {-0.5, 0.7, 0.2});
        }
        QCOMPARE(tw.weights(), std::vector<double>({0.25, 1.0, 0.75}));
        QCOMPARE(resumed.weights(), tw.weights());
        // Bad state and config name the problem.
        xtra::TaskWeights other(2, c);
        QVERIFY(contains(errorOf([&] { other.restore(tw.state(), "s.h5"); }), {"s.h5", "3 task weights, expected 2"}));
        QVERIFY(contains(errorOf([&] { other.restore(nlohmann::json{{"weights", {2.0, 0.0}}, {"counters", {0, 0}}}, "s.h5"); }),
                         {"outside [0, 1]"}));
        QVERIFY(contains(errorOf([&] { other.restore(nlohmann::json::object(), "s.h5"); }), {"s.h5", "malformed"}));
        QVERIFY(contains(errorOf([&] { xtra::TaskWeightConfig::fromJson({{"window", 20}, {"cycle", 10}}, "x.json"); }),
                         {"x.json", "window"}));
        QVERIFY(contains(errorOf([&] { xtra::TaskWeightConfig::fromJson({{"windw", 2}}, "x.json"); }), {"x.json", "windw"}));
        QCOMPARE(xtra::TaskWeightConfig::fromJson(c.toJson(), "x").toJson(), c.toJson());
        // No warm-up: the first update measures.
        c.warmup = 0;
        QVERIFY(xtra::TaskWeights(1, c).measuring(0));
    }
};

QTEST_APPLESS_MAIN(TestXtra)
#include "test_xtra.moc"
