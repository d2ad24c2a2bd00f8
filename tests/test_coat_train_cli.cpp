// `glimpse train coat` run as a user would (a separate process): a single run stopped with
// --steps and resumed, the --ablation pe table and ablation.json, `glimpse infer --model coat`
// on a trained model.h5, clear errors for malformed configs and bad datasets; and the Training
// panel starting, cancelling and resuming a CoaT run and plotting its series.
#include <QComboBox>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <future>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <torch/torch.h>

#include "app/family.h"
#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "core/data/classification.h"
#include "core/models/coat/model.h"
#include "core/models/coat/train.h"
#include "core/runlog.h"
#include "widgets/live_chart.h"

using namespace glimpse;

namespace {

// Fashion-MNIST-shaped idx files: class k (0..2) has a bright band in the k-th third.
void writeBandData(const std::string& dir, const std::string& prefix, int n, uint32_t seed) {
    std::filesystem::create_directories(dir);
    data::IdxArray img, lbl;
    img.dims = {n, 28, 28};
    lbl.dims = {n};
    std::mt19937 rng{seed};
    for (int i = 0; i < n; ++i) {
        const int k = int(rng() % 3);
        lbl.data.push_back(uint8_t(k));
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x) img.data.push_back(uint8_t((y / 10 == k ? 180 : 20) + int(rng() % 50)));
    }
    data::writeIdx(dir + "/" + prefix + "-images-idx3-ubyte", img);
    data::writeIdx(dir + "/" + prefix + "-labels-idx1-ubyte", lbl);
}

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

} // namespace

class TestCoatTrainCli : public QObject {
    Q_OBJECT
    QTemporaryDir tmp_;
    QString spec_, config_;

private Q_SLOTS:
    void initTestCase() {
        torch::set_num_threads(1);
        const std::string d = tmp_.filePath("band").toStdString();
        writeBandData(d, "train", 64, 1);
        writeBandData(d, "t10k", 20, 2);
        spec_ = "fashion-mnist:" + QString::fromStdString(d);
        config_ = tmp_.filePath("tiny.json");
        std::ofstream(config_.toStdString()) << R"({
          "model": {"variant": "custom", "embed_dims": [16, 16, 16, 16], "serial_depths": [1, 1, 1, 1],
                    "mlp_ratios": [2, 2, 2, 2], "image_size": 32, "resize": 32},
          "batch_size": 8, "steps": 4, "warmup_steps": 1, "eval_every": 2, "checkpoint_every": 2,
          "val_subset": 8, "threads": 1})";
    }

    void stopWithStepsThenResume() {
        const QString out = tmp_.filePath("single");
        Result r = run({"train", "coat", "--config", config_, "--data", spec_, "--out", out, "--steps", "2"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("stopped at step 2"), qPrintable(r.out));
        QVERIFY(!QFileInfo::exists(out + "/model.h5"));
        r = run({"train", "coat", "--config", config_, "--data", spec_, "--out", out, "--resume"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("validation accuracy"), qPrintable(r.out));
        QVERIFY(QFileInfo::exists(out + "/model.h5"));
        // Bad arguments are refused with the usage.
        r = run({"train", "coat", "--data", spec_, "--out", out, "--ablation", "heads"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("only 'pe'"));
        r = run({"train", "coat", "--data", tmp_.filePath("nothing"), "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("nothing"), qPrintable(r.err));
    }

    // Without --config, `glimpse train coat` trains with the Training panel's recipe
    // (coat_fmnist_train.json: the shipped model's small CoaT, not CoaT-Lite Tiny), says so,
    // validates early (first_eval) and shows the training accuracy on its progress line.
    void defaultsToThePanelsRecipe() {
        const QString out = tmp_.filePath("recipe");
        Result r = run({"train", "coat", "--data", spec_, "--out", out, "--steps", "2"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("coat_fmnist_train.json"), qPrintable(r.err));
        QVERIFY2(r.err.contains(QRegularExpression("loss [0-9.]+ acc [0-9.]+% val")), qPrintable(r.err));
        const std::string recipe = std::string(GLIMPSE_SOURCE_DIR) + "/resources/coat_fmnist_train.json";
        const auto want = glimpse::coat::CoatTrainConfig::fromFile(recipe);
        QVERIFY(want.firstEval > 0 && want.firstEval < want.evalEvery);
        const RunLog log = RunLog::load(out.toStdString() + "/run.h5");
        nlohmann::json got = log.config.value("config", log.config);
        QVERIFY2(got.value("first_eval", -1) == want.firstEval, got.dump().c_str());
        QVERIFY2(got["model"]["embed_dims"] == want.model["embed_dims"], got.dump().c_str());
        QCOMPARE(got["steps"].get<int64_t>(), want.steps);

        // first_eval: a validation at that step besides every eval_every (here none until the end).
        const QString cfg = tmp_.filePath("early.json");
        std::ofstream(cfg.toStdString()) << R"({
          "model": {"variant": "custom", "embed_dims": [16, 16, 16, 16], "serial_depths": [1, 1, 1, 1],
                    "mlp_ratios": [2, 2, 2, 2], "image_size": 32, "resize": 32},
          "batch_size": 8, "steps": 4, "warmup_steps": 1, "eval_every": 0, "first_eval": 1,
          "checkpoint_every": 2, "val_subset": 8, "threads": 1})";
        const QString out2 = tmp_.filePath("early");
        r = run({"train", "coat", "--config", cfg, "--data", spec_, "--out", out2});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const RunLog done = RunLog::load(out2.toStdString() + "/run.h5");
        const auto& val = done.series.at("val/acc");
        QCOMPARE(val.steps, (std::vector<int64_t>{1, 4}));   // the early point and the final validation
    }

    void ablationTableAndInfer() {
        const QString out = tmp_.filePath("abl");
        Result r = run({"train", "coat", "--ablation", "pe", "--config", config_, "--data", spec_, "--out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        std::ifstream in((out + "/ablation.json").toStdString());
        const auto j = nlohmann::json::parse(in);
        QCOMPARE(j["results"].size(), size_t(4));
        const std::vector<std::string> names{"neither", "crpe", "cpe", "both"};
        for (size_t i = 0; i < 4; ++i) {
            const auto& e = j["results"][i];
            QCOMPARE(e["variant"].get<std::string>(), names[i]);
            QVERIFY(e["finished"].get<bool>());
            QCOMPARE(e["val_size"].get<int64_t>(), int64_t(20));
            // The printed table row carries the same accuracy.
            const QString acc = QString::asprintf("%.2f%%", 100.0 * e["val_acc"].get<double>());
            bool found = false;
            for (const QString& line : r.out.split('\n'))
                found |= line.startsWith(QString::fromStdString(names[i]) + " ") && line.contains(acc);
            QVERIFY2(found, qPrintable(r.out));
            auto m = coat::loadCoat((out + "/" + QString::fromStdString(names[i]) + "/model.h5").toStdString());
            QCOMPARE(m->config().useCpe, e["use_cpe"].get<bool>());
            QCOMPARE(m->config().useCrpe, e["use_crpe"].get<bool>());
        }
        // --resume keeps finished variants.
        r = run({"train", "coat", "--ablation", "pe", "--config", config_, "--data", spec_, "--out", out, "--resume"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.err.count("already finished"), 4);

        // glimpse infer classifies with the trained model and prints its class names.
        cv::Mat img(28, 28, CV_8UC3, cv::Scalar(30, 30, 30));
        img.rowRange(10, 20).setTo(cv::Scalar(200, 200, 200));
        const QString png = tmp_.filePath("band.png");
        QVERIFY(cv::imwrite(png.toStdString(), img));
        r = run({"infer", "--model", "coat", "--checkpoint", out + "/both/model.h5", "--image", png, "--out",
                 tmp_.filePath("t.h5"), "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        bool named = false;
        for (const auto& n : data::fashionMnistClassNames()) named |= r.out.contains(QString::fromStdString(n));
        QVERIFY2(named, qPrintable(r.out));
    }

    void badConfigAndDataAreNamed() {
        const QString out = tmp_.filePath("bad");
        // Malformed JSON: the error names the file.
        const QString broken = tmp_.filePath("broken.json");
        std::ofstream(broken.toStdString()) << R"({"steps": 4, "batch_size": )";
        Result r = run({"train", "coat", "--config", broken, "--data", spec_, "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("broken.json"), qPrintable(r.err));
        // An unknown key and a bad value are refused, naming the field.
        const QString unknown = tmp_.filePath("unknown.json");
        std::ofstream(unknown.toStdString()) << R"({"stepz": 4})";
        r = run({"train", "coat", "--config", unknown, "--data", spec_, "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("stepz"), qPrintable(r.err));
        const QString negative = tmp_.filePath("negative.json");
        std::ofstream(negative.toStdString()) << R"({"batch_size": -3})";
        r = run({"train", "coat", "--config", negative, "--data", spec_, "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("batch_size"), qPrintable(r.err));
        // A missing config file.
        r = run({"train", "coat", "--config", tmp_.filePath("absent.json"), "--data", spec_, "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("absent.json"), qPrintable(r.err));
        // A fashion-mnist folder without the idx files, and a truncated idx file.
        QDir().mkpath(tmp_.filePath("emptyfm"));
        r = run({"train", "coat", "--config", config_, "--data", "fashion-mnist:" + tmp_.filePath("emptyfm"), "--out",
                 out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("emptyfm") && r.err.contains("train-images"), qPrintable(r.err));
        const std::string cut = tmp_.filePath("cut").toStdString();
        std::filesystem::create_directories(cut);
        std::filesystem::copy(spec_.mid(14).toStdString(), cut, std::filesystem::copy_options::recursive);
        std::filesystem::resize_file(cut + "/train-images-idx3-ubyte", 1000);
        r = run({"train", "coat", "--config", config_, "--data", "fashion-mnist:" + QString::fromStdString(cut),
                 "--out", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("train-images-idx3-ubyte"), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(out + "/model.h5"));
    }

    // The real Training panel, driven through its widgets: choose CoaT in the Model combo,
    // Start, live progress and charts, the preview from model.h5; then a run cancelled with
    // Stop (a checkpoint, no model) and continued with Resume.
    void panelStartsACoatRun() {
        app::TrainingJob job(app::modelRunner());
        app::TrainingPanel panel(&job);
        auto* combo = panel.findChild<QComboBox*>();
        QVERIFY(combo);
        QCOMPARE(panel.model(), QString("letr"));
        panel.setModel("procedural");   // unknown: ignored
        QCOMPARE(panel.model(), QString("letr"));
        combo->setCurrentIndex(combo->findData("coat"));
        QCOMPARE(panel.model(), QString("coat"));
        // Choosing CoaT swaps the untouched LETR default dataset for Fashion-MNIST.
        bool sawFmnist = false;
        for (auto* e : panel.findChildren<QLineEdit*>()) sawFmnist |= e->text() == "fashion-mnist";
        QVERIFY(sawFmnist);
        panel.setConfigPath(config_);
        panel.setDataSpec(spec_);
        const QString out = tmp_.filePath("panel");
        panel.setOutDir(out);
        QSignalSpy finished(&job, &app::TrainingJob::finished);
        QSignalSpy preview(&panel, &app::TrainingPanel::previewUpdated);
        panel.startButton()->click();
        QVERIFY(job.running());
        QCOMPARE(job.spec().model, QString("coat"));
        QVERIFY(finished.wait(120000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
        QCOMPARE(panel.progressValue(), 1000);
        QVERIFY2(panel.progressText().contains("step 4 / 4"), qPrintable(panel.progressText()));
        panel.pollNow();
        for (const char* s : {"loss/train", "val/acc", "lr", "throughput"}) {
            auto* c = panel.charts()->chart(s);
            QVERIFY2(c && c->pointCount(0) > 0, s);
        }
        QCOMPARE(panel.charts()->chart("loss/train")->pointCount(0), 4);
        QCOMPARE(panel.charts()->chart("val/acc")->pointCount(0), 2);   // steps 2 and 4
        QVERIFY(QFileInfo::exists(out + "/model.h5"));
        // The preview classifies validation images with model.h5.
        QVERIFY(preview.count() > 0 || preview.wait(60000));
        QVERIFY2(!panel.previewImage().isNull(), "no CoaT preview image");
        QCOMPARE(panel.previewImage().width(), 4 * 40);
        // A finished CoaT run opened in a panel (File > Open run) gets the same preview.
        app::TrainingPanel viewer(nullptr);
        QSignalSpy viewerPreview(&viewer, &app::TrainingPanel::previewUpdated);
        QVERIFY(viewer.openRun(out + "/run.h5"));
        QVERIFY(viewerPreview.wait(60000));
        QCOMPARE(viewer.previewImage(), panel.previewImage());

        // Cancel: the trainer is held at its second step until Stop has been clicked, so the
        // stop lands mid-run deterministically.
        std::promise<void> clicked;
        auto clickedFuture = clicked.get_future().share();
        std::atomic<bool> hold{true};
        app::TrainingJob job2([&, inner = app::modelRunner()](const app::TrainingSpec& spec, train::Control& c,
                                                              const train::ProgressFn& progress) {
            inner(spec, c, [&](const train::Progress& p) {
                progress(p);
                if (hold && p.step == 2 && p.phase == "train") {
                    hold = false;
                    clickedFuture.wait();
                }
            });
        });
        app::TrainingPanel panel2(&job2);
        panel2.setModel("coat");
        panel2.setConfigPath(config_);
        panel2.setDataSpec(spec_);
        const QString out2 = tmp_.filePath("panel-cancel");
        panel2.setOutDir(out2);
        QSignalSpy progressed(&job2, &app::TrainingJob::progressed);
        QSignalSpy finished2(&job2, &app::TrainingJob::finished);
        panel2.startButton()->click();
        QVERIFY(QTest::qWaitFor([&] { return panel2.progressText().contains("step 2 / 4"); }, 60000));
        QVERIFY(panel2.stopButton()->isEnabled());
        panel2.stopButton()->click();
        clicked.set_value();
        QVERIFY(finished2.wait(60000));
        QVERIFY2(finished2.at(0).at(0).toBool(), qPrintable(finished2.at(0).at(1).toString()));
        QVERIFY(!QFileInfo::exists(out2 + "/model.h5"));
        QVERIFY(QFileInfo::exists(out2 + "/checkpoint.h5"));
        QVERIFY(panel2.startButton()->isEnabled());
        panel2.pollNow();
        QCOMPARE(panel2.charts()->chart("loss/train")->pointCount(0), 2);
        // The stopped run (checkpoint.h5, no model.h5 yet) opened in a panel previews its checkpoint.
        app::TrainingPanel viewer2(nullptr);
        QSignalSpy viewer2Preview(&viewer2, &app::TrainingPanel::previewUpdated);
        QVERIFY(viewer2.openRun(out2 + "/run.h5"));
        QVERIFY(viewer2Preview.wait(60000));
        QVERIFY2(viewer2.previewCaption().startsWith("checkpoint.h5 (step 2)"), qPrintable(viewer2.previewCaption()));
        QCOMPARE(viewer2.previewImage().width(), 4 * 40);
        // Resume continues from the checkpoint to the end.
        panel2.resumeButton()->click();
        QVERIFY(finished2.wait(120000));
        QVERIFY2(finished2.at(1).at(0).toBool(), qPrintable(finished2.at(1).at(1).toString()));
        QVERIFY(QFileInfo::exists(out2 + "/model.h5"));
        panel2.pollNow();
        QCOMPARE(panel2.charts()->chart("loss/train")->pointCount(0), 4);
        // Same seed and config: the resumed run ends with the uninterrupted run's weights.
        auto a = coat::loadCoat((out + "/model.h5").toStdString());
        auto b = coat::loadCoat((out2 + "/model.h5").toStdString());
        auto pa = a->parameters(), pb = b->parameters();
        QCOMPARE(pa.size(), pb.size());
        for (size_t i = 0; i < pa.size(); ++i) QVERIFY(torch::allclose(pa[i], pb[i], 1e-5, 1e-6));
    }

    // EfficientZero from the same combo: the Dataset field names the game; its runlog.h5 is
    // followed; Start refuses a folder that already holds a run, Resume continues it.
    void panelStartsAnEfficientZeroRun() {
        const QString cfg = tmp_.filePath("ez.json");
        std::ofstream(cfg.toStdString()) << R"({"steps": 3, "num_envs": 2, "simulations": 2,
          "max_episode_steps": 25, "batch_size": 4, "min_replay": 30, "updates_per_env_step": 1.0,
          "checkpoint_interval": 3, "log_interval": 1, "warmup_steps": 2,
          "network": {"channels": 4, "lstm_hidden": 8, "reduced_channels_reward": 2,
                      "reduced_channels_value": 2, "reduced_channels_policy": 2, "support_size": 10,
                      "proj_hidden": 8, "proj_out": 8, "pred_hidden": 4,
                      "reward_hidden": [8], "value_hidden": [8], "policy_hidden": [8]}})";
        app::TrainingJob job(app::modelRunner());
        app::TrainingPanel panel(&job);
        auto* combo = panel.findChild<QComboBox*>();
        combo->setCurrentIndex(combo->findData("efficientzero"));
        QCOMPARE(panel.model(), QString("efficientzero"));
        bool sawGame = false;
        for (auto* e : panel.findChildren<QLineEdit*>()) sawGame |= e->text() == "breakout";
        QVERIFY(sawGame);
        panel.setConfigPath(cfg);
        const QString out = tmp_.filePath("panel-ez");
        panel.setOutDir(out);
        QSignalSpy finished(&job, &app::TrainingJob::finished);
        panel.startButton()->click();
        QCOMPARE(job.runLogPath(), QDir(out).filePath("runlog.h5"));
        QVERIFY(finished.wait(120000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
        QVERIFY(QFileInfo::exists(out + "/model.h5"));
        panel.pollNow();
        auto* loss = panel.charts()->chart("loss");
        QVERIFY(loss && loss->pointCount(0) == 3);
        QVERIFY2(panel.progressText().contains("step 3 / 3"), qPrintable(panel.progressText()));
        // Start again into the same folder: refused, naming state.h5.
        QSignalSpy errors(&panel, &app::TrainingPanel::errorOccurred);
        panel.startButton()->click();
        QVERIFY(finished.wait(60000));
        QVERIFY(!finished.at(1).at(0).toBool());
        QVERIFY2(finished.at(1).at(1).toString().contains("state.h5"), qPrintable(finished.at(1).at(1).toString()));
        QCOMPARE(errors.count(), 1);
        // An unknown game is named.
        panel.setDataSpec("pong-deluxe");
        panel.setOutDir(tmp_.filePath("panel-ez2"));
        panel.startButton()->click();
        QVERIFY(finished.wait(60000));
        QVERIFY(!finished.at(2).at(0).toBool());
        QVERIFY2(finished.at(2).at(1).toString().contains("pong-deluxe"), qPrintable(finished.at(2).at(1).toString()));
    }

    // The shipped model (resources/coat_fmnist.h5, docs/decisions.md): loads with its class
    // names and classifies the first 500 Fashion-MNIST test images well above chance, both
    // through evaluateClassifier and one image through `glimpse infer`.
    void shippedModelClassifiesFashionMnist() {
        const std::string path = std::string(GLIMPSE_SOURCE_DIR) + "/resources/coat_fmnist.h5";
        auto model = coat::loadCoat(path);
        QCOMPARE(model->config().numClasses, int64_t(10));
        QCOMPARE(model->config().classNames, data::fashionMnistClassNames());
        const std::string dir = data::fashionMnistDefaultDir();
        if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz") &&
            !std::filesystem::exists(dir + "/t10k-images-idx3-ubyte"))
            QSKIP("dataset-fashion-mnist is not installed");
        data::FashionMnistDataset test(dir, "test");
        const auto e = coat::evaluateClassifier(*model, test, 500, 100, true);
        QCOMPARE(e.count, int64_t(500));
        QVERIFY2(e.acc > 0.8, qPrintable(QString::number(e.acc)));
        QCOMPARE(e.confusion.sum().item<int64_t>(), int64_t(500));
        // The same answer from the CLI on a PNG of test image 0 (an ankle boot).
        const auto s = test.get(0);
        const QString png = tmp_.filePath("fm0.png");
        QVERIFY(cv::imwrite(png.toStdString(), s.image));
        Result r = run({"infer", "--model", "coat", "--checkpoint", QString::fromStdString(path), "--image", png,
                        "--out", tmp_.filePath("fm0.h5"), "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QString top = r.out.section('\n', 1, 1);
        QVERIFY2(top.contains(QString::fromStdString(data::fashionMnistClassNames()[size_t(s.label)])),
                 qPrintable(r.out));
    }
};

QTEST_MAIN(TestCoatTrainCli)
#include "test_coat_train_cli.moc"
