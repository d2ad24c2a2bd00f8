#include "core/models/constellation/fewshot.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "core/error.h"

namespace glimpse::constellation {

namespace {

torch::Tensor batchOf(ConstellationModel& model, const data::ClassificationDataset& ds,
                      const std::vector<int64_t>& indices, std::vector<cv::Mat>* inputs) {
    std::vector<torch::Tensor> xs;
    for (int64_t i : indices) {
        auto pre = model.preprocess(ds.get(i).image);
        xs.push_back(pre.tensor);
        if (inputs) inputs->push_back(pre.input);
    }
    return torch::stack(xs);
}

// Test-time features of dataset images, each computed once per evaluation: in eval mode a
// sample's features do not depend on the other images of its batch (batch norm uses running
// statistics, the cluster centres are fixed, relation attention stays within an image), so
// episodes that share images reuse them. 600 5-way 1-shot episodes with 15 queries draw
// 48,000 images; a novel split of 20 x 600 images holds 12,000.
class FeatureCache {
public:
    explicit FeatureCache(ConstellationModel& model) : model_(model), weights_(model.testWeights()) {}

    // Logits [ways * queries, ways] of an episode, as ConstellationModel::fewShotLogits.
    torch::Tensor logits(const data::ClassificationDataset& ds, const data::Episode& ep, int64_t ways, int64_t shots) {
        std::vector<int64_t> missing;
        for (const auto* list : {&ep.support, &ep.query})
            for (int64_t i : *list)
                if (!rows_.count(i) && std::find(missing.begin(), missing.end(), i) == missing.end()) missing.push_back(i);
        if (!missing.empty()) {
            auto feats = model_.fewShotFeatures(model_.forward(batchOf(model_, ds, missing, nullptr)));
            for (size_t k = 0; k < missing.size(); ++k) {
                std::vector<torch::Tensor> row;
                for (const auto& f : feats) row.push_back(f[int64_t(k)].to(torch::kCPU));
                rows_.emplace(missing[k], std::move(row));
            }
        }
        torch::Tensor out;
        for (size_t s = 0; s < weights_.size(); ++s) {
            auto gather = [&](const std::vector<int64_t>& idx) {
                std::vector<torch::Tensor> r;
                for (int64_t i : idx) r.push_back(rows_.at(i)[s]);
                return torch::stack(r);
            };
            auto l = weights_[s] * cosinePrototypeLogits(gather(ep.support), gather(ep.query), ways, shots);
            out = out.defined() ? out + l : l;
        }
        return out;
    }

private:
    ConstellationModel& model_;
    std::vector<double> weights_;
    std::unordered_map<int64_t, std::vector<torch::Tensor>> rows_;
};

} // namespace

EpisodeResult runEpisode(ConstellationModel& model, const data::ClassificationDataset& ds, const data::EpisodeSpec& spec,
                         const data::Episode& episode) {
    EvalScope eval(model);
    torch::NoGradGuard ng;
    EpisodeResult r;
    r.spec = spec;
    r.episode = episode;
    auto support = batchOf(model, ds, episode.support, &r.support);
    auto query = batchOf(model, ds, episode.query, &r.query);
    r.logits = model.fewShotLogits(support, query, spec.ways, spec.shots).to(torch::kCPU);
    auto pred = r.logits.argmax(1);
    int64_t correct = 0;
    for (int64_t q = 0; q < pred.size(0); ++q) {
        r.predicted.push_back(pred[q].item<int64_t>());
        if (r.predicted.back() == q / spec.queries) ++correct;
    }
    r.accuracy = pred.size(0) ? double(correct) / double(pred.size(0)) : 0.0;
    for (int64_t c : episode.classes) r.classNames.push_back(ds.classNames().at(size_t(c)));
    // Prototype clusters: the last branch-1 constellation module's similarity, averaged.
    auto mods = model.constellationModules();
    int last = -1;
    for (size_t i = 0; i < mods.size(); ++i)
        if (mods[i].branch != 2) last = int(i);
    if (last >= 0) {
        r.prototypeModule = mods[size_t(last)].name;
        auto out = model.forward(support, {true, 1});
        auto sim = out.records[size_t(last)].similarity.mean({2, 3}).to(torch::kCPU);   // [ways*shots, K]
        auto proto = sim.view({spec.ways, spec.shots, -1}).mean(1);
        for (int64_t w = 0; w < spec.ways; ++w) {
            auto top = proto[w].topk(std::min<int64_t>(3, proto.size(1)));
            std::vector<ClusterScore> s;
            for (int64_t i = 0; i < std::get<1>(top).size(0); ++i)
                s.push_back({std::get<1>(top)[i].item<int64_t>(), std::get<0>(top)[i].item<float>()});
            r.prototypeClusters.push_back(s);
        }
    }
    return r;
}

FewShotResult evaluateFewShot(ConstellationModel& model, const data::EpisodeSampler& sampler,
                              const data::EpisodeSpec& spec, int64_t episodes, uint64_t seed,
                              const std::function<void(int64_t, int64_t)>& progress,
                              const std::function<bool()>& cancelled, const EpisodeFn& onEpisode) {
    if (episodes < 1) throw Error("few-shot evaluation: --episodes must be >= 1, got " + std::to_string(episodes));
    EvalScope eval(model);
    torch::NoGradGuard ng;
    FewShotResult r;
    r.ways = spec.ways;
    r.shots = spec.shots;
    r.queries = spec.queries;
    const auto t0 = std::chrono::steady_clock::now();
    sampler.sample(spec, seed, 0);   // errors (too many ways / shots) before any work
    FeatureCache cache(model);
    for (int64_t e = 0; e < episodes; ++e) {
        if (cancelled && cancelled()) {
            r.cancelled = true;
            break;
        }
        auto ep = sampler.sample(spec, seed, e);
        auto pred = cache.logits(sampler.dataset(), ep, spec.ways, spec.shots).argmax(1).to(torch::kCPU);
        auto truth = torch::arange(spec.ways).repeat_interleave(spec.queries);
        r.accuracies.push_back(pred.eq(truth).to(torch::kDouble).mean().item<double>());
        if (onEpisode) {
            const auto p = pred.to(torch::kLong).contiguous();
            onEpisode(e, ep, std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel()),
                      r.accuracies.back());
        }
        if (progress) progress(e + 1, episodes);
    }
    double sum = 0;
    for (double a : r.accuracies) sum += a;
    r.mean = r.accuracies.empty() ? 0.0 : sum / double(r.accuracies.size());
    r.ci95 = data::confidence95(r.accuracies);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

} // namespace glimpse::constellation
