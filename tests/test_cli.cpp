// The glimpse executable's headless commands, run as a user would (a separate process).
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <utility>
#include <vector>

#include <hdf5.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/eval/edge_support.h"
#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/models/letr/trace.h"
#include "core/runlog.h"
#include "core/util/threads.h"

class TestCli : public QObject {
    Q_OBJECT

    struct Result {
        int code = -1;
        QString out, err;
    };
    static Result run(const QStringList& args, const QString& exe = GLIMPSE_EXE) {
        QProcess p;
        p.start(exe, args);
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

    // OpenBLAS's kernels (chooseBlasKernels): on a CPU with AVX2, glimpse never runs with the
    // generic "Prescott" kernels that OpenBLAS 0.3.21 falls back to for CPU models it does not
    // know. OPENBLAS_VERBOSE=2 makes OpenBLAS print the kernels it loaded ("Core: X") each time
    // it loads, so the last line is the one the commands ran with.
    void blasKernels() {
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx2")) QSKIP("no AVX2: OpenBLAS's Prescott kernels are the right ones");
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove("OPENBLAS_CORETYPE");
        env.insert("OPENBLAS_VERBOSE", "2");
        p.setProcessEnvironment(env);
        p.start(GLIMPSE_EXE, {"--version"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QString all = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
        QVERIFY2(all.contains("glimpse " GLIMPSE_VERSION), qPrintable(all));
        const QStringList cores = all.split('\n').filter("Core:");
        if (cores.isEmpty()) QSKIP("the BLAS in use is not OpenBLAS");
        QVERIFY2(!cores.last().contains("Prescott"), qPrintable(all));
        // A kernel choice the user made is kept.
        env.insert("OPENBLAS_CORETYPE", "Haswell");
        p.setProcessEnvironment(env);
        p.start(GLIMPSE_EXE, {"--version"});
        QVERIFY(p.waitForFinished(60000));
        const QString mine = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
        QVERIFY2(mine.split('\n').filter("Core:").last().contains("Haswell"), qPrintable(mine));
    }

    // The thread runtimes wait without spinning (app/startup/passive_waiting.cpp): every
    // executable, this test's included, starts with OMP_WAIT_POLICY=PASSIVE and
    // OPENBLAS_THREAD_TIMEOUT=4 unless the user set them, and libgomp really uses them (its
    // spin count, printed by OMP_DISPLAY_ENV=VERBOSE, is 0 only under the passive policy).
    void runtimesWaitWithoutSpinning() {
        const QProcessEnvironment outer = QProcessEnvironment::systemEnvironment();
        if (!outer.contains("GLIMPSE_KEEP_WAITING")) {
            if (!outer.contains("OMP_WAIT_POLICY")) QCOMPARE(qgetenv("OMP_WAIT_POLICY"), QByteArray("PASSIVE"));
            if (!outer.contains("OPENBLAS_THREAD_TIMEOUT")) QCOMPARE(qgetenv("OPENBLAS_THREAD_TIMEOUT"), QByteArray("4"));
        }
        const auto display = [](const QStringList& unset, const QStringList& set) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            for (const auto& k : unset) env.remove(k);
            for (const auto& kv : set) env.insert(kv.section('=', 0, 0), kv.section('=', 1));
            env.insert("OMP_DISPLAY_ENV", "VERBOSE");
            QProcess p;
            p.setProcessEnvironment(env);
            p.start(GLIMPSE_EXE, {"--version"});
            if (!p.waitForFinished(60000)) return QString("(timed out)");
            return QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
        };
        const QStringList ours = {"OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "GLIMPSE_KEEP_WAITING"};
        QString all = display(ours, {});
        QVERIFY2(all.contains("glimpse " GLIMPSE_VERSION), qPrintable(all));
        if (!all.contains("GOMP_SPINCOUNT")) QSKIP("LibTorch's OpenMP is not libgomp");
        QVERIFY2(all.contains("GOMP_SPINCOUNT = '0'") && all.contains("OMP_WAIT_POLICY = 'PASSIVE'"), qPrintable(all));
        // The user's choice is kept, and GLIMPSE_KEEP_WAITING turns the defaults off.
        all = display(ours, {"OMP_WAIT_POLICY=ACTIVE"});
        QVERIFY2(all.contains("OMP_WAIT_POLICY = 'ACTIVE'"), qPrintable(all));
        all = display(ours, {"GLIMPSE_KEEP_WAITING=1"});
        QVERIFY2(all.contains("glimpse " GLIMPSE_VERSION) && !all.contains("GOMP_SPINCOUNT = '0'"), qPrintable(all));
    }

    // The allocator (docs/performance.md, "The allocator"): built with tcmalloc, this test and
    // glimpse use its malloc and --version says so.
    void allocator() {
        const std::string mine = glimpse::allocatorLibrary();
#ifdef GLIMPSE_TCMALLOC
        QVERIFY2(mine.find("tcmalloc") != std::string::npos, mine.c_str());
#else
        QVERIFY2(mine.find("libc") != std::string::npos, mine.c_str());
#endif
        const Result r = run({"--version"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains(QString("allocator: ") + QString::fromStdString(mine)), qPrintable(r.out));
    }

    // The headless build of the same commands (glimpse-headless; GLIMPSE_HEADLESS=ON builds it as
    // `glimpse`): the commands run, the GUI-only ones are absent and say why.
    void headlessBuild() {
        const QString exe = GLIMPSE_HEADLESS_EXE;
        Result r = run({"--help"}, exe);
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("glimpse train letr") && r.out.contains("glimpse train xtra"), qPrintable(r.out));
        QVERIFY2(r.out.contains("built headless") && !r.out.contains("start the GUI"), qPrintable(r.out));
        QVERIFY(!r.out.contains("bench ui") && !r.out.contains("bench inspector"));
        QVERIFY(run({"--help"}).out.contains("glimpse bench ui"));   // the GUI build has them
        r = run({"env", "list"}, exe);
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("breakout"));
        r = run({"bench", "ui"}, exe);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("unknown model 'ui'"), qPrintable(r.err));
        r = run({"info", "--follow", dir_.filePath("none.h5")}, exe);
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("needs a GUI build"), qPrintable(r.err));
        r = run({dir_.filePath("photo.png")}, exe);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("no GUI"), qPrintable(r.err));
    }

    // glimpse check device: without a CUDA device it says so and compares the CPU with itself
    // (every model's path runs; differences 0); asking for CUDA here is a clear error.
    void checkDeviceWithoutGpu() {
        Result r = run({"check", "device", "--size", "64", "--only", "letr,efficientzero"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("no CUDA device") && r.out.contains("comparing the CPU with itself"), qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression("letr +line endpoints \\(px\\) +0 ")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression("efficientzero +value prefix \\(1 step\\) +0 ")), qPrintable(r.out));
        QVERIFY(r.out.contains("all outputs agree"));
        r = run({"check", "device", "--device", "cuda"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("CUDA is not available"), qPrintable(r.err));
        r = run({"check", "device", "--device", "tpu"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("expected cpu, cuda or cuda:N"), qPrintable(r.err));
        r = run({"check", "device", "--only", "resnet"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--only"), qPrintable(r.err));
    }

    // glimpse play reports its search speed: every move of every episode is one search of
    // --simulations simulations.
    void playReportsSearchSpeed() {
        const QString runDir = dir_.filePath("ez_play");
        Result r = run({"train", "efficientzero", "--env", "breakout", "--steps", "1", "--min-replay", "16",
                        "--envs", "2", "--out", runDir, "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--episodes", "2",
                 "--simulations", "4", "--max-episode-steps", "10", "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto len = QRegularExpression("mean length ([0-9.]+)").match(r.out);
        const auto speed = QRegularExpression("speed: ([0-9]+) moves in ([0-9.]+) s: ([0-9.]+) moves/s, ([0-9]+) simulations/s")
                               .match(r.out);
        QVERIFY2(len.hasMatch() && speed.hasMatch(), qPrintable(r.out));
        const double moves = speed.captured(1).toDouble();
        QCOMPARE(moves, 2 * len.captured(1).toDouble());
        QVERIFY(moves >= 2 && moves <= 20);
        const double perSecond = speed.captured(3).toDouble(), sims = speed.captured(4).toDouble();
        QVERIFY(perSecond > 0);
        QVERIFY2(std::abs(sims - 4 * perSecond) <= 0.5 + 4 * 0.05, qPrintable(r.out));
        // --compare-reference: every search once more with the batch norms as layers, from the
        // same roots and random state; the folded network is float32 rounding away, so the
        // actions agree (all but near-ties) and the root values to about 1e-6.
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--episodes", "2",
                 "--simulations", "4", "--max-episode-steps", "10", "--threads", "1", "--compare-reference"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto cmp = QRegularExpression("vs reference layers: the same action in ([0-9]+) of ([0-9]+) searches "
                                            "\\([0-9.]+%\\), a most visited action of the reference's search in "
                                            "([0-9]+) \\([0-9.]+%\\); root value relative difference median "
                                            "([0-9.e+-]+), max ([0-9.e+-]+)")
                             .match(r.out);
        QVERIFY2(cmp.hasMatch(), qPrintable(r.out));
        const double same = cmp.captured(1).toDouble(), compared = cmp.captured(2).toDouble();
        const double mostVisited = cmp.captured(3).toDouble();
        QVERIFY2(compared >= 2 && compared <= 20 && same >= compared - 1, qPrintable(r.out));
        // the same action is always one the reference visited most
        QVERIFY2(mostVisited >= same && mostVisited <= compared, qPrintable(r.out));
        QVERIFY2(cmp.captured(5).toDouble() < 1e-3, qPrintable(r.out));
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--compare-reference",
                 "--reference-layers"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--compare-reference"), qPrintable(r.err));
        // --reference-checkpoint: the second search runs another file's reference layers. The same
        // file with --reference-layers is the same computation twice: every action and value equal.
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--episodes", "2",
                 "--simulations", "4", "--max-episode-steps", "10", "--threads", "1", "--compare-reference",
                 "--reference-layers", "--reference-checkpoint", runDir + "/model.h5"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto self = QRegularExpression("vs \\S+model.h5 \\(reference layers\\): the same action in ([0-9]+) of "
                                             "([0-9]+) searches .*median ([0-9.e+-]+), max ([0-9.e+-]+)")
                              .match(r.out);
        QVERIFY2(self.hasMatch(), qPrintable(r.out));
        QVERIFY2(self.captured(1) == self.captured(2) && self.captured(2).toInt() >= 2, qPrintable(r.out));
        QCOMPARE(self.captured(4).toDouble(), 0.0);
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--reference-checkpoint",
                 runDir + "/model.h5"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--reference-checkpoint"), qPrintable(r.err));
        r = run({"play", "--checkpoint", runDir + "/model.h5", "--env", "breakout", "--episodes", "1", "--compare-reference",
                 "--reference-checkpoint", dir_.filePath("no_such_agent.h5")});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("no_such_agent.h5"), qPrintable(r.err));
    }

    // The device flags of training and the bf16 autocast of the LETR bench: refused with a
    // message naming the flag where this machine cannot honour them (no CUDA here), before any
    // file is written.
    void deviceFlagsWithoutGpu() {
        const QString out = dir_.filePath("train_on_cuda");
        Result r = run({"train", "letr", "--data", "procedural:4:1:64x48", "--out", out, "--steps", "1", "--device", "cuda"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--device cuda: CUDA is not available"), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(out));
        r = run({"train", "letr", "--data", "procedural:4:1:64x48", "--out", out, "--steps", "1", "--device", "gpu"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("expected cpu, cuda or cuda:N"), qPrintable(r.err));
        // bfloat16 autocast also runs on the CPU (oneDNN); float16 needs a GPU.
        r = run({"bench", "letr", "--autocast", "fp16", "--runs", "1", "--warmup", "0", "--short-side", "64", "--threads", "1"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("autocast Half runs on a CUDA device (bfloat16 also on the CPU), not cpu"), qPrintable(r.err));
        r = run({"bench", "letr", "--autocast", "bf16", "--runs", "1", "--warmup", "0", "--short-side", "64", "--threads", "1",
                 "--backbone", "resnet18", "--queries", "20"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("autocast BFloat16"), qPrintable(r.out));
        r = run({"bench", "letr", "--autocast", "fp8"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--autocast: expected fp32, bf16 or fp16, got 'fp8'"), qPrintable(r.err));
    }

    // GUI options are parsed strictly before any window is made: a bad value is refused with
    // exit code 2 and a message naming the option (no display needed).
    void guiOptionsAreStrict() {
        const QString img = dir_.filePath("opt.png");
        QImage im(8, 8, QImage::Format_RGB888);
        im.fill(Qt::red);
        QVERIFY(im.save(img));
        const QString ck = dir_.filePath("any_checkpoint.h5");
        for (const auto& [args, opt] : std::vector<std::pair<QStringList, QString>>{
                 {{img, "--checkpoint", ck, "--run-letr", "--compare", "foo"}, "--compare"},
                 {{img, "--checkpoint", ck, "--run-letr", "--compare", "0"}, "--compare"},
                 {{img, "--checkpoint", ck, "--run-letr", "--entity", "abc"}, "--entity"},
                 {{img, "--checkpoint", ck, "--run-letr", "--entity", "-5"}, "--entity"},
                 {{img, "--run-coat", "--coat-scale", "9"}, "--coat-scale"},
                 {{img, "--run-coat", "--coat-compare", "x"}, "--coat-compare"},
                 {{img, "--run-coat", "--query", "3"}, "--query"},
                 {{img, "--run-coat", "--coat-view", "nonsense"}, "--coat-view"},
                 {{img, "--step", "-3"}, "--step"},
                 {{img, "--step", "ten"}, "--step"},
                 {{img, "--checkpoint", ck, "--run-letr", "--line-colour", "purple"}, "--line-colour"},
                 {{img, "--checkpoint", ck, "--run-letr", "--threshold", "1.5"}, "--threshold"},
                 {{img, "--checkpoint", ck, "--run-letr", "--threshold", "high"}, "--threshold"},
                 {{img, "--checkpoint", ck, "--run-letr", "--letr-input", "8"}, "--letr-input"},
                 {{img, "--checkpoint", ck, "--run-letr", "--letr-input", "big"}, "--letr-input"},
                 {{img, "--run-coat", "--precision", "bf8"}, "--precision"}}) {
            const Result r = run(args);
            QVERIFY2(r.code == 2, qPrintable(args.join(' ') + ": exit " + QString::number(r.code) + " " + r.err));
            QVERIFY2(r.err.contains(opt), qPrintable(r.err));
        }
        // A command's --help is its help, wherever it stands.
        Result r = run({"bench", "letr", "--runs", "3", "--help"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("usage: glimpse bench letr"), qPrintable(r.out + r.err));
        r = run({"train", "nope"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("unknown model 'nope'") && r.err.contains("letr, coat, efficientzero"), qPrintable(r.err));
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

    void inferLetrEndToEnd() {
        // A small random LETR on a real image: trace, overlay PNG and JSON lines come out,
        // and `glimpse info` recognises the trace.
        const QString cfg = dir_.filePath("small.json");
        QFile c(cfg);
        QVERIFY(c.open(QIODevice::WriteOnly));
        c.write(R"({"backbone": "resnet18", "hidden_dim": 64, "nheads": 4, "dim_feedforward": 128,
                   "coarse_enc_layers": 1, "coarse_dec_layers": 2, "fine_enc_layers": 1,
                   "fine_dec_layers": 2, "num_queries": 20, "short_side": 96})");
        c.close();
        const QString img = dir_.filePath("in.png");
        QImage im(160, 120, QImage::Format_RGB888);
        im.fill(Qt::white);
        for (int x = 10; x < 150; ++x) im.setPixelColor(x, 60, Qt::black);
        QVERIFY(im.save(img));
        const QString trace = dir_.filePath("trace.h5"), png = dir_.filePath("overlay.png"),
                      json = dir_.filePath("lines.json");
        Result r = run({"infer", "--model", "letr", "--random-seed", "3", "--config", cfg, "--image", img,
                        "--out", trace, "--png", png, "--json", json, "--threshold", "0", "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(QFileInfo(trace).size() > 0);
        QImage overlay(png);
        QCOMPARE(overlay.size(), QSize(160, 120));
        QFile jf(json);
        QVERIFY(jf.open(QIODevice::ReadOnly));
        // Every line has its edge support against the image, as the measure gives it.
        const QJsonArray jl = QJsonDocument::fromJson(jf.readAll()).object().value("lines").toArray();
        QCOMPARE(jl.size(), 20);
        const glimpse::eval::EdgeField field = glimpse::eval::edgeField(glimpse::loadImageRGB(img.toStdString()));
        for (const auto& v : jl) {
            const QJsonObject o = v.toObject();
            QVERIFY(o.contains("edge"));
            const double want = glimpse::eval::lineSupport(field, o["x1"].toDouble(), o["y1"].toDouble(),
                                                           o["x2"].toDouble(), o["y2"].toDouble());
            QVERIFY2(std::abs(o["edge"].toDouble() - want) < 1e-9, qPrintable(QString::number(o["edge"].toDouble())));
        }
        r = run({"info", trace});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("glimpse.trace") && r.out.contains("letr"), qPrintable(r.out));
        // --flips: the trace and the JSON say the lines are a flip ensemble's; 3 is refused.
        const QString trace2 = dir_.filePath("trace_flips.h5"), json2 = dir_.filePath("lines_flips.json");
        r = run({"infer", "--model", "letr", "--random-seed", "3", "--config", cfg, "--image", img, "--out", trace2,
                 "--json", json2, "--threshold", "0", "--flips", "2", "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(glimpse::letr::LetrTrace::load(trace2.toStdString()).flips(), 2);
        QFile jf2(json2);
        QVERIFY(jf2.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(jf2.readAll()).object().value("flips").toInt(), 2);
        r = run({"infer", "--model", "letr", "--random-seed", "3", "--config", cfg, "--image", img, "--out",
                 dir_.filePath("t4.h5"), "--flips", "3"});
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("--flips: expected 1, 2 or 4, got 3"), qPrintable(r.err));

        // Bad input: a file that is not an image, and a checkpoint of another family.
        r = run({"infer", "--model", "letr", "--random-seed", "3", "--config", cfg, "--image", cfg,
                 "--out", dir_.filePath("t2.h5")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("small.json"), qPrintable(r.err));
        torch::nn::Linear lin(3, 2);
        const QString other = dir_.filePath("other.h5");
        glimpse::saveCheckpoint(other.toStdString(), glimpse::checkpointFromModule(*lin, "coat", "{}"));
        r = run({"infer", "--model", "letr", "--checkpoint", other, "--image", img, "--out", dir_.filePath("t3.h5")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("coat") && r.err.contains("other.h5"), qPrintable(r.err));
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
        Result r = run({"info", path, "--tensors"});
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

    // `glimpse info` on a file that is not HDF5 says what it is and which command opens it; on a
    // checkpoint it prints a summary (family, parameters, size, architecture, classes, the
    // training from the run log beside it) and lists the tensors only with --tensors.
    void infoSummarizes() {
        const QString img = dir_.filePath("building.jpg");
        QImage im(40, 30, QImage::Format_RGB888);
        im.fill(Qt::gray);
        QVERIFY(im.save(img));
        Result r = run({"info", img});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("an image (jpg, 40x30") && r.out.contains("glimpse " + img) &&
                     r.out.contains("glimpse infer --model"),
                 qPrintable(r.out));

        const QString runDir = dir_.filePath("run_info");
        QVERIFY(QDir().mkpath(runDir));
        const QString ck = runDir + "/model.h5";
        torch::nn::Linear lin(3, 2);   // 8 parameters
        const nlohmann::json cfg = {{"backbone", "resnet10"}, {"hidden_dim", 96}, {"num_queries", 60},
                                    {"coarse_queries", "anchors"}, {"class_names", {"wall", "floor"}}, {"dropout", 0.0}};
        glimpse::saveCheckpoint(ck.toStdString(), glimpse::checkpointFromModule(*lin, "letr", cfg.dump()));
        r = run({"info", ck});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("LETR checkpoint: 8 parameters in 2 tensors"), qPrintable(r.out));
        QVERIFY2(r.out.contains("architecture: backbone resnet10, hidden_dim 96, num_queries 60, coarse_queries anchors\n"), qPrintable(r.out));
        QVERIFY2(r.out.contains("classes: 2 (wall, floor)"), qPrintable(r.out));
        QVERIFY2(r.out.contains("training: not recorded"), qPrintable(r.out));
        QVERIFY2(r.out.indexOf("architecture:") < r.out.indexOf("config = "), qPrintable(r.out));   // summary first
        QVERIFY2(!r.out.contains("float32 [2,3]") && r.out.contains("--tensors lists them"), qPrintable(r.out));
        r = run({"info", "--tensors", ck});
        QVERIFY2(r.code == 0 && r.out.contains("float32 [2,3]"), qPrintable(r.out + r.err));

        // The run log beside it (the folder `glimpse train` wrote): status, steps, data, metrics.
        glimpse::RunLog log;
        log.config = {{"data", "procedural:100"}};
        log.series["loss"].append(1, 0.1, 2.0);
        log.series["loss"].append(250, 9.0, 1.0);
        log.series["val/sAP10"].append(200, 8.0, 0.124);
        log.eval["final/val_acc"] = torch::tensor(0.876, torch::kDouble);
        log.status = glimpse::RunStatus::Finished;
        log.save((runDir + "/run.h5").toStdString());
        r = run({"info", ck});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("training (" + runDir + "/run.h5): finished at step 250, data procedural:100"),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains("metrics: final/val_acc 0.876, val/sAP10 0.124 (step 200)"), qPrintable(r.out));
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

    // `glimpse check file`: one JSON line per file, kind and family of a Glimpse file, the error
    // (naming the file) of a foreign or unreadable one; exit 1 when any file fails.
    void checkFileReportsKindOrError() {
        torch::nn::Linear lin(3, 2);
        const QString ck = dir_.filePath("check_ck.h5");
        glimpse::saveCheckpoint(ck.toStdString(), glimpse::checkpointFromModule(*lin, "coat", "{\"in\": 3}"));
        Result r = run({"check", "file", ck});
        QCOMPARE(r.code, 0);
        QJsonObject o = QJsonDocument::fromJson(r.out.trimmed().toUtf8()).object();
        QCOMPARE(o.value("file").toString(), ck);
        QCOMPARE(o.value("kind").toString(), QString("glimpse.checkpoint"));
        QCOMPARE(o.value("family").toString(), QString("coat"));
        QVERIFY(o.value("format_version").toInt() >= 1);
        QVERIFY(!o.contains("error"));

        const QString foreign = dir_.filePath("check_foreign.h5");
        const hid_t f = H5Fcreate(foreign.toUtf8().constData(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        QVERIFY(f >= 0);
        H5Fclose(f);
        r = run({"check", "file", ck, foreign});
        QCOMPARE(r.code, 1);
        const QStringList lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 2);
        QCOMPARE(QJsonDocument::fromJson(lines[0].toUtf8()).object().value("kind").toString(),
                 QString("glimpse.checkpoint"));
        o = QJsonDocument::fromJson(lines[1].toUtf8()).object();
        QVERIFY2(o.value("error").toString().contains("check_foreign.h5") &&
                     o.value("error").toString().contains("not a Glimpse file"),
                 qPrintable(lines[1]));

        r = run({"check", "file"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("usage"));
    }

    // Files that crash or hang libhdf5 1.10.8 (fuzz/known_hdf5_crashes/): `glimpse info` and
    // `glimpse check file` read them in a child process and report them, naming the file, with
    // exit 1, instead of dying with SIGSEGV or reading for minutes.
    void readersSurviveFilesThatBreakHdf5() {
        const QString dir = QStringLiteral(GLIMPSE_SOURCE_DIR "/fuzz/known_hdf5_crashes/");
        const QString crash = dir + "h5hg-read-memcpy-overlap.h5", hang = dir + "h5hg-protect-slow.h5";
        Result r = run({"info", crash});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("h5hg-read-memcpy-overlap.h5: the HDF5 library crashed (SIG") &&
                     r.err.contains("the file is damaged"),
                 qPrintable(r.err));
        r = run({"info", "--timeout", "2", hang});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("h5hg-protect-slow.h5: did not finish reading the file within 2 s"), qPrintable(r.err));
        r = run({"check", "file", "--timeout", "2", crash, hang});
        QCOMPARE(r.code, 1);
        const QStringList lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 2);
        QVERIFY2(QJsonDocument::fromJson(lines[0].toUtf8()).object().value("error").toString().contains("crashed"),
                 qPrintable(lines[0]));
        QVERIFY2(QJsonDocument::fromJson(lines[1].toUtf8()).object().value("error").toString().contains("did not finish"),
                 qPrintable(lines[1]));
        r = run({"info", "--timeout", "0", crash});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--timeout"), qPrintable(r.err));
    }

    // Damaged files whose variable-length string attributes declare gigabytes (fuzz finding 15):
    // libhdf5 allocates what they declare (5 GB, and 2 GB plus its conversion buffers), so an opener
    // would take the machine's memory. `check file` reads every string attribute under a 1 GiB
    // limit and refuses them, naming the attribute, within the default time limit.
    void checkFileRefusesStringsThatDeclareGigabytes() {
#if defined(__SANITIZE_ADDRESS__)
        QSKIP("the check's memory limit (RLIMIT_AS) does not bound AddressSanitizer's allocator");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
        QSKIP("the check's memory limit (RLIMIT_AS) does not bound AddressSanitizer's allocator");
#endif
#endif
        const QString dir = QStringLiteral(GLIMPSE_SOURCE_DIR "/fuzz/known_hdf5_crashes/");
        const Result r = run({"check", "file", dir + "h5t-conv-vlen-5gb-root-string.h5", dir + "h5t-conv-vlen-group-string.h5"});
        QCOMPARE(r.code, 1);
        const QStringList lines = r.out.trimmed().split('\n');
        QCOMPARE(lines.size(), 2);
        const QString first = QJsonDocument::fromJson(lines[0].toUtf8()).object().value("error").toString();
        QVERIFY2(first.contains("h5t-conv-vlen-5gb-root-string.h5") && first.contains("attribute 'env'") &&
                     first.contains("more than 1 GiB of memory"),
                 qPrintable(first));
        const QString second = QJsonDocument::fromJson(lines[1].toUtf8()).object().value("error").toString();
        QVERIFY2(second.contains("group '/model'") && second.contains("attribute 'family'") &&
                     second.contains("more than 1 GiB of memory"),
                 qPrintable(second));
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
