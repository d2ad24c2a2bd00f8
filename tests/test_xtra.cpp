// XTRA (core/models/xtra, core/rl/shared_space.h):
// - the task weights (task_weights.h; dissertation 5.3.2, Appendix 5.7.2): gradient cosine
//   similarities against hand-computed gradients of a tiny network, and the cycle / window /
//   counter / warm-up schedule step by step;
// - the shared observation and action space: the action mapping of every game, frames against
//   the game's own rendering, a shared game playing exactly as the native one;
// - offline datasets: a replay of their actions reproduces their frames, round trip, bad files;
// - the teachers' targets against direct network calls and hand-computed n-step values;
// - distillation (xtra-pretrain): the student's policy loss falls, its checkpoint plays the
//   shared games, resume.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <torch/torch.h>

#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/eval.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/train.h"
#include "core/models/xtra/dataset.h"
#include "core/models/xtra/finetune.h"
#include "core/models/xtra/offline_task.h"
#include "core/models/xtra/pretrain.h"
#include "core/models/xtra/task_weights.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "core/rl/score.h"
#include "core/rl/shared_space.h"
#include "core/runlog.h"
#include "tests/ez_support.h"
#include "tests/support.h"

using namespace glimpse;
using testing::contains;
using testing::errorOf;

namespace {

xtra::OfflineDataset scriptedData(const std::string& env, int64_t steps, std::vector<double> eps = {0.0}) {
    xtra::DatasetSpec spec;
    spec.env = env;
    spec.policy = "scripted";
    spec.epsilons = std::move(eps);
    spec.steps = steps;
    spec.numEnvs = 2;
    spec.seed = 3;
    spec.envOptions.maxEpisodeSteps = 60;
    return xtra::generateDataset(spec);
}

} // namespace

// The episode files a run recorded (RUN/episodes/*.h5), sorted.
std::vector<std::string> episodeFiles(const std::string& dir) {
    std::vector<std::string> files;
    if (std::filesystem::exists(dir))
        for (const auto& e : std::filesystem::directory_iterator(dir))
            if (e.path().extension() == ".h5") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

// Self-play recorded during finetuning (record_interval 1): each step's task weights are the
// ones the run log shows for the next update (logged at update u + 1).
void checkRecordedWeights(const std::string& runDir, const RunLog& log) {
    const auto recorded = episodeFiles(runDir + "/episodes");
    QVERIFY(!recorded.empty());
    int compared = 0;
    for (const auto& file : recorded) {
        replay::EpisodeReader ep(file);
        QVERIFY(ep.hasTraining());
        QCOMPARE(ep.meta().training.trainer, std::string("xtra"));
        QCOMPARE(ep.taskNames(), std::vector<std::string>({"breakout", "invaders"}));
        QCOMPARE(ep.taskCategories(), std::vector<std::string>({"shooter", "shooter"}));
        QCOMPARE(ep.game(), std::string("shared:demon"));
        for (int64_t t = 0; t < ep.length(); ++t) {
            const int64_t u = ep.trainingUpdate(t);
            if (t > 0) QVERIFY(u >= ep.trainingUpdate(t - 1) && ep.trainingEnvSteps(t) == ep.trainingEnvSteps(t - 1) + 2);
            if (u >= 10) continue;
            const auto now = ep.taskWeights(t);
            QCOMPARE(now[0], float(log.series.at("task_weight/breakout").values[size_t(u)]));
            QCOMPARE(now[1], float(log.series.at("task_weight/invaders").values[size_t(u)]));
            ++compared;
        }
    }
    QVERIFY(compared >= 20);
}

class TestXtra : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void cosineOfGradients() {
        QVERIFY(std::abs(xtra::gradientCosine({torch::tensor({1.0, 0.0}), torch::tensor({0.0})},
                                              {torch::tensor({1.0, 1.0}), torch::tensor({0.0})}) -
                         1 / std::sqrt(2.0)) < 1e-12);
        QCOMPARE(xtra::gradientCosine({torch::zeros({3})}, {torch::ones({3})}), 0.0);
        QVERIFY(contains(errorOf([] { xtra::gradientCosine({torch::zeros({3})}, {torch::zeros({2})}); }), {"shape"}));
    }

    // A linear model y = w . x + b: the gradient of sum_k c_k y(x_k) is (sum c_k x_k, sum c_k),
    // so every task's gradient and their cosines are known in closed form.
    void similaritiesOfTaskLosses() {
        auto w = torch::tensor({0.3, -0.2, 0.5}, torch::kFloat64).requires_grad_(true);
        auto b = torch::tensor({0.1}, torch::kFloat64).requires_grad_(true);
        auto y = [&](std::vector<double> x) { return (w * torch::tensor(x, torch::kFloat64)).sum() + b.sum(); };
        auto target = y({1, 2, 0}) + y({0, 1, 1});                 // grad (1, 3, 1 | 2)
        auto same = 2.0 * target;                                    // parallel: cos 1
        auto opposite = -y({1, 2, 0});                               // grad (-1, -2, 0 | -1)
        auto unused = torch::zeros({}, torch::kFloat64) * w.sum();   // zero gradient: 0
        const auto sims = xtra::taskSimilarities(target, {same, opposite, unused}, {w, b});
        QCOMPARE(int(sims.size()), 3);
        QVERIFY(std::abs(sims[0] - 1.0) < 1e-12);
        const double expected = -(1 * 1 + 3 * 2 + 1 * 0 + 2 * 1) / (std::sqrt(1 + 9 + 1 + 4.0) * std::sqrt(1 + 4 + 0 + 1.0));
        QVERIFY2(std::abs(sims[1] - expected) < 1e-12, qPrintable(QString::number(sims[1])));
        QCOMPARE(sims[2], 0.0);
        // A parameter a loss does not reach contributes zeros.
        auto onlyW = (w * w).sum();
        const auto g = xtra::lossGradient(onlyW, {w, b});
        QCOMPARE(g[1].abs().sum().item<double>(), 0.0);
        QVERIFY(std::abs(g[0][2].item<double>() - 1.0) < 1e-12);
    }

    // T = 10, N = 4, warm-up 5: weights 1 through update 8; updates 5-8 measure; the weights of
    // update 8's window hold through 9-18 (the next window measures 15-18 under them).
    void cycleWindowAndCounters() {
        xtra::TaskWeightConfig c;
        c.cycle = 10;
        c.window = 4;
        c.warmup = 5;
        c.threshold = 0.1;
        xtra::TaskWeights tw(3, c);
        for (int64_t s = 0; s < 5; ++s) QVERIFY(!tw.measuring(s));
        for (int64_t s = 5; s < 9; ++s) QVERIFY(tw.measuring(s));
        for (int64_t s = 9; s < 15; ++s) QVERIFY(!tw.measuring(s));
        for (int64_t s = 15; s < 19; ++s) QVERIFY(tw.measuring(s));
        QVERIFY(contains(errorOf([&] { tw.observe(4, {0, 0, 0}); }), {"not in a measuring window"}));
        QVERIFY(contains(errorOf([&] { tw.observe(5, {0, 0}); }), {"2 similarities for 3"}));
        // Task 0 always agrees, task 1 sits exactly on the threshold (not above), task 2 agrees
        // every other update.
        const std::vector<std::vector<double>> first{{0.5, 0.1, 0.9}, {0.2, 0.1, -0.3}, {0.9, 0.1, 0.8}, {0.3, 0.1, 0.0}};
        for (int k = 0; k < 4; ++k) {
            QCOMPARE(tw.weights(), std::vector<double>({1, 1, 1}));   // warm-up weights until the window ends
            tw.observe(5 + k, first[size_t(k)]);
        }
        QCOMPARE(tw.weights(), std::vector<double>({1.0, 0.0, 0.5}));
        QCOMPARE(tw.counters(), std::vector<int64_t>({0, 0, 0}));
        // Next window: counters grow while the old weights stay in force; resumable halfway.
        tw.observe(15, {-0.5, 0.7, 0.2});
        tw.observe(16, {-0.5, 0.7, 0.2});
        QCOMPARE(tw.weights(), std::vector<double>({1.0, 0.0, 0.5}));
        QCOMPARE(tw.counters(), std::vector<int64_t>({0, 2, 2}));
        xtra::TaskWeights resumed(3, c);
        resumed.restore(tw.state(), "state.h5");
        for (auto* t : {&tw, &resumed}) {
            t->observe(17, {0.5, 0.7, -1.0});
            t->observe(18, {-0.5, 0.7, 0.2});
        }
        QCOMPARE(tw.weights(), std::vector<double>({0.25, 1.0, 0.75}));
        QCOMPARE(resumed.weights(), tw.weights());
        // Bad state and config name the problem.
        xtra::TaskWeights other(2, c);
        QVERIFY(contains(errorOf([&] { other.restore(tw.state(), "s.h5"); }), {"s.h5", "3 task weights, expected 2"}));
        QVERIFY(contains(errorOf([&] { other.restore(nlohmann::json{{"weights", {2.0, 0.0}}, {"counters", {0, 0}}}, "s.h5"); }),
                         {"outside [0, 1]"}));
        QVERIFY(contains(errorOf([&] { other.restore(nlohmann::json::object(), "s.h5"); }), {"s.h5", "malformed"}));
        QVERIFY(contains(errorOf([&] { xtra::TaskWeightConfig::fromJson({{"window", 20}, {"cycle", 10}}, "x.json"); }),
                         {"x.json", "window"}));
        QVERIFY(contains(errorOf([&] { xtra::TaskWeightConfig::fromJson({{"windw", 2}}, "x.json"); }), {"x.json", "windw"}));
        QCOMPARE(xtra::TaskWeightConfig::fromJson(c.toJson(), "x").toJson(), c.toJson());
        // No warm-up: the first update measures.
        c.warmup = 0;
        QVERIFY(xtra::TaskWeights(1, c).measuring(0));
    }

    // Every game's actions map by name into the shared set, and their union is that set.
    void sharedActionMapping() {
        QCOMPARE(rl::sharedActionCount(), 9);
        const auto& names = rl::sharedActionNames();
        std::set<std::string> all;
        for (const auto& g : rl::envNames()) {
            const auto env = rl::makeEnv(g);
            const auto m = rl::actionMap(g);
            QCOMPARE(m.numNative(), env->numActions());
            for (int a = 0; a < env->numActions(); ++a) {
                QCOMPARE(names[size_t(m.toShared[size_t(a)])], env->actionNames()[size_t(a)]);
                QCOMPARE(m.toNative[size_t(m.toShared[size_t(a)])], a);
                all.insert(env->actionNames()[size_t(a)]);
            }
            int illegal = 0;
            for (int s = 0; s < 9; ++s) illegal += m.toNative[size_t(s)] < 0;
            QCOMPARE(illegal, 9 - env->numActions());
            QCOMPARE(rl::makeEnv("shared:" + g)->legalActions(), m.legal);
        }
        QCOMPARE(all.size(), size_t(9));
        QCOMPARE(rl::actionMap("painter").toShared[5], 8);   // JUMP
        QCOMPARE(rl::actionMap("heist").toShared[5], 1);     // FIRE
        QCOMPARE(rl::actionMap("heist").toShared[1], 2);     // UP
        const float p[4] = {0.1f, 0.2f, 0.3f, 0.4f};         // breakout: NOOP FIRE RIGHT LEFT
        QCOMPARE(rl::actionMap("breakout").policyToShared(p), std::vector<float>({0.1f, 0.2f, 0.f, 0.3f, 0.4f, 0.f, 0.f, 0.f, 0.f}));
        QVERIFY(contains(errorOf([] { rl::ActionMap::fromNames("x", {"NOOP", "HYPERSPACE"}); }), {"HYPERSPACE", "not among"}));
    }

    // A shared game plays exactly as the native one under the mapped actions; its frame is the
    // game's rendering at one pixel per cell (black for the background), padded to 15x15.
    void sharedGamePlaysAsNative() {
        for (const std::string g : {"demon", "heist", "painter"}) {
            auto native = rl::makeEnv(g), shared = rl::makeEnv("shared:" + g);
            QCOMPARE(shared->name(), "shared:" + g);
            const auto map = rl::actionMap(g);
            native->reset(42);
            shared->reset(42);
            std::mt19937_64 rng(1);
            const auto so = rl::sharedObservationShape();
            const auto s = native->observationShape();
            int objects = 0;
            for (int t = 0; t < 60 && !native->episodeOver(); ++t) {
                const cv::Mat img = native->render(1);
                const auto obs = shared->observation();
                QCOMPARE(int64_t(obs.size()), so.numel());
                for (int y = 0; y < so.height; ++y)
                    for (int x = 0; x < so.width; ++x) {
                        const bool inside = y < s.height && x < s.width;
                        const cv::Vec3b px = inside ? img.at<cv::Vec3b>(y, x) : cv::Vec3b(18, 18, 28);
                        const bool background = px == cv::Vec3b(18, 18, 28);
                        objects += !background;
                        for (int k = 0; k < 3; ++k) {
                            const float v = obs[size_t((k * so.height + y) * so.width + x)];
                            QVERIFY2(std::abs(v * 255.f - (background ? 0.f : float(px[k]))) < 0.51f, qPrintable(QString::fromStdString(g)));
                        }
                    }
                QCOMPARE(shared->referenceAction(), map.toShared[size_t(native->referenceAction())]);
                const int a = map.legal[rng() % map.legal.size()];
                const auto rs = shared->step(a);
                const auto rn = native->step(map.toNative[size_t(a)]);
                QCOMPARE(rs.reward, rn.reward);
                QCOMPARE(rs.lives, rn.lives);
                QCOMPARE(rs.done(), rn.done());
            }
            QVERIFY(objects > 0);
        }
        auto demon = rl::makeEnv("shared:demon");
        QVERIFY(contains(errorOf([&] { demon->step(2); }), {"UP", "not legal", "demon"}));
        QVERIFY(contains(errorOf([&] { demon->step(9); }), {"out of range"}));
        QCOMPARE(rl::normalizedScore("shared:demon", 20.0), rl::normalizedScore("demon", 20.0));
        QVERIFY(contains(errorOf([] { rl::makeEnv("shared:chess"); }), {"unknown game 'chess'"}));
        QVERIFY(rl::isKnownEnv("shared:alien") && rl::isKnownEnv("alien") && !rl::isKnownEnv("shared:chess"));
    }

    // Replaying a dataset's actions from its episode seeds reproduces its frames and rewards;
    // histories end at a lost life (terminal), the game's end or the step limit, and episodes
    // cycle through the epsilons.
    void datasetReplaysExactly() {
        xtra::DatasetSpec spec;
        spec.env = "breakout";
        spec.epsilons = {0.0, 0.6};
        spec.steps = 500;
        spec.numEnvs = 1;
        spec.seed = 5;
        spec.envOptions.maxEpisodeSteps = 150;
        const auto d = xtra::generateDataset(spec);
        QCOMPARE(d.transitions(), int64_t(500));
        auto env = rl::makeEnv("breakout", spec.envOptions);
        int64_t episode = 0;
        env->reset(rl::episodeSeed(5, 0, episode));
        const int64_t n = d.frame.numel();
        auto frameBytes = [&] {
            rl::GameHistory p;
            p.frame = env->observationShape();
            const auto o = env->observation();
            p.addFrame(o.data());
            return p.frames;
        };
        int terminal = 0;
        for (size_t gi = 0; gi < d.games.size(); ++gi) {
            const auto& h = d.games[gi];
            QCOMPARE(d.epsilon[gi], episode % 2 ? 0.6f : 0.f);
            QVERIFY(std::equal(h.frames.begin(), h.frames.begin() + n, frameBytes().begin()));
            const int lives = env->lives();
            for (int t = 0; t < h.length(); ++t) {
                const auto r = env->step(h.actions[size_t(t)]);
                QCOMPARE(r.reward, h.rewards[size_t(t)]);
                QVERIFY(std::equal(h.frames.begin() + (t + 1) * n, h.frames.begin() + (t + 2) * n, frameBytes().begin()));
                const bool ends = r.done() || r.lives < lives;
                if (t + 1 < h.length()) QVERIFY(!ends);
                else if (gi + 1 < d.games.size()) QVERIFY(ends);
            }
            terminal += h.terminal;
            if (env->episodeOver()) env->reset(rl::episodeSeed(5, 0, ++episode));
        }
        QVERIFY(terminal >= 1);                              // lost lives at epsilon 0.6
        QVERIFY(!d.games.back().terminal);                   // cut by the step budget
        QCOMPARE(int64_t(d.episodeReturns.size()), episode);
        // Epsilon 1 is the uniform policy over the legal actions.
        spec.epsilons = {1.0};
        spec.steps = 400;
        const auto r = xtra::generateDataset(spec);
        std::vector<int> count(4, 0);
        for (const auto& h : r.games)
            for (int a : h.actions) ++count[size_t(a)];
        for (int c : count) QVERIFY2(c > 60 && c < 140, qPrintable(QString::number(c)));
    }

    void datasetRoundTripAndBadFiles() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        const auto d = scriptedData("demon", 300, {0.0, 1.0});
        xtra::writeDataset(dir + "/d.h5", d);
        const auto r = xtra::readDataset(dir + "/d.h5");
        QCOMPARE(r.env, d.env);
        QCOMPARE(r.policy, d.policy);
        QCOMPARE(r.games.size(), d.games.size());
        for (size_t g = 0; g < d.games.size(); ++g) {
            QVERIFY(r.games[g].frames == d.games[g].frames);
            QVERIFY(r.games[g].actions == d.games[g].actions);
            QVERIFY(r.games[g].rewards == d.games[g].rewards);
            QCOMPARE(r.games[g].terminal, d.games[g].terminal);
        }
        QVERIFY(r.epsilon == d.epsilon);
        QVERIFY(r.episodeReturns == d.episodeReturns);
        QVERIFY(xtra::describeDataset(r).rfind("demon: 300 transitions", 0) == 0);
        // Made with another version of the game: its actions differ.
        std::filesystem::copy_file(dir + "/d.h5", dir + "/old.h5");
        {
            auto f = h5::File::open(dir + "/old.h5", h5::File::Mode::ReadWrite);
            f.setAttr("action_names", R"(["NOOP","FIRE","RIGHT","LEFT","DOWN"])");
        }
        QVERIFY(contains(errorOf([&] { xtra::readDataset(dir + "/old.h5"); }), {"old.h5", "another version of 'demon'"}));
        // An action outside the game, an empty dataset, a truncated file, a file of another kind.
        auto bad = d;
        bad.games[0].actions[0] = 7;
        xtra::writeDataset(dir + "/bad.h5", bad);
        QVERIFY(contains(errorOf([&] { xtra::readDataset(dir + "/bad.h5"); }), {"bad.h5", "action 7", "4 actions"}));
        auto none = d;
        none.games.clear();
        QVERIFY(contains(errorOf([&] { xtra::writeDataset(dir + "/none.h5", none); }), {"empty"}));
        h5::writeAtomically(dir + "/empty.h5", xtra::kDatasetKind, 1, [&](h5::File& f) {
            for (const char* k : {"env", "source", "policy", "env_options", "action_names", "channel_names", "frame_shape"})
                f.setAttr(k, h5::File::open(dir + "/d.h5").attrString(k));
            f.setAttr("rewards_clipped", int64_t(0));
            f.setAttr("life_loss_split", int64_t(1));
            f.writeTensor("lengths", torch::zeros({0}, torch::kInt64));
        });
        QVERIFY(contains(errorOf([&] { xtra::readDataset(dir + "/empty.h5"); }), {"empty.h5", "empty"}));
        {
            std::ifstream in(dir + "/d.h5", std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), {});
            std::ofstream(dir + "/cut.h5", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
        }
        QVERIFY(contains(errorOf([&] { xtra::readDataset(dir + "/cut.h5"); }), {"cut.h5"}));
        const std::string teacher = testing::saveRandomTeacher(dir, "demon", 1);
        QVERIFY(contains(errorOf([&] { xtra::readDataset(teacher); }), {"glimpse.rl_dataset"}));
        // Bad specifications.
        xtra::DatasetSpec spec;
        spec.env = "demon";
        spec.policy = "agent";
        QVERIFY(contains(errorOf([&] { spec.validate(); }), {"--checkpoint"}));
        spec.policy = "scripted";
        spec.epsilons = {0.5, 1.5};
        QVERIFY(contains(errorOf([&] { spec.validate(); }), {"outside [0, 1]"}));
        spec.epsilons = {0.0};
        spec.env = "chess";
        QVERIFY(contains(errorOf([&] { spec.validate(); }), {"chess"}));
    }

    // The teacher's predictions, recomputed by calling its network; the n-step value targets,
    // recomputed from the clipped rewards; the student's frames are the dataset's drawn in the
    // shared space.
    void teacherTargets() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        const auto d = scriptedData("breakout", 240, {0.0, 1.0});
        xtra::writeDataset(dir + "/d.h5", d);
        const std::string teacher = testing::saveRandomTeacher(dir, "breakout", 7);
        xtra::TargetOptions o;
        o.unroll = 3;
        o.tdSteps = 2;
        o.discount = 0.9;
        o.stack = 4;
        const xtra::OfflineTask task({dir + "/d.h5", teacher}, o);
        QCOMPARE(task.game(), std::string("breakout"));
        QCOMPARE(task.transitions(), int64_t(240));
        auto net = efficientzero::loadNetwork(teacher);
        const auto map = rl::actionMap("breakout");
        const auto colours = rl::makeEnv("breakout")->channelColours();
        const rl::ObsShape so = rl::sharedObservationShape();
        const int64_t n = d.frame.numel();
        int terminalGame = -1;
        for (size_t g = 0; g < d.games.size(); ++g)
            if (d.games[g].terminal && d.games[g].length() >= 2) terminalGame = int(g);
        QVERIFY(terminalGame >= 0);
        const int last = int(d.games.size()) - 1;
        for (int g : {0, terminalGame, last}) {
            const auto& h = d.games[size_t(g)];
            const auto& s = task.replay().games()[size_t(g)];
            for (int t : {0, h.length() / 2, h.length()}) {
                std::vector<float> x(size_t(4 * n));
                h.stackedInto(t, 4, x.data());
                torch::NoGradGuard ng;
                const auto out = net.initialInference(torch::from_blob(x.data(), {1, 4 * d.frame.channels, d.frame.height, d.frame.width}));
                QVERIFY(std::abs(task.teacherValues(g)[size_t(t)] - out.value[0].item<float>()) < 1e-5);
                if (t < h.length()) {
                    const auto p = torch::softmax(out.policyLogits[0], 0);
                    float sum = 0;
                    for (int a = 0; a < 9; ++a) {
                        const int native = map.toNative[size_t(a)];
                        const float want = native < 0 ? 0.f : p[native].item<float>();
                        QVERIFY(std::abs(s.policies[size_t(t * 9 + a)] - want) < 1e-6);
                        sum += s.policies[size_t(t * 9 + a)];
                    }
                    QVERIFY(std::abs(sum - 1.f) < 1e-5);
                    QCOMPARE(s.actions[size_t(t)], map.toShared[size_t(h.actions[size_t(t)])]);
                }
                std::vector<float> want(size_t(so.numel()));
                rl::sharedFrameInto(colours, h.frames.data() + t * n, d.frame, want.data());
                for (int64_t i = 0; i < so.numel(); ++i)
                    QVERIFY(std::abs(float(s.frames[size_t(t * so.numel() + i)]) - want[size_t(i)] * 255.f) < 0.51f);
            }
        }
        // Value targets at the start, the end of a terminal history and the end of the cut one.
        auto clip = [](float r) { return float(r > 0) - float(r < 0); };
        std::vector<std::pair<int, int>> at{{0, 0}, {terminalGame, d.games[size_t(terminalGame)].length() - 1},
                                            {last, d.games[size_t(last)].length() - 1}};
        const auto b = task.batchAt(at, 5);
        QCOMPARE(b.obs.sizes().vec(), std::vector<int64_t>({3, 12, 15, 15}));
        QCOMPARE(b.nextObs.sizes().vec(), std::vector<int64_t>({3, 3, 12, 15, 15}));
        QCOMPARE(b.policy.sizes().vec(), std::vector<int64_t>({3, 4, 9}));
        for (int row = 0; row < 3; ++row) {
            const auto [g, pos] = at[size_t(row)];
            const auto& h = d.games[size_t(g)];
            const int T = h.length();
            for (int k = 0; k <= 3; ++k) {
                const int t = pos + k;
                double z = 0;
                if (t < T) {
                    double disc = 1;
                    for (int i = t; i < std::min(t + 2, T); ++i, disc *= 0.9) z += disc * clip(h.rewards[size_t(i)]);
                    if (t + 2 < T) z += 0.81 * task.teacherValues(g)[size_t(t + 2)];
                    else if (!h.terminal) z += std::pow(0.9, T - t) * task.teacherValues(g)[size_t(T)];
                }
                QVERIFY2(std::abs(b.value[row][k].item<double>() - z) < 1e-5, qPrintable(QString("row %1 k %2").arg(row).arg(k)));
                QCOMPARE(b.mask[row][k].item<float>(), t < T ? 1.f : 0.f);
            }
        }
        // A batch's rows split over ranks are the rows of the whole batch.
        const auto whole = task.sample(8, 11), part = task.sample(8, 11, 4, 8);
        QCOMPARE(testing::maxDiff(whole.obs.slice(0, 4, 8), part.obs), 0.0);
        QCOMPARE(testing::maxDiff(whole.value.slice(0, 4, 8), part.value), 0.0);
        QCOMPARE(testing::maxDiff(whole.actions.slice(0, 4, 8).to(torch::kFloat), part.actions.to(torch::kFloat)), 0.0);
        // A teacher of another game (other actions and frames) is refused, naming both files.
        const std::string other = testing::saveRandomTeacher(dir, "heist", 2);
        QVERIFY(contains(errorOf([&] { xtra::OfflineTask({dir + "/d.h5", other}, o); }), {"teacher_heist.h5", "d.h5"}));
    }

    // Distillation: the student's policy loss against the teachers falls; a run stopped halfway and
    // resumed ends with the same weights as one that was not; the student plays the shared games.
    void distillationLearnsAndResumes() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        xtra::writeDataset(dir + "/breakout.h5", scriptedData("breakout", 200, {0.0, 0.5}));
        xtra::writeDataset(dir + "/demon.h5", scriptedData("demon", 200, {0.0, 0.5}));
        xtra::PretrainConfig c;
        c.sources = {{dir + "/breakout.h5", testing::saveRandomTeacher(dir, "breakout", 3)}, {dir + "/demon.h5", testing::saveRandomTeacher(dir, "demon", 4)}};
        c.steps = 40;
        c.batchSize = 16;
        c.unroll = 3;
        c.tdSteps = 3;
        c.lr = 3e-3;
        c.warmupSteps = 5;
        c.checkpointEvery = 100;
        c.logEvery = 1;
        train::Control control;
        const auto full = xtra::pretrain(c, dir + "/full", false, control);
        QVERIFY(full.finished);
        QCOMPARE(full.steps, int64_t(40));
        const RunLog log = RunLog::load(dir + "/full/run.h5");
        for (const std::string g : {"breakout", "demon"}) {
            const auto v = log.series.at("task_policy_loss/" + g).values;
            QCOMPARE(int(v.size()), 40);
            const double first = (v[0] + v[1] + v[2]) / 3, lastv = (v[37] + v[38] + v[39]) / 3;
            QVERIFY2(lastv < first - 0.1, qPrintable(QString("%1: %2 -> %3").arg(QString::fromStdString(g)).arg(first).arg(lastv)));
        }
        // Stopped at step 15 by the control, then resumed.
        train::Control stopper;
        const auto stopped = xtra::pretrain(c, dir + "/split", false, stopper, [&](const train::Progress& p) {
            if (p.phase == "distill" && p.step >= 15) stopper.requestStop();
        });
        QVERIFY(!stopped.finished);
        QCOMPARE(stopped.steps, int64_t(15));
        QVERIFY(!std::filesystem::exists(dir + "/split/model.h5"));
        train::Control again;
        const auto resumed = xtra::pretrain(c, dir + "/split", true, again);
        QVERIFY(resumed.finished);
        auto a = efficientzero::loadForEnv(dir + "/full/model.h5", *rl::makeEnv("shared:demon"));
        auto b = efficientzero::loadForEnv(dir + "/split/model.h5", *rl::makeEnv("shared:breakout"));
        const auto pa = a.parameters(), pb = b.parameters();
        double diff = 0;
        for (size_t i = 0; i < pa.size(); ++i) diff = std::max(diff, testing::maxDiff(pa[i], pb[i]));
        QVERIFY2(diff < 1e-5, qPrintable(QString::number(diff)));
        QVERIFY(contains(errorOf([&] { efficientzero::loadForEnv(dir + "/full/model.h5", *rl::makeEnv("demon")); }), {"actions"}));
        // The student plays a shared game.
        efficientzero::EvalOptions eo;
        eo.episodes = 2;
        eo.simulations = 4;
        eo.env.maxEpisodeSteps = 30;
        const auto ev = efficientzero::evaluate(a, "shared:demon", eo);
        QCOMPARE(int(ev.returns.size()), 2);
        // Bad configurations.
        auto dup = c;
        dup.sources.push_back(c.sources[0]);
        dup.batchSize = 15;
        QVERIFY(contains(errorOf([&] { xtra::pretrain(dup, dir + "/dup", false, control); }), {"one per game"}));
        auto odd = c;
        odd.batchSize = 15;
        QVERIFY(contains(errorOf([&] { odd.validate(); }), {"does not divide"}));
        QVERIFY(contains(errorOf([&] { xtra::PretrainConfig::fromJson({{"sources", 3}}, "c.json"); }), {"c.json", "sources"}));
        QVERIFY(contains(errorOf([&] { xtra::PretrainConfig::fromJson({{"stepz", 3}}, "c.json"); }), {"unknown key 'stepz'"}));
    }

    // EfficientZero self-play in a shared game searches only the game's actions (the others would
    // throw), and the run's replay becomes an offline dataset of that shared game.
    void efficientZeroTrainsInTheSharedSpace() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString() + "/ez";
        efficientzero::TrainConfig c;
        c.env = "shared:demon";
        c.steps = 4;
        c.numEnvs = 2;
        c.simulations = 4;
        c.batchSize = 8;
        c.minReplay = 40;
        c.maxEpisodeSteps = 40;
        c.checkpointInterval = 100;
        c.logInterval = 1;
        c.warmupSteps = 1;
        c.recordInterval = 2;
        const auto r = efficientzero::trainAgent(c, dir);
        QCOMPARE(r.updates, int64_t(4));
        // Recorded self-play: the game replayed from the episode's seed with its actions shows
        // the same frames and rewards; EfficientZero alone records no task weights.
        const auto recorded = episodeFiles(dir + "/episodes");
        QVERIFY(!recorded.empty());
        QVERIFY(QString::fromStdString(recorded.front()).endsWith("update_0000000.h5"));
        for (const auto& file : recorded) {
            const rl::Episode e = rl::readEpisode(file);
            QVERIFY(e.hasTraining && e.training.trainer == "efficientzero" && e.training.taskNames.empty());
            QVERIFY(!e.training.taskWeights.defined());
            rl::EnvOptions eo;
            eo.maxEpisodeSteps = 40;
            auto env = rl::makeEnv("shared:demon", eo);
            env->reset(uint64_t(e.seed));
            for (int64_t t = 0; t < e.length(); ++t) {
                cv::Mat img = env->render(8);
                QVERIFY(torch::equal(torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kUInt8), e.frames[t]));
                const auto st = env->step(int(e.actions[t].item<int64_t>()));
                QCOMPARE(st.reward, e.rewards[t].item<float>());
                QCOMPARE(st.done(), t == e.length() - 1 && (e.terminal || e.length() == 40));
            }
        }
        const auto run = efficientzero::readRunReplay(dir);
        const auto legal = rl::actionMap("demon").legal;
        int64_t moves = 0;
        for (const auto& h : run.games) {
            for (int a : h.actions) QVERIFY(std::find(legal.begin(), legal.end(), a) != legal.end());
            for (int t = 0; t < h.length(); ++t)
                for (int a = 0; a < 9; ++a)
                    if (std::find(legal.begin(), legal.end(), a) == legal.end()) QCOMPARE(h.policies[size_t(t * 9 + a)], 0.f);
            moves += h.length();
        }
        QVERIFY(moves >= 40);
        const auto d = xtra::datasetFromRun(dir);
        QCOMPARE(d.env, std::string("shared:demon"));
        QCOMPARE(d.transitions(), moves);
        QVERIFY(d.rewardsClipped);
        QVERIFY(contains(errorOf([&] { xtra::datasetFromRun(tmp.path().toStdString()); }), {"no state.h5"}));
    }

    // Finetuning with concurrent offline tasks: every update logs each task's weight and loss; the
    // weights are 1 through the warm-up and the first window, then s_i / N of the similarities
    // logged in the window; "constant" keeps them at 1; the run resumes with its weights' state.
    void finetuningWeighsOfflineTasks() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        xtra::writeDataset(dir + "/breakout.h5", scriptedData("breakout", 200, {0.0, 0.5}));
        xtra::writeDataset(dir + "/invaders.h5", scriptedData("invaders", 200, {0.0, 0.5}));
        xtra::writeDataset(dir + "/demon.h5", scriptedData("demon", 100));
        const std::vector<xtra::SourceSpec> sources{{dir + "/breakout.h5", testing::saveRandomTeacher(dir, "breakout", 3)},
                                                    {dir + "/invaders.h5", testing::saveRandomTeacher(dir, "invaders", 4)}};
        xtra::PretrainConfig pc;
        pc.sources = sources;
        pc.steps = 3;
        pc.batchSize = 8;
        train::Control control;
        xtra::pretrain(pc, dir + "/student", false, control);

        nlohmann::json j = {{"env", "shared:demon"}, {"steps", 10}, {"num_envs", 2}, {"simulations", 4}, {"batch_size", 8},
                            {"min_replay", 40}, {"max_episode_steps", 40}, {"checkpoint_interval", 5}, {"log_interval", 1},
                            {"warmup_steps", 1}, {"init", dir + "/student/model.h5"}, {"record_interval", 1}};
        j["xtra"] = {{"sources", {{{"dataset", sources[0].dataset}, {"teacher", sources[0].teacher}},
                                  {{"dataset", sources[1].dataset}, {"teacher", sources[1].teacher}}}},
                     {"offline_batch_size", 6},
                     {"task_weights", {{"cycle", 4}, {"window", 2}, {"threshold", 0.0}, {"warmup", 2}}}};
        const auto cfg = xtra::FinetuneConfig::fromJson(j, "ft.json");
        const auto r = xtra::finetune(cfg, dir + "/ft", &control);
        QCOMPARE(r.updates, int64_t(10));
        const RunLog log = RunLog::load(dir + "/ft/runlog.h5");
        QCOMPARE(log.config.value("trainer", ""), std::string("xtra"));
        QCOMPARE(log.config.at("game_categories").value("breakout", ""), std::string("shooter"));
        for (const std::string g : {"breakout", "invaders"}) {
            const auto& w = log.series.at("task_weight/" + g);
            const auto& sim = log.series.at("task_similarity/" + g);
            QCOMPARE(w.steps, std::vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
            QCOMPARE(log.series.at("task_loss/" + g).size(), size_t(10));
            // Measured at updates 2, 3 (logged as 3, 4) and 6, 7 (7, 8).
            QCOMPARE(sim.steps, std::vector<int64_t>({3, 4, 7, 8}));
            for (int u = 0; u < 4; ++u) QCOMPARE(w.values[size_t(u)], 1.0);
            const double first = ((sim.values[0] > 0) + (sim.values[1] > 0)) / 2.0;
            for (int u = 4; u < 8; ++u) QCOMPARE(w.values[size_t(u)], first);
            const double second = ((sim.values[2] > 0) + (sim.values[3] > 0)) / 2.0;
            for (int u = 8; u < 10; ++u) QCOMPARE(w.values[size_t(u)], second);
        }
        checkRecordedWeights(dir + "/ft", log);
        // Constant weights.
        auto constant = cfg;
        constant.weights = "constant";
        xtra::finetune(constant, dir + "/const", &control);
        const RunLog cl = RunLog::load(dir + "/const/runlog.h5");
        for (double v : cl.series.at("task_weight/breakout").values) QCOMPARE(v, 1.0);
        QVERIFY(cl.series.find("task_similarity/breakout") == cl.series.end() || cl.series.at("task_similarity/breakout").size() == 0);
        // Stopped at update 6, resumed to 10: the weights' state comes back. With a threshold no
        // cosine exceeds, the weights are 0 from the end of the first window on; a resumed run
        // that had lost them would be back at 1.
        auto never = cfg;
        never.taskWeights.threshold = 1.0;
        train::Control stopper;
        const auto first = xtra::finetune(never, dir + "/split", &stopper, [&](const train::Progress& p) {
            if (p.phase == "train" && p.step >= 6) stopper.requestStop();
        });
        QVERIFY(first.stopped);
        QCOMPARE(first.updates, int64_t(6));
        train::Control again;
        const auto rr = xtra::finetune(never, dir + "/split", &again);
        QCOMPARE(rr.updates, int64_t(10));
        const RunLog sl = RunLog::load(dir + "/split/runlog.h5");
        QCOMPARE(sl.series.at("task_weight/breakout").steps, std::vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
        QCOMPARE(sl.series.at("task_weight/invaders").values, std::vector<double>({1, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
        // Its recorded self-play: weight 1 while fewer than 4 updates were done, 0 after, in both
        // sittings (the stopped one saved its unfinished episode as cut).
        std::set<int64_t> before, after;
        for (const auto& file : episodeFiles(dir + "/split/episodes")) {
            replay::EpisodeReader ep(file);
            for (int64_t t = 0; t < ep.length(); ++t) {
                const int64_t u = ep.trainingUpdate(t);
                const float want = u < 4 ? 1.f : 0.f;
                QCOMPARE(ep.taskWeights(t), std::vector<float>({want, want}));
                (u < 6 ? before : after).insert(u);
            }
        }
        QVERIFY(before.count(0) && !after.empty());
        // Bad configurations.
        auto bad = j;
        bad["xtra"]["sources"].push_back({{"dataset", dir + "/demon.h5"}, {"teacher", testing::saveRandomTeacher(dir, "demon", 5)}});
        QVERIFY(contains(errorOf([&] { xtra::finetune(xtra::FinetuneConfig::fromJson(bad, "b.json"), dir + "/bad", &control); }),
                         {"demon.h5", "target game 'demon'", "offline tasks"}));
        bad = j;
        bad["env"] = "demon";
        QVERIFY(contains(errorOf([&] { xtra::FinetuneConfig::fromJson(bad, "b.json"); }), {"b.json", "shared:GAME"}));
        bad = j;
        bad["xtra"]["weights"] = "random";
        QVERIFY(contains(errorOf([&] { xtra::FinetuneConfig::fromJson(bad, "b.json"); }), {"adaptive", "constant"}));
        bad = j;
        bad["record_interval"] = -5;
        QVERIFY(contains(errorOf([&] { xtra::FinetuneConfig::fromJson(bad, "b.json"); }), {"b.json", "record_interval"}));
        bad = j;
        bad["xtra"]["colour"] = 1;
        QVERIFY(contains(errorOf([&] { xtra::FinetuneConfig::fromJson(bad, "b.json"); }), {"unknown key 'colour'"}));
        bad = j;
        bad["init"] = sources[0].teacher;   // a native breakout network
        bad["xtra"]["sources"] = nlohmann::json::array();
        QVERIFY(contains(errorOf([&] { xtra::finetune(xtra::FinetuneConfig::fromJson(bad, "b.json"), dir + "/init", &control); }),
                         {"teacher_breakout.h5"}));
    }
};

QTEST_APPLESS_MAIN(TestXtra)
#include "test_xtra.moc"
