// core/io/video: frame count, random access, colours, and clear errors for bad files.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <opencv2/videoio.hpp>

#include "core/io/video.h"
#include "support.h"

using glimpse::VideoReader;
using glimpse::testing::errorOf;

class TestVideo : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string clip_;

    // Frame i is a flat colour: RGB (20 + 30 i, 128, 230 - 30 i).
    static cv::Vec3b colourOf(int i) { return cv::Vec3b(uint8_t(20 + 30 * i), 128, uint8_t(230 - 30 * i)); }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        clip_ = dir_.filePath("clip.avi").toStdString();
        cv::VideoWriter vw(clip_, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 12.0, cv::Size(64, 48));
        QVERIFY(vw.isOpened());
        for (int i = 0; i < 7; ++i) {
            const cv::Vec3b c = colourOf(i);
            vw.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar(c[2], c[1], c[0])));   // BGR
        }
    }

    void readsFramesInAnyOrder() {
        VideoReader r(clip_);
        QCOMPARE(r.frameCount(), 7);
        QCOMPARE(r.width(), 64);
        QCOMPARE(r.height(), 48);
        QVERIFY(std::abs(r.fps() - 12.0) < 0.01);
        for (int i : {0, 1, 2, 6, 3, 3, 0, 5}) {
            const cv::Mat f = r.frame(i);
            QCOMPARE(f.type(), CV_8UC3);
            const cv::Vec3b got = f.at<cv::Vec3b>(24, 32), want = colourOf(i);
            for (int ch = 0; ch < 3; ++ch)
                QVERIFY2(std::abs(int(got[ch]) - int(want[ch])) <= 8,
                         qPrintable(QStringLiteral("frame %1 channel %2: %3 vs %4").arg(i).arg(ch).arg(got[ch]).arg(want[ch])));
        }
        QVERIFY(glimpse::testing::contains(errorOf([&] { r.frame(7); }), {"clip.avi", "frame 7", "out of range"}));
        QVERIFY(glimpse::testing::contains(errorOf([&] { r.frame(-1); }), {"clip.avi", "out of range"}));
    }

    void badFilesGiveClearErrors() {
        QVERIFY(glimpse::testing::contains(errorOf([&] { VideoReader r(dir_.filePath("missing.mp4").toStdString()); }),
                                           {"missing.mp4", "no such file"}));
        const std::string empty = dir_.filePath("empty.mp4").toStdString();
        std::ofstream(empty).close();
        QVERIFY(glimpse::testing::contains(errorOf([&] { VideoReader r(empty); }), {"empty.mp4", "empty"}));
        const std::string junk = dir_.filePath("junk.avi").toStdString();
        {
            std::ofstream f(junk, std::ios::binary);
            for (int i = 0; i < 5000; ++i) f.put(char(i * 7919 % 251));
        }
        const std::string e = errorOf([&] { VideoReader r(junk); });
        QVERIFY2(glimpse::testing::contains(e, {"junk.avi"}) && e != "<no error>", e.c_str());
        // A video cut to its first 300 bytes: header only, no decodable frame.
        const std::string cut = dir_.filePath("cut.avi").toStdString();
        {
            std::ifstream in(clip_, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            std::ofstream(cut, std::ios::binary).write(bytes.data(), 300);
        }
        const std::string e2 = errorOf([&] { VideoReader r(cut); });
        QVERIFY2(glimpse::testing::contains(e2, {"cut.avi"}), e2.c_str());
        QVERIFY(glimpse::isVideoFileName("a/B.MP4"));
        QVERIFY(!glimpse::isVideoFileName("a/b.png"));
    }
};

QTEST_APPLESS_MAIN(TestVideo)
#include "test_video.moc"
