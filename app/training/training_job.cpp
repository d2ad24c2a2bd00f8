#include "app/training/training_job.h"

#include "app/family.h"

#include <QDir>
#include <QMetaObject>

namespace glimpse::app {

TrainingJob::TrainingJob(Runner runner, QObject* parent) : QObject(parent), runner_(std::move(runner)) {}

TrainingJob::~TrainingJob() {
    if (thread_.joinable()) {
        control_->requestStop();
        control_->setPaused(false);
        thread_.join();
    }
}

bool TrainingJob::start(const TrainingSpec& spec, QString* error) {
    auto fail = [&](const QString& m) {
        if (error) *error = m;
        return false;
    };
    if (!runner_) return fail("Training is not available in this build.");
    if (running_) return fail("A training run is already going; stop it first.");
    if (spec.outDir.isEmpty()) return fail("Choose an output directory for the run.");
    if (thread_.joinable()) thread_.join();   // the previous run has ended
    spec_ = spec;
    control_ = std::make_shared<train::Control>();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        last_ = {};
    }
    running_ = true;
    Q_EMIT started();
    auto control = control_;
    thread_ = std::thread([this, spec, control] {
        auto progress = [this](const train::Progress& p) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                last_ = p;
            }
            // Coalesced: at most one update is queued for the UI thread at a time, and it
            // shows the latest progress when it is delivered (none is lost at the end).
            if (progressQueued_.exchange(true)) return;
            QMetaObject::invokeMethod(this, [this] {
                progressQueued_ = false;
                const train::Progress q = lastProgress();
                Q_EMIT progressed(q.step, q.totalSteps, q.eta, QString::fromStdString(q.phase));
            }, Qt::QueuedConnection);
        };
        bool ok = true;
        QString message;
        try {
            runner_(spec, *control, progress);
        } catch (const std::exception& e) {
            ok = false;
            message = QString::fromStdString(e.what());
        } catch (...) {
            ok = false;
            message = "unknown error in the trainer";
        }
        QMetaObject::invokeMethod(this, [this, ok, message] {
            if (thread_.joinable()) thread_.join();
            running_ = false;
            Q_EMIT finished(ok, message);
        }, Qt::QueuedConnection);
    });
    return true;
}

void TrainingJob::setPaused(bool paused) {
    if (!running_ || !control_ || control_->paused() == paused) return;
    control_->setPaused(paused);
    Q_EMIT pausedChanged(paused);
}

void TrainingJob::stop() {
    if (!running_ || !control_) return;
    control_->requestStop();
    if (control_->paused()) {
        control_->setPaused(false);
        Q_EMIT pausedChanged(false);
    }
}

bool TrainingJob::paused() const { return running_ && control_ && control_->paused(); }

QString TrainingJob::runLogPath() const {
    const ModelFamily* f = findFamily(spec_.model.toStdString());
    return QDir(spec_.outDir).filePath(f ? f->training.runLogName : QStringLiteral("run.h5"));
}

train::Progress TrainingJob::lastProgress() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_;
}

} // namespace glimpse::app
