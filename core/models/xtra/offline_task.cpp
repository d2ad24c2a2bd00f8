#include "core/models/xtra/offline_task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/xtra/dataset.h"
#include "core/train/state.h"

namespace glimpse::xtra {

using torch::Tensor;

namespace {

rl::ReplayConfig replayConfig(const TargetOptions& o) {
    rl::ReplayConfig c;
    c.capacity = std::numeric_limits<int64_t>::max() / 4;  // an offline task keeps everything
    c.unroll = o.unroll;
    c.tdSteps = o.tdSteps;
    c.discount = o.discount;
    return c;
}

float clipReward(float r) { return r > 0.f ? 1.f : (r < 0.f ? -1.f : 0.f); }

} // namespace

std::string gameCategory(const std::string& game) {
    const std::string base = rl::baseGameName(game);
    for (const auto& g : rl::arcadeGames())
        if (g.name == base) return g.category;
    return {};
}

std::vector<SourceSpec> sourcesFromJson(const nlohmann::json& j, const std::string& where) {
    if (!j.is_array()) throw Error(where + ": 'sources' must be a list of {\"dataset\", \"teacher\"}");
    std::vector<SourceSpec> out;
    for (const auto& e : j) {
        if (!e.is_object() || e.size() != 2 || !e.contains("dataset") || !e.contains("teacher") ||
            !e.at("dataset").is_string() || !e.at("teacher").is_string())
            throw Error(where + ": every source must be {\"dataset\": FILE, \"teacher\": FILE}");
        out.push_back({e.at("dataset").get<std::string>(), e.at("teacher").get<std::string>()});
    }
    return out;
}

nlohmann::json sourcesToJson(const std::vector<SourceSpec>& sources) {
    nlohmann::json src = nlohmann::json::array();
    for (const auto& s : sources) src.push_back({{"dataset", s.dataset}, {"teacher", s.teacher}});
    return src;
}

OfflineTask::OfflineTask(const SourceSpec& spec, const TargetOptions& options, const train::ProgressFn& progress)
    : spec_(spec), opt_(options), replay_(replayConfig(options)) {
    if (options.stack < 1) throw Error("xtra: the student's frame stack must be >= 1");
    const OfflineDataset d = readDataset(spec.dataset);
    env_ = d.env;
    game_ = rl::baseGameName(env_);
    map_ = rl::actionMap(game_);
    const auto env = rl::makeEnv(env_);
    efficientzero::Network teacher = [&] {
        try {
            return efficientzero::loadForEnv(spec.teacher, *env);
        } catch (const Error& e) {
            throw Error(std::string(e.what()) + " (teacher for the dataset " + spec.dataset + ")");
        }
    }();
    const bool sharedData = rl::isSharedName(env_);
    const auto colours = rl::makeEnv(game_)->channelColours();
    const rl::ObsShape out = rl::sharedObservationShape();
    const int A = rl::sharedActionCount();
    const int tstack = teacher.config().stack;
    const int64_t fn = d.frame.numel();
    // Legal columns of the teacher's policy head: every native action, or the game's shared ids.
    std::vector<int64_t> legalCols;
    if (sharedData)
        legalCols.assign(map_.legal.begin(), map_.legal.end());
    else
        for (int a = 0; a < map_.numNative(); ++a) legalCols.push_back(a);
    const Tensor legalIdx = torch::tensor(legalCols, torch::kLong);
    std::vector<int64_t> sharedCols;  // where each legal column goes in the shared policy
    for (int64_t c : legalCols) sharedCols.push_back(sharedData ? c : map_.toShared[size_t(c)]);

    constexpr int64_t kChunk = 256;
    std::vector<float> buf, shared(size_t(out.numel()));
    torch::NoGradGuard ng;
    int64_t done = 0;
    const int64_t total = d.transitions();
    for (size_t gi = 0; gi < d.games.size(); ++gi) {
        const rl::GameHistory& h = d.games[gi];
        const int T = h.length();
        std::vector<float> values(size_t(T + 1));
        std::vector<float> policies(size_t(T) * A, 0.f);
        for (int64_t t0 = 0; t0 <= T; t0 += kChunk) {
            const int64_t n = std::min<int64_t>(kChunk, T + 1 - t0);
            buf.assign(size_t(n * tstack * fn), 0.f);
            for (int64_t j = 0; j < n; ++j) h.stackedInto(int(t0 + j), tstack, buf.data() + j * tstack * fn);
            const Tensor x = torch::from_blob(buf.data(), {n, int64_t(tstack) * d.frame.channels, d.frame.height, d.frame.width});
            const auto o = teacher.initialInference(x);
            const Tensor v = o.value.to(torch::kFloat32).contiguous();
            std::copy(v.data_ptr<float>(), v.data_ptr<float>() + n, values.begin() + t0);
            const Tensor p = torch::softmax(o.policyLogits.index_select(1, legalIdx), 1).contiguous();
            const float* pp = p.data_ptr<float>();
            for (int64_t j = 0; j < n && t0 + j < T; ++j)
                for (size_t c = 0; c < sharedCols.size(); ++c)
                    policies[size_t((t0 + j) * A + sharedCols[c])] = pp[j * int64_t(sharedCols.size()) + int64_t(c)];
        }
        rl::GameHistory s;
        s.frame = out;
        s.numActions = A;
        s.terminal = h.terminal;
        s.done = true;
        if (sharedData) {
            s.frames = h.frames;
        } else {
            for (int t = 0; t <= T; ++t) {
                rl::sharedFrameInto(colours, h.frames.data() + int64_t(t) * fn, d.frame, shared.data());
                s.addFrame(shared.data());
            }
        }
        for (int t = 0; t < T; ++t) {
            const int a = h.actions[size_t(t)];
            const int sa = sharedData ? a : map_.toShared[size_t(a)];
            if (map_.toNative[size_t(sa)] < 0)
                throw Error(spec.dataset + ": action " + rl::sharedActionNames()[size_t(sa)] + " is not legal in '" + game_ + "'");
            s.actions.push_back(sa);
            const float r = h.rewards[size_t(t)];
            s.rewards.push_back(opt_.clipRewards && !d.rewardsClipped ? clipReward(r) : r);
        }
        s.rootValues.assign(values.begin(), values.begin() + T);
        s.policies = std::move(policies);
        starts_.push_back(transitions_);
        transitions_ += T;
        values_.push_back(std::move(values));
        replay_.add(std::move(s));
        done += T;
        if (progress) {
            train::Progress pr;
            pr.step = done;
            pr.totalSteps = total;
            pr.phase = "teacher " + game_;
            progress(pr);
        }
    }
}

std::vector<std::pair<int, int>> OfflineTask::draw(int batch, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> pick(0, transitions_ - 1);
    std::vector<std::pair<int, int>> out;
    for (int b = 0; b < batch; ++b) {
        const int64_t idx = pick(rng);
        const int g = int(std::upper_bound(starts_.begin(), starts_.end(), idx) - starts_.begin()) - 1;
        out.emplace_back(g, int(idx - starts_[size_t(g)]));
    }
    return out;
}

efficientzero::Batch OfflineTask::sample(int batch, uint64_t seed, int rowBegin, int rowEnd) const {
    if (rowEnd < 0) rowEnd = batch;
    if (batch < 1 || rowBegin < 0 || rowBegin >= rowEnd || rowEnd > batch) throw Error("xtra: bad batch rows");
    const auto all = draw(batch, seed);
    return batchAt({all.begin() + rowBegin, all.begin() + rowEnd}, seed, rowBegin);
}

efficientzero::Batch OfflineTask::batchAt(const std::vector<std::pair<int, int>>& positions, uint64_t seed, int firstRow) const {
    const int B = int(positions.size()), K = opt_.unroll, A = rl::sharedActionCount(), S = opt_.stack;
    if (B < 1) throw Error("xtra: an empty batch");
    const rl::ObsShape f = rl::sharedObservationShape();
    const int64_t sn = int64_t(S) * f.numel();
    Tensor obs = torch::zeros({B, int64_t(S) * f.channels, f.height, f.width});
    Tensor nextObs = torch::zeros({B, K, int64_t(S) * f.channels, f.height, f.width});
    Tensor actions = torch::zeros({B, K}, torch::kInt64);
    Tensor prefix = torch::zeros({B, K});
    Tensor value = torch::zeros({B, K + 1});
    Tensor policy = torch::zeros({B, K + 1, A});
    Tensor mask = torch::zeros({B, K + 1});
    float* op = obs.data_ptr<float>();
    float* np = nextObs.data_ptr<float>();
    int64_t* ap = actions.data_ptr<int64_t>();
    float *pp = prefix.data_ptr<float>(), *vp = value.data_ptr<float>(), *pol = policy.data_ptr<float>(), *mp = mask.data_ptr<float>();
    for (int row = 0; row < B; ++row) {
        const auto [g, pos] = positions[size_t(row)];
        if (g < 0 || g >= int(replay_.games().size()) || pos < 0 || pos >= replay_.games()[size_t(g)].length())
            throw Error("xtra: position (" + std::to_string(g) + ", " + std::to_string(pos) + ") is outside the dataset");
        const rl::GameHistory& h = replay_.games()[size_t(g)];
        std::mt19937_64 rowRng(train::mixSeed(seed, uint64_t(firstRow + row), 17));
        const rl::PositionTargets t = replay_.targets(g, pos, rowRng);
        h.stackedInto(pos, S, op + row * sn);
        for (int k = 0; k < K; ++k) h.stackedInto(std::min(pos + k + 1, h.length()), S, np + (int64_t(row) * K + k) * sn);
        for (int k = 0; k < K; ++k) {
            ap[row * K + k] = t.actions[size_t(k)];
            pp[row * K + k] = t.valuePrefix[size_t(k)];
        }
        for (int k = 0; k <= K; ++k) {
            float z = t.valueRewardPart[size_t(k)];
            const int bi = t.valueIndex[size_t(k)];
            if (bi >= 0) z += t.valueDiscount[size_t(k)] * values_[size_t(g)][size_t(bi)];
            vp[row * (K + 1) + k] = z;
            mp[row * (K + 1) + k] = t.mask[size_t(k)];
        }
        std::copy(t.policy.begin(), t.policy.end(), pol + int64_t(row) * (K + 1) * A);
    }
    efficientzero::Batch b;
    b.obs = obs;
    b.nextObs = nextObs;
    b.actions = actions;
    b.valuePrefix = prefix;
    b.value = value;
    b.policy = policy;
    b.mask = mask;
    b.weights = torch::ones({B});
    return b;
}

} // namespace glimpse::xtra
