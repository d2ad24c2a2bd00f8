// M-LSD beside LSD in the commands: `glimpse infer --model mlsd` (one image, a folder, errors),
// the M-LSD rows of `glimpse eval edges` and `glimpse eval letr`, with the shipped
// resources/mlsd_tiny.h5 (GLIMPSE_RESOURCES points at the source tree's resources/).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/models/letr/model.h"
#include "core/runlog.h"

using namespace glimpse;

class TestMlsdCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString ckpt_;   // a tiny random LETR (for eval letr)

    struct Result {
        int code = -1;
        QString out, err;
    };
    static Result run(const QStringList& args, const QString& resources = QStringLiteral(GLIMPSE_SOURCE_DIR "/resources")) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("GLIMPSE_RESOURCES", resources);
        p.setProcessEnvironment(env);
        p.start(GLIMPSE_EXE, args);
        Result r;
        if (!p.waitForFinished(240000)) return r;
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }
    // A light room-like picture: a dark door and a window frame on a lit wall (straight,
    // high-contrast edges), written as NAME.
    QString scenePng(const QString& name) const {
        cv::Mat img(240, 320, CV_8UC3, cv::Scalar(200, 196, 188));
        cv::rectangle(img, cv::Rect(40, 60, 70, 170), cv::Scalar(60, 45, 35), cv::FILLED);
        cv::rectangle(img, cv::Rect(170, 50, 110, 90), cv::Scalar(40, 40, 40), 6);
        cv::line(img, cv::Point(0, 232), cv::Point(319, 232), cv::Scalar(90, 80, 70), 4);
        const QString png = dir_.filePath(name);
        return cv::imwrite(png.toStdString(), img) ? png : QString();
    }
    static nlohmann::json readJson(const QString& path) {
        std::ifstream f(path.toStdString());
        return nlohmann::json::parse(f);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QVERIFY2(QFileInfo::exists(GLIMPSE_SOURCE_DIR "/resources/mlsd_tiny.h5"), "resources/mlsd_tiny.h5 is not in the tree");
        letr::LetrConfig c;
        c.backbone = "resnet18";
        c.hiddenDim = 32;
        c.nheads = 2;
        c.dimFeedforward = 64;
        c.coarseEncLayers = 1;
        c.coarseDecLayers = 1;
        c.fineEncLayers = 1;
        c.fineDecLayers = 1;
        c.numQueries = 10;
        c.shortSide = 64;
        letr::LetrModel m(c, 3);
        ckpt_ = dir_.filePath("tiny_letr.h5");
        letr::saveLetr(m, ckpt_.toStdString());
    }

    // One image: a JSON with the image size, the settings and lines, best first, inside the
    // image, most of them on the scene's edges (the shipped weights find them); --png overlays.
    void inferOneImage() {
        const QString png = scenePng("scene.png");
        QVERIFY(!png.isEmpty());
        const QString json = dir_.filePath("scene.json"), overlay = dir_.filePath("scene_lines.png");
        const Result r = run({"infer", "--model", "mlsd", "--image", png, "--out", json, "--png", overlay});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("1 of 1 images done"), qPrintable(r.err));
        const nlohmann::json j = readJson(json);
        QCOMPARE(j["width"].get<int>(), 320);
        QCOMPARE(j["height"].get<int>(), 240);
        QCOMPARE(j["config"]["input_size"].get<int>(), 512);
        const auto& lines = j["lines"];
        QVERIFY2(lines.size() >= 4, qPrintable(QString::fromStdString(j.dump())));
        int onEdge = 0;
        double previous = 2.0;
        for (const auto& l : lines) {
            const double score = l["score"].get<double>();
            QVERIFY(score > 0.1 && score <= previous);
            previous = score;
            // Endpoints may reach past the border (the model extrapolates); a line's middle, near
            // the centre cell that found it, lies in the image.
            const double mx = (l["x1"].get<double>() + l["x2"].get<double>()) / 2;
            const double my = (l["y1"].get<double>() + l["y2"].get<double>()) / 2;
            QVERIFY2(mx > -8 && mx < 328 && my > -8 && my < 248, qPrintable(QString::fromStdString(l.dump())));
            if (l["edge"].get<double>() >= 0.7) ++onEdge;
        }
        qInfo("M-LSD on the scene: %d of %d lines on an edge", onEdge, int(lines.size()));
        QVERIFY2(onEdge * 2 >= int(lines.size()), qPrintable(QString::fromStdString(j.dump())));
        const cv::Mat drawn = cv::imread(overlay.toStdString());
        QCOMPARE(drawn.size(), cv::Size(320, 240));
        QVERIFY(cv::norm(drawn, cv::imread(png.toStdString()), cv::NORM_L1) > 0);   // lines drawn
    }

    // A folder: one JSON (and PNG) per image, named after it; a broken image fails alone.
    void inferFolderAndErrors() {
        const QString in = dir_.filePath("photos");
        QVERIFY(QDir().mkpath(in));
        QVERIFY(QFile::copy(scenePng("a.png"), in + "/a.png"));
        QVERIFY(QFile::copy(scenePng("b.png"), in + "/b.png"));
        {
            QFile bad(in + "/c.png");
            QVERIFY(bad.open(QIODevice::WriteOnly));
            bad.write("not a png");
        }
        const QString out = dir_.filePath("lines"), pngs = dir_.filePath("overlays");
        Result r = run({"infer", "--model", "mlsd", "--image", in, "--out", out, "--png", pngs});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("2 of 3 images done") && r.err.contains("c.png") && r.err.contains("FAILED"),
                 qPrintable(r.err));
        for (const char* n : {"a", "b"}) {
            QVERIFY(QFileInfo::exists(out + "/" + n + ".json"));
            QVERIFY(QFileInfo::exists(pngs + "/" + n + ".png"));
        }
        QVERIFY(!QFileInfo::exists(out + "/c.json"));
        // Not installed: said so, with the converter's name.
        r = run({"infer", "--model", "mlsd", "--image", in + "/a.png", "--out", dir_.filePath("x.json")},
                dir_.filePath("no-resources"));
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("mlsd_tiny.h5") && r.err.contains("convert_mlsd.py"), qPrintable(r.err));
        // A checkpoint of another family is refused by name.
        r = run({"infer", "--model", "mlsd", "--checkpoint", ckpt_, "--image", in + "/a.png", "--out",
                 dir_.filePath("x.json")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("tiny_letr.h5") && r.err.contains("'mlsd'"), qPrintable(r.err));
        r = run({"infer", "--model", "mlsd", "--image", in + "/a.png"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--out"), qPrintable(r.err));
    }

    // eval edges: an M-LSD row per image and a mean; --no-mlsd drops it; without the shipped
    // model it says so and measures the others.
    void evalEdgesRows() {
        const QString png = scenePng("edges.png");
        Result r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--top", "10"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QStringList row;
        for (const QString& line : r.out.split('\n')) {
            const QStringList f = line.split(' ', Qt::SkipEmptyParts);
            if (f.size() == 5 && f[0] == "edges.png" && f[1] == "M-LSD") row = f;
        }
        QVERIFY2(row.size() == 5, qPrintable(r.out));
        QVERIFY2(row[2].toInt() >= 4, qPrintable(r.out));
        QVERIFY2(row[3].chopped(1).toDouble() >= 50.0, qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression("mean\\s+M-LSD")), qPrintable(r.out));
        r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--top", "10", "--no-mlsd"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(!r.out.contains("M-LSD"));
        r = run({"eval", "edges", png, "--checkpoint", ckpt_}, dir_.filePath("no-resources"));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("no M-LSD model") && !r.out.contains("M-LSD"), qPrintable(r.err));
        r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--mlsd-checkpoint", dir_.filePath("none.h5")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("none.h5"), qPrintable(r.err));
    }

    // eval letr: an "M-LSD" row after LSD's, stored as mlsd/* in the eval file (--eval-out; --out
    // writes the per-sample results file).
    void evalLetrRow() {
        const QString out = dir_.filePath("eval.h5");
        const Result r =
            run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:2:1:128x96", "--eval-out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const int lsd = r.out.indexOf("\nLSD"), mlsd = r.out.indexOf("\nM-LSD");
        QVERIFY2(lsd > 0 && mlsd > lsd, qPrintable(r.out));
        const RunLog log = RunLog::load(out.toStdString());
        for (const char* k : {"mlsd/sAP10", "mlsd/sAP15", "mlsd/APH"}) QVERIFY2(log.eval.count(k), k);
        const double v = log.eval.at("mlsd/sAP10").item<double>();
        QVERIFY(v >= 0 && v <= 1);
    }
};

QTEST_APPLESS_MAIN(TestMlsdCli)
#include "test_mlsd_cli.moc"
