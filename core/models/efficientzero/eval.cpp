#include "core/models/efficientzero/eval.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/search.h"
#include "core/rl/episode.h"
#include "core/rl/mcts.h"
#include "core/util/json_file.h"
#include "core/util/timing.h"

namespace glimpse::efficientzero {

using torch::Tensor;
namespace fs = std::filesystem;

namespace {

void checkFitsEnv(const Config& c, const rl::Env& env, const std::string& path) {
    if (c.numActions != env.numActions())
        throw Error(path + ": the checkpoint has " + std::to_string(c.numActions) + " actions, '" + env.name() + "' has " +
                    std::to_string(env.numActions()) + " (a checkpoint of another game?)");
    const auto s = env.observationShape();
    if (c.obsChannels != s.channels || c.obsHeight != s.height || c.obsWidth != s.width)
        throw Error(path + ": the checkpoint expects " + std::to_string(c.obsChannels) + "x" + std::to_string(c.obsHeight) +
                    "x" + std::to_string(c.obsWidth) + " observations, '" + env.name() + "' has " +
                    std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width));
}

} // namespace

Network loadForEnv(const std::string& path, const rl::Env& env) { return loadNetwork(path, &env); }

Network loadNetwork(const std::string& path, const rl::Env* env) {
    Checkpoint ck = loadModelCheckpoint(path, "convert_efficientzero.py", "ez.h5");   // a .pth/.pt: how to convert it
    if (ck.family != "efficientzero")
        throw Error(path + ": is a '" + ck.family + "' checkpoint, expected 'efficientzero'");
    const nlohmann::json j = parseJsonText(ck.configJson, path, "the checkpoint's config");
    Config c;
    try {
        c = Config::fromJson(j);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    if (env) checkFitsEnv(c, *env, path);
    Network net(c);
    addMissingHeadBiases(ck.tensors);   // checkpoints from before the heads' conv biases
    applyCheckpoint(ck, net.module(), "efficientzero", path);
    net.train(false);
    return net;
}

namespace {

// One episode being played, and what is recorded of it.
struct Slot {
    int episode = -1;                  // -1: idle (every episode has started)
    std::unique_ptr<rl::Env> env;
    std::vector<float> frames;         // the latest single frames, oldest first
    std::vector<torch::Tensor> renders, observations;
    std::vector<int64_t> actions;
    std::vector<float> rewards, rootValues, value, valuePrefix, policy, childrenQ, childrenPrior;
    std::vector<int32_t> lives, visits;
};

// Plays options.episodes episodes, options.parallel at a time, searching all of them in one
// batch per move.
class Evaluator {
public:
    Evaluator(Network& net, const std::string& game, const EvalOptions& o, train::Control* control,
              const train::ProgressFn& progress)
        : net_(net), game_(game), o_(o), control_(control), progress_(progress), mcts_(mctsConfig(o), o.seed),
          rng_(o.seed), t0_(std::chrono::steady_clock::now()) {
        const Config& c = net.config();
        A_ = c.numActions;
        stack_ = c.stack;
        out_.returns.assign(size_t(o.episodes), 0.0);
        out_.lengths.assign(size_t(o.episodes), 0);
        prog_.totalSteps = o.episodes;
        prog_.phase = "evaluate";
    }

    EvalResult run() {
        if (record()) fs::create_directories(o_.recordDir);
        slots_.resize(size_t(std::min(o_.parallel, o_.episodes)));
        for (auto& s : slots_) begin(s);
        frame_ = slots_.front().env->observationShape();
        while (finished_ < o_.episodes) {
            if (control_ && !control_->checkpoint()) throw Error("evaluate: stopped");
            move();
        }
        summarize();
        return std::move(out_);
    }

private:
    static rl::MctsConfig mctsConfig(const EvalOptions& o) {
        rl::MctsConfig mc;
        mc.numSimulations = o.simulations;
        return mc;
    }
    bool record() const { return !o_.recordDir.empty(); }
    int64_t frameNumel() const { return frame_.numel(); }

    // Starts the next episode in `s`, or leaves it idle when all have started.
    void begin(Slot& s) {
        s = Slot{};
        if (next_ >= o_.episodes) return;
        s.episode = next_++;
        s.env = rl::makeEnv(game_, o_.env);
        if (s.env->numActions() != A_)
            throw Error("evaluate: '" + game_ + "' has " + std::to_string(s.env->numActions()) + " actions, the network " +
                        std::to_string(A_));
        s.env->reset(rl::episodeSeed(o_.seed, s.episode, 0));
        s.frames = s.env->observation();
    }

    // The stacked observations of the active slots, [active, stack * C, H, W] (the first
    // frame repeated before the episode has `stack` of them).
    std::vector<float> stackedObservations(const std::vector<int>& active) const {
        const int64_t fn = frameNumel(), sn = fn * stack_;
        std::vector<float> obs(active.size() * size_t(sn));
        for (size_t j = 0; j < active.size(); ++j) {
            const auto& s = slots_[size_t(active[j])];
            const int64_t count = int64_t(s.frames.size()) / fn;
            for (int k = 0; k < stack_; ++k) {
                const int64_t f = std::max<int64_t>(0, count - stack_ + k);
                std::copy(s.frames.begin() + f * fn, s.frames.begin() + (f + 1) * fn, obs.begin() + long(j) * sn + k * fn);
            }
        }
        return obs;
    }

    // One search over every active episode, then one step of each.
    void move() {
        std::vector<int> active;
        for (size_t i = 0; i < slots_.size(); ++i)
            if (slots_[i].episode >= 0) active.push_back(int(i));
        std::vector<float> obs = stackedObservations(active);
        const Tensor obsT =
            torch::from_blob(obs.data(), {int64_t(active.size()), int64_t(stack_) * frame_.channels, frame_.height, frame_.width});
        SearchAdapter adapter(net_);
        const auto roots = adapter.start(obsT);
        std::vector<std::vector<int>> legal;   // only when the game has illegal actions (shared space)
        if (const auto l = slots_[size_t(active[0])].env->legalActions(); int(l.size()) < net_.config().numActions)
            legal.assign(active.size(), l);
        std::optional<rl::Mcts> refMcts;
        if (o_.compareWith) refMcts.emplace(mcts_);   // the same random state for both searches
        const auto res = mcts_.search(adapter, roots, o_.noise, legal);
        std::optional<rl::SearchResult> ref;
        if (refMcts) {
            SearchAdapter refAdapter(*o_.compareWith);
            ref = refMcts->search(refAdapter, refAdapter.start(obsT), o_.noise, legal);
        }
        for (size_t j = 0; j < active.size(); ++j) {
            Slot& s = slots_[size_t(active[j])];
            std::mt19937_64 refRng = rng_;   // the same tie-break for the reference's choice
            const int a = rl::selectAction(res.visitCounts[j], o_.temperature, rng_, res.rootQ[j]);
            if (ref) {
                const int b = rl::selectAction(ref->visitCounts[j], o_.temperature, refRng, ref->rootQ[j]);
                ++out_.compared;
                out_.sameAction += a == b;
                // a most-visited action of the reference's search (several when its counts tie)
                const auto& rv = ref->visitCounts[j];
                out_.mostVisitedOfReference += rv[size_t(a)] == *std::max_element(rv.begin(), rv.end());
                const double vr = ref->rootValues[j];
                valueRelDiffs_.push_back(std::abs(double(res.rootValues[j]) - vr) / std::max(std::abs(vr), 0.01));
            }
            if (record()) recordSearch(s, res, roots[j], j, a);
            step(s, a);
        }
    }

    // What the search saw and chose before action `a` of the j-th searched episode.
    void recordSearch(Slot& s, const rl::SearchResult& res, const rl::Prediction& root, size_t j, int a) {
        const int64_t fn = frameNumel();
        cv::Mat img = s.env->render(8);
        s.renders.push_back(torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kUInt8).clone());
        s.observations.push_back(
            torch::from_blob(s.frames.data() + (int64_t(s.frames.size()) - fn), {frame_.channels, frame_.height, frame_.width})
                .clone());
        s.rootValues.push_back(res.rootValues[j]);
        s.value.push_back(root.value);
        const auto& tree = mcts_.tree(int(j));
        const auto& top = tree.front();
        float vp = 0.f;
        if (top.expanded() && tree[size_t(top.firstChild + a)].expanded()) vp = tree[size_t(top.firstChild + a)].valuePrefix;
        s.valuePrefix.push_back(vp);
        const Tensor pol = torch::softmax(torch::tensor(root.policyLogits), 0);
        s.policy.insert(s.policy.end(), pol.data_ptr<float>(), pol.data_ptr<float>() + A_);
        for (int v : res.visitCounts[j]) s.visits.push_back(v);
        // The root's children: Q from the root's view (0 when unvisited, as the format says)
        // and the prior the search used (after noise when `noise` is on).
        for (float q : res.rootQ[j]) s.childrenQ.push_back(std::isfinite(q) ? q : 0.f);
        s.childrenPrior.insert(s.childrenPrior.end(), res.rootPriors[j].begin(), res.rootPriors[j].end());
    }

    void step(Slot& s, int a) {
        const int64_t fn = frameNumel();
        const auto st = s.env->step(a);
        out_.returns[size_t(s.episode)] += st.reward;
        out_.lengths[size_t(s.episode)] += 1;
        if (record()) {
            s.actions.push_back(a);
            s.rewards.push_back(st.reward);
            s.lives.push_back(st.lives);
        }
        const auto o2 = s.env->observation();
        s.frames.insert(s.frames.end(), o2.begin(), o2.end());
        if (int64_t(s.frames.size()) > fn * stack_ * 4) s.frames.erase(s.frames.begin(), s.frames.begin() + fn * stack_);
        if (st.done()) endEpisode(s, st.terminal);
    }

    void endEpisode(Slot& s, bool terminal) {
        if (record()) {
            char name[64];
            std::snprintf(name, sizeof name, "episode_%04d.h5", s.episode);
            const std::string path = (fs::path(o_.recordDir) / name).string();
            rl::writeEpisode(path, recordedEpisode(s, terminal));
            out_.recorded.push_back(path);
        }
        ++finished_;
        begin(s);
        prog_.step = finished_;
        prog_.elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        prog_.eta = prog_.elapsed / finished_ * (o_.episodes - finished_);
        if (progress_) progress_(prog_);
    }

    rl::Episode recordedEpisode(const Slot& s, bool terminal) const {
        rl::Episode e;
        e.env = game_;
        e.seed = int64_t(rl::episodeSeed(o_.seed, s.episode, 0));
        e.frameSkip = o_.env.frameSkip;
        e.maxEpisodeSteps = o_.env.maxEpisodeSteps;
        e.stickyActionProb = o_.env.stickyActionProb;
        e.actionNames = s.env->actionNames();
        e.channelNames = s.env->channelNames();
        e.episodeReturn = out_.returns[size_t(s.episode)];
        e.terminal = terminal;
        e.frames = torch::stack(s.renders);
        e.observations = torch::stack(s.observations);
        e.actions = torch::tensor(s.actions, torch::kInt64);
        e.rewards = torch::tensor(s.rewards, torch::kFloat32);
        e.lives = torch::tensor(s.lives, torch::kInt32);
        e.hasModel = true;
        e.model.family = "efficientzero";
        e.model.checkpoint = o_.checkpointPath;
        e.model.config = net_.config().toJson().dump();
        e.model.simulations = o_.simulations;
        const int64_t T = e.length();
        e.model.rootValues = torch::tensor(s.rootValues, torch::kFloat32);
        e.model.visitCounts = torch::tensor(s.visits, torch::kInt32).reshape({T, A_});
        e.model.value = torch::tensor(s.value, torch::kFloat32);
        e.model.valuePrefix = torch::tensor(s.valuePrefix, torch::kFloat32);
        e.model.policy = torch::tensor(s.policy, torch::kFloat32).reshape({T, A_});
        e.model.childrenQ = torch::tensor(s.childrenQ, torch::kFloat32).reshape({T, A_});
        e.model.childrenPrior = torch::tensor(s.childrenPrior, torch::kFloat32).reshape({T, A_});
        return e;
    }

    void summarize() {
        out_.stats = rl::summarize(out_.returns, out_.lengths);
        std::vector<double> norm;
        for (double r : out_.returns) norm.push_back(rl::normalizedScore(game_, r));
        double sum = 0;
        for (double v : norm) sum += v;
        out_.normalizedMean = sum / double(norm.size());
        out_.normalizedMedian = median(norm);
        if (!valueRelDiffs_.empty()) {
            out_.valueRelDiffMedian = median(valueRelDiffs_);
            out_.valueRelDiffMax = *std::max_element(valueRelDiffs_.begin(), valueRelDiffs_.end());
        }
        std::sort(out_.recorded.begin(), out_.recorded.end());
    }

    Network& net_;
    const std::string& game_;
    const EvalOptions& o_;
    train::Control* control_;
    const train::ProgressFn& progress_;
    rl::Mcts mcts_;
    std::mt19937_64 rng_;
    std::chrono::steady_clock::time_point t0_;
    int A_ = 0, stack_ = 0;
    rl::ObsShape frame_;
    std::vector<Slot> slots_;
    int next_ = 0, finished_ = 0;
    train::Progress prog_;
    EvalResult out_;
    std::vector<double> valueRelDiffs_;   // with compareWith, per compared search
};

} // namespace

EvalResult evaluate(Network& net, const std::string& game, const EvalOptions& o, train::Control* control,
                    const train::ProgressFn& progress) {
    if (o.episodes < 1 || o.parallel < 1 || o.simulations < 1) throw Error("evaluate: episodes, parallel and simulations must be positive");
    if (!(o.temperature >= 0) || o.temperature > 100) throw Error("evaluate: temperature must be in [0, 100]");
    net.train(false);
    if (o.compareWith) {
        if (o.compareWith->config().numActions != net.config().numActions)
            throw Error("evaluate: the network to compare with has " + std::to_string(o.compareWith->config().numActions) +
                        " actions, the evaluated one " + std::to_string(net.config().numActions));
        o.compareWith->train(false);
    }
    return Evaluator(net, game, o, control, progress).run();
}

} // namespace glimpse::efficientzero
