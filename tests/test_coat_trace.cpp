// CoaT traces: effective attention weights reproduce the forward pass's factorized attention,
// the CRPE window term reproduces its CRPE output, key distributions, CLS attention, top-5,
// Grad-CAM against a finite-difference-free recomputation, save/load round trip, bad files.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <functional>
#include <map>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/models/coat/trace.h"
#include "core/util/products.h"
#include "core/util/threads.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::coat;
using testing::contains;
using testing::errorOf;
using testing::maxDiff;

namespace {

CoatConfig smallConfig(bool parallel) {
    CoatConfig c;
    c.variant = "custom";
    c.embedDims = parallel ? std::array<int64_t, 4>{16, 24, 24, 24} : std::array<int64_t, 4>{16, 16, 24, 32};
    c.serialDepths = {1, 2, 1, 1};
    c.parallelDepth = parallel ? 1 : 0;
    c.numHeads = 8;
    c.mlpRatios = {2, 2, 2, 2};
    c.numClasses = 7;
    c.imageSize = 64;
    c.resize = 72;
    c.classNames = {"zero", "one", "two", "three", "four", "five", "six"};
    return c;
}

} // namespace

class TestCoatTrace : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
    }

    // sum_j w_j v_j over all tokens = the factorized-attention output of the query token,
    // for every block, head and a few query pixels; the CRPE window + bias = sum_c CRPE_i.
    void effectiveAttentionIsExact() {
        for (bool parallel : {false, true}) {
            CoatModel m(smallConfig(parallel), 5);
            auto img = m.preprocess(testing::randomImage(80, 90, 3));
            auto trace = CoatTrace::capture(m, img);
            torch::NoGradGuard ng;
            auto fwd = m.forward(img.tensor.unsqueeze(0), {true, false});
            QCOMPARE(trace.numBlocks(), int(fwd.attention.size()));
            for (int b = 0; b < trace.numBlocks(); ++b) {
                const auto& rec = fwd.attention[size_t(b)];
                const auto info = trace.block(b);
                QCOMPARE(info.name, rec.name);
                const Grid g = info.grid;
                for (int head : {0, 3, 7}) {
                    for (auto yx : {std::array<int64_t, 2>{0, 0}, {g[0] - 1, g[1] / 2}}) {
                        const int64_t tok = 1 + yx[0] * g[1] + yx[1];
                        auto w = trace.effectiveWeights(b, head, tok);
                        auto out = torch::matmul(w.unsqueeze(0), rec.v[0][head]).squeeze(0);
                        QVERIFY2(maxDiff(out, rec.factor[0][head][tok]) < 1e-5, info.name.c_str());
                        float clsW = 0;
                        auto map = trace.effectiveAttention(b, head, yx[0], yx[1], &clsW);
                        QCOMPARE(map.sizes().vec(), (std::vector<int64_t>{g[0], g[1]}));
                        QCOMPARE(clsW, w[0].item<float>());
                        auto cw = trace.crpeWindow(b, head, yx[0], yx[1]);
                        const float total = cw.window.sum().item<float>() + cw.bias;
                        QVERIFY(std::abs(total - rec.crpe[0][head][tok].sum().item<float>()) < 1e-5);
                        QCOMPARE(cw.kernel, int64_t(head < 2 ? 3 : head < 5 ? 5 : 7));
                    }
                    // CLS query
                    auto wc = trace.effectiveWeights(b, head, 0);
                    auto oc = torch::matmul(wc.unsqueeze(0), rec.v[0][head]).squeeze(0);
                    QVERIFY(maxDiff(oc, rec.factor[0][head][0]) < 1e-5);
                    QVERIFY(maxDiff(trace.clsAttention(b, head).flatten(), wc.narrow(0, 1, g[0] * g[1])) == 0);
                }
                // Key distributions: columns of softmax(K) sum to 1 over all tokens (CLS included).
                auto gal = trace.keyGallery(b, 2);
                QCOMPARE(gal.size(0), trace.headDim(info.scale));
                auto kd = trace.keyDistribution(b, 2, 1);
                QVERIFY(maxDiff(kd, gal[1]) == 0);
                const float cls = rec.kSoftmax[0][2][0][1].item<float>();
                QVERIFY(std::abs(kd.sum().item<float>() + cls - 1.0f) < 1e-5);
            }
            // Mean over heads = mean of the per-head weights.
            auto mean = trace.effectiveWeights(0, -1, 5);
            auto sum = torch::zeros_like(mean);
            for (int h = 0; h < 8; ++h) sum += trace.effectiveWeights(0, h, 5);
            QVERIFY(maxDiff(mean, sum / 8) < 1e-6);
            QCOMPARE(int(trace.blocksOfScale(1).size()), parallel ? 3 : 2);
        }
    }

    void predictionsAndCam() {
        CoatModel m(smallConfig(false), 11);
        auto img = m.preprocess(testing::randomImage(64, 64, 4));
        auto trace = CoatTrace::capture(m, img);
        auto top = trace.top5();
        QCOMPARE(int(top.size()), 5);
        torch::NoGradGuard ng;
        auto probs = torch::softmax(m.forward(img.tensor.unsqueeze(0)).logits[0], 0);
        auto sorted = std::get<1>(probs.sort(0, true));
        for (int i = 0; i < 5; ++i) {
            QCOMPARE(top[size_t(i)].classIndex, sorted[i].item<int64_t>());
            QCOMPARE(top[size_t(i)].name, m.config().className(top[size_t(i)].classIndex));
            QVERIFY(std::abs(top[size_t(i)].prob - probs[top[size_t(i)].classIndex].item<float>()) < 1e-6);
            QCOMPARE(trace.camClass(i), top[size_t(i)].classIndex);
        }
        // The stored CAM equals gradCam() for that class, lies in [0, 1] with max 1 (or all 0).
        for (int i = 0; i < 5; ++i) {
            auto cam = trace.cam(i);
            QCOMPARE(cam.sizes().vec(), (std::vector<int64_t>{2, 2}));
            QVERIFY(maxDiff(cam, gradCam(m, img.tensor, trace.camClass(i))) < 1e-5);
            QVERIFY(cam.min().item<float>() >= 0.0f);
            const float mx = cam.max().item<float>();
            QVERIFY(mx == 0.0f || std::abs(mx - 1.0f) < 1e-6);
            // ... and at every scale, on that scale's grid (issue 56, item 1).
            for (int s = 0; s < 4; ++s) {
                QVERIFY(trace.hasCamScale(s));
                const auto cs = trace.cam(i, s);
                const Grid g = trace.grid(s);
                QCOMPARE(cs.sizes().vec(), (std::vector<int64_t>{g[0], g[1]}));
                QVERIFY(maxDiff(cs, gradCam(m, img.tensor, trace.camClass(i), s)) < 1e-5);
                QVERIFY(maxDiff(trace.camForClass(trace.camClass(i), s), cs) == 0.0);
            }
        }
        QVERIFY(contains(errorOf([&] { gradCam(m, img.tensor, 0, 4); }), {"scale 5"}));
        QVERIFY(contains(errorOf([&] { gradCam(m, img.tensor, 7); }), {"class 7"}));
        // Extra classes asked for at capture: kept after the top-5 (a top-5 class is not repeated).
        const int64_t last = std::get<1>(probs.sort(0, true))[6].item<int64_t>();
        auto more = CoatTrace::capture(m, img, {last, top[0].classIndex});
        QCOMPARE(more.numCams(), 6);
        QCOMPARE(more.camClass(5), last);
        QVERIFY(maxDiff(more.camForClass(last), gradCam(m, img.tensor, last)) < 1e-5);
        QVERIFY(contains(errorOf([&] { trace.camForClass(last); }), {"no class activation map", std::to_string(last)}));
        QVERIFY(contains(errorOf([&] { CoatTrace::capture(m, img, {9}); }), {"CAM class 9"}));
    }

    // Grad-CAM computed another way: the forward pass rebuilt in the test from the model's
    // blocks, the tokens entering a scale's last block made a leaf (each scale in turn), d(class score)/d(feature
    // map) by autograd, and the textbook formula on the [C, h4, w4] feature map: w_c = spatial
    // mean of the gradient, CAM = ReLU(sum_c w_c A_c), divided by its maximum. Equal to gradCam().
    void gradCamAgainstHandComputation() {
        for (bool parallel : {false, true})
        for (int camScale = 0; camScale < 4; ++camScale) {   // every scale's Grad-CAM (issue 56, item 1)
            CoatModel m(smallConfig(parallel), 21);
            m.eval();
            std::map<std::string, torch::Tensor> p;
            for (const auto& kv : m.named_parameters()) p[kv.key()] = kv.value();
            auto image = m.preprocess(testing::randomImage(70, 80, 6)).tensor;
            int nonZero = 0;
            for (int64_t cls = 0; cls < m.config().numClasses; ++cls) {
                torch::Tensor A;   // [1, 1 + h4*w4, C4]: the feature map Grad-CAM differentiates
                std::array<Grid, 4> grids{};
                std::array<torch::Tensor, 4> xs;
                auto x = image.unsqueeze(0);
                for (int s = 0; s < 4; ++s) {
                    auto t = m.patchEmbed(s)->forward(x, grids[size_t(s)]);
                    t = torch::cat({m.clsToken(s).expand({1, 1, t.size(2)}), t}, 1);
                    for (int i = 0; i < m.numSerialBlocks(s); ++i) {
                        if ((!parallel || camScale == 0) && s == camScale && i == m.numSerialBlocks(s) - 1)
                            t = A = t.detach().requires_grad_(true);
                        t = m.serialBlock(s, i)->forward(t, grids[size_t(s)]);
                    }
                    xs[size_t(s)] = t;
                    const Grid g = grids[size_t(s)];
                    x = t.narrow(1, 1, g[0] * g[1]).transpose(1, 2).reshape({1, t.size(2), g[0], g[1]});
                }
                torch::Tensor logits;
                auto norm = [&](const torch::Tensor& t, const std::string& n) {
                    return torch::layer_norm(t, {t.size(-1)}, p[n + ".weight"], p[n + ".bias"], 1e-6);
                };
                if (!parallel) {
                    logits = torch::linear(norm(xs[3], "norm4").select(1, 0), p["head.weight"], p["head.bias"]);
                } else {
                    std::array<torch::Tensor, 3> t{xs[1], xs[2], xs[3]};
                    const std::array<Grid, 3> g{grids[1], grids[2], grids[3]};
                    for (int i = 0; i < m.numParallelBlocks(); ++i) {
                        for (int k = 0; k < 3; ++k) t[size_t(k)] = m.cpe(k + 1)->forward(t[size_t(k)], g[size_t(k)]);
                        if (camScale > 0 && i == m.numParallelBlocks() - 1)
                            t[size_t(camScale - 1)] = A = t[size_t(camScale - 1)].detach().requires_grad_(true);
                        t = m.parallelBlock(i)->forward(t, g);
                    }
                    auto clsTokens = torch::stack({norm(t[0], "norm2").select(1, 0), norm(t[1], "norm3").select(1, 0),
                                                   norm(t[2], "norm4").select(1, 0)},
                                                  1);
                    auto agg = torch::conv1d(clsTokens, p["aggregate.weight"], p["aggregate.bias"]).squeeze(1);
                    logits = torch::linear(agg, p["head.weight"], p["head.bias"]);
                }
                QVERIFY(A.defined());
                if (cls == 0) {   // the hand-built forward is the model's
                    torch::NoGradGuard ng;
                    QVERIFY(maxDiff(logits.detach(), m.forward(image.unsqueeze(0)).logits) < 1e-5);
                }
                auto grad = torch::autograd::grad({logits[0][cls]}, {A})[0];
                const Grid g4 = grids[size_t(camScale)];   // the differentiated scale's grid
                const int64_t C = A.size(2);
                auto toMap = [&](const torch::Tensor& tokens) {   // [1, 1+h*w, C] -> [C, h, w]
                    return tokens[0].narrow(0, 1, g4[0] * g4[1]).transpose(0, 1).reshape({C, g4[0], g4[1]});
                };
                auto featureMap = toMap(A.detach()), gradMap = toMap(grad);
                auto weights = gradMap.mean({1, 2});                                     // [C]
                auto cam = torch::relu((weights.view({C, 1, 1}) * featureMap).sum(0));   // [h4, w4]
                const float mx = cam.max().item<float>();
                cam = mx > 0 ? cam / mx : torch::zeros_like(cam);
                nonZero += mx > 0;
                auto ours = gradCam(m, image, cls, camScale);
                QCOMPARE(ours.sizes().vec(), cam.sizes().vec());
                const double d = maxDiff(ours, cam);
                QVERIFY2(d < 1e-5, qPrintable(QString("%1 scale %4 class %2: max difference %3")
                                                  .arg(parallel ? "CoaT" : "CoaT-Lite")
                                                  .arg(cls)
                                                  .arg(d)
                                                  .arg(camScale + 1)));
            }
            QVERIFY(nonZero > 0);   // the comparison saw real maps, not only all-zero ones
        }
    }

    void saveLoadRoundTrip() {
        CoatModel m(smallConfig(true), 2);
        auto trace = runCoat(m, testing::randomImage(70, 64, 9));
        const std::string p = dir_.filePath("t.h5").toStdString();
        trace.save(p);
        auto back = CoatTrace::load(p);
        QCOMPARE(back.numBlocks(), trace.numBlocks());
        QCOMPARE(back.raw().meta(), trace.raw().meta());
        for (const auto& n : trace.raw().names()) QVERIFY2(torch::equal(back.raw().get(n), trace.raw().get(n)), n.c_str());
        QVERIFY(maxDiff(back.effectiveAttention(4, 1, 1, 1), trace.effectiveAttention(4, 1, 1, 1)) == 0);
        QCOMPARE(back.top5()[0].name, trace.top5()[0].name);
        QVERIFY(torch::equal(back.image(), trace.image()));
    }

    // The products' precision (issue 57: the GUI's Precision box): float32 is the default and is
    // named in the trace; bfloat16 (where the CPU has it) stays within the stated bound of float32
    // and is named too; a trace without the key (written before it) reads as float32; other
    // dtypes are refused.
    void computePrecision() {
        CoatModel m(smallConfig(true), 5);
        auto img = m.preprocess(testing::randomImage(64, 64, 6));
        auto f32 = CoatTrace::capture(m, img);
        QCOMPARE(f32.compute(), std::string("float32"));
        QCOMPARE(f32.raw().meta()["compute"].get<std::string>(), std::string("float32"));
        auto old = f32;
        old.raw().meta().erase("compute");
        QCOMPARE(old.compute(), std::string("float32"));
        QVERIFY(contains(errorOf([&] { CoatTrace::capture(m, img, {}, torch::kHalf); }), {"float32, bfloat16 or int8"}));
        if (products::int8Available()) {
            // int8 MLP layers: named in the trace and read back; near float32, but not it.
            auto i8 = CoatTrace::capture(m, img, {}, torch::kQInt8);
            QCOMPARE(i8.compute(), std::string("int8 MLP layers"));
            QCOMPARE(i8.computeDtype(), torch::kQInt8);
            const double dp = maxDiff(i8.probs(), f32.probs());
            QVERIFY2(dp > 0 && dp < 0.02, std::to_string(dp).c_str());
            // A Grad-CAM added later in int8 (float32 backward through the int8 layers) is the
            // stored one within rounding.
            for (int s = 0; s < 4; ++s) {
                const double dc = maxDiff(i8.cam(0, s), gradCam(m, img.tensor, i8.camClass(0), s, torch::kQInt8));
                QVERIFY2(dc < 0.02, std::to_string(dc).c_str());
            }
            const std::string p = dir_.filePath("i8.h5").toStdString();
            i8.save(p);
            QCOMPARE(CoatTrace::load(p).computeDtype(), torch::kQInt8);
        }
        if (!cpuHasBf16()) QSKIP("this CPU has no bfloat16 instructions (AVX512-BF16 / AMX)");
        auto bf = CoatTrace::capture(m, img, {}, torch::kBFloat16);
        QCOMPARE(bf.compute(), std::string("bfloat16"));
        const double dp = maxDiff(bf.probs(), f32.probs());
        QVERIFY2(dp > 0 && dp < 0.01, std::to_string(dp).c_str());   // it did compute in bfloat16
        // A Grad-CAM added later in the trace's precision is the stored one within bfloat16
        // rounding (the capture keeps q, k and v in float32 for its records, gradCam does not).
        for (int s = 0; s < 4; ++s) {
            const double dc = maxDiff(bf.cam(0, s), gradCam(m, img.tensor, bf.camClass(0), s, torch::kBFloat16));
            QVERIFY2(dc < 0.02, std::to_string(dc).c_str());   // 0.002-0.006 here
        }
        const std::string p = dir_.filePath("bf.h5").toStdString();
        bf.save(p);
        QCOMPARE(CoatTrace::load(p).compute(), std::string("bfloat16"));
    }

    void refusedInputs() {
        CoatConfig c = smallConfig(false);
        c.useCrpe = false;
        CoatModel m(c, 0);
        auto trace = runCoat(m, testing::randomImage(64, 64, 1));
        QVERIFY(!trace.hasCrpe());
        QVERIFY(contains(errorOf([&] { trace.crpeWindow(0, 0, 0, 0); }), {"no CRPE"}));
        QVERIFY(contains(errorOf([&] { trace.effectiveAttention(0, 0, 99, 0); }), {"outside"}));
        QVERIFY(contains(errorOf([&] { trace.effectiveWeights(0, 8, 0); }), {"head 8"}));
        QVERIFY(contains(errorOf([&] { trace.effectiveWeights(99, 0, 0); }), {"block 99"}));
        QVERIFY(contains(errorOf([&] { trace.keyDistribution(0, 0, 2); }), {"channel 2"}));
        // A trace missing a tensor, and a foreign trace, are refused with the file's name.
        Trace broken = trace.raw();
        Trace cut("coat");
        cut.meta() = broken.meta();
        for (const auto& n : broken.names())
            if (n != "block_1/v") cut.set(n, broken.get(n));
        const std::string p = dir_.filePath("cut.h5").toStdString();
        cut.save(p);
        QVERIFY(contains(errorOf([&] { CoatTrace::load(p); }), {"cut.h5", "block_1/v"}));
        // Malformed meta (wrong JSON types) is an Error too, not a JSON exception.
        Trace bad = trace.raw();
        bad.meta()["config"]["crpe_window"] = "wide";
        bad.meta()["config"]["use_crpe"] = true;
        QVERIFY(contains(errorOf([&] { CoatTrace t(bad); }), {"CoaT trace"}));
        Trace bad2 = trace.raw();
        bad2.meta()["blocks"][0]["scale"] = "big";
        QVERIFY(contains(errorOf([&] { CoatTrace t(bad2); }), {"block 0"}));
        Trace other("letr");
        const std::string q = dir_.filePath("other.h5").toStdString();
        other.save(q);
        QVERIFY(contains(errorOf([&] { CoatTrace::load(q); }), {"other.h5", "not a CoaT trace"}));
    }

    // A crafted trace file whose config.crpe_window is missing, of the wrong shape or type, or
    // does not cover every head is refused by load() with the file's name and the problem (it
    // was read unchecked before: a missing key or a short pair is undefined behaviour).
    void craftedCrpeWindowRefused() {
        CoatModel m(smallConfig(false), 3);
        auto good = runCoat(m, testing::randomImage(64, 64, 2));
        QVERIFY(good.hasCrpe());
        int n = 0;
        auto loadWith = [&](const std::function<void(nlohmann::json&)>& edit) {
            Trace t = good.raw();
            edit(t.meta()["config"]);
            const std::string p = dir_.filePath(QString("crpe_%1.h5").arg(n++)).toStdString();
            t.save(p);
            return errorOf([&] { CoatTrace::load(p); });
        };
        auto expect = [&](const std::string& e, std::initializer_list<std::string> parts) {
            const std::string file = "crpe_" + std::to_string(n - 1) + ".h5";
            QVERIFY2(contains(e, {file}), e.c_str());
            for (const auto& part : parts) QVERIFY2(contains(e, {part}), (e + " (expected '" + part + "')").c_str());
        };
        expect(loadWith([](auto& c) { c.erase("crpe_window"); }), {"no 'crpe_window'"});
        expect(loadWith([](auto& c) { c["crpe_window"] = nlohmann::json::array(); }), {"crpe_window", "non-empty array"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5}, {7, 3}}; }), {"entry 1", "pair of integers", "[5]"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5, 3}, 7}; }), {"entry 2", "pair of integers"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {"5", 3}, {7, 3}}; }), {"entry 1", "pair of integers"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5, 3}, {7, 3, 1}}; }), {"entry 2", "pair of integers"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5, 3}, {7, 2.5}}; }), {"entry 2", "pair of integers"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {4, 3}, {7, 3}}; }), {"entry 1", "kernel 4", "odd"});
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5, -3}, {7, 9}}; }), {"entry 1", "head count -3"});
        // Head groups that do not cover the 8 heads (a view of head 7 would find no group).
        expect(loadWith([](auto& c) { c["crpe_window"] = {{3, 2}, {5, 3}}; }), {"5 heads", "num_heads is 8"});
        // The same groups as the model, in the same order, still load.
        Trace same = good.raw();
        same.meta()["config"]["crpe_window"] = {{3, 2}, {5, 3}, {7, 3}};
        QCOMPARE(CoatTrace(same).crpeWindow(0, 7, 1, 1).kernel, int64_t(7));
    }
};

QTEST_APPLESS_MAIN(TestCoatTrace)
#include "test_coat_trace.moc"
