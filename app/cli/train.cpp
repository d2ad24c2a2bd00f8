// glimpse train letr --config C.json --data D --out RUN_DIR [--resume] [--steps N]: trains
// LETR headless with a terminal progress bar and ETA (core/models/letr/train.h).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/models/letr/train.h"

namespace glimpse::cli {

namespace {

const char* kTrainUsage =
    "usage: glimpse train letr --data D --out RUN_DIR [--config C.json] [--resume] [--steps N]\n"
    "                          [--threads T]\n"
    "Trains LETR (coarse stage, then fine stage initialized from it, then optional focal\n"
    "fine-tuning) on D: a Wireframe JSON file, a folder with train.json, or\n"
    "procedural:COUNT[:SEED[:WxH]]. Without --config the small CPU model and schedule are used.\n"
    "--steps N stops after N optimizer steps in total (a checkpoint is written; run again\n"
    "with --resume to continue). Ctrl-C also stops at the next step with a checkpoint.\n"
    "Writes RUN_DIR/run.h5 (live run log), RUN_DIR/checkpoint.h5 (resumable state) and, at the\n"
    "end, RUN_DIR/model.h5 (a LETR checkpoint for glimpse infer and the GUI).\n";

train::Control* gControl = nullptr;
void onSignal(int) {
    if (gControl) gControl->requestStop();
}

std::string clock(double s) {
    if (s < 0) return "--:--";
    char buf[32];
    const long t = long(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
    return buf;
}

} // namespace

int train(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kTrainUsage;
        return args.empty() ? 2 : 0;
    }
    if (args[0] != "letr") {
        std::cerr << "glimpse train: unknown model '" << args[0] << "' (supported: letr)\n" << kTrainUsage;
        return 2;
    }
    Args a(std::vector<std::string>(args.begin() + 1, args.end()), {"--resume"});
    long long maxSteps = -1, threads = 0;
    try {
        a.checkKnown({"--config", "--data", "--out", "--resume", "--steps", "--threads"});
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
        maxSteps = a.getInt("--steps", -1);
        threads = a.getInt("--threads", 0);
        if (a.has("--steps") && maxSteps < 0) throw Error("--steps must be >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
    } catch (const Error& e) {
        std::cerr << "glimpse train letr: " << e.what() << "\n" << kTrainUsage;
        return 2;
    }
    letr::LetrTrainConfig cfg;
    if (a.has("--config")) cfg = letr::LetrTrainConfig::fromFile(a.require("--config"));
    if (threads > 0) cfg.threads = int(threads);

    train::Control control;
    gControl = &control;
    std::signal(SIGINT, onSignal);
    const bool tty = isatty(fileno(stderr));
    int64_t lastPrinted = -1, lastStep = 0, total = -1;
    auto progress = [&](const train::Progress& p) {
        lastStep = p.step;
        total = p.totalSteps;
        if (maxSteps >= 0 && p.step >= maxSteps) control.requestStop();
        if (p.phase == "stopped") return;
        const bool show = tty || p.step == p.totalSteps || p.step - lastPrinted >= 25;
        if (!show) return;
        lastPrinted = p.step;
        const int width = 30;
        const double frac = p.totalSteps > 0 ? double(p.step) / double(p.totalSteps) : 1.0;
        const int fill = int(frac * width + 0.5);
        auto get = [&](const char* k) {
            auto it = p.latest.find(k);
            return it == p.latest.end() ? 0.0 : it->second;
        };
        char line[256];
        std::snprintf(line, sizeof line, "%s[%s%s] %lld/%lld %-6s loss %.4f (cls %.4f l1 %.4f) %.1f img/s  %s<%s",
                      tty ? "\r" : "", std::string(size_t(fill), '#').c_str(),
                      std::string(size_t(width - fill), '.').c_str(), (long long)p.step, (long long)p.totalSteps,
                      p.phase.c_str(), get("loss/total"), get("loss/cls"), get("loss/l1"), get("throughput"),
                      clock(p.elapsed).c_str(), clock(p.eta).c_str());
        std::cerr << line << (tty ? "" : "\n") << std::flush;
    };
    const std::string out = a.require("--out");
    try {
        letr::trainLetr(cfg, a.require("--data"), out, a.has("--resume"), control, progress);
    } catch (...) {
        gControl = nullptr;
        std::signal(SIGINT, SIG_DFL);
        if (tty) std::cerr << "\n";
        throw;
    }
    gControl = nullptr;
    std::signal(SIGINT, SIG_DFL);
    if (tty) std::cerr << "\n";
    if (control.stopRequested() && lastStep < total) {
        std::cout << "stopped; checkpoint in " << out << "/checkpoint.h5 (continue with --resume)\n";
    } else {
        std::cout << "done; model in " << out << "/model.h5, run log in " << out << "/run.h5\n";
    }
    return 0;
}

} // namespace glimpse::cli
