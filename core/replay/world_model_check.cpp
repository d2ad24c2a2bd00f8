#include "core/replay/world_model_check.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/model_view.h"

namespace glimpse::replay {

using efficientzero::Network;
using torch::Tensor;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<float> toFloats(const Tensor& t) {
    const Tensor c = t.reshape({-1}).to(torch::kCPU, torch::kFloat32).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

} // namespace

// Throws when the options, the network or the episode do not allow a check of depth o.depth.
static void validateWorldModelCheck(Network& net, EpisodeReader& ep, const WorldModelCheckOptions& o) {
    const int K = o.depth;
    if (K < 1 || K > 100) throw Error("world model check: the depth must be in 1..100, got " + std::to_string(K));
    if (!(o.discount >= 0 && o.discount <= 1))
        throw Error("world model check: the discount must be in [0, 1], got " + std::to_string(o.discount));
    if (o.lstmHorizon < 1) throw Error("world model check: lstmHorizon must be >= 1");
    if (o.batch < 1) throw Error("world model check: the batch must be >= 1");
    if (o.maxStarts < 0) throw Error("world model check: maxStarts must be >= 0");
    if (!ep.hasObservations())
        throw Error(ep.path() + ": this episode has no observations the network can read (imported episodes keep only "
                                "the screens)");
    if (net.isTraining()) throw Error("world model check: the network is in training mode (call train(false))");
    const auto& c = net.config();
    const auto shape = ep.observationShape();
    if (shape[0] != c.obsChannels || shape[1] != c.obsHeight || shape[2] != c.obsWidth)
        throw Error(ep.path() + ": the episode's observations are " + std::to_string(shape[0]) + "x" +
                    std::to_string(shape[1]) + "x" + std::to_string(shape[2]) + ", the network expects " +
                    std::to_string(c.obsChannels) + "x" + std::to_string(c.obsHeight) + "x" + std::to_string(c.obsWidth));
    if (int64_t(ep.actionNames().size()) != c.numActions)
        throw Error(ep.path() + ": the episode's game has " + std::to_string(ep.actionNames().size()) +
                    " actions, the network " + std::to_string(c.numActions));
    const int64_t T = ep.length();
    if (T < K)
        throw Error(ep.path() + ": " + std::to_string(T) + " steps are too few for rollouts of depth " + std::to_string(K));
}

WorldModelCheck checkWorldModel(Network& net, EpisodeReader& ep, const WorldModelCheckOptions& o,
                                const std::atomic<bool>* cancel, const std::function<void(int64_t, int64_t)>& progress) {
    validateWorldModelCheck(net, ep, o);
    const int K = o.depth;
    const auto& c = net.config();
    const int64_t T = ep.length();

    // What happened, as the network was trained on it: rewards (clipped), segment ends and the
    // discounted return G(s) from each step to the end of its segment (G(T) = 0).
    std::vector<double> reward(static_cast<size_t>(T)), ret(static_cast<size_t>(T) + 1, 0.0);
    std::vector<char> ends(static_cast<size_t>(T));
    for (int64_t s = 0; s < T; ++s) {
        const double r = ep.reward(s);
        reward[size_t(s)] = o.clipRewards ? double((r > 0) - (r < 0)) : r;
        ends[size_t(s)] = ep.isTerminal(s) || (o.lifeLossEnds && ep.lifeLost(s));
    }
    for (int64_t s = T - 1; s >= 0; --s)
        ret[size_t(s)] = reward[size_t(s)] + (ends[size_t(s)] ? 0.0 : o.discount * ret[size_t(s) + 1]);
    const bool hasRoot = ep.has(Series::RootValue);
    const std::vector<float>* root = hasRoot ? &ep.series(Series::RootValue) : nullptr;

    std::vector<int64_t> starts;
    const int64_t all = T - K + 1;
    if (o.maxStarts == 0 || o.maxStarts >= all) {
        for (int64_t t = 0; t < all; ++t) starts.push_back(t);
    } else {
        for (int64_t i = 0; i < o.maxStarts; ++i) starts.push_back(i * (all - 1) / std::max<int64_t>(o.maxStarts - 1, 1));
        starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    }

    WorldModelCheck out;
    out.episode = ep.path();
    out.options = o;
    out.starts = int64_t(starts.size());
    std::vector<double> sumR(size_t(K) + 1, 0), sumV(size_t(K) + 1, 0), sumRoot(size_t(K) + 1, 0),
        absR(size_t(K) + 1, 0), absG(size_t(K) + 1, 0);
    std::vector<int64_t> n(size_t(K) + 1, 0), nRoot(size_t(K) + 1, 0);

    torch::NoGradGuard noGrad;
    const auto device = net.device();
    for (size_t b0 = 0; b0 < starts.size(); b0 += size_t(o.batch)) {
        if (cancel && cancel->load()) throw Error("world model check: cancelled");
        const size_t b1 = std::min(starts.size(), b0 + size_t(o.batch));
        const int64_t B = int64_t(b1 - b0);
        std::vector<Tensor> obs;
        for (size_t i = b0; i < b1; ++i) obs.push_back(stackedObservation(ep, starts[i], c.stack));
        const auto init = net.initialInference(torch::cat(obs, 0).to(device));
        // values[k][i], rewards[k][i] of start b0 + i.
        std::vector<std::vector<float>> values{toFloats(init.value)}, rewards{{}};
        Tensor state = init.state;
        efficientzero::LstmState lstm = net.initialLstm(B);
        std::vector<float> prefix(static_cast<size_t>(B), 0.f);
        for (int k = 0; k < K; ++k) {
            if (cancel && cancel->load()) throw Error("world model check: cancelled");
            const bool reset = k % o.lstmHorizon == 0;
            if (reset) lstm = net.initialLstm(B);
            std::vector<int64_t> actions;
            for (size_t i = b0; i < b1; ++i) actions.push_back(ep.action(starts[i] + k));
            const auto r = net.recurrentInference(state, torch::tensor(actions, torch::kLong).to(device), lstm);
            const auto vp = toFloats(r.valuePrefix);
            std::vector<float> rew(static_cast<size_t>(B));
            for (int64_t i = 0; i < B; ++i) rew[size_t(i)] = reset ? vp[size_t(i)] : vp[size_t(i)] - prefix[size_t(i)];
            prefix = vp;
            rewards.push_back(std::move(rew));
            values.push_back(toFloats(r.value));
            state = r.nextState;
            lstm = r.lstm;
        }
        for (int64_t i = 0; i < B; ++i) {
            const int64_t t = starts[b0 + size_t(i)];
            bool ended = false;   // a segment ended at one of the steps t .. t + k - 1
            for (int k = 0; k <= K; ++k) {
                if (k >= 2 && ends[size_t(t + k - 2)]) break;   // the rollout would cross an end
                if (k >= 1) ended = ends[size_t(t + k - 1)];
                const double g = ended ? 0.0 : ret[size_t(t + k)];
                const double v = values[size_t(k)][size_t(i)];
                ++n[size_t(k)];
                sumV[size_t(k)] += std::abs(v - g);
                absG[size_t(k)] += std::abs(g);
                if (k >= 1) {
                    const double a = reward[size_t(t + k - 1)];
                    sumR[size_t(k)] += std::abs(double(rewards[size_t(k)][size_t(i)]) - a);
                    absR[size_t(k)] += std::abs(a);
                }
                if (root && !ended && t + k < T) {
                    ++nRoot[size_t(k)];
                    sumRoot[size_t(k)] += std::abs(v - double((*root)[size_t(t + k)]));
                }
            }
        }
        if (progress) progress(int64_t(b1), int64_t(starts.size()));
    }
    for (int k = 0; k <= K; ++k) {
        WorldModelDepth d;
        d.depth = k;
        d.count = n[size_t(k)];
        const double cnt = double(std::max<int64_t>(d.count, 1));
        d.rewardMae = k == 0 || d.count == 0 ? kNaN : sumR[size_t(k)] / cnt;
        d.meanAbsReward = k == 0 || d.count == 0 ? kNaN : absR[size_t(k)] / cnt;
        d.valueMae = d.count == 0 ? kNaN : sumV[size_t(k)] / cnt;
        d.meanAbsReturn = d.count == 0 ? kNaN : absG[size_t(k)] / cnt;
        d.rootCount = nRoot[size_t(k)];
        d.rootValueMae = d.rootCount == 0 ? kNaN : sumRoot[size_t(k)] / double(d.rootCount);
        out.depths.push_back(d);
    }
    return out;
}

Network untrainedNetwork(const efficientzero::Config& config, uint64_t seed) {
    torch::manual_seed(seed);
    Network net(config);
    net.train(false);
    return net;
}

namespace {

std::string fmt(double v) {
    if (std::isnan(v)) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

} // namespace

std::string worldModelTable(const WorldModelCheck& a, const WorldModelCheck* u, bool markdown) {
    std::vector<std::string> head{"depth", "pairs", "reward MAE", "value MAE", "value vs search MAE"};
    if (u) {
        head = {"depth", "pairs", "reward MAE", "(untrained)", "value MAE", "(untrained)", "value vs search MAE",
                "(untrained)"};
    }
    head.push_back("mean |reward|");
    head.push_back("mean |return|");
    std::vector<std::vector<std::string>> rows{head};
    for (size_t k = 0; k < a.depths.size(); ++k) {
        const auto& d = a.depths[k];
        const WorldModelDepth* e = u && k < u->depths.size() ? &u->depths[k] : nullptr;
        std::vector<std::string> row{std::to_string(d.depth), std::to_string(d.count), fmt(d.rewardMae)};
        if (u) row.push_back(e ? fmt(e->rewardMae) : "-");
        row.push_back(fmt(d.valueMae));
        if (u) row.push_back(e ? fmt(e->valueMae) : "-");
        row.push_back(fmt(d.rootValueMae));
        if (u) row.push_back(e ? fmt(e->rootValueMae) : "-");
        row.push_back(fmt(d.meanAbsReward));
        row.push_back(fmt(d.meanAbsReturn));
        rows.push_back(std::move(row));
    }
    std::ostringstream s;
    if (markdown) {
        for (size_t r = 0; r < rows.size(); ++r) {
            s << "|";
            for (const auto& cell : rows[r]) s << " " << cell << " |";
            s << "\n";
            if (r == 0) {
                s << "|";
                for (size_t i = 0; i < rows[0].size(); ++i) s << "---|";
                s << "\n";
            }
        }
        return s.str();
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    for (const auto& row : rows) {
        for (size_t i = 0; i < row.size(); ++i) {
            if (i) s << "  ";
            s << std::string(width[i] - row[i].size(), ' ') << row[i];
        }
        s << "\n";
    }
    return s.str();
}

} // namespace glimpse::replay
