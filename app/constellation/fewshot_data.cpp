#include "app/constellation/fewshot_data.h"

#include <algorithm>

#include "core/error.h"

namespace glimpse::app {

const data::EpisodeSampler& OpenedFewShot::sampler(const std::string& split) const {
    if (split == "novel") return *novel;
    if (split == "val") return *val;
    if (split == "base") return *base;
    throw Error("few-shot data: no split '" + split + "' (novel, val or base)");
}

std::shared_ptr<const OpenedFewShot> FewShotDataCache::get(const std::string& spec, int imageSize) {
    const auto key = std::make_pair(spec, imageSize);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = opened_.find(key);
        if (it != opened_.end()) return it->second;
    }
    // Opened outside the lock: a slow folder scan does not hold up other specs.
    auto o = std::make_shared<OpenedFewShot>();
    o->splits = data::openFewShotDataset(spec, imageSize);
    o->base = std::make_shared<data::EpisodeSampler>(o->splits.base, spec + " base");
    o->val = std::make_shared<data::EpisodeSampler>(o->splits.val, spec + " val");
    o->novel = std::make_shared<data::EpisodeSampler>(o->splits.novel, spec + " novel");
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = opened_.emplace(key, std::move(o));
    return it->second;
}

InterleavedClasses::InterleavedClasses(std::shared_ptr<const data::EpisodeSampler> sampler, int64_t maxImages)
    : sampler_(std::move(sampler)) {
    if (!sampler_) throw Error("InterleavedClasses: no sampler");
    classNames_ = sampler_->dataset().classNames();
    const int64_t n = maxImages > 0 ? std::min(maxImages, sampler_->dataset().size()) : sampler_->dataset().size();
    for (int64_t k = 0; int64_t(order_.size()) < n; ++k) {
        bool any = false;
        for (int64_t c = 0; c < sampler_->numClasses() && int64_t(order_.size()) < n; ++c) {
            const auto& idx = sampler_->classIndices(c);
            if (k >= int64_t(idx.size())) continue;
            order_.emplace_back(idx[size_t(k)], c);
            any = true;
        }
        if (!any) break;
    }
}

data::ClassSample InterleavedClasses::get(int64_t index) const {
    if (index < 0 || index >= size()) throw Error("InterleavedClasses: index " + std::to_string(index) + " out of range");
    return sampler_->dataset().get(order_[size_t(index)].first);
}

int64_t InterleavedClasses::labelOf(int64_t index) const { return order_.at(size_t(index)).second; }

std::string InterleavedClasses::describe() const {
    return std::to_string(size()) + " images of " + sampler_->name() + ", classes interleaved";
}

} // namespace glimpse::app
