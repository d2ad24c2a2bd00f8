// Classification datasets (core/data/classification.h): idx files (plain and gzipped) written
// here, Fashion-MNIST folders built from them, class-image folders, and the errors for bad input.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <zlib.h>

#include "core/data/classification.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::data;
using testing::contains;
using testing::errorOf;

namespace {

std::vector<uint8_t> idxBytes(const std::vector<int64_t>& dims, const std::vector<uint8_t>& data, uint8_t type = 8) {
    std::vector<uint8_t> b{0, 0, type, uint8_t(dims.size())};
    for (auto d : dims)
        for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t((uint64_t(d) >> s) & 0xff));
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

void writeRaw(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void writeGz(const std::string& path, const std::vector<uint8_t>& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    QVERIFY(f != nullptr);
    QCOMPARE(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    gzclose(f);
}

// n images h x w: pixel (y, x) of image i = (i * 7 + y * w + x) % 256; label i % 10.
void writeFashion(const std::string& dir, const std::string& prefix, int n, int h, int w, bool gz) {
    std::vector<uint8_t> img(static_cast<size_t>(n * h * w));
    std::vector<uint8_t> lbl(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        lbl[size_t(i)] = uint8_t(i % 10);
        for (int p = 0; p < h * w; ++p) img[size_t(i * h * w + p)] = uint8_t((i * 7 + p) % 256);
    }
    auto write = [&](const std::string& name, const std::vector<uint8_t>& b) {
        if (gz) writeGz(dir + "/" + name + ".gz", b);
        else writeRaw(dir + "/" + name, b);
    };
    write(prefix + "-images-idx3-ubyte", idxBytes({n, h, w}, img));
    write(prefix + "-labels-idx1-ubyte", idxBytes({n}, lbl));
}

void writePng(const std::string& path, int v) {
    cv::Mat m(20, 24, CV_8UC3, cv::Scalar(v, 255 - v, 40));   // BGR on disk
    QVERIFY(cv::imwrite(path, m));
}

} // namespace

class TestClassData : public QObject {
    Q_OBJECT
    QTemporaryDir tmp_;
    std::string path(const std::string& name) { return tmp_.filePath(QString::fromStdString(name)).toStdString(); }

private Q_SLOTS:
    void idxRoundTripPlainAndGzipped() {
        IdxArray a;
        a.dims = {3, 2, 5};
        for (int i = 0; i < 30; ++i) a.data.push_back(uint8_t(i * 9));
        writeIdx(path("a.idx"), a);
        IdxArray b = readIdx(path("a.idx"), 3);
        QCOMPARE(b.dims, a.dims);
        QVERIFY(b.data == a.data);
        // The same bytes gzipped read the same.
        writeGz(path("a.idx.gz"), idxBytes(a.dims, a.data));
        IdxArray c = readIdx(path("a.idx.gz"));
        QCOMPARE(c.dims, a.dims);
        QVERIFY(c.data == a.data);
    }

    void idxErrorsNameTheFile() {
        const std::string f = path("bad.idx");
        QVERIFY(contains(errorOf([&] { readIdx(path("missing.idx")); }), {"missing.idx", "not found"}));
        writeRaw(f, {0, 0});
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "not an idx file"}));
        writeRaw(f, {1, 2, 8, 1, 0, 0, 0, 1, 5});
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "magic"}));
        writeRaw(f, idxBytes({2}, {1, 2}, 0x0D));   // float data
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "not supported"}));
        writeRaw(f, idxBytes({4}, {1, 2, 3}));      // truncated
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "truncated", "3 of 4"}));
        writeRaw(f, idxBytes({2}, {1, 2, 3}));      // trailing byte
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "trailing"}));
        writeRaw(f, idxBytes({2, 1}, {1, 2}));      // labels file with images' magic
        QVERIFY(contains(errorOf([&] { readIdx(f, 1); }), {f, "2 dimensions, expected 1", "2050", "2049"}));
        writeRaw(f, {0, 0, 8, 3, 0, 0});            // header cut short
        QVERIFY(contains(errorOf([&] { readIdx(f); }), {f, "header is truncated"}));
    }

    void fashionMnistFolder() {
        const std::string dir = path("fm");
        std::filesystem::create_directories(dir);
        writeFashion(dir, "train", 23, 28, 28, true);
        writeFashion(dir, "t10k", 11, 28, 28, false);   // plain files are accepted too
        auto s = openClassificationDataset("fashion-mnist:" + dir);
        QCOMPARE(s.train->size(), int64_t(23));
        QCOMPARE(s.val->size(), int64_t(11));
        QCOMPARE(s.train->numClasses(), int64_t(10));
        QCOMPARE(s.train->classNames()[9], std::string("Ankle boot"));
        auto x = s.train->get(13);
        QCOMPARE(x.label, int64_t(3));
        QCOMPARE(x.image.type(), CV_8UC1);
        QCOMPARE(x.image.rows, 28);
        QCOMPARE(int(x.image.at<uint8_t>(2, 5)), (13 * 7 + 2 * 28 + 5) % 256);
        QVERIFY(contains(errorOf([&] { s.train->get(23); }), {"out of range"}));
        cv::Mat rgb = toRgb(x.image);
        QCOMPARE(rgb.type(), CV_8UC3);
        QCOMPARE(rgb.at<cv::Vec3b>(2, 5)[1], x.image.at<uint8_t>(2, 5));
    }

    void fashionMnistBadInput() {
        const std::string dir = path("fmbad");
        std::filesystem::create_directories(dir);
        QVERIFY(contains(errorOf([&] { openClassificationDataset("fashion-mnist:" + dir); }),
                         {dir, "train-images-idx3-ubyte", "not found"}));
        writeFashion(dir, "train", 5, 4, 4, false);
        writeFashion(dir, "t10k", 3, 4, 4, false);
        // Label count differs from the image count.
        writeRaw(dir + "/t10k-labels-idx1-ubyte", idxBytes({2}, {0, 1}));
        QVERIFY(contains(errorOf([&] { openClassificationDataset("fashion-mnist:" + dir); }),
                         {"t10k-images-idx3-ubyte", "3 images", "2 labels"}));
        // A label that is no class.
        writeRaw(dir + "/t10k-labels-idx1-ubyte", idxBytes({3}, {0, 12, 1}));
        QVERIFY(contains(errorOf([&] { openClassificationDataset("fashion-mnist:" + dir); }),
                         {"t10k-labels-idx1-ubyte", "label 12"}));
        // Images and labels swapped.
        writeRaw(dir + "/t10k-labels-idx1-ubyte", idxBytes({3, 4, 4}, std::vector<uint8_t>(48, 1)));
        QVERIFY(contains(errorOf([&] { openClassificationDataset("fashion-mnist:" + dir); }),
                         {"t10k-labels-idx1-ubyte", "expected 1"}));
    }

    void classFolderWithHoldout() {
        const std::string root = path("folders");
        for (const char* c : {"cat", "dog", "eel"}) std::filesystem::create_directories(root + "/" + c);
        for (int i = 0; i < 4; ++i) writePng(root + "/cat/c" + std::to_string(i) + ".png", 10 * i);
        for (int i = 0; i < 3; ++i) writePng(root + "/dog/d" + std::to_string(i) + ".png", 100 + i);
        for (int i = 0; i < 3; ++i) writePng(root + "/eel/e" + std::to_string(i) + ".jpg", 200 + i);
        writeRaw(root + "/dog/notes.txt", {'h', 'i'});   // ignored
        auto s = openClassificationDataset(root, 3);
        // 10 images in order cat0..3, dog0..2, eel0..2; every 3rd (index 2, 5, 8) is validation.
        QCOMPARE(s.train->size() + s.val->size(), int64_t(10));
        QCOMPARE(s.val->size(), int64_t(3));
        QCOMPARE(s.train->classNames(), (std::vector<std::string>{"cat", "dog", "eel"}));
        auto v0 = s.val->get(0);
        QCOMPARE(v0.label, int64_t(0));
        QCOMPARE(v0.image.type(), CV_8UC3);
        QCOMPARE(int(v0.image.at<cv::Vec3b>(3, 3)[0]), 40);   // R (written as BGR[2] = 40)
        QCOMPARE(int(v0.image.at<cv::Vec3b>(3, 3)[2]), 20);
        QCOMPARE(s.val->get(1).label, int64_t(1));
        QCOMPARE(s.val->get(2).label, int64_t(2));
        // A corrupt image fails on get() with its name.
        writeRaw(root + "/cat/c3.png", {1, 2, 3, 4});
        auto s2 = openClassificationDataset(root, 3);
        std::string e;
        for (int64_t i = 0; i < s2.train->size() && e.empty(); ++i) {
            std::string err = errorOf([&] { s2.train->get(i); });
            if (err != "<no error>") e = err;
        }
        QVERIFY2(contains(e, {"c3.png"}), e.c_str());
    }

    void classFolderSplitsAndErrors() {
        const std::string root = path("splits");
        for (const char* sp : {"train", "val"})
            for (const char* c : {"a", "b"}) {
                std::filesystem::create_directories(root + "/" + sp + "/" + c);
                writePng(root + "/" + sp + "/" + c + "/x.png", 5);
            }
        writePng(root + "/train/b/y.png", 7);
        auto s = openClassificationDataset(root);
        QCOMPARE(s.train->size(), int64_t(3));
        QCOMPARE(s.val->size(), int64_t(2));
        // val/ with another class list.
        std::filesystem::create_directories(root + "/val/c");
        writePng(root + "/val/c/z.png", 9);
        QVERIFY(contains(errorOf([&] { openClassificationDataset(root); }), {root, "differ"}));
        // An empty class folder; one class only; not a folder.
        const std::string r2 = path("empty");
        std::filesystem::create_directories(r2 + "/a");
        std::filesystem::create_directories(r2 + "/b");
        writePng(r2 + "/a/x.png", 1);
        QVERIFY(contains(errorOf([&] { openClassificationDataset(r2); }), {r2 + "/b", "no images"}));
        std::filesystem::remove_all(r2 + "/b");
        QVERIFY(contains(errorOf([&] { openClassificationDataset(r2); }), {r2, "at least 2"}));
        QVERIFY(contains(errorOf([&] { openClassificationDataset(path("nope")); }), {"nope", "not a folder"}));
        const std::string r3 = path("noclass");
        std::filesystem::create_directories(r3);
        QVERIFY(contains(errorOf([&] { openClassificationDataset(r3); }), {r3, "no class folders"}));
    }

    void debianFashionMnist() {
        std::error_code ec;
        if (!std::filesystem::exists(fashionMnistDefaultDir() + "/t10k-labels-idx1-ubyte.gz", ec))
            QSKIP("Debian's dataset-fashion-mnist is not installed");
        FashionMnistDataset test(fashionMnistDefaultDir(), "test");
        QCOMPARE(test.size(), int64_t(10000));
        auto s = test.get(0);
        QCOMPARE(s.image.rows, 28);
        QCOMPARE(s.image.cols, 28);
        // Every class occurs 1000 times in the test split.
        std::vector<int> counts(10);
        for (int64_t i = 0; i < test.size(); ++i) counts[size_t(test.get(i).label)]++;
        for (int c : counts) QCOMPARE(c, 1000);
    }
};

QTEST_APPLESS_MAIN(TestClassData)
#include "test_class_data.moc"
