// CoaT classification training (core/models/coat/train.h): schedule and no-decay parameters,
// config JSON, a tiny run that learns a generated task and whose model.h5 loadCoat reads, resume
// after a stop equal to an uninterrupted run (with mixup and cutmix on), the run log, the PE
// ablation variants, errors; and a loose sanity check of the shipped Fashion-MNIST checkpoint.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>

#include <torch/torch.h>

#include "core/data/classification.h"
#include "core/io/checkpoint.h"
#include "core/models/coat/model.h"
#include "core/models/coat/train.h"
#include "core/runlog.h"
#include "core/train/optim.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::coat;
using testing::contains;
using testing::errorOf;

namespace {

// Fashion-MNIST-shaped idx files of a 3-class task: class k has a bright horizontal band in
// the k-th third of the image, plus deterministic noise.
void writeBandData(const std::string& dir, const std::string& prefix, int n, uint64_t seed) {
    std::filesystem::create_directories(dir);
    data::IdxArray img, lbl;
    img.dims = {n, 28, 28};
    lbl.dims = {n};
    std::mt19937 rng{static_cast<uint32_t>(seed)};
    for (int i = 0; i < n; ++i) {
        const int k = int(rng() % 3);
        lbl.data.push_back(uint8_t(k));
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x) {
                const bool band = y / 10 == k;   // rows 0-9, 10-19, 20-27
                img.data.push_back(uint8_t((band ? 180 : 20) + int(rng() % 50)));
            }
    }
    data::writeIdx(dir + "/" + prefix + "-images-idx3-ubyte", img);
    data::writeIdx(dir + "/" + prefix + "-labels-idx1-ubyte", lbl);
}

CoatTrainConfig tinyConfig() {
    CoatTrainConfig c;
    c.model = {{"variant", "custom"},       {"embed_dims", {16, 16, 16, 16}}, {"serial_depths", {1, 1, 1, 1}},
               {"mlp_ratios", {2, 2, 2, 2}}, {"image_size", 32},               {"resize", 32}};
    c.batchSize = 8;
    c.steps = 6;
    c.warmupSteps = 2;
    c.lr = 2e-3;
    c.evalEvery = 3;
    c.checkpointEvery = 2;
    c.valSubset = 10;
    c.evalBatch = 16;
    c.threads = 1;
    return c;
}

std::map<std::string, torch::Tensor> tensorsOf(const std::string& path) { return loadCheckpoint(path).tensors; }

} // namespace

class TestCoatTrain : public QObject {
    Q_OBJECT
    QTemporaryDir tmp_;
    std::string dataDir_;
    std::string path(const std::string& n) { return tmp_.filePath(QString::fromStdString(n)).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        dataDir_ = path("band");
        writeBandData(dataDir_, "train", 96, 1);
        writeBandData(dataDir_, "t10k", 30, 2);
    }

    void warmupCosineSchedule() {
        // Formula written out independently: warmup ramps to base at step warmup - 1; the cosine
        // starts at base and ends at min_lr.
        const double base = 1e-3, mn = 1e-5;
        QCOMPARE(train::warmupCosine(base, mn, 4, 20, 0), base / 4);
        QCOMPARE(train::warmupCosine(base, mn, 4, 20, 3), base);
        QCOMPARE(train::warmupCosine(base, mn, 4, 20, 4), base);
        const double mid = train::warmupCosine(base, mn, 4, 20, 12);   // half way through the cosine
        QVERIFY(std::abs(mid - (mn + base) / 2) < 1e-12);
        QVERIFY(std::abs(train::warmupCosine(base, mn, 4, 20, 20) - mn) < 1e-12);
        double prev = 1;
        for (int s = 4; s < 20; ++s) {
            const double v = train::warmupCosine(base, mn, 4, 20, s);
            QVERIFY(v <= prev);
            prev = v;
        }
        QCOMPARE(train::warmupCosine(base, mn, 0, 10, 0), base);
    }

    void adamwWeightDecayScale() {
        // A zero gradient: Adam's step is 0, so only the decoupled decay moves a parameter.
        auto a = torch::ones({3}).requires_grad_(true), b = torch::ones({3}).requires_grad_(true);
        train::AdamW::Options o;
        o.lr = 0.1;
        o.weightDecay = 0.5;
        train::AdamW opt({{"a", a, 1.0, 1.0}, {"b", b, 1.0, 0.0}}, o);
        a.mutable_grad() = torch::zeros({3});
        b.mutable_grad() = torch::zeros({3});
        opt.step();
        QVERIFY(std::abs(a[0].item<double>() - (1.0 - 0.1 * 0.5)) < 1e-7);
        QCOMPARE(b[0].item<double>(), 1.0);
    }

    void configJson() {
        CoatTrainConfig c = tinyConfig();
        c.mixup = 0.2;
        c.cutmix = 1.0;
        c.hflip = 0;
        auto j = c.toJson();
        auto back = CoatTrainConfig::fromJson(j);
        QCOMPARE(back.toJson(), j);
        auto err = [](nlohmann::json j) { return errorOf([&] { CoatTrainConfig::fromJson(j, "c.json"); }); };
        QVERIFY(contains(err({{"stepz", 3}}), {"c.json", "unknown key \"stepz\""}));
        QVERIFY(contains(err({{"steps", "many"}}), {"c.json", "steps", "wrong type"}));
        QVERIFY(contains(err({{"steps", 10}, {"warmup_steps", 11}}), {"warmup_steps"}));
        QVERIFY(contains(err({{"lr", 2.0}}), {"lr must be"}));
        QVERIFY(contains(err({{"augment", {{"flip", 1}}}}), {"augment", "unknown key \"flip\""}));
        QVERIFY(contains(err({{"model", {{"num_heads", 3}}}}), {"num_heads"}));
        QVERIFY(contains(err({{"model", {{"in_chans", 1}}}}), {"in_chans must be 3"}));
        // Class count disagreeing with the data.
        CoatTrainConfig d = tinyConfig();
        d.model["num_classes"] = 5;
        QVERIFY(contains(errorOf([&] { d.modelConfig({"a", "b", "c"}); }), {"num_classes", "3 classes"}));
        // Defaults: CoaT-Lite Tiny on 32x32.
        const CoatConfig m = CoatTrainConfig().modelConfig(data::fashionMnistClassNames());
        QCOMPARE(m.embedDims[3], int64_t(320));
        QCOMPARE(m.imageSize, int64_t(32));
        QCOMPARE(m.numClasses, int64_t(10));
    }

    void learnsAndWritesModel() {
        CoatTrainConfig c = tinyConfig();
        c.steps = 40;
        c.evalEvery = 20;
        c.checkpointEvery = 20;
        c.hflip = 0;   // the bands are symmetric anyway
        const std::string out = path("learn");
        train::Control control;
        std::vector<int64_t> steps;
        auto r = trainCoat(c, "fashion-mnist:" + dataDir_, out, false, control,
                           [&](const train::Progress& p) { steps.push_back(p.step); });
        QVERIFY(r.finished);
        QCOMPARE(r.steps, int64_t(40));
        QCOMPARE(r.valSize, int64_t(30));
        QVERIFY2(r.valAcc >= 0.9, qPrintable(QString::number(r.valAcc)));   // chance is 1/3
        QVERIFY(r.imagesPerSecond > 0);
        QCOMPARE(steps.back(), int64_t(40));

        // model.h5 is an ordinary CoaT checkpoint with the data's class names, and gives the same
        // accuracy when evaluated again.
        auto model = loadCoat(out + "/model.h5");
        QCOMPARE(model->config().numClasses, int64_t(10));
        QCOMPARE(model->config().classNames[1], std::string("Trouser"));
        auto splits = data::openClassificationDataset("fashion-mnist:" + dataDir_);
        auto ev = evaluateClassifier(*model, *splits.val, 0, 7, true);
        QCOMPARE(ev.acc, r.valAcc);
        QCOMPARE(ev.confusion.sum().item<int64_t>(), int64_t(30));
        QCOMPARE(ev.confusion.diag().sum().item<int64_t>(), int64_t(std::lround(ev.acc * 30)));

        // The run log: finished, every series present, val/acc at the periodic step and the end.
        RunLog log = RunLog::load(out + "/run.h5");
        QCOMPARE(int(log.status), int(RunStatus::Finished));
        for (const auto& s : coatSeriesNames()) QVERIFY2(log.series.count(s), s.c_str());
        QCOMPARE(log.series["loss/train"].size(), size_t(40));
        QCOMPARE(log.series["val/acc"].steps, (std::vector<int64_t>{20, 40}));
        QCOMPARE(log.series["val/acc"].values.back(), r.valAcc);
        QCOMPARE(log.eval.at("final/val_acc").item<double>(), r.valAcc);
        QCOMPARE(log.config["series"].size(), coatSeriesNames().size());
        QCOMPARE(log.config["trainer"].get<std::string>(), std::string("coat"));
        // The loss went down.
        const auto& L = log.series["loss/train"].values;
        const double first = (L[0] + L[1] + L[2] + L[3]) / 4, last = (L[36] + L[37] + L[38] + L[39]) / 4;
        QVERIFY2(last < first, qPrintable(QString("%1 -> %2").arg(first).arg(last)));
        const auto res = finishedRunResult(out);
        QVERIFY(res.finished);
        QCOMPARE(res.valAcc, r.valAcc);
    }

    void resumeEqualsUninterrupted() {
        CoatTrainConfig c = tinyConfig();
        c.mixup = 0.4;
        c.cutmix = 1.0;
        c.trainSubset = 50;
        const std::string spec = "fashion-mnist:" + dataDir_;
        const std::string a = path("full"), b = path("resumed");
        train::Control ca;
        auto ra = trainCoat(c, spec, a, false, ca, nullptr);
        QVERIFY(ra.finished);

        train::Control cb;
        auto rb1 = trainCoat(c, spec, b, false, cb, [&](const train::Progress& p) {
            if (p.step >= 3) cb.requestStop();
        });
        QVERIFY(!rb1.finished);
        QCOMPARE(rb1.steps, int64_t(3));
        QVERIFY(!std::filesystem::exists(b + "/model.h5"));
        QCOMPARE(int(RunLog::load(b + "/run.h5").status), int(RunStatus::Stopped));
        // A different config (threads and checkpoint_every may change) is refused.
        CoatTrainConfig other = c;
        other.lr = 1e-3;
        train::Control cx;
        QVERIFY(contains(errorOf([&] { trainCoat(other, spec, b, true, cx, nullptr); }),
                         {"checkpoint.h5", "different training config"}));
        c.checkpointEvery = 5;
        train::Control cb2;
        auto rb2 = trainCoat(c, spec, b, true, cb2, nullptr);
        QVERIFY(rb2.finished);
        QCOMPARE(rb2.valAcc, ra.valAcc);
        auto ta = tensorsOf(a + "/model.h5"), tb = tensorsOf(b + "/model.h5");
        QCOMPARE(ta.size(), tb.size());
        for (const auto& [name, t] : ta) QVERIFY2(torch::equal(t, tb.at(name)), name.c_str());
        // The resumed log continues the old one: one loss row per step.
        RunLog log = RunLog::load(b + "/run.h5");
        QCOMPARE(log.series["loss/train"].steps.size(), size_t(6));
        QCOMPARE(log.series["loss/train"].steps.front(), int64_t(1));
    }

    void peVariantsRemoveModules() {
        const auto vs = peAblationVariants();
        QCOMPARE(int(vs.size()), 4);
        std::vector<int64_t> params;
        for (const auto& v : vs) {
            const CoatConfig m = withVariant(tinyConfig(), v).modelConfig({"a", "b"});
            QCOMPARE(m.useCpe, v.useCpe);
            QCOMPARE(m.useCrpe, v.useCrpe);
            CoatModel model(m, 0);
            bool hasCpe = false, hasCrpe = false;
            for (const auto& p : model.named_parameters()) {
                hasCpe |= p.key().rfind("cpe", 0) == 0;
                hasCrpe |= p.key().rfind("crpe", 0) == 0;
            }
            QCOMPARE(hasCpe, v.useCpe);
            QCOMPARE(hasCrpe, v.useCrpe);
            params.push_back(model.numParameters());
        }
        QCOMPARE(vs[0].name, std::string("neither"));
        QVERIFY(params[0] < params[1] && params[0] < params[2] && params[3] > params[1] && params[3] > params[2]);
    }

    void dataErrors() {
        train::Control c;
        QVERIFY(contains(errorOf([&] { trainCoat(tinyConfig(), "fashion-mnist:" + path("none"), path("x"), false, c, nullptr); }),
                         {"none", "not found"}));
        // --resume before the first checkpoint (a run killed early) starts from step 0.
        QCOMPARE(errorOf([&] { trainCoat(tinyConfig(), "fashion-mnist:" + dataDir_, path("y"), true, c, nullptr); }),
                 std::string("<no error>"));
        RunLog log = RunLog::load(path("y") + "/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.series["loss/train"].steps.size(), size_t(6));
        QCOMPARE(log.series["loss/train"].steps.front(), int64_t(1));
    }

    void shippedCheckpointSanity() {
        const std::string ck = std::string(GLIMPSE_SOURCE_DIR) + "/resources/coat_fmnist.h5";
        if (!std::filesystem::exists(ck)) QSKIP("resources/coat_fmnist.h5 is not present");
        auto model = loadCoat(ck);
        QCOMPARE(model->config().classNames, data::fashionMnistClassNames());
        QVERIFY(std::filesystem::file_size(ck) <= 25u * 1024 * 1024);
        if (!std::filesystem::exists(data::fashionMnistDefaultDir() + "/t10k-images-idx3-ubyte.gz"))
            QSKIP("Debian's dataset-fashion-mnist is not installed");
        data::FashionMnistDataset test(data::fashionMnistDefaultDir(), "test");
        auto ev = evaluateClassifier(*model, test, 200, 100, false);
        QVERIFY2(ev.acc > 0.5, qPrintable(QString::number(ev.acc)));   // loose: chance is 0.1
    }
};

QTEST_APPLESS_MAIN(TestCoatTrain)
#include "test_coat_train.moc"
