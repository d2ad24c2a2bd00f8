// File integrity (checksums on everything Glimpse writes) and resource errors (full disk,
// read-only folder, a file replaced while open, huge images, huge videos). docs/integrity.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/rl/episode.h"
#include "core/trace.h"
#include "tests/support.h"
#include "tests/integrity_support.h"

using namespace glimpse;
using glimpse::testing::contains;
using namespace glimpse::testing;
using testing::errorOf;

namespace {

// ---- the three file kinds, written small but with every kind of dataset they hold ----------

Checkpoint sampleCheckpoint() {
    Checkpoint c;
    c.family = "test";
    c.configJson = R"({"depth": 4, "width": 64, "lr": 0.001, "name": "integrity"})";
    torch::manual_seed(3);
    c.tensors["blocks.0.attn.qkv.weight"] = torch::randn({96, 32});
    c.tensors["blocks.0.attn.qkv.bias"] = torch::randn({96});
    c.tensors["blocks.0.norm.num_batches_tracked"] = torch::tensor(int64_t(1234));   // 0-d
    c.tensors["blocks.0.scale"] = torch::tensor(0.5f);                                 // 0-d
    c.tensors["head.weight"] = torch::randn({10, 96});
    c.tensors["head.mask"] = torch::rand({10}) > 0.5;
    return c;
}

Trace sampleTrace() {
    Trace t("test");
    t.meta()["image"] = "photo.jpg";
    t.meta()["threshold"] = 0.25;
    torch::manual_seed(5);
    t.set("logits", torch::randn({3, 100}));
    t.set("attn/layer0", torch::rand({4, 49, 49}));
    t.set("attn/layer1", torch::rand({4, 49, 49}));
    t.set("score", torch::tensor(0.75));                  // 0-d
    t.set("best", torch::tensor(int64_t(17)));            // 0-d
    t.set("boxes", torch::randint(0, 255, {20, 4}, torch::kInt32));
    return t;
}

rl::Episode sampleEpisode() {
    rl::Episode e;
    e.env = "breakout";
    e.source = "test";
    e.seed = 7;
    e.maxEpisodeSteps = 100;
    e.actionNames = {"NOOP", "FIRE", "RIGHT", "LEFT"};
    e.channelNames = {"a", "b"};
    e.episodeReturn = 3;
    e.terminal = true;
    const int64_t T = 24;
    torch::manual_seed(9);
    e.frames = torch::randint(0, 256, {T, 24, 32, 3}, torch::kUInt8);
    e.observations = torch::rand({T, 2, 8, 8});
    e.actions = torch::randint(0, 4, {T}, torch::kInt64);
    e.rewards = torch::rand({T});
    e.lives = torch::full({T}, 3, torch::kInt32);
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "run/model.h5";
    e.model.config = "{\"x\": 1}";
    e.model.simulations = 8;
    e.model.rootValues = torch::rand({T});
    e.model.policy = torch::softmax(torch::randn({T, 4}), 1);
    return e;
}

std::string checkpointDigest(const std::string& path) {
    const Checkpoint c = loadCheckpoint(path);
    Digest d;
    d.add(c.family).add(c.configJson);
    for (const auto& [name, t] : c.tensors) d.add(name).add(t);
    return d.hex();
}

std::string traceDigest(const std::string& path) {
    const Trace t = Trace::load(path);
    Digest d;
    d.add(t.family()).add(t.meta().dump());
    for (const auto& n : t.names()) d.add(n).add(t.get(n));
    return d.hex();
}

std::string episodeDigest(const std::string& path) {
    const rl::Episode e = rl::readEpisode(path);
    Digest d;
    d.add(e.env).add(e.source).add(std::to_string(e.seed)).add(std::to_string(e.maxEpisodeSteps));
    d.add(std::to_string(e.episodeReturn)).add(std::to_string(e.terminal)).add(std::to_string(e.stickyActionProb));
    for (const auto& n : e.actionNames) d.add(n);
    for (const auto& n : e.channelNames) d.add(n);
    for (const auto* t : {&e.frames, &e.observations, &e.actions, &e.rewards, &e.lives, &e.terminals, &e.lifeLoss})
        d.add(*t);
    d.add(e.model.family).add(e.model.checkpoint).add(e.model.config).add(std::to_string(e.model.simulations));
    for (const auto* t : {&e.model.rootValues, &e.model.policy, &e.model.visitCounts, &e.model.value})
        d.add(*t);
    return d.hex();
}

void printRow(const char* kind, const char* region, const FlipStats& s) {
    std::printf("bitflip %-22s %-6s copies %3d: refused %3d, unchanged %3d, silently different %3d, crashed %3d\n",
                kind, region, s.copies, s.refused, s.unchanged, s.silent, s.crashed);
    for (const auto& m : s.messages) std::printf("    e.g. %s\n", m.c_str());
}

} // namespace

class TestIntegrity : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

    // Flips `copies` seeded random bits (one per copy) across the whole file and across the
    // raw-data bytes of its datasets; every load runs in a forked child (a crash is counted,
    // not fatal). No copy may load with other values than the original, none may crash.
    void measure(const char* kind, const std::string& path, const std::function<std::string(const std::string&)>& digest,
                 bool expectChecked) {
        const int copies = 32;
        const FlipStats whole = flipBits(path, file("copy.h5"), digest, FlipRegion::WholeFile, copies, 1000);
        const FlipStats data = flipBits(path, file("copy.h5"), digest, FlipRegion::RawData, copies, 2000);
        printRow(kind, "file", whole);
        printRow(kind, "data", data);
        QCOMPARE(whole.copies + data.copies, 2 * copies);
        if (!expectChecked) return;
        QCOMPARE(whole.crashed, 0);
        QCOMPARE(data.crashed, 0);
        QCOMPARE(whole.silent, 0);
        QCOMPARE(data.silent, 0);
        // The raw-data flips all hit checked bytes.
        QCOMPARE(data.refused, copies);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::set_num_threads(1);
    }

    void bitFlipsInCheckpoints() {
        const std::string path = file("ckpt.h5");
        saveCheckpoint(path, sampleCheckpoint());
        measure("checkpoint (written)", path, checkpointDigest, true);
    }

    void bitFlipsInShippedCheckpoints() {
        for (const char* name : {"coat_fmnist.h5", "constellation_demo.h5"}) {
            const std::string path = std::string(GLIMPSE_SOURCE_DIR) + "/resources/" + name;
            if (!QFile::exists(QString::fromStdString(path))) QSKIP("shipped checkpoint missing");
            measure(name, path, checkpointDigest, true);
        }
    }

    void bitFlipsInTraces() {
        const std::string path = file("trace.h5");
        sampleTrace().save(path);
        measure("trace", path, traceDigest, true);
    }

    void bitFlipsInEpisodes() {
        const std::string path = file("episode.h5");
        rl::writeEpisode(path, sampleEpisode());
        measure("episode", path, episodeDigest, true);
    }
};

QTEST_GUILESS_MAIN(TestIntegrity)
#include "test_integrity.moc"
