#include "core/models/letr/mlsd_backbone.h"

#include <map>

#include "core/error.h"
#include "core/models/letr/model.h"
#include "core/models/mlsd/model.h"

namespace glimpse::letr {

namespace F = torch::nn::functional;

namespace {

torch::Tensor runUnit(const torch::Tensor& x, torch::nn::Conv2d conv, const std::shared_ptr<torch::nn::Module>& bn,
                      int64_t stride, bool relu6) {
    const torch::Tensor in = stride == 2 ? F::pad(x, F::PadFuncOptions({0, 1, 0, 1})) : x;
    torch::Tensor y = std::static_pointer_cast<FrozenBatchNorm2dImpl>(bn)->forward(conv(in));
    return relu6 ? torch::clamp(y, 0.0, 6.0) : y;
}

} // namespace

MlsdBodyImpl::MlsdBodyImpl() {
    auto features = register_module("features", torch::nn::ModuleList());
    // A unit under `parent` as children "0" (conv) and "1" (frozen BN), like M-LSD's ConvBnRelu6.
    auto makeUnit = [](torch::nn::Module& parent, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                       int64_t groups) {
        Unit u;
        u.stride = stride;
        const int64_t pad = stride == 2 ? 0 : (kernel - 1) / 2;
        u.conv = parent.register_module(
            "0", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(pad).groups(groups).bias(false)));
        u.bn = parent.register_module("1", FrozenBatchNorm2d(out));
        return u;
    };
    auto stem = std::make_shared<torch::nn::Module>();
    stem_ = makeUnit(*stem, 4, 32, 3, 2, 1);
    features->push_back(stem);
    // MobileNetV2's (expansion t, channels c, repeats n, first stride s): its first four rows.
    struct Row { int64_t t, c, n, s; };
    int64_t in = 32;
    for (const Row r : {Row{1, 16, 1, 1}, Row{6, 24, 2, 2}, Row{6, 32, 3, 2}, Row{6, 64, 4, 2}}) {
        for (int64_t i = 0; i < r.n; ++i) {
            const int64_t stride = i == 0 ? r.s : 1, hidden = in * r.t;
            auto block = std::make_shared<torch::nn::Module>();
            auto conv = block->register_module("conv", torch::nn::ModuleList());
            Block b;
            b.residual = stride == 1 && in == r.c;
            if (r.t != 1) {
                auto u = std::make_shared<torch::nn::Module>();
                b.units.push_back(makeUnit(*u, in, hidden, 1, 1, 1));
                conv->push_back(u);
            }
            auto dw = std::make_shared<torch::nn::Module>();
            b.units.push_back(makeUnit(*dw, hidden, hidden, 3, stride, hidden));
            conv->push_back(dw);
            b.project = torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, r.c, 1).bias(false));
            conv->push_back(b.project);
            FrozenBatchNorm2d pbn(r.c);
            conv->push_back(pbn);
            b.projectBn = pbn.ptr();
            blocks_.push_back(std::move(b));
            features->push_back(block);
            in = r.c;
        }
    }
    auto extra = register_module("extra", torch::nn::ModuleList());
    extra1_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 128, 3).stride(2).padding(1));
    extra2_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(128, 128, 3).padding(1));
    extra->push_back(extra1_);
    extra->push_back(extra2_);
}

int64_t MlsdBodyImpl::channels(int level) {
    switch (level) {
    case 2: return 24;
    case 3: return 32;
    case 4: return 64;
    case 5: return 128;
    default: throw Error("LETR mlsd_tiny backbone: level must be 2..5, got " + std::to_string(level));
    }
}

std::vector<torch::Tensor> MlsdBodyImpl::forward(const torch::Tensor& images, int maxLevel) {
    if (images.dim() != 4 || images.size(1) != 3)
        throw Error("LETR mlsd_tiny backbone: expected images [B, 3, H, W], got " + std::string(c10::str(images.sizes())));
    if (maxLevel < 2 || maxLevel > 5) throw Error("LETR mlsd_tiny backbone: maxLevel must be 2..5");
    // M-LSD's fourth input channel: the constant 1 scaled like the colours (1 / 127.5 - 1).
    const torch::Tensor ones = torch::full({images.size(0), 1, images.size(2), images.size(3)},
                                           1.0 / 127.5 - 1.0, images.options());
    torch::Tensor y = runUnit(torch::cat({images, ones}, 1), stem_.conv, stem_.bn, stem_.stride, true);
    std::vector<torch::Tensor> levels;
    for (size_t i = 0; i < blocks_.size(); ++i) {
        Block& b = blocks_[i];
        torch::Tensor h = y;
        for (Unit& u : b.units) h = runUnit(h, u.conv, u.bn, u.stride, true);
        h = std::static_pointer_cast<FrozenBatchNorm2dImpl>(b.projectBn)->forward(b.project(h));
        y = b.residual ? y + h : h;
        const size_t index = i + 1;   // features.<index>
        if (index == 3 || index == 6 || index == 10) levels.push_back(y);
        if (int(levels.size()) + 1 >= maxLevel) return levels;
    }
    levels.push_back(torch::relu(extra2_(torch::relu(extra1_(y)))));
    return levels;
}

namespace {
// Copies into `dst` each of its parameters and buffers whose name starts with `only` from the
// M-LSD tensor named srcPrefix + that name; errors name `source` and `what` needs the tensor.
void copyFromMlsd(torch::nn::Module& dst, const mlsd::MlsdModel& mlsd, const std::string& srcPrefix,
                  const std::string& only, const std::string& source, const std::string& what) {
    torch::NoGradGuard noGrad;
    std::map<std::string, torch::Tensor> src;
    for (const auto& p : mlsd.net->named_parameters(true)) src[p.key()] = p.value();
    for (const auto& b : mlsd.net->named_buffers(true)) src[b.key()] = b.value();
    auto copy = [&](const std::string& name, torch::Tensor& to) {
        if (name.rfind(only, 0) != 0) return;
        const auto it = src.find(srcPrefix + name);
        if (it == src.end()) throw Error(source + ": M-LSD tensor '" + srcPrefix + name + "' is missing");
        if (!it->second.sizes().equals(to.sizes()))
            throw Error(source + ": M-LSD tensor '" + srcPrefix + name + "' has shape " + c10::str(it->second.sizes()) +
                        ", " + what + " needs " + c10::str(to.sizes()));
        to.copy_(it->second.to(to.device(), to.scalar_type()));
    };
    for (auto& p : dst.named_parameters(true)) copy(p.key(), p.value());
    for (auto& b : dst.named_buffers(true)) copy(b.key(), b.value());
}
} // namespace

void copyMlsdEncoder(MlsdBodyImpl& body, const mlsd::MlsdModel& mlsd, const std::string& source) {
    copyFromMlsd(body, mlsd, "backbone.", "features.", source, "the LETR backbone");
}

void copyMlsdDecoder(mlsd::MlsdDecoderImpl& decoder, const mlsd::MlsdModel& mlsd, const std::string& source) {
    copyFromMlsd(decoder, mlsd, "", "", source, "LETR's proposal decoder");
}

} // namespace glimpse::letr
