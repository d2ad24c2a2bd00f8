#pragma once
// LETR: line segment detection with transformers (dissertation chapter 2; docs/models.md "LETR").
//
// ResNet backbone with frozen batch norm -> coarse stage (C5 -> 1x1 input_proj -> DETR
// encoder/decoder over N line entities) -> fine stage (C4 -> its own input_proj and
// encoder/decoder; tgt = 0, query_pos = the coarse decoder's last normed output). Heads
// (class_embed Linear(d, 2), lines_embed MLP(d, d, 4, 3 layers) + sigmoid) are shared by all
// decoder layers of a stage.
//
// Parameter and buffer names equal the official stage-2 checkpoint's (docs/models.md "LETR"):
//   backbone.0.body.{conv1, bn1, layer1..4}.*         (torchvision ResNet, FrozenBatchNorm2d)
//   letr.{input_proj, query_embed, transformer, class_embed, lines_embed}.*   coarse stage
//   {input_proj, transformer, class_embed, lines_embed}.*                    fine stage
// (the official file repeats the backbone under letr.backbone.*; installer/convert_letr.py
// drops that copy.) Attention modules use torch.nn.MultiheadAttention's names
// in_proj_weight, in_proj_bias, out_proj.{weight,bias}.
//
// Batching: each image runs through the backbone at its own size (images of equal size share
// one backbone batch); the feature maps are then zero-padded to the largest one with a padding
// mask. The transformer masks padded keys, and positional encodings are normalized by the
// un-padded extent, so a batch gives the same per-image results as one-by-one runs (up to
// float rounding).
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/letr/config.h"
#include "core/models/mlsd/model.h"

namespace glimpse::letr {

enum class Stage : int { Coarse = 0, Fine = 1 };
const char* stageName(Stage s);            // "coarse" / "fine"

// ---- building blocks ----------------------------------------------------------------------

// DETR's FrozenBatchNorm2d: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias,
// eps 1e-5; no num_batches_tracked. weight and bias are parameters (the same tensor names as
// DETR's buffers) so that a backbone trained from scratch can train its batch norm: in training
// mode with weight requiring grad, the layer normalizes by batch statistics and updates the
// running ones (momentum 0.1, like torch.nn.BatchNorm2d) -- only when `trainStats` is set (the
// LETR trainer's train_backbone_bn), the module is in training mode and weight requires grad;
// otherwise (evaluation, frozen backbone, published checkpoints) it is the frozen map above.
class FrozenBatchNorm2dImpl : public torch::nn::Module {
public:
    explicit FrozenBatchNorm2dImpl(int64_t channels);
    torch::Tensor forward(const torch::Tensor& x);
    // True when forward() is the fixed affine map (no batch statistics).
    bool frozen() const { return !(trainStats && is_training() && weight.requires_grad()); }
    // That map as y = x * scale + shift: {scale, shift}, [C] each.
    std::array<torch::Tensor, 2> affine() const;
    torch::Tensor weight, bias, running_mean, running_var;
    static constexpr double kEps = 1e-5;
    static constexpr double kMomentum = 0.1;
    bool trainStats = false;
};
TORCH_MODULE(FrozenBatchNorm2d);

// torchvision BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on the 3x3 conv).
class ResNetBlockImpl : public torch::nn::Module {
public:
    ResNetBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, bool bottleneck);
    torch::Tensor forward(const torch::Tensor& x);

private:
    bool bottleneck_;
    torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
    FrozenBatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
    torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(ResNetBlock);

// torchvision ResNet trunk without avgpool/fc: conv1, bn1, layer1..layer4.
class ResNetBodyImpl : public torch::nn::Module {
public:
    explicit ResNetBodyImpl(const std::string& arch);   // resnet18/34/50/101
    // Feature maps of levels 2..maxLevel (C2 = layer1 at stride 4, ..., C5 = layer4 at
    // stride 32); entry i holds level i + 2. Levels above maxLevel are not computed.
    // `layersDtype` kBFloat16 runs layer1..4 under autocast in channels-last layout (conv1,
    // whose 3 input channels make oneDNN's bfloat16 weight gradient slower than float32's,
    // stays float32); the maps come back as float32. kFloat: all float32, in channels-last
    // layout with frozen batch norms folded into the convolutions when `channelsLast` (the
    // same map, rounded differently; oneDNN's float32 channels-last kernels are the fast ones).
    std::vector<torch::Tensor> forward(const torch::Tensor& images, int maxLevel = 5,
                                       torch::ScalarType layersDtype = torch::kFloat, bool channelsLast = false);
    const std::string& arch() const { return arch_; }
    int64_t channels(int level) const;

private:
    std::string arch_;
    bool bottleneck_;
    torch::nn::Conv2d conv1{nullptr};
    FrozenBatchNorm2d bn1{nullptr};
    std::array<torch::nn::Sequential, 4> layers_;
};
TORCH_MODULE(ResNetBody);

// Multi-head attention with torch.nn.MultiheadAttention's parameter names and math, written
// with explicit LibTorch ops so the per-head weights are reachable. Batch first: [B, L, E].
class MultiheadAttentionImpl : public torch::nn::Module {
public:
    MultiheadAttentionImpl(int64_t embedDim, int64_t numHeads, double dropout);
    // keyPaddingMask: [B, S] bool, true = ignore that key (may be undefined). attnMask: [L, S]
    // bool, true = query l may not attend to key s (may be undefined).
    torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key,
                          const torch::Tensor& value, const torch::Tensor& keyPaddingMask = {},
                          const torch::Tensor& attnMask = {});
    int64_t embedDim() const { return embedDim_; }
    int64_t numHeads() const { return numHeads_; }

    torch::Tensor in_proj_weight, in_proj_bias;   // [3E, E], [3E]: q, k, v rows
    torch::nn::Linear out_proj{nullptr};

    // Debugging/tests: when set, forward() keeps a detached copy of the attention weights
    // it used (after softmax, before dropout) in capturedWeights, [B, heads, L, S].
    bool captureWeights = false;
    torch::Tensor capturedWeights;

private:
    int64_t embedDim_, numHeads_;
    double dropout_;
};
TORCH_MODULE(MultiheadAttention);

// DETR encoder layer, post-norm: q = k = src + pos, v = src; FFN with ReLU.
class EncoderLayerImpl : public torch::nn::Module {
public:
    EncoderLayerImpl(int64_t d, int64_t heads, int64_t ffn, double dropout);
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& pos,
                          const torch::Tensor& keyPaddingMask);
    MultiheadAttention self_attn{nullptr};
    torch::nn::Linear linear1{nullptr}, linear2{nullptr};
    torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};

private:
    double dropout_;
};
TORCH_MODULE(EncoderLayer);

// DETR decoder layer, post-norm: self-attn (q = k = tgt + query_pos, v = tgt), cross-attn
// (q = tgt + query_pos, k = memory + pos, v = memory, padded keys masked), FFN.
class DecoderLayerImpl : public torch::nn::Module {
public:
    DecoderLayerImpl(int64_t d, int64_t heads, int64_t ffn, double dropout);
    // crossIn (optional out): tgt after the self-attention block = the cross-attn's entity input.
    // selfAttnMask (optional): [N, N] bool, true = entity i may not attend to entity j.
    torch::Tensor forward(const torch::Tensor& tgt, const torch::Tensor& memory,
                          const torch::Tensor& memoryKeyPaddingMask, const torch::Tensor& pos,
                          const torch::Tensor& queryPos, torch::Tensor* crossIn = nullptr,
                          const torch::Tensor& selfAttnMask = {});
    MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
    torch::nn::Linear linear1{nullptr}, linear2{nullptr};
    torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};

private:
    double dropout_;
};
TORCH_MODULE(DecoderLayer);

class TransformerEncoderImpl : public torch::nn::Module {
public:
    TransformerEncoderImpl(int64_t numLayers, int64_t d, int64_t heads, int64_t ffn, double dropout);
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& pos,
                          const torch::Tensor& keyPaddingMask);
    std::vector<EncoderLayer> layerList;
};
TORCH_MODULE(TransformerEncoder);

class TransformerDecoderImpl : public torch::nn::Module {
public:
    TransformerDecoderImpl(int64_t numLayers, int64_t d, int64_t heads, int64_t ffn, double dropout);
    std::vector<DecoderLayer> layerList;
    torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(TransformerDecoder);

class TransformerImpl : public torch::nn::Module {
public:
    TransformerImpl(int64_t encLayers, int64_t decLayers, int64_t d, int64_t heads, int64_t ffn,
                    double dropout);
    TransformerEncoder encoder{nullptr};
    TransformerDecoder decoder{nullptr};
};
TORCH_MODULE(Transformer);

// DETR's MLP: Linear layers under "layers.{i}", ReLU between them.
class MLPImpl : public torch::nn::Module {
public:
    MLPImpl(int64_t in, int64_t hidden, int64_t out, int64_t numLayers);
    torch::Tensor forward(torch::Tensor x);
    std::vector<torch::nn::Linear> layerList;
};
TORCH_MODULE(MLP);

// DETR's sine positional encoding (normalize = true, scale 2*pi, eps 1e-6): mask [B, h, w]
// bool (true = padding) -> [B, 2 * numPosFeats, h, w]; y features first, then x; within
// each, channel 2i = sin(p / T^(2i/F)), 2i+1 = cos(p / T^(2i/F)), p = cumulative count of
// un-padded cells (1-based) / (count along that axis + eps) * 2*pi.
torch::Tensor sinePositionEncoding(const torch::Tensor& mask, int64_t numPosFeats,
                                   double temperature = 10000.0);

// ---- inputs -------------------------------------------------------------------------------

struct LetrImage {
    torch::Tensor tensor;       // [3, H, W] float32, normalized (CPU)
    cv::Mat resized;            // H x W, CV_8UC3 RGB: what the network saw (for display)
    int64_t originalHeight = 0, originalWidth = 0;
    int64_t height() const { return tensor.size(1); }
    int64_t width() const { return tensor.size(2); }
};

// ---- outputs ------------------------------------------------------------------------------

struct LetrStageOutput {
    int level = 0;                  // backbone level read (5 = C5, 4 = C4)
    int64_t height = 0, width = 0;  // padded feature-map size of the batch
    std::vector<std::array<int64_t, 2>> validSizes;   // per image (h, w) of its un-padded part
    torch::Tensor mask;             // [B, h, w] bool, true = padding
    torch::Tensor pos;              // [B, h*w, d] sine encoding
    torch::Tensor memory;           // [B, h*w, d] encoder output
    torch::Tensor queryPos;         // [B, N, d]
    torch::Tensor hs;               // [L, B, N, d] decoder outputs after the final LayerNorm
    torch::Tensor logits;           // [L, B, N, num_classes + 1]
    torch::Tensor lines;            // [L, B, N, 4] sigmoid, (x1, y1, x2, y2) / (w, h, w, h)
    // Anchor or proposal queries (coarse stage): the reference line of each entity, [B, N, 4]
    // normalized like `lines` (the lines of a zero head); undefined otherwise.
    torch::Tensor anchors;
    // Recorded when LetrForwardOptions::record is set (entity states per decoder layer):
    std::vector<torch::Tensor> selfIn;    // [B, N, d] tgt entering layer l (self-attn input)
    std::vector<torch::Tensor> crossIn;   // [B, N, d] tgt after self-attn block (cross-attn input)
    // Query denoising (LetrForwardOptions::denoiseQueryPos, coarse stage, training): the extra
    // entities' decoder outputs and head outputs, [L, B, Q, d] / [L, B, Q, C+1] / [L, B, Q, 4].
    torch::Tensor dnHs, dnLogits, dnLines;
    // Extra query groups (LetrForwardOptions::groupQueryEmbed, training): G * N entities decoded
    // beside the learned ones, group after group: [L, B, G * N, d] / [.., C+1] / [.., 4].
    torch::Tensor groupHs, groupLogits, groupLines;
};

struct LetrTimings {               // milliseconds, filled when LetrForwardOptions::time is set
    double backbone = 0, coarse = 0, fine = 0, heads = 0;
    double total() const { return backbone + coarse + fine + heads; }
};

struct LetrOutput {
    std::vector<LetrStageOutput> stages;   // [0] coarse, [1] fine (when configured)
    std::vector<std::array<int64_t, 2>> inputSizes;   // per image (H, W) of its input tensor
    LetrTimings timings;
    // With LetrForwardOptions::keepFeatures: per image, its backbone levels C2..C<max read>
    // (entry l holds level l + 2), un-padded, still in the autograd graph.
    std::vector<std::vector<torch::Tensor>> features;
    const LetrStageOutput& last() const { return stages.back(); }
};

struct LetrForwardOptions {
    bool record = false;   // keep per-layer entity states (selfIn / crossIn)
    bool time = false;     // measure stage timings (synchronizes CUDA)
    bool coarseOnly = false;   // run the coarse stage only (training stage 1); stages.size() == 1
    bool keepFeatures = false; // keep the backbone features in LetrOutput::features (training)
    // Query denoising (training; DN-DETR): [B, Q, d] positional queries of Q extra coarse-stage
    // entities (embedded noised ground-truth lines) decoded beside the N learned ones. The
    // learned entities cannot attend to them (their outputs equal a run without them); the
    // extra ones see everything. Their outputs are in stages[0].dn*.
    torch::Tensor denoiseQueryPos;
    // Query denoising for a model with anchor queries (config "coarse_queries": "anchors"):
    // [B, Q, 4] noised ground-truth lines (normalized x1, y1, x2, y2). The model embeds them with
    // its own anchor encoder and the extra entities' lines correct them, as its own entities'
    // lines correct their anchors. Exclusive with denoiseQueryPos.
    torch::Tensor denoiseReference;
    // kBFloat16: the backbone's layers run in bfloat16 (ResNetBodyImpl::forward; training on a
    // CPU with AMX / AVX512-BF16, LetrTrainConfig::bf16Backbone). The transformers and heads stay float32.
    torch::ScalarType backboneDtype = torch::kFloat;
    // Float32 backbone in channels-last layout with frozen batch norms folded into the
    // convolutions (training's fast path on a CPU without bfloat16 instructions); always so in
    // bfloat16. Off: the layout and rounding of the reference implementations.
    bool backboneChannelsLast = false;
    // kBFloat16 (inference on a CPU with AVX512-BF16 / AMX; `--precision bf16`): the transformers'
    // linear layers and attention products take bfloat16 operands (float32 accumulation, results
    // back in float32); layer norms, softmax, residual sums and the heads stay float32.
    torch::ScalarType transformerDtype = torch::kFloat;
    // Query groups (training; Group DETR): [G, N, d] positional queries of G extra groups of N
    // entities each, decoded beside the model's own N. Attention in the decoders' self-attention
    // stays within a group (the model's own entities see neither the groups nor the denoising
    // entities, so their outputs equal a run without them; the denoising entities see the
    // model's entities and each other, not the groups). The fine stage decodes every group too,
    // each from its own group's last coarse outputs. Outputs in stages[s].group*.
    torch::Tensor groupQueryEmbed;
};

// ---- the model ----------------------------------------------------------------------------

class MlsdBodyImpl;   // mlsd_backbone.h (backbone "mlsd_tiny")
class LineQueryEncoderImpl;   // denoise.h (anchor queries' positional encoder)

class LetrModel : public torch::nn::Module {
public:
    // Random initialization, deterministic for a fixed seed (does not touch the global RNG):
    // convs Kaiming-normal (fan_out), frozen BN identity, transformer matrices Xavier-uniform,
    // query_embed N(0, 1), linear layers PyTorch's default uniform.
    explicit LetrModel(const LetrConfig& config, uint64_t seed = 0);

    const LetrConfig& config() const { return config_; }
    torch::Device device() const;
    // Test-time resize (not part of the weights): short side and long-side cap. Validated.
    void setResize(int64_t shortSide, int64_t maxLongSide);
    // The default display threshold stored with the weights (config "score_threshold"). Validated.
    void setScoreThreshold(double t);

    // RGB CV_8UC3 -> resized (short side = config.shortSide, long side capped) and normalized.
    // Throws glimpse::Error for empty, non-8UC3 or absurdly large images (> max_input_pixels).
    // shortSide / maxLongSide > 0 replace the config's for this image (16..8192, the long side
    // at least the short; glimpse::Error otherwise).
    LetrImage preprocess(const cv::Mat& rgb, int64_t shortSide = 0, int64_t maxLongSide = 0) const;

    // images: normalized [3, H_i, W_i] tensors (sizes may differ). Runs on the model's device.
    LetrOutput forward(const std::vector<torch::Tensor>& images, const LetrForwardOptions& opts = {});

    // Building blocks (for traces, tests and training).
    ResNetBody body() const { return body_; }   // null for backbone mlsd_tiny
    std::shared_ptr<MlsdBodyImpl> mlsdBody() const { return mlsdBody_; }   // null for a ResNet
    int numDecoderLayers(Stage s) const;
    DecoderLayer decoderLayer(Stage s, int layer) const;
    EncoderLayer encoderLayer(Stage s, int layer) const;
    torch::nn::Embedding queryEmbed() const { return queryEmbed_; }
    // Anchor queries ("coarse_queries": "anchors"): the entities' reference lines [N, 4]
    // (sigmoid of letr.query_anchor; normalized x1, y1, x2, y2); undefined otherwise.
    torch::Tensor queryAnchors() const;
    // Sets captureWeights on every attention module (encoders and decoders).
    void setCaptureAttention(bool on);
    // Sets trainStats on every backbone batch norm (see FrozenBatchNorm2dImpl).
    void setTrainBackboneBn(bool on);

    // Re-initializes every parameter and buffer from `seed` (see the constructor).
    void resetParameters(uint64_t seed);

    // Proposal queries: M-LSD's decoder (proposal.*; null otherwise). It stays in evaluation
    // mode whatever train() sets (its batch norms keep M-LSD's statistics) and never trains.
    mlsd::MlsdDecoder proposalDecoder() const { return proposalNet_; }
    // The proposals of a batch of equal-sized images (height x width input tensors) from their
    // backbone levels C2, C3, C4 (entries 0..2): [B, num_queries, 4] normalized by (W, H, W, H),
    // no gradient.
    torch::Tensor proposals(const std::vector<torch::Tensor>& feats, int64_t height, int64_t width);
    void train(bool on = true) override;

private:
    struct StageModules {
        torch::nn::Conv2d inputProj{nullptr};
        Transformer transformer{nullptr};
        torch::nn::Linear classEmbed{nullptr};
        MLP linesEmbed{nullptr};
        int level = 5;
    };
    void buildStage(torch::nn::Module& parent, StageModules& s, int level);
    // Pads per-image features into a batch and runs input_proj, encoder and decoder.
    // queryPos [B, N, d]: the model's entities; groupQueryPos [B, G * N, d] (may be undefined):
    // extra groups of N; extraQueryPos [B, Q, d] (may be undefined): denoising entities.
    // queryContent [B, N, d] (may be undefined: zeros, DETR's): the model's entities' initial
    // decoder input (anchor queries start from query_embed).
    void runStage(StageModules& s, const std::vector<torch::Tensor>& feats,
                  const torch::Tensor& queryPos, bool record, LetrStageOutput& out,
                  const torch::Tensor& extraQueryPos = {}, const torch::Tensor& groupQueryPos = {},
                  const torch::Tensor& queryContent = {});
    // What a stage's lines correct, in logit space (each may be undefined: absolute lines).
    struct HeadReferences {
        torch::Tensor lines;          // [B, N, 4] lines, no gradient (fine_lines "refine")
        torch::Tensor groupLines;     // [B, G * N, 4] likewise for the query groups
        torch::Tensor denoiseLines;   // [B, Q, 4] noised lines of the denoising entities
        torch::Tensor anchorLogits;   // [N, 4] the anchor queries' logits, with gradient
    };
    void runHeads(StageModules& s, LetrStageOutput& out, const HeadReferences& refs = {});
    const StageModules& stageModules(Stage s) const;

    LetrConfig config_;
    ResNetBody body_{nullptr};
    std::shared_ptr<MlsdBodyImpl> mlsdBody_;
    torch::nn::Embedding queryEmbed_{nullptr};
    torch::Tensor queryAnchor_;                            // [N, 4] logits (anchor queries)
    std::shared_ptr<LineQueryEncoderImpl> anchorEncoder_;  // anchor line -> positional query
    mlsd::MlsdDecoder proposalNet_{nullptr};               // proposal queries' line candidates
    StageModules coarse_, fine_;
};

// ---- checkpoints --------------------------------------------------------------------------
// Family "letr"; the config JSON is stored in the checkpoint. Errors name the file.
// loadLetr also reads the trainer's resumable checkpoint (family "letr-train", written by
// trainLetr every checkpoint_every steps): its "model.*" tensors and the model config inside
// its training config, as the model being trained. A checkpoint written in the coarse phase
// of a two-stage run loads as a coarse-only model (its fine stage is still the untrained
// initialization). So the Training panel's preview and `glimpse eval` work mid-run.
std::shared_ptr<LetrModel> loadLetr(const std::string& path);
void saveLetr(const LetrModel& model, const std::string& path);

// Backbone-only checkpoints, family "resnet", config {"arch": "resnet50"}, parameters under
// torchvision's names (conv1.weight, layer1.0.bn1.running_mean, ...).
ResNetBody loadResNet(const std::string& path);
// Copies a "resnet" checkpoint into a LETR model's backbone (arch must match); for backbone
// mlsd_tiny, an "mlsd" checkpoint's encoder (resources/mlsd_tiny.h5).
void loadLetrBackbone(LetrModel& model, const std::string& path);

} // namespace glimpse::letr
