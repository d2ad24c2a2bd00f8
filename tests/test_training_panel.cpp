// app/training: the Training panel following run logs (finished ones overlaid; a live one
// written by another process; one written by a TrainingJob's worker thread), the job's
// start / pause / stop / resume, and the model preview. Offscreen platform.
#include <QPen>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "app/training/training_job.h"
#include "app/training/training_panel.h"
#include "core/models/letr/model.h"
#include "core/runlog.h"
#include "widgets/live_chart.h"

using namespace glimpse;
using glimpse::app::TrainingJob;
using glimpse::app::TrainingPanel;
using glimpse::app::TrainingSpec;

namespace {

void sendByte(int fd) {
    char c = 1;
    if (::write(fd, &c, 1) != 1) std::perror("write");
}
bool waitByte(int fd) {
    char c;
    return ::read(fd, &c, 1) == 1;
}

int points(TrainingPanel& p, const char* series, int run) {
    auto* c = p.charts()->chart(series);
    return c ? c->pointCount(run) : 0;
}

} // namespace

class TestTrainingPanel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const QString& name) const { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void overlaysFinishedRuns() {
        for (int k = 0; k < 2; ++k) {
            RunLog log;
            log.status = RunStatus::Finished;
            for (int i = 0; i < 10 + 5 * k; ++i) {
                log.series["loss/total"].append(i * 10, i, 2.0 / (i + 1 + k));
                log.series["lr"].append(i * 10, i, 1e-4);
            }
            log.save(file(QStringLiteral("run%1.h5").arg(k)));
        }
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY2(panel.openRun(dir_.filePath("run0.h5"), &err), qPrintable(err));
        QVERIFY2(panel.openRun(dir_.filePath("run1.h5"), &err), qPrintable(err));
        QCOMPARE(panel.runCount(), 2);
        QCOMPARE(panel.runStatus(0), QString("finished"));
        QCOMPARE(panel.charts()->seriesNames(), QStringList({"loss/total", "lr"}));
        QCOMPARE(points(panel, "loss/total", 0), 10);
        QCOMPARE(points(panel, "loss/total", 1), 15);
        auto* c = panel.charts()->chart("loss/total");
        QCOMPARE(c->lastPoint(1), QPointF(140, 2.0 / 16));
        QVERIFY(c->runLabel(0) != c->runLabel(1));
        QVERIFY(c->runPen(0).style() != c->runPen(1).style());
        // Polling a finished log adds nothing.
        panel.pollNow();
        QCOMPARE(points(panel, "loss/total", 0), 10);
        panel.closeRuns();
        QCOMPARE(panel.runCount(), 0);
        QCOMPARE(points(panel, "loss/total", 0), 0);
    }

    void openRunErrorsNameTheFile() {
        TrainingPanel panel(nullptr);
        QString err;
        QVERIFY(!panel.openRun(dir_.filePath("missing.h5"), &err));
        QVERIFY2(err.contains("missing.h5"), qPrintable(err));
        std::ofstream(file("text.h5")) << "not hdf5";
        QVERIFY(!panel.openRun(dir_.filePath("text.h5"), &err));
        QVERIFY2(err.contains("text.h5"), qPrintable(err));
        QCOMPARE(panel.runCount(), 0);
    }

    void followsALiveRunFromAnotherProcess() {
        const std::string path = file("live.h5");
        int toChild[2], toParent[2];
        QVERIFY(::pipe(toChild) == 0 && ::pipe(toParent) == 0);
        const pid_t pid = ::fork();
        QVERIFY(pid >= 0);
        if (pid == 0) {
            int rc = 0;
            try {
                auto w = RunLogWriter::create(path, {{"model", "letr"}}, {"loss/total", "lr"});
                for (int i = 0; i < 5; ++i) w.append("loss/total", i, 1.0 / (i + 1));
                w.flush();
                sendByte(toParent[1]);
                waitByte(toChild[0]);
                for (int i = 5; i < 12; ++i) w.append("loss/total", i, 1.0 / (i + 1));
                w.append("lr", 11, 1e-4);
                w.flush();
                sendByte(toParent[1]);
                waitByte(toChild[0]);
                w.finish();
            } catch (...) {
                rc = 1;
            }
            sendByte(toParent[1]);
            ::_exit(rc);
        }
        TrainingPanel panel(nullptr);
        QVERIFY(waitByte(toParent[0]));
        QString err;
        QVERIFY2(panel.openRun(QString::fromStdString(path), &err), qPrintable(err));
        QCOMPARE(panel.runStatus(0), QString("running"));
        QCOMPARE(points(panel, "loss/total", 0), 5);
        QCOMPARE(points(panel, "lr", 0), 0);

        sendByte(toChild[1]);
        QVERIFY(waitByte(toParent[0]));
        QSignalSpy polled(&panel, &TrainingPanel::polled);
        panel.pollNow();
        QCOMPARE(polled.count(), 1);
        QCOMPARE(polled.first().first().toBool(), true);
        QCOMPARE(points(panel, "loss/total", 0), 12);
        QCOMPARE(points(panel, "lr", 0), 1);
        QCOMPARE(panel.charts()->chart("loss/total")->lastPoint(0), QPointF(11, 1.0 / 12));

        sendByte(toChild[1]);
        QVERIFY(waitByte(toParent[0]));
        int status = 0;
        QCOMPARE(::waitpid(pid, &status, 0), pid);
        QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        panel.pollNow();   // the final file replaced the live one
        QCOMPARE(panel.runStatus(0), QString("finished"));
        QCOMPARE(points(panel, "loss/total", 0), 12);
    }

    void jobTrainsOnAWorkerThreadAndPlotsLive() {
        QSemaphore gate;
        std::atomic<bool> sawStop{false}, sawResume{false};
        std::atomic<bool> onUiThread{false};
        const auto uiThread = std::this_thread::get_id();
        auto runner = [&](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
            onUiThread = std::this_thread::get_id() == uiThread;
            auto w = RunLogWriter::create(QDir(spec.outDir).filePath("run.h5").toStdString(),
                                          {{"data", spec.dataSpec.toStdString()}}, {"loss/total", "lr"});
            const int n = spec.resume ? 3 : 5;
            if (spec.resume) sawResume = true;
            for (int i = 0; i < n; ++i) {
                w.append("loss/total", i, 1.0 / (i + 1));
                w.append("lr", i, 1e-4);
                train::Progress p;
                p.step = i + 1;
                p.totalSteps = 10;
                p.phase = "coarse";
                p.eta = 90;
                progress(p);
            }
            w.flush();
            if (!spec.resume) {
                gate.tryAcquire(1, 60000);         // the test looks at the live plot here
                if (!control.checkpoint()) sawStop = true;   // paused, then stopped
            }
            w.finish();
        };
        TrainingJob job(runner);
        TrainingPanel panel(&job);
        panel.setDataSpec("procedural:10");
        panel.setOutDir(dir_.filePath("job"));
        QVERIFY(panel.startButton()->isEnabled());
        QVERIFY(!panel.stopButton()->isEnabled());

        QSignalSpy finished(&job, &TrainingJob::finished);
        panel.startButton()->click();
        QVERIFY(job.running());
        QVERIFY(!panel.startButton()->isEnabled());
        QVERIFY(panel.stopButton()->isEnabled());
        QVERIFY(QTest::qWaitFor([&] {
            panel.pollNow();
            return points(panel, "loss/total", 0) == 5;
        }, 20000));
        QCOMPARE(panel.runStatus(0), QString("running"));
        QVERIFY(!onUiThread);
        QVERIFY(QTest::qWaitFor([&] { return panel.progressValue() == 500; }, 20000));
        QVERIFY2(panel.progressText().contains("step 5 / 10") && panel.progressText().contains("ETA 1 min 30 s"),
                 qPrintable(panel.progressText()));

        panel.pauseButton()->click();
        QVERIFY(job.paused());
        gate.release();
        panel.stopButton()->click();
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.first().at(0).toBool(), true);
        QVERIFY(sawStop);
        QVERIFY(!job.running());
        QVERIFY(panel.startButton()->isEnabled());
        QCOMPARE(panel.runStatus(0), QString("finished"));

        // Resume: the job's run is followed again from its first row.
        panel.resumeButton()->click();
        QVERIFY(finished.wait(20000));
        QVERIFY(sawResume);
        panel.pollNow();
        QCOMPARE(panel.runCount(), 1);
        QCOMPARE(points(panel, "loss/total", 0), 3);

        // A trainer error reaches the panel.
        TrainingJob failing([](const TrainingSpec&, train::Control&, const train::ProgressFn&) {
            throw std::runtime_error("dataset procedural:x: bad count");
        });
        TrainingPanel p2(&failing);
        p2.setOutDir(dir_.filePath("fail"));
        QSignalSpy errors(&p2, &TrainingPanel::errorOccurred);
        QSignalSpy f2(&failing, &TrainingJob::finished);
        p2.startButton()->click();
        QVERIFY(f2.wait(20000));
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.first().first().toString().contains("bad count"));

        // No trainer: Start is disabled; no output directory: refused.
        TrainingJob none(TrainingJob::Runner{});
        TrainingPanel p3(&none);
        QVERIFY(!p3.startButton()->isEnabled());
        QString err;
        QVERIFY(!none.start(TrainingSpec{}, &err));
        QVERIFY(!err.isEmpty());
    }

    void previewDrawsTheLatestModel() {
        letr::LetrConfig c;
        c.backbone = "resnet18";
        c.hiddenDim = 32;
        c.nheads = 2;
        c.dimFeedforward = 64;
        c.coarseEncLayers = c.coarseDecLayers = c.fineEncLayers = c.fineDecLayers = 1;
        c.numQueries = 8;
        c.shortSide = 64;
        QDir().mkpath(dir_.filePath("prev"));
        RunLog log;
        log.save(file("prev/run.h5"));
        TrainingPanel panel(nullptr);
        QVERIFY(panel.openRun(dir_.filePath("prev/run.h5")));
        QSignalSpy updated(&panel, &TrainingPanel::previewUpdated);
        panel.refreshPreview();   // no model yet: a message, no image
        QVERIFY(updated.wait(20000));
        QVERIFY(panel.previewImage().isNull());
        letr::LetrModel model(c, 1);
        letr::saveLetr(model, file("prev/model.h5"));
        panel.refreshPreview();
        QVERIFY(updated.wait(20000));
        QCOMPARE(panel.previewImage().size(), QSize(320, 240));
    }
};

QTEST_MAIN(TestTrainingPanel)
#include "test_training_panel.moc"
