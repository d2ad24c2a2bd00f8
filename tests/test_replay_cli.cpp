// `glimpse data import-episode` and `glimpse bench replay` (app/cli/replay_cli.h): exit codes,
// usage errors, an import end to end on the Python-written PNG-folder fixture.
#include <QtTest>

#include <filesystem>
#include <iostream>
#include <sstream>

#include <hdf5.h>

#include "app/cli/cli.h"
#include "app/cli/replay_cli.h"
#include "core/replay/episode_reader.h"
#include "tests/support.h"

using namespace glimpse;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

// Runs f with std::cout / std::cerr captured; returns its exit code.
int capture(const std::function<int()>& f, std::string& out, std::string& err) {
    std::ostringstream o, e;
    auto* oldOut = std::cout.rdbuf(o.rdbuf());
    auto* oldErr = std::cerr.rdbuf(e.rdbuf());
    const int rc = f();
    std::cout.rdbuf(oldOut);
    std::cerr.rdbuf(oldErr);
    out = o.str();
    err = e.str();
    return rc;
}

} // namespace

class TestReplayCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const std::string& n) { return (dir_.path() + "/").toStdString() + n; }

private Q_SLOTS:
    void initTestCase() {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start("/usr/bin/python3", {QString(GLIMPSE_SOURCE_DIR) + "/tests/fixtures/make_replay_fixtures.py", dir_.path() + "/fx"});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, p.readAll().constData());
    }

    void importEpisode() {
        std::string out, err;
        QCOMPARE(capture([] { return cli::importEpisode({}); }, out, err), 2);
        QVERIFY(contains(out, {"usage: glimpse data import-episode"}));
        QCOMPARE(capture([] { return cli::importEpisode({"--help"}); }, out, err), 0);
        QCOMPARE(capture([&] { return cli::importEpisode({"--frames", path("fx/frames")}); }, out, err), 2);
        QVERIFY2(contains(err, {"missing --out"}), err.c_str());
        QCOMPARE(capture([&] { return cli::importEpisode({"--frames", "a", "--minari", "b", "--out", "c"}); }, out, err), 2);
        QCOMPARE(capture([&] { return cli::importEpisode({"--frames", "a", "--out", "c", "--bogus", "1"}); }, out, err), 2);
        QVERIFY2(contains(err, {"--bogus"}), err.c_str());
        // Bad input: exit 1, the file and the problem on stderr, no output file.
        QCOMPARE(capture([&] { return cli::importEpisode({"--frames", path("fx/frames_bad_action"), "--out", path("x.h5")}); },
                         out, err),
                 1);
        QVERIFY2(contains(err, {"labels.txt line 5", "unknown action id 25"}), err.c_str());
        QVERIFY(!std::filesystem::exists(path("x.h5")));
        // Success: the summary of the written episode.
        QCOMPARE(capture([&] {
                     return cli::importEpisode({"--frames", path("fx/frames"), "--episode-id", "0", "--game", "breakout",
                                                "--out", path("f0.h5")});
                 },
                 out, err),
                 0);
        QVERIFY2(contains(out, {"wrote", "f0.h5", "breakout", "6 steps", "return 10"}), out.c_str());
        QCOMPARE(replay::EpisodeReader(path("f0.h5")).length(), int64_t(6));
        QCOMPARE(capture([&] { return cli::importEpisode({"--minari", path("fx/minari"), "--list"}); }, out, err), 0);
        QVERIFY2(contains(out, {"2 episodes 0 1"}), out.c_str());
        QCOMPARE(capture([&] {
                     return cli::importEpisode({"--minari", path("fx/minari"), "--episode", "1", "--actions", "NOOP,FIRE,RIGHT,LEFT",
                                                "--out", path("m1.h5")});
                 },
                 out, err),
                 0);
        QVERIFY2(contains(out, {"7 steps", "NOOP FIRE RIGHT LEFT", "truncated"}), out.c_str());
    }

    void benchReplay() {
        std::string out, err;
        QCOMPARE(capture([] { return cli::benchReplay({"--help"}); }, out, err), 0);
        QVERIFY(contains(out, {"usage: glimpse bench replay"}));
        QCOMPARE(capture([] { return cli::benchReplay({"--steps", "0"}); }, out, err), 2);
        QCOMPARE(capture([&] { return cli::benchReplay({"--file", path("m1.h5"), "--steps", "5"}); }, out, err), 2);
        QCOMPARE(capture([&] { return cli::benchReplay({"--steps", "200", "--size", "16", "--scrubs", "50", "--dir", path("b")}); },
                         out, err),
                 0);
        QVERIFY2(contains(out, {"200 steps of 16x16", "open:", "random scrub", "p95"}), out.c_str());
        QCOMPARE(capture([&] { return cli::benchReplay({"--file", path("none.h5")}); }, out, err), 1);
        QVERIFY2(contains(err, {"none.h5", "does not exist"}), err.c_str());
    }

    // `glimpse check file` (run by the GUI before it opens an .h5 file) opens an episode as the
    // replay viewer does, in its child: an episode the viewer would refuse is refused there, with
    // the viewer's message, so the viewer's own process never reads it.
    void checkFileOpensEpisodesAsTheViewerDoes() {
        std::string out, err;
        QCOMPARE(capture([&] { return cli::checkFile({path("f0.h5")}); }, out, err), 0);
        QVERIFY2(contains(out, {"\"kind\":\"glimpse.episode\""}), out.c_str());
        std::filesystem::copy_file(path("f0.h5"), path("no_frame_skip.h5"));
        const hid_t f = H5Fopen(path("no_frame_skip.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        QVERIFY(f >= 0);
        QVERIFY(H5Adelete(f, "frame_skip") >= 0);
        H5Fclose(f);
        const std::string viewer = errorOf([&] { replay::EpisodeReader r(path("no_frame_skip.h5")); });
        QVERIFY2(contains(viewer, {"no_frame_skip.h5", "frame_skip"}), viewer.c_str());
        QCOMPARE(capture([&] { return cli::checkFile({path("no_frame_skip.h5")}); }, out, err), 1);
        QVERIFY2(contains(out, {"no_frame_skip.h5", "frame_skip"}), out.c_str());
    }
};

QTEST_APPLESS_MAIN(TestReplayCli)
#include "test_replay_cli.moc"
