#include "core/data/photo_lines.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

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

std::vector<std::string> listImages(const std::string& source) {
    std::error_code ec;
    std::vector<std::string> out;
    auto isImage = [](const fs::path& p) {
        std::string ext = p.extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".tif" || ext == ".tiff" ||
               ext == ".webp";
    };
    if (fs::is_directory(source, ec)) {
        for (const auto& e : fs::directory_iterator(source, ec))
            if (e.is_regular_file(ec) && isImage(e.path())) out.push_back(e.path().string());
        if (ec) throw Error(source + ": cannot list the folder (" + ec.message() + ")");
        std::sort(out.begin(), out.end());
        if (out.empty()) throw Error(source + ": no images in the folder (.png, .jpg, .jpeg, .bmp, .tif, .webp)");
        return out;
    }
    if (!fs::exists(source, ec)) throw Error(source + ": no such folder or image list");
    std::ifstream in(source);
    if (!in) throw Error(source + ": cannot open the image list");
    const fs::path base = fs::path(source).parent_path();
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        size_t b = 0;
        while (b < line.size() && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
        line = line.substr(b);
        if (line.empty() || line[0] == '#') continue;
        if (line.find('\0') != std::string::npos) throw Error(source + ": line " + std::to_string(n) + ": not text");
        const fs::path p = fs::path(line).is_absolute() ? fs::path(line) : base / line;
        if (!fs::is_regular_file(p, ec))
            throw Error(source + ": line " + std::to_string(n) + ": no such image file '" + p.string() + "'");
        out.push_back(p.string());
        if (out.size() > 10'000'000) throw Error(source + ": too many images");
    }
    if (out.empty()) throw Error(source + ": the image list names no images");
    return out;
}

LsdPhotoLines::LsdPhotoLines(const std::string& source, LsdLabelOptions o)
    : source_(source), opt_(o), paths_(listImages(source)) {}

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
