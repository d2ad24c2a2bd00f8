#pragma once
// A training run on a worker thread (never the UI thread), steered with train::Control
// (pause / stop) and reporting progress through queued signals. Owned by the main window, so
// a run goes on when the Training panel is closed. The trainer itself is a Runner (the LETR
// one calls letr::trainLetr), so tests can drive the job with a small trainer of their own.
#include <QObject>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/train/control.h"

namespace glimpse::app {

struct TrainingSpec {
    QString configPath;   // trainer config JSON ("" = the trainer's defaults)
    QString dataSpec;     // dataset spec (core/data/open.h)
    QString outDir;       // run directory: run.h5, checkpoint.h5, model.h5
    bool resume = false;  // continue from outDir's checkpoint
    QString model = "letr";   // which trainer (a family name, app/family.h: "letr", "coat", "efficientzero")
};

class TrainingJob : public QObject {
    Q_OBJECT
public:
    // Runs the training; throws on failure (the message is reported by finished()).
    using Runner = std::function<void(const TrainingSpec&, train::Control&, const train::ProgressFn&)>;

    explicit TrainingJob(Runner runner, QObject* parent = nullptr);
    // Stops a running job (the trainer writes its final checkpoint) and waits for it.
    ~TrainingJob() override;

    bool available() const { return bool(runner_); }
    // Starts the worker; false (with *error) when one is running or no trainer is available.
    bool start(const TrainingSpec& spec, QString* error = nullptr);
    void setPaused(bool paused);
    void stop();
    bool running() const { return running_; }
    bool paused() const;
    const TrainingSpec& spec() const { return spec_; }
    QString runLogPath() const;   // outDir/run.h5 (outDir/runlog.h5 for efficientzero)
    train::Progress lastProgress() const;

Q_SIGNALS:
    void started();
    void progressed(qint64 step, qint64 total, double eta, const QString& phase);
    void pausedChanged(bool paused);
    // ok = the trainer returned (finished or stopped); message = the error otherwise.
    void finished(bool ok, const QString& message);

private:
    Runner runner_;
    TrainingSpec spec_;
    std::shared_ptr<train::Control> control_;
    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<bool> progressQueued_{false};
    mutable std::mutex mutex_;
    train::Progress last_;
};

} // namespace glimpse::app
