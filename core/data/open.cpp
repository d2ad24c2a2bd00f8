#include "core/data/open.h"

#include <cstdlib>
#include <filesystem>

#include "core/data/mlsd_lines.h"
#include "core/data/photo_lines.h"
#include "core/data/procedural.h"
#include "core/data/wireframe.h"
#include "core/error.h"

namespace glimpse::data {

namespace {

bool parseInt(const std::string& s, long long& out) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtoll(s.c_str(), &end, 10);
    return *end == '\0' && errno == 0;
}

} // namespace

std::unique_ptr<LineDataset> openLineDataset(const std::string& spec) {
    const std::string mixPrefix = "mix:", lsdPrefix = "lsd:";
    if (spec.rfind(mixPrefix, 0) == 0) {
        std::vector<std::unique_ptr<LineDataset>> parts;
        size_t start = mixPrefix.size();
        while (true) {
            const size_t c = spec.find('+', start);
            const std::string part = spec.substr(start, c == std::string::npos ? std::string::npos : c - start);
            if (part.empty() || part.rfind(mixPrefix, 0) == 0)
                throw Error("dataset '" + spec + "': expected mix:SPEC+SPEC[+SPEC...] (non-empty parts, not nested)");
            try {
                parts.push_back(openLineDataset(part));
            } catch (const Error& e) {
                throw Error("dataset '" + spec + "': " + e.what());
            }
            if (c == std::string::npos) break;
            start = c + 1;
        }
        if (parts.size() < 2) throw Error("dataset '" + spec + "': a mix needs at least two parts (mix:SPEC+SPEC)");
        return std::make_unique<MixedLines>(std::move(parts));
    }
    if (spec.rfind(lsdPrefix, 0) == 0) {
        const std::string source = spec.substr(lsdPrefix.size());
        if (source.empty()) throw Error("dataset '" + spec + "': expected lsd:FOLDER or lsd:LIST.txt");
        try {
            return std::make_unique<LsdPhotoLines>(source);
        } catch (const Error& e) {
            throw Error("dataset '" + spec + "': " + e.what());
        }
    }
    const std::string mlsdPrefix = "mlsd:", snappedPrefix = "mlsd-snapped:";
    const bool snapped = spec.rfind(snappedPrefix, 0) == 0;
    if (snapped || spec.rfind(mlsdPrefix, 0) == 0) {
        const std::string source = spec.substr(snapped ? snappedPrefix.size() : mlsdPrefix.size());
        if (source.empty())
            throw Error("dataset '" + spec + "': expected " + (snapped ? snappedPrefix : mlsdPrefix) +
                        "LIST.txt or " + (snapped ? snappedPrefix : mlsdPrefix) + "FOLDER");
        const std::string ckpt = mlsdLabelCheckpoint();
        if (ckpt.empty())
            throw Error("dataset '" + spec + "': no M-LSD model to label the photos with (resources/mlsd_tiny.h5 is not installed)");
        try {
            MlsdLabelOptions o;
            o.snapToEdges = snapped;
            return std::make_unique<MlsdPhotoLines>(source, mlsdCheckpointLabeller(ckpt), o);
        } catch (const Error& e) {
            throw Error("dataset '" + spec + "': " + e.what());
        }
    }
    const std::string prefix = "procedural:";
    if (spec.rfind(prefix, 0) == 0) {
        const std::string bad = "dataset '" + spec + "': expected procedural:COUNT[:SEED[:WxH[:rooms|facades|mixed]]]";
        std::vector<std::string> parts;
        size_t start = prefix.size();
        while (true) {
            const size_t c = spec.find(':', start);
            parts.push_back(spec.substr(start, c == std::string::npos ? std::string::npos : c - start));
            if (c == std::string::npos) break;
            start = c + 1;
        }
        if (parts.empty() || parts.size() > 4) throw Error(bad);
        ProceduralOptions o;
        long long v = 0;
        if (!parseInt(parts[0], v) || v < 1 || v > (1LL << 40)) throw Error(bad + " (bad COUNT)");
        o.count = v;
        if (parts.size() > 1) {
            if (!parseInt(parts[1], v) || v < 0) throw Error(bad + " (bad SEED)");
            o.seed = uint64_t(v);
        }
        if (parts.size() > 2) {
            const auto x = parts[2].find('x');
            long long w = 0, h = 0;
            if (x == std::string::npos || !parseInt(parts[2].substr(0, x), w) || !parseInt(parts[2].substr(x + 1), h))
                throw Error(bad + " (bad size, e.g. 256x256)");
            if (w < 32 || h < 32 || w > 4096 || h > 4096) throw Error(bad + " (size must be within 32..4096)");
            o.width = int(w);
            o.height = int(h);
        }
        if (parts.size() > 3 && !parseProceduralScenes(parts[3], o.scenes))
            throw Error(bad + " (bad scenes '" + parts[3] + "')");
        return std::make_unique<ProceduralLines>(o);
    }
    std::error_code ec;
    if (std::filesystem::is_directory(spec, ec)) {
        const auto p = std::filesystem::path(spec) / "train.json";
        if (!std::filesystem::exists(p, ec))
            throw Error("dataset '" + spec + "': a directory must hold train.json (or pass the .json file)");
        return std::make_unique<WireframeLines>(p.string());
    }
    if (!std::filesystem::exists(spec, ec))
        throw Error("dataset '" + spec + "': no such file (expected a .json file, a directory with train.json, "
                    "or procedural:COUNT[:SEED[:WxH[:SCENES]]])");
    return std::make_unique<WireframeLines>(spec);
}

} // namespace glimpse::data
