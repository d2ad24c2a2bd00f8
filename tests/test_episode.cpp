// Episode files (core/rl/episode.h): round trip and clear errors.
#include <QtTest>

#include <filesystem>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/rl/episode.h"
#include "tests/support.h"

using namespace glimpse::rl;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

Episode sample(int T = 5, int A = 4) {
    Episode e;
    e.env = "breakout";
    e.seed = 42;
    e.maxEpisodeSteps = 1000;
    e.actionNames = {"NOOP", "FIRE", "RIGHT", "LEFT"};
    e.channelNames = {"brick", "ball", "paddle"};
    e.episodeReturn = 3;
    e.terminal = true;
    e.frames = torch::randint(0, 256, {T, 16, 12, 3}, torch::kUInt8);
    e.observations = torch::rand({T, 3, 2, 2});
    e.actions = torch::randint(0, A, {T}, torch::kInt64);
    e.rewards = torch::rand({T});
    e.lives = torch::full({T}, 5, torch::kInt32);
    e.lives.slice(0, 2).fill_(4);
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "run/model.h5";
    e.model.config = "{}";
    e.model.simulations = 8;
    e.model.rootValues = torch::rand({T});
    e.model.visitCounts = torch::randint(0, 9, {T, A}, torch::kInt32);
    e.model.value = torch::rand({T});
    e.model.valuePrefix = torch::rand({T});
    e.model.policy = torch::softmax(torch::rand({T, A}), 1);
    e.model.childrenQ = torch::rand({T, A});
    return e;
}

} // namespace

class TestEpisode : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const char* n) { return (dir_.path() + "/" + n).toStdString(); }
private Q_SLOTS:
    void roundTrip() {
        const Episode e = sample();
        writeEpisode(path("a.h5"), e);
        const Episode r = readEpisode(path("a.h5"));
        QCOMPARE(r.env, e.env);
        QCOMPARE(r.seed, e.seed);
        QCOMPARE(r.actionNames, e.actionNames);
        QCOMPARE(r.channelNames, e.channelNames);
        QCOMPARE(r.terminal, true);
        QCOMPARE(r.episodeReturn, 3.0);
        QVERIFY(torch::equal(r.frames, e.frames));
        QVERIFY(torch::equal(r.observations, e.observations));
        QVERIFY(torch::equal(r.actions, e.actions));
        QVERIFY(torch::equal(r.lives, e.lives));
        QVERIFY(r.hasModel);
        QCOMPARE(r.model.simulations, int64_t(8));
        QVERIFY(torch::equal(r.model.visitCounts, e.model.visitCounts));
        QVERIFY(torch::equal(r.model.policy, e.model.policy));
        QVERIFY(torch::equal(r.model.childrenQ, e.model.childrenQ));
        QVERIFY(!r.model.childrenPrior.defined());   // not recorded, not invented
        // Per-step flags: the game ended after the last step; life losses from lives.
        QVERIFY(torch::equal(r.terminals, torch::tensor({0, 0, 0, 0, 1}).to(torch::kBool)));
        QVERIFY(torch::equal(r.lifeLoss, torch::tensor({0, 0, 1, 0, 0}).to(torch::kBool)));
        {
            auto f = glimpse::h5::File::open(path("a.h5"));
            QCOMPARE(f.attrInt("format_version"), kEpisodeVersion);
            QCOMPARE(kEpisodeVersion, int64_t(2));
        }
        Episode plain = sample(3);
        plain.hasModel = false;
        writeEpisode(path("b.h5"), plain);
        QVERIFY(!readEpisode(path("b.h5")).hasModel);
        // Version 2 makes observations, lives and each model output optional.
        Episode bare = sample(4);
        bare.observations = torch::Tensor();
        bare.channelNames.clear();
        bare.lives = torch::Tensor();
        bare.model.visitCounts = torch::Tensor();
        bare.model.valuePrefix = torch::Tensor();
        bare.frames = torch::randint(0, 256, {4, 6, 5, 1}, torch::kUInt8);   // grey frames
        writeEpisode(path("bare.h5"), bare);
        const Episode rb = readEpisode(path("bare.h5"));
        QVERIFY(!rb.observations.defined() && !rb.lives.defined() && !rb.model.visitCounts.defined());
        QVERIFY(torch::equal(rb.frames, bare.frames));
        QVERIFY(torch::equal(rb.model.policy, bare.model.policy));
        QVERIFY(!rb.lifeLoss.any().item<bool>());
    }

    void framesInBatches() {
        // An episode written batch by batch (as the importers and the bench do), chunked a few
        // frames per chunk.
        Episode e = sample(37);
        const torch::Tensor frames = e.frames, obs = e.observations;
        e.frames = torch::Tensor();
        e.observations = torch::Tensor();
        FrameSource src;
        src.height = 16;
        src.width = 12;
        src.batch = 5;
        int calls = 0;
        src.frames = [&](int64_t first, int64_t n) {
            ++calls;
            return frames.slice(0, first, first + n);
        };
        src.observationShape = {3, 2, 2};
        src.observations = [&](int64_t first, int64_t n) { return obs.slice(0, first, first + n); };
        writeEpisode(path("batched.h5"), e, src);
        QCOMPARE(calls, 8);
        const Episode r = readEpisode(path("batched.h5"));
        QVERIFY(torch::equal(r.frames, frames));
        QVERIFY(torch::equal(r.observations, obs));
        QCOMPARE(framesPerChunk(16 * 12 * 3), int64_t(56));
        QCOMPARE(framesPerChunk(96 * 96 * 3), int64_t(1));
        // A batch of the wrong shape aborts the write and leaves no file.
        src.frames = [&](int64_t first, int64_t n) {
            return first >= 10 ? torch::zeros({n, 16, 13, 3}, torch::kUInt8) : frames.slice(0, first, first + n);
        };
        auto err = errorOf([&] { writeEpisode(path("wrong.h5"), e, src); });
        QVERIFY2(contains(err, {"wrong.h5", "frames", "wrong shape"}), err.c_str());
        QVERIFY(!std::filesystem::exists(path("wrong.h5")));
        err = errorOf([&] {
            Episode four = sample();
            four.frames = torch::zeros({5, 4, 4, 4}, torch::kUInt8);
            writeEpisode(path("wrong.h5"), four);
        });
        QVERIFY2(contains(err, {"wrong.h5", "4 channels"}), err.c_str());
    }

    void inconsistentLengths() {
        Episode e = sample();
        e.rewards = torch::rand({4});
        auto err = errorOf([&] { writeEpisode(path("bad.h5"), e); });
        QVERIFY2(contains(err, {"bad.h5", "rewards", "inconsistent"}), err.c_str());
        QVERIFY(!std::filesystem::exists(path("bad.h5")));
        e = sample();
        e.model.visitCounts = torch::zeros({5, 3}, torch::kInt32);  // wrong action count
        err = errorOf([&] { writeEpisode(path("bad.h5"), e); });
        QVERIFY2(contains(err, {"visit_counts"}), err.c_str());
        e = sample();
        e.actions[0] = 7;
        err = errorOf([&] { writeEpisode(path("bad.h5"), e); });
        QVERIFY2(contains(err, {"outside", "action id 7", "step 0"}), err.c_str());
        // A file whose datasets disagree (written around the validation) is refused on read.
        writeEpisode(path("c.h5"), sample());
        {
            auto f = glimpse::h5::File::open(path("c.h5"), glimpse::h5::File::Mode::ReadWrite);
            H5Ldelete(f.id(), "lives", H5P_DEFAULT);
            f.writeTensor("lives", torch::zeros({2}, torch::kInt32));
        }
        err = errorOf([&] { readEpisode(path("c.h5")); });
        QVERIFY2(contains(err, {"c.h5", "lives"}), err.c_str());
    }

    void foreignAndCorruptFiles() {
        {
            auto f = glimpse::h5::File::create(path("foreign.h5"));
            f.writeTensor("x", torch::zeros({2}));
        }
        auto err = errorOf([&] { readEpisode(path("foreign.h5")); });
        QVERIFY2(contains(err, {"foreign.h5", "not a Glimpse file"}), err.c_str());
        writeEpisode(path("t.h5"), sample());
        std::filesystem::resize_file(path("t.h5"), 600);
        err = errorOf([&] { readEpisode(path("t.h5")); });
        QVERIFY2(contains(err, {"t.h5"}), err.c_str());
    }
};

QTEST_APPLESS_MAIN(TestEpisode)
#include "test_episode.moc"
