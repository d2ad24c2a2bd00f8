// EfficientZero training end to end on a tiny network (core/models/efficientzero/train.h):
// a short run writes RunLog and checkpoints, resuming continues counters and the log,
// Control stops it, evaluation records readable episodes, and bad input gives clear errors.
#include <QtTest>

#include <csignal>
#include <sys/types.h>

#include <fstream>

#include <filesystem>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/train.h"
#include "core/rl/episode.h"
#include "core/runlog.h"
#include "core/util/timing.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::efficientzero;
using glimpse::testing::contains;
using glimpse::testing::errorOf;

namespace {

TrainConfig tiny(int64_t steps) {
    TrainConfig c;
    c.env = "breakout";
    c.steps = steps;
    c.numEnvs = 2;
    c.simulations = 2;
    c.maxEpisodeSteps = 25;
    c.batchSize = 4;
    c.minReplay = 30;
    c.updatesPerEnvStep = 1.0;
    c.checkpointInterval = 3;
    c.logInterval = 1;
    c.warmupSteps = 2;
    c.network = {{"channels", 4},       {"lstm_hidden", 8},  {"reduced_channels_reward", 2},
                 {"reduced_channels_value", 2}, {"reduced_channels_policy", 2}, {"support_size", 10},
                 {"proj_hidden", 8},    {"proj_out", 8},     {"pred_hidden", 4},
                 {"reward_hidden", {8}}, {"value_hidden", {8}}, {"policy_hidden", {8}}};
    return c;
}

} // namespace

class TestEzTrain : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const std::string& n) { return dir_.path().toStdString() + "/" + n; }
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    void shortRunWritesLogAndCheckpoints() {
        const double cpu0 = glimpse::processCpuSeconds();
        const auto r = trainAgent(tiny(6), path("run"));
        const double cpu = glimpse::processCpuSeconds() - cpu0;
        QCOMPARE(r.updates, int64_t(6));
        // Where the CPU time went: every part of the loop, in order, adding up to (at most) the
        // call's own CPU time; the search, the loss and its backward pass all cost something.
        QCOMPARE(int(r.cpuSeconds.size()), 7);
        const std::vector<std::string> parts = {"search", "environment", "targets", "forward", "backward", "optimizer", "other"};
        double sum = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
            QCOMPARE(r.cpuSeconds[i].first, parts[i]);
            QVERIFY(r.cpuSeconds[i].second >= 0);
            sum += r.cpuSeconds[i].second;
        }
        QVERIFY2(sum <= cpu + 1e-3 && sum >= 0.5 * cpu, qPrintable(QString("%1 of %2 s").arg(sum).arg(cpu)));
        for (size_t i : {0, 3, 4}) QVERIFY2(r.cpuSeconds[i].second > 0, r.cpuSeconds[i].first.c_str());
        const std::string text = cpuBreakdownText(r.cpuSeconds);
        QVERIFY2(text.rfind("search ", 0) == 0 && text.find(", other ") != std::string::npos, text.c_str());
        QVERIFY(r.envSteps >= 30);
        QVERIFY(r.episodes >= 1);
        const RunLog log = RunLog::load(path("run/runlog.h5"));
        QCOMPARE(log.status, RunStatus::Finished);
        QCOMPARE(log.eval.at("cpu_seconds/backward").item<double>(), r.cpuSeconds[4].second);
        QCOMPARE(int(log.series.at("loss").size()), 6);
        QCOMPARE(log.series.at("loss").steps.back(), int64_t(6));
        QVERIFY(log.series.at("episode_return").size() >= 1);
        QVERIFY(log.series.at("replay_size").values.back() >= 30);
        QCOMPARE(log.config.at("env").get<std::string>(), std::string("breakout"));
        for (double v : log.series.at("loss").values) QVERIFY(std::isfinite(v) && v > 0);
        // model.h5 loads for the game it was trained on.
        auto env = rl::makeEnv("breakout");
        Network net = loadForEnv(path("run/model.h5"), *env);
        QCOMPARE(net.config().numActions, 4);
        QCOMPARE(net.config().channels, 4);
    }

    // What `glimpse play` loads is the learner's network: model.h5 holds the same parameters and
    // BatchNorm running statistics as state.h5's learner, and a network saved and loaded gives
    // bit-identical eval-mode outputs (representation, prediction, dynamics, value prefix) and
    // plays identical evaluation episodes.
    void checkpointRoundTripKeepsOutputs() {
        auto env = rl::makeEnv("breakout");
        Network fromModel = loadForEnv(path("run/model.h5"), *env);
        QVERIFY(!fromModel.isTraining());
        auto state = h5::File::open(path("run/state.h5"));
        auto learner = state.group("network");
        int buffers = 0, trainedStats = 0;
        for (const auto& p : fromModel.module().named_parameters(true))
            QVERIFY2(torch::equal(p.value(), learner.readTensor("p/" + p.key())), p.key().c_str());
        for (const auto& b : fromModel.module().named_buffers(true)) {
            QVERIFY2(torch::equal(b.value(), learner.readTensor("b/" + b.key())), b.key().c_str());
            ++buffers;
            if (b.key().find("running_var") != std::string::npos && !torch::allclose(b.value(), torch::ones_like(b.value())))
                ++trainedStats;
        }
        QVERIFY(buffers > 0);
        QVERIFY2(trainedStats > 0, "the 6 updates moved the BatchNorm running statistics");
        state.close();

        // A live network with trained BatchNorm statistics, saved as trainAgent saves model.h5.
        torch::manual_seed(3);
        Network live(cpuNetwork(*env, tiny(1).network));
        const auto& c = live.config();
        const torch::Tensor obs = (torch::rand({6, c.inputChannels(), c.obsHeight, c.obsWidth}) < 0.2).to(torch::kFloat);
        const torch::Tensor actions = torch::tensor({0, 1, 2, 3, 1, 2}, torch::kLong);
        live.train(true);
        for (int i = 0; i < 5; ++i) {
            const torch::Tensor x = (torch::rand_like(obs) < 0.3).to(torch::kFloat);
            auto out = live.initialInference(x);
            live.recurrentInference(out.state, actions, live.initialLstm(6));
        }
        live.train(false);
        torch::NoGradGuard ng;
        const auto a = live.initialInference(obs);
        const auto ar = live.recurrentInference(a.state, actions, live.initialLstm(6));
        saveCheckpoint(path("live.h5"), checkpointFromModule(live.module(), "efficientzero", c.toJson().dump()));
        Network loaded = loadForEnv(path("live.h5"), *env);
        const auto b = loaded.initialInference(obs);
        const auto br = loaded.recurrentInference(b.state, actions, loaded.initialLstm(6));
        QVERIFY(torch::equal(a.state, b.state));
        QVERIFY(torch::equal(a.valueLogits, b.valueLogits));
        QVERIFY(torch::equal(a.policyLogits, b.policyLogits));
        QVERIFY(torch::equal(ar.nextState, br.nextState));
        QVERIFY(torch::equal(ar.valuePrefixLogits, br.valuePrefixLogits));
        QVERIFY(torch::equal(ar.valueLogits, br.valueLogits));
        // ... and the eval-mode outputs depend on those statistics (a fresh network differs).
        Network fresh(c);
        fresh.train(false);
        QVERIFY(!torch::equal(fresh.initialInference(obs).state, a.state));
        EvalOptions o;
        o.episodes = 2;
        o.simulations = 3;
        o.env.maxEpisodeSteps = 20;
        const auto ea = evaluate(live, "breakout", o), eb = evaluate(loaded, "breakout", o);
        QCOMPARE(ea.returns, eb.returns);
        QCOMPARE(ea.lengths, eb.lengths);
    }

    void resumeContinues() {
        const auto before = RunLog::load(path("run/runlog.h5"));
        auto state = h5::File::open(path("run/state.h5"));
        QCOMPARE(state.attrInt("updates"), int64_t(6));
        const int64_t envBefore = state.attrInt("env_steps");
        const torch::Tensor momentum = state.readTensor("optimizer");
        state.close();
        QVERIFY(momentum.numel() > 0);
        const auto r = trainAgent(tiny(9), path("run"));
        QCOMPARE(r.updates, int64_t(9));
        QVERIFY(r.envSteps > envBefore);
        const RunLog log = RunLog::load(path("run/runlog.h5"));
        const auto& loss = log.series.at("loss");
        QCOMPARE(int(loss.size()), 9);
        for (int i = 0; i < 9; ++i) QCOMPARE(loss.steps[size_t(i)], int64_t(i + 1));
        for (int i = 0; i < 6; ++i) QCOMPARE(loss.values[size_t(i)], before.series.at("loss").values[size_t(i)]);
        // The learning rate continues the schedule of the 9-step run.
        QVERIFY(log.series.at("lr").values[6] > 0);
    }

    // state.h5 is the glimpse.ez_state layout of docs/formats.md: a file holding only the
    // documented attributes and datasets, copied one by one from the run's state, resumes the run
    // (so state files written before a change of the trainer keep loading).
    void stateFileHasDocumentedLayout() {
        auto src = h5::openGlimpse(path("run/state.h5"), "glimpse.ez_state", 1);
        auto env = rl::makeEnv("breakout");
        Network net(cpuNetwork(*env, tiny(1).network));
        const std::string copied = path("layout/state.h5");
        std::filesystem::create_directories(path("layout"));
        h5::writeAtomically(copied, "glimpse.ez_state", 1, [&](h5::File& f) {
            for (const char* a : {"train_config", "network_config", "rng"}) f.setAttr(a, src.attrString(a));
            for (const char* a : {"updates", "env_steps", "episodes", "replay_total_added"}) f.setAttr(a, src.attrInt(a));
            f.writeTensor("env_episodes", src.readTensor("env_episodes"));
            f.writeTensor("optimizer", src.readTensor("optimizer"));
            for (const char* g : {"network", "target"}) {
                auto dst = f.createGroup(g);
                for (const auto& p : net.module().named_parameters(true))
                    dst.writeTensor("p/" + p.key(), src.readTensor(std::string(g) + "/p/" + p.key()));
                for (const auto& b : net.module().named_buffers(true))
                    dst.writeTensor("b/" + b.key(), src.readTensor(std::string(g) + "/b/" + b.key()));
            }
            auto replay = f.createGroup("replay");
            for (const char* d : {"lengths", "terminal", "frames", "actions", "rewards", "root_values", "policies", "priorities"})
                replay.writeTensor(d, src.readTensor(std::string("replay/") + d));
        });
        const int64_t updates = src.attrInt("updates"), envSteps = src.attrInt("env_steps");
        src.close();
        const auto r = trainAgent(tiny(updates + 1), path("layout"));
        QCOMPARE(r.updates, updates + 1);
        QVERIFY(r.envSteps > envSteps);
        QCOMPARE(RunLog::load(path("layout/runlog.h5")).series.at("loss").steps.back(), updates + 1);
    }

    // Table 5.8: rewards are clipped to their sign and a lost life ends the game history in
    // training (the logged returns stay the game's own). Pellets pays 1 / 5 / 10 and has 3
    // lives (a random player loses them within ~50 steps), so without either rule the replay holds rewards above 1 and one history per
    // episode.
    void rewardClippingAndLifeLossTerminal() {
        struct Replay {
            int64_t games = 0, terminalGames = 0, episodes = 0;
            float maxReward = 0;
        };
        auto run = [&](const std::string& game, bool clip, bool lifeLoss, const std::string& dir) {
            TrainConfig c = tiny(1);
            c.env = game;
            c.maxEpisodeSteps = 400;
            c.minReplay = 600;
            c.clipRewards = clip;
            c.lifeLossTerminal = lifeLoss;
            trainAgent(c, path(dir));
            auto f = h5::File::open(path(dir + "/state.h5"));
            auto r = f.group("replay");
            Replay out;
            out.games = r.readTensor("lengths", torch::kInt64, {-1}).numel();
            out.terminalGames = r.readTensor("terminal", torch::kUInt8, {-1}).sum().item<int64_t>();
            const torch::Tensor rewards = r.readTensor("rewards", torch::kFloat32, {-1});
            out.maxReward = rewards.max().item<float>();
            out.episodes = f.attrInt("episodes");
            return out;
        };
        // Pellets has 3 lives and a random player loses them within ~50 steps.
        Replay p = run("pellets", true, true, "lives");
        QVERIFY2(p.episodes >= 1, "random pellets episodes end within 400 steps");
        QVERIFY2(p.games >= 2 * p.episodes + 1, qPrintable(QString("%1 histories for %2 episodes").arg(p.games).arg(p.episodes)));
        QCOMPARE(p.terminalGames, p.games);  // every history ends with a lost life (or the game)
        p = run("pellets", true, false, "lives_off");
        QCOMPARE(p.games, p.episodes);
        // Invaders pays 3 / 2 / 1 per alien.
        Replay inv = run("invaders", true, true, "clip");
        QCOMPARE(inv.maxReward, 1.f);
        const RunLog log = RunLog::load(path("clip/runlog.h5"));
        double best = 0;
        for (double v : log.series.at("episode_return").values) best = std::max(best, v);
        QVERIFY2(best > 1, "logged returns are the game's own, not clipped");
        inv = run("invaders", false, true, "clip_off");
        QVERIFY(inv.maxReward > 1.f);
        const auto j = TrainConfig::fromJson(nlohmann::json{{"clip_rewards", false}, {"life_loss_terminal", false}});
        QVERIFY(!j.clipRewards && !j.lifeLossTerminal);
        QVERIFY(contains(errorOf([] { TrainConfig::fromJson(nlohmann::json{{"clip_rewards", 1}}); }), {"clip_rewards"}));
        QCOMPARE(TrainConfig{}.policyTarget, std::string("visits"));
        QVERIFY(contains(errorOf([] { TrainConfig::fromJson(nlohmann::json{{"policy_target", "argmax"}}); }), {"policy_target"}));

        // Self-play temperature: the schedule by default, a constant when set.
        TrainConfig sched;
        sched.steps = 1000;
        QCOMPARE(selfPlayTemperature(sched, 100), 1.0);
        QCOMPARE(selfPlayTemperature(sched, 600), 0.5);
        QCOMPARE(selfPlayTemperature(sched, 900), 0.25);
        const auto fixed = TrainConfig::fromJson(nlohmann::json{{"steps", 1000}, {"self_play_temperature", 1.0}});
        QCOMPARE(fixed.selfPlayTemperature, 1.0);
        QCOMPARE(selfPlayTemperature(fixed, 900), 1.0);
        QCOMPARE(TrainConfig::fromJson(fixed.toJson()).selfPlayTemperature, 1.0);
        QVERIFY(contains(errorOf([] { TrainConfig::fromJson(nlohmann::json{{"self_play_temperature", -1}}); }),
                         {"self_play_temperature"}));

        // The study's configs in tools/ are valid train configs.
        for (const char* name : {"ez_study.json", "ez_study_shooter.json", "ez_study_uniform.json", "ez_study_heist.json"}) {
            std::ifstream in(std::string(GLIMPSE_SOURCE_DIR) + "/tools/" + name);
            QVERIFY2(in.good(), name);
            const auto c = TrainConfig::fromJson(nlohmann::json::parse(in));
            QCOMPARE(c.simulations, 16);
            if (std::string(name) == "ez_study_shooter.json") {
                QCOMPARE(c.tdSteps, 10);
                QCOMPARE(c.selfPlayTemperature, 1.0);
            }
            if (std::string(name) == "ez_study_uniform.json") {   // the study's config, uniform replay
                QCOMPARE(c.priorityAlpha, 0.0);
                QCOMPARE(c.priorityBetaStart, 1.0);
                std::ifstream base(std::string(GLIMPSE_SOURCE_DIR) + "/tools/ez_study.json");
                auto b = TrainConfig::fromJson(nlohmann::json::parse(base)).toJson(), u = c.toJson();
                b.erase("priority_alpha"), b.erase("priority_beta_start");
                u.erase("priority_alpha"), u.erase("priority_beta_start");
                QCOMPARE(u.dump(), b.dump());
            }
            if (std::string(name) == "ez_study_heist.json") {   // uniform replay, lr 0.02 -> 0.002
                QCOMPARE(c.lr, 0.02);
                QCOMPARE(c.lrFinal, 0.002);
                std::ifstream base(std::string(GLIMPSE_SOURCE_DIR) + "/tools/ez_study_uniform.json");
                auto b = TrainConfig::fromJson(nlohmann::json::parse(base)).toJson(), h = c.toJson();
                b.erase("lr"), b.erase("lr_final"), h.erase("lr"), h.erase("lr_final");
                QCOMPARE(h.dump(), b.dump());
            }
        }
    }

    // The ablation levers of docs/rl.md: sticky actions in self-play and the loss weights of eq.
    // 5.3 come from the config, round-trip, are checked, and reach the environments and the
    // learner.
    void ablationLevers() {
        const auto c = TrainConfig::fromJson(
            nlohmann::json{{"sticky_action_prob", 0.25}, {"loss_weights", {{"consistency", 0.0}, {"value", 0.5}}}});
        QCOMPARE(c.stickyActionProb, 0.25);
        QCOMPARE(c.lossWeights.consistency, 0.0);
        QCOMPARE(c.lossWeights.value, 0.5);
        QCOMPARE(c.lossWeights.policy, 1.0);       // missing keys keep the paper's weights
        QCOMPARE(c.lossWeights.valuePrefix, 1.0);
        const auto back = TrainConfig::fromJson(c.toJson());
        QCOMPARE(back.stickyActionProb, 0.25);
        QCOMPARE(back.lossWeights.consistency, 0.0);
        QCOMPARE(back.lossWeights.value, 0.5);
        std::string e = errorOf([] { TrainConfig::fromJson(nlohmann::json{{"loss_weights", {{"reward", 1}}}}); });
        QVERIFY2(contains(e, {"loss_weights.reward"}), e.c_str());
        e = errorOf([] { TrainConfig::fromJson(nlohmann::json{{"loss_weights", {{"policy", "1"}}}}); });
        QVERIFY2(contains(e, {"loss_weights.policy", "type"}), e.c_str());
        e = errorOf([] { TrainConfig::fromJson(nlohmann::json{{"loss_weights", {{"value", -1}}}}); });
        QVERIFY2(contains(e, {"loss_weights"}), e.c_str());
        e = errorOf([] { TrainConfig::fromJson(nlohmann::json{{"loss_weights", 2}}); });
        QVERIFY2(contains(e, {"loss_weights"}), e.c_str());
        e = errorOf([] { TrainConfig::fromJson(nlohmann::json{{"sticky_action_prob", 1.0}}); });
        QVERIFY2(contains(e, {"sticky_action_prob"}), e.c_str());

        // Every arm of tools/ez_ablation.json, merged into the study's config as
        // tools/ez_ablation.sh merges it, is a valid train config that differs from the base.
        auto readJson = [](const std::string& name) {
            std::ifstream in(std::string(GLIMPSE_SOURCE_DIR) + "/tools/" + name);
            return nlohmann::json::parse(in);
        };
        const nlohmann::json base = readJson("ez_study.json"), arms = readJson("ez_ablation.json");
        QVERIFY(arms.contains("baseline") && arms.size() >= 10);
        for (auto arm = arms.begin(); arm != arms.end(); ++arm) {
            if (arm.key().rfind('_', 0) == 0) continue;  // "_comment"
            nlohmann::json merged = base;
            for (auto it = arm.value().begin(); it != arm.value().end(); ++it) {
                if (it.value().is_object() && merged.contains(it.key()) && merged[it.key()].is_object())
                    merged[it.key()].update(it.value());
                else
                    merged[it.key()] = it.value();
            }
            const std::string what = "arm " + arm.key();
            try {
                const TrainConfig armCfg = TrainConfig::fromJson(merged);
                QVERIFY2(arm.key() == "baseline" || armCfg.toJson() != TrainConfig::fromJson(base).toJson(), what.c_str());
                cpuNetwork(*rl::makeEnv("pellets"), armCfg.network).validate();  // the network keys too
            } catch (const std::exception& ex) {
                QFAIL((what + ": " + ex.what()).c_str());
            }
        }

        // Only the consistency term, uniform sampling (all importance weights 1): the logged
        // loss is the consistency term itself at every update.
        TrainConfig only = tiny(4);
        only.priorityAlpha = 0;
        only.lossWeights = {};
        only.lossWeights.valuePrefix = only.lossWeights.policy = only.lossWeights.value = 0;
        only.lossWeights.consistency = 1;
        trainAgent(only, path("levers_loss"));
        const RunLog log = RunLog::load(path("levers_loss/runlog.h5"));
        const auto& total = log.series.at("loss").values;
        const auto& cons = log.series.at("loss_consistency").values;
        QCOMPARE(total.size(), size_t(4));
        QCOMPARE(cons.size(), total.size());
        for (size_t i = 0; i < total.size(); ++i)
            QVERIFY2(std::abs(total[i] - cons[i]) <= 1e-5 * (1 + std::abs(cons[i])),
                     qPrintable(QString("update %1: loss %2, consistency %3").arg(i + 1).arg(total[i]).arg(cons[i])));

        // Sticky actions: the same seed and moves chosen the same way, but the frames played differ.
        auto frames = [&](double sticky, const std::string& dir) {
            TrainConfig t = tiny(1);
            t.stickyActionProb = sticky;
            trainAgent(t, path(dir));
            return h5::File::open(path(dir + "/state.h5")).group("replay").readTensor("frames", torch::kUInt8, {-1});
        };
        const torch::Tensor plain = frames(0, "levers_plain"), again = frames(0, "levers_again"),
                            sticky = frames(0.9, "levers_sticky");
        QVERIFY2(plain.equal(again), "self-play is a function of the seed");
        QVERIFY2(!(plain.sizes() == sticky.sizes() && plain.equal(sticky)), "sticky actions change what is played");
    }

    void stopWritesCheckpoint() {
        train::Control control;
        control.requestStop();
        const auto r = trainAgent(tiny(50), path("stopped"), &control);
        QVERIFY(r.stopped);
        QCOMPARE(r.updates, int64_t(0));
        QVERIFY(std::filesystem::exists(path("stopped/state.h5")));
        QVERIFY(std::filesystem::exists(path("stopped/model.h5")));
        const RunLog log = RunLog::load(path("stopped/runlog.h5"));
        QCOMPARE(log.status, RunStatus::Stopped);
        QVERIFY(log.statusMessage.find("stopped at update 0") != std::string::npos);
    }

    void evaluateRecordsEpisodes() {
        auto env = rl::makeEnv("breakout");
        Network net = loadForEnv(path("run/model.h5"), *env);
        EvalOptions o;
        o.episodes = 2;
        o.simulations = 2;
        o.parallel = 2;
        o.env.maxEpisodeSteps = 15;
        o.recordDir = path("episodes");
        o.checkpointPath = path("run/model.h5");
        const auto r = evaluate(net, "breakout", o);
        QCOMPARE(int(r.returns.size()), 2);
        QCOMPARE(int(r.recorded.size()), 2);
        for (int i = 0; i < 2; ++i) {
            const auto e = rl::readEpisode(r.recorded[size_t(i)]);
            QCOMPARE(int(e.length()), r.lengths[size_t(i)]);
            QCOMPARE(e.episodeReturn, r.returns[size_t(i)]);
            QCOMPARE(e.rewards.sum().item<double>(), r.returns[size_t(i)]);
            QVERIFY(e.hasModel);
            QCOMPARE(e.frames.size(3), int64_t(3));
            // Visit counts sum to the simulations at every step; policy sums to 1.
            QVERIFY(torch::all(e.model.visitCounts.sum(1) == 2).item<bool>());
            QVERIFY(torch::allclose(e.model.policy.sum(1), torch::ones({e.length()}), 1e-5, 1e-5));
        }
        // Same seed, same episodes.
        o.recordDir.clear();
        const auto again = evaluate(net, "breakout", o);
        QCOMPARE(again.returns, r.returns);
    }

    void badInput() {
        TrainConfig c = tiny(2);
        c.env = "tetris";
        auto e = errorOf([&] { trainAgent(c, path("x")); });
        QVERIFY2(contains(e, {"tetris", "breakout"}), e.c_str());
        // Resuming a run of another game.
        c = tiny(2);
        c.env = "demon";
        e = errorOf([&] { trainAgent(c, path("run")); });
        QVERIFY2(contains(e, {"state.h5", "breakout"}), e.c_str());
        // A checkpoint of another game's action-set size.
        auto invaders = rl::makeEnv("invaders");
        e = errorOf([&] { loadForEnv(path("run/model.h5"), *invaders); });
        QVERIFY2(contains(e, {"model.h5", "4 actions", "6"}), e.c_str());
        // Corrupt checkpoint.
        std::filesystem::copy_file(path("run/model.h5"), path("broken.h5"));
        std::filesystem::resize_file(path("broken.h5"), 2000);
        auto breakout = rl::makeEnv("breakout");
        e = errorOf([&] { loadForEnv(path("broken.h5"), *breakout); });
        QVERIFY2(contains(e, {"broken.h5"}), e.c_str());
        // Config errors name the key.
        e = errorOf([&] { TrainConfig::fromJson({{"env", "breakout"}, {"batchsize", 3}}); });
        QVERIFY2(contains(e, {"batchsize"}), e.c_str());
        e = errorOf([&] { TrainConfig::fromJson({{"env", "breakout"}, {"num_envs", 100000}}); });
        QVERIFY2(contains(e, {"num_envs"}), e.c_str());
        Network net = loadForEnv(path("run/model.h5"), *breakout);
        EvalOptions o;
        o.episodes = 1;
        o.temperature = -1;
        e = errorOf([&] { evaluate(net, "breakout", o); });
        QVERIFY2(contains(e, {"temperature"}), e.c_str());
    }

    // tools/ez_study.sh with a stand-in for glimpse: a run stopped by Ctrl-C keeps its checkpoint
    // and resumes with what is left of its wall-clock budget; a sitting left open by a killed
    // machine is closed at the train log's last write; a spent budget means evaluate; a second
    // study process leaves a run that is training alone; a failed training stops the study;
    // BUDGET=long picks each game's updates and config.
    void studyScriptResumesWithTheBudgetLeft() {
        QTemporaryDir tmp;
        const std::string d = tmp.path().toStdString(), calls = d + "/calls.txt", mode = d + "/mode";
        const QString out = tmp.filePath("out");
        auto write = [](const std::string& p, const std::string& text) {
            std::ofstream(p, std::ios::trunc) << text;
        };
        auto read = [](const std::string& p) {
            std::ifstream in(p);
            return std::string(std::istreambuf_iterator<char>(in), {});
        };
        write(d + "/glimpse",
              "#!/bin/bash\necho \"$*\" >> '" + calls + "'\ncmd=$1; o=\"\"\n"
              "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && o=$2; shift; done\n"
              "if [ \"$cmd\" = train ]; then\n"
              "  mkdir -p \"$o\"; touch \"$o/model.h5\" \"$o/state.h5\"\n"
              "  case $(cat '" + mode + "') in\n"
              "    finish) echo 'finished: 10 updates'; exit 0 ;;\n"
              "    fail) rm -f \"$o/model.h5\" \"$o/state.h5\"; exit 1 ;;\n"
              "    hang) sleep 1000 & p=$!; trap 'kill $p; echo \"stopped: 7 updates\"; exit 0' INT\n"
              "          echo running; wait $p; exit 0 ;;\n"
              "  esac\nfi\n"
              "echo 'return: mean 3.00 +- 1.00 (95% CI), median 3.00'\n"
              "echo 'normalized score: mean 0.100, median 0.100 (0 = random, 1 = scripted)'\n");
        QFile::setPermissions(QString::fromStdString(d + "/glimpse"), QFileDevice::ReadOwner | QFileDevice::ExeOwner);
        auto start = [&](QProcess& p, const QString& seeds, const QString& games = "pellets",
                         const QString& budget = "study") {
            auto env = QProcessEnvironment::systemEnvironment();
            env.insert("GLIMPSE", QString::fromStdString(d + "/glimpse"));
            env.insert("OUT", out);
            env.insert("GAMES", games);
            env.insert("SEEDS", seeds);
            env.insert("BUDGET", budget);
            env.insert("MINUTES", "1");
            p.setProcessEnvironment(env);
            p.start("bash", {GLIMPSE_SOURCE_DIR "/tools/ez_study.sh"});
            QVERIFY(p.waitForStarted());
        };
        auto run = [&](const QString& seeds, QString* stdOut = nullptr) {
            QProcess p;
            start(p, seeds);
            if (!p.waitForFinished(60000)) return -1;
            if (stdOut) *stdOut = QString(p.readAllStandardOutput()) + p.readAllStandardError();
            return p.exitCode();
        };
        auto runPath = [&](const std::string& seed) { return out.toStdString() + "/pellets-" + seed; };
        const std::string r0 = runPath("0");
        QString text;

        // Ctrl-C while seed 0 trains: the trainer stops at its next update, the study exits 3 and
        // evaluates nothing; a second study meanwhile skips the run it does not own.
        write(mode, "hang");
        QProcess first;
        start(first, "0");
        for (int i = 0; i < 1500 && read(r0 + ".train.log").find("running") == std::string::npos; ++i) QTest::qWait(20);
        QVERIFY(read(r0 + ".train.log").find("running") != std::string::npos);
        QCOMPARE(run("0", &text), 0);
        QVERIFY2(text.contains("being trained by another process"), qPrintable(text));
        QVERIFY(::kill(pid_t(first.processId()), SIGINT) == 0);
        QVERIFY(first.waitForFinished(60000));
        QCOMPARE(first.exitCode(), 3);
        QVERIFY(QString(first.readAllStandardError()).contains("the same command resumes it"));
        QVERIFY(read(r0 + ".train.log").find("stopped: 7 updates") != std::string::npos);
        QVERIFY(!QFileInfo::exists(out + "/pellets-0/eval.txt") && QFileInfo::exists(out + "/pellets-0/state.h5"));
        QVERIFY(read(calls).find("play") == std::string::npos);
        // ... and the same command resumes it in the same folder, with the budget left.
        write(mode, "finish");
        QCOMPARE(run("0", &text), 0);
        QVERIFY2(text.contains("pellets-0: resuming from its checkpoint"), qPrintable(text));
        QVERIFY(QFileInfo::exists(out + "/pellets-0/eval.txt"));
        QVERIFY(!QDir(out).entryList({"*interrupted*"}).size());
        QVERIFY2(text.contains(QRegularExpression("pellets +1 +0\\.100")), qPrintable(text));

        // A sitting a lost machine left open: closed at the log's last write (50 s in), so 10 s
        // of the minute are left. A spent budget: evaluated only. A run from before the
        // accounting, stopped by its time limit: evaluated only.
        const qint64 now = QDateTime::currentSecsSinceEpoch();
        for (const char* s : {"1", "2", "3", "4"}) {
            QVERIFY(QDir().mkpath(out + "/pellets-" + s));
            write(runPath(s) + "/model.h5", "");
            write(runPath(s) + "/state.h5", "");
        }
        write(runPath("1") + ".segments", "start " + std::to_string(now - 200) + "\n");
        write(runPath("1") + ".train.log", "progress\n");
        QFile log1(out + "/pellets-1.train.log");
        QVERIFY(log1.open(QIODevice::ReadWrite));
        QVERIFY(log1.setFileTime(QDateTime::fromSecsSinceEpoch(now - 150), QFileDevice::FileModificationTime));
        log1.close();
        write(runPath("2") + ".segments", "start 1000\nend 1100 budget\n");
        write(runPath("2") + ".train.log", "stopped: 3 updates\n");
        write(runPath("3") + ".train.log", "stopped: 3 updates\n");
        write(calls, "");
        QCOMPARE(run("1 2 3", &text), 0);
        QVERIFY2(text.contains("pellets-1: resuming from its checkpoint, 10 s of its 1 min left"), qPrintable(text));
        QVERIFY(read(runPath("1") + ".segments").find("end " + std::to_string(now - 150) + " killed") !=
                std::string::npos);
        QVERIFY(text.contains("pellets-2: trained already") && text.contains("pellets-3: trained already"));
        const std::string c = read(calls);
        QVERIFY2(c.find("--seed 1") != std::string::npos && c.find("--seed 2") == std::string::npos &&
                     c.find("--seed 3") == std::string::npos, c.c_str());
        QVERIFY2(text.contains(QRegularExpression("pellets +3 +0\\.100 \\+- 0\\.000")), qPrintable(text));

        // The budget runs out (59 of 60 s used): the trainer is stopped by the limit and evaluated.
        write(runPath("4") + ".segments", "start 1000\nend 1059 stopped\n");
        write(mode, "hang");
        QCOMPARE(run("4", &text), 0);
        QVERIFY2(text.contains("1 s of its 1 min left"), qPrintable(text));
        QVERIFY(read(runPath("4") + ".segments").find(" budget\n") != std::string::npos);
        QVERIFY(QFileInfo::exists(out + "/pellets-4/eval.txt"));

        // A training that fails stops the study with its log named.
        write(mode, "fail");
        QCOMPARE(run("5", &text), 1);
        QVERIFY2(text.contains("training failed (exit 1), see " + out + "/pellets-5.train.log"), qPrintable(text));

        // BUDGET=long gives each game the updates and config of the eight-game table: sub and
        // heist their 16000 updates with uniform replay, heist at its lower learning rate.
        write(mode, "finish");
        write(calls, "");
        QProcess longStudy;
        start(longStudy, "0", "heist sub painter", "long");
        QVERIFY(longStudy.waitForFinished(60000));
        QCOMPARE(longStudy.exitCode(), 0);
        const std::string lc = read(calls), tools = GLIMPSE_SOURCE_DIR "/tools/";
        for (const std::string want :
             {"--env heist --seed 0 --steps 16000 --config " + tools + "ez_study_heist.json",
              "--env sub --seed 0 --steps 16000 --config " + tools + "ez_study_uniform.json",
              "--env painter --seed 0 --steps 4000 --config " + tools + "ez_study.json"})
            QVERIFY2(lc.find(want) != std::string::npos, (want + " not in:\n" + lc).c_str());
    }
};

QTEST_APPLESS_MAIN(TestEzTrain)
#include "test_ez_train.moc"
