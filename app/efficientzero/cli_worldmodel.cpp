// glimpse eval worldmodel: the world model checked against the game (issue 52 part 4,
// core/replay/world_model_check.h): per imagined depth, the mean absolute error of the
// predicted reward and value of a recorded episode's network (or --checkpoint) against what
// happened, beside an untrained network of the same configuration.
#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/efficientzero/cli.h"
#include "core/error.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "core/replay/world_model_check.h"
#include "core/util/threads.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse eval worldmodel EPISODE.h5 [--checkpoint C.h5] [options]\n"
    "Imagines K steps ahead (default 5) from every step of a recorded episode with the recorded\n"
    "actions and prints, per depth, the mean absolute error of the predicted reward and value\n"
    "against what happened (and the value against the search's recorded root value), for the\n"
    "episode's recorded checkpoint (or --checkpoint) and for an untrained network of the same\n"
    "configuration. Targets are taken as the network was trained: rewards clipped to their sign,\n"
    "a lost life ends the return (docs/rl.md \"World model against the game\").\n"
    "  --checkpoint C      the network (default: the checkpoint recorded in the episode)\n"
    "  --depth K           imagined steps (default 5)\n"
    "  --discount D        discount of the returns (default 0.997; the shooter config trains 0.97)\n"
    "  --raw-rewards       compare the game's own rewards (not clipped)\n"
    "  --game-end-only     only a game end ends the return (not a lost life)\n"
    "  --max-starts N      at most N evenly spaced start steps (default 0: every step)\n"
    "  --untrained-seed S  seed of the untrained network (default 0)\n"
    "  --no-untrained      the checkpoint only\n"
    "  --markdown          print the table as Markdown\n"
    "  --threads T         LibTorch threads (default 2)\n";

} // namespace

int evalWorldModel(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << kUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--raw-rewards", "--game-end-only", "--no-untrained", "--markdown"});
    a.checkKnown({"--checkpoint", "--depth", "--discount", "--raw-rewards", "--game-end-only", "--max-starts",
                  "--untrained-seed", "--no-untrained", "--markdown", "--threads"});
    if (a.positional().size() != 1) throw UsageError("eval worldmodel: give exactly one EPISODE.h5");
    const long long threads = a.getInt("--threads", 2);
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    glimpse::setComputeThreads(int(threads));
    replay::WorldModelCheckOptions o;
    const long long depth = a.getInt("--depth", 5);
    if (depth < 1 || depth > 100) throw Error("--depth must be in 1..100");
    o.depth = int(depth);
    o.discount = a.getDouble("--discount", 0.997);
    if (!(o.discount > 0 && o.discount <= 1)) throw Error("--discount must be in (0, 1]");
    o.clipRewards = !a.has("--raw-rewards");
    o.lifeLossEnds = !a.has("--game-end-only");
    const long long maxStarts = a.getInt("--max-starts", 0);
    if (maxStarts < 0) throw Error("--max-starts must be >= 0");
    o.maxStarts = maxStarts;
    const long long seed = a.getInt("--untrained-seed", 0);
    if (seed < 0) throw Error("--untrained-seed must be >= 0");

    replay::EpisodeReader ep(a.positional()[0]);
    const std::string ckpt = a.get("--checkpoint", "");
    auto net = replay::loadEpisodeNetwork(ep, ckpt);
    replay::WorldModelCheck trained = replay::checkWorldModel(*net, ep, o);
    trained.checkpoint = ckpt.empty() ? ep.meta().model.checkpoint : ckpt;
    std::optional<replay::WorldModelCheck> untrained;
    if (!a.has("--no-untrained")) {
        auto fresh = replay::untrainedNetwork(net->config(), uint64_t(seed));
        untrained = replay::checkWorldModel(fresh, ep, o);
        untrained->checkpoint = "untrained";
    }
    std::printf("%s: %s, %lld steps, %lld rollouts of depth %d from %s; discount %g, %s rewards, %s\n",
                ep.path().c_str(), ep.game().c_str(), (long long)ep.length(), (long long)trained.starts, o.depth,
                trained.checkpoint.c_str(), o.discount, o.clipRewards ? "clipped" : "raw",
                o.lifeLossEnds ? "a lost life ends the return" : "only a game end ends the return");
    std::printf("%s", replay::worldModelTable(trained, untrained ? &*untrained : nullptr, a.has("--markdown")).c_str());
    return 0;
}

} // namespace glimpse::cli
