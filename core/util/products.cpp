#include "core/util/products.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace glimpse::products {

namespace {
thread_local torch::ScalarType tlProductDtype = torch::kFloat;
}

ProductDtypeGuard::ProductDtypeGuard(torch::ScalarType t) : was(tlProductDtype) { tlProductDtype = t; }
ProductDtypeGuard::~ProductDtypeGuard() { tlProductDtype = was; }

torch::ScalarType productDtype() { return tlProductDtype; }

bool lowPrecision(const torch::Tensor& x) { return tlProductDtype == torch::kBFloat16 && x.is_cpu(); }

bool int8Linear(const torch::Tensor& x) { return tlProductDtype == torch::kQInt8 && x.is_cpu(); }

bool int8Available() {
    static const bool available = [] {
        const auto engines = at::globalContext().supportedQEngines();
        if (std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) == engines.end()) return false;
        at::globalContext().setQEngine(at::QEngine::ONEDNN);
        return c10::Dispatcher::singleton().findSchema({"quantized::linear_dynamic", ""}).has_value() &&
               c10::Dispatcher::singleton().findSchema({"quantized::linear_prepack", ""}).has_value();
    }();
    return available;
}

namespace {
// The low-precision copies of weight matrices ([W | b] in dtype t), kept while the weights are
// alive and unchanged: converting every weight of a model on every forward pass cost CoaT-Lite
// Tiny ~3.6 ms a pass (11% of a batch of one). An entry is valid while both storages live (weak
// references), at the same addresses, shapes and strides, with unchanged version counters (an
// in-place change, checkpoint loading included, moves them).
struct LowWeight {
    using Weak = c10::weak_intrusive_ptr<c10::StorageImpl>;
    std::optional<Weak> wStorage, bStorage;
    std::vector<int64_t> wSizes, wStrides;
    uint32_t wVersion = 0, bVersion = 0;
    torch::Tensor low;
    c10::IValue packed;   // kQInt8: oneDNN's prepacked int8 weights and float32 bias
};
using LowKey = std::tuple<const void*, const void*, int>;   // data of W, data of b, dtype
std::mutex lowMutex;
std::map<LowKey, LowWeight> lowWeights;

bool stillValid(const LowWeight& e, const torch::Tensor& w, const torch::Tensor& b) {
    if (e.wStorage->expired() || e.wSizes != w.sizes().vec() || e.wStrides != w.strides().vec() ||
        e.wVersion != w._version())
        return false;
    if (!b.defined()) return true;
    return e.bStorage && !e.bStorage->expired() && e.bVersion == b._version();
}

// The cache's entry for (w, b, t) while it is still valid; else a new one, filled by `fill`.
// Called with lowMutex held.
template <class Fill>
const LowWeight& cachedEntry(const torch::Tensor& w, const torch::Tensor& b, torch::ScalarType t, Fill fill) {
    const LowKey key{w.data_ptr(), b.defined() ? b.data_ptr() : nullptr, int(t)};
    auto it = lowWeights.find(key);
    if (it != lowWeights.end() && stillValid(it->second, w, b)) return it->second;
    if (lowWeights.size() >= 4096)   // weights of freed models: drop what expired
        for (auto i = lowWeights.begin(); i != lowWeights.end();)
            i = i->second.wStorage->expired() ? lowWeights.erase(i) : std::next(i);
    LowWeight e;
    e.wStorage.emplace(w.storage().getWeakStorageImpl());
    if (b.defined()) e.bStorage.emplace(b.storage().getWeakStorageImpl());
    e.wSizes = w.sizes().vec();
    e.wStrides = w.strides().vec();
    e.wVersion = w._version();
    e.bVersion = b.defined() ? b._version() : 0;
    torch::NoGradGuard ng;
    fill(e);
    return lowWeights.insert_or_assign(key, std::move(e)).first->second;
}

// [W | b]^T (or W^T without b) in dtype t, from the cache where the weights are not being trained.
torch::Tensor lowWeight(const torch::Tensor& w, const torch::Tensor& b, torch::ScalarType t) {
    auto convert = [t](const torch::Tensor& wt, const torch::Tensor& bt) {
        return (bt.defined() ? torch::cat({wt, bt.unsqueeze(1)}, 1) : wt).to(t).t();
    };
    if (w.requires_grad() && torch::GradMode::is_enabled()) return convert(w, b);   // training: not cached
    std::lock_guard<std::mutex> lock(lowMutex);
    return cachedEntry(w, b, t, [&](LowWeight& e) { e.low = convert(w.detach(), b.defined() ? b.detach() : b); }).low;
}

// W quantized to int8 per output channel (symmetric: scale max|row| / 127, zero point 0) and
// prepacked with b for quantized::linear_dynamic; kept like the bfloat16 copies above.
c10::IValue packedInt8(const torch::Tensor& w, const torch::Tensor& b) {
    auto pack = [](const torch::Tensor& wt, const torch::Tensor& bt) {
        torch::NoGradGuard ng;
        const auto wf = wt.detach().to(torch::kFloat).contiguous();
        const auto scales = (wf.abs().amax({1}).to(torch::kDouble) / 127.0).clamp_min(1e-12);
        const auto zeros = torch::zeros({wf.size(0)}, torch::kLong);
        const auto qw = torch::quantize_per_channel(wf, scales, zeros, 0, torch::kQInt8);
        static const auto prepack = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
        torch::jit::Stack stack{qw, bt.defined() ? c10::IValue(bt.detach().to(torch::kFloat).contiguous())
                                                 : c10::IValue()};
        prepack.callBoxed(&stack);
        return stack.at(0);
    };
    std::lock_guard<std::mutex> lock(lowMutex);
    return cachedEntry(w, b, torch::kQInt8, [&](LowWeight& e) { e.packed = pack(w, b); }).packed;
}

// x W^T + b as an int8 product: x quantized per tensor at each call with 7-bit activations
// (reduce_range: without AVX512-VNNI the u8 x s8 pair sums of the kernels saturate at 8 bits).
torch::Tensor productInt8(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    static const auto linearDynamic =
        c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_dynamic", "");
    torch::jit::Stack stack{x.to(torch::kFloat).contiguous(), packedInt8(w, b), true};
    linearDynamic.callBoxed(&stack);
    return stack.at(0).toTensor();
}

// The int8 product where a gradient flows back to x (CoaT's Grad-CAM): the backward pass is the
// float32 linear layer's (dL/dx = dL/dy W, the straight-through rule for the roundings); the
// weights and bias get no gradient (inference only).
struct Int8LinearFn : torch::autograd::Function<Int8LinearFn> {
    struct Weights {   // not autograd inputs (LibTorch 1.13's Function refuses an undefined bias)
        torch::Tensor w, b;
    };
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const Weights& wb) {
        ctx->saved_data["w"] = wb.w;
        return productInt8(x, wb.w, wb.b);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        return {torch::matmul(grads[0], ctx->saved_data["w"].toTensor().detach()), torch::Tensor()};
    }
};

torch::Tensor linearInt8(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    if (torch::GradMode::is_enabled() && x.requires_grad())
        return Int8LinearFn::apply(x, Int8LinearFn::Weights{w, b});
    torch::NoGradGuard ng;   // the weights' autograd history is not wanted either
    return productInt8(x, w, b);
}

// x W^T + b with both operands in the guard's dtype and float32 accumulation; the result in that
// dtype, or in float32 with `toFloat`. LibTorch 1.13's bfloat16 addmm takes 2-3x longer to add a
// bias than the product itself takes (docs/performance.md), so the bias goes either into the
// product, as a column of W against a column of ones appended to x (summed in float32 before the
// one rounding, as addmm sums it), where x is the narrower side (K <= outputs: copying x costs
// less than a pass over the output), or else onto the result in float32 after the product's
// rounding (K > outputs: an MLP's contracting layer, whose input is the largest tensor).
torch::Tensor productLow(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool toFloat) {
    const auto t = tlProductDtype;
    const int64_t k = x.size(-1);
    if (!b.defined() || k > w.size(0)) {
        auto y = torch::matmul(x.to(t), lowWeight(w, torch::Tensor(), t));
        if (!b.defined()) return toFloat ? y.to(torch::kFloat) : y;
        y = y.to(torch::kFloat).add_(b);
        return toFloat ? y : y.to(t);
    }
    const torch::Tensor wt = lowWeight(w, b, t);
    auto sizes = x.sizes().vec();
    sizes.back() = k + 1;
    auto xa = torch::empty(sizes, x.options().dtype(t));
    xa.narrow(-1, 0, k).copy_(x);
    xa.narrow(-1, k, 1).fill_(1);
    auto y = torch::matmul(xa, wt);
    return toFloat ? y.to(torch::kFloat) : y;
}
} // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    if (int8Linear(x)) return linearInt8(x, w, b);
    if (!lowPrecision(x)) return torch::linear(x, w, b);
    return productLow(x, w, b, true);
}

torch::Tensor linear(torch::nn::LinearImpl& l, const torch::Tensor& x) { return linear(x, l.weight, l.bias); }

torch::Tensor linearLow(torch::nn::LinearImpl& l, const torch::Tensor& x) {
    if (int8Linear(x)) return linearInt8(x, l.weight, l.bias);
    if (!lowPrecision(x)) return torch::linear(x, l.weight, l.bias);
    return productLow(x, l.weight, l.bias, false);
}

torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b) {
    if (lowPrecision(a)) return torch::bmm(a.to(tlProductDtype), b.to(tlProductDtype)).to(torch::kFloat);
    if (!a.is_cpu() || a.scalar_type() != torch::kFloat || b.scalar_type() != torch::kFloat ||
        (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())))
        return torch::bmm(a, b);
    const auto ac = a.contiguous(), bc = b.contiguous();
    auto out = torch::empty({a.size(0), a.size(1), b.size(2)}, a.options());
    for (int64_t i = 0; i < a.size(0); ++i) {
        auto o = out[i];
        at::mm_out(o, ac[i], bc[i]);
    }
    return out;
}

} // namespace glimpse::products
