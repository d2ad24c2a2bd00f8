#include "core/data/wireframe.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/io/image.h"
#include "core/util/json_file.h"

namespace glimpse::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxRecords = 10'000'000;
constexpr int64_t kMaxLinesPerImage = 100'000;

std::string recordName(const std::string& file, size_t i, const std::string& fn) {
    std::string s = file + ": record " + std::to_string(i);
    if (!fn.empty()) s += " (" + fn + ")";
    return s;
}

} // namespace

WireframeLines::WireframeLines(const std::string& jsonPath) : path_(jsonPath) {
    std::error_code ec;
    if (!fs::exists(jsonPath, ec)) throw Error(jsonPath + ": no such file");
    if (fs::is_directory(jsonPath, ec)) throw Error(jsonPath + ": is a directory, expected a JSON file");
    dir_ = fs::path(jsonPath).parent_path().string();
    if (dir_.empty()) dir_ = ".";
    const nlohmann::json j = readJsonFile(jsonPath, "line dataset");
    if (!j.is_array()) throw Error(jsonPath + ": expected a JSON list of records, got " + std::string(j.type_name()));
    if (int64_t(j.size()) > kMaxRecords) throw Error(jsonPath + ": too many records (" + std::to_string(j.size()) + ")");
    records_.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
        const auto& r = j[i];
        if (!r.is_object()) throw Error(recordName(jsonPath, i, "") + ": not an object");
        WireframeRecord rec;
        if (!r.contains("filename") || !r["filename"].is_string() || r["filename"].get<std::string>().empty())
            throw Error(recordName(jsonPath, i, "") + ": missing or empty \"filename\"");
        rec.filename = r["filename"].get<std::string>();
        const fs::path fp(rec.filename);
        if (fp.is_absolute() || rec.filename.find("..") != std::string::npos)
            throw Error(recordName(jsonPath, i, rec.filename) + ": filename must be relative, without '..'");
        for (const char* key : {"width", "height"}) {
            if (!r.contains(key)) continue;
            const auto& v = r[key];
            if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxImageSide)
                throw Error(recordName(jsonPath, i, rec.filename) + ": \"" + key + "\" must be an integer in 1.." +
                            std::to_string(kMaxImageSide));
            (std::string(key) == "width" ? rec.width : rec.height) = int(v.get<int64_t>());
        }
        if (!r.contains("lines") || !r["lines"].is_array())
            throw Error(recordName(jsonPath, i, rec.filename) + ": missing \"lines\" list");
        const auto& ls = r["lines"];
        if (int64_t(ls.size()) > kMaxLinesPerImage)
            throw Error(recordName(jsonPath, i, rec.filename) + ": too many lines (" + std::to_string(ls.size()) + ")");
        rec.lines.reserve(ls.size() * 4);
        for (size_t k = 0; k < ls.size(); ++k) {
            const auto& l = ls[k];
            if (!l.is_array() || l.size() != 4)
                throw Error(recordName(jsonPath, i, rec.filename) + ": line " + std::to_string(k) +
                            " is not a list of 4 numbers [x1, y1, x2, y2]");
            for (int c = 0; c < 4; ++c) {
                if (!l[c].is_number())
                    throw Error(recordName(jsonPath, i, rec.filename) + ": line " + std::to_string(k) +
                                " has a non-numeric coordinate");
                const double v = l[c].get<double>();
                const int lim = (c % 2 == 0) ? rec.width : rec.height;
                if (!std::isfinite(v) || std::abs(v) > 1e6 || (lim > 0 && (v < -1.0 || v > lim + 1.0)))
                    throw Error(recordName(jsonPath, i, rec.filename) + ": line " + std::to_string(k) +
                                " has a coordinate outside the image (" + std::to_string(v) + ")");
                rec.lines.push_back(float(v));
            }
        }
        records_.push_back(std::move(rec));
    }
}

std::string WireframeLines::imagePath(int64_t index) const {
    const auto& fn = records_.at(size_t(index)).filename;
    const fs::path a = fs::path(dir_) / fn;
    std::error_code ec;
    if (fs::exists(a, ec)) return a.string();
    const fs::path b = fs::path(dir_) / "images" / fn;
    if (fs::exists(b, ec)) return b.string();
    return a.string();
}

LineSample WireframeLines::get(int64_t index) const {
    if (index < 0 || index >= size())
        throw Error(path_ + ": index " + std::to_string(index) + " out of range (" + std::to_string(size()) + " records)");
    const auto& rec = records_[size_t(index)];
    LineSample s;
    s.name = rec.filename;
    const std::string img = imagePath(index);
    try {
        s.image = loadImageRGB(img);
    } catch (const Error& e) {
        throw Error(recordName(path_, size_t(index), rec.filename) + ": " + e.what());
    }
    if ((rec.width > 0 && rec.width != s.image.cols) || (rec.height > 0 && rec.height != s.image.rows))
        throw Error(recordName(path_, size_t(index), rec.filename) + ": image is " + std::to_string(s.image.cols) +
                    "x" + std::to_string(s.image.rows) + " but the record says " + std::to_string(rec.width) + "x" +
                    std::to_string(rec.height));
    s.lines = torch::from_blob(const_cast<float*>(rec.lines.data()), {int64_t(rec.lines.size() / 4), 4},
                               torch::kFloat).clone();
    return s;
}

std::string WireframeLines::describe() const {
    return "wireframe " + path_ + " (" + std::to_string(records_.size()) + " images)";
}

std::string exportLineDataset(const LineDataset& ds, const std::string& dir, const std::string& name,
                              const std::function<void(int64_t, int64_t)>& progress, bool overlays) {
    std::error_code ec;
    fs::create_directories(fs::path(dir) / "images", ec);
    if (!ec && overlays) fs::create_directories(fs::path(dir) / "overlays", ec);
    if (ec) throw Error(dir + ": cannot create directory (" + ec.message() + ")");
    nlohmann::json list = nlohmann::json::array();
    const int64_t n = ds.size();
    for (int64_t i = 0; i < n; ++i) {
        LineSample s = ds.get(i);
        char fn[32];
        std::snprintf(fn, sizeof fn, "%06lld.png", static_cast<long long>(i));
        saveImagePNG((fs::path(dir) / "images" / fn).string(), s.image);
        nlohmann::json rec;
        rec["filename"] = fn;
        rec["width"] = s.image.cols;
        rec["height"] = s.image.rows;
        nlohmann::json lines = nlohmann::json::array();
        auto l = s.lines.defined() && s.lines.numel() ? s.lines.to(torch::kFloat).reshape({-1, 4}).contiguous()
                                                      : torch::zeros({0, 4});
        auto a = l.accessor<float, 2>();
        for (int64_t k = 0; k < l.size(0); ++k) lines.push_back({a[k][0], a[k][1], a[k][2], a[k][3]});
        if (overlays) {
            cv::Mat ov = s.image.clone();
            auto fx = [](float v) { return int(std::lround((v - 0.5) * 16)); };   // 4 fractional bits
            for (int64_t k = 0; k < l.size(0); ++k)
                cv::line(ov, cv::Point(fx(a[k][0]), fx(a[k][1])), cv::Point(fx(a[k][2]), fx(a[k][3])),
                         cv::Scalar(255, 0, 0), 1, cv::LINE_AA, 4);
            saveImagePNG((fs::path(dir) / "overlays" / fn).string(), ov);
        }
        rec["lines"] = std::move(lines);
        list.push_back(std::move(rec));
        if (progress) progress(i + 1, n);
    }
    const std::string path = (fs::path(dir) / (name + ".json")).string();
    const std::string text = list.dump();
    writeBytesAtomically(path, text.data(), text.size());
    return path;
}

} // namespace glimpse::data
