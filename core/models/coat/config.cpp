#include "core/models/coat/config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/util/json_file.h"

namespace glimpse::coat {

namespace {

int64_t asInt(const nlohmann::json& v, const std::string& key, const std::string& source) {
    if (!v.is_number_integer() && !v.is_number_unsigned())
        throw Error(source + ": CoaT config key '" + key + "' must hold integers, got " + v.dump());
    return v.get<int64_t>();
}

int64_t takeInt(const nlohmann::json& j, const char* key, int64_t def, const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    return asInt(*it, key, source);
}

bool takeBool(const nlohmann::json& j, const char* key, bool def, const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_boolean())
        throw Error(source + ": CoaT config key '" + key + "' must be true or false, got " + it->dump());
    return it->get<bool>();
}

template <size_t N>
std::array<int64_t, N> takeInts(const nlohmann::json& j, const char* key, std::array<int64_t, N> def,
                                const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_array() || it->size() != N)
        throw Error(source + ": CoaT config key '" + key + "' must be an array of " + std::to_string(N) +
                    " integers, got " + it->dump());
    std::array<int64_t, N> out{};
    for (size_t i = 0; i < N; ++i) out[i] = asInt((*it)[i], key, source);
    return out;
}

template <size_t N>
std::array<double, N> takeDoubles(const nlohmann::json& j, const char* key, std::array<double, N> def,
                                  const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_array() || it->size() != N)
        throw Error(source + ": CoaT config key '" + key + "' must be an array of " + std::to_string(N) +
                    " numbers, got " + it->dump());
    std::array<double, N> out{};
    for (size_t i = 0; i < N; ++i) {
        if (!(*it)[i].is_number())
            throw Error(source + ": CoaT config key '" + key + "' must hold numbers, got " + it->dump());
        out[i] = (*it)[i].get<double>();
    }
    return out;
}

} // namespace

const char* coScaleName(CoScale c) {
    return c == CoScale::FeatureInterpolation ? "feature_interpolation" : "direct_cross_layer_attention";
}

std::vector<std::string> CoatConfig::presetNames() {
    return {"coat_lite_tiny", "coat_lite_mini", "coat_lite_small", "coat_lite_medium",
            "coat_tiny",      "coat_mini",      "coat_small"};
}

CoatConfig CoatConfig::preset(const std::string& name) {
    CoatConfig c;
    c.variant = name;
    if (name == "coat_lite_tiny") {
        c.embedDims = {64, 128, 256, 320};
        c.serialDepths = {2, 2, 2, 2};
        c.mlpRatios = {8, 8, 4, 4};
    } else if (name == "coat_lite_mini") {
        c.embedDims = {64, 128, 320, 512};
        c.serialDepths = {2, 2, 2, 2};
        c.mlpRatios = {8, 8, 4, 4};
    } else if (name == "coat_lite_small") {
        c.embedDims = {64, 128, 320, 512};
        c.serialDepths = {3, 4, 6, 3};
        c.mlpRatios = {8, 8, 4, 4};
    } else if (name == "coat_lite_medium") {
        c.embedDims = {128, 256, 320, 512};
        c.serialDepths = {3, 6, 10, 8};
        c.mlpRatios = {4, 4, 4, 4};
    } else if (name == "coat_tiny" || name == "coat_mini" || name == "coat_small") {
        c.serialDepths = {2, 2, 2, 2};
        c.parallelDepth = 6;
        c.mlpRatios = {4, 4, 4, 4};
        const int64_t d = name == "coat_tiny" ? 152 : name == "coat_mini" ? 216 : 320;
        c.embedDims = {152, d, d, d};
    } else {
        std::string all;
        for (const auto& n : presetNames()) all += (all.empty() ? "" : ", ") + n;
        throw Error("unknown CoaT variant '" + name + "' (one of " + all + ", or custom)");
    }
    return c;
}

void CoatConfig::validate() const {
    auto fail = [](const std::string& msg) { throw Error("invalid CoaT config: " + msg); };
    auto s = [](auto v) { return std::to_string(v); };
    if (numHeads < 1 || numHeads > 64) fail("num_heads must be in 1..64, got " + s(numHeads));
    for (int i = 0; i < 4; ++i) {
        if (embedDims[i] < 1 || embedDims[i] > 4096)
            fail("embed_dims[" + s(i) + "] must be in 1..4096, got " + s(embedDims[i]));
        if (embedDims[i] % numHeads != 0)
            fail("embed_dims[" + s(i) + "] (" + s(embedDims[i]) + ") must be divisible by num_heads (" +
                 s(numHeads) + ")");
        if (serialDepths[i] < 1 || serialDepths[i] > 64)
            fail("serial_depths[" + s(i) + "] must be in 1..64, got " + s(serialDepths[i]));
        if (!(mlpRatios[i] > 0.0 && mlpRatios[i] <= 64.0))
            fail("mlp_ratios[" + s(i) + "] must be in (0, 64], got " + s(mlpRatios[i]));
        if (int64_t(double(embedDims[i]) * mlpRatios[i]) < 1)
            fail("mlp_ratios[" + s(i) + "] gives an empty hidden layer");
    }
    if (parallelDepth < 0 || parallelDepth > 64) fail("parallel_depth must be in 0..64, got " + s(parallelDepth));
    if (parallelDepth > 0) {
        if (embedDims[1] != embedDims[2] || embedDims[2] != embedDims[3])
            fail("parallel groups need embed_dims[1] == embed_dims[2] == embed_dims[3] (shared FFN)");
        if (mlpRatios[1] != mlpRatios[2] || mlpRatios[2] != mlpRatios[3])
            fail("parallel groups need mlp_ratios[1] == mlp_ratios[2] == mlp_ratios[3] (shared FFN)");
    }
    if (useCrpe) {
        if (crpeWindow.empty()) fail("crpe_window must not be empty when use_crpe is true");
        int64_t heads = 0;
        std::set<int64_t> seen;
        for (const auto& kw : crpeWindow) {
            if (kw.first < 1 || kw.first > 31 || kw.first % 2 == 0)
                fail("crpe_window kernel sizes must be odd and in 1..31, got " + s(kw.first));
            if (!seen.insert(kw.first).second) fail("crpe_window lists kernel " + s(kw.first) + " twice");
            if (kw.second < 1) fail("crpe_window head counts must be >= 1, got " + s(kw.second));
            heads += kw.second;
        }
        if (heads != numHeads)
            fail("crpe_window head counts sum to " + s(heads) + ", but num_heads is " + s(numHeads));
    }
    if (numClasses < 1 || numClasses > 100000) fail("num_classes must be in 1..100000, got " + s(numClasses));
    if (inChans < 1 || inChans > 64) fail("in_chans must be in 1..64, got " + s(inChans));
    if (imageSize < 32 || imageSize > 4096) fail("image_size must be in 32..4096, got " + s(imageSize));
    if (resize < imageSize || resize > 8192)
        fail("resize must be in image_size.." + s(8192) + ", got " + s(resize));
    for (int c = 0; c < 3; ++c) {
        if (!std::isfinite(mean[c])) fail("mean must be finite");
        if (!(std[c] > 0.0) || !std::isfinite(std[c])) fail("std must be positive and finite");
    }
    if (!classNames.empty() && int64_t(classNames.size()) != numClasses)
        fail("class_names has " + s(classNames.size()) + " names but num_classes is " + s(numClasses));
}

nlohmann::json CoatConfig::toJson() const {
    nlohmann::json win = nlohmann::json::array();
    for (const auto& kw : crpeWindow) win.push_back({kw.first, kw.second});
    nlohmann::json j{
        {"variant", variant},
        {"embed_dims", embedDims},
        {"serial_depths", serialDepths},
        {"parallel_depth", parallelDepth},
        {"num_heads", numHeads},
        {"mlp_ratios", mlpRatios},
        {"crpe_window", win},
        {"use_crpe", useCrpe},
        {"use_cpe", useCpe},
        {"co_scale", coScaleName(coScale)},
        {"num_classes", numClasses},
        {"in_chans", inChans},
        {"image_size", imageSize},
        {"resize", resize},
        {"mean", mean},
        {"std", std},
    };
    if (!classNames.empty()) j["class_names"] = classNames;
    return j;
}

CoatConfig CoatConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) throw Error(source + ": CoaT config must be a JSON object");
    static const std::set<std::string> known = {
        "variant", "embed_dims", "serial_depths", "parallel_depth", "num_heads", "mlp_ratios",
        "crpe_window", "use_crpe", "use_cpe", "co_scale", "num_classes", "in_chans", "image_size",
        "resize", "mean", "std", "class_names"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.count(it.key())) throw Error(source + ": unknown CoaT config key '" + it.key() + "'");
    CoatConfig c;
    if (j.contains("variant")) {
        if (!j["variant"].is_string()) throw Error(source + ": CoaT config key 'variant' must be a string");
        const std::string v = j["variant"].get<std::string>();
        if (v != "custom") {
            try {
                c = preset(v);
            } catch (const Error& e) {
                throw Error(source + ": " + e.what());
            }
        }
        c.variant = v;
    }
    c.embedDims = takeInts<4>(j, "embed_dims", c.embedDims, source);
    c.serialDepths = takeInts<4>(j, "serial_depths", c.serialDepths, source);
    c.parallelDepth = takeInt(j, "parallel_depth", c.parallelDepth, source);
    c.numHeads = takeInt(j, "num_heads", c.numHeads, source);
    c.mlpRatios = takeDoubles<4>(j, "mlp_ratios", c.mlpRatios, source);
    if (auto it = j.find("crpe_window"); it != j.end()) {
        if (!it->is_array())
            throw Error(source + ": CoaT config key 'crpe_window' must be an array of [kernel, heads] pairs");
        c.crpeWindow.clear();
        for (const auto& p : *it) {
            if (!p.is_array() || p.size() != 2)
                throw Error(source + ": CoaT config key 'crpe_window' must be an array of [kernel, heads] pairs, got " +
                            it->dump());
            c.crpeWindow.emplace_back(asInt(p[0], "crpe_window", source), asInt(p[1], "crpe_window", source));
        }
    }
    c.useCrpe = takeBool(j, "use_crpe", c.useCrpe, source);
    c.useCpe = takeBool(j, "use_cpe", c.useCpe, source);
    if (auto it = j.find("co_scale"); it != j.end()) {
        const std::string v = it->is_string() ? it->get<std::string>() : it->dump();
        if (v == "feature_interpolation") c.coScale = CoScale::FeatureInterpolation;
        else if (v == "direct_cross_layer_attention") c.coScale = CoScale::DirectCrossLayerAttention;
        else
            throw Error(source + ": CoaT config 'co_scale' must be \"feature_interpolation\" or "
                                 "\"direct_cross_layer_attention\", got " + it->dump());
    }
    c.numClasses = takeInt(j, "num_classes", c.numClasses, source);
    c.inChans = takeInt(j, "in_chans", c.inChans, source);
    c.imageSize = takeInt(j, "image_size", c.imageSize, source);
    c.resize = takeInt(j, "resize", j.contains("image_size") && !j.contains("resize")
                                        ? c.imageSize * 8 / 7   // crop_pct 0.875: 224 -> 256
                                        : c.resize, source);
    c.mean = takeDoubles<3>(j, "mean", c.mean, source);
    c.std = takeDoubles<3>(j, "std", c.std, source);
    if (auto it = j.find("class_names"); it != j.end()) {
        if (!it->is_array()) throw Error(source + ": CoaT config key 'class_names' must be an array of strings");
        c.classNames.clear();
        for (const auto& n : *it) {
            if (!n.is_string()) throw Error(source + ": CoaT config key 'class_names' must hold strings");
            c.classNames.push_back(n.get<std::string>());
        }
    }
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

CoatConfig CoatConfig::fromJsonString(const std::string& text, const std::string& source) {
    return fromJson(parseJsonText(text, source, "CoaT config"), source);
}

CoatConfig CoatConfig::fromFile(const std::string& path) { return fromJson(readJsonFile(path, "CoaT config"), path); }

std::array<int64_t, 2> CoatConfig::gridSize(int scale, int64_t height, int64_t width) const {
    if (scale < 0 || scale > 3) throw Error("CoaT: scale must be 0..3, got " + std::to_string(scale));
    int64_t h = height / 4, w = width / 4;
    for (int s = 1; s <= scale; ++s) {
        h /= 2;
        w /= 2;
    }
    return {h, w};
}

std::string CoatConfig::className(int64_t k) const {
    if (k >= 0 && k < int64_t(classNames.size())) return classNames[size_t(k)];
    return "class " + std::to_string(k);
}

std::vector<std::string> loadClassNames(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open the class-name list");
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
            if (in.peek() == std::char_traits<char>::eof()) break;   // trailing newline
            throw Error(path + ": line " + std::to_string(out.size() + 1) + " of the class-name list is empty");
        }
        out.push_back(line);
    }
    if (out.empty()) throw Error(path + ": the class-name list is empty");
    return out;
}

} // namespace glimpse::coat
