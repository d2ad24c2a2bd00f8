// M-LSD beside LSD (core/models/mlsd): the shipped model; `glimpse infer --model mlsd`, which
// runs it on one image, a folder or a list and writes each image's lines as JSON (with their
// edge support) and optionally an overlay PNG; `glimpse bench mlsd`, its time step by step
// against LSD's on the same image.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/cli/resource_path.h"
#include "app/letr/cli.h"
#include "core/error.h"
#include "core/eval/lsd.h"
#include "core/io/demo_image.h"
#include "core/eval/edge_support.h"
#include "core/io/atomic_file.h"
#include "core/io/image.h"
#include "core/models/mlsd/model.h"
#include "core/util/device.h"
#include "core/util/threads.h"
#include "core/util/timing.h"

namespace glimpse::cli {

namespace {

namespace fs = std::filesystem;

const char* kInferMlsdUsage =
    "usage: glimpse infer --model mlsd [--checkpoint C.h5] --image I.png|DIR|list.txt --out lines.json|DIR\n"
    "                     [--png overlay.png|DIR] [--device cpu|cuda] [--threads T]\n"
    "Runs M-LSD tiny (a MobileNetV2 line segment detector trained on the Wireframe photographs;\n"
    "default: the shipped resources/mlsd_tiny.h5) on each image and writes its lines as JSON: image\n"
    "size, the post-processing settings and, best first, each line's endpoints (image pixels),\n"
    "score and edge support \"edge\" (as glimpse eval edges measures it). With a folder or a .txt\n"
    "list of images, --out and --png are folders and files are named after the images.\n"
    "Convert other M-LSD tiny weights with installer/convert_mlsd.py.\n";

const char* kBenchMlsdUsage =
    "usage: glimpse bench mlsd [--checkpoint C.h5] [--image I.png] [--threads T] [--runs R] [--warmup W]\n"
    "Times M-LSD tiny step by step on --image (default: the built-in 640x480 demo scene): the input\n"
    "(area resize to 512 x 512, scaling), the network, the post-processing (centre map, top-K,\n"
    "displacements), and the whole detection; then OpenCV's LSD on the same image. Medians over\n"
    "--runs (default 20) after --warmup runs (default 3), milliseconds; --threads (default: the\n"
    "compute default) sets LibTorch's threads.\n";

std::string linesJson(const std::string& image, const cv::Mat& rgb, const mlsd::MlsdModel& model,
                      const std::vector<eval::ScoredLine>& lines) {
    nlohmann::json j;
    j["image"] = image;
    j["width"] = rgb.cols;
    j["height"] = rgb.rows;
    j["detector"] = "M-LSD tiny";
    j["checkpoint"] = model.source;
    j["config"] = model.config.toJson();
    j["lines"] = nlohmann::json::array();
    const eval::EdgeField field = eval::edgeField(rgb);
    for (const auto& l : lines)
        j["lines"].push_back({{"x1", l.x1}, {"y1", l.y1}, {"x2", l.x2}, {"y2", l.y2}, {"score", l.score},
                              {"edge", eval::lineSupport(field, l.x1, l.y1, l.x2, l.y2)}});
    return j.dump(1) + "\n";
}

cv::Mat drawOverlay(const cv::Mat& rgb, const std::vector<eval::ScoredLine>& lines) {
    cv::Mat out = rgb.clone();
    const int thick = std::max(1, int(std::lround(std::max(rgb.cols, rgb.rows) / 400.0)));
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {   // best drawn last, on top
        const double s = std::clamp(double(it->score), 0.0, 1.0);
        cv::line(out, cv::Point2f(it->x1, it->y1), cv::Point2f(it->x2, it->y2), cv::Scalar(0, 90 + 165 * s, 255),
                 thick, cv::LINE_AA);
    }
    return out;
}

std::string outPath(const std::string& spec, bool many, const std::string& image, const char* ext) {
    return many ? (fs::path(spec) / (fs::path(image).stem().string() + ext)).string() : spec;
}

} // namespace

std::shared_ptr<mlsd::MlsdModel> shippedMlsd() {
    static std::mutex mutex;
    static std::shared_ptr<mlsd::MlsdModel> model;
    std::lock_guard<std::mutex> lock(mutex);
    if (model) return model;
    const std::string path = resourcePath("mlsd_tiny.h5");
    if (path.empty())
        throw Error("M-LSD: resources/mlsd_tiny.h5 is not installed (convert the weights with "
                    "installer/convert_mlsd.py, docs/models.md \"M-LSD\")");
    model = mlsd::loadMlsd(path);
    return model;
}

std::shared_ptr<mlsd::MlsdModel> mlsdModelOption(const Args& a, const std::string& flag) {
    if (a.has(flag)) return mlsd::loadMlsd(*a.get(flag));
    return shippedMlsd();
}

int inferMlsd(const std::vector<std::string>& argv) {
    if (argv.empty() || std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
        std::find(argv.begin(), argv.end(), "-h") != argv.end()) {
        std::cerr << kInferMlsdUsage;
        return argv.empty() ? 2 : 0;
    }
    Args a(argv);
    try {
        a.checkKnown({"--model", "--checkpoint", "--image", "--out", "--png", "--device", "--threads"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
    } catch (const Error& e) {
        std::cerr << "glimpse infer: " << e.what() << "\n" << kInferMlsdUsage;
        return 2;
    }
    if (!a.has("--image") || !a.has("--out")) {
        std::cerr << "glimpse infer: --image and --out are required\n" << kInferMlsdUsage;
        return 2;
    }
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    const std::shared_ptr<mlsd::MlsdModel> model = mlsdModelOption(a, "--checkpoint");
    const std::string device = a.get("--device", "cpu");
    model->net->to(parseDevice(device));

    bool many = false;
    const std::vector<std::string> images = collectImages(*a.get("--image"), many);
    const std::string out = *a.get("--out");
    const std::optional<std::string> png = a.get("--png");
    if (many) {
        createOutputFolder(out);
        if (png) createOutputFolder(*png);
    }
    std::cerr << "glimpse infer: " << images.size() << (images.size() == 1 ? " image" : " images") << ", M-LSD tiny "
              << model->source << ", input " << model->config.inputSize << ", " << device << "\n";
    const auto t0 = std::chrono::steady_clock::now();
    size_t ok = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        std::ostringstream line;
        line << "[" << (i + 1) << "/" << images.size() << "] " << images[i] << ": ";
        try {
            const auto s0 = std::chrono::steady_clock::now();
            const cv::Mat rgb = loadImageRGB(images[i]);
            const std::vector<eval::ScoredLine> lines = mlsd::detectMlsd(*model, rgb);
            const double ms = msSince(s0);
            const std::string text = linesJson(images[i], rgb, *model, lines);
            const std::string jsonPath = outPath(out, many, images[i], ".json");
            writeBytesAtomically(jsonPath, text.data(), text.size());
            if (png) saveImagePNG(outPath(*png, many, images[i], ".png"), drawOverlay(rgb, lines));
            line << rgb.cols << "x" << rgb.rows << ", " << lines.size() << " lines, " << std::lround(ms) << " ms -> "
                 << jsonPath;
            ++ok;
        } catch (const std::exception& e) {
            line << "FAILED: " << e.what();
        }
        std::cerr << line.str() << "\n";
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "glimpse infer: " << ok << " of " << images.size() << " images done";
    if (ok < images.size()) std::cerr << ", " << (images.size() - ok) << " failed";
    std::cerr << ", " << sec << " s\n";
    return ok == images.size() ? 0 : 1;
}

int benchMlsd(const std::vector<std::string>& argv) {
    if (std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
        std::find(argv.begin(), argv.end(), "-h") != argv.end()) {
        std::cout << kBenchMlsdUsage;
        return 0;
    }
    Args a(argv);
    a.checkKnown({"--checkpoint", "--image", "--threads", "--runs", "--warmup"});
    if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    const long long runs = a.getInt("--runs", 20), warmup = a.getInt("--warmup", 3);
    if (runs < 1 || warmup < 0) throw Error("--runs: expected a positive integer, --warmup: >= 0");
    const std::shared_ptr<mlsd::MlsdModel> model = mlsdModelOption(a, "--checkpoint");
    const cv::Mat rgb = a.has("--image") ? loadImageRGB(*a.get("--image")) : makeDemoImage(640, 480);
    torch::NoGradGuard noGrad;
    std::vector<double> input, net, decode, total, lsd;
    size_t lines = 0, lsdLines = 0;
    for (long long i = 0; i < warmup + runs; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const torch::Tensor x = mlsd::mlsdInput(rgb, model->config.inputSize);
        const auto t1 = std::chrono::steady_clock::now();
        const torch::Tensor maps = model->net->forward(x);
        const auto t2 = std::chrono::steady_clock::now();
        lines = mlsd::decodeLines(maps, model->config, rgb.cols, rgb.rows).size();
        const double ms = msSince(t0);
        const auto l0 = std::chrono::steady_clock::now();
        lsdLines = eval::detectLsd(rgb).size();
        const double lsdMs = msSince(l0);
        if (i < warmup) continue;
        input.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        net.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        decode.push_back(ms - input.back() - net.back());
        total.push_back(ms);
        lsd.push_back(lsdMs);
    }
    std::printf("M-LSD tiny (%s), %dx%d image, input %lld, %d threads, median of %lld runs:\n", model->source.c_str(),
                rgb.cols, rgb.rows, (long long)model->config.inputSize, torch::get_num_threads(), runs);
    std::printf("  input          %8.2f ms\n", median(input));
    std::printf("  network        %8.2f ms\n", median(net));
    std::printf("  post-process   %8.2f ms\n", median(decode));
    std::printf("  M-LSD total    %8.2f ms  (%zu lines, %.1f images/s)\n", median(total), lines, 1000.0 / median(total));
    std::printf("  LSD (OpenCV)   %8.2f ms  (%zu lines)\n", median(lsd), lsdLines);
    return 0;
}

} // namespace glimpse::cli
