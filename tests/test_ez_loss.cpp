// The EfficientZero loss (core/models/efficientzero/loss.h): cross-entropies against an
// explicit loop, the whole loss against a per-sample reference computed step by step, gradient
// scaling, and loss decrease when fitting one fixed batch.
#include <QtTest>

#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/model.h"
#include "tests/support.h"

using namespace glimpse::efficientzero;

namespace {

Config tinyConfig() {
    Config c = Config::grid(2, 4, 4, 3);
    c.stack = 2;
    c.channels = 4;
    c.lstmHidden = 8;
    c.reducedChannelsReward = c.reducedChannelsValue = c.reducedChannelsPolicy = 2;
    c.rewardHidden = c.valueHidden = c.policyHidden = {8};
    c.supportSize = 5;
    c.projHidden = 8;
    c.projOut = 8;
    c.predHidden = 4;
    return c;
}

Batch tinyBatch(const Config& c, int B, int K) {
    torch::manual_seed(3);
    Batch b;
    b.obs = (torch::rand({B, c.inputChannels(), c.obsHeight, c.obsWidth}) > 0.5).to(torch::kFloat32);
    b.nextObs = (torch::rand({B, K, c.inputChannels(), c.obsHeight, c.obsWidth}) > 0.5).to(torch::kFloat32);
    b.actions = torch::randint(0, c.numActions, {B, K}, torch::kInt64);
    b.valuePrefix = torch::rand({B, K}) * 3;
    b.value = torch::rand({B, K + 1}) * 4 - 1;
    b.policy = torch::softmax(torch::randn({B, K + 1, c.numActions}), -1);
    b.mask = torch::ones({B, K + 1});
    b.mask[0][K] = 0;
    b.policy[0][K].zero_();
    b.weights = torch::rand({B}) * 0.5 + 0.5;
    return b;
}

double ceLoop(const torch::Tensor& logits, const torch::Tensor& target) {
    const auto l = logits.to(torch::kFloat64), t = target.to(torch::kFloat64);
    double mx = -1e300;
    for (int64_t i = 0; i < l.size(0); ++i) mx = std::max(mx, l[i].item<double>());
    double z = 0;
    for (int64_t i = 0; i < l.size(0); ++i) z += std::exp(l[i].item<double>() - mx);
    double ce = 0;
    for (int64_t i = 0; i < l.size(0); ++i) ce -= t[i].item<double>() * (l[i].item<double>() - mx - std::log(z));
    return ce;
}

} // namespace

class TestEzLoss : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void softCrossEntropyMatchesLoop() {
        torch::manual_seed(0);
        const auto logits = torch::randn({4, 7}) * 3;
        const auto target = torch::softmax(torch::randn({4, 7}), -1);
        const auto ce = softCrossEntropy(logits, target);
        for (int i = 0; i < 4; ++i) QVERIFY(std::abs(ce[i].item<double>() - ceLoop(logits[i], target[i])) < 1e-5);
    }

    void scaleGradientHalvesGradient() {
        auto x = torch::ones({3}, torch::requires_grad());
        auto y = scaleGradient(x, 0.5);
        QVERIFY(torch::equal(y, x.detach()));
        (y * 2).sum().backward();
        QVERIFY(torch::allclose(x.grad(), torch::full({3}, 1.0)));
    }

    void lossMatchesStepByStepReference() {
        const Config c = tinyConfig();
        torch::manual_seed(1);
        Network net(c);
        // Non-zero heads so every term matters.
        {
            torch::NoGradGuard ng;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.1);
        }
        net.train(false);  // eval: BatchNorm per sample, so samples can be recomputed one by one
        const int B = 3, K = 2;
        const Batch b = tinyBatch(c, B, K);
        const LossWeights w;
        const LossTerms terms = computeLoss(net, b, w);
        double total = 0, valueSum = 0, prefixSum = 0, policySum = 0, consSum = 0;
        torch::NoGradGuard ng;
        for (int i = 0; i < B; ++i) {
            auto init = net.initialInference(b.obs.slice(0, i, i + 1));
            double v = ceLoop(init.valueLogits[0], scalarToSupport(b.value[i][0], c.supportSize));
            double p = ceLoop(init.policyLogits[0], b.policy[i][0]);
            double r = 0, s = 0;
            auto state = init.state;
            auto lstm = net.initialLstm(1);
            for (int k = 0; k < K; ++k) {
                auto rec = net.recurrentInference(state, b.actions[i].slice(0, k, k + 1), lstm);
                v += ceLoop(rec.valueLogits[0], scalarToSupport(b.value[i][k + 1], c.supportSize));
                p += ceLoop(rec.policyLogits[0], b.policy[i][k + 1]);
                r += ceLoop(rec.valuePrefixLogits[0], scalarToSupport(b.valuePrefix[i][k], c.supportSize));
                // Cosine similarity by hand.
                const auto pred = net.project(rec.nextState, true)[0].to(torch::kFloat64);
                const auto tgt = net.project(net.initialInference(b.nextObs[i].slice(0, k, k + 1)).state, false)[0].to(torch::kFloat64);
                const double cosv = (pred * tgt).sum().item<double>() / (pred.norm().item<double>() * tgt.norm().item<double>());
                s += -cosv * b.mask[i][k + 1].item<double>();
                state = rec.nextState;
                lstm = rec.lstm;
            }
            const double per = 0.25 * v + 1.0 * p + 1.0 * r + 2.0 * s;
            total += per * b.weights[i].item<double>();
            valueSum += v;
            prefixSum += r;
            policySum += p;
            consSum += s;
        }
        QVERIFY2(std::abs(terms.total.item<double>() - total / B) < 1e-4,
                 qPrintable(QString("%1 vs %2").arg(terms.total.item<double>()).arg(total / B)));
        QVERIFY(std::abs(terms.value - valueSum / B) < 1e-4);
        QVERIFY(std::abs(terms.valuePrefix - prefixSum / B) < 1e-4);
        QVERIFY(std::abs(terms.policy - policySum / B) < 1e-4);
        QVERIFY(std::abs(terms.consistency - consSum / B) < 1e-4);
        // Priorities: |predicted value - target| at k = 0.
        const auto init = net.initialInference(b.obs);
        QVERIFY(torch::allclose(terms.priorities, (init.value - b.value.select(1, 0)).abs(), 1e-5, 1e-5));
    }

    // Issue 7: the self-play and target networks run in eval mode, on BatchNorm running
    // statistics. When the learner called the prediction network on the root states and on each
    // unrolled state separately, the running statistics averaged batches of different
    // distributions and matched none of them: the eval-mode network's value and policy differed
    // from the trained one (a trained pellets agent predicted value 0 everywhere in eval mode, 0.46
    // in training mode). computeLoss now batches the representation and the prediction calls, so
    // after the running statistics settle on a batch, eval mode reproduces what the loss saw.
    void evalModeMatchesTheTrainedBatchNormStatistics() {
        const Config c = tinyConfig();
        torch::manual_seed(5);
        const int B = 16, K = 3;
        const Batch b = tinyBatch(c, B, K);
        auto perturbed = [&] {
            torch::manual_seed(1);
            Network net(c);
            torch::NoGradGuard ng;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.3);
            return net;
        };
        auto gap = [&](Network& net, const torch::Tensor& trainLogits) {
            net.train(false);
            torch::NoGradGuard ng;
            const auto evalLogits = net.initialInference(b.obs).valueLogits;
            return (torch::softmax(evalLogits, 1) - torch::softmax(trainLogits, 1)).abs().max().item<double>();
        };
        // The learner's loss, 80 times on the same batch (momentum 0.1: the running statistics
        // converge to the batch's).
        Network net = perturbed();
        net.train(true);
        LossTerms terms;
        {
            torch::NoGradGuard ng;
            for (int i = 0; i < 80; ++i) terms = computeLoss(net, b);
        }
        const double batched = gap(net, terms.valueLogits0);
        // The same forward calls made one by one (the old loss): root, each unroll step, targets.
        Network old = perturbed();
        old.train(true);
        torch::Tensor oldLogits;
        {
            torch::NoGradGuard ng;
            for (int i = 0; i < 80; ++i) {
                auto init = old.initialInference(b.obs);
                oldLogits = init.valueLogits;
                auto state = init.state;
                auto lstm = old.initialLstm(B);
                for (int k = 0; k < K; ++k) {
                    auto rec = old.recurrentInference(state, b.actions.select(1, k), lstm);
                    state = rec.nextState;
                    lstm = rec.lstm;
                }
                old.initialInference(b.nextObs.reshape({B * K, c.inputChannels(), c.obsHeight, c.obsWidth}));
            }
        }
        const double separate = gap(old, oldLogits);
        qInfo("value distribution gap eval vs train: batched %.4f, separate calls %.4f", batched, separate);
        QVERIFY2(batched < 0.02, qPrintable(QString("eval vs train value distribution: %1").arg(batched)));
        QVERIFY2(separate > 3 * batched, qPrintable(QString("separate calls: %1, batched: %2").arg(separate).arg(batched)));
    }

    // Issue 7, second part: the dynamics runs once per unroll step. With batch statistics per
    // step each depth was normalized by its own mean and variance, while the search's eval-mode
    // network normalizes every depth with one running average: a trained pellets network's
    // eval-mode value prefix after one step was 1.64 everywhere (target 0.23, training mode
    // 0.29). computeLoss now unrolls the dynamics on its running statistics (updated afterwards
    // from all depths at once), so the eval-mode unroll reproduces the loss's value prefixes.
    void evalModeUnrollMatchesTheLossValuePrefix() {
        const Config c = tinyConfig();
        const int B = 16, K = 3;
        const Batch b = tinyBatch(c, B, K);
        torch::manual_seed(1);
        Network net(c);
        {
            torch::NoGradGuard ng;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.3);
        }
        net.train(true);
        LossTerms terms;
        {
            torch::NoGradGuard ng;
            for (int i = 0; i < 80; ++i) terms = computeLoss(net, b);
        }
        QVERIFY(net.isTraining() && net.isDynamicsTraining());  // computeLoss restores the mode
        QCOMPARE(terms.valuePrefixLogits.sizes().vec(), (std::vector<int64_t>{K, B, 2 * c.supportSize + 1}));
        net.train(false);
        torch::NoGradGuard ng;
        auto state = net.initialInference(b.obs).state;
        auto lstm = net.initialLstm(B);
        double worst = 0;
        for (int k = 0; k < K; ++k) {
            const auto rec = net.recurrentInference(state, b.actions.select(1, k), lstm);
            const double gap = (torch::softmax(rec.valuePrefixLogits, 1) - torch::softmax(terms.valuePrefixLogits[k], 1))
                                   .abs().max().item<double>();
            qInfo("depth %d: value-prefix distribution gap eval vs loss %.4f", k + 1, gap);
            worst = std::max(worst, gap);
            state = rec.nextState;
            lstm = rec.lstm;
        }
        QVERIFY2(worst < 0.02, qPrintable(QString("eval vs loss value-prefix distribution: %1").arg(worst)));
    }

    void fittingOneBatchDecreasesTheLoss() {
        const Config c = tinyConfig();
        torch::manual_seed(2);
        Network net(c);
        net.train(true);
        const Batch b = tinyBatch(c, 8, 3);
        torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
        double first = 0, last = 0;
        for (int i = 0; i < 30; ++i) {
            auto t = computeLoss(net, b);
            if (i == 0) first = t.total.item<double>();
            last = t.total.item<double>();
            opt.zero_grad();
            (t.total / 3.0).backward();
            torch::nn::utils::clip_grad_norm_(net.parameters(), 5.0);
            opt.step();
        }
        QVERIFY2(last < 0.8 * first, qPrintable(QString("%1 -> %2").arg(first).arg(last)));
    }

    void badBatchShapes() {
        const Config c = tinyConfig();
        Network net(c);
        Batch b = tinyBatch(c, 2, 2);
        b.policy = torch::zeros({2, 3, 5});
        const auto e = glimpse::testing::errorOf([&] { computeLoss(net, b); });
        QVERIFY2(glimpse::testing::contains(e, {"policy", "shape"}), e.c_str());
    }
};

QTEST_APPLESS_MAIN(TestEzLoss)
#include "test_ez_loss.moc"
