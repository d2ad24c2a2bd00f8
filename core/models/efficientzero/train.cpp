#include "core/models/efficientzero/train.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/search.h"
#include "core/rl/episode.h"
#include "core/rl/mcts.h"
#include "core/rl/replay.h"
#include "core/runlog.h"

namespace glimpse::efficientzero {

using torch::Tensor;
namespace fs = std::filesystem;

// ---- config --------------------------------------------------------------------------------

nlohmann::json TrainConfig::toJson() const {
    return {{"env", env}, {"steps", steps}, {"seed", seed}, {"num_envs", numEnvs}, {"simulations", simulations},
            {"max_episode_steps", maxEpisodeSteps}, {"batch_size", batchSize}, {"unroll", unroll},
            {"td_steps", tdSteps}, {"discount", discount}, {"self_play_temperature", selfPlayTemperature},
            {"clip_rewards", clipRewards},
            {"life_loss_terminal", lifeLossTerminal}, {"policy_target", policyTarget}, {"lr", lr}, {"lr_final", lrFinal},
            {"lr_schedule", lrSchedule}, {"warmup_steps", warmupSteps}, {"momentum", momentum},
            {"weight_decay", weightDecay}, {"grad_clip", gradClip}, {"priority_alpha", priorityAlpha},
            {"priority_beta_start", priorityBetaStart}, {"replay_capacity", replayCapacity},
            {"min_replay", minReplay}, {"updates_per_env_step", updatesPerEnvStep},
            {"self_play_update_interval", selfPlayUpdateInterval}, {"target_update_interval", targetUpdateInterval},
            {"checkpoint_interval", checkpointInterval}, {"log_interval", logInterval}, {"network", network}};
}

TrainConfig TrainConfig::fromJson(const nlohmann::json& j) {
    if (!j.is_object()) throw Error("efficientzero train config: expected a JSON object");
    TrainConfig c;
    const nlohmann::json known = c.toJson();
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.contains(it.key())) throw Error("efficientzero train config: unknown key '" + it.key() + "'");
    auto get = [&](const char* key, auto& field) {
        if (!j.contains(key)) return;
        const auto& v = j.at(key);
        using T = std::decay_t<decltype(field)>;
        bool ok;
        if constexpr (std::is_same_v<T, std::string>) ok = v.is_string();
        else if constexpr (std::is_same_v<T, bool>) ok = v.is_boolean();
        else if constexpr (std::is_floating_point_v<T>) ok = v.is_number();
        else if constexpr (std::is_same_v<T, nlohmann::json>) ok = v.is_object();
        else ok = v.is_number_integer();
        if (!ok) throw Error(std::string("efficientzero train config: '") + key + "' has the wrong type");
        field = v.get<T>();
    };
    get("env", c.env); get("steps", c.steps); get("seed", c.seed); get("num_envs", c.numEnvs);
    get("simulations", c.simulations); get("max_episode_steps", c.maxEpisodeSteps); get("batch_size", c.batchSize);
    get("unroll", c.unroll); get("td_steps", c.tdSteps); get("discount", c.discount); get("lr", c.lr);
    get("self_play_temperature", c.selfPlayTemperature);
    get("clip_rewards", c.clipRewards); get("life_loss_terminal", c.lifeLossTerminal);
    get("policy_target", c.policyTarget);
    get("lr_final", c.lrFinal); get("lr_schedule", c.lrSchedule); get("warmup_steps", c.warmupSteps);
    get("momentum", c.momentum); get("weight_decay", c.weightDecay); get("grad_clip", c.gradClip);
    get("priority_alpha", c.priorityAlpha); get("priority_beta_start", c.priorityBetaStart);
    get("replay_capacity", c.replayCapacity); get("min_replay", c.minReplay);
    get("updates_per_env_step", c.updatesPerEnvStep); get("self_play_update_interval", c.selfPlayUpdateInterval);
    get("target_update_interval", c.targetUpdateInterval); get("checkpoint_interval", c.checkpointInterval);
    get("log_interval", c.logInterval); get("network", c.network);
    c.validate();
    return c;
}

void TrainConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw Error("efficientzero train config: " + what);
    };
    need(steps >= 1 && steps <= 100000000, "steps must be in 1..1e8");
    need(numEnvs >= 1 && numEnvs <= 256, "num_envs must be in 1..256");
    need(simulations >= 1 && simulations <= 1000, "simulations must be in 1..1000");
    need(maxEpisodeSteps >= 1 && maxEpisodeSteps <= 1000000, "max_episode_steps must be in 1..1e6");
    need(batchSize >= 1 && batchSize <= 4096, "batch_size must be in 1..4096");
    need(unroll >= 1 && unroll <= 20 && tdSteps >= 1 && tdSteps <= 100, "unroll / td_steps out of range");
    need(discount > 0 && discount <= 1, "discount must be in (0, 1]");
    need(selfPlayTemperature >= 0 && selfPlayTemperature <= 100,
         "self_play_temperature must be in [0, 100] (0: the schedule)");
    need(lr > 0 && lr < 10 && lrFinal >= 0 && lrFinal <= lr, "lr must be in (0, 10) and lr_final in [0, lr]");
    need(lrSchedule == "cosine" || lrSchedule == "step", "lr_schedule must be 'cosine' or 'step'");
    need(policyTarget == "visits" || policyTarget == "completed_q", "policy_target must be 'visits' or 'completed_q'");
    need(warmupSteps >= 0 && momentum >= 0 && momentum < 1 && weightDecay >= 0 && gradClip > 0, "bad optimizer settings");
    need(priorityAlpha >= 0 && priorityBetaStart >= 0 && priorityBetaStart <= 1, "bad priority exponents");
    need(replayCapacity >= 1 && minReplay >= 1 && minReplay <= replayCapacity, "min_replay must be in 1..replay_capacity");
    need(updatesPerEnvStep > 0 && updatesPerEnvStep <= 100, "updates_per_env_step must be in (0, 100]");
    need(selfPlayUpdateInterval >= 1 && targetUpdateInterval >= 1 && checkpointInterval >= 1 && logInterval >= 1,
         "intervals must be at least 1");
}

double selfPlayTemperature(const TrainConfig& config, int64_t updates) {
    if (config.selfPlayTemperature > 0) return config.selfPlayTemperature;
    return rl::visitTemperature(double(updates) / double(config.steps));
}

Config cpuNetwork(const rl::Env& env, const nlohmann::json& overrides) {
    const auto s = env.observationShape();
    Config c = Config::grid(s.channels, s.height, s.width, env.numActions());
    c.channels = 16;
    c.lstmHidden = 32;
    c.projHidden = 128;
    c.projOut = 64;
    c.predHidden = 32;
    c.oneHotActions = true;  // no order among the actions (docs/rl.md "EfficientZero networks")
    nlohmann::json j = c.toJson();
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
        if (!j.contains(it.key())) throw Error("efficientzero network: unknown key '" + it.key() + "'");
        j[it.key()] = it.value();
    }
    c = Config::fromJson(j);
    c.validate();
    return c;
}

// ---- helpers -------------------------------------------------------------------------------

namespace {

void copyWeights(Network& src, Network& dst) {
    torch::NoGradGuard ng;
    auto sp = src.module().named_parameters(true), dp = dst.module().named_parameters(true);
    for (const auto& p : sp) dp[p.key()].copy_(p.value());
    auto sb = src.module().named_buffers(true), db = dst.module().named_buffers(true);
    for (const auto& b : sb) db[b.key()].copy_(b.value());
}

double learningRate(const TrainConfig& c, int64_t update) {
    if (update < c.warmupSteps) return c.lr * double(update + 1) / double(c.warmupSteps + 1);
    const double p = std::clamp(double(update - c.warmupSteps) / double(std::max<int64_t>(1, c.steps - c.warmupSteps)), 0.0, 1.0);
    if (c.lrSchedule == "step") return p < 0.5 ? c.lr : (p < 0.75 ? c.lr * 0.1 : c.lr * 0.01);
    return c.lrFinal + 0.5 * (c.lr - c.lrFinal) * (1.0 + std::cos(M_PI * p));
}

std::string rngString(const std::mt19937_64& rng) {
    std::ostringstream os;
    os << rng;
    return os.str();
}

void rngFromString(std::mt19937_64& rng, const std::string& s, const std::string& where) {
    std::istringstream is(s);
    is >> rng;
    if (!is) throw Error(where + ": corrupt RNG state");
}

Tensor bytesTensor(const std::string& s) {
    return torch::from_blob(const_cast<char*>(s.data()), {int64_t(s.size())}, torch::kUInt8).clone();
}
std::string tensorBytes(const Tensor& t) {
    const Tensor c = t.contiguous();
    return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), size_t(c.numel()));
}

void writeModule(h5::Group g, torch::nn::Module& m) {
    for (const auto& p : m.named_parameters(true)) g.writeTensor("p/" + p.key(), p.value().detach().contiguous());
    for (const auto& b : m.named_buffers(true)) g.writeTensor("b/" + b.key(), b.value().contiguous());
}
void readModule(const h5::Group& g, torch::nn::Module& m) {
    torch::NoGradGuard ng;
    for (auto& p : m.named_parameters(true)) {
        const Tensor t = g.readTensor("p/" + p.key(), p.value().scalar_type(), p.value().sizes().vec());
        p.value().copy_(t);
    }
    for (auto& b : m.named_buffers(true)) {
        const Tensor t = g.readTensor("b/" + b.key(), b.value().scalar_type(), b.value().sizes().vec());
        b.value().copy_(t);
    }
}

constexpr const char* kStateKind = "glimpse.ez_state";

struct Counters {
    int64_t updates = 0, envSteps = 0, episodes = 0;
    std::vector<int64_t> envEpisodes;  // per self-play environment: episodes started
};

void saveState(const std::string& path, const TrainConfig& cfg, const Config& netCfg, Network& net, Network& target,
               torch::optim::SGD& opt, const rl::ReplayBuffer& replay, const Counters& n, const std::mt19937_64& rng) {
    std::ostringstream optBytes;
    {
        torch::serialize::OutputArchive ar;
        opt.save(ar);
        ar.save_to(optBytes);
    }
    h5::writeAtomically(path, kStateKind, 1, [&](h5::File& f) {
        f.setAttr("train_config", cfg.toJson().dump());
        f.setAttr("network_config", netCfg.toJson().dump());
        f.setAttr("updates", n.updates);
        f.setAttr("env_steps", n.envSteps);
        f.setAttr("episodes", n.episodes);
        f.setAttr("rng", rngString(rng));
        f.setAttr("replay_total_added", replay.totalAdded());
        f.writeTensor("env_episodes", torch::tensor(n.envEpisodes, torch::kInt64));
        writeModule(f.createGroup("network"), net.module());
        writeModule(f.createGroup("target"), target.module());
        f.writeTensor("optimizer", bytesTensor(optBytes.str()));
        // Replay: games concatenated.
        const auto& games = replay.games();
        std::vector<int64_t> lengths;
        std::vector<uint8_t> terminal;
        std::vector<uint8_t> frames;
        std::vector<int64_t> actions;
        std::vector<float> rewards, values, policies;
        std::vector<double> prios;
        for (size_t g = 0; g < games.size(); ++g) {
            const auto& h = games[g];
            lengths.push_back(h.length());
            terminal.push_back(h.terminal ? 1 : 0);
            frames.insert(frames.end(), h.frames.begin(), h.frames.end());
            actions.insert(actions.end(), h.actions.begin(), h.actions.end());
            rewards.insert(rewards.end(), h.rewards.begin(), h.rewards.end());
            values.insert(values.end(), h.rootValues.begin(), h.rootValues.end());
            policies.insert(policies.end(), h.policies.begin(), h.policies.end());
            const auto& p = replay.priorities(int(g));
            prios.insert(prios.end(), p.begin(), p.end());
        }
        auto r = f.createGroup("replay");
        h5::WriteOptions gz{h5::Compression::Gzip, 4};
        auto vec = [](auto& v, torch::ScalarType t) {
            return torch::from_blob(v.data(), {int64_t(v.size())}, t).clone();
        };
        r.writeTensor("lengths", vec(lengths, torch::kInt64));
        r.writeTensor("terminal", vec(terminal, torch::kUInt8));
        r.writeTensor("frames", vec(frames, torch::kUInt8), gz);
        r.writeTensor("actions", vec(actions, torch::kInt64), gz);
        r.writeTensor("rewards", vec(rewards, torch::kFloat32), gz);
        r.writeTensor("root_values", vec(values, torch::kFloat32), gz);
        r.writeTensor("policies", vec(policies, torch::kFloat32), gz);
        r.writeTensor("priorities", vec(prios, torch::kFloat64), gz);
    });
}

void loadState(const std::string& path, const TrainConfig& cfg, const Config& netCfg, Network& net, Network& target,
               torch::optim::SGD& opt, rl::ReplayBuffer& replay, Counters& n, std::mt19937_64& rng) {
    h5::File f = h5::openGlimpse(path, kStateKind, 1);
    const auto saved = nlohmann::json::parse(f.attrString("train_config"), nullptr, false);
    if (saved.is_discarded() || !saved.is_object()) throw Error(path + ": corrupt train_config attribute");
    if (saved.value("env", "") != cfg.env)
        throw Error(path + ": the run was trained on '" + saved.value("env", "") + "', not '" + cfg.env + "'");
    if (f.attrString("network_config") != netCfg.toJson().dump())
        throw Error(path + ": the run's network config differs from this one");
    n.updates = f.attrInt("updates");
    n.envSteps = f.attrInt("env_steps");
    n.episodes = f.attrInt("episodes");
    rngFromString(rng, f.attrString("rng"), path);
    const Tensor envEp = f.readTensor("env_episodes", torch::kInt64, {-1});
    n.envEpisodes.assign(envEp.data_ptr<int64_t>(), envEp.data_ptr<int64_t>() + envEp.numel());
    readModule(f.group("network"), net.module());
    readModule(f.group("target"), target.module());
    {
        const std::string bytes = tensorBytes(f.readTensor("optimizer", torch::kUInt8, {-1}));
        torch::serialize::InputArchive ar;
        try {
            ar.load_from(bytes.data(), bytes.size());
            opt.load(ar);
        } catch (const c10::Error& e) {
            throw Error(path + ": corrupt optimizer state");
        }
    }
    auto r = f.group("replay");
    const Tensor lengths = r.readTensor("lengths", torch::kInt64, {-1});
    const int64_t G = lengths.numel();
    const int64_t T = G ? lengths.sum().item<int64_t>() : 0;
    const int64_t fn = int64_t(netCfg.obsChannels) * netCfg.obsHeight * netCfg.obsWidth;
    const int A = netCfg.numActions;
    const Tensor terminal = r.readTensor("terminal", torch::kUInt8, {G});
    const Tensor frames = r.readTensor("frames", torch::kUInt8, {(T + G) * fn});
    const Tensor actions = r.readTensor("actions", torch::kInt64, {T});
    const Tensor rewards = r.readTensor("rewards", torch::kFloat32, {T});
    const Tensor values = r.readTensor("root_values", torch::kFloat32, {T});
    const Tensor policies = r.readTensor("policies", torch::kFloat32, {T * A});
    const Tensor prios = r.readTensor("priorities", torch::kFloat64, {T});
    int64_t off = 0, foff = 0;
    for (int64_t g = 0; g < G; ++g) {
        const int64_t L = lengths[g].item<int64_t>();
        if (L < 1) throw Error(path + ": replay game of length " + std::to_string(L));
        rl::GameHistory h;
        h.frame = {netCfg.obsChannels, netCfg.obsHeight, netCfg.obsWidth};
        h.numActions = A;
        h.terminal = terminal[g].item<uint8_t>() != 0;
        h.done = true;
        const uint8_t* fp = frames.data_ptr<uint8_t>() + foff * fn;
        h.frames.assign(fp, fp + (L + 1) * fn);
        const int64_t* ap = actions.data_ptr<int64_t>() + off;
        h.actions.assign(ap, ap + L);
        h.rewards.assign(rewards.data_ptr<float>() + off, rewards.data_ptr<float>() + off + L);
        h.rootValues.assign(values.data_ptr<float>() + off, values.data_ptr<float>() + off + L);
        h.policies.assign(policies.data_ptr<float>() + off * A, policies.data_ptr<float>() + (off + L) * A);
        std::vector<double> p(prios.data_ptr<double>() + off, prios.data_ptr<double>() + off + L);
        replay.add(std::move(h), p);
        off += L;
        foff += L + 1;
    }
    replay.setTotalAdded(f.attrInt("replay_total_added"));
}

const std::vector<std::string> kSeries = {
    "loss", "loss_value", "loss_value_prefix", "loss_policy", "loss_consistency", "lr", "beta", "grad_norm",
    "episode_return", "episode_length", "normalized_score", "env_steps", "env_steps_per_s", "updates_per_s",
    "replay_size"};

} // namespace

// ---- training ------------------------------------------------------------------------------

TrainResult trainAgent(const TrainConfig& cfg, const std::string& runDir, train::Control* control,
                  const train::ProgressFn& progress) {
    cfg.validate();
    rl::EnvOptions envOpts;
    envOpts.maxEpisodeSteps = cfg.maxEpisodeSteps;
    std::vector<std::unique_ptr<rl::Env>> envs;
    for (int i = 0; i < cfg.numEnvs; ++i) envs.push_back(rl::makeEnv(cfg.env, envOpts));  // unknown game -> Error
    const Config netCfg = cpuNetwork(*envs.front(), cfg.network);
    const int A = netCfg.numActions, stack = netCfg.stack;
    const rl::ObsShape fs = envs.front()->observationShape();
    const int64_t stackNumel = int64_t(stack) * fs.numel();

    fs::create_directories(runDir);
    const std::string statePath = (fs::path(runDir) / "state.h5").string();
    const std::string modelPath = (fs::path(runDir) / "model.h5").string();
    const std::string logPath = (fs::path(runDir) / "runlog.h5").string();

    torch::manual_seed(cfg.seed);
    Network net(netCfg), target(netCfg), actor(netCfg);
    torch::optim::SGD opt(net.parameters(),
                          torch::optim::SGDOptions(cfg.lr).momentum(cfg.momentum).weight_decay(cfg.weightDecay));
    rl::ReplayConfig rc;
    rc.capacity = cfg.replayCapacity;
    rc.alpha = cfg.priorityAlpha;
    rc.betaStart = cfg.priorityBetaStart;
    rc.unroll = cfg.unroll;
    rc.tdSteps = cfg.tdSteps;
    rc.discount = cfg.discount;
    rl::ReplayBuffer replay(rc);
    Counters n;
    n.envEpisodes.assign(size_t(cfg.numEnvs), 0);
    std::mt19937_64 rng(cfg.seed * 0x9E3779B97F4A7C15ull + 17);

    // Resume: restore everything; the episodes that were running are not saved and start anew.
    RunLog previous;
    const bool resuming = fs::exists(statePath);
    if (resuming) {
        loadState(statePath, cfg, netCfg, net, target, opt, replay, n, rng);
        if (int(n.envEpisodes.size()) != cfg.numEnvs) n.envEpisodes.resize(size_t(cfg.numEnvs), 0);
        if (fs::exists(logPath)) {
            try {
                previous = RunLog::load(logPath);
            } catch (const Error&) {
                previous = RunLog{};  // an unreadable old log is replaced
            }
        }
    } else {
        copyWeights(net, target);
    }
    copyWeights(net, actor);
    target.train(false);
    actor.train(false);

    nlohmann::json logConfig = cfg.toJson();
    logConfig["family"] = "efficientzero";
    logConfig["network_config"] = netCfg.toJson();
    RunLogWriter log = RunLogWriter::create(logPath, logConfig, kSeries);
    for (const auto& [name, s] : previous.series)
        if (std::find(kSeries.begin(), kSeries.end(), name) != kSeries.end())
            for (size_t i = 0; i < s.size(); ++i) {
                if (s.steps[i] > (name == "episode_return" || name == "episode_length" || name == "normalized_score" ? n.envSteps : n.updates))
                    continue;  // rows written after the checkpoint we resume from
                log.append(name, s.steps[i], s.values[i], s.wallTimes[i]);
            }
    const double wallOffset = previous.series.count("loss") && previous.series.at("loss").size()
                                  ? previous.series.at("loss").wallTimes.back()
                                  : 0.0;

    // Self-play state.
    std::vector<rl::GameHistory> histories(size_t(cfg.numEnvs));
    std::vector<double> episodeReturn(size_t(cfg.numEnvs), 0.0);  // the game's own rewards
    std::vector<int> episodeLength(size_t(cfg.numEnvs), 0), lives(size_t(cfg.numEnvs), 0);
    // A new game history starting from the environment's current frame (a new episode, or
    // the same episode after a lost life when lifeLossTerminal).
    auto startHistory = [&](int i) {
        auto& h = histories[size_t(i)];
        h = rl::GameHistory{};
        h.frame = fs;
        h.numActions = A;
        const auto obs = envs[size_t(i)]->observation();
        h.addFrame(obs.data());
    };
    auto startEpisode = [&](int i) {
        envs[size_t(i)]->reset(rl::episodeSeed(cfg.seed, i, n.envEpisodes[size_t(i)]++));
        episodeReturn[size_t(i)] = 0;
        episodeLength[size_t(i)] = 0;
        lives[size_t(i)] = envs[size_t(i)]->lives();
        startHistory(i);
    };
    for (int i = 0; i < cfg.numEnvs; ++i) startEpisode(i);
    rl::MctsConfig mc;
    mc.numSimulations = cfg.simulations;
    mc.discount = cfg.discount;
    rl::Mcts mcts(mc, cfg.seed + uint64_t(n.updates) * 7919 + 1);
    std::mt19937_64 actRng(cfg.seed + uint64_t(n.envSteps) * 104729 + 3);

    const auto t0 = std::chrono::steady_clock::now();
    auto now = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    TrainResult result;
    const int64_t startUpdates = n.updates;
    const int64_t startEnvSteps = n.envSteps;
    int64_t envStepsAtFill = -1;  // env steps when replay reached minReplay in this process
    double lastRateTime = 0;
    int64_t lastRateUpdates = n.updates, lastRateEnv = n.envSteps;
    std::vector<float> obsBuf(size_t(cfg.numEnvs * stackNumel));
    train::Progress prog;
    prog.totalSteps = cfg.steps;

    auto writeCheckpoints = [&] {
        saveCheckpoint(modelPath, checkpointFromModule(net.module(), "efficientzero", netCfg.toJson().dump()));
        saveState(statePath, cfg, netCfg, net, target, opt, replay, n, rng);
    };

    auto selfPlayStep = [&] {
        for (int i = 0; i < cfg.numEnvs; ++i)
            histories[size_t(i)].stackedInto(histories[size_t(i)].length(), stack, obsBuf.data() + i * stackNumel);
        const Tensor obs = torch::from_blob(obsBuf.data(), {cfg.numEnvs, int64_t(stack) * fs.channels, fs.height, fs.width});
        const auto res = searchBatch(actor, mcts, obs, true);
        const double temp = selfPlayTemperature(cfg, n.updates);
        std::vector<float> frame(size_t(fs.numel()));
        for (int i = 0; i < cfg.numEnvs; ++i) {
            auto& env = *envs[size_t(i)];
            auto& h = histories[size_t(i)];
            const int a = rl::selectAction(res.visitCounts[size_t(i)], temp, actRng);
            const auto step = env.step(a);
            episodeReturn[size_t(i)] += step.reward;
            ++episodeLength[size_t(i)];
            const float reward = cfg.clipRewards ? float((step.reward > 0) - (step.reward < 0)) : step.reward;
            const bool lifeLost = cfg.lifeLossTerminal && step.lives < lives[size_t(i)];
            lives[size_t(i)] = step.lives;
            h.actions.push_back(a);
            h.rewards.push_back(reward);
            h.rootValues.push_back(res.rootValues[size_t(i)]);
            const auto& target = cfg.policyTarget == "visits" ? res.policies[size_t(i)] : res.improvedPolicies[size_t(i)];
            h.policies.insert(h.policies.end(), target.begin(), target.end());
            env.observationInto(frame.data());
            h.addFrame(frame.data());
            ++n.envSteps;
            if (!step.done() && lifeLost) {
                h.terminal = true;
                h.done = true;
                replay.add(std::move(h));
                startHistory(i);
            } else if (step.done()) {
                h.terminal = step.terminal || lifeLost;
                h.done = true;
                const double ret = episodeReturn[size_t(i)];
                const int len = episodeLength[size_t(i)];
                replay.add(std::move(h));
                ++n.episodes;
                log.append("episode_return", n.envSteps, ret, wallOffset + now());
                log.append("episode_length", n.envSteps, len, wallOffset + now());
                log.append("normalized_score", n.envSteps, rl::normalizedScore(cfg.env, ret), wallOffset + now());
                prog.latest["episode_return"] = ret;
                startEpisode(i);
            }
        }
    };

    std::vector<float> bootObs, tObs, nextObsBuf;
    auto learnStep = [&] {
        const int B = cfg.batchSize, K = cfg.unroll;
        const double beta = replay.beta(double(n.updates) / double(cfg.steps));
        const auto positions = replay.sample(B, beta, rng);
        std::vector<rl::PositionTargets> tg;
        tg.reserve(size_t(B));
        tObs.assign(size_t(B * stackNumel), 0.f);
        nextObsBuf.assign(size_t(B * K * stackNumel), 0.f);
        std::vector<std::pair<int, int>> boot;  // (game, step) whose value is reanalyzed
        for (int b = 0; b < B; ++b) {
            const auto& p = positions[size_t(b)];
            const auto& g = replay.games()[size_t(p.game)];
            tg.push_back(replay.targets(p.game, p.pos, rng));
            g.stackedInto(p.pos, stack, tObs.data() + b * stackNumel);
            for (int k = 0; k < K; ++k)
                g.stackedInto(std::min(p.pos + k + 1, g.length()), stack, nextObsBuf.data() + (int64_t(b) * K + k) * stackNumel);
            for (int idx : tg.back().valueIndex)
                if (idx >= 0) boot.emplace_back(p.game, idx);
        }
        // Reanalyze: the target network's value of every bootstrap observation.
        std::vector<float> bootValues;
        if (!boot.empty()) {
            bootObs.assign(boot.size() * size_t(stackNumel), 0.f);
            for (size_t j = 0; j < boot.size(); ++j)
                replay.games()[size_t(boot[j].first)].stackedInto(boot[j].second, stack, bootObs.data() + int64_t(j) * stackNumel);
            torch::NoGradGuard ng;
            const Tensor v = target.initialInference(torch::from_blob(bootObs.data(),
                                                                      {int64_t(boot.size()), int64_t(stack) * fs.channels, fs.height, fs.width}))
                                 .value.contiguous();
            bootValues.assign(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
        }
        std::vector<int64_t> actions(size_t(B * K));
        std::vector<float> prefix(size_t(B * K)), value(size_t(B * (K + 1))), policy(size_t(B * (K + 1) * A)),
            mask(size_t(B * (K + 1))), weights(static_cast<size_t>(B));
        size_t bi = 0;
        for (int b = 0; b < B; ++b) {
            const auto& t = tg[size_t(b)];
            for (int k = 0; k < K; ++k) {
                actions[size_t(b * K + k)] = t.actions[size_t(k)];
                prefix[size_t(b * K + k)] = t.valuePrefix[size_t(k)];
            }
            for (int k = 0; k <= K; ++k) {
                float z = t.valueRewardPart[size_t(k)];
                if (t.valueIndex[size_t(k)] >= 0) z += t.valueDiscount[size_t(k)] * bootValues[bi++];
                value[size_t(b * (K + 1) + k)] = z;
                mask[size_t(b * (K + 1) + k)] = t.mask[size_t(k)];
            }
            std::copy(t.policy.begin(), t.policy.end(), policy.begin() + long(b) * (K + 1) * A);
            weights[size_t(b)] = float(positions[size_t(b)].weight);
        }
        Batch batch;
        const int64_t in = int64_t(stack) * fs.channels;
        batch.obs = torch::from_blob(tObs.data(), {B, in, fs.height, fs.width});
        batch.nextObs = torch::from_blob(nextObsBuf.data(), {B, K, in, fs.height, fs.width});
        batch.actions = torch::from_blob(actions.data(), {B, K}, torch::kInt64);
        batch.valuePrefix = torch::from_blob(prefix.data(), {B, K});
        batch.value = torch::from_blob(value.data(), {B, K + 1});
        batch.policy = torch::from_blob(policy.data(), {B, K + 1, A});
        batch.mask = torch::from_blob(mask.data(), {B, K + 1});
        batch.weights = torch::from_blob(weights.data(), {B});

        const double lr = learningRate(cfg, n.updates);
        for (auto& group : opt.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
        net.train(true);
        auto terms = computeLoss(net, batch);
        opt.zero_grad();
        (terms.total / double(K)).backward();
        const double gradNorm = torch::nn::utils::clip_grad_norm_(net.parameters(), cfg.gradClip);
        opt.step();
        const Tensor pr = terms.priorities.to(torch::kFloat64).contiguous();
        replay.updatePriorities(positions, std::vector<double>(pr.data_ptr<double>(), pr.data_ptr<double>() + B));
        ++n.updates;

        const double total = terms.total.item<double>();
        if (!std::isfinite(total)) throw Error("efficientzero: the loss became " + std::to_string(total) + " at update " + std::to_string(n.updates));
        prog.latest["loss"] = total;
        prog.latest["lr"] = lr;
        if (n.updates % cfg.logInterval == 0 || n.updates == cfg.steps) {
            const double w = wallOffset + now();
            log.append("loss", n.updates, total, w);
            log.append("loss_value", n.updates, terms.value, w);
            log.append("loss_value_prefix", n.updates, terms.valuePrefix, w);
            log.append("loss_policy", n.updates, terms.policy, w);
            log.append("loss_consistency", n.updates, terms.consistency, w);
            log.append("lr", n.updates, lr, w);
            log.append("beta", n.updates, beta, w);
            log.append("grad_norm", n.updates, gradNorm, w);
            log.append("env_steps", n.updates, double(n.envSteps), w);
            log.append("replay_size", n.updates, double(replay.transitions()), w);
            const double dt = now() - lastRateTime;
            if (dt > 0) {
                const double ups = double(n.updates - lastRateUpdates) / dt, eps = double(n.envSteps - lastRateEnv) / dt;
                log.append("updates_per_s", n.updates, ups, w);
                log.append("env_steps_per_s", n.updates, eps, w);
                prog.latest["updates_per_s"] = ups;
                prog.latest["env_steps_per_s"] = eps;
            }
            lastRateTime = now();
            lastRateUpdates = n.updates;
            lastRateEnv = n.envSteps;
        }
        if (n.updates % cfg.targetUpdateInterval == 0) copyWeights(net, target);
        if (n.updates % cfg.selfPlayUpdateInterval == 0) copyWeights(net, actor);
        if (n.updates % cfg.checkpointInterval == 0 && n.updates < cfg.steps) writeCheckpoints();
    };

    try {
        while (n.updates < cfg.steps) {
            if (control && !control->checkpoint()) {
                result.stopped = true;
                break;
            }
            selfPlayStep();
            if (replay.transitions() >= cfg.minReplay) {
                if (envStepsAtFill < 0) envStepsAtFill = n.envSteps;
                // Replay ratio: after the buffer is filled, updates follow env steps.
                const int64_t due = startUpdates + int64_t(double(n.envSteps - envStepsAtFill + cfg.numEnvs) * cfg.updatesPerEnvStep);
                while (n.updates < cfg.steps && n.updates < due) {
                    learnStep();
                    if (control && control->stopRequested()) break;
                }
            }
            prog.step = n.updates;
            prog.phase = replay.transitions() >= cfg.minReplay ? "train" : "fill replay";
            prog.elapsed = now();
            prog.latest["env_steps"] = double(n.envSteps);
            prog.latest["replay_size"] = double(replay.transitions());
            const int64_t done = n.updates - startUpdates;
            prog.eta = done > 0 ? prog.elapsed / double(done) * double(cfg.steps - n.updates) : -1;
            if (progress) progress(prog);
        }
        writeCheckpoints();
        log.setEval("updates", torch::tensor(n.updates, torch::kInt64));
        log.setEval("env_steps", torch::tensor(n.envSteps, torch::kInt64));
        log.flush();
        if (result.stopped)
            log.stop("stopped at update " + std::to_string(n.updates) + "; --resume continues from its checkpoint");
        else
            log.finish();
    } catch (const std::exception& e) {
        log.fail(e.what());
        throw;
    }
    (void)startEnvSteps;
    result.updates = n.updates;
    result.envSteps = n.envSteps;
    result.episodes = n.episodes;
    result.seconds = now();
    return result;
}

// ---- evaluation ----------------------------------------------------------------------------

Network loadForEnv(const std::string& path, const rl::Env& env) {
    const Checkpoint ck = loadCheckpoint(path);
    if (ck.family != "efficientzero")
        throw Error(path + ": is a '" + ck.family + "' checkpoint, expected 'efficientzero'");
    nlohmann::json j = nlohmann::json::parse(ck.configJson, nullptr, false);
    if (j.is_discarded()) throw Error(path + ": the checkpoint's config is not valid JSON");
    Config c;
    try {
        c = Config::fromJson(j);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    if (c.numActions != env.numActions())
        throw Error(path + ": the checkpoint has " + std::to_string(c.numActions) + " actions, '" + env.name() + "' has " +
                    std::to_string(env.numActions()) + " (a checkpoint of another game?)");
    const auto s = env.observationShape();
    if (c.obsChannels != s.channels || c.obsHeight != s.height || c.obsWidth != s.width)
        throw Error(path + ": the checkpoint expects " + std::to_string(c.obsChannels) + "x" + std::to_string(c.obsHeight) +
                    "x" + std::to_string(c.obsWidth) + " observations, '" + env.name() + "' has " +
                    std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width));
    Network net(c);
    applyCheckpoint(ck, net.module(), "efficientzero", path);
    net.train(false);
    return net;
}

EvalResult evaluate(Network& net, const std::string& game, const EvalOptions& o, train::Control* control,
                    const train::ProgressFn& progress) {
    if (o.episodes < 1 || o.parallel < 1 || o.simulations < 1) throw Error("evaluate: episodes, parallel and simulations must be positive");
    if (!(o.temperature >= 0) || o.temperature > 100) throw Error("evaluate: temperature must be in [0, 100]");
    net.train(false);
    const Config& c = net.config();
    const int A = c.numActions, stack = c.stack;
    EvalResult out;
    out.returns.assign(size_t(o.episodes), 0.0);
    out.lengths.assign(size_t(o.episodes), 0);
    if (!o.recordDir.empty()) fs::create_directories(o.recordDir);
    rl::MctsConfig mc;
    mc.numSimulations = o.simulations;
    rl::Mcts mcts(mc, o.seed);
    std::mt19937_64 rng(o.seed);
    train::Progress prog;
    prog.totalSteps = o.episodes;
    prog.phase = "evaluate";
    const auto t0 = std::chrono::steady_clock::now();
    int finished = 0;

    struct Slot {
        int episode = -1;
        std::unique_ptr<rl::Env> env;
        std::vector<float> frames;  // history of single frames
        rl::Episode rec;
        std::vector<torch::Tensor> renders, observations;
        std::vector<int64_t> actions;
        std::vector<float> rewards, rootValues, value, valuePrefix, policy;
        std::vector<int32_t> lives, visits;
    };
    int next = 0;
    std::vector<Slot> slots;
    auto begin = [&](Slot& s) {
        s = Slot{};
        if (next >= o.episodes) return;
        s.episode = next++;
        s.env = rl::makeEnv(game, o.env);
        if (s.env->numActions() != A) throw Error("evaluate: '" + game + "' has " + std::to_string(s.env->numActions()) + " actions, the network " + std::to_string(A));
        s.env->reset(rl::episodeSeed(o.seed, s.episode, 0));
        s.frames = s.env->observation();
    };
    slots.resize(size_t(std::min(o.parallel, o.episodes)));
    for (auto& s : slots) begin(s);
    const rl::ObsShape fs = slots.front().env->observationShape();
    const int64_t fn = fs.numel(), sn = fn * stack;

    while (finished < o.episodes) {
        if (control && !control->checkpoint()) throw Error("evaluate: stopped");
        std::vector<int> active;
        for (size_t i = 0; i < slots.size(); ++i)
            if (slots[i].episode >= 0) active.push_back(int(i));
        std::vector<float> obs(active.size() * size_t(sn));
        for (size_t j = 0; j < active.size(); ++j) {
            const auto& s = slots[size_t(active[j])];
            const int64_t count = int64_t(s.frames.size()) / fn;
            for (int k = 0; k < stack; ++k) {
                const int64_t f = std::max<int64_t>(0, count - stack + k);
                std::copy(s.frames.begin() + f * fn, s.frames.begin() + (f + 1) * fn, obs.begin() + long(j) * sn + k * fn);
            }
        }
        const Tensor obsT = torch::from_blob(obs.data(), {int64_t(active.size()), int64_t(stack) * fs.channels, fs.height, fs.width});
        SearchAdapter adapter(net);
        const auto roots = adapter.start(obsT);
        const auto res = mcts.search(adapter, roots, o.noise);
        for (size_t j = 0; j < active.size(); ++j) {
            Slot& s = slots[size_t(active[j])];
            const int a = rl::selectAction(res.visitCounts[j], o.temperature, rng, res.rootQ[j]);
            const bool record = !o.recordDir.empty();
            if (record) {
                cv::Mat img = s.env->render(8);
                s.renders.push_back(torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kUInt8).clone());
                s.observations.push_back(torch::from_blob(s.frames.data() + (int64_t(s.frames.size()) - fn), {fs.channels, fs.height, fs.width}).clone());
                s.rootValues.push_back(res.rootValues[j]);
                s.value.push_back(roots[j].value);
                const auto& tree = mcts.tree(int(j));
                const auto& root = tree.front();
                float vp = 0.f;
                if (root.expanded() && tree[size_t(root.firstChild + a)].expanded()) vp = tree[size_t(root.firstChild + a)].valuePrefix;
                s.valuePrefix.push_back(vp);
                const Tensor pol = torch::softmax(torch::tensor(roots[j].policyLogits), 0);
                s.policy.insert(s.policy.end(), pol.data_ptr<float>(), pol.data_ptr<float>() + A);
                for (int v : res.visitCounts[j]) s.visits.push_back(v);
            }
            const auto step = s.env->step(a);
            out.returns[size_t(s.episode)] += step.reward;
            out.lengths[size_t(s.episode)] += 1;
            if (record) {
                s.actions.push_back(a);
                s.rewards.push_back(step.reward);
                s.lives.push_back(step.lives);
            }
            const auto o2 = s.env->observation();
            s.frames.insert(s.frames.end(), o2.begin(), o2.end());
            if (int64_t(s.frames.size()) > fn * stack * 4) s.frames.erase(s.frames.begin(), s.frames.begin() + fn * stack);
            if (step.done()) {
                if (record) {
                    rl::Episode e;
                    e.env = game;
                    e.seed = int64_t(rl::episodeSeed(o.seed, s.episode, 0));
                    e.frameSkip = o.env.frameSkip;
                    e.maxEpisodeSteps = o.env.maxEpisodeSteps;
                    e.stickyActionProb = o.env.stickyActionProb;
                    e.actionNames = s.env->actionNames();
                    e.channelNames = s.env->channelNames();
                    e.episodeReturn = out.returns[size_t(s.episode)];
                    e.terminal = step.terminal;
                    e.frames = torch::stack(s.renders);
                    e.observations = torch::stack(s.observations);
                    e.actions = torch::tensor(s.actions, torch::kInt64);
                    e.rewards = torch::tensor(s.rewards, torch::kFloat32);
                    e.lives = torch::tensor(s.lives, torch::kInt32);
                    e.hasModel = true;
                    e.model.family = "efficientzero";
                    e.model.checkpoint = o.checkpointPath;
                    e.model.config = c.toJson().dump();
                    e.model.simulations = o.simulations;
                    const int64_t T = e.length();
                    e.model.rootValues = torch::tensor(s.rootValues, torch::kFloat32);
                    e.model.visitCounts = torch::tensor(s.visits, torch::kInt32).reshape({T, A});
                    e.model.value = torch::tensor(s.value, torch::kFloat32);
                    e.model.valuePrefix = torch::tensor(s.valuePrefix, torch::kFloat32);
                    e.model.policy = torch::tensor(s.policy, torch::kFloat32).reshape({T, A});
                    char name[64];
                    std::snprintf(name, sizeof name, "episode_%04d.h5", s.episode);
                    const std::string path = (fs::path(o.recordDir) / name).string();
                    rl::writeEpisode(path, e);
                    out.recorded.push_back(path);
                }
                ++finished;
                begin(s);
                prog.step = finished;
                prog.elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                prog.eta = prog.elapsed / finished * (o.episodes - finished);
                if (progress) progress(prog);
            }
        }
    }
    out.stats = rl::summarize(out.returns, out.lengths);
    std::vector<double> norm;
    for (double r : out.returns) norm.push_back(rl::normalizedScore(game, r));
    double sum = 0;
    for (double v : norm) sum += v;
    out.normalizedMean = sum / double(norm.size());
    std::sort(norm.begin(), norm.end());
    const size_t m = norm.size();
    out.normalizedMedian = m % 2 ? norm[m / 2] : 0.5 * (norm[m / 2 - 1] + norm[m / 2]);
    std::sort(out.recorded.begin(), out.recorded.end());
    return out;
}

} // namespace glimpse::efficientzero
