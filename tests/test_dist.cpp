// Data-parallel training on c10d (core/dist, docs/distributed.md): the launcher settings, and
// two real processes on localhost (this test binary started again as workers, with RANK etc.
// in their environment) reaching the parameters of one process trained on the combined batch.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "core/dist/dist.h"
#include "core/error.h"

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
std::vector<torch::Tensor> train(dist::Communicator* comm, int rank, int world, dist::GradientReducer::Stats* stats) {
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
        auto params = train(&comm, s.rank, s.worldSize, &st);
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
        auto a = train(&comm, 0, 1, &st);
        auto b = train(nullptr, 0, 1, nullptr);
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
        const auto single = train(nullptr, 0, 1, nullptr);
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
