// ConstellationNet training and few-shot evaluation (core/models/constellation/{train,fewshot},
// glimpse train constellation, glimpse eval fewshot): config JSON, a tiny run whose model.h5
// loads and whose run log has the series and the final novel-class results, resume after a stop
// equal to an uninterrupted run, the multi-branch prototypical loss, episode evaluation against
// a direct computation, and clear errors (another cluster count on resume, more ways than
// classes, more shots than samples, a checkpoint of another family, an empty class folder).
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include <opencv2/imgcodecs.hpp>
#include <torch/torch.h>

#include "app/constellation/cli.h"
#include "core/data/fewshot.h"
#include "core/io/checkpoint.h"
#include "core/models/constellation/fewshot.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/train.h"
#include "core/runlog.h"
#include "core/train/state.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::constellation;
using testing::contains;
using testing::errorOf;

namespace {

ConstellationTrainConfig tiny() {
    ConstellationTrainConfig c;
    c.model = {{"channels", {8, 8, 8, 8}}, {"clusters", 16}, {"heads", 4}, {"image_size", 32}};
    c.batchSize = 8;
    c.steps = 6;
    c.warmupSteps = 2;
    c.valEvery = 3;
    c.valEpisodes = 2;
    c.finalEpisodes = 3;
    c.checkpointEvery = 2;
    c.protoShots = 1;
    c.protoQueries = 2;
    return c;
}

train::ProgressFn stopAt(train::Control& control, int64_t step) {
    return [&control, step](const train::Progress& p) {
        if (p.step >= step) control.requestStop();
    };
}

// DIR/{train,test}/<class>/*.png with `perClass` images per class.
void writeFolder(const std::string& root, int classes, int perClass, bool emptyClass = false) {
    for (const char* split : {"train", "test"})
        for (int c = 0; c < classes; ++c) {
            const std::string dir = root + "/" + split + "/" + split + "_c" + std::to_string(c);
            std::filesystem::create_directories(dir);
            if (emptyClass && c == 0 && std::string(split) == "test") continue;
            for (int i = 0; i < perClass; ++i)
                cv::imwrite(dir + "/" + std::to_string(i) + ".png", testing::randomImage(20, 20, uint64_t(c * 100 + i)));
        }
}

} // namespace

class TestConstellationTrain : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void configJson() {
        auto c = tiny();
        auto back = ConstellationTrainConfig::fromJson(c.toJson());
        QCOMPARE(back.toJson(), c.toJson());
        QVERIFY(contains(errorOf([] { ConstellationTrainConfig::fromJson({{"stepz", 3}}, "t.json"); }), {"t.json", "stepz"}));
        QVERIFY(contains(errorOf([] { ConstellationTrainConfig::fromJson({{"batch_size", 1}}, "t.json"); }),
                         {"t.json", "batch_size"}));
        QVERIFY(contains(errorOf([] { ConstellationTrainConfig::fromJson({{"model", {{"clusters", 30}}}}, "t.json"); }),
                         {"heads"}));
        auto m = c.modelConfig({"a", "b", "c"}, 32);
        QCOMPARE(m.numClasses, int64_t(3));
        QCOMPARE(m.className(2), std::string("c"));
        auto wrong = c;
        wrong.model["num_classes"] = 7;
        QVERIFY(contains(errorOf([&] { wrong.modelConfig({"a", "b"}, 32); }), {"num_classes", "2 base classes"}));
    }

    // A stopped-then-resumed run ends with the same weights (cluster centers included) as an
    // uninterrupted one; the run log and model.h5 are complete.
    void resumeEqualsUninterrupted() {
        QTemporaryDir dir;
        const std::string a = dir.filePath("a").toStdString(), b = dir.filePath("b").toStdString();
        train::Control c1;
        auto full = trainConstellation(tiny(), "procedural", a, false, c1, {});
        QVERIFY(full.finished);
        QCOMPARE(full.steps, int64_t(6));
        QVERIFY(full.novel1 >= 0 && full.novel1 <= 1 && full.novel5 >= 0 && full.novel5 <= 1);
        train::Control c2;
        auto part = trainConstellation(tiny(), "procedural", b, false, c2, stopAt(c2, 3));
        QVERIFY(!part.finished);
        QVERIFY(part.steps >= 3 && part.steps < 6);
        QCOMPARE(RunLog::load(b + "/run.h5").status, RunStatus::Stopped);
        train::Control c3;
        auto rest = trainConstellation(tiny(), "procedural", b, true, c3, {});
        QVERIFY(rest.finished);
        auto ma = loadConstellation(a + "/model.h5"), mb = loadConstellation(b + "/model.h5");
        auto ta = train::moduleTensors(*ma), tb = train::moduleTensors(*mb);
        QCOMPARE(ta.size(), tb.size());
        for (const auto& [name, t] : ta) QVERIFY2(torch::allclose(t, tb.at(name), 1e-5, 1e-6), name.c_str());
        QVERIFY(!torch::equal(ma->clustering("branch1.0")->V_count_buffer, torch::ones({16}, torch::kFloat64)));
        auto log = RunLog::load(a + "/run.h5");
        QCOMPARE(log.status, RunStatus::Finished);
        QVERIFY(log.series.count("val/acc") && !log.series.at("val/acc").steps.empty());
        QVERIFY(log.eval.count("final/novel_1shot_acc") && log.eval.count("final/novel_5shot_ci95"));
        QCOMPARE(log.eval.at("final/novel_5shot_acc").item<double>(), full.novel5);
        QCOMPARE(ma->config().numClasses, int64_t(64));
    }

    void resumeRefusesOtherClustersOrData() {
        QTemporaryDir dir;
        const std::string out = dir.filePath("r").toStdString();
        train::Control c;
        trainConstellation(tiny(), "procedural", out, false, c, stopAt(c, 2));
        auto other = tiny();
        other.model["clusters"] = 8;
        train::Control c2;
        const std::string e = errorOf([&] { trainConstellation(other, "procedural", out, true, c2, {}); });
        QVERIFY2(contains(e, {"checkpoint.h5", "16 clusters", "8"}), e.c_str());
        const std::string d = errorOf([&] { trainConstellation(tiny(), "procedural:5", out, true, c2, {}); });
        QVERIFY2(contains(d, {"checkpoint.h5", "procedural:5"}), d.c_str());
    }

    void multiBranchLogsPrototypicalLoss() {
        QTemporaryDir dir;
        auto cfg = tiny();
        cfg.model["multi_branch"] = true;
        cfg.steps = 2;
        cfg.finalEpisodes = 0;
        train::Control c;
        auto r = trainConstellation(cfg, "procedural", dir.filePath("m").toStdString(), false, c, {});
        QVERIFY(r.finished);
        auto log = RunLog::load(dir.filePath("m/run.h5").toStdString());
        QCOMPARE(log.series.at("loss/proto").values.size(), size_t(2));
        QVERIFY(log.series.at("loss/proto").values[0] > 0);
        QVERIFY(loadConstellation(dir.filePath("m/model.h5").toStdString())->config().multiBranch);
    }

    // evaluateFewShot's accuracy of an episode equals the argmax of the model's own logits.
    void episodeEvaluationMatchesDirect() {
        ConstellationConfig mc;
        mc.channels = {8, 8, 8, 8};
        mc.clusters = 16;
        mc.heads = 4;
        mc.numClasses = 4;
        ConstellationModel model(mc, 4);
        auto splits = data::openFewShotDataset("procedural");
        data::EpisodeSampler sampler(splits.novel, "novel");
        data::EpisodeSpec spec{5, 2, 3};
        auto r = evaluateFewShot(model, sampler, spec, 3, 11);
        QCOMPARE(r.accuracies.size(), size_t(3));
        auto ep = sampler.sample(spec, 11, 1);
        auto er = runEpisode(model, *splits.novel, spec, ep);
        QCOMPARE(er.support.size(), size_t(10));
        QCOMPARE(er.query.size(), size_t(15));
        QCOMPARE(er.prototypeClusters.size(), size_t(5));
        QCOMPARE(er.prototypeModule, std::string("branch1.3"));
        QVERIFY(std::abs(er.accuracy - r.accuracies[1]) < 1e-9);
        // 5 classes of 6 images: later episodes reuse the features of images met in earlier
        // ones; every episode still gets the accuracy of the model's own logits on it alone.
        auto small = std::make_shared<data::ProceduralFewShotDataset>(0, 80, 5, 6, 32);
        data::EpisodeSampler smallSampler(small, "small");
        auto rs = evaluateFewShot(model, smallSampler, spec, 4, 5);
        for (int64_t e = 0; e < 4; ++e)
            QVERIFY(std::abs(runEpisode(model, *small, spec, smallSampler.sample(spec, 5, e)).accuracy -
                             rs.accuracies[size_t(e)]) < 1e-9);
        double mean = (r.accuracies[0] + r.accuracies[1] + r.accuracies[2]) / 3;
        QVERIFY(std::abs(r.mean - mean) < 1e-9);
        QVERIFY(std::abs(r.ci95 - data::confidence95(r.accuracies)) < 1e-12);
        QVERIFY(model.is_training());   // restored
    }

    void evalCommandErrors() {
        QTemporaryDir dir;
        ConstellationConfig mc;
        mc.channels = {8, 8, 8, 8};
        mc.clusters = 16;
        mc.heads = 4;
        mc.numClasses = 4;
        const std::string ck = dir.filePath("c.h5").toStdString();
        saveConstellation(ConstellationModel(mc), ck);
        using app::constellation::evalFewShotCommand;
        auto err = [](std::vector<std::string> args) { return errorOf([&] { evalFewShotCommand(args); }); };
        QVERIFY(contains(err({"--checkpoint", ck, "--ways", "30", "--episodes", "1"}), {"30", "20"}));
        const std::string folder = dir.filePath("mini").toStdString();
        writeFolder(folder, 5, 4);
        QVERIFY(contains(err({"--checkpoint", ck, "--data", folder, "--shots", "5", "--episodes", "1"}), {"only 4"}));
        QCOMPARE(evalFewShotCommand({"--checkpoint", ck, "--data", folder, "--shots", "1", "--queries", "2",
                                     "--episodes", "2", "--json", dir.filePath("r.json").toStdString()}),
                 0);
        QVERIFY(QFile::exists(dir.filePath("r.json")));
        QCOMPARE(evalFewShotCommand({"--checkpoint", ck, "--shots", "x"}), 2);
        Checkpoint foreign = loadCheckpoint(ck);
        foreign.family = "letr";
        saveCheckpoint(dir.filePath("l.h5").toStdString(), foreign);
        QVERIFY(contains(err({"--checkpoint", dir.filePath("l.h5").toStdString()}), {"l.h5", "letr"}));
        const std::string empty = dir.filePath("empty").toStdString();
        writeFolder(empty, 5, 3, true);
        QVERIFY(contains(err({"--checkpoint", ck, "--data", empty}), {"empty"}));
    }
};

QTEST_GUILESS_MAIN(TestConstellationTrain)
#include "test_constellation_train.moc"
