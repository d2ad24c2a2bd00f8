#pragma once
// ConstellationNet (dissertation chapter 4; docs/models.md "ConstellationNet").
//
// A constellation module follows a 3x3 conv (before its BN):
//   cell features U = the conv output's H*W cells per image, L2-normalized;
//   cell feature clustering: S = U normalize(V)^T, the cosine similarity of every cell to the K
//     global cluster centers V (a [B, K, H, W] map). In training, one mini-batch soft k-means
//     step moves V (eqs. 4.4-4.6): m = softmax(beta * S) over clusters, delta_k = sum_i m_ik,
//     count_k += delta_k, eta_k = lambda * delta_k / count_k, v'_k = sum_i m_ik u_i / delta_k,
//     v_k = (1 - eta_k) v_k + eta_k v'_k. Centers are buffers (no gradient), fixed in eval mode;
//   cell relation modeling (where enabled): one post-norm self-attention layer over the H*W cells
//     with q = k = S + P (sine positional encoding, K/2 features per axis, not normalized),
//     v = S, `heads` heads, dropout, LayerNorm, then a K-K-K ReLU FFN with residual and LayerNorm;
//   the module's output (S, or the relation output) is concatenated with the conv features and
//   merged back to C channels by a 1x1 conv without bias; then BN and the activation.
// Backbones: Conv-4 (conv-BN-ReLU-maxpool x4) and ResNet-12 (4 residual blocks of 3
// conv-BN-LeakyReLU(0.1) units with a 1x1-conv shortcut, then max-pool; optional DropBlock on
// blocks 3 and 4). Multi-branch (Y-shape): a shared stem of 2 blocks, branch 1 (constellation,
// classification loss) and branch 2 (plain, prototypical loss).
// Few-shot logits: prototypes = mean of the shots' features; cosine similarity of each query
// to each prototype; the weighted sum over the feature sources (ConstellationConfig::testWeights).
//
// Parameter names follow the official code (mlpc-ucsd/ConstellationNet), so that its state dicts
// load after installer/convert_constellation.py: encoder.{stem,branch1,branch2}.<block>.…
// (conv4 block: conv, feat_cluster.{V_buffer,V_count_buffer}, transformer.layers.0.{mhatt.
// linear_{q,k,v,merge}, norm1, norm2, linear1, linear2}, merge, bn; resnet12 block:
// mergeblock1..3 with the same children but bn, then bn1..3 and downsample.{0,1}),
// classifier.linear, temp. Checkpoints written before the ResNet-12 renaming (convN.* and
// convN.bn.*) still load (officialTensorNames).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/constellation/config.h"

namespace glimpse::constellation {

// ---- constellation module parts -----------------------------------------------------------

class CellClusteringImpl : public torch::nn::Module {
public:
    CellClusteringImpl(int64_t channels, int64_t clusters, double beta, double lambda);
    // x [B, C, H, W] -> cosine similarity map [B, K, H, W]. In training mode the centers move
    // by one mini-batch soft k-means step (after the similarities are computed).
    torch::Tensor forward(const torch::Tensor& x);
    // Cells [N, C] (not normalized) -> cosine similarity [N, K]; moves the centers in training.
    torch::Tensor forwardCells(const torch::Tensor& cells);
    // One soft k-means step on L2-normalized cells u [N, C] (no gradient). Public for tests.
    void updateCenters(const torch::Tensor& u);
    // The same step from cells x [N, C] and their similarity to the current centers sim [N, K];
    // x = u (normalized) when rnorm is undefined, else u = x * rnorm (rnorm [N, 1] = 1 / |x_i|).
    void updateFromSimilarity(const torch::Tensor& x, const torch::Tensor& sim, const torch::Tensor& rnorm);
    // The centers, L2-normalized [K, C].
    torch::Tensor centers() const;
    torch::Tensor V_buffer;        // [K, C] float
    torch::Tensor V_count_buffer;  // [K] float64 (soft counts, initially 1)
    double beta, lambda;
};
TORCH_MODULE(CellClustering);

// Sine positional encoding [H, W, 2 * numPosFeats]: y features then x features, each as
// interleaved (sin, cos) of position / 10000^(2 floor(i / 2) / numPosFeats), positions 1..H, 1..W.
torch::Tensor sinePositionEncoding(int64_t h, int64_t w, int64_t numPosFeats);

class MultiHeadAttentionImpl : public torch::nn::Module {
public:
    MultiHeadAttentionImpl(int64_t dim, int64_t heads, double dropout);
    // q, k, v [B, N, dim] -> [B, N, dim]; `weights` receives the softmax [B, heads, N, N].
    torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          torch::Tensor* weights = nullptr);
    torch::nn::Linear linear_v{nullptr}, linear_k{nullptr}, linear_q{nullptr}, linear_merge{nullptr};
    torch::nn::Dropout dropout{nullptr};
    int64_t heads;
};
TORCH_MODULE(MultiHeadAttention);

class CellRelationImpl : public torch::nn::Module {
public:
    CellRelationImpl(int64_t dim, int64_t heads, double dropout);
    // s [B, K, H, W] -> [B, K, H, W]; `weights` receives the attention [B, heads, HW, HW].
    torch::Tensor forward(const torch::Tensor& s, torch::Tensor* weights = nullptr);
    // The same on cells v [B, H*W, K] of an H x W grid -> [B, H*W, K].
    torch::Tensor forwardCells(const torch::Tensor& v, int64_t H, int64_t W, torch::Tensor* weights = nullptr);
    MultiHeadAttention mhatt{nullptr};
    torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
    torch::nn::Linear linear1{nullptr}, linear2{nullptr};
    torch::nn::Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr};
    int64_t dim;
};
TORCH_MODULE(CellRelation);

// What a constellation module computed (kept when recording).
struct CellRecord {
    std::string name;          // e.g. "stem.0", "branch1.3.mergeblock2"
    int64_t layer = 0;         // 1-based conv layer number in the backbone
    int branch = 0;            // 0: stem or single branch, 1 / 2: Y branches
    torch::Tensor similarity;  // [B, K, H, W] cosine similarity of each cell to each center
    torch::Tensor attention;   // [B, heads, HW, HW] cell relation weights (undefined without)
};

// A 3x3 conv (no bias), its optional constellation module and merge conv, then BN (Conv-4's
// block; without `withBn`, ResNet-12's "mergeblock", whose BN is the block's bnN).
class ConvUnitImpl : public torch::nn::Module {
public:
    ConvUnitImpl(int64_t in, int64_t out, bool cluster, bool relation, const ConstellationConfig& cfg,
                 bool withBn = true);
    torch::Tensor forward(const torch::Tensor& x, std::vector<CellRecord>* records, const std::string& name,
                          int64_t layer, int branch);
    torch::nn::Conv2d conv{nullptr}, merge{nullptr};
    CellClustering feat_cluster{nullptr};
    std::shared_ptr<torch::nn::Module> transformer;   // "transformer.layers.0" = relation
    CellRelation relation{nullptr};
    torch::nn::BatchNorm2d bn{nullptr};   // null without withBn
};
TORCH_MODULE(ConvUnit);

// ---- the model ----------------------------------------------------------------------------

struct ForwardOptions {
    bool record = false;   // keep a CellRecord of every constellation module
    int branch = -1;       // -1: every branch; 1 / 2: only that branch (multi-branch models)
};

struct ConstellationOutput {
    std::vector<torch::Tensor> pooled;   // per computed branch: [B, C] average-pooled features
    std::vector<torch::Tensor> maps;     // per computed branch: [B, C, h, w] before pooling
    std::vector<int> branches;           // which branch each entry is (1 or 2)
    torch::Tensor logits;                // [B, num_classes] classifier on branch 1 (when computed)
    std::vector<CellRecord> records;     // in execution order
};

// A preprocessed image: the network input and what it saw.
struct ConstellationImage {
    torch::Tensor tensor;   // [3, S, S] normalized
    cv::Mat input;          // S x S CV_8UC3 RGB
};

class ConstellationModel : public torch::nn::Module {
public:
    // Deterministic initialization from `seed` (does not touch the global RNG): convs
    // N(0, sqrt(2 / (k*k*out))), BN (1, 0), linear layers PyTorch's default, centers random
    // unit vectors, counts 1, temp 10.
    explicit ConstellationModel(const ConstellationConfig& config, uint64_t seed = 0);

    const ConstellationConfig& config() const { return config_; }
    torch::Device device() const;
    int64_t numParameters() const;
    void setClassNames(const std::vector<std::string>& names);

    // Any RGB or grayscale 8-bit image -> resized to image_size x image_size, normalized.
    // Throws glimpse::Error for empty or absurd images.
    ConstellationImage preprocess(const cv::Mat& image) const;

    ConstellationOutput forward(const torch::Tensor& images, const ForwardOptions& opts = {});

    // The test-time feature sources of `out` (every branch computed): per branch the pooled
    // features and, with feature_augment, the flattened maps; paired with testWeights().
    std::vector<torch::Tensor> fewShotFeatures(const ConstellationOutput& out) const;
    std::vector<double> testWeights() const;
    // Few-shot logits [Q, ways]: support images way-major [ways * shots, 3, S, S], queries
    // [Q, 3, S, S]; in the current mode (eval for testing).
    torch::Tensor fewShotLogits(const torch::Tensor& support, const torch::Tensor& query, int64_t ways,
                                int64_t shots);

    // Constellation modules in execution order: name, layer, branch, has relation.
    struct ModuleInfo {
        std::string name;
        int64_t layer;
        int branch;
        bool relation;
    };
    std::vector<ModuleInfo> constellationModules() const;
    // The clustering module of a named constellation module (glimpse::Error if none).
    CellClustering clustering(const std::string& name) const;

    torch::nn::Linear classifier{nullptr};   // registered as "classifier.linear"
    torch::Tensor temp;                      // learnable scale of the prototypical loss's logits

private:
    torch::Tensor runStage(torch::nn::ModuleList blocks, torch::Tensor x, int64_t firstBlock,
                           std::vector<CellRecord>* records, const std::string& stage, int branch);
    torch::nn::ModuleList makeStage(int64_t first, int64_t last, bool constellation);
    void resetParameters(uint64_t seed);

    ConstellationConfig config_;
    std::shared_ptr<torch::nn::Module> encoder_;
    torch::nn::ModuleList stem_{nullptr}, branch1_{nullptr}, branch2_{nullptr};
    std::vector<ModuleInfo> modules_;
};

// Puts a module in eval mode for a scope and restores its training flag after.
class EvalScope {
public:
    explicit EvalScope(torch::nn::Module& m) : m_(m), was_(m.is_training()) { m_.eval(); }
    ~EvalScope() { m_.train(was_); }
    EvalScope(const EvalScope&) = delete;
    EvalScope& operator=(const EvalScope&) = delete;

private:
    torch::nn::Module& m_;
    bool was_;
};

// Cosine prototype logits: support features way-major [ways * shots, D] -> prototypes (mean
// over shots), query [Q, D]; returns cos(query, prototype) [Q, ways].
torch::Tensor cosinePrototypeLogits(const torch::Tensor& support, const torch::Tensor& query, int64_t ways,
                                    int64_t shots);

// ---- checkpoints --------------------------------------------------------------------------
// Family "constellation"; the config JSON (with class names) is stored in the checkpoint.
// Errors name the file: another family, a config that does not validate, tensors that do not
// match the config (e.g. another cluster count).
std::shared_ptr<ConstellationModel> loadConstellation(const std::string& path);
// Tensor names of checkpoints written before ResNet-12 took the official names, mapped to them:
// encoder.<stage>.<i>.convN.bn.* -> encoder.<stage>.<i>.bnN.*, encoder.<stage>.<i>.convN.* ->
// encoder.<stage>.<i>.mergeblockN.* (N = 1..3; resnet12 only, other names unchanged). `renamed`
// counts the names mapped.
std::map<std::string, torch::Tensor> officialTensorNames(const ConstellationConfig& config,
                                                         std::map<std::string, torch::Tensor> tensors,
                                                         int* renamed = nullptr);
void saveConstellation(const ConstellationModel& model, const std::string& path);

} // namespace glimpse::constellation
