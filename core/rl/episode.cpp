#include "core/rl/episode.h"

#include <torch/torch.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/h5/h5.h"

namespace glimpse::rl {

namespace {

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

void checkOptional(const torch::Tensor& t, const char* name, torch::ScalarType dtype,
                   const std::vector<int64_t>& shape, const std::string& where) {
    if (t.defined()) check(t, name, dtype, shape, where);
}

std::vector<std::string> parseNames(const std::string& text, const std::string& where, const char* what) {
    try {
        auto j = nlohmann::json::parse(text);
        return j.get<std::vector<std::string>>();
    } catch (const std::exception&) {
        throw Error(where + ": attribute '" + what + "' is not a JSON array of strings");
    }
}

// Reads an optional dataset of `dtype` and shape (first dimension T); undefined when absent.
torch::Tensor readOptional(const h5::Group& g, const std::string& name, torch::ScalarType dtype,
                           const std::vector<int64_t>& shape) {
    if (!g.hasDataset(name)) return {};
    return g.dataset(name).read(dtype, shape);
}

// Everything but frames and observations, validated in `where`'s terms (the frame datasets are
// checked by the caller against T).
void validateSteps(const Episode& e, const std::string& where) {
    if (e.env.empty()) throw Error(where + ": episode has no environment name");
    if (!e.actions.defined()) throw Error(where + ": episode has no 'actions'");
    if (e.actions.dim() != 1) throw Error(where + ": 'actions' must be a 1-D array, has shape " + shapeOf(e.actions));
    const int64_t T = e.actions.size(0);
    const int64_t A = int64_t(e.actionNames.size());
    if (A < 1) throw Error(where + ": episode has no action names");
    check(e.actions, "actions", torch::kInt64, {T}, where);
    check(e.rewards, "rewards", torch::kFloat32, {T}, where);
    checkOptional(e.lives, "lives", torch::kInt32, {T}, where);
    checkOptional(e.terminals, "terminals", torch::kBool, {T}, where);
    checkOptional(e.lifeLoss, "life_loss", torch::kBool, {T}, where);
    if (T > 0) {
        const int64_t lo = e.actions.min().item<int64_t>(), hi = e.actions.max().item<int64_t>();
        if (lo < 0 || hi >= A) {
            const int64_t bad = lo < 0 ? lo : hi;
            const int64_t at = (e.actions == bad).nonzero()[0][0].item<int64_t>();
            throw Error(where + ": 'actions' has action id " + std::to_string(bad) + " at step " + std::to_string(at) +
                        ", outside the " + std::to_string(A) + " actions (unknown action id)");
        }
    }
    if (e.hasModel) {
        const auto& m = e.model;
        checkOptional(m.rootValues, "model/root_values", torch::kFloat32, {T}, where);
        checkOptional(m.visitCounts, "model/visit_counts", torch::kInt32, {T, A}, where);
        checkOptional(m.value, "model/value", torch::kFloat32, {T}, where);
        checkOptional(m.valuePrefix, "model/value_prefix", torch::kFloat32, {T}, where);
        checkOptional(m.policy, "model/policy", torch::kFloat32, {T, A}, where);
        checkOptional(m.childrenQ, "model/children_q", torch::kFloat32, {T, A}, where);
        checkOptional(m.childrenPrior, "model/children_prior", torch::kFloat32, {T, A}, where);
    }
    if (e.hasTraining) {
        const auto& tr = e.training;
        const int64_t m = int64_t(tr.taskNames.size());
        check(tr.updates, "training/updates", torch::kInt64, {T}, where);
        check(tr.envSteps, "training/env_steps", torch::kInt64, {T}, where);
        if (!tr.taskCategories.empty() && int64_t(tr.taskCategories.size()) != m)
            throw Error(where + ": 'training' names " + std::to_string(m) + " tasks but " +
                        std::to_string(tr.taskCategories.size()) + " task categories");
        if (m > 0) check(tr.taskWeights, "training/task_weights", torch::kFloat32, {T, m}, where);
        else if (tr.taskWeights.defined()) throw Error(where + ": 'training/task_weights' without task names");
    }
}

void checkFrameShape(int64_t T, int64_t H, int64_t W, int64_t C, const std::string& where, const std::string& what) {
    if (T > 0 && (H < 1 || W < 1)) throw Error(where + ": " + what + " are empty images");
    // A damaged header can declare frames of 10^18 pixels (fuzz finding 16); a reader would
    // size its frame buffer from it.
    if (H > kMaxFrameSide || W > kMaxFrameSide)
        throw Error(where + ": " + what + " are " + std::to_string(H) + " x " + std::to_string(W) +
                    " pixels, more than " + std::to_string(kMaxFrameSide) + " x " + std::to_string(kMaxFrameSide) +
                    " (a damaged file?)");
    if (C != 1 && C != 3)
        throw Error(where + ": " + what + " have " + std::to_string(C) + " channels, expected 3 (RGB) or 1 (grey)");
}

void writeSteps(h5::File& f, const Episode& e) {
    const int64_t T = e.length();
    f.setAttr("env", e.env);
    f.setAttr("source", e.source);
    f.setAttr("seed", e.seed);
    f.setAttr("frame_skip", e.frameSkip);
    f.setAttr("max_episode_steps", e.maxEpisodeSteps);
    f.setAttr("sticky_action_prob", e.stickyActionProb);
    f.setAttr("action_names", nlohmann::json(e.actionNames).dump());
    f.setAttr("channel_names", nlohmann::json(e.channelNames).dump());
    f.setAttr("return", e.episodeReturn);
    f.setAttr("terminal", int64_t(e.terminal ? 1 : 0));
    const h5::WriteOptions gz{h5::Compression::Auto};
    f.writeTensor("actions", e.actions.contiguous(), gz);
    f.writeTensor("rewards", e.rewards.contiguous(), gz);
    torch::Tensor terminals = e.terminals;
    if (!terminals.defined()) {
        terminals = torch::zeros({T}, torch::kBool);
        if (T > 0 && e.terminal) terminals[T - 1] = true;
    }
    f.writeTensor("terminals", terminals.contiguous(), gz);
    torch::Tensor lifeLoss = e.lifeLoss;
    if (!lifeLoss.defined()) lifeLoss = e.lives.defined() ? lifeLossFromLives(e.lives) : torch::zeros({T}, torch::kBool);
    f.writeTensor("life_loss", lifeLoss.contiguous(), gz);
    if (e.lives.defined()) f.writeTensor("lives", e.lives.contiguous(), gz);
    if (e.hasModel) {
        auto g = f.createGroup("model");
        g.setAttr("family", e.model.family);
        g.setAttr("checkpoint", e.model.checkpoint);
        g.setAttr("config", e.model.config);
        g.setAttr("simulations", e.model.simulations);
        const auto put = [&](const char* name, const torch::Tensor& t) {
            if (t.defined()) g.writeTensor(name, t.contiguous(), gz);
        };
        put("root_values", e.model.rootValues);
        put("visit_counts", e.model.visitCounts);
        put("value", e.model.value);
        put("value_prefix", e.model.valuePrefix);
        put("policy", e.model.policy);
        put("children_q", e.model.childrenQ);
        put("children_prior", e.model.childrenPrior);
    }
    if (e.hasTraining) {
        auto g = f.createGroup("training");
        g.setAttr("run", e.training.run);
        g.setAttr("trainer", e.training.trainer);
        g.setAttr("task_names", nlohmann::json(e.training.taskNames).dump());
        g.setAttr("task_categories", nlohmann::json(e.training.taskCategories).dump());
        g.writeTensor("updates", e.training.updates.contiguous(), gz);
        g.writeTensor("env_steps", e.training.envSteps.contiguous(), gz);
        if (e.training.taskWeights.defined()) g.writeTensor("task_weights", e.training.taskWeights.contiguous(), gz);
    }
}

// Writes `total` rows of a chunked dataset batch by batch through `produce`.
void writeBatches(h5::Dataset& ds, hid_t memType, int64_t total, int64_t batch, const std::vector<int64_t>& rowShape,
                  torch::ScalarType dtype, const std::function<torch::Tensor(int64_t, int64_t)>& produce) {
    const std::vector<int64_t> full = [&] {
        std::vector<int64_t> s{total};
        s.insert(s.end(), rowShape.begin(), rowShape.end());
        return s;
    }();
    std::vector<hsize_t> fdims(full.begin(), full.end());
    h5::Id fspace(H5Screate_simple(int(fdims.size()), fdims.data(), nullptr), H5Sclose);
    for (int64_t first = 0; first < total; first += batch) {
        const int64_t n = std::min(batch, total - first);
        torch::Tensor t = produce(first, n);
        std::vector<int64_t> want{n};
        want.insert(want.end(), rowShape.begin(), rowShape.end());
        if (!t.defined() || t.scalar_type() != dtype || t.sizes().vec() != want)
            ds.fail("rows " + std::to_string(first) + ".." + std::to_string(first + n - 1) + " have " +
                    (t.defined() ? h5::dtypeName(t.scalar_type()) + " " + shapeOf(t) : std::string("no data")) +
                    ", expected " + h5::dtypeName(dtype) + " " + h5::shapeString(want) + " (frames of the wrong shape)");
        t = t.contiguous();
        std::vector<hsize_t> start(fdims.size(), 0), count(fdims);
        start[0] = hsize_t(first);
        count[0] = hsize_t(n);
        ds.check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                 "cannot select rows");
        h5::Id mspace(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
        ds.check(H5Dwrite(ds.id(), memType, mspace.get(), fspace.get(), H5P_DEFAULT, t.data_ptr()),
                 "cannot write rows " + std::to_string(first) + ".." + std::to_string(first + n - 1));
    }
}

} // namespace

int64_t framesPerChunk(int64_t frameBytes) {
    return std::clamp<int64_t>(32 * 1024 / std::max<int64_t>(1, frameBytes), 1, 64);
}

torch::Tensor lifeLossFromLives(const torch::Tensor& lives) {
    const int64_t T = lives.size(0);
    torch::Tensor out = torch::zeros({T}, torch::kBool);
    if (T > 1) out.slice(0, 1) = lives.slice(0, 1) < lives.slice(0, 0, T - 1);
    return out;
}

void validateEpisode(const Episode& e, const std::string& where) {
    validateSteps(e, where);
    const int64_t T = e.length();
    check(e.frames, "frames", torch::kUInt8, {T, -1, -1, -1}, where);
    checkFrameShape(T, e.frames.size(1), e.frames.size(2), e.frames.size(3), where, "'frames'");
    if (e.observations.defined())
        check(e.observations, "observations", torch::kFloat32, {T, int64_t(e.channelNames.size()), -1, -1}, where);
}

void writeEpisode(const std::string& path, const Episode& e) {
    validateEpisode(e, path);
    FrameSource src;
    src.height = e.frames.size(1);
    src.width = e.frames.size(2);
    src.channels = e.frames.size(3);
    const torch::Tensor frames = e.frames.contiguous();
    src.frames = [&](int64_t first, int64_t n) { return frames.slice(0, first, first + n); };
    const torch::Tensor obs = e.observations.defined() ? e.observations.contiguous() : torch::Tensor();
    if (obs.defined()) {
        src.observationShape = obs.sizes().slice(1).vec();
        src.observations = [&](int64_t first, int64_t n) { return obs.slice(0, first, first + n); };
    }
    src.batch = std::max<int64_t>(1, int64_t(8 << 20) / std::max<int64_t>(1, frames.numel() / std::max<int64_t>(1, e.length())));
    Episode steps = e;
    steps.frames = torch::Tensor();
    steps.observations = torch::Tensor();
    writeEpisode(path, steps, src);
}

void writeEpisode(const std::string& path, const Episode& e, const FrameSource& src) {
    validateSteps(e, path);
    const int64_t T = e.length();
    checkFrameShape(T, src.height, src.width, src.channels, path, "frames");
    if (T > 0 && !src.frames) throw Error(path + ": no frames to write");
    const bool hasObs = !src.observationShape.empty();
    if (hasObs && (src.observationShape.size() != 3 || !src.observations))
        throw Error(path + ": observations must be [C, h, w] with a source of rows");
    if (hasObs && src.observationShape[0] != int64_t(e.channelNames.size()))
        throw Error(path + ": observations have " + std::to_string(src.observationShape[0]) + " channels but " +
                    std::to_string(e.channelNames.size()) + " channel names");
    const int64_t batch = std::max<int64_t>(1, src.batch);
    h5::writeAtomically(path, kEpisodeKind, kEpisodeVersion, [&](h5::File& f) {
        writeSteps(f, e);
        const int64_t H = src.height, W = src.width, C = src.channels;
        const int64_t k = framesPerChunk(H * W * C);
        if (T > 0) {
            auto ds = f.createDataset("frames", H5T_STD_U8LE, {T, H, W, C}, {}, {std::min(k, T), H, W, C}, 4, true);
            writeBatches(ds, H5T_NATIVE_UINT8, T, batch, {H, W, C}, torch::kUInt8, src.frames);
        } else {
            f.writeTensor("frames", torch::zeros({0, std::max<int64_t>(H, 1), std::max<int64_t>(W, 1), C}, torch::kUInt8));
        }
        if (hasObs) {
            const auto& s = src.observationShape;
            if (T > 0) {
                const int64_t ko = framesPerChunk(s[0] * s[1] * s[2] * 4);
                auto ds = f.createDataset("observations", H5T_IEEE_F32LE, {T, s[0], s[1], s[2]}, {},
                                          {std::min(ko, T), s[0], s[1], s[2]}, 4, true);
                writeBatches(ds, H5T_NATIVE_FLOAT, T, batch, s, torch::kFloat32, src.observations);
            } else {
                f.writeTensor("observations", torch::zeros({0, s[0], s[1], s[2]}));
            }
        }
    });
}

Episode readEpisodeSteps(const h5::File& f, int64_t version) {
    const std::string& path = f.fileName();
    Episode e;
    e.env = f.attrString("env");
    if (f.hasAttr("source")) e.source = f.attrString("source");
    e.seed = f.attrInt("seed");
    e.frameSkip = f.attrInt("frame_skip");
    e.maxEpisodeSteps = f.attrInt("max_episode_steps");
    e.stickyActionProb = f.attrDouble("sticky_action_prob");
    e.actionNames = parseNames(f.attrString("action_names"), path, "action_names");
    e.channelNames = parseNames(f.attrString("channel_names"), path, "channel_names");
    e.episodeReturn = f.attrDouble("return");
    e.terminal = f.attrInt("terminal") != 0;
    e.actions = f.dataset("actions").read(torch::kInt64);
    if (e.actions.dim() != 1) throw Error(path + ": 'actions' must be a 1-D array, has shape " + shapeOf(e.actions));
    const int64_t T = e.actions.size(0);
    const int64_t A = int64_t(e.actionNames.size());
    e.rewards = f.dataset("rewards").read(torch::kFloat32, {T});
    if (version == 1) {
        e.lives = f.dataset("lives").read(torch::kInt32, {T});
        e.terminals = torch::zeros({T}, torch::kBool);
        if (T > 0 && e.terminal) e.terminals[T - 1] = true;
        e.lifeLoss = lifeLossFromLives(e.lives);
        if (!f.hasDataset("observations")) f.fail("version 1 episode without 'observations'");
    } else {
        e.lives = readOptional(f, "lives", torch::kInt32, {T});
        e.terminals = f.dataset("terminals").read(torch::kBool, {T});
        e.lifeLoss = f.dataset("life_loss").read(torch::kBool, {T});
    }
    if (f.hasGroup("model")) {
        auto g = f.group("model");
        e.hasModel = true;
        e.model.family = g.attrString("family");
        e.model.checkpoint = g.attrString("checkpoint");
        e.model.config = g.attrString("config");
        e.model.simulations = g.attrInt("simulations");
        if (version == 1) {
            for (const char* n : {"root_values", "visit_counts", "value", "value_prefix", "policy"})
                if (!g.hasDataset(n)) g.fail(std::string("version 1 episode without '") + n + "'");
        }
        e.model.rootValues = readOptional(g, "root_values", torch::kFloat32, {T});
        e.model.visitCounts = readOptional(g, "visit_counts", torch::kInt32, {T, A});
        e.model.value = readOptional(g, "value", torch::kFloat32, {T});
        e.model.valuePrefix = readOptional(g, "value_prefix", torch::kFloat32, {T});
        e.model.policy = readOptional(g, "policy", torch::kFloat32, {T, A});
        e.model.childrenQ = readOptional(g, "children_q", torch::kFloat32, {T, A});
        e.model.childrenPrior = readOptional(g, "children_prior", torch::kFloat32, {T, A});
    }
    if (f.hasGroup("training")) {
        auto g = f.group("training");
        e.hasTraining = true;
        e.training.run = g.attrString("run");
        e.training.trainer = g.attrString("trainer");
        e.training.taskNames = parseNames(g.attrString("task_names"), path, "training/task_names");
        e.training.taskCategories = parseNames(g.attrString("task_categories"), path, "training/task_categories");
        e.training.updates = g.dataset("updates").read(torch::kInt64, {T});
        e.training.envSteps = g.dataset("env_steps").read(torch::kInt64, {T});
        const int64_t m = int64_t(e.training.taskNames.size());
        if (m > 0) e.training.taskWeights = g.dataset("task_weights").read(torch::kFloat32, {T, m});
        else if (g.hasDataset("task_weights")) g.fail("'task_weights' without task names");
    }
    validateSteps(e, path);
    // The pixel datasets: shapes only (their data is read on demand).
    const auto frames = f.dataset("frames");
    const auto fs = frames.shape();
    if (frames.dtype() != torch::kUInt8) frames.fail("expected uint8 frames, file has " + h5::dtypeName(frames.dtype()));
    if (fs.size() != 4 || fs[0] != T)
        frames.fail("has shape " + h5::shapeString(fs) + ", expected [" + std::to_string(T) +
                    ",H,W,C] (inconsistent episode lengths or sizes)");
    checkFrameShape(T, fs[1], fs[2], fs[3], path, "'frames'");
    if (f.hasDataset("observations")) {
        const auto obs = f.dataset("observations");
        const auto os = obs.shape();
        if (obs.dtype() != torch::kFloat32)
            obs.fail("expected float32 observations, file has " + h5::dtypeName(obs.dtype()));
        if (os.size() != 4 || os[0] != T || os[1] != int64_t(e.channelNames.size()))
            obs.fail("has shape " + h5::shapeString(os) + ", expected [" + std::to_string(T) + "," +
                     std::to_string(e.channelNames.size()) + ",h,w] (inconsistent episode lengths or sizes)");
        if (os[2] < 0 || os[3] < 0 || os[2] > kMaxFrameSide || os[3] > kMaxFrameSide)
            obs.fail("has shape " + h5::shapeString(os) + ": maps of more than " + std::to_string(kMaxFrameSide) +
                     " x " + std::to_string(kMaxFrameSide) + " cells (a damaged file?)");
    }
    return e;
}

Episode readEpisode(const std::string& path) {
    h5::File f = h5::openGlimpse(path, kEpisodeKind, kEpisodeVersion);
    const int64_t version = f.attrInt("format_version");
    Episode e = readEpisodeSteps(f, version);
    e.frames = f.dataset("frames").read();
    if (f.hasDataset("observations")) e.observations = f.dataset("observations").read();
    validateEpisode(e, path);
    return e;
}

} // namespace glimpse::rl
