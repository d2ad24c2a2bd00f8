#include "core/models/efficientzero/train.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>

#include "core/dist/dist.h"
#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/reanalyze.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/recorder.h"
#include "core/models/efficientzero/search.h"
#include "core/rl/mcts.h"
#include "core/rl/replay.h"
#include "core/runlog.h"
#include "core/train/loop.h"
#include "core/train/run.h"
#include "core/train/state.h"
#include "core/util/timing.h"

namespace glimpse::efficientzero {

using torch::Tensor;
namespace fs = std::filesystem;

// ---- config --------------------------------------------------------------------------------

nlohmann::json TrainConfig::toJson() const {
    return {{"env", env}, {"steps", steps}, {"seed", seed}, {"num_envs", numEnvs}, {"simulations", simulations},
            {"max_episode_steps", maxEpisodeSteps}, {"batch_size", batchSize}, {"unroll", unroll},
            {"td_steps", tdSteps}, {"discount", discount}, {"self_play_temperature", selfPlayTemperature},
            {"clip_rewards", clipRewards},
            {"life_loss_terminal", lifeLossTerminal}, {"policy_target", policyTarget},
            {"reanalyze_policy_ratio", reanalyzePolicyRatio}, {"sticky_action_prob", stickyActionProb},
            {"loss_weights", {{"value_prefix", lossWeights.valuePrefix}, {"policy", lossWeights.policy},
                              {"value", lossWeights.value}, {"consistency", lossWeights.consistency}}},
            {"lr", lr}, {"lr_final", lrFinal},
            {"lr_schedule", lrSchedule}, {"warmup_steps", warmupSteps}, {"momentum", momentum},
            {"weight_decay", weightDecay}, {"grad_clip", gradClip}, {"priority_alpha", priorityAlpha},
            {"priority_beta_start", priorityBetaStart}, {"replay_capacity", replayCapacity},
            {"min_replay", minReplay}, {"updates_per_env_step", updatesPerEnvStep},
            {"self_play_update_interval", selfPlayUpdateInterval}, {"target_update_interval", targetUpdateInterval},
            {"checkpoint_interval", checkpointInterval}, {"log_interval", logInterval}, {"round_moves", roundMoves},
            {"record_interval", recordInterval}, {"init", init}, {"network", network}};
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
    get("policy_target", c.policyTarget); get("reanalyze_policy_ratio", c.reanalyzePolicyRatio);
    get("lr_final", c.lrFinal); get("lr_schedule", c.lrSchedule); get("warmup_steps", c.warmupSteps);
    get("momentum", c.momentum); get("weight_decay", c.weightDecay); get("grad_clip", c.gradClip);
    get("priority_alpha", c.priorityAlpha); get("priority_beta_start", c.priorityBetaStart);
    get("replay_capacity", c.replayCapacity); get("min_replay", c.minReplay);
    get("updates_per_env_step", c.updatesPerEnvStep); get("self_play_update_interval", c.selfPlayUpdateInterval);
    get("target_update_interval", c.targetUpdateInterval); get("checkpoint_interval", c.checkpointInterval);
    get("log_interval", c.logInterval); get("round_moves", c.roundMoves); get("network", c.network);
    get("init", c.init); get("record_interval", c.recordInterval);
    get("sticky_action_prob", c.stickyActionProb);
    nlohmann::json weights = nlohmann::json::object();
    get("loss_weights", weights);
    for (auto it = weights.begin(); it != weights.end(); ++it) {
        double* field = it.key() == "value_prefix" ? &c.lossWeights.valuePrefix
                        : it.key() == "policy"     ? &c.lossWeights.policy
                        : it.key() == "value"      ? &c.lossWeights.value
                        : it.key() == "consistency" ? &c.lossWeights.consistency : nullptr;
        if (!field)
            throw Error("efficientzero train config: unknown key 'loss_weights." + it.key() +
                        "' (value_prefix, policy, value, consistency)");
        if (!it.value().is_number())
            throw Error("efficientzero train config: 'loss_weights." + it.key() + "' has the wrong type");
        *field = it.value().get<double>();
    }
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
    need(reanalyzePolicyRatio >= 0 && reanalyzePolicyRatio <= 1, "reanalyze_policy_ratio must be in [0, 1]");
    need(stickyActionProb >= 0 && stickyActionProb < 1, "sticky_action_prob must be in [0, 1)");
    for (double w : {lossWeights.valuePrefix, lossWeights.policy, lossWeights.value, lossWeights.consistency})
        need(w >= 0 && w <= 1000, "loss_weights must be in [0, 1000]");
    need(warmupSteps >= 0 && momentum >= 0 && momentum < 1 && weightDecay >= 0 && gradClip > 0, "bad optimizer settings");
    need(priorityAlpha >= 0 && priorityBetaStart >= 0 && priorityBetaStart <= 1, "bad priority exponents");
    need(replayCapacity >= 1 && minReplay >= 1 && minReplay <= replayCapacity, "min_replay must be in 1..replay_capacity");
    need(updatesPerEnvStep > 0 && updatesPerEnvStep <= 100, "updates_per_env_step must be in (0, 100]");
    need(selfPlayUpdateInterval >= 1 && targetUpdateInterval >= 1 && checkpointInterval >= 1 && logInterval >= 1,
         "intervals must be at least 1");
    need(roundMoves >= 1 && roundMoves <= 100000, "round_moves must be in 1..100000");
    need(recordInterval >= 0 && recordInterval <= 100000000, "record_interval must be in 0..1e8 (0: no recording)");
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

// ---- resumable state (state.h5, kind glimpse.ez_state; layout in docs/formats.md) ------------

namespace {

double learningRate(const TrainConfig& c, int64_t update) {
    if (update < c.warmupSteps) return c.lr * double(update + 1) / double(c.warmupSteps + 1);
    const double p = std::clamp(double(update - c.warmupSteps) / double(std::max<int64_t>(1, c.steps - c.warmupSteps)), 0.0, 1.0);
    if (c.lrSchedule == "step") return p < 0.5 ? c.lr : (p < 0.75 ? c.lr * 0.1 : c.lr * 0.01);
    return c.lrFinal + 0.5 * (c.lr - c.lrFinal) * (1.0 + std::cos(M_PI * p));
}

// The target and self-play networks are copies of the learner's (parameters and buffers).
void copyWeights(Network& src, Network& dst) {
    train::loadModuleTensors(dst.module(), train::moduleTensors(src.module()), "efficientzero network copy");
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

void writeOptimizer(h5::File& f, torch::optim::SGD& opt) {
    std::ostringstream bytes;
    torch::serialize::OutputArchive ar;
    opt.save(ar);
    ar.save_to(bytes);
    f.writeTensor("optimizer", bytesTensor(bytes.str()));
}
void readOptimizer(const h5::File& f, torch::optim::SGD& opt, const std::string& path) {
    const std::string bytes = tensorBytes(f.readTensor("optimizer", torch::kUInt8, {-1}));
    torch::serialize::InputArchive ar;
    try {
        ar.load_from(bytes.data(), bytes.size());
        opt.load(ar);
    } catch (const c10::Error& e) {
        throw Error(path + ": corrupt optimizer state");
    }
}

// The replay buffer's games concatenated: lengths, terminal flags, then per transition (frames
// per game: length + 1) in game order.
void writeReplay(h5::Group r, const rl::ReplayBuffer& replay) {
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
}

void readReplay(const h5::Group& r, const Config& netCfg, rl::ReplayBuffer& replay, const std::string& path) {
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
}

constexpr const char* kStateKind = "glimpse.ez_state";

struct Counters {
    int64_t updates = 0, envSteps = 0, episodes = 0;
    std::vector<int64_t> envEpisodes;  // per self-play environment: episodes started
};

// Everything the learner needs to continue a run exactly.
struct Learner {
    Network net, target, actor;
    torch::optim::SGD opt;
    rl::ReplayBuffer replay;
    Counters n;
    std::mt19937_64 rng;   // replay sampling and targets
};

void saveState(const std::string& path, const TrainConfig& cfg, const Config& netCfg, Learner& l,
               const ExtraObjective* extra) {
    h5::writeAtomically(path, kStateKind, 1, [&](h5::File& f) {
        if (extra) f.setAttr("extra_state", extra->state().dump());
        f.setAttr("train_config", cfg.toJson().dump());
        f.setAttr("network_config", netCfg.toJson().dump());
        f.setAttr("updates", l.n.updates);
        f.setAttr("env_steps", l.n.envSteps);
        f.setAttr("episodes", l.n.episodes);
        f.setAttr("rng", rngString(l.rng));
        f.setAttr("replay_total_added", l.replay.totalAdded());
        f.writeTensor("env_episodes", torch::tensor(l.n.envEpisodes, torch::kInt64));
        writeModule(f.createGroup("network"), l.net.module());
        writeModule(f.createGroup("target"), l.target.module());
        writeOptimizer(f, l.opt);
        writeReplay(f.createGroup("replay"), l.replay);
    });
}

void loadState(const std::string& path, const TrainConfig& cfg, const Config& netCfg, Learner& l, ExtraObjective* extra) {
    h5::File f = h5::openGlimpse(path, kStateKind, 1);
    if (extra) {
        if (!f.hasAttr("extra_state"))
            throw Error(path + ": the run was trained without offline tasks; it cannot resume with them");
        const auto st = nlohmann::json::parse(f.attrString("extra_state"), nullptr, false);
        if (st.is_discarded()) throw Error(path + ": corrupt extra_state attribute");
        extra->restore(st, path);
    }
    const auto saved = nlohmann::json::parse(f.attrString("train_config"), nullptr, false);
    if (saved.is_discarded() || !saved.is_object()) throw Error(path + ": corrupt train_config attribute");
    if (saved.value("env", "") != cfg.env)
        throw Error(path + ": the run was trained on '" + saved.value("env", "") + "', not '" + cfg.env + "'");
    if (f.attrString("network_config") != netCfg.toJson().dump())
        throw Error(path + ": the run's network config differs from this one");
    l.n.updates = f.attrInt("updates");
    l.n.envSteps = f.attrInt("env_steps");
    l.n.episodes = f.attrInt("episodes");
    rngFromString(l.rng, f.attrString("rng"), path);
    const Tensor envEp = f.readTensor("env_episodes", torch::kInt64, {-1});
    l.n.envEpisodes.assign(envEp.data_ptr<int64_t>(), envEp.data_ptr<int64_t>() + envEp.numel());
    if (!f.group("network").hasDataset("p/prediction_network.conv1x1_value.bias"))
        throw Error(path + ": this run was saved before the heads' 1x1 convolutions had biases (issue 52), so its "
                           "training state cannot be resumed; start a new run (its model.h5 still plays and "
                           "evaluates, with zero biases)");
    readModule(f.group("network"), l.net.module());
    readModule(f.group("target"), l.target.module());
    readOptimizer(f, l.opt, path);
    readReplay(f.group("replay"), netCfg, l.replay, path);
    l.replay.setTotalAdded(f.attrInt("replay_total_added"));
}

} // namespace

RunReplay readRunReplay(const std::string& runDir) {
    const std::string path = (fs::path(runDir) / "state.h5").string();
    if (!fs::exists(path)) throw Error(runDir + ": no state.h5 (not an EfficientZero run folder, or killed before its first checkpoint)");
    h5::File f = h5::openGlimpse(path, kStateKind, 1);
    const auto cfg = nlohmann::json::parse(f.attrString("train_config"), nullptr, false);
    const auto net = nlohmann::json::parse(f.attrString("network_config"), nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) throw Error(path + ": corrupt train_config attribute");
    if (net.is_discarded() || !net.is_object()) throw Error(path + ": corrupt network_config attribute");
    RunReplay r;
    try {
        r.config = TrainConfig::fromJson(cfg);
        r.network = Config::fromJson(net);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    rl::ReplayBuffer replay(rl::ReplayConfig{std::numeric_limits<int64_t>::max() / 4});
    readReplay(f.group("replay"), r.network, replay, path);
    r.games = replay.games();
    return r;
}

namespace {

const std::vector<std::string> kSeries = {
    "loss", "loss_value", "loss_value_prefix", "loss_policy", "loss_consistency", "lr", "beta", "grad_norm",
    "episode_return", "episode_length", "normalized_score", "env_steps", "env_steps_per_s", "updates_per_s",
    "replay_size"};

// Series whose step axis is environment steps (the others count learner updates).
bool countsEnvSteps(const std::string& series) {
    return series == "episode_return" || series == "episode_length" || series == "normalized_score";
}

} // namespace

// ---- training ------------------------------------------------------------------------------

namespace {

rl::ReplayConfig replayConfig(const TrainConfig& cfg) {
    rl::ReplayConfig rc;
    rc.capacity = cfg.replayCapacity;
    rc.alpha = cfg.priorityAlpha;
    rc.betaStart = cfg.priorityBetaStart;
    rc.unroll = cfg.unroll;
    rc.tdSteps = cfg.tdSteps;
    rc.discount = cfg.discount;
    return rc;
}

std::vector<std::unique_ptr<rl::Env>> makeEnvs(const TrainConfig& cfg) {
    rl::EnvOptions envOpts;
    envOpts.maxEpisodeSteps = cfg.maxEpisodeSteps;
    envOpts.stickyActionProb = float(cfg.stickyActionProb);
    std::vector<std::unique_ptr<rl::Env>> envs;
    for (int i = 0; i < cfg.numEnvs; ++i) envs.push_back(rl::makeEnv(cfg.env, envOpts));  // unknown game -> Error
    return envs;
}

// The learner of a new run: the three networks from the run's seed (learner first), SGD.
Learner newLearner(const TrainConfig& cfg, const Config& netCfg) {
    torch::manual_seed(cfg.seed);
    Network net(netCfg), target(netCfg), actor(netCfg);
    torch::optim::SGD opt(net.parameters(),
                          torch::optim::SGDOptions(cfg.lr).momentum(cfg.momentum).weight_decay(cfg.weightDecay));
    Learner l{net, target, actor, std::move(opt), rl::ReplayBuffer(replayConfig(cfg)), Counters{},
              std::mt19937_64(cfg.seed * 0x9E3779B97F4A7C15ull + 17)};
    l.n.envEpisodes.assign(size_t(cfg.numEnvs), 0);
    return l;
}

// ---- distributed self-play: what a self-play rank sends the learner each round -------------

// Finished games, the returns and lengths of the episodes that ended, the moves played, a
// stop request and the rank's rate; plus a checksum of the self-play network it used.
struct RoundReport {
    std::vector<rl::GameHistory> games;
    std::vector<std::pair<double, int64_t>> episodes;   // (return, length)
    int64_t envSteps = 0;
    bool stop = false;
    double envStepsPerSecond = 0;
    double weightsChecksum = 0;
};

class ByteWriter {
public:
    template <class T> void put(const T& v) { raw(&v, sizeof v); }
    template <class T> void vec(const std::vector<T>& v) {
        put(int64_t(v.size()));
        raw(v.data(), v.size() * sizeof(T));
    }
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
    }
    std::vector<uint8_t> bytes;
};

class ByteReader {
public:
    ByteReader(const uint8_t* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}
    template <class T> T get() {
        T v;
        raw(&v, sizeof v);
        return v;
    }
    template <class T> std::vector<T> vec(int64_t maxCount) {
        const int64_t n = get<int64_t>();
        if (n < 0 || n > maxCount || size_t(n) * sizeof(T) > n_ - at_) bad();
        std::vector<T> v(static_cast<size_t>(n));
        raw(v.data(), size_t(n) * sizeof(T));
        return v;
    }
    bool done() const { return at_ == n_; }

private:
    void raw(void* dst, size_t n) {
        if (n > n_ - at_) bad();
        std::memcpy(dst, p_ + at_, n);
        at_ += n;
    }
    [[noreturn]] void bad() const { throw Error(what_ + ": malformed self-play report"); }
    const uint8_t* p_;
    size_t n_, at_ = 0;
    std::string what_;
};

torch::Tensor encodeReport(const RoundReport& r) {
    ByteWriter w;
    w.put(uint32_t(0x45a7e001));   // format tag
    w.put(int64_t(r.games.size()));
    for (const auto& g : r.games) {
        w.put(int64_t(g.frame.channels));
        w.put(int64_t(g.frame.height));
        w.put(int64_t(g.frame.width));
        w.put(int64_t(g.numActions));
        w.put(uint8_t(g.terminal));
        w.put(uint8_t(g.done));
        w.vec(g.frames);
        w.vec(g.actions);
        w.vec(g.rewards);
        w.vec(g.rootValues);
        w.vec(g.policies);
    }
    w.put(int64_t(r.episodes.size()));
    for (const auto& [ret, len] : r.episodes) {
        w.put(ret);
        w.put(len);
    }
    w.put(r.envSteps);
    w.put(uint8_t(r.stop));
    w.put(r.envStepsPerSecond);
    w.put(r.weightsChecksum);
    return torch::from_blob(w.bytes.data(), {int64_t(w.bytes.size())}, torch::kUInt8).clone();
}

// Checks every size against the learner's own frame shape and action count.
RoundReport decodeReport(const torch::Tensor& bytes, const rl::ObsShape& frame, int numActions, const std::string& who) {
    const torch::Tensor b = bytes.contiguous();
    ByteReader in(b.data_ptr<uint8_t>(), size_t(b.numel()), who);
    if (in.get<uint32_t>() != 0x45a7e001) throw Error(who + ": malformed self-play report (format tag)");
    RoundReport r;
    const int64_t games = in.get<int64_t>();
    if (games < 0 || games > 1000000) throw Error(who + ": malformed self-play report (game count)");
    const int64_t fn = frame.numel(), kMax = int64_t(1) << 32;
    for (int64_t k = 0; k < games; ++k) {
        rl::GameHistory g;
        const int64_t c = in.get<int64_t>(), h = in.get<int64_t>(), wd = in.get<int64_t>(), a = in.get<int64_t>();
        if (c != frame.channels || h != frame.height || wd != frame.width || a != numActions)
            throw Error(who + ": a self-play game of another observation shape or action count");
        g.frame = frame;
        g.numActions = numActions;
        g.terminal = in.get<uint8_t>() != 0;
        g.done = in.get<uint8_t>() != 0;
        g.frames = in.vec<uint8_t>(kMax);
        g.actions = in.vec<int>(kMax);
        g.rewards = in.vec<float>(kMax);
        g.rootValues = in.vec<float>(kMax);
        g.policies = in.vec<float>(kMax);
        const int64_t T = int64_t(g.actions.size());
        if (T < 1 || int64_t(g.frames.size()) != (T + 1) * fn || int64_t(g.rewards.size()) != T ||
            int64_t(g.rootValues.size()) != T || int64_t(g.policies.size()) != T * numActions)
            throw Error(who + ": a self-play game with inconsistent lengths");
        for (int act : g.actions)
            if (act < 0 || act >= numActions) throw Error(who + ": a self-play game with an action outside 0.." + std::to_string(numActions - 1));
        r.games.push_back(std::move(g));
    }
    const int64_t eps = in.get<int64_t>();
    if (eps < 0 || eps > 1000000) throw Error(who + ": malformed self-play report (episode count)");
    for (int64_t k = 0; k < eps; ++k) {
        const double ret = in.get<double>();
        const int64_t len = in.get<int64_t>();
        r.episodes.emplace_back(ret, len);
    }
    r.envSteps = in.get<int64_t>();
    r.stop = in.get<uint8_t>() != 0;
    r.envStepsPerSecond = in.get<double>();
    r.weightsChecksum = in.get<double>();
    if (!in.done() || r.envSteps < 0) throw Error(who + ": malformed self-play report (trailing bytes)");
    return r;
}

// A cheap fingerprint of a network's weights: the learner checks that every self-play rank
// plays with the weights it broadcast.
// A sequential loop, so it does not depend on the number of threads.
double weightsChecksum(Network& net) {
    torch::NoGradGuard ng;
    double sum = 0;
    int64_t k = 0;
    for (const auto& p : net.module().parameters()) {
        const torch::Tensor t = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
        const float* d = t.data_ptr<float>();
        for (int64_t i = 0; i < t.numel(); ++i) sum += double(d[i]) * double(++k % 7919 + 1);
    }
    return sum;
}

// The learner's batch buffers: the Batch tensors view them until the next batch.
struct BatchBuffers {
    std::vector<float> obs, nextObs, bootObs;
    std::vector<int64_t> actions;
    std::vector<float> prefix, value, policy, mask, weights;
};

// One training run: self-play in cfg.numEnvs environments searched in one batch, and learner
// updates at the replay ratio once the buffer holds minReplay transitions.
class Trainer {
public:
    Trainer(const TrainConfig& cfg, const std::string& runDir, train::Control* control, const train::ProgressFn& progress,
            dist::Communicator* comm, ExtraObjective* extra);
    TrainResult run();

private:
    TrainResult runDistributed();
    void endRun(bool stopped);
    void receiveReports(const std::vector<torch::Tensor>& reports, TrainResult& result, bool& actorStop);
    void addGame(rl::GameHistory&& h);
    uint64_t episodeSeedBase() const;
    void resumeOrStart();
    void openLog(const RunLog& previous);
    void startHistory(int i);
    void startEpisode(int i);
    void selfPlayStep();
    void playMove(int i, const rl::SearchResult& res, double temperature, std::vector<float>& frame);
    void endEpisode(int i);
    void finishRecording(bool terminal);
    void trainAsDue();
    void learnStep();
    Batch sampleBatch(const std::vector<rl::SampledPosition>& positions);
    std::vector<float> reanalyze(const std::vector<std::pair<int, int>>& boot);
    Batch assembleBatch(const std::vector<rl::SampledPosition>& positions, const std::vector<rl::PositionTargets>& tg,
                        const std::vector<float>& bootValues);
    void logUpdate(const LossTerms& terms, double total, double lr, double beta, double gradNorm);
    void reportProgress();
    void writeCheckpoints();
    double wallTime() const { return wallOffset_ + rep_->elapsed(); }

    // CPU time per part of the loop (TrainResult::cpuSeconds), accumulated by scoped timers.
    enum Part { kSearch, kEnvironment, kTargets, kForward, kBackward, kOptimizer, kParts };
    std::array<double, kParts> partCpu_{};
    struct PartTimer {
        double& acc;
        double t0 = processCpuSeconds();
        ~PartTimer() { acc += processCpuSeconds() - t0; }
    };
    PartTimer timed(Part p) { return PartTimer{partCpu_[size_t(p)]}; }
    std::vector<std::pair<std::string, double>> cpuBreakdown(double total) const;

    const TrainConfig& cfg_;
    train::Control* control_;
    train::ProgressFn progress_;
    dist::Communicator* comm_ = nullptr;   // a distributed run (W > 1), else null
    ExtraObjective* extra_ = nullptr;      // loss terms added to the learner's (XTRA), else null
    int rank_ = 0, world_ = 1;
    bool selfPlayRank() const { return rank_ != 0; }
    // Rank 0: the self-play network's version (bumped at every copy from the learner) and the
    // checksum of the version last broadcast. Self-play ranks: what they send next.
    int64_t actorVersion_ = 0;
    double sentChecksum_ = 0;
    RoundReport outbox_;
    std::vector<double> rankRates_;   // rank 0: each rank's latest environment steps/s
    std::vector<std::unique_ptr<rl::Env>> envs_;
    Config netCfg_;
    rl::ObsShape frame_;
    int A_, stack_;
    int64_t stackNumel_;
    std::string statePath_, modelPath_, logPath_;
    Learner l_;

    std::optional<RunLogWriter> log_;
    double wallOffset_ = 0;   // wall time of the resumed run's last loss row
    std::optional<train::StepReporter> rep_;

    // Self-play.
    std::vector<rl::GameHistory> histories_;
    std::vector<double> episodeReturn_;   // the game's own rewards
    std::vector<int> episodeLength_, lives_;
    std::optional<rl::Mcts> mcts_;
    std::optional<rl::Mcts> reanalyzeMcts_;   // the learner's policy reanalyze (reanalyze_policy_ratio)
    // The roots' legal actions when the game has illegal ones (a shared-space game); else empty.
    std::vector<std::vector<int>> legal_;
    std::mt19937_64 actRng_;
    std::vector<float> obsBuf_;
    // Recorded self-play (record_interval): the recorder and the update from which the next
    // episode to start is recorded.
    std::string runDir_;
    std::optional<EpisodeRecorder> recorder_;
    int64_t nextRecord_ = 0, recorded_ = 0;

    // Learner pace and rates.
    int64_t startUpdates_ = 0;
    int64_t envStepsAtFill_ = -1;  // env steps when replay reached minReplay in this process
    double lastRateTime_ = 0;
    int64_t lastRateUpdates_ = 0, lastRateEnv_ = 0;
    BatchBuffers buf_;
};

Trainer::Trainer(const TrainConfig& cfg, const std::string& runDir, train::Control* control,
                 const train::ProgressFn& progress, dist::Communicator* comm, ExtraObjective* extra)
    : cfg_(cfg), control_(control), progress_(progress),
      comm_(comm && comm->worldSize() > 1 ? comm : nullptr), extra_(extra), rank_(comm_ ? comm_->rank() : 0),
      world_(comm_ ? comm_->worldSize() : 1), envs_(makeEnvs(cfg)),
      netCfg_(cpuNetwork(*envs_.front(), cfg.network)), frame_(envs_.front()->observationShape()),
      A_(netCfg_.numActions), stack_(netCfg_.stack), stackNumel_(int64_t(stack_) * frame_.numel()),
      statePath_((fs::path(runDir) / "state.h5").string()), modelPath_((fs::path(runDir) / "model.h5").string()),
      logPath_((fs::path(runDir) / "runlog.h5").string()), l_(newLearner(cfg, netCfg_)), runDir_(runDir) {
    rankRates_.assign(size_t(world_), 0.0);
    if (selfPlayRank()) {
        // Plays with the weights the learner broadcasts; writes nothing.
        l_.actor.train(false);
        nlohmann::json logConfig = cfg_.toJson();
        logConfig["family"] = "efficientzero";
        log_.emplace(RunLogWriter::memoryOnly(logConfig, kSeries));
    } else {
        fs::create_directories(runDir);
        train::removeStaleTemps(runDir);   // left by a run killed while writing a checkpoint
        resumeOrStart();
    }
    histories_.resize(size_t(cfg.numEnvs));
    episodeReturn_.assign(size_t(cfg.numEnvs), 0.0);
    episodeLength_.assign(size_t(cfg.numEnvs), 0);
    lives_.assign(size_t(cfg.numEnvs), 0);
    if (cfg.recordInterval > 0 && !selfPlayRank()) {
        recorder_.emplace(runDir, extra_ ? "xtra" : "efficientzero", cfg.env, netCfg_.toJson().dump(), cfg.simulations,
                          extra_ ? extra_->taskNames() : std::vector<std::string>{},
                          extra_ ? extra_->taskCategories() : std::vector<std::string>{});
        nextRecord_ = l_.n.updates;   // a new or resumed run records the first episode it starts
    }
    for (int i = 0; i < cfg.numEnvs; ++i) startEpisode(i);
    rl::MctsConfig mc;
    mc.numSimulations = cfg.simulations;
    mc.discount = cfg.discount;
    mcts_.emplace(mc, cfg.seed + uint64_t(l_.n.updates) * 7919 + 1 + uint64_t(rank_) * 0x51ed27);
    reanalyzeMcts_.emplace(mc, cfg.seed + uint64_t(l_.n.updates) * 6151 + 0x7a11);
    // The self-play and target networks only infer (eval mode, no gradients): with batch norms
    // folded into the convolutions they skip the normalization passes (refolded after each copy).
    l_.actor.setFoldedInference(true);
    l_.target.setFoldedInference(true);
    if (const auto legal = envs_.front()->legalActions(); int(legal.size()) < A_) legal_.assign(size_t(cfg.numEnvs), legal);
    actRng_.seed(cfg.seed + uint64_t(l_.n.envSteps) * 104729 + 3 + uint64_t(rank_) * 0x2545f491);
    obsBuf_.resize(size_t(cfg.numEnvs * stackNumel_));
    startUpdates_ = lastRateUpdates_ = l_.n.updates;
    lastRateEnv_ = l_.n.envSteps;
    rep_.emplace(*log_, progress_, cfg.steps, l_.n.updates);
}

// Resume: restore everything from state.h5 (the episodes that were running are not saved and
// start anew) and keep the old log's rows up to the checkpoint; else a new run.
void Trainer::resumeOrStart() {
    RunLog previous;
    if (fs::exists(statePath_)) {
        loadState(statePath_, cfg_, netCfg_, l_, extra_);
        if (int(l_.n.envEpisodes.size()) != cfg_.numEnvs) l_.n.envEpisodes.resize(size_t(cfg_.numEnvs), 0);
        previous = train::previousRunLog(logPath_);
        train::noteResumed(statePath_, l_.n.updates);
    } else {
        if (!cfg_.init.empty()) {
            Network init = loadForEnv(cfg_.init, *envs_.front());
            if (init.config().toJson() != netCfg_.toJson())
                throw Error(cfg_.init + ": its network (" + init.config().toJson().dump() + ") differs from this run's (" +
                            netCfg_.toJson().dump() + ")");
            copyWeights(init, l_.net);
        }
        copyWeights(l_.net, l_.target);
    }
    copyWeights(l_.net, l_.actor);
    l_.target.train(false);
    l_.actor.train(false);
    openLog(previous);
}

void Trainer::openLog(const RunLog& previous) {
    nlohmann::json logConfig = cfg_.toJson();
    logConfig["family"] = "efficientzero";
    logConfig["network_config"] = netCfg_.toJson();
    const Counters& n = l_.n;
    logConfig["world_size"] = world_;
    logConfig["throughput_unit"] = "env steps/s";   // dist/throughput_rank<r>: environment steps each rank plays
    std::vector<std::string> series = kSeries;
    for (const auto& d : dist::seriesNames(world_)) series.push_back(d);
    if (extra_) {
        for (const auto& x : extra_->series()) series.push_back(x);
        const nlohmann::json described = extra_->describe();
        for (auto it = described.begin(); it != described.end(); ++it) logConfig[it.key()] = it.value();
    }
    log_.emplace(train::openRunLog(logPath_, logConfig, series, previous, [&n](const std::string& series) {
        return countsEnvSteps(series) ? n.envSteps : n.updates;   // rows written after the checkpoint are dropped
    }));
    const auto loss = previous.series.find("loss");
    wallOffset_ = loss != previous.series.end() && loss->second.size() ? loss->second.wallTimes.back() : 0.0;
}

// A new game history starting from the environment's current frame (a new episode, or the same
// episode after a lost life when lifeLossTerminal).
void Trainer::startHistory(int i) {
    auto& h = histories_[size_t(i)];
    h = rl::GameHistory{};
    h.frame = frame_;
    h.numActions = A_;
    const auto obs = envs_[size_t(i)]->observation();
    h.addFrame(obs.data());
}

// One process (and the learner's numbering): the run's seed. A self-play rank of a distributed
// run: a base of its own that also differs between sittings of a resumed run (its episode
// counters are not saved), so no two ranks or sittings replay the same episodes.
uint64_t Trainer::episodeSeedBase() const {
    if (!selfPlayRank()) return cfg_.seed;
    return train::mixSeed(cfg_.seed, uint64_t(rank_), uint64_t(startUpdates_) + 1);
}

void Trainer::startEpisode(int i) {
    const uint64_t seed = rl::episodeSeed(episodeSeedBase(), i, l_.n.envEpisodes[size_t(i)]++);
    envs_[size_t(i)]->reset(seed);
    if (recorder_ && !recorder_->active() && l_.n.updates >= nextRecord_) {
        recorder_->begin(i, seed, *envs_[size_t(i)], cfg_.maxEpisodeSteps);
        nextRecord_ = (l_.n.updates / cfg_.recordInterval + 1) * cfg_.recordInterval;
    }
    episodeReturn_[size_t(i)] = 0;
    episodeLength_[size_t(i)] = 0;
    lives_[size_t(i)] = envs_[size_t(i)]->lives();
    startHistory(i);
}

void Trainer::selfPlayStep() {
    Tensor obs;
    {
        const auto t = timed(kEnvironment);
        for (int i = 0; i < cfg_.numEnvs; ++i)
            histories_[size_t(i)].stackedInto(histories_[size_t(i)].length(), stack_, obsBuf_.data() + i * stackNumel_);
        obs = torch::from_blob(obsBuf_.data(), {cfg_.numEnvs, int64_t(stack_) * frame_.channels, frame_.height, frame_.width});
    }
    rl::SearchResult res;
    {
        const auto t = timed(kSearch);
        res = searchBatch(l_.actor, *mcts_, obs, true, legal_);
    }
    const auto t = timed(kEnvironment);
    const double temp = selfPlayTemperature(cfg_, l_.n.updates);
    std::vector<float> frame(size_t(frame_.numel()));
    for (int i = 0; i < cfg_.numEnvs; ++i) playMove(i, res, temp, frame);
}

void Trainer::playMove(int i, const rl::SearchResult& res, double temperature, std::vector<float>& frame) {
    auto& env = *envs_[size_t(i)];
    auto& h = histories_[size_t(i)];
    const int a = rl::selectAction(res.visitCounts[size_t(i)], temperature, actRng_);
    const bool recording = recorder_ && recorder_->env() == i;
    if (recording)
        recorder_->beforeMove(env, res, size_t(i),
                              {l_.n.updates, l_.n.envSteps, extra_ ? extra_->taskWeightsNow() : std::vector<float>{}});
    const auto step = env.step(a);
    if (recording) recorder_->afterMove(a, step.reward, step.lives);
    episodeReturn_[size_t(i)] += step.reward;
    ++episodeLength_[size_t(i)];
    const float reward = cfg_.clipRewards ? float((step.reward > 0) - (step.reward < 0)) : step.reward;
    const bool lifeLost = cfg_.lifeLossTerminal && step.lives < lives_[size_t(i)];
    lives_[size_t(i)] = step.lives;
    h.actions.push_back(a);
    h.rewards.push_back(reward);
    h.rootValues.push_back(res.rootValues[size_t(i)]);
    const auto& target = cfg_.policyTarget == "visits" ? res.policies[size_t(i)] : res.improvedPolicies[size_t(i)];
    h.policies.insert(h.policies.end(), target.begin(), target.end());
    env.observationInto(frame.data());
    h.addFrame(frame.data());
    ++l_.n.envSteps;
    if (selfPlayRank()) ++outbox_.envSteps;
    if (!step.done() && lifeLost) {
        h.terminal = true;
        h.done = true;
        addGame(std::move(h));
        startHistory(i);
    } else if (step.done()) {
        h.terminal = step.terminal || lifeLost;
        h.done = true;
        if (recording) finishRecording(step.terminal);
        endEpisode(i);
    }
}

// A finished game history: into the replay, or on a self-play rank into the next report.
void Trainer::addGame(rl::GameHistory&& h) {
    if (selfPlayRank()) outbox_.games.push_back(std::move(h));
    else l_.replay.add(std::move(h));
}

void Trainer::endEpisode(int i) {
    const double ret = episodeReturn_[size_t(i)];
    const int len = episodeLength_[size_t(i)];
    addGame(std::move(histories_[size_t(i)]));
    ++l_.n.episodes;
    if (selfPlayRank()) {
        outbox_.episodes.emplace_back(ret, len);
        startEpisode(i);
        return;
    }
    const int64_t at = l_.n.envSteps;
    log_->append("episode_return", at, ret, wallTime());
    log_->append("episode_length", at, len, wallTime());
    log_->append("normalized_score", at, rl::normalizedScore(cfg_.env, ret), wallTime());
    rep_->setLatest("episode_return", ret);
    startEpisode(i);
}

// The recorded episode ended (or the run did: then it is saved as cut, when it has a step).
void Trainer::finishRecording(bool terminal) {
    if (!recorder_ || !recorder_->active() || recorder_->steps() == 0) return;
    recorder_->finish(terminal);
    rep_->setLatest("episodes_recorded", double(++recorded_));
}

// Replay ratio: once the buffer is filled, learner updates follow environment steps.
void Trainer::trainAsDue() {
    if (l_.replay.transitions() < cfg_.minReplay) return;
    if (envStepsAtFill_ < 0) envStepsAtFill_ = l_.n.envSteps;
    const int64_t due =
        startUpdates_ + int64_t(double(l_.n.envSteps - envStepsAtFill_ + cfg_.numEnvs) * cfg_.updatesPerEnvStep);
    while (l_.n.updates < cfg_.steps && l_.n.updates < due) {
        learnStep();
        if (control_ && control_->stopRequested()) break;
    }
}

// The stacked observations of the sampled positions and the K following ones, and the n-step
// targets; bootstrap values are reanalyzed by the target network.
Batch Trainer::sampleBatch(const std::vector<rl::SampledPosition>& positions) {
    const int B = cfg_.batchSize, K = cfg_.unroll;
    std::vector<rl::PositionTargets> tg;
    tg.reserve(size_t(B));
    buf_.obs.assign(size_t(B * stackNumel_), 0.f);
    buf_.nextObs.assign(size_t(B * K * stackNumel_), 0.f);
    std::vector<std::pair<int, int>> boot;  // (game, step) whose value is reanalyzed
    for (int b = 0; b < B; ++b) {
        const auto& p = positions[size_t(b)];
        const auto& g = l_.replay.games()[size_t(p.game)];
        tg.push_back(l_.replay.targets(p.game, p.pos, l_.rng));
        g.stackedInto(p.pos, stack_, buf_.obs.data() + b * stackNumel_);
        for (int k = 0; k < K; ++k)
            g.stackedInto(std::min(p.pos + k + 1, g.length()), stack_, buf_.nextObs.data() + (int64_t(b) * K + k) * stackNumel_);
        for (int idx : tg.back().valueIndex)
            if (idx >= 0) boot.emplace_back(p.game, idx);
    }
    if (cfg_.reanalyzePolicyRatio > 0) {
        PolicyReanalyzeOptions o;
        o.ratio = cfg_.reanalyzePolicyRatio;
        o.stack = stack_;
        o.policyTarget = cfg_.policyTarget;
        if (!legal_.empty()) o.legalActions = legal_.front();
        reanalyzePolicyTargets(l_.target, *reanalyzeMcts_, l_.replay, positions, tg, o);
    }
    return assembleBatch(positions, tg, reanalyze(boot));
}

// The target network's value of every bootstrap observation.
std::vector<float> Trainer::reanalyze(const std::vector<std::pair<int, int>>& boot) {
    std::vector<float> bootValues;
    if (boot.empty()) return bootValues;
    buf_.bootObs.assign(boot.size() * size_t(stackNumel_), 0.f);
    for (size_t j = 0; j < boot.size(); ++j)
        l_.replay.games()[size_t(boot[j].first)].stackedInto(boot[j].second, stack_, buf_.bootObs.data() + int64_t(j) * stackNumel_);
    torch::NoGradGuard ng;
    const Tensor obs = torch::from_blob(buf_.bootObs.data(),
                                        {int64_t(boot.size()), int64_t(stack_) * frame_.channels, frame_.height, frame_.width});
    const Tensor v = l_.target.initialInference(obs).value.contiguous();
    bootValues.assign(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
    return bootValues;
}

Batch Trainer::assembleBatch(const std::vector<rl::SampledPosition>& positions, const std::vector<rl::PositionTargets>& tg,
                             const std::vector<float>& bootValues) {
    const int B = cfg_.batchSize, K = cfg_.unroll, A = A_;
    buf_.actions.assign(size_t(B * K), 0);
    buf_.prefix.assign(size_t(B * K), 0.f);
    buf_.value.assign(size_t(B * (K + 1)), 0.f);
    buf_.policy.assign(size_t(B * (K + 1) * A), 0.f);
    buf_.mask.assign(size_t(B * (K + 1)), 0.f);
    buf_.weights.assign(size_t(B), 0.f);
    size_t bi = 0;
    for (int b = 0; b < B; ++b) {
        const auto& t = tg[size_t(b)];
        for (int k = 0; k < K; ++k) {
            buf_.actions[size_t(b * K + k)] = t.actions[size_t(k)];
            buf_.prefix[size_t(b * K + k)] = t.valuePrefix[size_t(k)];
        }
        for (int k = 0; k <= K; ++k) {
            float z = t.valueRewardPart[size_t(k)];
            if (t.valueIndex[size_t(k)] >= 0) z += t.valueDiscount[size_t(k)] * bootValues[bi++];
            buf_.value[size_t(b * (K + 1) + k)] = z;
            buf_.mask[size_t(b * (K + 1) + k)] = t.mask[size_t(k)];
        }
        std::copy(t.policy.begin(), t.policy.end(), buf_.policy.begin() + long(b) * (K + 1) * A);
        buf_.weights[size_t(b)] = float(positions[size_t(b)].weight);
    }
    Batch batch;
    const int64_t in = int64_t(stack_) * frame_.channels;
    batch.obs = torch::from_blob(buf_.obs.data(), {B, in, frame_.height, frame_.width});
    batch.nextObs = torch::from_blob(buf_.nextObs.data(), {B, K, in, frame_.height, frame_.width});
    batch.actions = torch::from_blob(buf_.actions.data(), {B, K}, torch::kInt64);
    batch.valuePrefix = torch::from_blob(buf_.prefix.data(), {B, K});
    batch.value = torch::from_blob(buf_.value.data(), {B, K + 1});
    batch.policy = torch::from_blob(buf_.policy.data(), {B, K + 1, A});
    batch.mask = torch::from_blob(buf_.mask.data(), {B, K + 1});
    batch.weights = torch::from_blob(buf_.weights.data(), {B});
    return batch;
}

// One learner update: sample, loss, SGD step, new priorities; then logs, network copies and
// checkpoints as their intervals come due.
void Trainer::learnStep() {
    Counters& n = l_.n;
    const double beta = l_.replay.beta(double(n.updates) / double(cfg_.steps));
    std::vector<rl::SampledPosition> positions;
    Batch batch;
    {
        const auto t = timed(kTargets);
        positions = l_.replay.sample(cfg_.batchSize, beta, l_.rng);
        batch = sampleBatch(positions);
    }
    const double lr = learningRate(cfg_, n.updates);
    for (auto& group : l_.opt.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
    LossTerms terms;
    Tensor objective;
    std::map<std::string, double> extraMetrics;
    {
        const auto t = timed(kForward);
        l_.net.train(true);
        terms = computeLoss(l_.net, batch, cfg_.lossWeights);
        objective = terms.total;
        if (extra_) objective = objective + extra_->loss(l_.net, terms.total, n.updates, extraMetrics);
    }
    {
        const auto t = timed(kBackward);
        l_.opt.zero_grad();
        (objective / double(cfg_.unroll)).backward();
    }
    double gradNorm = 0;
    {
        const auto t = timed(kOptimizer);
        gradNorm = torch::nn::utils::clip_grad_norm_(l_.net.parameters(), cfg_.gradClip);
        l_.opt.step();
        const Tensor pr = terms.priorities.to(torch::kFloat64).contiguous();
        l_.replay.updatePriorities(positions,
                                   std::vector<double>(pr.data_ptr<double>(), pr.data_ptr<double>() + cfg_.batchSize));
    }
    ++n.updates;

    const double total = terms.total.item<double>();
    if (!std::isfinite(total))
        throw Error("efficientzero: the loss became " + std::to_string(total) + " at update " + std::to_string(n.updates));
    rep_->setLatest("loss", total);
    for (const auto& [k, v] : extraMetrics) {   // XTRA: every update (task weights, losses, similarities)
        log_->append(k, n.updates, v, wallTime());
        rep_->setLatest(k, v);
    }
    rep_->setLatest("lr", lr);
    if (n.updates % cfg_.logInterval == 0 || n.updates == cfg_.steps) logUpdate(terms, total, lr, beta, gradNorm);
    if (n.updates % cfg_.targetUpdateInterval == 0) copyWeights(l_.net, l_.target);
    if (n.updates % cfg_.selfPlayUpdateInterval == 0) {
        copyWeights(l_.net, l_.actor);
        ++actorVersion_;
    }
    if (n.updates % cfg_.checkpointInterval == 0 && n.updates < cfg_.steps) writeCheckpoints();
}

void Trainer::logUpdate(const LossTerms& terms, double total, double lr, double beta, double gradNorm) {
    const Counters& n = l_.n;
    const double w = wallTime();
    log_->append("loss", n.updates, total, w);
    log_->append("loss_value", n.updates, terms.value, w);
    log_->append("loss_value_prefix", n.updates, terms.valuePrefix, w);
    log_->append("loss_policy", n.updates, terms.policy, w);
    log_->append("loss_consistency", n.updates, terms.consistency, w);
    log_->append("lr", n.updates, lr, w);
    log_->append("beta", n.updates, beta, w);
    log_->append("grad_norm", n.updates, gradNorm, w);
    log_->append("env_steps", n.updates, double(n.envSteps), w);
    log_->append("replay_size", n.updates, double(l_.replay.transitions()), w);
    const double dt = rep_->elapsed() - lastRateTime_;
    if (dt > 0) {
        const double ups = double(n.updates - lastRateUpdates_) / dt, eps = double(n.envSteps - lastRateEnv_) / dt;
        log_->append("updates_per_s", n.updates, ups, w);
        log_->append("env_steps_per_s", n.updates, eps, w);
        rep_->setLatest("updates_per_s", ups);
        rep_->setLatest("env_steps_per_s", eps);
    }
    lastRateTime_ = rep_->elapsed();
    lastRateUpdates_ = n.updates;
    lastRateEnv_ = n.envSteps;
}

void Trainer::reportProgress() {
    rep_->setLatest("env_steps", double(l_.n.envSteps));
    rep_->setLatest("replay_size", double(l_.replay.transitions()));
    rep_->advance(l_.n.updates, l_.replay.transitions() >= cfg_.minReplay ? "train" : "fill replay");
}

void Trainer::writeCheckpoints() {
    // Rows up to this update reach the log before the state does: a kill right after the
    // checkpoint must not leave a resumed log with a gap (docs/crash-safety.md).
    log_->flush();
    saveCheckpoint(modelPath_, checkpointFromModule(l_.net.module(), "efficientzero", netCfg_.toJson().dump()));
    saveState(statePath_, cfg_, netCfg_, l_, extra_);
}

// The last checkpoint, the final counters and the log's end (stopped: resumable).
void Trainer::endRun(bool stopped) {
    finishRecording(false);
    writeCheckpoints();
    log_->setEval("updates", torch::tensor(l_.n.updates, torch::kInt64));
    log_->setEval("env_steps", torch::tensor(l_.n.envSteps, torch::kInt64));
    log_->flush();
    if (stopped)
        log_->stop("stopped at update " + std::to_string(l_.n.updates) + "; --resume continues from its checkpoint");
    else
        log_->finish();
}

TrainResult Trainer::run() {
    if (comm_) return runDistributed();
    TrainResult result;
    const double cpu0 = processCpuSeconds();
    try {
        while (l_.n.updates < cfg_.steps) {
            if (control_ && !control_->checkpoint()) {
                result.stopped = true;
                break;
            }
            selfPlayStep();
            trainAsDue();
            reportProgress();
        }
        result.cpuSeconds = cpuBreakdown(processCpuSeconds() - cpu0);
        for (const auto& [part, sec] : result.cpuSeconds) log_->setEval("cpu_seconds/" + part, torch::tensor(sec, torch::kFloat64));
        endRun(result.stopped);
    } catch (const std::exception& e) {
        log_->fail(e.what());
        throw;
    }
    result.updates = l_.n.updates;
    result.envSteps = l_.n.envSteps;
    result.episodes = l_.n.episodes;
    result.seconds = rep_->elapsed();
    return result;
}

std::vector<std::pair<std::string, double>> Trainer::cpuBreakdown(double total) const {
    static const char* names[kParts] = {"search", "environment", "targets", "forward", "backward", "optimizer"};
    std::vector<std::pair<std::string, double>> out;
    double parts = 0;
    for (int p = 0; p < kParts; ++p) {
        out.emplace_back(names[p], partCpu_[size_t(p)]);
        parts += partCpu_[size_t(p)];
    }
    out.emplace_back("other", std::max(0.0, total - parts));
    return out;
}

// Rank 0's side of a round's reports: games into the replay, episodes into the log.
void Trainer::receiveReports(const std::vector<torch::Tensor>& reports, TrainResult& result, bool& actorStop) {
    for (int r = 1; r < world_; ++r) {
        const std::string who = comm_->settings().describe() + ", report of rank " + std::to_string(r);
        RoundReport rep = decodeReport(reports[size_t(r)], frame_, A_, who);
        if (rep.weightsChecksum != sentChecksum_)
            throw Error(who + ": it played with other weights than the ones broadcast");
        for (auto& g : rep.games) {
            l_.replay.add(std::move(g));
            ++result.gamesReceived;
        }
        l_.n.envSteps += rep.envSteps;
        for (const auto& [ret, len] : rep.episodes) {
            ++l_.n.episodes;
            log_->append("episode_return", l_.n.envSteps, ret, wallTime());
            log_->append("episode_length", l_.n.envSteps, double(len), wallTime());
            log_->append("normalized_score", l_.n.envSteps, rl::normalizedScore(cfg_.env, ret), wallTime());
            rep_->setLatest("episode_return", ret);
        }
        rankRates_[size_t(r)] = rep.envStepsPerSecond;
        actorStop = actorStop || rep.stop;
    }
}

// Lockstep rounds (docs/distributed.md "EfficientZero"): rank 0 broadcasts whether to go on
// and, when they changed, the self-play weights; the self-play ranks play roundMoves moves
// while the learner trains on what it has; then every self-play rank's finished games go to
// the learner. The learner trains only as many updates as the replay ratio allows for the
// environment steps received so far, so the ratio is the one-process run's.
TrainResult Trainer::runDistributed() {
    TrainResult result;
    result.rank = rank_;
    result.worldSize = world_;
    int64_t sentVersion = -1;
    int64_t playedBefore = l_.n.envSteps;
    auto lastRound = std::chrono::steady_clock::now();
    bool actorStop = false;
    try {
        while (true) {
            torch::Tensor ctrl = torch::zeros({3}, torch::kFloat64);
            if (!selfPlayRank()) {
                const bool stop = actorStop || (control_ && !control_->checkpoint());
                if (stop) result.stopped = true;
                ctrl[0] = l_.n.updates < cfg_.steps && !stop ? 1.0 : 0.0;
                ctrl[1] = double(l_.n.updates);
                ctrl[2] = actorVersion_ != sentVersion ? 1.0 : 0.0;
            }
            std::vector<torch::Tensor> c{ctrl};
            comm_->broadcast(c);
            ctrl = c[0];
            if (selfPlayRank()) l_.n.updates = int64_t(ctrl[1].item<double>());   // the temperature schedule follows the learner
            if (ctrl[2].item<double>() != 0) {
                dist::broadcastModule(comm_, l_.actor.module());
                if (!selfPlayRank()) {
                    sentVersion = actorVersion_;
                    ++result.weightBroadcasts;
                }
                sentChecksum_ = weightsChecksum(l_.actor);
            }
            if (ctrl[0].item<double>() == 0) {
                if (selfPlayRank()) result.stopped = l_.n.updates < cfg_.steps;
                break;
            }
            if (selfPlayRank()) {
                for (int m = 0; m < cfg_.roundMoves; ++m) selfPlayStep();
                const auto now = std::chrono::steady_clock::now();
                const double dt = std::chrono::duration<double>(now - lastRound).count();
                outbox_.envStepsPerSecond = dt > 0 ? double(l_.n.envSteps - playedBefore) / dt : 0.0;
                lastRound = now;
                playedBefore = l_.n.envSteps;
                outbox_.stop = control_ && !control_->checkpoint();
                outbox_.weightsChecksum = sentChecksum_;
                rep_->setLatest("env_steps", double(l_.n.envSteps));
                rep_->advance(l_.n.updates, "self-play");
            } else {
                trainAsDue();   // while the self-play ranks play this round
            }
            const auto reports = comm_->gatherBytes(selfPlayRank() ? encodeReport(outbox_) : torch::zeros({0}, torch::kUInt8));
            if (selfPlayRank()) {
                result.playedGames += int64_t(outbox_.games.size());
                outbox_ = RoundReport{};
            } else {
                receiveReports(reports, result, actorStop);
                for (int r = 1; r < world_; ++r)
                    rep_->setLatest("dist/throughput_rank" + std::to_string(r), rankRates_[size_t(r)]);
                if (l_.n.updates > 0 && l_.n.updates % cfg_.logInterval == 0) {
                    log_->append("dist/world_size", l_.n.updates, double(world_), wallTime());
                    for (int r = 0; r < world_; ++r)
                        log_->append("dist/throughput_rank" + std::to_string(r), l_.n.updates, rankRates_[size_t(r)], wallTime());
                }
                reportProgress();
            }
        }
        if (!selfPlayRank()) endRun(result.stopped);
    } catch (const std::exception& e) {
        if (!log_->closed()) log_->fail(e.what());
        throw;
    }
    result.updates = l_.n.updates;
    result.envSteps = l_.n.envSteps;
    result.episodes = l_.n.episodes;
    result.playedSteps = selfPlayRank() ? l_.n.envSteps : 0;
    result.seconds = rep_->elapsed();
    return result;
}

} // namespace

TrainResult trainAgent(const TrainConfig& cfg, const std::string& runDir, train::Control* control,
                       const train::ProgressFn& progress, dist::Communicator* comm, ExtraObjective* extra) {
    cfg.validate();
    if (cfg.recordInterval > 0 && comm && comm->worldSize() > 1)
        throw Error("efficientzero: record_interval records self-play in the learner's process; in a distributed run the "
                    "learner plays no games (set record_interval to 0, or record with one process)");
    return Trainer(cfg, runDir, control, progress, comm, extra).run();
}

std::string cpuBreakdownText(const std::vector<std::pair<std::string, double>>& cpuSeconds) {
    double total = 0;
    for (const auto& [part, sec] : cpuSeconds) total += sec;
    std::string out;
    for (const auto& [part, sec] : cpuSeconds) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s %.0f%% (%.1f s)", out.empty() ? "" : ", ", part.c_str(),
                      total > 0 ? 100.0 * sec / total : 0.0, sec);
        out += buf;
    }
    return out;
}

} // namespace glimpse::efficientzero
