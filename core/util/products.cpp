#include "core/util/products.h"

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

bool lowPrecision(const torch::Tensor& x) { return tlProductDtype != torch::kFloat && x.is_cpu(); }

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

// [W | b]^T (or W^T without b) in dtype t, from the cache where the weights are not being trained.
torch::Tensor lowWeight(const torch::Tensor& w, const torch::Tensor& b, torch::ScalarType t) {
    auto convert = [t](const torch::Tensor& wt, const torch::Tensor& bt) {
        return (bt.defined() ? torch::cat({wt, bt.unsqueeze(1)}, 1) : wt).to(t).t();
    };
    if (w.requires_grad() && torch::GradMode::is_enabled()) return convert(w, b);   // training: not cached
    const LowKey key{w.data_ptr(), b.defined() ? b.data_ptr() : nullptr, int(t)};
    std::lock_guard<std::mutex> lock(lowMutex);
    auto it = lowWeights.find(key);
    if (it != lowWeights.end() && stillValid(it->second, w, b)) return it->second.low;
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
    e.low = convert(w.detach(), b.defined() ? b.detach() : b);
    lowWeights.insert_or_assign(key, e);
    return e.low;
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
    if (!lowPrecision(x)) return torch::linear(x, w, b);
    return productLow(x, w, b, true);
}

torch::Tensor linear(torch::nn::LinearImpl& l, const torch::Tensor& x) { return linear(x, l.weight, l.bias); }

torch::Tensor linearLow(torch::nn::LinearImpl& l, const torch::Tensor& x) {
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
