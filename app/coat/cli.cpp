// glimpse infer --model coat ... and glimpse bench coat ...: run a CoaT classifier headless
// (top-5 and a trace per image), and time it (images/s at 224x224, effective-attention queries).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/util/autocast.h"
#include "core/util/device.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/util/timing.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "core/models/coat/model.h"
#include "core/models/coat/trace.h"

namespace glimpse::cli {

namespace {

const char* kInferCoatUsage =
    "usage: glimpse infer --model coat (--checkpoint C.h5 | --random-seed S [--variant V | --config C.json])\n"
    "                     --image I.png|DIR|list.txt --out trace.h5|DIR [--classes LIST.txt] [--cam-class K[,K...]]\n"
    "                     [--threads T] [--precision fp32|bf16|int8|auto]\n"
    "Runs a CoaT / CoaT-Lite classifier on each image (shorter side resized to the config's\n"
    "'resize', bicubic, center crop of 'image_size'), prints the top-5 classes and writes a trace\n"
    "(queries, softmax(K) and values of every conv-attentional module, CRPE kernels, logits and\n"
    "Grad-CAMs of the top-5 classes: every attention view can be recomputed from it). With a\n"
    "folder, --out is a folder and traces are named after the images. --random-seed runs a\n"
    "randomly initialized model (--variant: coat_lite_tiny (default), coat_lite_mini,\n"
    "coat_lite_small, coat_lite_medium, coat_tiny, coat_mini, coat_small); its classes are\n"
    "meaningless. --classes replaces the class names (one per line, index order). --cam-class\n"
    "keeps the class activation maps of these classes too (the top-5's are always kept).\n"
    "--precision: the linear layers' and attention's products in float32 (default: exact) or\n"
    "bfloat16 (CPUs with AVX512-BF16 or AMX), or the MLPs' linear layers as int8 products (int8);\n"
    "auto: bf16 where the CPU has it, else int8; the trace records it.\n";

const char* kBenchCoatUsage =
    "usage: glimpse bench coat [--variant coat_lite_tiny | --checkpoint C.h5 | --config C.json]\n"
    "                          [--batch B] [--runs R] [--warmup W] [--threads T] [--random-seed S]\n"
    "                          [--device cpu|cuda[:N]] [--tf32] [--precision fp32|bf16|int8|auto]\n"
    "                          [--profile TRACE.json]\n"
    "Times CoaT inference at the config's image size (224x224 for the Table 3.1 variants):\n"
    "forward passes of --batch images (median over --runs after --warmup runs) as images/s,\n"
    "trace capture (forward with records + Grad-CAM of the top-5), and on-demand view queries\n"
    "on that trace: effective attention of a random query pixel, CRPE window term, CLS attention.\n"
    "--device times the forward passes there (the trace figures stay the CPU's); --tf32 allows\n"
    "TF32 tensor cores for float32 on CUDA. --precision bf16 (CPUs with AVX512-BF16 or AMX) runs the\n"
    "linear layers and attention products on bfloat16 operands, int8 the MLPs' linear layers as\n"
    "int8 products (auto: bf16 where the CPU has it, else int8), and reports how far the logits\n"
    "moved from float32 (docs/performance.md). CPU times (this process,\n"
    "all threads) are printed beside the wall-clock times: on a shared machine they are the ones\n"
    "to compare. --profile writes LibTorch's operator profile of three more forward passes as a\n"
    "Chrome trace (tools/perf/profile_table.py sums it per operator; the profiler's own\n"
    "allocations slow memory-bound operators, docs/performance.md).\n";


namespace fs = std::filesystem;
using namespace glimpse::coat;

// --checkpoint, or a random model from --variant / --config.
std::shared_ptr<CoatModel> makeModel(const Args& a, std::string& desc) {
    if (a.has("--checkpoint")) {
        if (a.has("--variant") || a.has("--config"))
            throw Error("--variant/--config do not go with --checkpoint (it has its own config)");
        desc = *a.get("--checkpoint");
        return loadCoat(desc);
    }
    if (a.has("--variant") && a.has("--config")) throw Error("give --variant or --config, not both");
    CoatConfig cfg = a.has("--config") ? CoatConfig::fromFile(*a.get("--config"))
                                       : CoatConfig::preset(a.get("--variant", "coat_lite_tiny"));
    const long long seed = a.getInt("--random-seed", 0);
    if (seed < 0) throw Error("--random-seed: expected a non-negative integer");
    desc = "random " + cfg.variant + " (seed " + std::to_string(seed) + ")";
    return std::make_shared<CoatModel>(cfg, uint64_t(seed));
}

} // namespace

int inferCoat(const std::vector<std::string>& argv) {
    for (const auto& s : argv)
        if (s == "--help" || s == "-h") {
            std::cerr << kInferCoatUsage;
            return 0;
        }
    Args a(argv);
    try {
        a.checkKnown({"--model", "--checkpoint", "--random-seed", "--variant", "--config", "--image", "--out",
                      "--classes", "--cam-class", "--threads", "--precision"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--image") || !a.has("--out")) throw Error("--image and --out are required");
        if (a.has("--checkpoint") == a.has("--random-seed")) throw Error("give either --checkpoint C.h5 or --random-seed S");
    } catch (const Error& e) {
        std::cerr << "glimpse infer: " << e.what() << "\n" << kInferCoatUsage;
        return 2;
    }
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    std::string desc;
    auto model = makeModel(a, desc);
    model->eval();
    const torch::ScalarType compute =
        parsePrecision(a.get("--precision", "fp32"), model->device(), "--precision", /*int8LinearLayers=*/true);
    if (a.has("--classes")) {
        try {
            model->setClassNames(loadClassNames(*a.get("--classes")));
        } catch (const Error& e) {
            throw Error(*a.get("--classes") + ": " + e.what());
        }
    }

    // --cam-class K[,K...]: Grad-CAMs kept besides those of the top-5.
    std::vector<int64_t> camClasses;
    if (a.has("--cam-class")) {
        std::stringstream ss(*a.get("--cam-class"));
        std::string item;
        while (std::getline(ss, item, ',')) {
            char* end = nullptr;
            const long long v = std::strtoll(item.c_str(), &end, 10);
            if (item.empty() || *end != '\0' || v < 0 || v >= model->config().numClasses)
                throw Error("--cam-class: expected class indices in 0.." + std::to_string(model->config().numClasses - 1) +
                            ", got '" + item + "'");
            camClasses.push_back(v);
        }
    }
    bool many = false;
    const std::vector<std::string> images = collectImages(*a.get("--image"), many);
    if (many) createOutputFolder(*a.get("--out"));
    std::cerr << "glimpse infer: " << images.size() << (images.size() == 1 ? " image" : " images") << ", CoaT model "
              << desc << " (" << model->config().variant << ", " << model->config().numClasses << " classes, "
              << model->config().imageSize << "x" << model->config().imageSize << "; " << precisionName(compute) << ")\n";
    size_t ok = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        const std::string& path = images[i];
        const auto t0 = std::chrono::steady_clock::now();
        std::ostringstream line;
        line << "[" << (i + 1) << "/" << images.size() << "] " << path << ": ";
        try {
            cv::Mat rgb = loadImageRGB(path);
            CoatTrace trace = runCoat(*model, rgb, camClasses, compute);
            trace.raw().meta()["source"] = path;
            trace.raw().meta()["checkpoint"] = desc;
            const std::string out =
                many ? (fs::path(*a.get("--out")) / (fs::path(path).stem().string() + ".h5")).string() : *a.get("--out");
            trace.save(out);
            line << rgb.cols << "x" << rgb.rows << ", " << std::lround(msSince(t0)) << " ms -> " << out;
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

// The mean time in ms of one effective-attention query on the last block of scale 1 (the largest
// grid), over `queries` queries spread over its heads and tokens.
static double timeScale1Queries(const CoatTrace& trace, int queries) {
    const auto blocks = trace.blocksOfScale(0);
    const Grid g = trace.grid(0);
    const auto t0 = std::chrono::steady_clock::now();
    for (int q = 0; q < queries; ++q)
        (void)trace.effectiveAttention(blocks.back(), q % trace.numHeads(), (q * 7) % g[0], (q * 13) % g[1])[0][0]
            .item<float>();
    return msSince(t0) / queries;
}

int benchCoat(const std::vector<std::string>& argv) {
    if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
        std::cerr << kBenchCoatUsage;
        return 0;
    }
    Args a(argv, {"--tf32"});
    try {
        a.checkKnown({"--variant", "--checkpoint", "--config", "--batch", "--runs", "--warmup", "--threads",
                      "--random-seed", "--device", "--tf32", "--precision", "--profile"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
    } catch (const Error& e) {
        std::cerr << "glimpse bench coat: " << e.what() << "\n" << kBenchCoatUsage;
        return 2;
    }
    const long long threads = a.getInt("--threads", std::max(1u, std::thread::hardware_concurrency()));
    const long long runs = a.getInt("--runs", 5), warmup = a.getInt("--warmup", 1), batch = a.getInt("--batch", 1);
    if (threads < 1 || runs < 1 || warmup < 0 || batch < 1 || batch > 256)
        throw Error("--threads/--runs must be >= 1, --warmup >= 0, --batch in 1..256");
    glimpse::setComputeThreads(int(threads));
    keepFreedMemory();   // as bench letr and infer: no page faults for every pass's large buffers
    std::string desc;
    auto model = makeModel(a, desc);
    model->eval();
    const auto& cfg = model->config();
    const int64_t S = cfg.imageSize;

    cv::Mat rgb = makeDemoImage(int(cfg.resize), int(cfg.resize), 1);
    auto img = model->preprocess(rgb);
    const torch::Device device = parseDevice(a.get("--device", "cpu"));
    if (a.has("--tf32")) setTf32(true);
    auto input = img.tensor.unsqueeze(0).expand({batch, 3, S, S}).contiguous().to(device);
    const torch::ScalarType precision =
        parsePrecision(a.get("--precision", "fp32"), device, "--precision", /*int8LinearLayers=*/true);
    CoatForwardOptions fo;
    fo.productDtype = precision;
    std::vector<double> tForward, tCapture, cForward;
    double maxLogitDiff = 0;
    bool sameTop1 = true;
    {
        torch::NoGradGuard ng;
        model->to(device);
        for (long long r = 0; r < warmup + runs; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            const double c0 = processCpuSeconds();
            auto out = model->forward(input, fo);
            (void)out.logits.sum().item<float>();   // waits for the device
            const double c1 = processCpuSeconds();
            if (r >= warmup) {
                tForward.push_back(msSince(t0));
                cForward.push_back(1e3 * (c1 - c0));
            }
        }
        if (a.has("--profile")) {
            torch::autograd::profiler::RecordProfile guard(*a.get("--profile"));
            for (int r = 0; r < 3; ++r) (void)model->forward(input, fo).logits.sum().item<float>();
        }
        if (precision != torch::kFloat) {
            const auto ref = model->forward(input).logits, got = model->forward(input, fo).logits;
            maxLogitDiff = (ref - got).abs().max().item<double>();
            sameTop1 = torch::equal(ref.argmax(1), got.argmax(1));
        }
        model->to(torch::kCPU);   // the trace figures below are the CPU's (the GUI's)
    }
    CoatTrace trace;
    for (long long r = 0; r < std::max<long long>(1, runs / 2); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        trace = CoatTrace::capture(*model, img);
        tCapture.push_back(msSince(t0));
    }

    std::mt19937 rng(1234);
    const int queries = 200;
    auto timeQueries = [&](int kind) {
        std::uniform_int_distribution<int> blockD(0, trace.numBlocks() - 1), headD(0, trace.numHeads() - 1);
        double sink = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int q = 0; q < queries; ++q) {
            const int b = blockD(rng), h = headD(rng);
            const Grid g = trace.block(b).grid;
            const int64_t y = int64_t(rng() % uint64_t(g[0])), x = int64_t(rng() % uint64_t(g[1]));
            if (kind == 0) sink += trace.effectiveAttention(b, h, y, x)[0][0].item<float>();
            else if (kind == 1) sink += trace.effectiveAttention(b, -1, y, x)[0][0].item<float>();
            else if (kind == 2) sink += trace.crpeWindow(b, h, y, x).bias;
            else sink += trace.clsAttention(b, h)[0][0].item<float>();
        }
        (void)sink;
        return msSince(t0) / queries;
    };
    const double qHead = timeQueries(0), qMean = timeQueries(1);
    const double qCrpe = trace.hasCrpe() ? timeQueries(2) : 0.0;
    const double qCls = timeQueries(3);
    // The largest grid (scale 1) alone: the worst case of a query.
    const double qScale1 = timeScale1Queries(trace, queries);

    const double fwd = median(tForward);
    std::printf("CoaT bench: %s, %s, %.2fM parameters, embed dims %lld/%lld/%lld/%lld, %lld parallel groups\n",
                desc.c_str(), cfg.variant.c_str(), double(model->numParameters()) / 1e6, (long long)cfg.embedDims[0],
                (long long)cfg.embedDims[1], (long long)cfg.embedDims[2], (long long)cfg.embedDims[3],
                (long long)cfg.parallelDepth);
    std::printf("  input %lldx%lld, batch %lld, %s%s, %lld threads, %lld runs after %lld warm-up (median)\n",
                (long long)S, (long long)S, batch, device.str().c_str(), a.has("--tf32") ? " tf32" : "", threads, runs,
                warmup);
    const double cpuFwd = median(cForward);
    std::printf("  forward      %9.1f ms per batch = %.2f images/s (CPU time %.1f ms = %.2f images per CPU second;"
                " precision %s)\n", fwd, fwd > 0 ? 1000.0 * double(batch) / fwd : 0.0, cpuFwd,
                cpuFwd > 0 ? 1000.0 * double(batch) / cpuFwd : 0.0, precisionName(precision));
    if (precision != torch::kFloat)
        std::printf("  vs float32   logits max difference %.3g, top-1 %s\n", maxLogitDiff,
                    sameTop1 ? "the same" : "DIFFERS");
    std::printf("  capture      %9.1f ms (forward with records + Grad-CAM of the top-5), trace %.1f MiB\n",
                median(tCapture), double(trace.bytes()) / 1048576.0);
    std::printf("  query        %.3f ms effective attention (one head, random block), %.3f ms (mean of heads)\n",
                qHead, qMean);
    std::printf("               %.3f ms at scale 1 (%lldx%lld tokens), %.3f ms CRPE window, %.3f ms CLS attention\n",
                qScale1, (long long)trace.grid(0)[0], (long long)trace.grid(0)[1], qCrpe, qCls);
    return 0;
}

} // namespace glimpse::cli
