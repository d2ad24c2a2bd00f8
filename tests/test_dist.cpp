// Data-parallel training on c10d (core/dist, docs/distributed.md): the launcher settings, and
// two real processes on localhost (this test binary started again as workers, with RANK etc.
// in their environment) reaching the parameters of one process trained on the combined batch.
#include <QProcess>
#include <QRegularExpression>
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <torch/torch.h>

#include "core/dist/dist.h"
#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/runlog.h"
#include "tests/ez_support.h"

using namespace glimpse;

namespace {

constexpr int kSteps = 6;
constexpr int kBatch = 12;   // the combined batch; each of R ranks trains on kBatch / R rows

// A small network with several parameter tensors of different sizes (several buckets with a
// small bucket size) and one parameter that only some batches use (`rare`).
struct NetImpl : torch::nn::Module {
    torch::nn::Conv2d conv{torch::nn::Conv2dOptions(2, 6, 3).padding(1)};
    torch::nn::Linear fc1{6 * 8 * 8, 24}, fc2{24, 4};
    torch::Tensor rare;
    NetImpl() {
        register_module("conv", conv);
        register_module("fc1", fc1);
        register_module("fc2", fc2);
        rare = register_parameter("rare", torch::zeros({4}));
    }
    torch::Tensor forward(const torch::Tensor& x, bool useRare) {
        auto h = torch::relu(conv(x)).flatten(1);
        auto out = fc2(torch::tanh(fc1(h)));
        return useRare ? out + rare : out;
    }
};
TORCH_MODULE(Net);

struct Batch {
    torch::Tensor x, y;
};
// Step s's combined batch (the same on every process), rows [begin, end).
Batch batchOf(int step, int begin, int end) {
    torch::manual_seed(1000 + step);
    auto x = torch::randn({kBatch, 2, 8, 8});
    auto y = torch::randint(0, 4, {kBatch});
    return {x.slice(0, begin, end), y.slice(0, begin, end)};
}

// Trains kSteps steps with Adam as rank `rank` of `world` (world 1: the whole batch) and
// returns the parameters. The loss is the mean over this rank's rows, so the average of the
// ranks' gradients is the gradient of the combined batch's mean loss.
std::vector<torch::Tensor> trainSteps(dist::Communicator* comm, int rank, int world, dist::GradientReducer::Stats* stats) {
    torch::manual_seed(7);
    Net net;
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-2));
    dist::GradientReducer reducer(comm, net->parameters(), /*bucketBytes=*/1024);
    const int per = kBatch / world;
    for (int s = 0; s < kSteps; ++s) {
        const Batch b = batchOf(s, rank * per, (rank + 1) * per);
        opt.zero_grad();
        reducer.beginStep();
        // `rare` is used on odd steps by rank 0 only (world 1: by the first rows' half... the
        // whole batch, so the single process sees it used whenever rank 0 would).
        const bool useRare = s % 2 == 1 && rank == 0;
        torch::Tensor loss;
        if (world == 1 && s % 2 == 1) {
            // Same function as the ranks: rows of "rank 0" with `rare`, the others without.
            const int half = kBatch / 2;
            auto outA = net->forward(b.x.slice(0, 0, half), true);
            auto outB = net->forward(b.x.slice(0, half, kBatch), false);
            loss = 0.5 * (torch::nn::functional::cross_entropy(outA, b.y.slice(0, 0, half)) +
                          torch::nn::functional::cross_entropy(outB, b.y.slice(0, half, kBatch)));
        } else {
            loss = torch::nn::functional::cross_entropy(net->forward(b.x, useRare), b.y);
        }
        loss.backward();
        reducer.finishStep();
        opt.step();
    }
    if (stats) *stats = reducer.stats();
    std::vector<torch::Tensor> out;
    for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
    return out;
}

int freePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        return 29700;
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

// Worker mode (GLIMPSE_TEST_DIST_WORKER=train|die): the rank's part of the run, parameters
// saved to GLIMPSE_TEST_DIST_OUT. "die": rank 1 exits abruptly after 2 steps.
int worker(const std::string& mode) {
    try {
        const dist::Settings s = dist::settingsFromEnvironment();
        dist::Communicator comm(s);
        if (mode == "die") {
            std::vector<torch::Tensor> t{torch::ones({16})};
            for (int step = 0;; ++step) {
                if (s.rank == 1 && step == 2) std::_Exit(3);
                comm.allReduce(t);
            }
        }
        dist::GradientReducer::Stats st;
        auto params = trainSteps(&comm, s.rank, s.worldSize, &st);
        torch::save(params, std::getenv("GLIMPSE_TEST_DIST_OUT"));
        std::printf("buckets %d in-backward %lld after %lld bytes/step %lld\n", st.buckets,
                    (long long)st.launchedInBackward, (long long)st.launchedAfter, (long long)st.bytesPerStep);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    }
}

struct Worker {
    std::unique_ptr<QProcess> p;
    QString out;
};

Worker startWorker(const QString& mode, int rank, int world, int port, const QString& outFile, int timeoutS = 60) {
    Worker w;
    w.p = std::make_unique<QProcess>();
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("GLIMPSE_TEST_DIST_WORKER", mode);
    env.insert("GLIMPSE_TEST_DIST_OUT", outFile);
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", QString::number(port));
    env.insert("WORLD_SIZE", QString::number(world));
    env.insert("RANK", QString::number(rank));
    env.insert("LOCAL_RANK", QString::number(rank));
    env.insert("GLIMPSE_DIST_TIMEOUT", QString::number(timeoutS));
    env.insert("OMP_NUM_THREADS", "1");
    w.p->setProcessEnvironment(env);
    w.p->start(QCoreApplication::applicationFilePath(), {});
    w.out = outFile;
    return w;
}

const QString kGlimpse = QStringLiteral(GLIMPSE_BINARY_DIR "/app/glimpse");

// `glimpse train <model>` as rank `rank` of `world` (world 1: no distributed flags).
std::unique_ptr<QProcess> startTrainer(const QStringList& args, int rank, int world, int port,
                                       const QString& model = "coat") {
    auto p = std::make_unique<QProcess>();
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMP_NUM_THREADS", "1");
    p->setProcessEnvironment(env);
    QStringList a = QStringList{"train", model} + args;
    if (world > 1)
        a << "--world-size" << QString::number(world) << "--rank" << QString::number(rank) << "--master-addr"
          << "127.0.0.1" << "--master-port" << QString::number(port) << "--dist-timeout" << "60";
    p->start(kGlimpse, a);
    return p;
}

// A batch that does not divide by the world size: every rank of a 3-rank run stops with a clear
// error before the rendezvous. Each rank is started alone, with no peer to meet: a rank that
// checked only after the rendezvous would wait for the others and then report a failed
// rendezvous instead (what CI once saw of rank 0 when the peers stopped before it had connected).
bool refusesBatchBeforeRendezvous(const QStringList& common, const QString& out, const QString& model, int batch) {
    const QString want = QString("batch_size %1 does not divide by the world size 3").arg(batch);
    for (int rank = 0; rank < 3; ++rank) {
        auto p = startTrainer(common + QStringList{"--out", out}, rank, 3, freePort(), model);
        if (!p->waitForFinished(120000)) return false;
        const QString e = QString::fromLocal8Bit(p->readAllStandardError());
        if (p->exitCode() == 0 || !e.contains(want) || e.contains("waiting for the other ranks")) {
            qWarning("%s rank %d: %s", qPrintable(model), rank, qPrintable(e.right(1500)));
            return false;
        }
    }
    return true;
}

bool finishOk(QProcess& p, QString* err = nullptr) {
    const bool done = p.waitForFinished(240000);
    const QString e = QString::fromLocal8Bit(p.readAllStandardError()) + QString::fromLocal8Bit(p.readAllStandardOutput());
    if (err) *err = e;
    if (!done || p.exitCode() != 0) qWarning("%s", qPrintable(e.right(2000)));
    return done && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// Rank 0 and rank 1 of one run of `glimpse train <model> args...` on `port`, both to the end;
// their outputs. False when either fails.
bool runTwoRanks(const QStringList& args, int port, const QString& model, QString* out0, QString* out1) {
    auto r0 = startTrainer(args, 0, 2, port, model);
    auto r1 = startTrainer(args, 1, 2, port, model);
    const bool ok1 = finishOk(*r1, out1);
    return finishOk(*r0, out0) && ok1;
}

double largestDifference(const std::string& a, const std::string& b) {
    const auto ta = loadCheckpoint(a).tensors, tb = loadCheckpoint(b).tensors;
    if (ta.size() != tb.size()) return 1e9;
    double worst = 0;
    for (const auto& [name, t] : ta) {
        auto it = tb.find(name);
        if (it == tb.end() || !t.sizes().equals(it->second.sizes())) return 1e9;
        if (t.is_floating_point()) worst = std::max(worst, (t - it->second).abs().max().item<double>());
    }
    return worst;
}

std::string errorOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

class TestDist : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    // A file of the test's temporary folder with `text` in it; its path.
    QString writeText(const char* name, const char* text) {
        const QString path = dir_.filePath(name);
        std::ofstream(path.toStdString()) << text;
        return path;
    }

    // A class-folder dataset for CoaT: 3 classes of 14 noisy 24x24 images, each with a bright
    // band in its own third (written once).
    QString classData() {
        const QString data = dir_.filePath("classes");
        if (QFileInfo(data).isDir()) return data;
        for (int k = 0; k < 3; ++k) {
            const QString cls = data + "/c" + QString::number(k);
            std::filesystem::create_directories(cls.toStdString());
            for (int i = 0; i < 14; ++i) {
                cv::Mat img(24, 24, CV_8UC1);
                cv::randu(img, 0, 60);
                img.rowRange(k * 8, k * 8 + 8) += cv::Scalar(150);
                cv::imwrite((cls + QString("/%1.png").arg(i)).toStdString(), img);
            }
        }
        return data;
    }

private Q_SLOTS:
    void settingsFromTheLauncher() {
        ::unsetenv("WORLD_SIZE");
        ::unsetenv("RANK");
        ::unsetenv("MASTER_ADDR");
        ::unsetenv("MASTER_PORT");
        dist::Settings single = dist::settingsFromEnvironment();
        QCOMPARE(single.worldSize, 1);
        QVERIFY(!single.distributed());
        ::setenv("WORLD_SIZE", "4", 1);
        ::setenv("RANK", "3", 1);
        ::setenv("LOCAL_RANK", "1", 1);
        ::setenv("MASTER_ADDR", "10.0.0.2", 1);
        ::setenv("MASTER_PORT", "29555", 1);
        dist::Settings s = dist::settingsFromEnvironment();
        QCOMPARE(s.worldSize, 4);
        QCOMPARE(s.rank, 3);
        QCOMPARE(s.localRank, 1);
        QCOMPARE(s.masterAddr, std::string("10.0.0.2"));
        QCOMPARE(s.masterPort, 29555);
        QCOMPARE(s.describe(), std::string("rank 3 of 4 (gloo, 10.0.0.2:29555)"));
        // Flags win over the environment.
        s = dist::settingsFromEnvironment({{"rank", "0"}, {"master-port", "4000"}});
        QCOMPARE(s.rank, 0);
        QCOMPARE(s.masterPort, 4000);
        // Clear errors naming the variable or flag.
        QVERIFY(errorOf([] { dist::settingsFromEnvironment({{"rank", "4"}}); }).find("--rank=4 is outside 0..3") != std::string::npos);
        ::setenv("WORLD_SIZE", "two", 1);
        QVERIFY(errorOf([] { dist::settingsFromEnvironment(); }).find("WORLD_SIZE=two is not a whole number") != std::string::npos);
        ::setenv("WORLD_SIZE", "2", 1);
        ::setenv("RANK", "1", 1);
        ::setenv("MASTER_PORT", "70000", 1);
        QVERIFY(errorOf([] { dist::settingsFromEnvironment(); }).find("MASTER_PORT=70000 is not a port") != std::string::npos);
        ::unsetenv("MASTER_PORT");
        QVERIFY(errorOf([] { dist::settingsFromEnvironment(); }).find("needs MASTER_ADDR and MASTER_PORT") != std::string::npos);
        ::unsetenv("RANK");
        ::setenv("MASTER_PORT", "29555", 1);
        QVERIFY(errorOf([] { dist::settingsFromEnvironment(); }).find("RANK is not set") != std::string::npos);
        for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
    }

    // A single process: the reducer is inert and training is plain training.
    void singleProcessReducerIsInert() {
        dist::Communicator comm(dist::Settings{});
        std::vector<torch::Tensor> t{torch::arange(4, torch::kFloat32)};
        comm.allReduce(t, true);
        QVERIFY(torch::equal(t[0], torch::arange(4, torch::kFloat32)));
        dist::GradientReducer::Stats st;
        auto a = trainSteps(&comm, 0, 1, &st);
        auto b = trainSteps(nullptr, 0, 1, nullptr);
        for (size_t i = 0; i < a.size(); ++i) QVERIFY(torch::equal(a[i], b[i]));
        QCOMPARE(st.launchedInBackward + st.launchedAfter, int64_t(0));
        // 1 KB buckets in reverse order of net->parameters() (rare, conv w/b, fc1 w/b, fc2 w/b):
        // fc2 and fc1's bias fill one, fc1's 36 KB weight has its own, conv and rare the last.
        torch::manual_seed(7);
        Net net;
        dist::GradientReducer r(&comm, net->parameters(), 1024);
        QCOMPARE(r.bucketIndices(), (std::vector<std::vector<int>>{{6, 5, 4}, {3}, {2, 1, 0}}));
        QCOMPARE(st.buckets, 3);
        QCOMPARE(st.bytesPerStep, int64_t(4 * (4 + 6 * 2 * 9 + 6 + 384 * 24 + 24 + 24 * 4 + 4)));
    }

    // Two processes with half the batch each end with the parameters of one process on the
    // whole batch (Adam, 6 steps, within 1e-5); buckets start during backward, and `rare`
    // (unused by rank 1) still gets the right average.
    void twoRanksMatchOneProcessOnTheCombinedBatch() {
        QVERIFY(dir_.isValid());
        const auto single = trainSteps(nullptr, 0, 1, nullptr);
        const int port = freePort();
        Worker w0 = startWorker("train", 0, 2, port, dir_.filePath("r0.pt"));
        Worker w1 = startWorker("train", 1, 2, port, dir_.filePath("r1.pt"));
        for (Worker* w : {&w0, &w1}) {
            QVERIFY(w->p->waitForFinished(120000));
            const QString err = QString::fromLocal8Bit(w->p->readAllStandardError());
            const QString out = QString::fromLocal8Bit(w->p->readAllStandardOutput());
            qInfo("worker: %s %s", qPrintable(out.trimmed()), qPrintable(err.trimmed()));
            QCOMPARE(w->p->exitCode(), 0);
            QVERIFY(out.contains("buckets"));
            QVERIFY2(!out.contains("in-backward 0 "), "no bucket was launched during backward");
        }
        for (Worker* w : {&w0, &w1}) {
            std::vector<torch::Tensor> got;
            torch::load(got, w->out.toStdString());
            QCOMPARE(got.size(), single.size());
            double worst = 0;
            for (size_t i = 0; i < got.size(); ++i)
                worst = std::max(worst, (got[i] - single[i]).abs().max().item<double>());
            qInfo("largest difference to one process: %.3g", worst);
            QVERIFY2(worst <= 1e-5, qPrintable(QString::number(worst)));
        }
    }

    // A rank that dies makes the other stop with an error naming itself and the operation,
    // long before the timeout would have to expire.
    void aDeadRankStopsTheOthers() {
        const int port = freePort();
        QElapsedTimer clock;
        clock.start();
        Worker w0 = startWorker("die", 0, 2, port, dir_.filePath("d0.pt"), 30);
        Worker w1 = startWorker("die", 1, 2, port, dir_.filePath("d1.pt"), 30);
        QVERIFY(w1.p->waitForFinished(60000));
        QCOMPARE(w1.p->exitCode(), 3);
        QVERIFY(w0.p->waitForFinished(60000));
        const QString err = QString::fromLocal8Bit(w0.p->readAllStandardError());
        qInfo("rank 0 after %lld ms: %s", clock.elapsed(), qPrintable(err.trimmed()));
        QCOMPARE(w0.p->exitCode(), 2);
        QVERIFY2(err.contains("rank 0 of 2") && err.contains("all-reduce failed"), qPrintable(err));
    }

    // The real trainer: `glimpse train coat` in two processes on a class-folder dataset ends with
    // the model of one process on the same data and schedule (within 1e-5); rank 0 alone wrote
    // the files, its run log has the world size and both ranks' throughput; and a run stopped
    // with two ranks and resumed with one ends with the same model too.
    void coatTrainerInTwoProcesses() {
        const QString data = classData();
        const QString cfg = writeText("tiny.json", R"({"model": {"variant": "custom", "embed_dims": [16, 16, 16, 16], "serial_depths": [1, 1, 1, 1],
                    "mlp_ratios": [2, 2, 2, 2], "image_size": 32, "resize": 32},
                    "batch_size": 8, "steps": 6, "warmup_steps": 2, "lr": 0.002, "eval_every": 3,
                    "checkpoint_every": 3, "val_subset": 4, "eval_batch": 8, "threads": 1})");
        const QStringList common{"--data", data, "--config", cfg};
        auto one = startTrainer(common + QStringList{"--out", dir_.filePath("one")}, 0, 1, 0);
        QVERIFY(finishOk(*one));
        const int port = freePort();
        const QString two = dir_.filePath("two");
        auto r0 = startTrainer(common + QStringList{"--out", two}, 0, 2, port);
        auto r1 = startTrainer(common + QStringList{"--out", two}, 1, 2, port);
        QString out1;
        QVERIFY(finishOk(*r1, &out1));
        QVERIFY(finishOk(*r0));
        QVERIFY2(out1.contains("rank 1 of 2: done after step 6"), qPrintable(out1));
        const double d = largestDifference(dir_.filePath("one/model.h5").toStdString(), (two + "/model.h5").toStdString());
        qInfo("two ranks vs one process: largest weight difference %.3g", d);
        QVERIFY2(d <= 1e-5, qPrintable(QString::number(d)));
        QStringList files = QDir(two).entryList(QDir::Files);
        files.sort();
        QCOMPARE(files, (QStringList{"checkpoint.h5", "model.h5", "run.h5"}));
        const RunLog log = RunLog::load((two + "/run.h5").toStdString());
        QCOMPARE(log.config.value("world_size", 0), 2);
        for (const char* s : {"dist/world_size", "dist/throughput_rank0", "dist/throughput_rank1", "loss/train"})
            QVERIFY2(log.series.count(s) && log.series.at(s).size() == 6, s);
        QCOMPARE(log.series.at("dist/world_size").values.back(), 2.0);
        QVERIFY(log.series.at("dist/throughput_rank1").values.back() > 0);
        // Stopped after 3 steps with two ranks, resumed in one process: the same model again.
        const QString mixed = dir_.filePath("mixed");
        const int port2 = freePort();
        auto s0 = startTrainer(common + QStringList{"--out", mixed, "--steps", "3"}, 0, 2, port2);
        auto s1 = startTrainer(common + QStringList{"--out", mixed, "--steps", "3"}, 1, 2, port2);
        QVERIFY(finishOk(*s1));
        QVERIFY(finishOk(*s0));
        QVERIFY(!QFile::exists(mixed + "/model.h5"));
        auto resumed = startTrainer(common + QStringList{"--out", mixed, "--resume"}, 0, 1, 0);
        QVERIFY(finishOk(*resumed));
        const double dr = largestDifference(dir_.filePath("one/model.h5").toStdString(), (mixed + "/model.h5").toStdString());
        qInfo("2 ranks for 3 steps, then 1 process: largest weight difference %.3g", dr);
        QVERIFY2(dr <= 1e-5, qPrintable(QString::number(dr)));
        QVERIFY(refusesBatchBeforeRendezvous(common, dir_.filePath("bad"), "coat", 8));
    }

    // A rank killed in the middle of `glimpse train coat`: rank 0 stops with an error naming
    // itself and the all-reduce, its run log says failed with that message, the checkpoint it
    // wrote before is intact, and one process resumes from it to the end.
    void killedRankDuringTraining() {
        const QString data = classData();
        const QString cfg = writeText("long.json", R"({"model": {"variant": "custom", "embed_dims": [16, 16, 16, 16], "serial_depths": [1, 1, 1, 1],
                    "mlp_ratios": [2, 2, 2, 2], "image_size": 32, "resize": 32},
                    "batch_size": 8, "steps": 400, "warmup_steps": 2, "eval_every": 0, "checkpoint_every": 5,
                    "val_subset": 4, "eval_batch": 8, "threads": 1})");
        const QString out = dir_.filePath("killed");
        const QStringList common{"--data", data, "--config", cfg, "--out", out};
        const int port = freePort();
        auto r0 = startTrainer(common, 0, 2, port);
        auto r1 = startTrainer(common, 1, 2, port);
        // Once rank 0 has written a checkpoint, rank 1 dies.
        for (int i = 0; i < 1200 && !QFile::exists(out + "/checkpoint.h5"); ++i) QTest::qWait(50);
        QVERIFY(QFile::exists(out + "/checkpoint.h5"));
        ::kill(pid_t(r1->processId()), SIGKILL);
        QVERIFY(r1->waitForFinished(30000));
        QElapsedTimer clock;
        clock.start();
        QVERIFY(r0->waitForFinished(60000));
        const QString err = QString::fromLocal8Bit(r0->readAllStandardError());
        qInfo("rank 0 stopped %lld ms after rank 1 was killed: %s", clock.elapsed(), qPrintable(err.trimmed().right(300)));
        QVERIFY(r0->exitCode() != 0);
        QVERIFY2(err.contains("rank 0 of 2") && err.contains("failed"), qPrintable(err));
        const RunLog log = RunLog::load((out + "/run.h5").toStdString());
        QCOMPARE(log.status, RunStatus::Failed);
        QVERIFY2(QString::fromStdString(log.statusMessage).contains("rank 0 of 2"), log.statusMessage.c_str());
        auto resumed = startTrainer(QStringList(common) << "--resume", 0, 1, 0);
        QVERIFY(finishOk(*resumed));
        QCOMPARE(RunLog::load((out + "/run.h5").toStdString()).status, RunStatus::Finished);
    }

    // `glimpse train letr` (coarse then fine stage, augmentation on, frozen batch norm) in two
    // processes: each rank matches its images, the loss denominators are the whole batch's,
    // and the model ends within 1e-5 of one process's.
    void letrTrainerInTwoProcesses() {
        const QString cfg = writeText("letr.json", R"({"model": {"backbone": "resnet10", "hidden_dim": 32, "nheads": 2, "dim_feedforward": 64,
                    "coarse_enc_layers": 1, "coarse_dec_layers": 2, "fine_enc_layers": 1, "fine_dec_layers": 2,
                    "num_queries": 12, "short_side": 64, "max_long_side": 128, "dropout": 0.0},
                    "batch_size": 4, "coarse_steps": 3, "fine_steps": 2, "focal_steps": 0, "val_every": 0,
                    "checkpoint_every": 2, "threads": 1, "train_backbone_bn": false, "clip_max_norm": 0.5,
                    "augment": {"enabled": true, "min_short_side": 56, "max_short_side": 72, "max_long_side": 128}})");
        const QStringList common{"--data", "procedural:8:0:64x64", "--config", cfg};
        auto one = startTrainer(common + QStringList{"--out", dir_.filePath("letr1")}, 0, 1, 0, "letr");
        QVERIFY(finishOk(*one));
        const int port = freePort();
        const QString two = dir_.filePath("letr2");
        auto r0 = startTrainer(common + QStringList{"--out", two}, 0, 2, port, "letr");
        auto r1 = startTrainer(common + QStringList{"--out", two}, 1, 2, port, "letr");
        QString out1;
        QVERIFY(finishOk(*r1, &out1));
        QVERIFY(finishOk(*r0));
        QVERIFY2(out1.contains("rank 1 of 2: done after step 5"), qPrintable(out1));
        const double d = largestDifference(dir_.filePath("letr1/model.h5").toStdString(), (two + "/model.h5").toStdString());
        qInfo("LETR, two ranks vs one process: largest weight difference %.3g", d);
        QVERIFY2(d <= 1e-5, qPrintable(QString::number(d)));
        const RunLog a = RunLog::load(dir_.filePath("letr1/run.h5").toStdString());
        const RunLog b = RunLog::load((two + "/run.h5").toStdString());
        // The logged loss is the whole batch's, as in one process.
        const auto& la = a.series.at("loss/total").values;
        const auto& lb = b.series.at("loss/total").values;
        QCOMPARE(lb.size(), la.size());
        for (size_t i = 0; i < la.size(); ++i) QVERIFY2(std::abs(la[i] - lb[i]) <= 1e-4 * std::max(1.0, std::abs(la[i])), qPrintable(QString("step %1: %2 vs %3").arg(i).arg(la[i]).arg(lb[i])));
        QVERIFY(b.series.count("dist/throughput_rank1"));
        QVERIFY(refusesBatchBeforeRendezvous(common, dir_.filePath("letr_bad"), "letr", 4));
    }

    // `glimpse train constellation --multi-branch` in two processes (batch-norm statistics per
    // rank, the prototypical episodes shared out): it finishes, rank 0 alone evaluates and writes;
    // stopped after 2 steps with two ranks, it resumes in one process and finishes.
    void constellationTrainerInTwoProcesses() {
        const QString cfg = writeText("cn.json", R"({"model": {"channels": [8, 8, 8, 8], "clusters": 16, "heads": 4, "image_size": 32},
                    "batch_size": 8, "steps": 4, "warmup_steps": 1, "val_every": 2, "val_episodes": 2,
                    "final_episodes": 3, "checkpoint_every": 2, "proto_shots": 1, "proto_queries": 2,
                    "proto_episodes": 2, "threads": 1})");
        const QStringList common{"--data", "procedural", "--config", cfg, "--multi-branch"};
        const int port = freePort();
        const QString two = dir_.filePath("cn2");
        QString out0, out1;
        QVERIFY(runTwoRanks(common + QStringList{"--out", two}, port, "constellation", &out0, &out1));
        QVERIFY2(out1.contains("rank 1 of 2: done after step 4"), qPrintable(out1));
        QVERIFY2(out0.contains("1-shot"), qPrintable(out0));   // rank 0's table
        QStringList files = QDir(two).entryList(QDir::Files);
        files.sort();
        QCOMPARE(files, (QStringList{"checkpoint.h5", "model.h5", "run.h5"}));
        const RunLog log = RunLog::load((two + "/run.h5").toStdString());
        QCOMPARE(log.status, RunStatus::Finished);
        QVERIFY(log.series.at("dist/throughput_rank1").size() == 4);
        QVERIFY(log.series.at("loss/proto").size() == 4);
        QVERIFY(log.eval.count("final/novel_5shot_acc"));
        const QString mixed = dir_.filePath("cn-mixed");
        const int port2 = freePort();
        auto s0 = startTrainer(common + QStringList{"--out", mixed, "--steps", "2"}, 0, 2, port2, "constellation");
        auto s1 = startTrainer(common + QStringList{"--out", mixed, "--steps", "2"}, 1, 2, port2, "constellation");
        QVERIFY(finishOk(*s1));
        QVERIFY(finishOk(*s0));
        QVERIFY(!QFile::exists(mixed + "/model.h5"));
        auto resumed = startTrainer(common + QStringList{"--out", mixed, "--resume"}, 0, 1, 0, "constellation");
        QVERIFY(finishOk(*resumed));
        QVERIFY(QFile::exists(mixed + "/model.h5"));
        QCOMPARE(RunLog::load((mixed + "/run.h5").toStdString()).series.at("loss/train").size(), size_t(4));
        QVERIFY(refusesBatchBeforeRendezvous(common, dir_.filePath("cn_bad"), "constellation", 8));
    }

    // EfficientZero: rank 0 learns from the games rank 1 plays (it plays none itself) and
    // broadcasts the self-play weights at every self_play_update_interval; rank 1 checks in with
    // the weights' checksum each round (a mismatch is an error). The run then resumes in one
    // process up to more updates.
    void efficientZeroSelfPlayRankFeedsTheLearner() {
        const QString cfg = writeText("ez.json", R"({"num_envs": 3, "simulations": 4, "batch_size": 8, "min_replay": 60,
                    "max_episode_steps": 120, "self_play_update_interval": 10, "checkpoint_interval": 20,
                    "log_interval": 5, "round_moves": 3, "network": {"channels": 8}})");
        const QStringList common{"--env", "breakout", "--config", cfg, "--threads", "1"};
        const QString run = dir_.filePath("ez2");
        const int port = freePort();
        QString out0, out1;
        QVERIFY(runTwoRanks(common + QStringList{"--out", run, "--steps", "40"}, port, "efficientzero", &out0, &out1));
        qInfo("%s", qPrintable(out0.right(300)));
        QVERIFY2(out1.contains(QRegularExpression("rank 1 of 2: done at update 40; played [1-9][0-9]* environment steps, [1-9][0-9]* games")),
                 qPrintable(out1));
        // 40 updates at 10 per copy: the first weights and 4 new versions (the last one may
        // come after the final round).
        const QRegularExpression learner("learner of 2 ranks: ([0-9]+) games received, ([0-9]+) weight broadcasts");
        const auto m = learner.match(out0);
        QVERIFY2(m.hasMatch(), qPrintable(out0));
        QVERIFY(m.captured(1).toInt() > 0);
        QVERIFY2(m.captured(2).toInt() >= 4, qPrintable(m.captured(2)));
        QStringList files = QDir(run).entryList(QDir::Files);
        files.sort();
        QCOMPARE(files, (QStringList{"model.h5", "runlog.h5", "state.h5"}));
        const RunLog log = RunLog::load((run + "/runlog.h5").toStdString());
        QCOMPARE(log.status, RunStatus::Finished);
        QVERIFY(log.series.at("episode_return").size() > 0);
        QCOMPARE(log.series.at("loss").steps.back(), int64_t(40));
        QVERIFY(log.series.at("dist/world_size").size() > 0);
        QCOMPARE(log.series.at("dist/world_size").values.back(), 2.0);
        QVERIFY(log.series.at("dist/throughput_rank1").values.back() > 0);   // rank 1's environment steps/s
        QCOMPARE(log.series.at("dist/throughput_rank0").values.back(), 0.0);   // the learner plays none
        // The environment steps rank 1 reported are the run's.
        const QRegularExpression played("played ([0-9]+) environment steps");
        const auto pm = played.match(out1);
        QVERIFY(pm.hasMatch());
        QCOMPARE(log.eval.at("env_steps").item<int64_t>(), pm.captured(1).toLongLong());
        // One process continues the run to 60 updates.
        auto one = startTrainer(common + QStringList{"--out", run, "--steps", "60", "--resume"}, 0, 1, 0, "efficientzero");
        QString outOne;
        QVERIFY(finishOk(*one, &outOne));
        QVERIFY2(outOne.contains("finished: 60 updates"), qPrintable(outOne));
        const RunLog resumed = RunLog::load((run + "/runlog.h5").toStdString());
        QCOMPARE(resumed.series.at("loss").steps.back(), int64_t(60));
    }

    // `glimpse train xtra-pretrain` in two processes: each rank distils its rows of every game's
    // batch; rank 0 alone writes the run log (world size, both ranks' throughput) and the student;
    // a run stopped with two ranks resumes in one. The student is not bit-equal to one process's:
    // its BatchNorm layers normalize with each rank's own rows (as ConstellationNet's do; see
    // docs/distributed.md), so the difference is only reported.
    void xtraPretrainInTwoProcesses() {
        const std::string d = dir_.path().toStdString();
        QString sources;
        for (const char* game : {"breakout", "invaders"}) {
            QProcess data;
            data.start(kGlimpse, {"data", "offline", "--env", game, "--policy", "random", "--steps", "120", "--envs", "2",
                                  "--max-episode-steps", "40", "--out", QString::fromStdString(d + "/xd-" + game + ".h5")});
            QVERIFY(finishOk(data));
            const std::string teacher = testing::saveRandomTeacher(d, game, 5);
            sources += QString("%1{\"dataset\": \"%2\", \"teacher\": \"%3\"}")
                           .arg(sources.isEmpty() ? "" : ", ", QString::fromStdString(d + "/xd-" + game + ".h5"),
                                QString::fromStdString(teacher));
        }
        const QString cfg = dir_.filePath("xp.json");
        std::ofstream(cfg.toStdString()) << "{\"sources\": [" << sources.toStdString()
                                         << "], \"steps\": 6, \"batch_size\": 8, \"checkpoint_every\": 2, \"log_every\": 1, "
                                            "\"warmup_steps\": 1, \"threads\": 1}";
        const QStringList common{"--config", cfg};
        auto one = startTrainer(common + QStringList{"--out", dir_.filePath("xp1")}, 0, 1, 0, "xtra-pretrain");
        QVERIFY(finishOk(*one));
        const int port = freePort();
        const QString two = dir_.filePath("xp2");
        QString out0, out1;
        QVERIFY(runTwoRanks(common + QStringList{"--out", two}, port, "xtra-pretrain", &out0, &out1));
        QVERIFY2(out1.contains("rank 1 of 2: done at step 6"), qPrintable(out1));
        QVERIFY2(out0.contains("finished: 6 updates on breakout, invaders"), qPrintable(out0));
        QVERIFY(!QFile::exists(two + "/rank1"));
        const double diff = largestDifference(dir_.filePath("xp1/model.h5").toStdString(), (two + "/model.h5").toStdString());
        qInfo("XTRA distillation, two ranks vs one process: largest weight difference %.3g (per-rank BatchNorm)", diff);
        const RunLog log = RunLog::load((two + "/run.h5").toStdString());
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.series.at("task_loss/invaders").size(), size_t(6));
        QCOMPARE(log.series.at("dist/world_size").values.back(), 2.0);
        QVERIFY(log.series.at("dist/throughput_rank1").values.back() > 0);
        // Stopped after 2 steps with two ranks, finished by one process.
        const QString mixed = dir_.filePath("xp-mixed");
        const int port2 = freePort();
        auto s0 = startTrainer(common + QStringList{"--out", mixed, "--steps", "2"}, 0, 2, port2, "xtra-pretrain");
        auto s1 = startTrainer(common + QStringList{"--out", mixed, "--steps", "2"}, 1, 2, port2, "xtra-pretrain");
        QVERIFY(finishOk(*s1));
        QVERIFY(finishOk(*s0));
        auto resumed = startTrainer(common + QStringList{"--out", mixed, "--resume"}, 0, 1, 0, "xtra-pretrain");
        QString outR;
        QVERIFY(finishOk(*resumed, &outR));
        QVERIFY2(outR.contains("finished: 6 updates"), qPrintable(outR));
        QCOMPARE(RunLog::load((mixed + "/run.h5").toStdString()).series.at("loss").size(), size_t(6));
    }

    // Nobody else arrives: the rendezvous gives up after the timeout with a clear message.
    void aMissingRankTimesOut() {
        dist::Settings s;
        s.worldSize = 2;
        s.rank = 0;
        s.masterPort = freePort();
        s.timeout = std::chrono::seconds(2);
        const std::string msg = errorOf([&] { dist::Communicator c(s); });
        qInfo("%s", msg.c_str());
        QVERIFY2(msg.find("rendezvous at 127.0.0.1:") != std::string::npos && msg.find("rank 0 of 2") != std::string::npos,
                 msg.c_str());
    }
};

int main(int argc, char** argv) {
    if (const char* mode = std::getenv("GLIMPSE_TEST_DIST_WORKER"); mode && *mode) {
        QCoreApplication app(argc, argv);
        return worker(mode);
    }
    QCoreApplication app(argc, argv);
    TestDist t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_dist.moc"
