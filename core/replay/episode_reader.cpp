#include "core/replay/episode_reader.h"

#include <torch/torch.h>

#include <optional>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/replay/h5_rows.h"

namespace glimpse::replay {

namespace {

std::vector<float> toFloats(const torch::Tensor& t) {
    const torch::Tensor f = t.to(torch::kFloat32).contiguous();
    return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

std::vector<uint8_t> toBytes(const torch::Tensor& t) {
    const torch::Tensor b = t.to(torch::kUInt8).contiguous();
    return std::vector<uint8_t>(b.data_ptr<uint8_t>(), b.data_ptr<uint8_t>() + b.numel());
}

int64_t scanForward(const std::vector<uint8_t>& flags, int64_t t) {
    for (int64_t s = std::max<int64_t>(t + 1, 0); s < int64_t(flags.size()); ++s)
        if (flags[size_t(s)]) return s;
    return -1;
}

int64_t scanBackward(const std::vector<uint8_t>& flags, int64_t t) {
    for (int64_t s = std::min<int64_t>(t - 1, int64_t(flags.size()) - 1); s >= 0; --s)
        if (flags[size_t(s)]) return s;
    return -1;
}

} // namespace

const char* seriesName(Series s) {
    switch (s) {
    case Series::Reward: return "reward";
    case Series::Return: return "return";
    case Series::Value: return "value";
    case Series::ValuePrefix: return "value_prefix";
    case Series::RootValue: return "root_value";
    case Series::Lives: return "lives";
    }
    return "?";
}

const char* perActionName(PerAction p) {
    switch (p) {
    case PerAction::Policy: return "policy";
    case PerAction::Visits: return "visits";
    case PerAction::ChildQ: return "child_q";
    case PerAction::ChildPrior: return "child_prior";
    }
    return "?";
}

struct EpisodeReader::Io {
    h5::File file;
    h5::Dataset frames;
    std::optional<h5::Dataset> observations;
};

EpisodeReader::EpisodeReader(const std::string& path, const ReaderOptions& options)
    : path_(path), cache_(options.cacheBytes) {
    h5::File f = h5::openGlimpse(path, rl::kEpisodeKind, rl::kEpisodeVersion);
    version_ = f.attrInt("format_version");
    meta_ = rl::readEpisodeSteps(f, version_);
    T_ = meta_.length();
    h5::Dataset frames = f.dataset("frames");
    const auto fs = frames.shape();
    H_ = fs[1];
    W_ = fs[2];
    C_ = fs[3];
    std::optional<h5::Dataset> obs;
    if (f.hasDataset("observations")) {
        obs.emplace(f.dataset("observations"));
        const auto os = obs->shape();
        obsShape_ = {os[1], os[2], os[3]};
    }
    io_ = std::make_unique<Io>(Io{std::move(f), std::move(frames), std::move(obs)});

    const torch::Tensor a = meta_.actions.contiguous();
    actions_.assign(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + T_);
    series_[int(Series::Reward)] = toFloats(meta_.rewards);
    cumulative_.resize(size_t(T_));
    double sum = 0;
    auto& rewardSeries = series_[int(Series::Reward)];
    auto& returnSeries = series_[int(Series::Return)];
    returnSeries.resize(size_t(T_));
    for (int64_t t = 0; t < T_; ++t) {
        sum += double(rewardSeries[size_t(t)]);
        cumulative_[size_t(t)] = sum;
        returnSeries[size_t(t)] = float(sum);
    }
    hasSeries_[int(Series::Reward)] = hasSeries_[int(Series::Return)] = true;
    lifeLoss_ = toBytes(meta_.lifeLoss);
    terminals_ = toBytes(meta_.terminals);
    const auto setSeries = [&](Series s, const torch::Tensor& t) {
        if (!t.defined()) return;
        series_[int(s)] = toFloats(t);
        hasSeries_[int(s)] = true;
    };
    const auto setPerAction = [&](PerAction p, const torch::Tensor& t) {
        if (!t.defined()) return;
        perAction_[int(p)] = toFloats(t);
        hasPerAction_[int(p)] = true;
    };
    setSeries(Series::Lives, meta_.lives);
    if (meta_.hasModel) {
        setSeries(Series::Value, meta_.model.value);
        setSeries(Series::ValuePrefix, meta_.model.valuePrefix);
        setSeries(Series::RootValue, meta_.model.rootValues);
        setPerAction(PerAction::Policy, meta_.model.policy);
        setPerAction(PerAction::Visits, meta_.model.visitCounts);
        setPerAction(PerAction::ChildQ, meta_.model.childrenQ);
        setPerAction(PerAction::ChildPrior, meta_.model.childrenPrior);
    }
}

EpisodeReader::~EpisodeReader() = default;

void EpisodeReader::checkStep(int64_t t, const char* what) const {
    if (t < 0 || t >= T_)
        throw Error(path_ + ": " + what + " of step " + std::to_string(t) + " asked for, the episode has steps 0.." +
                    std::to_string(T_ - 1));
}

int64_t EpisodeReader::action(int64_t t) const {
    checkStep(t, "action");
    return actions_[size_t(t)];
}

const std::string& EpisodeReader::actionName(int64_t t) const { return meta_.actionNames[size_t(action(t))]; }

float EpisodeReader::reward(int64_t t) const {
    checkStep(t, "reward");
    return series_[int(Series::Reward)][size_t(t)];
}

double EpisodeReader::cumulativeReturn(int64_t t) const {
    checkStep(t, "return");
    return cumulative_[size_t(t)];
}

double EpisodeReader::totalReturn() const { return T_ > 0 ? cumulative_.back() : 0.0; }

bool EpisodeReader::lifeLost(int64_t t) const {
    checkStep(t, "life loss");
    return lifeLoss_[size_t(t)] != 0;
}

bool EpisodeReader::isTerminal(int64_t t) const {
    checkStep(t, "terminal flag");
    return terminals_[size_t(t)] != 0;
}

bool EpisodeReader::has(Series s) const { return hasSeries_[int(s)]; }

const std::vector<float>& EpisodeReader::series(Series s) const {
    if (!has(s)) throw Error(path_ + ": the episode has no '" + seriesName(s) + "' recorded");
    return series_[int(s)];
}

bool EpisodeReader::has(PerAction p) const { return hasPerAction_[int(p)]; }

int64_t EpisodeReader::trainingUpdate(int64_t t) const {
    if (!hasTraining()) throw Error(path_ + ": the episode was not recorded during training");
    checkStep(t, "training update");
    return meta_.training.updates[t].item<int64_t>();
}

int64_t EpisodeReader::trainingEnvSteps(int64_t t) const {
    if (!hasTraining()) throw Error(path_ + ": the episode was not recorded during training");
    checkStep(t, "training environment steps");
    return meta_.training.envSteps[t].item<int64_t>();
}

std::vector<float> EpisodeReader::taskWeights(int64_t t) const {
    if (taskNames().empty()) throw Error(path_ + ": the episode has no task weights recorded");
    checkStep(t, "task weights");
    const torch::Tensor row = meta_.training.taskWeights[t].contiguous();
    return std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
}

std::vector<float> EpisodeReader::taskWeightSeries(int64_t task) const {
    if (task < 0 || task >= int64_t(taskNames().size()))
        throw Error(path_ + ": no task " + std::to_string(task) + " (the episode has " + std::to_string(taskNames().size()) +
                    " task weights)");
    const torch::Tensor col = meta_.training.taskWeights.select(1, task).contiguous();
    return std::vector<float>(col.data_ptr<float>(), col.data_ptr<float>() + col.numel());
}

std::vector<float> EpisodeReader::perAction(PerAction p, int64_t t) const {
    if (!has(p)) throw Error(path_ + ": the episode has no '" + perActionName(p) + "' recorded");
    checkStep(t, perActionName(p));
    const size_t A = meta_.actionNames.size();
    const auto& v = perAction_[int(p)];
    return std::vector<float>(v.begin() + long(size_t(t) * A), v.begin() + long(size_t(t + 1) * A));
}

int64_t EpisodeReader::nextReward(int64_t t) const {
    const auto& r = series_[int(Series::Reward)];
    for (int64_t s = std::max<int64_t>(t + 1, 0); s < T_; ++s)
        if (r[size_t(s)] != 0.f) return s;
    return -1;
}

int64_t EpisodeReader::previousReward(int64_t t) const {
    const auto& r = series_[int(Series::Reward)];
    for (int64_t s = std::min<int64_t>(t - 1, T_ - 1); s >= 0; --s)
        if (r[size_t(s)] != 0.f) return s;
    return -1;
}

int64_t EpisodeReader::nextLifeLoss(int64_t t) const { return scanForward(lifeLoss_, t); }
int64_t EpisodeReader::previousLifeLoss(int64_t t) const { return scanBackward(lifeLoss_, t); }
int64_t EpisodeReader::nextTerminal(int64_t t) const { return scanForward(terminals_, t); }

FramePtr EpisodeReader::readFrame(int64_t t) {
    auto frame = std::make_shared<Frame>();
    frame->step = t;
    frame->height = H_;
    frame->width = W_;
    frame->channels = C_;
    frame->pixels.resize(size_t(H_ * W_ * C_));
    {
        std::lock_guard<std::mutex> lock(ioMutex_);
        readRows(io_->frames, H5T_NATIVE_UINT8, t, 1, frame->pixels.data());
    }
    return frame;
}

FramePtr EpisodeReader::frame(int64_t t) {
    checkStep(t, "frame");
    if (FramePtr f = cache_.get(t)) return f;
    FramePtr f = readFrame(t);
    cache_.put(f);
    return f;
}

FramePtr EpisodeReader::cachedFrame(int64_t t) const { return cache_.peek(t); }

int64_t EpisodeReader::prefetch(int64_t first, int64_t last, const std::atomic<bool>* cancel) {
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, T_ - 1);
    const size_t frameBytes = size_t(H_ * W_ * C_) + sizeof(Frame);
    const size_t capacity = cache_.stats().capacity;
    int64_t loaded = 0;
    for (int64_t t = first; t <= last; ++t) {
        if (cancel && cancel->load()) break;
        if (size_t(t - first + 1) * frameBytes > capacity) break;   // would evict its own frames
        if (cache_.peek(t)) continue;
        cache_.put(readFrame(t));
        ++loaded;
    }
    return loaded;
}

torch::Tensor EpisodeReader::observation(int64_t t) {
    if (!hasObservations()) throw Error(path_ + ": the episode has no 'observations' recorded");
    checkStep(t, "observation");
    torch::Tensor out = torch::empty(obsShape_, torch::kFloat32);
    std::lock_guard<std::mutex> lock(ioMutex_);
    readRows(*io_->observations, H5T_NATIVE_FLOAT, t, 1, out.data_ptr<float>());
    return out;
}

} // namespace glimpse::replay
