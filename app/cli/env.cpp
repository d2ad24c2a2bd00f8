// glimpse env ... and glimpse bench rl: the arcade suite from the command line.
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "core/util/threads.h"
#include "core/error.h"
#include "core/rl/bench.h"
#include "core/rl/env.h"
#include "core/rl/score.h"

namespace glimpse::cli {

int env(const std::vector<std::string>& args) {
    const char* usage =
        "usage: glimpse env list\n"
        "       glimpse env score [--episodes K] [--seed S]\n"
        "Lists the built-in arcade games, or measures random-policy and scripted-policy\n"
        "scores (mean, 95% CI) used to normalize agent scores, and the best constant action\n"
        "(one button pressed every frame): a second baseline an agent should beat.\n";
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << usage;
        return args.empty() ? 2 : 0;
    }
    const std::string sub = args[0];
    Args a(std::vector<std::string>(args.begin() + 1, args.end()));
    if (sub == "list") {
        a.checkKnown({});
        for (const auto& name : rl::envNames()) std::cout << name << "\n";
        return 0;
    }
    if (sub == "score") {
        a.checkKnown({"--episodes", "--seed"});
        const long long episodes = a.getInt("--episodes", 32);
        if (episodes < 1 || episodes > 100000) throw Error("--episodes must be in 1..100000");
        rl::scoreTable(std::cout, int(episodes), uint64_t(a.getInt("--seed", 0)));
        return 0;
    }
    std::cerr << "glimpse env: unknown subcommand '" << sub << "'\n" << usage;
    return 2;
}

int benchRl(const std::vector<std::string>& args) {
    Args a(args);
    a.checkKnown({"--threads"});
    const long long threads = a.getInt("--threads", 2);
    if (threads < 1 || threads > 256) throw Error("--threads must be in 1..256");
    glimpse::setComputeThreads(int(threads));
    rl::runRlBench(std::cout);
    return 0;
}

} // namespace glimpse::cli
