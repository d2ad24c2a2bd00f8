// M-LSD tiny (core/models/mlsd): the network and post-processing against an independent
// functional-torch M-LSD (installer/mlsd_reference.py, random weights) converted by
// installer/convert_mlsd.py, the converter's refusals, the config, the input, and the decoder
// on a hand-made map. Python parts are skipped when Debian's /usr/bin/python3 has no torch.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/models/mlsd/model.h"
#include "core/trace.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::mlsd;
using testing::maxDiff;

namespace {

template <typename F>
QString errorOf(F&& f) { return testing::qErrorOf(std::forward<F>(f)); }

struct Proc {
    int code = -1;
    QString out, err;
};

Proc runPython(const QStringList& args) {
    Proc r;
    const QByteArray env = qgetenv("GLIMPSE_PYTHON");
    const QString python = env.isEmpty() ? QString("/usr/bin/python3") : QString::fromLocal8Bit(env);
    if (!QFile::exists(python)) {
        r.code = -2;
        r.err = python + " does not exist";
        return r;
    }
    QProcess p;
    p.start(python, args);
    if (!p.waitForStarted(10000) || !p.waitForFinished(180000)) {
        p.kill();
        p.waitForFinished();
        r.code = -2;
        r.err = "cannot run " + python;
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

constexpr int kNoTorch = 3;
#define RUN_PYTHON_OR_SKIP(result, args)                                                            \
    result = runPython(args);                                                                       \
    if (result.code == kNoTorch || result.code == -2)                                               \
        QSKIP(qPrintable("no PyTorch reference (" + result.err.trimmed() + ")"));

QString script(const char* name) { return QString(GLIMPSE_SOURCE_DIR) + "/installer/" + name; }

torch::Tensor linesTensor(const std::vector<eval::ScoredLine>& lines) {
    torch::Tensor t = torch::zeros({int64_t(lines.size()), 4}, torch::kDouble);
    for (size_t i = 0; i < lines.size(); ++i) {
        const auto& l = lines[i];
        t[int64_t(i)] = torch::tensor({double(l.x1), double(l.y1), double(l.x2), double(l.y2)}, torch::kDouble);
    }
    return t;
}

torch::Tensor scoresTensor(const std::vector<eval::ScoredLine>& lines) {
    torch::Tensor t = torch::zeros({int64_t(lines.size())}, torch::kDouble);
    for (size_t i = 0; i < lines.size(); ++i) t[int64_t(i)] = double(lines[i].score);
    return t;
}

} // namespace

class TestMlsd : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    // The reference fixture and the converter's output for all its files, made once (each Python
    // process imports torch: seconds on a busy machine).
    QString fx_;
    Proc convert_;
    nlohmann::json cfg_;
    bool python_ = false;
    QString pythonSkip_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        fx_ = dir_.filePath("ref");
        Proc r = runPython({script("mlsd_reference.py"), "--out-dir", fx_, "--seed", "1"});
        if (r.code == kNoTorch || r.code == -2) {
            pythonSkip_ = "no PyTorch reference (" + r.err.trimmed() + ")";
            return;
        }
        QVERIFY2(r.code == 0, qPrintable(r.err));
        std::ifstream cf((fx_ + "/config.json").toStdString());
        cfg_ = nlohmann::json::parse(cf);
        QStringList args{script("convert_mlsd.py")};
        for (const char* n : {"tiny", "broken", "large", "training", "module", "letr", "none"})
            args << fx_ + "/" + n + ".pth";
        args << "--out" << fx_ + "/conv" << "--input-size" << "64" << "--top-k" << QString::number(cfg_["top_k"].get<int>())
             << "--score-threshold" << QString::number(cfg_["score_threshold"].get<double>(), 'g', 17)
             << "--length-threshold" << QString::number(cfg_["length_threshold"].get<double>(), 'g', 17);
        convert_ = runPython(args);
        python_ = true;
    }

    // The parameter names and shapes are the PyTorch port's (252 tensors, num_batches_tracked
    // int64), and an S x S input gives [1, 9, S/2, S/2].
    void layoutAndShapes() {
        MlsdTiny net;
        net->eval();
        const Checkpoint c = checkpointFromModule(*net, "mlsd", MlsdConfig().toJsonString());
        QCOMPARE(c.tensors.size(), size_t(252));
        QVERIFY(c.tensors.count("backbone.features.0.0.weight"));
        QCOMPARE(c.tensors.at("backbone.features.0.0.weight").sizes().vec(), (std::vector<int64_t>{32, 4, 3, 3}));
        QCOMPARE(c.tensors.at("backbone.features.1.conv.0.0.weight").sizes().vec(), (std::vector<int64_t>{32, 1, 3, 3}));
        QCOMPARE(c.tensors.at("backbone.features.10.conv.2.weight").sizes().vec(), (std::vector<int64_t>{64, 384, 1, 1}));
        QCOMPARE(c.tensors.at("block16.conv3.weight").sizes().vec(), (std::vector<int64_t>{16, 64, 1, 1}));
        QCOMPARE(c.tensors.at("block12.conv1.1.num_batches_tracked").scalar_type(), torch::kInt64);
        torch::NoGradGuard ng;
        const auto f = net->encode(torch::zeros({1, 4, 96, 64}));
        QCOMPARE(f.c2.sizes().vec(), (std::vector<int64_t>{1, 24, 24, 16}));
        QCOMPARE(f.c3.sizes().vec(), (std::vector<int64_t>{1, 32, 12, 8}));
        QCOMPARE(f.c4.sizes().vec(), (std::vector<int64_t>{1, 64, 6, 4}));
        QCOMPARE(net->forward(torch::zeros({1, 4, 64, 64})).sizes().vec(), (std::vector<int64_t>{1, 9, 32, 32}));
        QVERIFY(errorOf([&] { net->forward(torch::zeros({1, 3, 64, 64})); }).contains("[B, 4, H, W]"));
        QVERIFY(errorOf([&] { net->forward(torch::zeros({1, 4, 60, 64})); }).contains("multiples of 32"));
    }

    void config() {
        const MlsdConfig d;
        QCOMPARE(d.inputSize, int64_t(512));
        QCOMPARE(d.topK, int64_t(200));
        QCOMPARE(d.mapSize(), int64_t(256));
        const MlsdConfig back = MlsdConfig::fromJsonString(
            R"({"input_size": 320, "top_k": 50, "nms_kernel": 5, "score_threshold": 0.2, "length_threshold": 8})", "c");
        QCOMPARE(back.inputSize, int64_t(320));
        QCOMPARE(back.nmsKernel, int64_t(5));
        QCOMPARE(MlsdConfig::fromJson(back.toJson()).toJsonString(), back.toJsonString());
        QVERIFY(errorOf([] { MlsdConfig::fromJsonString(R"({"top-k": 3})", "x.json"); }).contains("unknown M-LSD config key 'top-k'"));
        QVERIFY(errorOf([] { MlsdConfig::fromJsonString(R"({"input_size": 500})", "x.json"); }).contains("multiple of 32"));
        QVERIFY(errorOf([] { MlsdConfig::fromJsonString(R"({"nms_kernel": 4})", "x.json"); }).contains("odd"));
        QVERIFY(errorOf([] { MlsdConfig::fromJsonString(R"({"variant": "large"})", "x.json"); }).contains("not implemented"));
        QVERIFY(errorOf([] { MlsdConfig::fromJsonString(R"({"score_threshold": "a"})", "x.json"); }).contains("x.json"));
    }

    // RGB resized with area interpolation, a constant fourth channel, v / 127.5 - 1.
    void input() {
        const cv::Mat img = testing::randomImage(48, 80, 3);
        const torch::Tensor x = mlsdInput(img, 32);
        QCOMPARE(x.sizes().vec(), (std::vector<int64_t>{1, 4, 32, 32}));
        cv::Mat small;
        cv::resize(img, small, cv::Size(32, 32), 0, 0, cv::INTER_AREA);
        for (const auto& [y, xx] : {std::pair{0, 0}, std::pair{5, 17}, std::pair{31, 31}})
            for (int c = 0; c < 3; ++c)
                QCOMPARE(x[0][c][y][xx].item<float>(), float(small.at<cv::Vec3b>(y, xx)[c]) / 127.5f - 1.0f);
        QVERIFY((x[0][3] == (1.0f / 127.5f - 1.0f)).all().item<bool>());
        QVERIFY(x.min().item<float>() >= -1.0f && x.max().item<float>() <= 1.0f);
        QVERIFY(errorOf([] { mlsdInput(cv::Mat(), 64); }).contains("empty"));
        QVERIFY(errorOf([] { mlsdInput(cv::Mat(40, 40, CV_8UC1, cv::Scalar(3)), 64); }).contains("RGB"));
    }

    // A hand-made map: two peaks with known displacements, one below the score threshold, one
    // too short, a neighbour suppressed by the max pool; coordinates x2 and scaled to the image.
    void decodeHandMadeMap() {
        MlsdConfig c;
        c.inputSize = 32;   // 16 x 16 maps
        c.topK = 10;
        c.scoreThreshold = 0.1;
        c.lengthThreshold = 3.0;
        torch::Tensor m = torch::full({1, 9, 16, 16}, -10.0f);
        m.slice(1, 1, 5).fill_(0.0f);
        auto put = [&](int y, int x, float logit, std::array<float, 4> d) {
            m[0][0][y][x] = logit;
            for (int k = 0; k < 4; ++k) m[0][1 + k][y][x] = d[size_t(k)];
        };
        put(4, 5, 2.0f, {-3.0f, 0.0f, 3.0f, 0.5f});     // score 0.881, length 6.02: kept
        put(4, 6, 1.5f, {-3.0f, 0.0f, 3.0f, 0.0f});     // beside a stronger peak: suppressed
        put(10, 10, 0.5f, {0.0f, -2.0f, 0.0f, 2.0f});   // score 0.62, length 4: kept, second
        put(12, 3, 3.0f, {0.0f, 0.0f, 1.0f, 1.0f});     // length 1.41: dropped
        put(14, 14, -2.5f, {-4.0f, 0.0f, 4.0f, 0.0f});  // score 0.076: dropped
        const auto lines = decodeLines(m, c, 64, 32);   // image 64 x 32: x * 4, y * 2
        QCOMPARE(lines.size(), size_t(2));
        QCOMPARE(lines[0].x1, (5.0f - 3.0f) * 4);
        QCOMPARE(lines[0].y1, 4.0f * 2);
        QCOMPARE(lines[0].x2, (5.0f + 3.0f) * 4);
        QCOMPARE(lines[0].y2, 4.5f * 2);
        QCOMPARE(lines[0].score, 1.0f / (1.0f + std::exp(-2.0f)));
        QCOMPARE(lines[1].x1, 40.0f);
        QCOMPARE(lines[1].y1, 16.0f);
        QCOMPARE(lines[1].y2, 24.0f);
        c.topK = 2;   // the two best centres: (12, 3) too short, (4, 5)
        QCOMPARE(decodeLines(m, c, 64, 32).size(), size_t(1));
        c.lengthThreshold = 6.1;
        c.topK = 10;
        QCOMPARE(decodeLines(m, c, 64, 32).size(), size_t(0));
        QVERIFY(errorOf([&] { decodeLines(torch::zeros({2, 9, 4, 4}), c, 4, 4); }).contains("[1, 9, h, w]"));
    }

    // The reference M-LSD (functional torch, random weights and batch-norm statistics) through
    // the converter: the same maps, the same lines (endpoints within 1e-3 px, scores within
    // 1e-5) for the image as it is and scaled to another image size.
    void parityWithReference() {
        if (!python_) QSKIP(qPrintable(pythonSkip_));
        const QString fx = fx_;
        const nlohmann::json& cfg = cfg_;
        const QString out = fx + "/conv/tiny.h5";
        QVERIFY2(convert_.out.contains("tiny.pth") && QFile::exists(out), qPrintable(convert_.out + convert_.err));
        const auto model = loadMlsd(out.toStdString());
        QCOMPARE(model->config.inputSize, int64_t(64));
        QCOMPARE(model->config.scoreThreshold, cfg["score_threshold"].get<double>());
        const Trace ref = Trace::load((fx + "/ref.h5").toStdString());
        const cv::Mat img = loadImageRGB((fx + "/image.png").toStdString());
        const torch::Tensor x = mlsdInput(img, 64);
        QCOMPARE(maxDiff(x, ref.get("input", {1, 4, 64, 64})), 0.0);
        torch::NoGradGuard ng;
        const torch::Tensor maps = model->net->forward(x);
        const double dm = maxDiff(maps, ref.get("maps", {1, 9, 32, 32}));
        qInfo("maps: max abs difference %.3g (scale %.3g)", dm, ref.get("maps").abs().max().item<double>());
        QVERIFY2(dm <= 1e-4, qPrintable(QString::number(dm)));
        const auto lines = detectMlsd(*model, img);
        const torch::Tensor refLines = ref.get("lines", {-1, 4});
        QCOMPARE(int64_t(lines.size()), refLines.size(0));
        QVERIFY(lines.size() >= 3);
        const double dl = maxDiff(linesTensor(lines), refLines);
        const double ds = maxDiff(scoresTensor(lines), ref.get("scores"));
        qInfo("%zu lines: endpoints within %.3g px, scores within %.3g", lines.size(), dl, ds);
        QVERIFY2(dl <= 1e-3, qPrintable(QString::number(dl)));
        QVERIFY2(ds <= 1e-5, qPrintable(QString::number(ds)));
        for (size_t i = 1; i < lines.size(); ++i) QVERIFY(lines[i - 1].score >= lines[i].score);
        // The same maps decoded for another image size.
        const nlohmann::json meta = ref.meta();
        const auto wide = decodeLines(maps, model->config, meta["width"].get<int>(), meta["height"].get<int>());
        const double dw = maxDiff(linesTensor(wide), ref.get("lines_wide", {int64_t(lines.size()), 4}));
        QVERIFY2(dw <= 1e-3, qPrintable(QString::number(dw)));
    }

    // Anything but M-LSD tiny's state dict is refused with a message saying what it is; nothing
    // is written.
    void converterRefusals() {
        if (!python_) QSKIP(qPrintable(pythonSkip_));
        const QString fx = fx_;
        QCOMPARE(convert_.code, 1);   // some inputs refused, the others converted
        const std::vector<std::pair<QString, QStringList>> cases{
            {"broken", {"broken.pth", "missing block16.conv3.bias", "unknown extra.weight",
                        "wrong shape block13.conv1.0.weight"}},
            {"large", {"large.pth", "M-LSD large", "tiny only"}},
            {"training", {"training.pth", "training code", "3-channel stem"}},
            {"module", {"module.pth", "pickled Conv2d module", "not a state dict"}},
            {"letr", {"letr.pth", "LETR checkpoint", "convert_letr.py"}},
        };
        // One message per refused file, each naming it.
        const QStringList messages = convert_.err.split("convert_mlsd.py: ", Qt::SkipEmptyParts);
        for (const auto& [name, words] : cases) {
            QString message;
            for (const QString& m : messages)
                if (m.contains(name + ".pth")) message = m;
            for (const QString& w : words) QVERIFY2(message.contains(w), qPrintable(name + ": " + convert_.err));
            QVERIFY(!QFile::exists(fx + "/conv/" + name + ".h5"));
        }
        QVERIFY2(convert_.err.contains("none.pth: no such file"), qPrintable(convert_.err));
        // A bad option is refused before torch is imported (exit 2).
        const Proc r = runPython({script("convert_mlsd.py"), fx + "/tiny.pth", "--out", fx + "/x.h5", "--input-size", "500"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("multiple of 32"), qPrintable(r.err));
        // Glimpse itself refuses the .pth with the command that converts it, and a checkpoint of
        // another family.
        QVERIFY(errorOf([&] { loadMlsd((fx + "/tiny.pth").toStdString()); }).contains("convert_mlsd.py"));
        Checkpoint other;
        other.family = "letr";
        other.configJson = "{}";
        other.tensors["w"] = torch::zeros({2});
        const std::string otherPath = (fx + "/other.h5").toStdString();
        saveCheckpoint(otherPath, other);
        const QString e = errorOf([&] { loadMlsd(otherPath); });
        QVERIFY2(e.contains("other.h5") && e.contains("'mlsd'"), qPrintable(e));
    }
};

QTEST_APPLESS_MAIN(TestMlsd)
#include "test_mlsd.moc"
