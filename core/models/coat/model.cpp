#include "core/models/coat/model.h"

#include <cmath>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/util/products.h"
#include "core/io/checkpoint.h"

namespace glimpse::coat {

namespace {
// The products (CoatForwardOptions::productDtype; core/util/products.h).
using products::ProductDtypeGuard;
torch::Tensor linearP(torch::nn::LinearImpl& l, const torch::Tensor& x) { return products::linear(l, x); }
// The attention's linear layers (qkv, proj) stay float32 under int8 products: with them in int8
// the shipped model's top-1 moved on 60 of 10,000 test images, with the MLPs' alone on 10
// (docs/performance.md), for about 10% of int8's gain.
torch::Tensor linearAttn(torch::nn::LinearImpl& l, const torch::Tensor& x) {
    if (products::productDtype() == torch::kQInt8) return torch::linear(x, l.weight, l.bias);
    return products::linear(l, x);
}

// matmul of [..., n, k] x [..., k, m] with equal leading dimensions: on the CPU without gradients
// as one batched product (products::bmm: a BLAS product per entry, or bfloat16 through oneDNN).
// With gradients (a Grad-CAM) under low-precision products, both operands take the products'
// dtype as products::bmm gives them (q, k and v may already be in it).
torch::Tensor matmulP(const torch::Tensor& a, const torch::Tensor& b) {
    if (!a.is_cpu() || a.dim() < 3 || a.sizes().slice(0, a.dim() - 2) != b.sizes().slice(0, b.dim() - 2) ||
        (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad()))) {
        if (!products::lowPrecision(a)) return torch::matmul(a, b);
        const auto t = products::productDtype();
        return torch::matmul(a.to(t), b.to(t)).to(torch::kFloat);
    }
    auto lead = a.sizes().slice(0, a.dim() - 2).vec();
    const auto out = products::bmm(a.reshape({-1, a.size(-2), a.size(-1)}), b.reshape({-1, b.size(-2), b.size(-1)}));
    lead.push_back(a.size(-2));
    lead.push_back(b.size(-1));
    return out.view(lead);
}
} // namespace

namespace F = torch::nn::functional;

namespace {

constexpr double kBlockEps = 1e-6;   // LayerNorm eps in blocks and final norms
constexpr double kEmbedEps = 1e-5;   // LayerNorm eps in patch embeddings

torch::nn::LayerNorm layerNorm(int64_t dim, double eps) {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps));
}

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// [B, heads, 1+h*w, C] image tokens -> [B, heads*C, h, w]
torch::Tensor imageChannels(const torch::Tensor& t, Grid g) {
    const int64_t B = t.size(0), H = t.size(1), C = t.size(3);
    return t.narrow(2, 1, g[0] * g[1]).transpose(-1, -2).reshape({B, H * C, g[0], g[1]});
}

} // namespace

// ---- building blocks ------------------------------------------------------------------------

PatchEmbedImpl::PatchEmbedImpl(int64_t in, int64_t dim, int64_t patch) {
    proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, dim, patch).stride(patch)));
    norm = register_module("norm", layerNorm(dim, kEmbedEps));
}

torch::Tensor PatchEmbedImpl::forward(const torch::Tensor& x, Grid& grid) {
    auto y = proj(x);   // [B, dim, h, w]
    grid = {y.size(2), y.size(3)};
    return norm(y.flatten(2).transpose(1, 2));
}

ConvPosEncImpl::ConvPosEncImpl(int64_t dim, int64_t k) {
    proj = register_module("proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, k).padding(k / 2).groups(dim)));
}

torch::Tensor ConvPosEncImpl::forward(const torch::Tensor& x, Grid g) {
    const int64_t B = x.size(0), C = x.size(2);
    auto cls = x.narrow(1, 0, 1);
    auto feat = x.narrow(1, 1, g[0] * g[1]).transpose(1, 2).reshape({B, C, g[0], g[1]});
    auto y = (proj(feat) + feat).flatten(2).transpose(1, 2);
    return torch::cat({cls, y}, 1);
}

ConvRelPosEncImpl::ConvRelPosEncImpl(int64_t headDim_, const std::vector<std::pair<int64_t, int64_t>>& window)
    : headDim(headDim_) {
    conv_list = register_module("conv_list", torch::nn::ModuleList());
    for (const auto& kw : window) {
        const int64_t ch = kw.second * headDim;
        torch::nn::Conv2d conv(torch::nn::Conv2dOptions(ch, ch, kw.first).padding(kw.first / 2).groups(ch));
        conv_list->push_back(conv);
        convs.push_back(conv);
        kernels.push_back(kw.first);
        headSplits.push_back(kw.second);
    }
}

torch::Tensor ConvRelPosEncImpl::convV(const torch::Tensor& v, Grid g) {
    const int64_t B = v.size(0), H = v.size(1), C = v.size(3);
    auto img = imageChannels(v, g).to(torch::kFloat);   // [B, H*C, h, w]
    std::vector<torch::Tensor> parts;
    int64_t off = 0;
    for (size_t i = 0; i < convs.size(); ++i) {
        const int64_t ch = headSplits[i] * headDim;
        parts.push_back(convs[i](img.narrow(1, off, ch)));
        off += ch;
    }
    return torch::cat(parts, 1).reshape({B, H, C, g[0] * g[1]}).transpose(-1, -2);
}

torch::Tensor ConvRelPosEncImpl::forward(const torch::Tensor& q, const torch::Tensor& v, Grid g) {
    auto ev = q.narrow(2, 1, g[0] * g[1]) * convV(v, g);
    return F::pad(ev, F::PadFuncOptions({0, 0, 1, 0}));   // zero row for the CLS token
}

FactorAttnConvRelPosEncImpl::FactorAttnConvRelPosEncImpl(int64_t dim, int64_t heads, bool qkvBias)
    : numHeads(heads), headDim(dim / heads), scale(1.0 / std::sqrt(double(dim / heads))) {
    qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(qkvBias)));
    proj = register_module("proj", torch::nn::Linear(dim, dim));
}

std::array<torch::Tensor, 3> FactorAttnConvRelPosEncImpl::qkvSplit(const torch::Tensor& x, bool low) {
    const int64_t B = x.size(0), N = x.size(1);
    auto t = (low ? products::linearLow(*qkv, x) : linearAttn(*qkv, x))
                 .reshape({B, N, 3, numHeads, headDim})
                 .permute({2, 0, 3, 1, 4});
    return {t[0], t[1], t[2]};
}

torch::Tensor FactorAttnConvRelPosEncImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, Grid grid, AttnRecord* rec) {
    if (!rec && products::lowPrecision(q)) return attendLow(q, k, v, grid);
    auto ks = k.softmax(2);                                            // over tokens
    auto factor = matmulP(q, matmulP(ks.transpose(-1, -2), v)) * scale;   // [B,H,N,C]
    torch::Tensor out = factor;
    torch::Tensor cr;
    if (crpe) {
        cr = crpe(q, v, grid);
        out = out + cr;
    }
    if (rec) {
        rec->grid = grid;
        rec->q = q.detach();
        rec->kSoftmax = ks.detach();
        rec->v = v.detach();
        rec->factor = factor.detach();
        rec->crpe = cr.defined() ? cr.detach() : torch::Tensor();
    }
    return out;
}

// The passes over [B, heads, N, C] tensors are what a bfloat16 forward spends its time on here
// (its products are cheap): the softmax runs over the last, contiguous dimension of K^T (the
// layout the first product takes) instead of a strided one, the scale multiplies the small
// [C, C] product instead of the output, and CRPE's term is added into the output in place. The
// order of float32 roundings differs from attend()'s, nothing else.
torch::Tensor FactorAttnConvRelPosEncImpl::attendLow(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& v, Grid grid) {
    const auto ksT = k.transpose(-1, -2).to(torch::kFloat, false, false, torch::MemoryFormat::Contiguous)
                         .softmax(-1);   // [B,H,C,N]: softmax over tokens
    auto out = matmulP(q, matmulP(ksT, v) * scale);                  // [B,H,N,C], a new float32 tensor
    if (crpe) {
        const int64_t n = grid[0] * grid[1];
        out.narrow(2, 1, n).addcmul_(q.narrow(2, 1, n), crpe->convV(v, grid));
    }
    return out;
}

torch::Tensor FactorAttnConvRelPosEncImpl::project(const torch::Tensor& h) {
    const int64_t B = h.size(0), N = h.size(2);
    return linearAttn(*proj, h.transpose(1, 2).reshape({B, N, numHeads * headDim}));
}

torch::Tensor FactorAttnConvRelPosEncImpl::forward(const torch::Tensor& x, Grid grid, AttnRecord* rec) {
    // Without a record under low-precision products, q, k and v stay in that dtype (their product
    // rounded them to it; attendLow reads them in float32 where it needs float32).
    auto qkv3 = qkvSplit(x, rec == nullptr && products::lowPrecision(x));
    return project(attend(qkv3[0], qkv3[1], qkv3[2], grid, rec));
}

MlpImpl::MlpImpl(int64_t dim, int64_t hidden) {
    fc1 = register_module("fc1", torch::nn::Linear(dim, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return linearP(*fc2, F::gelu(products::linearLow(*fc1, x))); }

SerialBlockImpl::SerialBlockImpl(int64_t dim, int64_t heads, double mlpRatio, ConvPosEnc cpe_, ConvRelPosEnc crpe_)
    : cpe(std::move(cpe_)) {
    norm1 = register_module("norm1", layerNorm(dim, kBlockEps));
    factoratt_crpe = register_module("factoratt_crpe", FactorAttnConvRelPosEnc(dim, heads, true));
    factoratt_crpe->crpe = std::move(crpe_);
    norm2 = register_module("norm2", layerNorm(dim, kBlockEps));
    mlp = register_module("mlp", Mlp(dim, int64_t(double(dim) * mlpRatio)));
}

torch::Tensor SerialBlockImpl::forward(const torch::Tensor& xin, Grid grid, AttnRecord* rec) {
    auto x = cpe ? cpe(xin, grid) : xin;
    x = x + factoratt_crpe(norm1(x), grid, rec);
    return x + mlp(norm2(x));
}

torch::Tensor resizeTokens(const torch::Tensor& x, Grid from, Grid to) {
    if (from == to) return x;
    const int64_t B = x.size(0), C = x.size(2);
    auto cls = x.narrow(1, 0, 1);
    auto img = x.narrow(1, 1, from[0] * from[1]).transpose(1, 2).reshape({B, C, from[0], from[1]});
    img = F::interpolate(img, F::InterpolateFuncOptions()
                                  .size(std::vector<int64_t>{to[0], to[1]})
                                  .mode(torch::kBilinear)
                                  .align_corners(false));
    return torch::cat({cls, img.flatten(2).transpose(1, 2)}, 1);
}

namespace {
// [B, H, N, C] per-head tensor with image tokens resized between grids (CLS row kept).
torch::Tensor resizeHeads(const torch::Tensor& t, Grid from, Grid to) {
    if (from == to) return t;
    const int64_t B = t.size(0), H = t.size(1), C = t.size(3);
    auto tokens = t.transpose(1, 2).reshape({B, t.size(2), H * C});
    auto r = resizeTokens(tokens, from, to);
    return r.reshape({B, r.size(1), H, C}).transpose(1, 2);
}
} // namespace

ParallelBlockImpl::ParallelBlockImpl(const std::array<int64_t, 4>& dims, int64_t heads, double mlpRatio,
                                     const std::array<ConvRelPosEnc, 4>& crpes, CoScale mode_)
    : norm1{nullptr, nullptr, nullptr}, norm2{nullptr, nullptr, nullptr}, att{nullptr, nullptr, nullptr},
      mode(mode_) {
    for (int i = 0; i < 3; ++i) {
        const std::string s = std::to_string(i + 2);
        norm1[size_t(i)] = register_module("norm1" + s, layerNorm(dims[size_t(i + 1)], kBlockEps));
    }
    for (int i = 0; i < 3; ++i) {
        const std::string s = std::to_string(i + 2);
        att[size_t(i)] = register_module("factoratt_crpe" + s, FactorAttnConvRelPosEnc(dims[size_t(i + 1)], heads, true));
        att[size_t(i)]->crpe = crpes[size_t(i + 1)];
    }
    for (int i = 0; i < 3; ++i) {
        const std::string s = std::to_string(i + 2);
        norm2[size_t(i)] = register_module("norm2" + s, layerNorm(dims[size_t(i + 1)], kBlockEps));
    }
    mlp = register_module("mlp2", Mlp(dims[1], int64_t(double(dims[1]) * mlpRatio)));
}

std::array<torch::Tensor, 3> ParallelBlockImpl::forward(const std::array<torch::Tensor, 3>& xs,
                                                       const std::array<Grid, 3>& grids,
                                                       std::array<AttnRecord, 3>* recs) {
    std::array<torch::Tensor, 3> cur;
    if (mode == CoScale::FeatureInterpolation) {
        for (size_t i = 0; i < 3; ++i) cur[i] = att[i](norm1[i](xs[i]), grids[i], recs ? &(*recs)[i] : nullptr);
        std::array<torch::Tensor, 3> fused;
        for (size_t i = 0; i < 3; ++i) {
            fused[i] = cur[i];
            for (size_t j = 0; j < 3; ++j)
                if (j != i) fused[i] = fused[i] + resizeTokens(cur[j], grids[j], grids[i]);
        }
        cur = fused;
    } else {
        std::array<std::array<torch::Tensor, 3>, 3> qkv;
        for (size_t i = 0; i < 3; ++i) qkv[i] = att[i]->qkvSplit(norm1[i](xs[i]));
        for (size_t i = 0; i < 3; ++i) {
            AttnRecord* rec = recs ? &(*recs)[i] : nullptr;
            auto h = att[i]->attend(qkv[i][0], qkv[i][1], qkv[i][2], grids[i], rec);
            torch::Tensor cross;
            for (size_t j = 0; j < 3; ++j) {
                if (j == i) continue;
                // Cross-attention: queries of scale i, keys/values of scale j resized to grid i.
                auto k = resizeHeads(qkv[j][1], grids[j], grids[i]);
                auto v = resizeHeads(qkv[j][2], grids[j], grids[i]);
                auto c = matmulP(qkv[i][0], matmulP(k.softmax(2).transpose(-1, -2), v)) * att[i]->scale;
                cross = cross.defined() ? cross + c : c;
            }
            if (rec) rec->cross = cross.detach();
            cur[i] = att[i]->project(h + cross);
        }
    }
    std::array<torch::Tensor, 3> out;
    for (size_t i = 0; i < 3; ++i) {
        auto x = xs[i] + cur[i];
        out[i] = x + mlp(norm2[i](x));
    }
    return out;
}

// ---- the model ------------------------------------------------------------------------------

CoatModel::CoatModel(const CoatConfig& config, uint64_t seed) : config_(config) {
    config_.validate();
    const auto& d = config_.embedDims;
    const int64_t patches[4] = {4, 2, 2, 2};
    for (int s = 0; s < 4; ++s) {
        const std::string n = std::to_string(s + 1);
        patchEmbed_[size_t(s)] = register_module(
            "patch_embed" + n, PatchEmbed(s == 0 ? config_.inChans : d[size_t(s - 1)], d[size_t(s)], patches[s]));
    }
    for (int s = 0; s < 4; ++s)
        cls_[size_t(s)] = register_parameter("cls_token" + std::to_string(s + 1), torch::zeros({1, 1, d[size_t(s)]}));
    if (config_.useCpe)
        for (int s = 0; s < 4; ++s)
            cpe_[size_t(s)] = register_module("cpe" + std::to_string(s + 1), ConvPosEnc(d[size_t(s)], 3));
    if (config_.useCrpe)
        for (int s = 0; s < 4; ++s)
            crpe_[size_t(s)] = register_module("crpe" + std::to_string(s + 1),
                                               ConvRelPosEnc(d[size_t(s)] / config_.numHeads, config_.crpeWindow));
    for (int s = 0; s < 4; ++s) {
        torch::nn::ModuleList list;
        for (int64_t i = 0; i < config_.serialDepths[size_t(s)]; ++i) {
            SerialBlock b(d[size_t(s)], config_.numHeads, config_.mlpRatios[size_t(s)], cpe_[size_t(s)], crpe_[size_t(s)]);
            list->push_back(b);
            serial_[size_t(s)].push_back(b);
        }
        register_module("serial_blocks" + std::to_string(s + 1), list);
    }
    if (config_.parallelDepth > 0) {
        torch::nn::ModuleList list;
        for (int64_t i = 0; i < config_.parallelDepth; ++i) {
            ParallelBlock b(d, config_.numHeads, config_.mlpRatios[1], crpe_, config_.coScale);
            list->push_back(b);
            parallel_.push_back(b);
        }
        register_module("parallel_blocks", list);
        finalNorm_[0] = register_module("norm2", layerNorm(d[1], kBlockEps));
        finalNorm_[1] = register_module("norm3", layerNorm(d[2], kBlockEps));
    }
    finalNorm_[2] = register_module("norm4", layerNorm(d[3], kBlockEps));
    if (config_.parallelDepth > 0)
        aggregate_ = register_module("aggregate", torch::nn::Conv1d(torch::nn::Conv1dOptions(3, 1, 1)));
    head_ = register_module("head", torch::nn::Linear(d[3], config_.numClasses));
    resetParameters(seed);
}

torch::Device CoatModel::device() const { return head_->weight.device(); }

int64_t CoatModel::numParameters() const {
    int64_t n = 0;
    for (const auto& p : parameters(true)) n += p.numel();
    return n;
}

void CoatModel::setClassNames(const std::vector<std::string>& names) {
    if (!names.empty() && int64_t(names.size()) != config_.numClasses)
        throw Error("CoaT: " + std::to_string(names.size()) + " class names given, the model has " +
                    std::to_string(config_.numClasses) + " classes");
    config_.classNames = names;
}

SerialBlock CoatModel::serialBlock(int s, int i) const {
    if (s < 0 || s > 3 || i < 0 || i >= numSerialBlocks(s))
        throw Error("CoaT: no serial block " + std::to_string(i) + " at scale " + std::to_string(s + 1));
    return serial_[size_t(s)][size_t(i)];
}

ParallelBlock CoatModel::parallelBlock(int i) const {
    if (i < 0 || i >= numParallelBlocks()) throw Error("CoaT: no parallel block " + std::to_string(i));
    return parallel_[size_t(i)];
}

void CoatModel::resetParameters(uint64_t seed) {
    torch::NoGradGuard noGrad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    auto params = named_parameters(true);
    auto fanIn = [](const torch::Tensor& w) { return double(w.numel() / std::max<int64_t>(w.size(0), 1)); };
    for (const auto& item : params) {
        const std::string& name = item.key();
        const torch::Tensor& p = item.value();
        auto v = torch::empty(p.sizes(), torch::kFloat);
        const torch::Tensor* w = nullptr;
        if (endsWith(name, ".bias")) w = params.find(name.substr(0, name.size() - 4) + "weight");
        const int64_t wdim = w ? w->dim() : p.dim();   // 1 norm, 2 linear, 3-4 conv
        if (name.rfind("cls_token", 0) == 0) {
            v.normal_(0.0, 0.02, gen);
        } else if (wdim == 1) {
            if (endsWith(name, ".weight")) v.fill_(1.0);
            else v.zero_();
        } else if (wdim >= 3) {
            // PyTorch's default conv init: U(+-1/sqrt(fan_in)) for weight and bias.
            const double bound = 1.0 / std::sqrt(fanIn(w ? *w : p));
            v.uniform_(-bound, bound, gen);
        } else if (endsWith(name, ".weight")) {
            v.normal_(0.0, 0.02, gen);   // timm: trunc_normal_(std=.02) on Linear weights
        } else if (endsWith(name, ".bias")) {
            v.zero_();
        } else {
            throw Error("CoaT init: no rule for parameter " + name);
        }
        p.copy_(v);
    }
}

CoatImage CoatModel::preprocess(const cv::Mat& rgb) const {
    if (rgb.empty()) throw Error("CoaT: the input image is empty");
    if (rgb.type() != CV_8UC3)
        throw Error("CoaT: expected an 8-bit 3-channel RGB image (CV_8UC3), got OpenCV type " +
                    std::to_string(rgb.type()) + " with " + std::to_string(rgb.channels()) + " channels");
    if (config_.inChans != 3) throw Error("CoaT: preprocess() needs a 3-channel model, in_chans is " +
                                          std::to_string(config_.inChans));
    if (int64_t(rgb.rows) * rgb.cols > (int64_t(1) << 28))
        throw Error("CoaT: image of " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                    " pixels is larger than the limit of 2^28 pixels");
    CoatImage img;
    img.originalHeight = rgb.rows;
    img.originalWidth = rgb.cols;
    const int64_t S = config_.imageSize, R = config_.resize;
    // Shorter side -> resize (aspect kept, bicubic as in the reference eval), then center crop.
    const double f = double(R) / double(std::min(rgb.rows, rgb.cols));
    const int rw = std::max<int>(int(S), int(std::lround(rgb.cols * f)));
    const int rh = std::max<int>(int(S), int(std::lround(rgb.rows * f)));
    cv::Mat resized;
    if (rw == rgb.cols && rh == rgb.rows) resized = rgb;
    else cv::resize(rgb, resized, cv::Size(rw, rh), 0, 0, cv::INTER_CUBIC);
    const int x0 = int((rw - S) / 2), y0 = int((rh - S) / 2);
    img.crop = resized(cv::Rect(x0, y0, int(S), int(S))).clone();
    auto mean = torch::tensor({config_.mean[0], config_.mean[1], config_.mean[2]}, torch::kFloat).view({3, 1, 1});
    auto stdv = torch::tensor({config_.std[0], config_.std[1], config_.std[2]}, torch::kFloat).view({3, 1, 1});
    auto raw = torch::from_blob(img.crop.data, {S, S, 3}, torch::kUInt8);
    img.tensor = (((raw.permute({2, 0, 1}).to(torch::kFloat) / 255.0) - mean) / stdv).contiguous();
    return img;
}

CoatOutput CoatModel::forward(const torch::Tensor& images, const CoatForwardOptions& opts) {
    if (!images.defined() || images.dim() != 4 || images.size(1) != config_.inChans)
        throw Error("CoaT: forward() expects images [B, " + std::to_string(config_.inChans) + ", H, W]");
    const int64_t B = images.size(0), H = images.size(2), W = images.size(3);
    if (B < 1 || H < 32 || W < 32 || H > 8192 || W > 8192)
        throw Error("CoaT: unsupported input size " + std::to_string(W) + "x" + std::to_string(H) +
                    " (each side 32..8192, at least one image)");
    if (opts.productDtype != torch::kFloat && opts.productDtype != torch::kBFloat16 &&
        opts.productDtype != torch::kQInt8)
        throw Error("CoaT: products in float32, bfloat16 or int8 (MLP layers) only");
    if (opts.productDtype == torch::kQInt8 && !products::int8Available())
        throw Error("CoaT: this LibTorch has no int8 linear kernels (its oneDNN quantized engine)");
    ProductDtypeGuard products(opts.productDtype);
    CoatOutput out;
    auto x = images.to(device(), torch::kFloat);
    std::array<torch::Tensor, 4> xs;
    auto addRecord = [&](int s, const std::string& name) -> AttnRecord* {
        if (!opts.record) return nullptr;
        out.attention.emplace_back();
        out.attention.back().scale = s;
        out.attention.back().name = name;
        return &out.attention.back();
    };
    const bool lite = parallel_.empty();
    for (int s = 0; s < 4; ++s) {
        Grid g{};
        auto t = patchEmbed_[size_t(s)](x, g);
        out.grids[size_t(s)] = g;
        t = torch::cat({cls_[size_t(s)].expand({B, 1, t.size(2)}), t}, 1);
        const int n = numSerialBlocks(s);
        for (int i = 0; i < n; ++i) {
            if (opts.keepCamTokens && i == n - 1) out.scaleCamTokens[size_t(s)] = t;
            t = serial_[size_t(s)][size_t(i)](t, g, addRecord(s, "serial_blocks" + std::to_string(s + 1) + "." + std::to_string(i)));
        }
        xs[size_t(s)] = t;
        if (s < 3)
            x = t.narrow(1, 1, g[0] * g[1]).transpose(1, 2).reshape({B, t.size(2), g[0], g[1]});
    }
    if (lite) {
        out.camTokens = out.scaleCamTokens[3];
        out.logits = head_(finalNorm_[2](xs[3]).select(1, 0));
        return out;
    }
    std::array<torch::Tensor, 3> p{xs[1], xs[2], xs[3]};
    const std::array<Grid, 3> pg{out.grids[1], out.grids[2], out.grids[3]};
    for (size_t i = 0; i < parallel_.size(); ++i) {
        if (cpe_[1])
            for (size_t k = 0; k < 3; ++k) p[k] = cpe_[k + 1](p[k], pg[k]);
        if (opts.keepCamTokens && i + 1 == parallel_.size())
            for (size_t k = 0; k < 3; ++k) out.scaleCamTokens[k + 1] = p[k];
        std::array<AttnRecord, 3> recs;
        p = parallel_[i](p, pg, opts.record ? &recs : nullptr);
        if (opts.record)
            for (int k = 0; k < 3; ++k) {
                recs[size_t(k)].scale = k + 1;
                recs[size_t(k)].name = "parallel_blocks." + std::to_string(i) + ".s" + std::to_string(k + 2);
                out.attention.push_back(recs[size_t(k)]);
            }
    }
    out.camTokens = out.scaleCamTokens[3];
    std::vector<torch::Tensor> cls;
    for (size_t k = 0; k < 3; ++k) cls.push_back(finalNorm_[k](p[k]).select(1, 0));
    auto stacked = torch::stack(cls, 1);                   // [B, 3, C]
    out.logits = head_(aggregate_(stacked).squeeze(1));    // Conv1d over the 3 CLS tokens
    return out;
}

// ---- checkpoints ----------------------------------------------------------------------------

std::shared_ptr<CoatModel> loadCoat(const std::string& path) {
    Checkpoint ckpt = loadModelCheckpoint(path, "convert_coat.py", "coat.h5");
    if (ckpt.family != "coat")
        throw Error(path + ": checkpoint family is '" + ckpt.family + "', expected 'coat'");
    const CoatConfig cfg = CoatConfig::fromJsonString(ckpt.configJson, path + " (/meta config)");
    auto model = std::make_shared<CoatModel>(cfg, 0);
    applyCheckpoint(ckpt, *model, "coat", path);
    model->eval();
    return model;
}

void saveCoat(const CoatModel& model, const std::string& path) {
    saveCheckpoint(path, checkpointFromModule(model, "coat", model.config().toJsonString()));
}

} // namespace glimpse::coat
