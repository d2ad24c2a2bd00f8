// Inference speed paths against float32 (docs/performance.md): LETR's folded channels-last
// backbone and bfloat16 products, the bfloat16 linear layers (bias inside the product), the
// int8 linear layers,
// EfficientZero's folded batch norms, `--precision` parsing.
// Small random models, weights nudged away from their initialization so that the batch norms
// and heads are not identities.
#include <QtTest>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/models/letr/model.h"
#include "core/util/autocast.h"
#include "core/util/products.h"
#include "core/util/threads.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

letr::LetrConfig smallLetr() {
    letr::LetrConfig c;
    c.backbone = "resnet18";
    c.hiddenDim = 64;
    c.nheads = 4;
    c.dimFeedforward = 128;
    c.coarseEncLayers = 1;
    c.coarseDecLayers = 2;
    c.fineEncLayers = 1;
    c.fineDecLayers = 2;
    c.numQueries = 16;
    c.shortSide = 64;
    return c;
}

// Frozen batch norms with non-trivial statistics and affine parameters.
void nudgeBatchNorms(torch::nn::Module& m, uint64_t seed) {
    torch::NoGradGuard ng;
    torch::manual_seed(seed);
    for (const auto& item : m.named_buffers(true)) {
        auto t = item.value();
        if (item.key().find("running_var") != std::string::npos) t.uniform_(0.5, 2.0);
        if (item.key().find("running_mean") != std::string::npos) t.normal_(0.0, 0.2);
    }
    for (const auto& item : m.named_parameters(true)) {
        auto t = item.value();
        const std::string& k = item.key();
        if (k.find("bn") != std::string::npos || k.find("downsample.1") != std::string::npos) {
            if (k.size() >= 6 && k.compare(k.size() - 6, 6, "weight") == 0) t.uniform_(0.5, 1.5);
            else t.normal_(0.0, 0.1);
        }
    }
}

// Endpoints [N, 2] in pixels of the last layer of the last stage.
torch::Tensor endpointsPx(const letr::LetrOutput& o, int64_t w, int64_t h) {
    const auto& s = o.last();
    auto l = s.lines[s.lines.size(0) - 1][0].view({-1, 2, 2});
    return l * torch::tensor({double(w), double(h)}, torch::kFloat);
}

} // namespace

class TestInferencePrecision : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    void precisionFlag() {
        const torch::Device cpu(torch::kCPU);
        QCOMPARE(parsePrecision("fp32", cpu), torch::kFloat);
        QCOMPARE(parsePrecision("float32", cpu), torch::kFloat);
        QCOMPARE(parsePrecision("auto", cpu), cpuHasBf16() ? torch::kBFloat16 : torch::kFloat);
        if (cpuHasBf16()) QCOMPARE(parsePrecision("bf16", cpu), torch::kBFloat16);
        else QVERIFY(testing::qErrorOf([&] { parsePrecision("bf16", cpu); }).contains("no bfloat16 instructions"));
        QVERIFY(testing::qErrorOf([&] { parsePrecision("fp8", cpu); }).contains("expected fp32, bf16 or auto"));
        QCOMPARE(std::string(precisionName(torch::kBFloat16)), std::string("bfloat16"));
        QCOMPARE(std::string(precisionName(torch::kFloat)), std::string("float32"));
        // int8 is CoaT's alone (the flag's fourth argument); "auto" picks it where bfloat16 is missing.
        QVERIFY(testing::qErrorOf([&] { parsePrecision("int8", cpu); }).contains("only CoaT has int8"));
        const auto i8 = products::int8Available() ? torch::kQInt8 : torch::kFloat;
        QCOMPARE(parsePrecision("auto", cpu, "--precision", true), cpuHasBf16() ? torch::kBFloat16 : i8);
        if (products::int8Available()) QCOMPARE(parsePrecision("int8", cpu, "--precision", true), torch::kQInt8);
        else QVERIFY(testing::qErrorOf([&] { parsePrecision("int8", cpu, "--precision", true); }).contains("no int8"));
        QVERIFY(testing::qErrorOf([&] { parsePrecision("fp8", cpu, "--precision", true); })
                    .contains("expected fp32, bf16, int8 or auto"));
        QCOMPARE(std::string(precisionName(torch::kQInt8)), std::string("int8 MLP layers"));
    }

    // products::linear under a kQInt8 guard: weights quantized per output channel (8 bits,
    // symmetric), the input per tensor at each call (7 bits, asymmetric). Every element must be
    // within the bound those roundings allow, computed here from the float32 operands:
    // |err_j| <= sum_k |x_k| s_j / 2 + sum_k |w_jk| r / 2 + K s_j r / 4 (s_j = max_k |w_jk| / 127,
    // r = (max x - min x) / 127, the ranges including 0), plus float32 slack; and it must not be
    // float32's result (it did run in int8). A gradient to the input is float32's backward;
    // weights changed in place are re-quantized.
    void int8LinearWithinQuantizationBound() {
        if (!products::int8Available()) QSKIP("this LibTorch has no int8 linear kernels (oneDNN quantized engine)");
        torch::manual_seed(5);
        for (const auto& [in, out, bias] : {std::tuple{48, 96, true}, std::tuple{96, 40, false}}) {
            torch::nn::Linear lin(torch::nn::LinearOptions(in, out).bias(bias));
            const auto x = torch::randn({2, 30, in}) * 2 + 0.5;
            const auto ref = torch::linear(x, lin->weight, lin->bias);
            auto bound = [&](const torch::Tensor& w) {
                const auto s = w.abs().amax({1}) / 127.0;   // [out]
                const auto r = (std::max(x.max().item<double>(), 0.0) - std::min(x.min().item<double>(), 0.0)) / 127.0;
                const auto ax = x.abs().sum(-1, true);      // [2, 30, 1]
                return ax * s / 2 + w.abs().sum(1) * r / 2 + double(in) * s * r / 4 + 1e-4;
            };
            torch::Tensor got;
            {
                torch::NoGradGuard ng;
                products::ProductDtypeGuard g(torch::kQInt8);
                got = products::linear(*lin, x);
                QVERIFY(torch::equal(products::linearLow(*lin, x), got));   // no lower float type here
            }
            QCOMPARE(got.scalar_type(), torch::kFloat);
            QCOMPARE(got.sizes(), ref.sizes());
            const auto d = (got - ref.detach()).abs();
            const auto b = bound(lin->weight.detach());
            QVERIFY2((d <= b).all().item<bool>(),
                     qPrintable(QString("%1 -> %2: difference %3 over the bound by %4")
                                    .arg(in)
                                    .arg(out)
                                    .arg(d.max().item<double>())
                                    .arg((d - b).max().item<double>())));
            QVERIFY(d.max().item<double>() > 1e-4);   // int8, not float32
            {
                // With a gradient to the input (CoaT's Grad-CAM): the same int8 forward, and the
                // float32 layer's backward, dL/dx = dL/dy W.
                products::ProductDtypeGuard g(torch::kQInt8);
                const auto xg = x.clone().requires_grad_(true);
                const auto y = products::linear(*lin, xg);
                QVERIFY(torch::equal(y.detach(), got));
                const auto up = torch::randn_like(y);
                const auto gx = torch::autograd::grad({y}, {xg}, {up})[0];
                QVERIFY(torch::allclose(gx, torch::matmul(up, lin->weight.detach()), 1e-5, 1e-6));
            }
            torch::NoGradGuard ng;
            products::ProductDtypeGuard g(torch::kQInt8);
            lin->weight.mul_(-1);
            const auto flipped = products::linear(*lin, x);
            const auto refFlipped = torch::linear(x, lin->weight, lin->bias);
            QVERIFY(((flipped - refFlipped).abs() <= bound(lin->weight)).all().item<bool>());
            lin->weight.mul_(-1);
            QVERIFY(torch::equal(products::linear(*lin, x), got));
        }
    }

    // The folded channels-last backbone computes the same function within float32 rounding; the
    // per-head BLAS products of the attention too.
    // products::linear / linearLow put the bias into the bfloat16 product as a column of ones
    // (faster than LibTorch's bfloat16 addmm); the result must be LibTorch's own bfloat16 linear
    // up to the order of the float32 sums (bit for bit in 100% of the elements on this project's
    // machine). Without a guard both are torch::linear in float32.
    void bf16LinearEqualsLibTorchs() {
        torch::manual_seed(3);
        const auto bf = torch::kBFloat16;
        for (const auto& [in, out, bias] : {std::tuple{40, 72, true}, std::tuple{40, 72, false},
                                            std::tuple{72, 24, true}, std::tuple{72, 24, false}}) {
            // in <= out: the bias rides in the product; in > out: it is added in float32 after.
            const bool biasInProduct = in <= out;
            torch::nn::Linear lin(torch::nn::LinearOptions(in, out).bias(bias));
            const auto x = torch::randn({3, 50, in});
            const auto bfBias = bias ? lin->bias.to(bf) : torch::Tensor();
            const auto ref = torch::linear(x.to(bf), lin->weight.to(bf), bfBias);   // addmm in bfloat16
            torch::Tensor got, low, f32;
            {
                products::ProductDtypeGuard g(bf);
                got = products::linear(*lin, x);
                low = products::linearLow(*lin, x);
            }
            f32 = products::linear(*lin, x);
            QCOMPARE(got.scalar_type(), torch::kFloat);
            QCOMPARE(low.scalar_type(), bf);
            QCOMPARE(got.sizes(), ref.sizes());
            // The same product; linearLow rounds once more where the bias came after it.
            QVERIFY(torch::equal(low, got.to(bf)));
            if (biasInProduct || !bias) QVERIFY(torch::equal(low.to(torch::kFloat), got));
            QVERIFY(torch::equal(f32, torch::linear(x, lin->weight, lin->bias)));
            // Within one bfloat16 rounding of each element (the float32 sums may be ordered
            // differently, or the bias added after the rounding), and where the bias is in the
            // product, with no difference at all in most elements.
            const auto r = ref.to(torch::kFloat), d = (got - r).abs();
            const auto scale = bias ? r.abs() + lin->bias.detach().abs() : r.abs();   // |x W^T| <= |r| + |b|
            QVERIFY2((d <= scale / 128.0 + 1e-6).all().item<bool>(),
                     qPrintable(QString("%1 -> %2, bias %3: max difference %4 from LibTorch's bfloat16 linear")
                                    .arg(in)
                                    .arg(out)
                                    .arg(bias)
                                    .arg(d.max().item<double>())));
            if (biasInProduct || !bias) QVERIFY((d == 0).to(torch::kFloat).mean().item<double>() > 0.9);
            // A bfloat16 input (an MLP's hidden layer) gives the same as its float32 copy.
            // The bfloat16 weights are cached; a weight or bias changed in place is seen.
            {
                torch::NoGradGuard ng;
                products::ProductDtypeGuard g(bf);
                const auto savedBias = bias ? lin->bias.detach().clone() : torch::Tensor();
                lin->weight.mul_(-1);
                const auto flipped = products::linear(*lin, x);
                QVERIFY(!torch::equal(flipped, got));
                if (bias) {
                    lin->bias.add_(1);
                    QVERIFY(torch::allclose(products::linear(*lin, x), flipped + 1, 0.0, 0.1));
                }
                lin->weight.mul_(-1);   // exact
                if (bias) lin->bias.copy_(savedBias);
                QVERIFY(torch::equal(products::linear(*lin, x), got));
            }
            torch::nn::Linear next(out, 24);
            products::ProductDtypeGuard g(bf);
            QVERIFY(torch::equal(products::linear(*next, low), products::linear(*next, low.to(torch::kFloat))));
        }
    }

    void letrFoldedFloat32WithinRounding() {
        letr::LetrModel model(smallLetr(), 3);
        nudgeBatchNorms(model, 4);
        model.eval();
        torch::NoGradGuard ng;
        torch::manual_seed(5);
        const auto img = torch::randn({3, 64, 85});
        letr::LetrForwardOptions ref, fast;
        fast.backboneChannelsLast = true;
        const auto a = model.forward({img}, ref), b = model.forward({img}, fast);
        const double dLines = (a.last().lines - b.last().lines).abs().max().item<double>();
        const double dLogits = (a.last().logits - b.last().logits).abs().max().item<double>();
        qInfo("folded float32 vs reference layout: lines %.3g, logits %.3g", dLines, dLogits);
        QVERIFY(dLines < 1e-5);
        QVERIFY(dLogits < 1e-4);
        // The fast path really is another computation (folded weights), not the same ops.
        QVERIFY(dLines > 0 || dLogits > 0);
    }

    // bfloat16 backbone layers and transformer products: endpoints within 0.5 px of float32.
    void letrBf16EndpointsWithinHalfPixel() {
        if (!cpuHasBf16()) QSKIP("this CPU has no bfloat16 instructions (AVX512-BF16 or AMX)");
        letr::LetrModel model(smallLetr(), 7);
        nudgeBatchNorms(model, 8);
        model.eval();
        torch::NoGradGuard ng;
        torch::manual_seed(9);
        const int64_t h = 64, w = 85;
        const auto img = torch::randn({3, h, w});
        letr::LetrForwardOptions ref, bf16;
        bf16.backboneDtype = torch::kBFloat16;
        bf16.transformerDtype = torch::kBFloat16;
        const auto a = model.forward({img}, ref), b = model.forward({img}, bf16);
        const auto d = (endpointsPx(a, w, h) - endpointsPx(b, w, h)).pow(2).sum(-1).sqrt();
        qInfo("bfloat16 vs float32 endpoints: max %.4f px, median %.4f px", d.max().item<double>(),
              d.flatten().median().item<double>());
        QVERIFY(d.max().item<double>() < 0.5);
        QVERIFY(d.max().item<double>() > 0);   // bfloat16 did run
        QCOMPARE(b.last().lines.scalar_type(), torch::kFloat);
        // Only float32 and bfloat16 are offered.
        letr::LetrForwardOptions half;
        half.transformerDtype = torch::kHalf;
        QVERIFY(testing::qErrorOf([&] { model.forward({img}, half); }).contains("float32 or bfloat16"));
    }

    // The bfloat16 products are inference only: with gradients the float32 path runs unchanged.
    void letrFloat32PathWithGradients() {
        letr::LetrModel model(smallLetr(), 11);
        model.eval();
        const auto img = torch::randn({3, 64, 64});
        auto out = model.forward({img});
        out.last().lines.sum().backward();
        const auto g = model.queryEmbed()->weight.grad();
        QVERIFY(g.defined() && g.abs().sum().item<double>() > 0);
    }

    // EfficientZero with its batch norms folded (and its LSTM step and linear layers on
    // transposed weights): value, value-prefix and policy logits, next state and LSTM state within
    // 1e-4 relative (float32 rounding), the support scalars within 1e-3 of max(1, |v|), from a
    // zero and a running LSTM state; the same preferred action.
    void efficientZeroFolded() {
        using namespace glimpse::efficientzero;
        for (bool downsample : {false, true}) {
            Config c = downsample ? Config::atari(6) : Config::grid(3, 10, 10, 5);
            if (downsample) {
                c.obsHeight = c.obsWidth = 32;   // small Atari-shaped network: downsampling stem, 2x2 latent
                c.channels = 16;
                c.lstmHidden = 32;
                c.projHidden = c.projOut = 32;
                c.predHidden = 16;
                c.validate();
            }
            torch::manual_seed(downsample ? 11 : 10);   // the network's initial weights: the same every run
            Network net(c);
            nudgeBatchNorms(net.module(), 12);
            {
                torch::NoGradGuard ng;   // heads start at zero: give them weights
                torch::manual_seed(13);
                for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.05);
            }
            net.train(false);
            torch::NoGradGuard ng;
            torch::manual_seed(14);
            const auto obs = torch::rand({4, c.inputChannels(), c.obsHeight, c.obsWidth}) * 255;
            const auto ref = net.initialInference(obs);
            const auto lstm = net.initialLstm(4);
            // A running LSTM state as well, not zeros: the forget gate and the hidden product count.
            const LstmState running{torch::randn_like(lstm.first) * 0.5, torch::randn_like(lstm.second) * 0.5};
            const auto actions = torch::tensor({0, 1, 2, 3}, torch::kLong);
            const auto rref = net.recurrentInference(ref.state, actions, lstm);
            const auto rrefRun = net.recurrentInference(ref.state, actions, running);
            net.setFoldedInference(true);
            const auto got = net.initialInference(obs);
            const auto rgot = net.recurrentInference(ref.state, actions, lstm);
            const auto rgotRun = net.recurrentInference(ref.state, actions, running);
            auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
                return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item<double>();
            };
            qInfo("folded EfficientZero (%s): state %.3g, value %.3g, policy %.3g, next state %.3g, value prefix %.3g",
                  downsample ? "downsampling" : "grid", rel(got.state, ref.state), rel(got.value, ref.value),
                  rel(got.policyLogits, ref.policyLogits), rel(rgot.nextState, rref.nextState),
                  rel(rgot.valuePrefix, rref.valuePrefix));
            QVERIFY(rel(got.state, ref.state) < 1e-4);
            // Values and value prefixes are expectations over 601 bins (-300..300) that cancel: a
            // relative 1e-7 in the logits moves them by up to ~2e-4 (seen on these weights). The
            // logits get the 1e-4 relative bound, the scalars 1e-3 of max(1, |scalar|).
            auto scalarErr = [](const torch::Tensor& a, const torch::Tensor& b) {
                return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item<double>();
            };
            QVERIFY(rel(got.valueLogits, ref.valueLogits) < 1e-4);
            QVERIFY(scalarErr(got.value, ref.value) < 1e-3);
            QVERIFY(rel(got.policyLogits, ref.policyLogits) < 1e-4);
            QVERIFY(rel(rgot.nextState, rref.nextState) < 1e-4);
            QVERIFY(rel(rgot.valueLogits, rref.valueLogits) < 1e-4);
            QVERIFY(scalarErr(rgot.value, rref.value) < 1e-3);
            QVERIFY(rel(rgot.valuePrefixLogits, rref.valuePrefixLogits) < 1e-4);
            QVERIFY(rel(rgotRun.valuePrefixLogits, rrefRun.valuePrefixLogits) < 1e-4);
            QVERIFY(scalarErr(rgot.valuePrefix, rref.valuePrefix) < 1e-3);
            QVERIFY(scalarErr(rgotRun.valuePrefix, rrefRun.valuePrefix) < 1e-3);
            for (const RecurrentOutput* pair : {&rgot, &rgotRun}) {
                const RecurrentOutput& want = pair == &rgot ? rref : rrefRun;
                QCOMPARE(pair->lstm.first.sizes(), want.lstm.first.sizes());
                QCOMPARE(pair->lstm.second.sizes(), want.lstm.second.sizes());
                QVERIFY(rel(pair->lstm.first, want.lstm.first) < 1e-4);
                QVERIFY(rel(pair->lstm.second, want.lstm.second) < 1e-4);
            }
            QVERIFY(rel(rrefRun.lstm.second, running.second) > 1e-2);   // the step moved the cell state
            QVERIFY(rel(rrefRun.lstm.second, rref.lstm.second) > 1e-2);   // and the state in mattered
            QVERIFY(torch::equal(got.policyLogits.argmax(1), ref.policyLogits.argmax(1)));
            QVERIFY(!torch::equal(got.state, ref.state) || !torch::equal(got.value, ref.value));   // folded ran
            // A weight changed in place (a training step, a loaded checkpoint): folded again.
            {
                torch::NoGradGuard g2;
                for (auto& p : net.parameters()) p.mul_(0.9);
            }
            net.setFoldedInference(false);
            const auto ref2 = net.initialInference(obs);
            net.setFoldedInference(true);
            (void)net.initialInference(obs);
            {
                torch::NoGradGuard g2;
                for (auto& p : net.parameters()) p.mul_(1.0 / 0.9);
            }
            const auto back = net.initialInference(obs);
            QVERIFY(rel(back.valueLogits, ref.valueLogits) < 1e-4);
            QVERIFY(rel(back.state, ref.state) < 1e-4);
            QVERIFY(rel(ref2.state, ref.state) > 1e-3);   // the scaled weights did change the output
        }
    }
};

QTEST_APPLESS_MAIN(TestInferencePrecision)
#include "test_inference_precision.moc"
