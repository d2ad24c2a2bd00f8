#include "core/models/xtra/task_weights.h"

#include <cmath>

#include "core/error.h"
#include "core/train/json_config.h"

namespace glimpse::xtra {

void TaskWeightConfig::validate() const {
    auto bad = [](const std::string& w) { throw Error("XTRA task weights: " + w); };
    if (cycle < 1 || cycle > 100000000) bad("cycle must be in 1..1e8");
    if (window < 1 || window > cycle) bad("window must be in 1..cycle");
    if (!(threshold >= -1 && threshold <= 1)) bad("threshold must be in [-1, 1]");
    if (warmup < 0 || warmup > 100000000) bad("warmup must be in 0..1e8");
}

nlohmann::json TaskWeightConfig::toJson() const {
    return {{"cycle", cycle}, {"window", window}, {"threshold", threshold}, {"warmup", warmup}};
}

TaskWeightConfig TaskWeightConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    const std::string w = source + " (task_weights)";
    train::checkKeys(j, {"cycle", "window", "threshold", "warmup"}, w);
    TaskWeightConfig c;
    train::readKey(j, "cycle", c.cycle, w);
    train::readKey(j, "window", c.window, w);
    train::readKey(j, "threshold", c.threshold, w);
    train::readKey(j, "warmup", c.warmup, w);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(w + ": " + e.what());
    }
    return c;
}

double gradientCosine(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    if (a.size() != b.size()) throw Error("gradientCosine: the gradients have different parameter counts");
    double dot = 0, na = 0, nb = 0;
    for (size_t k = 0; k < a.size(); ++k) {
        if (a[k].sizes() != b[k].sizes()) throw Error("gradientCosine: parameter " + std::to_string(k) + " differs in shape");
        const auto x = a[k].to(torch::kFloat64), y = b[k].to(torch::kFloat64);
        dot += (x * y).sum().item<double>();
        na += (x * x).sum().item<double>();
        nb += (y * y).sum().item<double>();
    }
    if (na <= 0 || nb <= 0) return 0.0;
    return dot / (std::sqrt(na) * std::sqrt(nb));
}

std::vector<torch::Tensor> lossGradient(const torch::Tensor& loss, const std::vector<torch::Tensor>& params) {
    auto g = torch::autograd::grad({loss}, params, {}, /*retain_graph=*/true, /*create_graph=*/false,
                                   /*allow_unused=*/true);
    for (size_t k = 0; k < g.size(); ++k)
        if (!g[k].defined()) g[k] = torch::zeros_like(params[k]);
    return g;
}

std::vector<double> taskSimilarities(const torch::Tensor& targetLoss, const std::vector<torch::Tensor>& offlineLosses,
                                     const std::vector<torch::Tensor>& params) {
    const auto target = lossGradient(targetLoss, params);
    std::vector<double> sims;
    for (const auto& l : offlineLosses) sims.push_back(gradientCosine(lossGradient(l, params), target));
    return sims;
}

TaskWeights::TaskWeights(int numOfflineTasks, const TaskWeightConfig& config) : config_(config) {
    config_.validate();
    if (numOfflineTasks < 0 || numOfflineTasks > 1000) throw Error("XTRA task weights: 0..1000 offline tasks");
    weights_.assign(size_t(numOfflineTasks), 1.0);
    counters_.assign(size_t(numOfflineTasks), 0);
}

bool TaskWeights::measuring(int64_t step) const {
    return step >= config_.warmup && (step - config_.warmup) % config_.cycle < config_.window;
}

void TaskWeights::observe(int64_t step, const std::vector<double>& similarities) {
    if (!measuring(step)) throw Error("XTRA task weights: update " + std::to_string(step) + " is not in a measuring window");
    if (similarities.size() != weights_.size())
        throw Error("XTRA task weights: " + std::to_string(similarities.size()) + " similarities for " +
                    std::to_string(weights_.size()) + " offline tasks");
    for (size_t i = 0; i < similarities.size(); ++i)
        if (similarities[i] > config_.threshold) ++counters_[i];
    if ((step - config_.warmup) % config_.cycle == config_.window - 1) {
        for (size_t i = 0; i < weights_.size(); ++i) {
            weights_[i] = double(counters_[i]) / double(config_.window);
            counters_[i] = 0;
        }
    }
}

nlohmann::json TaskWeights::state() const { return {{"weights", weights_}, {"counters", counters_}}; }

void TaskWeights::restore(const nlohmann::json& s, const std::string& source) {
    try {
        auto w = s.at("weights").get<std::vector<double>>();
        auto c = s.at("counters").get<std::vector<int64_t>>();
        if (w.size() != weights_.size() || c.size() != counters_.size())
            throw Error("holds " + std::to_string(w.size()) + " task weights, expected " + std::to_string(weights_.size()));
        for (double x : w)
            if (!(x >= 0 && x <= 1)) throw Error("a task weight outside [0, 1]");
        for (int64_t x : c)
            if (x < 0 || x > config_.window) throw Error("a task counter outside 0..window");
        weights_ = w;
        counters_ = c;
    } catch (const Error& e) {
        throw Error(source + ": task weights: " + e.what());
    } catch (const std::exception& e) {
        throw Error(source + ": task weights: malformed state (" + std::string(e.what()) + ")");
    }
}

} // namespace glimpse::xtra
