// core/models/letr/loss: the Hungarian solver against brute force, the matching cost of
// eq. 2.2, and the losses of eqs. 2.4-2.7 against hand computations on tiny inputs.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <torch/torch.h>

#include "core/models/letr/denoise.h"
#include "core/models/letr/loss.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::letr;
using testing::contains;
using testing::errorOf;

namespace {

// Minimum total cost over all assignments of min(R, C) pairs, by enumerating permutations.
double bruteForce(const std::vector<double>& c, int R, int C) {
    const bool t = R > C;
    const int n = t ? C : R, m = t ? R : C;
    std::vector<int> cols(static_cast<size_t>(m), 0);
    std::iota(cols.begin(), cols.end(), 0);
    double best = 1e300;
    do {
        double s = 0;
        for (int i = 0; i < n; ++i) s += t ? c[size_t(cols[size_t(i)] * C + i)] : c[size_t(i * C + cols[size_t(i)])];
        best = std::min(best, s);
    } while (std::next_permutation(cols.begin(), cols.end()));
    return best;
}

double softmax0(double a, double b) { return std::exp(a) / (std::exp(a) + std::exp(b)); }

} // namespace

class TestLetrLoss : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void hungarianMatchesBruteForce() {
        std::mt19937_64 rng(42);
        std::uniform_real_distribution<double> u(-3, 5);
        for (int trial = 0; trial < 300; ++trial) {
            const int R = 1 + int(rng() % 6), C = 1 + int(rng() % 6);
            std::vector<double> c(size_t(R * C));
            for (auto& v : c) v = (trial % 3 == 0) ? double(int(u(rng))) : u(rng);   // ties too
            auto a = hungarian(c, R, C);
            QCOMPARE(int(a.size()), R);
            std::vector<int> usedCols(size_t(C), 0);
            double total = 0;
            int assigned = 0;
            for (int i = 0; i < R; ++i) {
                if (a[size_t(i)] < 0) continue;
                QVERIFY(a[size_t(i)] < C);
                QCOMPARE(usedCols[size_t(a[size_t(i)])]++, 0);
                total += c[size_t(i * C + a[size_t(i)])];
                ++assigned;
            }
            QCOMPARE(assigned, std::min(R, C));
            QVERIFY2(std::abs(total - bruteForce(c, R, C)) < 1e-9,
                     qPrintable(QString("trial %1 (%2x%3)").arg(trial).arg(R).arg(C)));
        }
        QVERIFY(hungarian({}, 0, 4).empty());
        QCOMPARE(hungarian({}, 3, 0), std::vector<int64_t>(3, -1));
        QVERIFY(contains(errorOf([] { hungarian({1, 2, 3}, 2, 2); }), {"hungarian", "2x2"}));
        QVERIFY(contains(errorOf([] { hungarian({NAN, 1, 2, 3}, 2, 2); }), {"NaN"}));
    }

    void lineDistanceIgnoresDirection() {
        auto p = torch::tensor({{0.1f, 0.2f, 0.5f, 0.6f}});
        auto g = torch::tensor({{0.5f, 0.6f, 0.1f, 0.2f}});
        QVERIFY(lineDistance(p, g).item<float>() < 1e-7f);
        auto h = torch::tensor({{0.2f, 0.2f, 0.5f, 0.9f}});
        QVERIFY(std::abs(lineDistance(p, h).item<float>() - 0.4f) < 1e-6f);
    }

    void matchingUsesEq22() {
        // Two entities, one gt. Entity 0 is closer (d = 0.1) but unconfident; entity 1 is
        // farther (d = 0.2) and confident. cost = costLine * d - p.
        auto gt = torch::tensor({{0.5f, 0.5f, 0.9f, 0.5f}});
        auto lines = torch::tensor({{0.5f, 0.5f, 0.8f, 0.5f}, {0.5f, 0.5f, 0.7f, 0.5f}});
        LetrLossConfig cfg;
        auto low = torch::tensor({{-3.f, 3.f}, {3.f, -3.f}});   // p0 ~ 0.0025, p1 ~ 0.9975
        auto m = matchLines(low, lines, gt, cfg);   // e0: 0.5 - 0.0025, e1: 1.0 - 0.9975
        QCOMPARE(m.pred, std::vector<int64_t>{1});
        QCOMPARE(m.gt, std::vector<int64_t>{0});
        cfg.costLine = 20.0;                        // e0: 2 - 0.0025, e1: 4 - 0.9975
        m = matchLines(low, lines, gt, cfg);
        QCOMPARE(m.pred, std::vector<int64_t>{0});
        QVERIFY(matchLines(low, lines, torch::zeros({0, 4}), cfg).pred.empty());
    }

    void layerLossByHand() {
        // B = 1, N = 3 entities, M = 1 gt line; entity 2 matches (closest and most confident).
        const float l[3][2] = {{0.2f, 0.1f}, {-1.0f, 0.5f}, {2.0f, -0.5f}};
        auto logits = torch::tensor({{l[0][0], l[0][1]}, {l[1][0], l[1][1]}, {l[2][0], l[2][1]}}).unsqueeze(0);
        auto lines = torch::tensor({{0.f, 0.f, 1.f, 1.f}, {0.3f, 0.3f, 0.2f, 0.9f}, {0.12f, 0.22f, 0.48f, 0.6f}})
                         .unsqueeze(0);
        auto gt = torch::tensor({{0.5f, 0.6f, 0.1f, 0.2f}});   // reversed endpoints of ~entity 2
        LetrLossConfig cfg;
        auto ce = layerLoss(logits, lines, {gt}, cfg);
        const double p0 = softmax0(l[0][0], l[0][1]), p1 = softmax0(l[1][0], l[1][1]), p2 = softmax0(l[2][0], l[2][1]);
        // Weighted cross entropy: matched entity weight 1, others 0.1.
        const double ceExpected = (0.1 * -std::log(1 - p0) + 0.1 * -std::log(1 - p1) + 1.0 * -std::log(p2)) / 1.2;
        QVERIFY2(std::abs(ce.cls.item<double>() - ceExpected) < 1e-5,
                 qPrintable(QString("%1 vs %2").arg(ce.cls.item<double>()).arg(ceExpected)));
        // L1 on the matched entity, reversed order: |0.12-0.1| + |0.22-0.2| + |0.48-0.5| + |0.6-0.6|.
        QVERIFY(std::abs(ce.l1.item<double>() - 0.06) < 1e-5);
        // Focal terms (eqs. 2.4/2.5), gamma 2, alpha 1 / 0.1, same normalization.
        cfg.focal = true;
        auto fo = layerLoss(logits, lines, {gt}, cfg);
        const double foExpected = (0.1 * p0 * p0 * -std::log(1 - p0) + 0.1 * p1 * p1 * -std::log(1 - p1) +
                                   (1 - p2) * (1 - p2) * -std::log(p2)) / 1.2;
        QVERIFY(std::abs(fo.cls.item<double>() - foExpected) < 1e-5);
        QVERIFY(fo.cls.item<double>() < ce.cls.item<double>());
        // Quality-aware target (loss.quality_tau): the matched entity's target is "line" with
        // q = exp(-0.06 / tau) and "no line" with 1 - q; the others as before.
        cfg.focal = false;
        cfg.qualityTau = 0.05;
        auto qlines = lines.clone().requires_grad_();
        auto qlogits = logits.clone().requires_grad_();
        auto qa = layerLoss(qlogits, qlines, {gt}, cfg);
        const double q = std::exp(-0.06 / 0.05);
        const double qaExpected =
            (0.1 * -std::log(1 - p0) + 0.1 * -std::log(1 - p1) - (q * std::log(p2) + (1 - q) * std::log(1 - p2))) / 1.2;
        QVERIFY2(std::abs(qa.cls.item<double>() - qaExpected) < 1e-5,
                 qPrintable(QString("%1 vs %2").arg(qa.cls.item<double>()).arg(qaExpected)));
        QVERIFY(std::abs(qa.l1.item<double>() - 0.06) < 1e-5);
        // q is a target, not a path for gradients: the lines get gradient from l1 only.
        qa.cls.backward();
        QVERIFY(qlogits.grad().defined() && qlogits.grad().abs().sum().item<double>() > 0);
        QVERIFY(!qlines.grad().defined() || qlines.grad().abs().sum().item<double>() == 0.0);
        // A perfect line has q = 1: the same loss as the hard target.
        auto exact = lines.clone();
        exact[0][2] = gt[0];
        cfg.qualityTau = 0.05;
        auto qe = layerLoss(logits, exact, {gt}, cfg);
        cfg.qualityTau = 0;
        auto he = layerLoss(logits, exact, {gt}, cfg);
        QVERIFY(std::abs(qe.cls.item<double>() - he.cls.item<double>()) < 1e-6);
        // No ground truth: every entity is no-object, l1 = 0.
        auto none = layerLoss(logits, lines, {torch::zeros({0, 4})}, LetrLossConfig{});
        const double noneExpected = (-std::log(1 - p0) - std::log(1 - p1) - std::log(1 - p2)) / 3.0;
        QVERIFY(std::abs(none.cls.item<double>() - noneExpected) < 1e-5);
        QCOMPARE(none.l1.item<double>(), 0.0);
    }

    // Query denoising's class target follows loss.quality_tau like a matched entity's: "line"
    // with q = exp(-d / tau) (d its own endpoint distance, no gradient through q), "no line" with
    // 1 - q; tau 0 keeps the hard "line" target. Padded entities count for nothing.
    void denoisingClassTargetFollowsQualityTau() {
        DenoiseBatch b;
        b.target = torch::tensor({{{0.1f, 0.2f, 0.5f, 0.6f}, {0.3f, 0.3f, 0.9f, 0.3f}, {0.f, 0.f, 0.f, 0.f}}});
        b.noised = b.target.clone();
        b.valid = torch::tensor({{true, true, false}});
        // Entity 0 off by 0.02 + 0.01 + 0.03 + 0.0 = 0.06 (the direct order is the nearer), entity 1
        // given with its endpoints swapped and exact (d = 0), entity 2 padding.
        auto lines = torch::tensor({{{{0.12f, 0.19f, 0.53f, 0.6f}, {0.9f, 0.3f, 0.3f, 0.3f}, {0.7f, 0.1f, 0.2f, 0.9f}}}})
                         .requires_grad_();
        auto logits = torch::tensor({{{{0.4f, -0.3f}, {1.2f, 0.5f}, {-2.0f, 3.0f}}}}).requires_grad_();
        const double numGt = 2.0;
        auto logSoftmax = [&](int64_t e) {
            const double z0 = logits[0][0][e][0].item<double>(), z1 = logits[0][0][e][1].item<double>();
            const double lse = std::log(std::exp(z0) + std::exp(z1));
            return std::pair<double, double>{z0 - lse, z1 - lse};
        };
        const auto [a0, a1] = logSoftmax(0);
        const auto [b0, b1] = logSoftmax(1);
        LetrLossConfig cfg;
        cfg.qualityTau = 0.05;
        auto soft = denoiseLoss(logits, lines, b, cfg, numGt);
        const double q = std::exp(-0.06 / 0.05);
        const double softExpected = (-(q * a0 + (1 - q) * a1) - b0) / numGt;   // entity 1: q = 1
        QVERIFY2(std::abs(soft.clsPerLayer[0] - softExpected) < 1e-5,
                 qPrintable(QString("%1 vs %2").arg(soft.clsPerLayer[0]).arg(softExpected)));
        QVERIFY(std::abs(soft.l1PerLayer[0] - 0.06 / numGt) < 1e-5);
        // q is a target: the lines' gradient is the L1 term's alone, lineCoef * sign / numGt on the
        // entity that is off (entity 1 sits at a kink of |.|, entity 2 is padding).
        soft.total.backward();
        const auto g = lines.grad()[0][0];
        const float want[4] = {1, -1, 1, 0};
        for (int k = 0; k < 4; ++k) {
            const double expect = cfg.lineCoef * want[k] / numGt;
            QVERIFY2(std::abs(g[0][k].item<double>() - expect) < 1e-5,
                     qPrintable(QString("d/dx%1 %2 vs %3").arg(k).arg(g[0][k].item<double>()).arg(expect)));
        }
        QCOMPARE(g[2].abs().sum().item<double>(), 0.0);
        QCOMPARE(logits.grad()[0][0][2].abs().sum().item<double>(), 0.0);
        // tau 0: the hard target, -log p(line) on every real entity.
        cfg.qualityTau = 0;
        auto hard = denoiseLoss(logits, lines, b, cfg, numGt);
        QVERIFY(std::abs(hard.clsPerLayer[0] - (-a0 - b0) / numGt) < 1e-5);
        QVERIFY(std::abs(hard.clsPerLayer[0] - soft.clsPerLayer[0]) > 0.1);   // entity 0: p(line) 0.67, q 0.30
    }

    void deepSupervisionSumsLayers() {
        torch::manual_seed(3);
        auto logits = torch::randn({3, 2, 5, 2}, torch::requires_grad());
        auto lines = torch::rand({3, 2, 5, 4}).requires_grad_();
        std::vector<torch::Tensor> gt{torch::rand({2, 4}), torch::rand({4, 4})};
        LetrLossConfig cfg;
        auto loss = letrLoss(logits, lines, gt, cfg);
        QCOMPARE(loss.clsPerLayer.size(), size_t(3));
        double sum = 0;
        for (int l = 0; l < 3; ++l) {
            auto ll = layerLoss(logits[l], lines[l], gt, cfg);
            QVERIFY(std::abs(ll.cls.item<double>() - loss.clsPerLayer[size_t(l)]) < 1e-6);
            // l1 normalized by the 6 gt lines of the batch.
            sum += cfg.clsCoef * ll.cls.item<double>() + cfg.lineCoef * ll.l1.item<double>();
        }
        QVERIFY(std::abs(loss.total.item<double>() - sum) < 1e-5);
        loss.total.backward();
        for (int l = 0; l < 3; ++l) {   // every layer receives gradient (deep supervision)
            QVERIFY(logits.grad()[l].abs().sum().item<double>() > 0);
            QVERIFY(lines.grad()[l].abs().sum().item<double>() > 0);
        }
        QVERIFY(contains(errorOf([&] { layerLoss(logits[0], lines[0], {gt[0]}, cfg); }), {"1 targets", "batch of 2"}));
    }

    // A batch split over two processes (docs/distributed.md): with the whole batch's
    // denominators divided by 2, the mean of the halves' losses and of their gradients is the
    // whole batch's. batchNormalizers against the denominators counted by hand.
    void splitBatchWithSharedNormalizers() {
        torch::manual_seed(3);
        LetrLossConfig cfg;
        cfg.eosCoef = 0.1;
        const int64_t N = 5;
        std::vector<torch::Tensor> gt{torch::rand({2, 4}), torch::rand({7, 4}), torch::zeros({0, 4}), torch::rand({1, 4})};
        const LossNormalizers all = batchNormalizers(gt, N, cfg);
        // matched: min(5, 2) + min(5, 7) + 0 + 1 = 8 of 20 entities; gt lines 10.
        QCOMPARE(all.clsWeight, 8 + 0.1 * 12);
        QCOMPARE(all.numGt, 10.0);
        QCOMPARE(batchNormalizers({torch::zeros({0, 4})}, N, cfg).numGt, 1.0);   // max(1, 0)

        auto logits = torch::randn({4, N, 2}, torch::requires_grad());
        auto lines = torch::rand({4, N, 4}, torch::requires_grad());
        auto whole = layerLoss(logits, lines, gt, cfg);
        const auto gWhole = torch::autograd::grad({whole.cls + 5 * whole.l1}, {logits, lines});
        const LossNormalizers half{all.clsWeight / 2, all.numGt / 2};
        using torch::indexing::Slice;
        double clsMean = 0, l1Mean = 0;
        torch::Tensor gl = torch::zeros_like(logits), gn = torch::zeros_like(lines);
        for (int r = 0; r < 2; ++r) {
            auto lg = logits.index({Slice(2 * r, 2 * r + 2)}), ln = lines.index({Slice(2 * r, 2 * r + 2)});
            auto part = layerLoss(lg, ln, {gt[size_t(2 * r)], gt[size_t(2 * r + 1)]}, cfg, &half);
            clsMean += part.cls.item<double>() / 2;
            l1Mean += part.l1.item<double>() / 2;
            const auto g = torch::autograd::grad({part.cls + 5 * part.l1}, {logits, lines});
            gl += g[0] / 2;
            gn += g[1] / 2;
        }
        QVERIFY(std::abs(clsMean - whole.cls.item<double>()) < 1e-6);
        QVERIFY(std::abs(l1Mean - whole.l1.item<double>()) < 1e-6);
        QVERIFY(torch::allclose(gl, gWhole[0], 1e-5, 1e-7));
        QVERIFY(torch::allclose(gn, gWhole[1], 1e-5, 1e-7));
        // Without the shared denominators the halves' mean is not the whole batch's loss.
        auto own = layerLoss(logits.index({Slice(0, 2)}), lines.index({Slice(0, 2)}), {gt[0], gt[1]}, cfg);
        QVERIFY(std::abs(own.l1.item<double>() / 2 - l1Mean) > 1e-6 || std::abs(own.cls.item<double>() / 2 - clsMean) > 1e-6);
    }
};

QTEST_APPLESS_MAIN(TestLetrLoss)
#include "test_letr_loss.moc"
