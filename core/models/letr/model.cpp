#include "core/models/letr/model.h"
#include "core/models/letr/denoise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <ATen/CPUGeneratorImpl.h>
#include <opencv2/imgproc.hpp>
#include <torch/cuda.h>
#include <torch/version.h>

// LibTorch 2.1 has fused attention with an explicit scale (at::scaled_dot_product_attention).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define GLIMPSE_FUSED_ATTENTION 1
#else
#define GLIMPSE_FUSED_ATTENTION 0
#endif

#include "core/error.h"
#include "core/util/products.h"
#include "core/io/checkpoint.h"
#include "core/models/letr/mlsd_backbone.h"
#include "core/models/mlsd/model.h"
#include "core/util/autocast.h"
#include "core/util/json_file.h"

namespace glimpse::letr {

namespace F = torch::nn::functional;

const char* stageName(Stage s) { return s == Stage::Coarse ? "coarse" : "fine"; }

// ---- inference products ----------------------------------------------------------------------

namespace {
// The transformers' products (LetrForwardOptions::transformerDtype; core/util/products.h).
using products::ProductDtypeGuard;
torch::Tensor linearP(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    return products::linear(x, w, b);
}
torch::Tensor linearP(torch::nn::LinearImpl& l, const torch::Tensor& x) { return products::linear(l, x); }
torch::Tensor bmmP(const torch::Tensor& a, const torch::Tensor& b) { return products::bmm(a, b); }
} // namespace

// ---- FrozenBatchNorm2d ---------------------------------------------------------------------

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int64_t channels) {
    weight = register_parameter("weight", torch::ones({channels}));
    bias = register_parameter("bias", torch::zeros({channels}));
    running_mean = register_buffer("running_mean", torch::zeros({channels}));
    running_var = register_buffer("running_var", torch::ones({channels}));
}

std::array<torch::Tensor, 2> FrozenBatchNorm2dImpl::affine() const {
    auto scale = weight * (running_var + kEps).rsqrt();
    return {scale, bias - running_mean * scale};
}

torch::Tensor FrozenBatchNorm2dImpl::forward(const torch::Tensor& x) {
    if (!frozen())
        return torch::batch_norm(x, weight, bias, running_mean, running_var, /*training=*/true, kMomentum, kEps,
                                 /*cudnn_enabled=*/true);
    auto [scale, shift] = affine();
    // In a bfloat16 backbone (ResNetBodyImpl::forward) the map stays in bfloat16.
    if (x.scalar_type() != scale.scalar_type()) {
        scale = scale.to(x.scalar_type());
        shift = shift.to(x.scalar_type());
    }
    return x * scale.view({1, -1, 1, 1}) + shift.view({1, -1, 1, 1});
}

// ---- ResNet ---------------------------------------------------------------------------------

namespace {
torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
    return torch::nn::Conv2d(
        torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}
} // namespace

ResNetBlockImpl::ResNetBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, bool bottleneck)
    : bottleneck_(bottleneck) {
    const int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
        conv1 = register_module("conv1", conv(inplanes, planes, 1, 1, 0));
        bn1 = register_module("bn1", FrozenBatchNorm2d(planes));
        conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
        bn2 = register_module("bn2", FrozenBatchNorm2d(planes));
        conv3 = register_module("conv3", conv(planes, planes * expansion, 1, 1, 0));
        bn3 = register_module("bn3", FrozenBatchNorm2d(planes * expansion));
    } else {
        conv1 = register_module("conv1", conv(inplanes, planes, 3, stride, 1));
        bn1 = register_module("bn1", FrozenBatchNorm2d(planes));
        conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
        bn2 = register_module("bn2", FrozenBatchNorm2d(planes));
    }
    if (stride != 1 || inplanes != planes * expansion) {
        downsample = register_module(
            "downsample", torch::nn::Sequential(conv(inplanes, planes * expansion, 1, stride, 0),
                                                FrozenBatchNorm2d(planes * expansion)));
    }
}

namespace {
// bn(conv(x)). In the fast backbone (ResNetBodyImpl::forward: bfloat16, or float32 in
// channels-last layout) a frozen batch norm is folded into the convolution (weight * scale,
// bias = shift): the same map, without two elementwise passes over the activations forward and
// backward. The float32 default layout keeps the separate ops, so inference matches the
// reference implementations' rounding.
torch::Tensor convBn(torch::nn::Conv2dImpl& conv, FrozenBatchNorm2dImpl& bn, const torch::Tensor& x) {
    const bool fast = x.scalar_type() != torch::kFloat ||
                      (x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous());
    if (!fast || !bn.frozen()) return bn.forward(conv.forward(x));
    auto [scale, shift] = bn.affine();
    // The blocks' convolutions pad by half their (odd, square) kernel, as conv() builds them.
    const int64_t pad = (conv.weight.size(2) - 1) / 2;
    return torch::conv2d(x, conv.weight * scale.view({-1, 1, 1, 1}), shift, conv.options.stride(), pad);
}
} // namespace

torch::Tensor ResNetBlockImpl::forward(const torch::Tensor& x) {
    auto out = torch::relu(convBn(*conv1, *bn1, x));
    if (bottleneck_) {
        out = torch::relu(convBn(*conv2, *bn2, out));
        out = convBn(*conv3, *bn3, out);
    } else {
        out = convBn(*conv2, *bn2, out);
    }
    torch::Tensor identity = x;
    if (downsample)
        identity = convBn(*downsample->ptr(0)->as<torch::nn::Conv2dImpl>(),
                          *downsample->ptr(1)->as<FrozenBatchNorm2dImpl>(), x);
    return torch::relu(out + identity);
}

ResNetBodyImpl::ResNetBodyImpl(const std::string& arch) : arch_(arch) {
    LetrConfig probe;
    probe.backbone = arch;
    const auto blocks = probe.blocksPerLayer();   // throws for unknown archs
    bottleneck_ = probe.bottleneck();
    conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
    bn1 = register_module("bn1", FrozenBatchNorm2d(64));
    const int64_t expansion = bottleneck_ ? 4 : 1;
    int64_t inplanes = 64;
    for (int i = 0; i < 4; ++i) {
        const int64_t planes = int64_t(64) << i;
        torch::nn::Sequential seq;
        for (int b = 0; b < blocks[size_t(i)]; ++b) {
            const int64_t stride = (b == 0 && i > 0) ? 2 : 1;
            seq->push_back(ResNetBlock(inplanes, planes, stride, bottleneck_));
            inplanes = planes * expansion;
        }
        layers_[size_t(i)] = register_module("layer" + std::to_string(i + 1), seq);
    }
}

int64_t ResNetBodyImpl::channels(int level) const {
    LetrConfig probe;
    probe.backbone = arch_;
    return probe.levelChannels(level);
}

std::vector<torch::Tensor> ResNetBodyImpl::forward(const torch::Tensor& images, int maxLevel,
                                                   torch::ScalarType layersDtype, bool channelsLast) {
    if (maxLevel < 2 || maxLevel > 5)
        throw Error("ResNet: maxLevel must be 2..5, got " + std::to_string(maxLevel));
    const bool low = layersDtype != torch::kFloat;
    const bool cl = low || channelsLast;
    auto x = torch::relu(bn1(conv1(cl ? images.contiguous(at::MemoryFormat::ChannelsLast) : images)));
    x = F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
    std::vector<torch::Tensor> out;
    AutocastGuard autocast(x.device(), layersDtype);
    for (int level = 2; level <= maxLevel; ++level) {
        x = layers_[size_t(level - 2)]->forward(x);
        out.push_back(low ? x.to(torch::kFloat) : x);
    }
    return out;
}

// ---- attention and transformer ---------------------------------------------------------------

namespace {
// CPU float32 inference attention, one (image, head) at a time: the [L, S] logits of one head
// (scaled inside the product), its mask, softmax and product with the values reuse two [L, S]
// buffers that stay in the caches, and the per-head operands are strided views of the
// projections (row stride = the projection's width), so no head-major copy is made and the
// heads' outputs land in place in [B, L, E]. The same math as the batched path below within
// float32 rounding (the scale is applied to the products instead of to q). masked: [B or 1, 1,
// L or 1, S] bool (true: may not attend) or undefined.
torch::Tensor headwiseAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& masked, int64_t H, double scale) {
    const int64_t B = q.size(0), L = q.size(1), S = k.size(1), E = v.size(2), dh = E / H;
    auto out = torch::empty({B, L, E}, q.options());
    auto logits = torch::empty({L, S}, q.options());
    auto weights = torch::empty({L, S}, q.options());
    const double minusInf = -std::numeric_limits<float>::infinity();
    for (int64_t b = 0; b < B; ++b) {
        torch::Tensor m;   // [L or 1, S]; undefined when nothing is masked for this image
        if (masked.defined()) {
            m = masked.select(0, std::min(b, masked.size(0) - 1)).select(0, 0);
            if (!m.any().item<bool>()) m = torch::Tensor();
        }
        const auto qb = q.select(0, b), kb = k.select(0, b), vb = v.select(0, b), ob = out.select(0, b);
        for (int64_t h = 0; h < H; ++h) {
            at::addmm_out(logits, logits, qb.narrow(1, h * dh, dh), kb.narrow(1, h * dh, dh).t(), 0.0, scale);
            if (m.defined()) logits.masked_fill_(m, minusInf);
            at::_softmax_out(weights, logits, 1, false);
            auto oh = ob.narrow(1, h * dh, dh);
            at::mm_out(oh, weights, vb.narrow(1, h * dh, dh));
        }
    }
    return out;
}
} // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t embedDim, int64_t numHeads, double dropout)
    : embedDim_(embedDim), numHeads_(numHeads), dropout_(dropout) {
    if (numHeads < 1 || embedDim % numHeads != 0)
        throw Error("MultiheadAttention: embed dim " + std::to_string(embedDim) +
                    " is not divisible by " + std::to_string(numHeads) + " heads");
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * embedDim, embedDim}));
    in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * embedDim}));
    out_proj = register_module("out_proj", torch::nn::Linear(embedDim, embedDim));
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& key,
                                              const torch::Tensor& value,
                                              const torch::Tensor& keyPaddingMask,
                                              const torch::Tensor& attnMask) {
    const int64_t B = query.size(0), L = query.size(1), S = key.size(1), E = embedDim_;
    const int64_t H = numHeads_, dh = E / H;
    torch::Tensor q, k;
    if (query.is_same(key)) {
        // Self-attention (q = k): one product for both projections; q and k are views of it.
        auto qk = linearP(query, in_proj_weight.narrow(0, 0, 2 * E), in_proj_bias.narrow(0, 0, 2 * E));
        q = qk.narrow(2, 0, E);
        k = qk.narrow(2, E, E);
    } else {
        q = linearP(query, in_proj_weight.narrow(0, 0, E), in_proj_bias.narrow(0, 0, E));
        k = linearP(key, in_proj_weight.narrow(0, E, E), in_proj_bias.narrow(0, E, E));
    }
    auto v = linearP(value, in_proj_weight.narrow(0, 2 * E, E), in_proj_bias.narrow(0, 2 * E, E));
#if GLIMPSE_FUSED_ATTENTION
    // On a GPU, when nobody reads the weights (no trace, no inspector) and no dropout applies:
    // LibTorch's fused attention (memory-efficient kernels; the [B, H, L, S] weights are never
    // stored). Same result as the path below within float32 rounding (glimpse check device).
    if (query.is_cuda() && !captureWeights && !(dropout_ > 0.0 && is_training())) {
        torch::Tensor allowed;   // true: the key takes part (the masks below say the opposite)
        if (keyPaddingMask.defined()) allowed = keyPaddingMask.logical_not().view({B, 1, 1, S});
        if (attnMask.defined()) {
            auto m = attnMask.to(query.device()).logical_not().view({1, 1, L, S});
            allowed = allowed.defined() ? allowed.logical_and(m) : m;
        }
        auto head = [&](const torch::Tensor& t, int64_t n) { return t.view({B, n, H, dh}).transpose(1, 2); };
        const std::optional<torch::Tensor> mask = allowed.defined() ? std::optional<torch::Tensor>(allowed) : std::nullopt;
        auto out = at::scaled_dot_product_attention(head(q, L), head(k, S), head(v, S), mask, 0.0, false,
                                                    1.0 / std::sqrt(double(dh)));
        return out_proj(out.transpose(1, 2).reshape({B, L, E}));
    }
#endif
    // One mask, applied once (true: may not attend).
    torch::Tensor masked;
    if (keyPaddingMask.defined()) masked = keyPaddingMask.view({B, 1, 1, S});
    if (attnMask.defined()) {
        auto m = attnMask.to(query.device()).view({1, 1, L, S});
        masked = masked.defined() ? masked.logical_or(m) : m;
    }
    // CPU float32 inference when nobody reads the weights: one head at a time, no copies.
    const bool needGrad = torch::GradMode::is_enabled() &&
                          (q.requires_grad() || k.requires_grad() || v.requires_grad());
    if (query.is_cpu() && q.scalar_type() == torch::kFloat && !products::lowPrecision(q) && !needGrad &&
        !captureWeights && !(dropout_ > 0.0 && is_training()))
        return linearP(*out_proj, headwiseAttention(q, k, v, masked, H, 1.0 / std::sqrt(double(dh))));
    // Head-major contiguous operands ([B, H, L, dh] x [B, H, dh, S]): the batched products
    // then take the plain BLAS path (strided operands are much slower on some CPU builds).
    q = (q * (1.0 / std::sqrt(double(dh)))).view({B, L, H, dh}).permute({0, 2, 1, 3}).contiguous();
    auto kT = k.view({B, S, H, dh}).permute({0, 2, 3, 1}).contiguous();
    v = v.view({B, S, H, dh}).permute({0, 2, 1, 3}).contiguous();
    auto logits = bmmP(q.view({B * H, L, dh}), kT.view({B * H, dh, S})).view({B, H, L, S});
    // In place only without autograd: logits is a view of the product, and an in-place write on
    // a view makes the backward pass copy the whole [B, H, L, S] gradient (CopySlices) once per
    // mask, which was half of a LETR training step on the CPU.
    if (masked.defined()) {
        const double minusInf = -std::numeric_limits<float>::infinity();
        logits = logits.requires_grad() ? logits.masked_fill(masked, minusInf) : logits.masked_fill_(masked, minusInf);
    }
    auto attn = torch::softmax(logits, -1);
    if (captureWeights) capturedWeights = attn.detach().clone();
    if (dropout_ > 0.0 && is_training()) attn = torch::dropout(attn, dropout_, true);
    auto out = bmmP(attn.view({B * H, L, S}), v.view({B * H, S, dh})).view({B, H, L, dh}).permute({0, 2, 1, 3}).reshape({B, L, E});
    return linearP(*out_proj, out);
}

EncoderLayerImpl::EncoderLayerImpl(int64_t d, int64_t heads, int64_t ffn, double dropout)
    : dropout_(dropout) {
    self_attn = register_module("self_attn", MultiheadAttention(d, heads, dropout));
    linear1 = register_module("linear1", torch::nn::Linear(d, ffn));
    linear2 = register_module("linear2", torch::nn::Linear(ffn, d));
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& src, const torch::Tensor& pos,
                                        const torch::Tensor& keyPaddingMask) {
    const bool train = is_training();
    auto qk = src + pos;
    auto x = norm1(src + torch::dropout(self_attn(qk, qk, src, keyPaddingMask), dropout_, train));
    auto ff = linearP(*linear2, torch::dropout(torch::relu(products::linearLow(*linear1, x)), dropout_, train));
    return norm2(x + torch::dropout(ff, dropout_, train));
}

DecoderLayerImpl::DecoderLayerImpl(int64_t d, int64_t heads, int64_t ffn, double dropout)
    : dropout_(dropout) {
    self_attn = register_module("self_attn", MultiheadAttention(d, heads, dropout));
    multihead_attn = register_module("multihead_attn", MultiheadAttention(d, heads, dropout));
    linear1 = register_module("linear1", torch::nn::Linear(d, ffn));
    linear2 = register_module("linear2", torch::nn::Linear(ffn, d));
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
    norm3 = register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& tgt, const torch::Tensor& memory,
                                        const torch::Tensor& memoryKeyPaddingMask,
                                        const torch::Tensor& pos, const torch::Tensor& queryPos,
                                        torch::Tensor* crossIn, const torch::Tensor& selfAttnMask) {
    const bool train = is_training();
    auto qk = tgt + queryPos;
    auto x = norm1(tgt + torch::dropout(self_attn->forward(qk, qk, tgt, torch::Tensor(), selfAttnMask), dropout_, train));
    if (crossIn) *crossIn = x;
    auto ca = multihead_attn(x + queryPos, memory + pos, memory, memoryKeyPaddingMask);
    x = norm2(x + torch::dropout(ca, dropout_, train));
    auto ff = linearP(*linear2, torch::dropout(torch::relu(products::linearLow(*linear1, x)), dropout_, train));
    return norm3(x + torch::dropout(ff, dropout_, train));
}

namespace {
// numLayers layers (d, heads, ffn, dropout) into `layers`, registered as owner's "layers.<i>".
template <typename Layer>
void addLayers(torch::nn::Module& owner, std::vector<Layer>& layers, int64_t numLayers, int64_t d, int64_t heads,
               int64_t ffn, double dropout) {
    torch::nn::ModuleList list;
    for (int64_t i = 0; i < numLayers; ++i) {
        layers.emplace_back(d, heads, ffn, dropout);
        list->push_back(layers.back());
    }
    owner.register_module("layers", list);
}
} // namespace

TransformerEncoderImpl::TransformerEncoderImpl(int64_t numLayers, int64_t d, int64_t heads,
                                               int64_t ffn, double dropout) {
    addLayers(*this, layerList, numLayers, d, heads, ffn, dropout);
}

torch::Tensor TransformerEncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& pos,
                                              const torch::Tensor& keyPaddingMask) {
    auto x = src;
    for (auto& layer : layerList) x = layer(x, pos, keyPaddingMask);
    return x;
}

TransformerDecoderImpl::TransformerDecoderImpl(int64_t numLayers, int64_t d, int64_t heads,
                                               int64_t ffn, double dropout) {
    addLayers(*this, layerList, numLayers, d, heads, ffn, dropout);
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5)));
}

TransformerImpl::TransformerImpl(int64_t encLayers, int64_t decLayers, int64_t d, int64_t heads,
                                 int64_t ffn, double dropout) {
    encoder = register_module("encoder", TransformerEncoder(encLayers, d, heads, ffn, dropout));
    decoder = register_module("decoder", TransformerDecoder(decLayers, d, heads, ffn, dropout));
}

MLPImpl::MLPImpl(int64_t in, int64_t hidden, int64_t out, int64_t numLayers) {
    torch::nn::ModuleList list;
    for (int64_t i = 0; i < numLayers; ++i) {
        const int64_t a = i == 0 ? in : hidden;
        const int64_t b = i == numLayers - 1 ? out : hidden;
        layerList.emplace_back(a, b);
        list->push_back(layerList.back());
    }
    register_module("layers", list);
}

torch::Tensor MLPImpl::forward(torch::Tensor x) {
    for (size_t i = 0; i < layerList.size(); ++i) {
        x = layerList[i](x);
        if (i + 1 < layerList.size()) x = torch::relu(x);
    }
    return x;
}

torch::Tensor sinePositionEncoding(const torch::Tensor& mask, int64_t numPosFeats, double temperature) {
    if (mask.dim() != 3 || mask.scalar_type() != torch::kBool)
        throw Error("sinePositionEncoding: mask must be a [B, h, w] bool tensor");
    const double scale = 2.0 * M_PI, eps = 1e-6;
    auto opts = torch::TensorOptions().dtype(torch::kFloat).device(mask.device());
    auto notMask = mask.logical_not();
    auto y = notMask.cumsum(1, torch::kFloat);
    auto x = notMask.cumsum(2, torch::kFloat);
    y = y / (y.narrow(1, y.size(1) - 1, 1) + eps) * scale;
    x = x / (x.narrow(2, x.size(2) - 1, 1) + eps) * scale;
    auto i = torch::arange(numPosFeats, opts);
    auto dimT = torch::pow(temperature, torch::floor(i / 2) * 2 / double(numPosFeats));
    auto px = x.unsqueeze(-1) / dimT;   // [B, h, w, F]
    auto py = y.unsqueeze(-1) / dimT;
    auto interleave = [&](const torch::Tensor& p) {
        return torch::stack({p.slice(3, 0, numPosFeats, 2).sin(), p.slice(3, 1, numPosFeats, 2).cos()}, 4)
            .flatten(3);
    };
    return torch::cat({interleave(py), interleave(px)}, 3).permute({0, 3, 1, 2});
}

// ---- LetrModel ------------------------------------------------------------------------------

LetrModel::LetrModel(const LetrConfig& config, uint64_t seed) : config_(config) {
    config_.validate();
    auto backbone = register_module("backbone", std::make_shared<torch::nn::Module>());
    auto zero = backbone->register_module("0", std::make_shared<torch::nn::Module>());
    if (config_.backbone == "mlsd_tiny")
        mlsdBody_ = zero->register_module("body", MlsdBody());
    else
        body_ = zero->register_module("body", ResNetBody(config_.backbone));

    auto letr = register_module("letr", std::make_shared<torch::nn::Module>());
    buildStage(*letr, coarse_, config_.coarseLevel);
    queryEmbed_ = letr->register_module(
        "query_embed", torch::nn::Embedding(config_.numQueries, config_.hiddenDim));
    if (config_.coarseAnchors)
        queryAnchor_ = letr->register_parameter("query_anchor", torch::empty({config_.numQueries, 4}));
    if (config_.lineQueries())
        anchorEncoder_ = letr->register_module("anchor_encoder", std::make_shared<LineQueryEncoderImpl>(config_.hiddenDim, seed));
    if (config_.fineStage) buildStage(*this, fine_, config_.fineLevel);
    if (config_.coarseProposals) {
        // M-LSD's decoder, frozen: never trained, always in evaluation mode (train() below).
        proposalNet_ = register_module("proposal", mlsd::MlsdDecoder());
        for (auto& p : proposalNet_->parameters()) p.set_requires_grad(false);
        proposalNet_->eval();
    }
    resetParameters(seed);
}

void LetrModel::train(bool on) {
    torch::nn::Module::train(on);
    if (proposalNet_) proposalNet_->eval();
}

torch::Tensor LetrModel::proposals(const std::vector<torch::Tensor>& feats, int64_t height, int64_t width) {
    if (!proposalNet_) throw Error("LETR: this model has no proposal decoder (coarse_queries \"proposals\")");
    torch::NoGradGuard noGrad;
    mlsd::MlsdFeatures f{feats.at(0).detach(), feats.at(1).detach(), feats.at(2).detach()};
    const torch::Tensor maps = proposalNet_->forward(f);
    const mlsd::MlsdCandidates c = mlsd::topCandidates(maps, config_.numQueries, 3);
    // Input pixels (map pixels x 2) -> normalized (x1, y1, x2, y2) / (W, H, W, H); kept inside
    // the image (a line may overshoot it), within the clamp of the heads' logit (1e-5), so that
    // a zero correction returns the proposal itself.
    const double W = double(width), H = double(height);
    const torch::Tensor scale = torch::tensor({W, H, W, H}, maps.options().dtype(torch::kFloat));
    return (c.lines / scale).clamp(1e-5, 1.0 - 1e-5);
}

void LetrModel::buildStage(torch::nn::Module& parent, StageModules& s, int level) {
    const auto& c = config_;
    const bool coarse = &s == &coarse_;
    s.level = level;
    s.inputProj = parent.register_module(
        "input_proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(c.levelChannels(level), c.hiddenDim, 1)));
    s.transformer = parent.register_module(
        "transformer",
        Transformer(coarse ? c.coarseEncLayers : c.fineEncLayers, coarse ? c.coarseDecLayers : c.fineDecLayers,
                    c.hiddenDim, c.nheads, c.dimFeedforward, c.dropout));
    s.classEmbed = parent.register_module("class_embed", torch::nn::Linear(c.hiddenDim, c.numClasses + 1));
    s.linesEmbed = parent.register_module("lines_embed", MLP(c.hiddenDim, c.hiddenDim, 4, 3));
}

torch::Device LetrModel::device() const { return queryEmbed_->weight.device(); }

torch::Tensor LetrModel::queryAnchors() const {
    return queryAnchor_.defined() ? queryAnchor_.detach().sigmoid() : torch::Tensor();
}

void LetrModel::setResize(int64_t shortSide, int64_t maxLongSide) {
    LetrConfig c = config_;
    c.shortSide = shortSide;
    c.maxLongSide = maxLongSide;
    c.validate();
    config_ = c;
}

void LetrModel::setScoreThreshold(double t) {
    LetrConfig c = config_;
    c.scoreThreshold = t;
    c.validate();
    config_ = c;
}

const LetrModel::StageModules& LetrModel::stageModules(Stage s) const {
    if (s == Stage::Fine && !config_.fineStage)
        throw Error("LETR: this model has no fine stage (config stages = \"coarse\")");
    return s == Stage::Coarse ? coarse_ : fine_;
}

int LetrModel::numDecoderLayers(Stage s) const {
    return int(stageModules(s).transformer->decoder->layerList.size());
}

DecoderLayer LetrModel::decoderLayer(Stage s, int layer) const {
    const auto& list = stageModules(s).transformer->decoder->layerList;
    if (layer < 0 || size_t(layer) >= list.size())
        throw Error("LETR: " + std::string(stageName(s)) + " decoder layer " + std::to_string(layer) +
                    " out of range 0.." + std::to_string(int(list.size()) - 1));
    return list[size_t(layer)];
}

EncoderLayer LetrModel::encoderLayer(Stage s, int layer) const {
    const auto& list = stageModules(s).transformer->encoder->layerList;
    if (layer < 0 || size_t(layer) >= list.size())
        throw Error("LETR: " + std::string(stageName(s)) + " encoder layer " + std::to_string(layer) +
                    " out of range 0.." + std::to_string(int(list.size()) - 1));
    return list[size_t(layer)];
}

void LetrModel::setTrainBackboneBn(bool on) {
    for (auto& m : modules(false))
        if (auto* bn = dynamic_cast<FrozenBatchNorm2dImpl*>(m.get())) bn->trainStats = on;
}

void LetrModel::setCaptureAttention(bool on) {
    for (auto& m : modules(false)) {
        if (auto* a = dynamic_cast<MultiheadAttentionImpl*>(m.get())) {
            a->captureWeights = on;
            if (!on) a->capturedWeights = torch::Tensor();
        }
    }
}

namespace {
bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
} // namespace

void LetrModel::resetParameters(uint64_t seed) {
    torch::NoGradGuard noGrad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    auto params = named_parameters(true);
    // PyTorch's default Linear/Conv init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
    auto fanIn = [](const torch::Tensor& w) { return double(w.numel() / std::max<int64_t>(w.size(0), 1)); };
    for (const auto& item : params) {
        const std::string& name = item.key();
        const torch::Tensor& p = item.value();
        auto v = torch::empty(p.sizes(), torch::kFloat);
        const bool transformer = contains(name, "transformer.");
        if (name.rfind("backbone.", 0) == 0 && p.dim() == 1) {
            // Batch-norm affine: torchvision's weight 1, bias 0.
            v.fill_(endsWith(name, ".weight") ? 1.0 : 0.0);
        } else if (name.rfind("backbone.", 0) == 0) {
            // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu") on convs.
            const double fanOut = double(p.size(0) * p.size(2) * p.size(3));
            v.normal_(0.0, std::sqrt(2.0 / fanOut), gen);
        } else if (endsWith(name, "query_embed.weight")) {
            v.normal_(0.0, 1.0, gen);
        } else if (endsWith(name, "query_anchor")) {
            // Anchor lines spread over the image: centre U(0.1, 0.9)^2, direction U(0, pi),
            // half length U(0.05, 0.2) (normalized units), endpoints kept inside [0.01, 0.99];
            // stored as logits.
            const int64_t n = p.size(0);
            auto centre = torch::empty({n, 2}).uniform_(0.1, 0.9, gen);
            auto angle = torch::empty({n}).uniform_(0.0, M_PI, gen);
            auto half = torch::empty({n}).uniform_(0.05, 0.2, gen);
            auto dir = torch::stack({angle.cos() * half, angle.sin() * half}, 1);
            v.copy_(torch::cat({centre - dir, centre + dir}, 1).clamp(0.01, 0.99).logit());
        } else if (transformer && p.dim() > 1) {
            // DETR: xavier_uniform_ on every transformer matrix.
            const double bound = std::sqrt(6.0 / double(p.size(0) + p.size(1)));
            v.uniform_(-bound, bound, gen);
        } else if (transformer && (endsWith(name, "in_proj_bias") || endsWith(name, "out_proj.bias") ||
                                   (contains(name, ".norm") && endsWith(name, ".bias")))) {
            v.zero_();
        } else if (transformer && contains(name, ".norm") && endsWith(name, ".weight")) {
            v.fill_(1.0);
        } else if (endsWith(name, ".weight")) {
            const double bound = 1.0 / std::sqrt(fanIn(p));
            v.uniform_(-bound, bound, gen);
        } else if (endsWith(name, ".bias")) {
            const std::string wname = name.substr(0, name.size() - 4) + "weight";
            const torch::Tensor* w = params.find(wname);
            if (!w) throw Error("LETR init: no weight for bias " + name);
            const double bound = 1.0 / std::sqrt(fanIn(*w));
            v.uniform_(-bound, bound, gen);
        } else {
            throw Error("LETR init: no rule for parameter " + name);
        }
        p.copy_(v);
    }
    // Proposal queries start exactly at their proposals: the head's last layer is zero, so every
    // coarse layer's line is its reference line until training moves it.
    if (config_.coarseProposals)
        for (const auto& item : params)
            if (item.key().rfind("letr.lines_embed.layers.2.", 0) == 0) item.value().zero_();
    for (const auto& item : named_buffers(true)) {
        const std::string& name = item.key();
        const torch::Tensor& b = item.value();
        if (endsWith(name, "running_var") || endsWith(name, ".weight")) b.fill_(1.0);
        else b.zero_();
    }
}

LetrImage LetrModel::preprocess(const cv::Mat& rgb, int64_t shortSide, int64_t maxLongSide) const {
    if (rgb.empty()) throw Error("LETR: the input image is empty");
    if (rgb.type() != CV_8UC3)
        throw Error("LETR: expected an 8-bit 3-channel RGB image (CV_8UC3), got OpenCV type " +
                    std::to_string(rgb.type()) + " with " + std::to_string(rgb.channels()) + " channels");
    const int64_t pixels = int64_t(rgb.rows) * int64_t(rgb.cols);
    if (pixels > config_.maxInputPixels)
        throw Error("LETR: image of " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                    " pixels is larger than the limit of " + std::to_string(config_.maxInputPixels) +
                    " pixels (max_input_pixels)");
    LetrConfig sizing = config_;
    if (shortSide > 0 || maxLongSide > 0) {
        if (shortSide > 0) sizing.shortSide = shortSide;
        if (maxLongSide > 0) sizing.maxLongSide = maxLongSide;
        if (sizing.shortSide < 16 || sizing.shortSide > 8192 || sizing.maxLongSide < sizing.shortSide ||
            sizing.maxLongSide > 8192)
            throw Error("LETR: input size short side " + std::to_string(sizing.shortSide) + ", long side at most " +
                        std::to_string(sizing.maxLongSide) + ": expected 16..8192, the long side at least the short");
    }
    const auto size = sizing.resizedSize(rgb.rows, rgb.cols);
    LetrImage img;
    img.originalHeight = rgb.rows;
    img.originalWidth = rgb.cols;
    if (size[0] == rgb.rows && size[1] == rgb.cols) {
        img.resized = rgb.clone();
    } else {
        const bool shrink = size[0] * size[1] < pixels;
        cv::resize(rgb, img.resized, cv::Size(int(size[1]), int(size[0])), 0, 0,
                   shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    }
    if (!img.resized.isContinuous()) img.resized = img.resized.clone();
    auto mean = torch::tensor({config_.mean[0], config_.mean[1], config_.mean[2]}, torch::kFloat).view({3, 1, 1});
    auto stdv = torch::tensor({config_.std[0], config_.std[1], config_.std[2]}, torch::kFloat).view({3, 1, 1});
    auto raw = torch::from_blob(img.resized.data, {size[0], size[1], 3}, torch::kUInt8);
    img.tensor = ((raw.permute({2, 0, 1}).to(torch::kFloat) / 255.0) - mean) / stdv;
    img.tensor = img.tensor.contiguous();
    return img;
}

namespace {

struct StageTimer {
    bool on;
    torch::Device device;
    std::chrono::steady_clock::time_point t0;
    StageTimer(bool on_, torch::Device d) : on(on_), device(d) { restart(); }
    void restart() {
        if (!on) return;
        if (device.is_cuda()) torch::cuda::synchronize();
        t0 = std::chrono::steady_clock::now();
    }
    double lap() {   // ms since the last lap/restart
        if (!on) return 0.0;
        if (device.is_cuda()) torch::cuda::synchronize();
        auto t1 = std::chrono::steady_clock::now();
        double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        t0 = t1;
        return ms;
    }
};

// The decoders' self-attention mask over [N learned | G * N groups | Q denoising] entities
// (true: may not attend); undefined when there are only the learned ones.
torch::Tensor entityMask(int64_t N, int64_t groupEntities, int64_t Q) {
    if (groupEntities == 0 && Q == 0) return {};
    const int64_t T = N + groupEntities + Q;
    auto m = torch::ones({T, T}, torch::kBool);
    m.narrow(0, 0, N).narrow(1, 0, N).fill_(false);
    for (int64_t g = N; g < N + groupEntities; g += N) m.narrow(0, g, N).narrow(1, g, N).fill_(false);
    if (Q > 0) {
        auto dn = m.narrow(0, N + groupEntities, Q);
        dn.narrow(1, 0, N).fill_(false);
        dn.narrow(1, N + groupEntities, Q).fill_(false);
    }
    return m;
}
} // namespace

void LetrModel::runStage(StageModules& s, const std::vector<torch::Tensor>& feats,
                         const torch::Tensor& queryPos, bool record, LetrStageOutput& out,
                         const torch::Tensor& extraQueryPos, const torch::Tensor& groupQueryPos,
                         const torch::Tensor& queryContent) {
    const int64_t B = int64_t(feats.size());
    const int64_t C = feats[0].size(0);
    int64_t h = 0, w = 0;
    for (const auto& f : feats) {
        h = std::max(h, f.size(1));
        w = std::max(w, f.size(2));
    }
    auto padded = torch::zeros({B, C, h, w}, feats[0].options());
    auto mask = torch::ones({B, h, w}, feats[0].options().dtype(torch::kBool));
    out.validSizes.clear();
    for (int64_t b = 0; b < B; ++b) {
        const int64_t fh = feats[size_t(b)].size(1), fw = feats[size_t(b)].size(2);
        padded[b].narrow(1, 0, fh).narrow(2, 0, fw).copy_(feats[size_t(b)]);
        mask[b].narrow(0, 0, fh).narrow(1, 0, fw).fill_(false);
        out.validSizes.push_back({fh, fw});
    }
    const int64_t d = config_.hiddenDim;
    out.level = s.level;
    out.height = h;
    out.width = w;
    out.mask = mask;
    auto src = s.inputProj(padded).flatten(2).transpose(1, 2);                         // [B, S, d]
    out.pos = sinePositionEncoding(mask, d / 2).flatten(2).transpose(1, 2).contiguous();   // [B, S, d]
    auto keyMask = mask.flatten(1);
    if (&s == &coarse_ ? config_.posInValuesCoarse : config_.posInValuesFine)
        src = src + out.pos.to(src.scalar_type());
    out.memory = s.transformer->encoder(src, out.pos, keyMask);
    out.queryPos = queryPos;
    // Extra entities (training) after the N learned ones; the learned ones may not see them.
    const int64_t N = queryPos.size(1);
    auto extra = [&](const torch::Tensor& t, const char* what) {
        if (!t.defined()) return int64_t(0);
        if (t.dim() != 3 || t.size(0) != B || t.size(2) != d)
            throw Error(std::string("LETR: ") + what + " must be [B, Q, hidden_dim]");
        return t.size(1);
    };
    const int64_t G = extra(groupQueryPos, "query groups"), Q = extra(extraQueryPos, "denoising queries");
    if (G % N != 0) throw Error("LETR: query groups must hold a multiple of the model's entities");
    std::vector<torch::Tensor> parts{queryPos};
    if (G) parts.push_back(groupQueryPos.to(queryPos.device(), queryPos.scalar_type()));
    if (Q) parts.push_back(extraQueryPos.to(queryPos.device(), queryPos.scalar_type()));
    const torch::Tensor allPos = parts.size() == 1 ? queryPos : torch::cat(parts, 1);
    const torch::Tensor selfMask = entityMask(N, G, Q);
    auto tgt = torch::zeros_like(allPos);
    if (queryContent.defined()) tgt = torch::cat({queryContent.to(allPos.scalar_type()), tgt.narrow(1, N, tgt.size(1) - N)}, 1);
    auto& dec = s.transformer->decoder;
    std::vector<torch::Tensor> hs;
    out.selfIn.clear();
    out.crossIn.clear();
    for (auto& layer : dec->layerList) {
        torch::Tensor crossIn;
        if (record) out.selfIn.push_back(tgt.narrow(1, 0, N));
        tgt = layer(tgt, out.memory, keyMask, out.pos, allPos, record ? &crossIn : nullptr, selfMask);
        if (record) out.crossIn.push_back(crossIn.narrow(1, 0, N));
        hs.push_back(dec->norm(tgt));
    }
    auto all = torch::stack(hs, 0);
    out.hs = parts.size() == 1 ? all : all.narrow(2, 0, N);
    if (G) out.groupHs = all.narrow(2, N, G);
    if (Q) out.dnHs = all.narrow(2, N + G, Q);
}

namespace {
// Lines from the head's output [L, B, N, 4]: sigmoid of it, or of it plus the logit of a
// reference line [B, N, 4] shared by every layer (LibTorch's logit, clamped to [1e-5, 1 - 1e-5] so that
// a saturated reference stays finite).
torch::Tensor headLines(const torch::Tensor& raw, const torch::Tensor& reference) {
    if (!reference.defined()) return raw.sigmoid();
    return (raw + reference.detach().to(raw.scalar_type()).logit(1e-5).unsqueeze(0)).sigmoid();
}
} // namespace

void LetrModel::runHeads(StageModules& s, LetrStageOutput& out, const HeadReferences& refs) {
    out.logits = s.classEmbed(out.hs);
    if (refs.anchorLogits.defined())   // anchor queries: the anchors learn through this sum too
        out.lines = (s.linesEmbed(out.hs) + refs.anchorLogits.to(out.hs.scalar_type())).sigmoid();
    else
        out.lines = headLines(s.linesEmbed(out.hs), refs.lines);
    if (out.dnHs.defined()) {
        out.dnLogits = s.classEmbed(out.dnHs);
        out.dnLines = headLines(s.linesEmbed(out.dnHs), refs.denoiseLines);
    }
    if (out.groupHs.defined()) {
        out.groupLogits = s.classEmbed(out.groupHs);
        out.groupLines = headLines(s.linesEmbed(out.groupHs), refs.groupLines);
    }
}

LetrOutput LetrModel::forward(const std::vector<torch::Tensor>& images, const LetrForwardOptions& opts) {
    if (images.empty()) throw Error("LETR: forward() needs at least one image");
    const torch::Device dev = device();
    LetrOutput out;
    for (size_t i = 0; i < images.size(); ++i) {
        const auto& t = images[i];
        if (!t.defined() || t.dim() != 3 || t.size(0) != 3)
            throw Error("LETR: image " + std::to_string(i) + " must be a [3, H, W] tensor");
        const int64_t H = t.size(1), W = t.size(2);
        if (H < 1 || W < 1 || H > 16384 || W > 16384 || H * W > (int64_t(1) << 26))
            throw Error("LETR: image " + std::to_string(i) + " has an unsupported size " +
                        std::to_string(W) + "x" + std::to_string(H) +
                        " (each side 1..16384 and at most 2^26 pixels after resizing)");
        out.inputSizes.push_back({H, W});
    }
    StageTimer timer(opts.time, dev);
    if (opts.transformerDtype != torch::kFloat && opts.transformerDtype != torch::kBFloat16)
        throw Error("LETR: transformer products in float32 or bfloat16 only");
    ProductDtypeGuard products(opts.transformerDtype);

    // Backbone: one batch per distinct input size, so every image sees exactly what a
    // single-image run would see (no padded pixels inside its receptive fields).
    const bool runFine = config_.fineStage && !opts.coarseOnly;
    const int maxLevel = std::max(coarse_.level, runFine ? fine_.level : 2);
    std::map<std::array<int64_t, 2>, std::vector<size_t>> groups;
    for (size_t i = 0; i < images.size(); ++i) groups[out.inputSizes[i]].push_back(i);
    std::vector<std::vector<torch::Tensor>> levels(images.size());   // per image: C2..C(maxLevel)
    std::vector<torch::Tensor> proposalLines(images.size());          // per image [N, 4] (proposal queries)
    for (const auto& g : groups) {
        std::vector<torch::Tensor> batch;
        for (size_t i : g.second) batch.push_back(images[i].to(dev, torch::kFloat));
        auto feats = mlsdBody_ ? mlsdBody_->forward(torch::stack(batch, 0), maxLevel)
                               : body_->forward(torch::stack(batch, 0), maxLevel, opts.backboneDtype, opts.backboneChannelsLast);
        const torch::Tensor prop = proposalNet_ ? proposals(feats, g.first[0], g.first[1]) : torch::Tensor();
        for (size_t j = 0; j < g.second.size(); ++j) {
            for (auto& f : feats) levels[g.second[j]].push_back(f[int64_t(j)]);
            if (prop.defined()) proposalLines[g.second[j]] = prop[int64_t(j)];
        }
    }
    auto levelFeats = [&](int level) {
        std::vector<torch::Tensor> v;
        for (auto& l : levels) v.push_back(l[size_t(level - 2)]);
        return v;
    };
    out.timings.backbone = timer.lap();
    if (opts.keepFeatures) out.features = levels;

    const int64_t B = int64_t(images.size());
    const int64_t N = config_.numQueries, d = config_.hiddenDim;
    out.stages.resize(runFine ? 2 : 1);
    torch::Tensor groupPos;   // [B, G * N, d]
    if (opts.groupQueryEmbed.defined()) {
        const auto& g = opts.groupQueryEmbed;
        if (g.dim() != 3 || g.size(1) != N || g.size(2) != d)
            throw Error("LETR: query groups must be [G, num_queries, hidden_dim]");
        groupPos = g.to(dev).reshape({1, -1, d}).expand({B, g.size(0) * N, d});
    }
    HeadReferences coarseRefs;
    if (config_.lineQueries()) {
        // Anchor queries: positional queries from the anchors' lines, query_embed as content;
        // the denoising entities' positional queries from their noised lines, by the same encoder.
        if (opts.denoiseQueryPos.defined())
            throw Error("LETR: a model with anchor queries takes denoising entities as lines (denoiseReference)");
        if (groupPos.defined()) throw Error("LETR: query groups are not supported with anchor queries");
        torch::Tensor dnPos;
        if (opts.denoiseReference.defined()) {
            const auto& r = opts.denoiseReference;
            if (r.dim() != 3 || r.size(0) != B || r.size(2) != 4)
                throw Error("LETR: denoising reference lines must be [B, Q, 4]");
            coarseRefs.denoiseLines = r.to(dev, torch::kFloat);
            dnPos = anchorEncoder_->forward(coarseRefs.denoiseLines);
        }
        // The reference lines: the learned anchors (shared by every image, trained through the
        // lines) or the image's own proposals (constants).
        const torch::Tensor ref = proposalNet_ ? torch::stack(proposalLines, 0) : queryAnchor_.sigmoid().unsqueeze(0);
        const torch::Tensor anchorPos = anchorEncoder_->forward(ref);   // [1 or B, N, d]
        runStage(coarse_, levelFeats(coarse_.level), anchorPos.expand({B, N, d}), opts.record, out.stages[0], dnPos,
                 {}, queryEmbed_->weight.unsqueeze(0).expand({B, N, d}));
        out.stages[0].anchors = ref.detach().expand({B, N, 4});
        if (proposalNet_) coarseRefs.lines = out.stages[0].anchors;
        else coarseRefs.anchorLogits = queryAnchor_;
    } else {
        if (opts.denoiseReference.defined())
            throw Error("LETR: denoising reference lines need a model with anchor or proposal queries (coarse_queries)");
        runStage(coarse_, levelFeats(coarse_.level), queryEmbed_->weight.unsqueeze(0).expand({B, N, d}),
                 opts.record, out.stages[0], opts.denoiseQueryPos, groupPos);
    }
    out.timings.coarse = timer.lap();
    runHeads(coarse_, out.stages[0], coarseRefs);
    out.timings.heads = timer.lap();
    if (runFine) {
        const auto& c = out.stages[0];
        auto qp = c.hs[c.hs.size(0) - 1];
        runStage(fine_, levelFeats(fine_.level), qp, opts.record, out.stages[1], {},
                 c.groupHs.defined() ? c.groupHs[c.groupHs.size(0) - 1] : torch::Tensor());
        out.timings.fine = timer.lap();
        // fine_lines "refine": every fine layer corrects the coarse stage's last-layer line of
        // its entity (the entity whose decoder output is its positional query).
        const bool refine = config_.fineRefinesCoarse;
        HeadReferences fineRefs;
        if (refine) fineRefs.lines = c.lines[c.lines.size(0) - 1];
        if (refine && c.groupLines.defined()) fineRefs.groupLines = c.groupLines[c.groupLines.size(0) - 1];
        runHeads(fine_, out.stages[1], fineRefs);
        out.timings.heads += timer.lap();
    }
    return out;
}

// ---- checkpoints ----------------------------------------------------------------------------

namespace {
// The model inside a trainer checkpoint (core/train/state.h layout: meta JSON {"config":
// {"model": LetrConfig, ...}, "phase": ...}, tensors "model.<name>" and "optim.<key>").
std::shared_ptr<LetrModel> loadLetrTrainState(Checkpoint ckpt, const std::string& path) {
    const nlohmann::json meta = parseJsonText(ckpt.configJson, path, "training state");
    if (!meta.is_object() || !meta.contains("config") || !meta["config"].is_object() ||
        !meta["config"].contains("model") || !meta["config"]["model"].is_object())
        throw Error(path + ": LETR training checkpoint has no model config (config.model)");
    LetrConfig cfg = LetrConfig::fromJson(meta["config"]["model"], path + " (training config model)");
    const bool coarsePhase = meta.value("phase", std::string()) == "coarse";
    if (coarsePhase) cfg.fineStage = false;
    Checkpoint model;
    model.family = "letr";
    model.formatVersion = ckpt.formatVersion;
    for (auto& [name, t] : ckpt.tensors) {
        if (name.rfind("model.", 0) != 0) continue;
        const std::string n = name.substr(6);
        // Coarse phase: the fine stage's tensors (top-level transformer/heads) are dropped.
        if (coarsePhase && n.rfind("backbone.", 0) != 0 && n.rfind("letr.", 0) != 0 && n.rfind("proposal.", 0) != 0)
            continue;
        model.tensors[n] = t;
    }
    auto m = std::make_shared<LetrModel>(cfg, 0);
    applyCheckpoint(model, *m, "letr", path);
    m->eval();
    return m;
}
} // namespace

std::shared_ptr<LetrModel> loadLetr(const std::string& path) {
    Checkpoint ckpt = loadModelCheckpoint(path, "convert_letr.py", "letr.h5");
    if (ckpt.family == "letr-train") return loadLetrTrainState(std::move(ckpt), path);
    if (ckpt.family != "letr")
        throw Error(path + ": checkpoint family is '" + ckpt.family + "', expected 'letr' (or 'letr-train')");
    const LetrConfig cfg = LetrConfig::fromJsonString(ckpt.configJson, path + " (/meta config)");
    auto model = std::make_shared<LetrModel>(cfg, 0);
    applyCheckpoint(ckpt, *model, "letr", path);
    model->eval();
    return model;
}

void saveLetr(const LetrModel& model, const std::string& path) {
    saveCheckpoint(path, checkpointFromModule(model, "letr", model.config().toJsonString()));
}

namespace {
std::string resnetArch(const Checkpoint& ckpt, const std::string& path) {
    if (ckpt.family != "resnet")
        throw Error(path + ": checkpoint family is '" + ckpt.family + "', expected 'resnet'");
    const nlohmann::json j = parseJsonText(ckpt.configJson, path, "/meta config");
    if (!j.is_object() || !j.contains("arch") || !j["arch"].is_string())
        throw Error(path + ": resnet checkpoint config has no \"arch\" string");
    return j["arch"].get<std::string>();
}
} // namespace

ResNetBody loadResNet(const std::string& path) {
    Checkpoint ckpt = loadCheckpoint(path);
    const std::string arch = resnetArch(ckpt, path);
    LetrConfig probe;
    probe.backbone = arch;
    try {
        probe.blocksPerLayer();
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    ResNetBody body(arch);
    applyCheckpoint(ckpt, *body, "resnet", path);
    body->eval();
    return body;
}

void loadLetrBackbone(LetrModel& model, const std::string& path) {
    if (model.mlsdBody()) {
        const std::shared_ptr<mlsd::MlsdModel> m = mlsd::loadMlsd(path);   // errors name the file
        copyMlsdEncoder(*model.mlsdBody(), *m, path);
        if (model.proposalDecoder()) copyMlsdDecoder(*model.proposalDecoder(), *m, path);
        return;
    }
    Checkpoint ckpt = loadCheckpoint(path);
    const std::string arch = resnetArch(ckpt, path);
    if (arch != model.config().backbone)
        throw Error(path + ": backbone is " + arch + " but the LETR model uses " + model.config().backbone);
    applyCheckpoint(ckpt, *model.body(), "resnet", path);
}

} // namespace glimpse::letr
