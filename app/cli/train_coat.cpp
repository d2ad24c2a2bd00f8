// glimpse train coat --data fashion-mnist|DIR --out RUN [--config C.json] [--resume] [--steps N]
//                    [--threads T] [--ablation pe]
// Trains a CoaT classifier headless with a terminal progress bar and ETA
// (core/models/coat/train.h); --ablation pe trains the four position-encoding variants of
// Table 3.6 (neither, CRPE only, CPE only, both) with the same seed and budget into
// RUN/<variant>/ and prints their validation accuracies (also written to RUN/ablation.json).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/models/coat/train.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse train coat --data D --out RUN_DIR [--config C.json] [--resume] [--steps N]\n"
    "                          [--threads T] [--ablation pe]\n"
    "Trains a CoaT image classifier on D: 'fashion-mnist' (Debian's dataset-fashion-mnist),\n"
    "'fashion-mnist:DIR' (the same idx files in DIR) or a folder of class folders\n"
    "(DIR/<class>/*.png|jpg, or DIR/train/<class>/ + DIR/val/<class>/). Without --config the\n"
    "default schedule trains CoaT-Lite Tiny on 32x32 inputs.\n"
    "--steps N stops after N optimizer steps (a checkpoint is written; run again with --resume\n"
    "to continue). Ctrl-C also stops at the next step with a checkpoint.\n"
    "--ablation pe trains the Table 3.6 position-encoding variants (neither, crpe, cpe, both) with\n"
    "the same seed and budget into RUN_DIR/<variant>/ and prints a table of their accuracies;\n"
    "with --resume, finished variants are kept and an interrupted one continues.\n"
    "Writes RUN_DIR/run.h5 (live run log), RUN_DIR/checkpoint.h5 (resumable state) and, at the\n"
    "end, RUN_DIR/model.h5 (a CoaT checkpoint with class names for glimpse infer --model coat).\n";

train::Control* gControl = nullptr;
void onSignal(int) {
    if (gControl) gControl->requestStop();
}

std::string clockText(double s) {
    if (s < 0) return "--:--";
    char buf[32];
    const long t = long(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
    return buf;
}

struct Bar {
    long long maxSteps = -1;   // stop after this many steps (this process's run), -1: none
    train::Control* control = nullptr;
    std::string label;
    bool tty = false;
    int64_t lastPrinted = -1;

    void operator()(const train::Progress& p) {
        if (maxSteps >= 0 && p.step >= maxSteps) control->requestStop();
        if (p.phase == "stopped") return;
        const bool show = tty || p.step == p.totalSteps || p.step - lastPrinted >= 50;
        if (!show || (!tty && p.step == lastPrinted)) return;
        lastPrinted = p.step;
        const int width = 30;
        const double frac = p.totalSteps > 0 ? double(p.step) / double(p.totalSteps) : 1.0;
        const int fill = std::clamp(int(frac * width + 0.5), 0, width);
        auto get = [&](const char* k) {
            auto it = p.latest.find(k);
            return it == p.latest.end() ? -1.0 : it->second;
        };
        char acc[32] = "  -  ";
        if (get("val/acc") >= 0) std::snprintf(acc, sizeof acc, "%.2f%%", 100.0 * get("val/acc"));
        char line[320];
        std::snprintf(line, sizeof line, "%s%s[%s%s] %lld/%lld %-10s loss %.4f val %s lr %.2e %.0f img/s  %s<%s",
                      tty ? "\r" : "", label.c_str(), std::string(size_t(fill), '#').c_str(),
                      std::string(size_t(width - fill), '.').c_str(), (long long)p.step, (long long)p.totalSteps,
                      p.phase.c_str(), get("loss/train"), acc, get("lr"), get("throughput"),
                      clockText(p.elapsed).c_str(), clockText(p.eta).c_str());
        std::cerr << line << (tty ? "" : "\n") << std::flush;
    }
};

} // namespace

int trainCoat(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--resume"});
    long long maxSteps = -1, threads = 0;
    std::string ablation;
    try {
        a.checkKnown({"--config", "--data", "--out", "--resume", "--steps", "--threads", "--ablation"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
        maxSteps = a.getInt("--steps", -1);
        threads = a.getInt("--threads", 0);
        if (a.has("--steps") && maxSteps < 0) throw Error("--steps must be >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
        ablation = a.get("--ablation", "");
        if (a.has("--ablation") && ablation != "pe")
            throw Error("--ablation: only 'pe' (position encodings, Table 3.6) is supported, got '" + ablation + "'");
    } catch (const Error& e) {
        std::cerr << "glimpse train coat: " << e.what() << "\n" << kUsage;
        return 2;
    }
    coat::CoatTrainConfig cfg;
    if (a.has("--config")) cfg = coat::CoatTrainConfig::fromFile(a.require("--config"));
    if (threads > 0) cfg.threads = int(threads);
    const std::string data = a.require("--data"), out = a.require("--out");
    const bool resume = a.has("--resume");

    train::Control control;
    gControl = &control;
    std::signal(SIGINT, onSignal);
    const bool tty = isatty(fileno(stderr));
    auto restore = [&] {
        gControl = nullptr;
        std::signal(SIGINT, SIG_DFL);
    };

    if (ablation.empty()) {
        Bar bar{maxSteps, &control, "", tty};
        coat::CoatTrainResult r;
        try {
            r = coat::trainCoat(cfg, data, out, resume, control, std::ref(bar));
        } catch (...) {
            restore();
            if (tty) std::cerr << "\n";
            throw;
        }
        restore();
        if (tty) std::cerr << "\n";
        if (!r.finished) {
            std::cout << "stopped at step " << r.steps << "; checkpoint in " << out
                      << "/checkpoint.h5 (continue with --resume)\n";
        } else {
            std::printf("done: validation accuracy %.2f%% (loss %.4f, %lld images), %.1f training images/s\n",
                        100.0 * r.valAcc, r.valLoss, (long long)r.valSize, r.imagesPerSecond);
            std::cout << "model in " << out << "/model.h5, run log in " << out << "/run.h5\n";
        }
        return 0;
    }

    // --ablation pe
    std::vector<std::pair<coat::PeVariant, coat::CoatTrainResult>> results;
    bool stopped = false;
    for (const auto& v : coat::peAblationVariants()) {
        const std::string dir = (std::filesystem::path(out) / v.name).string();
        coat::CoatTrainResult r;
        if (resume) r = coat::finishedRunResult(dir);
        if (r.finished) {
            std::cerr << v.name << ": already finished (" << dir << ")\n";
        } else {
            std::error_code ec;
            const bool canResume = resume && std::filesystem::exists(std::filesystem::path(dir) / "checkpoint.h5", ec);
            Bar bar{maxSteps, &control, v.name + " ", tty};
            try {
                r = coat::trainCoat(coat::withVariant(cfg, v), data, dir, canResume, control, std::ref(bar));
            } catch (...) {
                restore();
                if (tty) std::cerr << "\n";
                throw;
            }
            if (tty) std::cerr << "\n";
        }
        results.emplace_back(v, r);
        if (!r.finished) {
            stopped = true;
            break;
        }
    }
    restore();
    nlohmann::json summary = nlohmann::json::array();
    std::printf("\nTable 3.6 position-encoding ablation (%s, seed %llu, %lld steps x batch %lld)\n", data.c_str(),
                (unsigned long long)cfg.seed, (long long)cfg.steps, (long long)cfg.batchSize);
    std::printf("%-8s %-5s %-5s %12s %10s %10s %10s\n", "variant", "CPE", "CRPE", "parameters", "val acc", "val loss",
                "img/s");
    for (const auto& [v, r] : results) {
        if (r.finished)
            std::printf("%-8s %-5s %-5s %12lld %9.2f%% %10.4f %10.1f\n", v.name.c_str(), v.useCpe ? "yes" : "no",
                        v.useCrpe ? "yes" : "no", (long long)r.parameters, 100.0 * r.valAcc, r.valLoss,
                        r.imagesPerSecond);
        else
            std::printf("%-8s %-5s %-5s %12lld %10s\n", v.name.c_str(), v.useCpe ? "yes" : "no",
                        v.useCrpe ? "yes" : "no", (long long)r.parameters, "stopped");
        summary.push_back({{"variant", v.name}, {"use_cpe", v.useCpe}, {"use_crpe", v.useCrpe},
                           {"finished", r.finished}, {"steps", r.steps}, {"parameters", r.parameters},
                           {"val_acc", r.valAcc}, {"val_loss", r.valLoss}, {"val_size", r.valSize},
                           {"train_images_per_second", r.imagesPerSecond}});
    }
    const std::string text = nlohmann::json{{"data", data}, {"config", cfg.toJson()}, {"results", summary}}.dump(2);
    writeBytesAtomically((std::filesystem::path(out) / "ablation.json").string(), text.data(), text.size());
    if (stopped) std::cout << "stopped; continue with --resume\n";
    return 0;
}

} // namespace glimpse::cli
