// glimpse train efficientzero: EfficientZero on a built-in arcade game, headless, with a
// progress bar and ETA on stderr; Ctrl-C stops after the current step and writes a checkpoint.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/models/efficientzero/train.h"

namespace glimpse::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void onInterrupt(int) { g_interrupted = 1; }

std::string clock(double s) {
    if (s < 0) return "--:--";
    char buf[32];
    const long t = long(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
    return buf;
}

} // namespace

void printProgressBar(const train::Progress& p, const std::string& extra) {
    const int width = 28;
    const double frac = p.totalSteps > 0 ? double(p.step) / double(p.totalSteps) : 0.0;
    const int fill = int(frac * width);
    std::string bar(size_t(fill), '#');
    bar += std::string(size_t(width - fill), '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld %-11s %s elapsed, ETA %s %s   ", bar.c_str(), (long long)p.step,
                 (long long)p.totalSteps, p.phase.c_str(), clock(p.elapsed).c_str(), clock(p.eta).c_str(), extra.c_str());
    std::fflush(stderr);
}

int trainEfficientZero(const std::vector<std::string>& args) {
    const char* usage =
        "usage: glimpse train efficientzero --env NAME --steps S --out RUN [options]\n"
        "Trains EfficientZero on a built-in arcade game (glimpse env list). RUN gets model.h5\n"
        "(for glimpse play), state.h5 (resume state) and runlog.h5. Running the same command\n"
        "again with an existing RUN resumes it up to S learner updates.\n"
        "  --seed N                 run seed (default 0)\n"
        "  --config FILE.json       training config (docs/rl.md keys); flags below override it\n"
        "  --envs K                 self-play environments (default 8)\n"
        "  --simulations N          MCTS simulations per move (default 16)\n"
        "  --batch B                learner batch (default 64)\n"
        "  --ratio R                learner updates per environment step (default 0.25)\n"
        "  --min-replay N           transitions before learning starts (default 1000)\n"
        "  --lr LR                  peak learning rate (default 0.1)\n"
        "  --max-episode-steps N    agent steps per episode (default 1000)\n"
        "  --threads T              LibTorch threads (default 2)\n";
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << usage;
        return args.empty() ? 2 : 0;
    }
    Args a(args);
    a.checkKnown({"--env", "--steps", "--out", "--seed", "--config", "--envs", "--simulations", "--batch", "--ratio",
                  "--min-replay", "--lr", "--max-episode-steps", "--threads"});
    nlohmann::json j = nlohmann::json::object();
    if (auto path = a.get("--config")) {
        std::ifstream in(*path);
        if (!in) throw Error(*path + ": cannot open the config file");
        j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) throw Error(*path + ": not valid JSON");
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
    const auto cfg = efficientzero::TrainConfig::fromJson(j);
    const std::string out = a.require("--out");
    const long long threads = a.getInt("--threads", 2);
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    torch::set_num_threads(int(threads));

    train::Control control;
    g_interrupted = 0;
    auto previous = std::signal(SIGINT, onInterrupt);
    auto progress = [&](const train::Progress& p) {
        if (g_interrupted) control.requestStop();
        char extra[160];
        auto get = [&](const char* k) { auto it = p.latest.find(k); return it == p.latest.end() ? 0.0 : it->second; };
        std::snprintf(extra, sizeof extra, "loss %.3f  env %.0f  ret %.1f  %.1f upd/s", get("loss"), get("env_steps"),
                      get("episode_return"), get("updates_per_s"));
        printProgressBar(p, extra);
    };
    efficientzero::TrainResult r;
    try {
        r = efficientzero::trainAgent(cfg, out, &control, progress);
    } catch (...) {
        std::signal(SIGINT, previous);
        std::fprintf(stderr, "\n");
        throw;
    }
    std::signal(SIGINT, previous);
    std::fprintf(stderr, "\n");
    std::cout << (r.stopped ? "stopped" : "finished") << ": " << r.updates << " updates, " << r.envSteps
              << " environment steps, " << r.episodes << " episodes in " << r.seconds << " s; checkpoint " << out
              << "/model.h5\n";
    return 0;
}

} // namespace glimpse::cli
