// The glimpse executable's headless commands, run as a user would (a separate process).
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <hdf5.h>
#include <torch/torch.h>

#include "core/io/checkpoint.h"

class TestCli : public QObject {
    Q_OBJECT

    struct Result {
        int code = -1;
        QString out, err;
    };
    static Result run(const QStringList& args) {
        QProcess p;
        p.start(GLIMPSE_EXE, args);
        if (!p.waitForFinished(120000)) return {};
        Result r;
        r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }

    QTemporaryDir dir_;

private Q_SLOTS:
    void helpAndVersion() {
        Result r = run({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("glimpse info"));
        r = run({"--version"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.startsWith("glimpse " GLIMPSE_VERSION));
        r = run({"frobnicate"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("unknown command 'frobnicate'"));
    }

    void envCommands() {
        Result r = run({"env", "list"});
        QCOMPARE(r.code, 0);
        const QStringList names = r.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(names.size(), 8);
        QVERIFY(names.contains("invaders") && names.contains("painter"));
        r = run({"env", "score", "--episodes", "0"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--episodes"), qPrintable(r.err));
        r = run({"env", "score", "--episodes", "2"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("breakout"), qPrintable(r.out));
    }

    void infoUsageAndErrors() {
        Result r = run({"info"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("usage"));

        const QString missing = dir_.filePath("nope.h5");
        r = run({"info", missing});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("nope.h5"), qPrintable(r.err));

        const QString text = dir_.filePath("text.h5");
        QFile f(text);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("plain text, not HDF5\n");
        f.close();
        r = run({"info", text});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("text.h5"), qPrintable(r.err));
    }

    void infoDescribesCheckpoint() {
        torch::nn::Linear lin(3, 2);
        glimpse::Checkpoint ck = glimpse::checkpointFromModule(*lin, "test", "{\"in\": 3}");
        const QString path = dir_.filePath("ck.h5");
        glimpse::saveCheckpoint(path.toStdString(), ck);
        Result r = run({"info", path});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("glimpse.checkpoint"), qPrintable(r.out));
        QVERIFY2(r.out.contains("weight"), qPrintable(r.out));
        QVERIFY2(r.out.contains("float32 [2,3]"), qPrintable(r.out));

        // Truncated copy: clear error, non-zero exit, no crash.
        QFile src(path);
        QVERIFY(src.open(QIODevice::ReadOnly));
        const QByteArray bytes = src.readAll();
        const QString cut = dir_.filePath("cut.h5");
        QFile dst(cut);
        QVERIFY(dst.open(QIODevice::WriteOnly));
        dst.write(bytes.left(bytes.size() / 2));
        dst.close();
        r = run({"info", cut});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("cut.h5"), qPrintable(r.err));
    }

    void infoFlagsForeignHdf5() {
        const QString path = dir_.filePath("foreign.h5");
        hid_t f = H5Fcreate(path.toUtf8().constData(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        QVERIFY(f >= 0);
        hsize_t dims[1] = {4};
        hid_t space = H5Screate_simple(1, dims, nullptr);
        hid_t ds = H5Dcreate2(f, "numbers", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        float v[4] = {1, 2, 3, 4};
        H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(ds);
        H5Sclose(space);
        H5Fclose(f);
        Result r = run({"info", path});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("not a Glimpse file"), qPrintable(r.out));
        QVERIFY2(r.out.contains("numbers"), qPrintable(r.out));
    }
};

QTEST_APPLESS_MAIN(TestCli)
#include "test_cli.moc"
