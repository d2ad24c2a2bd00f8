// core/runlog: in-memory round trip, the SWMR writer/reader pair (writer in a forked child
// process, reader here), the final file replacing the live one, and errors.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/info.h"
#include "core/runlog.h"
#include "tests/support.h"

using namespace glimpse;

namespace {

using testing::contains;
using testing::errorOf;

// One byte through a pipe: the parent and the child take turns.
void sendByte(int fd) {
    char c = 1;
    if (::write(fd, &c, 1) != 1) std::perror("write");
}
bool waitByte(int fd) {
    char c;
    return ::read(fd, &c, 1) == 1;
}

} // namespace

class TestRunLog : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void valueRoundTrip() {
        RunLog log;
        log.config = {{"model", "letr"}, {"lr", 1e-4}};
        log.status = RunStatus::Failed;
        log.statusMessage = "loss became NaN";
        log.startTime = 1700000000.25;
        for (int i = 0; i < 3000; ++i) log.series["loss"].append(i, 0.1 * i, 1.0 / (i + 1));
        log.series["eval/sAP10"].append(1000, 100.0, 0.42);
        log.series["empty"];
        log.eval["confusion"] = torch::tensor({{5, 1}, {2, 7}});
        log.eval["pr/recall"] = torch::linspace(0, 1, 11);
        const std::string path = file("value.h5");
        log.save(path);

        const RunLog r = RunLog::load(path);
        QCOMPARE(r.config, log.config);
        QCOMPARE(r.status, RunStatus::Failed);
        QCOMPARE(r.statusMessage, log.statusMessage);
        QCOMPARE(r.startTime, log.startTime);
        QCOMPARE(r.series.size(), size_t(3));
        for (const auto& [name, s] : log.series) {
            QCOMPARE(r.series.at(name).steps, s.steps);
            QCOMPARE(r.series.at(name).wallTimes, s.wallTimes);
            QCOMPARE(r.series.at(name).values, s.values);
        }
        QCOMPARE(r.eval.size(), size_t(2));
        QVERIFY(torch::equal(r.eval.at("confusion"), log.eval.at("confusion")));
        QVERIFY(torch::equal(r.eval.at("pr/recall"), log.eval.at("pr/recall")));

        h5::File f = h5::File::open(path);
        QCOMPARE(f.attrString("kind"), std::string("glimpse.runlog"));
        QCOMPARE(f.attrString("status"), std::string("failed"));
        QCOMPARE(f.dataset("series/loss").typeDescription(),
                 std::string("compound{step: int64, wall_time: float64, value: float64}"));
        QVERIFY(f.hasDataset("series/eval/sAP10"));
    }

    void writerInProcess() {
        const std::string path = file("inproc.h5");
        {
            auto w = RunLogWriter::create(path, {{"epochs", 2}}, {"loss", "lr"});
            // A reader in the same process (the GUI following its own training job).
            RunLogReader live = RunLogReader::open(path);
            QCOMPARE(live.status(), RunStatus::Running);
            for (int i = 0; i < 10; ++i) w.append("loss", i, 10.0 - i);
            w.flush();
            QVERIFY(live.refresh());
            QCOMPARE(live.rowCount("loss"), int64_t(10));
            w.append("lr", 0, 0.1, 0.0);
            const std::string msg = errorOf([&] { w.append("accuracy", 0, 1.0); });
            QVERIFY2(contains(msg, {path, "series 'accuracy' was not declared", "declared: loss, lr"}), msg.c_str());
            w.setEval("final/table", torch::arange(6).reshape({2, 3}));
            QVERIFY(w.elapsed() >= 0);
            w.finish();
            QVERIFY(w.closed());
            const std::string again = errorOf([&] { w.finish(); });
            QVERIFY2(contains(again, {path, "already closed"}), again.c_str());
        }
        RunLogReader r = RunLogReader::open(path);
        QCOMPARE(r.status(), RunStatus::Finished);
        QCOMPARE(r.config()["epochs"], 2);
        QCOMPARE(r.seriesNames(), (std::vector<std::string>{"loss", "lr"}));
        QCOMPARE(r.rowCount("loss"), int64_t(10));
        const MetricSeries s = r.series("loss");
        QCOMPARE(s.steps.front(), int64_t(0));
        QCOMPARE(s.values.back(), 1.0);
        QVERIFY(std::is_sorted(s.wallTimes.begin(), s.wallTimes.end()));
        QCOMPARE(r.series("loss", 7).steps, (std::vector<int64_t>{7, 8, 9}));
        QCOMPARE(r.evalNames(), (std::vector<std::string>{"final/table"}));
        QVERIFY(torch::equal(r.eval("final/table"), torch::arange(6).reshape({2, 3})));
        QVERIFY(!r.refresh());
        const std::string msg = errorOf([&] { r.series("nope"); });
        QVERIFY2(contains(msg, {path, "no series 'nope'"}), msg.c_str());
        QVERIFY(QDir(dir_.path()).entryList({"inproc.h5.tmp*"}).isEmpty());
    }

    // The log of a distributed run's other ranks: rows kept, nothing written anywhere.
    void memoryOnlyWriterWritesNoFile() {
        const QStringList before = QDir(dir_.path()).entryList(QDir::Files);
        {
            RunLogWriter w = RunLogWriter::memoryOnly({{"trainer", "x"}}, {"loss"});
            QVERIFY(w.path().empty());
            w.append("loss", 1, 0.5);
            w.flush();
            w.setEval("final/acc", torch::tensor(0.9));
            QVERIFY(!w.closed());
            w.finish();
            QVERIFY(w.closed());
            QVERIFY_EXCEPTION_THROWN(w.append("loss", 2, 0.4), Error);
        }
        {
            RunLogWriter w = RunLogWriter::memoryOnly({}, {"loss"});
            QVERIFY_EXCEPTION_THROWN(w.append("nope", 1, 0.0), Error);
        }   // destroyed unfinished: marked failed, still no file
        QCOMPARE(QDir(dir_.path()).entryList(QDir::Files), before);
        QVERIFY(!QFile::exists(QDir::currentPath() + "/run.h5"));
    }

    void writerDestroyedWithoutFinishMarksFailed() {
        const std::string path = file("aborted.h5");
        {
            auto w = RunLogWriter::create(path, nlohmann::json::object(), {"loss"});
            w.append("loss", 1, 0.5);
        }
        const RunLog r = RunLog::load(path);
        QCOMPARE(r.status, RunStatus::Failed);
        QVERIFY(contains(r.statusMessage, {"without finish()"}));
        QCOMPARE(r.series.at("loss").values, std::vector<double>{0.5});

        auto w = RunLogWriter::create(path, nlohmann::json::object(), {"loss"});
        w.fail("out of memory");
        QCOMPARE(RunLog::load(path).statusMessage, std::string("out of memory"));
    }

    void stoppedRunIsNotFailed() {
        const std::string path = file("stopped.h5");
        auto w = RunLogWriter::create(path, nlohmann::json::object(), {"loss"});
        w.append("loss", 7, 0.25);
        w.stop("stopped at step 7; --resume continues from checkpoint.h5");
        const RunLog r = RunLog::load(path);
        QCOMPARE(r.status, RunStatus::Stopped);
        QCOMPARE(r.statusMessage, std::string("stopped at step 7; --resume continues from checkpoint.h5"));
        QCOMPARE(r.series.at("loss").values, std::vector<double>{0.25});
        QCOMPARE(h5::File::open(path).attrString("status"), std::string("stopped"));
        QCOMPARE(statusName(RunStatus::Stopped), std::string("stopped"));
        auto reader = RunLogReader::open(path);
        QCOMPARE(reader.status(), RunStatus::Stopped);
    }

    void badSeriesNames() {
        std::string msg = errorOf([&] { RunLogWriter::create(file("n1.h5"), {}, {"a", "a"}); });
        QVERIFY2(contains(msg, {"n1.h5", "'a' is declared twice"}), msg.c_str());
        msg = errorOf([&] { RunLogWriter::create(file("n2.h5"), {}, {"train", "train/loss"}); });
        QVERIFY2(contains(msg, {"n2.h5", "'train'", "'train/loss'", "clash"}), msg.c_str());
        msg = errorOf([&] { RunLogWriter::create(file("n3.h5"), {}, {"bad//name"}); });
        QVERIFY2(contains(msg, {"n3.h5", "invalid series name"}), msg.c_str());
        QVERIFY(!QFile::exists(dir_.filePath("n1.h5")));
    }

    void readerErrors() {
        std::string msg = errorOf([&] { RunLogReader::open(file("absent.h5")); });
        QVERIFY2(contains(msg, {"absent.h5", "does not exist"}), msg.c_str());
        const std::string other = file("other_kind.h5");
        h5::writeAtomically(other, "glimpse.trace", 1, [](h5::File&) {});
        msg = errorOf([&] { RunLogReader::open(other); });
        QVERIFY2(contains(msg, {other + " is a glimpse.trace, expected a glimpse.runlog"}), msg.c_str());
    }

    // The writer runs in a forked child (HDF5 must not share one file between writer and
    // reader); the parent follows the live file with SWMR and sees the rows grow, then the
    // final file after finish().
    void concurrentReaderSeesRowsGrow() {
        const std::string path = file("live.h5");
        int toChild[2], toParent[2];
        QVERIFY(::pipe(toChild) == 0 && ::pipe(toParent) == 0);
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        QVERIFY(pid >= 0);
        if (pid == 0) {
            ::close(toChild[1]);
            ::close(toParent[0]);
            int code = 0;
            try {
                RunLogWriter::Options opts;
                opts.flushInterval = 3600;   // flush only when told to, so the parent's counts are exact
                auto w = RunLogWriter::create(path, {{"run", "forked"}}, {"loss", "train/acc"}, opts);
                sendByte(toParent[1]);                 // created
                for (int round = 0; round < 3; ++round) {
                    if (!waitByte(toChild[0])) ::_exit(3);
                    for (int i = 0; i < 100; ++i) w.append("loss", round * 100 + i, 1.0 / (1 + round * 100 + i));
                    w.append("train/acc", round, 0.5 + 0.1 * round);
                    w.flush();
                    sendByte(toParent[1]);             // rows visible
                }
                if (!waitByte(toChild[0])) ::_exit(3);
                w.finish();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "child: %s\n", e.what());
                code = 1;
            }
            ::_exit(code);
        }
        ::close(toChild[0]);
        ::close(toParent[1]);

        QVERIFY(waitByte(toParent[0]));
        RunLogReader r = RunLogReader::open(path);
        QCOMPARE(r.status(), RunStatus::Running);
        QCOMPARE(r.config()["run"], std::string("forked"));
        QCOMPARE(r.seriesNames(), (std::vector<std::string>{"loss", "train/acc"}));
        QCOMPARE(r.rowCount("loss"), int64_t(0));
        int64_t seen = 0;
        for (int round = 0; round < 3; ++round) {
            sendByte(toChild[1]);
            QVERIFY(waitByte(toParent[0]));
            QVERIFY(r.refresh());
            QCOMPARE(r.status(), RunStatus::Running);
            QCOMPARE(r.rowCount("loss"), int64_t(100 * (round + 1)));
            QCOMPARE(r.rowCount("train/acc"), int64_t(round + 1));
            const MetricSeries fresh = r.series("loss", seen);   // only the new rows
            QCOMPARE(fresh.size(), size_t(100));
            QCOMPARE(fresh.steps.front(), int64_t(round * 100));
            QCOMPARE(fresh.values.back(), 1.0 / (100 * (round + 1)));
            seen = r.rowCount("loss");
        }
        QVERIFY(!r.refresh());   // nothing new
        // A second, independent snapshot of the live file, and `glimpse info` on it.
        QCOMPARE(RunLog::load(path).series.at("loss").size(), size_t(300));
        const std::string info = describeH5(path);
        QVERIFY2(contains(info, {"glimpse.runlog", "status = \"running\"", "loss (300 rows)", "train/acc (3 rows)"}), info.c_str());

        sendByte(toChild[1]);
        int status = 0;
        QCOMPARE(::waitpid(pid, &status, 0), pid);
        QVERIFY(WIFEXITED(status));
        QCOMPARE(WEXITSTATUS(status), 0);
        ::close(toChild[1]);
        ::close(toParent[0]);

        QVERIFY(r.refresh());   // the final file replaced the live one
        QCOMPARE(r.status(), RunStatus::Finished);
        QCOMPARE(r.rowCount("loss"), int64_t(300));
        QCOMPARE(r.series("train/acc").values, (std::vector<double>{0.5, 0.6, 0.7}));
        QVERIFY(!r.refresh());
        QVERIFY(QDir(dir_.path()).entryList({"live.h5.tmp*"}).isEmpty());
    }
};

QTEST_APPLESS_MAIN(TestRunLog)
#include "test_runlog.moc"
