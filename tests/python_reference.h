// Running Debian's /usr/bin/python3 (or $GLIMPSE_PYTHON) on the installer's reference and
// converter scripts, for the parity tests of the checkpoint converters. A script exits with
// kNoTorch when torch cannot be imported; RUN_PYTHON_OR_SKIP then skips the test function.
#pragma once

#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QtTest>

namespace glimpse::testing {

inline QString pythonExe() {
    const QByteArray env = qgetenv("GLIMPSE_PYTHON");
    return env.isEmpty() ? QString("/usr/bin/python3") : QString::fromLocal8Bit(env);
}

struct Proc {
    int code = -1;
    QString out, err;
};

inline Proc runPython(const QStringList& args, int timeoutMs = 180000) {
    Proc r;
    const QString python = pythonExe();
    if (!QFile::exists(python)) {
        r.code = -2;
        r.err = python + " does not exist";
        return r;
    }
    QProcess p;
    p.start(python, args);
    if (!p.waitForStarted(10000)) {
        r.code = -2;
        r.err = "cannot start " + python;
        return r;
    }
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        r.err = "timed out";
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

constexpr int kNoTorch = 3;

inline QString installerScript(const char* name) {
    return QString(GLIMPSE_SOURCE_DIR) + "/installer/" + name;
}

}  // namespace glimpse::testing

#define RUN_PYTHON_OR_SKIP(result, args)                                                            \
    result = glimpse::testing::runPython(args);                                                     \
    if (result.code == glimpse::testing::kNoTorch || result.code == -2)                             \
        QSKIP(qPrintable("no PyTorch reference (" + result.err.trimmed() + ")"));
