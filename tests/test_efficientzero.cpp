// EfficientZero networks: config JSON, shapes for the grid and Atari sizes, zero-initialised
// heads, the value transform and categorical support, gradients through an unroll, and the
// search adapter.
#include <QtTest>

#include <numeric>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/config.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/search.h"

using namespace glimpse::efficientzero;

namespace {

std::map<std::string, torch::Tensor> named(Network& net) {
    std::map<std::string, torch::Tensor> m;
    for (const auto& p : net.module().named_parameters()) m[p.key()] = p.value();
    return m;
}

bool sameShape(const torch::Tensor& t, std::vector<int64_t> shape) { return t.sizes().vec() == shape; }

} // namespace

class TestEfficientZero : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::manual_seed(0); }

    void configJson() {
        const Config grid = Config::grid(5, 12, 12, 6);
        const Config back = Config::fromJson(grid.toJson());
        QCOMPARE(back.toJson().dump(), grid.toJson().dump());
        const Config partial = Config::fromJson({{"num_actions", 4}, {"channels", 48}});
        QCOMPARE(partial.numActions, 4);
        QCOMPARE(partial.channels, 48);
        QCOMPARE(partial.supportSize, 300);
        auto message = [](const nlohmann::json& j) {
            try {
                Config::fromJson(j);
            } catch (const glimpse::Error& e) {
                return std::string(e.what());
            }
            return std::string();
        };
        QVERIFY(message({{"chanels", 3}}).find("unknown key 'chanels'") != std::string::npos);
        QVERIFY(message({{"channels", "wide"}}).find("'channels' must be") != std::string::npos);
        QVERIFY(message({{"support_size", 0}}).find("support_size must be >= 1") != std::string::npos);
        QVERIFY(message({{"reward_hidden", {32, "x"}}}).find("reward_hidden") != std::string::npos);
    }

    void atariShapes() {
        const Config c = Config::atari(18);
        QCOMPARE(c.inputChannels(), 12);
        QCOMPARE(c.stateHeight(), 6);
        QCOMPARE(c.stateNumel(), int64_t(2304));
        QCOMPARE(c.supportBins(), 601);
        Network net(c);
        net.train(false);
        torch::NoGradGuard noGrad;
        InitialOutput init = net.initialInference(torch::randint(0, 256, {2, 12, 96, 96}));
        QVERIFY(sameShape(init.state, {2, 64, 6, 6}));
        QVERIFY(sameShape(init.valueLogits, {2, 601}));
        QVERIFY(sameShape(init.policyLogits, {2, 18}));
        RecurrentOutput rec = net.recurrentInference(init.state, torch::tensor({3, 17}), net.initialLstm(2));
        QVERIFY(sameShape(rec.nextState, {2, 64, 6, 6}));
        QVERIFY(sameShape(rec.valuePrefixLogits, {2, 601}));
        QVERIFY(sameShape(rec.lstm.first, {1, 2, 512}));
        auto p = named(net);
        QVERIFY(sameShape(p.at("dynamics_network.lstm.weight_ih_l0"), {4 * 512, 576}));  // 16 x 6 x 6 in
        QVERIFY(sameShape(p.at("projection.0.weight"), {1024, 2304}));
        QVERIFY(sameShape(p.at("projection.6.weight"), {1024, 1024}));
        QVERIFY(sameShape(p.at("projection_head.0.weight"), {512, 1024}));
        QVERIFY(sameShape(p.at("projection_head.3.weight"), {1024, 512}));
        QVERIFY(sameShape(p.at("representation_network.downsample_net.conv1.weight"), {32, 12, 3, 3}));
        QVERIFY(sameShape(p.at("dynamics_network.conv.weight"), {64, 65, 3, 3}));
        QVERIFY(sameShape(net.project(init.state, false), {2, 1024}));
    }

    void gridShapesAndZeroInit() {
        Network net(Config::grid(5, 12, 14, 8));
        for (bool training : {true, false}) {
            net.train(training);
            torch::NoGradGuard noGrad;
            InitialOutput init = net.initialInference(torch::rand({3, 20, 12, 14}).round());
            QVERIFY(sameShape(init.state, {3, 32, 12, 14}));
            QVERIFY(sameShape(init.policyLogits, {3, 8}));
            QCOMPARE(init.value.abs().max().item<float>(), 0.f);
            QCOMPARE(init.policyLogits.abs().max().item<float>(), 0.f);
            RecurrentOutput rec = net.recurrentInference(init.state, torch::tensor({0, 3, 7}), net.initialLstm(3));
            QVERIFY(sameShape(rec.nextState, {3, 32, 12, 14}));
            QVERIFY(sameShape(rec.lstm.second, {1, 3, 64}));
            QCOMPARE(rec.valuePrefix.abs().max().item<float>(), 0.f);
            QCOMPARE(rec.value.abs().max().item<float>(), 0.f);
            QCOMPARE(rec.policyLogits.abs().max().item<float>(), 0.f);
            QVERIFY(sameShape(net.project(rec.nextState), {3, 256}));
        }
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, net.initialInference(torch::zeros({1, 5, 12, 14})));
        const torch::Tensor state = torch::zeros({2, 32, 12, 14});
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, net.recurrentInference(state, torch::tensor({1}), net.initialLstm(2)));
    }

    // one_hot_actions: the dynamics reads |A| one-hot planes instead of one plane a / |A|.
    // Zeroing the conv weights of every action plane but action 2's makes actions 0, 1 and 3
    // indistinguishable while 2 differs; with the scalar plane every action still differs
    // (the plane's value is a / |A|), i.e. the actions are ordered.
    void oneHotActionPlanes() {
        for (bool oneHot : {true, false}) {
            Config c = Config::grid(2, 5, 5, 4);
            c.channels = 6;
            c.oneHotActions = oneHot;
            QCOMPARE(Config::fromJson(c.toJson()).oneHotActions, oneHot);
            torch::manual_seed(2);
            Network net(c);
            net.train(false);
            torch::NoGradGuard ng;
            auto params = net.module().named_parameters(true);
            torch::Tensor w = params["dynamics_network.conv.weight"];
            QVERIFY(sameShape(w, {6, 6 + (oneHot ? 4 : 1), 3, 3}));
            if (oneHot)
                for (int a : {0, 1, 3}) w.select(1, 6 + a).zero_();
            const torch::Tensor state = torch::rand({1, 6, 5, 5}).repeat({4, 1, 1, 1});
            const auto rec = net.recurrentInference(state, torch::tensor({0, 1, 2, 3}), net.initialLstm(4));
            auto same = [&](int a, int b) { return torch::allclose(rec.nextState[a], rec.nextState[b]); };
            if (oneHot) {
                QVERIFY(same(0, 1) && same(0, 3));
                QVERIFY(!same(0, 2));
            } else {
                QVERIFY(!same(0, 1) && !same(1, 3) && !same(0, 3));
            }
        }
    }

    void transformAndInverse() {
        const torch::Tensor x = torch::linspace(-1000, 1000, 20001, torch::kDouble);
        QVERIFY(torch::allclose(inverseScalarTransform(scalarTransform(x)), x, 0, 1e-4));
        const torch::Tensor y = torch::linspace(-300, 300, 6001, torch::kDouble);
        QVERIFY(torch::allclose(scalarTransform(inverseScalarTransform(y)), y, 0, 1e-4));
        // Hand values: h(3) = sqrt(4) - 1 + 0.003; h is odd.
        QVERIFY(std::abs(scalarTransform(torch::tensor(3.0, torch::kDouble)).item<double>() - 1.003) < 1e-12);
        QVERIFY(std::abs(scalarTransform(torch::tensor(-3.0, torch::kDouble)).item<double>() + 1.003) < 1e-12);
        const torch::Tensor xf = torch::linspace(-200, 200, 801);  // float32 too, relative
        QVERIFY(torch::allclose(inverseScalarTransform(scalarTransform(xf)), xf, 1e-4, 1e-3));
    }

    void supportRoundTrip() {
        const int S = 300;
        const torch::Tensor x = torch::cat({torch::linspace(-5000, 5000, 2001, torch::kDouble),
                                            torch::tensor({0.0, 0.37, -2.5, 1234.5}, torch::kDouble)});
        const torch::Tensor twoHot = scalarToSupport(x, S);
        QVERIFY(sameShape(twoHot, {x.size(0), 601}));
        QVERIFY(torch::allclose(twoHot.sum(-1), torch::ones({x.size(0)}, torch::kDouble)));
        QVERIFY((twoHot > 0).sum(-1).le(2).all().item<bool>());
        // Treating the two-hot as a distribution (logits = log p) recovers the scalar.
        const torch::Tensor back = supportToScalar(twoHot.log(), S);
        QVERIFY(torch::allclose(back, x, 0, 1e-4));
        // h(1) = 0.4152..: 58.5% on bin 0 (index 300) and 41.5% on bin 1.
        const torch::Tensor one = scalarToSupport(torch::tensor({1.0}, torch::kDouble), S);
        QVERIFY(std::abs(one[0][301].item<double>() - (std::sqrt(2.0) - 1 + 0.001)) < 1e-12);
        // Beyond the support everything lands on the end bin.
        QCOMPARE(scalarToSupport(torch::tensor({1e9}, torch::kDouble), S)[0][600].item<double>(), 1.0);
        // Small outputs are zeroed after inversion; uniform logits mean 0.
        QCOMPARE(supportToScalar(torch::zeros({2, 601}), S).abs().max().item<float>(), 0.f);
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, supportToScalar(torch::zeros({1, 11}), S));
    }

    void gradientsFlowThroughUnroll() {
        const Config c = Config::grid(4, 10, 10, 5);
        Network net(c);
        net.train(true);
        torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.05));
        const int64_t B = 6, K = 3;
        const torch::Tensor obs = torch::rand({K + 1, B, 16, 10, 10}).round();
        const torch::Tensor actions = torch::randint(0, 5, {K, B}, torch::kLong);
        const torch::Tensor rewards = torch::randn({K, B});
        auto lossOnce = [&] {
            InitialOutput init = net.initialInference(obs[0]);
            torch::Tensor loss = -(scalarToSupport(rewards.sum(0), c.supportSize) *
                                   torch::log_softmax(init.valueLogits, -1)).sum(-1).mean();
            torch::Tensor state = init.state;
            LstmState lstm = net.initialLstm(B);
            torch::Tensor prefix = torch::zeros({B});
            for (int64_t k = 0; k < K; ++k) {
                RecurrentOutput out = net.recurrentInference(state, actions[k], lstm);
                prefix = prefix + rewards[k];
                loss = loss - (scalarToSupport(prefix, c.supportSize) * torch::log_softmax(out.valuePrefixLogits, -1))
                                  .sum(-1).mean();
                loss = loss + torch::nn::functional::cross_entropy(out.policyLogits, actions[k]);
                const torch::Tensor target = net.project(net.initialInference(obs[k + 1]).state, false);
                loss = loss + 2.0 * negativeCosineSimilarity(net.project(out.nextState), target).mean();
                state = out.nextState;
                lstm = out.lstm;
            }
            opt.zero_grad();
            loss.backward();
            return named(net);
        };
        auto hasGrad = [](const torch::Tensor& p) { return p.grad().defined() && p.grad().abs().sum().item<double>() > 0; };
        auto p = lossOnce();
        // Zero-initialised last layers receive gradient at once; the rest of the representation
        // and dynamics receive it through the consistency loss over the unroll.
        for (const char* name : {"prediction_network.fc_value.3.weight", "prediction_network.fc_policy.3.weight",
                                 "dynamics_network.fc.3.weight", "representation_network.conv.weight",
                                 "dynamics_network.conv.weight", "dynamics_network.resblocks.0.conv2.weight",
                                 "projection.0.weight", "projection_head.3.weight"})
            QVERIFY2(hasGrad(p.at(name)), name);
        // Once the zeroed heads have moved, gradients reach the LSTM and the heads' inputs too.
        opt.step();
        p = lossOnce();
        for (const char* name : {"dynamics_network.lstm.weight_ih_l0", "dynamics_network.conv1x1_reward.weight",
                                 "prediction_network.conv1x1_value.weight", "prediction_network.fc_policy.0.weight"})
            QVERIFY2(hasGrad(p.at(name)), name);
    }

    void searchWithTheNetwork() {
        Network net(Config::grid(3, 10, 10, 4));
        glimpse::rl::MctsConfig mc;
        mc.numSimulations = 8;
        glimpse::rl::Mcts mcts(mc, 1);
        const torch::Tensor obs = torch::rand({3, 12, 10, 10}).round();
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, searchBatch(net, mcts, obs, false));  // still in training mode
        net.train(false);
        glimpse::rl::SearchResult r = searchBatch(net, mcts, obs, true);
        QCOMPARE(int(r.visitCounts.size()), 3);
        for (const auto& counts : r.visitCounts) QCOMPARE(std::accumulate(counts.begin(), counts.end(), 0), 8);
        for (float v : r.rootValues) QCOMPARE(v, 0.f);  // zero-initialised value and prefix heads
    }
};

QTEST_APPLESS_MAIN(TestEfficientZero)
#include "test_efficientzero.moc"
