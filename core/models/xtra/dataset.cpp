#include "core/models/xtra/dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/search.h"
#include "core/models/efficientzero/train.h"
#include "core/rl/mcts.h"
#include "core/rl/score.h"

namespace glimpse::xtra {

namespace fs = std::filesystem;
using torch::Tensor;

int64_t OfflineDataset::transitions() const {
    int64_t n = 0;
    for (const auto& g : games) n += g.length();
    return n;
}

namespace {

template <typename T>
Tensor vecTensor(const std::vector<T>& v, torch::ScalarType type) {
    return torch::from_blob(const_cast<T*>(v.data()), {int64_t(v.size())}, type).clone();
}

nlohmann::json envOptionsJson(const rl::EnvOptions& o) {
    return {{"max_episode_steps", o.maxEpisodeSteps}, {"sticky_action_prob", o.stickyActionProb}, {"frame_skip", o.frameSkip}};
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

nlohmann::json parseAttr(const h5::File& f, const std::string& name, const std::string& path) {
    const auto j = nlohmann::json::parse(f.attrString(name), nullptr, false);
    if (j.is_discarded()) throw Error(path + ": attribute '" + name + "' is not valid JSON");
    return j;
}

std::vector<std::string> stringList(const nlohmann::json& j, const std::string& what, const std::string& path) {
    if (!j.is_array()) throw Error(path + ": " + what + " is not a list");
    std::vector<std::string> v;
    for (const auto& x : j) {
        if (!x.is_string()) throw Error(path + ": " + what + " holds a non-string");
        v.push_back(x.get<std::string>());
    }
    return v;
}

} // namespace

void writeDataset(const std::string& path, const OfflineDataset& d) {
    if (d.games.empty()) throw Error(path + ": refusing to write an empty dataset");
    std::vector<int64_t> lengths;
    std::vector<uint8_t> terminal, frames;
    std::vector<int64_t> actions;
    std::vector<float> rewards;
    for (const auto& g : d.games) {
        lengths.push_back(g.length());
        terminal.push_back(g.terminal ? 1 : 0);
        frames.insert(frames.end(), g.frames.begin(), g.frames.end());
        actions.insert(actions.end(), g.actions.begin(), g.actions.end());
        rewards.insert(rewards.end(), g.rewards.begin(), g.rewards.end());
    }
    std::vector<float> eps = d.epsilon;
    eps.resize(d.games.size(), -1.f);
    h5::writeAtomically(path, kDatasetKind, kDatasetVersion, [&](h5::File& f) {
        f.setAttr("env", d.env);
        f.setAttr("source", d.source);
        f.setAttr("policy", d.policy.dump());
        f.setAttr("env_options", envOptionsJson(d.envOptions).dump());
        f.setAttr("action_names", nlohmann::json(d.actionNames).dump());
        f.setAttr("channel_names", nlohmann::json(d.channelNames).dump());
        f.setAttr("frame_shape", nlohmann::json({d.frame.channels, d.frame.height, d.frame.width}).dump());
        f.setAttr("rewards_clipped", int64_t(d.rewardsClipped));
        f.setAttr("life_loss_split", int64_t(d.lifeLossSplit));
        h5::WriteOptions gz{h5::Compression::Gzip, 4};
        f.writeTensor("lengths", vecTensor(lengths, torch::kInt64));
        f.writeTensor("terminal", vecTensor(terminal, torch::kUInt8));
        f.writeTensor("epsilon", vecTensor(eps, torch::kFloat32));
        f.writeTensor("frames", vecTensor(frames, torch::kUInt8), gz);
        f.writeTensor("actions", vecTensor(actions, torch::kInt64), gz);
        f.writeTensor("rewards", vecTensor(rewards, torch::kFloat32), gz);
        f.writeTensor("episode_returns", vecTensor(d.episodeReturns, torch::kFloat64));
        f.writeTensor("episode_lengths", vecTensor(d.episodeLengths, torch::kInt64));
    });
}

OfflineDataset readDataset(const std::string& path) {
    h5::File f = h5::openGlimpse(path, kDatasetKind, kDatasetVersion);
    OfflineDataset d;
    d.env = f.attrString("env");
    if (!rl::isKnownEnv(d.env)) throw Error(path + ": dataset of an unknown game '" + d.env + "'");
    d.source = f.attrString("source");
    d.policy = parseAttr(f, "policy", path);
    const auto opts = parseAttr(f, "env_options", path);
    try {
        d.envOptions.maxEpisodeSteps = opts.at("max_episode_steps").get<int>();
        d.envOptions.stickyActionProb = opts.at("sticky_action_prob").get<float>();
        d.envOptions.frameSkip = opts.at("frame_skip").get<int>();
    } catch (const nlohmann::json::exception&) {
        throw Error(path + ": malformed env_options attribute");
    }
    d.actionNames = stringList(parseAttr(f, "action_names", path), "action_names", path);
    d.channelNames = stringList(parseAttr(f, "channel_names", path), "channel_names", path);
    const auto shape = parseAttr(f, "frame_shape", path);
    if (!shape.is_array() || shape.size() != 3 || !shape[0].is_number_integer() || !shape[1].is_number_integer() ||
        !shape[2].is_number_integer())
        throw Error(path + ": malformed frame_shape attribute");
    d.frame = {shape[0].get<int>(), shape[1].get<int>(), shape[2].get<int>()};
    d.rewardsClipped = f.attrInt("rewards_clipped") != 0;
    d.lifeLossSplit = f.attrInt("life_loss_split") != 0;

    // The game as this Glimpse has it.
    const auto env = rl::makeEnv(d.env);
    const auto s = env->observationShape();
    if (d.actionNames != env->actionNames() || d.channelNames != env->channelNames() || s.channels != d.frame.channels ||
        s.height != d.frame.height || s.width != d.frame.width)
        throw Error(path + ": made with another version of '" + d.env + "': its actions [" + joined(d.actionNames) +
                    "] and " + std::to_string(d.frame.channels) + "x" + std::to_string(d.frame.height) + "x" +
                    std::to_string(d.frame.width) + " frames of [" + joined(d.channelNames) + "] differ from this game's [" +
                    joined(env->actionNames()) + "], " + std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
                    std::to_string(s.width) + " of [" + joined(env->channelNames()) + "]");

    const Tensor lengths = f.readTensor("lengths", torch::kInt64, {-1});
    const int64_t G = lengths.numel();
    if (G == 0) throw Error(path + ": the dataset is empty (no game histories)");
    const int64_t* lp = lengths.data_ptr<int64_t>();
    int64_t T = 0;
    for (int64_t g = 0; g < G; ++g) {
        if (lp[g] < 1 || lp[g] > 100'000'000) throw Error(path + ": game history " + std::to_string(g) + " has length " + std::to_string(lp[g]));
        T += lp[g];
    }
    const int64_t fn = d.frame.numel();
    const Tensor terminal = f.readTensor("terminal", torch::kUInt8, {G});
    const Tensor eps = f.readTensor("epsilon", torch::kFloat32, {G});
    const Tensor frames = f.readTensor("frames", torch::kUInt8, {(T + G) * fn});
    const Tensor actions = f.readTensor("actions", torch::kInt64, {T});
    const Tensor rewards = f.readTensor("rewards", torch::kFloat32, {T});
    const Tensor rets = f.readTensor("episode_returns", torch::kFloat64, {-1});
    const Tensor lens = f.readTensor("episode_lengths", torch::kInt64, {rets.numel()});
    const int A = d.numActions();
    const int64_t* ap = actions.data_ptr<int64_t>();
    for (int64_t i = 0; i < T; ++i)
        if (ap[i] < 0 || ap[i] >= A)
            throw Error(path + ": action " + std::to_string(ap[i]) + " at transition " + std::to_string(i) + " is outside '" +
                        d.env + "''s " + std::to_string(A) + " actions");
    const float* rp = rewards.data_ptr<float>();
    for (int64_t i = 0; i < T; ++i)
        if (!std::isfinite(rp[i])) throw Error(path + ": reward at transition " + std::to_string(i) + " is not finite");
    int64_t off = 0, foff = 0;
    for (int64_t g = 0; g < G; ++g) {
        const int64_t L = lp[g];
        rl::GameHistory h;
        h.frame = d.frame;
        h.numActions = A;
        h.terminal = terminal[g].item<uint8_t>() != 0;
        h.done = true;
        const uint8_t* fp = frames.data_ptr<uint8_t>() + foff * fn;
        h.frames.assign(fp, fp + (L + 1) * fn);
        h.actions.assign(ap + off, ap + off + L);
        h.rewards.assign(rp + off, rp + off + L);
        d.games.push_back(std::move(h));
        off += L;
        foff += L + 1;
    }
    d.epsilon.assign(eps.data_ptr<float>(), eps.data_ptr<float>() + G);
    d.episodeReturns.assign(rets.data_ptr<double>(), rets.data_ptr<double>() + rets.numel());
    d.episodeLengths.assign(lens.data_ptr<int64_t>(), lens.data_ptr<int64_t>() + lens.numel());
    return d;
}

void DatasetSpec::validate() const {
    if (!rl::isKnownEnv(env)) rl::makeEnv(env);  // throws listing the valid names
    if (policy != "random" && policy != "scripted" && policy != "agent")
        throw Error("dataset: policy must be random, scripted or agent, got '" + policy + "'");
    if (policy == "agent" && checkpoint.empty()) throw Error("dataset: the agent policy needs --checkpoint");
    if (policy != "agent" && !checkpoint.empty()) throw Error("dataset: --checkpoint is for --policy agent");
    if (epsilons.empty()) throw Error("dataset: --epsilon needs at least one value");
    for (double e : epsilons)
        if (!(e >= 0 && e <= 1)) {
            std::ostringstream os;
            os << "dataset: epsilon " << e << " is outside [0, 1]";
            throw Error(os.str());
        }
    if (steps < 1 || steps > 50'000'000) throw Error("dataset: --steps must be in 1..50000000, got " + std::to_string(steps));
    if (numEnvs < 1 || numEnvs > 1024) throw Error("dataset: --envs must be in 1..1024, got " + std::to_string(numEnvs));
    if (simulations < 1 || simulations > 10000) throw Error("dataset: --simulations must be in 1..10000");
}

namespace {

// A new dataset's description of itself: game, options, behaviour policy, source line.
OfflineDataset datasetHeader(const DatasetSpec& spec, const rl::Env& e0) {
    OfflineDataset d;
    d.env = spec.env;
    d.envOptions = spec.envOptions;
    d.actionNames = e0.actionNames();
    d.channelNames = e0.channelNames();
    d.frame = e0.observationShape();
    d.lifeLossSplit = spec.lifeLossSplit;
    d.policy = {{"kind", spec.policy}, {"epsilon", spec.epsilons}, {"seed", spec.seed}};
    std::ostringstream src;
    src << spec.policy << " policy";
    if (spec.policy == "agent") {
        d.policy["checkpoint"] = spec.checkpoint;
        d.policy["simulations"] = spec.simulations;
        src << " (" << spec.checkpoint << ", " << spec.simulations << " simulations)";
    }
    if (spec.policy != "random") {
        src << ", epsilon";
        for (size_t i = 0; i < spec.epsilons.size(); ++i) src << (i ? "," : " ") << spec.epsilons[i];
    }
    src << ", seed " << spec.seed;
    d.source = src.str();
    return d;
}

// The agent's greedy action in every environment: one batched search over their current stacks.
std::vector<int> agentActions(efficientzero::Network& net, rl::Mcts& mcts, const std::vector<rl::GameHistory>& hist,
                              const std::vector<std::unique_ptr<rl::Env>>& envs, std::mt19937_64& rng) {
    const int K = int(envs.size()), stack = net.config().stack;
    const rl::ObsShape f = hist.front().frame;
    const int64_t stackNumel = int64_t(stack) * f.numel();
    std::vector<float> stacked(size_t(K * stackNumel), 0.f);
    for (int i = 0; i < K; ++i) hist[size_t(i)].stackedInto(hist[size_t(i)].length(), stack, stacked.data() + i * stackNumel);
    torch::NoGradGuard ng;
    const Tensor x = torch::from_blob(stacked.data(), {K, int64_t(stack) * f.channels, f.height, f.width});
    std::vector<std::vector<int>> legal;
    for (const auto& e : envs) legal.push_back(e->legalActions());
    const auto res = efficientzero::searchBatch(net, mcts, x, false, legal);
    std::vector<int> out(static_cast<size_t>(K));
    for (int i = 0; i < K; ++i) out[size_t(i)] = rl::selectAction(res.visitCounts[size_t(i)], 0.0, rng);
    return out;
}

} // namespace

OfflineDataset generateDataset(const DatasetSpec& spec, train::Control* control, const train::ProgressFn& progress) {
    spec.validate();
    const int K = spec.numEnvs;
    std::vector<std::unique_ptr<rl::Env>> envs;
    for (int i = 0; i < K; ++i) envs.push_back(rl::makeEnv(spec.env, spec.envOptions));
    const rl::Env& e0 = *envs.front();
    OfflineDataset d = datasetHeader(spec, e0);

    std::optional<efficientzero::Network> net;
    std::optional<rl::Mcts> mcts;
    if (spec.policy == "agent") {
        net.emplace(efficientzero::loadForEnv(spec.checkpoint, e0));
        net->train(false);
        rl::MctsConfig mc;
        mc.numSimulations = spec.simulations;
        mcts.emplace(mc, spec.seed * 7919 + 11);
    }
    std::mt19937_64 rng(spec.seed * 0x9E3779B97F4A7C15ull + 5);
    std::uniform_real_distribution<double> unit(0.0, 1.0);

    std::vector<rl::GameHistory> hist(static_cast<size_t>(K));
    std::vector<double> ret(size_t(K), 0.0), eps(size_t(K), 0.0);
    std::vector<int64_t> len(size_t(K), 0), episodeIndex(size_t(K), 0);
    std::vector<int> lives(size_t(K), 0);
    std::vector<float> obs(size_t(d.frame.numel()));
    int64_t episodesStarted = 0;
    auto newHistory = [&](int i) {
        auto& h = hist[size_t(i)];
        h = rl::GameHistory{};
        h.frame = d.frame;
        h.numActions = d.numActions();
        envs[size_t(i)]->observationInto(obs.data());
        h.addFrame(obs.data());
    };
    auto startEpisode = [&](int i) {
        envs[size_t(i)]->reset(rl::episodeSeed(spec.seed, i, episodeIndex[size_t(i)]++));
        eps[size_t(i)] = spec.epsilons[size_t(episodesStarted++ % int64_t(spec.epsilons.size()))];
        ret[size_t(i)] = 0;
        len[size_t(i)] = 0;
        lives[size_t(i)] = envs[size_t(i)]->lives();
        newHistory(i);
    };
    auto closeHistory = [&](int i, bool terminal) {
        auto& h = hist[size_t(i)];
        if (h.length() == 0) return;
        h.terminal = terminal;
        h.done = true;
        d.games.push_back(std::move(h));
        d.epsilon.push_back(float(eps[size_t(i)]));
    };
    for (int i = 0; i < K; ++i) startEpisode(i);

    int64_t collected = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (collected < spec.steps) {
        if (control && !control->checkpoint()) break;
        const std::vector<int> policyAction =
            spec.policy == "agent" ? agentActions(*net, *mcts, hist, envs, rng) : std::vector<int>(size_t(K), 0);
        for (int i = 0; i < K && collected < spec.steps; ++i) {
            rl::Env& env = *envs[size_t(i)];
            const auto legal = env.legalActions();
            int a;
            if (unit(rng) < eps[size_t(i)] || spec.policy == "random")
                a = legal[size_t(rng() % legal.size())];
            else
                a = spec.policy == "scripted" ? env.referenceAction() : policyAction[size_t(i)];
            const rl::StepResult r = env.step(a);
            auto& h = hist[size_t(i)];
            h.actions.push_back(a);
            h.rewards.push_back(r.reward);
            env.observationInto(obs.data());
            h.addFrame(obs.data());
            ret[size_t(i)] += r.reward;
            ++len[size_t(i)];
            ++collected;
            const bool lifeLost = r.lives < lives[size_t(i)];
            lives[size_t(i)] = r.lives;
            if (r.done()) {
                closeHistory(i, r.terminal);
                d.episodeReturns.push_back(ret[size_t(i)]);
                d.episodeLengths.push_back(len[size_t(i)]);
                startEpisode(i);
            } else if (lifeLost && spec.lifeLossSplit) {
                closeHistory(i, true);
                newHistory(i);
            }
        }
        if (progress) {
            train::Progress p;
            p.step = collected;
            p.totalSteps = spec.steps;
            p.phase = "play";
            p.elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            p.eta = collected > 0 ? p.elapsed * double(spec.steps - collected) / double(collected) : -1;
            p.latest["episodes"] = double(d.episodeReturns.size());
            progress(p);
        }
    }
    for (int i = 0; i < K; ++i) closeHistory(i, false);  // cut at the step budget: truncated
    if (d.games.empty()) throw Error("dataset: stopped before any transition was played");
    return d;
}

OfflineDataset datasetFromRun(const std::string& runDir) {
    const auto run = efficientzero::readRunReplay(runDir);
    if (run.games.empty()) throw Error(runDir + ": the run's replay buffer is empty");
    const auto env = rl::makeEnv(run.config.env);
    OfflineDataset d;
    d.env = run.config.env;
    d.source = "replay buffer of the EfficientZero run " + fs::absolute(runDir).lexically_normal().string();
    d.policy = {{"kind", "run"}, {"run", fs::absolute(runDir).lexically_normal().string()}, {"train_config", run.config.toJson()}};
    d.envOptions.maxEpisodeSteps = run.config.maxEpisodeSteps;
    d.actionNames = env->actionNames();
    d.channelNames = env->channelNames();
    d.frame = env->observationShape();
    d.rewardsClipped = run.config.clipRewards;
    d.lifeLossSplit = run.config.lifeLossTerminal;
    d.games = run.games;
    for (auto& g : d.games) {
        g.rootValues.clear();
        g.policies.clear();
        if (g.frame.channels != d.frame.channels || g.frame.height != d.frame.height || g.frame.width != d.frame.width)
            throw Error(runDir + ": the replay's frames do not match '" + d.env + "'");
    }
    d.epsilon.assign(d.games.size(), -1.f);
    return d;
}

std::string describeDataset(const OfflineDataset& d) {
    std::ostringstream os;
    os << d.env << ": " << d.transitions() << " transitions in " << d.games.size() << " histories";
    if (!d.episodeReturns.empty()) {
        std::vector<int> lens(d.episodeLengths.begin(), d.episodeLengths.end());
        const auto s = rl::summarize(d.episodeReturns, lens);
        os << ", " << s.episodes << " complete episodes, return " << std::fixed << std::setprecision(2) << s.mean << " +- "
           << s.ci95;
        try {
            os << " (normalized " << std::setprecision(3) << rl::normalizedScore(d.env, s.mean) << ")";
        } catch (const Error&) {
        }
    }
    os << "; " << d.source;
    return os.str();
}

} // namespace glimpse::xtra
