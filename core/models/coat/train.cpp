#include "core/models/coat/train.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/classification.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/runlog.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/state.h"

namespace glimpse::coat {

namespace fs = std::filesystem;

// ---- config -------------------------------------------------------------------------------

nlohmann::json CoatTrainConfig::defaultModelJson() {
    return {{"variant", "coat_lite_tiny"}, {"image_size", 32}, {"resize", 32}};
}

CoatConfig CoatTrainConfig::modelConfig(const std::vector<std::string>& classNames) const {
    nlohmann::json m = defaultModelJson();
    if (!model.is_object()) throw Error("CoaT training config: \"model\" must be an object");
    for (auto it = model.begin(); it != model.end(); ++it) m[it.key()] = it.value();
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
        nlohmann::json m = defaultModelJson();
        for (auto it = model.begin(); it != model.end(); ++it) m[it.key()] = it.value();
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
    j["checkpoint_every"] = checkpointEvery;
    j["eval_batch"] = evalBatch;
    j["holdout_every"] = holdoutEvery;
    j["threads"] = threads;
    return j;
}

namespace {

template <typename T>
void readKey(const nlohmann::json& j, const char* key, T& out, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end()) return;
    bool ok;
    if constexpr (std::is_integral_v<T>) ok = it->is_number_integer() && !(it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX));
    else ok = it->is_number();
    if (!ok) throw Error(where + ": \"" + key + "\" has the wrong type (" + std::string(it->type_name()) + ")");
    if constexpr (std::is_unsigned_v<T>) {
        if (it->get<int64_t>() < 0) throw Error(where + ": \"" + key + "\" must be >= 0");
    }
    out = it->get<T>();
}

void checkKeys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where) {
    if (!j.is_object()) throw Error(where + ": expected a JSON object");
    std::set<std::string> k(known.begin(), known.end());
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!k.count(it.key())) throw Error(where + ": unknown key \"" + it.key() + "\"");
}

} // namespace

CoatTrainConfig CoatTrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    checkKeys(j, {"model", "seed", "batch_size", "steps", "warmup_steps", "lr", "min_lr", "weight_decay",
                  "label_smoothing", "mixup", "cutmix", "mix_prob", "switch_prob", "clip_max_norm", "augment",
                  "train_subset", "val_subset", "eval_every", "checkpoint_every", "eval_batch", "holdout_every",
                  "threads"},
              source);
    CoatTrainConfig c;
    if (j.contains("model")) {
        if (!j["model"].is_object()) throw Error(source + ": \"model\" must be an object");
        c.model = defaultModelJson();
        for (auto it = j["model"].begin(); it != j["model"].end(); ++it) c.model[it.key()] = it.value();
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
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the training config");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": malformed JSON (" + e.what() + ")");
    }
    return fromJson(j, path);
}

std::vector<std::string> coatSeriesNames() {
    return {"loss/train", "train/acc", "lr", "grad_norm", "throughput", "epoch", "val/acc", "val/loss"};
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
                             bool confusion) {
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
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
        const int64_t bn = std::min(batch, n - b0);
        std::vector<torch::Tensor> xs;
        std::vector<int64_t> ys;
        for (int64_t i = 0; i < bn; ++i) {
            const int64_t idx = count <= 0 ? b0 + i : train::shuffledIndex(kValOrderSeed, ds.size(), b0 + i);
            auto s = ds.get(idx);
            if (s.label < 0 || s.label >= K) throw Error("evaluation: label out of range for the model");
            xs.push_back(inputTensor(model, data::toRgb(s.image)));
            ys.push_back(s.label);
        }
        auto x = torch::stack(xs).to(model.device());
        auto y = torch::tensor(ys, torch::kLong).to(model.device());
        auto logits = model.forward(x).logits.to(torch::kFloat);
        lossSum += torch::nn::functional::cross_entropy(
                       logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
        auto pred = logits.argmax(1);
        correct += pred.eq(y).sum().item<int64_t>();
        if (confusion)
            r.confusion.view({-1}).index_add_(0, (y * K + pred).cpu(), torch::ones({bn}, torch::kLong));
    }
    r.acc = n > 0 ? double(correct) / double(n) : 0.0;
    r.loss = n > 0 ? lossSum / double(n) : 0.0;
    model.train(wasTraining);
    return r;
}

// ---- training -----------------------------------------------------------------------------

namespace {

nlohmann::json comparable(nlohmann::json j) {
    for (const char* k : {"checkpoint_every", "eval_every", "val_subset", "eval_batch", "threads"}) j.erase(k);
    return j;
}

double sampleBeta(double alpha, std::mt19937_64& rng) {
    std::gamma_distribution<double> g(alpha, 1.0);
    const double a = g(rng), b = g(rng);
    return a + b > 0 ? a / (a + b) : 0.5;
}

// One training image: RGB, optional flip and pad-and-crop, preprocess.
torch::Tensor trainInput(const CoatModel& model, const data::ClassSample& s, const CoatTrainConfig& cfg,
                         std::mt19937_64& rng) {
    cv::Mat rgb = data::toRgb(s.image);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (cfg.hflip > 0 && u(rng) < cfg.hflip) {
        cv::Mat f;
        cv::flip(rgb, f, 1);
        rgb = f;
    }
    if (cfg.padCrop > 0) {
        const int p = int(cfg.padCrop);
        cv::Mat padded;
        cv::copyMakeBorder(rgb, padded, p, p, p, p, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
        std::uniform_int_distribution<int> d(0, 2 * p);
        const int x = d(rng), y = d(rng);
        rgb = padded(cv::Rect(x, y, rgb.cols, rgb.rows)).clone();
    }
    return inputTensor(model, rgb);
}

} // namespace

CoatTrainResult trainCoat(const CoatTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir,
                          bool resume, train::Control& control, const train::ProgressFn& progress) {
    cfg.validate();
    auto splits = data::openClassificationDataset(dataSpec, int(cfg.holdoutEvery));
    const auto& trainSet = *splits.train;
    const auto& valSet = *splits.val;
    const CoatConfig mcfg = cfg.modelConfig(trainSet.classNames());
    const int64_t K = mcfg.numClasses;
    const int64_t trainSize = cfg.trainSubset > 0 ? std::min(cfg.trainSubset, trainSet.size()) : trainSet.size();
    // Training items: a fixed random subset (from the seed) or everything.
    auto trainItem = [&](int64_t k) {
        return cfg.trainSubset > 0 ? train::shuffledIndex(train::mixSeed(cfg.seed, 7, 7), trainSet.size(), k) : k;
    };

    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (ec) throw Error(outDir + ": cannot create the run folder (" + ec.message() + ")");
    const std::string ckptPath = (fs::path(outDir) / "checkpoint.h5").string();
    const std::string runPath = (fs::path(outDir) / "run.h5").string();
    const std::string modelPath = (fs::path(outDir) / "model.h5").string();
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);

    auto model = std::make_shared<CoatModel>(mcfg, cfg.seed);
    model->train(true);
    const nlohmann::json cfgJson = cfg.toJson();
    int64_t step = 0;
    train::TrainState resumed;
    if (resume) {
        resumed = train::loadTrainState(ckptPath, "coat-train");
        if (!resumed.meta.contains("config") || comparable(resumed.meta["config"]) != comparable(cfgJson))
            throw Error(ckptPath + ": was written with a different training config; resume needs the same one");
        if (!resumed.meta.contains("data") || resumed.meta["data"] != dataSpec)
            throw Error(ckptPath + ": was trained on '" + resumed.meta.value("data", std::string("?")) + "', not '" +
                        dataSpec + "'");
        train::loadModuleTensors(*model, resumed.model, ckptPath);
        step = resumed.meta.value("step", int64_t(0));
        if (step < 0 || step > cfg.steps) throw Error(ckptPath + ": bad step " + std::to_string(step));
    }

    std::vector<train::AdamW::Param> params;
    for (auto& p : model->named_parameters()) {
        const bool noDecay = p.value().dim() <= 1 || p.key().find("cls_token") != std::string::npos;
        params.push_back({p.key(), p.value(), 1.0, noDecay ? 0.0 : 1.0});
    }
    train::AdamW::Options o;
    o.lr = cfg.lr;
    o.weightDecay = cfg.weightDecay;
    train::AdamW opt(params, o);
    if (resume && step > 0) opt.loadState(resumed.optimizer, ckptPath);

    nlohmann::json logConfig = cfgJson;
    logConfig["trainer"] = "coat";
    logConfig["data"] = dataSpec;
    logConfig["data_description"] = trainSet.describe() + "; validation: " + valSet.describe();
    logConfig["train_size"] = trainSize;
    logConfig["model_config"] = mcfg.toJson();
    logConfig["parameters"] = model->numParameters();
    logConfig["series"] = coatSeriesNames();
    logConfig["total_steps"] = cfg.steps;
    RunLogWriter log = train::openRunLog(runPath, logConfig, coatSeriesNames(), resume ? step : -1);
    train::StepReporter rep(log, progress, cfg.steps, step);

    CoatTrainResult result;
    result.parameters = model->numParameters();
    double stepTime = 0;
    int64_t stepImages = 0;
    auto save = [&] {
        train::TrainState st;
        st.meta["config"] = cfgJson;
        st.meta["data"] = dataSpec;
        st.meta["step"] = step;
        st.model = train::moduleTensors(*model);
        st.optimizer = opt.state();
        train::saveTrainState(ckptPath, "coat-train", st);
    };

    try {
        while (step < cfg.steps) {
            if (!control.checkpoint()) {
                save();
                rep.notify("stopped");
                log.stop("stopped at step " + std::to_string(step) + "; --resume continues from " + ckptPath);
                result.steps = step;
                result.imagesPerSecond = stepTime > 0 ? double(stepImages) / stepTime : 0;
                return result;
            }
            const auto t0 = std::chrono::steady_clock::now();
            const double lr = train::warmupCosine(cfg.lr, cfg.minLr, cfg.warmupSteps, cfg.steps, step);
            opt.setLr(lr);
            torch::manual_seed(train::mixSeed(cfg.seed, uint64_t(step), 1));

            const int64_t B = cfg.batchSize;
            std::vector<torch::Tensor> xs;
            std::vector<int64_t> ys;
            for (int64_t b = 0; b < B; ++b) {
                const int64_t k = train::shuffledIndex(cfg.seed, trainSize, step * B + b);
                auto s = trainSet.get(trainItem(k));
                std::mt19937_64 rng(train::mixSeed(cfg.seed, uint64_t(step), uint64_t(100 + b)));
                xs.push_back(trainInput(*model, s, cfg, rng));
                ys.push_back(s.label);
            }
            auto x = torch::stack(xs);
            auto y = torch::tensor(ys, torch::kLong);
            const double off = cfg.labelSmoothing / double(K);
            auto target = torch::full({B, K}, off, torch::kFloat);
            target.scatter_(1, y.view({B, 1}), 1.0 - cfg.labelSmoothing + off);

            // Mixup / cutmix (timm's batch mode: pair each image with the flipped batch).
            std::mt19937_64 mixRng(train::mixSeed(cfg.seed, uint64_t(step), 2));
            std::uniform_real_distribution<double> u(0.0, 1.0);
            const bool anyMix = cfg.mixup > 0 || cfg.cutmix > 0;
            if (anyMix && u(mixRng) < cfg.mixProb) {
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
                    x.index_put_({Slice(), Slice(), Slice(y0, y1), Slice(x0, x1)},
                                 xf.index({Slice(), Slice(), Slice(y0, y1), Slice(x0, x1)}));
                    lam = 1.0 - double((y1 - y0) * (x1 - x0)) / double(H * W);
                } else {
                    x = x * lam + xf * (1.0 - lam);
                }
                target = target * lam + target.flip(0) * (1.0 - lam);
            }

            auto out = model->forward(x.to(model->device()));
            auto logp = torch::log_softmax(out.logits, 1);
            auto loss = -(target.to(logp.device()) * logp).sum(1).mean();
            const double lossV = loss.item<double>();
            if (!std::isfinite(lossV))
                throw Error("CoaT training: the loss became " + std::to_string(lossV) + " at step " +
                            std::to_string(step) + " (lower the learning rate?)");
            opt.zeroGrad();
            loss.backward();
            const double gn = train::clipGradNorm(params, cfg.clipMaxNorm);
            opt.step();
            const double acc = out.logits.argmax(1).cpu().eq(target.argmax(1)).to(torch::kDouble).mean().item<double>();
            ++step;
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            stepTime += dt;
            stepImages += B;

            std::map<std::string, double> m;
            m["loss/train"] = lossV;
            m["train/acc"] = acc;
            m["lr"] = lr;
            m["grad_norm"] = gn;
            m["throughput"] = double(B) / std::max(dt, 1e-9);
            m["epoch"] = double(step * B) / double(trainSize);
            if (cfg.evalEvery > 0 && step % cfg.evalEvery == 0 && step < cfg.steps) {
                rep.notify("validating");
                auto ev = evaluateClassifier(*model, valSet, cfg.valSubset, cfg.evalBatch, false);
                m["val/acc"] = ev.acc;
                m["val/loss"] = ev.loss;
            }
            rep.report(step, "train", m);
            if (step % cfg.checkpointEvery == 0 || step == cfg.steps) {
                save();
                log.flush();
            }
        }
        rep.notify("validating");
        auto ev = evaluateClassifier(*model, valSet, 0, cfg.evalBatch, true);
        log.append("val/acc", step, ev.acc);
        log.append("val/loss", step, ev.loss);
        rep.report(step, "done", {});
        log.setEval("final/val_acc", torch::tensor(ev.acc, torch::kDouble));
        log.setEval("final/val_loss", torch::tensor(ev.loss, torch::kDouble));
        log.setEval("final/val_size", torch::tensor(ev.count, torch::kLong));
        log.setEval("final/confusion", ev.confusion);
        log.setEval("final/train_images_per_second",
                    torch::tensor(stepTime > 0 ? double(stepImages) / stepTime : 0.0, torch::kDouble));
        model->train(false);
        saveCoat(*model, modelPath);
        log.finish();
        result.finished = true;
        result.steps = step;
        result.valAcc = ev.acc;
        result.valLoss = ev.loss;
        result.valSize = ev.count;
        result.imagesPerSecond = stepTime > 0 ? double(stepImages) / stepTime : 0;
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
