#pragma once
// The common part of the generated few-shot families (procedural, core/data/fewshot.h;
// composition, core/data/composition.h): a range of a family's classes, images rendered on get().
#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "core/data/classification.h"

namespace glimpse::data {

// Classes [firstClass, firstClass + count) of a family, samplesPerClass images each, rendered on
// get() by render(seed, class id, sample, imageSize). Index i is sample i % samplesPerClass of
// class firstClass + i / samplesPerClass, relabelled 0..count-1. A family's class derives from
// it and names the classes (classNames_).
class RenderedFewShotDataset : public ClassificationDataset {
public:
    using Render = cv::Mat (*)(uint64_t seed, int64_t cls, int64_t sample, int size);
    int64_t size() const override { return count_ * perClass_; }
    ClassSample get(int64_t index) const override;
    int64_t labelOf(int64_t index) const override;
    std::string describe() const override;
    uint64_t seed() const { return seed_; }
    int64_t firstClass() const { return first_; }
    int64_t samplesPerClass() const { return perClass_; }
    int imageSize() const { return size_; }

protected:
    // Throws Error ("<family> few-shot dataset: ...") for firstClass < 0, count < 1,
    // samplesPerClass < 1 or imageSize outside 8..1024.
    RenderedFewShotDataset(std::string family, Render render, uint64_t seed, int64_t firstClass, int64_t count,
                           int64_t samplesPerClass, int imageSize);

private:
    void check(int64_t index) const;
    std::string family_;
    Render render_;
    uint64_t seed_;
    int64_t first_, count_, perClass_;
    int size_;
};

} // namespace glimpse::data
