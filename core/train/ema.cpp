#include "core/train/ema.h"

#include <cmath>

#include <torch/nn/module.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/train/state.h"

namespace glimpse::train {

WeightEma::WeightEma(double decay) : decay_(decay) {
    if (!(decay > 0 && decay < 1)) throw Error("weight average: decay must be in (0, 1)");
}

double WeightEma::nextDecay() const {
    const double dn = std::pow(decay_, double(count_));
    return decay_ * (1.0 - dn) / (1.0 - dn * decay_);
}

namespace {
// The module's tensors, detached copies on the module's own device (a CUDA model's average
// stays on the GPU: no per-step transfer).
std::map<std::string, torch::Tensor> deviceCopies(const torch::nn::Module& m) {
    std::map<std::string, torch::Tensor> t;
    for (const auto& p : m.named_parameters()) t[p.key()] = p.value().detach().clone();
    for (const auto& b : m.named_buffers()) t[b.key()] = b.value().detach().clone();
    return t;
}
} // namespace

void WeightEma::reset(const torch::nn::Module& m) {
    avg_ = deviceCopies(m);
    if (avg_.count("count")) throw Error("weight average: a module tensor is named 'count'");
    count_ = 0;
}

void WeightEma::update(const torch::nn::Module& m) {
    const double d = nextDecay();
    torch::NoGradGuard ng;
    auto apply = [&](const std::string& name, const torch::Tensor& w) {
        const auto it = avg_.find(name);
        if (it == avg_.end()) throw Error("weight average: the module gained tensor '" + name + "' after reset");
        const torch::Tensor src = w.detach();
        if (src.is_floating_point())
            it->second.mul_(d).add_(src.to(it->second.scalar_type()), 1.0 - d);
        else
            it->second.copy_(src);
    };
    for (const auto& p : m.named_parameters()) apply(p.key(), p.value());
    for (const auto& b : m.named_buffers()) apply(b.key(), b.value());
    ++count_;
}

void WeightEma::copyTo(torch::nn::Module& m) const { loadModuleTensors(m, avg_, "weight average"); }

std::map<std::string, torch::Tensor> WeightEma::state() const {
    std::map<std::string, torch::Tensor> s;
    for (const auto& [k, v] : avg_) s[k] = v.to(torch::kCPU).clone();
    s["count"] = torch::tensor(count_, torch::kInt64);
    return s;
}

void WeightEma::loadState(const torch::nn::Module& m, const std::map<std::string, torch::Tensor>& state,
                          const std::string& source) {
    const auto c = state.find("count");
    if (c == state.end() || c->second.numel() != 1) throw Error(source + ": the weight average lacks its count");
    std::map<std::string, torch::Tensor> avg = deviceCopies(m);
    size_t seen = 0;
    for (auto& [k, v] : avg) {
        const auto it = state.find(k);
        if (it == state.end()) throw Error(source + ": the weight average lacks tensor '" + k + "'");
        if (!it->second.sizes().equals(v.sizes()))
            throw Error(source + ": the weight average's tensor '" + k + "' has the wrong shape");
        v = it->second.to(v.device(), v.scalar_type()).clone();
        ++seen;
    }
    if (seen + 1 != state.size()) throw Error(source + ": the weight average holds tensors the model does not have");
    const int64_t n = c->second.to(torch::kInt64).item<int64_t>();
    if (n < 0) throw Error(source + ": the weight average has a negative count");
    avg_ = std::move(avg);
    count_ = n;
}

} // namespace glimpse::train
