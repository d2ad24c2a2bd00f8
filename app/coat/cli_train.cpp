// glimpse train coat --data fashion-mnist|DIR --out RUN [--config C.json] [--resume] [--steps N]
//                    [--threads T] [--ablation pe]
// Trains a CoaT classifier headless with a terminal progress bar and ETA
// (core/models/coat/train.h); --ablation pe trains the four position-encoding variants of
// Table 3.6 (neither, CRPE only, CPE only, both) with the same seed and budget into
// RUN/<variant>/ and prints their validation accuracies (also written to RUN/ablation.json).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/cli/resource_path.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/models/coat/train.h"
#include "core/train/run.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse train coat --data D --out RUN_DIR [--config C.json] [--resume] [--steps N]\n"
    "                          [--threads T] [--ablation pe]\n"
    "Trains a CoaT image classifier on D: 'fashion-mnist' (Debian's dataset-fashion-mnist),\n"
    "'fashion-mnist:DIR' (the same idx files in DIR) or a folder of class folders\n"
    "(DIR/<class>/*.png|jpg, or DIR/train/<class>/ + DIR/val/<class>/). Without --config it\n"
    "trains with the recipe the Training panel uses (coat_fmnist_train.json: the shipped model's\n"
    "small CoaT at 32x32, 3600 steps, a first validation at step 100, then every 600).\n"
    "The progress line shows the training loss, the training accuracy (a moving average over\n"
    "about 20 batches) and the latest validation accuracy.\n"
    "--steps N stops after N optimizer steps (a checkpoint is written; run again with --resume\n"
    "to continue). Ctrl-C also stops at the next step with a checkpoint.\n"
    "--ablation pe trains the Table 3.6 position-encoding variants (neither, crpe, cpe, both) with\n"
    "the same seed and budget into RUN_DIR/<variant>/ and prints a table of their accuracies;\n"
    "with --resume, finished variants are kept and an interrupted one continues.\n"
    "Writes RUN_DIR/run.h5 (live run log), RUN_DIR/checkpoint.h5 (resumable state) and, at the\n"
    "end, RUN_DIR/model.h5 (a CoaT checkpoint with class names for glimpse infer --model coat).\n";

std::string usage() { return std::string(kUsage) + kDistUsage; }

// The training accuracy shown: an exponential moving average of the batch accuracies (a batch
// of 64 alone swings by several points), updated once per step.
struct TrainAccuracy {
    double mean = -1;
    int64_t step = -1;
    void add(const train::Progress& p) {
        const double a = latestMetric(p, "train/acc", -1.0);
        if (a < 0 || p.step == step) return;
        step = p.step;
        mean = mean < 0 ? a : 0.95 * mean + 0.05 * a;
    }
};

std::string coatMetrics(const train::Progress& p, const TrainAccuracy& trainAcc) {
    char acc[32] = "  -  ", tacc[32] = "  -  ";
    const double val = latestMetric(p, "val/acc", -1.0);
    if (val >= 0) std::snprintf(acc, sizeof acc, "%.2f%%", 100.0 * val);
    if (trainAcc.mean >= 0) std::snprintf(tacc, sizeof tacc, "%.1f%%", 100.0 * trainAcc.mean);
    char m[192];
    std::snprintf(m, sizeof m, "loss %.4f acc %s val %s lr %.2e %.0f img/s", latestMetric(p, "loss/train", -1.0), tacc,
                  acc, latestMetric(p, "lr", -1.0), latestMetric(p, "throughput", -1.0));
    return m;
}

// A progress bar for one CoaT run: the bar, with the training accuracy averaged over steps.
struct CoatProgress {
    TrainAccuracy acc;
    TrainingProgress bar;
    CoatProgress(train::Control& control, long long maxSteps, const std::string& label)
        : bar(control, [this](const train::Progress& p) { return coatMetrics(p, acc); }, maxSteps, 50, label) {}
    train::ProgressFn fn() {
        return [this](const train::Progress& p) {
            acc.add(p);
            bar(p);
        };
    }
};

void printAblation(const coat::CoatTrainConfig& cfg, const std::string& data, const std::string& out,
                   const std::vector<std::pair<coat::PeVariant, coat::CoatTrainResult>>& results);
int peAblation(const coat::CoatTrainConfig& cfg, const std::string& data, const std::string& out, bool resume,
               long long maxSteps, train::Control& control);

} // namespace

int trainCoat(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << usage();
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--resume"});
    long long maxSteps = -1, threads = 0;
    std::string ablation;
    dist::Settings ds;
    try {
        std::vector<std::string> known{"--config", "--data", "--out", "--resume", "--steps", "--threads", "--ablation"};
        known.insert(known.end(), distFlags().begin(), distFlags().end());
        a.checkKnown(known);
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
        maxSteps = a.getInt("--steps", -1);
        threads = a.getInt("--threads", 0);
        if (a.has("--steps") && maxSteps < 0) throw Error("--steps must be >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
        ablation = a.get("--ablation", "");
        if (a.has("--ablation") && ablation != "pe")
            throw Error("--ablation: only 'pe' (position encodings, Table 3.6) is supported, got '" + ablation + "'");
        ds = distSettings(a);
    } catch (const Error& e) {
        std::cerr << "glimpse train coat: " << e.what() << "\n" << usage();
        return 2;
    }
    coat::CoatTrainConfig cfg;
    if (a.has("--config")) {
        cfg = coat::CoatTrainConfig::fromFile(a.require("--config"));
    } else if (const std::string recipe = resourcePath("coat_fmnist_train.json"); !recipe.empty()) {
        cfg = coat::CoatTrainConfig::fromFile(recipe);   // the Training panel's recipe
        std::cerr << "glimpse train coat: the Training panel's recipe " << recipe << " (--config C.json for another)\n";
    } else {
        std::cerr << "glimpse train coat: coat_fmnist_train.json is not installed: the built-in defaults (CoaT-Lite "
                     "Tiny at 32x32)\n";
    }
    if (threads > 0) cfg.threads = int(threads);
    if (cfg.threads > 0) setComputeThreads(cfg.threads);   // OpenBLAS's pool too (core/util/threads.h)
    const std::string data = a.require("--data"), out = a.require("--out");
    const bool resume = a.has("--resume");

    train::Control control;
    StopOnInterrupt interrupt(control);
    std::unique_ptr<dist::Communicator> comm;
    if (ds.distributed()) {
        train::checkBatchDividesWorld(cfg.batchSize, ds.worldSize, "rows");   // before the rendezvous
        std::cerr << "glimpse train coat: " << ds.describe() << ": waiting for the other ranks\n";
        comm = std::make_unique<dist::Communicator>(ds);
    }
    if (ablation.empty()) {
        coat::CoatTrainResult r;
        {
            CoatProgress bar(control, maxSteps, ds.distributed() ? "rank " + std::to_string(ds.rank) + " " : "");
            r = coat::trainCoat(cfg, data, out, resume, control, bar.fn(), comm.get());
        }
        if (r.rank != 0) {
            std::cout << "rank " << r.rank << " of " << r.worldSize << ": " << (r.finished ? "done" : "stopped")
                      << " after step " << r.steps << " (" << r.imagesPerSecond << " images/s here); rank 0 writes "
                      << out << "\n";
        } else if (!r.finished) {
            std::cout << "stopped at step " << r.steps << "; checkpoint in " << out
                      << "/checkpoint.h5 (continue with --resume)\n";
        } else {
            std::printf("done: validation accuracy %.2f%% (loss %.4f, %lld images), %.1f training images/s%s\n",
                        100.0 * r.valAcc, r.valLoss, (long long)r.valSize, r.imagesPerSecond * r.worldSize,
                        r.worldSize > 1 ? (" over " + std::to_string(r.worldSize) + " ranks").c_str() : "");
            std::cout << "model in " << out << "/model.h5, run log in " << out << "/run.h5\n";
        }
        return 0;
    }
    if (comm) {
        std::cerr << "glimpse train coat: --ablation runs in one process (no distributed settings)\n";
        return 2;
    }
    return peAblation(cfg, data, out, resume, maxSteps, control);
}

namespace {

int peAblation(const coat::CoatTrainConfig& cfg, const std::string& data, const std::string& out, bool resume,
               long long maxSteps, train::Control& control) {
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
            CoatProgress bar(control, maxSteps, v.name + " ");
            r = coat::trainCoat(coat::withVariant(cfg, v), data, dir, canResume, control, bar.fn());
        }
        results.emplace_back(v, r);
        if (!r.finished) {
            stopped = true;
            break;
        }
    }
    printAblation(cfg, data, out, results);
    if (stopped) std::cout << "stopped; continue with --resume\n";
    return 0;
}

void printAblation(const coat::CoatTrainConfig& cfg, const std::string& data, const std::string& out,
                   const std::vector<std::pair<coat::PeVariant, coat::CoatTrainResult>>& results) {
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
}

} // namespace

} // namespace glimpse::cli
