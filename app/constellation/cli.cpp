// glimpse train constellation --data D --out RUN [--config C.json] [--baseline] [--multi-branch]
//                             [--compare] [--resume] [--steps N] [--threads T]
// glimpse eval fewshot --checkpoint C.h5 [--data D] [--split novel|val|base] [--ways 5]
//                      [--shots 1,5] [--queries 15] [--episodes 600] [--seed S] [--json OUT]
#include "app/constellation/cli.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/cli/results_cli.h"
#include "core/results/results.h"
#include "core/util/threads.h"
#include "core/data/fewshot.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/runlog.h"
#include "core/models/constellation/fewshot.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/train.h"
#include "core/train/run.h"

namespace glimpse::app::constellation {

using namespace glimpse::constellation;
namespace fs = std::filesystem;
using cli::latestMetric;
using cli::TrainingProgress;

const char* kTrainSynopsis =
    "--data D --out RUN [--config C.json] [--baseline] [--multi-branch] [--compare] [--resume] [--steps N] "
    "[--threads T]";
const char* kEvalSynopsis =
    "--checkpoint C.h5 [--data D] [--split novel|val|base] [--ways N] [--shots 1,5] [--queries Q] "
    "[--episodes E] [--seed S] [--json OUT] [--out R.h5]";

namespace {

const char* kTrainUsage =
    "usage: glimpse train constellation --data D --out RUN [--config C.json] [--baseline]\n"
    "                                   [--multi-branch] [--compare] [--resume] [--steps N] [--threads T]\n"
    "Trains ConstellationNet (or, with --baseline, the ProtoNet baseline: the same backbone without\n"
    "constellation modules) on the base classes of the few-shot dataset D:\n"
    "  procedural[:SEED]   100 generated classes (64 base / 16 val / 20 novel)\n"
    "  composition[:SEED]  100 generated classes of shapes, textures and arrangements, colours\n"
    "                      random per image (64 base / 16 val / 20 novel)\n"
    "  fashion-mnist[:DIR] 5 base classes (T-shirt..Coat), 5 novel (Sandal..Ankle boot)\n"
    "  DIR                 a mini-ImageNet-style folder: DIR/train, DIR/val (optional), DIR/test\n"
    "At the end it reports 5-way 1-shot and 5-shot accuracy (95% CI) on the novel classes.\n"
    "--compare trains both the baseline and ConstellationNet with the same seed and budget into\n"
    "RUN/baseline and RUN/constellation and prints their table (RUN/compare.json).\n"
    "--steps N stops after N steps with a checkpoint (--resume continues); so does Ctrl-C.\n"
    "Writes RUN/run.h5 (live run log), RUN/checkpoint.h5 and, at the end, RUN/model.h5.\n";

const char* kEvalUsage =
    "usage: glimpse eval fewshot --checkpoint C.h5 [--data D] [--split novel|val|base] [--ways N]\n"
    "                            [--shots 1,5] [--queries Q] [--episodes E] [--seed S] [--json OUT]\n"
    "                            [--out R.h5]\n"
    "N-way K-shot episodes of the split's classes (default: 5-way, 1 and 5 shots, 15 queries per\n"
    "class, 600 episodes, the novel split of 'procedural'); prints the mean accuracy and its 95%\n"
    "confidence interval (1.96 std / sqrt(episodes)) per shot count. --out writes a results file\n"
    "(glimpse.results, docs/formats.md): every episode's classes, supports, queries, predictions and\n"
    "accuracy, written as the episodes go; Ctrl-C stops it with the episodes done.\n";

std::string metrics(const train::Progress& p) {
    char acc[32] = "  -  ";
    const double val = latestMetric(p, "val/acc", -1.0);
    if (val >= 0) std::snprintf(acc, sizeof acc, "%.2f%%", 100.0 * val);
    char m[160];
    std::snprintf(m, sizeof m, "loss %.4f train %.1f%% val-5w %s %.0f img/s", latestMetric(p, "loss/train", -1.0),
                  100.0 * latestMetric(p, "train/acc", 0.0), acc, latestMetric(p, "throughput", -1.0));
    return m;
}

std::vector<int64_t> parseShots(const std::string& text) {
    std::vector<int64_t> shots;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            const long long v = std::stoll(item, &used);
            if (used != item.size() || v < 1) throw std::invalid_argument(item);
            shots.push_back(v);
        } catch (const std::exception&) {
            throw Error("--shots: expected positive integers separated by commas, got '" + text + "'");
        }
    }
    if (shots.empty()) throw Error("--shots: no shot counts in '" + text + "'");
    return shots;
}

ConstellationTrainResult trainOne(ConstellationTrainConfig cfg, bool baseline, const std::string& data,
                                  const std::string& out, bool resume, long long maxSteps, train::Control& control,
                                  const std::string& label, dist::Communicator* comm) {
    if (baseline) cfg.model["constellation"] = false;
    std::error_code ec;
    const bool canResume = resume && fs::exists(fs::path(out) / "checkpoint.h5", ec);
    if (resume && !canResume && fs::exists(fs::path(out) / "model.h5", ec)) {
        ConstellationTrainResult done;
        done.finished = true;   // finished before: report from its run log
        auto log = RunLog::load((fs::path(out) / "run.h5").string());
        auto get = [&](const std::string& k) { return log.eval.count(k) ? log.eval.at(k).item<double>() : -1.0; };
        done.novel1 = get("final/novel_1shot_acc"), done.novel1Ci = get("final/novel_1shot_ci95");
        done.novel5 = get("final/novel_5shot_acc"), done.novel5Ci = get("final/novel_5shot_ci95");
        done.parameters = log.config.value("parameters", int64_t(0));
        done.imagesPerSecond = get("final/train_images_per_second");
        return done;
    }
    TrainingProgress bar(control, metrics, maxSteps, 50, label);
    if (resume && !canResume) std::cerr << out << ": no checkpoint yet; starting the run from step 0\n";
    return trainConstellation(cfg, data, out, canResume, control, bar.fn(), comm);
}

// compare.json's value of an accuracy or its CI: null when the run did not evaluate (acc < 0).
nlohmann::json evaluated(double value, double acc) { return acc < 0 ? nlohmann::json(nullptr) : nlohmann::json(value); }

void printRow(const std::string& name, const ConstellationTrainResult& r) {
    if (!r.finished) {
        std::printf("%-16s %10s\n", name.c_str(), "stopped");
        return;
    }
    // A cell the run did not evaluate (final_episodes 0) is "-", not -100 %.
    auto cell = [](double acc, double ci) {
        char buf[32];
        if (acc < 0) std::snprintf(buf, sizeof buf, "%-14s", "-");
        else std::snprintf(buf, sizeof buf, "%6.2f +- %4.2f", 100 * acc, 100 * ci);
        return std::string(buf);
    };
    std::printf("%-16s %10lld   %s   %s   %8.1f\n", name.c_str(), (long long)r.parameters,
                cell(r.novel1, r.novel1Ci).c_str(), cell(r.novel5, r.novel5Ci).c_str(), r.imagesPerSecond);
}

} // namespace

int trainCommand(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kTrainUsage << cli::kDistUsage;
        return args.empty() ? 2 : 0;
    }
    cli::Args a(args, {"--resume", "--baseline", "--multi-branch", "--compare"});
    long long maxSteps = -1, threads = 0;
    dist::Settings ds;
    try {
        std::vector<std::string> known{"--config", "--data", "--out", "--resume", "--steps", "--threads", "--baseline",
                                       "--multi-branch", "--compare"};
        known.insert(known.end(), cli::distFlags().begin(), cli::distFlags().end());
        a.checkKnown(known);
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
        maxSteps = a.getInt("--steps", -1);
        threads = a.getInt("--threads", 0);
        if (a.has("--steps") && maxSteps < 0) throw Error("--steps must be >= 0");
        if (threads < 0) throw Error("--threads must be >= 0");
        if (a.has("--compare") && a.has("--baseline")) throw Error("--compare already trains the baseline");
        ds = cli::distSettings(a);
    } catch (const Error& e) {
        std::cerr << "glimpse train constellation: " << e.what() << "\n" << kTrainUsage << cli::kDistUsage;
        return 2;
    }
    ConstellationTrainConfig cfg;
    if (a.has("--config")) cfg = ConstellationTrainConfig::fromFile(a.require("--config"));
    if (threads > 0) cfg.threads = int(threads);
    if (cfg.threads > 0) setComputeThreads(cfg.threads);   // OpenBLAS's pool too (core/util/threads.h)
    if (a.has("--multi-branch")) cfg.model["multi_branch"] = true;
    const std::string data = a.require("--data"), out = a.require("--out");
    const bool resume = a.has("--resume");
    train::Control control;
    cli::StopOnInterrupt interrupt(control);
    std::unique_ptr<dist::Communicator> comm;
    if (ds.distributed()) {
        train::checkBatchDividesWorld(cfg.batchSize, ds.worldSize, "images");   // before the rendezvous
        std::cerr << "glimpse train constellation: " << ds.describe() << ": waiting for the other ranks\n";
        comm = std::make_unique<dist::Communicator>(ds);
    }
    const std::string rankLabel = ds.distributed() ? "rank " + std::to_string(ds.rank) + " " : "";
    std::vector<std::pair<std::string, ConstellationTrainResult>> results;
    if (!a.has("--compare")) {
        results.emplace_back(a.has("--baseline") ? "baseline" : "constellation",
                             trainOne(cfg, a.has("--baseline"), data, out, resume, maxSteps, control, rankLabel, comm.get()));
    } else {
        for (const char* v : {"baseline", "constellation"}) {
            results.emplace_back(v, trainOne(cfg, std::string(v) == "baseline", data, (fs::path(out) / v).string(), resume,
                                             maxSteps, control, rankLabel + v + " ", comm.get()));
            if (!results.back().second.finished) break;
        }
    }
    if (ds.rank != 0) {   // rank 0 evaluates, prints the table and writes the files
        const auto& r = results.back().second;
        std::cout << "rank " << ds.rank << " of " << ds.worldSize << ": " << (r.finished ? "done" : "stopped") << " after step "
                  << r.steps << "; rank 0 writes " << out << "\n";
        return 0;
    }
    std::printf("\n5-way few-shot accuracy (%%) on the novel classes of %s, 95%% CI\n", data.c_str());
    std::printf("%-16s %10s   %-14s   %-14s   %8s\n", "model", "parameters", "1-shot", "5-shot", "img/s");
    nlohmann::json summary = nlohmann::json::array();
    bool stopped = false;
    for (const auto& [name, r] : results) {
        printRow(name, r);
        stopped = stopped || !r.finished;
        summary.push_back({{"model", name}, {"finished", r.finished}, {"parameters", r.parameters},
                           {"novel_1shot", evaluated(r.novel1, r.novel1)}, {"novel_1shot_ci95", evaluated(r.novel1Ci, r.novel1)},
                           {"novel_5shot", evaluated(r.novel5, r.novel5)}, {"novel_5shot_ci95", evaluated(r.novel5Ci, r.novel5)},
                           {"train_images_per_second", r.imagesPerSecond},
                           {"seconds", r.seconds}});
    }
    if (stopped) std::cout << "stopped; checkpoint written, continue with --resume\n";
    if (a.has("--compare")) {
        const std::string text = nlohmann::json{{"data", data}, {"config", cfg.toJson()}, {"results", summary}}.dump(2);
        writeBytesAtomically((fs::path(out) / "compare.json").string(), text.data(), text.size());
    }
    return 0;
}

int evalFewShotCommand(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kEvalUsage;
        return args.empty() ? 2 : 0;
    }
    cli::Args a(args);
    data::EpisodeSpec spec;
    std::vector<int64_t> shots;
    long long episodes = 600, seed = 0;
    std::string split;
    try {
        a.checkKnown({"--checkpoint", "--data", "--split", "--ways", "--shots", "--queries", "--episodes", "--seed",
                      "--json", "--out"});
        if (a.has("--out")) cli::checkOutputFolder(*a.get("--out"), "--out");
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
        if (!a.has("--checkpoint")) throw Error("missing --checkpoint");
        spec.ways = a.getInt("--ways", 5);
        spec.queries = a.getInt("--queries", 15);
        episodes = a.getInt("--episodes", 600);
        seed = a.getInt("--seed", 0);
        shots = parseShots(a.get("--shots", "1,5"));
        split = a.get("--split", "novel");
        if (split != "novel" && split != "val" && split != "base")
            throw Error("--split must be novel, val or base, got '" + split + "'");
        if (episodes < 1) throw Error("--episodes must be >= 1");
    } catch (const Error& e) {
        std::cerr << "glimpse eval fewshot: " << e.what() << "\n" << kEvalUsage;
        return 2;
    }
    auto model = loadConstellation(a.require("--checkpoint"));
    const std::string dataSpec = a.get("--data", "procedural");
    auto splits = data::openFewShotDataset(dataSpec, int(model->config().imageSize));
    auto ds = split == "novel" ? splits.novel : split == "val" ? splits.val : splits.base;
    data::EpisodeSampler sampler(ds, dataSpec + " " + split);
    std::printf("%s, %s (%lld parameters) on %s %s: %lld classes\n", a.require("--checkpoint").c_str(),
                model->config().describe().c_str(), (long long)model->numParameters(), dataSpec.c_str(), split.c_str(),
                (long long)sampler.numClasses());
    // --out: a results file, one record per episode, written as the episodes go.
    std::unique_ptr<results::ResultsWriter> writer;
    std::vector<results::FewShotSummaryRow> summary;
    train::Control control;
    std::optional<cli::StopOnInterrupt> interrupt;
    if (a.has("--out")) {
        std::vector<results::FewShotSetting> settings;
        for (int64_t k : shots) settings.push_back({spec.ways, k, spec.queries, int64_t(episodes), uint64_t(seed)});
        results::ResultsHeader h;
        h.type = results::ResultsType::FewShot;
        h.family = "constellation";
        h.command = cli::commandLine("glimpse eval fewshot", args);
        h.checkpoint = a.require("--checkpoint");
        h.source.spec = dataSpec;
        h.source.split = split;
        h.config = {{"image_size", model->config().imageSize}, {"ways", spec.ways}, {"queries", spec.queries},
                    {"episodes", episodes}, {"seed", seed}};
        results::WriterOptions wo;
        wo.expectedSamples = int64_t(episodes) * int64_t(shots.size());
        wo.flushEvery = 8;
        writer = results::ResultsWriter::createFewShot(*a.get("--out"), h, settings, ds->classNames(), wo);
        interrupt.emplace(control);
    }
    bool stopped = false;
    nlohmann::json rows = nlohmann::json::array();
    for (size_t si = 0; si < shots.size() && !stopped; ++si) {
        const int64_t k = shots[si];
        spec.shots = k;
        FewShotResult r;
        {
            cli::CountProgress progress(std::to_string(k) + "-shot: ", " episodes");
            EpisodeFn onEpisode;
            if (writer)
                onEpisode = [&](int64_t e, const data::Episode& ep, const std::vector<int64_t>& pred, double acc) {
                    writer->add(results::EpisodeIn{int64_t(si), e, ep.classes, ep.support, ep.query, pred, acc});
                };
            r = evaluateFewShot(*model, sampler, spec, episodes, uint64_t(seed), progress.fn(),
                                [&] { return control.stopRequested(); }, onEpisode);
        }
        stopped = r.cancelled;
        if (writer) {
            results::FewShotSummaryRow row;
            row.setting = {spec.ways, k, spec.queries, int64_t(episodes), uint64_t(seed)};
            row.episodesDone = int64_t(r.accuracies.size());
            row.mean = r.mean;
            row.ci95 = r.ci95;
            summary.push_back(row);
        }
        std::printf("%lld-way %lld-shot: %.2f%% +- %.2f%% (95%% CI, %lld episodes, %lld queries each, %.1f s)\n",
                    (long long)spec.ways, (long long)k, 100 * r.mean, 100 * r.ci95, (long long)r.accuracies.size(),
                    (long long)(spec.ways * spec.queries), r.seconds);
        rows.push_back({{"ways", spec.ways}, {"shots", k}, {"queries", spec.queries}, {"episodes", episodes},
                        {"accuracy", r.mean}, {"ci95", r.ci95}, {"seconds", r.seconds}});
    }
    if (writer) {
        // Settings not reached after a stop: no episodes.
        for (size_t si = summary.size(); si < shots.size(); ++si)
            summary.push_back({{spec.ways, shots[si], spec.queries, int64_t(episodes), uint64_t(seed)}, 0, 0, 0});
        writer->finish(summary, stopped ? results::Status::Stopped : results::Status::Complete);
        std::cerr << "glimpse eval fewshot: wrote " << *a.get("--out") << (stopped ? " (stopped)" : "") << "\n";
    }
    if (a.has("--json")) {
        const std::string text =
            nlohmann::json{{"checkpoint", a.require("--checkpoint")}, {"data", dataSpec}, {"split", split}, {"results", rows}}
                .dump(2);
        writeBytesAtomically(a.require("--json"), text.data(), text.size());
    }
    return 0;
}

} // namespace glimpse::app::constellation
