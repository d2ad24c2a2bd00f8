// core/trace: named tensors + JSON meta, HDF5 round trip, accessor errors.
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

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

} // namespace

class TestTrace : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void roundTrip() {
        Trace t("letr");
        t.meta() = {{"image", "demo"}, {"size", {768, 1024}}, {"layers", {{"coarse", 6}, {"fine", 6}}}};
        t.set("input", torch::rand({3, 48, 64}));
        t.set("layers/0/hidden", torch::randn({100, 256}));
        t.set("layers/1/hidden", torch::randn({100, 256}));
        t.set("enc.memory", torch::randn({600, 256}));   // 600 KiB: compressed when >= 1 MiB only
        t.set("big", torch::zeros({512, 1024}));         // 2 MiB: compressed
        t.set("valid", torch::tensor({true, false, true}));
        t.set("ids", torch::arange(5, torch::kInt64));
        t.set("score", torch::tensor(0.5));
        QCOMPARE(t.names().size(), size_t(8));
        QCOMPARE(t.bytes(), int64_t(3 * 48 * 64 * 4 + 2 * 100 * 256 * 4 + 600 * 256 * 4 + 512 * 1024 * 4 + 3 + 40 + 4));

        const std::string path = file("trace.h5");
        t.save(path);
        const Trace r = Trace::load(path);
        QCOMPARE(r.family(), std::string("letr"));
        QCOMPARE(r.meta(), t.meta());
        QCOMPARE(r.names(), t.names());
        for (const auto& n : t.names()) {
            QVERIFY2(r.get(n).scalar_type() == t.get(n).scalar_type(), n.c_str());
            QVERIFY2(torch::equal(r.get(n), t.get(n)), n.c_str());
        }
        QCOMPARE(r.get("score").dim(), int64_t(0));

        h5::File f = h5::File::open(path);
        QCOMPARE(f.attrString("kind"), std::string("glimpse.trace"));
        QVERIFY(f.hasDataset("tensors/layers/0/hidden"));   // '/' makes sub-groups
        QVERIFY(f.hasDataset("tensors/enc.memory"));
        QVERIFY(f.dataset("tensors/big").storageBytes() < 100000);
        QCOMPARE(nlohmann::json::parse(f.group("meta").attrString("meta")), t.meta());
    }

    void accessors() {
        Trace t("coat");
        auto x = torch::ones({2, 3});
        t.set("x", x);
        x.fill_(5);   // the trace keeps its own copy
        QCOMPARE(t.get("x").sum().item<float>(), 6.0f);
        QVERIFY(t.has("x") && !t.has("y"));
        QCOMPARE(t.get("x", {2, -1}).size(1), int64_t(3));

        std::string msg = errorOf([&] { t.get("y"); });
        QCOMPARE(msg, std::string("trace has no tensor 'y'"));
        msg = errorOf([&] { t.get("x", {3, 2}); });
        QVERIFY2(contains(msg, {"'x'", "shape [2,3]", "expected [3,2]"}), msg.c_str());
        msg = errorOf([&] { t.get("x", {2, 3, 1}); });
        QVERIFY2(contains(msg, {"'x'", "expected [2,3,1]"}), msg.c_str());

        for (const char* bad : {"", "/x", "x/", "a//b", "a/./b"}) {
            msg = errorOf([&] { t.set(bad, torch::ones({1})); });
            QVERIFY2(contains(msg, {"invalid trace tensor name"}), bad);
        }
        msg = errorOf([&] { t.set("x/sub", torch::ones({1})); });
        QVERIFY2(contains(msg, {"'x/sub'", "clashes with 'x'"}), msg.c_str());
        t.set("g/a", torch::ones({1}));
        msg = errorOf([&] { t.set("g", torch::ones({1})); });
        QVERIFY2(contains(msg, {"'g'", "clashes with 'g/a'"}), msg.c_str());
    }

    void loadErrors() {
        const std::string ckpt = file("ckpt.h5");
        Checkpoint c;
        c.family = "letr";
        c.configJson = "{}";
        c.tensors["w"] = torch::ones({1});
        saveCheckpoint(ckpt, c);
        std::string msg = errorOf([&] { Trace::load(ckpt); });
        QVERIFY2(contains(msg, {ckpt + " is a glimpse.checkpoint, expected a glimpse.trace"}), msg.c_str());

        const std::string path = file("cut.h5");
        Trace t("letr");
        t.set("a", torch::randn({20000}));
        t.save(path);
        QVERIFY(::truncate(path.c_str(), QFileInfo(QString::fromStdString(path)).size() / 2) == 0);
        msg = errorOf([&] { Trace::load(path); });
        QVERIFY2(contains(msg, {path, "truncated"}), msg.c_str());

        const std::string badMeta = file("badmeta.h5");
        h5::writeAtomically(badMeta, "glimpse.trace", 1, [](h5::File& f) {
            h5::Group m = f.createGroup("meta");
            m.setAttr("family", "letr");
            m.setAttr("meta", "{not json");
        });
        msg = errorOf([&] { Trace::load(badMeta); });
        QVERIFY2(contains(msg, {badMeta, "not valid JSON"}), msg.c_str());
    }
};

QTEST_APPLESS_MAIN(TestTrace)
#include "test_trace.moc"
