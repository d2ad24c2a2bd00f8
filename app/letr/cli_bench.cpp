// glimpse bench letr ...: per-stage timings of a LETR forward pass, trace size, on-demand
// attention query time and peak memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <malloc.h>
#include <random>
#include <thread>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/letr/cli.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/util/autocast.h"
#include "core/util/device.h"
#include "core/util/timing.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"

namespace glimpse::cli {

namespace {

using namespace glimpse::letr;

const char* kBenchUsage =
    "usage: glimpse bench letr [--checkpoint C.h5 | --config C.json | --backbone resnet50]\n"
    "                          [--queries N] [--short-side S] [--max-long-side M] [--threads T] [--runs R]\n"
    "                          [--warmup W] [--image I.png] [--random-seed S] [--device cpu|cuda]\n"
    "                          [--return-memory] [--autocast fp32|bf16|fp16] [--tf32] [--no-record]\n"
    "                          [--precision fp32|bf16|auto] [--reference-layout]\n"
    "Times LETR stage by stage (backbone, coarse, fine, heads; median over --runs after --warmup\n"
    "runs) on --image or the built-in 640x480 demo scene, then reports images/s, the trace size\n"
    "(float32 and float16 states), the time of one on-demand attention map, and the peak\n"
    "resident memory (VmHWM). Without --checkpoint the model is randomly initialized\n"
    "(--random-seed, default 0): timings do not depend on the weights. Freed memory is kept in\n"
    "the process (as glimpse infer does) unless --return-memory is given. On a busy machine,\n"
    "OMP_WAIT_POLICY=PASSIVE in the environment keeps idle OpenMP threads from spinning.\n"
    "--autocast bf16|fp16 (CUDA) runs the forward pass under LibTorch's autocast: matrix products\n"
    "and convolutions in that precision (glimpse check device reports its endpoint difference).\n"
    "On the CPU, bf16 runs the backbone's layer1..layer4 in bfloat16 (as training's bf16_backbone\n"
    "does; the transformers stay float32); fp16 needs a GPU.\n"
    "--tf32 allows TF32 tensor cores for float32 (off by default on CUDA). --no-record runs without\n"
    "recording attention (as a consumer of lines only would; fused attention on a GPU) and skips\n"
    "the trace figures.\n"
    "--precision (CPU inference, docs/performance.md): fp32 (default) runs the backbone in\n"
    "channels-last layout with the frozen batch norms folded into the convolutions (float32, the\n"
    "same outputs within rounding; --reference-layout keeps the reference implementations' layout\n"
    "and separate batch norms); bf16 also runs the backbone's layers and the transformers' products\n"
    "in bfloat16 (CPUs with AVX512-BF16 or AMX); auto is bf16 where the CPU has it, else fp32.\n"
    "CPU times (this process, all threads) are printed beside the wall-clock times: on a shared\n"
    "machine they are the ones to compare.\n";

// The largest difference of attention maps between float16 and float32 state storage, over
// random queries of every stage.
double float16AttentionError(const LetrTrace& trace32, const LetrTrace& trace16, std::mt19937& rng) {
    double err16 = 0.0;
    for (int q = 0; q < 100; ++q) {
        const Stage s = (q % 2 == 0 || trace32.numStages() == 1) ? Stage::Coarse : Stage::Fine;
        const int layer = int(rng() % uint32_t(trace32.numLayers(s)));
        const int head = int(rng() % uint32_t(trace32.numHeads() + 1)) - 1;
        const int64_t e = int64_t(rng() % uint64_t(trace32.numQueries()));
        err16 = std::max(err16, (trace16.attention(s, layer, head, e) - trace32.attention(s, layer, head, e))
                                    .abs().max().item<double>());
        err16 = std::max(err16, (trace16.selfAttention(s, layer, head, e) - trace32.selfAttention(s, layer, head, e))
                                    .abs().max().item<double>());
    }
    return err16;
}

// The trace's sizes and the times of on-demand attention maps: random (layer, head, entity)
// queries on both stages.
void printTraceFigures(const LetrTrace& trace32, const LetrTrace& trace16) {
    std::mt19937 rng(1234);
    const int queries = 200;
    auto timeQueries = [&](const LetrTrace& t, Stage s, bool self, bool meanHeads) {
        std::uniform_int_distribution<int> layerD(0, t.numLayers(s) - 1), headD(0, t.numHeads() - 1);
        std::uniform_int_distribution<int64_t> entD(0, t.numQueries() - 1);
        const auto t0 = std::chrono::steady_clock::now();
        double sink = 0;
        for (int q = 0; q < queries; ++q) {
            const int layer = layerD(rng), head = meanHeads ? -1 : headD(rng);
            const int64_t e = entD(rng);
            auto m = self ? t.selfAttention(s, layer, head, e) : t.attention(s, layer, head, e);
            sink += m.flatten()[0].item<float>();
        }
        (void)sink;
        return msSince(t0) / queries;
    };
    const Stage last = trace32.lastStage();
    const double attnMean = timeQueries(trace32, last, false, true);
    const double attnHead = timeQueries(trace32, last, false, false);
    const double attnCoarse = timeQueries(trace32, Stage::Coarse, false, true);
    const double selfMean = timeQueries(trace32, last, true, true);
    const double attn16 = timeQueries(trace16, last, false, true);
    const double err16 = float16AttentionError(trace32, trace16, rng);
    std::printf("  trace        %lld bytes (float32 states), %lld bytes (float16 states; max attention"
                " difference %.2g)\n", (long long)trace32.bytes(), (long long)trace16.bytes(), err16);
    std::printf("  attention    %.3f ms per map (%s, mean of heads), %.3f ms (one head), %.3f ms (coarse);"
                " float16 trace %.3f ms\n", attnMean, stageName(last), attnHead, attnCoarse, attn16);
    std::printf("  self-attn    %.3f ms per entity (%s, mean of heads)\n", selfMean, stageName(last));
}

} // namespace

// The bench's first lines: the model, its config, the input and (recorded) the feature maps.
static void printModelAndInput(const std::string& modelDesc, const LetrConfig& cfg, const std::string& imageDesc,
                               const cv::Mat& rgb, const LetrImage& input, bool record, const LetrTrace& trace32) {
    std::printf("LETR bench: %s, %s, d=%lld, %lld heads, FFN %lld, N=%lld, layers enc/dec coarse %lld/%lld",
                modelDesc.c_str(), cfg.backbone.c_str(), (long long)cfg.hiddenDim, (long long)cfg.nheads,
                (long long)cfg.dimFeedforward, (long long)cfg.numQueries, (long long)cfg.coarseEncLayers,
                (long long)cfg.coarseDecLayers);
    if (cfg.fineStage) std::printf(", fine %lld/%lld", (long long)cfg.fineEncLayers, (long long)cfg.fineDecLayers);
    std::printf("\n  input %s %dx%d -> %lldx%lld (short side %lld)", imageDesc.c_str(), rgb.cols, rgb.rows,
                (long long)input.width(), (long long)input.height(), (long long)cfg.shortSide);
    if (record) {
        const auto fsC = trace32.featureSize(Stage::Coarse);
        std::printf("; coarse map %lldx%lld", (long long)fsC[1], (long long)fsC[0]);
    }
    if (record && cfg.fineStage) {
        const auto fsF = trace32.featureSize(Stage::Fine);
        std::printf(", fine map %lldx%lld", (long long)fsF[1], (long long)fsF[0]);
    }
}

// The same input once more in float32 with the reference layout: how far this precision
// and layout move the last layer's lines (endpoints in input pixels) and scores.
static void printFloat32Difference(LetrModel& model, const LetrImage& input, torch::ScalarType precision,
                                   bool referenceLayout) {
    LetrForwardOptions fo;
    LetrForwardOptions fast;
    fast.backboneChannelsLast = model.device().is_cpu() && !referenceLayout;
    if (precision == torch::kBFloat16) {
        fast.backboneDtype = torch::kBFloat16;
        fast.transformerDtype = torch::kBFloat16;
    }
    const auto ref = model.forward({input.tensor}, fo).last();
    const auto got = model.forward({input.tensor}, fast).last();
    const int64_t L = ref.lines.size(0);
    const auto scale = torch::tensor({double(input.width()), double(input.height())}, torch::kFloat);
    auto endpoints = [&](const LetrStageOutput& o) { return o.lines[L - 1][0].to(torch::kCPU).view({-1, 2, 2}) * scale; };
    const auto d = (endpoints(got) - endpoints(ref)).pow(2).sum(-1).sqrt();   // [N, 2] px
    auto score = [&](const LetrStageOutput& o) { return o.logits[L - 1][0].to(torch::kCPU).softmax(-1).select(-1, 0); };
    const auto sRef = score(ref), sGot = score(got);
    const int64_t top = std::min<int64_t>(100, sRef.size(0));
    const auto order = sRef.argsort(0, true).narrow(0, 0, top);
    std::printf("  vs float32   endpoints max %.4f px, median %.4f px, max over the %lld best lines %.4f px;"
                " scores max %.2g\n", d.max().item<double>(), d.flatten().median().item<double>(), (long long)top,
                d.index_select(0, order).max().item<double>(), (sGot - sRef).abs().max().item<double>());
}

int benchLetr(const std::vector<std::string>& argv) {
    if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
        std::cout << kBenchUsage;
        return 0;
    }
    Args a(argv, {"--return-memory", "--no-record", "--tf32", "--reference-layout"});
    try {
        a.checkKnown({"--checkpoint", "--config", "--backbone", "--queries", "--short-side", "--max-long-side", "--threads", "--runs",
                      "--warmup", "--image", "--random-seed", "--device", "--return-memory", "--autocast", "--no-record", "--tf32",
                      "--precision", "--reference-layout"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (a.has("--checkpoint") && (a.has("--config") || a.has("--backbone") || a.has("--queries")))
            throw Error("--config/--backbone/--queries do not go with --checkpoint (it has its own config)");
    } catch (const Error& e) {
        std::cerr << "glimpse bench: " << e.what() << "\n" << kBenchUsage;
        return 2;
    }

    const long long threads = a.getInt("--threads", std::max(1u, std::thread::hardware_concurrency()));
    const long long runs = a.getInt("--runs", 5);
    const long long warmup = a.getInt("--warmup", 1);
    if (threads < 1 || runs < 1 || warmup < 0) throw Error("--threads/--runs must be >= 1, --warmup >= 0");
    glimpse::setComputeThreads(int(threads));
    if (!a.has("--return-memory")) keepFreedMemory();

    std::string modelDesc;
    const std::shared_ptr<LetrModel> model = letrModelFromArgs(a, modelDesc);
    const std::string device = a.get("--device", "cpu");
    const torch::ScalarType autocast = parseAutocast(a.get("--autocast", "fp32"));
    const torch::ScalarType precision = parsePrecision(a.get("--precision", "fp32"), model->device());
    if (precision != torch::kFloat && autocast != torch::kFloat)
        throw Error("--precision bf16 and --autocast do not go together (one mixed precision at a time)");
    const bool referenceLayout = a.has("--reference-layout");
    const bool record = !a.has("--no-record");
    if (a.has("--tf32")) setTf32(true);
    const LetrConfig& cfg = model->config();

    cv::Mat rgb = a.has("--image") ? loadImageRGB(*a.get("--image")) : makeDemoImage(640, 480, 1);
    const std::string imageDesc = a.has("--image") ? *a.get("--image") : "demo scene";

    torch::NoGradGuard noGrad;
    std::vector<double> tBackbone, tCoarse, tFine, tHeads, tForward, tEnd, cForward;
    LetrTrace trace32, trace16;
    LetrImage input;
    for (long long r = 0; r < warmup + runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        input = model->preprocess(rgb);
        LetrForwardOptions fo;
        fo.record = record;
        fo.time = true;
        // LibTorch 1.13's CPU autocast has no layer norm over bfloat16 input with float32
        // weights, so on the CPU only the backbone runs in bfloat16.
        const bool cpuBf16 = autocast == torch::kBFloat16 && model->device().is_cpu();
        if (cpuBf16) fo.backboneDtype = torch::kBFloat16;
        if (model->device().is_cpu() && !referenceLayout) fo.backboneChannelsLast = true;
        if (precision == torch::kBFloat16) {
            fo.backboneDtype = torch::kBFloat16;
            fo.transformerDtype = torch::kBFloat16;
        }
        LetrOutput out;
        const double c0 = processCpuSeconds();
        {
            AutocastGuard ag(model->device(), cpuBf16 ? torch::kFloat : autocast);
            out = model->forward({input.tensor}, fo);
        }
        const double cpuMs = 1000.0 * (processCpuSeconds() - c0);
        if (record) trace32 = LetrTrace::capture(*model, out, 0, input, LetrTracePrecision::Float32);
        else out.stages.back().lines.to(torch::kCPU);   // what a consumer of the lines waits for
        const double end = msSince(t0);
        if (record && r == warmup + runs - 1)
            trace16 = LetrTrace::capture(*model, out, 0, input, LetrTracePrecision::Float16);
        if (r < warmup) continue;
        tBackbone.push_back(out.timings.backbone);
        tCoarse.push_back(out.timings.coarse);
        tFine.push_back(out.timings.fine);
        tHeads.push_back(out.timings.heads);
        tForward.push_back(out.timings.total());
        tEnd.push_back(end);
        cForward.push_back(cpuMs);
    }

    printModelAndInput(modelDesc, cfg, imageDesc, rgb, input, record, trace32);
    std::printf("\n  %s%s%s, %lld threads, %lld runs after %lld warm-up (median ms), freed memory %s\n", device.c_str(),
                autocast == torch::kFloat ? ""
                : (std::string(" autocast ") + c10::toString(autocast) + (device == "cpu" ? " (backbone)" : "")).c_str(),
                a.has("--tf32") ? " tf32" : "", threads, runs, warmup, a.has("--return-memory") ? "returned to the OS" : "kept");
    std::printf("  backbone     %9.1f ms\n", median(tBackbone));
    std::printf("  coarse       %9.1f ms   (input_proj, encoder, decoder)\n", median(tCoarse));
    if (cfg.fineStage) std::printf("  fine         %9.1f ms\n", median(tFine));
    std::printf("  heads        %9.1f ms\n", median(tHeads));
    std::printf("  forward      %9.1f ms   (CPU time %.1f ms; precision %s%s)\n", median(tForward), median(cForward),
                precisionName(precision),
                referenceLayout ? ", reference layout" : model->device().is_cpu() ? ", folded channels-last backbone" : "");
    const double end = median(tEnd);
    std::printf("  end-to-end   %9.1f ms   (preprocess + forward + %s) = %.2f images/s\n", end,
                record ? "trace capture" : "lines to the CPU, no attention recorded", end > 0 ? 1000.0 / end : 0.0);
    if (precision != torch::kFloat || !referenceLayout) printFloat32Difference(*model, input, precision, referenceLayout);
    if (record) printTraceFigures(trace32, trace16);
    std::printf("  peak RSS     %.1f MiB (VmHWM)\n", double(peakRssKiB()) / 1024.0);
    return 0;
}

} // namespace glimpse::cli
