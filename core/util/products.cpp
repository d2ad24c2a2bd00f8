#include "core/util/products.h"

namespace glimpse::products {

namespace {
thread_local torch::ScalarType tlProductDtype = torch::kFloat;
}

ProductDtypeGuard::ProductDtypeGuard(torch::ScalarType t) : was(tlProductDtype) { tlProductDtype = t; }
ProductDtypeGuard::~ProductDtypeGuard() { tlProductDtype = was; }

torch::ScalarType productDtype() { return tlProductDtype; }

bool lowPrecision(const torch::Tensor& x) { return tlProductDtype != torch::kFloat && x.is_cpu(); }

namespace {
// x W^T + b with both operands in the guard's dtype, float32 accumulation, the result in that
// dtype. The bias rides in the product, as a column of W against a column of ones appended to x:
// LibTorch 1.13's bfloat16 addmm takes 2-3x longer to add a bias than the product itself takes
// (docs/performance.md), and in the product it is summed in float32 before the one rounding, as
// addmm sums it (the results are the same).
torch::Tensor productLow(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    const auto t = tlProductDtype;
    if (!b.defined()) return torch::matmul(x.to(t), w.to(t).t());
    const int64_t k = x.size(-1);
    auto sizes = x.sizes().vec();
    sizes.back() = k + 1;
    auto xa = torch::empty(sizes, x.options().dtype(t));
    xa.narrow(-1, 0, k).copy_(x);
    xa.narrow(-1, k, 1).fill_(1);
    return torch::matmul(xa, torch::cat({w, b.unsqueeze(1)}, 1).to(t).t());
}
} // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    if (!lowPrecision(x)) return torch::linear(x, w, b);
    return productLow(x, w, b).to(torch::kFloat);
}

torch::Tensor linear(torch::nn::LinearImpl& l, const torch::Tensor& x) { return linear(x, l.weight, l.bias); }

torch::Tensor linearLow(torch::nn::LinearImpl& l, const torch::Tensor& x) {
    if (!lowPrecision(x)) return torch::linear(x, l.weight, l.bias);
    return productLow(x, l.weight, l.bias);
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
