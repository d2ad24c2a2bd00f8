// Import of one episode of a Minari dataset (HDF5 storage) into a Glimpse episode file.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/replay/h5_rows.h"
#include "core/replay/import.h"

namespace fs = std::filesystem;

namespace glimpse::replay {

namespace {

constexpr const char* kMainFile = "main_data.hdf5";
constexpr const char* kKeys = "observations, actions, rewards, terminations, truncations";

// Dataset metadata: metadata.json beside main_data.hdf5 (Minari >= 0.5), else the root
// attributes of main_data.hdf5 (older Minari). Only string values are kept.
std::map<std::string, std::string> readMetadata(const std::string& file, const h5::File& f) {
    std::map<std::string, std::string> meta;
    const fs::path json = fs::path(file).parent_path() / "metadata.json";
    if (fs::exists(json)) {
        std::ifstream in(json);
        nlohmann::json j;
        try {
            in >> j;
        } catch (const std::exception& e) {
            throw Error(json.string() + ": not valid JSON (" + e.what() + ")");
        }
        if (!j.is_object()) throw Error(json.string() + ": expected a JSON object");
        for (auto it = j.begin(); it != j.end(); ++it)
            if (it->is_string()) meta[it.key()] = it->get<std::string>();
        return meta;
    }
    for (const auto& name : f.attrNames()) {
        if (f.attrTypeDescription(name).rfind("string", 0) == 0) meta[name] = f.attrString(name);
    }
    return meta;
}

struct ActionSpace {
    int64_t n = -1;      // -1: unknown
    int64_t start = 0;
};

ActionSpace parseActionSpace(const std::map<std::string, std::string>& meta, const std::string& file) {
    ActionSpace a;
    auto it = meta.find("action_space");
    if (it == meta.end()) return a;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(it->second);
    } catch (const std::exception&) {
        throw Error(file + ": metadata 'action_space' is not JSON");
    }
    const std::string type = j.value("type", std::string());
    if (type != "Discrete")
        throw Error(file + ": the action space is " + (type.empty() ? std::string("not described") : type) +
                    "; only Discrete action spaces can be imported");
    if (!j.contains("n") || !j["n"].is_number_integer() || j["n"].get<int64_t>() < 1)
        throw Error(file + ": metadata 'action_space' has no positive integer 'n'");
    a.n = j["n"].get<int64_t>();
    if (j.contains("start") && j["start"].is_number_integer()) a.start = j["start"].get<int64_t>();
    return a;
}

std::string groupName(int64_t episode) { return "episode_" + std::to_string(episode); }

h5::Dataset requireDataset(const h5::Group& g, const std::string& key, const std::string& file) {
    if (g.hasGroup(key))
        throw Error(file + ": '" + g.path() + "/" + key + "' is a group (a Dict or Tuple space); only Box/Discrete datasets can be imported");
    if (!g.hasDataset(key))
        throw Error(file + ": '" + g.path() + "/" + key + "' is missing (a Minari episode group has " + kKeys + ")");
    return g.dataset(key);
}

void requireLength(const h5::Dataset& d, int64_t T, const std::string& file) {
    const auto shape = d.shape();
    if (shape.size() != 1 || shape[0] != T)
        throw Error(file + ": '" + d.path() + "' has shape " + h5::shapeString(shape) + ", expected [" + std::to_string(T) +
                    "] like 'rewards' (arrays of mismatched lengths)");
}

torch::Tensor readVector(const h5::Dataset& d, int64_t T, const std::string& file, const char* what) {
    requireLength(d, T, file);
    const auto dt = d.dtype();
    if (dt == torch::kFloat16) throw Error(file + ": '" + d.path() + "' is float16, " + what + " must be integer, bool or float32/64");
    return d.read();
}

} // namespace

const std::vector<std::string>& aleActionNames() {
    static const std::vector<std::string> names = {
        "NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN", "UPRIGHT", "UPLEFT", "DOWNRIGHT", "DOWNLEFT",
        "UPFIRE", "RIGHTFIRE", "LEFTFIRE", "DOWNFIRE", "UPRIGHTFIRE", "UPLEFTFIRE", "DOWNRIGHTFIRE", "DOWNLEFTFIRE"};
    return names;
}

std::string findMinariFile(const std::string& path) {
    const fs::path p(path);
    if (fs::is_directory(p)) {
        for (const fs::path c : {p / kMainFile, p / "data" / kMainFile})
            if (fs::exists(c)) return c.string();
        throw Error(path + ": is a folder without " + kMainFile + " or data/" + kMainFile + " (not a Minari dataset)");
    }
    if (!fs::exists(p)) throw Error(path + ": file does not exist");
    return path;
}

std::vector<int64_t> minariEpisodes(const std::string& path) {
    const std::string file = findMinariFile(path);
    h5::File f = h5::File::open(file);
    std::vector<int64_t> out;
    for (const auto& name : f.groupNames()) {
        if (name.rfind("episode_", 0) != 0) continue;
        const std::string num = name.substr(8);
        if (num.empty() || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        out.push_back(std::stoll(num));
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The imported episode's action names: the given ones (as many as the space has), ALE's names for
// Discrete(18), else the action ids. An action space without a size takes the largest id + 1.
std::vector<std::string> importedActionNames(const std::string& file, const ActionSpace& space,
                                             const torch::Tensor& actions, const MinariImportOptions& options) {
    int64_t A = space.n;
    if (!options.actionNames.empty()) {
        if (A >= 0 && int64_t(options.actionNames.size()) != A)
            throw Error(file + ": " + std::to_string(options.actionNames.size()) + " action names given, the action space has " +
                        std::to_string(A) + " actions");
        return options.actionNames;
    }
    if (A < 0) {
        // The largest action + 1, without overflowing on a corrupt INT64_MAX (fuzz finding 13).
        const int64_t largest = actions.max().item<int64_t>();
        A = largest >= 100000 ? largest : std::max<int64_t>(largest + 1, 1);
    }
    // One name per action is built below: refuse a count no game has before allocating it
    // (a corrupt Discrete(n) asked for gigabytes of names; fuzz finding, docs/fuzzing.md).
    if (A > 100000)
        throw Error(file + ": an action space of " + std::to_string(A) + " actions (at most 100000 can be imported)");
    if (A == 18) return aleActionNames();
    std::vector<std::string> names;
    for (int64_t i = 0; i < A; ++i) names.push_back(std::to_string(i + space.start));
    return names;
}

rl::Episode importMinari(const std::string& path, const std::string& out, const MinariImportOptions& options) {
    const std::string file = findMinariFile(path);
    h5::File f = h5::File::open(file);
    const std::string gname = groupName(options.episode);
    if (!f.hasGroup(gname)) {
        const auto eps = minariEpisodes(file);
        std::string have = eps.empty() ? std::string("no episode_N groups (not a Minari HDF5 file?)")
                                       : "episode_" + std::to_string(eps.front()) + " .. episode_" + std::to_string(eps.back()) +
                                             " (" + std::to_string(eps.size()) + " episodes)";
        throw Error(file + ": no group '" + gname + "'; the file has " + have);
    }
    const h5::Group g = f.group(gname);
    const auto meta = readMetadata(file, f);
    const ActionSpace space = parseActionSpace(meta, file);

    // Per-step arrays: rewards define T.
    const h5::Dataset rewardsDs = requireDataset(g, "rewards", file);
    const auto rshape = rewardsDs.shape();
    if (rshape.size() != 1) throw Error(file + ": '" + rewardsDs.path() + "' has shape " + h5::shapeString(rshape) + ", expected [T]");
    const int64_t T = rshape[0];
    if (T < 1) throw Error(file + ": '" + gname + "' has no steps");
    const h5::Dataset actionsDs = requireDataset(g, "actions", file);
    const h5::Dataset termDs = requireDataset(g, "terminations", file);
    const h5::Dataset truncDs = requireDataset(g, "truncations", file);
    const h5::Dataset obsDs = requireDataset(g, "observations", file);
    // Lengths first, data second: a damaged file declaring millions of rewards is refused
    // before any of them is read (the fuzzer found one that took seconds).
    for (const h5::Dataset* d : {&actionsDs, &termDs, &truncDs}) requireLength(*d, T, file);

    rl::Episode e;
    e.rewards = readVector(rewardsDs, T, file, "rewards").to(torch::kFloat32);
    torch::Tensor actions = readVector(actionsDs, T, file, "actions");
    if (torch::isFloatingType(actions.scalar_type()) || actions.scalar_type() == torch::kBool)
        throw Error(file + ": '" + actionsDs.path() + "' is " + h5::dtypeName(actions.scalar_type()) +
                    "; only Discrete (integer) actions can be imported");
    actions = actions.to(torch::kInt64) - space.start;
    const torch::Tensor terminations = readVector(termDs, T, file, "terminations").ne(0);
    const torch::Tensor truncations = readVector(truncDs, T, file, "truncations").ne(0);
    (void)truncations;   // read to validate the episode; a truncated end is simply not terminal

    // Actions and their names.
    e.actionNames = importedActionNames(file, space, actions, options);
    const int64_t A = int64_t(e.actionNames.size());
    const int64_t lo = actions.min().item<int64_t>(), hi = actions.max().item<int64_t>();
    if (lo < 0 || hi >= A) {
        const int64_t bad = lo < 0 ? lo : hi;
        const int64_t at = (actions == bad).nonzero()[0][0].item<int64_t>();
        throw Error(file + ": '" + actionsDs.path() + "' has action " + std::to_string(bad + space.start) + " at step " +
                    std::to_string(at) + ", outside the " + std::to_string(A) + " actions (unknown action id)");
    }
    e.actions = actions;

    // Frames: uint8 images, T + 1 (Minari: initial and final observation) or T rows.
    const auto os = obsDs.shape();
    const bool imageShape = (os.size() == 4 && (os[3] == 1 || os[3] == 3)) || os.size() == 3;
    if (obsDs.dtype() != torch::kUInt8 || !imageShape || (os[0] != T + 1 && os[0] != T))
        throw Error(file + ": '" + obsDs.path() + "' is " + obsDs.typeDescription() + " " + h5::shapeString(os) +
                    ", expected uint8 images [" + std::to_string(T + 1) + ",H,W,C] with C 1 or 3, or [" +
                    std::to_string(T + 1) + ",H,W] (frames of the wrong shape or length)");
    const int64_t H = os[1], W = os[2], C = os.size() == 4 ? os[3] : 1;

    // Lives from ALE's info dict, when recorded: infos/lives with T + 1 (reset info first) or T rows.
    if (g.hasGroup("infos") && g.group("infos").hasDataset("lives")) {
        const h5::Dataset livesDs = g.group("infos").dataset("lives");
        const auto ls = livesDs.shape();
        if (ls.size() != 1 || (ls[0] != T + 1 && ls[0] != T))
            throw Error(file + ": '" + livesDs.path() + "' has shape " + h5::shapeString(ls) + ", expected [" +
                        std::to_string(T + 1) + "] or [" + std::to_string(T) + "] (arrays of mismatched lengths)");
        torch::Tensor lives = livesDs.read().to(torch::kInt32);
        if (ls[0] == T + 1) {
            e.lifeLoss = lives.slice(0, 1) < lives.slice(0, 0, T);
            lives = lives.slice(0, 1);
        }
        e.lives = lives.contiguous();
    }

    e.env = options.game;
    if (e.env.empty()) {
        auto it = meta.find("dataset_id");
        e.env = it != meta.end() && !it->second.empty() ? it->second : fs::path(file).stem().string();
    }
    e.source = "minari:" + file + "#" + gname;
    if (g.hasAttr("seed")) {
        try {
            e.seed = g.attrInt("seed");
        } catch (const Error&) {
        }
    }
    e.frameSkip = 1;
    e.terminals = terminations;
    e.terminal = terminations[T - 1].item<bool>();
    e.episodeReturn = e.rewards.sum().item<double>();
    rl::validateEpisode([&] {
        rl::Episode probe = e;
        probe.frames = torch::zeros({T, 1, 1, C}, torch::kUInt8);
        return probe;
    }(), file + " ('" + gname + "')");

    rl::FrameSource src;
    src.height = H;
    src.width = W;
    src.channels = C;
    src.batch = std::max<int64_t>(1, int64_t(8 << 20) / (H * W * C));
    src.frames = [&](int64_t first, int64_t n) {
        torch::Tensor t = torch::empty({n, H, W, C}, torch::kUInt8);
        readRows(obsDs, H5T_NATIVE_UINT8, first, n, t.data_ptr<uint8_t>());
        return t;
    };
    rl::writeEpisode(out, e, src);
    return e;
}

} // namespace glimpse::replay
