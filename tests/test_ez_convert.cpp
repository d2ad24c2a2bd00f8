// EfficientZero checkpoints against the official network (issue 52 part 0): an official-layout
// state dict written by installer/efficientzero_reference.py (a torch.nn network laid out as
// the official code's, random weights and BatchNorm statistics) converts with
// installer/convert_efficientzero.py, loads, and gives the Python network's outputs (initial and
// recurrent inference); other files are refused with clear messages; checkpoints written before
// the heads' 1x1 convolutions had biases still load, with zero biases. The Python parts skip
// when Debian's /usr/bin/python3 has no torch.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <set>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/trace.h"
#include "tests/python_reference.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::efficientzero;
using testing::maxDiff;

namespace {

using testing::Proc;
using testing::runPython;
QString script(const char* name) { return testing::installerScript(name); }

// Relative difference, against the reference's scale.
double relDiff(const torch::Tensor& a, const torch::Tensor& b) {
    return maxDiff(a, b) / std::max(1e-6, b.abs().max().item<double>());
}

Config smallGridConfig() {
    Config c = Config::grid(2, 5, 5, 3);
    c.stack = 2;
    c.channels = 8;
    c.lstmHidden = 8;
    c.supportSize = 4;
    c.reducedChannelsReward = c.reducedChannelsValue = c.reducedChannelsPolicy = 4;
    c.rewardHidden = c.valueHidden = c.policyHidden = {8};
    c.projHidden = c.projOut = 16;
    c.predHidden = 8;
    c.validate();
    return c;
}

} // namespace

class TestEzConvert : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        torch::set_num_threads(1);
    }

    // The heads' 1x1 convolutions have biases, as the official network's.
    void headConvolutionsHaveBiases() {
        Network net(smallGridConfig());
        std::set<std::string> names;
        for (const auto& p : net.module().named_parameters()) names.insert(p.key());
        for (const char* n : {"dynamics_network.conv1x1_reward.bias", "prediction_network.conv1x1_value.bias",
                              "prediction_network.conv1x1_policy.bias"})
            QVERIFY2(names.count(n), n);
        QVERIFY(!names.count("dynamics_network.conv.bias"));   // the 3x3 convolutions have none
    }

    // An official state dict converts, loads and reproduces the Python network's outputs.
    void officialStateDictMatchesPython() {
        const QString fx = dir_.filePath("ref");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("efficientzero_reference.py"), "--out-dir", fx, "--seed", "3"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        r = runPython({script("convert_efficientzero.py"), in("official.p"), "--out", in("official.h5"), "--obs-size",
                       "32x32"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("reward_resblocks") && r.out.contains("conv2"), qPrintable(r.out));
        torch::NoGradGuard ng;
        Network net = loadNetwork(in("official.h5").toStdString());
        const Config& c = net.config();
        QCOMPARE(c.numActions, 4);
        QCOMPARE(c.stack, 2);
        QCOMPARE(c.obsChannels, 3);
        QVERIFY(c.downsample);
        QCOMPARE(c.supportSize, 5);
        QCOMPARE(c.reducedChannelsPolicy, 6);
        QVERIFY(!net.isTraining());
        const Trace ref = Trace::load(in("reference.h5").toStdString());
        const torch::Tensor obs = ref.get("input", {2, 6, 32, 32});
        const InitialOutput init = net.initialInference(obs);
        const double ds = relDiff(init.state, ref.get("state", {2, 8, 2, 2}));
        const double dv = relDiff(init.valueLogits, ref.get("value_logits", {2, 11}));
        const double dp = relDiff(init.policyLogits, ref.get("policy_logits", {2, 4}));
        const torch::Tensor actions = ref.get("actions", {2}).to(torch::kLong);
        const RecurrentOutput rec = net.recurrentInference(init.state, actions, net.initialLstm(2));
        const double dn = relDiff(rec.nextState, ref.get("next_state", {2, 8, 2, 2}));
        const double dr = relDiff(rec.valuePrefixLogits, ref.get("value_prefix_logits", {2, 11}));
        const double dv2 = relDiff(rec.valueLogits, ref.get("next_value_logits", {2, 11}));
        const double dp2 = relDiff(rec.policyLogits, ref.get("next_policy_logits", {2, 4}));
        const double dh = relDiff(rec.lstm.first, ref.get("lstm_h", {1, 2, 16}));
        const double dc = relDiff(rec.lstm.second, ref.get("lstm_c", {1, 2, 16}));
        qInfo("official vs Glimpse, max relative differences: state %.2g value %.2g policy %.2g | next state %.2g "
              "value prefix %.2g value %.2g policy %.2g lstm %.2g %.2g",
              ds, dv, dp, dn, dr, dv2, dp2, dh, dc);
        for (double d : {ds, dv, dp, dn, dr, dv2, dp2, dh, dc}) QVERIFY2(d < 1e-4, qPrintable(QString::number(d)));
        // The reference's biases are not zero: the outputs above depend on them.
        QVERIFY(loadCheckpoint(in("official.h5").toStdString()).tensors.at("prediction_network.conv1x1_value.bias")
                    .abs().max().item<float>() > 0.01f);

        // Wrapped under 'model' with 'module.' prefixes: the same tensors.
        r = runPython({script("convert_efficientzero.py"), in("wrapped.p"), "--out", in("wrapped.h5"), "--obs-size",
                       "32x32"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const Checkpoint a = loadCheckpoint(in("official.h5").toStdString());
        const Checkpoint b = loadCheckpoint(in("wrapped.h5").toStdString());
        QCOMPARE(a.tensors.size(), b.tensors.size());
        for (const auto& [name, t] : a.tensors) QVERIFY2(torch::equal(t, b.tensors.at(name)), name.c_str());
    }

    // Anything else is refused, naming the file and the problem; nothing is written.
    void otherFilesRefused() {
        const QString fx = dir_.filePath("bad");
        Proc r;
        RUN_PYTHON_OR_SKIP(r, (QStringList{script("efficientzero_reference.py"), "--out-dir", fx, "--seed", "1"}));
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto in = [&](const QString& name) { return fx + "/" + name; };
        struct Case {
            const char* file;
            QStringList words;
        };
        const Case cases[] = {
            {"not_ez.p", {"not_ez.p", "not an official EfficientZero state dict"}},
            {"missing.p", {"missing.p", "missing prediction_network.fc_value.3.weight"}},
            {"twins.p", {"twins.p", "downsample_net.conv2.weight differs"}},
            {"reference.h5", {"reference.h5", "cannot read as a PyTorch checkpoint"}},
        };
        for (const Case& c : cases) {
            const QString out = in(QString(c.file) + ".out.h5");
            r = runPython({script("convert_efficientzero.py"), in(c.file), "--out", out, "--obs-size", "32x32"});
            QCOMPARE(r.code, 1);
            for (const QString& w : c.words) QVERIFY2(r.err.contains(w), qPrintable(c.file + (": " + r.err)));
            QVERIFY(!QFile::exists(out));
        }
        // The wrong observation size: the LSTM's input says so.
        r = runPython({script("convert_efficientzero.py"), in("official.p"), "--out", in("o.h5")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("--obs-size") && r.err.contains("96x96"), qPrintable(r.err));
        r = runPython({script("convert_efficientzero.py"), in("official.p"), "--out", in("o.h5"), "--obs-size", "32"});
        QCOMPARE(r.code, 2);
    }

    // Checkpoints written before the heads' convolutions had biases load with zero biases and
    // compute what they computed; any other missing tensor is still refused by name.
    void oldCheckpointsLoadWithZeroBiases() {
        torch::manual_seed(5);
        Network net(smallGridConfig());
        {
            torch::NoGradGuard g;
            for (auto& p : net.parameters()) p.add_(torch::randn_like(p) * 0.3);
        }
        net.train(false);
        Checkpoint ck = checkpointFromModule(net.module(), "efficientzero", net.config().toJson().dump());
        for (const char* n : {"dynamics_network.conv1x1_reward.bias", "prediction_network.conv1x1_value.bias",
                              "prediction_network.conv1x1_policy.bias"})
            QCOMPARE(int(ck.tensors.erase(n)), 1);
        const std::string old = dir_.filePath("old.h5").toStdString();
        saveCheckpoint(old, ck);
        {   // The network that checkpoint stood for: the same weights, zero head biases.
            torch::NoGradGuard g;
            for (auto& p : net.module().named_parameters())
                if (p.key().find("conv1x1_") != std::string::npos && p.key().size() > 5 &&
                    p.key().compare(p.key().size() - 5, 5, ".bias") == 0)
                    p.value().zero_();
        }
        torch::NoGradGuard ng;
        Network loaded = loadNetwork(old);
        const torch::Tensor obs = torch::rand({2, 4, 5, 5});
        const InitialOutput a = net.initialInference(obs), b = loaded.initialInference(obs);
        QVERIFY(torch::equal(a.valueLogits, b.valueLogits));
        QVERIFY(torch::equal(a.policyLogits, b.policyLogits));
        const torch::Tensor act = torch::tensor({0, 2}, torch::kLong);
        const RecurrentOutput ra = net.recurrentInference(a.state, act, net.initialLstm(2));
        const RecurrentOutput rb = loaded.recurrentInference(b.state, act, loaded.initialLstm(2));
        QVERIFY(torch::equal(ra.valuePrefixLogits, rb.valuePrefixLogits));

        ck.tensors.erase("prediction_network.fc_value.0.weight");
        const std::string broken = dir_.filePath("broken.h5").toStdString();
        saveCheckpoint(broken, ck);
        const QString e = testing::qErrorOf([&] { loadNetwork(broken); });
        QVERIFY2(e.contains("broken.h5") && e.contains("missing prediction_network.fc_value.0.weight") &&
                     !e.contains("conv1x1_value.bias"),
                 qPrintable(e));
    }
};

QTEST_APPLESS_MAIN(TestEzConvert)
#include "test_ez_convert.moc"
