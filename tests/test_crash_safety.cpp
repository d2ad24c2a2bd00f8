// Crash safety (docs/crash-safety.md), the small version of tools/crash_test.sh: the real
// `glimpse train letr` is killed with SIGKILL at varied moments (once the run log shows step k)
// and resumed; every kill leaves a readable checkpoint and run log, the log reads as dead (not
// running) to RunLogReader and to the Training panel's RunFollower, a resume continues from the
// checkpoint (at most one checkpoint interval lost), rows after the checkpoint are dropped, and a
// run killed before its first checkpoint resumes from step 0. Plus the heartbeat rules in-process.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/training/run_follower.h"
#include "core/h5/h5.h"
#include "core/runlog.h"
#include "core/train/run.h"
#include "core/train/state.h"
#include "tests/support.h"

using namespace glimpse;
using testing::contains;

namespace {

const QString kGlimpse = QStringLiteral(GLIMPSE_BINARY_DIR "/app/glimpse");
const QString kData = QStringLiteral("procedural:8:1:64x64");
constexpr int64_t kInterval = 4;   // checkpoint_every

void writeConfig(const QString& path, int64_t steps, int64_t checkpointEvery) {
    nlohmann::json j = {
        {"model", {{"backbone", "resnet10"}, {"hidden_dim", 32}, {"nheads", 2}, {"dim_feedforward", 64},
                   {"coarse_enc_layers", 1}, {"coarse_dec_layers", 1}, {"num_queries", 8}, {"short_side", 64},
                   {"max_long_side", 128}, {"stages", "coarse"}}},
        {"batch_size", 1}, {"coarse_steps", steps}, {"checkpoint_every", checkpointEvery}, {"threads", 1},
        {"augment", {{"min_short_side", 56}, {"max_short_side", 72}, {"max_long_side", 128}}}};
    std::ofstream(path.toStdString()) << j.dump(2);
}

// The last step a reader sees in the run log's loss series (-1: no file or no rows yet). Reading
// must never fail, whatever state the writer is in.
int64_t visibleStep(std::unique_ptr<RunLogReader>& reader, const std::string& path) {
    if (!reader) {
        if (!std::filesystem::exists(path)) return -1;
        reader = std::make_unique<RunLogReader>(RunLogReader::open(path));
    } else {
        reader->refresh();
    }
    const MetricSeries s = reader->series("loss/total");
    return s.size() ? s.steps.back() : -1;
}

struct Killed {
    int64_t lastVisible = -1;   // the last step the follower saw before the kill
    QString err;
};

// Starts `glimpse train letr`, follows its run log until it shows step >= `killAt`, SIGKILLs it.
Killed runAndKill(const QStringList& args, const std::string& runLog, int64_t killAt) {
    Killed k;
    QProcess p;
    p.setProcessChannelMode(QProcess::SeparateChannels);
    p.start(kGlimpse, args);
    if (!p.waitForStarted(30000)) {
        k.err = "cannot start " + kGlimpse;
        return k;
    }
    std::unique_ptr<RunLogReader> reader;
    // The log of an earlier attempt may be there already: wait for this process's own log.
    const int64_t pid = p.processId();
    for (int i = 0; i < 6000 && p.state() == QProcess::Running; ++i) {
        if (reader && reader->writer().pid != pid) reader.reset();
        const int64_t step = visibleStep(reader, runLog);
        if (reader && reader->writer().pid == pid) {
            if (reader->liveness().state != Liveness::Alive)
                k.err = "a live writer reads as " + QString::fromStdString(reader->liveness().description);
            if (step >= killAt) {
                k.lastVisible = step;
                break;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (k.lastVisible < 0) {
        p.waitForFinished(1000);
        k.err += " the run never showed step " + QString::number(killAt) + ": " + p.readAllStandardError();
        return k;
    }
    ::kill(pid_t(pid), SIGKILL);
    p.waitForFinished(30000);
    if (p.exitStatus() != QProcess::CrashExit) k.err += " the trainer was not killed";
    return k;
}

// Runs glimpse to the end; returns its stderr (or why it did not run) and sets *code.
QString runToEnd(const QStringList& args, int* code) {
    QProcess p;
    p.start(kGlimpse, args);
    if (!p.waitForFinished(240000)) {
        *code = -1;
        return "glimpse did not run to the end: " + p.errorString();
    }
    *code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    return QString::fromUtf8(p.readAllStandardError());
}

// After a kill: checkpoint (when there is one) and run log readable, the log "running" but dead.
void checkAfterKill(const std::string& dir, int64_t lastVisible, int64_t* ckptStep) {
    const std::string ckpt = dir + "/checkpoint.h5", log = dir + "/run.h5";
    *ckptStep = 0;
    if (std::filesystem::exists(ckpt)) {
        const train::TrainState st = train::loadTrainState(ckpt, "letr-train");
        *ckptStep = st.meta.at("step").get<int64_t>();
        // At most one checkpoint interval behind what readers had already seen.
        QVERIFY2(*ckptStep >= lastVisible - kInterval,
                 qPrintable(QString("checkpoint at step %1, the log showed step %2").arg(*ckptStep).arg(lastVisible)));
    }
    RunLogReader r = RunLogReader::open(log);
    QCOMPARE(r.status(), RunStatus::Running);
    QVERIFY(r.series("loss/total").size() > 0);
    const RunLiveness l = r.liveness();
    QCOMPARE(l.state, Liveness::Dead);
    QVERIFY(l.processGone);
    QVERIFY2(contains(l.description, {"stopped responding at", "the process is gone", "resume with --resume"}),
             l.description.c_str());
    // The Training panel's follower says so too.
    app::RunFollower f(QString::fromStdString(log));
    f.poll(true);
    QCOMPARE(f.status(), QString("dead"));
    QVERIFY2(f.statusMessage().contains("resume with --resume"), qPrintable(f.statusMessage()));
}

// The final log: finished, one row per step 1..steps (rows after each checkpoint were dropped).
void checkFinished(const std::string& log, int64_t steps) {
    const RunLog l = RunLog::load(log);
    QCOMPARE(l.status, RunStatus::Finished);
    const MetricSeries& s = l.series.at("loss/total");
    QCOMPARE(int64_t(s.size()), steps);
    for (int64_t i = 0; i < steps; ++i) QCOMPARE(s.steps[size_t(i)], i + 1);
    RunLogReader r = RunLogReader::open(log);
    QCOMPARE(r.liveness().state, Liveness::Ended);
}

} // namespace

class TestCrashSafety : public QObject {
    Q_OBJECT
    QTemporaryDir tmp_;

private Q_SLOTS:
    void initTestCase() { QVERIFY2(QFileInfo(kGlimpse).isExecutable(), qPrintable(kGlimpse + " is not built")); }

    // In-process: the heartbeat advances while the writer lives; the rules for dead, unknown
    // (no heartbeat: an old log) and ended logs.
    void heartbeatRules() {
        const std::string path = tmp_.filePath("hb.h5").toStdString();
        RunLogWriter::Options o;
        o.heartbeatInterval = 0.05;
        auto w = RunLogWriter::create(path, nlohmann::json::object(), {"loss"}, o);
        RunLogReader r = RunLogReader::open(path);
        QCOMPARE(r.writer().pid, int64_t(::getpid()));
        QCOMPARE(r.writer().host, localHostName());
        QCOMPARE(r.writer().heartbeatInterval, 0.05);
        const double first = r.writer().heartbeat;
        QVERIFY(first > 0);
        // Refreshed by the writer's thread although nothing is appended.
        QTRY_VERIFY_WITH_TIMEOUT((r.refresh(), r.writer().heartbeat > first), 10000);
        QCOMPARE(r.liveness().state, Liveness::Alive);
        // Silent for more than kDeadAfterIntervals intervals: dead even with the process there.
        const double later = r.writer().heartbeat + kDeadAfterIntervals * 0.05 + 1;
        const RunLiveness silent = r.liveness(later);
        QCOMPARE(silent.state, Liveness::Dead);
        QVERIFY(!silent.processGone);
        QVERIFY2(contains(silent.description, {"stopped responding at", "resume with --resume"}), silent.description.c_str());
        // Same host, a pid that does not exist: dead at once.
        RunWriterInfo gone = r.writer();
        gone.pid = 0x7ffffff0;
        QCOMPARE(judgeLiveness(RunStatus::Running, gone, gone.heartbeat, localHostName()).state, Liveness::Dead);
        // Another host: only the heartbeat counts.
        QCOMPARE(judgeLiveness(RunStatus::Running, gone, gone.heartbeat, "elsewhere").state, Liveness::Alive);
        w.finish();
        QVERIFY(r.refresh());
        QCOMPARE(r.liveness(later + 1e6).state, Liveness::Ended);
        QVERIFY(RunLog::load(path).writer.heartbeat >= r.writer().heartbeat - 1);
        // A log without writer attributes and /heartbeat (written before heartbeats existed)
        // still reads: liveness unknown.
        const std::string oldPath = tmp_.filePath("old.h5").toStdString();
        h5::File::CreateOptions co;
        co.latestFormat = true;
        h5::writeAtomically(oldPath, "glimpse.runlog", 1, [](h5::File& f) {
            f.setAttr("status", "running");
            f.setAttr("status_message", "");
            f.setAttr("config", "{}");
            f.setAttr("start_time", 1.0);
            f.createGroup("series");
        }, co);
        RunLogReader ro = RunLogReader::open(oldPath);
        QCOMPARE(ro.liveness().state, Liveness::Unknown);
        QCOMPARE(ro.writer().pid, int64_t(0));
        QVERIFY(ro.seriesNames().empty());
        QVERIFY(contains(testing::errorOf([&] {
                             RunLogWriter::Options bad;
                             bad.heartbeatInterval = 0;
                             RunLogWriter::create(tmp_.filePath("bad.h5").toStdString(), {}, {"x"}, bad);
                         }),
                         {"heartbeat interval"}));
    }

    // Killed before the first checkpoint: --resume starts cleanly from step 0 and replaces the
    // stale log.
    void resumeBeforeFirstCheckpoint() {
        const QString cfg = tmp_.filePath("early.json"), out = tmp_.filePath("early");
        writeConfig(cfg, 40, 1000);
        const QStringList args = {"train", "letr", "--config", cfg, "--data", kData, "--out", out};
        const Killed k = runAndKill(args, out.toStdString() + "/run.h5", 1);
        QVERIFY2(k.err.isEmpty(), qPrintable(k.err));
        QVERIFY(!std::filesystem::exists(out.toStdString() + "/checkpoint.h5"));
        int64_t ckptStep = -1;
        checkAfterKill(out.toStdString(), k.lastVisible, &ckptStep);
        if (QTest::currentTestFailed()) return;
        int code = -1;
        const QString err = runToEnd(args + QStringList{"--resume"}, &code);
        QVERIFY2(code == 0, qPrintable(err));
        QVERIFY2(err.contains("no checkpoint yet") && err.contains("starting from step 0"), qPrintable(err));
        checkFinished(out.toStdString() + "/run.h5", 40);
    }

    // Killed at varied moments relative to the checkpoints (once the log shows steps 3, 13 and
    // 22, with a checkpoint every 4; rows show up about once a second), resumed each time, then
    // run to the end.
    void killAndResume() {
        const QString cfg = tmp_.filePath("kill.json"), out = tmp_.filePath("kill");
        const int64_t steps = 40;
        writeConfig(cfg, steps, kInterval);
        const QStringList args = {"train", "letr", "--config", cfg, "--data", kData, "--out", out};
        const std::string dir = out.toStdString();
        int64_t expectedStart = 0;
        for (const int64_t killAt : {3, 13, 22}) {
            const Killed k = runAndKill(killAt == 3 ? args : args + QStringList{"--resume"}, dir + "/run.h5", killAt);
            QVERIFY2(k.err.isEmpty(), qPrintable(k.err));
            int64_t ckptStep = -1;
            checkAfterKill(dir, k.lastVisible, &ckptStep);
            if (QTest::currentTestFailed()) return;
            QVERIFY(ckptStep >= expectedStart);   // never goes back behind a checkpoint
            QCOMPARE(ckptStep % kInterval, int64_t(0));
            expectedStart = ckptStep;
            // The dead log still holds every row a reader saw; the resume keeps those up to the
            // checkpoint (checked at the end: one row per step).
            QVERIFY(RunLog::load(dir + "/run.h5").series.at("loss/total").steps.back() >= k.lastVisible);
        }
        int code = -1;
        const QString err = runToEnd(args + QStringList{"--resume"}, &code);
        QVERIFY2(code == 0, qPrintable(err));
        QVERIFY2(err.contains(QString("resuming at step %1").arg(expectedStart)), qPrintable(err));
        checkFinished(dir + "/run.h5", steps);
        // No temp file of a killed writer is left behind.
        for (const auto& e : std::filesystem::directory_iterator(dir))
            QVERIFY2(e.path().filename().string().find(".tmp-") == std::string::npos, e.path().c_str());
    }

    // EfficientZero accepts --resume; without a state.h5 yet it starts anew with the note.
    void efficientZeroResumeWithoutState() {
        const QString cfg = tmp_.filePath("ez.json"), out = tmp_.filePath("ez");
        std::ofstream(cfg.toStdString()) << R"({"steps": 2, "num_envs": 2, "simulations": 2, "max_episode_steps": 25,
          "batch_size": 4, "min_replay": 30, "updates_per_env_step": 1.0, "checkpoint_interval": 1, "log_interval": 1,
          "warmup_steps": 1, "network": {"channels": 4, "lstm_hidden": 8, "reduced_channels_reward": 2,
          "reduced_channels_value": 2, "reduced_channels_policy": 2, "support_size": 10, "proj_hidden": 8,
          "proj_out": 8, "pred_hidden": 4, "reward_hidden": [8], "value_hidden": [8], "policy_hidden": [8]}})";
        int code = -1;
        const QString err = runToEnd({"train", "efficientzero", "--config", cfg, "--env", "breakout", "--threads", "1",
                                      "--out", out, "--resume"},
                                     &code);
        QVERIFY2(code == 0, qPrintable(err));
        QVERIFY2(err.contains("no checkpoint yet"), qPrintable(err));
        QCOMPARE(RunLog::load(out.toStdString() + "/runlog.h5").status, RunStatus::Finished);
    }
};

QTEST_GUILESS_MAIN(TestCrashSafety)
#include "test_crash_safety.moc"
