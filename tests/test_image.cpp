// core/io/image and core/io/demo_image: decoding to RGB, header size checks, atomic PNG
// output, and the procedural demo scene.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

using testing::contains;
using testing::errorOf;

uint32_t crc32(const unsigned char* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

void putBE(QByteArray& b, int off, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[off + i] = char((v >> (24 - 8 * i)) & 0xFF);
}

void writeBytes(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

cv::Vec3b pixel(const cv::Mat& m, int y, int x) { return m.at<cv::Vec3b>(y, x); }

} // namespace

class TestImage : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void colourPngIsRgb() {
        cv::Mat bgr(4, 5, CV_8UC3, cv::Scalar(10, 20, 30));   // B=10 G=20 R=30
        const std::string p = file("bgr.png");
        QVERIFY(cv::imwrite(p, bgr));
        const cv::Mat m = loadImageRGB(p);
        QCOMPARE(m.type(), CV_8UC3);
        QCOMPARE(m.size(), cv::Size(5, 4));
        QCOMPARE(pixel(m, 0, 0), cv::Vec3b(30, 20, 10));
    }

    void grayscale() {
        cv::Mat g(3, 3, CV_8UC1);
        for (int i = 0; i < 9; ++i) g.data[i] = uchar(i * 30);
        const std::string p = file("gray.png");
        QVERIFY(cv::imwrite(p, g));
        const cv::Mat m = loadImageRGB(p);
        QCOMPARE(m.type(), CV_8UC3);
        QCOMPARE(pixel(m, 2, 2), cv::Vec3b(240, 240, 240));
        QCOMPARE(pixel(m, 0, 1), cv::Vec3b(30, 30, 30));
    }

    void sixteenBit() {
        cv::Mat g(2, 2, CV_16UC1);
        g.at<uint16_t>(0, 0) = 65535;
        g.at<uint16_t>(0, 1) = 257 * 100;
        g.at<uint16_t>(1, 0) = 0;
        g.at<uint16_t>(1, 1) = 257 * 200;
        const std::string p = file("gray16.png");
        QVERIFY(cv::imwrite(p, g));
        cv::Mat m = loadImageRGB(p);
        QCOMPARE(m.type(), CV_8UC3);
        QCOMPARE(pixel(m, 0, 0), cv::Vec3b(255, 255, 255));
        QCOMPARE(pixel(m, 0, 1), cv::Vec3b(100, 100, 100));
        QCOMPARE(pixel(m, 1, 1), cv::Vec3b(200, 200, 200));

        cv::Mat c(1, 1, CV_16UC3, cv::Scalar(257 * 10, 257 * 20, 257 * 30));
        const std::string pc = file("rgb16.png");
        QVERIFY(cv::imwrite(pc, c));
        m = loadImageRGB(pc);
        QCOMPARE(pixel(m, 0, 0), cv::Vec3b(30, 20, 10));
    }

    void alphaIsCompositedOnWhite() {
        cv::Mat bgra(1, 3, CV_8UC4);
        bgra.at<cv::Vec4b>(0, 0) = {0, 0, 200, 255};   // opaque red
        bgra.at<cv::Vec4b>(0, 1) = {0, 0, 200, 0};     // transparent: white
        bgra.at<cv::Vec4b>(0, 2) = {0, 0, 0, 128};     // half black: mid grey
        const std::string p = file("alpha.png");
        QVERIFY(cv::imwrite(p, bgra));
        const cv::Mat m = loadImageRGB(p);
        QCOMPARE(m.type(), CV_8UC3);
        QCOMPARE(pixel(m, 0, 0), cv::Vec3b(200, 0, 0));
        QCOMPARE(pixel(m, 0, 1), cv::Vec3b(255, 255, 255));
        QCOMPARE(pixel(m, 0, 2), cv::Vec3b(127, 127, 127));
    }

    void onePixel() {
        cv::Mat one(1, 1, CV_8UC3, cv::Scalar(1, 2, 3));
        const std::string p = file("one.png");
        QVERIFY(cv::imwrite(p, one));
        const cv::Mat m = loadImageRGB(p);
        QCOMPARE(m.size(), cv::Size(1, 1));
        QCOMPARE(pixel(m, 0, 0), cv::Vec3b(3, 2, 1));
        const std::string j = file("one.jpg");
        QVERIFY(cv::imwrite(j, one));
        QCOMPARE(loadImageRGB(j).size(), cv::Size(1, 1));
    }

    void errors() {
        std::string p = file("garbage.png");
        writeBytes(QString::fromStdString(p), QByteArray(3000, '\x5a'));
        std::string msg = errorOf([&] { loadImageRGB(p); });
        QVERIFY2(contains(msg, {p, "not an image or corrupt"}), msg.c_str());

        p = file("missing.png");
        msg = errorOf([&] { loadImageRGB(p); });
        QVERIFY2(contains(msg, {p, "does not exist"}), msg.c_str());

        p = file("empty.png");
        writeBytes(QString::fromStdString(p), QByteArray());
        msg = errorOf([&] { loadImageRGB(p); });
        QVERIFY2(contains(msg, {p, "empty file"}), msg.c_str());

        msg = errorOf([&] { loadImageRGB(dir_.path().toStdString()); });
        QVERIFY2(contains(msg, {"is a directory"}), msg.c_str());

        // A PNG cut after its header: the header is fine, the data is not.
        cv::Mat img(64, 64, CV_8UC3, cv::Scalar(1, 2, 3));
        cv::randu(img, 0, 255);
        std::vector<uchar> png;
        cv::imencode(".png", img, png);
        p = file("cut.png");
        writeBytes(QString::fromStdString(p), QByteArray(reinterpret_cast<const char*>(png.data()), int(png.size() / 3)));
        msg = errorOf([&] { loadImageRGB(p); });
        QVERIFY2(contains(msg, {p, "not an image or corrupt"}), msg.c_str());
    }

    void absurdHeaderIsRefusedBeforeDecoding() {
        // A valid 8x8 PNG whose IHDR is patched to claim 30000 x 30000 (CRC fixed up).
        std::vector<uchar> png;
        cv::imencode(".png", cv::Mat(8, 8, CV_8UC3, cv::Scalar(9, 9, 9)), png);
        QByteArray b(reinterpret_cast<const char*>(png.data()), int(png.size()));
        QCOMPARE(b.mid(12, 4), QByteArray("IHDR"));
        putBE(b, 16, 30000);
        putBE(b, 20, 30000);
        putBE(b, 29, crc32(reinterpret_cast<const unsigned char*>(b.constData()) + 12, 17));
        const std::string p = file("huge.png");
        writeBytes(QString::fromStdString(p), b);
        QCOMPARE(peekImageSize(p), cv::Size(30000, 30000));
        std::string msg = errorOf([&] { loadImageRGB(p); });
        QVERIFY2(contains(msg, {p, "too large", "header declares 30000 x 30000", "20000"}), msg.c_str());

        // A BMP header (54 bytes, no pixels) claiming 15000 x 9000 = 135 megapixels.
        QByteArray bmp(54, '\0');
        bmp[0] = 'B';
        bmp[1] = 'M';
        auto putLE = [&](int off, uint32_t v) {
            for (int i = 0; i < 4; ++i) bmp[off + i] = char((v >> (8 * i)) & 0xFF);
        };
        putLE(2, 54);
        putLE(10, 54);
        putLE(14, 40);
        putLE(18, 15000);
        putLE(22, 9000);
        bmp[26] = 1;
        bmp[28] = 24;
        const std::string pb = file("huge.bmp");
        writeBytes(QString::fromStdString(pb), bmp);
        msg = errorOf([&] { loadImageRGB(pb); });
        QVERIFY2(contains(msg, {pb, "too large", "header declares 15000 x 9000", "100 megapixels"}), msg.c_str());
    }

    void headerSizesOfEveryFormat() {
        const cv::Mat img(23, 37, CV_8UC3, cv::Scalar(50, 100, 150));
        int checked = 0;
        for (const char* ext : {".png", ".jpg", ".bmp", ".tiff", ".webp", ".ppm", ".pgm", ".ras"}) {
            if (!cv::haveImageWriter(ext)) continue;
            const std::string p = dir_.filePath(QString("size") + ext).toStdString();
            cv::Mat src = img;
            if (std::string(ext) == ".pgm") cv::cvtColor(img, src, cv::COLOR_BGR2GRAY);
            QVERIFY2(cv::imwrite(p, src), ext);
            QVERIFY2(peekImageSize(p) == cv::Size(37, 23), ext);
            QVERIFY2(loadImageRGB(p).size() == cv::Size(37, 23), ext);
            ++checked;
        }
        QVERIFY(checked >= 5);
    }

    void savePng() {
        cv::Mat rgb(6, 7, CV_8UC3);
        cv::randu(rgb, 0, 255);
        const std::string p = file("saved.png");
        saveImagePNG(p, rgb);
        QCOMPARE(cv::norm(loadImageRGB(p), rgb, cv::NORM_INF), 0.0);
        cv::Mat raw = cv::imread(p, cv::IMREAD_UNCHANGED);   // stored as a normal BGR PNG
        QCOMPARE(raw.at<cv::Vec3b>(0, 0), cv::Vec3b(rgb.at<cv::Vec3b>(0, 0)[2], rgb.at<cv::Vec3b>(0, 0)[1],
                                                     rgb.at<cv::Vec3b>(0, 0)[0]));

        cv::Mat gray(2, 2, CV_8UC1, cv::Scalar(77));
        saveImagePNG(p, gray);   // replaces the file
        QCOMPARE(pixel(loadImageRGB(p), 1, 1), cv::Vec3b(77, 77, 77));
        cv::Mat rgba(1, 1, CV_8UC4, cv::Scalar(255, 0, 0, 255));
        saveImagePNG(p, rgba);
        QCOMPARE(pixel(loadImageRGB(p), 0, 0), cv::Vec3b(255, 0, 0));
        QCOMPARE(QDir(dir_.path()).entryList({"saved.png*"}), QStringList{"saved.png"});

        std::string msg = errorOf([&] { saveImagePNG(file("e.png"), cv::Mat()); });
        QVERIFY2(contains(msg, {"e.png", "empty image"}), msg.c_str());
        msg = errorOf([&] { saveImagePNG(file("f.png"), cv::Mat(2, 2, CV_32FC3)); });
        QVERIFY2(contains(msg, {"f.png", "8-bit"}), msg.c_str());
        msg = errorOf([&] { saveImagePNG(file("no/dir/x.png"), rgb); });
        QVERIFY2(contains(msg, {"no/dir/x.png", "No such file or directory"}), msg.c_str());
    }

    // JPEG: the same bytes as OpenCV's encoder at that quality, written atomically; alpha dropped.
    void saveJpeg() {
        cv::Mat rgb(24, 32, CV_8UC3);
        cv::randu(rgb, 0, 255);
        cv::GaussianBlur(rgb, rgb, cv::Size(5, 5), 2);
        const std::string p = file("saved.jpg");
        saveImageJPEG(p, rgb, 80);
        cv::Mat bgr;
        cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
        std::vector<uchar> expected;
        QVERIFY(cv::imencode(".jpg", bgr, expected, {cv::IMWRITE_JPEG_QUALITY, 80}));
        QFile f(QString::fromStdString(p));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray bytes = f.readAll();
        QCOMPARE(bytes, QByteArray(reinterpret_cast<const char*>(expected.data()), int(expected.size())));
        const cv::Mat back = loadImageRGB(p);
        QCOMPARE(back.size(), rgb.size());
        QVERIFY(cv::norm(back, rgb, cv::NORM_L1) / double(rgb.total() * 3) < 8);   // lossy, but close
        cv::Mat rgba(4, 4, CV_8UC4, cv::Scalar(250, 10, 10, 0));
        saveImageJPEG(p, rgba);   // replaces the file
        QVERIFY(cv::norm(pixel(loadImageRGB(p), 1, 1), cv::Vec3b(250, 10, 10), cv::NORM_INF) < 12);
        QCOMPARE(QDir(dir_.path()).entryList({"saved.jpg*"}), QStringList{"saved.jpg"});
        std::string msg = errorOf([&] { saveImageJPEG(file("q.jpg"), rgb, 0); });
        QVERIFY2(contains(msg, {"q.jpg", "quality"}), msg.c_str());
        msg = errorOf([&] { saveImageJPEG(file("f.jpg"), cv::Mat(2, 2, CV_32FC3)); });
        QVERIFY2(contains(msg, {"f.jpg", "8-bit", "JPEG"}), msg.c_str());
        msg = errorOf([&] { saveImageJPEG(file("no/dir/x.jpg"), rgb); });
        QVERIFY2(contains(msg, {"no/dir/x.jpg", "No such file or directory"}), msg.c_str());
    }

    void demoSceneIsDeterministic() {
        const DemoScene a = makeDemoScene();
        const DemoScene b = makeDemoScene(1024, 768, 1);
        QCOMPARE(a.image.type(), CV_8UC3);
        QCOMPARE(a.image.size(), cv::Size(1024, 768));
        QCOMPARE(cv::norm(a.image, b.image, cv::NORM_INF), 0.0);
        QCOMPARE(a.lines, b.lines);
        QCOMPARE(cv::norm(makeDemoImage(), a.image, cv::NORM_INF), 0.0);
        const DemoScene c = makeDemoScene(1024, 768, 2);
        QVERIFY(cv::norm(a.image, c.image, cv::NORM_L1) > 1e6);
        QVERIFY(a.lines != c.lines);

        const DemoScene small = makeDemoScene(64, 48, 5);
        QCOMPARE(small.image.size(), cv::Size(64, 48));
        const std::string msg = errorOf([] { makeDemoScene(8, 8); });
        QVERIFY2(contains(msg, {"8 x 8", "out of range"}), msg.c_str());
    }

    void demoSceneHasVisibleLines() {
        for (uint64_t seed : {1, 2, 3}) {
            const DemoScene s = makeDemoScene(1024, 768, seed);
            QVERIFY2(s.lines.size() >= 40, std::to_string(s.lines.size()).c_str());
            cv::Mat gray;
            cv::cvtColor(s.image, gray, cv::COLOR_RGB2GRAY);
            cv::Mat gx, gy, mag;
            cv::Sobel(gray, gx, CV_32F, 1, 0);
            cv::Sobel(gray, gy, CV_32F, 0, 1);
            cv::magnitude(gx, gy, mag);
            // Each ground-truth line lies on a strong edge: along it, the strongest gradient
            // within 2 px across is far above the image's median gradient.
            int onEdge = 0;
            for (const auto& l : s.lines) {
                QVERIFY(l[0] >= -0.01f && l[0] <= 1023.01f && l[2] >= -0.01f && l[2] <= 1023.01f);
                QVERIFY(l[1] >= -0.01f && l[1] <= 767.01f && l[3] >= -0.01f && l[3] <= 767.01f);
                const cv::Point2f a(l[0], l[1]), b(l[2], l[3]);
                const float len = float(cv::norm(b - a));
                QVERIFY(len >= 6);
                const cv::Point2f n(-(b.y - a.y) / len, (b.x - a.x) / len);
                int strong = 0, samples = 0;
                for (float t = 0.1f; t <= 0.9f; t += 0.1f, ++samples) {
                    const cv::Point2f p = a + (b - a) * t;
                    float best = 0;
                    for (float d = -2; d <= 2; d += 1) {
                        const cv::Point q(cvRound(p.x + n.x * d), cvRound(p.y + n.y * d));
                        if (q.inside(cv::Rect(0, 0, mag.cols, mag.rows))) best = std::max(best, mag.at<float>(q));
                    }
                    strong += best > 40;
                }
                onEdge += strong >= samples * 8 / 10;
            }
            QVERIFY2(onEdge >= int(s.lines.size()) * 9 / 10,
                     (std::to_string(onEdge) + " of " + std::to_string(s.lines.size())).c_str());
        }
    }
};

QTEST_APPLESS_MAIN(TestImage)
#include "test_image.moc"
