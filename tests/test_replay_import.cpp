// Importers (core/replay/import.h) and older episode versions, on fixtures that
// tests/fixtures/make_replay_fixtures.py writes with h5py/PIL from the documented layouts.
#include <QtTest>

#include <filesystem>

#include <torch/torch.h>

#include "core/error.h"
#include "core/info.h"
#include "core/replay/episode_reader.h"
#include "core/replay/import.h"
#include "core/rl/episode.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::replay;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

constexpr int64_t kH = 10, kW = 8;

// The fixture script's pixel formula.
uint8_t pixel(int ep, int64_t t, int64_t y, int64_t x, int64_t c) { return uint8_t((16 * t + 3 * y + 5 * x + 70 * c + ep) % 256); }

bool frameMatches(const FramePtr& f, int ep, int64_t t) {
    if (!f || f->height != kH || f->width != kW) return false;
    for (int64_t y = 0; y < kH; ++y)
        for (int64_t x = 0; x < kW; ++x)
            for (int64_t c = 0; c < f->channels; ++c)
                if (f->pixel(y, x)[c] != pixel(ep, t, y, x, c)) return false;
    return true;
}

} // namespace

class TestReplayImport : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string fx(const std::string& n) { return (dir_.path() + "/fx/").toStdString() + n; }
    std::string out(const std::string& n) { return (dir_.path() + "/out/").toStdString() + n; }

    // The import must fail with all `words` in the message and leave no output file.
    void expectFailure(const std::function<void()>& f, const std::string& outFile, std::initializer_list<std::string> words) {
        const std::string err = errorOf(f);
        QVERIFY2(contains(err, words), err.c_str());
        QVERIFY2(!std::filesystem::exists(outFile), outFile.c_str());
    }

private Q_SLOTS:
    void initTestCase() {
        // The fixtures need Debian's python3-h5py, -numpy and -pil: a missing module fails here.
        const QString python = "/usr/bin/python3";
        QVERIFY2(QFileInfo::exists(python), "/usr/bin/python3 is missing (installer/setup.sh installs it)");
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(python, {QString(GLIMPSE_SOURCE_DIR) + "/tests/fixtures/make_replay_fixtures.py", dir_.path() + "/fx"});
        QVERIFY(p.waitForFinished(120000));
        const QByteArray log = p.readAll();
        QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, log.constData());
        std::filesystem::create_directories(out(""));
    }

    void minariEpisodes() {
        QCOMPARE(replay::minariEpisodes(fx("minari")), (std::vector<int64_t>{0, 1}));
        // The dataset folder, its data/ folder or the file itself.
        QCOMPARE(findMinariFile(fx("minari")), fx("minari/data/main_data.hdf5"));
        QCOMPARE(findMinariFile(fx("minari/data")), fx("minari/data/main_data.hdf5"));

        const rl::Episode e = importMinari(fx("minari"), out("m0.h5"));
        QCOMPARE(e.length(), int64_t(12));
        EpisodeReader r(out("m0.h5"));
        QCOMPARE(r.length(), int64_t(12));
        QCOMPARE(r.game(), std::string("atari/fixture/test-v0"));
        QCOMPARE(r.actionNames(), (std::vector<std::string>{"0", "1", "2", "3"}));
        QCOMPARE(r.meta().seed, int64_t(123));
        QVERIFY(contains(r.meta().source, {"minari:", "main_data.hdf5#episode_0"}));
        QCOMPARE(r.frameChannels(), int64_t(3));
        for (int64_t t = 0; t < 12; ++t) {
            QVERIFY2(frameMatches(r.frame(t), 0, t), std::to_string(t).c_str());
            QCOMPARE(r.action(t), (3 * t) % 4);
            QCOMPARE(r.reward(t), t % 4 == 3 ? 1.f : 0.f);
        }
        QCOMPARE(r.totalReturn(), 3.0);
        QVERIFY(r.terminal());
        QVERIFY(r.isTerminal(11));
        QCOMPARE(r.nextLifeLoss(-1), int64_t(5));   // infos/lives: 3 through reset..step 4, 2 after step 5
        QCOMPARE(r.nextLifeLoss(5), int64_t(-1));
        QCOMPARE(r.series(Series::Lives).front(), 3.f);
        QCOMPARE(r.series(Series::Lives).back(), 2.f);
        QVERIFY(!r.hasModel());

        MinariImportOptions o;
        o.episode = 1;
        o.game = "breakout";
        o.actionNames = {"NOOP", "FIRE", "RIGHT", "LEFT"};
        importMinari(fx("minari/data/main_data.hdf5"), out("m1.h5"), o);
        EpisodeReader r1(out("m1.h5"));
        QCOMPARE(r1.length(), int64_t(7));
        QCOMPARE(r1.game(), std::string("breakout"));
        QCOMPARE(r1.actionName(0), std::string("FIRE"));   // (3 * 0 + 1) % 4
        QVERIFY(!r1.terminal());                           // truncated
        QVERIFY(!r1.has(Series::Lives));
        for (int64_t t = 0; t < 7; ++t) QVERIFY(frameMatches(r1.frame(t), 1, t));

        // Grey observations [T+1,H,W]; metadata as root attributes (older Minari); Discrete(18).
        importMinari(fx("minari_grey/main_data.hdf5"), out("grey.h5"));
        EpisodeReader g(out("grey.h5"));
        QCOMPARE(g.frameChannels(), int64_t(1));
        QCOMPARE(g.game(), std::string("grey-fixture-v0"));
        QCOMPARE(g.actionNames(), aleActionNames());
        QCOMPARE(g.actionName(1), std::string("RIGHT"));   // action (3 * 1) % 4 = 3 of the 18 names
        for (int64_t t = 0; t < 6; ++t) QVERIFY(frameMatches(g.frame(t), 0, t));
    }

    void minariBadInput() {
        const std::string o = out("bad.h5");
        expectFailure([&] { importMinari(fx("minari_missing_rewards"), o); }, o,
                      {"main_data.hdf5", "episode_0/rewards", "missing"});
        expectFailure([&] { importMinari(fx("minari_mismatch"), o); }, o,
                      {"main_data.hdf5", "episode_0/actions", "[11]", "[12]", "mismatched lengths"});
        expectFailure([&] { importMinari(fx("minari_bad_action"), o); }, o,
                      {"main_data.hdf5", "episode_0/actions", "action 9", "step 4", "unknown action id"});
        expectFailure([&] { importMinari(fx("minari_bad_shape"), o); }, o,
                      {"main_data.hdf5", "episode_0/observations", "[13,5]", "wrong shape"});
        expectFailure([&] { importMinari(fx("minari_dict_obs"), o); }, o,
                      {"main_data.hdf5", "episode_0/observations", "group"});
        expectFailure([&] { importMinari(fx("minari_truncated"), o); }, o, {"main_data.hdf5", "truncated"});
        MinariImportOptions e5;
        e5.episode = 5;
        expectFailure([&] { importMinari(fx("minari"), o, e5); }, o, {"main_data.hdf5", "episode_5", "episode_0 .. episode_1"});
        MinariImportOptions names;
        names.actionNames = {"A", "B"};
        expectFailure([&] { importMinari(fx("minari"), o, names); }, o, {"2 action names", "4 actions"});
        expectFailure([&] { importMinari(fx("frames"), o); }, o, {"frames", "not a Minari dataset"});
    }

    void pngFolder() {
        const rl::Episode e = importFrames(fx("frames"), out("f.h5"));
        QCOMPARE(e.length(), int64_t(10));
        EpisodeReader r(out("f.h5"));
        QCOMPARE(r.game(), std::string("frames"));
        QCOMPARE(r.actionNames(), aleActionNames());
        for (int64_t i = 0; i < 10; ++i) {
            const int ep = i < 6 ? 0 : 1;
            QVERIFY2(frameMatches(r.frame(i), ep, ep == 0 ? i : i - 6), std::to_string(i).c_str());
            QCOMPARE(r.action(i), (2 * i) % 18);
            QCOMPARE(r.reward(i), i % 3 == 2 ? 5.f : 0.f);   // row 0's "null" reward reads as 0
        }
        QCOMPARE(r.actionName(1), std::string("UP"));
        QCOMPARE(r.totalReturn(), 15.0);
        QCOMPARE(r.nextTerminal(-1), int64_t(5));   // episode_id changes after row 5: a game ended
        QVERIFY(!r.terminal());
        QVERIFY(!r.has(Series::Lives));

        FramesImportOptions o;
        o.episodeId = 1;
        o.game = "breakout";
        importFrames(fx("frames"), out("f1.h5"), o);
        EpisodeReader r1(out("f1.h5"));
        QCOMPARE(r1.length(), int64_t(4));
        QCOMPARE(r1.game(), std::string("breakout"));
        for (int64_t t = 0; t < 4; ++t) QVERIFY(frameMatches(r1.frame(t), 1, t));
        QCOMPARE(r1.action(0), int64_t(12));
    }

    void pngFolderBadInput() {
        const std::string o = out("badf.h5");
        expectFailure([&] { importFrames(fx("frames_bad_size"), o); }, o, {"RZ_1_5.png", "8x12 RGB", "8x10 RGB", "wrong shape"});
        expectFailure([&] { importFrames(fx("frames_bad_action"), o); }, o, {"labels.txt line 5", "unknown action id 25"});
        expectFailure([&] { importFrames(fx("frames_missing_png"), o); }, o, {"RZ_1_8.png", "does not exist"});
        expectFailure([&] { importFrames(fx("frames_short_row"), o); }, o, {"labels.txt line 7", "3 fields"});
        FramesImportOptions noRows;
        noRows.episodeId = 9;
        expectFailure([&] { importFrames(fx("frames"), o, noRows); }, o, {"labels.txt", "no rows with episode_id 9"});
        FramesImportOptions wrongCsv;
        wrongCsv.csv = fx("minari/data/metadata.json");
        expectFailure([&] { importFrames(fx("frames"), o, wrongCsv); }, o, {"metadata.json", "no column", "frame_id", "action"});
        expectFailure([&] { importFrames(fx("nowhere"), o); }, o, {"nowhere", "not a folder"});
    }

    void olderAndNewerEpisodeVersions() {
        // Version 1 (as `glimpse play --record` wrote before version 2) opens in both readers.
        EpisodeReader r(fx("episode_v1.h5"));
        QCOMPARE(r.formatVersion(), int64_t(1));
        QCOMPARE(r.length(), int64_t(5));
        QCOMPARE(r.game(), std::string("breakout"));
        for (int64_t t = 0; t < 5; ++t) QVERIFY(frameMatches(r.frame(t), 0, t));
        QCOMPARE(r.nextLifeLoss(-1), int64_t(2));   // lives 5 5 4 4 3
        QCOMPARE(r.nextLifeLoss(2), int64_t(4));
        QVERIFY(r.isTerminal(4));
        QVERIFY(r.hasObservations());
        QCOMPARE(r.observation(3).sizes().vec(), (std::vector<int64_t>{3, 2, 2}));
        QCOMPARE(r.observation(3)[0][0][0].item<float>(), 0.5f);
        QVERIFY(r.has(Series::Value) && r.has(Series::ValuePrefix) && r.has(Series::RootValue));
        QVERIFY(r.has(PerAction::Policy) && r.has(PerAction::Visits) && !r.has(PerAction::ChildQ));
        QCOMPARE(r.perAction(PerAction::Visits, 0), (std::vector<float>{1, 2, 3, 2}));
        const rl::Episode e = rl::readEpisode(fx("episode_v1.h5"));
        QCOMPARE(e.length(), int64_t(5));
        QVERIFY(e.hasModel);
        QCOMPARE(e.frames.size(0), int64_t(5));
        const std::string info = describeEpisode(fx("episode_v1.h5"));
        QVERIFY2(contains(info, {"format version 1", "breakout", "5 steps", "2 life losses", "lives 5 -> 3", "policy"}),
                 info.c_str());
        // A newer version is refused with both numbers.
        auto err = errorOf([&] { EpisodeReader v3(fx("episode_v3.h5")); });
        QVERIFY2(contains(err, {"episode_v3.h5", "format version 3", "up to 2"}), err.c_str());
        err = errorOf([&] { rl::readEpisode(fx("episode_v3.h5")); });
        QVERIFY2(contains(err, {"episode_v3.h5", "format version 3"}), err.c_str());
    }
};

QTEST_APPLESS_MAIN(TestReplayImport)
#include "test_replay_import.moc"
