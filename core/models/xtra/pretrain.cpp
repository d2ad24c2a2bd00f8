#include "core/models/xtra/pretrain.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "core/dist/dist.h"
#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/train.h"
#include "core/runlog.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/run.h"
#include "core/train/state.h"

namespace glimpse::xtra {

namespace fs = std::filesystem;
using torch::Tensor;

nlohmann::json PretrainConfig::toJson() const {
    return {{"sources", sourcesToJson(sources)},        {"steps", steps},
            {"seed", seed},          {"batch_size", batchSize},
            {"unroll", unroll},      {"td_steps", tdSteps},
            {"discount", discount},  {"clip_rewards", clipRewards},
            {"lr", lr},              {"min_lr", minLr},
            {"weight_decay", weightDecay}, {"grad_clip", gradClip},
            {"warmup_steps", warmupSteps}, {"checkpoint_every", checkpointEvery},
            {"log_every", logEvery}, {"threads", threads},
            {"network", network}};
}

PretrainConfig PretrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    const std::string where = source + ": xtra-pretrain config";
    if (!j.is_object()) throw Error(where + ": expected a JSON object");
    PretrainConfig c;
    const nlohmann::json known = c.toJson();
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.contains(it.key())) throw Error(where + ": unknown key '" + it.key() + "'");
    auto get = [&](const char* key, auto& field) {
        if (!j.contains(key)) return;
        const auto& v = j.at(key);
        using T = std::decay_t<decltype(field)>;
        bool ok;
        if constexpr (std::is_same_v<T, bool>) ok = v.is_boolean();
        else if constexpr (std::is_floating_point_v<T>) ok = v.is_number();
        else if constexpr (std::is_same_v<T, nlohmann::json>) ok = v.is_object();
        else ok = v.is_number_integer();
        if (!ok) throw Error(where + ": '" + key + "' has the wrong type");
        field = v.get<T>();
    };
    if (j.contains("sources")) c.sources = sourcesFromJson(j.at("sources"), where);
    get("steps", c.steps); get("seed", c.seed); get("batch_size", c.batchSize); get("unroll", c.unroll);
    get("td_steps", c.tdSteps); get("discount", c.discount); get("clip_rewards", c.clipRewards); get("lr", c.lr);
    get("min_lr", c.minLr); get("weight_decay", c.weightDecay); get("grad_clip", c.gradClip);
    get("warmup_steps", c.warmupSteps); get("checkpoint_every", c.checkpointEvery); get("log_every", c.logEvery);
    get("threads", c.threads); get("network", c.network);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

void PretrainConfig::validate() const {
    auto need = [](bool ok, const std::string& what) {
        if (!ok) throw Error("xtra-pretrain config: " + what);
    };
    need(!sources.empty(), "'sources' is empty: list at least one {\"dataset\", \"teacher\"}");
    need(sources.size() <= 64, "at most 64 sources");
    need(steps >= 1 && steps <= 100'000'000, "steps must be in 1..100000000");
    need(batchSize >= 1 && batchSize <= 65536, "batch_size must be in 1..65536");
    need(batchSize % int(sources.size()) == 0,
         "batch_size " + std::to_string(batchSize) + " does not divide by the " + std::to_string(sources.size()) +
             " sources (each game gets batch_size / sources positions)");
    need(unroll >= 1 && unroll <= 20 && tdSteps >= 1 && tdSteps <= 100, "unroll / td_steps out of range");
    need(discount > 0 && discount <= 1, "discount must be in (0, 1]");
    need(lr > 0 && lr < 10 && minLr >= 0 && minLr <= lr, "need 0 < lr < 10 and 0 <= min_lr <= lr");
    need(weightDecay >= 0 && gradClip > 0, "weight_decay must be >= 0 and grad_clip > 0");
    need(warmupSteps >= 0 && checkpointEvery >= 1 && logEvery >= 1, "warmup_steps >= 0, checkpoint_every and log_every >= 1");
    need(threads >= 0 && threads <= 256, "threads must be in 0..256");
}

nlohmann::json studentNetworkConfig(const nlohmann::json& overrides) {
    const auto env = rl::makeEnv(std::string(rl::kSharedPrefix) + "invaders");  // any game: the shared space is one
    return efficientzero::cpuNetwork(*env, overrides).toJson();
}

namespace {

const std::vector<std::string> kResumeMayChange = {"steps", "checkpoint_every", "log_every", "threads"};

std::vector<std::string> seriesNames(const std::vector<std::string>& games, int world) {
    std::vector<std::string> s = {"loss", "loss_value", "loss_value_prefix", "loss_policy", "loss_consistency",
                                  "lr", "grad_norm", "throughput"};
    for (const auto& g : games) {
        s.push_back("task_loss/" + g);
        s.push_back("task_policy_loss/" + g);
    }
    for (const auto& d : dist::seriesNames(world)) s.push_back(d);
    return s;
}

std::vector<train::AdamW::Param> studentParams(torch::nn::Module& m) {
    std::vector<train::AdamW::Param> params;
    for (auto& p : m.named_parameters()) params.push_back({p.key(), p.value(), 1.0, p.value().dim() <= 1 ? 0.0 : 1.0});
    return params;
}

// The tasks of every source (the teachers run here); errors for two datasets of one game.
std::vector<std::unique_ptr<OfflineTask>> loadTasks(const PretrainConfig& cfg, int stack, train::Control& control,
                                                    const train::ProgressFn& progress) {
    TargetOptions to;
    to.unroll = cfg.unroll;
    to.tdSteps = cfg.tdSteps;
    to.discount = cfg.discount;
    to.clipRewards = cfg.clipRewards;
    to.stack = stack;
    std::vector<std::unique_ptr<OfflineTask>> tasks;
    std::set<std::string> seen;
    for (const auto& s : cfg.sources) {
        if (control.stopRequested()) break;
        tasks.push_back(std::make_unique<OfflineTask>(s, to, progress));
        if (!seen.insert(tasks.back()->game()).second)
            throw Error("xtra-pretrain: two sources are datasets of '" + tasks.back()->game() + "' (" + s.dataset +
                        "); one per game");
    }
    return tasks;
}

nlohmann::json pretrainLogConfig(const nlohmann::json& cfgJson, const std::vector<std::unique_ptr<OfflineTask>>& tasks,
                                 const efficientzero::Config& netCfg, int64_t steps, int world) {
    nlohmann::json c = cfgJson;
    c["trainer"] = "xtra-pretrain";
    c["family"] = "efficientzero";
    nlohmann::json games = nlohmann::json::array(), categories = nlohmann::json::object(), datasets = nlohmann::json::array();
    for (const auto& t : tasks) {
        games.push_back(t->game());
        categories[t->game()] = gameCategory(t->game());
        datasets.push_back(t->game() + ": " + std::to_string(t->transitions()) + " transitions");
    }
    c["games"] = games;
    c["game_categories"] = categories;
    c["datasets"] = datasets;
    c["network_config"] = netCfg.toJson();
    c["total_steps"] = steps;
    c["world_size"] = world;
    return c;
}

// Loads the resumed state into the student; returns its step.
int64_t resumeStudent(const std::string& checkpoint, const nlohmann::json& cfgJson, const std::string& data, int64_t steps,
                      efficientzero::Network& net, train::TrainState& resumed) {
    resumed = train::loadResumeState(checkpoint, "xtra-pretrain-train", cfgJson, kResumeMayChange, data);
    train::loadModuleTensors(net.module(), resumed.model, checkpoint);
    const int64_t step = resumed.meta.value("step", int64_t(0));
    if (step < 0 || step > steps) throw Error(checkpoint + ": bad step " + std::to_string(step));
    train::noteResumed(checkpoint, step);
    return step;
}

// The step's loss terms, per game and their means, as the whole batch's (averaged over the ranks),
// with each rank's throughput in a distributed run. Per-game series only on `logRow`.
std::map<std::string, double> stepMetrics(const std::vector<efficientzero::LossTerms>& terms,
                                          const std::vector<std::string>& games, dist::Communicator* comm, bool logRow,
                                          double samplesPerSecond) {
    std::vector<double> vals;
    for (const auto& t : terms)
        for (double v : {t.total.item<double>(), t.policy, t.value, t.valuePrefix, t.consistency}) vals.push_back(v);
    std::map<std::string, double> mt;
    if (comm) {
        std::vector<Tensor> tv{torch::tensor(vals, torch::kFloat64)};
        comm->allReduce(tv, true);
        const Tensor r = tv[0].contiguous();
        vals.assign(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
        mt = dist::stepSeries(comm, samplesPerSecond);
    }
    const int m = int(terms.size());
    double sum[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < m; ++i) {
        for (int k = 0; k < 5; ++k) sum[k] += vals[size_t(i * 5 + k)] / m;
        if (logRow) {
            mt["task_loss/" + games[size_t(i)]] = vals[size_t(i * 5)];
            mt["task_policy_loss/" + games[size_t(i)]] = vals[size_t(i * 5 + 1)];
        }
    }
    mt["loss"] = sum[0];
    if (logRow) {
        mt["loss_policy"] = sum[1];
        mt["loss_value"] = sum[2];
        mt["loss_value_prefix"] = sum[3];
        mt["loss_consistency"] = sum[4];
    }
    return mt;
}

} // namespace

PretrainResult pretrain(const PretrainConfig& cfg, const std::string& runDir, bool resume, train::Control& control,
                        const train::ProgressFn& progress, dist::Communicator* comm) {
    cfg.validate();
    if (comm && comm->worldSize() <= 1) comm = nullptr;
    const int rank = comm ? comm->rank() : 0, world = comm ? comm->worldSize() : 1;
    const int m = int(cfg.sources.size());
    const int perTask = cfg.batchSize / m;
    if (perTask % world != 0)
        throw Error("xtra-pretrain: each game's " + std::to_string(perTask) + " positions per update do not divide by the world size " +
                    std::to_string(world));
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);
    const auto t0 = std::chrono::steady_clock::now();

    // The student, then the tasks (the teachers' targets are computed here, once).
    const efficientzero::Config netCfg = efficientzero::Config::fromJson(studentNetworkConfig(cfg.network));
    std::vector<std::unique_ptr<OfflineTask>> tasks = loadTasks(cfg, netCfg.stack, control, progress);
    std::vector<std::string> games;
    for (const auto& t : tasks) games.push_back(t->game());
    PretrainResult result;
    result.games = games;
    result.rank = rank;
    result.worldSize = world;
    if (control.stopRequested()) return result;   // stopped while the teachers ran: nothing written

    train::RunFiles files = train::runFiles(runDir);
    resume = train::resumeFrom(files.checkpoint, resume);
    nlohmann::json cfgJson = cfg.toJson();
    const std::string data = cfgJson.at("sources").dump();
    torch::manual_seed(cfg.seed);
    efficientzero::Network net(netCfg);
    net.train(true);
    train::TrainState resumed;
    int64_t step = resume ? resumeStudent(files.checkpoint, cfgJson, data, cfg.steps, net, resumed) : 0;
    const auto params = studentParams(net.module());
    train::AdamW::Options o;
    o.lr = cfg.lr;
    o.weightDecay = cfg.weightDecay;
    train::AdamW opt(params, o);
    if (resume && step > 0) opt.loadState(resumed.optimizer, files.checkpoint);
    dist::broadcastModule(comm, net.module());
    std::unique_ptr<dist::GradientReducer> reducer;
    if (comm) reducer = std::make_unique<dist::GradientReducer>(comm, net.parameters());

    const nlohmann::json logConfig = pretrainLogConfig(cfgJson, tasks, netCfg, cfg.steps, world);
    const auto series = seriesNames(games, world);
    RunLogWriter log = rank == 0 ? train::openRunLog(files.runLog, logConfig, series, resume ? step : -1)
                                 : RunLogWriter::memoryOnly(logConfig, series);
    train::StepReporter rep(log, progress, cfg.steps, step);
    auto save = [&] {
        if (rank != 0) return;
        log.flush();
        train::TrainState st;
        st.meta = {{"config", cfgJson}, {"data", data}, {"step", step}};
        st.model = train::moduleTensors(net.module());
        st.optimizer = opt.state();
        train::saveTrainState(files.checkpoint, "xtra-pretrain-train", st);
    };
    const int rowBegin = perTask / world * rank, rowEnd = perTask / world * (rank + 1);
    try {
        while (step < cfg.steps) {
            if (dist::anyRankStops(comm, !control.checkpoint())) {
                save();
                train::endStoppedRun(log, rep, step, files.checkpoint);
                result.steps = step;
                result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                return result;
            }
            const auto s0 = std::chrono::steady_clock::now();
            const double lr = train::warmupCosine(cfg.lr, cfg.minLr, cfg.warmupSteps, cfg.steps, step);
            opt.setLr(lr);
            std::vector<efficientzero::LossTerms> terms;
            Tensor total = torch::zeros({});
            for (int i = 0; i < m; ++i) {
                const auto batch = tasks[size_t(i)]->sample(perTask, train::mixSeed(cfg.seed, uint64_t(step), uint64_t(i)), rowBegin, rowEnd);
                terms.push_back(efficientzero::computeLoss(net, batch));
                total = total + terms.back().total / double(m);
            }
            opt.zeroGrad();
            if (reducer) reducer->beginStep();
            (total / double(cfg.unroll)).backward();
            if (reducer) reducer->finishStep();
            const double gn = train::clipGradNorm(params, cfg.gradClip);
            opt.step();
            if (comm) dist::broadcastBuffers(comm, net.module());  // BatchNorm statistics as rank 0's
            ++step;
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
            const bool logRow = step % cfg.logEvery == 0 || step == cfg.steps;
            std::map<std::string, double> mt = stepMetrics(terms, games, comm, logRow, double(rowEnd - rowBegin) * m / std::max(dt, 1e-9));
            train::checkLossFinite(mt.at("loss"), step, "xtra-pretrain");
            if (logRow) {
                mt["lr"] = lr;
                mt["grad_norm"] = gn;
                mt["throughput"] = double(cfg.batchSize) / std::max(dt, 1e-9);
                rep.report(step, "distill", mt);
            } else {
                rep.setLatest("loss", mt.at("loss"));
                rep.advance(step, "distill");
            }
            if (step % cfg.checkpointEvery == 0 || step == cfg.steps) save();
        }
        result.steps = step;
        result.finished = true;
        if (rank == 0) {
            net.train(false);
            saveCheckpoint(files.model, checkpointFromModule(net.module(), "efficientzero", netCfg.toJson().dump()));
            log.setEval("final/steps", torch::tensor(step, torch::kInt64));
        }
        rep.notify("done");
        log.finish();
        result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return result;
    } catch (const std::exception& e) {
        if (!log.closed()) log.fail(e.what());
        throw;
    }
}

} // namespace glimpse::xtra
