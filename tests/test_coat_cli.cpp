// `glimpse infer --model coat` and `glimpse bench coat`, run as a user would (a separate process).
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include "core/io/checkpoint.h"
#include "core/models/coat/model.h"
#include "core/models/coat/trace.h"
#include "core/util/autocast.h"
#include "core/util/threads.h"

using namespace glimpse::coat;

class TestCoatCli : public QObject {
    Q_OBJECT

    struct Result {
        int code = -1;
        QString out, err;
    };
    static Result run(const QStringList& args) {
        QProcess p;
        p.start(GLIMPSE_EXE, args);
        if (!p.waitForFinished(120000)) return {};
        Result r;
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }

    QTemporaryDir dir_;

    static CoatConfig smallConfig() {
        CoatConfig c;
        c.variant = "custom";
        c.embedDims = {16, 16, 24, 32};
        c.serialDepths = {1, 1, 1, 1};
        c.mlpRatios = {2, 2, 2, 2};
        c.numClasses = 6;
        c.imageSize = 64;
        c.resize = 72;
        c.classNames = {"ant", "bee", "cat", "dog", "eel", "fox"};
        return c;
    }

private Q_SLOTS:
    void inferPrintsTopFiveAndWritesTrace() {
        torch::set_num_threads(1);
        CoatModel m(smallConfig(), 4);
        const QString ck = dir_.filePath("small.h5");
        saveCoat(m, ck.toStdString());
        const QString img = dir_.filePath("in.png");
        QImage im(90, 70, QImage::Format_RGB888);
        for (int y = 0; y < 70; ++y)
            for (int x = 0; x < 90; ++x) im.setPixelColor(x, y, QColor((x * 3) % 256, (y * 5) % 256, (x * y) % 256));
        QVERIFY(im.save(img));
        const QString trace = dir_.filePath("t.h5");
        Result r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", trace, "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto t = CoatTrace::load(trace.toStdString());
        const auto top = t.top5();
        QCOMPARE(int(top.size()), 5);
        // The printed lines list the trace's top-5, best first, with names.
        const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 6);
        for (int i = 0; i < 5; ++i)
            QVERIFY2(lines[i + 1].trimmed().endsWith(QString::number(top[size_t(i)].classIndex) + "  " +
                                                     QString::fromStdString(top[size_t(i)].name)),
                     qPrintable(lines[i + 1]));
        // Same probabilities as the model in this process.
        torch::NoGradGuard ng;
        cv::Mat rgb(70, 90, CV_8UC3);
        for (int y = 0; y < 70; ++y)
            for (int x = 0; x < 90; ++x) rgb.at<cv::Vec3b>(y, x) = cv::Vec3b((x * 3) % 256, (y * 5) % 256, (x * y) % 256);
        auto probs = torch::softmax(m.forward(m.preprocess(rgb).tensor.unsqueeze(0)).logits[0], 0);
        QVERIFY((probs - t.probs()).abs().max().item<float>() < 1e-5);
        QCOMPARE(t.raw().meta()["source"].get<std::string>(), img.toStdString());
        QCOMPARE(t.numCams(), 5);
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", dir_.filePath("cams.h5"),
                 "--cam-class", QString::number(std::get<1>(probs.sort(0, true))[5].item<int64_t>())});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(CoatTrace::load(dir_.filePath("cams.h5").toStdString()).numCams(), 6);
        // --precision: float32 by default (named in the trace); auto within the stated bound; a bad
        // value names the flag.
        QCOMPARE(t.compute(), std::string("float32"));
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", dir_.filePath("auto.h5"),
                 "--precision", "auto"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto autoTrace = CoatTrace::load(dir_.filePath("auto.h5").toStdString());
        // auto: bfloat16 where the CPU has it, else the MLPs in int8 where LibTorch has the kernels.
        const auto autoDtype = glimpse::parsePrecision("auto", torch::Device(torch::kCPU), "--precision", true);
        const std::string autoName = glimpse::precisionName(autoDtype);
        QCOMPARE(autoTrace.compute(), autoName);
        QVERIFY((autoTrace.probs() - t.probs()).abs().max().item<float>() < (autoDtype != torch::kFloat ? 0.02f : 1e-6f));
        QVERIFY2(r.err.contains(QString::fromStdString("; " + autoName + ")")), qPrintable(r.err));
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", trace, "--precision", "int4"});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("--precision"), qPrintable(r.err));
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", trace, "--cam-class", "6"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--cam-class") && r.err.contains("0..5"), qPrintable(r.err));

        // --classes renames; a list of the wrong length is refused with its name.
        const QString classes = dir_.filePath("names.txt");
        QFile f(classes);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("a0\na1\na2\na3\na4\na5\n");
        f.close();
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", trace, "--classes", classes});
        QVERIFY2(r.code == 0 && r.out.contains("  a"), qPrintable(r.err + r.out));
        QVERIFY(!r.out.contains("ant") && !r.out.contains("fox"));
        QFile g(dir_.filePath("three.txt"));
        QVERIFY(g.open(QIODevice::WriteOnly));
        g.write("x\ny\nz\n");
        g.close();
        r = run({"infer", "--model", "coat", "--checkpoint", ck, "--image", img, "--out", trace, "--classes",
                 dir_.filePath("three.txt")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("three.txt") && r.err.contains("6 classes"), qPrintable(r.err));

        // A checkpoint of another family; usage errors.
        torch::nn::Linear lin(3, 2);
        const QString other = dir_.filePath("other.h5");
        glimpse::saveCheckpoint(other.toStdString(), glimpse::checkpointFromModule(*lin, "letr", "{}"));
        r = run({"infer", "--model", "coat", "--checkpoint", other, "--image", img, "--out", trace});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("other.h5") && r.err.contains("'letr'"), qPrintable(r.err));
        r = run({"infer", "--model", "coat", "--random-seed", "1", "--variant", "coat_huge", "--image", img, "--out", trace});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("coat_huge"), qPrintable(r.err));
        r = run({"infer", "--model", "coat", "--image", img, "--out", trace});
        QCOMPARE(r.code, 2);
    }

    void benchReportsFigures() {
        const QString cfg = dir_.filePath("bench.json");
        QFile c(cfg);
        QVERIFY(c.open(QIODevice::WriteOnly));
        c.write(R"({"variant": "custom", "embed_dims": [16, 16, 24, 32], "serial_depths": [1, 1, 1, 1],
                   "mlp_ratios": [2, 2, 2, 2], "num_classes": 10, "image_size": 64})");
        c.close();
        Result r = run({"bench", "coat", "--config", cfg, "--runs", "1", "--warmup", "0", "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("images/s") && r.out.contains("effective attention") && r.out.contains("16x16 tokens"),
                 qPrintable(r.out));
        r = run({"bench", "coat", "--batch", "0"});
        QCOMPARE(r.code, 1);
    }
};

QTEST_APPLESS_MAIN(TestCoatCli)
#include "test_coat_cli.moc"
