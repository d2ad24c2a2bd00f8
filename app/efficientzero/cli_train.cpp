// glimpse train efficientzero: EfficientZero on a built-in arcade game, headless, with a
// progress bar and ETA on stderr; Ctrl-C stops after the current step and writes a checkpoint.
#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/util/threads.h"
#include "core/util/json_file.h"
#include "core/dist/dist.h"
#include "core/error.h"
#include "core/models/efficientzero/train.h"
#include "core/train/run.h"

namespace glimpse::cli {

namespace {

const char* kTrainUsage =
    "usage: glimpse train efficientzero --env NAME --steps S --out RUN [options]\n"
    "Trains EfficientZero on a built-in arcade game (glimpse env list). RUN gets model.h5\n"
    "(for glimpse play), state.h5 (resume state) and runlog.h5. Running the same command\n"
    "again with an existing RUN resumes it up to S learner updates (--resume says so explicitly;\n"
    "without a state.h5 yet, e.g. killed before its first checkpoint, the run starts anew).\n"
    "  --resume                 continue RUN (what happens anyway when RUN has a state.h5)\n"
    "  --seed N                 run seed (default 0)\n"
    "  --config FILE.json       training config (docs/rl.md keys); flags below override it\n"
    "  --envs K                 self-play environments (default 8)\n"
    "  --simulations N          MCTS simulations per move (default 16)\n"
    "  --batch B                learner batch (default 64)\n"
    "  --ratio R                learner updates per environment step (default 0.25)\n"
    "  --min-replay N           transitions before learning starts (default 1000)\n"
    "  --lr LR                  peak learning rate (default 0.1)\n"
    "  --max-episode-steps N    agent steps per episode (default 1000)\n"
    "  --threads T              LibTorch threads (default 1: the CPU network is too small to split)\n"
    "  --round-moves N          distributed: moves per self-play round (default 4)\n"
    "Distributed: rank 0 is the learner (replay, updates, files); every other rank plays\n"
    "--envs games with the weights the learner broadcasts and sends it the finished games.\n";

} // namespace

int trainEfficientZero(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kTrainUsage << kDistUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--resume"});
    std::vector<std::string> known{"--resume", "--env", "--steps", "--out", "--seed", "--config", "--envs",
                                   "--simulations", "--batch", "--ratio", "--min-replay", "--lr", "--max-episode-steps",
                                   "--threads", "--round-moves"};
    known.insert(known.end(), distFlags().begin(), distFlags().end());
    a.checkKnown(known);
    const dist::Settings ds = distSettings(a);
    nlohmann::json j = nlohmann::json::object();
    if (auto path = a.get("--config")) {
        j = readJsonFile(*path, "config file");
        if (!j.is_object()) throw Error(*path + ": the config file is not a JSON object");
    }
    j["env"] = a.require("--env");
    j["steps"] = a.getInt("--steps", j.value("steps", 5000));
    j["seed"] = a.getInt("--seed", j.value("seed", 0));
    if (a.has("--envs")) j["num_envs"] = a.getInt("--envs", 8);
    if (a.has("--simulations")) j["simulations"] = a.getInt("--simulations", 16);
    if (a.has("--batch")) j["batch_size"] = a.getInt("--batch", 64);
    if (a.has("--ratio")) j["updates_per_env_step"] = a.getDouble("--ratio", 0.25);
    if (a.has("--min-replay")) j["min_replay"] = a.getInt("--min-replay", 1000);
    if (a.has("--lr")) j["lr"] = a.getDouble("--lr", 0.1);
    if (a.has("--max-episode-steps")) j["max_episode_steps"] = a.getInt("--max-episode-steps", 1000);
    if (a.has("--round-moves")) j["round_moves"] = a.getInt("--round-moves", 4);
    const auto cfg = efficientzero::TrainConfig::fromJson(j);
    const std::string out = a.require("--out");
    if (a.has("--resume")) train::resumeFrom(out + "/state.h5", true);   // the note when there is none yet
    // One thread by default: the CPU network's ops are too small to split, and on the 2-core
    // machine two intra-op threads spun: a 100-update pellets run took 334 s of CPU against 26 s
    // on one thread (docs/rl.md "Learner profile", issue 52).
    const long long threads = a.getInt("--threads", 1);
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    glimpse::setComputeThreads(int(threads));

    train::Control control;
    efficientzero::TrainResult r;
    std::unique_ptr<dist::Communicator> comm;
    if (ds.distributed()) {
        std::cerr << "glimpse train efficientzero: " << ds.describe() << ": waiting for the other ranks\n";
        comm = std::make_unique<dist::Communicator>(ds);
    }
    {
        StopOnInterrupt interrupt(control);
        TrainingProgress bar(control, [](const train::Progress& p) {
            char m[160];
            std::snprintf(m, sizeof m, "loss %.3f  env %.0f  ret %.1f  %.1f upd/s", latestMetric(p, "loss"),
                          latestMetric(p, "env_steps"), latestMetric(p, "episode_return"),
                          latestMetric(p, "updates_per_s"));
            return std::string(m);
        });
        r = efficientzero::trainAgent(cfg, out, &control, bar.fn(), comm.get());
    }
    if (r.rank != 0) {
        std::cout << "rank " << r.rank << " of " << r.worldSize << ": " << (r.stopped ? "stopped" : "done") << " at update "
                  << r.updates << "; played " << r.playedSteps << " environment steps, " << r.playedGames
                  << " games for the learner; rank 0 writes " << out << "\n";
        return 0;
    }
    std::cout << (r.stopped ? "stopped" : "finished") << ": " << r.updates << " updates, " << r.envSteps
              << " environment steps, " << r.episodes << " episodes in " << r.seconds << " s; checkpoint " << out
              << "/model.h5\n";
    if (!r.cpuSeconds.empty()) std::cout << "CPU time by part: " << efficientzero::cpuBreakdownText(r.cpuSeconds) << "\n";
    if (r.worldSize > 1)
        std::cout << "learner of " << r.worldSize << " ranks: " << r.gamesReceived << " games received, "
                  << r.weightBroadcasts << " weight broadcasts\n";
    return 0;
}

} // namespace glimpse::cli
