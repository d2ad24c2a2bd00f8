// XTRA's headless commands: `glimpse data offline` (offline datasets) and `glimpse train
// xtra-pretrain` (multi-task distillation), with progress bars on stderr; Ctrl-C stops after the
// current step (a training writes its checkpoint; a dataset being played is not written).
#include "app/xtra/cli.h"

#include <cstdio>
#include <iostream>
#include <sstream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/dist/dist.h"
#include "core/error.h"
#include "core/models/xtra/dataset.h"
#include "core/models/xtra/finetune.h"
#include "core/models/xtra/pretrain.h"
#include "core/train/run.h"
#include "core/util/json_file.h"
#include "core/util/threads.h"

namespace glimpse::cli {

namespace {

const char* kDataUsage =
    "usage: glimpse data offline --env GAME --out DATA.h5 [options]\n"
    "       glimpse data offline --from-run RUN --out DATA.h5\n"
    "Builds an offline dataset for XTRA (docs/xtra.md): trajectories of one game played by a\n"
    "behaviour policy, or the replay buffer of an EfficientZero run (RUN/state.h5).\n"
    "  --env GAME               a built-in game, or shared:GAME for the shared space\n"
    "  --policy P               random | scripted (the game's scripted player) | agent (default scripted)\n"
    "  --checkpoint C.h5        agent: an EfficientZero checkpoint of GAME\n"
    "  --simulations N          agent: MCTS simulations per move (default 16)\n"
    "  --epsilon E[,E...]       epsilon-greedy: a random action with probability E; episode e uses\n"
    "                           the e-th value, cycling (default 0; 1 = random)\n"
    "  --steps N                transitions to collect (default 10000)\n"
    "  --envs K                 games played side by side (default 8)\n"
    "  --seed S                 (default 0)\n"
    "  --max-episode-steps N    steps per episode (default 1000)\n"
    "  --threads T              LibTorch threads for the agent (default 1)\n";

const char* kPretrainUsage =
    "usage: glimpse train xtra-pretrain --config C.json --out RUN [options]\n"
    "Distils EfficientZero teachers of several games into one student in the shared space\n"
    "(XTRA's offline multi-task pretraining, docs/xtra.md). C.json lists the sources,\n"
    "{\"sources\": [{\"dataset\": \"D.h5\", \"teacher\": \"RUN/model.h5\"}, ...]}, and any training key.\n"
    "RUN gets checkpoint.h5 (resume state), run.h5 (run log) and, at the end, model.h5: an\n"
    "EfficientZero checkpoint of the shared space (glimpse play --env shared:GAME).\n"
    "  --resume                 continue RUN from its checkpoint\n"
    "  --steps N                updates (overrides the config)\n"
    "  --seed S                 (overrides the config)\n"
    "  --threads T              LibTorch threads (default 2)\n";

const char* kFinetuneUsage =
    "usage: glimpse train xtra --config C.json --out RUN [options]\n"
    "Finetunes EfficientZero online on a game of the shared space (env shared:GAME) while it keeps\n"
    "learning the offline tasks of pretraining, weighted by the similarity of their gradients to\n"
    "the target's (XTRA's concurrent cross-task learning, docs/xtra.md). C.json holds the\n"
    "EfficientZero keys (env, steps, init: the pretrained student's model.h5, ...) and\n"
    "\"xtra\": {\"sources\": [{\"dataset\", \"teacher\"}, ...], \"weights\": \"adaptive\"|\"constant\",\n"
    "\"task_weights\": {\"cycle\", \"window\", \"threshold\", \"warmup\"}, \"offline_batch_size\"}.\n"
    "RUN gets model.h5, state.h5 and runlog.h5 (task_weight/<game> per update) as for\n"
    "glimpse train efficientzero; running it again resumes.\n"
    "  --steps N                learner updates (overrides the config)\n"
    "  --seed S                 (overrides the config)\n"
    "  --threads T              LibTorch threads (default 2)\n";

std::vector<double> parseList(const std::string& s, const std::string& flag) {
    std::vector<double> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        double x = 0;
        try {
            x = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size()) throw Error(flag + ": expected numbers separated by commas, got '" + s + "'");
        v.push_back(x);
    }
    if (v.empty()) throw Error(flag + ": expected at least one number");
    return v;
}

// What `train xtra-pretrain` and `train xtra` share: flags, the config file with --steps and
// --seed applied, the thread count, and the communicator of a distributed run.
struct TrainSetup {
    nlohmann::json config;
    std::string configPath, out;
    bool resume = false;
    std::unique_ptr<dist::Communicator> comm;
};

TrainSetup trainSetup(const std::vector<std::string>& args, const char* command) {
    Args a(args, {"--resume"});
    std::vector<std::string> known{"--config", "--out", "--resume", "--steps", "--seed", "--threads"};
    known.insert(known.end(), distFlags().begin(), distFlags().end());
    a.checkKnown(known);
    const dist::Settings ds = distSettings(a);
    TrainSetup t;
    t.configPath = a.require("--config");
    t.config = readJsonFile(t.configPath, std::string(command) + " config");
    if (!t.config.is_object()) throw Error(t.configPath + ": the config file is not a JSON object");
    if (a.has("--steps")) t.config["steps"] = a.getInt("--steps", 2000);
    if (a.has("--seed")) t.config["seed"] = a.getInt("--seed", 0);
    t.out = a.require("--out");
    t.resume = a.has("--resume");
    const long long threads = a.getInt("--threads", 2);
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    glimpse::setComputeThreads(int(threads));
    if (ds.distributed()) {
        std::cerr << "glimpse train " << command << ": " << ds.describe() << ": waiting for the other ranks\n";
        t.comm = std::make_unique<dist::Communicator>(ds);
    }
    return t;
}

} // namespace

int dataOffline(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kDataUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args);
    a.checkKnown({"--env", "--out", "--policy", "--checkpoint", "--simulations", "--epsilon", "--steps", "--envs", "--seed",
                  "--max-episode-steps", "--threads", "--from-run"});
    const std::string out = a.require("--out");
    xtra::OfflineDataset d;
    if (auto run = a.get("--from-run")) {
        for (const char* f : {"--env", "--policy", "--checkpoint", "--epsilon", "--steps", "--envs", "--seed"})
            if (a.has(f)) throw Error(std::string(f) + " does not go with --from-run (the run's replay is taken as it is)");
        d = xtra::datasetFromRun(*run);
    } else {
        xtra::DatasetSpec spec;
        spec.env = a.require("--env");
        spec.policy = a.get("--policy", "scripted");
        spec.checkpoint = a.get("--checkpoint", "");
        spec.simulations = int(a.getInt("--simulations", 16));
        if (auto e = a.get("--epsilon")) spec.epsilons = parseList(*e, "--epsilon");
        spec.steps = a.getInt("--steps", 10000);
        spec.numEnvs = int(a.getInt("--envs", 8));
        spec.seed = uint64_t(a.getInt("--seed", 0));
        spec.envOptions.maxEpisodeSteps = int(a.getInt("--max-episode-steps", 1000));
        const long long threads = a.getInt("--threads", 1);
        if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
        glimpse::setComputeThreads(int(threads));
        spec.validate();
        train::Control control;
        {
            StopOnInterrupt interrupt(control);
            TrainingProgress bar(control, [](const train::Progress& p) {
                char m[64];
                std::snprintf(m, sizeof m, "episodes %.0f", latestMetric(p, "episodes"));
                return std::string(m);
            }, -1, 2000, "data");
            d = xtra::generateDataset(spec, &control, bar.fn());
            if (control.stopRequested()) {
                std::cerr << "glimpse data offline: interrupted; nothing written\n";
                return 1;
            }
        }
    }
    xtra::writeDataset(out, d);
    std::cout << out << ": " << xtra::describeDataset(d) << "\n";
    return 0;
}

int trainXtraPretrain(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kPretrainUsage << kDistUsage;
        return args.empty() ? 2 : 0;
    }
    TrainSetup t = trainSetup(args, "xtra-pretrain");
    const auto cfg = xtra::PretrainConfig::fromJson(t.config, t.configPath);
    const std::string& out = t.out;
    train::Control control;
    xtra::PretrainResult r;
    {
        StopOnInterrupt interrupt(control);
        TrainingProgress bar(control, [](const train::Progress& p) {
            char m[96];
            std::snprintf(m, sizeof m, "loss %.4f", latestMetric(p, "loss"));
            return std::string(m);
        });
        r = xtra::pretrain(cfg, out, t.resume, control, bar.fn(), t.comm.get());
    }
    if (r.rank != 0) {
        std::cout << "rank " << r.rank << " of " << r.worldSize << ": " << (r.finished ? "done" : "stopped") << " at step "
                  << r.steps << "; rank 0 writes " << out << "\n";
        return 0;
    }
    std::string games;
    for (const auto& g : r.games) games += (games.empty() ? "" : ", ") + g;
    std::cout << (r.finished ? "finished" : "stopped") << ": " << r.steps << " updates on " << games << " in " << r.seconds
              << " s; " << (r.finished ? "student " + out + "/model.h5" : "resume with --resume") << "\n";
    return 0;
}

int trainXtra(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kFinetuneUsage << kDistUsage;
        return args.empty() ? 2 : 0;
    }
    TrainSetup t = trainSetup(args, "xtra");
    const auto cfg = xtra::FinetuneConfig::fromJson(t.config, t.configPath);
    const std::string& out = t.out;
    if (t.resume) train::resumeFrom(out + "/state.h5", true);   // the note when there is none yet
    train::Control control;
    efficientzero::TrainResult r;
    {
        StopOnInterrupt interrupt(control);
        TrainingProgress bar(control, [](const train::Progress& p) {
            char m[160];
            std::snprintf(m, sizeof m, "loss %.3f  offline %.3f  env %.0f  ret %.1f", latestMetric(p, "loss"),
                          latestMetric(p, "loss_offline"), latestMetric(p, "env_steps"), latestMetric(p, "episode_return"));
            return std::string(m);
        });
        r = xtra::finetune(cfg, out, &control, bar.fn(), t.comm.get());
    }
    if (r.rank != 0) {
        std::cout << "rank " << r.rank << " of " << r.worldSize << ": " << (r.stopped ? "stopped" : "done") << " at update "
                  << r.updates << "; rank 0 writes " << out << "\n";
        return 0;
    }
    std::cout << (r.stopped ? "stopped" : "finished") << ": " << r.updates << " updates, " << r.envSteps
              << " environment steps, " << r.episodes << " episodes in " << r.seconds << " s; checkpoint " << out
              << "/model.h5\n";
    if (!r.cpuSeconds.empty()) std::cout << "CPU time by part: " << efficientzero::cpuBreakdownText(r.cpuSeconds) << "\n";
    return 0;
}

} // namespace glimpse::cli
