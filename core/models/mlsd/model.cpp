#include "core/models/mlsd/model.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/checkpoint.h"

namespace glimpse::mlsd {

namespace F = torch::nn::functional;

namespace {

torch::nn::BatchNorm2d batchNorm(int64_t c) {
    return torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(c).eps(1e-5));
}

torch::Tensor upsample2(const torch::Tensor& x) {
    return F::interpolate(x, F::InterpolateFuncOptions()
                                 .scale_factor(std::vector<double>{2.0, 2.0})
                                 .mode(torch::kBilinear)
                                 .align_corners(true));
}

} // namespace

// ---- encoder ----------------------------------------------------------------------------------

ConvBnRelu6Impl::ConvBnRelu6Impl(int64_t in, int64_t out, int64_t kernel, int64_t stride_, int64_t groups)
    : stride(stride_) {
    const int64_t pad = stride_ == 2 ? 0 : (kernel - 1) / 2;
    conv = register_module(
        "0", torch::nn::Conv2d(
                 torch::nn::Conv2dOptions(in, out, kernel).stride(stride_).padding(pad).groups(groups).bias(false)));
    bn = register_module("1", batchNorm(out));
}

torch::Tensor ConvBnRelu6Impl::forward(const torch::Tensor& x) {
    // TensorFlow's "same" padding for an even input and stride 2: one row/column at the end.
    const torch::Tensor in = stride == 2 ? F::pad(x, F::PadFuncOptions({0, 1, 0, 1})) : x;
    return torch::clamp(bn(conv(in)), 0.0, 6.0);
}

InvertedResidualImpl::InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand) {
    const int64_t hidden = in * expand;
    residual = stride == 1 && in == out;
    auto list = register_module("conv", torch::nn::ModuleList());
    if (expand != 1) units.push_back(ConvBnRelu6(in, hidden, 1, 1, 1));
    units.push_back(ConvBnRelu6(hidden, hidden, 3, stride, hidden));
    for (auto& u : units) list->push_back(u);
    project = torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, out, 1).bias(false));
    projectBn = batchNorm(out);
    list->push_back(project);
    list->push_back(projectBn);
}

torch::Tensor InvertedResidualImpl::forward(const torch::Tensor& x) {
    torch::Tensor y = x;
    for (auto& u : units) y = u(y);
    y = projectBn(project(y));
    return residual ? x + y : y;
}

// ---- decoder ----------------------------------------------------------------------------------

ConvBnReluImpl::ConvBnReluImpl(int64_t in, int64_t out, int64_t kernel, int64_t dilation) {
    const int64_t pad = dilation * (kernel - 1) / 2;
    conv = register_module(
        "0", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(pad).dilation(dilation)));
    bn = register_module("1", batchNorm(out));
}

torch::Tensor ConvBnReluImpl::forward(const torch::Tensor& x) { return torch::relu(bn(conv(x))); }

MergeBlockImpl::MergeBlockImpl(int64_t inA, int64_t inB, int64_t outA, int64_t outB) {
    conv1 = register_module("conv1", ConvBnRelu(inB, outB, 1));
    conv2 = register_module("conv2", ConvBnRelu(inA, outA, 1));
}

torch::Tensor MergeBlockImpl::forward(const torch::Tensor& a, const torch::Tensor& b) {
    // To a's size: x2 for the reference's square inputs (with aligned corners the sampling
    // follows from the sizes alone, so this equals its scale_factor 2), any size for LETR.
    const torch::Tensor up = F::interpolate(conv1(b), F::InterpolateFuncOptions()
                                                          .size(std::vector<int64_t>{a.size(2), a.size(3)})
                                                          .mode(torch::kBilinear)
                                                          .align_corners(true));
    return torch::cat({conv2(a), up}, 1);
}

RefineBlockImpl::RefineBlockImpl(int64_t in, int64_t out) {
    conv1 = register_module("conv1", ConvBnRelu(in, in, 3));
    conv2 = register_module("conv2", ConvBnRelu(in, out, 3));
}

torch::Tensor RefineBlockImpl::forward(const torch::Tensor& x) { return conv2(conv1(x) + x); }

OutputBlockImpl::OutputBlockImpl(int64_t in, int64_t out) {
    conv1 = register_module("conv1", ConvBnRelu(in, in, 3, 5));
    conv2 = register_module("conv2", ConvBnRelu(in, in, 3));
    conv3 = register_module("conv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1)));
}

torch::Tensor OutputBlockImpl::forward(const torch::Tensor& x) { return conv3(conv2(conv1(x))); }

// ---- the network ------------------------------------------------------------------------------

MlsdTinyImpl::MlsdTinyImpl() {
    auto backbone = register_module("backbone", std::make_shared<torch::nn::Module>());
    auto features = backbone->register_module("features", torch::nn::ModuleList());
    stem_ = ConvBnRelu6(4, 32, 3, 2, 1);
    features->push_back(stem_);
    // MobileNetV2's (expansion t, channels c, repeats n, first stride s), its first four rows.
    struct Row { int64_t t, c, n, s; };
    int64_t in = 32;
    for (const Row r : {Row{1, 16, 1, 1}, Row{6, 24, 2, 2}, Row{6, 32, 3, 2}, Row{6, 64, 4, 2}}) {
        for (int64_t i = 0; i < r.n; ++i) {
            blocks_.push_back(InvertedResidual(in, r.c, i == 0 ? r.s : 1, r.t));
            features->push_back(blocks_.back());
            in = r.c;
        }
    }
    // The decoder's blocks are registered here under their own names (block12 ..), as the
    // reference's state dict has them; the decoder module itself is not a child.
    decoder_ = MlsdDecoder();
    for (const auto& child : decoder_->named_children()) register_module(child.key(), child.value());
}

MlsdDecoderImpl::MlsdDecoderImpl() {
    block12 = register_module("block12", MergeBlock(32, 64, 64, 64));
    block13 = register_module("block13", RefineBlock(128, 64));
    block14 = register_module("block14", MergeBlock(24, 64, 32, 32));
    block15 = register_module("block15", RefineBlock(64, 64));
    block16 = register_module("block16", OutputBlock(64, 16));
}

torch::Tensor MlsdDecoderImpl::forward(const MlsdFeatures& f) {
    torch::Tensor y = block13(block12(f.c3, f.c4));
    y = block15(block14(f.c2, y));
    y = block16(y).narrow(1, 7, 9);
    return upsample2(y);
}

MlsdFeatures MlsdTinyImpl::encode(const torch::Tensor& x) {
    if (x.dim() != 4 || x.size(1) != 4 || x.size(2) % 32 != 0 || x.size(3) % 32 != 0)
        throw Error("M-LSD: expected an input [B, 4, H, W] with H and W multiples of 32, got " +
                    std::string(c10::str(x.sizes())));
    MlsdFeatures f;
    torch::Tensor y = stem_(x);
    for (size_t i = 0; i < blocks_.size(); ++i) {
        y = blocks_[i](y);
        const size_t index = i + 1;   // features.<index>
        if (index == 3) f.c2 = y;
        if (index == 6) f.c3 = y;
        if (index == 10) f.c4 = y;
    }
    return f;
}

torch::Tensor MlsdTinyImpl::forward(const torch::Tensor& x) { return decoder_->forward(encode(x)); }

// ---- checkpoints, input, post-processing ------------------------------------------------------

std::shared_ptr<MlsdModel> loadMlsd(const std::string& path) {
    Checkpoint ckpt = loadModelCheckpoint(path, "convert_mlsd.py", "mlsd_tiny.h5");
    if (ckpt.family != "mlsd")
        throw Error(path + ": checkpoint family is '" + ckpt.family + "', expected 'mlsd' (an M-LSD checkpoint)");
    auto model = std::make_shared<MlsdModel>();
    model->config = MlsdConfig::fromJsonString(ckpt.configJson, path + " (/meta config)");
    model->net = MlsdTiny();
    applyCheckpoint(ckpt, *model->net, "mlsd", path);
    model->net->eval();
    model->source = path;
    return model;
}

torch::Tensor mlsdInput(const cv::Mat& rgb, int64_t size) {
    if (rgb.empty()) throw Error("M-LSD: the image is empty");
    if (rgb.type() != CV_8UC3) throw Error("M-LSD: expected an 8-bit RGB image (3 channels)");
    if (size < 32 || size % 32 != 0) throw Error("M-LSD: input size must be a positive multiple of 32");
    cv::Mat resized;
    cv::resize(rgb, resized, cv::Size(int(size), int(size)), 0, 0, cv::INTER_AREA);
    torch::Tensor out = torch::empty({1, 4, size, size}, torch::kFloat32);
    float* dst = out.data_ptr<float>();
    const int64_t plane = size * size;
    // float32 v / 127.5 - 1 exactly as the reference's numpy computes it (a constant 1 for the
    // fourth channel, scaled the same way).
    const float one = 1.0f / 127.5f - 1.0f;
    for (int y = 0; y < resized.rows; ++y) {
        const uint8_t* row = resized.ptr<uint8_t>(y);
        for (int x = 0; x < resized.cols; ++x) {
            const int64_t i = int64_t(y) * size + x;
            for (int c = 0; c < 3; ++c) dst[c * plane + i] = float(row[3 * x + c]) / 127.5f - 1.0f;
            dst[3 * plane + i] = one;
        }
    }
    return out;
}

std::vector<eval::ScoredLine> decodeLines(const torch::Tensor& maps, const MlsdConfig& config, int imageWidth,
                                          int imageHeight) {
    if (maps.dim() != 4 || maps.size(0) != 1 || maps.size(1) < 5)
        throw Error("M-LSD: expected the network output [1, 9, h, w], got " + std::string(c10::str(maps.sizes())));
    if (imageWidth <= 0 || imageHeight <= 0) throw Error("M-LSD: the image size must be positive");
    const MlsdCandidates c =
        topCandidates(maps, std::min<int64_t>(config.topK, maps.size(2) * maps.size(3)), config.nmsKernel);
    const torch::Tensor cand = c.lines[0].to(torch::kCPU).contiguous();   // [k, 4] input pixels
    const torch::Tensor scores = c.scores[0].to(torch::kCPU).contiguous();
    const auto L = cand.accessor<float, 2>();
    const auto sc = scores.accessor<float, 1>();
    // Input pixels -> image pixels.
    const double sx = double(imageWidth) / double(config.inputSize);
    const double sy = double(imageHeight) / double(config.inputSize);
    std::vector<eval::ScoredLine> lines;
    for (int64_t i = 0; i < cand.size(0); ++i) {
        // The length in centre-map pixels (half the input's), float32 as the reference.
        const float ddx = (L[i][0] - L[i][2]) * 0.5f, ddy = (L[i][1] - L[i][3]) * 0.5f;
        const float length = std::sqrt(ddx * ddx + ddy * ddy);
        if (!(double(sc[i]) > config.scoreThreshold && double(length) > config.lengthThreshold)) continue;
        eval::ScoredLine l;
        l.x1 = float(double(L[i][0]) * sx);
        l.y1 = float(double(L[i][1]) * sy);
        l.x2 = float(double(L[i][2]) * sx);
        l.y2 = float(double(L[i][3]) * sy);
        l.score = sc[i];
        lines.push_back(l);
    }
    return lines;
}

MlsdCandidates topCandidates(const torch::Tensor& maps, int64_t k, int64_t nmsKernel) {
    if (maps.dim() != 4 || maps.size(1) < 5)
        throw Error("M-LSD: expected decoder maps [B, 9, h, w], got " + std::string(c10::str(maps.sizes())));
    const int64_t B = maps.size(0), h = maps.size(2), w = maps.size(3);
    if (k < 1 || k > h * w)
        throw Error("M-LSD: cannot take " + std::to_string(k) + " candidates from a " + std::to_string(w) + "x" +
                    std::to_string(h) + " map");
    const torch::Tensor m = maps.to(torch::kFloat32);
    torch::Tensor heat = m.narrow(1, 0, 1).sigmoid();   // [B, 1, h, w]
    const torch::Tensor hmax =
        F::max_pool2d(heat, F::MaxPool2dFuncOptions(nmsKernel).stride(1).padding((nmsKernel - 1) / 2));
    heat = (heat * (hmax == heat).to(torch::kFloat32)).reshape({B, -1});
    auto [scores, idx] = torch::topk(heat, k, 1);   // [B, k]
    const torch::Tensor ys = torch::div(idx, w, "floor").to(torch::kFloat32), xs = torch::remainder(idx, w).to(torch::kFloat32);
    const torch::Tensor disp = m.narrow(1, 1, 4).reshape({B, 4, -1}).gather(2, idx.unsqueeze(1).expand({B, 4, k}));
    // (x + dx_start, y + dy_start, x + dx_end, y + dy_end) in map pixels, x2 to input pixels.
    const torch::Tensor centre = torch::stack({xs, ys, xs, ys}, 2);   // [B, k, 4]
    return {(centre + disp.transpose(1, 2)) * 2.0, scores};
}

std::vector<eval::ScoredLine> detectMlsd(MlsdModel& model, const cv::Mat& rgb) {
    torch::NoGradGuard noGrad;
    const torch::Device device = model.net->parameters().front().device();
    const torch::Tensor maps = model.net->forward(mlsdInput(rgb, model.config.inputSize).to(device));
    return decodeLines(maps, model.config, rgb.cols, rgb.rows);
}

} // namespace glimpse::mlsd
