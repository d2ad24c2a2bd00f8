#pragma once
// Identifying an .h5 file before the GUI opens it, in a child process.
//
// libhdf5 1.10 crashes or loops on some damaged files (a corrupt global heap behind a variable-
// length string, a corrupt attribute or datatype message: docs/fuzzing.md finding 8), below any
// call Glimpse could check first. The GUI therefore never touches an .h5 file it has not seen a
// child process read: `glimpse check file PATH` walks the file's whole structure (as `glimpse
// info` does) and prints its kind. A crash or a hang of that child becomes a message naming the
// file; the GUI stays up and responsive, and nothing is opened.
#include <QObject>
#include <QString>

#include <functional>

#include "core/file_kind.h"

namespace glimpse::app {

struct ProbeResult {
    FileKind kind;
    QString error;   // empty: `kind` is valid
    bool ok() const { return error.isEmpty(); }
};

class FileProbe : public QObject {
    Q_OBJECT
public:
    explicit FileProbe(QObject* parent = nullptr);

    // The program that runs `check file`: this executable when it is glimpse, else
    // $GLIMPSE_PROBE_PROGRAM (tests), else none (then probe() identifies on a worker thread in
    // this process: the UI still never waits, but a crash in libhdf5 is not contained).
    static QString defaultProgram();
    void setProgram(const QString& program) { program_ = program; }
    QString program() const { return program_; }
    // How long the child may read before the file counts as one that hangs libhdf5.
    void setTimeoutMs(int ms) { timeoutMs_ = ms; }
    int timeoutMs() const { return timeoutMs_; }

    // Identifies `path` off the UI thread; `done` runs on this object's thread (not at all
    // when this object is destroyed first).
    void probe(const QString& path, std::function<void(const ProbeResult&)> done);

private:
    void probeInProcess(const QString& path, std::function<void(const ProbeResult&)> done);

    QString program_;
    int timeoutMs_ = 20000;
};

// Parses one line of `glimpse check file` output (JSON: file, kind, format_version, family or
// error). Exposed for tests.
ProbeResult parseProbeLine(const QByteArray& line);

} // namespace glimpse::app
