// LETR training: AdamW against LibTorch's torch::optim::AdamW, schedule helpers, data order,
// tiny training runs (the loss decreases; resume after a stop equals an uninterrupted run),
// the run log's series, config and resume errors.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <set>

#include <torch/torch.h>

#include "core/data/open.h"
#include "core/eval/letr_eval.h"
#include "core/io/checkpoint.h"
#include "core/models/letr/model.h"
#include "core/models/letr/train.h"
#include "core/runlog.h"
#include "core/train/optim.h"
#include "core/train/state.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::letr;
using testing::contains;
using testing::errorOf;

namespace {

LetrTrainConfig tinyConfig() {
    LetrTrainConfig c;
    c.model.backbone = "resnet10";
    c.model.hiddenDim = 32;
    c.model.nheads = 2;
    c.model.dimFeedforward = 64;
    c.model.coarseEncLayers = 1;
    c.model.coarseDecLayers = 2;
    c.model.fineEncLayers = 1;
    c.model.fineDecLayers = 2;
    c.model.numQueries = 12;
    c.model.shortSide = 64;
    c.model.maxLongSide = 128;
    c.augment.minShortSide = 56;
    c.augment.maxShortSide = 72;
    c.augment.maxLongSide = 128;
    c.batchSize = 2;
    c.threads = 1;
    return c;
}

std::map<std::string, torch::Tensor> modelTensors(const std::string& path) { return loadCheckpoint(path).tensors; }

// Validation metrics of a model computed outside the trainer (the reference for val/*).
eval::LineMetrics referenceVal(LetrModel& m, const std::string& spec, const std::string& key) {
    auto ds = data::openLineDataset(spec);
    eval::LetrEvalOptions o;
    o.allLayers = false;
    o.lsd = false;
    o.thresholds = {10, 15};
    return eval::evaluateLetr(m, *ds, o).row(key).metrics;
}

} // namespace

class TestLetrTrain : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    void adamwMatchesLibTorch() {
        torch::manual_seed(0);
        auto w0 = torch::randn({5, 3}), b0 = torch::randn({3});
        auto x = torch::randn({8, 5}), y = torch::randn({8, 3});
        auto w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
        auto w2 = w0.clone().requires_grad_(), b2 = b0.clone().requires_grad_();
        train::AdamW::Options o;
        o.lr = 0.01;
        o.weightDecay = 0.05;
        train::AdamW mine({{"w", w1, 1.0}, {"b", b1, 1.0}}, o);
        torch::optim::AdamW ref({w2, b2}, torch::optim::AdamWOptions(0.01).weight_decay(0.05));
        for (int s = 0; s < 7; ++s) {
            mine.zeroGrad();
            ((x.mm(w1) + b1 - y).pow(2).mean()).backward();
            mine.step();
            ref.zero_grad();
            ((x.mm(w2) + b2 - y).pow(2).mean()).backward();
            ref.step();
        }
        QVERIFY(testing::maxDiff(w1, w2) < 1e-6);
        QVERIFY(testing::maxDiff(b1, b2) < 1e-6);
        QVERIFY(testing::maxDiff(w1, w0) > 1e-3);
        // State round trip: a fresh optimizer with the loaded state takes the same next step.
        auto w3 = w1.detach().clone().requires_grad_(), b3 = b1.detach().clone().requires_grad_();
        train::AdamW again({{"w", w3, 1.0}, {"b", b3, 1.0}}, o);
        again.loadState(mine.state(), "test");
        QCOMPARE(again.steps(), int64_t(7));
        for (auto* pair : {&mine, &again}) {
            auto& opt = *pair;
            opt.zeroGrad();
            auto& w = opt.params()[0].tensor;
            auto& b = opt.params()[1].tensor;
            ((x.mm(w) + b - y).pow(2).mean()).backward();
            opt.step();
        }
        QVERIFY(torch::equal(w1, w3));
        auto bad = mine.state();
        bad.erase("exp_avg.w");
        QVERIFY(contains(errorOf([&] { again.loadState(bad, "file.h5"); }), {"file.h5", "exp_avg.w"}));
    }

    void scheduleHelpers() {
        QCOMPARE(train::stepDecay(1.0, 0.1, 10, 9), 1.0);
        QVERIFY(std::abs(train::stepDecay(1.0, 0.1, 10, 10) - 0.1) < 1e-12);
        QVERIFY(std::abs(train::stepDecay(1.0, 0.1, 10, 25) - 0.01) < 1e-12);
        QCOMPARE(train::stepDecay(2.0, 0.1, 0, 1000), 2.0);
        auto g = torch::zeros({2}, torch::requires_grad());
        (g * torch::tensor({3.f, 4.f})).sum().backward();   // grad (3, 4), norm 5
        const double n = train::clipGradNorm({{"g", g, 1.0}}, 1.0);
        QVERIFY(std::abs(n - 5.0) < 1e-6);
        QVERIFY(std::abs(g.grad().norm().item<double>() - 1.0) < 1e-5);
        // Data order: each epoch visits every index once; epochs differ.
        std::set<int64_t> e0, e1;
        std::vector<int64_t> o0, o1;
        for (int64_t p = 0; p < 20; ++p) {
            e0.insert(train::shuffledIndex(9, 20, p));
            e1.insert(train::shuffledIndex(9, 20, 20 + p));
            o0.push_back(train::shuffledIndex(9, 20, p));
            o1.push_back(train::shuffledIndex(9, 20, 20 + p));
        }
        QCOMPARE(int(e0.size()), 20);
        QCOMPARE(int(e1.size()), 20);
        QVERIFY(o0 != o1);
    }

    void lossDecreases() {
        QTemporaryDir dir;
        const std::string out = dir.path().toStdString() + "/run";
        auto c = tinyConfig();
        c.model.fineStage = false;   // coarse stage only
        c.coarseSteps = 40;
        c.lr = 1e-3;
        c.lrBackbone = 1e-3;
        c.clipMaxNorm = 1.0;
        c.augmentEnabled = false;
        c.model.dropout = 0.0;
        train::Control control;
        int64_t calls = 0;
        trainLetr(c, "procedural:2:0:64x64", out, false, control, [&](const train::Progress& p) {
            ++calls;
            QVERIFY(p.totalSteps == 40);
        });
        QVERIFY(calls >= 40);
        auto log = RunLog::load(out + "/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        const auto& s = log.series.at("loss/total");
        QCOMPARE(int(s.size()), 40);
        double first = 0, last = 0;
        for (int i = 0; i < 5; ++i) {
            first += s.values[size_t(i)];
            last += s.values[s.size() - 1 - size_t(i)];
        }
        QVERIFY2(last < 0.8 * first, qPrintable(QString("first %1, last %2").arg(first / 5).arg(last / 5)));
        // Every declared series is in the log config and the file; per-layer series have rows.
        for (const auto& name : letrSeriesNames(c)) QVERIFY(log.series.count(name));
        QCOMPARE(int(log.series.at("loss/cls_layer_1").size()), 40);
        QCOMPARE(log.config["series"].size(), letrSeriesNames(c).size());
        // model.h5 is a normal LETR checkpoint.
        auto m = loadLetr(out + "/model.h5");
        QCOMPARE(m->config().numQueries, int64_t(12));
        QVERIFY(!m->config().fineStage);
    }

    // train_backbone_bn (default on): the coarse stage trains the backbone's batch norm (its
    // running statistics and affine move away from identity); off: DETR's frozen identity stays.
    void backboneBatchNormTrainsOnlyWhenAsked() {
        for (const bool on : {true, false}) {
            QTemporaryDir dir;
            const std::string out = dir.path().toStdString() + "/run";
            auto c = tinyConfig();
            c.model.fineStage = false;
            c.coarseSteps = 3;
            c.trainBackboneBn = on;
            QCOMPARE(LetrTrainConfig::fromJson(c.toJson()).trainBackboneBn, on);
            train::Control control;
            trainLetr(c, "procedural:2:0:64x64", out, false, control, [](const train::Progress&) {});
            const auto t = modelTensors(out + "/model.h5");
            const double meanMoved = t.at("backbone.0.body.layer2.0.bn1.running_mean").abs().max().item<double>();
            const double weightMoved = (t.at("backbone.0.body.bn1.weight") - 1.0).abs().max().item<double>();
            if (on) {
                QVERIFY2(meanMoved > 1e-4, qPrintable(QString::number(meanMoved)));
                QVERIFY2(weightMoved > 0.0, qPrintable(QString::number(weightMoved)));
            } else {
                QCOMPARE(meanMoved, 0.0);
                QCOMPARE(weightMoved, 0.0);
            }
        }
    }

    void resumeEqualsUninterrupted() {
        QTemporaryDir dir;
        const std::string a = dir.path().toStdString() + "/a", b = dir.path().toStdString() + "/b";
        auto c = tinyConfig();
        c.coarseSteps = 4;
        c.fineSteps = 3;
        c.focalSteps = 2;
        c.checkpointEvery = 3;
        c.model.dropout = 0.1;   // dropout draws must repeat too
        train::Control ca;
        trainLetr(c, "procedural:5:2:64x64", a, false, ca, {});
        // Interrupted at step 5 (inside the fine phase), then resumed.
        train::Control cb;
        trainLetr(c, "procedural:5:2:64x64", b, false, cb, [&](const train::Progress& p) {
            if (p.step >= 5) cb.requestStop();
        });
        QVERIFY(!std::filesystem::exists(b + "/model.h5"));
        QCOMPARE(train::loadTrainState(b + "/checkpoint.h5", "letr-train").meta["step"].get<int64_t>(), int64_t(5));
        auto stopped = RunLog::load(b + "/run.h5");
        QCOMPARE(stopped.status, RunStatus::Stopped);
        QVERIFY(contains(stopped.statusMessage, {"stopped at step 5"}));
        train::Control cr;
        trainLetr(c, "procedural:5:2:64x64", b, true, cr, {});
        auto ta = modelTensors(a + "/model.h5"), tb = modelTensors(b + "/model.h5");
        QCOMPARE(ta.size(), tb.size());
        double worst = 0;
        for (const auto& [k, v] : ta) worst = std::max(worst, testing::maxDiff(v, tb.at(k)));
        QVERIFY2(worst == 0.0, qPrintable(QString("max diff %1").arg(worst)));
        // The fine stage trained, the coarse stage stayed frozen after step 4: fine params
        // differ from a coarse-only run's initialization, and the resumed run log has all rows.
        auto log = RunLog::load(b + "/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(int(log.series.at("loss/total").size()), 9);
        QCOMPARE(log.series.at("phase").values.back(), 2.0);
    }

    void validationAndMidRunCheckpoints() {
        QTemporaryDir dir;
        const std::string a = dir.path().toStdString() + "/a", b = dir.path().toStdString() + "/b";
        auto c = tinyConfig();
        c.coarseSteps = 3;
        c.fineSteps = 2;
        c.checkpointEvery = 100;
        c.valEvery = 2;
        c.valImages = 3;
        c.model.dropout = 0.1;
        const std::string data = "procedural:5:2:64x64";
        const std::string valSpec = "procedural:3:1002:64x64";   // held out: seed 2 + 1000
        QCOMPARE(letrValidationSpec(c, "procedural:5:2:64x64 (5 images)"), valSpec);
        QCOMPARE(letrValidationSpec(c, "wireframe/train.json (20000 images)"), std::string("procedural:3:1000:256x256"));
        auto own = c;
        own.valData = "procedural:4:9";
        QCOMPARE(letrValidationSpec(own, "procedural:5:2:64x64 (5 images)"), std::string("procedural:4:9"));
        train::Control ca;
        trainLetr(c, data, a, false, ca, {});
        auto la = RunLog::load(a + "/run.h5");
        QVERIFY(contains(la.config["val_data_description"].get<std::string>(), {valSpec}));
        // Every 2 steps and at the end of each phase (3: coarse, 5: fine).
        for (const char* n : {"val/sAP10", "val/sAP15", "val/APH"}) {
            const auto& sv = la.series.at(n);
            QCOMPARE(sv.steps, std::vector<int64_t>({2, 3, 4, 5}));
            for (double v : sv.values) QVERIFY2(v >= 0 && v <= 100, n);
        }
        // The last value is the final model's metric, computed another way.
        auto fa = loadLetr(a + "/model.h5");
        const auto ref = referenceVal(*fa, valSpec, "fine_2");
        QVERIFY(std::abs(la.series.at("val/sAP10").values.back() - 100 * ref.sAPAt(10)) < 1e-9);
        QVERIFY(std::abs(la.series.at("val/APH").values.back() - 100 * ref.APH) < 1e-9);

        // Stopped in the coarse phase: checkpoint.h5 loads as the coarse model being trained,
        // and its metric is the val row of that step.
        train::Control cb;
        trainLetr(c, data, b, false, cb, [&](const train::Progress& p) {
            if (p.step >= 2) cb.requestStop();
        });
        QVERIFY(!std::filesystem::exists(b + "/model.h5"));
        auto mid = loadLetr(b + "/checkpoint.h5");
        QVERIFY(!mid->config().fineStage);
        QCOMPARE(mid->config().numQueries, int64_t(12));
        const auto st = train::loadTrainState(b + "/checkpoint.h5", "letr-train");
        for (const auto& p : mid->named_parameters()) QVERIFY(torch::equal(p.value(), st.model.at(p.key())));
        const auto midRef = referenceVal(*mid, valSpec, "coarse_2");
        auto lb = RunLog::load(b + "/run.h5");
        // The loaded checkpoint gives the trainer's model's outputs: all its val metrics agree
        // (APH > 0 here, so the comparison is not of two zeros; an untrained model's sAP is 0).
        QVERIFY(std::abs(lb.series.at("val/APH").values.at(0) - 100 * midRef.APH) < 1e-9);
        QVERIFY(std::abs(lb.series.at("val/sAP10").values.at(0) - 100 * midRef.sAPAt(10)) < 1e-9);
        QVERIFY(midRef.APH > 0);
        QCOMPARE(lb.series.at("val/sAP15").steps, std::vector<int64_t>({2}));
        QVERIFY(std::abs(lb.series.at("val/sAP15").values[0] - 100 * midRef.sAPAt(15)) < 1e-9);
        QCOMPARE(lb.series.at("val/sAP15").values[0], la.series.at("val/sAP15").values[0]);

        // Resume with validation on still equals the uninterrupted run, val rows included.
        train::Control cr;
        trainLetr(c, data, b, true, cr, {});
        auto ta = modelTensors(a + "/model.h5"), tb = modelTensors(b + "/model.h5");
        double worst = 0;
        for (const auto& [k, v] : ta) worst = std::max(worst, testing::maxDiff(v, tb.at(k)));
        QVERIFY2(worst == 0.0, qPrintable(QString("max diff %1").arg(worst)));
        lb = RunLog::load(b + "/run.h5");
        for (const char* n : {"val/sAP10", "val/sAP15", "val/APH", "loss/total"}) {
            QCOMPARE(lb.series.at(n).steps, la.series.at(n).steps);
            QCOMPARE(lb.series.at(n).values, la.series.at(n).values);
        }
        // A fine-phase checkpoint loads as the two-stage model (here: the final weights).
        auto end = loadLetr(b + "/checkpoint.h5");
        QVERIFY(end->config().fineStage);
        auto fb = loadLetr(b + "/model.h5");
        auto pe = end->named_parameters();
        for (const auto& p : fb->named_parameters()) QVERIFY(torch::equal(p.value(), pe[p.key()]));

        // val_every 0: no val series; the val keys may change on resume.
        auto off = c;
        off.valEvery = 0;
        for (const auto& n : letrSeriesNames(off)) QVERIFY(n.rfind("val/", 0) != 0);
        trainLetr(off, data, b, true, cr, {});
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"val_images", 0}}, "c.json"); }),
                         {"c.json", "val_images"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"val_data", 3}}, "c.json"); }),
                         {"c.json", "val_data"}));
        auto bad = c;
        bad.valData = "procedural:x";
        QVERIFY(contains(errorOf([&] { trainLetr(bad, data, dir.path().toStdString() + "/x", false, cr, {}); }),
                         {"validation", "procedural:x"}));
    }

    void errors() {
        QTemporaryDir dir;
        const std::string out = dir.path().toStdString() + "/r";
        auto c = tinyConfig();
        c.coarseSteps = 1;
        c.fineSteps = 0;
        train::Control control;
        // --resume before the first checkpoint (a run killed early): starts from step 0 and
        // replaces the stale live log, which a killed writer left "running".
        {
            std::filesystem::create_directories(out);
            RunLog stale;   // status "running", like the log of a killed writer
            stale.series["stale"].append(7, 1.0, 1.0);
            stale.save(out + "/run.h5");
            trainLetr(c, "procedural:2:0:64x64", out, true, control, {});
        }
        {
            const RunLog fresh = RunLog::load(out + "/run.h5");
            QCOMPARE(fresh.status, RunStatus::Finished);
            QVERIFY(!fresh.series.count("stale"));
            QCOMPARE(fresh.series.at("loss/total").steps, std::vector<int64_t>({1}));
            std::filesystem::remove(out + "/model.h5");
            std::filesystem::remove(out + "/checkpoint.h5");
        }
        trainLetr(c, "procedural:2:0:64x64", out, false, control, {});
        auto d = c;
        d.lr = 3e-4;
        QVERIFY(contains(errorOf([&] { trainLetr(d, "procedural:2:0:64x64", out, true, control, {}); }),
                         {"checkpoint.h5", "different training config"}));
        QVERIFY(contains(errorOf([&] { trainLetr(c, "procedural:3:0:64x64", out, true, control, {}); }),
                         {"checkpoint.h5", "procedural:2:0:64x64"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"batch_sise", 2}}, "c.json"); }),
                         {"c.json", "batch_sise"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"batch_size", 0}}, "c.json"); }),
                         {"c.json", "batch_size"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"lr", "fast"}}, "c.json"); }), {"c.json", "lr"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"loss", {{"eos", 1}}}}, "c.json"); }),
                         {"c.json", "eos"}));
        QVERIFY(contains(errorOf([&] { trainLetr(c, "procedural:0", out, false, control, {}); }), {"procedural:0"}));
        // JSON round trip.
        auto j = c.toJson();
        QCOMPARE(LetrTrainConfig::fromJson(j).toJson(), j);
    }
};

QTEST_APPLESS_MAIN(TestLetrTrain)
#include "test_letr_train.moc"
