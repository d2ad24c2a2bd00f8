#include "core/models/constellation/train.h"

#include <chrono>
#include <cmath>
#include <random>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/fewshot.h"
#include "core/dist/dist.h"
#include "core/error.h"
#include "core/models/constellation/fewshot.h"
#include "core/models/constellation/model.h"
#include "core/runlog.h"
#include "core/train/json_config.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/run.h"
#include "core/train/state.h"
#include "core/util/json_file.h"

namespace glimpse::constellation {

namespace {

const char* kTrainFamily = "constellation-train";
const std::vector<std::string> kResumeMayChange = {"checkpoint_every", "val_every", "val_episodes", "final_episodes",
                                                   "threads"};

} // namespace

// ---- config -------------------------------------------------------------------------------

ConstellationConfig ConstellationTrainConfig::modelConfig(const std::vector<std::string>& baseClasses,
                                                          int64_t imageSize) const {
    if (!model.is_object()) throw Error("ConstellationNet training config: \"model\" must be an object");
    nlohmann::json m = model;
    const int64_t k = int64_t(baseClasses.size());
    if (m.contains("num_classes") && m["num_classes"] != k)
        throw Error("ConstellationNet training config: model.num_classes is " + m["num_classes"].dump() +
                    " but the data has " + std::to_string(k) + " base classes");
    if (m.contains("class_names") && !m["class_names"].empty() && m["class_names"] != nlohmann::json(baseClasses))
        throw Error("ConstellationNet training config: model.class_names differ from the data's base classes");
    m["num_classes"] = k;
    m["class_names"] = baseClasses;
    if (!m.contains("image_size") && imageSize > 0) m["image_size"] = imageSize;
    return ConstellationConfig::fromJson(m, "ConstellationNet training config (model)");
}

void ConstellationTrainConfig::validate() const {
    auto bad = [](const std::string& what) { throw Error("ConstellationNet training config: " + what); };
    if (!model.is_object()) bad("\"model\" must be an object");
    {
        nlohmann::json m = model;
        if (!m.contains("num_classes")) m["num_classes"] = 64;
        m.erase("class_names");
        ConstellationConfig::fromJson(m, "ConstellationNet training config (model)");
    }
    if (batchSize < 2 || batchSize > 4096) bad("batch_size must be in 2..4096");
    if (steps < 1 || steps > 100'000'000) bad("steps must be in 1..1e8");
    if (warmupSteps < 0 || warmupSteps > steps) bad("warmup_steps must be in 0..steps");
    if (!(lr > 0 && lr < 10)) bad("lr must be in (0, 10)");
    if (!(minLr >= 0 && minLr <= lr)) bad("min_lr must be in [0, lr]");
    if (!(weightDecay >= 0 && weightDecay < 1)) bad("weight_decay must be in [0, 1)");
    if (!(clipMaxNorm >= 0)) bad("clip_max_norm must be >= 0");
    if (!(hflip >= 0 && hflip <= 1)) bad("augment.hflip must be in [0, 1]");
    if (padCrop < 0 || padCrop > 64) bad("augment.pad_crop must be in 0..64");
    if (protoWays < 2 || protoShots < 1 || protoQueries < 1 || protoEpisodes < 1)
        bad("proto_ways must be >= 2 and proto_shots, proto_queries, proto_episodes >= 1");
    if (valEvery < 0 || valEpisodes < 1 || valShots < 1 || finalEpisodes < 0)
        bad("val_every and final_episodes must be >= 0, val_episodes and val_shots >= 1");
    if (checkpointEvery < 1) bad("checkpoint_every must be >= 1");
    if (threads < 0 || threads > 1024) bad("threads must be in 0..1024");
}

nlohmann::json ConstellationTrainConfig::toJson() const {
    return {{"model", model},
            {"seed", seed},
            {"batch_size", batchSize},
            {"steps", steps},
            {"warmup_steps", warmupSteps},
            {"lr", lr},
            {"min_lr", minLr},
            {"weight_decay", weightDecay},
            {"clip_max_norm", clipMaxNorm},
            {"augment", {{"hflip", hflip}, {"pad_crop", padCrop}}},
            {"proto_ways", protoWays},
            {"proto_shots", protoShots},
            {"proto_queries", protoQueries},
            {"proto_episodes", protoEpisodes},
            {"val_every", valEvery},
            {"val_episodes", valEpisodes},
            {"val_shots", valShots},
            {"final_episodes", finalEpisodes},
            {"checkpoint_every", checkpointEvery},
            {"threads", threads}};
}

ConstellationTrainConfig ConstellationTrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    using train::readKey;
    train::checkKeys(j,
                     {"model", "seed", "batch_size", "steps", "warmup_steps", "lr", "min_lr", "weight_decay",
                      "clip_max_norm", "augment", "proto_ways", "proto_shots", "proto_queries", "proto_episodes",
                      "val_every", "val_episodes", "val_shots", "final_episodes", "checkpoint_every", "threads"},
                     source);
    ConstellationTrainConfig c;
    if (j.contains("model")) {
        if (!j["model"].is_object()) throw Error(source + ": \"model\" must be an object");
        c.model = j["model"];
    }
    readKey(j, "seed", c.seed, source);
    readKey(j, "batch_size", c.batchSize, source);
    readKey(j, "steps", c.steps, source);
    readKey(j, "warmup_steps", c.warmupSteps, source);
    readKey(j, "lr", c.lr, source);
    readKey(j, "min_lr", c.minLr, source);
    readKey(j, "weight_decay", c.weightDecay, source);
    readKey(j, "clip_max_norm", c.clipMaxNorm, source);
    if (j.contains("augment")) {
        const std::string w = source + " (augment)";
        train::checkKeys(j["augment"], {"hflip", "pad_crop"}, w);
        readKey(j["augment"], "hflip", c.hflip, w);
        readKey(j["augment"], "pad_crop", c.padCrop, w);
    }
    readKey(j, "proto_ways", c.protoWays, source);
    readKey(j, "proto_shots", c.protoShots, source);
    readKey(j, "proto_queries", c.protoQueries, source);
    readKey(j, "proto_episodes", c.protoEpisodes, source);
    readKey(j, "val_every", c.valEvery, source);
    readKey(j, "val_episodes", c.valEpisodes, source);
    readKey(j, "val_shots", c.valShots, source);
    readKey(j, "final_episodes", c.finalEpisodes, source);
    readKey(j, "checkpoint_every", c.checkpointEvery, source);
    readKey(j, "threads", c.threads, source);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

ConstellationTrainConfig ConstellationTrainConfig::fromFile(const std::string& path) {
    return fromJson(readJsonFile(path, "training config"), path);
}

std::vector<std::string> constellationSeriesNames(int worldSize) {
    std::vector<std::string> names{"loss/train", "loss/cls", "loss/proto", "train/acc", "lr", "grad_norm", "throughput", "val/acc", "val/ci95"};
    for (const auto& n : dist::seriesNames(worldSize)) names.push_back(n);
    return names;
}

// ---- the run ------------------------------------------------------------------------------

namespace {

struct Run {
    const ConstellationTrainConfig& cfg;
    const std::string& dataSpec;
    data::FewShotSplits splits;
    ConstellationConfig mcfg;
    train::RunFiles files;
    std::shared_ptr<ConstellationModel> model;
    std::unique_ptr<data::EpisodeSampler> baseEpisodes, valEpisodes, novelEpisodes;
    nlohmann::json cfgJson;
    int64_t step = 0;
    double stepTime = 0;
    int64_t stepImages = 0;
    double imagesPerSecond() const { return stepTime > 0 ? double(stepImages) / stepTime : 0; }
    dist::Communicator* comm = nullptr;   // a distributed run (else null)
    std::unique_ptr<dist::GradientReducer> reducer;
    int rank = 0, world = 1;
    // This rank's rows of each step's batch, and its prototypical episodes of each step.
    int64_t rowBegin() const { return cfg.batchSize / world * rank; }
    int64_t rowEnd() const { return cfg.batchSize / world * (rank + 1); }
    bool splitEpisodes() const { return cfg.protoEpisodes % world == 0; }
    int64_t episodeBegin() const { return splitEpisodes() ? cfg.protoEpisodes / world * rank : 0; }
    int64_t episodeEnd() const { return splitEpisodes() ? cfg.protoEpisodes / world * (rank + 1) : cfg.protoEpisodes; }
};

// One training image: resized to the input size, optional flip and pad-and-crop, normalized.
torch::Tensor trainInput(const Run& run, const cv::Mat& image, std::mt19937_64& rng) {
    const cv::Mat rgb = data::flipPadCrop(data::fewShotInput(image, int(run.mcfg.imageSize)), run.cfg.hflip,
                                          int(run.cfg.padCrop), rng);
    return run.model->preprocess(rgb).tensor;
}

torch::Tensor inputs(const Run& run, const std::vector<int64_t>& indices, uint64_t salt) {
    std::vector<torch::Tensor> xs;
    for (size_t i = 0; i < indices.size(); ++i) {
        std::mt19937_64 rng(train::mixSeed(run.cfg.seed, uint64_t(run.step), salt + i));
        xs.push_back(trainInput(run, run.splits.base->get(indices[i]).image, rng));
    }
    return torch::stack(xs);
}

// The prototypical loss of branch 2 on `proto_episodes` base-class episodes (a distributed
// run: this rank's share of them when they divide by the world size, else all of them on every
// rank), as the mean over this rank's episodes: the ranks' mean is the whole step's loss.
torch::Tensor protoLoss(Run& run) {
    const auto& c = run.cfg;
    torch::Tensor total;
    for (int64_t e = run.episodeBegin(); e < run.episodeEnd(); ++e) {
        auto ep = run.baseEpisodes->sample({c.protoWays, c.protoShots, c.protoQueries},
                                           train::mixSeed(c.seed, uint64_t(run.step), 3), e);
        auto support = inputs(run, ep.support, 10000 + uint64_t(e) * 1000);
        auto query = inputs(run, ep.query, 20000 + uint64_t(e) * 1000);
        auto out = run.model->forward(torch::cat({support, query}), {false, 2});
        const int64_t ns = support.size(0);
        auto f = out.pooled[0];
        auto logits = run.model->temp * cosinePrototypeLogits(f.narrow(0, 0, ns), f.narrow(0, ns, f.size(0) - ns),
                                                               c.protoWays, c.protoShots);
        auto target = torch::arange(c.protoWays, torch::kLong).repeat_interleave(c.protoQueries).to(logits.device());
        auto l = torch::nn::functional::cross_entropy(logits, target);
        total = total.defined() ? total + l : l;
    }
    return total / double(run.episodeEnd() - run.episodeBegin());
}

std::map<std::string, double> validate(Run& run, train::StepReporter& rep) {
    rep.notify("validating");
    auto r = evaluateFewShot(*run.model, *run.valEpisodes, {5, run.cfg.valShots, 15}, run.cfg.valEpisodes,
                             train::mixSeed(run.cfg.seed, 77, 77));
    run.model->train(true);
    return {{"val/acc", r.mean}, {"val/ci95", r.ci95}};
}

std::map<std::string, double> trainStep(Run& run, train::AdamW& opt, const std::vector<train::AdamW::Param>& params,
                                        train::StepReporter& rep) {
    const auto& c = run.cfg;
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = train::warmupCosine(c.lr, c.minLr, c.warmupSteps, c.steps, run.step);
    opt.setLr(lr);
    torch::manual_seed(train::mixSeed(c.seed, uint64_t(run.step), 1));
    std::vector<int64_t> idx;
    std::vector<int64_t> labels;
    const int64_t n = run.splits.base->size();
    for (int64_t b = run.rowBegin(); b < run.rowEnd(); ++b) {
        idx.push_back(train::shuffledIndex(c.seed, n, run.step * c.batchSize + b));
        labels.push_back(run.splits.base->labelOf(idx.back()));
    }
    auto x = inputs(run, idx, 100 + uint64_t(run.rowBegin()));   // augmentation draws by global row
    auto y = torch::tensor(labels, torch::kLong);
    auto out = run.model->forward(x, {false, run.mcfg.multiBranch ? 1 : -1});
    auto cls = torch::nn::functional::cross_entropy(out.logits, y.to(out.logits.device()));
    auto loss = cls;
    double protoV = 0;
    if (run.mcfg.multiBranch) {
        auto p = protoLoss(run);
        protoV = p.item<double>();
        loss = loss + p;
    }
    double lossV = loss.item<double>(), clsV = cls.item<double>();
    train::checkLossFinite(lossV, run.step, "ConstellationNet training");
    opt.zeroGrad();
    if (run.reducer) run.reducer->beginStep();
    loss.backward();
    if (run.reducer) run.reducer->finishStep();   // gradients averaged over the ranks
    const double gn = train::clipGradNorm(params, c.clipMaxNorm);
    opt.step();
    double acc = out.logits.argmax(1).cpu().eq(y).to(torch::kDouble).mean().item<double>();
    ++run.step;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.stepTime += dt;
    run.stepImages += run.rowEnd() - run.rowBegin();
    std::map<std::string, double> m = dist::stepSeries(run.comm, double(run.rowEnd() - run.rowBegin()) / std::max(dt, 1e-9));
    if (run.comm) {
        // Batch-norm running statistics follow rank 0's (each rank normalizes with its own rows'
        // statistics, as DistributedDataParallel does); the logged values are the whole step's.
        dist::broadcastBuffers(run.comm, *run.model);
        std::vector<torch::Tensor> t{torch::tensor({lossV, clsV, protoV, acc}, torch::kFloat64)};
        run.comm->allReduce(t, true);
        lossV = t[0][0].item<double>();
        clsV = t[0][1].item<double>();
        protoV = t[0][2].item<double>();
        acc = t[0][3].item<double>();
    }
    m.insert({{"loss/train", lossV}, {"loss/cls", clsV}, {"train/acc", acc}, {"lr", lr}, {"grad_norm", gn},
              {"throughput", c.batchSize / std::max(dt, 1e-9)}});
    if (run.mcfg.multiBranch) m["loss/proto"] = protoV;
    if (c.valEvery > 0 && run.step % c.valEvery == 0 && run.step < c.steps && run.rank == 0)
        for (const auto& [k, v] : validate(run, rep)) m[k] = v;
    return m;
}

ConstellationTrainResult finishRun(Run& run, RunLogWriter& log, train::StepReporter& rep) {
    ConstellationTrainResult result;
    for (const auto& [k, v] : validate(run, rep)) log.append(k, run.step, v);
    if (run.cfg.finalEpisodes > 0) {
        for (int64_t shots : {1, 5}) {
            rep.notify("testing " + std::to_string(shots) + "-shot");
            auto r = evaluateFewShot(*run.model, *run.novelEpisodes, {5, shots, 15}, run.cfg.finalEpisodes,
                                     train::mixSeed(run.cfg.seed, 99, uint64_t(shots)));
            const std::string k = "final/novel_" + std::to_string(shots) + "shot_";
            log.setEval(k + "acc", torch::tensor(r.mean, torch::kDouble));
            log.setEval(k + "ci95", torch::tensor(r.ci95, torch::kDouble));
            (shots == 1 ? result.novel1 : result.novel5) = r.mean;
            (shots == 1 ? result.novel1Ci : result.novel5Ci) = r.ci95;
        }
        log.setEval("final/episodes", torch::tensor(run.cfg.finalEpisodes, torch::kLong));
    }
    rep.report(run.step, "done", {});
    log.setEval("final/train_images_per_second", torch::tensor(run.imagesPerSecond(), torch::kDouble));
    run.model->train(false);
    saveConstellation(*run.model, run.files.model);
    log.finish();
    result.finished = true;
    result.steps = run.step;
    result.parameters = run.model->numParameters();
    result.imagesPerSecond = run.imagesPerSecond();
    result.seconds = rep.elapsed();
    return result;
}

RunLogWriter openLog(const Run& run, bool resume) {
    nlohmann::json j = run.cfgJson;
    j["trainer"] = "constellation";
    j["data"] = run.dataSpec;
    j["data_description"] = run.splits.describe();
    j["model_config"] = run.mcfg.toJson();
    j["model_description"] = run.mcfg.describe();
    j["parameters"] = run.model->numParameters();
    j["series"] = constellationSeriesNames(run.world);
    j["total_steps"] = run.cfg.steps;
    j["world_size"] = run.world;
    if (run.rank != 0) return RunLogWriter::memoryOnly(j, constellationSeriesNames(run.world));
    return train::openRunLog(run.files.runLog, j, constellationSeriesNames(run.world), resume ? run.step : -1);
}

// Resumes the model from the run folder's checkpoint; a clear error for another cluster count.
train::TrainState resumeState(Run& run) {
    auto st = train::loadTrainState(run.files.checkpoint, kTrainFamily);
    if (st.meta.contains("config") && st.meta["config"].contains("model")) {
        const auto& old = st.meta["config"]["model"];
        const int64_t oldK = old.value("clusters", int64_t(64));
        if (oldK != run.mcfg.clusters)
            throw Error(run.files.checkpoint + ": has " + std::to_string(oldK) + " clusters per module, the config asks for " +
                        std::to_string(run.mcfg.clusters));
    }
    st = train::loadResumeState(run.files.checkpoint, kTrainFamily, run.cfgJson, kResumeMayChange, run.dataSpec);
    train::loadModuleTensors(*run.model, officialTensorNames(run.mcfg, st.model), run.files.checkpoint);
    run.step = st.meta.value("step", int64_t(0));
    train::noteResumed(run.files.checkpoint, run.step);
    if (run.step < 0 || run.step > run.cfg.steps)
        throw Error(run.files.checkpoint + ": bad step " + std::to_string(run.step));
    return st;
}

} // namespace

ConstellationTrainResult trainConstellation(const ConstellationTrainConfig& cfg, const std::string& dataSpec,
                                            const std::string& outDir, bool resume, train::Control& control,
                                            const train::ProgressFn& progress, dist::Communicator* comm) {
    cfg.validate();
    const int world = comm ? comm->worldSize() : 1;
    train::checkBatchDividesWorld(cfg.batchSize, world, "images");
    const int64_t size = cfg.model.value("image_size", int64_t(32));
    Run run{cfg, dataSpec, data::openFewShotDataset(dataSpec, int(size))};
    run.mcfg = cfg.modelConfig(run.splits.base->classNames(), size);
    run.baseEpisodes = std::make_unique<data::EpisodeSampler>(run.splits.base, "base");
    run.valEpisodes = std::make_unique<data::EpisodeSampler>(run.splits.val, "val");
    run.novelEpisodes = std::make_unique<data::EpisodeSampler>(run.splits.novel, "novel");
    if (run.mcfg.multiBranch) run.baseEpisodes->sample({cfg.protoWays, cfg.protoShots, cfg.protoQueries}, 0, 0);
    run.valEpisodes->sample({5, cfg.valShots, 15}, 0, 0);   // too few classes / samples: fail now
    run.files = train::runFiles(outDir);
    resume = train::resumeFrom(run.files.checkpoint, resume);   // none yet: start from step 0
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);   // the CLI also sets BLAS threads (setComputeThreads)
    if (comm && world > 1) {
        run.comm = comm;
        run.rank = comm->rank();
        run.world = world;
    }
    run.model = std::make_shared<ConstellationModel>(run.mcfg, cfg.seed);
    run.model->train(true);
    run.cfgJson = cfg.toJson();
    train::TrainState resumed;
    if (resume) resumed = resumeState(run);
    std::vector<train::AdamW::Param> params;
    for (auto& p : run.model->named_parameters())
        params.push_back({p.key(), p.value(), 1.0, p.value().dim() <= 1 ? 0.0 : 1.0});
    train::AdamW::Options o;
    o.lr = cfg.lr;
    o.weightDecay = cfg.weightDecay;
    train::AdamW opt(params, o);
    if (resume && run.step > 0) opt.loadState(resumed.optimizer, run.files.checkpoint);
    dist::broadcastModule(run.comm, *run.model);   // every rank starts from rank 0's weights
    if (run.comm) run.reducer = std::make_unique<dist::GradientReducer>(run.comm, run.model->parameters());
    RunLogWriter log = openLog(run, resume);
    train::StepReporter rep(log, progress, cfg.steps, run.step);
    auto save = [&] {
        if (run.rank != 0) return;   // rank 0 writes the checkpoints
        // Rows up to this step reach the log before the checkpoint does: a kill right after the
        // checkpoint must not leave a resumed log with a gap (docs/crash-safety.md).
        log.flush();
        train::saveTrainState(run.files.checkpoint, kTrainFamily,
                              train::stepState(run.cfgJson, dataSpec, run.step, *run.model, opt));
    };
    try {
        while (run.step < cfg.steps) {
            if (dist::anyRankStops(run.comm, !control.checkpoint())) {
                save();
                train::endStoppedRun(log, rep, run.step, run.files.checkpoint);
                ConstellationTrainResult r;
                r.rank = run.rank;
                r.worldSize = run.world;
                r.steps = run.step;
                r.parameters = run.model->numParameters();
                r.imagesPerSecond = run.imagesPerSecond();
                return r;
            }
            const auto metrics = trainStep(run, opt, params, rep);
            rep.report(run.step, "train", metrics);
            if (run.step % cfg.checkpointEvery == 0 || run.step == cfg.steps) {
                save();
                log.flush();
            }
        }
        if (run.rank != 0) {   // rank 0 evaluates and writes model.h5
            log.finish();
            ConstellationTrainResult r;
            r.finished = true;
            r.steps = run.step;
            r.parameters = run.model->numParameters();
            r.imagesPerSecond = run.imagesPerSecond();
            r.rank = run.rank;
            r.worldSize = run.world;
            return r;
        }
        ConstellationTrainResult r = finishRun(run, log, rep);
        r.worldSize = run.world;
        return r;
    } catch (const std::exception& e) {
        if (!log.closed()) log.fail(e.what());
        throw;
    }
}

} // namespace glimpse::constellation
