// LETR checkpoints: round trip, refused files (family, shapes, missing/unexpected tensors,
// truncation), and the Python converter against torchvision / an independent torch.nn LETR
// (skipped when Debian's /usr/bin/python3 has no torch).
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
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

// Debian's python3 (python3-torch); GLIMPSE_PYTHON overrides it.
QString pythonExe() {
    const QByteArray env = qgetenv("GLIMPSE_PYTHON");
    return env.isEmpty() ? QString("/usr/bin/python3") : QString::fromLocal8Bit(env);
}

LetrConfig smallConfig() {
    LetrConfig c;
    c.backbone = "resnet18";
    c.hiddenDim = 32;
    c.nheads = 4;
    c.dimFeedforward = 64;
    c.coarseEncLayers = 1;
    c.coarseDecLayers = 1;
    c.fineEncLayers = 1;
    c.fineDecLayers = 2;
    c.numQueries = 10;
    c.shortSide = 64;
    return c;
}



struct Proc {
    int code = -1;
    QString out, err;
};

Proc runPython(const QStringList& args) {
    Proc r;
    const QString python = pythonExe();
    if (!QFile::exists(python)) {
        r.code = -2;
        r.err = python + " does not exist";
        return r;
    }
    QProcess p;
    p.start(python, args);
    if (!p.waitForStarted(10000)) {
        r.code = -2;
        r.err = "cannot start " + python;
        return r;
    }
    if (!p.waitForFinished(120000)) {
        p.kill();
        p.waitForFinished();
        r.err = "timed out";
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

// The installer scripts exit with status 3 when Debian's python3 lacks torch/torchvision/h5py.
constexpr int kNoTorch = 3;
#define RUN_PYTHON_OR_SKIP(result, args)                                                            \
    result = runPython(args);                                                                       \
    if (result.code == kNoTorch || result.code == -2)                                               \
        QSKIP(qPrintable("no PyTorch reference (" + result.err.trimmed() + ")"));

QString script(const char* name) { return QString(GLIMPSE_SOURCE_DIR) + "/installer/" + name; }

} // namespace

class TestLetrCheckpoint : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);   // one thread: fast and steady on busy machines
        QVERIFY(dir_.isValid());
    }

    void roundTrip() {
        torch::NoGradGuard ng;
        LetrModel m(smallConfig(), 17);
        m.eval();
        const std::string p = path("letr.h5");
        saveLetr(m, p);
        auto back = loadLetr(p);
        QCOMPARE(back->config().toJson(), m.config().toJson());
        QVERIFY(!back->is_training());
        auto a = m.named_parameters(true);
        for (const auto& item : back->named_parameters(true))
            QVERIFY2(torch::equal(item.value(), a[item.key()]), item.key().c_str());
        auto ab = m.named_buffers(true);
        for (const auto& item : back->named_buffers(true))
            QVERIFY2(torch::equal(item.value(), ab[item.key()]), item.key().c_str());
        cv::Mat img(70, 90, CV_8UC3);
        cv::RNG(3).fill(img, cv::RNG::UNIFORM, 0, 256);
        auto x = m.preprocess(img).tensor;
        QVERIFY(torch::equal(m.forward({x}).last().lines, back->forward({x}).last().lines));
        // A differently seeded model differs (the load really replaced the weights).
        LetrModel other(smallConfig(), 18);
        QVERIFY(!torch::equal(other.named_parameters()["letr.query_embed.weight"],
                              back->named_parameters()["letr.query_embed.weight"]));
    }

    void refusedCheckpoints() {
        LetrModel m(smallConfig(), 1);
        const std::string cfg = m.config().toJsonString();
        Checkpoint good = checkpointFromModule(m, "letr", cfg);

        // Wrong family.
        Checkpoint coat = good;
        coat.family = "coat";
        saveCheckpoint(path("coat.h5"), coat);
        QString e = errorOf([&] { loadLetr(path("coat.h5")); });
        QVERIFY2(e.contains("coat.h5") && e.contains("'coat'") && e.contains("letr"), qPrintable(e));

        // Wrong shape, missing and unexpected tensors: all reported, by name.
        Checkpoint bad = good;
        bad.tensors["letr.query_embed.weight"] = torch::zeros({11, 32});
        bad.tensors.erase("transformer.decoder.norm.bias");
        bad.tensors["letr.extra.weight"] = torch::zeros({3});
        saveCheckpoint(path("bad.h5"), bad);
        e = errorOf([&] { loadLetr(path("bad.h5")); });
        QVERIFY2(e.contains("bad.h5"), qPrintable(e));
        QVERIFY2(e.contains("letr.query_embed.weight") && e.contains("wrong shape"), qPrintable(e));
        QVERIFY2(e.contains("transformer.decoder.norm.bias") && e.contains("missing"), qPrintable(e));
        QVERIFY2(e.contains("letr.extra.weight") && e.contains("unexpected"), qPrintable(e));

        // A config that does not describe these tensors (more layers than stored).
        Checkpoint deeper = good;
        LetrConfig c2 = smallConfig();
        c2.fineDecLayers = 3;
        deeper.configJson = c2.toJsonString();
        saveCheckpoint(path("deeper.h5"), deeper);
        e = errorOf([&] { loadLetr(path("deeper.h5")); });
        QVERIFY2(e.contains("transformer.decoder.layers.2.") && e.contains("missing"), qPrintable(e));

        // Invalid config JSON inside the checkpoint.
        Checkpoint badCfg = good;
        badCfg.configJson = R"({"backbone": "resnet18", "hidden_dim": 30, "nheads": 4})";
        saveCheckpoint(path("badcfg.h5"), badCfg);
        e = errorOf([&] { loadLetr(path("badcfg.h5")); });
        QVERIFY2(e.contains("badcfg.h5") && e.contains("divisible"), qPrintable(e));

        // Truncated and missing files.
        saveLetr(m, path("full.h5"));
        QFile full(QString::fromStdString(path("full.h5")));
        QVERIFY(full.open(QIODevice::ReadOnly));
        const QByteArray bytes = full.readAll();
        QFile cut(QString::fromStdString(path("cut.h5")));
        QVERIFY(cut.open(QIODevice::WriteOnly));
        cut.write(bytes.left(bytes.size() / 2));
        cut.close();
        e = errorOf([&] { loadLetr(path("cut.h5")); });
        QVERIFY2(e.contains("cut.h5"), qPrintable(e));
        e = errorOf([&] { loadLetr(path("nope.h5")); });
        QVERIFY2(e.contains("nope.h5"), qPrintable(e));

        // A backbone checkpoint of the wrong family / arch.
        e = errorOf([&] { loadResNet(path("full.h5")); });
        QVERIFY2(e.contains("full.h5") && e.contains("resnet"), qPrintable(e));
        Checkpoint r50;
        r50.family = "resnet";
        r50.configJson = R"({"arch": "resnet50"})";
        saveCheckpoint(path("r50_empty.h5"), r50);
        e = errorOf([&] { loadLetrBackbone(m, path("r50_empty.h5")); });
        QVERIFY2(e.contains("resnet50") && e.contains("resnet18"), qPrintable(e));
    }

    // torchvision ResNet-50 (random weights, randomised BN statistics) vs Glimpse's backbone.
    void resnet50MatchesTorchvision() {
        const QString ck = dir_.filePath("r50.h5"), feats = dir_.filePath("r50_features.h5");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("convert_letr.py"), "--resnet-random", "resnet50", "--seed", "3",
                                           "--out", ck, "--features-out", feats, "--input-size", "64x96"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        torch::NoGradGuard ng;
        ResNetBody body = loadResNet(ck.toStdString());
        Trace ref = Trace::load(feats.toStdString());
        auto x = ref.get("input", {1, 3, 64, 96});
        auto out = body->forward(x, 5);
        double worst = 0;
        for (int level = 2; level <= 5; ++level) {
            const auto& expect = ref.get("c" + std::to_string(level));
            QCOMPARE(out[size_t(level - 2)].sizes().vec(), expect.sizes().vec());
            worst = std::max(worst, maxDiff(out[size_t(level - 2)], expect));
        }
        qInfo("ResNet-50 C2..C5 vs torchvision: max abs difference %.3g (C5 magnitude %.3g)", worst,
              ref.get("c5").abs().max().item<double>());
        QVERIFY2(worst <= 1e-4, qPrintable(QString::number(worst)));

        // The same weights inside a LETR model give the same C4/C5.
        LetrConfig c = smallConfig();
        c.backbone = "resnet50";
        LetrModel m(c, 0);
        loadLetrBackbone(m, ck.toStdString());
        auto f = m.body()->forward(x, 5);
        QVERIFY(maxDiff(f[2], ref.get("c4")) <= 1e-4);
        QVERIFY(maxDiff(f[3], ref.get("c5")) <= 1e-4);
    }

    // Official-layout checkpoints from an independent torch.nn LETR (installer/letr_reference.py):
    // stage 2 (old bbox_embed names, duplicated backbone, args Namespace, optimizer) and
    // stage 1 convert, load, and every decoder layer's predictions match; files with
    // missing/unknown/misshapen tensors or unequal backbone copies are refused by name.
    void officialCheckpointsConvert() {
        const QString fx = dir_.filePath("official");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("letr_reference.py"), "--out-dir", fx, "--seed", "4"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        // One converter run over several files: the good ones convert, each bad one is reported.
        r = runPython({script("convert_letr.py"), in("stage2.pth"), in("stage1.pth"), in("broken.pth"), in("twins.pth"),
                       in("none.pth"), "--out", in("converted")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.out.contains("stage2.pth") && r.out.contains("bbox_embed") && r.out.contains("duplicated"),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains("stage1.pth"), qPrintable(r.out));
        QVERIFY2(r.err.contains("broken.pth"), qPrintable(r.err));
        QVERIFY2(r.err.contains("missing transformer.decoder.norm.bias"), qPrintable(r.err));
        QVERIFY2(r.err.contains("unknown letr.extra.weight"), qPrintable(r.err));
        QVERIFY2(r.err.contains("wrong shape class_embed.weight"), qPrintable(r.err));
        QVERIFY(!QFile::exists(in("converted/broken.h5")));
        QVERIFY2(r.err.contains("letr.backbone.0.body.conv1.weight") && r.err.contains("differs"), qPrintable(r.err));
        QVERIFY(!QFile::exists(in("converted/twins.h5")));
        QVERIFY2(r.err.contains("none.pth: no such file"), qPrintable(r.err));

        for (bool coarseOnly : {false, true}) {
            const QString tag = coarseOnly ? "stage1" : "stage2";
            torch::NoGradGuard ng;
            auto model = loadLetr(in("converted/" + tag + ".h5").toStdString());
            QCOMPARE(model->config().backbone, std::string("resnet18"));
            QCOMPARE(model->config().numQueries, int64_t(12));
            QCOMPARE(model->config().nheads, int64_t(4));
            QCOMPARE(model->config().fineStage, !coarseOnly);
            Trace expect = Trace::load(in(tag + "_ref.h5").toStdString());
            auto o = model->forward({expect.get("input", {3, 96, 128})});
            double worst = 0;
            for (size_t s = 0; s < o.stages.size(); ++s) {
                const std::string sn = s == 0 ? "coarse" : "fine";
                worst = std::max(worst, maxDiff(o.stages[s].logits.select(1, 0), expect.get(sn + "_logits")));
                worst = std::max(worst, maxDiff(o.stages[s].lines.select(1, 0), expect.get(sn + "_lines")));
            }
            QVERIFY(expect.has("fine_logits") == !coarseOnly);
            qInfo("%s reference LETR vs Glimpse: max abs difference %.3g", qPrintable(tag), worst);
            QVERIFY2(worst <= 1e-4, qPrintable(QString::number(worst)));
        }
    }
};

QTEST_APPLESS_MAIN(TestLetrCheckpoint)
#include "test_letr_checkpoint.moc"
