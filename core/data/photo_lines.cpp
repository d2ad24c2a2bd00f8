#include "core/data/photo_lines.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <torch/torch.h>

#include "core/error.h"
#include "core/eval/lsd.h"
#include "core/io/image.h"

namespace glimpse::data {

namespace fs = std::filesystem;

torch::Tensor lsdPseudoLines(const cv::Mat& rgb, const LsdLabelOptions& o) {
    if (rgb.empty() || rgb.type() != CV_8UC3) throw Error("LSD labels: expected a non-empty RGB image");
    const double minLength = o.minLengthFraction * double(std::max(rgb.cols, rgb.rows));
    struct Seg {
        float v[4];
        double length;
    };
    std::vector<Seg> kept;
    for (const auto& l : eval::detectLsd(rgb)) {
        const double len = std::hypot(double(l.x2) - l.x1, double(l.y2) - l.y1);
        if (len >= minLength) kept.push_back({{l.x1, l.y1, l.x2, l.y2}, len});
    }
    std::stable_sort(kept.begin(), kept.end(), [](const Seg& a, const Seg& b) { return a.length > b.length; });
    if (int64_t(kept.size()) > o.maxLines) kept.resize(size_t(std::max(0, o.maxLines)));
    auto out = torch::empty({int64_t(kept.size()), 4}, torch::kFloat);
    auto acc = out.accessor<float, 2>();
    for (size_t i = 0; i < kept.size(); ++i)
        for (int c = 0; c < 4; ++c)
            acc[int64_t(i)][c] = std::clamp(kept[i].v[c], 0.f, float(c % 2 == 0 ? rgb.cols : rgb.rows));
    return out;
}

LsdPhotoLines::LsdPhotoLines(const std::string& source, LsdLabelOptions o)
    : source_(source), opt_(o), paths_(listImageFiles(source, true)) {}

LineSample LsdPhotoLines::get(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(source_ + ": index " + std::to_string(index) + " out of range (" + std::to_string(size()) + " images)");
    LineSample s;
    const std::string& path = paths_[size_t(index)];
    s.name = fs::path(path).filename().string();
    s.image = loadImageRGB(path);   // errors name the file
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = labels_.find(index);
        if (it != labels_.end()) {
            s.lines = it->second.clone();
            return s;
        }
    }
    torch::Tensor lines = lsdPseudoLines(s.image, opt_);
    std::lock_guard<std::mutex> lock(mutex_);
    labels_.emplace(index, lines);
    s.lines = lines.clone();
    return s;
}

std::string LsdPhotoLines::describe() const {
    return "lsd:" + source_ + " (" + std::to_string(paths_.size()) + " photos, LSD pseudo-lines)";
}

MixedLines::MixedLines(std::vector<std::unique_ptr<LineDataset>> parts) : parts_(std::move(parts)) {
    if (parts_.empty()) throw Error("mixed dataset: no parts");
    for (const auto& p : parts_) {
        if (!p || p->size() < 1) throw Error("mixed dataset: part '" + (p ? p->describe() : std::string("?")) + "' is empty");
        largest_ = std::max(largest_, p->size());
    }
}

int64_t MixedLines::size() const { return int64_t(parts_.size()) * largest_; }

LineSample MixedLines::get(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error("mixed dataset: index " + std::to_string(index) + " out of range (" + std::to_string(size()) + ")");
    const int64_t k = int64_t(parts_.size());
    const auto& part = parts_[size_t(index % k)];
    return part->get((index / k) % part->size());
}

std::string MixedLines::describe() const {
    std::string s;
    for (size_t i = 0; i < parts_.size(); ++i) s += (i ? " + " : "") + parts_[i]->describe();
    return s;
}

} // namespace glimpse::data
