#include "core/models/constellation/config.h"

#include <algorithm>

#include "core/error.h"
#include "core/train/json_config.h"
#include "core/util/json_file.h"

namespace glimpse::constellation {

namespace {

template <typename T>
void readList(const nlohmann::json& j, const char* key, std::vector<T>& out, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_array()) throw Error(where + ": ConstellationNet config key '" + key + "' must be an array");
    std::vector<T> v;
    for (const auto& e : *it) {
        bool ok;
        if constexpr (std::is_same_v<T, std::string>) ok = e.is_string();
        else if constexpr (std::is_integral_v<T>) ok = e.is_number_integer();
        else ok = e.is_number();
        if (!ok) throw Error(where + ": ConstellationNet config key '" + key + "' has a value of the wrong type: " + e.dump());
        v.push_back(e.get<T>());
    }
    out = std::move(v);
}

std::string field(const char* key) { return std::string("ConstellationNet config: '") + key + "' "; }

void checkLayers(const std::vector<int64_t>& layers, int64_t n, const char* key) {
    for (int64_t l : layers)
        if (l < 1 || l > n)
            throw Error(field(key) + "names conv layer " + std::to_string(l) + "; the backbone has layers 1.." +
                        std::to_string(n));
}

} // namespace

std::vector<int64_t> ConstellationConfig::blockChannels() const {
    if (!channels.empty()) return channels;
    if (backbone == "resnet12") return {64, 128, 256, 290};   // the official widths
    if (multiBranch) return {64, 64, 42, 42};
    return {64, 64, 64, 64};
}

std::vector<int64_t> ConstellationConfig::resolvedClusterLayers() const {
    if (!constellation) return {};
    if (!clusterLayers.empty()) return clusterLayers;
    if (backbone == "resnet12") return {1, 7, 8, 9};
    return {1, 2, 3, 4};
}

std::vector<int64_t> ConstellationConfig::resolvedRelationLayers() const {
    if (!constellation) return {};
    if (!relationLayers.empty()) return relationLayers;
    if (backbone == "resnet12") return {7, 8, 9};
    return {3, 4};
}

std::string ConstellationConfig::className(int64_t k) const {
    if (k >= 0 && k < int64_t(classNames.size())) return classNames[size_t(k)];
    return "class " + std::to_string(k);
}

std::string ConstellationConfig::describe() const {
    std::string b = backbone == "resnet12" ? "ResNet-12" : "Conv-4";
    std::string s = constellation ? "ConstellationNet " + b : "ProtoNet baseline " + b;
    if (multiBranch) s += " (multi-branch)";
    return s;
}

void ConstellationConfig::validate() const {
    if (backbone != "conv4" && backbone != "resnet12")
        throw Error(field("backbone") + "must be \"conv4\" or \"resnet12\", got \"" + backbone + "\"");
    if (!channels.empty() && int64_t(channels.size()) != numBlocks())
        throw Error(field("channels") + "needs 4 values, got " + std::to_string(channels.size()));
    for (int64_t c : blockChannels())
        if (c < 1 || c > 4096) throw Error(field("channels") + "must lie in 1..4096");
    if (clusters < 2 || clusters > 1024) throw Error(field("clusters") + "must lie in 2..1024");
    if (heads < 1 || clusters % heads != 0)
        throw Error(field("heads") + "must divide 'clusters' (" + std::to_string(clusters) + ")");
    if ((clusters / 2) % 2 != 0 && !resolvedRelationLayers().empty())
        throw Error(field("clusters") + "must be a multiple of 4 for the sine positional encoding");
    if (!(beta > 0)) throw Error(field("beta") + "must be > 0");
    if (!(lambda > 0 && lambda <= 1)) throw Error(field("lambda") + "must lie in (0, 1]");
    if (!(dropout >= 0 && dropout < 1)) throw Error(field("dropout") + "must lie in [0, 1)");
    if (!(dropBlock >= 0 && dropBlock < 1)) throw Error(field("drop_block") + "must lie in [0, 1)");
    if (dropBlockSize < 1) throw Error(field("drop_block_size") + "must be >= 1");
    if (numClasses < 2) throw Error(field("num_classes") + "must be >= 2");
    if (!classNames.empty() && int64_t(classNames.size()) != numClasses)
        throw Error(field("class_names") + "has " + std::to_string(classNames.size()) + " names for " +
                    std::to_string(numClasses) + " classes");
    if (imageSize < 16 || imageSize > 1024) throw Error(field("image_size") + "must lie in 16..1024");
    if (mean.size() != 3 || std.size() != 3) throw Error(field("mean") + "and 'std' need 3 values each");
    for (double s : std)
        if (!(s > 0)) throw Error(field("std") + "values must be > 0");
    if (testWeights.empty() || testWeights.size() > 4) throw Error(field("test_weights") + "needs 1..4 values");
    auto cl = resolvedClusterLayers(), rl = resolvedRelationLayers();
    checkLayers(cl, numConvLayers(), "cluster_layers");
    checkLayers(rl, numConvLayers(), "relation_layers");
    for (int64_t l : rl)
        if (std::find(cl.begin(), cl.end(), l) == cl.end())
            throw Error(field("relation_layers") + "names layer " + std::to_string(l) +
                        ", which has no clustering (relation works on the cluster distance map)");
}

nlohmann::json ConstellationConfig::toJson() const {
    return {{"backbone", backbone},
            {"channels", blockChannels()},
            {"constellation", constellation},
            {"cluster_layers", resolvedClusterLayers()},
            {"relation_layers", resolvedRelationLayers()},
            {"multi_branch", multiBranch},
            {"clusters", clusters},
            {"beta", beta},
            {"lambda", lambda},
            {"heads", heads},
            {"dropout", dropout},
            {"drop_block", dropBlock},
            {"drop_block_size", dropBlockSize},
            {"num_classes", numClasses},
            {"class_names", classNames},
            {"image_size", imageSize},
            {"mean", mean},
            {"std", std},
            {"test_weights", testWeights},
            {"feature_augment", featureAugment}};
}

ConstellationConfig ConstellationConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    train::checkKeys(j,
                     {"backbone", "channels", "constellation", "cluster_layers", "relation_layers", "multi_branch",
                      "clusters", "beta", "lambda", "heads", "dropout", "drop_block", "drop_block_size",
                      "num_classes", "class_names", "image_size", "mean", "std", "test_weights", "feature_augment"},
                     source);
    ConstellationConfig c;
    train::readKey(j, "backbone", c.backbone, source);
    readList(j, "channels", c.channels, source);
    train::readKey(j, "constellation", c.constellation, source);
    readList(j, "cluster_layers", c.clusterLayers, source);
    readList(j, "relation_layers", c.relationLayers, source);
    train::readKey(j, "multi_branch", c.multiBranch, source);
    train::readKey(j, "clusters", c.clusters, source);
    train::readKey(j, "beta", c.beta, source);
    train::readKey(j, "lambda", c.lambda, source);
    train::readKey(j, "heads", c.heads, source);
    train::readKey(j, "dropout", c.dropout, source);
    train::readKey(j, "drop_block", c.dropBlock, source);
    train::readKey(j, "drop_block_size", c.dropBlockSize, source);
    train::readKey(j, "num_classes", c.numClasses, source);
    readList(j, "class_names", c.classNames, source);
    train::readKey(j, "image_size", c.imageSize, source);
    readList(j, "mean", c.mean, source);
    readList(j, "std", c.std, source);
    readList(j, "test_weights", c.testWeights, source);
    train::readKey(j, "feature_augment", c.featureAugment, source);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

ConstellationConfig ConstellationConfig::fromJsonString(const std::string& text, const std::string& source) {
    return fromJson(parseJsonText(text, source, "ConstellationNet config"), source);
}

} // namespace glimpse::constellation
