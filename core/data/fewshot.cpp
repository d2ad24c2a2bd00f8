#include "core/data/fewshot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include <opencv2/imgproc.hpp>

#include "core/data/composition.h"
#include "core/data/procedural_draw.h"
#include "core/error.h"
#include "core/util/path.h"

namespace glimpse::data {

namespace fs = std::filesystem;

namespace {

using namespace procgen;

constexpr uint64_t kKindTag = 0x6b696e64, kClassTag = 0x636c6173, kSampleTag = 0x73616d70, kEpisodeTag = 0x65706973;

// ---- procedural classes -------------------------------------------------------------------

enum Kind { kGlyph = 0, kTexture = 1, kShapes = 2 };
const char* kKindNames[3] = {"glyph", "texture", "shapes"};

struct Stroke {
    int type = 0;            // 0 line, 1 arc, 2 two-segment polyline
    double x[3], y[3];       // line: 2 points; polyline: 3 points; arc: centre in x[0], y[0]
    double ax = 0, ay = 0;   // arc half-axes
    double tilt = 0, start = 0, sweep = 0;   // arc angles (degrees)
};

struct Prim {
    int type = 0;   // 0 circle, 1 rectangle, 2 triangle, 3 ring
    double cx = 0, cy = 0, size = 0, aspect = 1, ring = 0.3;
    Rot rot;
    int colour = 0;
};

struct ClassGen {
    int kind = kGlyph;
    Rgb palette[3];
    double thickness = 0.06;   // glyph strokes, in image widths
    std::vector<Stroke> strokes;
    int pattern = 0;           // texture: 0 grating, 1 checker, 2 dots
    double freq = 4, dotRadius = 0.3;
    Rot orient;
    int window = 0;            // texture: 0 disc, 1 square
    double windowSize = 0.35;
    std::vector<Prim> prims;
};

int classKind(uint64_t seed, int64_t cls) {
    Draw r(idSeed(seed, kKindTag, uint64_t(cls)));
    return int(r.below(3));
}

Stroke randomStroke(Draw& r) {
    Stroke s;
    s.type = r.range(0, 2);
    for (int i = 0; i < 3; ++i) {
        s.x[i] = r.uni(0.22, 0.78);
        s.y[i] = r.uni(0.22, 0.78);
    }
    if (s.type == 1) {
        s.x[0] = r.uni(0.38, 0.62);
        s.y[0] = r.uni(0.38, 0.62);
        s.ax = r.uni(0.12, 0.28);
        s.ay = r.uni(0.12, 0.28);
        s.tilt = r.uni(0, 180);
        s.start = r.uni(0, 360);
        s.sweep = r.uni(100, 280);
    }
    return s;
}

Prim randomPrim(Draw& r, int colours) {
    Prim p;
    p.type = r.range(0, 3);
    p.cx = r.uni(0.28, 0.72);
    p.cy = r.uni(0.28, 0.72);
    p.size = r.uni(0.1, 0.2);
    p.aspect = r.uni(0.55, 1.0);
    p.ring = r.uni(0.25, 0.45);
    p.rot = rotation(r.uni(-1, 1));
    p.colour = r.range(0, colours - 1);
    return p;
}

ClassGen makeClass(uint64_t seed, int64_t cls) {
    ClassGen g;
    g.kind = classKind(seed, cls);
    Draw r(idSeed(seed, kClassTag, uint64_t(cls)));
    const double hue0 = r.uni(0, 6);
    for (int i = 0; i < 3; ++i) {   // hues spread around the circle, saturated
        const double h = std::fmod(hue0 + 2.0 * i + r.uni(-0.6, 0.6) + 6.0, 6.0);
        const double s = r.uni(0.55, 1.0), v = r.uni(0.45, 1.0);
        g.palette[i] = hsv(h, s, v);
    }
    if (g.kind == kGlyph) {
        g.thickness = r.uni(0.05, 0.09);
        const int n = r.range(2, 4);
        for (int i = 0; i < n; ++i) g.strokes.push_back(randomStroke(r));
    } else if (g.kind == kTexture) {
        g.pattern = r.range(0, 2);
        g.freq = r.uni(2.5, 6.0);
        g.dotRadius = r.uni(0.18, 0.36);
        g.orient = rotation(r.uni(-1, 1));
        g.window = r.range(0, 1);
        g.windowSize = r.uni(0.28, 0.4);
    } else {
        const int n = r.range(2, 4);
        const int colours = r.range(1, 3);
        for (int i = 0; i < n; ++i) g.prims.push_back(randomPrim(r, colours));
    }
    return g;
}

// ---- drawing one sample -------------------------------------------------------------------

void drawGlyph(Layer& L, const ClassGen& g, const Rgb* pal, Draw& r) {
    const int thick = L.px(g.thickness * r.uni(0.85, 1.15));
    const cv::Scalar col = scalar(pal[0]);
    for (const Stroke& s0 : g.strokes) {
        Stroke s = s0;
        for (int i = 0; i < 3; ++i) {
            s.x[i] += r.uni(-0.025, 0.025);
            s.y[i] += r.uni(-0.025, 0.025);
        }
        for (cv::Mat* m : {&L.fg, &L.mask}) {
            const cv::Scalar c = m == &L.fg ? col : cv::Scalar(255);
            if (s.type == 0) {
                cv::line(*m, L.at(s.x[0], s.y[0]), L.at(s.x[1], s.y[1]), c, thick, cv::LINE_AA, kShift);
            } else if (s.type == 1) {
                cv::ellipse(*m, L.at(s.x[0], s.y[0]), cv::Size(L.len(s.ax), L.len(s.ay)), s.tilt, s.start,
                            s.start + s.sweep, c, thick, cv::LINE_AA, kShift);
            } else {
                std::vector<std::vector<cv::Point>> pts{{L.at(s.x[0], s.y[0]), L.at(s.x[1], s.y[1]),
                                                         L.at(s.x[2], s.y[2])}};
                cv::polylines(*m, pts, false, c, thick, cv::LINE_AA, kShift);
            }
        }
    }
}

double smooth(double e0, double e1, double x) {
    const double t = clamp01((x - e0) / (e1 - e0));
    return t * t * (3 - 2 * t);
}
double tri(double v) { return std::fabs(v - std::floor(v) - 0.5) * 2.0; }   // triangle wave 0..1

void drawTexture(Layer& L, const ClassGen& g, const Rgb* pal, Draw& r) {
    const double freq = g.freq * r.uni(0.92, 1.08), pa = r.uni(0, 1), pb = r.uni(0, 1);
    const double cx = 0.5 + r.uni(-0.03, 0.03), cy = 0.5 + r.uni(-0.03, 0.03);
    const double half = g.windowSize * r.uni(0.92, 1.08);
    if (g.window == 0) {
        cv::circle(L.mask, L.at(cx, cy), L.len(half), cv::Scalar(255), cv::FILLED, cv::LINE_AA, kShift);
    } else {
        std::vector<std::vector<cv::Point>> sq{{L.at(cx - half, cy - half), L.at(cx + half, cy - half),
                                                L.at(cx + half, cy + half), L.at(cx - half, cy + half)}};
        cv::fillPoly(L.mask, sq, cv::Scalar(255), cv::LINE_AA, kShift);
    }
    const Rgb a = pal[0], b = pal[1];
    for (int y = 0; y < L.w; ++y)
        for (int x = 0; x < L.w; ++x) {
            const double u = (x + 0.5) / L.w - 0.5, v = (y + 0.5) / L.w - 0.5;
            const double s = (u * g.orient.c + v * g.orient.s) * freq + pa;
            const double t = (-u * g.orient.s + v * g.orient.c) * freq + pb;
            double k;
            if (g.pattern == 0) k = smooth(0.35, 0.65, tri(s));
            else if (g.pattern == 1) k = clamp01(0.5 + (tri(s) - 0.5) * (tri(t) - 0.5) * 12.0);
            else {
                const double fa = s - std::floor(s) - 0.5, fb = t - std::floor(t) - 0.5;
                k = clamp01((g.dotRadius * g.dotRadius - fa * fa - fb * fb) * 40.0 + 0.5);
            }
            const double m = L.mask.at<uint8_t>(y, x) / 255.0;
            cv::Vec3b& o = L.fg.at<cv::Vec3b>(y, x);
            o[0] = byte(m * (a.r + (b.r - a.r) * k));
            o[1] = byte(m * (a.g + (b.g - a.g) * k));
            o[2] = byte(m * (a.b + (b.b - a.b) * k));
        }
}

void drawPrim(Layer& L, const Prim& p, const cv::Scalar& col, cv::Mat& m) {
    const cv::Point c = L.at(p.cx, p.cy);
    if (p.type == 0 || p.type == 3) {
        if (p.type == 0) {
            cv::circle(m, c, L.len(p.size), col, cv::FILLED, cv::LINE_AA, kShift);
        } else {
            const double t = p.size * p.ring;
            cv::circle(m, c, L.len(p.size - t / 2), col, L.px(t), cv::LINE_AA, kShift);
        }
        return;
    }
    // Rectangle corners or an (aspect-squashed) equilateral triangle, rotated.
    static const double rect[4][2] = {{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};
    static const double triangle[3][2] = {{0, -1.15}, {1.0, 0.58}, {-1.0, 0.58}};
    const int n = p.type == 1 ? 4 : 3;
    std::vector<std::vector<cv::Point>> poly(1);
    for (int i = 0; i < n; ++i) {
        const double* q = p.type == 1 ? rect[i] : triangle[i];
        const double qx = q[0] * p.size, qy = q[1] * p.size * p.aspect;
        poly[0].push_back(L.at(p.cx + qx * p.rot.c - qy * p.rot.s, p.cy + qx * p.rot.s + qy * p.rot.c));
    }
    cv::fillPoly(m, poly, col, cv::LINE_AA, kShift);
}

void drawShapes(Layer& L, const ClassGen& g, const Rgb* pal, Draw& r) {
    for (const Prim& p0 : g.prims) {
        Prim p = p0;
        p.cx += r.uni(-0.03, 0.03);
        p.cy += r.uni(-0.03, 0.03);
        p.size *= r.uni(0.9, 1.1);
        drawPrim(L, p, scalar(pal[p.colour]), L.fg);
        drawPrim(L, p, cv::Scalar(255), L.mask);
    }
}

void checkClass(int64_t cls, const char* what) {
    if (cls < 0) throw Error(std::string(what) + ": class id " + std::to_string(cls) + " is negative");
}

} // namespace

std::string proceduralFewShotKind(uint64_t seed, int64_t cls) {
    checkClass(cls, "proceduralFewShotKind");
    return kKindNames[classKind(seed, cls)];
}

cv::Mat renderProceduralFewShot(uint64_t seed, int64_t cls, int64_t sample, int size) {
    checkClass(cls, "renderProceduralFewShot");
    if (sample < 0) throw Error("renderProceduralFewShot: sample " + std::to_string(sample) + " is negative");
    if (size < 8 || size > 1024)
        throw Error("renderProceduralFewShot: image size " + std::to_string(size) + " is outside 8..1024");
    const ClassGen g = makeClass(seed, cls);
    Draw r(idSeed(seed, kSampleTag, uint64_t(cls), uint64_t(sample)));
    const int w = 2 * size;
    Rgb pal[3];   // colour jitter: a gain per channel and a brightness shift per sample
    const double gr = r.uni(0.8, 1.2), gg = r.uni(0.8, 1.2), gb = r.uni(0.8, 1.2), shift = r.uni(-25, 25);
    for (int i = 0; i < 3; ++i)
        pal[i] = {double(byte(g.palette[i].r * gr + shift)), double(byte(g.palette[i].g * gg + shift)),
                  double(byte(g.palette[i].b * gb + shift))};
    Layer L{cv::Mat(w, w, CV_8UC3, cv::Scalar::all(0)), cv::Mat(w, w, CV_8UC1, cv::Scalar(0)), w};
    if (g.kind == kGlyph) drawGlyph(L, g, pal, r);
    else if (g.kind == kTexture) drawTexture(L, g, pal, r);
    else drawShapes(L, g, pal, r);
    const cv::Mat m = sampleAffine(r, w);
    cv::Mat fg, mask;
    cv::warpAffine(L.fg, fg, m, L.fg.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
    cv::warpAffine(L.mask, mask, m, L.mask.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar(0));
    return compositeSample(r, background(r, w), fg, mask, size);
}

// ---- RenderedFewShotDataset -------------------------------------------------------------

RenderedFewShotDataset::RenderedFewShotDataset(std::string family, Render render, uint64_t seed, int64_t firstClass,
                                               int64_t count, int64_t samplesPerClass, int imageSize)
    : family_(std::move(family)), render_(render), seed_(seed), first_(firstClass), count_(count),
      perClass_(samplesPerClass), size_(imageSize) {
    const std::string what = family_ + " few-shot dataset: ";
    if (firstClass < 0) throw Error(what + "first class " + std::to_string(firstClass) + " is negative");
    if (count < 1) throw Error(what + std::to_string(count) + " classes (need at least 1)");
    if (samplesPerClass < 1)
        throw Error(what + std::to_string(samplesPerClass) + " samples per class (need at least 1)");
    if (imageSize < 8 || imageSize > 1024)
        throw Error(what + "image size " + std::to_string(imageSize) + " is outside 8..1024");
}

void RenderedFewShotDataset::check(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(describe() + ": index " + std::to_string(index) + " out of range (size " +
                    std::to_string(size()) + ")");
}

ClassSample RenderedFewShotDataset::get(int64_t index) const {
    check(index);
    ClassSample s;
    s.label = index / perClass_;
    s.image = render_(seed_, first_ + s.label, index % perClass_, size_);
    return s;
}

int64_t RenderedFewShotDataset::labelOf(int64_t index) const {
    check(index);
    return index / perClass_;
}

std::string RenderedFewShotDataset::describe() const {
    return family_ + " few-shot (seed " + std::to_string(seed_) + ", classes " + std::to_string(first_) + "-" +
           std::to_string(first_ + count_ - 1) + ": " + std::to_string(count_) + " x " + std::to_string(perClass_) +
           " images " + std::to_string(size_) + "x" + std::to_string(size_) + ")";
}

// ---- ProceduralFewShotDataset -------------------------------------------------------------

ProceduralFewShotDataset::ProceduralFewShotDataset(uint64_t seed, int64_t firstClass, int64_t count,
                                                   int64_t samplesPerClass, int imageSize)
    : RenderedFewShotDataset("procedural", renderProceduralFewShot, seed, firstClass, count, samplesPerClass,
                             imageSize) {
    for (int64_t k = 0; k < count; ++k) {
        char id[32];
        std::snprintf(id, sizeof id, "proc-%03lld-", static_cast<long long>(firstClass + k));
        classNames_.push_back(id + proceduralFewShotKind(seed, firstClass + k));
    }
}

// ---- ClassSubsetDataset -------------------------------------------------------------------

ClassSubsetDataset::ClassSubsetDataset(std::shared_ptr<const ClassificationDataset> source, std::vector<int64_t> keep)
    : source_(std::move(source)), keep_(std::move(keep)) {
    if (!source_) throw Error("class subset: no source dataset");
    const std::string what = "class subset of " + source_->describe();
    if (keep_.empty()) throw Error(what + ": no classes kept");
    const int64_t n = source_->numClasses();
    std::vector<int64_t> newLabel(size_t(n), -1);
    for (size_t k = 0; k < keep_.size(); ++k) {
        const int64_t l = keep_[k];
        if (l < 0 || l >= n)
            throw Error(what + ": class " + std::to_string(l) + " out of range (" + std::to_string(n) + " classes)");
        if (newLabel[size_t(l)] >= 0)
            throw Error(what + ": class '" + source_->classNames()[size_t(l)] + "' is kept twice");
        newLabel[size_t(l)] = int64_t(k);
        classNames_.push_back(source_->classNames()[size_t(l)]);
    }
    std::vector<int64_t> counts(keep_.size(), 0);
    for (int64_t i = 0; i < source_->size(); ++i) {
        const int64_t l = source_->labelOf(i);
        if (l < 0 || l >= n || newLabel[size_t(l)] < 0) continue;
        indices_.push_back(i);
        labels_.push_back(newLabel[size_t(l)]);
        counts[size_t(newLabel[size_t(l)])]++;
    }
    for (size_t k = 0; k < keep_.size(); ++k)
        if (counts[k] == 0) throw Error(what + ": class '" + classNames_[k] + "' has no samples");
}

int64_t ClassSubsetDataset::sourceIndex(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(describe() + ": index " + std::to_string(index) + " out of range (size " +
                    std::to_string(size()) + ")");
    return indices_[size_t(index)];
}

ClassSample ClassSubsetDataset::get(int64_t index) const {
    ClassSample s = source_->get(sourceIndex(index));
    s.label = labels_[size_t(index)];
    return s;
}

int64_t ClassSubsetDataset::labelOf(int64_t index) const {
    sourceIndex(index);
    return labels_[size_t(index)];
}

std::string ClassSubsetDataset::describe() const {
    std::string names;
    if (keep_.size() <= 10) {
        for (size_t k = 0; k < classNames_.size(); ++k) names += (k ? ", " : "") + classNames_[k];
    } else {
        names = std::to_string(keep_.size()) + " of " + std::to_string(source_->numClasses());
    }
    return source_->describe() + ", classes {" + names + "}: " + std::to_string(size()) + " images";
}

// ---- opening splits -----------------------------------------------------------------------

namespace {

bool isImageFile(const fs::path& p) {
    const std::string ext = lowerExtension(p);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// One split folder of the mini-ImageNet layout: its class folders (sorted) and their images.
std::shared_ptr<ClassFolderDataset> openSplitFolder(const std::string& spec, const fs::path& dir,
                                                     const std::string& split) {
    std::error_code ec;
    std::vector<fs::path> subdirs;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_directory() && e.path().filename().string()[0] != '.') subdirs.push_back(e.path());
    if (ec) throw Error(dir.string() + ": cannot list the folder (" + ec.message() + ")");
    std::sort(subdirs.begin(), subdirs.end());
    if (subdirs.empty())
        throw Error(dir.string() + ": the " + split + " split has no class folders (expected " + dir.string() +
                    "/<class>/*.png|jpg)");
    std::vector<std::string> names;
    std::vector<ClassFolderDataset::Item> items;
    for (const auto& sd : subdirs) {
        std::vector<std::string> files;
        for (const auto& e : fs::directory_iterator(sd, ec))
            if (e.is_regular_file() && isImageFile(e.path())) files.push_back(e.path().string());
        if (ec) throw Error(sd.string() + ": cannot list the folder (" + ec.message() + ")");
        if (files.empty()) throw Error(sd.string() + ": class folder has no images (.png, .jpg, .jpeg, .bmp)");
        std::sort(files.begin(), files.end());
        for (auto& f : files) items.push_back({std::move(f), int64_t(names.size())});
        names.push_back(sd.filename().string());
    }
    return std::make_shared<ClassFolderDataset>(spec, std::move(names), std::move(items), split);
}

void checkDisjoint(const std::string& spec, const ClassificationDataset& a, const std::string& an,
                   const ClassificationDataset& b, const std::string& bn) {
    const std::set<std::string> names(a.classNames().begin(), a.classNames().end());
    for (const auto& c : b.classNames())
        if (names.count(c))
            throw Error(spec + ": class '" + c + "' is in both " + an + "/ and " + bn +
                        "/ (few-shot splits need disjoint classes)");
}

void openFolderSplits(FewShotSplits& s, const std::string& spec) {
    std::error_code ec;
    const fs::path root(spec);
    const std::string layout = " (few-shot layout: " + spec + "/train/<class>/*, " + spec + "/test/<class>/*, optional " +
                               spec + "/val/<class>/*)";
    for (const char* need : {"train", "test"})
        if (!fs::is_directory(root / need, ec)) throw Error(spec + ": no " + need + "/ folder" + layout);
    s.base = openSplitFolder(spec, root / "train", "train");
    s.novel = openSplitFolder(spec, root / "test", "test");
    checkDisjoint(spec, *s.base, "train", *s.novel, "test");
    if (fs::is_directory(root / "val", ec)) {
        s.val = openSplitFolder(spec, root / "val", "val");
        checkDisjoint(spec, *s.base, "train", *s.val, "val");
        checkDisjoint(spec, *s.val, "val", *s.novel, "test");
    } else {
        s.val = s.novel;
    }
}

uint64_t parseSeed(const std::string& spec, const std::string& text) {
    if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
        throw Error("few-shot dataset '" + spec + "': seed '" + text + "' is not a non-negative integer");
    try {
        return std::stoull(text);
    } catch (const std::exception&) {
        throw Error("few-shot dataset '" + spec + "': seed '" + text + "' is too large");
    }
}

// A generated family's base, val and novel splits: consecutive class ranges, 600 images a class.
template <class Dataset>
void fillRenderedSplits(FewShotSplits& s, uint64_t seed, int64_t base, int64_t val, int64_t novel) {
    s.base = std::make_shared<Dataset>(seed, 0, base, 600, s.imageSize);
    s.val = std::make_shared<Dataset>(seed, base, val, 600, s.imageSize);
    s.novel = std::make_shared<Dataset>(seed, base + val, novel, 600, s.imageSize);
}

} // namespace

FewShotSplits openFewShotDataset(const std::string& spec, int imageSize) {
    if (imageSize < 8 || imageSize > 1024)
        throw Error("few-shot dataset '" + spec + "': image size " + std::to_string(imageSize) + " is outside 8..1024");
    FewShotSplits s;
    s.spec = spec;
    s.imageSize = imageSize;
    if (spec == "procedural" || spec.rfind("procedural:", 0) == 0) {
        const uint64_t seed = spec == "procedural" ? 0 : parseSeed(spec, spec.substr(11));
        fillRenderedSplits<ProceduralFewShotDataset>(s, seed, kProceduralBaseClasses, kProceduralValClasses,
                                                     kProceduralNovelClasses);
        return s;
    }
    if (spec == "composition" || spec.rfind("composition:", 0) == 0) {
        const uint64_t seed = spec == "composition" ? 0 : parseSeed(spec, spec.substr(12));
        fillRenderedSplits<CompositionFewShotDataset>(s, seed, kCompositionBaseClasses, kCompositionValClasses,
                                                      kCompositionNovelClasses);
        return s;
    }
    if (spec == "fashion-mnist" || spec.rfind("fashion-mnist:", 0) == 0) {
        const std::string dir = spec == "fashion-mnist" ? fashionMnistDefaultDir() : spec.substr(14);
        if (dir.empty()) throw Error("few-shot dataset '" + spec + "': empty folder after 'fashion-mnist:'");
        auto train = std::make_shared<FashionMnistDataset>(dir, "train");
        auto test = std::make_shared<FashionMnistDataset>(dir, "test");
        s.base = std::make_shared<ClassSubsetDataset>(train, std::vector<int64_t>{0, 1, 2, 3, 4});
        s.val = std::make_shared<ClassSubsetDataset>(train, std::vector<int64_t>{5, 6, 7, 8, 9});
        s.novel = std::make_shared<ClassSubsetDataset>(test, std::vector<int64_t>{5, 6, 7, 8, 9});
        return s;
    }
    std::error_code ec;
    if (spec.empty() || !fs::is_directory(spec, ec))
        throw Error("few-shot dataset '" + spec +
                    "': no such folder, and not 'procedural[:SEED]', 'composition[:SEED]' or 'fashion-mnist[:DIR]'");
    openFolderSplits(s, spec);
    return s;
}

std::string FewShotSplits::describe() const {
    std::string out = "few-shot dataset '" + spec + "' (model input " + std::to_string(imageSize) + "x" +
                      std::to_string(imageSize) + ")";
    out += "\n  base:  " + (base ? base->describe() : std::string("none"));
    out += "\n  val:   " + (!val ? std::string("none") : val == novel ? "the novel split" : val->describe());
    out += "\n  novel: " + (novel ? novel->describe() : std::string("none"));
    return out;
}

cv::Mat fewShotInput(const cv::Mat& image, int size) {
    if (size < 1) throw Error("few-shot input: image size " + std::to_string(size) + " must be positive");
    cv::Mat rgb = toRgb(image);
    if (rgb.rows == size && rgb.cols == size) return rgb;
    cv::Mat out;
    const bool shrink = rgb.rows >= size && rgb.cols >= size;
    cv::resize(rgb, out, cv::Size(size, size), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    return out;
}

// ---- episodes -----------------------------------------------------------------------------

EpisodeSampler::EpisodeSampler(std::shared_ptr<const ClassificationDataset> ds, std::string name)
    : ds_(std::move(ds)), name_(std::move(name)) {
    if (!ds_) throw Error("episode sampler '" + name_ + "': no dataset");
    byClass_.resize(size_t(ds_->numClasses()));
    for (int64_t i = 0; i < ds_->size(); ++i) {
        const int64_t l = ds_->labelOf(i);
        if (l < 0 || l >= ds_->numClasses())
            throw Error(name_ + ": sample " + std::to_string(i) + " has label " + std::to_string(l) + " outside 0.." +
                        std::to_string(ds_->numClasses() - 1));
        byClass_[size_t(l)].push_back(i);
    }
}

int64_t EpisodeSampler::minClassSize() const {
    int64_t m = byClass_.empty() ? 0 : INT64_MAX;
    for (const auto& c : byClass_) m = std::min(m, int64_t(c.size()));
    return m;
}

Episode EpisodeSampler::sample(const EpisodeSpec& spec, uint64_t seed, int64_t episode) const {
    if (spec.ways < 2) throw Error(name_ + ": episodes need at least 2 ways (got " + std::to_string(spec.ways) + ")");
    if (spec.ways > numClasses())
        throw Error(std::to_string(spec.ways) + "-way episodes need " + std::to_string(spec.ways) + " classes; " +
                    name_ + " has " + std::to_string(numClasses()));
    if (spec.shots < 1) throw Error(name_ + ": episodes need at least 1 shot (got " + std::to_string(spec.shots) + ")");
    if (spec.queries < 1)
        throw Error(name_ + ": episodes need at least 1 query per class (got " + std::to_string(spec.queries) + ")");
    const int64_t need = spec.shots + spec.queries;
    size_t smallest = 0;
    for (size_t c = 1; c < byClass_.size(); ++c)
        if (byClass_[c].size() < byClass_[smallest].size()) smallest = c;
    if (int64_t(byClass_[smallest].size()) < need)
        throw Error(name_ + ": " + std::to_string(spec.shots) + "-shot episodes with " +
                    std::to_string(spec.queries) + " queries need " + std::to_string(need) +
                    " samples per class, but class '" + ds_->classNames()[smallest] + "' has only " +
                    std::to_string(byClass_[smallest].size()) + " samples");
    Draw r(idSeed(seed, kEpisodeTag, uint64_t(episode)));
    // Partial Fisher-Yates: the first `ways` classes, then per class the first shots + queries.
    std::vector<int64_t> classes(byClass_.size());
    for (size_t c = 0; c < classes.size(); ++c) classes[c] = int64_t(c);
    for (int64_t i = 0; i < spec.ways; ++i)
        std::swap(classes[size_t(i)], classes[size_t(i + r.below(int64_t(classes.size()) - i))]);
    Episode e;
    e.classes.assign(classes.begin(), classes.begin() + spec.ways);
    for (int64_t c : e.classes) {
        std::vector<int64_t> idx = byClass_[size_t(c)];
        for (int64_t i = 0; i < need; ++i)
            std::swap(idx[size_t(i)], idx[size_t(i + r.below(int64_t(idx.size()) - i))]);
        e.support.insert(e.support.end(), idx.begin(), idx.begin() + spec.shots);
        e.query.insert(e.query.end(), idx.begin() + spec.shots, idx.begin() + need);
    }
    return e;
}

double confidence95(const std::vector<double>& accs) {
    const size_t n = accs.size();
    if (n < 2) return 0.0;
    double mean = 0;
    for (double a : accs) mean += a;
    mean /= double(n);
    double ss = 0;
    for (double a : accs) ss += (a - mean) * (a - mean);
    return 1.96 * std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
}

} // namespace glimpse::data
