// CoaT checkpoints: refused files (family, shapes, missing/unexpected tensors, truncation, bad
// config), the ImageNet-1k class list, and the Python converter against an independent torch.nn
// CoaT laid out like timm's state dicts (skipped when Debian's /usr/bin/python3 has no torch).
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/coat/model.h"
#include "core/trace.h"
#include "tests/python_reference.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::coat;
using testing::maxDiff;

namespace {

template <typename F>
QString errorOf(F&& f) { return testing::qErrorOf(std::forward<F>(f)); }

using testing::Proc;
using testing::runPython;
QString script(const char* name) { return testing::installerScript(name); }

CoatConfig smallConfig() {
    CoatConfig c;
    c.variant = "custom";
    c.embedDims = {16, 16, 24, 32};
    c.serialDepths = {1, 1, 1, 1};
    c.mlpRatios = {2, 2, 2, 2};
    c.numClasses = 4;
    c.imageSize = 64;
    c.resize = 64;
    return c;
}

} // namespace

class TestCoatCheckpoint : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        QVERIFY(dir_.isValid());
    }

    void refusedCheckpoints() {
        CoatModel m(smallConfig(), 1);
        Checkpoint good = checkpointFromModule(m, "coat", m.config().toJsonString());
        Checkpoint letr = good;
        letr.family = "letr";
        saveCheckpoint(path("letr.h5"), letr);
        QString e = errorOf([&] { loadCoat(path("letr.h5")); });
        QVERIFY2(e.contains("letr.h5") && e.contains("'letr'") && e.contains("coat"), qPrintable(e));

        Checkpoint bad = good;
        bad.tensors["head.weight"] = torch::zeros({5, 32});
        bad.tensors.erase("crpe2.conv_list.1.bias");
        bad.tensors["serial_blocks1.0.cpe.proj.weight"] = torch::zeros({16, 1, 3, 3});
        saveCheckpoint(path("bad.h5"), bad);
        e = errorOf([&] { loadCoat(path("bad.h5")); });
        QVERIFY2(e.contains("bad.h5") && e.contains("head.weight") && e.contains("crpe2.conv_list.1.bias") &&
                     e.contains("serial_blocks1.0.cpe.proj.weight"),
                 qPrintable(e));

        // The ablation flags change the tensor set: a CPE-less config does not load CPE weights.
        Checkpoint noCpe = good;
        CoatConfig c2 = smallConfig();
        c2.useCpe = false;
        noCpe.configJson = c2.toJsonString();
        saveCheckpoint(path("nocpe.h5"), noCpe);
        e = errorOf([&] { loadCoat(path("nocpe.h5")); });
        QVERIFY2(e.contains("cpe1.proj.weight") && e.contains("unexpected"), qPrintable(e));

        Checkpoint badCfg = good;
        badCfg.configJson = R"({"embed_dims": [16, 16, 24, 30]})";
        saveCheckpoint(path("badcfg.h5"), badCfg);
        e = errorOf([&] { loadCoat(path("badcfg.h5")); });
        QVERIFY2(e.contains("badcfg.h5") && e.contains("divisible"), qPrintable(e));

        saveCoat(m, path("full.h5"));
        QFile full(QString::fromStdString(path("full.h5")));
        QVERIFY(full.open(QIODevice::ReadOnly));
        const QByteArray bytes = full.readAll();
        QFile cut(QString::fromStdString(path("cut.h5")));
        QVERIFY(cut.open(QIODevice::WriteOnly));
        cut.write(bytes.left(bytes.size() / 2));
        cut.close();
        e = errorOf([&] { loadCoat(path("cut.h5")); });
        QVERIFY2(e.contains("cut.h5"), qPrintable(e));
    }

    // resources/imagenet_classes.txt (from Debian's opencv-doc): 1000 names in ILSVRC2012 order.
    void imagenetClassNames() {
        const std::string p = std::string(GLIMPSE_SOURCE_DIR) + "/resources/imagenet_classes.txt";
        auto names = loadClassNames(p);
        QCOMPARE(int(names.size()), 1000);
        QCOMPARE(names[0], std::string("tench, Tinca tinca"));
        QCOMPARE(names[999], std::string("toilet tissue, toilet paper, bathroom tissue"));
        QFile f(QString::fromStdString(path("gap.txt")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("a\n\nb\n");
        f.close();
        const QString e = errorOf([&] { loadClassNames(path("gap.txt")); });
        QVERIFY2(e.contains("gap.txt") && e.contains("line 2"), qPrintable(e));
        QVERIFY(errorOf([&] { loadClassNames(path("none.txt")); }).contains("none.txt"));
    }

    // timm-layout state dicts from installer/coat_reference.py convert, load, and give the same
    // logits as the Python model (CoaT-Lite layout and CoaT with parallel groups); files with
    // missing/unknown/misshapen tensors or unequal shared copies are refused by name.
    void referenceCheckpointsConvert() {
        const QString fx = dir_.filePath("ref");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("coat_reference.py"), "--out-dir", fx, "--seed", "4"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        r = runPython({script("convert_coat.py"), in("lite.pth"), in("coat.pth"), in("broken.pth"), in("twins.pth"),
                       "--out", in("conv"), "--image-size", "64"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.out.contains("lite.pth") && r.out.contains("repeated copies"), qPrintable(r.out));
        QVERIFY2(r.err.contains("broken.pth") && r.err.contains("missing head.bias") &&
                     r.err.contains("unknown extra.weight") && r.err.contains("wrong shape norm4.weight"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains("twins.pth") && r.err.contains("differs from cpe2.proj.weight"), qPrintable(r.err));
        QVERIFY(!QFile::exists(in("conv/broken.h5")));
        for (const char* name : {"lite", "coat"}) {
            torch::NoGradGuard ng;
            auto model = loadCoat(in(QString("conv/") + name + ".h5").toStdString());
            QCOMPARE(model->config().parallelDepth, int64_t(std::string(name) == "coat" ? 2 : 0));
            QCOMPARE(model->config().numClasses, int64_t(11));
            Trace ref = Trace::load(in(QString(name) + "_ref.h5").toStdString());
            auto logits = model->forward(ref.get("input", {1, 3, 64, 96})).logits;
            const double d = maxDiff(logits, ref.get("logits", {1, 11}));
            qInfo("%s: reference CoaT vs Glimpse, max abs logit difference %.3g (logit scale %.3g)", name, d,
                  ref.get("logits").abs().max().item<double>());
            QVERIFY2(d <= 1e-4, qPrintable(QString::number(d)));
        }
    }

    // The official CoaT code creates final norms norm1-norm4 for every variant; the classifier
    // reads norm4 (CoaT-Lite) or norm2-norm4 (CoaT). Official files with the unused ones
    // (norm1-3 / norm1) convert, the dropped names are reported, and the logits are unchanged;
    // any other unknown tensor, or an unused norm of the wrong shape, is still refused.
    void officialUnusedFinalNormsDropped() {
        const QString fx = dir_.filePath("official");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("coat_reference.py"), "--out-dir", fx, "--seed", "5"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // Official-style files made from the reference state dicts (random norm values: they
        // must not matter).
        const QString make = R"(
import sys, torch
d = sys.argv[1]
lite = torch.load(d + "/lite.pth")
coat = torch.load(d + "/coat.pth")["model"]
g = torch.Generator().manual_seed(1)
def with_norms(sd, scales):
    out = dict(sd)
    for n in scales:
        c = sd["patch_embed%d.proj.weight" % n].shape[0]
        out["norm%d.weight" % n] = 1 + torch.randn(c, generator=g)
        out["norm%d.bias" % n] = torch.randn(c, generator=g)
    return out
torch.save({"model": with_norms(lite, (1, 2, 3)), "epoch": 300}, d + "/lite_official.pth")
torch.save({"model": with_norms(coat, (1,))}, d + "/coat_official.pth")
sd = with_norms(lite, (1, 2, 3))
sd["norm5.weight"] = torch.ones(32)
torch.save(sd, d + "/stray.pth")
sd = with_norms(lite, (1,))
sd["norm1.bias"] = torch.zeros(7)
torch.save(sd, d + "/badnorm.pth")
)";
        r = runPython({"-c", make, fx});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        r = runPython({script("convert_coat.py"), in("lite_official.pth"), in("coat_official.pth"), in("stray.pth"),
                       in("badnorm.pth"), "--out", in("conv"), "--image-size", "64"});
        QCOMPARE(r.code, 1);
        const QStringList lines = r.out.split('\n');
        auto reportOf = [&](const QString& file) {
            for (const auto& l : lines)
                if (l.startsWith(in(file))) return l;
            return QString();
        };
        const QString lite = reportOf("lite_official.pth"), coat = reportOf("coat_official.pth");
        QVERIFY2(lite.contains("unused final norms dropped") &&
                     lite.contains("norm1.bias, norm1.weight, norm2.bias, norm2.weight, norm3.bias, norm3.weight"),
                 qPrintable(r.out));
        QVERIFY2(coat.contains("unused final norms dropped") && coat.contains("norm1.bias, norm1.weight") &&
                     !coat.contains("norm2.weight"),
                 qPrintable(r.out));
        QVERIFY2(r.err.contains("stray.pth") && r.err.contains("unknown norm5.weight") &&
                     !r.err.contains("unknown norm1"),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains("badnorm.pth") && r.err.contains("wrong shape norm1.bias"), qPrintable(r.err));
        QVERIFY(!QFile::exists(in("conv/stray.h5")) && !QFile::exists(in("conv/badnorm.h5")));
        for (const char* name : {"lite", "coat"}) {
            const std::string h5 = in(QString("conv/") + name + "_official.h5").toStdString();
            Checkpoint ck = loadCheckpoint(h5);
            QVERIFY(!ck.tensors.count("norm1.weight") && !ck.tensors.count("norm1.bias"));
            QCOMPARE(int(ck.tensors.count("norm2.weight")), std::string(name) == "coat" ? 1 : 0);
            torch::NoGradGuard ng;
            auto model = loadCoat(h5);
            Trace ref = Trace::load(in(QString(name) + "_ref.h5").toStdString());
            const double d = maxDiff(model->forward(ref.get("input", {1, 3, 64, 96})).logits, ref.get("logits", {1, 11}));
            QVERIFY2(d <= 1e-4, qPrintable(QString(name) + ": " + QString::number(d)));
        }
    }
};

QTEST_APPLESS_MAIN(TestCoatCheckpoint)
#include "test_coat_checkpoint.moc"
