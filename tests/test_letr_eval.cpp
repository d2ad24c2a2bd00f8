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
#include "core/models/letr/flips.h"
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

    // The flip ensemble's merge on hand-made views: greedy by view 0's score, nearest entity
    // not yet taken within the radius, the endpoint order that fits, the mean line, the mean
    // score over all views (0 where nothing was taken).
    void flipMergeByHand() {
        const auto v0 = torch::tensor({0.1, 0.1, 0.5, 0.1,     // A, 0.9
                                       0.2, 0.6, 0.2, 0.9,     // B, 0.8
                                       0.7, 0.7, 0.9, 0.9,     // C, 0.3: nothing near it
                                       0.11, 0.1, 0.51, 0.1},  // E, 0.2: near A, but A takes A'
                                      torch::kDouble).view({4, 4});
        const auto v1 = torch::tensor({0.9, 0.1, 0.95, 0.2,    // D, 0.95: near nothing
                                       0.2, 0.62, 0.2, 0.88,   // B'
                                       0.52, 0.12, 0.12, 0.1,  // A' (endpoints in the other order)
                                       0.3, 0.3, 0.35, 0.3},   // far from all
                                      torch::kDouble).view({4, 4});
        const auto p = torch::tensor({0.9, 0.8, 0.3, 0.2, 0.95, 0.6, 0.7, 0.1}, torch::kDouble).view({2, 4});
        auto [lines, probs] = letr::mergeFlipViews(torch::stack({v0, v1}), p);
        const auto wantLines = torch::tensor({0.11, 0.1, 0.51, 0.11, 0.2, 0.61, 0.2, 0.89, 0.7, 0.7, 0.9, 0.9,
                                              0.11, 0.1, 0.51, 0.1}, torch::kDouble).view({4, 4});
        QVERIFY(torch::allclose(lines, wantLines, 0, 1e-12));
        QVERIFY(torch::allclose(probs, torch::tensor({0.8, 0.7, 0.15, 0.1}, torch::kDouble), 0, 1e-12));
        // A radius below every distance: the lines stay, the scores halve.
        auto [l2, p2] = letr::mergeFlipViews(torch::stack({v0, v1}), p, 0.001);
        QVERIFY(torch::equal(l2, v0));
        QVERIFY(torch::allclose(p2, p[0] / 2, 0, 1e-12));
        // One view: unchanged.
        auto [l1, p1] = letr::mergeFlipViews(v0.unsqueeze(0), p.narrow(0, 0, 1));
        QVERIFY(torch::equal(l1, v0) && torch::equal(p1, p[0]));
        QVERIFY(testing::contains(testing::errorOf([&] { letr::mergeFlipViews(v0, p); }), {"[V, N, 4]"}));
        QVERIFY(testing::contains(testing::errorOf([&] { letr::checkFlipViews(3); }), {"1, 2 or 4", "3"}));
    }

    // forwardFlipEnsemble against the views run one by one, mirrored and mapped back here
    // (x -> 1 - x for a left-right mirror, y -> 1 - y for an up-down one), and merged.
    void flipEnsembleEqualsViewsRunOneByOne() {
        letr::LetrModel model(tinyConfig(), 6);
        model.eval();
        torch::NoGradGuard noGrad;
        // A fixed image: the merge is greedy (score order, nearest line, match radius), so an
        // input with a near-tie somewhere would let the batched pass's last-bit differences
        // from the one-by-one passes pick another partner, and an unseeded image made that a
        // rare failure. This one has no such tie (checked over repeated runs at 1 and 2 threads).
        torch::manual_seed(19);
        const auto image = torch::randn({3, 64, 96}, torch::TensorOptions().dtype(torch::kFloat));
        const auto plain = model.forward({image});
        const auto one = letr::forwardFlipEnsemble(model, image, 1);
        QVERIFY(torch::equal(one.last().lines, plain.last().lines));
        const auto ens = letr::forwardFlipEnsemble(model, image, 4);
        QCOMPARE(ens.last().lines.size(1), int64_t(4));
        const std::vector<std::vector<int64_t>> dims{{}, {2}, {1}, {1, 2}};
        std::vector<letr::LetrOutput> views;
        for (const auto& d : dims) views.push_back(model.forward({d.empty() ? image : image.flip(d)}));
        for (size_t s = 0; s < 2; ++s) {
            for (int64_t l = 0; l < plain.stages[s].lines.size(0); ++l) {
                std::vector<torch::Tensor> ls, ps;
                for (size_t v = 0; v < 4; ++v) {
                    auto x = views[v].stages[s].lines[l][0].clone();
                    if (v == 1 || v == 3) {
                        x.select(1, 0).copy_(1 - x.select(1, 0));
                        x.select(1, 2).copy_(1 - x.select(1, 2));
                    }
                    if (v == 2 || v == 3) {
                        x.select(1, 1).copy_(1 - x.select(1, 1));
                        x.select(1, 3).copy_(1 - x.select(1, 3));
                    }
                    ls.push_back(x);
                    ps.push_back(torch::softmax(views[v].stages[s].logits[l][0], -1).select(-1, 0));
                }
                auto [ml, mp] = letr::mergeFlipViews(torch::stack(ls), torch::stack(ps));
                const auto& st = ens.stages[s];
                QVERIFY(torch::allclose(st.lines[l][0], ml, 0, 1e-4));
                QVERIFY(torch::allclose(torch::softmax(st.logits[l][0], -1).select(-1, 0), mp, 0, 1e-4));
                // Views 1-3 of the batch are as the forward pass gave them.
                QVERIFY(torch::allclose(st.lines[l][2], views[2].stages[s].lines[l][0], 0, 1e-4));
            }
        }
        // A 4-view ensemble is not view 0 alone (the views disagree on a random model).
        QVERIFY(!torch::allclose(ens.last().lines[2][0], plain.last().lines[2][0], 0, 1e-3));
    }

    // Traces and evaluation with the ensemble: the trace's lines are the ensemble's and say so
    // (meta "flips", kept by a save / load; an impossible value is refused), and the
    // evaluation's rows equal the metrics of those traces.
    void flipEnsembleInTracesAndEvaluation() {
        letr::LetrModel model(tinyConfig(), 7);
        DrawnLines data(2);
        letr::LetrRunOptions ro;
        ro.flips = 2;
        const auto s0 = data.get(0);
        const auto trace = letr::runLetr(model, s0.image, ro);
        QCOMPARE(trace.flips(), 2);
        QCOMPARE(letr::runLetr(model, s0.image).flips(), 1);
        {
            model.eval();
            torch::NoGradGuard noGrad;
            const auto in = model.preprocess(s0.image);
            const auto ens = letr::forwardFlipEnsemble(model, in.tensor, 2);
            const auto scale = torch::tensor({128.f, 128.f, 128.f, 128.f});
            QVERIFY(torch::allclose(trace.endpoints(letr::Stage::Fine, 2), ens.last().lines[2][0] * scale, 0, 1e-3));
            model.train();
        }
        const std::string path = dir_.filePath("flips.h5").toStdString();
        trace.save(path);
        QCOMPARE(letr::LetrTrace::load(path).flips(), 2);
        letr::LetrTrace bad = trace;
        bad.raw().meta()["flips"] = 3;
        bad.save(path);
        QVERIFY(testing::contains(testing::errorOf([&] { letr::LetrTrace::load(path); }), {"flips", "1, 2 or 4"}));

        eval::LetrEvalOptions o;
        o.flips = 2;
        o.lsd = false;
        const auto r = eval::evaluateLetr(model, data, o);
        eval::LineEvaluator ref;
        for (int i = 0; i < 2; ++i) {
            const auto s = data.get(i);
            const auto t = letr::runLetr(model, s.image, ro);
            std::vector<eval::ScoredLine> pred;
            for (const auto& l : t.lines(letr::Stage::Fine, 2, 0.0f)) pred.push_back({l.x1, l.y1, l.x2, l.y2, l.score});
            std::vector<eval::GtLine> gt;
            auto a = s.lines.accessor<float, 2>();
            for (int64_t k = 0; k < a.size(0); ++k) gt.push_back({a[k][0], a[k][1], a[k][2], a[k][3]});
            ref.add(pred, gt, s.image.cols, s.image.rows);
        }
        const eval::LineMetrics m = ref.compute(), got = r.row("fine_3").metrics;
        for (size_t k = 0; k < m.sAP.size(); ++k) QVERIFY(std::abs(m.sAP[k] - got.sAP[k]) < 1e-6);
        QVERIFY(std::abs(m.APH - got.APH) < 1e-6);
        o.flips = 3;
        QVERIFY(testing::contains(testing::errorOf([&] { eval::evaluateLetr(model, data, o); }), {"flips", "3"}));
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
