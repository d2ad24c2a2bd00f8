#include "core/rl/bench.h"

#include <chrono>
#include <iomanip>
#include <ostream>
#include <random>

#include <torch/torch.h>

#include "core/models/efficientzero/search.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/train.h"
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

    // The CPU training network of `glimpse train efficientzero` (cpuNetwork): search and
    // learner throughput.
    auto probe = makeEnv("invaders");
    efficientzero::Network small(efficientzero::cpuNetwork(*probe));
    small.train(false);
    start = Clock::now();
    for (int r = 0; r < kRepeats; ++r) efficientzero::searchBatch(small, mcts, observations(), true);
    const double ts = seconds(start);
    os << "MCTS with the CPU training network (" << small.parameterCount() << " parameters, latent "
       << small.config().channels << "x" << small.config().stateHeight() << "x" << small.config().stateWidth() << ")\n"
       << "  " << std::fixed << std::setprecision(0) << kEnvs * config.numSimulations * kRepeats / ts
       << " simulations/s, " << std::setprecision(1) << 1000.0 * ts / kRepeats << " ms per batched search\n";

    constexpr int kBatch = 64, kUnroll = 5, kUpdates = 5;
    const auto& c = small.config();
    efficientzero::Batch b;
    b.obs = (torch::rand({kBatch, c.inputChannels(), c.obsHeight, c.obsWidth}) > 0.8).to(torch::kFloat32);
    b.nextObs = (torch::rand({kBatch, kUnroll, c.inputChannels(), c.obsHeight, c.obsWidth}) > 0.8).to(torch::kFloat32);
    b.actions = torch::randint(0, c.numActions, {kBatch, kUnroll}, torch::kInt64);
    b.valuePrefix = torch::rand({kBatch, kUnroll});
    b.value = torch::rand({kBatch, kUnroll + 1}) * 5;
    b.policy = torch::softmax(torch::randn({kBatch, kUnroll + 1, c.numActions}), -1);
    b.mask = torch::ones({kBatch, kUnroll + 1});
    b.weights = torch::ones({kBatch});
    small.train(true);
    torch::optim::SGD opt(small.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
    auto update = [&] {
        auto terms = efficientzero::computeLoss(small, b);
        opt.zero_grad();
        (terms.total / double(kUnroll)).backward();
        torch::nn::utils::clip_grad_norm_(small.parameters(), 5.0);
        opt.step();
    };
    update();  // warm-up
    start = Clock::now();
    for (int r = 0; r < kUpdates; ++r) update();
    const double tl = seconds(start);
    os << "learner: batch " << kBatch << ", unroll " << kUnroll << " (loss, backward, clip, SGD step; batch\n"
       << "  preparation and reanalyze not included)\n  " << std::setprecision(2) << kUpdates / tl
       << " updates/s, " << std::setprecision(1) << 1000.0 * tl / kUpdates << " ms per update\n";
    os.unsetf(std::ios::floatfield);
}

} // namespace glimpse::rl
