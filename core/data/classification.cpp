#include "core/data/classification.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <opencv2/imgproc.hpp>
#include <zlib.h>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/io/image.h"
#include "core/util/path.h"

namespace glimpse::data {

namespace fs = std::filesystem;

// ---- idx ----------------------------------------------------------------------------------

namespace {

struct GzFile {
    gzFile f = nullptr;
    ~GzFile() {
        if (f) gzclose(f);
    }
};

// Reads up to n bytes; returns how many were read (fewer only at the end of the data).
size_t readSome(gzFile f, uint8_t* dst, size_t n, const std::string& path) {
    size_t done = 0;
    while (done < n) {
        const unsigned chunk = unsigned(std::min<size_t>(n - done, size_t(1) << 30));
        const int got = gzread(f, dst + done, chunk);
        if (got < 0) {
            int err = 0;
            const char* msg = gzerror(f, &err);
            throw Error(path + ": cannot read the idx file (" + std::string(msg ? msg : "zlib error") + ")");
        }
        if (got == 0) break;
        done += size_t(got);
    }
    return done;
}

uint32_t bigEndian(const uint8_t* p) {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

} // namespace

IdxArray readIdx(const std::string& path, int expectedDims) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw Error(path + ": idx file not found");
    GzFile gz;
    gz.f = gzopen(path.c_str(), "rb");   // reads plain files as they are
    if (!gz.f) throw Error(path + ": cannot open the idx file");
    uint8_t head[4];
    if (readSome(gz.f, head, 4, path) != 4) throw Error(path + ": not an idx file (shorter than its 4-byte magic)");
    if (head[0] != 0 || head[1] != 0)
        throw Error(path + ": not an idx file (the magic number must start with two zero bytes)");
    if (head[2] != 0x08)
        throw Error(path + ": idx data type 0x" + std::to_string(int(head[2])) +
                    " is not supported (only unsigned bytes, 0x08)");
    const int nd = head[3];
    if (nd < 1 || nd > 4) throw Error(path + ": idx file has " + std::to_string(nd) + " dimensions (1..4 supported)");
    if (expectedDims > 0 && nd != expectedDims)
        throw Error(path + ": idx file has " + std::to_string(nd) + " dimensions, expected " +
                    std::to_string(expectedDims) + " (magic " + std::to_string(0x800 + nd) + " instead of " +
                    std::to_string(0x800 + expectedDims) + ")");
    IdxArray a;
    int64_t total = 1;
    for (int i = 0; i < nd; ++i) {
        uint8_t d[4];
        if (readSome(gz.f, d, 4, path) != 4) throw Error(path + ": idx header is truncated");
        const int64_t v = bigEndian(d);
        if (v < 0 || v > (int64_t(1) << 31)) throw Error(path + ": idx dimension " + std::to_string(i) + " is absurd");
        a.dims.push_back(v);
        if (v > 0 && total > (int64_t(1) << 33) / v) throw Error(path + ": idx array is larger than 8 GiB");
        total *= v;
    }
    // Read in pieces, so a short file claiming gigabytes fails after reading what it holds
    // instead of allocating (and zeroing) the announced size first.
    constexpr size_t kPiece = size_t(16) << 20;
    a.data.reserve(std::min(size_t(total), kPiece));
    while (a.data.size() < size_t(total)) {
        const size_t have = a.data.size(), want = std::min(kPiece, size_t(total) - have);
        a.data.resize(have + want);
        const size_t got = readSome(gz.f, a.data.data() + have, want, path);
        if (got != want)
            throw Error(path + ": idx file is truncated (" + std::to_string(have + got) + " of " +
                        std::to_string(total) + " data bytes)");
    }
    uint8_t extra;
    if (readSome(gz.f, &extra, 1, path) != 0)
        throw Error(path + ": idx file has trailing bytes after the " + std::to_string(total) +
                    " the header announces");
    return a;
}

void writeIdx(const std::string& path, const IdxArray& a) {
    int64_t total = 1;
    for (auto d : a.dims) total *= d;
    if (a.dims.empty() || a.dims.size() > 4 || total != int64_t(a.data.size()))
        throw Error(path + ": writeIdx: dims do not match the data size");
    std::vector<uint8_t> bytes{0, 0, 0x08, uint8_t(a.dims.size())};
    for (auto d : a.dims)
        for (int s = 24; s >= 0; s -= 8) bytes.push_back(uint8_t((uint64_t(d) >> s) & 0xff));
    bytes.insert(bytes.end(), a.data.begin(), a.data.end());
    writeBytesAtomically(path, bytes.data(), bytes.size());
}

// ---- Fashion-MNIST ------------------------------------------------------------------------

const std::vector<std::string>& fashionMnistClassNames() {
    static const std::vector<std::string> names{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    return names;
}

std::string fashionMnistDefaultDir() { return "/usr/share/datasets/fashion-mnist"; }

namespace {

std::string findIdx(const std::string& dir, const std::string& base) {
    std::error_code ec;
    for (const std::string& name : {base, base + ".gz"}) {
        const fs::path p = fs::path(dir) / name;
        if (fs::is_regular_file(p, ec)) return p.string();
    }
    std::string hint;
    if (dir == fashionMnistDefaultDir()) hint = " (install Debian's dataset-fashion-mnist package)";
    throw Error((fs::path(dir) / base).string() + "[.gz]: Fashion-MNIST file not found" + hint);
}

} // namespace

FashionMnistDataset::FashionMnistDataset(const std::string& dir, const std::string& split) : dir_(dir), split_(split) {
    if (split != "train" && split != "test")
        throw Error("Fashion-MNIST: split must be 'train' or 'test', got '" + split + "'");
    const std::string prefix = split == "train" ? "train" : "t10k";
    const std::string imgPath = findIdx(dir, prefix + "-images-idx3-ubyte");
    const std::string lblPath = findIdx(dir, prefix + "-labels-idx1-ubyte");
    IdxArray img = readIdx(imgPath, 3);
    IdxArray lbl = readIdx(lblPath, 1);
    if (img.dims[0] != lbl.dims[0])
        throw Error(imgPath + ": holds " + std::to_string(img.dims[0]) + " images but " + lblPath + " holds " +
                    std::to_string(lbl.dims[0]) + " labels");
    if (img.dims[0] < 1) throw Error(imgPath + ": holds no images");
    if (img.dims[1] < 1 || img.dims[2] < 1) throw Error(imgPath + ": images have an empty side");
    for (size_t i = 0; i < lbl.data.size(); ++i)
        if (lbl.data[i] >= 10)
            throw Error(lblPath + ": label " + std::to_string(int(lbl.data[i])) + " of item " + std::to_string(i) +
                        " is not a Fashion-MNIST class (0..9)");
    n_ = img.dims[0];
    h_ = img.dims[1];
    w_ = img.dims[2];
    images_ = std::move(img.data);
    labels_ = std::move(lbl.data);
    classNames_ = fashionMnistClassNames();
}

ClassSample FashionMnistDataset::get(int64_t index) const {
    if (index < 0 || index >= n_)
        throw Error("Fashion-MNIST " + split_ + ": index " + std::to_string(index) + " out of range (size " +
                    std::to_string(n_) + ")");
    ClassSample s;
    s.image = cv::Mat(int(h_), int(w_), CV_8UC1, const_cast<uint8_t*>(images_.data() + index * h_ * w_)).clone();
    s.label = labels_[size_t(index)];
    return s;
}

int64_t FashionMnistDataset::labelOf(int64_t index) const {
    if (index < 0 || index >= n_)
        throw Error("Fashion-MNIST " + split_ + ": index " + std::to_string(index) + " out of range (size " +
                    std::to_string(n_) + ")");
    return labels_[size_t(index)];
}

std::string FashionMnistDataset::describe() const {
    return "Fashion-MNIST " + split_ + " (" + std::to_string(n_) + " images " + std::to_string(w_) + "x" +
           std::to_string(h_) + ", " + dir_ + ")";
}

// ---- class folders ------------------------------------------------------------------------

ClassFolderDataset::ClassFolderDataset(std::string root, std::vector<std::string> classes, std::vector<Item> items,
                                       std::string splitName)
    : root_(std::move(root)), split_(std::move(splitName)), items_(std::move(items)) {
    classNames_ = std::move(classes);
}

ClassSample ClassFolderDataset::get(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(root_ + " (" + split_ + "): index " + std::to_string(index) + " out of range (size " +
                    std::to_string(size()) + ")");
    const Item& it = items_[size_t(index)];
    ClassSample s;
    s.image = loadImageRGB(it.path);   // throws Error naming the file
    s.label = it.label;
    return s;
}

int64_t ClassFolderDataset::labelOf(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(root_ + " (" + split_ + "): index " + std::to_string(index) + " out of range (size " +
                    std::to_string(size()) + ")");
    return items_[size_t(index)].label;
}

std::string ClassFolderDataset::describe() const {
    return "class folders " + root_ + " (" + split_ + ": " + std::to_string(size()) + " images, " +
           std::to_string(numClasses()) + " classes)";
}

namespace {

bool isImageFile(const fs::path& p) {
    const std::string ext = lowerExtension(p);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// Class folders of `dir` (sorted) and their image files (sorted).
std::vector<std::pair<std::string, std::vector<std::string>>> scanClasses(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": not a folder");
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    std::vector<fs::path> subdirs;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_directory() && e.path().filename().string()[0] != '.') subdirs.push_back(e.path());
    if (ec) throw Error(dir.string() + ": cannot list the folder (" + ec.message() + ")");
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& sd : subdirs) {
        std::vector<std::string> files;
        for (const auto& e : fs::directory_iterator(sd, ec))
            if (e.is_regular_file() && isImageFile(e.path())) files.push_back(e.path().string());
        std::sort(files.begin(), files.end());
        if (files.empty())
            throw Error(sd.string() + ": class folder has no images (.png, .jpg, .jpeg, .bmp)");
        out.emplace_back(sd.filename().string(), std::move(files));
    }
    if (out.empty())
        throw Error(dir.string() + ": no class folders (expected " + dir.string() + "/<class>/*.png|jpg)");
    if (out.size() < 2) throw Error(dir.string() + ": a classification dataset needs at least 2 class folders");
    return out;
}

} // namespace

ClassificationSplits openClassificationDataset(const std::string& spec, int holdoutEvery) {
    ClassificationSplits s;
    if (spec == "fashion-mnist" || spec.rfind("fashion-mnist:", 0) == 0) {
        const std::string dir = spec == "fashion-mnist" ? fashionMnistDefaultDir() : spec.substr(14);
        if (dir.empty()) throw Error("dataset spec '" + spec + "': empty folder after 'fashion-mnist:'");
        s.train = std::make_unique<FashionMnistDataset>(dir, "train");
        s.val = std::make_unique<FashionMnistDataset>(dir, "test");
        return s;
    }
    std::error_code ec;
    const fs::path root(spec);
    if (!fs::is_directory(root, ec))
        throw Error("dataset '" + spec + "': not a folder of class folders (nor 'fashion-mnist[:DIR]')");
    fs::path valDir;
    for (const char* v : {"val", "test"})
        if (fs::is_directory(root / v, ec)) {
            valDir = root / v;
            break;
        }
    if (fs::is_directory(root / "train", ec) && !valDir.empty()) {
        auto tr = scanClasses(root / "train");
        auto va = scanClasses(valDir);
        std::vector<std::string> names, vnames;
        for (auto& c : tr) names.push_back(c.first);
        for (auto& c : va) vnames.push_back(c.first);
        if (names != vnames)
            throw Error(spec + ": the class folders of train/ and " + valDir.filename().string() + "/ differ");
        auto items = [](const auto& classes) {
            std::vector<ClassFolderDataset::Item> out;
            for (size_t k = 0; k < classes.size(); ++k)
                for (const auto& f : classes[k].second) out.push_back({f, int64_t(k)});
            return out;
        };
        s.train = std::make_unique<ClassFolderDataset>(spec, names, items(tr), "train");
        s.val = std::make_unique<ClassFolderDataset>(spec, names, items(va), valDir.filename().string());
        return s;
    }
    if (holdoutEvery < 2) throw Error("class-folder dataset: holdout_every must be >= 2");
    auto classes = scanClasses(root);
    std::vector<std::string> names;
    std::vector<ClassFolderDataset::Item> train, val;
    int64_t i = 0;
    for (size_t k = 0; k < classes.size(); ++k) {
        names.push_back(classes[k].first);
        for (const auto& f : classes[k].second) {
            ((i + 1) % holdoutEvery == 0 ? val : train).push_back({f, int64_t(k)});
            ++i;
        }
    }
    if (train.empty() || val.empty())
        throw Error(spec + ": too few images to hold out every " + std::to_string(holdoutEvery) +
                    "th one for validation (" + std::to_string(i) + " images)");
    s.train = std::make_unique<ClassFolderDataset>(spec, names, std::move(train), "train");
    s.val = std::make_unique<ClassFolderDataset>(spec, names, std::move(val), "val (every " +
                                                                                 std::to_string(holdoutEvery) + "th)");
    return s;
}

cv::Mat toRgb(const cv::Mat& image) {
    if (image.empty()) throw Error("classification sample: empty image");
    if (image.type() == CV_8UC3) return image;
    if (image.type() == CV_8UC1) {
        cv::Mat rgb;
        cv::cvtColor(image, rgb, cv::COLOR_GRAY2RGB);
        return rgb;
    }
    throw Error("classification sample: expected an 8-bit gray or RGB image, got OpenCV type " +
                std::to_string(image.type()));
}

cv::Mat flipPadCrop(const cv::Mat& rgb, double hflip, int pad, std::mt19937_64& rng) {
    cv::Mat out = rgb;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (hflip > 0 && u(rng) < hflip) {
        cv::Mat f;
        cv::flip(out, f, 1);
        out = f;
    }
    if (pad > 0) {
        cv::Mat padded;
        cv::copyMakeBorder(out, padded, pad, pad, pad, pad, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
        std::uniform_int_distribution<int> d(0, 2 * pad);
        const int x = d(rng), y = d(rng);
        out = padded(cv::Rect(x, y, out.cols, out.rows)).clone();
    }
    return out;
}

} // namespace glimpse::data
