// The arcade suite: registry, shapes, determinism, episode ends, options, rendering,
// VecEnv, and that every game's scripted policy beats the random one.
#include <QtTest>

#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "core/rl/env.h"
#include "core/rl/score.h"

using namespace glimpse::rl;

namespace {

// Plays `steps` random actions (from `actionSeed`) and records observations and rewards.
std::pair<std::vector<std::vector<float>>, std::vector<float>> rollout(Env& env, uint64_t seed, uint64_t actionSeed,
                                                                      int steps) {
    std::mt19937_64 rng(actionSeed);
    env.reset(seed);
    std::vector<std::vector<float>> obs{env.observation()};
    std::vector<float> rewards;
    for (int t = 0; t < steps; ++t) {
        StepResult r = env.step(int(rng() % uint64_t(env.numActions())));
        obs.push_back(env.observation());
        rewards.push_back(r.reward);
        if (r.done()) env.reset(seed + 1000 + uint64_t(t));
    }
    return {obs, rewards};
}

} // namespace

class TestRlEnvs : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void registry() {
        const std::vector<std::string> expected = {"invaders", "demon",   "sub",   "breakout",
                                                   "pellets",  "heist",   "alien", "painter"};
        QCOMPARE(envNames(), expected);
        int shooters = 0, mazes = 0;
        for (const auto& g : arcadeGames()) {
            shooters += g.category == "shooter";
            mazes += g.category == "maze";
            QVERIFY(!g.summary.empty());
        }
        QCOMPARE(shooters, 4);
        QCOMPARE(mazes, 4);
    }

    void unknownGameListsValidNames() {
        try {
            makeEnv("pong");
            QFAIL("no error for an unknown game");
        } catch (const glimpse::Error& e) {
            const std::string msg = e.what();
            QVERIFY(msg.find("'pong'") != std::string::npos);
            for (const auto& name : envNames()) QVERIFY2(msg.find(name) != std::string::npos, name.c_str());
        }
        EnvOptions bad;
        bad.frameSkip = 0;
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, makeEnv("breakout", bad));
        bad = {};
        bad.stickyActionProb = 1.5f;
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, makeEnv("breakout", bad));
    }

    void shapesActionsAndChannels() {
        std::set<int> actionSetSizes;
        for (const auto& name : envNames()) {
            auto env = makeEnv(name);
            QCOMPARE(env->name(), name);
            const ObsShape s = env->observationShape();
            QVERIFY2(s.channels >= 3 && s.channels <= 6, name.c_str());
            QVERIFY2(s.height >= 10 && s.height <= 16 && s.width >= 10 && s.width <= 16, name.c_str());
            QCOMPARE(int(env->channelNames().size()), s.channels);
            QCOMPARE(int(env->actionNames().size()), env->numActions());
            QCOMPARE(env->actionNames().front(), std::string("NOOP"));
            std::vector<int> all(static_cast<size_t>(env->numActions()));
            std::iota(all.begin(), all.end(), 0);
            QCOMPARE(env->legalActions(), all);
            actionSetSizes.insert(env->numActions());

            env->reset(3);
            const std::vector<float> obs = env->observation();
            QCOMPARE(int64_t(obs.size()), s.numel());
            for (float v : obs) QVERIFY(v >= 0.f && v <= 1.f);
            // The last channel is the player's, on the board from the start.
            float player = 0;
            for (int64_t i = (s.channels - 1) * int64_t(s.height) * s.width; i < s.numel(); ++i) player += obs[size_t(i)];
            QVERIFY2(player >= 1.f, name.c_str());
            QVERIFY(env->lives() > 0);
            QVERIFY_THROWS_EXCEPTION(glimpse::Error, env->step(env->numActions()));
            QVERIFY_THROWS_EXCEPTION(glimpse::Error, env->step(-1));
        }
        QVERIFY(actionSetSizes.size() >= 3);
    }

    void deterministicPerSeed() {
        for (const auto& name : envNames()) {
            auto a = makeEnv(name), b = makeEnv(name);
            const auto ra = rollout(*a, 11, 5, 300), rb = rollout(*b, 11, 5, 300);
            QVERIFY2(ra.first == rb.first && ra.second == rb.second, name.c_str());
            const auto rc = rollout(*b, 12, 5, 300);
            QVERIFY2(ra.first != rc.first, name.c_str());
        }
    }

    void episodesTerminateOrTruncate() {
        EnvOptions options;
        options.maxEpisodeSteps = 150;
        for (const auto& name : envNames()) {
            auto env = makeEnv(name, options);
            std::mt19937_64 rng(2);
            for (int episode = 0; episode < 3; ++episode) {
                env->reset(uint64_t(episode));
                StepResult r;
                int steps = 0;
                while (!r.done()) {
                    r = env->step(int(rng() % uint64_t(env->numActions())));
                    ++steps;
                    QVERIFY(steps <= 150);
                }
                QVERIFY(r.terminal != r.truncated);
                QCOMPARE(r.truncated, steps == 150);
                QCOMPARE(r.lives, env->lives());
                QVERIFY(env->episodeOver());
                QVERIFY_THROWS_EXCEPTION(glimpse::Error, env->step(0));
            }
        }
        // Random play runs out of lives well within 1000 steps in breakout.
        auto env = makeEnv("breakout");
        env->reset(0);
        StepResult r;
        while (!r.done()) r = env->step(1 + int(env->episodeSteps() % 3));
        QVERIFY(r.terminal);
        QCOMPARE(r.lives, 0);
    }

    void breakoutServesWithoutFire() {
        // A policy that never presses FIRE still plays: the game serves the ball itself on the
        // fifth step after the reset or after the step that lost the ball.
        auto env = makeEnv("breakout");
        const ObsShape s = env->observationShape();
        const int64_t plane = int64_t(s.height) * s.width;
        auto ballOnBoard = [&] {
            const std::vector<float> obs = env->observation();
            float sum = 0;
            for (int64_t i = plane; i < 2 * plane; ++i) sum += obs[size_t(i)];  // channel 1: ball
            return sum > 0.f;
        };
        env->reset(0);
        int idle = 0, serves = 0;  // NOOPs since the reset or since the ball was lost
        bool wasOn = ballOnBoard();
        QVERIFY(!wasOn);
        StepResult r;
        while (!r.done()) {
            r = env->step(0);  // NOOP only
            const bool on = ballOnBoard();
            if (on && !wasOn) {
                QCOMPARE(idle, 4);  // served on the fifth NOOP
                ++serves;
            }
            idle = (on || wasOn) ? 0 : idle + 1;
            QVERIFY(idle <= 4);
            wasOn = on;
        }
        // The still paddle misses the ball sooner or later: all five lives are played and lost.
        QVERIFY(r.terminal);
        QCOMPARE(r.lives, 0);
        QCOMPARE(serves, 5);
    }

    void heistParkedCarRunsDry() {
        // The engine burns a unit of fuel every frame, moving or not: a car that stands still
        // (NOOP) or presses into the border wall (LEFT from the start, column 1) loses a life
        // when its 150-unit tank is empty, on the 150th frame, and the game after 3 x 150.
        for (int action : {0, 3}) {
            auto env = makeEnv("heist");
            QCOMPARE(env->actionNames()[size_t(action)], std::string(action == 0 ? "NOOP" : "LEFT"));
            env->reset(7);
            StepResult r;
            int steps = 0;
            for (int life = 3; life > 0; --life) {
                for (int t = 1; t <= 150; ++t) {
                    r = env->step(action);
                    ++steps;
                    QCOMPARE(r.reward, 0.f);
                    QCOMPARE(r.lives, t < 150 ? life : life - 1);
                }
            }
            QVERIFY(r.terminal);
            QCOMPARE(steps, 450);
        }
    }

    void heistExitWithoutRobberyKeepsTheTank() {
        // Leaving a city refuels only after a robbery in it: a car that drives RIGHT along its
        // street through exit after exit, robbing nothing, still runs dry on the 150th frame.
        // (A seed whose first 150 frames pass no bank on that street.)
        auto env = makeEnv("heist");
        const ObsShape s = env->observationShape();
        auto carX = [&] {
            const std::vector<float> o = env->observation();
            for (int i = 0; i < s.height * s.width; ++i)
                if (o[size_t(5 * s.height * s.width + i)] > 0.f) return i % s.width;
            return -1;
        };
        bool tested = false;
        for (uint64_t seed = 0; seed < 50 && !tested; ++seed) {
            env->reset(seed);
            float reward = 0.f;
            int exits = 0, x = carX();
            StepResult r;
            for (int t = 1; t <= 150 && reward == 0.f; ++t) {
                r = env->step(2);  // RIGHT
                reward += r.reward;
                const int nx = carX();
                exits += nx < x;
                x = nx;
                if (reward == 0.f) QCOMPARE(r.lives, t < 150 ? 3 : 2);
            }
            if (reward > 0.f) continue;
            QVERIFY2(exits >= 10, "the car went through the exit again and again");
            tested = true;
        }
        QVERIFY(tested);
    }

    void frameSkipAndStickyActions() {
        EnvOptions skip2;
        skip2.frameSkip = 2;
        for (const auto& name : envNames()) {
            auto single = makeEnv(name), doubled = makeEnv(name, skip2);
            single->reset(4);
            doubled->reset(4);
            std::mt19937_64 rng(9);
            for (int t = 0; t < 100; ++t) {
                const int a = int(rng() % uint64_t(single->numActions()));
                StepResult r1 = single->step(a);
                float reward = r1.reward;
                if (!r1.terminal) reward += single->step(a).reward;
                StepResult r2 = doubled->step(a);
                QCOMPARE(r2.reward, reward);
                QCOMPARE(doubled->observation(), single->observation());
                if (r2.done()) break;
            }
        }
        EnvOptions sticky;
        sticky.stickyActionProb = 0.25f;
        auto s1 = makeEnv("invaders", sticky), s2 = makeEnv("invaders", sticky), plain = makeEnv("invaders");
        const auto a = rollout(*s1, 1, 3, 200), b = rollout(*s2, 1, 3, 200), c = rollout(*plain, 1, 3, 200);
        QVERIFY(a.first == b.first);
        QVERIFY(a.first != c.first);
    }

    void render() {
        for (const auto& name : envNames()) {
            auto env = makeEnv(name);
            env->reset(0);
            for (int t = 0; t < 8; ++t) env->step(0);
            const ObsShape s = env->observationShape();
            const cv::Mat img = env->render();
            QCOMPARE(img.type(), CV_8UC3);
            QCOMPARE(img.rows, s.height * 8);
            QCOMPARE(img.cols, s.width * 8);
            std::set<std::tuple<int, int, int>> colours;
            for (int y = 0; y < s.height; ++y)
                for (int x = 0; x < s.width; ++x) {
                    const auto p = img.at<cv::Vec3b>(y * 8 + 4, x * 8 + 4);
                    colours.insert({p[0], p[1], p[2]});
                }
            QVERIFY2(colours.size() >= 3, name.c_str());
            QCOMPARE(env->render(2).rows, s.height * 2);
        }
    }

    void vecEnvAutoResetAndStacking() {
        EnvOptions options;
        options.maxEpisodeSteps = 10;
        VecEnv envs("pellets", 3, 42, options, 4);
        const ObsShape frame = envs.frameShape(), stacked = envs.stackedShape();
        QCOMPARE(stacked.channels, 4 * frame.channels);
        const size_t n = size_t(frame.numel());
        std::vector<float> obs = envs.observations();
        QCOMPARE(obs.size(), 3 * 4 * n);
        for (int k = 1; k < 4; ++k)  // at reset the first observation fills the stack
            QVERIFY(std::equal(obs.begin(), obs.begin() + long(n), obs.begin() + long(k * n)));

        std::vector<VecStep> steps = envs.step({2, 2, 3});
        obs = envs.observations();
        for (int i = 0; i < 3; ++i) {
            const std::vector<float> now = envs.env(i).observation();
            QVERIFY(std::equal(now.begin(), now.end(), obs.begin() + long((4 * i + 3) * n)));
        }
        for (int t = 1; t < 10; ++t) {
            steps = envs.step({1, 2, 3});
            if (t < 9) QVERIFY(!steps[0].reset);
        }
        for (const VecStep& s : steps) {
            QVERIFY(s.reset && s.result.truncated);
            QCOMPARE(s.episodeLength, 10);
        }
        // Each environment has its own seeds: the same actions lead to different games.
        VecEnv twins("invaders", 2, 7);
        bool differ = false;
        for (int t = 0; t < 40 && !differ; ++t) {
            twins.step({1, 1});
            differ = twins.env(0).observation() != twins.env(1).observation();
        }
        QVERIFY(differ);
        QCOMPARE(envs.runningReturn(0), 0.0);
        QCOMPARE(envs.env(0).episodeSteps(), 0);
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, envs.step({1}));
        QVERIFY(episodeSeed(42, 0, 0) != episodeSeed(42, 1, 0));
        QVERIFY(episodeSeed(42, 0, 0) != episodeSeed(42, 0, 1));
    }

    void scriptedBeatsRandomOnEveryGame() {
        EnvOptions options;
        options.maxEpisodeSteps = 300;
        for (const auto& name : envNames()) {
            const ScoreStats random = measureScore(name, Policy::Random, 4, 0, options);
            const ScoreStats scripted = measureScore(name, Policy::Scripted, 4, 0, options);
            QVERIFY2(scripted.mean > 2 * random.mean + 5,
                     qPrintable(QString("%1: scripted %2, random %3").arg(name.c_str()).arg(scripted.mean).arg(random.mean)));
        }
    }

    void scoresAndNormalization() {
        const ScoreStats s = summarize({1, 2, 3, 4}, {10, 20, 30, 40});
        QCOMPARE(s.episodes, 4);
        QCOMPARE(s.mean, 2.5);
        QVERIFY(std::abs(s.std - 1.2909944487358056) < 1e-12);
        QVERIFY(std::abs(s.ci95 - 3.182 * s.std / 2) < 1e-12);
        QCOMPARE(s.meanLength, 25.0);
        QCOMPARE(s.min, 1.0);
        QCOMPARE(s.max, 4.0);

        QCOMPARE(int(referenceScores().size()), 8);
        for (const auto& r : referenceScores()) {
            QVERIFY2(r.scripted > r.random, r.game.c_str());
            QVERIFY(std::abs(normalizedScore(r.game, r.random)) < 1e-12);
            QVERIFY(std::abs(normalizedScore(r.game, r.scripted) - 1) < 1e-12);
        }
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, normalizedScore("pong", 1));
        // The stored table is what the games measure today (it is data, not a guess).
        for (const auto& r : referenceScores()) {
            QVERIFY2(std::abs(measureScore(r.game, Policy::Random, 100).mean - r.random) < 0.0051, r.game.c_str());
            QVERIFY2(std::abs(measureScore(r.game, Policy::Scripted, 100).mean - r.scripted) < 0.0051, r.game.c_str());
        }
        QVERIFY_THROWS_EXCEPTION(glimpse::Error, measureScore("breakout", Policy::Random, 0));
    }

    // The constant-action baseline: one button on every frame, played as a hand loop would;
    // the best is the action with the highest mean. On heist, RIGHT drives through street after
    // street and exit after exit, robbing what lies on the way, and scores far above random.
    void constantActionBaseline() {
        auto env = makeEnv("heist");
        std::vector<double> byHand;
        for (int e = 0; e < 6; ++e) {
            env->reset(uint64_t(10 + e));
            double total = 0;
            for (;;) {
                const StepResult r = env->step(2);
                total += r.reward;
                if (r.done()) break;
            }
            byHand.push_back(total);
        }
        const ScoreStats right = measureConstantScore("heist", 2, 6, 10);
        QCOMPARE(right.mean, summarize(byHand).mean);
        QCOMPARE(right.ci95, summarize(byHand).ci95);

        const ConstantBaseline best = bestConstantAction("heist", 6, 10);
        QCOMPARE(best.action, 2);
        QCOMPARE(best.actionName, std::string("RIGHT"));
        QCOMPARE(best.stats.mean, right.mean);
        for (const auto& r : referenceScores())
            if (r.game == "heist") QVERIFY2(best.stats.mean > 10 * r.random, qPrintable(QString::number(best.stats.mean)));
        for (int a = 0; a < env->numActions(); ++a)
            QVERIFY(measureConstantScore("heist", a, 6, 10).mean <= best.stats.mean);
        // Ties go to the lowest index: pellets' RIGHT and LEFT both clear 6 pellets.
        const ConstantBaseline pellets = bestConstantAction("pellets", 4);
        QCOMPARE(measureConstantScore("pellets", 2, 4).mean, measureConstantScore("pellets", 3, 4).mean);
        QCOMPARE(pellets.action, 2);

        auto errorOf = [](auto&& f) -> QString {
            try {
                f();
            } catch (const glimpse::Error& e) {
                return e.what();
            }
            return "<no error>";
        };
        QString e = errorOf([] { measureConstantScore("heist", 6, 1); });
        QVERIFY2(e.contains("heist has actions 0..5, not 6"), qPrintable(e));
        e = errorOf([] { measureConstantScore("heist", -1, 1); });
        QVERIFY2(e.contains("heist has actions 0..5, not -1"), qPrintable(e));
        e = errorOf([] { bestConstantAction("heist", 0); });
        QVERIFY2(e.contains("bestConstantAction needs at least one episode"), qPrintable(e));
    }
};

QTEST_APPLESS_MAIN(TestRlEnvs)
#include "test_rl_envs.moc"
