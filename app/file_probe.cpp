#include "app/file_probe.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTimer>

#include <memory>

#include "app/async.h"

namespace glimpse::app {

FileProbe::FileProbe(QObject* parent) : QObject(parent), program_(defaultProgram()) {}

QString FileProbe::defaultProgram() {
    const QString self = QCoreApplication::applicationFilePath();
    const QString name = QFileInfo(self).fileName();
    if (name == QLatin1String("glimpse")) return self;
    const QString env = qEnvironmentVariable("GLIMPSE_PROBE_PROGRAM");
    return QFileInfo(env).isExecutable() ? env : QString();
}

ProbeResult parseProbeLine(const QByteArray& line) {
    ProbeResult r;
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(line.trimmed(), &err);
    if (err.error != QJsonParseError::NoError || !doc.isObject()) {
        r.error = QStringLiteral("unexpected answer from the file check: '%1'").arg(QString::fromUtf8(line.trimmed()));
        return r;
    }
    const QJsonObject o = doc.object();
    if (o.contains("error")) {
        r.error = o.value("error").toString();
        if (r.error.isEmpty()) r.error = QStringLiteral("%1: unreadable").arg(o.value("file").toString());
        return r;
    }
    r.kind.kind = o.value("kind").toString().toStdString();
    r.kind.formatVersion = o.value("format_version").toInteger();
    r.kind.family = o.value("family").toString().toStdString();
    if (r.kind.kind.empty()) r.error = QStringLiteral("%1: the file check named no kind").arg(o.value("file").toString());
    return r;
}

void FileProbe::probeInProcess(const QString& path, std::function<void(const ProbeResult&)> done) {
    runAsync(
        this, [p = path.toStdString()] { return identifyGlimpseFile(p); },
        [done = std::move(done)](Outcome<FileKind> o) { done(ProbeResult{o.value, o.error}); });
}

void FileProbe::probe(const QString& path, std::function<void(const ProbeResult&)> done) {
    if (program_.isEmpty()) return probeInProcess(path, std::move(done));
    auto* proc = new QProcess(this);
    auto* timer = new QTimer(proc);
    timer->setSingleShot(true);
    // Exactly one answer per probe, whichever of finished / failed to start / timeout comes
    // first. The process object goes once the child is reaped (finished follows a kill too).
    auto answered = std::make_shared<bool>(false);
    auto answer = [answered, done](const ProbeResult& r) {
        if (*answered) return;
        *answered = true;
        done(r);
    };
    connect(timer, &QTimer::timeout, proc, [proc, path, answer, ms = timeoutMs_] {
        proc->kill();
        answer({{},
                QStringLiteral("%1: reading the file's HDF5 structure did not finish within %2 s (the HDF5 library "
                               "is stuck on it): the file is damaged; nothing was opened")
                    .arg(path)
                    .arg(ms / 1000.0, 0, 'g', 3)});
    });
    connect(proc, &QProcess::finished, proc, [proc, path, answer, timer](int code, QProcess::ExitStatus status) {
        timer->stop();
        proc->deleteLater();
        if (status == QProcess::CrashExit)
            return answer({{},
                           QStringLiteral("%1: the HDF5 library crashed reading the file's structure (in a checking "
                                          "process; Glimpse is unaffected): the file is damaged; nothing was opened")
                               .arg(path)});
        const QByteArray out = proc->readAllStandardOutput();
        const QByteArray line = out.left(out.indexOf('\n'));
        ProbeResult r = parseProbeLine(line.isEmpty() ? out : line);
        if (r.ok() && code != 0)
            r.error = QStringLiteral("%1: the file check failed (exit %2): %3")
                          .arg(path)
                          .arg(code)
                          .arg(QString::fromUtf8(proc->readAllStandardError()).trimmed());
        answer(r);
    });
    connect(proc, &QProcess::errorOccurred, proc, [this, proc, path, answer, timer](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart) return;   // crashes and kills arrive through finished
        timer->stop();
        proc->deleteLater();
        // The checker is missing (e.g. a moved executable): identify here, off the UI thread.
        probeInProcess(path, [answer](const ProbeResult& r) { answer(r); });
    });
    proc->setProgram(program_);
    proc->setArguments({QStringLiteral("check"), QStringLiteral("file"), path});
    proc->setProcessChannelMode(QProcess::SeparateChannels);
    timer->start(timeoutMs_);
    proc->start(QIODevice::ReadOnly);
}

} // namespace glimpse::app
