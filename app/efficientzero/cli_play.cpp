// glimpse play: evaluates an EfficientZero checkpoint on a built-in game (mean, median,
// normalized score) and optionally records every episode (docs/formats.md "Episode").
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/util/device.h"
#include "core/util/threads.h"
#include "core/util/timing.h"
#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/eval.h"
#include "core/rl/env.h"
#include "core/rl/score.h"

namespace glimpse::cli {

namespace {

const char* kPlayUsage =
    "usage: glimpse play --checkpoint C --env NAME [--episodes K] [options]\n"
    "Plays K episodes (default 32) with the checkpoint's network and MCTS (no noise, most\n"
    "visited action) and prints mean, median, 95% CI and the normalized score.\n"
    "  --simulations N     MCTS simulations per move (default 16)\n"
    "  --seed S            evaluation seed (default 1000000; episode i from episodeSeed(S, i, 0))\n"
    "  --max-episode-steps N  (default 1000)\n"
    "  --record DIR        write each episode to DIR/episode_NNNN.h5\n"
    "  --temperature T     sample actions proportionally to visits^(1/T) (default 0: most visited)\n"
    "  --noise             add self-play's root Dirichlet noise to the search\n"
    "  --threads T         LibTorch threads (default 2)\n"
    "  --device D          cpu (default), cuda or cuda:N: the network (the MCTS's batched inference)\n"
    "  --reference-layers  run the network's batch norms as separate layers (by default they are folded\n"
    "                      into the layers before them: the same function within float32 rounding)\n"
    "  --compare-reference also run every search with the reference layers, from the same roots and\n"
    "                      random state, and print how often the two chose the same action and how far\n"
    "                      their root values are apart (the episodes follow the folded network)\n"
    "  --reference-checkpoint R  with --compare-reference: the second search runs R's network (reference\n"
    "                      layers) instead of C's; with --reference-layers as well, both run reference\n"
    "                      layers, so the count measures what R's change of weights alone does to the\n"
    "                      search (e.g. R = C with every weight moved by one float32 ulp)\n";

} // namespace

int play(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kPlayUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--noise", "--reference-layers", "--compare-reference"});
    a.checkKnown({"--checkpoint", "--env", "--episodes", "--simulations", "--seed", "--max-episode-steps", "--record",
                  "--threads", "--temperature", "--noise", "--device", "--reference-layers", "--compare-reference",
                  "--reference-checkpoint"});
    const std::string refCkpt = a.get("--reference-checkpoint", "");
    if (!refCkpt.empty() && !a.has("--compare-reference"))
        throw UsageError("--reference-checkpoint names the network of --compare-reference's second search: give both");
    if (a.has("--compare-reference") && a.has("--reference-layers") && refCkpt.empty())
        throw UsageError("--compare-reference compares the folded network with --reference-layers' one: give one of them "
                         "(or --reference-checkpoint R to compare two checkpoints' reference layers)");
    const torch::Device device = parseDevice(a.get("--device", "cpu"));
    const std::string ckpt = a.require("--checkpoint");
    const std::string game = a.require("--env");
    efficientzero::EvalOptions o;
    const long long episodes = a.getInt("--episodes", 32);
    const long long sims = a.getInt("--simulations", 16);
    const long long maxSteps = a.getInt("--max-episode-steps", 1000);
    const long long threads = a.getInt("--threads", 2);
    if (episodes < 1 || episodes > 100000) throw Error("--episodes must be in 1..100000");
    if (sims < 1 || sims > 1000) throw Error("--simulations must be in 1..1000");
    if (maxSteps < 1 || maxSteps > 1000000) throw Error("--max-episode-steps must be in 1..1000000");
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    glimpse::setComputeThreads(int(threads));
    o.episodes = int(episodes);
    o.simulations = int(sims);
    o.seed = uint64_t(a.getInt("--seed", 1000000));
    o.env.maxEpisodeSteps = int(maxSteps);
    o.recordDir = a.get("--record", "");
    o.temperature = a.getDouble("--temperature", 0.0);
    if (!(o.temperature >= 0) || o.temperature > 100) throw Error("--temperature must be in [0, 100]");
    o.noise = a.has("--noise");
    o.checkpointPath = ckpt;
    const auto env = rl::makeEnv(game, o.env);  // unknown game -> Error listing the names
    auto net = efficientzero::loadForEnv(ckpt, *env);
    net.module().to(device);
    net.setFoldedInference(!a.has("--reference-layers"));
    std::optional<efficientzero::Network> reference;
    if (a.has("--compare-reference")) {
        reference.emplace(efficientzero::loadForEnv(refCkpt.empty() ? ckpt : refCkpt, *env));
        reference->module().to(device);
        reference->setFoldedInference(false);
        o.compareWith = &*reference;
    }
    train::Control control;
    efficientzero::EvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = processCpuSeconds();
    {
        StopOnInterrupt interrupt(control);
        TrainingProgress bar(control, nullptr, -1, 8);
        r = efficientzero::evaluate(net, game, o, &control, bar.fn());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double medianReturn = median(r.returns);
    std::printf("%s: %d episodes, %d simulations on %s%s\n", game.c_str(), r.stats.episodes, o.simulations,
                device.str().c_str(),
                o.temperature > 0 || o.noise
                    ? (", temperature " + std::to_string(o.temperature) + (o.noise ? ", root noise" : "")).c_str()
                    : "");
    std::printf("return: mean %.2f +- %.2f (95%% CI), median %.2f, min %.2f, max %.2f, mean length %.1f\n",
                r.stats.mean, r.stats.ci95, medianReturn, r.stats.min, r.stats.max, r.stats.meanLength);
    std::printf("normalized score: mean %.3f, median %.3f (0 = random, 1 = scripted)\n", r.normalizedMean,
                r.normalizedMedian);
    // Every move runs one search of o.simulations simulations (environment steps included).
    const double moves = r.stats.meanLength * double(r.stats.episodes);
    std::printf("speed: %.0f moves in %.2f s: %.1f moves/s, %.0f simulations/s (%.0f per CPU second; %s)\n", moves,
                seconds, moves / std::max(seconds, 1e-9), moves * double(o.simulations) / std::max(seconds, 1e-9),
                moves * double(o.simulations) / std::max(processCpuSeconds() - cpu0, 1e-9),
                net.foldedInference() ? "batch norms folded" : "reference layers");
    if (r.compared > 0)
        std::printf("vs %s: the same action in %lld of %lld searches (%.2f%%), a most visited action "
                    "of the reference's search in %lld (%.2f%%); root value relative difference median %.2e, max "
                    "%.2e\n",
                    refCkpt.empty() ? "reference layers" : (refCkpt + " (reference layers)").c_str(),
                    (long long)r.sameAction, (long long)r.compared, 100.0 * double(r.sameAction) / double(r.compared),
                    (long long)r.mostVisitedOfReference, 100.0 * double(r.mostVisitedOfReference) / double(r.compared),
                    r.valueRelDiffMedian, r.valueRelDiffMax);
    for (const auto& f : r.recorded) std::printf("recorded %s\n", f.c_str());
    return 0;
}

} // namespace glimpse::cli
