// LETR model: config, parameter names, shapes, determinism, batching, positional encoding,
// preprocessing and input guards. Small configs so the suite stays fast.
#include <QtTest>

#include <cmath>
#include <set>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/models/letr/config.h"
#include "core/models/letr/denoise.h"
#include "core/models/letr/model.h"
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
    c.fineDecLayers = 2;
    c.numQueries = 16;
    c.shortSide = 64;
    return c;
}




} // namespace

class TestLetrModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }   // robust timing on shared machines

    void configJsonRoundTripAndDefaults() {
        LetrConfig d;
        QCOMPARE(d.backbone, std::string("resnet50"));
        QCOMPARE(d.hiddenDim, int64_t(256));
        QCOMPARE(d.nheads, int64_t(8));
        QCOMPARE(d.dimFeedforward, int64_t(2048));
        QCOMPARE(d.numQueries, int64_t(1000));
        QCOMPARE(d.shortSide, int64_t(512));
        QCOMPARE(d.maxLongSide, int64_t(1333));
        QVERIFY(d.fineStage);
        QCOMPARE(d.mean[0], 0.538);
        QCOMPARE(d.std[2], 0.273);
        d.validate();

        LetrConfig c = smallConfig();
        c.fineStage = false;
        c.dropout = 0.25;
        LetrConfig back = LetrConfig::fromJsonString(c.toJsonString());
        QCOMPARE(back.toJson(), c.toJson());
        QVERIFY(!back.fineStage);
        QCOMPARE(back.dropout, 0.25);
        // Missing keys take defaults.
        LetrConfig partial = LetrConfig::fromJsonString(R"({"backbone": "resnet101", "num_queries": 300})");
        QCOMPARE(partial.backbone, std::string("resnet101"));
        QCOMPARE(partial.numQueries, int64_t(300));
        QCOMPARE(partial.hiddenDim, int64_t(256));
        // score_threshold: absent while not set (published and older files keep their JSON).
        QVERIFY(!c.toJson().contains("score_threshold"));
        c.scoreThreshold = 0.31;
        QCOMPARE(LetrConfig::fromJsonString(c.toJsonString()).scoreThreshold, 0.31);
    }

    void configErrors() {
        auto err = [](const char* json) {
            return errorOf([&] { LetrConfig::fromJsonString(json, "my.json"); });
        };
        QString e = err(R"({"backbone": "vgg16"})");
        QVERIFY2(e.contains("my.json") && e.contains("vgg16"), qPrintable(e));
        e = err(R"({"hidden_dim": 100, "nheads": 8})");
        QVERIFY2(e.contains("divisible"), qPrintable(e));
        e = err(R"({"num_querys": 10})");
        QVERIFY2(e.contains("unknown") && e.contains("num_querys"), qPrintable(e));
        e = err(R"({"num_queries": "many"})");
        QVERIFY2(e.contains("num_queries"), qPrintable(e));
        e = err(R"({"stages": "fine"})");
        QVERIFY2(e.contains("stages"), qPrintable(e));
        e = err(R"({"mean": [0.5, 0.5]})");
        QVERIFY2(e.contains("mean"), qPrintable(e));
        e = err(R"({"std": [0.5, 0.0, 0.5]})");
        QVERIFY2(e.contains("std"), qPrintable(e));
        e = err(R"({"score_threshold": 1.0})");
        QVERIFY2(e.contains("my.json") && e.contains("score_threshold"), qPrintable(e));
        e = err(R"({"dropout": 1.5})");
        QVERIFY2(e.contains("dropout"), qPrintable(e));
        e = err("{not json");
        QVERIFY2(e.contains("my.json") && e.contains("JSON"), qPrintable(e));
        e = errorOf([] { LetrConfig::fromFile("/nonexistent/letr.json"); });
        QVERIFY2(e.contains("/nonexistent/letr.json"), qPrintable(e));
    }

    // "position_in_values": the named stages' encoder input is input_proj(C) + pos instead of
    // input_proj(C), so the memory (the cross-attention's values) carries the sine encoding.
    // Checked against the encoder layers run by hand; no new parameters; other stages unchanged.
    void positionInValuesFeedsTheEncoder() {
        torch::NoGradGuard ng;
        LetrConfig c = smallConfig();
        QVERIFY(!c.toJson().contains("position_in_values"));   // off: the published layout
        for (const char* v : {"coarse", "fine", "coarse+fine"}) {
            LetrConfig r = LetrConfig::fromJson(nlohmann::json{{"position_in_values", v}});
            QCOMPARE(r.posInValuesCoarse, std::string(v) != "fine");
            QCOMPARE(r.posInValuesFine, std::string(v) != "coarse");
            QCOMPARE(r.toJson()["position_in_values"].get<std::string>(), std::string(v));
        }
        QVERIFY(!LetrConfig::fromJson(nlohmann::json{{"position_in_values", "none"}}).toJson().contains(
            "position_in_values"));
        QString e = errorOf([] { LetrConfig::fromJsonString(R"({"position_in_values": "both"})", "p.json"); });
        QVERIFY2(e.contains("p.json") && e.contains("position_in_values") && e.contains("both"), qPrintable(e));
        e = errorOf([] { LetrConfig::fromJsonString(R"({"position_in_values": true})", "p.json"); });
        QVERIFY2(e.contains("position_in_values"), qPrintable(e));

        LetrModel off(c, 3);
        off.eval();
        LetrImage in = off.preprocess(randomImage(64, 96, 5));
        LetrForwardOptions fo;
        fo.keepFeatures = true;
        auto outOff = off.forward({in.tensor}, fo);
        auto po = off.named_parameters(true);
        for (int which = 0; which < 3; ++which) {   // coarse, fine, coarse+fine
            LetrConfig cp = c;
            cp.posInValuesCoarse = which != 1;
            cp.posInValuesFine = which != 0;
            LetrModel on(cp, 3);
            on.eval();
            auto pn = on.named_parameters(true);
            QCOMPARE(po.size(), pn.size());
            for (const auto& p : po) QVERIFY(maxDiff(p.value(), pn[p.key()]) == 0.0);
            auto outOn = on.forward({in.tensor}, fo);
            for (int s = 0; s < 2; ++s) {
                const bool added = s == 0 ? cp.posInValuesCoarse : cp.posInValuesFine;
                const Stage st = s == 0 ? Stage::Coarse : Stage::Fine;
                const std::string proj = s == 0 ? "letr.input_proj." : "input_proj.";
                const auto& so = outOn.stages[size_t(s)];
                auto feat = outOn.features[0][size_t(so.level - 2)].unsqueeze(0);
                auto src = torch::conv2d(feat, pn[proj + "weight"], pn[proj + "bias"]).flatten(2).transpose(1, 2);
                auto x = added ? src + so.pos : src;
                x = on.encoderLayer(st, 0)->forward(x, so.pos, so.mask.flatten(1));
                QVERIFY(maxDiff(so.memory, x) < 1e-5);
                const double vsOff = maxDiff(so.memory, outOff.stages[size_t(s)].memory);
                // The fine stage's queries come from the coarse stage, its memory does not.
                QVERIFY2(added ? vsOff > 1e-2 : vsOff == 0.0, qPrintable(QString::number(vsOff)));
            }
            QVERIFY(maxDiff(outOn.last().lines, outOff.last().lines) > 1e-4);
        }
    }

    // "coarse_queries": "anchors": the positional query of each coarse entity is its anchor
    // line's sine encoding through the anchor encoder (recomputed here with a LineQueryEncoder
    // holding the same weights), its content starts as query_embed, and every coarse layer's
    // line is sigmoid(anchor logit + lines_embed(hs)): with the head's last layer at zero the
    // coarse stage returns its anchors. The anchors receive gradients; denoising entities take
    // their noised lines as anchors; the file round-trips.
    void anchorQueriesCorrectTheirAnchors() {
        QVERIFY(!smallConfig().toJson().contains("coarse_queries"));   // off: the published layout
        LetrConfig c = LetrConfig::fromJson(nlohmann::json{{"coarse_queries", "anchors"}});
        QVERIFY(c.coarseAnchors);
        QCOMPARE(c.toJson()["coarse_queries"].get<std::string>(), std::string("anchors"));
        QVERIFY(!LetrConfig::fromJson(nlohmann::json{{"coarse_queries", "learned"}}).coarseAnchors);
        QString e = errorOf([] { LetrConfig::fromJsonString(R"({"coarse_queries": "boxes"})", "q.json"); });
        QVERIFY2(e.contains("q.json") && e.contains("coarse_queries") && e.contains("boxes"), qPrintable(e));

        c = smallConfig();
        c.coarseAnchors = true;
        c.fineRefinesCoarse = true;
        c.dropout = 0;
        LetrModel m(c, 7);
        m.eval();
        QVERIFY(!LetrModel(smallConfig(), 7).queryAnchors().defined());
        auto params = m.named_parameters(true);
        QVERIFY(params.contains("letr.query_anchor") && params.contains("letr.anchor_encoder.fc1.weight"));
        const torch::Tensor anchors = m.queryAnchors();
        QCOMPARE(anchors.sizes(), torch::IntArrayRef({c.numQueries, 4}));
        QVERIFY(anchors.min().item<double>() >= 0.0099 && anchors.max().item<double>() <= 0.9901);
        const auto len = (anchors.narrow(1, 2, 2) - anchors.narrow(1, 0, 2)).norm(2, 1);
        QVERIFY2(len.max().item<double>() <= 0.4001 && anchors.std(0).min().item<double>() > 0.05,
                 "short anchor lines spread over the image");

        LineQueryEncoder enc(c.hiddenDim, 0);
        {
            torch::NoGradGuard ng;
            for (auto& p : enc->named_parameters()) p.value().copy_(params["letr.anchor_encoder." + p.key()]);
        }
        LetrImage in = m.preprocess(randomImage(64, 96, 3));
        LetrForwardOptions rec;
        rec.record = true;
        {
            torch::NoGradGuard ng;
            auto out = m.forward({in.tensor}, rec);
            const auto& co = out.stages[0];
            QVERIFY(maxDiff(co.queryPos[0], enc->forward(anchors.unsqueeze(0))[0]) < 1e-5);
            QVERIFY(maxDiff(co.selfIn[0][0], m.queryEmbed()->weight) == 0.0);
            for (auto& p : m.named_parameters(true))
                if (p.key().rfind("letr.lines_embed.layers.2.", 0) == 0) p.value().zero_();
            auto z = m.forward({in.tensor});
            for (int64_t l = 0; l < c.coarseDecLayers; ++l)
                QVERIFY(maxDiff(z.stages[0].lines[l][0], anchors) < 1e-5);
            // Denoising entities: their noised lines are their anchors; the model's own entities
            // do not see them.
            LetrForwardOptions dn;
            dn.denoiseReference = torch::tensor({{{0.2f, 0.3f, 0.6f, 0.35f}, {0.5f, 0.1f, 0.5f, 0.9f}}});
            auto d = m.forward({in.tensor}, dn);
            QVERIFY(maxDiff(d.stages[0].lines, z.stages[0].lines) < 1e-5);
            QCOMPARE(d.stages[0].dnLines.sizes(), torch::IntArrayRef({c.coarseDecLayers, 1, 2, 4}));
            for (int64_t l = 0; l < c.coarseDecLayers; ++l)
                QVERIFY(maxDiff(d.stages[0].dnLines[l], dn.denoiseReference) < 1e-5);
            LetrForwardOptions bad;
            bad.denoiseQueryPos = torch::zeros({1, 2, c.hiddenDim});
            e = errorOf([&] { m.forward({in.tensor}, bad); });
            QVERIFY2(e.contains("anchor"), qPrintable(e));
            LetrModel learned(smallConfig(), 7);
            learned.eval();
            e = errorOf([&] { learned.forward({in.tensor}, dn); });
            QVERIFY2(e.contains("anchor"), qPrintable(e));
        }
        LetrModel fresh(c, 7);
        fresh.train();
        auto t = fresh.forward({in.tensor});
        t.stages[0].lines.sum().backward();
        const auto& g = fresh.named_parameters(true)["letr.query_anchor"].grad();
        QVERIFY(g.defined() && g.abs().max().item<double>() > 0);

        const QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/anchors.h5";
        saveLetr(fresh, path);
        auto back = loadLetr(path);
        QVERIFY(back->config().coarseAnchors);
        fresh.eval();
        torch::NoGradGuard ng;
        auto a = fresh.forward({in.tensor}), b = back->forward({in.tensor});
        QVERIFY(maxDiff(a.stages[1].lines, b.stages[1].lines) == 0.0);
    }

    // "fine_lines": "refine": every fine decoder layer's line is sigmoid(logit(coarse last-layer
    // line) + lines_embed(hs)), checked against the same model without it (equal parameters,
    // equal hs, so its lines are sigmoid(lines_embed(hs))); with the head's last layer at zero
    // the fine stage returns the coarse lines; no gradient reaches the coarse head through them.
    void fineLinesRefineTheCoarseLines() {
        LetrConfig c = smallConfig();
        QVERIFY(!c.toJson().contains("fine_lines"));   // off: the published layout
        LetrConfig r = LetrConfig::fromJson(nlohmann::json{{"fine_lines", "refine"}});
        QVERIFY(r.fineRefinesCoarse);
        QCOMPARE(r.toJson()["fine_lines"].get<std::string>(), std::string("refine"));
        QVERIFY(!LetrConfig::fromJson(nlohmann::json{{"fine_lines", "absolute"}}).fineRefinesCoarse);
        QString e = errorOf([] { LetrConfig::fromJsonString(R"({"fine_lines": "relative"})", "f.json"); });
        QVERIFY2(e.contains("f.json") && e.contains("fine_lines") && e.contains("relative"), qPrintable(e));

        LetrConfig cr = c;
        cr.fineRefinesCoarse = true;
        LetrModel off(c, 4), on(cr, 4);
        off.eval();
        on.eval();
        auto po = off.named_parameters(true), pn = on.named_parameters(true);
        QCOMPARE(po.size(), pn.size());
        for (const auto& p : po) QVERIFY(maxDiff(p.value(), pn[p.key()]) == 0.0);
        LetrImage in = off.preprocess(randomImage(64, 96, 6));
        {
            torch::NoGradGuard ng;
            auto a = off.forward({in.tensor}), b = on.forward({in.tensor});
            QVERIFY(maxDiff(a.stages[0].lines, b.stages[0].lines) == 0.0);   // the coarse stage is unchanged
            QVERIFY(maxDiff(a.stages[1].hs, b.stages[1].hs) == 0.0);
            QVERIFY(maxDiff(a.stages[1].logits, b.stages[1].logits) == 0.0);
            auto logit = [](const torch::Tensor& x) { return (x / (1 - x)).log(); };
            auto ref = b.stages[0].lines[b.stages[0].lines.size(0) - 1];
            auto want = (logit(a.stages[1].lines) + logit(ref).unsqueeze(0)).sigmoid();
            QVERIFY2(maxDiff(b.stages[1].lines, want) < 1e-5, qPrintable(QString::number(maxDiff(b.stages[1].lines, want))));
            QVERIFY(maxDiff(a.stages[1].lines, b.stages[1].lines) > 1e-3);
            for (auto& p : on.named_parameters(true))
                if (p.key().rfind("lines_embed.layers.2.", 0) == 0) p.value().zero_();
            auto z = on.forward({in.tensor});
            for (int64_t l = 0; l < z.stages[1].lines.size(0); ++l)
                QVERIFY(maxDiff(z.stages[1].lines[l], z.stages[0].lines[z.stages[0].lines.size(0) - 1]) < 1e-5);
        }
        on.train();
        auto t = on.forward({in.tensor});
        t.stages[1].lines.sum().backward();
        auto pt = on.named_parameters(true);
        const auto& g = pt["letr.lines_embed.layers.2.weight"].grad();
        QVERIFY(!g.defined() || g.abs().max().item<double>() == 0.0);
    }

    void resizeRule() {
        LetrConfig c;   // short 512, long cap 1333
        auto s = c.resizedSize(480, 640);
        QCOMPARE(s[0], int64_t(512));
        QCOMPARE(s[1], int64_t(682));   // int(512 * 640 / 480)
        s = c.resizedSize(640, 480);
        QCOMPARE(s[0], int64_t(682));
        QCOMPARE(s[1], int64_t(512));
        s = c.resizedSize(512, 512);
        QCOMPARE(s[0], int64_t(512));
        QCOMPARE(s[1], int64_t(512));
        s = c.resizedSize(100, 1000);   // long side capped: short = round(1333 * 100 / 1000) = 133
        QCOMPARE(s[0], int64_t(133));
        QCOMPARE(s[1], int64_t(1330));
        s = c.resizedSize(1, 1);
        QCOMPARE(s[0], int64_t(512));
        QCOMPARE(s[1], int64_t(512));
        s = c.resizedSize(1, 30000);    // extreme aspect: at least one pixel
        QCOMPARE(s[0], int64_t(1));
        QCOMPARE(s[1], int64_t(1333));
    }

    void parameterNamesMatchOfficial() {
        LetrModel m(smallConfig(), 0);
        std::set<std::string> names;
        for (const auto& p : m.named_parameters(true)) names.insert(p.key());
        std::set<std::string> buffers;
        for (const auto& b : m.named_buffers(true)) buffers.insert(b.key());
        for (const char* n : {"backbone.0.body.conv1.weight", "backbone.0.body.layer1.0.conv1.weight",
                              "backbone.0.body.layer2.0.downsample.0.weight", "backbone.0.body.layer4.1.conv2.weight",
                              "letr.input_proj.weight", "letr.input_proj.bias", "letr.query_embed.weight",
                              "letr.transformer.encoder.layers.0.self_attn.in_proj_weight",
                              "letr.transformer.encoder.layers.0.self_attn.in_proj_bias",
                              "letr.transformer.encoder.layers.0.self_attn.out_proj.weight",
                              "letr.transformer.encoder.layers.0.linear1.weight",
                              "letr.transformer.encoder.layers.0.norm2.bias",
                              "letr.transformer.decoder.layers.1.multihead_attn.in_proj_weight",
                              "letr.transformer.decoder.layers.1.multihead_attn.out_proj.bias",
                              "letr.transformer.decoder.layers.1.norm3.weight",
                              "letr.transformer.decoder.norm.weight", "letr.class_embed.weight",
                              "letr.lines_embed.layers.0.weight", "letr.lines_embed.layers.2.bias",
                              "input_proj.weight", "transformer.encoder.layers.0.self_attn.in_proj_weight",
                              "transformer.decoder.layers.1.self_attn.out_proj.weight",
                              "transformer.decoder.norm.bias", "class_embed.bias",
                              "lines_embed.layers.1.weight"})
            QVERIFY2(names.count(n), n);
        // Batch-norm weight / bias are parameters (trainable from scratch), the running
        // statistics buffers; the tensor names are DETR's either way.
        for (const char* n : {"backbone.0.body.bn1.weight", "backbone.0.body.bn1.bias",
                              "backbone.0.body.layer3.0.downsample.1.weight"})
            QVERIFY2(names.count(n), n);
        for (const char* n : {"backbone.0.body.bn1.running_mean", "backbone.0.body.bn1.running_var",
                              "backbone.0.body.layer3.0.downsample.1.running_var"})
            QVERIFY2(buffers.count(n), n);
        for (const auto& n : names) {
            QVERIFY2(n.find("num_batches_tracked") == std::string::npos, n.c_str());
            QVERIFY2(n.find("fc.") == std::string::npos, n.c_str());
            QVERIFY2(n.find("letr.backbone") == std::string::npos, n.c_str());
        }
        for (const auto& n : buffers) QVERIFY2(n.find("num_batches_tracked") == std::string::npos, n.c_str());
        QCOMPARE(m.named_parameters()["letr.input_proj.weight"].size(1), int64_t(512));   // C5 of resnet18
        QCOMPARE(m.named_parameters()["input_proj.weight"].size(1), int64_t(256));        // C4
        QCOMPARE(m.named_parameters()["letr.query_embed.weight"].size(0), int64_t(16));
        QCOMPARE(m.named_parameters()["class_embed.weight"].size(0), int64_t(2));
        QCOMPARE(m.named_parameters()["letr.lines_embed.layers.2.weight"].size(0), int64_t(4));
    }

    // torchvision's trunk sizes: params of conv1..layer4 incl. BN affine (= total minus fc).
    void backboneSizesMatchTorchvision() {
        const std::vector<std::pair<std::string, int64_t>> expected = {
            {"resnet18", 11689512 - 513000}, {"resnet34", 21797672 - 513000},
            {"resnet50", 25557032 - 2049000}, {"resnet101", 44549160 - 2049000}};
        for (const auto& [arch, count] : expected) {
            ResNetBody body(arch);
            int64_t n = 0;
            for (const auto& p : body->named_parameters(true)) n += p.value().numel();
            for (const auto& b : body->named_buffers(true))
                if (b.key().size() > 7 && (b.key().rfind(".weight") == b.key().size() - 7 ||
                                           b.key().rfind(".bias") == b.key().size() - 5))
                    n += b.value().numel();
            QCOMPARE(n, count);
        }
        // Strides and channels: C4 at /16 with 1024 ch, C5 at /32 with 2048 ch for ResNet-50.
        torch::NoGradGuard ng;
        ResNetBody r50("resnet50");
        auto f = r50->forward(torch::zeros({1, 3, 65, 97}), 5);
        QCOMPARE(f.size(), size_t(4));
        QCOMPARE(f[2].sizes().vec(), (std::vector<int64_t>{1, 1024, 5, 7}));
        QCOMPARE(f[3].sizes().vec(), (std::vector<int64_t>{1, 2048, 3, 4}));
        ResNetBody r18("resnet18");
        f = r18->forward(torch::zeros({1, 3, 64, 96}), 4);
        QCOMPARE(f.size(), size_t(3));
        QCOMPARE(f[2].sizes().vec(), (std::vector<int64_t>{1, 256, 4, 6}));
    }

    void frozenBatchNormFormula() {
        FrozenBatchNorm2d bn(3);
        {
            torch::NoGradGuard ng;
            bn->weight.copy_(torch::tensor({1.0f, 2.0f, 0.5f}));
            bn->bias.copy_(torch::tensor({0.0f, 1.0f, -1.0f}));
            bn->running_mean.copy_(torch::tensor({0.5f, -1.0f, 2.0f}));
            bn->running_var.copy_(torch::tensor({1.0f, 4.0f, 0.25f}));
        }
        auto x = torch::randn({2, 3, 4, 5});
        // By hand: (x - mean) / sqrt(var + eps) * weight + bias, per channel.
        auto v = [](std::vector<float> l) { return torch::tensor(l).view({1, 3, 1, 1}); };
        auto ref = (x - v({0.5f, -1.0f, 2.0f})) / (v({1.0f, 4.0f, 0.25f}) + 1e-5).sqrt() * v({1.0f, 2.0f, 0.5f}) +
                   v({0.0f, 1.0f, -1.0f});
        QVERIFY(maxDiff(bn(x), ref) < 1e-5);   // training mode, but trainStats off: frozen
        bn->eval();
        QVERIFY(maxDiff(bn(x), ref) < 1e-5);
    }

    // train_backbone_bn: in training mode the layer normalizes by batch statistics, updates
    // the running ones with momentum 0.1 (unbiased variance), and trains weight / bias; in
    // evaluation it is the frozen map with the updated running statistics.
    void batchNormTrainsWhenAsked() {
        FrozenBatchNorm2d bn(3);
        bn->trainStats = true;
        bn->train();
        auto x = torch::randn({4, 3, 5, 6}) * 3.0 + 2.0;
        auto y = bn(x);
        const auto mean = x.mean({0, 2, 3});
        const auto var = x.var({0, 2, 3}, /*unbiased=*/false);
        auto byHand = (x - mean.view({1, 3, 1, 1})) / (var.view({1, 3, 1, 1}) + 1e-5).sqrt();
        QVERIFY(maxDiff(y, byHand) < 1e-4);
        const double n = double(x.numel() / 3);
        QVERIFY(maxDiff(bn->running_mean, 0.1 * mean) < 1e-5);
        QVERIFY(maxDiff(bn->running_var, 0.9 + 0.1 * var * n / (n - 1)) < 1e-4);
        y.pow(2).sum().backward();
        QVERIFY(bn->weight.grad().defined() && bn->weight.grad().abs().sum().item<double>() > 0);
        bn->eval();
        auto frozen = (x - bn->running_mean.view({1, 3, 1, 1})) / (bn->running_var.view({1, 3, 1, 1}) + 1e-5).sqrt();
        QVERIFY(maxDiff(bn(x).detach(), frozen) < 1e-4);
        // A frozen backbone (weight not requiring grad) keeps the statistics even in training mode.
        bn->train();
        for (auto& p : bn->parameters()) p.set_requires_grad(false);
        const auto before = bn->running_mean.clone();
        bn(x);
        QVERIFY(maxDiff(bn->running_mean, before) == 0.0);
    }

    void sineEncodingMatchesFormula() {
        // Two images: one 3x5 un-padded inside a 4x6 map, one full.
        auto mask = torch::ones({2, 4, 6}, torch::kBool);
        mask[0].narrow(0, 0, 3).narrow(1, 0, 5).fill_(false);
        mask[1].fill_(false);
        const int64_t F = 8;
        auto pos = sinePositionEncoding(mask, F);
        QCOMPARE(pos.sizes().vec(), (std::vector<int64_t>{2, 2 * F, 4, 6}));
        auto pa = pos.accessor<float, 4>();
        const int valid[2][2] = {{3, 5}, {4, 6}};
        for (int b = 0; b < 2; ++b)
            for (int i = 0; i < valid[b][0]; ++i)
                for (int j = 0; j < valid[b][1]; ++j)
                    for (int c = 0; c < 2 * F; ++c) {
                        const bool isY = c < F;
                        const int k = isY ? c : c - F;
                        const double p = isY ? (i + 1) / (valid[b][0] + 1e-6) * 2 * M_PI
                                             : (j + 1) / (valid[b][1] + 1e-6) * 2 * M_PI;
                        const double dimT = std::pow(10000.0, 2.0 * (k / 2) / double(F));
                        const double expect = (k % 2 == 0) ? std::sin(p / dimT) : std::cos(p / dimT);
                        QVERIFY2(std::abs(pa[b][c][i][j] - expect) < 1e-5,
                                 qPrintable(QString("b%1 c%2 (%3,%4): %5 vs %6").arg(b).arg(c).arg(i).arg(j)
                                                .arg(pa[b][c][i][j]).arg(expect)));
                    }
        // The encoding of an un-padded cell does not depend on the padding around it.
        auto single = sinePositionEncoding(torch::zeros({1, 3, 5}, torch::kBool), F);
        QVERIFY(maxDiff(single[0], pos[0].narrow(1, 0, 3).narrow(2, 0, 5)) < 1e-6);
    }

    void preprocessResizesAndNormalizes() {
        LetrConfig c = smallConfig();
        LetrModel m(c, 0);
        cv::Mat img(48, 80, CV_8UC3, cv::Scalar(10, 128, 250));
        LetrImage in = m.preprocess(img);
        QCOMPARE(in.originalHeight, int64_t(48));
        QCOMPARE(in.originalWidth, int64_t(80));
        QCOMPARE(in.height(), int64_t(64));
        QCOMPARE(in.width(), int64_t(106));   // int(64 * 80 / 48)
        QCOMPARE(in.resized.rows, 64);
        QCOMPARE(in.resized.cols, 106);
        QCOMPARE(in.tensor.scalar_type(), torch::kFloat);
        const double expect[3] = {(10 / 255.0 - 0.538) / 0.257, (128 / 255.0 - 0.494) / 0.263,
                                  (250 / 255.0 - 0.453) / 0.273};
        for (int ch = 0; ch < 3; ++ch)
            QVERIFY(std::abs(in.tensor[ch][10][20].item<double>() - expect[ch]) < 1e-5);
    }

    void shapesAndRanges() {
        torch::NoGradGuard ng;
        LetrConfig c = smallConfig();
        LetrModel m(c, 1);
        m.eval();
        LetrImage in = m.preprocess(randomImage(64, 96, 1));
        LetrForwardOptions fo;
        fo.record = true;
        fo.time = true;
        LetrOutput out = m.forward({in.tensor}, fo);
        QCOMPARE(out.stages.size(), size_t(2));
        const int64_t N = 16, d = 64;
        const int64_t fh[2] = {2, 4}, fw[2] = {3, 6};   // 64x96 at /32 and /16
        for (int s = 0; s < 2; ++s) {
            const auto& so = out.stages[size_t(s)];
            QCOMPARE(so.level, s == 0 ? 5 : 4);
            QCOMPARE(so.height, fh[s]);
            QCOMPARE(so.width, fw[s]);
            QCOMPARE(so.hs.sizes().vec(), (std::vector<int64_t>{2, 1, N, d}));
            QCOMPARE(so.logits.sizes().vec(), (std::vector<int64_t>{2, 1, N, 2}));
            QCOMPARE(so.lines.sizes().vec(), (std::vector<int64_t>{2, 1, N, 4}));
            QCOMPARE(so.memory.sizes().vec(), (std::vector<int64_t>{1, fh[s] * fw[s], d}));
            QCOMPARE(so.pos.sizes().vec(), (std::vector<int64_t>{1, fh[s] * fw[s], d}));
            QCOMPARE(so.selfIn.size(), size_t(2));
            QCOMPARE(so.crossIn.size(), size_t(2));
            QVERIFY(so.lines.min().item<float>() >= 0.0f && so.lines.max().item<float>() <= 1.0f);
            QVERIFY(torch::isfinite(so.logits).all().item<bool>());
            QVERIFY(so.mask.logical_not().all().item<bool>());
            // Decoder outputs are LayerNorm'ed, and layer 0 starts from tgt = 0.
            QVERIFY(so.selfIn[0].abs().max().item<float>() == 0.0f);
        }
        // Fine query_pos is the coarse decoder's last normed output.
        QVERIFY(maxDiff(out.stages[1].queryPos, out.stages[0].hs[1]) == 0.0);
        QVERIFY(maxDiff(out.stages[0].queryPos[0], m.queryEmbed()->weight) == 0.0);
        QVERIFY(out.timings.backbone > 0 && out.timings.coarse > 0 && out.timings.fine > 0);

        LetrConfig coarseOnly = c;
        coarseOnly.fineStage = false;
        LetrModel m1(coarseOnly, 1);
        m1.eval();
        auto out1 = m1.forward({in.tensor});
        QCOMPARE(out1.stages.size(), size_t(1));
        for (const auto& p : m1.named_parameters(true))
            QVERIFY2(p.key().rfind("letr.", 0) == 0 || p.key().rfind("backbone.", 0) == 0, p.key().c_str());
        QVERIFY(errorOf([&] { m1.decoderLayer(Stage::Fine, 0); }).contains("no fine stage"));
    }

    void determinism() {
        LetrConfig c = smallConfig();
        LetrModel a(c, 42), b(c, 42), other(c, 43);
        auto pa = a.named_parameters(true);
        auto pb = b.named_parameters(true);
        auto po = other.named_parameters(true);
        bool anyDiff = false;
        for (const auto& item : pa) {
            QVERIFY2(torch::equal(item.value(), pb[item.key()]), item.key().c_str());
            if (!torch::equal(item.value(), po[item.key()])) anyDiff = true;
        }
        QVERIFY(anyDiff);
        // The global RNG is not used: seeding it differently changes nothing.
        torch::manual_seed(1);
        LetrModel c1(c, 7);
        torch::manual_seed(2);
        LetrModel c2(c, 7);
        for (const auto& item : c1.named_parameters(true))
            QVERIFY(torch::equal(item.value(), c2.named_parameters(true)[item.key()]));

        torch::NoGradGuard ng;
        a.eval();
        b.eval();
        auto x = a.preprocess(randomImage(70, 90, 3)).tensor;
        auto o1 = a.forward({x});
        auto o2 = a.forward({x});
        auto o3 = b.forward({x});
        QVERIFY(torch::equal(o1.last().lines, o2.last().lines));
        QVERIFY(torch::equal(o1.last().lines, o3.last().lines));
    }

    void dropoutOnlyInTraining() {
        LetrConfig c = smallConfig();
        c.dropout = 0.5;
        LetrModel m(c, 3);
        auto x = m.preprocess(randomImage(64, 64, 4)).tensor;
        torch::NoGradGuard ng;
        m.train();
        auto t1 = m.forward({x}).last().logits;
        auto t2 = m.forward({x}).last().logits;
        QVERIFY(!torch::allclose(t1, t2));
        m.eval();
        QVERIFY(torch::equal(m.forward({x}).last().logits, m.forward({x}).last().logits));
    }

    void gradientsFlow() {
        LetrModel m(smallConfig(), 5);
        m.train();
        auto x = m.preprocess(randomImage(64, 80, 5)).tensor;
        auto out = m.forward({x});
        auto loss = out.stages[0].logits.sum() + out.stages[1].lines.sum();
        loss.backward();
        auto params = m.named_parameters(true);
        for (const char* n : {"letr.query_embed.weight", "letr.transformer.encoder.layers.0.self_attn.in_proj_weight",
                              "transformer.decoder.layers.1.multihead_attn.in_proj_weight",
                              "backbone.0.body.conv1.weight", "input_proj.weight"}) {
            QVERIFY2(params[n].grad().defined(), n);
            QVERIFY2(params[n].grad().abs().sum().item<double>() > 0, n);
        }
    }

    // Inference on the CPU runs attention one (image, head) at a time on strided views, scaled
    // inside the product (MultiheadAttentionImpl::forward); recording the weights takes the
    // batched path. Both give the same outputs within float32 rounding, with a key padding mask
    // (one image padded, the other not), an attention mask, and q = k (one fused projection).
    void attentionPathsAgree() {
        torch::manual_seed(11);
        MultiheadAttention a(32, 4, 0.0);
        a->eval();
        for (auto& p : a->parameters()) p.data().uniform_(-0.5, 0.5);
        auto x = torch::randn({2, 9, 32}), y = torch::randn({2, 7, 32}), v = torch::randn({2, 9, 32});
        auto pad = torch::zeros({2, 9}, torch::kBool);
        pad[1].narrow(0, 6, 3).fill_(true);
        auto selfMask = torch::rand({9, 9}) > 0.7;
        selfMask.fill_diagonal_(false);
        torch::NoGradGuard ng;
        auto both = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& m, const torch::Tensor& am) {
            a->captureWeights = false;
            auto fast = a->forward(q, k, v, m, am);
            a->captureWeights = true;
            auto ref = a->forward(q, k, v, m, am);
            a->captureWeights = false;
            QCOMPARE(fast.sizes(), ref.sizes());
            QVERIFY2(maxDiff(fast, ref) < 1e-5, qPrintable(QString::number(maxDiff(fast, ref))));
        };
        both(x, x, {}, {});
        both(x, x, pad, selfMask);
        both(y, x, pad, {});
        both(y, x + 1.0, {}, {});
    }

    // A batch of images of different sizes gives each image the same result as running it alone.
    void batchEqualsSingle() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 11);
        m.eval();
        std::vector<LetrImage> ins = {m.preprocess(randomImage(64, 96, 21)), m.preprocess(randomImage(100, 70, 22)),
                                      m.preprocess(randomImage(64, 96, 23)), m.preprocess(randomImage(40, 40, 24))};
        QCOMPARE(ins[1].height(), int64_t(91));
        QCOMPARE(ins[1].width(), int64_t(64));
        std::vector<torch::Tensor> xs;
        for (auto& i : ins) xs.push_back(i.tensor);
        LetrForwardOptions fo;
        fo.record = true;
        auto batch = m.forward(xs, fo);
        QCOMPARE(batch.stages[0].height, int64_t(3));   // max(2, 3, 2, 2)
        QCOMPARE(batch.stages[0].width, int64_t(3));
        double worst = 0;
        for (size_t i = 0; i < ins.size(); ++i) {
            auto single = m.forward({ins[i].tensor}, fo);
            for (size_t s = 0; s < 2; ++s) {
                const auto& bs = batch.stages[s];
                const auto& ss = single.stages[s];
                QCOMPARE(bs.validSizes[i][0], ss.height);
                QCOMPARE(bs.validSizes[i][1], ss.width);
                const int64_t b = int64_t(i);
                worst = std::max(worst, maxDiff(bs.logits.select(1, b), ss.logits.select(1, 0)));
                worst = std::max(worst, maxDiff(bs.lines.select(1, b), ss.lines.select(1, 0)));
                worst = std::max(worst, maxDiff(bs.hs.select(1, b), ss.hs.select(1, 0)));
                auto crop = [&](const torch::Tensor& t) {
                    return t[b].view({bs.height, bs.width, -1}).narrow(0, 0, ss.height).narrow(1, 0, ss.width)
                        .reshape({ss.height * ss.width, -1});
                };
                worst = std::max(worst, maxDiff(crop(bs.memory), ss.memory[0]));
                worst = std::max(worst, maxDiff(crop(bs.pos), ss.pos[0]));
                worst = std::max(worst, maxDiff(bs.crossIn[1][b], ss.crossIn[1][0]));
                // Padding mask: exactly the cells outside the image's own feature map.
                const int64_t padded = bs.mask[b].sum().item<int64_t>();
                QCOMPARE(padded, bs.height * bs.width - ss.height * ss.width);
            }
        }
        qInfo("batch vs single: max abs difference %.3g", worst);
        QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
    }

    void tinyAndBadInputs() {
        torch::NoGradGuard ng;
        LetrConfig c = smallConfig();
        c.maxInputPixels = 10000;
        LetrModel m(c, 2);
        m.eval();
        // 1x1 image: resized to 64x64 -> 2x2 / 4x4 maps, runs.
        auto in = m.preprocess(cv::Mat(1, 1, CV_8UC3, cv::Scalar(1, 2, 3)));
        QCOMPARE(in.height(), int64_t(64));
        auto out = m.forward({in.tensor});
        QVERIFY(torch::isfinite(out.last().lines).all().item<bool>());
        // A raw 1x1 tensor (no resizing) also runs: 1x1 feature maps.
        auto raw = m.forward({torch::zeros({3, 1, 1})});
        QCOMPARE(raw.stages[0].height, int64_t(1));
        QCOMPARE(raw.stages[1].width, int64_t(1));
        // Very thin image: at least one pixel after resizing.
        auto thin = m.preprocess(cv::Mat(1, 5000, CV_8UC3, cv::Scalar::all(7)));
        QVERIFY(thin.height() >= 1 && thin.width() <= 1333);
        QVERIFY(torch::isfinite(m.forward({thin.tensor}).last().lines).all().item<bool>());

        QString e = errorOf([&] { m.preprocess(cv::Mat(200, 200, CV_8UC3, cv::Scalar::all(0))); });
        QVERIFY2(e.contains("max_input_pixels"), qPrintable(e));
        e = errorOf([&] { m.preprocess(cv::Mat(10, 10, CV_8UC1, cv::Scalar(0))); });
        QVERIFY2(e.contains("CV_8UC3"), qPrintable(e));
        e = errorOf([&] { m.preprocess(cv::Mat(10, 10, CV_16UC3, cv::Scalar::all(0))); });
        QVERIFY2(e.contains("CV_8UC3"), qPrintable(e));
        e = errorOf([&] { m.preprocess(cv::Mat(10, 10, CV_8UC4, cv::Scalar::all(0))); });
        QVERIFY2(e.contains("CV_8UC3"), qPrintable(e));
        e = errorOf([&] { m.preprocess(cv::Mat()); });
        QVERIFY2(e.contains("empty"), qPrintable(e));
        // Absurd tensor sizes are refused before any allocation (expand() allocates nothing).
        e = errorOf([&] { m.forward({torch::zeros({1, 1, 1}).expand({3, 30000, 30000})}); });
        QVERIFY2(e.contains("30000x30000"), qPrintable(e));
        e = errorOf([&] { m.forward({torch::zeros({4, 8, 8})}); });
        QVERIFY2(e.contains("[3, H, W]"), qPrintable(e));
        e = errorOf([&] { m.forward({}); });
        QVERIFY(!e.isEmpty());
    }
};

QTEST_APPLESS_MAIN(TestLetrModel)
#include "test_letr_model.moc"
