#pragma once
// CoaT: co-scale conv-attentional image transformers (dissertation chapter 3; docs/models.md "CoaT").
//
// Four serial blocks (patch embedding with stride 4, 2, 2, 2 + CLS token, then conv-attentional
// modules), optionally followed by parallel groups that run scales 2-4 side by side with
// co-scale fusion (feature interpolation, or direct cross-layer attention as an option).
//
// Conv-attentional module (eqs. 3.3, 3.8-3.12), per head with C = head_dim:
//   FactorAtt(X) = Q / sqrt(C) (softmax_tokens(K)^T V)     softmax over the N tokens
//   CRPE(X)      = Q o DWConv(V_img)                         zero row for the CLS token
//   out          = proj(FactorAtt + CRPE)
// CRPE kernels {3: 2 heads, 5: 3 heads, 7: 3 heads} in head order (config crpe_window);
// CPE: depthwise 3x3 with bias on the image tokens, residual, before norm1 of every block; one
// CPE and one CRPE per scale, shared by that scale's serial and parallel blocks.
//
// Parameter names equal timm's coat.py (docs/models.md "CoaT"): patch_embed{1-4}.{proj,norm}, cls_token{1-4},
// cpe{1-4}.proj, crpe{1-4}.conv_list.{0,1,2}, serial_blocks{1-4}.{i}.{norm1, factoratt_crpe.qkv,
// factoratt_crpe.proj, norm2, mlp.fc1, mlp.fc2}, parallel_blocks.{i}.{norm12-14,
// factoratt_crpe2-4, norm22-24, mlp2}, norm2-4, aggregate, head. Shared modules (cpe, crpe, the
// parallel FFN) are registered once under their canonical names; timm's state dicts repeat them
// under every user (serial_blocks1.0.cpe.*, ...mlp3.*, ...) and the converter drops the copies.
// Without use_cpe / use_crpe the cpe / crpe modules do not exist.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/models/coat/config.h"

namespace glimpse::coat {

using Grid = std::array<int64_t, 2>;   // (h, w) of a token grid

// ---- building blocks ----------------------------------------------------------------------

// Patch embedding: Conv2d(kernel = stride = patch) then LayerNorm (eps 1e-5) over channels.
class PatchEmbedImpl : public torch::nn::Module {
public:
    PatchEmbedImpl(int64_t in, int64_t dim, int64_t patch);
    // [B, Cin, H, W] -> tokens [B, h*w, dim]; grid receives (h, w).
    torch::Tensor forward(const torch::Tensor& x, Grid& grid);
    torch::nn::Conv2d proj{nullptr};
    torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(PatchEmbed);

// Convolutional position encoding: depthwise kxk conv with bias on the image tokens, residual.
class ConvPosEncImpl : public torch::nn::Module {
public:
    ConvPosEncImpl(int64_t dim, int64_t k = 3);
    torch::Tensor forward(const torch::Tensor& x, Grid grid);   // [B, 1+h*w, C]
    torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(ConvPosEnc);

// Convolutional relative position encoding: depthwise convs over V's image tokens, one per head
// group; returns Q o conv(V) with a zero CLS row.
class ConvRelPosEncImpl : public torch::nn::Module {
public:
    ConvRelPosEncImpl(int64_t headDim, const std::vector<std::pair<int64_t, int64_t>>& window);
    // q, v: [B, heads, 1+h*w, C] -> [B, heads, 1+h*w, C]
    torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& v, Grid grid);
    // conv(V) of the image tokens alone: [B, heads, h*w, C].
    torch::Tensor convV(const torch::Tensor& v, Grid grid);
    torch::nn::ModuleList conv_list{nullptr};
    std::vector<torch::nn::Conv2d> convs;
    std::vector<int64_t> kernels, headSplits;
    int64_t headDim;
};
TORCH_MODULE(ConvRelPosEnc);

// What one conv-attentional module computed (kept when CoatForwardOptions::record is set).
struct AttnRecord {
    int scale = 0;             // 0..3 (scale s+1 in the paper's numbering)
    std::string name;          // e.g. "serial_blocks1.0", "parallel_blocks.2.s2"
    Grid grid{0, 0};
    torch::Tensor q, kSoftmax, v;   // [B, heads, 1+h*w, C]
    torch::Tensor factor;           // [B, heads, 1+h*w, C] Q (softmax(K)^T V) / sqrt(C)
    torch::Tensor crpe;             // [B, heads, 1+h*w, C] (undefined without CRPE)
    torch::Tensor cross;            // direct cross-layer attention terms (parallel, optional)
};

// Factorized attention with CRPE (timm: FactorAttnConvRelPosEnc): qkv Linear(dim, 3 dim) with
// bias, proj Linear(dim, dim). `crpe` is the scale's shared module (may be null).
class FactorAttnConvRelPosEncImpl : public torch::nn::Module {
public:
    FactorAttnConvRelPosEncImpl(int64_t dim, int64_t numHeads, bool qkvBias);
    torch::Tensor forward(const torch::Tensor& x, Grid grid, AttnRecord* rec = nullptr);
    // Pieces (for direct cross-layer attention): q, k, v [B, heads, N, C].
    // low: keep q, k, v in the products' dtype when it is a low one (core/util/products.h).
    std::array<torch::Tensor, 3> qkvSplit(const torch::Tensor& x, bool low = false);
    // Per-head output (before proj) of the module itself: factor + crpe.
    torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, Grid grid,
                         AttnRecord* rec);
    torch::Tensor project(const torch::Tensor& heads);   // [B, heads, N, C] -> proj -> [B, N, dim]
    // attend() without a record under low-precision products: the same function in fewer passes.
    torch::Tensor attendLow(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, Grid grid);
    torch::nn::Linear qkv{nullptr}, proj{nullptr};
    ConvRelPosEnc crpe{nullptr};   // not registered here (shared, owned by the model)
    int64_t numHeads, headDim;
    double scale;
};
TORCH_MODULE(FactorAttnConvRelPosEnc);

// timm's Mlp: fc1, exact GELU, fc2.
class MlpImpl : public torch::nn::Module {
public:
    MlpImpl(int64_t dim, int64_t hidden);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

class SerialBlockImpl : public torch::nn::Module {
public:
    SerialBlockImpl(int64_t dim, int64_t numHeads, double mlpRatio, ConvPosEnc cpe, ConvRelPosEnc crpe);
    torch::Tensor forward(const torch::Tensor& x, Grid grid, AttnRecord* rec = nullptr);
    ConvPosEnc cpe{nullptr};   // shared, not registered here
    torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
    FactorAttnConvRelPosEnc factoratt_crpe{nullptr};
    Mlp mlp{nullptr};
};
TORCH_MODULE(SerialBlock);

// Parallel group over scales 2-4 (indices 1..3). mlp2 is the shared FFN (timm's mlp3/mlp4 are
// the same module). CPE is applied by the model before the group.
class ParallelBlockImpl : public torch::nn::Module {
public:
    ParallelBlockImpl(const std::array<int64_t, 4>& dims, int64_t numHeads, double mlpRatio,
                      const std::array<ConvRelPosEnc, 4>& crpes, CoScale mode);
    // xs: tokens of scales 2..4 [B, 1+h*w, C]; returns the updated tokens.
    std::array<torch::Tensor, 3> forward(const std::array<torch::Tensor, 3>& xs, const std::array<Grid, 3>& grids,
                                         std::array<AttnRecord, 3>* recs = nullptr);
    std::array<torch::nn::LayerNorm, 3> norm1, norm2;              // norm12..14, norm22..24
    std::array<FactorAttnConvRelPosEnc, 3> att;                     // factoratt_crpe2..4
    Mlp mlp{nullptr};                                               // mlp2 (= mlp3 = mlp4)
    CoScale mode;
};
TORCH_MODULE(ParallelBlock);

// Tokens [B, 1+h*w, C] with image tokens resized (bilinear, align_corners=false) from grid
// `from` to grid `to`; the CLS token is kept as it is.
torch::Tensor resizeTokens(const torch::Tensor& x, Grid from, Grid to);

// ---- inputs / outputs ---------------------------------------------------------------------

struct CoatImage {
    torch::Tensor tensor;   // [3, S, S] float32, normalized
    cv::Mat crop;           // S x S CV_8UC3 RGB: what the network saw
    int64_t originalHeight = 0, originalWidth = 0;
};

struct CoatForwardOptions {
    bool record = false;       // keep AttnRecords of every conv-attentional module
    bool keepCamTokens = false;// keep the tokens entering each scale's last block (for Grad-CAM)
    // kBFloat16 (inference on a CPU with AVX512-BF16 / AMX, `--precision bf16`): the linear
    // layers and attention products take bfloat16 operands (float32 accumulation, results back
    // in float32); convolutions, softmax, layer norms and residual sums stay float32.
    // kQInt8 (`--precision int8`): the MLPs' linear layers as int8 products (products.h: weights
    // per output channel, activations per tensor at each call); everything else float32.
    torch::ScalarType productDtype = torch::kFloat;
};

struct CoatOutput {
    torch::Tensor logits;                  // [B, num_classes]
    std::array<Grid, 4> grids{};           // token grids of scales 1..4
    std::vector<AttnRecord> attention;     // in execution order (record = true)
    torch::Tensor camTokens;               // [B, 1+h4*w4, C4] (keepCamTokens = true)
    // With keepCamTokens, per scale s: the tokens [B, 1+h*w, C_s] entering the scale's last
    // block (its last serial block; for CoaT scales 2..4 the last parallel group), what
    // Grad-CAM at that scale differentiates. camTokens is scaleCamTokens[3].
    std::array<torch::Tensor, 4> scaleCamTokens;
};

// ---- the model ----------------------------------------------------------------------------

class CoatModel : public torch::nn::Module {
public:
    // Random initialization, deterministic for a fixed seed (does not touch the global RNG):
    // linear layers truncated-normal std 0.02 (bias 0), LayerNorm (1, 0), cls tokens
    // truncated-normal 0.02, convs PyTorch's default.
    explicit CoatModel(const CoatConfig& config, uint64_t seed = 0);

    const CoatConfig& config() const { return config_; }
    torch::Device device() const;
    int64_t numParameters() const;   // unique parameters (shared modules counted once)
    // Replaces the class names (num_classes names, or none); not part of the weights.
    void setClassNames(const std::vector<std::string>& names);

    // RGB CV_8UC3 -> resize the shorter side to config.resize (bicubic), center crop
    // image_size, normalize. Throws glimpse::Error for empty, non-8UC3 or absurd images.
    CoatImage preprocess(const cv::Mat& rgb) const;

    // images [B, 3, H, W] (H, W >= 32; normalized). Runs on the model's device.
    CoatOutput forward(const torch::Tensor& images, const CoatForwardOptions& opts = {});

    // Blocks (for traces and tests).
    PatchEmbed patchEmbed(int s) const { return patchEmbed_[size_t(s)]; }
    torch::Tensor clsToken(int s) const { return cls_[size_t(s)]; }
    ConvPosEnc cpe(int s) const { return cpe_[size_t(s)]; }
    ConvRelPosEnc crpe(int s) const { return crpe_[size_t(s)]; }
    SerialBlock serialBlock(int s, int i) const;
    ParallelBlock parallelBlock(int i) const;
    int numSerialBlocks(int s) const { return int(serial_[size_t(s)].size()); }
    int numParallelBlocks() const { return int(parallel_.size()); }

    void resetParameters(uint64_t seed);

private:
    CoatConfig config_;
    std::array<PatchEmbed, 4> patchEmbed_{nullptr, nullptr, nullptr, nullptr};
    std::array<torch::Tensor, 4> cls_;
    std::array<ConvPosEnc, 4> cpe_{nullptr, nullptr, nullptr, nullptr};
    std::array<ConvRelPosEnc, 4> crpe_{nullptr, nullptr, nullptr, nullptr};
    std::array<std::vector<SerialBlock>, 4> serial_;
    std::vector<ParallelBlock> parallel_;
    std::array<torch::nn::LayerNorm, 3> finalNorm_{nullptr, nullptr, nullptr};   // norm2..4
    torch::nn::Conv1d aggregate_{nullptr};
    torch::nn::Linear head_{nullptr};
};

// ---- checkpoints --------------------------------------------------------------------------
// Family "coat"; the config JSON (with class names, when known) is stored in the checkpoint.
std::shared_ptr<CoatModel> loadCoat(const std::string& path);
void saveCoat(const CoatModel& model, const std::string& path);

} // namespace glimpse::coat
