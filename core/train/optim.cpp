#include "core/train/optim.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::train {

AdamW::AdamW(std::vector<Param> params, Options opts) : params_(std::move(params)), opts_(opts) {
    for (const auto& p : params_) {
        expAvg_.push_back(torch::zeros_like(p.tensor, torch::MemoryFormat::Contiguous));
        expAvgSq_.push_back(torch::zeros_like(p.tensor, torch::MemoryFormat::Contiguous));
    }
}

void AdamW::zeroGrad() {
    for (auto& p : params_) {
        auto& g = p.tensor.mutable_grad();
        if (g.defined()) g = torch::Tensor();
    }
}

void AdamW::step() {
    torch::NoGradGuard ng;
    ++steps_;
    const double bc1 = 1.0 - std::pow(opts_.beta1, double(steps_));
    const double bc2 = 1.0 - std::pow(opts_.beta2, double(steps_));
    for (size_t i = 0; i < params_.size(); ++i) {
        auto& p = params_[i];
        const auto& g = p.tensor.grad();
        if (!g.defined()) continue;
        const double lr = opts_.lr * p.lrScale;
        if (p.weightDecayScale != 0.0) p.tensor.mul_(1.0 - lr * opts_.weightDecay * p.weightDecayScale);
        expAvg_[i].mul_(opts_.beta1).add_(g, 1.0 - opts_.beta1);
        expAvgSq_[i].mul_(opts_.beta2).addcmul_(g, g, 1.0 - opts_.beta2);
        auto denom = (expAvgSq_[i].sqrt() / std::sqrt(bc2)).add_(opts_.eps);
        p.tensor.addcdiv_(expAvg_[i], denom, -lr / bc1);
    }
}

std::map<std::string, torch::Tensor> AdamW::state() const {
    std::map<std::string, torch::Tensor> s;
    s["step"] = torch::tensor(steps_, torch::kLong);
    for (size_t i = 0; i < params_.size(); ++i) {
        s["exp_avg." + params_[i].name] = expAvg_[i].detach().cpu().clone();
        s["exp_avg_sq." + params_[i].name] = expAvgSq_[i].detach().cpu().clone();
    }
    return s;
}

void AdamW::loadState(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
    auto get = [&](const std::string& key, const torch::Tensor& like) {
        auto it = state.find(key);
        if (it == state.end()) throw Error(source + ": optimizer state lacks '" + key + "'");
        if (it->second.sizes() != like.sizes())
            throw Error(source + ": optimizer state '" + key + "' has the wrong shape");
        return it->second.to(like.device(), like.scalar_type());
    };
    auto st = state.find("step");
    if (st == state.end() || st->second.numel() != 1) throw Error(source + ": optimizer state lacks 'step'");
    std::vector<torch::Tensor> a, b;
    for (size_t i = 0; i < params_.size(); ++i) {
        a.push_back(get("exp_avg." + params_[i].name, expAvg_[i]));
        b.push_back(get("exp_avg_sq." + params_[i].name, expAvgSq_[i]));
    }
    torch::NoGradGuard ng;
    for (size_t i = 0; i < params_.size(); ++i) {
        expAvg_[i].copy_(a[i]);
        expAvgSq_[i].copy_(b[i]);
    }
    steps_ = st->second.to(torch::kLong).item<int64_t>();
}

double stepDecay(double base, double gamma, int64_t every, int64_t step) {
    if (every <= 0) return base;
    return base * std::pow(gamma, double(step / every));
}

double warmupCosine(double base, double minLr, int64_t warmup, int64_t total, int64_t step) {
    if (step < 0) step = 0;
    if (warmup > 0 && step < warmup) return base * double(step + 1) / double(warmup);
    const int64_t span = total - warmup;
    if (span <= 0) return base;
    const double t = std::min(1.0, double(step - warmup) / double(span));
    return minLr + (base - minLr) * 0.5 * (1.0 + std::cos(M_PI * t));
}

double clipGradNorm(const std::vector<AdamW::Param>& params, double maxNorm) {
    torch::NoGradGuard ng;
    // One host synchronization for all parameters (a GPU run would otherwise wait once per tensor).
    std::vector<torch::Tensor> sums;
    for (const auto& p : params)
        if (p.tensor.grad().defined()) sums.push_back(p.tensor.grad().pow(2).sum().to(torch::kDouble));
    const double sq = sums.empty() ? 0.0 : torch::stack(sums).sum().item<double>();
    const double norm = std::sqrt(sq);
    if (maxNorm > 0 && norm > maxNorm) {
        const double scale = maxNorm / (norm + 1e-6);
        for (const auto& p : params)
            if (p.tensor.grad().defined()) p.tensor.mutable_grad().mul_(scale);
    }
    return norm;
}

} // namespace glimpse::train
