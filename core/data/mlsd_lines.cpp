#include "core/data/mlsd_lines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/data/augment.h"
#include "core/error.h"
#include "core/eval/edge_support.h"
#include "core/h5/h5.h"
#include "core/io/image.h"
#include "core/models/mlsd/model.h"

namespace glimpse::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCacheKind = "glimpse.mlsd_labels";
constexpr int64_t kCacheVersion = 1;

std::mutex gCheckpointMutex;
std::string gCheckpoint;

struct Entry {
    int64_t size = 0;
    uint64_t hash = 0;
    int width = 0, height = 0;
    torch::Tensor lines, scores;
};

// The key of a photo in the cache: its path relative to the cache's folder when it lies in
// it, else its absolute path.
std::string photoKey(const std::string& photo, const fs::path& cacheDir) {
    std::error_code ec;
    fs::path abs = fs::weakly_canonical(fs::absolute(photo, ec), ec);
    if (ec) abs = fs::absolute(photo).lexically_normal();
    fs::path dir = fs::weakly_canonical(fs::absolute(cacheDir, ec), ec);
    if (ec) dir = fs::absolute(cacheDir).lexically_normal();
    const fs::path rel = abs.lexically_relative(dir);
    if (!rel.empty() && *rel.begin() != "..") return rel.generic_string();
    return abs.generic_string();
}

// Reads the cache; on any problem returns false with `why` set (the caller rebuilds).
bool readCache(const std::string& path, const std::string& identity, std::map<std::string, Entry>& out,
               std::string& why) {
    try {
        h5::File f = h5::File::open(path);
        const auto header = h5::readHeader(f);
        if (!header || header->kind != kCacheKind) {
            why = "it is not an M-LSD label cache (kind " + (header ? "'" + header->kind + "'" : std::string("missing")) + ")";
            return false;
        }
        if (header->formatVersion != kCacheVersion) {
            why = "it has format version " + std::to_string(header->formatVersion) + ", this Glimpse writes " +
                  std::to_string(kCacheVersion);
            return false;
        }
        const std::string theirs = f.attrString("labeller");
        if (theirs != identity) {
            why = "it was made by another labeller (" + theirs + "; now " + identity + ")";
            return false;
        }
        const torch::Tensor names = f.readTensor("paths", torch::kUInt8, {-1});
        const torch::Tensor sizes = f.readTensor("sizes", torch::kInt64, {-1});
        const int64_t n = sizes.size(0);
        const torch::Tensor hashes = f.readTensor("hashes", torch::kInt64, {n});
        const torch::Tensor widths = f.readTensor("widths", torch::kInt32, {n});
        const torch::Tensor heights = f.readTensor("heights", torch::kInt32, {n});
        const torch::Tensor offsets = f.readTensor("offsets", torch::kInt64, {n + 1});
        const torch::Tensor lines = f.readTensor("lines", torch::kFloat32, {-1, 4});
        const torch::Tensor scores = f.readTensor("scores", torch::kFloat32, {lines.size(0)});
        std::vector<std::string> keys;
        {
            const auto* p = names.data_ptr<uint8_t>();
            std::string all(reinterpret_cast<const char*>(p), size_t(names.numel()));
            size_t start = 0;
            while (n > 0) {
                const size_t e = all.find('\n', start);
                keys.push_back(all.substr(start, e == std::string::npos ? std::string::npos : e - start));
                if (e == std::string::npos) break;
                start = e + 1;
            }
        }
        if (int64_t(keys.size()) != n) {
            why = "it lists " + std::to_string(keys.size()) + " paths for " + std::to_string(n) + " entries";
            return false;
        }
        const auto off = offsets.accessor<int64_t, 1>();
        if (off[0] != 0 || off[n] != lines.size(0)) {
            why = "its offsets do not cover its lines";
            return false;
        }
        for (int64_t i = 0; i < n; ++i) {
            if (off[i + 1] < off[i]) {
                why = "its offsets decrease at entry " + std::to_string(i);
                return false;
            }
            Entry e;
            e.size = sizes[i].item<int64_t>();
            e.hash = uint64_t(hashes[i].item<int64_t>());
            e.width = widths[i].item<int>();
            e.height = heights[i].item<int>();
            e.lines = lines.slice(0, off[i], off[i + 1]).clone();
            e.scores = scores.slice(0, off[i], off[i + 1]).clone();
            out[keys[size_t(i)]] = std::move(e);
        }
        return true;
    } catch (const std::exception& e) {
        why = std::string("it cannot be read (") + e.what() + ")";
        return false;
    }
}

void writeCache(const std::string& path, const std::string& identity, const std::vector<std::string>& keys,
                const std::vector<Entry>& entries) {
    const int64_t n = int64_t(entries.size());
    std::string joined;
    for (size_t i = 0; i < keys.size(); ++i) joined += (i ? "\n" : "") + keys[i];
    auto names = torch::empty({int64_t(joined.size())}, torch::kUInt8);
    if (!joined.empty()) std::memcpy(names.data_ptr<uint8_t>(), joined.data(), joined.size());
    auto sizes = torch::empty({n}, torch::kInt64), hashes = torch::empty({n}, torch::kInt64);
    auto widths = torch::empty({n}, torch::kInt32), heights = torch::empty({n}, torch::kInt32);
    auto offsets = torch::zeros({n + 1}, torch::kInt64);
    std::vector<torch::Tensor> lines, scores;
    for (int64_t i = 0; i < n; ++i) {
        const Entry& e = entries[size_t(i)];
        sizes[i] = e.size;
        hashes[i] = int64_t(e.hash);
        widths[i] = e.width;
        heights[i] = e.height;
        offsets[i + 1] = offsets[i].item<int64_t>() + e.lines.size(0);
        lines.push_back(e.lines);
        scores.push_back(e.scores);
    }
    const torch::Tensor allLines = n ? torch::cat(lines) : torch::zeros({0, 4});
    const torch::Tensor allScores = n ? torch::cat(scores) : torch::zeros({0});
    h5::writeAtomically(path, kCacheKind, kCacheVersion, [&](h5::File& f) {
        f.setAttr("labeller", identity);
        f.writeTensor("paths", names);
        f.writeTensor("sizes", sizes);
        f.writeTensor("hashes", hashes);
        f.writeTensor("widths", widths);
        f.writeTensor("heights", heights);
        f.writeTensor("offsets", offsets);
        f.writeTensor("lines", allLines.contiguous());
        f.writeTensor("scores", allScores.contiguous());
    });
}

std::string fnvHex(uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

} // namespace

std::string MlsdLabelOptions::toJson() const {
    return nlohmann::json{{"score_threshold", scoreThreshold}, {"max_lines", maxLines}, {"min_length", minLength}, {"snap_to_edges", snapToEdges}}.dump();
}

uint64_t fileContentHash(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot be read (" + std::strerror(errno) + ")");
    uint64_t h = 1469598103934665603ULL;
    std::vector<char> buf(1 << 16);
    while (in) {
        in.read(buf.data(), std::streamsize(buf.size()));
        const std::streamsize got = in.gcount();
        for (std::streamsize i = 0; i < got; ++i) {
            h ^= uint8_t(buf[size_t(i)]);
            h *= 1099511628211ULL;
        }
    }
    if (in.bad()) throw Error(path + ": read error");
    return h;
}

MlsdLabeller mlsdCheckpointLabeller(const std::string& checkpointPath) {
    MlsdLabeller l;
    l.identity = "M-LSD checkpoint " + fs::path(checkpointPath).filename().string() + " fnv1a64 " +
                 fnvHex(fileContentHash(checkpointPath));
    l.load = [checkpointPath] { return mlsd::loadMlsd(checkpointPath); };
    return l;
}

void setMlsdLabelCheckpoint(const std::string& path) {
    std::lock_guard<std::mutex> lock(gCheckpointMutex);
    gCheckpoint = path;
}

std::string mlsdLabelCheckpoint() {
    std::lock_guard<std::mutex> lock(gCheckpointMutex);
    return gCheckpoint;
}

std::string mlsdLabelCachePath(const std::string& folderOrList) {
    std::error_code ec;
    if (fs::is_directory(folderOrList, ec)) return (fs::path(folderOrList) / "mlsd_labels.h5").string();
    return folderOrList + ".mlsd.h5";
}

void mlsdPseudoLines(mlsd::MlsdModel& model, const cv::Mat& rgb, const MlsdLabelOptions& o, torch::Tensor& lines,
                     torch::Tensor& scores) {
    if (rgb.empty() || rgb.type() != CV_8UC3) throw Error("M-LSD labels: expected a non-empty RGB image");
    pseudoLabels(mlsd::detectMlsd(model, rgb), rgb, o, lines, scores);
}

void pseudoLabels(const std::vector<eval::ScoredLine>& found, const cv::Mat& rgb, const MlsdLabelOptions& o,
                  torch::Tensor& lines, torch::Tensor& scores) {
    if (rgb.empty() || rgb.type() != CV_8UC3) throw Error("M-LSD labels: expected a non-empty RGB image");
    std::vector<float> l, s;
    eval::EdgeField field;   // computed at the first line
    for (const auto& f : found) {
        if (int64_t(s.size()) >= o.maxLines) break;
        if (!(double(f.score) >= o.scoreThreshold)) continue;
        double ax = f.x1, ay = f.y1, bx = f.x2, by = f.y2;
        // M-LSD's endpoints may reach past the border: clipped, not clamped (clamping turns them).
        if (!clipSegment(ax, ay, bx, by, 0, 0, rgb.cols, rgb.rows)) continue;
        if (o.snapToEdges) {
            if (field.gx.empty()) field = eval::edgeField(rgb);
            eval::ScoredLine snapped{float(ax), float(ay), float(bx), float(by), f.score};
            eval::EdgeSnapOptions snap;
            snap.maxTrim = 0.25;
            if (eval::snapToEdge(field, snapped, {}, snap)) {
                ax = snapped.x1, ay = snapped.y1, bx = snapped.x2, by = snapped.y2;
                if (!clipSegment(ax, ay, bx, by, 0, 0, rgb.cols, rgb.rows)) continue;
            }
        }
        if (std::hypot(bx - ax, by - ay) < o.minLength) continue;
        l.insert(l.end(), {float(ax), float(ay), float(bx), float(by)});
        s.push_back(f.score);
    }
    const int64_t m = int64_t(s.size());
    lines = torch::from_blob(l.data(), {m, 4}, torch::kFloat32).clone();
    scores = torch::from_blob(s.data(), {m}, torch::kFloat32).clone();
}

MlsdPhotoLines::MlsdPhotoLines(const std::string& source, MlsdLabeller labeller, MlsdLabelOptions o,
                               std::function<void(const std::string&)> log)
    : source_(source), cache_(mlsdLabelCachePath(source)), snapped_(o.snapToEdges),
      paths_(listImageFiles(source, true)) {
    if (!log) log = [](const std::string& m) { std::cerr << m << "\n"; };
    const std::string identity = labeller.identity + " " + o.toJson();
    const fs::path cacheDir = fs::path(cache_).parent_path().empty() ? fs::path(".") : fs::path(cache_).parent_path();

    std::map<std::string, Entry> cached;
    std::error_code ec;
    bool foreign = false;
    if (fs::exists(cache_, ec)) {
        std::string why;
        if (!readCache(cache_, identity, cached, why)) {
            log(cache_ + ": rebuilding the M-LSD label cache: " + why);
            cached.clear();
            foreign = true;
        }
    }

    std::vector<std::string> keys;
    std::vector<Entry> entries(paths_.size());
    std::vector<size_t> todo;
    for (size_t i = 0; i < paths_.size(); ++i) {
        keys.push_back(photoKey(paths_[i], cacheDir));
        const int64_t bytes = int64_t(fs::file_size(paths_[i], ec));
        if (ec) throw Error(paths_[i] + ": cannot be read (" + ec.message() + ")");
        const uint64_t hash = fileContentHash(paths_[i]);
        auto it = cached.find(keys.back());
        if (it != cached.end() && it->second.size == bytes && it->second.hash == hash) {
            entries[i] = it->second;
        } else {
            entries[i].size = bytes;
            entries[i].hash = hash;
            todo.push_back(i);
        }
    }
    bool dropped = false;
    for (const auto& [k, e] : cached)
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) dropped = true;

    if (!todo.empty()) {
        if (!foreign && !cached.empty())
            log(cache_ + ": " + std::to_string(todo.size()) + " of " + std::to_string(paths_.size()) +
                " photos are new or changed: labelling them with M-LSD");
        else
            log(cache_ + ": labelling " + std::to_string(todo.size()) + " photos with M-LSD (once; cached)");
        const std::shared_ptr<mlsd::MlsdModel> model = labeller.load ? labeller.load() : nullptr;
        if (!model) throw Error(source_ + ": " + std::to_string(todo.size()) + " photos need M-LSD labels and no M-LSD model is available");
        for (size_t n = 0; n < todo.size(); ++n) {
            const size_t i = todo[n];
            const cv::Mat rgb = loadImageRGB(paths_[i]);   // errors name the file
            Entry& e = entries[i];
            e.width = rgb.cols;
            e.height = rgb.rows;
            mlsdPseudoLines(*model, rgb, o, e.lines, e.scores);
            ++labelledNow_;
            if ((n + 1) % 10 == 0 || n + 1 == todo.size())
                log(cache_ + ": labelled " + std::to_string(n + 1) + " / " + std::to_string(todo.size()));
        }
    }
    if (!todo.empty() || dropped || foreign) {
        try {
            writeCache(cache_, identity, keys, entries);
        } catch (const Error& e) {
            log(std::string("warning: the M-LSD labels are not cached: ") + e.what());
        }
    }
    for (auto& e : entries) {
        lines_.push_back(e.lines);
        scores_.push_back(e.scores);
        sizes_.push_back({e.width, e.height});
    }
}

LineSample MlsdPhotoLines::get(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(source_ + ": index " + std::to_string(index) + " out of range (" + std::to_string(size()) + " images)");
    LineSample s;
    const std::string& path = paths_[size_t(index)];
    s.name = fs::path(path).filename().string();
    s.image = loadImageRGB(path);   // errors name the file
    const cv::Size labelled = sizes_[size_t(index)];
    if (s.image.cols != labelled.width || s.image.rows != labelled.height)
        throw Error(path + ": is " + std::to_string(s.image.cols) + "x" + std::to_string(s.image.rows) +
                    " now, " + std::to_string(labelled.width) + "x" + std::to_string(labelled.height) +
                    " when its M-LSD labels were made (the file changed; open the dataset again)");
    s.lines = lines_[size_t(index)].clone();
    return s;
}

std::string MlsdPhotoLines::describe() const {
    return (snapped_ ? "mlsd-snapped:" : "mlsd:") + source_ + " (" + std::to_string(paths_.size()) +
           " photos, M-LSD pseudo-lines" + (snapped_ ? ", snapped to edges)" : ")");
}

} // namespace glimpse::data
