#pragma once
// The few-shot data the ConstellationNet panel's gallery and episode view read: datasets opened
// from a spec (core/data/fewshot.h) once per (spec, image size) and shared by the worker jobs,
// and a class-interleaved view of a split, so that scanning "the first N images" (the cluster
// gallery) covers every class instead of the first class only.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/data/fewshot.h"

namespace glimpse::app {

// One opened spec: the splits and an episode sampler per split.
struct OpenedFewShot {
    data::FewShotSplits splits;
    std::shared_ptr<const data::EpisodeSampler> base, val, novel;
    // "novel", "val" or "base" (glimpse::Error for another name).
    const data::EpisodeSampler& sampler(const std::string& split) const;
};

// Thread-safe: worker jobs call get(); opening happens on the calling (worker) thread.
class FewShotDataCache {
public:
    // The opened spec (opened now when not cached; glimpse::Error with the spec's problem).
    std::shared_ptr<const OpenedFewShot> get(const std::string& spec, int imageSize);

private:
    std::mutex mutex_;
    std::map<std::pair<std::string, int>, std::shared_ptr<const OpenedFewShot>> opened_;
};

// The first `maxImages` samples of a sampler's dataset taken round-robin over its classes
// (sample 0 of every class, then sample 1, ...); labels and class names as in the source.
class InterleavedClasses : public data::ClassificationDataset {
public:
    InterleavedClasses(std::shared_ptr<const data::EpisodeSampler> sampler, int64_t maxImages);
    int64_t size() const override { return int64_t(order_.size()); }
    data::ClassSample get(int64_t index) const override;
    int64_t labelOf(int64_t index) const override;
    std::string describe() const override;
    int64_t sourceIndex(int64_t index) const { return order_.at(size_t(index)).first; }

private:
    std::shared_ptr<const data::EpisodeSampler> sampler_;
    std::vector<std::pair<int64_t, int64_t>> order_;   // (source index, label)
};

} // namespace glimpse::app
