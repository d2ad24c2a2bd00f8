// glimpse bench constellation: forward and training images per second of ConstellationNet and
// of its ProtoNet baseline (the same backbone without constellation modules) at the same batch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/constellation/cli.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/models/constellation/model.h"
#include "core/train/optim.h"
#include "core/util/threads.h"
#include "core/util/timing.h"

namespace glimpse::app::constellation {

using namespace glimpse::constellation;

const char* kBenchSynopsis =
    "[--backbone conv4|resnet12] [--multi-branch] [--batch 32] [--image-size 32] [--clusters 64] [--runs 5] "
    "[--warmup 2] [--threads T] [--json OUT] [--profile TRACE.json]";

namespace {

const char* kBenchUsage =
    "usage: glimpse bench constellation [--backbone conv4|resnet12] [--multi-branch] [--batch 32]\n"
    "                                   [--image-size 32] [--clusters 64] [--runs 5] [--warmup 2]\n"
    "                                   [--threads T] [--json OUT] [--profile TRACE.json]\n"
    "Forward (eval, no gradient) and training images per second of the ProtoNet baseline and of\n"
    "ConstellationNet (the same backbone, seed and batch of random images): a training step is\n"
    "the trainer's step without the data loading (forward in training mode, cross-entropy of the\n"
    "base-class head, with --multi-branch also the prototypical loss of one 5-way 3-shot 6-query\n"
    "episode through branch 2, backward, gradient clipping, AdamW). Each figure is the median over\n"
    "--runs timed repetitions after --warmup untimed ones; images/s counts the batch (as the\n"
    "trainer's throughput does), per second of wall time and per second of the process's CPU time\n"
    "(on a shared machine the wall time also counts other processes' turns; with --threads 1 the\n"
    "CPU-time figures are the ones to compare). --profile writes a Chrome trace (chrome://tracing) of one\n"
    "ConstellationNet training step.\n";

struct Figures {
    double forward = 0, train = 0;         // images per second of wall time (medians)
    double forwardCpu = 0, trainCpu = 0;   // images per second of the process's CPU time (medians)
    int64_t parameters = 0;
};

double secondsSince(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Figures benchOne(const ConstellationConfig& cfg, int64_t batch, int runs, int warmup, const std::string& profile) {
    ConstellationModel model(cfg, 0);
    Figures f;
    f.parameters = model.numParameters();
    const int64_t S = cfg.imageSize;
    torch::manual_seed(1);
    auto x = torch::randn({batch, 3, S, S});
    auto y = torch::randint(cfg.numClasses, {batch}, torch::kLong);
    const int64_t ways = 5, shots = 3, queries = 6;
    auto episode = torch::randn({ways * (shots + queries), 3, S, S});
    auto target = torch::arange(ways, torch::kLong).repeat_interleave(queries);

    std::vector<double> t, c;
    {
        EvalScope eval(model);
        torch::NoGradGuard ng;
        for (int r = 0; r < warmup + runs; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            const double c0 = processCpuSeconds();
            auto out = model.forward(x);
            (void)out.logits.sum().item<float>();
            if (r >= warmup) {
                t.push_back(secondsSince(t0));
                c.push_back(processCpuSeconds() - c0);
            }
        }
    }
    f.forward = double(batch) / median(t);
    f.forwardCpu = double(batch) / median(c);

    std::vector<train::AdamW::Param> params;
    for (auto& p : model.named_parameters()) params.push_back({p.key(), p.value(), 1.0, p.value().dim() <= 1 ? 0.0 : 1.0});
    train::AdamW::Options o;
    o.lr = 1e-4;
    o.weightDecay = 5e-4;
    train::AdamW opt(params, o);
    model.train(true);
    auto step = [&] {
        auto out = model.forward(x, {false, cfg.multiBranch ? 1 : -1});
        auto loss = torch::nn::functional::cross_entropy(out.logits, y);
        if (cfg.multiBranch) {
            auto e = model.forward(episode, {false, 2}).pooled[0];
            const int64_t ns = ways * shots;
            auto logits = model.temp * cosinePrototypeLogits(e.narrow(0, 0, ns), e.narrow(0, ns, e.size(0) - ns), ways, shots);
            loss = loss + torch::nn::functional::cross_entropy(logits, target);
        }
        (void)loss.item<double>();
        opt.zeroGrad();
        loss.backward();
        train::clipGradNorm(params, 5.0);
        opt.step();
    };
    t.clear();
    c.clear();
    for (int r = 0; r < warmup + runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = processCpuSeconds();
        step();
        if (r >= warmup) {
            t.push_back(secondsSince(t0));
            c.push_back(processCpuSeconds() - c0);
        }
    }
    f.train = double(batch) / median(t);
    f.trainCpu = double(batch) / median(c);
    if (!profile.empty()) {
        torch::autograd::profiler::RecordProfile guard(profile);
        step();
    }
    return f;
}

} // namespace

int benchCommand(const std::vector<std::string>& args) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::cout << kBenchUsage;
        return 0;
    }
    cli::Args a(args, {"--multi-branch"});
    ConstellationConfig cfg;
    long long batch = 32, runs = 5, warmup = 2, threads = 0;
    try {
        a.checkKnown({"--backbone", "--multi-branch", "--batch", "--image-size", "--clusters", "--runs", "--warmup",
                      "--threads", "--json", "--profile"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        cfg.backbone = a.get("--backbone", "conv4");
        cfg.multiBranch = a.has("--multi-branch");
        cfg.imageSize = a.getInt("--image-size", 32);
        cfg.clusters = a.getInt("--clusters", 64);
        batch = a.getInt("--batch", 32);
        runs = a.getInt("--runs", 5);
        warmup = a.getInt("--warmup", 2);
        threads = a.getInt("--threads", 0);
        if (batch < 2 || batch > 4096) throw Error("--batch must lie in 2..4096");
        if (runs < 1 || warmup < 0) throw Error("--runs must be >= 1 and --warmup >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
        cfg.validate();
    } catch (const Error& e) {
        std::cerr << "glimpse bench constellation: " << e.what() << "\n" << kBenchUsage;
        return 2;
    }
    if (threads > 0) setComputeThreads(int(threads));
    ConstellationConfig base = cfg;
    base.constellation = false;
    std::printf("%s vs %s, batch %lld, %lldx%lld, %d threads, median of %lld runs\n", cfg.describe().c_str(),
                base.describe().c_str(), batch, (long long)cfg.imageSize, (long long)cfg.imageSize,
                torch::get_num_threads(), runs);
    const Figures fb = benchOne(base, batch, int(runs), int(warmup), "");
    const Figures fc = benchOne(cfg, batch, int(runs), int(warmup), a.get("--profile", ""));
    std::printf("%-16s %10s %14s %14s %18s %18s\n", "model", "parameters", "forward img/s", "train img/s",
                "forward img/cpu-s", "train img/cpu-s");
    for (const auto& [name, f] : {std::pair<const char*, const Figures&>{"baseline", fb}, {"constellation", fc}})
        std::printf("%-16s %10lld %14.1f %14.1f %18.1f %18.1f\n", name, (long long)f.parameters, f.forward, f.train,
                    f.forwardCpu, f.trainCpu);
    std::printf("constellation / baseline: forward %.2f, training %.2f (wall); forward %.2f, training %.2f (CPU time)\n",
                fc.forward / fb.forward, fc.train / fb.train, fc.forwardCpu / fb.forwardCpu, fc.trainCpu / fb.trainCpu);
    if (a.has("--profile")) std::printf("profile of one ConstellationNet training step: %s\n", a.require("--profile").c_str());
    if (a.has("--json")) {
        auto row = [](const Figures& f) {
            return nlohmann::json{{"parameters", f.parameters},
                                  {"forward_images_per_second", f.forward},
                                  {"train_images_per_second", f.train},
                                  {"forward_images_per_cpu_second", f.forwardCpu},
                                  {"train_images_per_cpu_second", f.trainCpu}};
        };
        const std::string text = nlohmann::json{{"config", cfg.toJson()},
                                                {"batch", batch},
                                                {"threads", torch::get_num_threads()},
                                                {"runs", runs},
                                                {"baseline", row(fb)},
                                                {"constellation", row(fc)},
                                                {"train_ratio", fc.train / fb.train},
                                                {"forward_ratio", fc.forward / fb.forward},
                                                {"train_ratio_cpu", fc.trainCpu / fb.trainCpu},
                                                {"forward_ratio_cpu", fc.forwardCpu / fb.forwardCpu}}
                                     .dump(2);
        writeBytesAtomically(a.require("--json"), text.data(), text.size());
    }
    return 0;
}

} // namespace glimpse::app::constellation
