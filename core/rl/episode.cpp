#include "core/rl/episode.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/h5/h5.h"

namespace glimpse::rl {

namespace {

constexpr const char* kKind = "glimpse.episode";
constexpr int64_t kVersion = 1;

std::string shapeOf(const torch::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
    return s + "]";
}

void check(const torch::Tensor& t, const char* name, torch::ScalarType dtype, const std::vector<int64_t>& shape,
           const std::string& where) {
    if (!t.defined()) throw Error(where + ": episode has no '" + name + "'");
    if (t.scalar_type() != dtype)
        throw Error(where + ": '" + name + "' is " + h5::dtypeName(t.scalar_type()) + ", expected " + h5::dtypeName(dtype));
    bool ok = int64_t(shape.size()) == t.dim();
    for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t.size(int64_t(i));
    if (!ok) {
        std::string want = "[";
        for (size_t i = 0; i < shape.size(); ++i) want += (i ? "," : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
        throw Error(where + ": '" + name + "' has shape " + shapeOf(t) + ", expected " + want +
                    "] (inconsistent episode lengths or sizes)");
    }
}

std::vector<std::string> parseNames(const std::string& text, const std::string& where, const char* what) {
    try {
        auto j = nlohmann::json::parse(text);
        return j.get<std::vector<std::string>>();
    } catch (const std::exception&) {
        throw Error(where + ": attribute '" + what + "' is not a JSON array of strings");
    }
}

} // namespace

void validateEpisode(const Episode& e, const std::string& where) {
    if (e.env.empty()) throw Error(where + ": episode has no environment name");
    if (!e.actions.defined()) throw Error(where + ": episode has no 'actions'");
    const int64_t T = e.actions.size(0);
    const int64_t A = int64_t(e.actionNames.size()), C = int64_t(e.channelNames.size());
    if (A < 1) throw Error(where + ": episode has no action names");
    check(e.actions, "actions", torch::kInt64, {T}, where);
    check(e.rewards, "rewards", torch::kFloat32, {T}, where);
    check(e.lives, "lives", torch::kInt32, {T}, where);
    check(e.frames, "frames", torch::kUInt8, {T, -1, -1, 3}, where);
    check(e.observations, "observations", torch::kFloat32, {T, C, -1, -1}, where);
    if (T > 0 && (e.actions.min().item<int64_t>() < 0 || e.actions.max().item<int64_t>() >= A))
        throw Error(where + ": an action is outside the " + std::to_string(A) + " actions");
    if (e.hasModel) {
        const auto& m = e.model;
        check(m.rootValues, "model/root_values", torch::kFloat32, {T}, where);
        check(m.visitCounts, "model/visit_counts", torch::kInt32, {T, A}, where);
        check(m.value, "model/value", torch::kFloat32, {T}, where);
        check(m.valuePrefix, "model/value_prefix", torch::kFloat32, {T}, where);
        check(m.policy, "model/policy", torch::kFloat32, {T, A}, where);
    }
}

void writeEpisode(const std::string& path, const Episode& e) {
    validateEpisode(e, path);
    h5::writeAtomically(path, kKind, kVersion, [&](h5::File& f) {
        f.setAttr("env", e.env);
        f.setAttr("seed", e.seed);
        f.setAttr("frame_skip", e.frameSkip);
        f.setAttr("max_episode_steps", e.maxEpisodeSteps);
        f.setAttr("sticky_action_prob", e.stickyActionProb);
        f.setAttr("action_names", nlohmann::json(e.actionNames).dump());
        f.setAttr("channel_names", nlohmann::json(e.channelNames).dump());
        f.setAttr("return", e.episodeReturn);
        f.setAttr("terminal", int64_t(e.terminal ? 1 : 0));
        const int64_t T = e.length();
        const torch::Tensor frames = e.frames.contiguous();
        if (T > 0) {
            auto ds = f.createDataset("frames", H5T_STD_U8LE, frames.sizes().vec(), {},
                                      {1, frames.size(1), frames.size(2), 3}, 4);
            f.check(H5Dwrite(ds.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, frames.data_ptr<uint8_t>()),
                    "cannot write frames");
        } else {
            f.writeTensor("frames", frames);
        }
        h5::WriteOptions gz{h5::Compression::Auto};
        f.writeTensor("observations", e.observations.contiguous(), gz);
        f.writeTensor("actions", e.actions.contiguous());
        f.writeTensor("rewards", e.rewards.contiguous());
        f.writeTensor("lives", e.lives.contiguous());
        if (e.hasModel) {
            auto g = f.createGroup("model");
            g.setAttr("family", e.model.family);
            g.setAttr("checkpoint", e.model.checkpoint);
            g.setAttr("config", e.model.config);
            g.setAttr("simulations", e.model.simulations);
            g.writeTensor("root_values", e.model.rootValues.contiguous());
            g.writeTensor("visit_counts", e.model.visitCounts.contiguous());
            g.writeTensor("value", e.model.value.contiguous());
            g.writeTensor("value_prefix", e.model.valuePrefix.contiguous());
            g.writeTensor("policy", e.model.policy.contiguous());
        }
    });
}

Episode readEpisode(const std::string& path) {
    h5::File f = h5::openGlimpse(path, kKind, kVersion);
    Episode e;
    e.env = f.attrString("env");
    e.seed = f.attrInt("seed");
    e.frameSkip = f.attrInt("frame_skip");
    e.maxEpisodeSteps = f.attrInt("max_episode_steps");
    e.stickyActionProb = f.attrDouble("sticky_action_prob");
    e.actionNames = parseNames(f.attrString("action_names"), path, "action_names");
    e.channelNames = parseNames(f.attrString("channel_names"), path, "channel_names");
    e.episodeReturn = f.attrDouble("return");
    e.terminal = f.attrInt("terminal") != 0;
    e.frames = f.readTensor("frames");
    e.observations = f.readTensor("observations");
    e.actions = f.readTensor("actions");
    e.rewards = f.readTensor("rewards");
    e.lives = f.readTensor("lives");
    if (f.hasGroup("model")) {
        auto g = f.group("model");
        e.hasModel = true;
        e.model.family = g.attrString("family");
        e.model.checkpoint = g.attrString("checkpoint");
        e.model.config = g.attrString("config");
        e.model.simulations = g.attrInt("simulations");
        e.model.rootValues = g.readTensor("root_values");
        e.model.visitCounts = g.readTensor("visit_counts");
        e.model.value = g.readTensor("value");
        e.model.valuePrefix = g.readTensor("value_prefix");
        e.model.policy = g.readTensor("policy");
    }
    if (!e.actions.defined() || e.actions.dim() != 1) throw Error(path + ": 'actions' must be a 1-D array");
    validateEpisode(e, path);
    return e;
}

} // namespace glimpse::rl
