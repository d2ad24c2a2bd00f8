// `glimpse infer --model constellation` and `glimpse bench constellation`, run as a user would
// (a separate process): traces, the JSON's top-5 and cluster histograms against the model run
// here, the PNG's cluster-map pixels, folders with a bad file, clear errors; the benchmark's JSON.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/io/image.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::constellation;

namespace {

struct Result {
    int code = -1;
    QString out, err;
};

Result run(const QStringList& args) {
    QProcess p;
    p.start(GLIMPSE_EXE, args);
    if (!p.waitForFinished(240000)) return {};
    Result r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

nlohmann::json readJson(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return nlohmann::json::parse(f.readAll().toStdString());
}

ConstellationConfig smallConfig(bool constellation = true) {
    ConstellationConfig c;
    c.constellation = constellation;
    c.channels = {8, 8, 8, 8};
    c.clusters = 16;
    c.heads = 4;
    c.numClasses = 6;
    c.imageSize = 32;
    c.classNames = {"ant", "bee", "cat", "dog", "eel", "fox"};
    return c;
}

} // namespace

class TestConstellationCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    // One image: the trace is what the model computes here; the JSON has the top-5 and, per
    // module, the histogram of its cells' best clusters; the PNG shows module 2's map.
    void inferOneImage() {
        ConstellationModel m(smallConfig(), 3);
        m.train();
        m.forward(torch::randn({4, 3, 32, 32}));   // centers moved: a trained-like state
        m.eval();
        const QString ck = dir_.filePath("small.h5");
        saveConstellation(m, ck.toStdString());
        const cv::Mat img = testing::randomImage(48, 64, 11);   // 64 wide, 48 high
        const QString imgPath = dir_.filePath("in.png");
        saveImagePNG(imgPath.toStdString(), img);
        const QString trace = dir_.filePath("t.h5"), json = dir_.filePath("t.json"), png = dir_.filePath("t.png");
        Result r = run({"infer", "--model", "constellation", "--checkpoint", ck, "--image", imgPath, "--out", trace,
                        "--json", json, "--png", png, "--module", "branch1.2", "--opacity", "0.5", "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err + r.out));

        auto expect = ConstellationTrace::capture(m, loadImageRGB(imgPath.toStdString()));
        auto t = ConstellationTrace::load(trace.toStdString());
        QCOMPARE(t.numModules(), 4);
        for (int k = 0; k < 4; ++k) QVERIFY(testing::maxDiff(t.similarity(k), expect.similarity(k)) < 1e-5);
        QCOMPARE(t.raw().meta().at("source").get<std::string>(), imgPath.toStdString());

        const auto j = readJson(json);
        QCOMPARE(j.at("top5").size(), size_t(5));
        const auto top = expect.top5();
        for (size_t i = 0; i < 5; ++i) {
            QCOMPARE(j["top5"][i]["class"].get<int64_t>(), top[i].classIndex);
            QCOMPARE(j["top5"][i]["name"].get<std::string>(), top[i].name);
            QVERIFY(std::abs(j["top5"][i]["prob"].get<double>() - top[i].prob) < 1e-5);
            QVERIFY2(r.out.contains(QString::fromStdString(top[i].name)), qPrintable(r.out));
        }
        QCOMPARE(j.at("modules").size(), size_t(4));
        for (int k = 0; k < 4; ++k) {
            const auto& mj = j["modules"][size_t(k)];
            QCOMPARE(mj["name"].get<std::string>(), expect.module(k).name);
            const auto h = mj["histogram"].get<std::vector<int64_t>>();
            QCOMPARE(h.size(), size_t(16));
            // Count the best clusters directly.
            auto a = expect.assignment(k);
            for (int64_t c = 0; c < 16; ++c) QCOMPARE(h[size_t(c)], a.eq(c).sum().item<int64_t>());
            QCOMPARE(mj["grid"][0].get<int64_t>(), expect.module(k).h);
        }

        // PNG: the image's own size upscaled to 256 on the long side (64x48 -> 256x192); each
        // pixel blends the image (nearest-upscaled) with its cell's cluster colour at 0.5.
        const cv::Mat p = loadImageRGB(png.toStdString());
        QCOMPARE(p.cols, 256);
        QCOMPARE(p.rows, 192);
        const auto a2 = expect.assignment(2);   // branch1.2: 8x8 cells
        QCOMPARE(a2.size(0), int64_t(8));
        for (auto [x, y] : {std::pair{5, 5}, std::pair{130, 100}, std::pair{250, 190}}) {
            const int64_t cy = int64_t(y) * 8 / 192, cx = int64_t(x) * 8 / 256;
            const cv::Vec3b c = clusterColour(a2[cy][cx].item<int64_t>());
            const cv::Vec3b src = img.at<cv::Vec3b>(y * 48 / 192, x * 64 / 256);
            const cv::Vec3b got = p.at<cv::Vec3b>(y, x);
            for (int ch = 0; ch < 3; ++ch)
                QVERIFY2(std::abs(int(got[ch]) - (int(src[ch]) + int(c[ch])) / 2) <= 1,
                         qPrintable(QString("pixel (%1, %2) channel %3: %4").arg(x).arg(y).arg(ch).arg(int(got[ch]))));
        }
    }

    // A folder with two images and a broken one: two traces and JSONs, exit status 1, the bad
    // file named; a .txt list works the same way; a random-seed model runs without a checkpoint.
    void inferFolderAndList() {
        QDir(dir_.path()).mkpath("imgs");
        const QString in = dir_.filePath("imgs");
        saveImagePNG((in + "/a.png").toStdString(), testing::randomImage(40, 40, 1));
        saveImagePNG((in + "/b.png").toStdString(), testing::randomImage(20, 70, 2));
        {
            QFile bad(in + "/broken.png");
            QVERIFY(bad.open(QIODevice::WriteOnly));
            bad.write("not a png");
        }
        const QString out = dir_.filePath("out"), js = dir_.filePath("js");
        Result r = run({"infer", "--model", "constellation", "--random-seed", "2", "--image", in, "--out", out, "--json",
                        js, "--threads", "1"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.out.contains("broken.png") && r.out.contains("FAILED"), qPrintable(r.out));
        QVERIFY(QFile::exists(out + "/a.h5") && QFile::exists(out + "/b.h5") && !QFile::exists(out + "/broken.h5"));
        const auto j = readJson(js + "/b.json");
        QCOMPARE(j["width"].get<int64_t>(), int64_t(70));
        int64_t cells = 0;
        for (auto v : j["modules"][0]["histogram"]) cells += v.get<int64_t>();
        QCOMPARE(cells, int64_t(32 * 32));   // the default 32x32 input: every first-module cell counted once

        QFile list(dir_.filePath("list.txt"));
        QVERIFY(list.open(QIODevice::WriteOnly));
        list.write("imgs/a.png\n# a comment\nimgs/b.png\n");
        list.close();
        r = run({"infer", "--model", "constellation", "--random-seed", "2", "--image", list.fileName(), "--out",
                 dir_.filePath("out2"), "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err + r.out));
        QVERIFY(QFile::exists(dir_.filePath("out2/b.h5")));
    }

    void inferClearErrors() {
        const QString img = dir_.filePath("e.png");
        saveImagePNG(img.toStdString(), testing::randomImage(32, 32, 3));
        Result r = run({"infer", "--model", "constellation", "--random-seed", "1", "--image", img, "--out",
                        dir_.filePath("e.h5"), "--png", dir_.filePath("e.png2.png"), "--module", "nope"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--module nope") && r.err.contains("branch1.0"), qPrintable(r.err));
        r = run({"infer", "--model", "constellation", "--random-seed", "1", "--image", img, "--out", dir_.filePath("e.h5"),
                 "--png", dir_.filePath("e2.png"), "--module", "9"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("modules 0..3"), qPrintable(r.err));
        ConstellationModel base(smallConfig(false), 1);
        const QString ck = dir_.filePath("base.h5");
        saveConstellation(base, ck.toStdString());
        r = run({"infer", "--model", "constellation", "--checkpoint", ck, "--image", img, "--out", dir_.filePath("b.h5"),
                 "--png", dir_.filePath("b.png")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("no constellation modules"), qPrintable(r.err));
        // Without --png the baseline's trace and top-5 are written (no modules).
        r = run({"infer", "--model", "constellation", "--checkpoint", ck, "--image", img, "--out", dir_.filePath("b.h5"),
                 "--json", dir_.filePath("b.json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(readJson(dir_.filePath("b.json"))["modules"].empty());
        r = run({"infer", "--model", "constellation", "--checkpoint", dir_.filePath("missing.h5"), "--image", img,
                 "--out", dir_.filePath("m.h5")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("missing.h5"), qPrintable(r.err));
        r = run({"infer", "--model", "constellation", "--image", img, "--out", dir_.filePath("m.h5")});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--checkpoint"), qPrintable(r.err));
    }

    // The benchmark measures both models at the same batch and says so in its JSON.
    // A run without a final evaluation (final_episodes 0) prints "-" in its accuracy cells,
    // not -100.00, and compare.json has null there.
    void trainWithoutFinalEvaluationSaysSo() {
        const QString cfg = dir_.filePath("noeval.json");
        QFile f(cfg);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"model": {"backbone": "conv4", "clusters": 8, "image_size": 16, "channels": [8, 8, 8, 8]},
                   "seed": 0, "batch_size": 4, "steps": 2, "warmup_steps": 0, "val_every": 0, "final_episodes": 0,
                   "checkpoint_every": 10})");
        f.close();
        const QString out = dir_.filePath("noeval_run");
        Result r = run({"train", "constellation", "--data", "procedural", "--config", cfg, "--out", out, "--compare",
                        "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err + r.out));
        QVERIFY2(!r.out.contains("-100"), qPrintable(r.out));
        const QStringList rows = r.out.split('\n').filter(QRegularExpression("^(baseline|constellation) "));
        QCOMPARE(rows.size(), 2);
        for (const QString& row : rows)
            QVERIFY2(QRegularExpression("^\\w+ +\\d+ +- +- +[0-9.]+$").match(row).hasMatch(), qPrintable(row));
        const auto j = readJson(out + "/compare.json");
        QCOMPARE(j["results"].size(), size_t(2));
        for (const auto& m : j["results"]) {
            QVERIFY(m["novel_1shot"].is_null() && m["novel_5shot_ci95"].is_null());
            QVERIFY(m["parameters"].get<int64_t>() > 0);
        }
    }

    void benchReportsBothModels() {
        const QString json = dir_.filePath("bench.json");
        Result r = run({"bench", "constellation", "--batch", "4", "--runs", "1", "--warmup", "0", "--threads", "1",
                        "--image-size", "16", "--clusters", "8", "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains("baseline") && r.out.contains("constellation"), qPrintable(r.out));
        const auto j = readJson(json);
        QCOMPARE(j["batch"].get<int64_t>(), int64_t(4));
        for (const char* m : {"baseline", "constellation"}) {
            QVERIFY(j[m]["forward_images_per_second"].get<double>() > 0);
            QVERIFY(j[m]["train_images_per_second"].get<double>() > 0);
        }
        QVERIFY(j["constellation"]["parameters"].get<int64_t>() > j["baseline"]["parameters"].get<int64_t>());
        r = run({"bench", "constellation", "--backbone", "vgg"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("backbone"), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestConstellationCli)
#include "test_constellation_cli.moc"
