// `glimpse eval letr|coat|fewshot --out R.h5`, `glimpse info R.h5` and `glimpse bench results`
// (issue 53) with tiny random checkpoints: the results file's per-sample records add up exactly
// to the summary the eval printed (LETR per layer and LSD; CoaT accuracy and confusion; few-shot
// mean accuracy), a moved class folder is found again after a remap.
#include <QtTest>

#include <cmath>
#include <filesystem>

#include <opencv2/imgcodecs.hpp>

#include "core/models/coat/model.h"
#include "core/models/constellation/model.h"
#include "core/models/letr/model.h"
#include "core/results/results.h"
#include "core/util/autocast.h"
#include "core/util/threads.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::results;
namespace fs = std::filesystem;

namespace {

struct Result {
    int code = -1;
    QString out, err;
};

Result run(const QStringList& args) {
    QProcess p;
    p.start(GLIMPSE_EXE, args);
    Result r;
    if (!p.waitForFinished(240000)) return r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

// The printed table's numbers of one row ("coarse 1   12.3  ..."): the values after the label.
QList<double> tableRow(const QString& out, const QString& label) {
    for (const QString& line : out.split('\n')) {
        if (!line.startsWith(label + " ")) continue;
        QList<double> v;
        for (const QString& w : line.mid(label.size()).split(' ', Qt::SkipEmptyParts)) v << w.toDouble();
        return v;
    }
    return {};
}

} // namespace

class TestResultsCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* n) { return dir_.filePath(n).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::set_num_threads(1);
    }

    void evalLetrRecordsAddUpToTheTable() {
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
        const std::string ckpt = file("letr.h5");
        letr::saveLetr(m, ckpt);
        const std::string out = file("letr_results.h5");
        const Result r = run({"eval", "letr", "--checkpoint", QString::fromStdString(ckpt), "--data", "procedural:4:1:96x96",
                              "--no-mlsd", "--out", QString::fromStdString(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto f = ResultsFile::open(out);
        QCOMPARE(f->status(), Status::Complete);
        QCOMPARE(f->size(), int64_t(4));
        QCOMPARE(f->letrRows().size(), size_t(5));   // coarse 1-2, fine 1-2, LSD
        QVERIFY(f->letrRows()[4].baseline);
        QVERIFY(f->header().command.find("--no-mlsd") != std::string::npos);
        int64_t gt = 0;
        for (int32_t g : f->gtCount()) gt += g;
        QVERIFY(gt > 0);
        for (size_t row = 0; row < 5; ++row) {
            const eval::LineMetrics& m = f->letrSummary().metrics[row];
            QCOMPARE(m.gtLines, gt);
            int64_t preds = 0;
            for (int32_t p : f->predCount(row)) preds += p;
            QCOMPARE(preds, m.predLines);
            if (!f->letrRows()[row].baseline) QCOMPARE(f->predCount(row)[0], 10);   // every query
            const auto sap = f->letrRecomputedSap(row);
            const QList<double> printed = tableRow(r.out, QString::fromStdString(f->letrRows()[row].label));
            QVERIFY2(printed.size() >= 3, qPrintable(r.out));
            for (size_t k = 0; k < 3; ++k) {
                QCOMPARE(sap[k], m.sAP[k]);   // exactly the eval's number
                QCOMPARE(printed[int(k)], std::round(1000 * m.sAP[k]) / 10);
                int64_t tp = 0;
                for (int32_t t : f->tpCount(row, k)) tp += t;
                QCOMPARE(tp, int64_t(std::llround(m.curves[k].recall.back() * double(gt))));
            }
        }
        // Images come back from the dataset spec.
        QCOMPARE(f->image(1).cols, 96);
        QCOMPARE(f->lines(0, 1).size(), size_t(10));

        const Result info = run({"info", QString::fromStdString(out)});
        QVERIFY2(info.code == 0, qPrintable(info.err));
        QVERIFY2(info.out.contains("results: letr") && info.out.contains("complete: 4 samples") &&
                     info.out.contains("fine 2"),
                 qPrintable(info.out));

        // --keep-lines: the best 3 per row and image; a missing output folder is refused first.
        const std::string kept = file("letr_kept.h5");
        const Result k = run({"eval", "letr", "--checkpoint", QString::fromStdString(ckpt), "--data", "procedural:2:1:96x96",
                              "--no-mlsd", "--no-lsd", "--out", QString::fromStdString(kept), "--keep-lines", "3"});
        QVERIFY2(k.code == 0, qPrintable(k.err));
        auto fk = ResultsFile::open(kept);
        QCOMPARE(fk->lines(3, 0).size(), size_t(3));
        QCOMPARE(fk->predCount(3)[0], 10);
        const Result bad = run({"eval", "letr", "--checkpoint", QString::fromStdString(ckpt), "--data", "procedural:2",
                                "--out", QString::fromStdString(file("nowhere/r.h5"))});
        QVERIFY(bad.code != 0);
        QVERIFY2(bad.err.contains("nowhere") && bad.err.contains("does not exist"), qPrintable(bad.err));
    }

    void evalCoatRecordsAddUpToTheAccuracy() {
        coat::CoatConfig c;
        c.variant = "custom";
        c.embedDims = {16, 16, 24, 32};
        c.serialDepths = {1, 1, 1, 1};
        c.mlpRatios = {2, 2, 2, 2};
        c.numClasses = 3;
        c.imageSize = 32;
        c.resize = 36;
        c.classNames = {"ant", "bee", "cat"};
        coat::CoatModel m(c, 4);
        const std::string ckpt = file("coat.h5");
        coat::saveCoat(m, ckpt);
        const fs::path root = fs::path(file("cls"));
        for (const char* split : {"train", "val"})
            for (int k = 0; k < 3; ++k) {
                const fs::path d = root / split / c.classNames[size_t(k)];
                fs::create_directories(d);
                for (int i = 0; i < 3; ++i)
                    QVERIFY(cv::imwrite((d / ("img" + std::to_string(i) + ".png")).string(),
                                        testing::randomImage(40, 40, uint64_t(10 * k + i))));
            }
        const std::string out = file("coat_results.h5");
        const Result r = run({"eval", "coat", "--checkpoint", QString::fromStdString(ckpt), "--data",
                              QString::fromStdString(root.string()), "--out", QString::fromStdString(out), "--batch", "4"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto f = ResultsFile::open(out);
        QCOMPARE(f->type(), ResultsType::Classification);
        QCOMPARE(f->size(), int64_t(9));
        const ClassSummary& s = f->classSummary();
        int64_t correct = 0, top5 = 0;
        std::vector<int64_t> conf(9, 0);
        for (int64_t i = 0; i < f->size(); ++i) {
            const int64_t l = f->labels()[size_t(i)], p = f->predicted()[size_t(i)];
            correct += l == p;
            ++conf[size_t(l * 3 + p)];
            const auto t5 = f->top5(i);
            QCOMPARE(t5.size(), size_t(3));
            top5 += std::find(t5.begin(), t5.end(), l) != t5.end();
            const auto pr = f->top5Prob(i);
            QVERIFY(pr[0] >= pr[1] && pr[1] >= pr[2]);
            QVERIFY(std::abs(f->labelProb()[size_t(i)] - pr[size_t(std::find(t5.begin(), t5.end(), l) - t5.begin())]) < 1e-7);
            QVERIFY(fs::exists(f->samplePath(i)));
        }
        QCOMPARE(correct, s.correct);
        QCOMPARE(conf, s.confusion);
        QCOMPARE(s.samples, int64_t(9));
        QCOMPARE(top5, int64_t(9));
        QCOMPARE(s.accuracy, double(correct) / 9.0);
        QVERIFY2(r.out.contains(QString("(%1 of 9)").arg(correct)), qPrintable(r.out));
        QVERIFY2(r.out.contains("9 images, float32"), qPrintable(r.out));   // the default precision, named
        QCOMPARE(f->header().config.at("precision").get<std::string>(), std::string("float32"));
        // --precision: auto runs (bfloat16 where the CPU has it, else int8 MLP layers) and names
        // what it used; an unknown precision is refused by name.
        const Result ra = run({"eval", "coat", "--checkpoint", QString::fromStdString(ckpt), "--data",
                               QString::fromStdString(root.string()), "--batch", "4", "--precision", "auto"});
        QVERIFY2(ra.code == 0, qPrintable(ra.err));
        const auto autoDtype = glimpse::parsePrecision("auto", torch::Device(torch::kCPU), "--precision", true);
        QVERIFY2(ra.out.contains(QString("9 images, ") + glimpse::precisionName(autoDtype)), qPrintable(ra.out));
        const Result rb = run({"eval", "coat", "--checkpoint", QString::fromStdString(ckpt), "--data",
                               QString::fromStdString(root.string()), "--precision", "half"});
        QVERIFY2(rb.code != 0 && rb.err.contains("--precision") && rb.err.contains("half"), qPrintable(rb.err));

        // The class folder moves: the reader says so; a remap finds the images again.
        const fs::path moved = fs::path(file("cls_moved"));
        fs::rename(root, moved);
        auto g = ResultsFile::open(out);
        QCOMPARE(g->missingSources().missingFiles, int64_t(9));
        QVERIFY(g->missingSources().datasetMissing);
        g->remapSourceRoot(moved.string());
        QVERIFY(!g->missingSources().any());
        QCOMPARE(g->image(0).cols, 40);
        const Result info = run({"info", QString::fromStdString(out)});
        QVERIFY2(info.out.contains("MISSING"), qPrintable(info.out));
    }

    void evalFewShotEpisodesAddUpToTheMean() {
        constellation::ConstellationConfig c;
        c.constellation = true;
        c.channels = {8, 8, 8, 8};
        c.clusters = 16;
        c.heads = 4;
        c.numClasses = 6;
        c.imageSize = 32;
        constellation::ConstellationModel m(c, 3);
        const std::string ckpt = file("cn.h5");
        constellation::saveConstellation(m, ckpt);
        const std::string out = file("fs_results.h5");
        const Result r = run({"eval", "fewshot", "--checkpoint", QString::fromStdString(ckpt), "--ways", "3", "--shots",
                              "1,2", "--queries", "2", "--episodes", "5", "--out", QString::fromStdString(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto f = ResultsFile::open(out);
        QCOMPARE(f->type(), ResultsType::FewShot);
        QCOMPARE(f->size(), int64_t(10));
        for (size_t k = 0; k < 2; ++k) {
            double sum = 0;
            int64_t n = 0;
            for (int64_t i = 0; i < f->size(); ++i)
                if (f->episodeSetting()[size_t(i)] == int64_t(k)) sum += f->episodeAccuracy()[size_t(i)], ++n;
            QCOMPARE(n, int64_t(5));
            const FewShotSummaryRow& row = f->fewShotSummary()[k];
            QCOMPARE(sum / double(n), row.mean);
            QVERIFY2(r.out.contains(QString("%1-shot: %2%").arg(row.setting.shots).arg(100 * row.mean, 0, 'f', 2)),
                     qPrintable(r.out));
        }
        const EpisodeIn e = f->episode(7);
        QCOMPARE(e.support.size(), size_t(6));
        QCOMPARE(e.query.size(), size_t(6));
        int64_t right = 0;
        for (size_t q = 0; q < 6; ++q) right += e.predicted[q] == int64_t(q / 2);
        QCOMPARE(double(right) / 6.0, e.accuracy);
        QCOMPARE(f->datasetImage(e.query[0]).cols, 32);
    }

    void benchResultsWritesAndMeasures() {
        const std::string out = file("bench.h5");
        const Result r = run({"bench", "results", "--samples", "30", "--entities", "40", "--layers", "4", "--keep-lines",
                              "8", "--out", QString::fromStdString(out), "--repeats", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("file size") && r.out.contains("open") && r.out.contains("sort"), qPrintable(r.out));
        auto f = ResultsFile::open(out);
        QCOMPARE(f->size(), int64_t(30));
        QCOMPARE(f->letrRows().size(), size_t(5));
        QCOMPARE(f->predCount(0)[0], 40);
        QCOMPARE(f->lines(3, 0).size(), size_t(8));
    }
};

QTEST_GUILESS_MAIN(TestResultsCli)
#include "test_results_cli.moc"
