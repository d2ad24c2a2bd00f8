// `glimpse eval letr` end to end: a tiny random checkpoint on a tiny procedural dataset prints
// one table row per decoder layer plus LSD, writes an eval file, and rejects bad usage; the
// shipped demo model beats LSD on held-out scenes.
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/io/checkpoint.h"
#include "core/models/letr/model.h"
#include "core/runlog.h"
#include "core/train/state.h"

using namespace glimpse;

class TestCliEval : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString ckpt_;
    // The shipped model's check: this many held-out images, and coarse 3 above LSD by this factor.
    static constexpr int kShippedImages = 24;
    static constexpr double kShippedMargin = 2.0;

    struct Result {
        int code = -1;
        QString out, err;
    };
    // `resources` (when given) is the GLIMPSE_RESOURCES the command sees.
    static Result run(const QStringList& args, const QString& resources = {}) {
        QProcess p;
        if (!resources.isEmpty()) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert("GLIMPSE_RESOURCES", resources);
            p.setProcessEnvironment(env);
        }
        p.start(GLIMPSE_EXE, args);
        Result r;
        if (!p.waitForFinished(240000)) return r;
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }
    // A bright rectangle on a dark ground, written as NAME in the test folder ("" on failure).
    QString rectanglePng(const QString& name, cv::Size size = {160, 120}, cv::Rect rect = {40, 30, 80, 60}) const {
        cv::Mat img(size, CV_8UC3, cv::Scalar(30, 30, 30));
        cv::rectangle(img, rect, cv::Scalar(220, 220, 220), cv::FILLED);
        const QString png = dir_.filePath(name);
        return cv::imwrite(png.toStdString(), img) ? png : QString();
    }
    // Table rows: lines that start with a row label.
    static QStringList rowLabels(const QString& out) {
        QStringList labels;
        for (const QString& line : out.split('\n')) {
            const QString first = line.section(' ', 0, 0);
            if (first == "coarse" || first == "fine") labels << first + " " + line.section(' ', 1, 1, QString::SectionSkipEmpty);
            else if (first == "LSD") labels << "LSD";
        }
        return labels;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        letr::LetrConfig c;
        c.backbone = "resnet18";
        c.hiddenDim = 32;
        c.nheads = 2;
        c.dimFeedforward = 64;
        c.coarseEncLayers = 1;
        c.coarseDecLayers = 2;
        c.fineEncLayers = 1;
        c.fineDecLayers = 2;
        c.numQueries = 10;
        c.shortSide = 64;
        letr::LetrModel m(c, 11);
        ckpt_ = dir_.filePath("tiny.h5");
        letr::saveLetr(m, ckpt_.toStdString());
    }

    void printsOneRowPerLayerAndLsd() {
        const QString out = dir_.filePath("eval.h5");
        const Result r = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:3:1:96x96", "--eval-out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        for (const char* col : {"sAP5", "sAP10", "sAP15", "sF10", "sF15", "APH", "FH"})
            QVERIFY2(r.out.contains(col), qPrintable(r.out));
        QCOMPARE(rowLabels(r.out), QStringList({"coarse 1", "coarse 2", "fine 1", "fine 2", "LSD"}));
        // Progress on stderr: stderr is a pipe here, so whole lines (one per tenth of the images
        // done), not a line redrawn with carriage returns.
        QVERIFY2(!r.err.contains('\r'), qPrintable(r.err));
        QVERIFY2(r.err.contains("  1 / 3 images\n  2 / 3 images\n  3 / 3 images\n"), qPrintable(r.err));
        const RunLog log = RunLog::load(out.toStdString());
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.config["images"].get<int64_t>(), int64_t(3));
        QCOMPARE(log.config["layers"].get<std::string>(), std::string("all"));
        QVERIFY(log.eval.count("fine_2/sAP10"));
        QVERIFY(log.eval.count("lsd/APH"));
        const double v = log.eval.at("coarse_1/sAP10").item<double>();
        QVERIFY(v >= 0 && v <= 1);
    }

    // `glimpse eval edges`: LETR's and LSD's top lines against the image's own edges. On an
    // image of a bright rectangle LSD's lines lie on its edges; a random LETR's do not.
    void edgeSupportOfPhotos() {
        const QString png = rectanglePng("rect.png");
        QVERIFY(!png.isEmpty());
        Result r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--top", "4"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // The fields of rect.png's row of one detector (empty when there is none).
        const auto rowOf = [](const QString& out, const QString& detector) {
            for (const QString& line : out.split('\n')) {
                const QStringList f = line.split(' ', Qt::SkipEmptyParts);
                if (f.size() == 5 && f[0] == "rect.png" && f[1] == detector) return f;
            }
            return QStringList();
        };
        const QStringList lsd = rowOf(r.out, "LSD"), letr = rowOf(r.out, "LETR");
        QVERIFY2(lsd.size() == 5 && letr.size() == 5, qPrintable(r.out));
        QVERIFY2(lsd[2].toInt() >= 2 && lsd[2].toInt() <= 4, qPrintable(r.out));
        QCOMPARE(lsd[3], QString("100.0%"));   // the rectangle's sides
        QVERIFY2(letr[3].chopped(1).toDouble() < 50, qPrintable(r.out));
        QVERIFY(r.out.contains("mean"));
        // --snap: LETR's lines moved onto the edges they nearly follow (rows LETR+s); snapping
        // never lowers a line's support, and LSD's row is as before.
        const Result snapped = run({"eval", "edges", png, "--checkpoint", ckpt_, "--top", "4", "--snap"});
        QVERIFY2(snapped.code == 0, qPrintable(snapped.err));
        const QStringList letrSnapped = rowOf(snapped.out, "LETR+s"), lsdAgain = rowOf(snapped.out, "LSD");
        QVERIFY2(letrSnapped.size() == 5 && lsdAgain == lsd, qPrintable(snapped.out));
        QVERIFY2(letrSnapped[4].toDouble() >= letr[4].toDouble(), qPrintable(snapped.out + r.out));
        // Without a checkpoint and no shipped model: LSD alone, said so.
        r = run({"eval", "edges", png}, dir_.filePath("no-resources"));
        QCOMPARE(r.code, 0);
        QVERIFY(r.err.contains("LSD only"));
        QVERIFY(!r.out.contains("LETR"));
        // Bad input names the file.
        r = run({"eval", "edges", dir_.filePath("missing.jpg")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("missing.jpg"), qPrintable(r.err));
    }

    // --figure: a row per image, LETR's panel then LSD's then M-LSD's, each 300 rows high under a 24-row
    // caption; LSD's lines on the rectangle's sides are drawn green (on an edge), at the places
    // the sides are, scaled; bad names are refused before anything runs.
    void edgeSupportFigure() {
        const QString png = rectanglePng("rect_fig.png");   // 160 x 120: panels 400 x 300
        QVERIFY(!png.isEmpty());
        const QString fig = dir_.filePath("fig.png");
        Result r = run({"eval", "edges", png, png, "--checkpoint", ckpt_, "--top", "4", "--figure", fig});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("figure in"), qPrintable(r.err));
        cv::Mat f = cv::imread(fig.toStdString(), cv::IMREAD_COLOR);
        QVERIFY(!f.empty());
        constexpr int kGap = 6, kCaption = 24, kPanelW = 400, kPanelH = 300;
        QCOMPARE(f.cols, 3 * kPanelW + 2 * kGap);
        QCOMPARE(f.rows, 2 * (kCaption + kPanelH) + kGap);
        cv::cvtColor(f, f, cv::COLOR_BGR2RGB);
        // The rectangle's left side, x = 40 of 160, lies at column 100 of the LSD panel
        // (scale 2.5); its middle row, y = 60 of 120, at row 150 of the panel.
        const auto green = [&](int x, int y) {
            const cv::Vec3b p = f.at<cv::Vec3b>(y, x);
            return p[1] > 150 && p[0] < 120 && p[2] < 120;
        };
        int hits = 0;
        for (int row : {0, 1})
            for (int dx = -3; dx <= 3; ++dx) hits += green(kPanelW + kGap + 100 + dx, row * (kCaption + kPanelH + kGap) + kCaption + 150);
        QVERIFY2(hits >= 2, qPrintable(QString::number(hits)));
        // Away from the sides, the LSD panel is the image: the dark ground and the bright inside.
        QVERIFY(f.at<cv::Vec3b>(kCaption + 20, kPanelW + kGap + 20)[1] < 60);
        QVERIFY(f.at<cv::Vec3b>(kCaption + 150, kPanelW + kGap + 200)[1] > 200);
        // JPEG too.
        const QString jpg = dir_.filePath("fig.jpg");
        r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--top", "4", "--figure", jpg});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(cv::imread(jpg.toStdString()).size(), cv::Size(3 * kPanelW + 2 * kGap, kCaption + kPanelH));
        // A narrow image's caption is set smaller so that it fits its panel: the strip's last
        // columns stay the caption's ground.
        const QString narrowPng = rectanglePng("narrow.png", {90, 120}, {20, 30, 50, 60});   // panels 225 x 300; captions 284-295 px at full size
        QVERIFY(!narrowPng.isEmpty());
        r = run({"eval", "edges", narrowPng, "--checkpoint", ckpt_, "--top", "4", "--figure", fig});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        f = cv::imread(fig.toStdString(), cv::IMREAD_COLOR);
        QCOMPARE(f.size(), cv::Size(3 * 225 + 2 * kGap, kCaption + kPanelH));
        // (LETR's and LSD's captions; M-LSD's, two letters longer, reaches the strip's end of a
        // 225-px panel even at the smallest font: not checked)
        for (int panel : {0, 1}) {
            const cv::Mat strip = f(cv::Rect(panel * (225 + kGap) + 225 - 4, 0, 4, kCaption));
            QVERIFY2(cv::countNonZero(strip.reshape(1) != 24) == 0, qPrintable(QString("panel %1").arg(panel)));
        }
        // The figure stops at 100 images (JPEG's 65535 rows); all are still measured (--no-mlsd:
        // LETR and LSD only).
        QStringList many{"eval", "edges", "--checkpoint", ckpt_, "--top", "1", "--figure", fig, "--no-mlsd"};
        for (int i = 0; i < 101; ++i) many << narrowPng;
        r = run(many);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("the first 100 of 101 images"), qPrintable(r.err));
        QCOMPARE(r.out.count("narrow.png"), 2 * 101);
        QCOMPARE(cv::imread(fig.toStdString()).rows, 100 * (kCaption + kPanelH) + 99 * kGap);
        // Bad names: the extension, a missing folder; nothing is written.
        r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--figure", dir_.filePath("fig.gif")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("fig.gif") && r.err.contains(".png"), qPrintable(r.err));
        r = run({"eval", "edges", png, "--checkpoint", ckpt_, "--figure", dir_.filePath("nowhere/fig.png")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("nowhere") && r.err.contains("does not exist"), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dir_.filePath("fig.gif")));
    }

    void lastLayersOnly() {
        const Result r = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1:2:64x64",
                              "--layers", "last", "--no-lsd"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(rowLabels(r.out), QStringList({"coarse 2", "fine 2"}));
        // The input size can be overridden; the long-side cap must admit the short side.
        Result s = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1:2:64x64", "--layers", "last",
                        "--no-lsd", "--short-side", "96", "--max-long-side", "200"});
        QVERIFY2(s.code == 0, qPrintable(s.err));
        QVERIFY2(s.err.contains("short side 96, long side <= 200"), qPrintable(s.err));
        // The flip ensemble: said in the table's title; 3 views is refused before any work.
        s = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1:2:64x64", "--layers", "last",
                 "--no-lsd", "--flips", "4"});
        QVERIFY2(s.code == 0, qPrintable(s.err));
        QVERIFY2(s.out.contains("(flip ensemble of 4 views)"), qPrintable(s.out));
        QCOMPARE(rowLabels(s.out), QStringList({"coarse 2", "fine 2"}));
        s = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1:2:64x64", "--flips", "3"});
        QCOMPARE(s.code, 1);
        QVERIFY2(s.err.contains("--flips: expected 1, 2 or 4, got 3"), qPrintable(s.err));
        s = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1:2:64x64", "--short-side", "96",
                 "--max-long-side", "80"});
        QVERIFY(s.code != 0);
        QVERIFY2(s.err.contains("--max-long-side"), qPrintable(s.err));
    }

    // The shipped demo model (resources/letr_demo.h5, issue 51: proposal queries on M-LSD's
    // encoder) finds the held-out scenes' lines: on the first images of the held-out set its
    // last coarse and last fine layers are both above twice LSD's sAP10 (docs/decisions.md has
    // the table on all 200, and the labelled photographs'). On a real photograph its best lines
    // follow the image's edges (the procedural-only model before it: 0% on an edge, mean support
    // 0.02-0.05 on these photos).
    void shippedDemoModelFindsLines() {
        const QString model = QStringLiteral(GLIMPSE_SOURCE_DIR "/resources/letr_demo.h5");
        QVERIFY2(QFile::exists(model), qPrintable(model));
        QVERIFY(QFileInfo(model).size() <= 25'000'000);
        const QString out = dir_.filePath("shipped_eval.h5");
        const Result r = run({"eval", "letr", "--checkpoint", model, "--data", "procedural:200:1000:256x192",
                              "--max-images", QString::number(kShippedImages), "--layers", "all", "--eval-out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const RunLog log = RunLog::load(out.toStdString());
        const auto sap10 = [&](const char* row) { return log.eval.at(std::string(row) + "/sAP10").item<double>(); };
        const double coarse = sap10("coarse_3"), fine = sap10("fine_3"), lsd = sap10("lsd");
        QVERIFY2(coarse > lsd * kShippedMargin && fine > lsd * kShippedMargin, qPrintable(r.out));
        // building.jpg (opencv-doc): the share of the 50 best lines on an edge and their mean support.
        const QString photo = QStringLiteral("/usr/share/doc/opencv-doc/examples/data/building.jpg");
        if (QFile::exists(photo)) {
            const Result b = run({"eval", "edges", photo, "--checkpoint", model, "--top", "50"});
            QVERIFY2(b.code == 0, qPrintable(b.err));
            const QStringList row = b.out.split('\n').filter(QRegularExpression("^building\\.jpg\\s+LETR\\s"));
            QVERIFY2(row.size() == 1, qPrintable(b.out));
            const QStringList cols = row.first().split(' ', Qt::SkipEmptyParts);   // image LETR count on% mean
            QVERIFY2(cols.size() == 5, qPrintable(row.first()));
            const double onEdge = cols[3].chopped(1).toDouble(), support = cols[4].toDouble();
            QVERIFY2(onEdge >= 5.0 && support >= 0.15, qPrintable(b.out));
        }
        // `eval edges` without --checkpoint finds the shipped model (GLIMPSE_RESOURCES: only there).
        const QString png = rectanglePng("rect_shipped.png");
        QVERIFY(!png.isEmpty());
        const Result e = run({"eval", "edges", png, "--top", "4"}, QStringLiteral(GLIMPSE_SOURCE_DIR "/resources"));
        QCOMPARE(e.code, 0);
        QVERIFY2(e.out.contains("rect_shipped.png") && e.out.contains("LETR"), qPrintable(e.out));
    }

    // `glimpse train letr --init`: a run starts from a model's weights (here stopped before its
    // first step, so its checkpoint holds exactly the file's tensors); a missing file is named.
    void trainFromInit() {
        const auto model = letr::loadLetr(ckpt_.toStdString());
        nlohmann::json cfg = {{"model", model->config().toJson()}, {"coarse_steps", 2}, {"fine_steps", 1},
                              {"batch_size", 2}, {"threads", 1}, {"val_every", 0}};
        const QString cfgPath = dir_.filePath("init_train.json"), out = dir_.filePath("init_run");
        {
            QFile f(cfgPath);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray::fromStdString(cfg.dump()));
        }
        Result r = run({"train", "letr", "--config", cfgPath, "--data", "procedural:2:1:64x64", "--out", out,
                        "--steps", "0", "--init", ckpt_});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto st = train::loadTrainState(out.toStdString() + "/checkpoint.h5", "letr-train");
        QCOMPARE(st.meta["config"]["init"].get<std::string>(), ckpt_.toStdString());
        const auto want = loadCheckpoint(ckpt_.toStdString()).tensors;
        QCOMPARE(st.model.size(), want.size());
        for (const auto& [k, v] : want) QVERIFY2(torch::equal(v, st.model.at(k)), k.c_str());
        r = run({"train", "letr", "--config", cfgPath, "--data", "procedural:2:1:64x64", "--out",
                 dir_.filePath("init_run2"), "--steps", "0", "--init", dir_.filePath("missing.h5")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("missing.h5"), qPrintable(r.err));
    }

    void badUsage() {
        Result r = run({"eval"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.out.contains("usage: glimpse eval letr"));
        r = run({"eval", "letr", "--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("--layers all|last"));
        r = run({"eval", "nosuch"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("unknown model 'nosuch'"), qPrintable(r.err));
        r = run({"eval", "coat"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--checkpoint"), qPrintable(r.err));
        r = run({"eval", "letr", "--data", "procedural:1"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--checkpoint"), qPrintable(r.err));
        r = run({"eval", "letr", "--checkpoint", ckpt_, "--data", "procedural:1", "--layers", "some"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--layers"), qPrintable(r.err));
        r = run({"eval", "letr", "--checkpoint", ckpt_, "--data", dir_.filePath("nowhere.json")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("nowhere.json"), qPrintable(r.err));
        r = run({"eval", "letr", "--checkpoint", dir_.filePath("none.h5"), "--data", "procedural:1"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("none.h5"), qPrintable(r.err));
    }
};

QTEST_APPLESS_MAIN(TestCliEval)
#include "test_cli_eval.moc"
