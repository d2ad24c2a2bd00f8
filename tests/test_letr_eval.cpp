// core/eval/letr_eval: per-layer evaluation of a tiny random LETR on an in-test dataset,
// checked against the metrics computed from runLetr's traces; LSD row; eval tensors and the
// eval file round trip; stop and bad samples.
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/lines.h"
#include "core/error.h"
#include "core/eval/letr_eval.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/runlog.h"
#include "core/train/control.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

letr::LetrConfig tinyConfig() {
    letr::LetrConfig c;
    c.backbone = "resnet18";
    c.hiddenDim = 32;
    c.nheads = 2;
    c.dimFeedforward = 64;
    c.coarseEncLayers = 1;
    c.coarseDecLayers = 2;
    c.fineEncLayers = 1;
    c.fineDecLayers = 3;
    c.numQueries = 12;
    c.shortSide = 64;
    return c;
}

// Bright straight lines on a dark background; the drawn lines are the ground truth.
class DrawnLines : public data::LineDataset {
public:
    explicit DrawnLines(int n, int badIndex = -1) : n_(n), bad_(badIndex) {}
    int64_t size() const override { return n_; }
    data::LineSample get(int64_t i) const override {
        data::LineSample s;
        s.name = "drawn/" + std::to_string(i);
        s.image = cv::Mat(128, 128, CV_8UC3, cv::Scalar(20, 20, 20));
        cv::RNG rng(uint64_t(i) + 7);
        std::vector<float> v;
        for (int k = 0; k < 4; ++k) {
            const float x1 = rng.uniform(5.f, 120.f), y1 = rng.uniform(5.f, 120.f);
            const float x2 = rng.uniform(5.f, 120.f), y2 = rng.uniform(5.f, 120.f);
            cv::line(s.image, cv::Point(int(x1), int(y1)), cv::Point(int(x2), int(y2)),
                     cv::Scalar(240, 240, 240), 1, cv::LINE_AA);
            v.insert(v.end(), {x1 + 0.5f, y1 + 0.5f, x2 + 0.5f, y2 + 0.5f});
        }
        s.lines = torch::tensor(v).view({-1, 4});
        if (i == bad_) s.lines = torch::zeros({2, 3});
        return s;
    }
    std::string describe() const override { return "drawn lines (" + std::to_string(n_) + " images)"; }

private:
    int n_, bad_;
};

} // namespace

class TestLetrEval : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private Q_SLOTS:
    void rowsMatchMetricsFromTraces() {
        letr::LetrModel model(tinyConfig(), 3);
        DrawnLines data(3);
        int64_t calls = 0, lastTotal = 0;
        const eval::LetrEvalResult r = eval::evaluateLetr(model, data, {}, [&](int64_t done, int64_t total) {
            ++calls;
            lastTotal = total;
            QCOMPARE(done, calls);
        });
        QCOMPARE(calls, int64_t(3));
        QCOMPARE(lastTotal, int64_t(3));
        QCOMPARE(r.images, int64_t(3));
        QVERIFY(!r.stopped);
        QStringList keys;
        for (const auto& row : r.rows) keys << QString::fromStdString(row.key);
        QCOMPARE(keys, QStringList({"coarse_1", "coarse_2", "fine_1", "fine_2", "fine_3", "lsd"}));
        QCOMPARE(r.row("fine_3").label, std::string("fine 3"));
        QCOMPARE(r.row("coarse_1").metrics.predLines, int64_t(3 * 12));
        QCOMPARE(r.row("coarse_1").metrics.gtLines, int64_t(3 * 4));

        // Reference: the same metrics from runLetr's traces (all queries, threshold 0).
        for (auto [stage, layer, key] : {std::tuple{letr::Stage::Coarse, 1, "coarse_2"},
                                        std::tuple{letr::Stage::Fine, 2, "fine_3"}}) {
            eval::LineEvaluator ref;
            for (int i = 0; i < 3; ++i) {
                const auto s = data.get(i);
                const auto trace = letr::runLetr(model, s.image);
                std::vector<eval::ScoredLine> pred;
                for (const auto& l : trace.lines(stage, layer, 0.0f)) pred.push_back({l.x1, l.y1, l.x2, l.y2, l.score});
                std::vector<eval::GtLine> gt;
                auto a = s.lines.accessor<float, 2>();
                for (int64_t k = 0; k < a.size(0); ++k) gt.push_back({a[k][0], a[k][1], a[k][2], a[k][3]});
                ref.add(pred, gt, s.image.cols, s.image.rows);
            }
            const eval::LineMetrics m = ref.compute(), got = r.row(key).metrics;
            for (size_t k = 0; k < m.sAP.size(); ++k) QVERIFY(std::abs(m.sAP[k] - got.sAP[k]) < 1e-6);
            QVERIFY(std::abs(m.APH - got.APH) < 1e-6);
        }
        // LSD finds the drawn lines (crossings split some, each thin line gives two edges):
        // far better than a random model.
        const auto& lsd = r.row("lsd").metrics;
        const QString tableText = QString::fromStdString(eval::formatEvalTable(r));
        QVERIFY2(lsd.sAPAt(15) > 0.05 && lsd.FH > 0.5, qPrintable(tableText));
        for (const auto& row : r.rows)
            if (row.key != "lsd") QVERIFY2(row.metrics.sAPAt(15) < lsd.sAPAt(15), qPrintable(tableText));
        QVERIFY(model.is_training());   // restored (a fresh module is in training mode)

        const std::string table = eval::formatEvalTable(r);
        QVERIFY(testing::contains(table, {"sAP5", "sAP10", "sAP15", "sF10", "sF15", "APH", "FH",
                                          "coarse 1", "fine 3", "LSD"}));
        QCOMPARE(int(std::count(table.begin(), table.end(), '\n')), 7);

        // Eval tensors and the eval file.
        const auto t = eval::evalTensors(r, 4);
        QCOMPARE(t.at("fine_3/sAP10").item<double>(), r.row("fine_3").metrics.sAPAt(10));
        QCOMPARE(t.at("lsd/FH").item<double>(), lsd.FH);
        QCOMPARE(t.at("coarse_1/pr10/precision").numel(), int64_t(4));
        const std::string path = dir_.filePath("eval.h5").toStdString();
        eval::saveEvalFile(r, path, {{"checkpoint", "x.h5"}});
        const RunLog back = RunLog::load(path);
        QCOMPARE(back.status, RunStatus::Finished);
        QCOMPARE(back.config["checkpoint"].get<std::string>(), std::string("x.h5"));
        QCOMPARE(back.config["images"].get<int64_t>(), int64_t(3));
        QCOMPARE(back.eval.at("lsd/sAP15").item<double>(), lsd.sAPAt(15));
        QCOMPARE(back.eval.at("fine_2/prH/recall").numel(),
                 int64_t(std::min<size_t>(512, r.row("fine_2").metrics.heatmapCurve.size())));
    }

    void lastLayersOnlyAndStop() {
        letr::LetrModel model(tinyConfig(), 4);
        DrawnLines data(4);
        eval::LetrEvalOptions o;
        o.allLayers = false;
        o.lsd = false;
        o.maxImages = 2;
        const auto r = eval::evaluateLetr(model, data, o);
        QCOMPARE(int(r.rows.size()), 2);
        QCOMPARE(r.rows[0].key, std::string("coarse_2"));
        QCOMPARE(r.rows[1].key, std::string("fine_3"));
        QCOMPARE(r.images, int64_t(2));

        train::Control control;
        control.requestStop();
        const auto s = eval::evaluateLetr(model, data, o, {}, &control);
        QVERIFY(s.stopped);
        QCOMPARE(s.images, int64_t(0));
        QVERIFY(testing::contains(testing::errorOf([&] { s.row("lsd"); }), {"no row", "lsd"}));
    }

    void badGroundTruthNamesTheSample() {
        letr::LetrModel model(tinyConfig(), 5);
        DrawnLines data(2, 1);
        const std::string e = testing::errorOf([&] { eval::evaluateLetr(model, data); });
        QVERIFY2(testing::contains(e, {"drawn/1", "[M, 4]"}), e.c_str());
    }
};

QTEST_APPLESS_MAIN(TestLetrEval)
#include "test_letr_eval.moc"
