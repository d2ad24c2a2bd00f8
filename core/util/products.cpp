#include "core/util/products.h"

namespace glimpse::products {

namespace {
thread_local torch::ScalarType tlProductDtype = torch::kFloat;
}

ProductDtypeGuard::ProductDtypeGuard(torch::ScalarType t) : was(tlProductDtype) { tlProductDtype = t; }
ProductDtypeGuard::~ProductDtypeGuard() { tlProductDtype = was; }

torch::ScalarType productDtype() { return tlProductDtype; }

bool lowPrecision(const torch::Tensor& x) { return tlProductDtype != torch::kFloat && x.is_cpu(); }

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    if (!lowPrecision(x)) return torch::linear(x, w, b);
    const auto t = tlProductDtype;
    return torch::linear(x.to(t), w.to(t), b.defined() ? b.to(t) : b).to(torch::kFloat);
}

torch::Tensor linear(torch::nn::LinearImpl& l, const torch::Tensor& x) { return linear(x, l.weight, l.bias); }

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
