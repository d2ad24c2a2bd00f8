// LetrTrace: attention recomputed on demand equals the weights the forward pass used; traces
// save and load without the model; predictions in original pixels; float16 storage error.
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/trace.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::letr;

namespace {

using testing::maxDiff;
using testing::randomImage;
template <typename F>
QString errorOf(F&& f) { return testing::qErrorOf(std::forward<F>(f)); }

LetrConfig smallConfig() {
    LetrConfig c;
    c.backbone = "resnet18";
    c.hiddenDim = 64;
    c.nheads = 4;
    c.dimFeedforward = 128;
    c.coarseEncLayers = 1;
    c.coarseDecLayers = 2;
    c.fineEncLayers = 1;
    c.fineDecLayers = 3;
    c.numQueries = 20;
    c.shortSide = 96;
    return c;
}




const Stage kStages[2] = {Stage::Coarse, Stage::Fine};

} // namespace

class TestLetrTrace : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);   // one thread: fast and steady on busy machines
        QVERIFY(dir_.isValid());
    }

    // For a batch of two images of different sizes, every (stage, layer, head, entity) map the
    // trace computes equals the softmax weights captured inside the forward pass.
    void attentionEqualsForwardWeights() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 9);
        m.eval();
        std::vector<LetrImage> ins = {m.preprocess(randomImage(96, 150, 1)), m.preprocess(randomImage(130, 96, 2))};
        m.setCaptureAttention(true);
        LetrForwardOptions fo;
        fo.record = true;
        auto out = m.forward({ins[0].tensor, ins[1].tensor}, fo);
        std::vector<std::vector<torch::Tensor>> cross(2), self(2);   // captured [B, H, N, S]
        for (int s = 0; s < 2; ++s)
            for (int l = 0; l < m.numDecoderLayers(kStages[s]); ++l) {
                auto layer = m.decoderLayer(kStages[s], l);
                cross[size_t(s)].push_back(layer->multihead_attn->capturedWeights);
                self[size_t(s)].push_back(layer->self_attn->capturedWeights);
                QVERIFY(cross[size_t(s)].back().defined());
            }
        m.setCaptureAttention(false);

        double worstCross = 0, worstSelf = 0;
        for (int64_t b = 0; b < 2; ++b) {
            LetrTrace t = LetrTrace::capture(m, out, b, ins[size_t(b)]);
            QCOMPARE(t.numStages(), 2);
            QCOMPARE(t.numLayers(Stage::Coarse), 2);
            QCOMPARE(t.numLayers(Stage::Fine), 3);
            QCOMPARE(t.numHeads(), 4);
            QCOMPARE(t.numQueries(), int64_t(20));
            for (int s = 0; s < 2; ++s) {
                const auto& so = out.stages[size_t(s)];
                const auto fs = t.featureSize(kStages[s]);
                QCOMPARE(fs[0], so.validSizes[size_t(b)][0]);
                QCOMPARE(fs[1], so.validSizes[size_t(b)][1]);
                for (int l = 0; l < t.numLayers(kStages[s]); ++l) {
                    auto cw = cross[size_t(s)][size_t(l)][b];   // [H, N, Sp]
                    auto sw = self[size_t(s)][size_t(l)][b];    // [H, N, N]
                    for (int head = -1; head < 4; ++head)
                        for (int64_t e : {int64_t(0), int64_t(7), int64_t(19)}) {
                            auto ref = head < 0 ? cw.mean(0)[e] : cw[head][e];
                            ref = ref.view({so.height, so.width}).narrow(0, 0, fs[0]).narrow(1, 0, fs[1]);
                            auto a = t.attention(kStages[s], l, head, e);
                            QCOMPARE(a.sizes().vec(), (std::vector<int64_t>{fs[0], fs[1]}));
                            worstCross = std::max(worstCross, maxDiff(a, ref));
                            QVERIFY(std::abs(a.sum().item<double>() - 1.0) < 1e-5);
                            auto sref = head < 0 ? sw.mean(0)[e] : sw[head][e];
                            auto sa = t.selfAttention(kStages[s], l, head, e);
                            QCOMPARE(sa.sizes().vec(), (std::vector<int64_t>{20}));
                            worstSelf = std::max(worstSelf, maxDiff(sa, sref));
                        }
                    // Every head at once (the inspector's cache): the forward pass's weights.
                    for (int64_t e : {int64_t(0), int64_t(19)}) {
                        auto all = t.attentionHeads(kStages[s], l, e);
                        QCOMPARE(all.sizes().vec(), (std::vector<int64_t>{4, fs[0], fs[1]}));
                        auto ref = cw.select(1, e).view({4, so.height, so.width}).narrow(1, 0, fs[0]).narrow(2, 0, fs[1]);
                        worstCross = std::max(worstCross, maxDiff(all, ref));
                        worstCross = std::max(worstCross, maxDiff(all.mean(0), t.attention(kStages[s], l, -1, e)));
                    }
                }
            }
        }
        qInfo("on-demand vs forward: cross-attention %.3g, self-attention %.3g", worstCross, worstSelf);
        QVERIFY2(worstCross <= 1e-5, qPrintable(QString::number(worstCross)));
        QVERIFY2(worstSelf <= 1e-5, qPrintable(QString::number(worstSelf)));
    }

    void predictionsInOriginalPixels() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 4);
        m.eval();
        cv::Mat img = randomImage(120, 200, 5);
        LetrTrace t = runLetr(m, img);
        auto in = m.preprocess(img);
        auto out = m.forward({in.tensor});
        QCOMPARE(t.originalSize()[0], int64_t(120));
        QCOMPARE(t.originalSize()[1], int64_t(200));
        QCOMPARE(t.inputSize()[0], int64_t(96));
        QCOMPARE(t.inputSize()[1], int64_t(160));
        QCOMPARE(t.image().sizes().vec(), (std::vector<int64_t>{96, 160, 3}));
        QCOMPARE(t.image().scalar_type(), torch::kUInt8);
        for (int s = 0; s < 2; ++s)
            for (int l = 0; l < t.numLayers(kStages[s]); ++l) {
                auto lines = out.stages[size_t(s)].lines[l][0];
                auto ref = lines * torch::tensor({200.0f, 120.0f, 200.0f, 120.0f});
                QVERIFY(maxDiff(t.endpoints(kStages[s], l), ref) < 1e-4);
                auto sc = torch::softmax(out.stages[size_t(s)].logits[l][0], -1).select(-1, 0);
                QVERIFY(maxDiff(t.scores(kStages[s], l), sc) < 1e-6);
            }
        // lines(): thresholded, sorted by score.
        auto all = t.lines(t.lastStage(), t.lastLayer(), 0.0f);
        QCOMPARE(all.size(), size_t(20));
        for (size_t i = 1; i < all.size(); ++i) QVERIFY(all[i - 1].score >= all[i].score);
        const float thr = all[5].score;
        auto some = t.lines(t.lastStage(), t.lastLayer(), thr);
        QVERIFY(some.size() >= 6 && some.size() < 20);
        QVERIFY(t.lines(Stage::Fine, 2, 1.01f).empty());
        // Argument checks.
        QVERIFY(errorOf([&] { t.attention(Stage::Fine, 3, 0, 0); }).contains("layer 3"));
        QVERIFY(errorOf([&] { t.attention(Stage::Fine, 0, 4, 0); }).contains("head 4"));
        QVERIFY(errorOf([&] { t.attention(Stage::Fine, 0, -1, 20); }).contains("entity 20"));
        QVERIFY(errorOf([&] { t.selfAttention(Stage::Coarse, 0, -2, 0); }).contains("head -2"));
    }

    void saveLoadAnswersTheSame() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 6);
        auto traces = runLetr(m, std::vector<cv::Mat>{randomImage(100, 140, 7), randomImage(80, 80, 8)});
        QCOMPARE(traces.size(), size_t(2));
        const std::string path = dir_.filePath("letr_trace.h5").toStdString();
        traces[0].save(path);
        LetrTrace back = LetrTrace::load(path);
        QCOMPARE(back.raw().meta(), traces[0].raw().meta());
        QCOMPARE(back.bytes(), traces[0].bytes());
        for (int s = 0; s < 2; ++s)
            for (int l = 0; l < back.numLayers(kStages[s]); ++l) {
                QVERIFY(torch::equal(back.endpoints(kStages[s], l), traces[0].endpoints(kStages[s], l)));
                QVERIFY(torch::equal(back.scores(kStages[s], l), traces[0].scores(kStages[s], l)));
                for (int head : {-1, 2})
                    for (int64_t e : {int64_t(3), int64_t(11)}) {
                        QVERIFY(torch::equal(back.attention(kStages[s], l, head, e),
                                             traces[0].attention(kStages[s], l, head, e)));
                        QVERIFY(torch::equal(back.selfAttention(kStages[s], l, head, e),
                                             traces[0].selfAttention(kStages[s], l, head, e)));
                    }
            }
        QVERIFY(torch::equal(back.image(), traces[0].image()));

        // A trace of another family, or an incomplete one, is refused with a clear message.
        Trace other("coat");
        other.set("x", torch::zeros({2}));
        const std::string otherPath = dir_.filePath("coat_trace.h5").toStdString();
        other.save(otherPath);
        QString e = errorOf([&] { LetrTrace::load(otherPath); });
        QVERIFY2(e.contains("coat_trace.h5") && e.contains("not a LETR trace"), qPrintable(e));
        Trace broken = traces[1].raw();
        Trace partial("letr");
        partial.meta() = broken.meta();
        for (const auto& n : broken.names())
            if (n != "fine/layer_1/cross_in") partial.set(n, broken.get(n));
        e = errorOf([&] { LetrTrace{partial}; });
        QVERIFY2(e.contains("fine/layer_1/cross_in"), qPrintable(e));
    }

    void float16StatesStayClose() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 12);
        cv::Mat img = randomImage(96, 128, 13);
        LetrRunOptions o32, o16;
        o16.precision = LetrTracePrecision::Float16;
        LetrTrace t32 = runLetr(m, img, o32);
        LetrTrace t16 = runLetr(m, img, o16);
        QVERIFY(t16.precision() == LetrTracePrecision::Float16);
        QVERIFY(t16.bytes() < t32.bytes());
        double worst = 0;
        for (int s = 0; s < 2; ++s)
            for (int l = 0; l < t32.numLayers(kStages[s]); ++l)
                for (int head = -1; head < 4; ++head)
                    for (int64_t e = 0; e < 20; e += 3) {
                        worst = std::max(worst, maxDiff(t16.attention(kStages[s], l, head, e),
                                                        t32.attention(kStages[s], l, head, e)));
                        worst = std::max(worst, maxDiff(t16.selfAttention(kStages[s], l, head, e),
                                                        t32.selfAttention(kStages[s], l, head, e)));
                    }
        qInfo("float16 states: max attention difference %.3g (bytes %lld vs %lld)", worst,
              (long long)t16.bytes(), (long long)t32.bytes());
        QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));

        // A float16 trace saves and loads (HDF5 IEEE half) and answers identically.
        const std::string path = dir_.filePath("letr_trace_f16.h5").toStdString();
        t16.save(path);
        LetrTrace back = LetrTrace::load(path);
        QVERIFY(back.precision() == LetrTracePrecision::Float16);
        QCOMPARE(maxDiff(back.attention(kStages[1], 0, -1, 4), t16.attention(kStages[1], 0, -1, 4)), 0.0);
    }

    void runLetrRestoresTrainingFlag() {
        LetrModel m(smallConfig(), 1);
        m.train();
        LetrTimings timings;
        LetrRunOptions o;
        o.timings = &timings;
        runLetr(m, randomImage(50, 60, 3), o);
        QVERIFY(m.is_training());
        QVERIFY(timings.total() > 0);
    }
};

QTEST_APPLESS_MAIN(TestLetrTrace)
#include "test_letr_trace.moc"
