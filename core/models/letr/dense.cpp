#include "core/models/letr/dense.h"

#include <cmath>

#include "core/error.h"
#include "core/train/json_config.h"
#include "core/util/autocast.h"

namespace glimpse::letr {

namespace F = torch::nn::functional;

void DenseAuxConfig::validate() const {
    auto bad = [](const std::string& w) { throw Error("LETR training config: aux." + w); };
    if (!(coef >= 0 && coef <= 1000)) bad("coef must be in [0, 1000]");
    if (channels < 4 || channels > 1024) bad("channels must be in 4..1024");
    if (!(lineRadius > 0 && lineRadius <= 16)) bad("line_radius must be in (0, 16] cells");
    if (!(junctionSigma > 0 && junctionSigma <= 16)) bad("junction_sigma must be in (0, 16] cells");
    if (stride != 4 && stride != 8 && stride != 16) bad("stride must be 4, 8 or 16 pixels");
    if (!(positionCoef >= 0 && positionCoef <= 1000)) bad("position_coef must be in [0, 1000]");
}

nlohmann::json DenseAuxConfig::toJson() const {
    return {{"enabled", enabled},          {"coef", coef},     {"channels", channels}, {"line_radius", lineRadius},
            {"junction_sigma", junctionSigma}, {"stride", stride}, {"position_coef", positionCoef}};
}

DenseAuxConfig DenseAuxConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    const std::string w = source + " (aux)";
    train::checkKeys(j, {"enabled", "coef", "channels", "line_radius", "junction_sigma", "stride", "position_coef"}, w);
    DenseAuxConfig c;
    train::readKey(j, "enabled", c.enabled, w);
    train::readKey(j, "coef", c.coef, w);
    train::readKey(j, "channels", c.channels, w);
    train::readKey(j, "line_radius", c.lineRadius, w);
    train::readKey(j, "junction_sigma", c.junctionSigma, w);
    train::readKey(j, "stride", c.stride, w);
    train::readKey(j, "position_coef", c.positionCoef, w);
    return c;
}

DenseTargets denseTargets(const torch::Tensor& linesPx, int64_t gh, int64_t gw, const DenseAuxConfig& cfg) {
    if (gh < 1 || gw < 1) throw Error("LETR dense targets: empty grid");
    const double s = double(cfg.stride);
    auto lines = (linesPx.defined() && linesPx.numel() ? linesPx.to(torch::kFloat64).reshape({-1, 4})
                                                        : torch::zeros({0, 4}, torch::kFloat64)) /
                 s;   // cell units
    const int64_t M = lines.size(0);
    auto ys = torch::arange(gh, torch::kFloat64) + 0.5, xs = torch::arange(gw, torch::kFloat64) + 0.5;
    auto grid = torch::meshgrid({ys, xs}, "ij");
    auto p = torch::stack({grid[1].reshape(-1), grid[0].reshape(-1)}, 1);   // [P, 2] (x, y)
    DenseTargets t;
    t.direction = torch::zeros({2, gh, gw});
    t.offset = torch::zeros({2, gh, gw});
    t.offsetMask = torch::zeros({gh, gw}, torch::kBool);
    if (M == 0) {
        t.line = torch::zeros({gh, gw});
        t.junction = torch::zeros({gh, gw});
        t.dirMask = torch::zeros({gh, gw}, torch::kBool);
        return t;
    }
    auto a = lines.slice(1, 0, 2), b = lines.slice(1, 2, 4), ab = b - a;       // [M, 2]
    auto len2 = (ab * ab).sum(1);                                                // [M]
    auto ap = p.unsqueeze(1) - a.unsqueeze(0);                                   // [P, M, 2]
    auto u = ((ap * ab.unsqueeze(0)).sum(2) / len2.clamp_min(1e-12).unsqueeze(0)).clamp(0, 1);
    u = torch::where(len2.unsqueeze(0) > 1e-12, u, torch::zeros_like(u));
    auto proj = a.unsqueeze(0) + u.unsqueeze(2) * ab.unsqueeze(0);               // [P, M, 2]
    auto d = (p.unsqueeze(1) - proj).pow(2).sum(2).sqrt();                       // [P, M]
    auto [dmin, arg] = d.min(1);
    t.line = (1 - dmin / cfg.lineRadius).clamp_min(0).reshape({gh, gw}).to(torch::kFloat);
    t.dirMask = (dmin < cfg.lineRadius).reshape({gh, gw});
    auto ang = torch::atan2(ab.select(1, 1), ab.select(1, 0)).index_select(0, arg);   // [P]
    t.direction = torch::stack({torch::cos(2 * ang), torch::sin(2 * ang)}, 0).reshape({2, gh, gw}).to(torch::kFloat);
    t.direction = t.direction * t.dirMask.unsqueeze(0);
    auto ends = torch::cat({a, b}, 1).reshape({-1, 2});                          // [2M, 2]: a0, b0, a1, b1, ...
    auto dj = (p.unsqueeze(1) - ends.unsqueeze(0)).pow(2).sum(2);                // [P, 2M]
    t.junction = torch::exp(-dj / (2 * cfg.junctionSigma * cfg.junctionSigma)).amax(1).reshape({gh, gw}).to(torch::kFloat);
    auto e = ends.accessor<double, 2>();
    auto off = t.offset.accessor<float, 3>();
    auto om = t.offsetMask.accessor<bool, 2>();
    for (int64_t k = 0; k < ends.size(0); ++k) {
        const double x = e[k][0], y = e[k][1];
        const double fx = std::floor(x), fy = std::floor(y);
        if (!(fx >= 0 && fy >= 0 && fx < double(gw) && fy < double(gh))) continue;
        const int64_t i = int64_t(fy), j = int64_t(fx);
        if (om[i][j]) continue;
        om[i][j] = true;
        off[0][i][j] = float(x - (fx + 0.5));
        off[1][i][j] = float(y - (fy + 0.5));
    }
    return t;
}

DenseLineHeadImpl::DenseLineHeadImpl(int64_t c4Channels, int64_t c5Channels, const DenseAuxConfig& cfg, uint64_t seed) {
    const int64_t k = cfg.channels;
    lateral4 = register_module("lateral4", torch::nn::Conv2d(torch::nn::Conv2dOptions(c4Channels, k, 1)));
    lateral5 = register_module("lateral5", torch::nn::Conv2d(torch::nn::Conv2dOptions(c5Channels, k, 1)));
    fuse = register_module("fuse", torch::nn::Conv2d(torch::nn::Conv2dOptions(k, k, 3).padding(1)));
    refine = register_module("refine", torch::nn::Conv2d(torch::nn::Conv2dOptions(k, k, 3).padding(1)));
    out = register_module("out", torch::nn::Conv2d(torch::nn::Conv2dOptions(k, 6, 1)));
    pos4 = register_module("pos4", torch::nn::Conv2d(torch::nn::Conv2dOptions(c4Channels, 2, 1)));
    pos5 = register_module("pos5", torch::nn::Conv2d(torch::nn::Conv2dOptions(c5Channels, 2, 1)));
    // Deterministic from `seed` without touching the global RNG: Kaiming-normal (fan_in, so the
    // head keeps its input's scale) convs, zero biases; the output layer small, with the heatmap logits starting
    // at the prior of a sparse map (about 5% positive cells).
    torch::NoGradGuard ng;
    at::Generator gen = at::detail::createCPUGenerator(seed ^ 0xd15e);
    for (auto* c : {&lateral4, &lateral5, &fuse, &refine}) {
        auto& w = (*c)->weight;
        const double fanIn = double(w.size(1) * w.size(2) * w.size(3));
        w.normal_(0.0, std::sqrt(2.0 / fanIn), gen);
        (*c)->bias.zero_();
    }
    out->weight.normal_(0.0, 0.01, gen);
    out->bias.zero_();
    out->bias.slice(0, 0, 2).fill_(-3.0);
    for (auto* c : {&pos4, &pos5}) {   // start at the image centre
        (*c)->weight.normal_(0.0, 0.01, gen);
        (*c)->bias.fill_(0.5);
    }
}

torch::Tensor DenseLineHeadImpl::forward(const torch::Tensor& c4, const torch::Tensor& c5, int64_t gh, int64_t gw) {
    auto x4 = lateral4(c4.unsqueeze(0));
    auto x5 = lateral5(c5.unsqueeze(0));
    x5 = F::interpolate(x5, F::InterpolateFuncOptions()
                                .size(std::vector<int64_t>{x4.size(2), x4.size(3)})
                                .mode(torch::kBilinear)
                                .align_corners(false));
    auto x = torch::relu(fuse(x4 + x5));
    x = F::interpolate(x, F::InterpolateFuncOptions().size(std::vector<int64_t>{gh, gw}).mode(torch::kBilinear).align_corners(false));
    x = torch::relu(refine(x));
    return out(x).squeeze(0);
}

DenseLoss denseLoss(const torch::Tensor& pred, const DenseTargets& t) {
    if (pred.dim() != 3 || pred.size(0) != 6 || pred.size(1) != t.line.size(0) || pred.size(2) != t.line.size(1))
        throw Error("LETR dense loss: prediction and targets differ in shape");
    const auto dev = pred.device();
    auto bce = [&](const torch::Tensor& logit, const torch::Tensor& target) {
        return F::binary_cross_entropy_with_logits(logit, target.to(dev));
    };
    auto maskedL1 = [&](const torch::Tensor& v, const torch::Tensor& target, const torch::Tensor& mask) {
        auto m = mask.to(dev).to(torch::kFloat).unsqueeze(0);   // [1, gh, gw]
        const double n = m.sum().item<double>();
        if (n == 0) return (v * 0).sum();
        return ((v - target.to(dev)).abs() * m).sum() / (n * double(v.size(0)));
    };
    DenseLoss l;
    auto line = bce(pred[0], t.line);
    auto junction = bce(pred[1], t.junction);
    auto direction = maskedL1(pred.slice(0, 2, 4), t.direction, t.dirMask);
    auto offset = maskedL1(torch::tanh(pred.slice(0, 4, 6)) / 2, t.offset, t.offsetMask);
    l.total = line + junction + direction + offset;
    l.line = line.item<double>();
    l.junction = junction.item<double>();
    l.direction = direction.item<double>();
    l.offset = offset.item<double>();
    return l;
}

torch::Tensor cellCentres(int64_t h, int64_t w, int64_t stride, int64_t H, int64_t W) {
    auto xs = (torch::arange(w, torch::kFloat32) + 0.5) * double(stride) / double(W);
    auto ys = (torch::arange(h, torch::kFloat32) + 0.5) * double(stride) / double(H);
    return torch::stack({xs.view({1, w}).expand({h, w}), ys.view({h, 1}).expand({h, w})}, 0);
}

DenseLoss denseBatchLoss(DenseLineHead& head, const std::vector<torch::Tensor>& c4, const std::vector<torch::Tensor>& c5,
                         const std::vector<std::array<int64_t, 2>>& inputSizes, const std::vector<torch::Tensor>& targets,
                         const DenseAuxConfig& cfg, std::array<int, 2> levels, torch::ScalarType dtype) {
    const size_t B = c4.size();
    if (B == 0 || c5.size() != B || inputSizes.size() != B || targets.size() != B)
        throw Error("LETR dense loss: features, sizes and targets differ in count");
    DenseLoss sum;
    for (size_t i = 0; i < B; ++i) {
        const int64_t H = inputSizes[i][0], W = inputSizes[i][1];
        const int64_t gh = (H + cfg.stride - 1) / cfg.stride, gw = (W + cfg.stride - 1) / cfg.stride;
        auto px = targets[i].numel() ? targets[i].reshape({-1, 4}).to(torch::kFloat64).cpu() *
                                           torch::tensor({double(W), double(H), double(W), double(H)}, torch::kFloat64)
                                     : torch::zeros({0, 4}, torch::kFloat64);
        const DenseTargets t = denseTargets(px, gh, gw, cfg);
        torch::Tensor maps;
        {
            AutocastGuard autocast(c4[i].device(), dtype);
            maps = head->forward(c4[i], c5[i], gh, gw).to(torch::kFloat);
        }
        DenseLoss l = denseLoss(maps, t);
        if (cfg.positionCoef > 0) {
            // The strides of C4 and C5 follow from the input size and the feature map's.
            auto posLoss = [&](const torch::Tensor& pred, const torch::Tensor& f, int level) {
                return (pred - cellCentres(f.size(1), f.size(2), int64_t(1) << level, H, W).to(pred.device())).abs().mean();
            };
            auto p = posLoss(head->position4(c4[i]), c4[i], levels[0]) + posLoss(head->position5(c5[i]), c5[i], levels[1]);
            l.position = p.item<double>();
            l.total = l.total + cfg.positionCoef * p;
        }
        sum.total = sum.total.defined() ? sum.total + l.total : l.total;
        sum.position += l.position;
        sum.line += l.line;
        sum.junction += l.junction;
        sum.direction += l.direction;
        sum.offset += l.offset;
    }
    const double n = double(B);
    sum.total = sum.total / n;
    sum.line /= n;
    sum.junction /= n;
    sum.direction /= n;
    sum.offset /= n;
    sum.position /= n;
    return sum;
}

MemoryPositionHeadImpl::MemoryPositionHeadImpl(int64_t hiddenDim, uint64_t seed) {
    coarse = register_module("coarse", torch::nn::Linear(hiddenDim, 2));
    fine = register_module("fine", torch::nn::Linear(hiddenDim, 2));
    torch::NoGradGuard ng;
    at::Generator gen = at::detail::createCPUGenerator(seed ^ 0x90517);
    for (auto* l : {&coarse, &fine}) {   // start at the image centre
        (*l)->weight.normal_(0.0, 0.01, gen);
        (*l)->bias.fill_(0.5);
    }
}

torch::Tensor memoryPositionLoss(torch::nn::Linear& map, const torch::Tensor& memory, int64_t h, int64_t w,
                                 const std::vector<std::array<int64_t, 2>>& validSizes,
                                 const std::vector<std::array<int64_t, 2>>& inputSizes, int level) {
    const int64_t B = memory.size(0);
    if (memory.dim() != 3 || memory.size(1) != h * w || int64_t(validSizes.size()) != B ||
        int64_t(inputSizes.size()) != B)
        throw Error("LETR memory position loss: memory, sizes and images differ");
    auto pred = map(memory).view({B, h, w, 2});
    torch::Tensor sum;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t vh = validSizes[size_t(b)][0], vw = validSizes[size_t(b)][1];
        auto p = pred[b].narrow(0, 0, vh).narrow(1, 0, vw).permute({2, 0, 1});   // [2, vh, vw]
        auto target = cellCentres(vh, vw, int64_t(1) << level, inputSizes[size_t(b)][0], inputSizes[size_t(b)][1]);
        auto l = (p - target.to(p.device())).abs().mean();
        sum = sum.defined() ? sum + l : l;
    }
    return sum / double(B);
}

} // namespace glimpse::letr
