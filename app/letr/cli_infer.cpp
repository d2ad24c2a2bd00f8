// glimpse infer --model letr ...: run LETR headless on one image, a folder or a list, and write
// a trace per image (plus optional overlay PNG and lines JSON).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <limits>
#include <malloc.h>
#include <sstream>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/letr/cli.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/eval/edge_support.h"
#include "core/io/atomic_file.h"
#include "core/util/device.h"
#include "core/util/timing.h"
#include "core/io/image.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/util/autocast.h"

namespace glimpse::cli {

namespace {

namespace fs = std::filesystem;
using namespace glimpse::letr;

const char* kInferUsage =
    "usage: glimpse infer --model coat ...   (CoaT classifiers: glimpse infer --model coat --help)\n"
    "       glimpse infer --model letr (--checkpoint C.h5 | --random-seed S [--config C.json | --backbone ARCH])\n"
    "                     --image I.png|DIR|list.txt --out trace.h5|DIR\n"
    "                     [--png overlay.png|DIR] [--json lines.json|DIR] [--threshold 0.7]\n"
    "                     [--short-side S] [--max-long-side M] [--device cpu|cuda]\n"
    "                     [--precision float16|float32] [--flips 1|2|4] [--threads T]\n"
    "                     [--compute reference|fp32|bf16|auto]\n"
    "Runs LETR on each image and writes its trace (per-layer lines, entity states, encoder\n"
    "memories: every attention map can be recomputed from it). With a folder or a .txt list of\n"
    "images (one path per line, relative to the list), --out, --png and --json are folders and\n"
    "files are named after the images. --random-seed runs a randomly initialized model (no\n"
    "trained weights: the lines are meaningless, for trying the pipeline). Lines in the PNG and\n"
    "JSON are those of the last decoder layer with score >= --threshold (default: the\n"
    "checkpoint's score_threshold when it has one, else 0.7); each JSON line has its edge\n"
    "support \"edge\" (the fraction of its pixels on a strong gradient across it, as\n"
    "glimpse eval edges measures it).\n"
    "--precision: how entity states and memories are stored (default float16: 2/3 of the\n"
    "size, attention maps within 1e-4; float32: attention equal to the forward pass's).\n"
    "--flips 2|4: also runs the image's left-right mirror (4: and the up-down ones) and stores\n"
    "every layer's lines and scores merged over the views (a flip ensemble: more precise\n"
    "endpoints, 2-4x the time; states and attention stay the image's own).\n"
    "--compute (CPU; docs/performance.md): reference (default) runs float32 as the reference\n"
    "implementations do (exact comparisons); fp32 folds the backbone's frozen batch norms into its\n"
    "convolutions in channels-last layout (the same lines within rounding, faster); bf16 also runs\n"
    "the backbone and the transformers' products in bfloat16 (CPUs with AVX512-BF16 or AMX;\n"
    "endpoints within 0.5 px of float32); auto is bf16 where the CPU has it, else fp32.\n";


cv::Mat drawOverlay(const cv::Mat& rgb, const std::vector<LetrLine>& lines) {
    cv::Mat out = rgb.clone();
    const int thick = std::max(1, int(std::lround(std::max(rgb.cols, rgb.rows) / 400.0)));
    // Lowest scores first so that the best lines are drawn on top; colour from orange to red.
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const double s = std::clamp(double(it->score), 0.0, 1.0);
        const cv::Scalar color(255, 200 * (1.0 - s), 0);   // RGB
        cv::line(out, cv::Point2f(it->x1, it->y1), cv::Point2f(it->x2, it->y2), color, thick, cv::LINE_AA);
    }
    return out;
}

// The JSON of the last layer's lines, each with its edge support against `rgb` (the measure of
// `glimpse eval edges` and of the inspector's edge colours).
std::string linesJson(const std::string& image, const cv::Mat& rgb, const LetrTrace& t, float threshold) {
    const Stage stage = t.lastStage();
    const int layer = t.lastLayer();
    nlohmann::json j;
    j["image"] = image;
    j["width"] = t.originalSize()[1];
    j["height"] = t.originalSize()[0];
    j["threshold"] = threshold;
    j["stage"] = stageName(stage);
    j["layer"] = layer;
    j["flips"] = t.flips();
    j["lines"] = nlohmann::json::array();
    const eval::EdgeField field = eval::edgeField(rgb);
    for (const auto& l : t.lines(stage, layer, threshold))
        j["lines"].push_back({{"x1", l.x1}, {"y1", l.y1}, {"x2", l.x2}, {"y2", l.y2}, {"score", l.score},
                              {"entity", l.entity}, {"edge", eval::lineSupport(field, l.x1, l.y1, l.x2, l.y2)}});
    return j.dump(1) + "\n";
}

// Where an image's trace, overlay and lines go: the files given, or (many images) files named
// after the image in the folders given.
struct Outputs {
    std::string trace;
    std::optional<std::string> png, json;
    bool many = false;

    std::string path(const std::string& spec, const std::string& image, const char* ext) const {
        if (!many) return spec;
        return (fs::path(spec) / (fs::path(image).stem().string() + ext)).string();
    }
    void createFolders() const {
        for (const auto& dir : {std::optional<std::string>(trace), png, json}) {
            if (!dir) continue;
            createOutputFolder(*dir);
        }
    }
};

// Runs LETR on one image and writes its outputs; says what it did on `line`.
void inferOne(LetrModel& model, const std::string& path, const std::string& modelDesc, const LetrRunOptions& runOpts,
              float threshold, const Outputs& outs, std::ostringstream& line) {
    const auto s0 = std::chrono::steady_clock::now();
    cv::Mat rgb = loadImageRGB(path);
    LetrTrace trace = runLetr(model, rgb, runOpts);
    trace.raw().meta()["source"] = path;
    trace.raw().meta()["checkpoint"] = modelDesc;
    const std::string tracePath = outs.path(outs.trace, path, ".h5");
    trace.save(tracePath);
    const auto lines = trace.lines(trace.lastStage(), trace.lastLayer(), threshold);
    if (outs.png) saveImagePNG(outs.path(*outs.png, path, ".png"), drawOverlay(rgb, lines));
    if (outs.json) {
        const std::string text = linesJson(path, rgb, trace, threshold);
        writeBytesAtomically(outs.path(*outs.json, path, ".json"), text.data(), text.size());
    }
    line << rgb.cols << "x" << rgb.rows << " -> " << trace.inputSize()[1] << "x" << trace.inputSize()[0] << ", "
         << lines.size() << " lines >= " << threshold << ", " << std::lround(msSince(s0)) << " ms -> " << tracePath;
}

} // namespace

std::shared_ptr<letr::LetrModel> letrModelFromArgs(const Args& a, std::string& desc) {
    std::shared_ptr<LetrModel> model;
    if (a.has("--checkpoint")) {
        desc = *a.get("--checkpoint");
        model = loadLetr(desc);
    } else {
        LetrConfig cfg = a.has("--config") ? LetrConfig::fromFile(*a.get("--config")) : LetrConfig();
        if (a.has("--backbone")) cfg.backbone = *a.get("--backbone");
        cfg.numQueries = a.getInt("--queries", cfg.numQueries);
        cfg.validate();
        const long long seed = a.getInt("--random-seed", 0);
        if (seed < 0) throw Error("--random-seed: expected a non-negative integer");
        model = std::make_shared<LetrModel>(cfg, uint64_t(seed));
        desc = "random " + cfg.backbone + " LETR (seed " + std::to_string(seed) + ")";
    }
    model->eval();
    model->setResize(a.getInt("--short-side", model->config().shortSide),
                     a.getInt("--max-long-side", model->config().maxLongSide));
    model->to(parseDevice(a.get("--device", "cpu")));
    return model;
}

int inferLetr(const std::vector<std::string>& argv) {
    if (argv.empty() || argv[0] == "--help" || argv[0] == "-h") {
        std::cerr << kInferUsage;
        return argv.empty() ? 2 : 0;
    }
    Args a(argv);
    try {
        a.checkKnown({"--model", "--checkpoint", "--random-seed", "--config", "--backbone", "--image", "--out", "--png",
                      "--json", "--threshold", "--short-side", "--max-long-side", "--device", "--precision",
                      "--flips", "--threads", "--compute"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
    } catch (const Error& e) {
        std::cerr << "glimpse infer: " << e.what() << "\n" << kInferUsage;
        return 2;
    }
    if (!a.has("--image") || !a.has("--out")) {
        std::cerr << "glimpse infer: --image and --out are required\n" << kInferUsage;
        return 2;
    }
    if (a.has("--checkpoint") == a.has("--random-seed")) {
        std::cerr << "glimpse infer: give either --checkpoint C.h5 or --random-seed S\n" << kInferUsage;
        return 2;
    }
    if (a.has("--checkpoint") && (a.has("--config") || a.has("--backbone"))) {
        std::cerr << "glimpse infer: --config/--backbone only go with --random-seed (a checkpoint has its own)\n";
        return 2;
    }

    keepFreedMemory();
    const std::string precisionName = a.get("--precision", "float16");
    if (precisionName != "float32" && precisionName != "float16")
        throw Error("--precision: expected float32 or float16, got '" + precisionName + "'");
    LetrRunOptions runOpts;
    runOpts.precision = precisionName == "float16" ? LetrTracePrecision::Float16 : LetrTracePrecision::Float32;
    runOpts.flips = flipsOption(a);
    const std::string compute = a.get("--compute", "reference");
    if (compute != "reference") {
        runOpts.compute = parsePrecision(compute, parseDevice(a.get("--device", "cpu")), "--compute");
        runOpts.foldedBackbone = true;
    }
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }

    std::string modelDesc;
    const std::shared_ptr<LetrModel> model = letrModelFromArgs(a, modelDesc);
    const double stored = model->config().scoreThreshold;   // a trained model's own default
    const float threshold = float(a.getDouble("--threshold", stored > 0 ? stored : 0.7));
    const std::string device = a.get("--device", "cpu");

    // Inputs and outputs.
    bool many = false;
    const std::vector<std::string> images = collectImages(*a.get("--image"), many);
    const Outputs outs{*a.get("--out"), a.get("--png"), a.get("--json"), many};
    if (many) outs.createFolders();

    std::cerr << "glimpse infer: " << images.size() << (images.size() == 1 ? " image" : " images") << ", model "
              << modelDesc << ", short side " << model->config().shortSide << ", " << device << ", "
              << (compute == "reference" ? std::string("float32 (reference layout)")
                                         : std::string(glimpse::precisionName(runOpts.compute)) +
                                               (runOpts.compute == torch::kFloat ? " (folded backbone)" : ""))
              << "\n";
    const auto t0 = std::chrono::steady_clock::now();
    size_t ok = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        std::ostringstream line;
        line << "[" << (i + 1) << "/" << images.size() << "] " << images[i] << ": ";
        try {
            inferOne(*model, images[i], modelDesc, runOpts, threshold, outs, line);
            ++ok;
        } catch (const std::exception& e) {
            line << "FAILED: " << e.what();
        }
        std::cerr << line.str() << "\n";
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "glimpse infer: " << ok << " of " << images.size() << " images done";
    if (ok < images.size()) std::cerr << ", " << (images.size() - ok) << " failed";
    std::cerr << ", " << std::fixed;
    std::cerr.precision(1);
    std::cerr << sec << " s";
    std::cerr.precision(2);
    std::cerr << " (" << (sec > 0 ? double(ok) / sec : 0.0) << " images/s)\n";
    return ok == images.size() ? 0 : 1;
}

} // namespace glimpse::cli
