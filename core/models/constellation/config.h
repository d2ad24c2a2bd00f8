#pragma once
// ConstellationNet configuration (dissertation chapter 4; facts in docs/models.md
// "ConstellationNet"). The plain prototypical baseline is the same config with
// "constellation": false (same backbone, no constellation modules).
//
// JSON form (every key optional; unknown keys are an error):
//   {
//     "backbone": "conv4",          // "conv4" (4 conv blocks) or "resnet12" (4 residual blocks
//                                   //   of 3 convs each)
//     "channels": [64, 64, 64, 64], // per block (default: conv4 64,64,64,64; resnet12
//                                   //   64,128,256,290 as the official code; with multi_branch the two branch blocks
//                                   //   of conv4 default to 42 channels so the parameter count
//                                   //   stays near the single-branch model's)
//     "constellation": true,        // constellation modules where the paper places them:
//                                   //   conv4: clustering after every conv, relation after
//                                   //   convs 3 and 4; resnet12: clustering after conv layers 1,
//                                   //   7, 8, 9 (1-based), relation after 7, 8, 9
//     "cluster_layers": [...], "relation_layers": [...],  // override those lists (1-based conv
//                                   //   layer numbers; relation needs clustering)
//     "multi_branch": false,        // Y-shape: a shared stem (2 blocks), branch 1 (constellation
//                                   //   modules, classification loss) and branch 2 (plain convs,
//                                   //   prototypical loss)
//     "clusters": 64,               // K; also the attention width (sine PE: K/2 per axis)
//     "beta": 100.0,                // inverse temperature of the soft assignment (training)
//     "lambda": 1.0,                // centroid momentum scale (eq. 4.5)
//     "heads": 8, "dropout": 0.1,   // cell relation attention
//     "drop_block": 0.0, "drop_block_size": 2,   // resnet12: DropBlock on blocks 3 and 4
//     "num_classes": 64,            // base classes of the classification head
//     "class_names": [],            // optional, num_classes names
//     "image_size": 32,             // network input side (square RGB)
//     "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25],
//     "test_weights": [4, 3, 2, 1], // multi-branch test logits: weights of the cosine logits of
//                                   //   [branch1 pooled, branch1 before pooling, branch2 pooled,
//                                   //   branch2 before pooling] (single branch: the first two)
//     "feature_augment": true       // include the before-pooling features in the test logits
//   }
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glimpse::constellation {

struct ConstellationConfig {
    std::string backbone = "conv4";
    std::vector<int64_t> channels;       // empty: the backbone's default (see above)
    bool constellation = true;
    std::vector<int64_t> clusterLayers;  // empty: the paper's placement (when constellation)
    std::vector<int64_t> relationLayers;
    bool multiBranch = false;
    int64_t clusters = 64;
    double beta = 100.0;
    double lambda = 1.0;
    int64_t heads = 8;
    double dropout = 0.1;
    double dropBlock = 0.0;
    int64_t dropBlockSize = 2;
    int64_t numClasses = 64;
    std::vector<std::string> classNames;
    int64_t imageSize = 32;
    std::vector<double> mean{0.5, 0.5, 0.5}, std{0.25, 0.25, 0.25};
    std::vector<double> testWeights{4, 3, 2, 1};
    bool featureAugment = true;

    // Throws glimpse::Error naming the field and the problem.
    void validate() const;
    nlohmann::json toJson() const;
    std::string toJsonString() const { return toJson().dump(); }
    static ConstellationConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static ConstellationConfig fromJsonString(const std::string& text, const std::string& source = "config");

    // Resolved values (defaults applied).
    int64_t numBlocks() const { return 4; }
    int64_t convsPerBlock() const { return backbone == "resnet12" ? 3 : 1; }
    int64_t numConvLayers() const { return numBlocks() * convsPerBlock(); }
    std::vector<int64_t> blockChannels() const;
    std::vector<int64_t> resolvedClusterLayers() const;
    std::vector<int64_t> resolvedRelationLayers() const;
    int64_t splitBlock() const { return multiBranch ? 2 : 0; }   // first block of the branches
    int64_t numBranches() const { return multiBranch ? 2 : 1; }
    std::string className(int64_t k) const;
    // "ConstellationNet Conv-4 (multi-branch)" / "ProtoNet baseline ResNet-12".
    std::string describe() const;
};

} // namespace glimpse::constellation
