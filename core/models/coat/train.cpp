#include "core/models/coat/train.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/classification.h"
#include "core/dist/dist.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/runlog.h"
#include "core/train/json_config.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/run.h"
#include "core/train/state.h"
#include "core/util/json_file.h"

namespace glimpse::coat {

namespace fs = std::filesystem;

// ---- config -------------------------------------------------------------------------------

nlohmann::json CoatTrainConfig::defaultModelJson() {
    return {{"variant", "coat_lite_tiny"}, {"image_size", 32}, {"resize", 32}};
}

CoatConfig CoatTrainConfig::modelConfig(const std::vector<std::string>& classNames) const {
    if (!model.is_object()) throw Error("CoaT training config: \"model\" must be an object");
    nlohmann::json m = train::overlay(defaultModelJson(), model);
    const int64_t k = int64_t(classNames.size());
    if (m.contains("num_classes") && m["num_classes"] != k)
        throw Error("CoaT training config: model.num_classes is " + m["num_classes"].dump() + " but the data has " +
                    std::to_string(k) + " classes");
    if (m.contains("class_names") && m["class_names"] != nlohmann::json(classNames))
        throw Error("CoaT training config: model.class_names differ from the data's classes");
    m["num_classes"] = k;
    m["class_names"] = classNames;
    CoatConfig c = CoatConfig::fromJson(m, "CoaT training config (model)");
    if (c.inChans != 3) throw Error("CoaT training config: in_chans must be 3 (grayscale images are replicated)");
    return c;
}

void CoatTrainConfig::validate() const {
    auto bad = [](const std::string& what) { throw Error("CoaT training config: " + what); };
    {
        // The model JSON alone; its class count is checked against the data in trainCoat.
        if (!model.is_object()) bad("\"model\" must be an object");
        nlohmann::json m = train::overlay(defaultModelJson(), model);
        if (!m.contains("class_names")) m["num_classes"] = m.value("num_classes", nlohmann::json(2));
        const CoatConfig c = CoatConfig::fromJson(m, "CoaT training config (model)");
        if (c.inChans != 3) bad("model.in_chans must be 3 (grayscale images are replicated to RGB)");
    }
    if (batchSize < 1 || batchSize > 4096) bad("batch_size must be in 1..4096");
    if (steps < 1 || steps > 100'000'000) bad("steps must be in 1..1e8");
    if (warmupSteps < 0 || warmupSteps > steps) bad("warmup_steps must be in 0..steps");
    if (!(lr > 0 && lr < 1)) bad("lr must be in (0, 1)");
    if (!(minLr >= 0 && minLr <= lr)) bad("min_lr must be in [0, lr]");
    if (!(weightDecay >= 0 && weightDecay < 1)) bad("weight_decay must be in [0, 1)");
    if (!(labelSmoothing >= 0 && labelSmoothing < 1)) bad("label_smoothing must be in [0, 1)");
    if (!(mixup >= 0 && mixup <= 100) || !(cutmix >= 0 && cutmix <= 100)) bad("mixup / cutmix must be in [0, 100]");
    if (!(mixProb >= 0 && mixProb <= 1) || !(switchProb >= 0 && switchProb <= 1))
        bad("mix_prob / switch_prob must be in [0, 1]");
    if (!(clipMaxNorm >= 0)) bad("clip_max_norm must be >= 0");
    if (!(hflip >= 0 && hflip <= 1)) bad("augment.hflip must be in [0, 1]");
    if (padCrop < 0 || padCrop > 64) bad("augment.pad_crop must be in 0..64");
    if (trainSubset < 0 || valSubset < 0) bad("train_subset / val_subset must be >= 0");
    if (evalEvery < 0) bad("eval_every must be >= 0 (0: only at the end)");
    if (firstEval < 0) bad("first_eval must be >= 0 (0: none)");
    if (checkpointEvery < 1) bad("checkpoint_every must be >= 1");
    if (evalBatch < 1 || evalBatch > 4096) bad("eval_batch must be in 1..4096");
    if (holdoutEvery < 2 || holdoutEvery > 1000) bad("holdout_every must be in 2..1000");
    if (threads < 0 || threads > 1024) bad("threads must be in 0..1024");
}

nlohmann::json CoatTrainConfig::toJson() const {
    nlohmann::json j;
    j["model"] = model;
    j["seed"] = seed;
    j["batch_size"] = batchSize;
    j["steps"] = steps;
    j["warmup_steps"] = warmupSteps;
    j["lr"] = lr;
    j["min_lr"] = minLr;
    j["weight_decay"] = weightDecay;
    j["label_smoothing"] = labelSmoothing;
    j["mixup"] = mixup;
    j["cutmix"] = cutmix;
    j["mix_prob"] = mixProb;
    j["switch_prob"] = switchProb;
    j["clip_max_norm"] = clipMaxNorm;
    j["augment"] = {{"hflip", hflip}, {"pad_crop", padCrop}};
    j["train_subset"] = trainSubset;
    j["val_subset"] = valSubset;
    j["eval_every"] = evalEvery;
    j["first_eval"] = firstEval;
    j["checkpoint_every"] = checkpointEvery;
    j["eval_batch"] = evalBatch;
    j["holdout_every"] = holdoutEvery;
    j["threads"] = threads;
    return j;
}

CoatTrainConfig CoatTrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    using train::checkKeys;
    using train::readKey;
    checkKeys(j, {"model", "seed", "batch_size", "steps", "warmup_steps", "lr", "min_lr", "weight_decay",
                  "label_smoothing", "mixup", "cutmix", "mix_prob", "switch_prob", "clip_max_norm", "augment",
                  "train_subset", "val_subset", "eval_every", "first_eval", "checkpoint_every", "eval_batch",
                  "holdout_every", "threads"},
              source);
    CoatTrainConfig c;
    if (j.contains("model")) {
        if (!j["model"].is_object()) throw Error(source + ": \"model\" must be an object");
        c.model = train::overlay(defaultModelJson(), j["model"]);
    }
    readKey(j, "seed", c.seed, source);
    readKey(j, "batch_size", c.batchSize, source);
    readKey(j, "steps", c.steps, source);
    readKey(j, "warmup_steps", c.warmupSteps, source);
    readKey(j, "lr", c.lr, source);
    readKey(j, "min_lr", c.minLr, source);
    readKey(j, "weight_decay", c.weightDecay, source);
    readKey(j, "label_smoothing", c.labelSmoothing, source);
    readKey(j, "mixup", c.mixup, source);
    readKey(j, "cutmix", c.cutmix, source);
    readKey(j, "mix_prob", c.mixProb, source);
    readKey(j, "switch_prob", c.switchProb, source);
    readKey(j, "clip_max_norm", c.clipMaxNorm, source);
    if (j.contains("augment")) {
        const std::string w = source + " (augment)";
        checkKeys(j["augment"], {"hflip", "pad_crop"}, w);
        readKey(j["augment"], "hflip", c.hflip, w);
        readKey(j["augment"], "pad_crop", c.padCrop, w);
    }
    readKey(j, "train_subset", c.trainSubset, source);
    readKey(j, "val_subset", c.valSubset, source);
    readKey(j, "eval_every", c.evalEvery, source);
    readKey(j, "first_eval", c.firstEval, source);
    readKey(j, "checkpoint_every", c.checkpointEvery, source);
    readKey(j, "eval_batch", c.evalBatch, source);
    readKey(j, "holdout_every", c.holdoutEvery, source);
    readKey(j, "threads", c.threads, source);
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

CoatTrainConfig CoatTrainConfig::fromFile(const std::string& path) {
    return fromJson(readJsonFile(path, "training config"), path);
}

std::vector<std::string> coatSeriesNames(int worldSize) {
    std::vector<std::string> names{"loss/train", "train/acc", "lr", "grad_norm", "throughput", "epoch", "val/acc", "val/loss"};
    for (const auto& n : dist::seriesNames(worldSize)) names.push_back(n);
    return names;
}

std::vector<PeVariant> peAblationVariants() {
    return {{"neither", false, false}, {"crpe", false, true}, {"cpe", true, false}, {"both", true, true}};
}

CoatTrainConfig withVariant(const CoatTrainConfig& cfg, const PeVariant& v) {
    CoatTrainConfig c = cfg;
    c.model["use_cpe"] = v.useCpe;
    c.model["use_crpe"] = v.useCrpe;
    return c;
}

// ---- evaluation ---------------------------------------------------------------------------

namespace {

constexpr uint64_t kValOrderSeed = 0x5eedf00dULL;   // fixed: every run validates on the same subset

torch::Tensor inputTensor(const CoatModel& model, const cv::Mat& rgb) { return model.preprocess(rgb).tensor; }

} // namespace

ClassEval evaluateClassifier(CoatModel& model, const data::ClassificationDataset& ds, int64_t count, int64_t batch,
                             bool confusion, const ClassSampleFn& onSample, const std::function<bool()>& cancelled,
                             torch::ScalarType productDtype) {
    const bool wasTraining = model.is_training();
    model.eval();
    torch::NoGradGuard ng;
    const int64_t n = count <= 0 ? ds.size() : std::min(count, ds.size());
    const int64_t K = model.config().numClasses;
    ClassEval r;
    r.count = n;
    if (confusion) r.confusion = torch::zeros({K, K}, torch::kLong);
    int64_t correct = 0;
    double lossSum = 0;
    int64_t done = 0;
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
        if (cancelled && cancelled()) break;
        const int64_t bn = std::min(batch, n - b0);
        std::vector<torch::Tensor> xs;
        std::vector<int64_t> ys, idxs;
        for (int64_t i = 0; i < bn; ++i) {
            const int64_t idx = count <= 0 ? b0 + i : train::shuffledIndex(kValOrderSeed, ds.size(), b0 + i);
            idxs.push_back(idx);
            auto s = ds.get(idx);
            if (s.label < 0 || s.label >= K) throw Error("evaluation: label out of range for the model");
            xs.push_back(inputTensor(model, data::toRgb(s.image)));
            ys.push_back(s.label);
        }
        auto x = torch::stack(xs).to(model.device());
        auto y = torch::tensor(ys, torch::kLong).to(model.device());
        CoatForwardOptions fo;
        fo.productDtype = productDtype;
        auto logits = model.forward(x, fo).logits.to(torch::kFloat);
        lossSum += torch::nn::functional::cross_entropy(
                       logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
        auto pred = logits.argmax(1);
        correct += pred.eq(y).sum().item<int64_t>();
        if (confusion)
            r.confusion.view({-1}).index_add_(0, (y * K + pred).cpu(), torch::ones({bn}, torch::kLong));
        if (onSample) {
            const auto probs = torch::softmax(logits, 1).to(torch::kCPU).contiguous();
            const auto p = pred.to(torch::kCPU).to(torch::kLong).contiguous();
            for (int64_t i = 0; i < bn; ++i) onSample(idxs[size_t(i)], ys[size_t(i)], p[i].item<int64_t>(), probs[i]);
        }
        done += bn;
    }
    r.count = done;
    r.acc = done > 0 ? double(correct) / double(done) : 0.0;
    r.loss = done > 0 ? lossSum / double(done) : 0.0;
    model.train(wasTraining);
    return r;
}

// ---- training -----------------------------------------------------------------------------

namespace {

// Keys of the training config a resumed run may change (they do not affect the weights).
const std::vector<std::string> kResumeMayChange = {"checkpoint_every", "eval_every", "first_eval", "val_subset",
                                                   "eval_batch", "threads"};

double sampleBeta(double alpha, std::mt19937_64& rng) {
    std::gamma_distribution<double> g(alpha, 1.0);
    const double a = g(rng), b = g(rng);
    return a + b > 0 ? a / (a + b) : 0.5;
}

// One training image: RGB, optional flip and pad-and-crop, preprocess.
torch::Tensor trainInput(const CoatModel& model, const data::ClassSample& s, const CoatTrainConfig& cfg,
                         std::mt19937_64& rng) {
    const cv::Mat rgb = data::flipPadCrop(data::toRgb(s.image), cfg.hflip, int(cfg.padCrop), rng);
    return inputTensor(model, rgb);
}

// Mixup / cutmix (timm's batch mode: pair each image with the flipped batch), with the random
// numbers of `step`; mixes the images x and the soft targets alike.
void mixBatch(const CoatTrainConfig& cfg, int64_t step, torch::Tensor& x, torch::Tensor& target) {
    std::mt19937_64 mixRng(train::mixSeed(cfg.seed, uint64_t(step), 2));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const bool anyMix = cfg.mixup > 0 || cfg.cutmix > 0;
    if (!anyMix || !(u(mixRng) < cfg.mixProb)) return;
    const bool useCutmix = cfg.cutmix > 0 && (cfg.mixup <= 0 || u(mixRng) < cfg.switchProb);
    double lam = sampleBeta(useCutmix ? cfg.cutmix : cfg.mixup, mixRng);
    auto xf = x.flip(0);
    if (useCutmix) {
        const int64_t H = x.size(2), W = x.size(3);
        const double r = std::sqrt(1.0 - lam);
        const int64_t ch = int64_t(H * r), cw = int64_t(W * r);
        std::uniform_int_distribution<int64_t> dy(0, H - 1), dx(0, W - 1);
        const int64_t cy = dy(mixRng), cx = dx(mixRng);
        const int64_t y0 = std::clamp<int64_t>(cy - ch / 2, 0, H), y1 = std::clamp<int64_t>(cy + ch / 2, 0, H);
        const int64_t x0 = std::clamp<int64_t>(cx - cw / 2, 0, W), x1 = std::clamp<int64_t>(cx + cw / 2, 0, W);
        using torch::indexing::Slice;
        x = x.clone();
        x.index_put_({Slice(), Slice(), Slice(y0, y1), Slice(x0, x1)}, xf.index({Slice(), Slice(), Slice(y0, y1), Slice(x0, x1)}));
        lam = 1.0 - double((y1 - y0) * (x1 - x0)) / double(H * W);
    } else {
        x = x * lam + xf * (1.0 - lam);
    }
    target = target * lam + target.flip(0) * (1.0 - lam);
}

// One CoaT training run: its data, model, optimizer, files and position.
struct CoatRun {
    const CoatTrainConfig& cfg;
    const std::string& dataSpec;
    data::ClassificationSplits splits;
    CoatConfig mcfg;
    int64_t trainSize = 0;
    train::RunFiles files;
    std::shared_ptr<CoatModel> model;
    nlohmann::json cfgJson;
    int64_t step = 0;
    double stepTime = 0;   // seconds spent in training steps by this process
    int64_t stepImages = 0;
    dist::Communicator* comm = nullptr;   // a distributed run (else null)
    std::unique_ptr<dist::GradientReducer> reducer;
    int rank = 0, world = 1;
    // This rank's rows of each step's batch: [rowBegin, rowEnd) of batch_size.
    int64_t rowBegin() const { return cfg.batchSize / world * rank; }
    int64_t rowEnd() const { return cfg.batchSize / world * (rank + 1); }

    const data::ClassificationDataset& trainSet() const { return *splits.train; }
    const data::ClassificationDataset& valSet() const { return *splits.val; }
    // Training items: a fixed random subset (from the seed) or everything.
    int64_t trainItem(int64_t k) const {
        return cfg.trainSubset > 0 ? train::shuffledIndex(train::mixSeed(cfg.seed, 7, 7), trainSet().size(), k) : k;
    }
    double imagesPerSecond() const { return stepTime > 0 ? double(stepImages) / stepTime : 0; }
};

// AdamW over every parameter; no weight decay on biases, norms and the class tokens.
std::vector<train::AdamW::Param> coatParams(CoatModel& model) {
    std::vector<train::AdamW::Param> params;
    for (auto& p : model.named_parameters()) {
        const bool noDecay = p.value().dim() <= 1 || p.key().find("cls_token") != std::string::npos;
        params.push_back({p.key(), p.value(), 1.0, noDecay ? 0.0 : 1.0});
    }
    return params;
}

RunLogWriter openCoatRunLog(const CoatRun& run, bool resume) {
    nlohmann::json logConfig = run.cfgJson;
    logConfig["trainer"] = "coat";
    logConfig["data"] = run.dataSpec;
    logConfig["data_description"] = run.trainSet().describe() + "; validation: " + run.valSet().describe();
    logConfig["train_size"] = run.trainSize;
    logConfig["model_config"] = run.mcfg.toJson();
    logConfig["parameters"] = run.model->numParameters();
    logConfig["series"] = coatSeriesNames(run.world);
    logConfig["total_steps"] = run.cfg.steps;
    logConfig["world_size"] = run.world;
    if (run.rank != 0) return RunLogWriter::memoryOnly(logConfig, coatSeriesNames(run.world));
    return train::openRunLog(run.files.runLog, logConfig, coatSeriesNames(run.world), resume ? run.step : -1);
}

// The images of this rank's rows of the batch of `step` and their label-smoothed, mixed targets.
std::pair<torch::Tensor, torch::Tensor> loadBatch(const CoatRun& run, int64_t step) {
    const CoatTrainConfig& cfg = run.cfg;
    const int64_t B = cfg.batchSize, K = run.mcfg.numClasses, rows = run.rowEnd() - run.rowBegin();
    std::vector<torch::Tensor> xs;
    std::vector<int64_t> ys;
    for (int64_t b = run.rowBegin(); b < run.rowEnd(); ++b) {
        const int64_t k = train::shuffledIndex(cfg.seed, run.trainSize, step * B + b);
        auto s = run.trainSet().get(run.trainItem(k));
        std::mt19937_64 rng(train::mixSeed(cfg.seed, uint64_t(step), uint64_t(100 + b)));
        xs.push_back(trainInput(*run.model, s, cfg, rng));
        ys.push_back(s.label);
    }
    auto x = torch::stack(xs);
    auto y = torch::tensor(ys, torch::kLong);
    const double off = cfg.labelSmoothing / double(K);
    auto target = torch::full({rows, K}, off, torch::kFloat);
    target.scatter_(1, y.view({rows, 1}), 1.0 - cfg.labelSmoothing + off);
    mixBatch(cfg, step, x, target);
    return {x, target};
}

// One optimizer step; returns its metrics (and the validation ones when due).
std::map<std::string, double> trainStep(CoatRun& run, train::AdamW& opt, const std::vector<train::AdamW::Param>& params,
                                        train::StepReporter& rep) {
    const CoatTrainConfig& cfg = run.cfg;
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = train::warmupCosine(cfg.lr, cfg.minLr, cfg.warmupSteps, cfg.steps, run.step);
    opt.setLr(lr);
    torch::manual_seed(train::mixSeed(cfg.seed, uint64_t(run.step), 1));
    auto [x, target] = loadBatch(run, run.step);
    auto out = run.model->forward(x.to(run.model->device()));
    auto logp = torch::log_softmax(out.logits, 1);
    auto loss = -(target.to(logp.device()) * logp).sum(1).mean();
    double lossV = loss.item<double>();
    train::checkLossFinite(lossV, run.step, "CoaT training");
    opt.zeroGrad();
    if (run.reducer) run.reducer->beginStep();
    loss.backward();
    if (run.reducer) run.reducer->finishStep();   // gradients averaged over the ranks
    const double gn = train::clipGradNorm(params, cfg.clipMaxNorm);
    opt.step();
    double acc = out.logits.argmax(1).cpu().eq(target.argmax(1)).to(torch::kDouble).mean().item<double>();
    ++run.step;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.stepTime += dt;
    run.stepImages += run.rowEnd() - run.rowBegin();

    std::map<std::string, double> m;
    if (run.comm) {   // the whole batch's loss and accuracy; each rank's throughput
        std::vector<torch::Tensor> t{torch::tensor({lossV, acc}, torch::kFloat64)};
        run.comm->allReduce(t, true);
        lossV = t[0][0].item<double>();
        acc = t[0][1].item<double>();
        m = dist::stepSeries(run.comm, double(run.rowEnd() - run.rowBegin()) / std::max(dt, 1e-9));
    }
    m["loss/train"] = lossV;
    m["train/acc"] = acc;
    m["lr"] = lr;
    m["grad_norm"] = gn;
    m["throughput"] = double(cfg.batchSize) / std::max(dt, 1e-9);
    m["epoch"] = double(run.step * cfg.batchSize) / double(run.trainSize);
    const bool evalDue = (cfg.evalEvery > 0 && run.step % cfg.evalEvery == 0) || run.step == cfg.firstEval;
    if (evalDue && run.step < cfg.steps && run.rank == 0) {
        rep.notify("validating");
        auto ev = evaluateClassifier(*run.model, run.valSet(), cfg.valSubset, cfg.evalBatch, false);
        m["val/acc"] = ev.acc;
        m["val/loss"] = ev.loss;
    }
    return m;
}

// The end of a finished run: validation on the whole held-out set (with the confusion matrix)
// into the log's eval results, model.h5, and the result.
CoatTrainResult finishRun(CoatRun& run, RunLogWriter& log, train::StepReporter& rep) {
    rep.notify("validating");
    auto ev = evaluateClassifier(*run.model, run.valSet(), 0, run.cfg.evalBatch, true);
    log.append("val/acc", run.step, ev.acc);
    log.append("val/loss", run.step, ev.loss);
    rep.report(run.step, "done", {});
    log.setEval("final/val_acc", torch::tensor(ev.acc, torch::kDouble));
    log.setEval("final/val_loss", torch::tensor(ev.loss, torch::kDouble));
    log.setEval("final/val_size", torch::tensor(ev.count, torch::kLong));
    log.setEval("final/confusion", ev.confusion);
    log.setEval("final/train_images_per_second", torch::tensor(run.imagesPerSecond(), torch::kDouble));
    run.model->train(false);
    saveCoat(*run.model, run.files.model);
    log.finish();
    CoatTrainResult result;
    result.parameters = run.model->numParameters();
    result.finished = true;
    result.steps = run.step;
    result.valAcc = ev.acc;
    result.valLoss = ev.loss;
    result.valSize = ev.count;
    result.imagesPerSecond = run.imagesPerSecond();
    return result;
}

// A distributed run's ranks other than 0 end here: rank 0 validates and writes the files.
CoatTrainResult otherRankResult(const CoatRun& run, bool finished) {
    CoatTrainResult r;
    r.finished = finished;
    r.steps = run.step;
    r.parameters = run.model->numParameters();
    r.imagesPerSecond = run.imagesPerSecond();
    r.rank = run.rank;
    r.worldSize = run.world;
    return r;
}

} // namespace

CoatTrainResult trainCoat(const CoatTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir,
                          bool resume, train::Control& control, const train::ProgressFn& progress,
                          dist::Communicator* comm) {
    cfg.validate();
    const int world = comm ? comm->worldSize() : 1;
    train::checkBatchDividesWorld(cfg.batchSize, world, "rows");
    CoatRun run{cfg, dataSpec, data::openClassificationDataset(dataSpec, int(cfg.holdoutEvery))};
    if (comm && comm->worldSize() > 1) {
        run.comm = comm;
        run.rank = comm->rank();
        run.world = world;
    }
    run.mcfg = cfg.modelConfig(run.trainSet().classNames());
    run.trainSize = cfg.trainSubset > 0 ? std::min(cfg.trainSubset, run.trainSet().size()) : run.trainSet().size();
    run.files = train::runFiles(outDir);
    resume = train::resumeFrom(run.files.checkpoint, resume);   // none yet: start from step 0
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);   // the CLI also sets BLAS threads (setComputeThreads)
    run.model = std::make_shared<CoatModel>(run.mcfg, cfg.seed);
    run.model->train(true);
    run.cfgJson = cfg.toJson();
    train::TrainState resumed;
    if (resume) {
        resumed = train::loadResumeState(run.files.checkpoint, "coat-train", run.cfgJson, kResumeMayChange, dataSpec);
        train::loadModuleTensors(*run.model, resumed.model, run.files.checkpoint);
        run.step = resumed.meta.value("step", int64_t(0));
        train::noteResumed(run.files.checkpoint, run.step);
        if (run.step < 0 || run.step > cfg.steps) throw Error(run.files.checkpoint + ": bad step " + std::to_string(run.step));
    }
    const auto params = coatParams(*run.model);
    train::AdamW::Options o;
    o.lr = cfg.lr;
    o.weightDecay = cfg.weightDecay;
    train::AdamW opt(params, o);
    if (resume && run.step > 0) opt.loadState(resumed.optimizer, run.files.checkpoint);
    dist::broadcastModule(run.comm, *run.model);   // every rank starts from rank 0's weights
    if (run.comm) run.reducer = std::make_unique<dist::GradientReducer>(run.comm, run.model->parameters());
    RunLogWriter log = openCoatRunLog(run, resume);
    train::StepReporter rep(log, progress, cfg.steps, run.step);
    auto save = [&] {
        if (run.rank != 0) return;   // rank 0 writes the checkpoints
        // Rows up to this step reach the log before the checkpoint does: a kill right after the
        // checkpoint must not leave a resumed log with a gap (docs/crash-safety.md).
        log.flush();
        train::saveTrainState(run.files.checkpoint, "coat-train", train::stepState(run.cfgJson, dataSpec, run.step, *run.model, opt));
    };
    try {
        while (run.step < cfg.steps) {
            if (dist::anyRankStops(run.comm, !control.checkpoint())) {
                save();
                train::endStoppedRun(log, rep, run.step, run.files.checkpoint);
                if (run.rank != 0) return otherRankResult(run, false);
                CoatTrainResult result;
                result.parameters = run.model->numParameters();
                result.steps = run.step;
                result.imagesPerSecond = run.imagesPerSecond();
                return result;
            }
            const auto metrics = trainStep(run, opt, params, rep);
            rep.report(run.step, "train", metrics);
            if (run.step % cfg.checkpointEvery == 0 || run.step == cfg.steps) {
                save();
                log.flush();
            }
        }
        if (run.rank != 0) {
            log.finish();
            return otherRankResult(run, true);
        }
        CoatTrainResult result = finishRun(run, log, rep);
        result.worldSize = run.world;
        return result;
    } catch (const std::exception& e) {
        if (!log.closed()) log.fail(e.what());
        throw;
    }
}

CoatTrainResult finishedRunResult(const std::string& outDir) {
    CoatTrainResult r;
    std::error_code ec;
    const fs::path run = fs::path(outDir) / "run.h5", model = fs::path(outDir) / "model.h5";
    if (!fs::exists(run, ec) || !fs::exists(model, ec)) return r;
    RunLog log;
    try {
        log = RunLog::load(run.string());
    } catch (const Error&) {
        return r;
    }
    if (log.status != RunStatus::Finished || !log.eval.count("final/val_acc")) return r;
    r.finished = true;
    r.valAcc = log.eval.at("final/val_acc").item<double>();
    if (log.eval.count("final/val_loss")) r.valLoss = log.eval.at("final/val_loss").item<double>();
    if (log.eval.count("final/val_size")) r.valSize = log.eval.at("final/val_size").item<int64_t>();
    if (log.eval.count("final/train_images_per_second"))
        r.imagesPerSecond = log.eval.at("final/train_images_per_second").item<double>();
    r.steps = log.config.value("total_steps", int64_t(0));
    r.parameters = log.config.value("parameters", int64_t(0));
    return r;
}

} // namespace glimpse::coat
