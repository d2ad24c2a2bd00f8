// glimpse infer --model constellation: run ConstellationNet headless on one image, a folder or a
// list, and write a trace per image, optionally a JSON summary (top-5, each module's cluster
// histogram) and a PNG of one module's cluster map.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/constellation/cli.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/io/image.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "core/util/json_file.h"
#include "core/util/threads.h"

namespace glimpse::app::constellation {

using namespace glimpse::constellation;
namespace fs = std::filesystem;

const char* kInferSynopsis =
    "(--checkpoint C.h5 | --random-seed S [--config C.json]) --image I|DIR|list.txt --out trace.h5|DIR "
    "[--json OUT.json|DIR] [--png OUT.png|DIR] [--module NAME|INDEX] [--opacity 0.6] [--threads T]";

namespace {

const char* kInferUsage =
    "usage: glimpse infer --model constellation (--checkpoint C.h5 | --random-seed S [--config C.json])\n"
    "                     --image I.png|DIR|list.txt --out trace.h5|DIR [--json OUT.json|DIR]\n"
    "                     [--png OUT.png|DIR] [--module NAME|INDEX] [--opacity 0.6] [--threads T]\n"
    "Runs ConstellationNet (eval mode) on each image and writes its trace (every constellation\n"
    "module's cell-to-cluster similarity map and cell relation attention, the base-class\n"
    "probabilities; the GUI's inspector opens it). With a folder or a .txt list of images (one\n"
    "path per line, relative to the list), --out, --json and --png are folders and files are\n"
    "named after the images.\n"
    "--json: the top-5 base classes and, per constellation module, its grid and the histogram of\n"
    "its cells' best clusters (cells per cluster, K entries).\n"
    "--png: the cluster map of one module (--module: its name, e.g. stem.0 or\n"
    "branch1.0.mergeblock1, or its index in execution order; default 0): each cell in its\n"
    "cluster's colour (the inspector's palette) over the image at --opacity, at the image's own\n"
    "size (at least 256 pixels on the long side).\n"
    "--random-seed runs a randomly initialized model (--config: a ConstellationNet config JSON,\n"
    "docs/models.md) for trying the pipeline; its clusters mean nothing.\n";

struct Outputs {
    std::string trace;
    std::optional<std::string> png, json;
    bool many = false;
    std::string path(const std::string& spec, const std::string& image, const char* ext) const {
        if (!many) return spec;
        return (fs::path(spec) / (fs::path(image).stem().string() + ext)).string();
    }
};

// The module a --module value names: an index in execution order or a module name.
int resolveModule(const ConstellationModel& model, const std::string& spec) {
    const auto mods = model.constellationModules();
    std::string names;
    for (size_t i = 0; i < mods.size(); ++i) {
        if (mods[i].name == spec) return int(i);
        names += (i ? ", " : "") + mods[i].name;
    }
    if (mods.empty())
        throw Error("--module " + spec + ": the model (" + model.config().describe() +
                    ") has no constellation modules, so there is no cluster map");
    char* end = nullptr;
    const long v = std::strtol(spec.c_str(), &end, 10);
    if (!spec.empty() && *end == '\0') {
        if (v >= 0 && v < long(mods.size())) return int(v);
        throw Error("--module " + spec + ": the model has modules 0.." + std::to_string(mods.size() - 1) + " (" + names + ")");
    }
    throw Error("--module " + spec + ": no such constellation module (the model has " + names + ")");
}

// Cells per best cluster [K] of module m.
std::vector<int64_t> histogram(const ConstellationTrace& t, int m) {
    auto counts = torch::bincount(t.assignment(m).flatten(), {}, t.clusters()).to(torch::kInt64).contiguous();
    return std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
}

nlohmann::json summary(const std::string& image, const ConstellationTrace& t, const std::string& modelDesc) {
    nlohmann::json j;
    j["image"] = image;
    j["height"] = t.originalSize().first;
    j["width"] = t.originalSize().second;
    j["model"] = modelDesc;
    j["input_size"] = t.inputSize();
    j["clusters"] = t.clusters();
    j["top5"] = nlohmann::json::array();
    for (const auto& c : t.top5()) j["top5"].push_back({{"class", c.classIndex}, {"name", c.name}, {"prob", c.prob}});
    j["modules"] = nlohmann::json::array();
    for (int m = 0; m < t.numModules(); ++m) {
        const auto& mod = t.module(m);
        const auto h = histogram(t, m);
        j["modules"].push_back({{"index", m},
                                {"name", mod.name},
                                {"layer", mod.layer},
                                {"branch", mod.branch},
                                {"grid", {mod.h, mod.w}},
                                {"relation", mod.relation},
                                {"clusters_present", std::count_if(h.begin(), h.end(), [](int64_t c) { return c > 0; })},
                                {"histogram", h}});
    }
    return j;
}

// Module m's cluster map over `rgb` (the original image, scaled up to >= 256 px on the long
// side): pixel (x, y) lies in cell (y h / H, x w / W), as the image is resized to S x S.
cv::Mat clusterOverlay(const cv::Mat& rgb, const ConstellationTrace& t, int m, double opacity) {
    cv::Mat img = rgb;
    const int longSide = std::max(rgb.cols, rgb.rows);
    if (longSide < 256) {
        const double f = 256.0 / longSide;
        cv::resize(rgb, img, cv::Size(std::max(1, int(std::lround(rgb.cols * f))), std::max(1, int(std::lround(rgb.rows * f)))),
                   0, 0, cv::INTER_NEAREST);
    }
    const auto& mod = t.module(m);
    const auto a = t.assignment(m).contiguous();
    const int64_t* cell = a.data_ptr<int64_t>();
    cv::Mat out(img.size(), CV_8UC3);
    for (int y = 0; y < img.rows; ++y) {
        const int64_t cy = std::min<int64_t>(mod.h - 1, int64_t(y) * mod.h / img.rows);
        for (int x = 0; x < img.cols; ++x) {
            const int64_t cx = std::min<int64_t>(mod.w - 1, int64_t(x) * mod.w / img.cols);
            const cv::Vec3b c = clusterColour(cell[cy * mod.w + cx]);
            const cv::Vec3b p = img.at<cv::Vec3b>(y, x);
            cv::Vec3b o;
            for (int k = 0; k < 3; ++k) o[k] = cv::saturate_cast<uint8_t>((1.0 - opacity) * p[k] + opacity * c[k]);
            out.at<cv::Vec3b>(y, x) = o;
        }
    }
    return out;
}

} // namespace

int inferCommand(const std::vector<std::string>& argv) {
    if (argv.empty() || argv[0] == "--help" || argv[0] == "-h") {
        std::cerr << kInferUsage;
        return argv.empty() ? 2 : 0;
    }
    cli::Args a(argv);
    double opacity = 0.6;
    try {
        a.checkKnown({"--model", "--checkpoint", "--random-seed", "--config", "--image", "--out", "--json", "--png",
                      "--module", "--opacity", "--threads"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--image") || !a.has("--out")) throw Error("--image and --out are required");
        if (a.has("--checkpoint") == a.has("--random-seed")) throw Error("give either --checkpoint C.h5 or --random-seed S");
        if (a.has("--checkpoint") && a.has("--config"))
            throw Error("--config only goes with --random-seed (a checkpoint has its own)");
        opacity = a.getDouble("--opacity", 0.6);
        if (!(opacity >= 0 && opacity <= 1)) throw Error("--opacity must lie in [0, 1]");
        if (a.has("--module") && !a.has("--png")) throw Error("--module chooses the module of --png; give --png too");
    } catch (const Error& e) {
        std::cerr << "glimpse infer: " << e.what() << "\n" << kInferUsage;
        return 2;
    }
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        setComputeThreads(int(t));
    }
    std::shared_ptr<ConstellationModel> model;
    std::string desc;
    if (a.has("--checkpoint")) {
        desc = a.require("--checkpoint");
        model = loadConstellation(desc);
    } else {
        const long long seed = a.getInt("--random-seed", 0);
        if (seed < 0) throw Error("--random-seed: expected a non-negative integer");
        ConstellationConfig cfg;
        if (a.has("--config")) cfg = ConstellationConfig::fromJson(readJsonFile(a.require("--config"), "config"), a.require("--config"));
        model = std::make_shared<ConstellationModel>(cfg, uint64_t(seed));
        desc = "random " + cfg.describe() + " (seed " + std::to_string(seed) + ")";
    }
    model->eval();
    const int pngModule = a.has("--png") ? resolveModule(*model, a.get("--module", "0")) : -1;

    bool many = false;
    const std::vector<std::string> images = cli::collectImages(a.require("--image"), many);
    const Outputs outs{a.require("--out"), a.get("--png"), a.get("--json"), many};
    if (many)
        for (const auto& dir : {std::optional<std::string>(outs.trace), outs.png, outs.json})
            if (dir) cli::createOutputFolder(*dir);
    std::cerr << "glimpse infer: " << images.size() << (images.size() == 1 ? " image" : " images") << ", "
              << model->config().describe() << " " << desc << " (" << model->constellationModules().size()
              << " constellation modules, " << model->config().clusters << " clusters, " << model->config().imageSize
              << "x" << model->config().imageSize << ")\n";
    size_t ok = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        const std::string& path = images[i];
        const auto t0 = std::chrono::steady_clock::now();
        std::ostringstream line;
        line << "[" << (i + 1) << "/" << images.size() << "] " << path << ": ";
        try {
            const cv::Mat rgb = loadImageRGB(path);
            ConstellationTrace trace = ConstellationTrace::capture(*model, rgb);
            trace.raw().meta()["source"] = path;
            trace.raw().meta()["checkpoint"] = desc;
            const std::string out = outs.path(outs.trace, path, ".h5");
            trace.save(out);
            if (outs.json) {
                const std::string text = summary(path, trace, desc).dump(1) + "\n";
                writeBytesAtomically(outs.path(*outs.json, path, ".json"), text.data(), text.size());
            }
            if (outs.png) saveImagePNG(outs.path(*outs.png, path, ".png"), clusterOverlay(rgb, trace, pngModule, opacity));
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            line << rgb.cols << "x" << rgb.rows << ", " << std::lround(ms) << " ms -> " << out;
            for (const auto& p : trace.top5()) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%6.2f%%", 100.0 * p.prob);
                line << "\n  " << buf << "  " << p.classIndex << "  " << p.name;
            }
            ++ok;
        } catch (const std::exception& e) {
            line << "FAILED: " << e.what();
        }
        std::cout << line.str() << "\n";
    }
    std::cerr << "glimpse infer: " << ok << " of " << images.size() << " images done\n";
    return ok == images.size() ? 0 : 1;
}

} // namespace glimpse::app::constellation
