// ConstellationNet checkpoints from the official code: installer/convert_constellation.py on
// state dicts written by installer/constellation_reference.py (an independent torch.nn model
// with the official layout and names; skipped when Debian's /usr/bin/python3 has no torch), the
// converter's refusals, the official names and widths in Glimpse's ResNet-12, and checkpoints
// with the names Glimpse used before (convN.*, convN.bn.*) still loading.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <regex>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/constellation/model.h"
#include "core/trace.h"
#include "tests/python_reference.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::constellation;
using testing::contains;
using testing::errorOf;
using testing::maxDiff;

namespace {

using testing::Proc;
using testing::runPython;
QString script(const char* name) { return testing::installerScript(name); }

ConstellationConfig smallResNet(bool multi) {
    ConstellationConfig c;
    c.backbone = "resnet12";
    c.multiBranch = multi;
    c.channels = {8, 8, 12, 10};
    c.clusters = 16;
    c.heads = 4;
    c.numClasses = 5;
    return c;
}

} // namespace

class TestConstellationConvert : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Official state dicts (Conv-4 and ResNet-12 Y-branch, the latter with side-out classifiers)
    // convert; the converted models compute the reference's similarity map, features and logits;
    // the side-out classifiers are named as dropped; bad files are refused by name.
    void officialLayoutConverts() {
        QTemporaryDir dir;
        const QString fx = dir.filePath("ref");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("constellation_reference.py"), "--out-dir", fx, "--seed", "3"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        r = runPython({script("convert_constellation.py"), in("conv4.pth"), in("res12.pth"), in("broken.pth"),
                       in("branchy.pth"), "--out", in("conv"), "--image-size", "32"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.out.contains("conv4.pth") && r.out.contains("res12.pth") &&
                     r.out.contains("3 side-out classifiers dropped") &&
                     r.out.contains("sideout_classifiers.2.linear.weight"),
                 qPrintable(r.out));
        QVERIFY2(r.err.contains("broken.pth") && r.err.contains("unknown encoder.branch1.0.extra.weight") &&
                     r.err.contains("missing encoder.stem.0.bn1.running_var") &&
                     r.err.contains("wrong shape classifier.linear.bias"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains("branchy.pth") && r.err.contains("branch2 has constellation modules"), qPrintable(r.err));
        QVERIFY(!QFile::exists(in("conv/broken.h5")) && !QFile::exists(in("conv/branchy.h5")));
        for (const char* name : {"conv4", "res12"}) {
            torch::NoGradGuard ng;
            auto model = loadConstellation(in(QString("conv/") + name + ".h5").toStdString());
            const auto& cfg = model->config();
            QVERIFY(cfg.multiBranch);
            QCOMPARE(cfg.clusters, int64_t(16));
            QCOMPARE(cfg.heads, int64_t(4));
            QCOMPARE(cfg.numClasses, int64_t(7));
            QCOMPARE(cfg.backbone, std::string(std::string(name) == "res12" ? "resnet12" : "conv4"));
            QCOMPARE(cfg.resolvedClusterLayers(),
                     (std::string(name) == "res12" ? std::vector<int64_t>{1, 7, 8, 9} : std::vector<int64_t>{1, 2, 3, 4}));
            Trace ref = Trace::load(in(QString(name) + "_ref.h5").toStdString());
            auto x = ref.get("input", {3, 3, 32, 32});
            auto out = model->forward(x, {true, -1});
            const double dl = maxDiff(out.logits, ref.get("logits"));
            const double d1 = maxDiff(out.pooled[0], ref.get("pooled1"));
            const double d2 = maxDiff(out.pooled[1], ref.get("pooled2"));
            const double dm = maxDiff(out.maps[0], ref.get("map1"));
            const double ds = maxDiff(out.records[0].similarity, ref.get("sim0"));
            qInfo("%s: reference vs Glimpse max abs difference: logits %.3g, pooled1 %.3g, pooled2 %.3g, map1 %.3g, "
                  "sim0 %.3g",
                  name, dl, d1, d2, dm, ds);
            QVERIFY(dl < 1e-4 && d1 < 1e-4 && d2 < 1e-4 && dm < 1e-4 && ds < 1e-5);
            // The counts came through in float64 and unchanged (not the initial 1.0).
            auto c = model->clustering(model->constellationModules()[0].name)->V_count_buffer;
            QCOMPARE(c.scalar_type(), torch::kFloat64);
            QVERIFY(c.min().item<double>() > 1.0);
        }
    }

    // Glimpse's ResNet-12 has the official names: mergeblockN (conv, feat_cluster, transformer,
    // merge) and bnN per block, downsample.{0,1}; record/module names follow them.
    void resnet12HasOfficialNames() {
        ConstellationModel m(smallResNet(true));
        auto p = m.named_parameters(true);
        for (const char* n : {"encoder.stem.0.mergeblock1.conv.weight", "encoder.stem.0.mergeblock1.merge.weight",
                              "encoder.stem.0.bn1.weight", "encoder.stem.1.bn3.bias",
                              "encoder.branch1.0.mergeblock2.transformer.layers.0.mhatt.linear_q.weight",
                              "encoder.branch2.1.mergeblock3.conv.weight", "encoder.branch2.1.downsample.1.weight"})
            QVERIFY2(p.contains(n), n);
        for (const auto& item : p) QVERIFY2(item.key().find(".conv1.") == std::string::npos, item.key().c_str());
        QVERIFY(m.named_buffers(true).contains("encoder.stem.0.bn1.num_batches_tracked"));
        QVERIFY(m.named_buffers(true).contains("encoder.stem.0.mergeblock1.feat_cluster.V_buffer"));
        const auto mods = m.constellationModules();
        QCOMPARE(mods.size(), size_t(4));
        QCOMPARE(mods[0].name, std::string("stem.0.mergeblock1"));
        QCOMPARE(mods[3].name, std::string("branch1.0.mergeblock3"));
        QVERIFY(m.clustering("branch1.0.mergeblock2"));
        // The BN of each merge block is initialized as a BN (weight 1, bias 0).
        QVERIFY(torch::equal(p["encoder.stem.0.bn2.weight"], torch::ones({8})));
        // The official widths are the defaults.
        ConstellationConfig r;
        r.backbone = "resnet12";
        QCOMPARE(r.blockChannels(), (std::vector<int64_t>{64, 128, 256, 290}));
        ConstellationConfig y;
        y.multiBranch = true;
        QCOMPARE(y.blockChannels(), (std::vector<int64_t>{64, 64, 42, 42}));
    }

    // A checkpoint written with the earlier names (encoder.<s>.<i>.convN.*, convN.bn.*) loads,
    // and computes what the model that wrote it computes.
    void oldResNet12NamesStillLoad() {
        QTemporaryDir dir;
        ConstellationModel m(smallResNet(false), 5);
        m.train();
        m.forward(torch::randn({2, 3, 32, 32}));   // moves centers and BN statistics
        m.eval();
        Checkpoint ck = checkpointFromModule(m, "constellation", m.config().toJsonString());
        std::map<std::string, torch::Tensor> old;
        const std::regex mb(R"(^(encoder\.\w+\.\d+\.)mergeblock([123])\.(.*)$)"), bn(R"(^(encoder\.\w+\.\d+\.)bn([123])\.(.*)$)");
        int renamed = 0;
        for (const auto& [name, t] : ck.tensors) {
            std::smatch s;
            std::string to = name;
            if (std::regex_match(name, s, mb)) to = s[1].str() + "conv" + s[2].str() + "." + s[3].str();
            else if (std::regex_match(name, s, bn)) to = s[1].str() + "conv" + s[2].str() + ".bn." + s[3].str();
            renamed += to != name;
            old[to] = t;
        }
        QVERIFY(renamed > 20);
        QVERIFY(old.count("encoder.branch1.0.conv1.bn.running_mean") && old.count("encoder.branch1.0.conv1.conv.weight"));
        ck.tensors = old;
        const std::string path = dir.filePath("old.h5").toStdString();
        saveCheckpoint(path, ck);
        auto back = loadConstellation(path);
        torch::NoGradGuard ng;
        auto x = torch::randn({2, 3, 32, 32});
        QVERIFY(maxDiff(m.forward(x).logits, back->forward(x).logits) < 1e-6);
        int n = 0;
        auto mapped = officialTensorNames(m.config(), old, &n);
        QCOMPARE(n, renamed);
        QCOMPARE(mapped.size(), ck.tensors.size());
        // Conv-4 names are left alone; an unknown old-style name is still refused, by name.
        ConstellationConfig c4;
        QVERIFY(officialTensorNames(c4, {{"encoder.branch1.0.conv1.weight", torch::zeros({1})}}).count(
            "encoder.branch1.0.conv1.weight"));
        old["encoder.branch1.0.conv4.weight"] = torch::zeros({1});
        ck.tensors = old;
        saveCheckpoint(path, ck);
        const std::string e = errorOf([&] { loadConstellation(path); });
        QVERIFY2(contains(e, {"old.h5", "unexpected encoder.branch1.0.conv4.weight"}), e.c_str());
    }
};

QTEST_GUILESS_MAIN(TestConstellationConvert)
#include "test_constellation_convert.moc"
