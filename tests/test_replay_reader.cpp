// EpisodeReader and FrameCache (core/replay): lazy frames, bounded cache, threads, navigation,
// damaged files, and the replay bench on a small episode.
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/info.h"
#include "core/replay/bench_replay.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::replay;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

constexpr int64_t kT = 300, kH = 12, kW = 10, kA = 4;

rl::Episode sample() {
    torch::manual_seed(3);
    rl::Episode e;
    e.env = "pellets";
    e.actionNames = {"NOOP", "UP", "RIGHT", "LEFT"};
    e.frames = torch::randint(0, 256, {kT, kH, kW, 3}, torch::kUInt8);
    e.actions = torch::randint(0, kA, {kT}, torch::kInt64);
    e.rewards = torch::zeros({kT});
    for (int64_t t : {7, 8, 120, 299}) e.rewards[t] = float(t % 5 + 1);
    e.lives = torch::full({kT}, 3, torch::kInt32);
    e.lives.slice(0, 50).fill_(2);
    e.lives.slice(0, 200).fill_(1);
    e.terminal = true;
    e.episodeReturn = e.rewards.sum().item<double>();
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "run/model.h5";
    e.model.simulations = 8;
    e.model.value = torch::rand({kT});
    e.model.rootValues = torch::rand({kT});
    e.model.policy = torch::softmax(torch::rand({kT, kA}), 1);
    e.model.visitCounts = torch::randint(0, 9, {kT, kA}, torch::kInt32);
    e.model.childrenQ = torch::rand({kT, kA});
    return e;
}

bool sameFrame(const FramePtr& f, const torch::Tensor& frames, int64_t t) {
    if (!f || f->step != t || f->height != kH || f->width != kW || f->channels != 3) return false;
    const torch::Tensor want = frames[t].contiguous();
    return std::memcmp(f->pixels.data(), want.data_ptr<uint8_t>(), f->pixels.size()) == 0;
}

} // namespace

class TestReplayReader : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    rl::Episode ep_;
    std::string path(const char* n) { return (dir_.path() + "/" + n).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        ep_ = sample();
        rl::writeEpisode(path("ep.h5"), ep_);
    }

    void metadataAndSteps() {
        EpisodeReader r(path("ep.h5"));
        QCOMPARE(r.formatVersion(), int64_t(2));
        QCOMPARE(r.length(), kT);
        QCOMPARE(r.game(), std::string("pellets"));
        QCOMPARE(r.frameHeight(), kH);
        QCOMPARE(r.frameWidth(), kW);
        QCOMPARE(r.frameChannels(), int64_t(3));
        QVERIFY(r.terminal());
        QVERIFY(!r.hasObservations());
        QCOMPARE(r.action(17), ep_.actions[17].item<int64_t>());
        QCOMPARE(r.actionName(17), ep_.actionNames[size_t(r.action(17))]);
        QCOMPARE(r.cumulativeReturn(6), 0.0);
        QCOMPARE(r.cumulativeReturn(7), 3.0);
        QCOMPARE(r.cumulativeReturn(120), 3.0 + 4.0 + 1.0);
        QCOMPARE(r.totalReturn(), ep_.episodeReturn);
        QVERIFY(r.isTerminal(kT - 1));
        QVERIFY(!r.isTerminal(kT - 2));
        // Navigation.
        QCOMPARE(r.nextReward(-1), int64_t(7));
        QCOMPARE(r.nextReward(7), int64_t(8));
        QCOMPARE(r.nextReward(8), int64_t(120));
        QCOMPARE(r.nextReward(299), int64_t(-1));
        QCOMPARE(r.previousReward(120), int64_t(8));
        QCOMPARE(r.previousReward(7), int64_t(-1));
        QCOMPARE(r.nextLifeLoss(-1), int64_t(50));
        QCOMPARE(r.nextLifeLoss(50), int64_t(200));
        QCOMPARE(r.nextLifeLoss(200), int64_t(-1));
        QCOMPARE(r.previousLifeLoss(kT), int64_t(200));
        QCOMPARE(r.nextTerminal(0), kT - 1);
        // Series and per-action vectors: what was recorded, and only that.
        QVERIFY(r.has(Series::Value) && r.has(Series::RootValue) && r.has(Series::Lives));
        QVERIFY(!r.has(Series::ValuePrefix));
        QCOMPARE(r.series(Series::Value)[5], ep_.model.value[5].item<float>());
        QCOMPARE(r.series(Series::Return).back(), float(ep_.episodeReturn));
        QVERIFY(r.has(PerAction::Policy) && r.has(PerAction::Visits) && r.has(PerAction::ChildQ));
        QVERIFY(!r.has(PerAction::ChildPrior));
        const auto visits = r.perAction(PerAction::Visits, 9);
        QCOMPARE(int64_t(visits.size()), kA);
        for (int64_t a = 0; a < kA; ++a) QCOMPARE(visits[size_t(a)], float(ep_.model.visitCounts[9][a].item<int>()));
        auto err = errorOf([&] { r.series(Series::ValuePrefix); });
        QVERIFY2(contains(err, {"ep.h5", "value_prefix"}), err.c_str());
        err = errorOf([&] { r.perAction(PerAction::ChildPrior, 0); });
        QVERIFY2(contains(err, {"ep.h5", "child_prior"}), err.c_str());
        err = errorOf([&] { r.action(kT); });
        QVERIFY2(contains(err, {"ep.h5", "step 300"}), err.c_str());
    }

    void framesOnDemandThroughABoundedCache() {
        ReaderOptions o;
        const size_t frameBytes = size_t(kH * kW * 3) + sizeof(Frame);
        o.cacheBytes = 20 * frameBytes;
        EpisodeReader r(path("ep.h5"), o);
        QCOMPARE(r.cacheStats().frames, size_t(0));   // opening reads no frames
        const FramePtr first = r.frame(0);
        QVERIFY(sameFrame(first, ep_.frames, 0));
        for (int64_t t = 0; t < 100; ++t) {
            QVERIFY(sameFrame(r.frame(t), ep_.frames, t));
            QVERIFY(r.cacheStats().bytes <= o.cacheBytes);
        }
        const auto s = r.cacheStats();
        QCOMPARE(s.frames, size_t(20));
        QVERIFY(s.evictions >= 80);
        QVERIFY(!r.cachedFrame(0));
        QVERIFY(r.cachedFrame(99));
        QVERIFY(sameFrame(first, ep_.frames, 0));   // a frame handed out outlives its eviction
        const int64_t hits = s.hits;
        r.frame(99);
        QCOMPARE(r.cacheStats().hits, hits + 1);
        // Prefetch fills the cache; it stops before evicting what it just loaded.
        r.setCacheBytes(64 * frameBytes);
        QCOMPARE(r.prefetch(150, 169), int64_t(20));
        for (int64_t t = 150; t < 170; ++t) QVERIFY(sameFrame(r.cachedFrame(t), ep_.frames, t));
        QVERIFY(r.prefetch(0, kT - 1) <= 64);
        QVERIFY(r.cacheStats().bytes <= 64 * frameBytes);
        std::atomic<bool> cancel{true};
        QCOMPARE(r.prefetch(250, 260, &cancel), int64_t(0));
        // A zero-byte cache keeps nothing but still serves frames.
        r.setCacheBytes(0);
        QVERIFY(sameFrame(r.frame(42), ep_.frames, 42));
        QCOMPARE(r.cacheStats().frames, size_t(0));
    }

    void concurrentReaders() {
        ReaderOptions o;
        o.cacheBytes = 40 * (size_t(kH * kW * 3) + sizeof(Frame));
        EpisodeReader r(path("ep.h5"), o);
        std::atomic<int> bad{0};
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        for (int i = 0; i < 3; ++i)
            threads.emplace_back([&, i] {
                uint64_t x = 12345 + uint64_t(i);
                for (int k = 0; k < 400; ++k) {
                    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                    const int64_t t = int64_t((x >> 33) % uint64_t(kT));
                    if (!sameFrame(r.frame(t), ep_.frames, t)) ++bad;
                }
            });
        threads.emplace_back([&] {   // a prefetching worker
            for (int64_t t = 0; t < kT && !stop; t += 10) r.prefetch(t, t + 9, &stop);
        });
        for (int k = 0; k < 2000; ++k) {   // the "UI thread": cache peeks only
            const int64_t t = k % kT;
            if (FramePtr f = r.cachedFrame(t); f && !sameFrame(f, ep_.frames, t)) ++bad;
        }
        for (size_t i = 0; i < 3; ++i) threads[i].join();
        stop = true;
        threads.back().join();
        QCOMPARE(bad.load(), 0);
        QVERIFY(r.cacheStats().bytes <= o.cacheBytes);
    }

    void badFiles() {
        // Missing, foreign, truncated.
        auto err = errorOf([&] { EpisodeReader r(path("none.h5")); });
        QVERIFY2(contains(err, {"none.h5", "does not exist"}), err.c_str());
        {
            auto f = h5::File::create(path("foreign.h5"));
            f.writeTensor("x", torch::zeros({2}));
        }
        err = errorOf([&] { EpisodeReader r(path("foreign.h5")); });
        QVERIFY2(contains(err, {"foreign.h5", "not a Glimpse file"}), err.c_str());
        std::filesystem::copy_file(path("ep.h5"), path("cut.h5"));
        std::filesystem::resize_file(path("cut.h5"), std::filesystem::file_size(path("cut.h5")) / 2);
        err = errorOf([&] { EpisodeReader r(path("cut.h5")); });
        QVERIFY2(contains(err, {"cut.h5", "truncated"}), err.c_str());
        // Arrays of mismatched lengths.
        std::filesystem::copy_file(path("ep.h5"), path("mismatch.h5"));
        {
            auto f = h5::File::open(path("mismatch.h5"), h5::File::Mode::ReadWrite);
            H5Ldelete(f.id(), "rewards", H5P_DEFAULT);
            f.writeTensor("rewards", torch::zeros({kT - 1}));
        }
        err = errorOf([&] { EpisodeReader r(path("mismatch.h5")); });
        QVERIFY2(contains(err, {"mismatch.h5", "rewards", "[300]"}), err.c_str());
        std::filesystem::copy_file(path("ep.h5"), path("mismatch2.h5"));
        {
            auto f = h5::File::open(path("mismatch2.h5"), h5::File::Mode::ReadWrite);
            H5Ldelete(f.id(), "frames", H5P_DEFAULT);
            f.writeTensor("frames", torch::zeros({kT - 2, kH, kW, 3}, torch::kUInt8));
        }
        err = errorOf([&] { EpisodeReader r(path("mismatch2.h5")); });
        QVERIFY2(contains(err, {"mismatch2.h5", "frames", "inconsistent"}), err.c_str());
        // Damaged frame chunks: the file opens, the damaged frames throw naming the dataset.
        rl::Episode big = sample();
        big.frames = torch::randint(0, 256, {40, 64, 64, 3}, torch::kUInt8);
        big.actions = big.actions.slice(0, 0, 40);
        big.rewards = big.rewards.slice(0, 0, 40);
        big.lives = big.lives.slice(0, 0, 40);
        big.hasModel = false;
        rl::writeEpisode(path("damaged.h5"), big);
        {
            const auto size = std::filesystem::file_size(path("damaged.h5"));
            std::fstream f(path("damaged.h5"), std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(std::streamoff(size / 2));
            const std::string junk(8192, '\x5a');
            f.write(junk.data(), std::streamsize(junk.size()));
        }
        EpisodeReader d(path("damaged.h5"));
        int failures = 0;
        for (int64_t t = 0; t < 40; ++t) {
            err = errorOf([&] { d.frame(t); });
            if (err == "<no error>") continue;
            ++failures;
            QVERIFY2(contains(err, {"damaged.h5", "frames", "row " + std::to_string(t)}), err.c_str());
        }
        QVERIFY(failures > 0);
    }

    // An episode recorded during training: its updates, environment steps and task weights
    // round-trip; names and weights that disagree are refused, naming the file and dataset.
    void trainingRecord() {
        rl::Episode e = sample();
        e.hasTraining = true;
        e.training.run = "runs/ft";
        e.training.trainer = "xtra";
        e.training.updates = torch::arange(kT, torch::kInt64).div(7, "floor");
        e.training.envSteps = torch::arange(kT, torch::kInt64) * 8;
        e.training.taskNames = {"invaders", "sub", "pellets"};
        e.training.taskCategories = {"shooter", "shooter", "maze"};
        e.training.taskWeights = torch::rand({kT, 3});
        rl::writeEpisode(path("trained.h5"), e);
        EpisodeReader r(path("trained.h5"));
        QVERIFY(r.hasTraining());
        QCOMPARE(r.meta().training.trainer, std::string("xtra"));
        QCOMPARE(r.meta().training.run, std::string("runs/ft"));
        QCOMPARE(r.taskNames(), e.training.taskNames);
        QCOMPARE(r.taskCategories(), e.training.taskCategories);
        QCOMPARE(r.trainingUpdate(100), int64_t(14));
        QCOMPARE(r.trainingEnvSteps(100), int64_t(800));
        const std::vector<float> w = r.taskWeights(123);
        QCOMPARE(w.size(), size_t(3));
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(w[size_t(i)], e.training.taskWeights[123][i].item<float>());
            QCOMPARE(r.taskWeightSeries(i)[123], w[size_t(i)]);
        }
        QVERIFY(contains(errorOf([&] { r.taskWeights(kT); }), {"trained.h5", "step"}));
        QVERIFY(contains(errorOf([&] { r.taskWeightSeries(3); }), {"trained.h5", "no task 3"}));
        const std::string info = describeEpisode(path("trained.h5"));
        QVERIFY2(contains(info, {"training: self-play of the xtra run runs/ft, learner updates 0-42, environment steps 0-2392",
                                 "task weights (first step -> last): invaders"}),
                 info.c_str());
        const rl::Episode back = rl::readEpisode(path("trained.h5"));
        QVERIFY(back.hasTraining && torch::equal(back.training.taskWeights, e.training.taskWeights));
        QVERIFY(torch::equal(back.training.updates, e.training.updates));
        // Without training information.
        EpisodeReader plain(path("ep.h5"));
        QVERIFY(!plain.hasTraining() && plain.taskNames().empty());
        QVERIFY(contains(errorOf([&] { plain.trainingUpdate(0); }), {"ep.h5", "not recorded during training"}));
        // Inconsistent: three names, two columns of weights (refused when writing, and when
        // reading a file written so by another program).
        rl::Episode bad = e;
        bad.training.taskWeights = torch::rand({kT, 2});
        QVERIFY(contains(errorOf([&] { rl::writeEpisode(path("bad_training.h5"), bad); }), {"training/task_weights"}));
        std::filesystem::copy_file(path("trained.h5"), path("bad_training.h5"));
        {
            auto f = h5::File::open(path("bad_training.h5"), h5::File::Mode::ReadWrite);
            auto g = f.group("training");
            H5Ldelete(g.id(), "task_weights", H5P_DEFAULT);
            g.writeTensor("task_weights", torch::rand({kT, 2}));
        }
        const std::string err = errorOf([&] { EpisodeReader x(path("bad_training.h5")); });
        QVERIFY2(contains(err, {"bad_training.h5", "task_weights"}), err.c_str());
    }

    void infoSummary() {
        const std::string s = describeH5(path("ep.h5"));
        QVERIFY2(contains(s, {"episode (format version 2)", "pellets", "300 steps", "10x12 RGB", "2 life losses",
                              "4 steps with a reward", "efficientzero", "value", "root_value", "policy", "visits",
                              "child_q"}),
                 s.c_str());
        QVERIFY2(!contains(s, {"child_prior"}), s.c_str());
    }

    void benchOnASmallEpisode() {
        BenchReplayOptions o;
        o.steps = 400;
        o.height = o.width = 16;
        o.scrubs = 100;
        o.sequential = 100;
        o.cacheBytes = 50 * (16 * 16 * 3 + sizeof(Frame));
        o.dir = (dir_.path() + "/bench").toStdString();
        const BenchReplayResult r = benchReplay(o);
        QCOMPARE(r.steps, int64_t(400));
        QVERIFY(r.openMs > 0);
        QVERIFY(r.scrubP95Ms >= r.scrubP50Ms);
        QVERIFY(r.cache.bytes <= o.cacheBytes);
        QVERIFY(r.cache.misses >= 100);
        QVERIFY(r.fileBytes > 0);
        QVERIFY(!std::filesystem::exists(r.path));   // removed unless keep
        QVERIFY(contains(formatBenchReplay(r), {"open:", "random scrub", "p95"}));
        // The generator is deterministic and frames differ from step to step.
        std::vector<uint8_t> a(16 * 16 * 3), b(a.size()), c(a.size());
        syntheticFrame(5, 16, 16, a.data());
        syntheticFrame(5, 16, 16, b.data());
        syntheticFrame(6, 16, 16, c.data());
        QVERIFY(a == b && a != c);
        // An existing episode is measured as it is, and kept.
        BenchReplayOptions existing;
        existing.file = path("ep.h5");
        existing.scrubs = 50;
        existing.sequential = 20;
        const BenchReplayResult e = benchReplay(existing);
        QVERIFY(!e.written);
        QCOMPARE(e.steps, kT);
        QCOMPARE(e.height, kH);
        QVERIFY(std::filesystem::exists(path("ep.h5")));
        QVERIFY(contains(formatBenchReplay(e), {"existing file", "300 steps of 10x12"}));
        existing.file = path("none.h5");
        const std::string err = errorOf([&] { benchReplay(existing); });
        QVERIFY2(contains(err, {"none.h5", "does not exist"}), err.c_str());
    }
};

QTEST_APPLESS_MAIN(TestReplayReader)
#include "test_replay_reader.moc"
