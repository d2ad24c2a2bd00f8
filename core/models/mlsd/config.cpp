#include "core/models/mlsd/config.h"

#include <set>

#include "core/error.h"
#include "core/util/json_file.h"

namespace glimpse::mlsd {

namespace {

int64_t takeInt(const nlohmann::json& j, const char* key, int64_t def, const std::string& source) {
    const auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_number_integer())
        throw Error(source + ": M-LSD config key '" + key + "' must be an integer, got " + it->dump());
    return it->get<int64_t>();
}

double takeDouble(const nlohmann::json& j, const char* key, double def, const std::string& source) {
    const auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_number()) throw Error(source + ": M-LSD config key '" + key + "' must be a number, got " + it->dump());
    return it->get<double>();
}

} // namespace

void MlsdConfig::validate() const {
    if (variant != "tiny")
        throw Error("M-LSD config: variant '" + variant + "' is not implemented (Glimpse has M-LSD tiny)");
    if (inputSize < 32 || inputSize % 32 != 0)
        throw Error("M-LSD config: input_size must be a positive multiple of 32, got " + std::to_string(inputSize));
    if (topK < 1) throw Error("M-LSD config: top_k must be positive, got " + std::to_string(topK));
    if (nmsKernel < 1 || nmsKernel % 2 == 0)
        throw Error("M-LSD config: nms_kernel must be a positive odd number, got " + std::to_string(nmsKernel));
    if (!(scoreThreshold >= 0.0 && scoreThreshold < 1.0))
        throw Error("M-LSD config: score_threshold must be in [0, 1), got " + std::to_string(scoreThreshold));
    if (!(lengthThreshold >= 0.0))
        throw Error("M-LSD config: length_threshold must be >= 0, got " + std::to_string(lengthThreshold));
}

nlohmann::json MlsdConfig::toJson() const {
    return {{"variant", variant},
            {"input_size", inputSize},
            {"top_k", topK},
            {"nms_kernel", nmsKernel},
            {"score_threshold", scoreThreshold},
            {"length_threshold", lengthThreshold}};
}

MlsdConfig MlsdConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) throw Error(source + ": M-LSD config must be a JSON object");
    static const std::set<std::string> known = {"variant", "input_size", "top_k", "nms_kernel", "score_threshold",
                                                "length_threshold"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.count(it.key())) throw Error(source + ": unknown M-LSD config key '" + it.key() + "'");
    MlsdConfig c;
    if (auto it = j.find("variant"); it != j.end()) {
        if (!it->is_string()) throw Error(source + ": M-LSD config key 'variant' must be a string");
        c.variant = it->get<std::string>();
    }
    c.inputSize = takeInt(j, "input_size", c.inputSize, source);
    c.topK = takeInt(j, "top_k", c.topK, source);
    c.nmsKernel = takeInt(j, "nms_kernel", c.nmsKernel, source);
    c.scoreThreshold = takeDouble(j, "score_threshold", c.scoreThreshold, source);
    c.lengthThreshold = takeDouble(j, "length_threshold", c.lengthThreshold, source);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

MlsdConfig MlsdConfig::fromJsonString(const std::string& text, const std::string& source) {
    return fromJson(parseJsonText(text, source, "M-LSD config"), source);
}

} // namespace glimpse::mlsd
