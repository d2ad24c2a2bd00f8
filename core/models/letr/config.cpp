#include "core/models/letr/config.h"

#include <cmath>
#include <set>

#include "core/error.h"
#include "core/util/json_file.h"

namespace glimpse::letr {

namespace {

// mlsd_tiny: M-LSD tiny's pretrained encoder (core/models/letr/mlsd_backbone.h).
const std::set<std::string> kBackbones = {"resnet10", "resnet18", "resnet34", "resnet50", "resnet101", "mlsd_tiny"};

template <typename T>
T take(const nlohmann::json& j, const char* key, T def, const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        throw Error(source + ": LETR config key '" + key + "' has the wrong type (" +
                    it->dump() + ")");
    }
}

int64_t takeInt(const nlohmann::json& j, const char* key, int64_t def, const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_number_integer() && !it->is_number_unsigned())
        throw Error(source + ": LETR config key '" + key + "' must be an integer, got " + it->dump());
    return it->get<int64_t>();
}

std::array<double, 3> takeTriple(const nlohmann::json& j, const char* key,
                                 std::array<double, 3> def, const std::string& source) {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_array() || it->size() != 3)
        throw Error(source + ": LETR config key '" + key + "' must be an array of 3 numbers, got " +
                    it->dump());
    std::array<double, 3> out{};
    for (size_t i = 0; i < 3; ++i) {
        if (!(*it)[i].is_number())
            throw Error(source + ": LETR config key '" + key + "' must hold numbers, got " +
                        it->dump());
        out[i] = (*it)[i].get<double>();
    }
    return out;
}

} // namespace

void LetrConfig::validate() const {
    auto fail = [](const std::string& msg) { throw Error("invalid LETR config: " + msg); };
    if (!kBackbones.count(backbone))
        fail("backbone '" + backbone + "' is not one of resnet10, resnet18, resnet34, resnet50, resnet101, mlsd_tiny");
    if (hiddenDim < 1 || hiddenDim > 8192) fail("hidden_dim must be in 1..8192, got " + std::to_string(hiddenDim));
    if (nheads < 1) fail("nheads must be >= 1, got " + std::to_string(nheads));
    if (hiddenDim % nheads != 0)
        fail("hidden_dim (" + std::to_string(hiddenDim) + ") must be divisible by nheads (" +
             std::to_string(nheads) + ")");
    if (hiddenDim % 2 != 0)
        fail("hidden_dim must be even (half of it encodes y, half x), got " + std::to_string(hiddenDim));
    if (dimFeedforward < 1) fail("dim_feedforward must be >= 1, got " + std::to_string(dimFeedforward));
    auto layers = [&](const char* name, int64_t v, bool required) {
        if (v < (required ? 1 : 0) || v > 64)
            fail(std::string(name) + " must be in " + (required ? "1" : "0") + "..64, got " +
                 std::to_string(v));
    };
    layers("coarse_enc_layers", coarseEncLayers, false);
    layers("coarse_dec_layers", coarseDecLayers, true);
    layers("fine_enc_layers", fineEncLayers, false);
    layers("fine_dec_layers", fineDecLayers, true);
    if (numQueries < 1 || numQueries > 100000)
        fail("num_queries must be in 1..100000, got " + std::to_string(numQueries));
    if (numClasses < 1) fail("num_classes must be >= 1, got " + std::to_string(numClasses));
    if (!(dropout >= 0.0 && dropout < 1.0)) fail("dropout must be in [0, 1), got " + std::to_string(dropout));
    if (coarseLevel < 3 || coarseLevel > 5) fail("coarse_level must be 3, 4 or 5, got " + std::to_string(coarseLevel));
    if (fineLevel < 3 || fineLevel > 5) fail("fine_level must be 3, 4 or 5, got " + std::to_string(fineLevel));
    if (shortSide < 1 || shortSide > 8192) fail("short_side must be in 1..8192, got " + std::to_string(shortSide));
    if (maxLongSide < 1 || maxLongSide > 16384)
        fail("max_long_side must be in 1..16384, got " + std::to_string(maxLongSide));
    if (!(scoreThreshold >= 0.0 && scoreThreshold < 1.0))
        fail("score_threshold must be in [0, 1) (0: not set), got " + std::to_string(scoreThreshold));
    if (maxInputPixels < 1) fail("max_input_pixels must be >= 1, got " + std::to_string(maxInputPixels));
    if (backbone == "mlsd_tiny" && (mean != std::array<double, 3>{0.5, 0.5, 0.5} || std != mean))
        fail("backbone mlsd_tiny needs mean [0.5, 0.5, 0.5] and std [0.5, 0.5, 0.5] (M-LSD's input scaling)");
    if (coarseAnchors && coarseProposals) fail("coarse_queries is either \"anchors\" or \"proposals\"");
    if (coarseProposals && backbone != "mlsd_tiny")
        fail("coarse_queries \"proposals\" needs backbone mlsd_tiny (M-LSD's decoder reads its features), not " + backbone);
    for (int c = 0; c < 3; ++c) {
        if (!std::isfinite(mean[c])) fail("mean must be finite");
        if (!(std[c] > 0.0) || !std::isfinite(std[c])) fail("std must be positive and finite");
    }
}

nlohmann::json LetrConfig::toJson() const {
    nlohmann::json j{
        {"backbone", backbone},
        {"hidden_dim", hiddenDim},
        {"nheads", nheads},
        {"dim_feedforward", dimFeedforward},
        {"coarse_enc_layers", coarseEncLayers},
        {"coarse_dec_layers", coarseDecLayers},
        {"fine_enc_layers", fineEncLayers},
        {"fine_dec_layers", fineDecLayers},
        {"num_queries", numQueries},
        {"num_classes", numClasses},
        {"dropout", dropout},
        {"stages", fineStage ? "coarse+fine" : "coarse"},
        {"coarse_level", coarseLevel},
        {"fine_level", fineLevel},
        {"short_side", shortSide},
        {"max_long_side", maxLongSide},
        {"max_input_pixels", maxInputPixels},
        {"mean", mean},
        {"std", std},
    };
    if (scoreThreshold > 0) j["score_threshold"] = scoreThreshold;   // absent when not set: older files stay equal
    if (posInValuesCoarse || posInValuesFine)                          // absent when off: official layout
        j["position_in_values"] = posInValuesCoarse ? (posInValuesFine ? "coarse+fine" : "coarse") : "fine";
    if (fineRefinesCoarse) j["fine_lines"] = "refine";                  // absent when off: official layout
    if (coarseAnchors) j["coarse_queries"] = "anchors";                // absent when off: official layout
    if (coarseProposals) j["coarse_queries"] = "proposals";
    return j;
}

LetrConfig LetrConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) throw Error(source + ": LETR config must be a JSON object");
    static const std::set<std::string> known = {
        "backbone", "hidden_dim", "nheads", "dim_feedforward", "coarse_enc_layers",
        "coarse_dec_layers", "fine_enc_layers", "fine_dec_layers", "num_queries", "num_classes",
        "dropout", "stages", "coarse_level", "fine_level", "short_side", "max_long_side",
        "max_input_pixels", "mean", "std", "score_threshold", "position_in_values",
        "fine_lines", "coarse_queries"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.count(it.key()))
            throw Error(source + ": unknown LETR config key '" + it.key() + "'");
    LetrConfig c;
    c.backbone = take<std::string>(j, "backbone", c.backbone, source);
    if (c.backbone == "mlsd_tiny") {   // M-LSD's own input scaling, v / 127.5 - 1
        c.mean = {0.5, 0.5, 0.5};
        c.std = {0.5, 0.5, 0.5};
    }
    c.hiddenDim = takeInt(j, "hidden_dim", c.hiddenDim, source);
    c.nheads = takeInt(j, "nheads", c.nheads, source);
    c.dimFeedforward = takeInt(j, "dim_feedforward", c.dimFeedforward, source);
    c.coarseEncLayers = takeInt(j, "coarse_enc_layers", c.coarseEncLayers, source);
    c.coarseDecLayers = takeInt(j, "coarse_dec_layers", c.coarseDecLayers, source);
    c.fineEncLayers = takeInt(j, "fine_enc_layers", c.fineEncLayers, source);
    c.fineDecLayers = takeInt(j, "fine_dec_layers", c.fineDecLayers, source);
    c.numQueries = takeInt(j, "num_queries", c.numQueries, source);
    c.numClasses = takeInt(j, "num_classes", c.numClasses, source);
    c.dropout = take<double>(j, "dropout", c.dropout, source);
    const std::string stages = take<std::string>(j, "stages", "coarse+fine", source);
    if (stages == "coarse+fine") c.fineStage = true;
    else if (stages == "coarse") c.fineStage = false;
    else throw Error(source + ": LETR config 'stages' must be \"coarse\" or \"coarse+fine\", got \"" + stages + "\"");
    c.coarseLevel = int(takeInt(j, "coarse_level", c.coarseLevel, source));
    c.fineLevel = int(takeInt(j, "fine_level", c.fineLevel, source));
    c.shortSide = takeInt(j, "short_side", c.shortSide, source);
    c.maxLongSide = takeInt(j, "max_long_side", c.maxLongSide, source);
    c.maxInputPixels = takeInt(j, "max_input_pixels", c.maxInputPixels, source);
    c.mean = takeTriple(j, "mean", c.mean, source);
    c.std = takeTriple(j, "std", c.std, source);
    c.scoreThreshold = take<double>(j, "score_threshold", c.scoreThreshold, source);
    const std::string piv = take<std::string>(j, "position_in_values", "none", source);
    if (piv == "coarse+fine") c.posInValuesCoarse = c.posInValuesFine = true;
    else if (piv == "coarse") c.posInValuesCoarse = true;
    else if (piv == "fine") c.posInValuesFine = true;
    else if (piv != "none")
        throw Error(source + ": LETR config 'position_in_values' must be \"none\", \"coarse\", \"fine\" or "
                             "\"coarse+fine\", got \"" + piv + "\"");
    const std::string fl = take<std::string>(j, "fine_lines", "absolute", source);
    if (fl == "refine") c.fineRefinesCoarse = true;
    else if (fl != "absolute")
        throw Error(source + ": LETR config 'fine_lines' must be \"absolute\" or \"refine\", got \"" + fl + "\"");
    const std::string cq = take<std::string>(j, "coarse_queries", "learned", source);
    if (cq == "anchors") c.coarseAnchors = true;
    else if (cq == "proposals") c.coarseProposals = true;
    else if (cq != "learned")
        throw Error(source + ": LETR config 'coarse_queries' must be \"learned\", \"anchors\" or \"proposals\", got \"" +
                    cq + "\"");
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

LetrConfig LetrConfig::fromJsonString(const std::string& text, const std::string& source) {
    return fromJson(parseJsonText(text, source, "LETR config"), source);
}

LetrConfig LetrConfig::fromFile(const std::string& path) { return fromJson(readJsonFile(path, "LETR config"), path); }

bool LetrConfig::bottleneck() const { return backbone == "resnet50" || backbone == "resnet101"; }

std::array<int, 4> LetrConfig::blocksPerLayer() const {
    if (backbone == "resnet10") return {1, 1, 1, 1};   // small CPU backbone (BasicBlock)
    if (backbone == "resnet18") return {2, 2, 2, 2};
    if (backbone == "resnet34" || backbone == "resnet50") return {3, 4, 6, 3};
    if (backbone == "resnet101") return {3, 4, 23, 3};
    if (backbone == "mlsd_tiny") throw Error("LETR: backbone mlsd_tiny is not a ResNet");
    throw Error("invalid LETR config: unknown backbone '" + backbone + "'");
}

int64_t LetrConfig::levelChannels(int level) const {
    if (level < 2 || level > 5) throw Error("LETR: backbone level must be 2..5, got " + std::to_string(level));
    if (backbone == "mlsd_tiny") return std::array<int64_t, 4>{24, 32, 64, 128}[size_t(level - 2)];
    const int64_t base = int64_t(64) << (level - 2);   // 64, 128, 256, 512
    return bottleneck() ? base * 4 : base;
}

std::array<int64_t, 2> LetrConfig::resizedSize(int64_t height, int64_t width) const {
    if (height < 1 || width < 1)
        throw Error("LETR: image size must be positive, got " + std::to_string(width) + "x" +
                    std::to_string(height));
    double size = double(shortSide);
    const double mn = double(std::min(height, width));
    const double mx = double(std::max(height, width));
    if (mx / mn * size > double(maxLongSide)) size = std::round(double(maxLongSide) * mn / mx);
    size = std::max(size, 1.0);
    int64_t oh, ow;
    if (width < height) {
        ow = int64_t(size);
        oh = int64_t(size * double(height) / double(width));
    } else {
        oh = int64_t(size);
        ow = int64_t(size * double(width) / double(height));
    }
    // Degenerate aspect ratios (the short side clamped to 1 pixel) could still exceed the cap.
    oh = std::clamp<int64_t>(oh, 1, std::max(maxLongSide, int64_t(size)));
    ow = std::clamp<int64_t>(ow, 1, std::max(maxLongSide, int64_t(size)));
    return {oh, ow};
}

} // namespace glimpse::letr
