// glimpse train letr --config C.json --data D --out RUN_DIR [--resume] [--steps N]: trains
// LETR headless with a terminal progress bar and ETA (core/models/letr/train.h).
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/util/device.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/models/letr/train.h"
#include "core/train/run.h"

namespace glimpse::cli {

namespace {

const char* kTrainUsage =
    "usage: glimpse train letr --data D --out RUN_DIR [--config C.json] [--resume] [--steps N]\n"
    "                          [--threads T] [--init MODEL.h5] [--device cpu|cuda[:N]]\n"
    "Trains LETR (coarse stage, then fine stage initialized from it, then optional focal\n"
    "fine-tuning) on D: a Wireframe JSON file, a folder with train.json,\n"
    "procedural:COUNT[:SEED[:WxH[:SCENES]]], lsd:PHOTOS (a folder or .txt list of photos labelled by\n"
    "LSD's long segments), mlsd:PHOTOS (labelled by M-LSD tiny, cached in LIST.mlsd.h5 beside the\n"
    "list) or mix:D1+D2[+...] (interleaved). Without --config the small CPU model and\n"
    "schedule are used.\n"
    "--steps N stops after N optimizer steps in total (a checkpoint is written; run again\n"
    "with --resume to continue). Ctrl-C also stops at the next step with a checkpoint.\n"
    "Writes RUN_DIR/run.h5 (live run log), RUN_DIR/checkpoint.h5 (resumable state) and, at the\n"
    "end, RUN_DIR/model.h5 (a LETR checkpoint for glimpse infer and the GUI).\n"
    "--init starts from the weights of a LETR model or of another run's checkpoint.h5 (the\n"
    "config's \"init\"; the shapes must match) instead of random ones.\n"
    "--device runs the model, its gradients and the optimizer there (default cpu); data,\n"
    "matching and files stay on the CPU, and a run may resume on another device.\n";

std::string usage() { return std::string(kTrainUsage) + kDistUsage; }

} // namespace

int trainLetr(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << usage();
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--resume"});
    long long maxSteps = -1, threads = 0;
    dist::Settings ds;
    torch::Device device(torch::kCPU);
    try {
        std::vector<std::string> known{"--config", "--data", "--out", "--resume", "--steps", "--threads", "--init", "--device"};
        known.insert(known.end(), distFlags().begin(), distFlags().end());
        a.checkKnown(known);
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
        maxSteps = a.getInt("--steps", -1);
        threads = a.getInt("--threads", 0);
        if (a.has("--steps") && maxSteps < 0) throw Error("--steps must be >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
        ds = distSettings(a);
        device = parseDevice(a.get("--device", "cpu"));
        // trainLetr refuses this too; here it is refused before the rendezvous waits for the ranks.
        if (ds.distributed() && !device.is_cpu())
            throw Error("--device " + device.str() + ": distributed training runs on the CPU (Gloo); use one process");
    } catch (const Error& e) {
        std::cerr << "glimpse train letr: " << e.what() << "\n" << usage();
        return 2;
    }
    letr::LetrTrainConfig cfg;
    if (a.has("--config")) cfg = letr::LetrTrainConfig::fromFile(a.require("--config"));
    if (threads > 0) cfg.threads = int(threads);
    if (a.has("--init")) cfg.init = a.require("--init");
    if (cfg.threads > 0) setComputeThreads(cfg.threads);   // OpenBLAS's pool too (core/util/threads.h)
    if (letr::trainingBackboneMode(cfg.bf16Backbone, device, device.is_cpu() && cpuHasBf16()).fellBack)
        std::cerr << "glimpse train letr: bf16_backbone: this CPU has no bfloat16 instructions (AVX512-BF16, "
                     "AMX-BF16); the backbone trains in float32, channels-last, which is faster here\n";

    train::Control control;
    int64_t lastStep = 0, total = -1;
    const std::string out = a.require("--out");
    std::unique_ptr<dist::Communicator> comm;
    if (ds.distributed()) {
        train::checkBatchDividesWorld(cfg.batchSize, ds.worldSize, "images");   // before the rendezvous
        std::cerr << "glimpse train letr: " << ds.describe() << ": waiting for the other ranks\n";
        comm = std::make_unique<dist::Communicator>(ds);
    }
    {
        StopOnInterrupt interrupt(control);
        TrainingProgress bar(control, [&](const train::Progress& p) {
            lastStep = p.step;
            total = p.totalSteps;
            char m[160];
            std::snprintf(m, sizeof m, "loss %.4f (cls %.4f l1 %.4f) %.1f img/s", latestMetric(p, "loss/total"),
                          latestMetric(p, "loss/cls"), latestMetric(p, "loss/l1"), latestMetric(p, "throughput"));
            return std::string(m);
        }, maxSteps, 25, ds.distributed() ? "rank " + std::to_string(ds.rank) + " " : "");
        letr::trainLetr(cfg, a.require("--data"), out, a.has("--resume"), control, bar.fn(), comm.get(), device);
    }
    if (ds.rank != 0) {
        std::cout << "rank " << ds.rank << " of " << ds.worldSize << ": " << (lastStep < total ? "stopped" : "done")
                  << " after step " << lastStep << "; rank 0 writes " << out << "\n";
    } else if ((control.stopRequested() && lastStep < total) || (comm && lastStep < total)) {
        std::cout << "stopped; checkpoint in " << out << "/checkpoint.h5 (continue with --resume)\n";
    } else {
        std::cout << "done; model in " << out << "/model.h5, run log in " << out << "/run.h5\n";
    }
    return 0;
}

} // namespace glimpse::cli
