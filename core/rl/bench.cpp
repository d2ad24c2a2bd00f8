#include "core/rl/bench.h"

#include <chrono>
#include <iomanip>
#include <ostream>
#include <random>

#include <torch/torch.h>

#include "core/models/efficientzero/search.h"
#include "core/rl/env.h"

namespace glimpse::rl {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

} // namespace

void runRlBench(std::ostream& os) {
    os << "glimpse bench rl: torch threads " << torch::get_num_threads() << "\n\n";
    os << "environment steps (random actions; step, and step + observation):\n";
    constexpr int kSteps = 20000;
    for (const auto& game : envNames()) {
        auto env = makeEnv(game);
        std::mt19937_64 rng(1);
        std::vector<float> obs(size_t(env->observationShape().numel()));
        double t[2];
        for (int observe = 0; observe < 2; ++observe) {
            env->reset(0);
            auto start = Clock::now();
            for (int i = 0; i < kSteps; ++i) {
                if (env->step(int(rng() % uint64_t(env->numActions()))).done()) env->reset(uint64_t(i));
                if (observe) env->observationInto(obs.data());
            }
            t[observe] = seconds(start);
        }
        os << "  " << std::left << std::setw(10) << game << std::right << std::fixed << std::setprecision(0)
           << std::setw(10) << kSteps / t[0] << " steps/s  " << std::setw(10) << kSteps / t[1]
           << " steps/s with observation\n";
    }

    constexpr int kEnvs = 16, kRepeats = 3;
    VecEnv envs("invaders", kEnvs, 0);
    const ObsShape frame = envs.frameShape();
    efficientzero::Network net(efficientzero::Config::grid(frame.channels, frame.height, frame.width, envs.numActions()));
    net.train(false);
    MctsConfig config;
    Mcts mcts(config, 0);
    const ObsShape stacked = envs.stackedShape();
    auto observations = [&] {
        return torch::from_blob(envs.observations().data(), {kEnvs, stacked.channels, stacked.height, stacked.width})
            .clone();
    };
    efficientzero::searchBatch(net, mcts, observations(), true);  // warm-up
    auto start = Clock::now();
    for (int r = 0; r < kRepeats; ++r) {
        SearchResult res = efficientzero::searchBatch(net, mcts, observations(), true);
        std::vector<int> actions;
        std::mt19937_64 rng{uint64_t(r)};
        for (const auto& counts : res.visitCounts) actions.push_back(selectAction(counts, 1.0, rng));
        envs.step(actions);
    }
    const double t = seconds(start);
    os << "\nMCTS: " << kEnvs << " envs x " << config.numSimulations << " simulations, grid network ("
       << net.parameterCount() << " parameters, latent " << net.config().channels << "x" << net.config().stateHeight()
       << "x" << net.config().stateWidth() << ") on invaders\n"
       << "  " << std::fixed << std::setprecision(0) << kEnvs * config.numSimulations * kRepeats / t
       << " simulations/s, " << std::setprecision(1) << 1000.0 * t / kRepeats << " ms per batched search\n";
    os.unsetf(std::ios::floatfield);
}

} // namespace glimpse::rl
