// LETR's mlsd_tiny backbone (core/models/letr/mlsd_backbone.h, issue 51 part 3): level shapes,
// the features equal M-LSD's own encoder on the same input (resources/mlsd_tiny.h5), the frozen
// encoder is unchanged by training while the extra stride-32 block trains, a checkpoint
// round trip, and the config's rules (input scaling, not a ResNet).
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <map>

#include <torch/torch.h>

#include "core/error.h"
#include "core/models/letr/mlsd_backbone.h"
#include "core/models/letr/model.h"
#include "core/models/letr/train.h"
#include "core/models/mlsd/model.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::letr;
using testing::maxDiff;

namespace {

const std::string kMlsd = GLIMPSE_SOURCE_DIR "/resources/mlsd_tiny.h5";

LetrConfig tinyConfig() {
    LetrConfig c = LetrConfig::fromJson(nlohmann::json{{"backbone", "mlsd_tiny"}, {"hidden_dim", 32}, {"nheads", 2},
                                                       {"dim_feedforward", 64}, {"coarse_enc_layers", 1},
                                                       {"coarse_dec_layers", 2}, {"fine_enc_layers", 1},
                                                       {"fine_dec_layers", 2}, {"num_queries", 8},
                                                       {"short_side", 64}, {"max_long_side", 96}});
    return c;
}

// A 2 + 1 step training of `model` from M-LSD's encoder, only the extra (C5) block trainable.
LetrTrainConfig shortTraining(const LetrConfig& model) {
    LetrTrainConfig c;
    c.model = model;
    c.batchSize = 2;
    c.coarseSteps = 2;
    c.fineSteps = 1;
    c.lr = 1e-3;
    c.lrBackbone = 1e-3;
    c.valEvery = 0;
    c.backboneTrainFrom = "layer4";   // only the extra block of this backbone
    c.backboneWeights = kMlsd;
    c.augmentEnabled = false;
    return c;
}

std::map<std::string, torch::Tensor> tensorsOf(const torch::nn::Module& m) {
    std::map<std::string, torch::Tensor> t;
    for (const auto& p : m.named_parameters(true)) t[p.key()] = p.value().detach().clone();
    for (const auto& b : m.named_buffers(true)) t[b.key()] = b.value().detach().clone();
    return t;
}

} // namespace

class TestLetrMlsdBackbone : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void configRules() {
        const LetrConfig c = tinyConfig();
        QCOMPARE(c.mean[0], 0.5);   // M-LSD's scaling is this backbone's default
        QCOMPARE(c.std[2], 0.5);
        QCOMPARE(c.levelChannels(4), int64_t(64));
        QCOMPARE(c.levelChannels(5), int64_t(128));
        QString e = testing::qErrorOf([&] {
            LetrConfig::fromJson(nlohmann::json{{"backbone", "mlsd_tiny"}, {"mean", {0.4, 0.5, 0.5}}});
        });
        QVERIFY2(e.contains("mean [0.5, 0.5, 0.5]"), qPrintable(e));
        e = testing::qErrorOf([&] { c.blocksPerLayer(); });
        QVERIFY2(e.contains("not a ResNet"), qPrintable(e));
    }

    void shapesAndForward() {
        LetrModel m(tinyConfig(), 3);
        QVERIFY(m.mlsdBody() != nullptr);
        QVERIFY(!m.body());
        m.eval();
        torch::NoGradGuard ng;
        const torch::Tensor x = torch::rand({2, 3, 70, 100}) * 2 - 1;   // not a multiple of 32
        const auto levels = m.mlsdBody()->forward(x, 5);
        QCOMPARE(int(levels.size()), 4);
        const int64_t ch[4] = {24, 32, 64, 128};
        // stride 2 pads one row/column at the bottom/right: n -> (n - 2) / 2 + 1 (M-LSD's rule)
        const int64_t h[4] = {17, 8, 4, 2}, w[4] = {25, 12, 6, 3};
        for (int i = 0; i < 4; ++i) {
            QCOMPARE(levels[size_t(i)].size(1), ch[i]);
            QCOMPARE(levels[size_t(i)].size(2), h[i]);
            QCOMPARE(levels[size_t(i)].size(3), w[i]);
        }
        QCOMPARE(int(m.mlsdBody()->forward(x, 4).size()), 3);
        const LetrOutput out = m.forward({x[0], x[1].narrow(2, 0, 80)}, {});
        QCOMPARE(int(out.stages.size()), 2);
        QCOMPARE(out.stages[0].height, int64_t(2));   // coarse: stride 32
        QCOMPARE(out.stages[1].height, int64_t(4));   // fine: stride 16
        QCOMPARE(out.last().lines.size(2), int64_t(8));
    }

    void featuresEqualMlsdEncoder() {
        if (!QFileInfo::exists(QString::fromStdString(kMlsd))) QSKIP("resources/mlsd_tiny.h5 is not installed");
        const auto mlsdModel = mlsd::loadMlsd(kMlsd);
        LetrModel m(tinyConfig(), 1);
        loadLetrBackbone(m, kMlsd);
        m.eval();
        torch::NoGradGuard ng;
        torch::manual_seed(5);
        const torch::Tensor x = torch::rand({1, 3, 64, 96}) * 2 - 1;
        const auto mine = m.mlsdBody()->forward(x, 4);
        const torch::Tensor four = torch::cat({x, torch::full({1, 1, 64, 96}, 1.0 / 127.5 - 1.0)}, 1);
        const mlsd::MlsdFeatures ref = mlsdModel->net->encode(four);
        // Equal up to float rounding (relative to the map's scale: C2 reaches ~45).
        auto close = [](const torch::Tensor& a, const torch::Tensor& b) {
            return a.sizes() == b.sizes() && maxDiff(a, b) <= 2e-6 * std::max(1.0, b.abs().max().item<double>());
        };
        QVERIFY(close(mine[0], ref.c2));
        QVERIFY(close(mine[1], ref.c3));
        QVERIFY(close(mine[2], ref.c4));
        QVERIFY(ref.c4.abs().max().item<double>() > 0.1);   // not a trivially zero map
        // The LETR image preprocessing gives M-LSD's input scaling.
        const cv::Mat img = testing::randomImage(64, 96, 7);
        const torch::Tensor t = letrInputTensor(img, m.config());
        const torch::Tensor mi = mlsd::mlsdInput(img, 64);   // 96 -> 64 wide; compare one pixel row's scale
        QVERIFY(std::abs(t[0][0][0].item<float>() - (float(img.at<cv::Vec3b>(0, 0)[0]) / 127.5f - 1.0f)) < 1e-5);
        QVERIFY(mi.size(1) == 4);
    }

    void frozenEncoderUnchangedByTraining() {
        if (!QFileInfo::exists(QString::fromStdString(kMlsd))) QSKIP("resources/mlsd_tiny.h5 is not installed");
        QTemporaryDir dir;
        LetrTrainConfig c = shortTraining(tinyConfig());
        c.trainBackboneBn = false;
        const std::string out = dir.filePath("run").toStdString();
        train::Control control;
        trainLetr(c, "procedural:4:0:96x64", out, false, control, {});
        const auto trained = loadLetr(out + "/model.h5");
        LetrModel fresh(c.model, c.seed);
        loadLetrBackbone(fresh, kMlsd);
        const auto before = tensorsOf(*fresh.mlsdBody());
        const auto after = tensorsOf(*trained->mlsdBody());
        int features = 0, extraChanged = 0;
        for (const auto& [k, v] : before) {
            if (k.rfind("features.", 0) == 0) {
                QVERIFY2(torch::equal(v, after.at(k)), k.c_str());
                ++features;
            } else if (!torch::equal(v, after.at(k))) {
                ++extraChanged;
            }
        }
        QVERIFY(features > 100);
        QCOMPARE(extraChanged, 4);   // extra.{0,1}.{weight,bias} trained

        // Round trip: the saved model is self-contained (backbone inside) and loads to equal outputs.
        const std::string again = dir.filePath("again.h5").toStdString();
        saveLetr(*trained, again);
        const auto reloaded = loadLetr(again);
        QCOMPARE(reloaded->config().backbone, std::string("mlsd_tiny"));
        torch::NoGradGuard ng;
        const torch::Tensor x = torch::rand({3, 64, 96}) * 2 - 1;
        const auto a = trained->forward({x}), b = reloaded->forward({x});
        QVERIFY(maxDiff(a.last().lines, b.last().lines) == 0.0);
        QVERIFY(maxDiff(a.last().logits, b.last().logits) == 0.0);
    }

    // "coarse_queries": "proposals": the reference line of coarse entity i is M-LSD's i-th best
    // line candidate on the same image (computed here by M-LSD's own network and decodeLines on
    // a square input, without thresholds), normalized and kept inside the image; a fresh model's
    // coarse lines are its proposals on every layer; train() leaves the decoder in evaluation
    // mode; training leaves it unchanged (with query denoising on) and the file round-trips.
    void proposalQueries() {
        if (!QFileInfo::exists(QString::fromStdString(kMlsd))) QSKIP("resources/mlsd_tiny.h5 is not installed");
        nlohmann::json j = tinyConfig().toJson();
        j["coarse_queries"] = "proposals";
        const LetrConfig pc = LetrConfig::fromJson(j);
        QVERIFY(pc.coarseProposals && !pc.coarseAnchors && pc.lineQueries());
        QCOMPARE(pc.toJson()["coarse_queries"].get<std::string>(), std::string("proposals"));
        QString e = testing::qErrorOf([] { LetrConfig::fromJsonString(R"({"coarse_queries": "proposals"})", "p.json"); });
        QVERIFY2(e.contains("p.json") && e.contains("proposals") && e.contains("mlsd_tiny"), qPrintable(e));

        const auto mlsdModel = mlsd::loadMlsd(kMlsd);
        LetrModel m(pc, 4);
        QVERIFY(m.proposalDecoder());
        QVERIFY(!LetrModel(tinyConfig(), 4).proposalDecoder());
        loadLetrBackbone(m, kMlsd);
        m.train();
        QVERIFY(m.is_training() && !m.proposalDecoder()->is_training());
        const cv::Mat img = testing::randomImage(64, 64, 11);
        const torch::Tensor x = letrInputTensor(img, m.config());   // 64 x 64: M-LSD's own input size
        LetrOutput out;
        {
            torch::NoGradGuard ng;
            out = m.forward({x});
        }
        const torch::Tensor anchors = out.stages[0].anchors;
        QCOMPARE(anchors.sizes(), torch::IntArrayRef({1, pc.numQueries, 4}));
        for (int64_t l = 0; l < pc.coarseDecLayers; ++l)
            QVERIFY2(maxDiff(out.stages[0].lines[l], anchors) < 1e-5, qPrintable(QString::number(maxDiff(out.stages[0].lines[l], anchors))));   // the head starts at zero

        mlsd::MlsdConfig mc;
        mc.inputSize = 64;
        mc.topK = pc.numQueries;
        mc.scoreThreshold = -1;   // every candidate
        mc.lengthThreshold = -1;
        const torch::Tensor four = torch::cat({x.unsqueeze(0), torch::full({1, 1, 64, 64}, 1.0 / 127.5 - 1.0)}, 1);
        torch::Tensor maps;
        {
            torch::NoGradGuard ng;
            maps = mlsdModel->net->forward(four);
        }
        const auto ref = mlsd::decodeLines(maps, mc, 64, 64);
        QCOMPARE(int64_t(ref.size()), pc.numQueries);
        QVERIFY(ref.front().score > ref.back().score);
        for (int64_t i = 0; i < pc.numQueries; ++i) {
            const auto& r = ref[size_t(i)];
            const float want[4] = {r.x1, r.y1, r.x2, r.y2};
            for (int k = 0; k < 4; ++k)
                QVERIFY2(std::abs(anchors[0][i][k].item<float>() - std::clamp(want[k] / 64.0f, 1e-5f, 1.0f - 1e-5f)) < 1e-5,
                         qPrintable(QString("entity %1 coordinate %2").arg(i).arg(k)));
        }

        // Any input size; the proposals train nothing and keep M-LSD's weights.
        QTemporaryDir dir;
        LetrTrainConfig c = shortTraining(pc);
        c.denoise.enabled = true;
        const std::string run = dir.filePath("run").toStdString();
        train::Control control;
        trainLetr(c, "procedural:4:0:100x70", run, false, control, {});
        const auto trained = loadLetr(run + "/model.h5");
        QVERIFY(trained->config().coarseProposals);
        const auto decoder = tensorsOf(*trained->proposalDecoder());
        const auto source = tensorsOf(*mlsdModel->net);
        QCOMPARE(int(decoder.size()), int(std::count_if(source.begin(), source.end(), [](const auto& kv) {
                     return kv.first.rfind("block1", 0) == 0;
                 })));
        for (const auto& [k, v] : decoder) QVERIFY2(torch::equal(v, source.at(k)), k.c_str());
        torch::NoGradGuard ng;
        const torch::Tensor y = torch::rand({3, 70, 100}) * 2 - 1;
        const auto a = trained->forward({y});
        const auto& p = a.stages[0].anchors;
        QVERIFY(p.min().item<double>() >= 0.0 && p.max().item<double>() <= 1.0 && p.std().item<double>() > 0.01);
        QVERIFY(maxDiff(a.stages[0].lines[0], p) > 1e-4);   // trained: the head corrects them now
        const std::string again = dir.filePath("again.h5").toStdString();
        saveLetr(*trained, again);
        const auto b = loadLetr(again)->forward({y});
        QVERIFY(maxDiff(a.last().lines, b.last().lines) == 0.0);
    }

    void wrongBackboneWeights() {
        LetrModel m(tinyConfig(), 1);
        QTemporaryDir dir;
        const std::string path = dir.filePath("letr.h5").toStdString();
        saveLetr(m, path);   // a LETR checkpoint is not an M-LSD one
        const QString e = testing::qErrorOf([&] { loadLetrBackbone(m, path); });
        QVERIFY2(e.contains("letr.h5") && e.contains("mlsd"), qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestLetrMlsdBackbone)
#include "test_letr_mlsd_backbone.moc"
