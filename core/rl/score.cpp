#include "core/rl/score.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/rl/shared_space.h"

namespace glimpse::rl {

namespace {

// Two-sided 97.5% quantile of Student's t for 1..30 degrees of freedom; 1.96 beyond.
double tQuantile975(int dof) {
    static const double table[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                     2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                     2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (dof < 1) return 0.0;
    return dof <= 30 ? table[dof - 1] : 1.96;
}

} // namespace

ScoreStats summarize(const std::vector<double>& returns, const std::vector<int>& lengths) {
    ScoreStats s;
    s.episodes = int(returns.size());
    if (returns.empty()) return s;
    s.min = s.max = returns.front();
    for (double r : returns) {
        s.mean += r;
        s.min = std::min(s.min, r);
        s.max = std::max(s.max, r);
    }
    s.mean /= double(returns.size());
    if (returns.size() > 1) {
        double ss = 0;
        for (double r : returns) ss += (r - s.mean) * (r - s.mean);
        s.std = std::sqrt(ss / double(returns.size() - 1));
        s.ci95 = tQuantile975(int(returns.size()) - 1) * s.std / std::sqrt(double(returns.size()));
    }
    for (int l : lengths) s.meanLength += double(l) / double(lengths.size());
    return s;
}

namespace {

// Plays `episodes` episodes of env (episode e from seed + e) with choose(env) on every frame.
template <typename Choose>
ScoreStats playEpisodes(Env& env, int episodes, uint64_t seed, Choose&& choose) {
    std::vector<double> returns;
    std::vector<int> lengths;
    for (int e = 0; e < episodes; ++e) {
        env.reset(seed + uint64_t(e));
        double total = 0;
        for (;;) {
            StepResult r = env.step(choose(env));
            total += r.reward;
            if (r.done()) break;
        }
        returns.push_back(total);
        lengths.push_back(env.episodeSteps());
    }
    return summarize(returns, lengths);
}

void checkEpisodes(const char* what, int episodes) {
    if (episodes < 1) throw Error(std::string("rl: ") + what + " needs at least one episode, got " + std::to_string(episodes));
}

} // namespace

ScoreStats measureScore(const std::string& game, Policy policy, int episodes, uint64_t seed,
                        const EnvOptions& options) {
    checkEpisodes("measureScore", episodes);
    auto env = makeEnv(game, options);
    std::mt19937_64 rng(seed ^ 0xA5A5F00DC0FFEE11ull);
    return playEpisodes(*env, episodes, seed, [&](Env& e) {
        if (policy == Policy::Scripted) return e.referenceAction();
        const std::vector<int> legal = e.legalActions();
        return legal[size_t(rng() % legal.size())];
    });
}

ScoreStats measureConstantScore(const std::string& game, int action, int episodes, uint64_t seed,
                                const EnvOptions& options) {
    checkEpisodes("measureConstantScore", episodes);
    auto env = makeEnv(game, options);
    if (action < 0 || action >= env->numActions())
        throw Error("rl: " + game + " has actions 0.." + std::to_string(env->numActions() - 1) + ", not " +
                    std::to_string(action));
    return playEpisodes(*env, episodes, seed, [action](Env&) { return action; });
}

ConstantBaseline bestConstantAction(const std::string& game, int episodes, uint64_t seed, const EnvOptions& options) {
    checkEpisodes("bestConstantAction", episodes);
    const auto names = makeEnv(game, options)->actionNames();
    ConstantBaseline best;
    for (int a = 0; a < int(names.size()); ++a) {
        const ScoreStats s = measureConstantScore(game, a, episodes, seed, options);
        if (best.action < 0 || s.mean > best.stats.mean) best = {a, names[size_t(a)], s};
    }
    return best;
}

const std::vector<ReferenceScore>& referenceScores() {
    // Data, measured with scoreTable(std::cout, 100) (`glimpse env score --episodes 100`):
    // default EnvOptions (1000-step episodes, no sticky actions, frame skip 1), seeds 0..99.
    // test_rl_envs re-measures it; a change to a game's rules must update these rows.
    static const std::vector<ReferenceScore> table = {
        {"invaders", 15.66, 227.56},
        {"demon", 10.29, 137.21},
        {"sub", 1.68, 81.52},
        {"breakout", 1.36, 155.33},
        {"pellets", 9.86, 439.04},
        {"heist", 1.16, 190.07},
        {"alien", 7.31, 81.54},
        {"painter", 17.09, 1073.93},
    };
    return table;
}

double normalizedScore(const std::string& env, double score) {
    const std::string game = baseGameName(env);  // a game scores the same in the shared space
    for (const auto& r : referenceScores())
        if (r.game == game) return (score - r.random) / (r.scripted - r.random);
    std::string valid;
    for (const auto& r : referenceScores()) valid += (valid.empty() ? "" : ", ") + r.game;
    throw Error("rl: no reference scores for game '" + game + "'; games with scores: " + valid);
}

void scoreTable(std::ostream& os, int episodes, uint64_t seed, const EnvOptions& options) {
    auto cell = [](const ScoreStats& s) {
        std::ostringstream c;
        c << std::fixed << std::setprecision(1) << s.mean << " +- " << s.ci95;
        return c.str();
    };
    os << "Arcade suite reference scores: " << episodes << " episodes per policy, seeds " << seed << ".."
       << seed + uint64_t(episodes) - 1 << ", max " << options.maxEpisodeSteps << " steps, frame skip "
       << options.frameSkip << ", sticky " << options.stickyActionProb << " (mean +- 95% CI)\n\n";
    os << "| game | actions | random | random steps | scripted | scripted steps | best constant action |\n"
       << "|---|---|---|---|---|---|---|\n";
    std::ostringstream rows;
    for (const auto& g : arcadeGames()) {
        const ScoreStats r = measureScore(g.name, Policy::Random, episodes, seed, options);
        const ScoreStats s = measureScore(g.name, Policy::Scripted, episodes, seed, options);
        const ConstantBaseline c = bestConstantAction(g.name, episodes, seed, options);
        os << "| " << g.name << " | " << makeEnv(g.name, options)->numActions() << " | " << cell(r) << " | "
           << std::fixed << std::setprecision(0) << r.meanLength << " | " << cell(s) << " | " << s.meanLength
           << " | " << c.actionName << ": " << cell(c.stats) << " |\n";
        rows << "        {\"" << g.name << "\", " << std::fixed << std::setprecision(2) << r.mean << ", " << s.mean
             << "},\n";
    }
    os << "\nreferenceScores() rows:\n" << rows.str();
    os.unsetf(std::ios::floatfield);
}

} // namespace glimpse::rl
