// LETR training: AdamW against LibTorch's torch::optim::AdamW, schedule helpers, data order,
// tiny training runs (the loss decreases; resume after a stop equals an uninterrupted run),
// the run log's series, config and resume errors.
#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/data/open.h"
#include "core/eval/letr_eval.h"
#include "core/io/checkpoint.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/models/letr/train.h"
#include "core/runlog.h"
#include "core/train/ema.h"
#include "core/train/optim.h"
#include "core/train/state.h"
#include "core/util/threads.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::letr;
using testing::contains;
using testing::errorOf;

namespace {

// Running statistics that make every frozen batch norm of the model a map other than the identity.
void randomBatchNormStatistics(LetrModel& model) {
    torch::NoGradGuard ng;
    for (auto& p : model.named_buffers())
        if (p.key().find("running_var") != std::string::npos) p.value().uniform_(0.5, 2.0);
        else if (p.key().find("running_mean") != std::string::npos) p.value().normal_(0, 0.2);
}

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
        // Facade or mixed training scenes: the held-out images are still rooms (the evaluation set's kind).
        QCOMPARE(letrValidationSpec(c, "procedural:5:2:64x64:mixed (5 images)"), valSpec);
        // Procedural rooms mixed with LSD-labelled photos: held out from the procedural part.
        QCOMPARE(letrValidationSpec(c, data::openLineDataset("mix:procedural:5:2:64x64+procedural:4:7:64x48")->describe()),
                 valSpec);
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
        // model.h5's display threshold: the score of the best sF10 point of that evaluation.
        QCOMPARE(fa->config().scoreThreshold, std::clamp(eval::maxFScoreThreshold(ref.curves.at(0)), 0.0, 0.99));

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

    // model.h5's display threshold (config "score_threshold") is the score where the final
    // model's sF10 on the validation images peaks. Checked on a validation set whose ground
    // truth is the starting model's own k best lines on one image, trained at lr ~0 with
    // frozen batch norm (the outputs stay put): the F-score peaks at P = R = 1, i.e. at the
    // k-th best line's score (k in 2..8: where the scores have their widest gap).
    void storedScoreThreshold() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.trainBackboneBn = false;
        c.lr = c.lrBackbone = 1e-12;
        c.coarseSteps = 1;
        c.fineSteps = 1;
        LetrModel start(c.model, 11);
        start.train(false);
        saveLetr(start, base + "/start.h5");
        const data::LineSample sample = data::openLineDataset("procedural:1:3:64x64")->get(0);
        cv::Mat bgr;
        cv::cvtColor(sample.image, bgr, cv::COLOR_RGB2BGR);
        QVERIFY(cv::imwrite(base + "/val.png", bgr));
        auto lines = runLetr(start, sample.image).lines(Stage::Fine, int(c.model.fineDecLayers - 1), 0.0f);
        std::sort(lines.begin(), lines.end(), [](const LetrLine& a, const LetrLine& b) { return a.score > b.score; });
        QVERIFY(lines.size() >= 9);
        size_t k = 2;   // not 1: the top score alone would not show the F-score's peak is found
        for (size_t i = 2; i <= 8; ++i)
            if (lines[i - 1].score - lines[i].score > lines[k - 1].score - lines[k].score) k = i;
        QVERIFY(lines[k - 1].score > lines[k].score + 1e-4);   // the k-th and the next are told apart
        qInfo("k %d: scores %g then %g", int(k), double(lines[k - 1].score), double(lines[k].score));
        nlohmann::json gt = nlohmann::json::array();
        for (size_t i = 0; i < k; ++i) gt.push_back({lines[i].x1, lines[i].y1, lines[i].x2, lines[i].y2});
        std::ofstream(base + "/val.json")
            << nlohmann::json::array({{{"filename", "val.png"}, {"width", 64}, {"height", 64}, {"lines", gt}}}).dump();
        c.init = base + "/start.h5";
        c.valData = base + "/val.json";
        c.valImages = 1;
        c.valEvery = 1;
        train::Control ct;
        trainLetr(c, "procedural:2:4:64x64", base + "/run", false, ct, {});
        const double stored = loadLetr(base + "/run/model.h5")->config().scoreThreshold;
        QVERIFY2(std::abs(stored - double(lines[k - 1].score)) < 1e-5,
                 qPrintable(QString("stored %1, best score %2 of %3").arg(stored).arg(lines[k - 1].score).arg(k)));
        // Without validation nothing is stored.
        c.valEvery = 0;
        trainLetr(c, "procedural:2:4:64x64", base + "/noval", false, ct, {});
        QCOMPARE(loadLetr(base + "/noval/model.h5")->config().scoreThreshold, 0.0);
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
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"loss", {{"quality_tau", -1}}}}, "c.json"); }),
                         {"c.json", "quality_tau"}));
        QVERIFY(contains(errorOf([&] {
                             LetrTrainConfig::fromJson({{"loss", {{"quality_tau", 0.05}}}, {"focal_steps", 10}}, "c.json");
                         }),
                         {"quality_tau", "focal_steps"}));
        // The quality target: off adds no key (older runs' configs stay equal), on round-trips.
        QVERIFY(!c.toJson()["loss"].contains("quality_tau"));
        QCOMPARE(LetrTrainConfig::fromJson({{"loss", {{"quality_tau", 0.05}}}}).toJson()["loss"]["quality_tau"].get<double>(), 0.05);
        // JSON round trip.
        auto j = c.toJson();
        QCOMPARE(LetrTrainConfig::fromJson(j).toJson(), j);
        // Dense auxiliary supervision: off adds no key (older checkpoints' configs stay equal);
        // bad values name the key.
        QVERIFY(!j.contains("aux"));
        auto ja = j;
        ja["aux"] = {{"enabled", true}, {"stride", 16}, {"coef", 0.5}};
        QCOMPARE(LetrTrainConfig::fromJson(ja).toJson()["aux"]["stride"].get<int64_t>(), int64_t(16));
        QCOMPARE(LetrTrainConfig::fromJson(LetrTrainConfig::fromJson(ja).toJson()).toJson(), LetrTrainConfig::fromJson(ja).toJson());
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"aux", {{"enabled", true}, {"stride", 5}}}}, "c.json"); }),
                         {"c.json", "aux.stride"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"aux", {{"radius", 1}}}}, "c.json"); }),
                         {"c.json", "radius"}));
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson({{"denoise", {{"enabled", true}, {"noise", 5}}}}, "c.json"); }),
                         {"c.json", "denoise.noise"}));
    }

    // Dense targets against a scalar re-derivation: for every cell centre the nearest segment by
    // an explicit loop, its distance, the doubled angle, the junction Gaussian and the first
    // endpoint in each cell.
    void denseTargetsMatchScalarReference() {
        DenseAuxConfig cfg;
        cfg.stride = 8;
        cfg.lineRadius = 1.5;
        cfg.junctionSigma = 0.8;
        // A hand case first: a horizontal segment on row 1's centre line, from x = 4 to 60 px.
        {
            auto t = denseTargets(torch::tensor({{4.0, 12.0, 60.0, 12.0}}), 3, 9, cfg);
            QCOMPARE(t.line[1][3].item<double>(), 1.0);                // on the segment
            QVERIFY(std::abs(t.line[0][3].item<double>() - (1 - 1 / 1.5)) < 1e-6);   // one cell away
            QCOMPARE(t.line[1][7].item<double>(), 1.0);                // centre (60, 12): the end point
            QVERIFY(std::abs(t.line[1][8].item<double>() - (1 - 1 / 1.5)) < 1e-6);   // centre 8 px past it
            QVERIFY(std::abs(t.direction[0][1][3].item<double>() - 1.0) < 1e-6);   // cos 0
            QVERIFY(std::abs(t.direction[1][1][3].item<double>()) < 1e-6);
            QVERIFY(t.offsetMask[1][0].item<bool>());                  // endpoint (4, 12) = centre of cell (1, 0)
            QVERIFY(std::abs(t.offset[0][1][0].item<double>()) < 1e-6);
            QVERIFY(std::abs(t.junction[1][0].item<double>() - 1.0) < 1e-6);
            QCOMPARE(int(t.offsetMask.sum().item<int64_t>()), 2);      // (60, 12): cell (1, 7)
            QVERIFY(std::abs(t.offset[0][1][7].item<double>() - 0.0) < 1e-6);
        }
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> U(-10, 110);
        const int64_t gh = 9, gw = 13, M = 6;
        std::vector<std::array<double, 4>> segs;
        for (int64_t m = 0; m < M; ++m) segs.push_back({U(rng), U(rng), U(rng), U(rng)});
        segs[2] = {40, 40, 40, 40};   // a point
        auto lines = torch::zeros({M, 4}, torch::kFloat64);
        for (int64_t m = 0; m < M; ++m)
            for (int k = 0; k < 4; ++k) lines[m][k] = segs[size_t(m)][size_t(k)];
        auto t = denseTargets(lines, gh, gw, cfg);
        std::vector<std::vector<bool>> taken(size_t(gh), std::vector<bool>(size_t(gw), false));
        std::vector<std::vector<std::array<double, 2>>> off(size_t(gh), std::vector<std::array<double, 2>>(size_t(gw), {0.0, 0.0}));
        for (const auto& s : segs)
            for (int e = 0; e < 2; ++e) {
                const double x = s[size_t(2 * e)] / 8, y = s[size_t(2 * e + 1)] / 8;
                const int j = int(std::floor(x)), i = int(std::floor(y));
                if (i < 0 || j < 0 || i >= gh || j >= gw || taken[size_t(i)][size_t(j)]) continue;
                taken[size_t(i)][size_t(j)] = true;
                off[size_t(i)][size_t(j)] = {x - j - 0.5, y - i - 0.5};
            }
        double worst = 0;
        for (int64_t i = 0; i < gh; ++i)
            for (int64_t j = 0; j < gw; ++j) {
                const double px = (double(j) + 0.5) * 8, py = (double(i) + 0.5) * 8;   // pixels
                double best = 1e300, angle = 0, junction = 0;
                for (const auto& s : segs) {
                    // Distance in pixels to the closest point, by sampling the segment finely
                    // and refining (independent of the projection formula).
                    double dmin = 1e300;
                    for (int k = 0; k <= 20000; ++k) {
                        const double u = k / 20000.0;
                        const double qx = s[0] + u * (s[2] - s[0]), qy = s[1] + u * (s[3] - s[1]);
                        dmin = std::min(dmin, std::hypot(px - qx, py - qy));
                    }
                    if (dmin < best) {
                        best = dmin;
                        angle = std::atan2(s[3] - s[1], s[2] - s[0]);
                    }
                    for (int e = 0; e < 2; ++e) {
                        const double dx = (px - s[size_t(2 * e)]) / 8, dy = (py - s[size_t(2 * e + 1)]) / 8;
                        junction = std::max(junction, std::exp(-(dx * dx + dy * dy) / (2 * 0.8 * 0.8)));
                    }
                }
                const double d = best / 8;
                worst = std::max(worst, std::abs(t.line[i][j].item<double>() - std::max(0.0, 1 - d / 1.5)));
                worst = std::max(worst, std::abs(t.junction[i][j].item<double>() - junction));
                QCOMPARE(t.dirMask[i][j].item<bool>(), d < 1.5);
                if (d < 1.5 && d > 1e-3) {
                    worst = std::max(worst, std::abs(t.direction[0][i][j].item<double>() - std::cos(2 * angle)));
                    worst = std::max(worst, std::abs(t.direction[1][i][j].item<double>() - std::sin(2 * angle)));
                }
                QCOMPARE(t.offsetMask[i][j].item<bool>(), bool(taken[size_t(i)][size_t(j)]));
                if (taken[size_t(i)][size_t(j)]) {
                    worst = std::max(worst, std::abs(t.offset[0][i][j].item<double>() - off[size_t(i)][size_t(j)][0]));
                    worst = std::max(worst, std::abs(t.offset[1][i][j].item<double>() - off[size_t(i)][size_t(j)][1]));
                }
            }
        QVERIFY2(worst < 1e-3, qPrintable(QString("worst %1").arg(worst)));
        // No lines: empty maps and masks.
        auto e = denseTargets(torch::zeros({0, 4}), 4, 5, cfg);
        QCOMPARE(e.line.sum().item<double>(), 0.0);
        QVERIFY(!e.dirMask.any().item<bool>() && !e.offsetMask.any().item<bool>());
    }

    // The dense loss against the formula written out: BCE with logits, masked L1, tanh / 2
    // offsets; its gradient reaches the head and the features.
    void denseLossMatchesFormula() {
        torch::manual_seed(3);
        DenseAuxConfig cfg;
        auto t = denseTargets(torch::tensor({{3.0, 5.0, 50.0, 30.0}, {10.0, 40.0, 10.0, 2.0}}), 6, 8, cfg);
        auto pred = torch::randn({6, 6, 8}, torch::kFloat64).requires_grad_(true);
        auto l = denseLoss(pred, t);
        auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
        double line = 0, junction = 0, dir = 0, off = 0, nd = 0, no = 0;
        for (int64_t i = 0; i < 6; ++i)
            for (int64_t j = 0; j < 8; ++j) {
                const double x0 = pred[0][i][j].item<double>(), x1 = pred[1][i][j].item<double>();
                const double y0 = t.line[i][j].item<double>(), y1 = t.junction[i][j].item<double>();
                line -= y0 * std::log(sig(x0)) + (1 - y0) * std::log(1 - sig(x0));
                junction -= y1 * std::log(sig(x1)) + (1 - y1) * std::log(1 - sig(x1));
                if (t.dirMask[i][j].item<bool>()) {
                    nd += 2;
                    for (int c = 0; c < 2; ++c)
                        dir += std::abs(pred[2 + c][i][j].item<double>() - t.direction[c][i][j].item<double>());
                }
                if (t.offsetMask[i][j].item<bool>()) {
                    no += 2;
                    for (int c = 0; c < 2; ++c)
                        off += std::abs(std::tanh(pred[4 + c][i][j].item<double>()) / 2 - t.offset[c][i][j].item<double>());
                }
            }
        QVERIFY(nd > 0 && no > 0);
        QVERIFY(std::abs(l.line - line / 48) < 1e-6);
        QVERIFY(std::abs(l.junction - junction / 48) < 1e-6);
        QVERIFY(std::abs(l.direction - dir / nd) < 1e-6);
        QVERIFY(std::abs(l.offset - off / no) < 1e-6);
        QVERIFY(std::abs(l.total.item<double>() - (line / 48 + junction / 48 + dir / nd + off / no)) < 1e-6);
        l.total.backward();
        QVERIFY(pred.grad().abs().sum().item<double>() > 0);
        QVERIFY(contains(errorOf([&] { denseLoss(torch::zeros({6, 5, 8}), t); }), {"shape"}));
        // Through the head: gradients reach both feature maps.
        DenseLineHead head(16, 32, cfg, 0);
        auto c4 = torch::randn({16, 4, 5}).requires_grad_(true), c5 = torch::randn({32, 2, 3}).requires_grad_(true);
        auto b = denseBatchLoss(head, {c4}, {c5}, {{{64, 80}}}, {torch::tensor({{0.1f, 0.2f, 0.8f, 0.2f}})}, cfg);
        b.total.backward();
        QVERIFY(c4.grad().abs().sum().item<double>() > 0 && c5.grad().abs().sum().item<double>() > 0);
        // The position term: each cell's centre over the 64 x 80 input (C4 cells of 16 px, C5 of 32).
        {
            torch::NoGradGuard ng;
            auto p4 = head->position4(c4), p5 = head->position5(c5);
            double e4 = 0, e5 = 0;
            for (int64_t i = 0; i < 4; ++i)
                for (int64_t j = 0; j < 5; ++j)
                    e4 += std::abs(p4[0][i][j].item<double>() - (j + 0.5) * 16 / 80) + std::abs(p4[1][i][j].item<double>() - (i + 0.5) * 16 / 64);
            for (int64_t i = 0; i < 2; ++i)
                for (int64_t j = 0; j < 3; ++j)
                    e5 += std::abs(p5[0][i][j].item<double>() - (j + 0.5) * 32 / 80) + std::abs(p5[1][i][j].item<double>() - (i + 0.5) * 32 / 64);
            QVERIFY2(std::abs(b.position - (e4 / 40 + e5 / 12)) < 1e-5, qPrintable(QString("%1 vs %2").arg(b.position).arg(e4 / 40 + e5 / 12)));
            auto mapsOnly = cfg;
            mapsOnly.positionCoef = 0;
            auto b0 = denseBatchLoss(head, {c4}, {c5}, {{{64, 80}}}, {torch::tensor({{0.1f, 0.2f, 0.8f, 0.2f}})}, mapsOnly);
            QVERIFY(std::abs(b.total.item<double>() - b0.total.item<double>() - b.position) < 1e-5);
            QCOMPARE(b0.position, 0.0);
        }
        QCOMPARE(head->forward(c4, c5, 8, 10).sizes(), torch::IntArrayRef({6, 8, 10}));
    }

    // Query denoising: the learned entities cannot see the extra ones (their outputs equal a run
    // without them), the extra ones decode where their queries point, and the noise, the
    // embedding and the loss match their definitions computed another way.
    void denoisingQueries() {
        LetrConfig mc = tinyConfig().model;
        mc.dropout = 0.0;
        LetrModel model(mc, 5);
        model.eval();
        torch::manual_seed(1);
        std::vector<torch::Tensor> images{torch::randn({3, 64, 80}), torch::randn({3, 72, 64})};
        LetrForwardOptions plain;
        plain.coarseOnly = true;
        auto a = model.forward(images, plain);
        LetrForwardOptions withDn = plain;
        withDn.denoiseQueryPos = torch::randn({2, 5, mc.hiddenDim});
        auto b = model.forward(images, withDn);
        QVERIFY(testing::maxDiff(a.stages[0].lines, b.stages[0].lines) < 1e-5);
        QVERIFY(testing::maxDiff(a.stages[0].logits, b.stages[0].logits) < 1e-5);
        QVERIFY(!a.stages[0].dnLines.defined());
        QCOMPARE(b.stages[0].dnLines.sizes(), torch::IntArrayRef({mc.coarseDecLayers, 2, 5, 4}));
        QCOMPARE(b.stages[0].dnLogits.sizes(), torch::IntArrayRef({mc.coarseDecLayers, 2, 5, 2}));
        // The extra entities do see the learned ones: changing the learned queries moves them.
        LetrModel other(mc, 5);
        other.eval();
        {
            torch::NoGradGuard ng;
            other.queryEmbed()->weight.add_(1.0);
        }
        auto c = other.forward(images, withDn);
        QVERIFY(testing::maxDiff(b.stages[0].dnLines, c.stages[0].dnLines) > 1e-6);
        QVERIFY(contains(errorOf([&] {
                             LetrForwardOptions badDn = plain;
                             badDn.denoiseQueryPos = torch::zeros({2, 5, mc.hiddenDim + 1});
                             model.forward(images, badDn);
                         }),
                         {"denoising queries"}));

        // Noise: within noise * max(length, 0.05) of the line (before clamping), deterministic,
        // capped at max_queries; noise 0 gives the lines themselves.
        DenoiseConfig dc;
        dc.noise = 0.3;
        std::vector<torch::Tensor> tg{torch::tensor({{0.1f, 0.1f, 0.5f, 0.1f}, {0.9f, 0.2f, 0.9f, 0.22f}, {0.3f, 0.3f, 0.6f, 0.7f}}),
                                      torch::zeros({0, 4}), torch::tensor({{0.5f, 0.5f, 0.2f, 0.8f}})};
        auto rngsOf = [] { return std::vector<std::mt19937_64>{std::mt19937_64(1), std::mt19937_64(2), std::mt19937_64(3)}; };
        auto r1 = rngsOf(), r2 = rngsOf();
        auto d1 = makeDenoiseBatch(tg, dc, r1), d2 = makeDenoiseBatch(tg, dc, r2);
        QCOMPARE(d1.noised.sizes(), torch::IntArrayRef({3, 3, 4}));
        QCOMPARE(testing::maxDiff(d1.noised, d2.noised), 0.0);
        QCOMPARE(d1.valid.sum().item<int64_t>(), int64_t(4));
        QVERIFY(!d1.valid[1].any().item<bool>() && d1.valid[2][0].item<bool>() && !d1.valid[2][1].item<bool>());
        for (int64_t q = 0; q < 3; ++q) {
            auto l = tg[0][q];
            const double len = std::hypot((l[2] - l[0]).item<double>(), (l[3] - l[1]).item<double>());
            const double bound = 0.3 * std::max(len, 0.05) + 1e-6;
            QVERIFY((d1.noised[0][q] - l).abs().max().item<double>() <= bound);
            QCOMPARE(testing::maxDiff(d1.target[0][q], l), 0.0);
        }
        QVERIFY(testing::maxDiff(d1.noised[0], tg[0]) > 1e-3);   // it is noised
        QVERIFY(d1.noised.min().item<double>() >= 0 && d1.noised.max().item<double>() <= 1);
        dc.noise = 0;
        dc.maxQueries = 2;
        auto r3 = rngsOf();
        auto d3 = makeDenoiseBatch(tg, dc, r3);
        QCOMPARE(d3.noised.size(1), int64_t(2));
        QCOMPARE(testing::maxDiff(d3.noised[0], tg[0].slice(0, 0, 2)), 0.0);

        // The embedding: DETR's sine features of each coordinate.
        auto e = sineLineEmbedding(torch::tensor({{0.25f, 0.5f, 0.75f, 1.0f}}), 8);
        QCOMPARE(e.sizes(), torch::IntArrayRef({1, 32}));
        for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 8; ++i) {
                const double v = (k + 1) * 0.25 * 2 * M_PI / std::pow(10000.0, 2.0 * (i / 2) / 8.0);
                const double want = i % 2 == 0 ? std::sin(v) : std::cos(v);
                QVERIFY(std::abs(e[0][k * 8 + i].item<double>() - want) < 1e-5);
            }

        // The loss against loops over the entries.
        torch::manual_seed(4);
        auto logits = torch::randn({2, 3, 3, 2}, torch::kFloat64), lines = torch::rand({2, 3, 3, 4}, torch::kFloat64);
        LetrLossConfig lc;
        auto dl = denoiseLoss(logits, lines, d1, lc, 4.0);
        for (int64_t l = 0; l < 2; ++l) {
            double cls = 0, l1 = 0;
            for (int64_t bb = 0; bb < 3; ++bb)
                for (int64_t q = 0; q < 3; ++q) {
                    if (!d1.valid[bb][q].item<bool>()) continue;
                    const double z0 = logits[l][bb][q][0].item<double>(), z1 = logits[l][bb][q][1].item<double>();
                    cls += -(z0 - std::log(std::exp(z0) + std::exp(z1)));
                    double direct = 0, swapped = 0;
                    for (int k = 0; k < 4; ++k) {
                        direct += std::abs(lines[l][bb][q][k].item<double>() - d1.target[bb][q][k].item<double>());
                        swapped += std::abs(lines[l][bb][q][k].item<double>() - d1.target[bb][q][(k + 2) % 4].item<double>());
                    }
                    l1 += std::min(direct, swapped);
                }
            QVERIFY(std::abs(dl.clsPerLayer[size_t(l)] - cls / 4) < 1e-6);
            QVERIFY(std::abs(dl.l1PerLayer[size_t(l)] - l1 / 4) < 1e-6);
        }
        QVERIFY(std::abs(dl.total.item<double>() - (dl.clsPerLayer[0] + dl.clsPerLayer[1] + 5 * (dl.l1PerLayer[0] + dl.l1PerLayer[1]))) < 1e-6);
    }

    // A run with the dense head: its series are logged in the coarse phase, its weights are in
    // checkpoint.h5 (aux.*) but not in model.h5, it changes the backbone's training, and a
    // stopped and resumed run equals an uninterrupted one.
    void denseAuxTrainingRun() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.coarseSteps = 3;
        c.fineSteps = 2;
        c.checkpointEvery = 2;
        c.aux.enabled = true;
        c.aux.channels = 8;
        c.denoise.enabled = true;
        train::Control ca;
        trainLetr(c, "procedural:4:3:64x64", base + "/a", false, ca, {});
        auto log = RunLog::load(base + "/a/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        for (const auto& name : letrSeriesNames(c)) QVERIFY(log.series.count(name));
        QCOMPARE(log.series.at("loss/aux").steps, std::vector<int64_t>({1, 2, 3}));
        QCOMPARE(int(log.series.at("loss/total").size()), 5);
        const auto& aux = log.series.at("loss/aux").values;
        QVERIFY(aux[0] > 0 && std::isfinite(aux[0]));
        const auto& junction = log.series.at("loss/aux_junction").values;
        QVERIFY2(junction[0] > 0 && junction[0] < 2, qPrintable(QString::number(junction[0])));
        // loss/total = LETR's loss + the weighted dense loss.
        auto ck = train::loadTrainState(base + "/a/checkpoint.h5", "letr-train");
        QVERIFY(!ck.aux.empty());
        QVERIFY(ck.aux.count("dense.out.weight"));
        QVERIFY(ck.aux.count("denoise.fc1.weight"));
        QCOMPARE(log.series.at("loss/dn").steps, std::vector<int64_t>({1, 2, 3}));
        QVERIFY(log.series.at("loss/dn_l1").values[0] > 0);
        auto m = loadCheckpoint(base + "/a/model.h5");
        for (const auto& [k, v] : m.tensors) QVERIFY2(k.find("aux") == std::string::npos && k.find("lateral") == std::string::npos, k.c_str());
        QVERIFY(loadLetr(base + "/a/model.h5") != nullptr);
        QVERIFY(loadLetr(base + "/a/checkpoint.h5") != nullptr);
        // Without the head and the denoising queries the backbone trains differently.
        auto plain = c;
        plain.aux.enabled = false;
        plain.denoise.enabled = false;
        train::Control cp;
        trainLetr(plain, "procedural:4:3:64x64", base + "/p", false, cp, {});
        const auto ta = modelTensors(base + "/a/model.h5"), tp = modelTensors(base + "/p/model.h5");
        QVERIFY(testing::maxDiff(ta.at("backbone.0.body.conv1.weight"), tp.at("backbone.0.body.conv1.weight")) > 0);
        // Stopped at step 2 (a checkpoint in the coarse phase), resumed: identical weights.
        train::Control cb;
        trainLetr(c, "procedural:4:3:64x64", base + "/b", false, cb, [&](const train::Progress& p) {
            if (p.step >= 2) cb.requestStop();
        });
        QVERIFY(!std::filesystem::exists(base + "/b/model.h5"));
        train::Control cr;
        trainLetr(c, "procedural:4:3:64x64", base + "/b", true, cr, {});
        const auto tb = modelTensors(base + "/b/model.h5");
        double worst = 0;
        for (const auto& [k, v] : ta) worst = std::max(worst, testing::maxDiff(v, tb.at(k)));
        QVERIFY2(worst == 0.0, qPrintable(QString("max diff %1").arg(worst)));
        const auto ra = train::loadTrainState(base + "/a/checkpoint.h5", "letr-train"),
                   rb = train::loadTrainState(base + "/b/checkpoint.h5", "letr-train");
        for (const auto& [k, v] : ra.aux) QCOMPARE(testing::maxDiff(v, rb.aux.at(k)), 0.0);
    }

    // The weight average against its closed form, computed here in double precision:
    // sum_k d^(n-k) (1 - d) w_k / (1 - d^n) over the weights w_1..w_n after the reset; integer
    // buffers are copied; the state round-trips and is checked against the module.
    void weightAverageMatchesFormula() {
        torch::manual_seed(3);
        torch::nn::Sequential m(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
        train::WeightEma ema(0.3);
        ema.reset(*m);
        std::map<std::string, torch::Tensor> sum;   // sum_k d^(n-k) w_k
        std::map<std::string, torch::Tensor> last;
        const double D = 0.3;
        for (int n = 0; n < 6; ++n) {
            const double dn = std::pow(D, n);
            QVERIFY(std::abs(ema.nextDecay() - D * (1 - dn) / (1 - dn * D)) < 1e-12);
            torch::NoGradGuard ng;
            for (auto& p : m->parameters()) p.add_(torch::randn_like(p));
            for (auto& b : m->buffers())
                if (b.is_floating_point()) b.add_(torch::rand_like(b)); else b.add_(1);
            ema.update(*m);
            for (const auto& [k, v] : train::moduleTensors(*m)) {
                last[k] = v.to(torch::kFloat64);
                sum[k] = sum.count(k) ? D * sum[k] + last[k] : last[k];
            }
        }
        std::map<std::string, torch::Tensor> expect;
        for (const auto& [k, v] : sum)
            expect[k] = last[k].is_floating_point() && k.find("num_batches") == std::string::npos
                            ? v * (1 - D) / (1 - std::pow(D, 6)) : last[k];
        QCOMPARE(ema.count(), int64_t(6));
        torch::nn::Sequential copy(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
        ema.copyTo(*copy);
        for (const auto& [k, v] : train::moduleTensors(*copy))
            QVERIFY2(testing::maxDiff(v.to(torch::kFloat64), expect.at(k)) < 1e-6, k.c_str());
        QCOMPARE(train::moduleTensors(*copy).at("1.num_batches_tracked").item<int64_t>(), int64_t(6));
        QVERIFY(testing::maxDiff(train::moduleTensors(*copy).at("0.weight"), train::moduleTensors(*m).at("0.weight")) > 1e-3);
        // State round trip: the same next update.
        train::WeightEma again(0.3);
        again.loadState(*m, ema.state(), "test");
        QCOMPARE(again.count(), int64_t(6));
        ema.update(*m);
        again.update(*m);
        torch::nn::Sequential a(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2)), b(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
        ema.copyTo(*a);
        again.copyTo(*b);
        for (const auto& [k, v] : train::moduleTensors(*a)) QCOMPARE(testing::maxDiff(v, train::moduleTensors(*b).at(k)), 0.0);
        // Bad states and decays.
        auto bad = ema.state();
        bad.erase("0.bias");
        QVERIFY(contains(errorOf([&] { again.loadState(*m, bad, "ck.h5"); }), {"ck.h5", "0.bias"}));
        bad = ema.state();
        bad["0.weight"] = torch::zeros({5});
        QVERIFY(contains(errorOf([&] { again.loadState(*m, bad, "ck.h5"); }), {"ck.h5", "0.weight", "shape"}));
        bad = ema.state();
        bad.erase("count");
        QVERIFY(contains(errorOf([&] { again.loadState(*m, bad, "ck.h5"); }), {"ck.h5", "count"}));
        bad = ema.state();
        bad["extra"] = torch::zeros({1});
        QVERIFY(contains(errorOf([&] { again.loadState(*m, bad, "ck.h5"); }), {"ck.h5", "does not have"}));
        QVERIFY(contains(errorOf([] { train::WeightEma(1.0); }), {"decay"}));
        QVERIFY(contains(errorOf([] { train::WeightEma(0.0); }), {"decay"}));
    }

    // "ema_decay" in a training run: within a phase the average does not change the training
    // trajectory, so the coarse phase's averaged weights equal the formula applied to the
    // weights of a run without it, stopped after 1, 2 and 3 steps. The phase hands the
    // average on (checkpoint, fine phase, model.h5); a stop and resume inside the fine phase
    // equals an uninterrupted run, average included.
    void weightAveragingRun() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.coarseSteps = 3;
        c.fineSteps = 3;
        c.checkpointEvery = 10;
        c.lr = c.lrBackbone = 1e-3;
        const std::string data = "procedural:4:5:64x64";
        std::map<int, std::map<std::string, torch::Tensor>> w;   // plain run's weights after k steps
        for (int k = 1; k <= 3; ++k) {
            train::Control ck;
            const std::string out = base + "/plain" + std::to_string(k);
            trainLetr(c, data, out, false, ck, [&](const train::Progress& p) {
                if (p.step >= k) ck.requestStop();
            });
            const auto st = train::loadTrainState(out + "/checkpoint.h5", "letr-train");
            QCOMPARE(st.meta["step"].get<int64_t>(), int64_t(k));
            w[k] = st.model;
        }
        auto e = c;
        e.emaDecay = 0.2;
        std::map<std::string, torch::Tensor> expect;   // the closed form over w_1..w_3
        const double D = 0.2, norm = (1 - D) / (1 - std::pow(D, 3));
        for (const auto& [k, v] : w[3])
            expect[k] = v.is_floating_point() ? norm * (D * D * w[1].at(k).to(torch::kFloat64) +
                                                         D * w[2].at(k).to(torch::kFloat64) + v.to(torch::kFloat64))
                                              : v.to(torch::kFloat64);
        train::Control c3;
        trainLetr(e, data, base + "/ema3", false, c3, [&](const train::Progress& p) {
            if (p.step >= 3) c3.requestStop();
        });
        const auto s3 = train::loadTrainState(base + "/ema3/checkpoint.h5", "letr-train");
        // The stop lands at the fine phase's start, which copies the (averaged) coarse stage into
        // the fine one: compare the backbone and the coarse stage.
        double worst = 0;
        std::string worstKey;
        for (const auto& [k, v] : expect) {
            if (k.rfind("backbone.", 0) != 0 && k.rfind("letr.", 0) != 0) continue;
            const double diff = testing::maxDiff(s3.model.at(k).to(torch::kFloat64), v);
            if (diff > worst) worst = diff, worstKey = k;
        }
        QVERIFY2(worst < 1e-6, qPrintable(QString("max diff %1 (%2)").arg(worst).arg(worstKey.c_str())));
        QVERIFY(testing::maxDiff(s3.model.at("backbone.0.body.conv1.weight"), w[3].at("backbone.0.body.conv1.weight")) > 1e-6);
        QCOMPARE(s3.aux.at("ema.count").item<int64_t>(), int64_t(0));   // restarted for the fine phase

        // Validation reads the average: the val row of step 2 is the metric of the checkpoint's
        // average at that step, not of its trained weights.
        auto v = e;
        v.valEvery = 2;
        v.valImages = 3;
        train::Control cv;
        trainLetr(v, data, base + "/val", false, cv, [&](const train::Progress& p) {
            if (p.step >= 2) cv.requestStop();
        });
        const auto sv = train::loadTrainState(base + "/val/checkpoint.h5", "letr-train");
        auto raw = loadLetr(base + "/val/checkpoint.h5");   // the coarse model being trained
        const std::string valSpec = letrValidationSpec(v, "procedural:4:5:64x64 (4 images)");
        const auto rawRef = referenceVal(*raw, valSpec, "coarse_2");
        {
            torch::NoGradGuard ng;
            for (auto& p : raw->named_parameters()) p.value().copy_(sv.aux.at("ema." + p.key()));
            for (auto& b : raw->named_buffers()) b.value().copy_(sv.aux.at("ema." + b.key()));
        }
        const auto avgRef = referenceVal(*raw, valSpec, "coarse_2");
        const auto lv = RunLog::load(base + "/val/run.h5");
        QCOMPARE(lv.series.at("val/APH").steps, std::vector<int64_t>({2}));
        QVERIFY(std::abs(lv.series.at("val/APH").values[0] - 100 * avgRef.APH) < 1e-9);
        QVERIFY(std::abs(avgRef.APH - rawRef.APH) > 1e-6);

        // Uninterrupted, and stopped inside the fine phase then resumed: the same model and average.
        train::Control ca;
        trainLetr(e, data, base + "/a", false, ca, {});
        train::Control cb;
        trainLetr(e, data, base + "/b", false, cb, [&](const train::Progress& p) {
            if (p.step >= 5) cb.requestStop();
        });
        const auto sb = train::loadTrainState(base + "/b/checkpoint.h5", "letr-train");
        QCOMPARE(sb.aux.at("ema.count").item<int64_t>(), int64_t(2));   // restarted with the fine phase
        train::Control cr;
        trainLetr(e, data, base + "/b", true, cr, {});
        const auto ta = modelTensors(base + "/a/model.h5"), tb = modelTensors(base + "/b/model.h5");
        worst = 0;
        for (const auto& [k, v] : ta) worst = std::max(worst, testing::maxDiff(v, tb.at(k)));
        QVERIFY2(worst == 0.0, qPrintable(QString("max diff %1").arg(worst)));
        // model.h5 is the fine phase's average: equal to the checkpoint's average, not to a plain run.
        const auto sa = train::loadTrainState(base + "/a/checkpoint.h5", "letr-train");
        for (const auto& [k, v] : ta) QVERIFY2(testing::maxDiff(v, sa.aux.at("ema." + k)) == 0.0, k.c_str());
        train::Control cp;
        trainLetr(c, data, base + "/p", false, cp, {});
        QVERIFY(testing::maxDiff(ta.at("letr.class_embed.weight"), modelTensors(base + "/p/model.h5").at("letr.class_embed.weight")) > 1e-6);
        // The key round-trips; absent when off; bad values are refused.
        QCOMPARE(LetrTrainConfig::fromJson(e.toJson()).emaDecay, 0.2);
        QVERIFY(!c.toJson().contains("ema_decay"));
        auto j = c.toJson();
        j["ema_decay"] = 1.5;
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson(j, "x.json"); }), {"x.json", "ema_decay"}));
    }

    // "init": a run starts from a model file's or a run checkpoint's weights (and, from a
    // checkpoint, its dense head and denoising encoder); a file with a fine stage keeps it
    // through the fine phase's start (also across a resume at that boundary); a file of another
    // architecture is refused naming the tensor.
    void initFromModelOrCheckpoint() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.coarseSteps = 2;
        c.fineSteps = 1;
        c.aux.enabled = true;
        c.aux.channels = 8;
        c.denoise.enabled = true;
        c.lr = c.lrBackbone = 1e-2;   // the fine stage moves well away from its coarse copy
        train::Control ca;
        trainLetr(c, "procedural:3:4:64x64", base + "/a", false, ca, {});
        const auto ta = modelTensors(base + "/a/model.h5");
        const auto auxA = train::loadTrainState(base + "/a/checkpoint.h5", "letr-train").aux;

        // From model.h5, stopped before the first step: the checkpoint holds the file's weights.
        auto b = c;
        b.seed = 7;
        b.init = base + "/a/model.h5";
        train::Control cb;
        cb.requestStop();
        trainLetr(b, "procedural:3:4:64x64", base + "/b", false, cb, {});
        const auto sb = train::loadTrainState(base + "/b/checkpoint.h5", "letr-train");
        QCOMPARE(sb.model.size(), ta.size());
        for (const auto& [k, v] : ta) QVERIFY2(testing::maxDiff(v, sb.model.at(k)) == 0.0, k.c_str());
        // model.h5 has no dense head: it keeps its (seed 7) initialization.
        QVERIFY(testing::maxDiff(sb.aux.at("dense.out.weight"), auxA.at("dense.out.weight")) > 0);

        // From checkpoint.h5: the training-only modules too.
        b.init = base + "/a/checkpoint.h5";
        train::Control cc;
        cc.requestStop();
        trainLetr(b, "procedural:3:4:64x64", base + "/c", false, cc, {});
        const auto sc = train::loadTrainState(base + "/c/checkpoint.h5", "letr-train");
        for (const auto& [k, v] : auxA) QVERIFY2(testing::maxDiff(v, sc.aux.at(k)) == 0.0, k.c_str());
        for (const auto& [k, v] : ta) QVERIFY2(testing::maxDiff(v, sc.model.at(k)) == 0.0, k.c_str());

        // The fine phase starts from the file's fine stage, not from a copy of the coarse one,
        // also when the run is stopped at the phase boundary and resumed (lr ~0: the weights
        // barely move).
        auto d = c;
        d.init = base + "/a/model.h5";
        d.coarseSteps = 1;
        d.lr = d.lrBackbone = 1e-12;
        train::Control cd;
        trainLetr(d, "procedural:3:4:64x64", base + "/d", false, cd, [&](const train::Progress& p) {
            if (p.step >= 1) cd.requestStop();
        });
        QVERIFY(!std::filesystem::exists(base + "/d/model.h5"));
        // The resumed run is given no init (it may change): the checkpoint remembers the decision.
        auto dResumed = d;
        dResumed.init.clear();
        train::Control cr;
        trainLetr(dResumed, "procedural:3:4:64x64", base + "/d", true, cr, {});
        const auto td = modelTensors(base + "/d/model.h5");
        const std::string fineKey = "transformer.decoder.layers.0.linear1.weight";
        QVERIFY(td.count(fineKey) && td.count("letr." + fineKey));
        QVERIFY(testing::maxDiff(td.at(fineKey), ta.at(fineKey)) < 1e-6);
        QVERIFY(testing::maxDiff(ta.at(fineKey), ta.at("letr." + fineKey)) > 1e-3);   // the two stages differ
        // Without init the fine phase does copy the coarse stage.
        auto e = d;
        e.init.clear();
        train::Control ce;
        trainLetr(e, "procedural:3:4:64x64", base + "/e", false, ce, {});
        const auto te = modelTensors(base + "/e/model.h5");
        QVERIFY(testing::maxDiff(te.at(fineKey), te.at("letr." + fineKey)) < 1e-6);

        // The key round-trips through the config; absent when empty.
        QCOMPARE(LetrTrainConfig::fromJson(d.toJson()).init, d.init);
        QVERIFY(!c.toJson().contains("init"));
        // Another architecture, a missing file.
        auto f = c;
        f.model.hiddenDim = 16;
        f.init = base + "/a/model.h5";
        train::Control cf;
        const std::string err = errorOf([&] { trainLetr(f, "procedural:3:4:64x64", base + "/f", false, cf, {}); });
        QVERIFY2(contains(err, {"a/model.h5 (init)", "tensor '", "has shape", "needs"}), err.c_str());
        f = c;
        f.init = base + "/missing.h5";
        const std::string err2 = errorOf([&] { trainLetr(f, "procedural:3:4:64x64", base + "/g", false, cf, {}); });
        QVERIFY2(contains(err2, {"missing.h5"}), err2.c_str());
    }

    // Anchor queries in training: the query denoising uses the model's own anchor encoder (no
    // training-only "denoise.*" tensors), the anchors train, the model file keeps them, and query
    // groups are refused with a clear message.
    void anchorQueriesTrain() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.model.coarseAnchors = true;
        c.model.fineRefinesCoarse = true;
        c.coarseSteps = 2;
        c.fineSteps = 1;
        c.denoise.enabled = true;
        train::Control control;
        trainLetr(c, "procedural:4:3:64x64", base + "/a", false, control, {});
        auto log = RunLog::load(base + "/a/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.series.at("loss/dn").steps, std::vector<int64_t>({1, 2}));
        QVERIFY(log.series.at("loss/dn_l1").values[0] > 0);
        auto ck = train::loadTrainState(base + "/a/checkpoint.h5", "letr-train");
        for (const auto& [k, v] : ck.aux) QVERIFY2(k.rfind("denoise.", 0) != 0, k.c_str());
        auto m = loadLetr(base + "/a/model.h5");
        QVERIFY(m->config().coarseAnchors);
        LetrModel init(c.model, c.seed);
        QVERIFY(testing::maxDiff(m->queryAnchors(), init.queryAnchors()) > 0);   // the anchors trained
        auto g = c;
        g.queryGroups = 2;
        const std::string e = errorOf([&] { g.validate(); });
        QVERIFY2(contains(e, {"query_groups", "anchors"}), e.c_str());
    }

    // fine_lines "refine": the fine phase copies the coarse stage and zeroes the line head's last
    // layer, so the fine stage starts from the coarse stage's lines (lr ~0: nothing moves after).
    void fineRefineStartsAtTheCoarseLines() {
        QTemporaryDir dir;
        auto c = tinyConfig();
        c.model.fineRefinesCoarse = true;
        c.coarseSteps = 1;
        c.fineSteps = 1;
        c.lr = c.lrBackbone = 1e-12;
        train::Control control;
        trainLetr(c, "procedural:3:4:64x64", dir.path().toStdString() + "/r", false, control, {});
        auto m = loadLetr(dir.path().toStdString() + "/r/model.h5");
        QVERIFY(m->config().fineRefinesCoarse);
        const auto t = train::moduleTensors(*m);
        QVERIFY(t.at("lines_embed.layers.2.weight").abs().max().item<double>() < 1e-9);
        QVERIFY(testing::maxDiff(t.at("lines_embed.layers.0.weight"), t.at("letr.lines_embed.layers.0.weight")) < 1e-9);
        QVERIFY(t.at("letr.lines_embed.layers.2.weight").abs().max().item<double>() > 1e-3);
        m->eval();
        torch::NoGradGuard ng;
        auto out = m->forward({m->preprocess(testing::randomImage(64, 80, 3)).tensor});
        const auto& co = out.stages[0].lines;
        QVERIFY(testing::maxDiff(out.stages[1].lines[1], co[co.size(0) - 1]) < 1e-5);
    }

    // The memory position term against a loop over the cells: each un-padded cell's linear map
    // against its centre ((j + 0.5) * stride / W, (i + 0.5) * stride / H), padded cells ignored.
    void memoryPositionLossMatchesLoop() {
        MemoryPositionHead head(8, 3);
        torch::manual_seed(2);
        {
            torch::NoGradGuard ng;
            head->coarse->weight.normal_(0, 0.3);
        }
        // Two images in one padded batch: 3 x 4 cells (input 96 x 128) and 2 x 3 (64 x 80) of stride 32.
        const int64_t h = 3, w = 4;
        auto memory = torch::randn({2, h * w, 8}, torch::kFloat);
        const std::vector<std::array<int64_t, 2>> valid{{3, 4}, {2, 3}}, input{{96, 128}, {64, 80}};
        auto l = memoryPositionLoss(head->coarse, memory, h, w, valid, input, 5);
        double want = 0;
        for (int64_t b = 0; b < 2; ++b) {
            double sum = 0;
            for (int64_t i = 0; i < valid[size_t(b)][0]; ++i)
                for (int64_t j = 0; j < valid[size_t(b)][1]; ++j) {
                    torch::NoGradGuard ng;
                    auto p = head->coarse->forward(memory[b][i * w + j]);
                    sum += std::abs(p[0].item<double>() - (j + 0.5) * 32 / double(input[size_t(b)][1])) +
                           std::abs(p[1].item<double>() - (i + 0.5) * 32 / double(input[size_t(b)][0]));
                }
            want += sum / (2.0 * double(valid[size_t(b)][0] * valid[size_t(b)][1]));
        }
        QVERIFY2(std::abs(l.item<double>() - want / 2) < 1e-5, qPrintable(QString("%1 vs %2").arg(l.item<double>()).arg(want / 2)));
        l.backward();
        QVERIFY(head->coarse->weight.grad().abs().sum().item<double>() > 0);
        QVERIFY(!head->fine->weight.grad().defined());
        QVERIFY(contains(errorOf([&] { memoryPositionLoss(head->fine, memory, 2, 4, valid, input, 5); }), {"differ"}));
    }

    // Query groups (Group DETR): the model's own entities, each extra group and the denoising
    // entities decode as if the others were not there (self-attention within a group), in both
    // stages; a group equal to the model's queries reproduces the model's outputs.
    void queryGroups() {
        LetrConfig mc = tinyConfig().model;
        mc.dropout = 0.0;
        LetrModel model(mc, 5);
        model.eval();
        torch::manual_seed(1);
        const int64_t N = mc.numQueries, d = mc.hiddenDim, L = mc.coarseDecLayers;
        std::vector<torch::Tensor> images{torch::randn({3, 64, 80}), torch::randn({3, 72, 64})};
        torch::NoGradGuard ng;
        auto plain = model.forward(images, {});
        LetrForwardOptions g;
        auto own = model.queryEmbed()->weight.clone();
        auto other = torch::randn({N, d});
        g.groupQueryEmbed = torch::stack({other, own}, 0);   // group 1 = the model's own queries
        auto a = model.forward(images, g);
        for (int s = 0; s < 2; ++s) {
            QVERIFY(testing::maxDiff(plain.stages[size_t(s)].lines, a.stages[size_t(s)].lines) < 1e-5);
            QCOMPARE(a.stages[size_t(s)].groupLines.sizes(), torch::IntArrayRef({L, 2, 2 * N, 4}));
            QCOMPARE(a.stages[size_t(s)].groupLogits.sizes(), torch::IntArrayRef({L, 2, 2 * N, 2}));
            // The second group holds the model's own queries: it decodes as the model does.
            QVERIFY(testing::maxDiff(a.stages[size_t(s)].groupLines.narrow(2, N, N), plain.stages[size_t(s)].lines) < 1e-5);
        }
        // Changing the first group leaves the second alone, and moves the first.
        g.groupQueryEmbed = torch::stack({other + 1.0, own}, 0);
        auto b = model.forward(images, g);
        QVERIFY(testing::maxDiff(a.stages[1].groupLines.narrow(2, N, N), b.stages[1].groupLines.narrow(2, N, N)) < 1e-5);
        QVERIFY(testing::maxDiff(a.stages[1].groupLines.narrow(2, 0, N), b.stages[1].groupLines.narrow(2, 0, N)) > 1e-4);
        // Denoising entities see the model's entities, not the groups.
        LetrForwardOptions dn;
        dn.coarseOnly = true;
        dn.denoiseQueryPos = torch::randn({2, 5, d});
        auto c = model.forward(images, dn);
        dn.groupQueryEmbed = g.groupQueryEmbed;
        auto e = model.forward(images, dn);
        QVERIFY(testing::maxDiff(c.stages[0].dnLines, e.stages[0].dnLines) < 1e-5);
        QVERIFY(testing::maxDiff(c.stages[0].lines, e.stages[0].lines) < 1e-5);
        QCOMPARE(e.stages.size(), size_t(1));
        LetrForwardOptions bad;
        bad.groupQueryEmbed = torch::zeros({2, N + 1, d});
        QVERIFY(contains(errorOf([&] { model.forward(images, bad); }), {"query groups"}));
    }

    // The bfloat16 backbone (bf16_backbone): the features stay float32 tensors within bfloat16's
    // precision of the float32 ones, with a frozen batch norm folded into the convolutions and
    // with batch statistics, and gradients reach the convolutions.
    void bfloat16Backbone() {
        LetrConfig mc = tinyConfig().model;
        LetrModel model(mc, 3);
        torch::manual_seed(4);
        randomBatchNormStatistics(model);   // not the identity, so that folding it matters
        auto body = model.body();
        auto x = torch::randn({2, 3, 64, 80});
        for (bool trainStats : {false, true}) {
            model.setTrainBackboneBn(trainStats);
            model.train(trainStats);
            torch::Tensor ref32;
            std::vector<torch::Tensor> f32, f16;
            {
                torch::NoGradGuard ng;
                f32 = body->forward(x, 5);
                f16 = body->forward(x, 5, torch::kBFloat16);
            }
            QCOMPARE(f16.size(), size_t(4));
            for (size_t l = 0; l < 4; ++l) {
                QCOMPARE(f16[l].scalar_type(), torch::kFloat);
                QCOMPARE(f16[l].sizes(), f32[l].sizes());
                const double rel = (f16[l] - f32[l]).norm().item<double>() / f32[l].norm().item<double>();
                QVERIFY2(rel > 0 && rel < 0.05, qPrintable(QString("level %1 relative error %2 (train stats %3)").arg(l + 2).arg(rel).arg(trainStats)));
            }
        }
        model.setTrainBackboneBn(false);
        auto y = body->forward(x, 5, torch::kBFloat16).back().sum();
        y.backward();
        for (auto& p : body->named_parameters())
            if (p.value().dim() == 4) QVERIFY2(p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0, p.key().c_str());
    }

    // The float32 channels-last backbone (bf16_backbone's path on a CPU without bfloat16
    // instructions): the features equal the default layout's to float32 rounding, with a frozen
    // batch norm folded into the convolutions and with batch statistics; they come back in
    // channels-last layout (the fast kernels ran); gradients equal the default layout's.
    void float32ChannelsLastBackbone() {
        LetrConfig mc = tinyConfig().model;
        LetrModel model(mc, 3);
        torch::manual_seed(5);
        randomBatchNormStatistics(model);
        auto body = model.body();
        auto x = torch::randn({2, 3, 64, 80});
        for (bool trainStats : {false, true}) {
            model.setTrainBackboneBn(trainStats);
            model.train(trainStats);
            std::vector<torch::Tensor> ref, cl;
            {
                torch::NoGradGuard ng;
                ref = body->forward(x, 5);
                cl = body->forward(x, 5, torch::kFloat, true);
            }
            QCOMPARE(cl.size(), size_t(4));
            for (size_t l = 0; l < 4; ++l) {
                QCOMPARE(cl[l].scalar_type(), torch::kFloat);
                QCOMPARE(cl[l].sizes(), ref[l].sizes());
                QVERIFY(cl[l].is_contiguous(at::MemoryFormat::ChannelsLast) && !ref[l].is_contiguous(at::MemoryFormat::ChannelsLast));
                const double rel = (cl[l] - ref[l]).norm().item<double>() / ref[l].norm().item<double>();
                QVERIFY2(rel < 1e-5, qPrintable(QString("level %1 relative error %2 (train stats %3)").arg(l + 2).arg(rel).arg(trainStats)));
            }
        }
        model.setTrainBackboneBn(false);
        model.train(true);
        std::map<std::string, torch::Tensor> gradRef;
        for (bool channelsLast : {false, true}) {
            for (auto& p : body->parameters()) p.mutable_grad() = torch::Tensor();
            (body->forward(x, 5, torch::kFloat, channelsLast).back().square().mean()).backward();
            for (auto& p : body->named_parameters()) {
                if (p.value().dim() != 4) continue;
                QVERIFY2(p.value().grad().defined(), p.key().c_str());
                if (!channelsLast) {
                    gradRef[p.key()] = p.value().grad().clone();
                    continue;
                }
                const auto& g = gradRef.at(p.key());
                const double rel = (p.value().grad() - g).norm().item<double>() / std::max(g.norm().item<double>(), 1e-12);
                QVERIFY2(rel < 1e-4, qPrintable(QString("%1: gradient relative error %2").arg(p.key().c_str()).arg(rel)));
            }
        }
    }

    // bf16_backbone gets bfloat16 where the hardware has it (a CUDA device, a CPU with bfloat16
    // instructions) and float32 channels-last on a CPU without them; without it, the default.
    // cpuHasBf16() (cpuid and XCR0) agrees with the flags the kernel reports in /proc/cpuinfo.
    void backboneModeFollowsTheHardware() {
        const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
        for (bool has : {false, true}) {
            const BackboneMode off = trainingBackboneMode(false, cpu, has);
            QVERIFY(off.dtype == torch::kFloat && !off.channelsLast && !off.fellBack);
            const BackboneMode gpu = trainingBackboneMode(true, cuda, has);
            QVERIFY(gpu.dtype == torch::kBFloat16 && gpu.channelsLast && !gpu.fellBack);
        }
        const BackboneMode native = trainingBackboneMode(true, cpu, true);
        QVERIFY(native.dtype == torch::kBFloat16 && native.channelsLast && !native.fellBack);
        const BackboneMode emulated = trainingBackboneMode(true, cpu, false);
        QVERIFY(emulated.dtype == torch::kFloat && emulated.channelsLast && emulated.fellBack);

        std::ifstream info("/proc/cpuinfo");
        std::string line, flags;
        while (std::getline(info, line))
            if (line.rfind("flags", 0) == 0) {
                flags = " " + line.substr(line.find(':') + 1) + " ";
                break;
            }
        if (flags.empty()) QSKIP("no /proc/cpuinfo flags to compare with");
        const bool reported = flags.find(" avx512_bf16 ") != std::string::npos || flags.find(" amx_bf16 ") != std::string::npos;
        QCOMPARE(cpuHasBf16(), reported);
    }

    // A run with query groups, the memory position term and the bfloat16 backbone: their series
    // are logged, loss/total is the mean of the groups' LETR losses, their weights are in
    // checkpoint.h5 (groups.*, mempos.*) and not in model.h5, and a stopped run resumes exactly.
    void groupsAndMemoryPositionRun() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.coarseSteps = 2;
        c.fineSteps = 2;
        c.checkpointEvery = 1;
        c.queryGroups = 2;
        c.aux.enabled = true;   // its series and the denoising ones are logged beside the groups'
        c.aux.channels = 8;
        c.denoise.enabled = true;
        train::Control ca;
        trainLetr(c, "procedural:4:3:64x64", base + "/g", false, ca, {});
        auto log = RunLog::load(base + "/g/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.series.at("loss/groups").steps, std::vector<int64_t>({1, 2, 3, 4}));
        QCOMPARE(log.series.at("loss/aux").steps, std::vector<int64_t>({1, 2}));
        for (size_t r = 0; r < 4; ++r) {
            double own = 0;
            for (int64_t k = 0; k < c.model.coarseDecLayers; ++k)
                own += log.series.at("loss/cls_layer_" + std::to_string(k)).values[r] +
                       5 * log.series.at("loss/l1_layer_" + std::to_string(k)).values[r];
            // The coarse phase adds the dense and denoising terms (logged weighted).
            const double extra = r < 2 ? log.series.at("loss/aux").values[r] + log.series.at("loss/dn").values[r] : 0.0;
            const double want = (own + 2 * log.series.at("loss/groups").values[r]) / 3 + extra;
            QVERIFY2(std::abs(log.series.at("loss/total").values[r] - want) < 1e-4 * std::max(1.0, want),
                     qPrintable(QString("row %1: %2 vs %3").arg(r).arg(log.series.at("loss/total").values[r]).arg(want)));
        }
        auto st = train::loadTrainState(base + "/g/checkpoint.h5", "letr-train");
        QCOMPARE(st.aux.at("groups.weight").sizes(), torch::IntArrayRef({2, c.model.numQueries, c.model.hiddenDim}));
        for (const auto& [k, v] : modelTensors(base + "/g/model.h5")) QVERIFY2(k.find("groups") == std::string::npos, k.c_str());
        QVERIFY(LetrTrainConfig::fromJson(c.toJson()).queryGroups == 2);
        QVERIFY(!tinyConfig().toJson().contains("query_groups") && !tinyConfig().toJson().contains("memory_position_coef") &&
                !tinyConfig().toJson().contains("bf16_backbone"));

        auto m = tinyConfig();
        m.coarseSteps = 2;
        m.fineSteps = 2;
        m.checkpointEvery = 1;
        m.memoryPositionCoef = 2;
        m.queryGroups = 1;
        m.bf16Backbone = true;
        train::Control cm;
        trainLetr(m, "procedural:4:3:64x64", base + "/m", false, cm, {});
        auto lm = RunLog::load(base + "/m/run.h5");
        QCOMPARE(lm.series.at("loss/mem_position").steps, std::vector<int64_t>({1, 2, 3, 4}));
        QVERIFY(lm.series.at("loss/mem_position").values[0] > 0 && lm.series.at("loss/mem_position").values[0] < 1);
        auto sm = train::loadTrainState(base + "/m/checkpoint.h5", "letr-train");
        QVERIFY(sm.aux.count("mempos.coarse.weight") && sm.aux.count("mempos.fine.weight"));
        // Both maps trained: the coarse one in the coarse phase, the fine one in the fine phase.
        MemoryPositionHead fresh(m.model.hiddenDim, m.seed);
        QVERIFY(testing::maxDiff(sm.aux.at("mempos.coarse.weight"), fresh->coarse->weight) > 0);
        QVERIFY(testing::maxDiff(sm.aux.at("mempos.fine.weight"), fresh->fine->weight) > 0);
        const auto cfgBack = LetrTrainConfig::fromJson(m.toJson());
        QVERIFY(cfgBack.bf16Backbone && cfgBack.memoryPositionCoef == 2);
        // Stopped at step 3 (fine phase), resumed: the same weights and training-only tensors.
        train::Control cb;
        trainLetr(m, "procedural:4:3:64x64", base + "/r", false, cb, [&](const train::Progress& p) {
            if (p.step >= 3) cb.requestStop();
        });
        QVERIFY(!std::filesystem::exists(base + "/r/model.h5"));
        train::Control cr;
        trainLetr(m, "procedural:4:3:64x64", base + "/r", true, cr, {});
        const auto ta = modelTensors(base + "/m/model.h5"), tb = modelTensors(base + "/r/model.h5");
        for (const auto& [k, v] : ta) QVERIFY2(testing::maxDiff(v, tb.at(k)) == 0.0, k.c_str());
        const auto rb = train::loadTrainState(base + "/r/checkpoint.h5", "letr-train");
        for (const auto& [k, v] : sm.aux) QVERIFY2(testing::maxDiff(v, rb.aux.at(k)) == 0.0, k.c_str());
        // Bad values are refused with the key's name.
        auto bad = tinyConfig();
        bad.queryGroups = 65;
        QVERIFY(contains(errorOf([&] { bad.validate(); }), {"query_groups"}));
        bad = tinyConfig();
        bad.memoryPositionCoef = -1;
        QVERIFY(contains(errorOf([&] { bad.validate(); }), {"memory_position_coef"}));
    }

    // "lr_schedule": "cosine": each phase's lr follows a half cosine from lr to lr * lr_final
    // (the run log's lr series against the formula); bad values are refused by name.
    void cosineSchedule() {
        QTemporaryDir dir;
        auto c = tinyConfig();
        c.coarseSteps = 4;
        c.fineSteps = 3;
        c.lr = 1e-3;
        c.lrCosine = true;
        c.lrFinal = 0.1;
        train::Control ca;
        trainLetr(c, "procedural:4:3:64x64", dir.path().toStdString() + "/c", false, ca, {});
        const auto log = RunLog::load(dir.path().toStdString() + "/c/run.h5");
        const auto& lr = log.series.at("lr").values;
        QCOMPARE(int(lr.size()), 7);
        auto want = [&](int t, int steps) { return 1e-4 + (1e-3 - 1e-4) * 0.5 * (1 + std::cos(M_PI * t / (steps - 1))); };
        for (int t = 0; t < 4; ++t) QVERIFY2(std::abs(lr[size_t(t)] - want(t, 4)) < 1e-12, qPrintable(QString::number(lr[size_t(t)])));
        for (int t = 0; t < 3; ++t) QVERIFY(std::abs(lr[size_t(4 + t)] - want(t, 3)) < 1e-12);
        const auto back = LetrTrainConfig::fromJson(c.toJson());
        QVERIFY(back.lrCosine && back.lrFinal == 0.1);
        QVERIFY(!tinyConfig().toJson().contains("lr_schedule"));
        auto j = c.toJson();
        j["lr_drop_coarse"] = 2;
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson(j); }), {"cosine", "lr_drop"}));
        j = c.toJson();
        j["lr_schedule"] = "linear";
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson(j); }), {"lr_schedule", "linear"}));

        // "lr_warmup": N ramps each phase's first N steps linearly up to the schedule.
        QTemporaryDir dir2;
        c.lrWarmup = 2;
        trainLetr(c, "procedural:4:3:64x64", dir2.path().toStdString() + "/w", false, ca, {});
        const auto logW = RunLog::load(dir2.path().toStdString() + "/w/run.h5");
        const auto& lw = logW.series.at("lr").values;
        QCOMPARE(int(lw.size()), 7);
        const double ramp[] = {0.5, 1, 1, 1};
        for (int t = 0; t < 4; ++t) QVERIFY(std::abs(lw[size_t(t)] - ramp[t] * want(t, 4)) < 1e-12);
        for (int t = 0; t < 3; ++t) QVERIFY(std::abs(lw[size_t(4 + t)] - ramp[t] * want(t, 3)) < 1e-12);
        QCOMPARE(LetrTrainConfig::fromJson(c.toJson()).lrWarmup, int64_t(2));
        QVERIFY(!tinyConfig().toJson().contains("lr_warmup"));   // absent when 0: older runs resume
        j = c.toJson();
        j["lr_warmup"] = -1;
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson(j).validate(); }), {"lr_warmup"}));
    }

    // lr_backbone 0 freezes the backbone in the coarse phase: its weights and batch-norm
    // statistics stay those of the start, and no gradient is computed for it; the coarse
    // transformer still trains.
    void frozenBackboneCoarsePhase() {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        auto c = tinyConfig();
        c.coarseSteps = 2;
        c.fineSteps = 0;
        c.lrBackbone = 0;
        train::Control ca;
        trainLetr(c, "procedural:4:3:64x64", base + "/f", false, ca, {});
        LetrModel init(c.model, c.seed);
        const auto start = train::moduleTensors(init);
        const auto end = modelTensors(base + "/f/model.h5");
        for (const auto& [k, v] : start) {
            if (k.rfind("backbone.", 0) == 0) QVERIFY2(testing::maxDiff(v, end.at(k)) == 0.0, k.c_str());
        }
        QVERIFY(testing::maxDiff(start.at("letr.class_embed.weight"), end.at("letr.class_embed.weight")) > 0);
    }

    // backbone_train_from "layer3": the stem, layer1 and layer2 keep their weights, layer3 and
    // layer4 train; the stage index of a name; the key round-trips and is absent by default;
    // an unknown stage is refused by name.
    void backboneTrainFromFreezesEarlierStages() {
        QCOMPARE(backboneParamStage("backbone.0.body.conv1.weight"), 0);
        QCOMPARE(backboneParamStage("backbone.0.body.bn1.bias"), 0);
        QCOMPARE(backboneParamStage("backbone.0.body.layer2.1.conv2.weight"), 2);
        QCOMPARE(backboneParamStage("backbone.0.body.layer4.0.downsample.0.weight"), 4);
        QCOMPARE(backboneStageIndex("conv1"), 0);
        QCOMPARE(backboneStageIndex("layer3"), 3);
        QCOMPARE(backboneStageIndex("layer5"), -1);
        QVERIFY(!tinyConfig().toJson().contains("backbone_train_from"));
        QTemporaryDir dir;
        auto c = tinyConfig();
        c.coarseSteps = 2;
        c.fineSteps = 0;
        c.trainBackboneBn = false;
        c.backboneTrainFrom = "layer3";
        QCOMPARE(LetrTrainConfig::fromJson(c.toJson()).backboneTrainFrom, std::string("layer3"));
        train::Control control;
        trainLetr(c, "procedural:4:3:64x64", dir.path().toStdString() + "/f", false, control, {});
        LetrModel init(c.model, c.seed);
        const auto start = train::moduleTensors(init);
        const auto end = modelTensors(dir.path().toStdString() + "/f/model.h5");
        int frozen = 0, moved = 0;
        for (const auto& [k, v] : start) {
            if (k.rfind("backbone.", 0) != 0 || v.dim() != 4) continue;   // conv weights
            const double d = testing::maxDiff(v, end.at(k));
            if (backboneParamStage(k) < 3) {
                QVERIFY2(d == 0.0, k.c_str());
                ++frozen;
            } else {
                QVERIFY2(d > 0.0, k.c_str());
                ++moved;
            }
        }
        QVERIFY(frozen >= 5 && moved >= 4);
        auto j = c.toJson();
        j["backbone_train_from"] = "layer9";
        QVERIFY(contains(errorOf([&] { LetrTrainConfig::fromJson(j).validate(); }), {"backbone_train_from", "layer9"}));
    }

    // The demo recipe (tools/train_letr_demo.sh): every stage config it names parses, the stages
    // share one architecture (only the input size grows), and the checkpoint in the tree starts
    // stage 2 with its weights and training-only modules.
    void demoRecipeConfigs() {
        const std::string src = GLIMPSE_SOURCE_DIR;
        std::ifstream script(src + "/tools/train_letr_demo.sh");
        QVERIFY(script.good());
        std::vector<std::string> names;
        for (std::string line; std::getline(script, line);) {
            std::istringstream in(line);
            std::string word, stage, config;
            if (in >> word >> stage >> config && word == "stage" && config.size() > 5 &&
                config.compare(config.size() - 5, 5, ".json") == 0)
                names.push_back(config);
        }
        QCOMPARE(names, (std::vector<std::string>{"letr_demo_train.json", "letr_demo_hires.json"}));
        std::vector<LetrTrainConfig> stages;
        for (const auto& n : names) stages.push_back(LetrTrainConfig::fromFile(src + "/resources/" + n));   // as --config reads it
        for (size_t i = 1; i < stages.size(); ++i) {
            auto a = stages[i - 1].model, b = stages[i].model;
            QVERIFY(b.shortSide > a.shortSide);   // each stage trains at a larger input
            a.shortSide = b.shortSide;
            a.maxLongSide = b.maxLongSide;
            // Options without parameters may start at a later stage (the stage-1 checkpoint in
            // the tree was trained without them).
            a.posInValuesCoarse = b.posInValuesCoarse;
            a.posInValuesFine = b.posInValuesFine;
            a.fineRefinesCoarse = b.fineRefinesCoarse;
            QCOMPARE(a.toJson().dump(), b.toJson().dump());
            QVERIFY(stages[i].emaDecay > 0 && !stages[i].trainBackboneBn && stages[i].loss.qualityTau > 0);
            QVERIFY(stages[i].aux.enabled && stages[i].denoise.enabled);
        }
        // The last stage trains the fine stage on its own backbone (a fine stage left at stage 1's
        // collapsed to sAP10 0, docs/decisions.md), and for longer than a token phase.
        QVERIFY(stages[1].fineSteps >= 1000);
        // ... and sees its images at exactly the size the model's resize gives the held-out ones
        // (no crops, no scale jitter: docs/decisions.md, "Training at exactly the evaluated geometry").
        const auto& last = stages[1];
        QVERIFY(last.augmentEnabled);
        QCOMPARE(last.augment.crop, 0.0);
        QCOMPARE(last.augment.minShortSide, last.model.shortSide);
        QCOMPARE(last.augment.maxShortSide, last.model.shortSide);
        QCOMPARE(last.augment.maxLongSide, last.model.maxLongSide);

        // Stage 2 from a stage-1 checkpoint (stage 1's config, stopped before its first step), itself
        // stopped before its first step: the checkpoint it writes holds the stage-1 file's model,
        // dense head and denoising encoder.
        QTemporaryDir dir;
        const std::string stage1 = dir.path().toStdString() + "/s1/checkpoint.h5";
        {
            auto c1 = stages[0];
            c1.valEvery = 0;
            train::Control stop1;
            stop1.requestStop();
            trainLetr(c1, "procedural:2:4:64x48", dir.path().toStdString() + "/s1", false, stop1, {});
        }
        auto c = stages[1];
        c.init = stage1;
        c.valEvery = 0;
        train::Control stop;
        stop.requestStop();
        trainLetr(c, "procedural:2:4:64x48", dir.path().toStdString() + "/s2", false, stop, {});
        const auto from = train::loadTrainState(stage1, "letr-train");
        const auto to = train::loadTrainState(dir.path().toStdString() + "/s2/checkpoint.h5", "letr-train");
        QCOMPARE(to.model.size(), from.model.size());
        for (const auto& [k, v] : from.model) QVERIFY2(testing::maxDiff(v, to.model.at(k)) == 0.0, k.c_str());
        QVERIFY(!from.aux.empty());
        for (const auto& [k, v] : from.aux) QVERIFY2(testing::maxDiff(v, to.aux.at(k)) == 0.0, k.c_str());
    }

    // The recipe script with a stand-in for glimpse: a stage whose run stops early (Ctrl-C: the
    // ranks checkpoint and exit 0, no model.h5) ends the script; it does not start the next stage.
    void demoRecipeStopsAtAnUnfinishedStage() {
        QTemporaryDir dir;
        const QString fake = dir.filePath("glimpse"), log = dir.filePath("calls.txt");
        for (const bool finish : {true, false}) {
            QFile f(fake);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(("#!/bin/bash\necho \"$*\" >> '" + log.toStdString() + "'\n" +
                     (finish ? "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && mkdir -p \"$2\" && touch \"$2/model.h5\"; shift; done\n"
                             : "")).c_str());
            f.close();
            f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
            QFile::remove(log);
            QProcess p;
            auto env = QProcessEnvironment::systemEnvironment();
            env.insert("GLIMPSE", fake);
            env.insert("RANKS", "1");
            p.setProcessEnvironment(env);
            p.start("bash", {GLIMPSE_SOURCE_DIR "/tools/train_letr_demo.sh", dir.filePath(finish ? "done" : "stopped")});
            QVERIFY(p.waitForFinished(60000));
            QFile calls(log);
            QVERIFY(calls.open(QIODevice::ReadOnly));
            const QStringList lines = QString(calls.readAll()).split('\n', Qt::SkipEmptyParts);
            if (finish) {
                QCOMPARE(p.exitCode(), 0);
                QCOMPARE(lines.size(), 2);
                QVERIFY(lines[1].contains("letr_demo_hires.json") && lines[1].contains("stage1/checkpoint.h5"));
                QVERIFY(lines[1].contains("--device cpu"));
                QVERIFY(QFileInfo::exists(dir.filePath("done/model.h5")));
            } else {
                QCOMPARE(p.exitCode(), 3);
                QCOMPARE(lines.size(), 1);   // stage 1 only
                QVERIFY2(p.readAllStandardError().contains("stage1 stopped before its last step"), "message");
            }
        }
        // The script edited in place while a stage runs (its first stand-in prepends a line, as an
        // editor saving over it would): the running script still runs the stages it had.
        {
            QVERIFY(QDir().mkpath(dir.filePath("copy/tools")));
            const std::string script = dir.filePath("copy/tools/train_letr_demo.sh").toStdString();
            const std::string mark = dir.filePath("edited").toStdString();
            QVERIFY(QFile::copy(GLIMPSE_SOURCE_DIR "/tools/train_letr_demo.sh", QString::fromStdString(script)));
            QFile f(fake);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(("#!/bin/bash\necho \"$*\" >> '" + log.toStdString() + "'\n" +
                     "if [ ! -e '" + mark + "' ]; then touch '" + mark + "'; s=$(cat '" + script + "'); " +
                     "printf '#!/usr/bin/env bash\\n# an edit made while the script runs, shifting what follows\\n%s\\n' "
                     "\"$s\" > '" + script + "'; fi\n" +
                     "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && mkdir -p \"$2\" && touch \"$2/model.h5\"; shift; done\n")
                        .c_str());
            f.close();
            QFile::remove(log);
            QProcess p;
            auto env = QProcessEnvironment::systemEnvironment();
            env.insert("GLIMPSE", fake);
            env.insert("RANKS", "1");
            p.setProcessEnvironment(env);
            p.start("bash", {QString::fromStdString(script), dir.filePath("edited_run")});
            QVERIFY(p.waitForFinished(60000));
            QCOMPARE(p.exitCode(), 0);
            QVERIFY(QFileInfo::exists(QString::fromStdString(mark)));
            QFile calls(log);
            QVERIFY(calls.open(QIODevice::ReadOnly));
            QCOMPARE(QString(calls.readAll()).split('\n', Qt::SkipEmptyParts).size(), 2);
            QVERIFY(QFileInfo::exists(dir.filePath("edited_run/model.h5")));
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));   // back to a stand-in that stops
            f.write(("#!/bin/bash\necho \"$*\" >> '" + log.toStdString() + "'\n").c_str());
            f.close();
        }
        // DEVICE=cuda: one process per stage on the GPU, every stage told so; with RANKS > 1 refused.
        QFile::remove(log);
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("GLIMPSE", fake);
        env.insert("RANKS", "1");
        env.insert("DEVICE", "cuda:0");
        p.setProcessEnvironment(env);
        p.start("bash", {GLIMPSE_SOURCE_DIR "/tools/train_letr_demo.sh", dir.filePath("gpu")});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 3);   // the last stand-in wrote no model.h5: stopped after stage 1
        QFile calls(log);
        QVERIFY(calls.open(QIODevice::ReadOnly));
        const QString call = QString(calls.readAll()).trimmed();
        QVERIFY2(call.contains("--device cuda:0") && !call.contains("--world-size"), qPrintable(call));
        env.insert("RANKS", "2");
        p.setProcessEnvironment(env);
        p.start("bash", {GLIMPSE_SOURCE_DIR "/tools/train_letr_demo.sh", dir.filePath("gpu2")});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(p.readAllStandardError().contains("DEVICE=cuda:0 trains in one process: set RANKS=1"));
    }
};

QTEST_APPLESS_MAIN(TestLetrTrain)
#include "test_letr_train.moc"
