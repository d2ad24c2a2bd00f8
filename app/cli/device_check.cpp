// glimpse check device: LETR, CoaT and EfficientZero run on a compute device against the CPU on
// the same weights and inputs (issue 21's parity check, headless so that a GPU server without Qt
// runs it). Without a CUDA device it says so and compares the CPU with itself, which still
// exercises every path (exit 0); a difference above the tolerance exits 1.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/models/efficientzero/model.h"
#include "core/models/letr/model.h"
#include "core/util/autocast.h"
#include "core/util/device.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse check device [--device cuda[:N]|cpu] [--tolerance T] [--only letr,coat,efficientzero]\n"
    "                            [--size S]\n"
    "Runs LETR (R50, 1000 line entities, an S x S input, default 512), CoaT-Lite Tiny (224x224, batch 4) and the\n"
    "EfficientZero Atari network (batch 8, one recurrent step) on the device and on the CPU with the\n"
    "same weights and inputs, and prints the largest output differences and the times. Default\n"
    "device: cuda when one is visible, else the CPU against itself (a smoke test: 'no CUDA device').\n"
    "--tolerance: largest absolute difference allowed (default 1e-3; LETR's line endpoints in\n"
    "pixels of the input; float32 on the GPU without TF32). On CUDA, LETR also runs with bf16 autocast\n"
    "against fp32 on the GPU (bound: 0.5 px) and with TF32 (reported only). Times: the first run on each\n"
    "(the GPU's includes its one-time set-up; glimpse bench letr times steady runs). Exit 1 when a\n"
    "difference is larger than its bound.\n";

double maxDiff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble)).abs().max().item<double>();
}

double millis(const std::function<void()>& f, const torch::Device& d) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (d.is_cuda()) torch::cuda::synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Row {
    std::string model, output;
    double diff = 0, cpuMs = 0, deviceMs = 0;
    double tolerance = -1;   // its own bound (bf16 rows); < 0: --tolerance
    bool info = false;       // reported only (TF32): no bound
};

// The bound for bf16 inference: line endpoints within half a pixel of fp32 on the GPU.
constexpr double kBf16TolerancePx = 0.5;

// The largest line-endpoint difference over both stages' layers, in pixels of a size x size input.
double endpointDiffPx(const letr::LetrOutput& a, const letr::LetrOutput& b, int64_t size) {
    double d = 0;
    for (size_t s = 0; s < a.stages.size(); ++s) d = std::max(d, maxDiff(a.stages[s].lines, b.stages[s].lines));
    return d * double(size);
}

// Each check runs `run` on the CPU, moves the model to `dev`, runs it again and compares.
std::vector<Row> checkLetr(const torch::Device& dev, int64_t size) {
    letr::LetrConfig cfg;
    cfg.backbone = "resnet50";
    cfg.numQueries = 1000;
    cfg.validate();
    auto model = std::make_shared<letr::LetrModel>(cfg, 7);
    model->eval();
    torch::NoGradGuard ng;
    const torch::Tensor image = torch::randn({3, size, size});
    letr::LetrOutput cpu, on;
    Row lines{"letr", "line endpoints (px)"}, logits{"letr", "class logits"};
    lines.cpuMs = millis([&] { cpu = model->forward({image}); }, torch::kCPU);
    model->to(dev);
    lines.deviceMs = millis([&] { on = model->forward({image.to(dev)}); }, dev);
    lines.diff = endpointDiffPx(cpu, on, size);
    for (size_t s = 0; s < cpu.stages.size(); ++s)
        logits.diff = std::max(logits.diff, maxDiff(cpu.stages[s].logits, on.stages[s].logits));
    logits.cpuMs = lines.cpuMs;
    logits.deviceMs = lines.deviceMs;
    if (!dev.is_cuda()) return {lines, logits};
    // bf16 autocast on the GPU against fp32 on the GPU (the time column: fp32 GPU, then bf16).
    letr::LetrOutput bf;
    Row half{"letr", "endpoints bf16 vs fp32 (px)"};
    half.tolerance = kBf16TolerancePx;
    half.cpuMs = lines.deviceMs;
    half.deviceMs = millis([&] {
        AutocastGuard ag(dev, torch::kBFloat16);
        bf = model->forward({image.to(dev)});
    }, dev);
    half.diff = endpointDiffPx(on, bf, size);
    // TF32 tensor cores for the float32 products (LibTorch's default for convolutions; glimpse
    // turns it off): how far it moves the endpoints, for the record.
    letr::LetrOutput tf;
    Row tf32{"letr", "endpoints tf32 vs fp32 (px)"};
    tf32.info = true;
    tf32.cpuMs = lines.deviceMs;
    tf32.deviceMs = millis([&] {
        struct Tf32On {   // back to float32 even when the forward throws
            Tf32On() { setTf32(true); }
            ~Tf32On() { setTf32(false); }
        } on32;
        tf = model->forward({image.to(dev)});
    }, dev);
    tf32.diff = endpointDiffPx(on, tf, size);
    return {lines, logits, half, tf32};
}

std::vector<Row> checkCoat(const torch::Device& dev) {
    coat::CoatModel model(coat::CoatConfig::preset("coat_lite_tiny"), 7);
    model.eval();
    torch::NoGradGuard ng;
    const torch::Tensor images = torch::randn({4, 3, 224, 224});
    coat::CoatOutput cpu, on;
    Row r{"coat", "logits (lite tiny)"};
    r.cpuMs = millis([&] { cpu = model.forward(images); }, torch::kCPU);
    model.to(dev);
    r.deviceMs = millis([&] { on = model.forward(images.to(dev)); }, dev);
    r.diff = maxDiff(cpu.logits, on.logits);
    return {r};
}

std::vector<Row> checkEfficientZero(const torch::Device& dev) {
    efficientzero::Config c;   // the Atari network (96x96 RGB, 4 frames, 18 actions)
    c.validate();
    torch::manual_seed(7);
    efficientzero::Network net(c);
    net.train(false);
    torch::NoGradGuard ng;
    const torch::Tensor obs = torch::rand({8, c.inputChannels(), c.obsHeight, c.obsWidth}) * 255.0;
    const torch::Tensor actions = torch::arange(8, torch::kLong).remainder(c.numActions);
    auto step = [&](const torch::Device& d) {
        auto init = net.initialInference(obs.to(d));
        auto rec = net.recurrentInference(init.state, actions.to(d), net.initialLstm(8));
        return std::make_pair(init, rec);
    };
    std::pair<efficientzero::InitialOutput, efficientzero::RecurrentOutput> cpu, on;
    Row value{"efficientzero", "value, policy logits"}, prefix{"efficientzero", "value prefix (1 step)"};
    value.cpuMs = millis([&] { cpu = step(torch::kCPU); }, torch::kCPU);
    net.module().to(dev);
    value.deviceMs = millis([&] { on = step(dev); }, dev);
    value.diff = std::max(maxDiff(cpu.first.value, on.first.value), maxDiff(cpu.first.policyLogits, on.first.policyLogits));
    prefix.diff = std::max(maxDiff(cpu.second.valuePrefix, on.second.valuePrefix), maxDiff(cpu.second.value, on.second.value));
    prefix.cpuMs = value.cpuMs;
    prefix.deviceMs = value.deviceMs;
    return {value, prefix};
}

} // namespace

int checkDevice(const std::vector<std::string>& args) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::cerr << kUsage;
        return 0;
    }
    Args a(args);
    a.checkKnown({"--device", "--tolerance", "--only", "--size"});
    const long long size = a.getInt("--size", 512);
    if (size < 64 || size > 4096) throw Error("--size must be in 64..4096");
    const double tolerance = a.getDouble("--tolerance", 1e-3);
    if (!(tolerance >= 0)) throw Error("--tolerance must be >= 0");
    const bool cuda = torch::cuda::is_available();
    const std::string name = a.get("--device", cuda ? "cuda" : "cpu");
    const torch::Device dev = parseDevice(name);
    if (!dev.is_cuda())
        std::cout << (cuda ? "comparing the CPU with itself (--device cpu)\n"
                           : "no CUDA device (this LibTorch has no CUDA support or no GPU is visible): GPU parity "
                             "skipped; comparing the CPU with itself\n");
    const std::string only = a.get("--only", "letr,coat,efficientzero");
    std::vector<Row> rows;
    for (const auto& [family, fn] : std::vector<std::pair<std::string, std::function<std::vector<Row>(const torch::Device&)>>>{
             {"letr", [size](const torch::Device& d) { return checkLetr(d, size); }}, {"coat", checkCoat}, {"efficientzero", checkEfficientZero}}) {
        if (("," + only + ",").find("," + family + ",") == std::string::npos) continue;
        for (const auto& r : fn(dev)) rows.push_back(r);
    }
    if (rows.empty()) throw Error("--only: expected some of letr,coat,efficientzero, got '" + only + "'");
    bool ok = true;
    std::printf("%-14s %-28s %12s %10s %10s  %s\n", "model", "output", "max |diff|", "cpu ms", (name + " ms").c_str(), "result");
    for (const auto& r : rows) {
        const bool pass = r.info || r.diff <= (r.tolerance >= 0 ? r.tolerance : tolerance);
        ok = ok && pass;
        std::printf("%-14s %-28s %12.3g %10.1f %10.1f  %s\n", r.model.c_str(), r.output.c_str(), r.diff, r.cpuMs, r.deviceMs,
                    r.info ? "info" : pass ? "ok" : "FAIL");
    }
    std::printf("tolerance %g (bf16 rows: %g px): %s\n", tolerance, kBf16TolerancePx,
                ok ? "all outputs agree" : "outputs differ");
    return ok ? 0 : 1;
}

} // namespace glimpse::cli
