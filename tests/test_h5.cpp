// core/h5: the RAII HDF5 layer, the Glimpse file header, atomic writes and `glimpse info`.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <thread>
#include <unistd.h>

#include <hdf5.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/info.h"
#include "core/trace.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

using testing::contains;
using testing::errorOf;

torch::Tensor sample(torch::ScalarType dt, const std::vector<int64_t>& shape) {
    auto t = torch::randn(shape, torch::kFloat64) * 100;
    if (dt == torch::kBool) return t.gt(0);
    if (dt == torch::kUInt8) return t.abs().remainder(256).to(dt);
    if (dt == torch::kInt8) return t.remainder(128).to(dt);
    return t.to(dt);
}

// A minimal HDF5 file written with the raw C API: no Glimpse header.
void writeForeign(const std::string& path) {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {2, 3};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t g = H5Gcreate2(f, "grp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(g, "data", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float v[6] = {1, 2, 3, 4, 5, 6};
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    H5Gclose(g);
    H5Sclose(space);
    H5Fclose(f);
}

} // namespace

class TestH5 : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::manual_seed(7);
    }

    void roundTripEveryDtypeAndShape() {
        const std::vector<torch::ScalarType> dtypes = {torch::kFloat32, torch::kFloat64, torch::kInt8,  torch::kInt16,
                                                       torch::kInt32,   torch::kInt64,   torch::kUInt8, torch::kBool,
                                                       torch::kFloat16};
        const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {1}, {7}, {3, 0, 2}, {2, 3, 4}, {1, 1, 1, 5}};
        const std::string path = file("dtypes.h5");
        std::map<std::string, torch::Tensor> written;
        {
            h5::File f = h5::File::create(path);
            int i = 0;
            for (auto dt : dtypes)
                for (const auto& sh : shapes) {
                    const std::string name = "t" + std::to_string(i++) + "." + h5::dtypeName(dt);
                    written[name] = sample(dt, sh);
                    f.writeTensor(name, written[name]);
                }
            f.close();
        }
        h5::File f = h5::File::open(path);
        QCOMPARE(f.children().size(), written.size());
        for (const auto& [name, t] : written) {
            h5::Dataset d = f.dataset(name);
            QCOMPARE(d.dtype(), t.scalar_type());
            QCOMPARE(d.shape(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
            const torch::Tensor r = d.read(t.scalar_type(), d.shape());
            QVERIFY2(r.scalar_type() == t.scalar_type() && r.sizes() == t.sizes() && torch::equal(r, t), name.c_str());
        }
        QCOMPARE(f.dataset("t0.float32").shape(), std::vector<int64_t>{});   // 0-d is a scalar dataset
        QCOMPARE(f.dataset("t49.bool").typeDescription(), std::string("bool"));
    }

    void nonContiguousAndCompressed() {
        const std::string path = file("big.h5");
        const auto big = torch::arange(600000, torch::kInt32).reshape({600, 1000});   // 2.3 MiB, compressible
        const auto strided = torch::arange(12, torch::kFloat32).reshape({3, 4}).t();
        {
            h5::File f = h5::File::create(path);
            f.writeTensor("big", big, {h5::Compression::Auto});
            f.writeTensor("plain", big);
            f.writeTensor("strided", strided);
            f.close();
        }
        h5::File f = h5::File::open(path);
        QVERIFY(torch::equal(f.readTensor("big"), big));
        QVERIFY(torch::equal(f.readTensor("strided"), strided));
        QVERIFY(f.dataset("big").storageBytes() < f.dataset("plain").storageBytes() / 4);
        // Uncompressed, plus a 4-byte Fletcher-32 checksum per chunk (chunks of at most 1 MiB:
        // 600 rows of 4000 bytes halve to 150-row chunks, 4 of them).
        QCOMPARE(f.dataset("plain").storageBytes(), int64_t(big.nbytes()) + 4 * 4);
    }

    // Closing files and their objects leaves nothing on the thread's HDF5 error stack. (A file
    // closed before its root group, or an object closed again after the strong file close had
    // closed it, left a failed H5Gclose there; in the thread-safe build a worker thread's stack
    // outlives the thread and H5close at exit then printed "infinite loop closing library".)
    void closingLeavesNoHdf5Error() {
        const std::string path = file("close.h5");
        {
            h5::File f = h5::File::create(path);
            f.createGroup("g").writeTensor("t", torch::ones({3}));
        }
        int onWorker = -1;
        float sum = 0;
        std::thread worker([&] {
            {
                h5::File f = h5::File::open(path);
                sum = f.group("g").dataset("t").read().sum().item<float>();
            }   // the root group and the file close here
            onWorker = int(H5Eget_num(H5E_DEFAULT));
        });
        worker.join();
        QCOMPARE(sum, 3.0f);
        QCOMPARE(onWorker, 0);
        {
            h5::File f = h5::File::open(path);
            h5::Group g = f.group("g");
            h5::Dataset d = g.dataset("t");
            f.close();   // strong close: g and d are closed by HDF5 here
        }               // and not closed again by their destructors
        QCOMPARE(int(H5Eget_num(H5E_DEFAULT)), 0);
    }

    void groupsPathsAndListing() {
        const std::string path = file("groups.h5");
        h5::File f = h5::File::create(path);
        h5::Group c = f.createGroup("a/b/c");
        QCOMPARE(c.path(), std::string("/a/b/c"));
        QVERIFY(f.hasGroup("a") && f.hasGroup("a/b") && f.hasGroup("/a/b/c"));
        f.createGroup("a/b");   // existing: fine
        f.group("a").writeTensor("x/y/layer.0.weight", torch::ones({2}));
        QVERIFY(f.hasDataset("a/x/y/layer.0.weight"));
        QVERIFY(f.exists("a/x") && !f.exists("a/nope") && !f.exists("nope/deeper/still"));
        QVERIFY(!f.hasDataset("a/b") && !f.hasGroup("a/x/y/layer.0.weight"));
        f.createGroup("a/zz");
        f.group("a").writeTensor("m", torch::zeros({1}));
        QCOMPARE(f.group("a").children(), (std::vector<std::string>{"b", "m", "x", "zz"}));
        QCOMPARE(f.group("a").groupNames(), (std::vector<std::string>{"b", "x", "zz"}));
        QCOMPARE(f.group("a").datasetNames(), (std::vector<std::string>{"m"}));
        QCOMPARE(f.group("/a/x").group("y").dataset("layer.0.weight").path(), std::string("/a/x/y/layer.0.weight"));

        std::string msg = errorOf([&] { f.createGroup("a/m/deeper"); });
        QVERIFY2(contains(msg, {path, "'/a/m'", "dataset is in the way"}), msg.c_str());
        msg = errorOf([&] { f.writeTensor("a/m", torch::zeros({1})); });
        QVERIFY2(contains(msg, {path, "'/a/m'", "already exists"}), msg.c_str());
        msg = errorOf([&] { f.group("a/missing"); });
        QVERIFY2(contains(msg, {path, "no group '/a/missing'"}), msg.c_str());
        msg = errorOf([&] { f.dataset("a/b/missing"); });
        QVERIFY2(contains(msg, {path, "no dataset '/a/b/missing'"}), msg.c_str());
        msg = errorOf([&] { f.dataset("a/b"); });
        QVERIFY2(contains(msg, {path, "'/a/b' is a group, expected a dataset"}), msg.c_str());
        msg = errorOf([&] { f.group("a/m"); });
        QVERIFY2(contains(msg, {path, "'/a/m' is a dataset, expected a group"}), msg.c_str());
        msg = errorOf([&] { f.writeTensor("h", torch::zeros({2}, torch::kBFloat16)); });
        QVERIFY2(contains(msg, {path, "bfloat16", "supported"}), msg.c_str());
    }

    void attributes() {
        const std::string path = file("attrs.h5");
        const std::string longText(100000, 'x');   // beyond the 64 KiB compact attribute limit
        {
            h5::File f = h5::File::create(path);
            f.setAttr("n", int64_t(-42));
            f.setAttr("x", 2.5);
            f.setAttr("s", std::string("grüße {\"a\": 1}"));
            f.setAttr("long", longText);
            f.setAttr("empty", "");
            h5::Group g = f.createGroup("g");
            g.setAttr("v", 7);
            g.setAttr("v", "now a string");   // replacing changes the type
            h5::Dataset d = f.writeTensor("d", torch::zeros({2}));
            d.setAttr("scale", 0.5);
            f.close();
        }
        h5::File f = h5::File::open(path);
        QCOMPARE(f.attrInt("n"), int64_t(-42));
        QCOMPARE(f.attrDouble("x"), 2.5);
        QCOMPARE(f.attrDouble("n"), -42.0);   // integers read as numbers
        QCOMPARE(f.attrString("s"), std::string("grüße {\"a\": 1}"));
        QCOMPARE(f.attrString("long"), longText);
        QCOMPARE(f.attrString("empty"), std::string());
        QCOMPARE(f.attrNames(), (std::vector<std::string>{"empty", "long", "n", "s", "x"}));
        QCOMPARE(f.group("g").attrString("v"), std::string("now a string"));
        QCOMPARE(f.dataset("d").attrDouble("scale"), 0.5);
        QVERIFY(f.hasAttr("n") && !f.hasAttr("nope"));

        std::string msg = errorOf([&] { f.attrInt("s"); });
        QVERIFY2(contains(msg, {path, "attribute 's'", "string", "expected an integer"}), msg.c_str());
        msg = errorOf([&] { f.attrString("n"); });
        QVERIFY2(contains(msg, {path, "attribute 'n'", "int64", "expected a string"}), msg.c_str());
        msg = errorOf([&] { f.group("g").attrInt("missing"); });
        QVERIFY2(contains(msg, {path, "group '/g'", "no attribute 'missing'"}), msg.c_str());
        msg = errorOf([&] { f.dataset("d").attrString("scale"); });
        QVERIFY2(contains(msg, {path, "dataset '/d'", "float64", "expected a string"}), msg.c_str());
    }

    void wrongDtypeAndShape() {
        const std::string path = file("typed.h5");
        {
            h5::File f = h5::File::create(path);
            f.createGroup("p").writeTensor("w", torch::zeros({4, 3}, torch::kInt64));
            f.close();
        }
        h5::File f = h5::File::open(path);
        std::string msg = errorOf([&] { f.readTensor("p/w", torch::kFloat32, {4, 3}); });
        QVERIFY2(contains(msg, {path, "'/p/w'", "expected float32, file has int64"}), msg.c_str());
        msg = errorOf([&] { f.readTensor("p/w", torch::kInt64, {3, 4}); });
        QVERIFY2(contains(msg, {path, "'/p/w'", "expected shape [3,4], file has [4,3]"}), msg.c_str());
        msg = errorOf([&] { f.readTensor("p/w", torch::kInt64, {4}); });
        QVERIFY2(contains(msg, {"expected shape [4], file has [4,3]"}), msg.c_str());
        QCOMPARE(f.readTensor("p/w", torch::kInt64, {-1, 3}).size(0), 4);   // -1 matches any size
    }

    void fileErrors() {
        std::string path = file("missing.h5");
        std::string msg = errorOf([&] { h5::File::open(path); });
        QVERIFY2(contains(msg, {path, "does not exist"}), msg.c_str());

        path = file("text.h5");
        {
            QFile t(QString::fromStdString(path));
            QVERIFY(t.open(QIODevice::WriteOnly));
            t.write(QByteArray(4096, 'z'));
        }
        msg = errorOf([&] { h5::File::open(path); });
        QVERIFY2(contains(msg, {path, "not an HDF5 file"}), msg.c_str());

        path = file("empty.h5");
        QFile(QString::fromStdString(path)).open(QIODevice::WriteOnly);
        msg = errorOf([&] { h5::File::open(path); });
        QVERIFY2(contains(msg, {path, "empty file"}), msg.c_str());

        msg = errorOf([&] { h5::File::open(dir_.path().toStdString()); });
        QVERIFY2(contains(msg, {"is a directory"}), msg.c_str());

        path = file("in/no/such/dir.h5");
        msg = errorOf([&] { h5::writeAtomically(path, "glimpse.test", 1, [](h5::File&) {}); });
        QVERIFY2(contains(msg, {path, "No such file or directory"}), msg.c_str());
    }

    void truncatedFile() {
        const std::string path = file("truncated.h5");
        h5::writeAtomically(path, "glimpse.test", 1, [](h5::File& f) {
            f.writeTensor("data", torch::arange(50000, torch::kFloat32));
            f.createGroup("late").setAttr("note", "written last");
        });
        QVERIFY(h5::File::open(path).hasDataset("data"));
        const auto size = QFileInfo(QString::fromStdString(path)).size();
        QVERIFY(::truncate(path.c_str(), size / 2) == 0);
        const std::string msg = errorOf([&] {
            h5::File f = h5::File::open(path);
            f.readTensor("data");
            f.group("late").attrString("note");
        });
        QVERIFY2(contains(msg, {path, "truncated"}), msg.c_str());
    }

    // The SWMR metadata read attempts are a process-wide setting (24 by default, the fuzz
    // targets use 2) that reaches the access property list of every file opened afterwards.
    void swmrReadAttemptsReachTheFile() {
        const std::string path = file("attempts.h5");
        h5::writeAtomically(path, "glimpse.test", 1, [](h5::File& f) { f.writeTensor("x", torch::ones({3})); });
        auto attemptsOf = [](const h5::File& f) {
            const hid_t fapl = H5Fget_access_plist(f.fileId());
            unsigned n = 0;
            H5Pget_metadata_read_attempts(fapl, &n);
            H5Pclose(fapl);
            return n;
        };
        QCOMPARE(h5::swmrReadAttempts(), 24u);
        QCOMPARE(attemptsOf(h5::File::open(path, h5::File::Mode::SwmrRead)), 24u);
        h5::setSwmrReadAttempts(2);
        QCOMPARE(attemptsOf(h5::File::open(path, h5::File::Mode::SwmrRead)), 2u);
        h5::setSwmrReadAttempts(0);   // at least one read
        QCOMPARE(h5::swmrReadAttempts(), 1u);
        h5::setSwmrReadAttempts(24);
        QVERIFY(torch::equal(h5::File::open(path, h5::File::Mode::SwmrRead).readTensor("x"), torch::ones({3})));
    }

    void glimpseHeader() {
        const std::string trace = file("kind_trace.h5"), foreign = file("foreign.h5"), newer = file("newer.h5");
        h5::writeAtomically(trace, "glimpse.trace", 1, [](h5::File& f) { f.writeTensor("x", torch::ones({1})); });
        writeForeign(foreign);
        h5::writeAtomically(newer, "glimpse.checkpoint", 5, [](h5::File&) {});

        h5::File ok = h5::openGlimpse(trace, "glimpse.trace", 1);
        QCOMPARE(h5::readHeader(ok)->kind, std::string("glimpse.trace"));
        QCOMPARE(h5::readHeader(ok)->formatVersion, int64_t(1));

        std::string msg = errorOf([&] { h5::openGlimpse(trace, "glimpse.checkpoint", 1); });
        QVERIFY2(contains(msg, {trace + " is a glimpse.trace, expected a glimpse.checkpoint"}), msg.c_str());
        msg = errorOf([&] { h5::openGlimpse(foreign, "glimpse.checkpoint", 1); });
        QVERIFY2(contains(msg, {foreign + " is not a Glimpse file (no 'kind' attribute)"}), msg.c_str());
        msg = errorOf([&] { h5::openGlimpse(newer, "glimpse.checkpoint", 1); });
        QVERIFY2(contains(msg, {newer, "format version 5", "up to 1"}), msg.c_str());

        // A foreign file still opens as plain HDF5.
        h5::File f = h5::File::open(foreign);
        QVERIFY(!h5::readHeader(f));
        QVERIFY(torch::equal(f.readTensor("grp/data"), torch::arange(1, 7, torch::kFloat32).reshape({2, 3})));
    }

    void h5pyStyleBoolEnum() {
        const std::string path = file("enum_bool.h5");
        hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t type = H5Tenum_create(H5T_NATIVE_INT8);
        int8_t no = 0, yes = 1;
        H5Tenum_insert(type, "FALSE", &no);
        H5Tenum_insert(type, "TRUE", &yes);
        hsize_t n = 4;
        hid_t space = H5Screate_simple(1, &n, nullptr);
        hid_t d = H5Dcreate2(f, "flags", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int8_t v[4] = {1, 0, 0, 1};
        H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(d);
        H5Sclose(space);
        H5Tclose(type);
        H5Fclose(f);
        const auto t = h5::File::open(path).readTensor("flags");
        QCOMPARE(t.scalar_type(), torch::kBool);
        QVERIFY(torch::equal(t, torch::tensor({true, false, false, true})));
    }

    // A file may declare any extent: a chunked dataset with no chunks written takes no disk.
    // read() refuses shapes beyond h5::kMaxReadBytes, or whose size overflows, with the file and
    // dataset named, before allocating (it used to hand them to torch::empty). Also through
    // Trace::load, which reads every dataset of a trace.
    void absurdDeclaredShapesRefused() {
        const std::string path = file("absurd.h5");
        auto chunked = [](hid_t loc, const char* name, hid_t type, std::vector<hsize_t> dims) {
            std::vector<hsize_t> chunk(dims.size(), 1);
            chunk.back() = std::min<hsize_t>(dims.back(), 1024);
            hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
            hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
            hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            const bool ok = d >= 0;
            if (ok) H5Dclose(d);
            H5Pclose(dcpl);
            H5Sclose(space);
            return ok;
        };
        {
            hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            QVERIFY(chunked(f, "huge", H5T_IEEE_F32LE, {hsize_t(1) << 40, hsize_t(1) << 20}));   // 2^60 floats
            QVERIFY(chunked(f, "big", H5T_IEEE_F32LE, {hsize_t(1) << 33}));                        // 32 GiB
            QVERIFY(chunked(f, "wide", H5T_STD_U8LE, {(hsize_t(8) << 30) + 1}));                  // 8 GiB + 1 byte
            QVERIFY(chunked(f, "overflow", H5T_STD_I64LE, {hsize_t(1) << 32, hsize_t(1) << 32, hsize_t(1) << 32}));
            QVERIFY(chunked(f, "empty", H5T_IEEE_F32LE, {3, 4}));   // nothing written: reads the fill value
            H5Fclose(f);
        }
        QVERIFY(QFileInfo(QString::fromStdString(path)).size() < 64 * 1024);
        h5::File f = h5::File::open(path);
        std::string msg = errorOf([&] { f.readTensor("huge"); });
        QVERIFY2(contains(msg, {path, "dataset '/huge'", "declares shape [1099511627776,1048576] of float32", "8 GiB"}),
                 msg.c_str());
        msg = errorOf([&] { f.readTensor("big"); });
        QVERIFY2(contains(msg, {path, "dataset '/big'", "[8589934592]", "8 GiB"}), msg.c_str());
        msg = errorOf([&] { f.readTensor("wide"); });
        QVERIFY2(contains(msg, {path, "dataset '/wide'", "of uint8", "8 GiB"}), msg.c_str());
        // The typed read checks dtype and shape first, then the size.
        msg = errorOf([&] { f.readTensor("big", torch::kFloat32, {-1}); });
        QVERIFY2(contains(msg, {path, "dataset '/big'", "8 GiB"}), msg.c_str());
        msg = errorOf([&] { f.readTensor("overflow"); });
        QVERIFY2(contains(msg, {path, "dataset '/overflow'", "more than 2^63 elements"}), msg.c_str());
        msg = errorOf([&] { f.dataset("overflow").numElements(); });
        QVERIFY2(contains(msg, {path, "dataset '/overflow'", "more than 2^63 elements"}), msg.c_str());
        QCOMPARE(f.dataset("huge").numElements(), int64_t(1) << 60);
        QVERIFY(torch::equal(f.readTensor("empty"), torch::zeros({3, 4})));

        // The same inside a Glimpse trace.
        const std::string tracePath = file("absurd_trace.h5");
        h5::writeAtomically(tracePath, "glimpse.trace", 1, [&](h5::File& out) {
            h5::Group meta = out.createGroup("meta");
            meta.setAttr("family", "letr");
            meta.setAttr("meta", "{}");
            h5::Group tensors = out.createGroup("tensors");
            tensors.writeTensor("ok", torch::ones({2}));
            tensors.createDataset("layers/0/huge", H5T_IEEE_F32LE, {int64_t(1) << 40, int64_t(1) << 20}, {}, {1, 1024});
        });
        msg = errorOf([&] { Trace::load(tracePath); });
        QVERIFY2(contains(msg, {tracePath, "dataset '/tensors/layers/0/huge'", "8 GiB"}), msg.c_str());
    }

    void atomicWriteKeepsOldFileOnError() {
        const std::string path = file("atomic.h5");
        h5::writeAtomically(path, "glimpse.test", 1, [](h5::File& f) { f.writeTensor("v", torch::full({3}, 1.0)); });
        const auto before = QDir(dir_.path()).entryList(QDir::Files);
        std::string msg;
        try {
            h5::writeAtomically(path, "glimpse.test", 1, [](h5::File& f) {
                f.writeTensor("v", torch::full({3}, 2.0));
                f.writeTensor("w", torch::zeros({1000}));
                throw std::runtime_error("writer gave up midway");
            });
        } catch (const std::runtime_error& e) {
            msg = e.what();
        }
        QCOMPARE(msg, std::string("writer gave up midway"));
        QCOMPARE(QDir(dir_.path()).entryList(QDir::Files), before);   // no temp file left
        h5::File f = h5::openGlimpse(path, "glimpse.test", 1);
        QVERIFY(torch::equal(f.readTensor("v"), torch::full({3}, 1.0)));
        QVERIFY(!f.exists("w"));

        h5::writeAtomically(path, "glimpse.test", 1, [](h5::File& f) { f.writeTensor("v", torch::full({3}, 3.0)); });
        QVERIFY(torch::equal(h5::File::open(path).readTensor("v"), torch::full({3}, 3.0)));
    }

    void names() {
        QVERIFY(h5::isValidRelativePath("a"));
        QVERIFY(h5::isValidRelativePath("layers/3/attn.weight"));
        QVERIFY(h5::isValidRelativePath(".hidden"));
        for (const char* bad : {"", "/a", "a/", "a//b", ".", "a/./b"}) QVERIFY2(!h5::isValidRelativePath(bad), bad);
        QCOMPARE(h5::shapeString({3, 4}), std::string("[3,4]"));
        QCOMPARE(h5::shapeString({}), std::string("[]"));
        QCOMPARE(h5::shapeString({-1, 2}), std::string("[*,2]"));
    }

    void describe() {
        const std::string ckpt = file("info_ckpt.h5"), foreign = file("info_foreign.h5");
        h5::writeAtomically(ckpt, "glimpse.checkpoint", 1, [](h5::File& f) {
            h5::Group m = f.createGroup("meta");
            m.setAttr("family", "letr");
            m.setAttr("config", R"({"d_model": 256, "layers": 6})");
            f.createGroup("params").writeTensor("fc.weight", torch::zeros({3, 4}));
            f.group("params").writeTensor("fc.bias", torch::zeros({3}, torch::kInt64));
        });
        std::string s = describeH5(ckpt);
        QVERIFY2(contains(s, {ckpt, "glimpse.checkpoint", "format version 1", "family = \"letr\"", "d_model",
                              "(2 keys)", "params/", "fc.weight", "float32 [3,4]", "48 B", "fc.bias", "int64 [3]",
                              "total: 2 datasets", "72 B"}),
                 s.c_str());
        // A config shows every key on its own line, however many there are.
        QVERIFY2(contains(s, {"config = (2 keys)\n", "    d_model: 256\n", "    layers: 6\n"}), s.c_str());
        QVERIFY(!contains(s, {"not a Glimpse file"}));

        writeForeign(foreign);
        s = describeH5(foreign);
        QVERIFY2(contains(s, {"not a Glimpse file", "grp/", "data", "float32 [2,3]"}), s.c_str());

        const std::string msg = errorOf([&] { describeH5(file("nothing.h5")); });
        QVERIFY2(contains(msg, {"nothing.h5", "does not exist"}), msg.c_str());
        QCOMPARE(humanBytes(1536), std::string("1.5 KiB"));
        QCOMPARE(humanBytes(12), std::string("12 B"));
    }
};

QTEST_APPLESS_MAIN(TestH5)
#include "test_h5.moc"
