#pragma once
// Image classification datasets (CoaT training, glimpse train coat):
//   * Fashion-MNIST from the idx files of Debian's dataset-fashion-mnist package
//     (/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]);
//     gzipped or plain files are read alike (zlib);
//   * a folder of class-named image folders: ROOT/<class>/*.{png,jpg,jpeg,bmp} (classes in
//     sorted folder-name order, files sorted by name). When ROOT has train/ and val/ (or test/)
//     sub-folders, those are the splits; otherwise every `holdoutEvery`-th image (in that order,
//     starting with index holdoutEvery - 1) is the validation split.
//
// Specs (CLI --data, training configs):
//   fashion-mnist            the Debian package's files
//   fashion-mnist:DIR        idx files (same names) in DIR
//   DIR                      a class-folder dataset
// Every error names the file and the problem.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/types.h>

namespace glimpse::data {

struct ClassSample {
    cv::Mat image;    // CV_8UC1 (grayscale) or CV_8UC3 (RGB)
    int64_t label = 0;
};

class ClassificationDataset {
public:
    virtual ~ClassificationDataset() = default;
    virtual int64_t size() const = 0;
    virtual ClassSample get(int64_t index) const = 0;   // throws Error for a bad index / unreadable file
    // The label of sample `index` (== get(index).label). Datasets that know labels without
    // decoding the image override it, so samplers (core/data/fewshot.h) stay cheap.
    virtual int64_t labelOf(int64_t index) const { return get(index).label; }
    virtual std::string describe() const = 0;
    const std::vector<std::string>& classNames() const { return classNames_; }
    int64_t numClasses() const { return int64_t(classNames_.size()); }

protected:
    std::vector<std::string> classNames_;
};

// ---- idx files ----------------------------------------------------------------------------

// An idx array (the MNIST file format): big-endian header, magic 0x0000 0x08 (unsigned byte)
// then the number of dimensions, then each dimension as a big-endian uint32, then the bytes.
struct IdxArray {
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
};
// Reads a plain or gzipped idx file of unsigned bytes. Checks: the file opens, the magic's type
// byte is 0x08, the dimension count equals `expectedDims` (when > 0), the data is exactly as long
// as the header says (neither truncated nor with trailing bytes).
IdxArray readIdx(const std::string& path, int expectedDims = 0);
// Writes an uncompressed idx file (tests, tools); atomic.
void writeIdx(const std::string& path, const IdxArray& array);

// The ten Fashion-MNIST class names in label order.
const std::vector<std::string>& fashionMnistClassNames();
// The directory of Debian's dataset-fashion-mnist package.
std::string fashionMnistDefaultDir();

// Fashion-MNIST split "train" (60000 images) or "test" (10000). Finds <prefix>-images-idx3-ubyte
// and <prefix>-labels-idx1-ubyte (prefix train / t10k), each plain or .gz, in `dir`. Checks that
// the counts agree, images are 2-D, and labels are < 10.
class FashionMnistDataset : public ClassificationDataset {
public:
    FashionMnistDataset(const std::string& dir, const std::string& split);
    int64_t size() const override { return n_; }
    ClassSample get(int64_t index) const override;
    int64_t labelOf(int64_t index) const override;
    std::string describe() const override;

private:
    std::string dir_, split_;
    int64_t n_ = 0, h_ = 0, w_ = 0;
    std::vector<uint8_t> images_, labels_;
};

// Image files of one split of a class-folder dataset, decoded with OpenCV on get().
class ClassFolderDataset : public ClassificationDataset {
public:
    struct Item {
        std::string path;
        int64_t label;
    };
    ClassFolderDataset(std::string root, std::vector<std::string> classes, std::vector<Item> items,
                       std::string splitName);
    int64_t size() const override { return int64_t(items_.size()); }
    ClassSample get(int64_t index) const override;
    int64_t labelOf(int64_t index) const override;
    std::string describe() const override;
    const std::vector<Item>& items() const { return items_; }

private:
    std::string root_, split_;
    std::vector<Item> items_;
};

struct ClassificationSplits {
    std::unique_ptr<ClassificationDataset> train, val;
};

// Opens both splits of a spec (above). Throws glimpse::Error naming the spec/file for a missing
// folder, no classes, an empty class, mismatched class lists between train/ and val/, or an
// empty split.
ClassificationSplits openClassificationDataset(const std::string& spec, int holdoutEvery = 10);

// A sample as the network input: grayscale replicated to RGB, then `rgb` CV_8UC3.
cv::Mat toRgb(const cv::Mat& image);

// Classification training augmentation (CoaT, ConstellationNet): a horizontal flip with
// probability `hflip` (one uniform draw from `rng`), then, when pad > 0, black padding by `pad`
// pixels and a random crop back to the input size (two integer draws: x, then y).
cv::Mat flipPadCrop(const cv::Mat& rgb, double hflip, int pad, std::mt19937_64& rng);

} // namespace glimpse::data
