// core/io/checkpoint: save/load round trip, apply with full mismatch reports, file errors.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/trace.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

using testing::contains;
using testing::errorOf;

torch::nn::Sequential smallNet(int hidden) {
    return torch::nn::Sequential(torch::nn::Linear(4, hidden), torch::nn::BatchNorm1d(hidden),
                                 torch::nn::Linear(hidden, 2));
}

std::map<std::string, torch::Tensor> snapshot(const torch::nn::Module& m) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : m.named_parameters()) out[p.key()] = p.value().detach().clone();
    for (const auto& b : m.named_buffers()) out[b.key()] = b.value().detach().clone();
    return out;
}

bool same(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a)
        if (!b.count(k) || !torch::equal(v, b.at(k))) return false;
    return true;
}

} // namespace

class TestCheckpoint : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::manual_seed(3);
    }

    void roundTripAndApply() {
        auto net = smallNet(3);
        net->train();
        net->forward(torch::randn({5, 4}));   // moves BatchNorm running stats off their defaults
        const Checkpoint c = checkpointFromModule(*net, "toy", R"({"hidden": 3})");
        QCOMPARE(c.tensors.size(), size_t(9));   // 2 + 5 (BatchNorm: weight, bias, 3 buffers) + 2
        QVERIFY(c.tensors.count("1.running_mean") && c.tensors.count("1.num_batches_tracked"));

        const std::string path = file("toy.h5");
        saveCheckpoint(path, c);
        const Checkpoint r = loadCheckpoint(path);
        QCOMPARE(r.family, std::string("toy"));
        QCOMPARE(r.configJson, std::string(R"({"hidden": 3})"));
        QCOMPARE(r.formatVersion, 1);
        QVERIFY(same(r.tensors, c.tensors));
        QCOMPARE(r.tensors.at("1.num_batches_tracked").scalar_type(), torch::kInt64);

        // The names are stored as-is, dots included.
        h5::File f = h5::File::open(path);
        QVERIFY(f.hasDataset("params/0.weight"));
        QCOMPARE(f.group("meta").attrString("family"), std::string("toy"));
        QCOMPARE(f.attrString("kind"), std::string("glimpse.checkpoint"));

        auto other = smallNet(3);
        QVERIFY(!same(snapshot(*other), c.tensors));
        applyCheckpoint(r, *other, "toy", path);
        QVERIFY(same(snapshot(*other), c.tensors));
        other->eval();
        net->eval();
        const auto x = torch::randn({2, 4});
        QVERIFY(torch::allclose(other->forward(x), net->forward(x)));
    }

    void applyReportsEveryMismatchAndChangesNothing() {
        auto net = smallNet(3);
        Checkpoint c = checkpointFromModule(*net, "toy", "{}");
        c.tensors["0.bias"] = c.tensors["0.bias"].to(torch::kFloat64);   // wrong dtype
        c.tensors["extra.scale"] = torch::ones({2});                       // unexpected
        c.tensors.erase("2.bias");                                         // missing

        auto target = torch::nn::Sequential(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3),
                                            torch::nn::Linear(3, 2));
        target->push_back(torch::nn::Linear(2, 5));   // 3.weight, 3.bias missing too
        auto wide = torch::nn::Sequential(torch::nn::Linear(4, 6), torch::nn::BatchNorm1d(6), torch::nn::Linear(6, 2));

        const auto before = snapshot(*target);
        const std::string msg = errorOf([&] { applyCheckpoint(c, *target, "toy", "/runs/toy.h5"); });
        QVERIFY2(contains(msg, {"/runs/toy.h5", "5 problems", "missing 2.bias", "missing 3.weight", "missing 3.bias",
                                "wrong dtype 0.bias: model has float32, checkpoint has float64",
                                "unexpected extra.scale [2]"}),
                 msg.c_str());
        QVERIFY(same(snapshot(*target), before));

        const auto wideBefore = snapshot(*wide);
        const std::string msg2 = errorOf([&] { applyCheckpoint(checkpointFromModule(*net, "toy", "{}"), *wide, "toy", "w.h5"); });
        QVERIFY2(contains(msg2, {"w.h5", "wrong shape 0.weight: model has [6,4], checkpoint has [3,4]",
                                 "wrong shape 1.running_var", "wrong shape 2.weight"}),
                 msg2.c_str());
        QVERIFY(same(snapshot(*wide), wideBefore));

        const std::string msg3 = errorOf([&] { applyCheckpoint(checkpointFromModule(*net, "coat", "{}"), *net, "letr", "c.h5"); });
        QVERIFY2(contains(msg3, {"c.h5", "'coat'", "expected 'letr'"}), msg3.c_str());
    }

    void loadErrors() {
        const std::string trace = file("a_trace.h5");
        Trace t("letr");
        t.set("x", torch::ones({1}));
        t.save(trace);
        std::string msg = errorOf([&] { loadCheckpoint(trace); });
        QVERIFY2(contains(msg, {trace + " is a glimpse.trace, expected a glimpse.checkpoint"}), msg.c_str());

        msg = errorOf([&] { loadCheckpoint(file("none.h5")); });
        QVERIFY2(contains(msg, {"none.h5", "does not exist"}), msg.c_str());

        const std::string foreign = file("foreign.h5");
        {
            h5::File f = h5::File::create(foreign);
            f.createGroup("params").writeTensor("w", torch::ones({2}));
            f.close();
        }
        msg = errorOf([&] { loadCheckpoint(foreign); });
        QVERIFY2(contains(msg, {foreign, "not a Glimpse file"}), msg.c_str());

        const std::string noParams = file("noparams.h5");
        h5::writeAtomically(noParams, "glimpse.checkpoint", 1, [](h5::File& f) {
            f.createGroup("meta").setAttr("family", "toy");
            f.group("meta").setAttr("config", "{}");
        });
        msg = errorOf([&] { loadCheckpoint(noParams); });
        QVERIFY2(contains(msg, {noParams, "no /params"}), msg.c_str());

        Checkpoint bad;
        bad.family = "toy";
        bad.tensors["a/b"] = torch::ones({1});
        msg = errorOf([&] { saveCheckpoint(file("bad.h5"), bad); });
        QVERIFY2(contains(msg, {"bad.h5", "invalid tensor name 'a/b'"}), msg.c_str());
        QVERIFY(!QFile::exists(QString::fromStdString(file("bad.h5"))));
    }

    // Weights carry checksums: a bit flipped inside a tensor's data fails the load, naming the
    // tensor (it used to load and run silently).
    void flippedBitIsRefused() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("sum.h5").toStdString();
        Checkpoint ck;
        ck.family = "test";
        ck.configJson = "{}";
        ck.tensors["layer.weight"] = torch::full({64, 16}, 1.2345f);
        ck.tensors["layer.bias"] = torch::zeros({16});
        saveCheckpoint(path, ck);
        QVERIFY(torch::equal(loadCheckpoint(path).tensors.at("layer.weight"), ck.tensors["layer.weight"]));
        // Find the weight's bytes (1.2345f repeated) in the file and flip one bit in the middle.
        QFile f(QString::fromStdString(path));
        QVERIFY(f.open(QIODevice::ReadWrite));
        QByteArray bytes = f.readAll();
        const float v = 1.2345f;
        QByteArray pattern;
        for (int i = 0; i < 16; ++i) pattern.append(reinterpret_cast<const char*>(&v), sizeof v);
        const qsizetype at = bytes.indexOf(pattern);
        QVERIFY2(at >= 0, "the weight's data is stored as is");
        bytes[at + 2000] = char(bytes[at + 2000] ^ 0x10);
        QVERIFY(f.seek(0));
        QCOMPARE(f.write(bytes), qint64(bytes.size()));
        f.close();
        const std::string err = errorOf([&] { loadCheckpoint(path); });
        QVERIFY2(contains(err, {"sum.h5", "layer.weight", "checksum"}), err.c_str());
    }

    void saveIsAtomic() {
        const std::string path = file("atomic_ckpt.h5");
        auto net = smallNet(2);
        saveCheckpoint(path, checkpointFromModule(*net, "toy", "{}"));
        Checkpoint broken = checkpointFromModule(*net, "toy", "{}");
        broken.tensors["zz.half"] = torch::ones({2}, torch::kBFloat16);   // unsupported: fails midway
        const auto entries = QDir(dir_.path()).entryList(QDir::Files);
        const std::string msg = errorOf([&] { saveCheckpoint(path, broken); });
        QVERIFY2(contains(msg, {path, "bfloat16"}), msg.c_str());
        QCOMPARE(QDir(dir_.path()).entryList(QDir::Files), entries);
        QCOMPARE(loadCheckpoint(path).tensors.size(), size_t(9));
    }
};

QTEST_APPLESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
