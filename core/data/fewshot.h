#pragma once
// Few-shot classification data (ConstellationNet, dissertation chapter 4): a base / val / novel
// split of disjoint classes, and K-way N-shot episodes (support + query) drawn from one split.
//
// Specs (openFewShotDataset; CLI --data, training configs, the GUI):
//   procedural[:SEED]      the built-in procedural family (below): 100 classes split like
//                          mini-ImageNet / CIFAR-FS, base 0-63, val 64-79, novel 80-99, 600
//                          images per class (default seed 0)
//   composition[:SEED]     the composition family (core/data/composition.h): 100 classes of
//                          shapes, textures and their arrangement whose colours are random per
//                          image (colour gives the class away in the procedural family, not
//                          here), split 0-63 / 64-79 / 80-99, 600 images per class
//   fashion-mnist[:DIR]    Fashion-MNIST (core/data/classification.h): base = classes 0-4
//                          (T-shirt/top, Trouser, Pullover, Dress, Coat) of the train split;
//                          novel = classes 5-9 (Sandal, Shirt, Sneaker, Bag, Ankle boot) of the
//                          t10k split; val = classes 5-9 of the train split. Val therefore shares
//                          novel's classes (other images): use it to monitor training only, never
//                          to select a model.
//   DIR                    the mini-ImageNet folder layout: DIR/train/<class>/*, DIR/val/<class>/*,
//                          DIR/test/<class>/* (*.png, .jpg, .jpeg, .bmp; classes in sorted
//                          folder order, files sorted by name). val/ is optional (then
//                          val = test). The three splits' class names must be disjoint.
// Every error is a glimpse::Error naming the spec, folder or file and the problem.
//
// Datasets return images at their native size and format (CV_8UC1 or CV_8UC3 RGB);
// fewShotInput() turns one into the model's square RGB input.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "core/data/classification.h"
#include "core/data/rendered_fewshot.h"

namespace glimpse::data {

// ---- the procedural family ----------------------------------------------------------------

// Classes of the procedural family and its standard split (like mini-ImageNet's 64/16/20).
constexpr int64_t kProceduralFewShotClasses = 100;
constexpr int64_t kProceduralBaseClasses = 64, kProceduralValClasses = 16, kProceduralNovelClasses = 20;

// The kind of procedural class `cls` of `seed`: "glyph" (a fixed symbol of 2-4 strokes and
// arcs), "texture" (a grating, checker or dot pattern of class-specific frequency, orientation
// and palette inside a class-specific window) or "shapes" (2-4 circles, rectangles, triangles
// and rings in a class-specific arrangement and colours).
std::string proceduralFewShotKind(uint64_t seed, int64_t cls);

// Sample `sample` of class `cls` (>= 0) of the procedural family of `seed`: CV_8UC3 RGB,
// size x size (size >= 8). The class's generator depends only on (seed, cls); each sample
// varies it from (seed, cls, sample): a random affine map (rotation +-20 degrees, scale
// 0.8-1.2, translation up to 10%), small shape jitter, colour jitter, a background that carries
// no class information (plain, gradient or clutter), slight blur and Gaussian noise. Drawn with
// anti-aliasing at 2 x size, then reduced with INTER_AREA. Deterministic: the random numbers
// come from std::mt19937_64 raw draws turned into numbers with plain arithmetic (no
// std::*_distribution, no sin/cos/log), and OpenCV's 8-bit drawing, warping, blurring and area
// resizing are fixed-point, so the same ids give the same bytes on every run and build.
// (Caveat: a build for a target with fused multiply-add that lets the compiler contract a * b + c,
// e.g. aarch64 or -march=native, may round a few intermediate values differently.)
cv::Mat renderProceduralFewShot(uint64_t seed, int64_t cls, int64_t sample, int size);

// Classes [firstClass, firstClass + count) of the procedural family, samplesPerClass images
// each, rendered on get(). Index i is sample i % samplesPerClass of class
// firstClass + i / samplesPerClass, relabelled 0..count-1; class names "proc-017-glyph"
// (the family's class id and kind).
class ProceduralFewShotDataset : public RenderedFewShotDataset {
public:
    // Throws Error for firstClass < 0, count < 1, samplesPerClass < 1 or imageSize outside 8..1024.
    ProceduralFewShotDataset(uint64_t seed, int64_t firstClass, int64_t count, int64_t samplesPerClass = 600,
                             int imageSize = 32);
};

// ---- class subsets ------------------------------------------------------------------------

// The samples of `source` whose label is one of `keep`, relabelled 0..n-1 in `keep`'s order
// (class names carried over), in source order within a class. The index is built once from
// source->labelOf. Throws Error for an empty `keep`, a label out of range or repeated, or a kept
// class without samples.
class ClassSubsetDataset : public ClassificationDataset {
public:
    ClassSubsetDataset(std::shared_ptr<const ClassificationDataset> source, std::vector<int64_t> keep);
    int64_t size() const override { return int64_t(indices_.size()); }
    ClassSample get(int64_t index) const override;
    int64_t labelOf(int64_t index) const override;
    std::string describe() const override;
    const ClassificationDataset& source() const { return *source_; }
    const std::vector<int64_t>& keptLabels() const { return keep_; }
    int64_t sourceIndex(int64_t index) const;

private:
    std::shared_ptr<const ClassificationDataset> source_;
    std::vector<int64_t> keep_;
    std::vector<int64_t> indices_;   // source index of each sample
    std::vector<int64_t> labels_;    // new label of each sample
};

// ---- splits -------------------------------------------------------------------------------

struct FewShotSplits {
    std::shared_ptr<ClassificationDataset> base, val, novel;   // val may be novel itself (see specs)
    std::string spec;
    int imageSize = 32;   // the model input side the spec was opened for (fewShotInput)
    std::string describe() const;   // one line per split
};

// Opens a spec (above). imageSize (8..1024) is the model's input side: the procedural family
// renders at it; other datasets keep their native size (resize with fewShotInput).
FewShotSplits openFewShotDataset(const std::string& spec, int imageSize = 32);

// An image as the model's input: toRgb, then resized to size x size (INTER_AREA when
// shrinking, INTER_LINEAR when enlarging; the aspect ratio is not kept). CV_8UC3 RGB; shares
// the input's data when it already is RGB of that size.
cv::Mat fewShotInput(const cv::Mat& image, int size);

// ---- episodes -----------------------------------------------------------------------------

struct EpisodeSpec {
    int64_t ways = 5, shots = 1, queries = 15;
};

struct Episode {
    std::vector<int64_t> classes;   // dataset labels, in way order
    std::vector<int64_t> support;   // dataset indices, way-major [ways * shots]
    std::vector<int64_t> query;     // dataset indices, way-major [ways * queries]
};

// Draws episodes from one dataset. The per-class index lists are built once from labelOf.
class EpisodeSampler {
public:
    // `name` appears in error messages ("novel", "procedural base", ...). Throws Error for a
    // null dataset or a label outside 0..numClasses()-1.
    EpisodeSampler(std::shared_ptr<const ClassificationDataset> ds, std::string name);
    // Episode `episode` of `seed`: `ways` distinct classes in random order, and for each
    // `shots` support and `queries` query samples of that class, all distinct. Depends only on
    // (seed, episode) and the dataset. Throws Error for ways < 2 or more ways than classes,
    // shots < 1, queries < 1, or shots + queries more than the smallest class holds.
    Episode sample(const EpisodeSpec& spec, uint64_t seed, int64_t episode) const;
    int64_t numClasses() const { return int64_t(byClass_.size()); }
    int64_t minClassSize() const;
    const std::vector<int64_t>& classIndices(int64_t label) const { return byClass_.at(size_t(label)); }
    const ClassificationDataset& dataset() const { return *ds_; }
    const std::string& name() const { return name_; }

private:
    std::shared_ptr<const ClassificationDataset> ds_;
    std::string name_;
    std::vector<std::vector<int64_t>> byClass_;
};

// Half-width of the 95% confidence interval of a mean accuracy over episodes:
// 1.96 * s / sqrt(n) with s the sample standard deviation (n - 1); 0 for n < 2.
double confidence95(const std::vector<double>& accs);

} // namespace glimpse::data
