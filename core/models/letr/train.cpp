#include "core/models/letr/train.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/open.h"
#include "core/eval/letr_eval.h"
#include "core/error.h"
#include "core/models/letr/model.h"
#include "core/runlog.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/state.h"

namespace glimpse::letr {

namespace fs = std::filesystem;

// ---- config -------------------------------------------------------------------------------

LetrConfig LetrTrainConfig::smallModel() {
    LetrConfig c;
    c.backbone = "resnet10";
    c.hiddenDim = 128;
    c.nheads = 4;
    c.dimFeedforward = 512;
    c.coarseEncLayers = 2;
    c.coarseDecLayers = 2;
    c.fineEncLayers = 2;
    c.fineDecLayers = 2;
    c.numQueries = 100;
    c.dropout = 0.1;
    c.shortSide = 256;
    c.maxLongSide = 512;
    return c;
}

int64_t LetrTrainConfig::totalSteps() const {
    return coarseSteps + (model.fineStage ? fineSteps + focalSteps : 0);
}

void LetrTrainConfig::validate() const {
    model.validate();
    auto bad = [](const std::string& what) { throw Error("LETR training config: " + what); };
    if (batchSize < 1 || batchSize > 1024) bad("batch_size must be in 1..1024");
    if (coarseSteps < 0 || fineSteps < 0 || focalSteps < 0) bad("step counts must be >= 0");
    if (coarseSteps > 100'000'000 || fineSteps > 100'000'000 || focalSteps > 100'000'000) bad("step counts are absurdly large");
    if (!(lr > 0 && lr < 1)) bad("lr must be in (0, 1)");
    if (!(lrBackbone >= 0 && lrBackbone < 1)) bad("lr_backbone must be in [0, 1)");
    if (!(weightDecay >= 0 && weightDecay < 1)) bad("weight_decay must be in [0, 1)");
    if (!(lrGamma > 0 && lrGamma <= 1)) bad("lr_gamma must be in (0, 1]");
    if (lrDropCoarse < 0 || lrDropFine < 0) bad("lr_drop_* must be >= 0");
    if (!(clipMaxNorm >= 0)) bad("clip_max_norm must be >= 0");
    if (checkpointEvery < 1) bad("checkpoint_every must be >= 1");
    if (threads < 0 || threads > 1024) bad("threads must be in 0..1024");
    if (valEvery < 0) bad("val_every must be >= 0");
    if (valImages < 1 || valImages > 100000) bad("val_images must be in 1..100000");
    if (!(loss.eosCoef > 0 && loss.eosCoef <= 1)) bad("loss.eos_coef must be in (0, 1]");
    if (!(loss.gamma >= 0 && loss.gamma <= 10)) bad("loss.gamma must be in [0, 10]");
    if (loss.costClass < 0 || loss.costLine < 0 || loss.clsCoef < 0 || loss.lineCoef < 0) bad("loss coefficients must be >= 0");
    const auto& a = augment;
    if (a.minShortSide < 32 || a.maxShortSide < a.minShortSide || a.maxShortSide > 4096)
        bad("augment.min_short_side/max_short_side must satisfy 32 <= min <= max <= 4096");
    if (a.maxLongSide < a.minShortSide || a.maxLongSide > 8192) bad("augment.max_long_side must be in min_short_side..8192");
    for (double p : {a.hflip, a.vflip, a.crop})
        if (!(p >= 0 && p <= 1)) bad("augment probabilities must be in [0, 1]");
    if (!(a.cropMin > 0.1 && a.cropMin <= 1)) bad("augment.crop_min must be in (0.1, 1]");
    for (double j : {a.brightness, a.contrast, a.saturation})
        if (!(j >= 0 && j < 1)) bad("augment jitter strengths must be in [0, 1)");
}

nlohmann::json LetrTrainConfig::toJson() const {
    nlohmann::json j;
    j["model"] = model.toJson();
    j["seed"] = seed;
    j["batch_size"] = batchSize;
    j["coarse_steps"] = coarseSteps;
    j["fine_steps"] = fineSteps;
    j["focal_steps"] = focalSteps;
    j["lr"] = lr;
    j["lr_backbone"] = lrBackbone;
    j["weight_decay"] = weightDecay;
    j["lr_gamma"] = lrGamma;
    j["lr_drop_coarse"] = lrDropCoarse;
    j["lr_drop_fine"] = lrDropFine;
    j["clip_max_norm"] = clipMaxNorm;
    j["checkpoint_every"] = checkpointEvery;
    j["threads"] = threads;
    j["val_every"] = valEvery;
    j["val_data"] = valData;
    j["val_images"] = valImages;
    j["train_backbone_bn"] = trainBackboneBn;
    j["loss"] = {{"cost_class", loss.costClass}, {"cost_line", loss.costLine}, {"cls_coef", loss.clsCoef},
                 {"line_coef", loss.lineCoef}, {"eos_coef", loss.eosCoef}, {"gamma", loss.gamma}};
    j["augment"] = {{"enabled", augmentEnabled}, {"hflip", augment.hflip}, {"vflip", augment.vflip},
                    {"min_short_side", augment.minShortSide}, {"max_short_side", augment.maxShortSide},
                    {"max_long_side", augment.maxLongSide}, {"crop", augment.crop}, {"crop_min", augment.cropMin},
                    {"brightness", augment.brightness}, {"contrast", augment.contrast},
                    {"saturation", augment.saturation}};
    return j;
}

namespace {

template <typename T>
void readKey(const nlohmann::json& j, const char* key, T& out, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end()) return;
    try {
        if constexpr (std::is_same_v<T, std::string>) {
            if (!it->is_string()) throw Error("");
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!it->is_boolean()) throw Error("");
        } else if constexpr (std::is_integral_v<T>) {
            if (!it->is_number_integer()) throw Error("");
        } else {
            if (!it->is_number()) throw Error("");
        }
        out = it->get<T>();
    } catch (const std::exception&) {
        throw Error(where + ": \"" + key + "\" has the wrong type (" + std::string(it->type_name()) + ")");
    }
}

void checkKeys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where) {
    if (!j.is_object()) throw Error(where + ": expected a JSON object");
    std::set<std::string> k(known.begin(), known.end());
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!k.count(it.key())) throw Error(where + ": unknown key \"" + it.key() + "\"");
}

} // namespace

LetrTrainConfig LetrTrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    checkKeys(j, {"model", "seed", "batch_size", "coarse_steps", "fine_steps", "focal_steps", "lr", "lr_backbone",
                  "weight_decay", "lr_gamma", "lr_drop_coarse", "lr_drop_fine", "clip_max_norm", "checkpoint_every",
                  "threads", "val_every", "val_data", "val_images", "train_backbone_bn", "loss", "augment"},
              source);
    LetrTrainConfig c;
    if (j.contains("model")) {
        // Keys not given keep the small CPU model's values.
        nlohmann::json m = smallModel().toJson();
        if (!j["model"].is_object()) throw Error(source + ": \"model\" must be an object");
        for (auto it = j["model"].begin(); it != j["model"].end(); ++it) m[it.key()] = it.value();
        c.model = LetrConfig::fromJson(m, source + " (model)");
    }
    readKey(j, "seed", c.seed, source);
    readKey(j, "batch_size", c.batchSize, source);
    readKey(j, "coarse_steps", c.coarseSteps, source);
    readKey(j, "fine_steps", c.fineSteps, source);
    readKey(j, "focal_steps", c.focalSteps, source);
    readKey(j, "lr", c.lr, source);
    readKey(j, "lr_backbone", c.lrBackbone, source);
    readKey(j, "weight_decay", c.weightDecay, source);
    readKey(j, "lr_gamma", c.lrGamma, source);
    readKey(j, "lr_drop_coarse", c.lrDropCoarse, source);
    readKey(j, "lr_drop_fine", c.lrDropFine, source);
    readKey(j, "clip_max_norm", c.clipMaxNorm, source);
    readKey(j, "checkpoint_every", c.checkpointEvery, source);
    readKey(j, "threads", c.threads, source);
    readKey(j, "val_every", c.valEvery, source);
    readKey(j, "val_data", c.valData, source);
    readKey(j, "val_images", c.valImages, source);
    readKey(j, "train_backbone_bn", c.trainBackboneBn, source);
    if (j.contains("loss")) {
        const auto& l = j["loss"];
        const std::string w = source + " (loss)";
        checkKeys(l, {"cost_class", "cost_line", "cls_coef", "line_coef", "eos_coef", "gamma"}, w);
        readKey(l, "cost_class", c.loss.costClass, w);
        readKey(l, "cost_line", c.loss.costLine, w);
        readKey(l, "cls_coef", c.loss.clsCoef, w);
        readKey(l, "line_coef", c.loss.lineCoef, w);
        readKey(l, "eos_coef", c.loss.eosCoef, w);
        readKey(l, "gamma", c.loss.gamma, w);
    }
    if (j.contains("augment")) {
        const auto& a = j["augment"];
        const std::string w = source + " (augment)";
        checkKeys(a, {"enabled", "hflip", "vflip", "min_short_side", "max_short_side", "max_long_side", "crop",
                      "crop_min", "brightness", "contrast", "saturation"},
                  w);
        readKey(a, "enabled", c.augmentEnabled, w);
        readKey(a, "hflip", c.augment.hflip, w);
        readKey(a, "vflip", c.augment.vflip, w);
        readKey(a, "min_short_side", c.augment.minShortSide, w);
        readKey(a, "max_short_side", c.augment.maxShortSide, w);
        readKey(a, "max_long_side", c.augment.maxLongSide, w);
        readKey(a, "crop", c.augment.crop, w);
        readKey(a, "crop_min", c.augment.cropMin, w);
        readKey(a, "brightness", c.augment.brightness, w);
        readKey(a, "contrast", c.augment.contrast, w);
        readKey(a, "saturation", c.augment.saturation, w);
    }
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

LetrTrainConfig LetrTrainConfig::fromFile(const std::string& path) {
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

std::vector<std::string> letrSeriesNames(const LetrTrainConfig& cfg) {
    std::vector<std::string> s{"loss/total", "loss/cls", "loss/l1"};
    const int64_t layers = std::max(cfg.model.coarseDecLayers, cfg.model.fineStage ? cfg.model.fineDecLayers : 0);
    for (int64_t k = 0; k < layers; ++k) {
        s.push_back("loss/cls_layer_" + std::to_string(k));
        s.push_back("loss/l1_layer_" + std::to_string(k));
    }
    for (const char* n : {"lr", "grad_norm", "throughput", "phase"}) s.push_back(n);
    if (cfg.valEvery > 0)
        for (const char* n : {"val/sAP10", "val/sAP15", "val/APH"}) s.push_back(n);
    return s;
}

std::string letrValidationSpec(const LetrTrainConfig& cfg, const std::string& dataDescription) {
    if (!cfg.valData.empty()) return cfg.valData;
    // describe() of procedural data: "procedural:COUNT:SEED:WxH (N images)".
    uint64_t seed = 0;
    std::string size = "256x256";
    const std::string prefix = "procedural:";
    if (dataDescription.rfind(prefix, 0) == 0) {
        std::vector<std::string> parts;
        const std::string spec = dataDescription.substr(0, dataDescription.find(' '));
        std::stringstream in(spec.substr(prefix.size()));
        for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
        if (parts.size() == 3) {
            try {
                seed = std::stoull(parts[1]);
                size = parts[2];
            } catch (const std::exception&) {
                seed = 0;
            }
        }
    }
    return "procedural:" + std::to_string(cfg.valImages) + ":" + std::to_string(seed + 1000) + ":" + size;
}

torch::Tensor letrInputTensor(const cv::Mat& rgb, const LetrConfig& model) {
    if (rgb.empty() || rgb.type() != CV_8UC3) throw Error("LETR training: images must be non-empty RGB (CV_8UC3)");
    auto raw = torch::from_blob(const_cast<uint8_t*>(rgb.ptr<uint8_t>()), {rgb.rows, rgb.cols, 3},
                                {int64_t(rgb.step[0]), 3, 1}, torch::kUInt8);
    auto mean = torch::tensor({model.mean[0], model.mean[1], model.mean[2]}, torch::kFloat).view({3, 1, 1});
    auto stdv = torch::tensor({model.std[0], model.std[1], model.std[2]}, torch::kFloat).view({3, 1, 1});
    return ((raw.permute({2, 0, 1}).to(torch::kFloat) / 255.0) - mean) / stdv;
}

// ---- training -----------------------------------------------------------------------------

namespace {

struct Phase {
    std::string name;   // coarse | fine | focal
    int64_t begin = 0, steps = 0;
    bool fineStage = false, focal = false;
};

// Fine stage initialized from the coarse transformer and heads (dissertation 2.4.2); the
// input projections differ in their input channels and keep their own initialization.
void initFineFromCoarse(LetrModel& model) {
    torch::NoGradGuard ng;
    auto params = model.named_parameters();
    for (auto& p : params) {
        const std::string& n = p.key();
        if (n.rfind("transformer.", 0) != 0 && n.rfind("class_embed.", 0) != 0 && n.rfind("lines_embed.", 0) != 0)
            continue;
        if (const auto* src = params.find("letr." + n))
            if (src->sizes() == p.value().sizes()) p.value().copy_(*src);
    }
}

std::vector<train::AdamW::Param> trainable(LetrModel& model, bool fineStage, double lrScaleBackbone,
                                           bool trainBackboneBn) {
    std::vector<train::AdamW::Param> out;
    for (auto& p : model.named_parameters()) {
        const std::string& n = p.key();
        const bool isBackbone = n.rfind("backbone.", 0) == 0, isCoarse = n.rfind("letr.", 0) == 0;
        const bool isBn = isBackbone && p.value().dim() == 1;   // batch-norm weight / bias
        const bool train = fineStage ? !(isBackbone || isCoarse) : (isBackbone || isCoarse) && (trainBackboneBn || !isBn);
        p.value().set_requires_grad(train);
        if (train) out.push_back({n, p.value(), isBackbone ? lrScaleBackbone : 1.0});
    }
    return out;
}

nlohmann::json comparable(nlohmann::json j) {
    // Validation settings do not affect the weights (and old checkpoints lack them).
    for (const char* k : {"checkpoint_every", "threads", "coarse_steps", "fine_steps", "focal_steps", "lr_drop_coarse",
                          "lr_drop_fine", "val_every", "val_data", "val_images"})
        j.erase(k);
    return j;
}

// (phase index, phase begin, lr) of step t under a config.
std::tuple<int, int64_t, double> scheduleAt(const LetrTrainConfig& c, int64_t t) {
    if (t < c.coarseSteps || !c.model.fineStage) return {0, 0, train::stepDecay(c.lr, c.lrGamma, c.lrDropCoarse, t)};
    const int64_t f = c.coarseSteps;
    if (t < f + c.fineSteps) return {1, f, train::stepDecay(c.lr, c.lrGamma, c.lrDropFine, t - f)};
    const int64_t g = f + c.fineSteps;
    return {2, g, train::stepDecay(c.lr, c.lrGamma, c.lrDropFine, t - f)};
}

// A resumed run may change the schedule (step counts, lr drops) as long as the steps already
// done would have been the same under the new one; then it still equals an uninterrupted run
// with the new config.
bool sameHistory(const LetrTrainConfig& a, const LetrTrainConfig& b, int64_t steps) {
    for (int64_t t = 0; t < steps; ++t)
        if (scheduleAt(a, t) != scheduleAt(b, t)) return false;
    // A checkpoint at the end of a phase must be the end of that phase in both.
    if (steps > 0) {
        auto ea = scheduleAt(a, steps), eb = scheduleAt(b, steps);
        const bool aEnds = std::get<1>(ea) != std::get<1>(scheduleAt(a, steps - 1)) || steps >= a.totalSteps();
        const bool bEnds = std::get<1>(eb) != std::get<1>(scheduleAt(b, steps - 1)) || steps >= b.totalSteps();
        if (aEnds != bEnds) return false;
    }
    return true;
}

} // namespace

void trainLetr(const LetrTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir, bool resume,
               train::Control& control, const train::ProgressFn& progress) {
    cfg.validate();
    auto ds = data::openLineDataset(dataSpec);
    if (ds->size() < 1) throw Error("dataset '" + dataSpec + "' is empty");
    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (ec) throw Error(outDir + ": cannot create the run folder (" + ec.message() + ")");
    const std::string ckptPath = (fs::path(outDir) / "checkpoint.h5").string();
    const std::string runPath = (fs::path(outDir) / "run.h5").string();
    const std::string modelPath = (fs::path(outDir) / "model.h5").string();
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);

    std::unique_ptr<data::LineDataset> valDs;
    std::string valSpec;
    if (cfg.valEvery > 0) {
        valSpec = letrValidationSpec(cfg, ds->describe());
        try {
            valDs = data::openLineDataset(valSpec);
        } catch (const Error& e) {
            throw Error(std::string("LETR training: validation data: ") + e.what());
        }
        if (valDs->size() < 1) throw Error("LETR training: validation dataset '" + valSpec + "' is empty");
    }

    auto model = std::make_shared<LetrModel>(cfg.model, cfg.seed);
    model->train(true);
    model->setTrainBackboneBn(cfg.trainBackboneBn);
    const nlohmann::json cfgJson = cfg.toJson();
    int64_t step = 0;
    train::TrainState resumed;
    int optimPhase = -1;
    if (resume) {
        resumed = train::loadTrainState(ckptPath, "letr-train");
        if (!resumed.meta.contains("config") || comparable(resumed.meta["config"]) != comparable(cfgJson))
            throw Error(ckptPath + ": was written with a different training config; resume needs the same one");
        const LetrTrainConfig old = LetrTrainConfig::fromJson(resumed.meta["config"], ckptPath);
        if (!resumed.meta.contains("data") || resumed.meta["data"] != dataSpec)
            throw Error(ckptPath + ": was trained on '" + resumed.meta.value("data", std::string("?")) +
                        "', not '" + dataSpec + "'");
        train::loadModuleTensors(*model, resumed.model, ckptPath);
        step = resumed.meta.value("step", int64_t(0));
        optimPhase = resumed.meta.value("optim_phase", -1);
        if (step < 0 || step > old.totalSteps()) throw Error(ckptPath + ": bad step " + std::to_string(step));
        if (step > cfg.totalSteps() || !sameHistory(old, cfg, step))
            throw Error(ckptPath + ": the new schedule (step counts, lr drops) differs from the old one within the " +
                        std::to_string(step) + " steps already done; resume cannot change the past");
    }

    std::vector<Phase> phases;
    phases.push_back({"coarse", 0, cfg.coarseSteps, false, false});
    if (cfg.model.fineStage) {
        phases.push_back({"fine", cfg.coarseSteps, cfg.fineSteps, true, false});
        phases.push_back({"focal", cfg.coarseSteps + cfg.fineSteps, cfg.focalSteps, true, true});
    }

    nlohmann::json logConfig = cfgJson;
    logConfig["data"] = dataSpec;
    logConfig["data_description"] = ds->describe();
    logConfig["series"] = letrSeriesNames(cfg);
    logConfig["total_steps"] = cfg.totalSteps();
    if (valDs) logConfig["val_data_description"] = valDs->describe();
    RunLogWriter log = train::openRunLog(runPath, logConfig, letrSeriesNames(cfg), resume ? step : -1);
    train::StepReporter rep(log, progress, cfg.totalSteps(), step);

    try {
        for (size_t pi = 0; pi < phases.size(); ++pi) {
            const Phase& ph = phases[pi];
            if (ph.steps == 0 || step >= ph.begin + ph.steps) continue;
            if (ph.name == "fine" && step == ph.begin) initFineFromCoarse(*model);
            auto params = trainable(*model, ph.fineStage, cfg.lrBackbone / cfg.lr, cfg.trainBackboneBn);
            train::AdamW::Options o;
            o.lr = cfg.lr;
            o.weightDecay = cfg.weightDecay;
            train::AdamW opt(params, o);
            if (resume && optimPhase == int(pi) && step > ph.begin) opt.loadState(resumed.optimizer, ckptPath);
            LetrLossConfig lossCfg = cfg.loss;
            lossCfg.focal = ph.focal;
            const int64_t drop = ph.fineStage ? cfg.lrDropFine : cfg.lrDropCoarse;

            auto save = [&] {
                train::TrainState st;
                st.meta["config"] = cfgJson;
                st.meta["data"] = dataSpec;
                st.meta["step"] = step;
                st.meta["phase"] = ph.name;
                st.meta["optim_phase"] = int(pi);
                st.model = train::moduleTensors(*model);
                st.optimizer = opt.state();
                train::saveTrainState(ckptPath, "letr-train", st);
            };

            while (step < ph.begin + ph.steps) {
                if (!control.checkpoint()) {
                    save();
                    rep.notify("stopped");
                    log.stop("stopped at step " + std::to_string(step) + "; --resume continues from " + ckptPath);
                    return;
                }
                const auto t0 = std::chrono::steady_clock::now();
                const int64_t phaseStep = step - ph.begin;
                const double lr = train::stepDecay(cfg.lr, cfg.lrGamma, drop, phaseStep);
                opt.setLr(lr);
                torch::manual_seed(train::mixSeed(cfg.seed, uint64_t(step), 1));

                std::vector<torch::Tensor> images, targets;
                for (int64_t b = 0; b < cfg.batchSize; ++b) {
                    const int64_t idx = train::shuffledIndex(cfg.seed, ds->size(), step * cfg.batchSize + b);
                    data::LineSample s = ds->get(idx);
                    if (cfg.augmentEnabled) {
                        std::mt19937_64 rng(train::mixSeed(cfg.seed, uint64_t(step), uint64_t(100 + b)));
                        s = data::augment(s, cfg.augment, rng);
                    } else {
                        auto hw = cfg.model.resizedSize(s.image.rows, s.image.cols);
                        if (hw[0] != s.image.rows || hw[1] != s.image.cols)
                            s = data::resizeSample(s, int(hw[1]), int(hw[0]));
                    }
                    auto t = letrInputTensor(s.image, cfg.model);
                    const float W = float(s.image.cols), H = float(s.image.rows);
                    auto l = s.lines.defined() && s.lines.numel() ? s.lines.to(torch::kFloat).reshape({-1, 4})
                                                                  : torch::zeros({0, 4});
                    targets.push_back(l / torch::tensor({W, H, W, H}));
                    images.push_back(t);
                }
                LetrForwardOptions fo;
                fo.coarseOnly = !ph.fineStage;
                auto out = model->forward(images, fo);
                const auto& so = out.stages[ph.fineStage ? 1 : 0];
                auto loss = letrLoss(so.logits, so.lines, targets, lossCfg);
                if (!std::isfinite(loss.total.item<double>()))
                    throw Error("LETR training: the loss became " + std::to_string(loss.total.item<double>()) +
                                " at step " + std::to_string(step) + " (lower the learning rate?)");
                opt.zeroGrad();
                loss.total.backward();
                const double gn = train::clipGradNorm(params, cfg.clipMaxNorm);
                opt.step();
                ++step;
                const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

                std::map<std::string, double> m;
                m["loss/total"] = loss.total.item<double>();
                m["loss/cls"] = loss.clsPerLayer.back();
                m["loss/l1"] = loss.l1PerLayer.back();
                for (size_t k = 0; k < loss.clsPerLayer.size(); ++k) {
                    m["loss/cls_layer_" + std::to_string(k)] = loss.clsPerLayer[k];
                    m["loss/l1_layer_" + std::to_string(k)] = loss.l1PerLayer[k];
                }
                m["lr"] = lr;
                m["grad_norm"] = gn;
                m["throughput"] = double(cfg.batchSize) / std::max(dt, 1e-9);
                m["phase"] = double(pi);
                rep.report(step, ph.name, m);
                if (valDs && (step % cfg.valEvery == 0 || step == ph.begin + ph.steps)) {
                    // Eval mode, no grad, no training random numbers (the next step reseeds
                    // anyway); the model's training flag is restored by evaluateLetr.
                    eval::LetrEvalOptions eo;
                    eo.allLayers = false;
                    eo.lsd = false;
                    eo.thresholds = {10, 15};
                    eo.maxImages = cfg.valImages;
                    eo.coarseOnly = !ph.fineStage;
                    const auto r = eval::evaluateLetr(*model, *valDs, eo);
                    const std::string key = ph.fineStage ? "fine_" + std::to_string(cfg.model.fineDecLayers)
                                                         : "coarse_" + std::to_string(cfg.model.coarseDecLayers);
                    const eval::LineMetrics& vm = r.row(key).metrics;
                    // Percent, as the paper's tables and `glimpse eval letr` print them.
                    log.append("val/sAP10", step, 100 * vm.sAPAt(10));
                    log.append("val/sAP15", step, 100 * vm.sAPAt(15));
                    log.append("val/APH", step, 100 * vm.APH);
                    log.flush();
                }
                if (step % cfg.checkpointEvery == 0 || step == ph.begin + ph.steps) {
                    save();
                    log.flush();
                }
            }
        }
        model->train(false);
        for (auto& p : model->parameters()) p.set_requires_grad(true);
        saveLetr(*model, modelPath);
        log.finish();
    } catch (const std::exception& e) {
        if (!log.closed()) log.fail(e.what());
        throw;
    }
}

} // namespace glimpse::letr
