#include "core/models/letr/train.h"

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <future>
#include <sstream>
#include <tuple>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/open.h"
#include "core/eval/letr_eval.h"
#include "core/dist/dist.h"
#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/checkpoint.h"
#include "core/models/letr/model.h"
#include "core/runlog.h"
#include "core/train/ema.h"
#include "core/train/json_config.h"
#include "core/train/loop.h"
#include "core/train/optim.h"
#include "core/train/run.h"
#include "core/train/state.h"
#include "core/util/json_file.h"
#include "core/util/threads.h"

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

int backboneStageIndex(const std::string& stage) {
    if (stage == "conv1") return 0;
    for (int k = 1; k <= 4; ++k)
        if (stage == "layer" + std::to_string(k)) return k;
    return -1;
}

int backboneParamStage(const std::string& name) {
    // mlsd_tiny: features.0 (stem) -> 0, features.1-3 (to C2) -> 1, 4-6 (C3) -> 2, 7-10 (C4) -> 3,
    // extra (C5) -> 4, so that backbone_train_from names the same levels as for a ResNet.
    if (name.find(".body.extra.") != std::string::npos) return 4;
    const auto f = name.find(".body.features.");
    if (f != std::string::npos) {
        const int i = std::atoi(name.c_str() + f + 15);
        return i == 0 ? 0 : i <= 3 ? 1 : i <= 6 ? 2 : 3;
    }
    // "backbone.0.body.layer3.1.conv2.weight" -> 3; the stem (conv1, bn1) -> 0.
    const auto at = name.find(".body.layer");
    if (at == std::string::npos || at + 11 >= name.size()) return 0;
    const char d = name[at + 11];
    return d >= '1' && d <= '4' ? d - '0' : 0;
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
    if (lrCosine && (lrDropCoarse > 0 || lrDropFine > 0)) bad("lr_schedule \"cosine\" takes no lr_drop_coarse / lr_drop_fine");
    if (!(lrFinal >= 0 && lrFinal <= 1)) bad("lr_final must be in [0, 1]");
    if (lrWarmup < 0 || lrWarmup > 1'000'000) bad("lr_warmup must be in 0..1000000 steps");
    if (!(clipMaxNorm >= 0)) bad("clip_max_norm must be >= 0");
    if (backboneStageIndex(backboneTrainFrom) < 0)
        bad("backbone_train_from must be conv1, layer1, layer2, layer3 or layer4, not \"" + backboneTrainFrom + "\"");
    if (!(emaDecay == 0 || (emaDecay > 0 && emaDecay < 1))) bad("ema_decay must be 0 (off) or in (0, 1)");
    if (!(memoryPositionCoef >= 0 && memoryPositionCoef <= 1000)) bad("memory_position_coef must be in [0, 1000]");
    if (queryGroups < 0 || queryGroups > 64) bad("query_groups must be in 0..64");
    if (queryGroups > 0 && model.lineQueries())
        bad("query_groups cannot be combined with model.coarse_queries \"anchors\" or \"proposals\"");
    if (checkpointEvery < 1) bad("checkpoint_every must be >= 1");
    if (threads < 0 || threads > 1024) bad("threads must be in 0..1024");
    if (valEvery < 0) bad("val_every must be >= 0");
    if (valImages < 1 || valImages > 100000) bad("val_images must be in 1..100000");
    if (!(loss.eosCoef > 0 && loss.eosCoef <= 1)) bad("loss.eos_coef must be in (0, 1]");
    if (!(loss.gamma >= 0 && loss.gamma <= 10)) bad("loss.gamma must be in [0, 10]");
    if (!(loss.qualityTau >= 0 && loss.qualityTau <= 10)) bad("loss.quality_tau must be in [0, 10] (0: off)");
    if (loss.qualityTau > 0 && focalSteps > 0) bad("loss.quality_tau cannot be combined with focal_steps");
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
    if (denoise.enabled) denoise.validate();
    if (aux.enabled) {
        aux.validate();
        if (model.fineLevel > model.coarseLevel)
            bad("aux needs model.fine_level <= model.coarse_level (its head reads both levels)");
    }
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
    if (lrCosine) {   // absent for step decay: older runs resume
        j["lr_schedule"] = "cosine";
        j["lr_final"] = lrFinal;
    }
    if (lrWarmup > 0) j["lr_warmup"] = lrWarmup;   // absent when 0: older runs resume
    j["clip_max_norm"] = clipMaxNorm;
    if (emaDecay > 0) j["ema_decay"] = emaDecay;   // absent when off: older runs resume
    j["checkpoint_every"] = checkpointEvery;
    j["threads"] = threads;
    j["val_every"] = valEvery;
    j["val_data"] = valData;
    j["val_images"] = valImages;
    j["train_backbone_bn"] = trainBackboneBn;
    j["loss"] = {{"cost_class", loss.costClass}, {"cost_line", loss.costLine}, {"cls_coef", loss.clsCoef},
                 {"line_coef", loss.lineCoef}, {"eos_coef", loss.eosCoef}, {"gamma", loss.gamma}};
    if (loss.qualityTau > 0) j["loss"]["quality_tau"] = loss.qualityTau;   // absent when off: older runs resume
    j["augment"] = {{"enabled", augmentEnabled}, {"hflip", augment.hflip}, {"vflip", augment.vflip},
                    {"min_short_side", augment.minShortSide}, {"max_short_side", augment.maxShortSide},
                    {"max_long_side", augment.maxLongSide}, {"crop", augment.crop}, {"crop_min", augment.cropMin},
                    {"brightness", augment.brightness}, {"contrast", augment.contrast},
                    {"saturation", augment.saturation}};
    // Only when on: configs (and checkpoints) from before the key existed stay equal.
    if (aux.enabled) j["aux"] = aux.toJson();
    if (denoise.enabled) j["denoise"] = denoise.toJson();
    if (memoryPositionCoef > 0) j["memory_position_coef"] = memoryPositionCoef;
    if (queryGroups > 0) j["query_groups"] = queryGroups;
    if (bf16Backbone) j["bf16_backbone"] = true;
    if (backboneTrainFrom != "conv1") j["backbone_train_from"] = backboneTrainFrom;
    if (!init.empty()) j["init"] = init;
    if (!backboneWeights.empty()) j["backbone_weights"] = backboneWeights;
    return j;
}

LetrTrainConfig LetrTrainConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    using train::checkKeys;
    using train::readKey;
    checkKeys(j, {"model", "seed", "batch_size", "coarse_steps", "fine_steps", "focal_steps", "lr", "lr_backbone",
                  "weight_decay", "lr_gamma", "lr_drop_coarse", "lr_drop_fine", "lr_schedule", "lr_final", "lr_warmup", "clip_max_norm", "ema_decay", "checkpoint_every",
                  "threads", "val_every", "val_data", "val_images", "train_backbone_bn", "loss", "augment", "aux", "denoise",
                  "memory_position_coef", "query_groups", "bf16_backbone", "backbone_train_from", "init", "backbone_weights"},
              source);
    LetrTrainConfig c;
    if (j.contains("model")) {
        // Keys not given keep the small CPU model's values.
        if (!j["model"].is_object()) throw Error(source + ": \"model\" must be an object");
        c.model = LetrConfig::fromJson(train::overlay(smallModel().toJson(), j["model"]), source + " (model)");
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
    if (j.contains("lr_schedule")) {
        std::string sched;
        readKey(j, "lr_schedule", sched, source);
        if (sched != "step" && sched != "cosine")
            throw Error(source + ": lr_schedule must be \"step\" or \"cosine\", got \"" + sched + "\"");
        c.lrCosine = sched == "cosine";
    }
    readKey(j, "lr_final", c.lrFinal, source);
    readKey(j, "lr_warmup", c.lrWarmup, source);
    readKey(j, "clip_max_norm", c.clipMaxNorm, source);
    readKey(j, "ema_decay", c.emaDecay, source);
    readKey(j, "checkpoint_every", c.checkpointEvery, source);
    readKey(j, "threads", c.threads, source);
    readKey(j, "val_every", c.valEvery, source);
    readKey(j, "val_data", c.valData, source);
    readKey(j, "val_images", c.valImages, source);
    readKey(j, "train_backbone_bn", c.trainBackboneBn, source);
    readKey(j, "init", c.init, source);
    readKey(j, "backbone_weights", c.backboneWeights, source);
    readKey(j, "memory_position_coef", c.memoryPositionCoef, source);
    readKey(j, "query_groups", c.queryGroups, source);
    readKey(j, "bf16_backbone", c.bf16Backbone, source);
    readKey(j, "backbone_train_from", c.backboneTrainFrom, source);
    if (j.contains("loss")) {
        const auto& l = j["loss"];
        const std::string w = source + " (loss)";
        checkKeys(l, {"cost_class", "cost_line", "cls_coef", "line_coef", "eos_coef", "gamma", "quality_tau"}, w);
        readKey(l, "cost_class", c.loss.costClass, w);
        readKey(l, "cost_line", c.loss.costLine, w);
        readKey(l, "cls_coef", c.loss.clsCoef, w);
        readKey(l, "line_coef", c.loss.lineCoef, w);
        readKey(l, "eos_coef", c.loss.eosCoef, w);
        readKey(l, "gamma", c.loss.gamma, w);
        readKey(l, "quality_tau", c.loss.qualityTau, w);
    }
    if (j.contains("aux")) c.aux = DenseAuxConfig::fromJson(j["aux"], source);
    if (j.contains("denoise")) c.denoise = DenoiseConfig::fromJson(j["denoise"], source);
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
    return fromJson(readJsonFile(path, "training config"), path);
}

std::vector<std::string> letrSeriesNames(const LetrTrainConfig& cfg, int worldSize) {
    std::vector<std::string> s{"loss/total", "loss/cls", "loss/l1"};
    const int64_t layers = std::max(cfg.model.coarseDecLayers, cfg.model.fineStage ? cfg.model.fineDecLayers : 0);
    for (int64_t k = 0; k < layers; ++k) {
        s.push_back("loss/cls_layer_" + std::to_string(k));
        s.push_back("loss/l1_layer_" + std::to_string(k));
    }
    for (const char* n : {"lr", "grad_norm", "throughput", "phase"}) s.push_back(n);
    if (cfg.valEvery > 0)
        for (const char* n : {"val/sAP10", "val/sAP15", "val/APH"}) s.push_back(n);
    if (cfg.aux.enabled)
        for (const char* n : {"loss/aux", "loss/aux_line", "loss/aux_junction", "loss/aux_direction", "loss/aux_offset",
                              "loss/aux_position"})
            s.push_back(n);
    if (cfg.denoise.enabled)
        for (const char* n : {"loss/dn", "loss/dn_cls", "loss/dn_l1"}) s.push_back(n);
    if (cfg.memoryPositionCoef > 0) s.push_back("loss/mem_position");
    if (cfg.queryGroups > 0) s.push_back("loss/groups");
    for (const auto& n : dist::seriesNames(worldSize)) s.push_back(n);
    return s;
}

std::string letrValidationSpec(const LetrTrainConfig& cfg, const std::string& dataDescription) {
    if (!cfg.valData.empty()) return cfg.valData;
    // describe() of procedural data: "procedural:COUNT:SEED:WxH[:SCENES] (N images)". The
    // held-out images are rooms whatever the training scenes: the evaluation set's kind.
    uint64_t seed = 0;
    std::string size = "256x256";
    const std::string prefix = "procedural:";
    if (dataDescription.rfind(prefix, 0) == 0) {
        std::vector<std::string> parts;
        const std::string spec = dataDescription.substr(0, dataDescription.find(' '));
        std::stringstream in(spec.substr(prefix.size()));
        for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
        if (parts.size() == 3 || parts.size() == 4) {
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
    // fine_lines "refine": the head's output is a correction of the coarse line, so its last layer
    // starts at zero and the fine stage starts from the coarse stage's lines.
    if (model.config().fineRefinesCoarse)
        for (auto& p : params)
            if (p.key().rfind("lines_embed.layers.2.", 0) == 0) p.value().zero_();   // MLP of 3 layers
}

std::vector<train::AdamW::Param> trainable(LetrModel& model, bool fineStage, double lrScaleBackbone,
                                           bool trainBackboneBn, int backboneTrainFrom) {
    std::vector<train::AdamW::Param> out;
    for (auto& p : model.named_parameters()) {
        const std::string& n = p.key();
        const bool isBackbone = n.rfind("backbone.", 0) == 0, isCoarse = n.rfind("letr.", 0) == 0;
        if (n.rfind("proposal.", 0) == 0) {   // M-LSD's proposal decoder: never trained
            p.value().set_requires_grad(false);
            continue;
        }
        // batch-norm weight / bias (mlsd_tiny's extra block has convolution biases)
        const bool isBn = isBackbone && p.value().dim() == 1 && n.find(".body.extra.") == std::string::npos;
        // lr_backbone 0 freezes the backbone in the coarse phase too: no gradient is computed for
        // it; backbone_train_from freezes the stages before the one it names.
        const bool backboneTrains = isBackbone && lrScaleBackbone > 0 && (trainBackboneBn || !isBn) &&
                                    backboneParamStage(n) >= backboneTrainFrom;
        const bool train = fineStage ? !(isBackbone || isCoarse) : isCoarse || backboneTrains;
        p.value().set_requires_grad(train);
        if (train) out.push_back({n, p.value(), isBackbone ? lrScaleBackbone : 1.0});
    }
    return out;
}

// The lr of step t of a phase of `steps` steps: step decay every `drop` steps, or the cosine;
// either times the linear warmup ((t + 1) / lr_warmup) over the phase's first lr_warmup steps.
double phaseLr(const LetrTrainConfig& c, int64_t drop, int64_t t, int64_t steps) {
    const double warm = c.lrWarmup > 0 && t < c.lrWarmup ? double(t + 1) / double(c.lrWarmup) : 1.0;
    if (c.lrCosine) return warm * train::warmupCosine(c.lr, c.lr * c.lrFinal, 0, std::max<int64_t>(steps - 1, 1), t);
    return warm * train::stepDecay(c.lr, c.lrGamma, drop, t);
}

// (phase index, phase begin, lr) of step t under a config.
std::tuple<int, int64_t, double> scheduleAt(const LetrTrainConfig& c, int64_t t) {
    if (t < c.coarseSteps || !c.model.fineStage) return {0, 0, phaseLr(c, c.lrDropCoarse, t, c.coarseSteps)};
    const int64_t f = c.coarseSteps;
    if (t < f + c.fineSteps) return {1, f, phaseLr(c, c.lrDropFine, t - f, c.fineSteps)};
    const int64_t g = f + c.fineSteps;
    // The focal phase starts the fine phase's schedule again (lr_drop_fine, or its own cosine).
    return {2, g, phaseLr(c, c.lrDropFine, t - g, c.focalSteps)};
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

// Keys of the training config a resumed run may change: they do not affect the weights (the
// schedule is checked by sameHistory; old checkpoints lack the validation keys; "init" only
// acts before the first step, and the checkpoint keeps what it decided).
const std::vector<std::string> kResumeMayChange = {"checkpoint_every", "threads",        "coarse_steps",
                                                   "fine_steps",       "focal_steps",    "lr_drop_coarse",
                                                   "lr_drop_fine",     "val_every",      "val_data",
                                                   "val_images",       "init",           "backbone_weights"};

std::vector<Phase> phasesOf(const LetrTrainConfig& cfg) {
    std::vector<Phase> phases;
    phases.push_back({"coarse", 0, cfg.coarseSteps, false, false});
    if (cfg.model.fineStage) {
        phases.push_back({"fine", cfg.coarseSteps, cfg.fineSteps, true, false});
        phases.push_back({"focal", cfg.coarseSteps + cfg.fineSteps, cfg.focalSteps, true, true});
    }
    return phases;
}

std::unique_ptr<data::LineDataset> openValidation(const LetrTrainConfig& cfg, const data::LineDataset& trainData) {
    if (cfg.valEvery <= 0) return nullptr;
    const std::string valSpec = letrValidationSpec(cfg, trainData.describe());
    std::unique_ptr<data::LineDataset> valDs;
    try {
        valDs = data::openLineDataset(valSpec);
    } catch (const Error& e) {
        throw Error(std::string("LETR training: validation data: ") + e.what());
    }
    if (valDs->size() < 1) throw Error("LETR training: validation dataset '" + valSpec + "' is empty");
    return valDs;
}

// The positional queries of cfg.query_groups extra groups (training only): [G, N, d],
// N(0, 1) like the model's query_embed, deterministic from the seed.
class QueryGroupsImpl : public torch::nn::Module {
public:
    QueryGroupsImpl(int64_t groups, int64_t queries, int64_t d, uint64_t seed) {
        weight = register_parameter("weight", torch::empty({groups, queries, d}));
        torch::NoGradGuard ng;
        at::Generator gen = at::detail::createCPUGenerator(seed ^ 0x6a0b5);
        weight.normal_(0.0, 1.0, gen);
    }
    torch::Tensor weight;
};
TORCH_MODULE(QueryGroups);

// One LETR training run: its data, model, files and position.
struct LetrRun {
    const LetrTrainConfig& cfg;
    const std::string& dataSpec;
    train::Control& control;
    train::RunFiles files;
    std::unique_ptr<data::LineDataset> ds, valDs;
    std::shared_ptr<LetrModel> model;
    DenseLineHead auxHead{nullptr};   // cfg.aux.enabled: the dense head (training only)
    LineQueryEncoder dnEncoder{nullptr};   // cfg.denoise.enabled: noised lines -> queries (training only)
    MemoryPositionHead memPos{nullptr};    // cfg.memory_position_coef > 0: memory -> cell centre (training only)
    QueryGroups groups{nullptr};           // cfg.query_groups > 0: the extra groups' queries (training only)
    nlohmann::json cfgJson;
    bool resume = false;
    int64_t step = 0;
    train::TrainState resumed;
    int optimPhase = -1;   // the phase whose optimizer state `resumed` holds
    bool initFine = false;   // the fine stage came from cfg.init: the fine phase does not copy the coarse one
    dist::Communicator* comm = nullptr;   // a distributed run (else null)
    int rank = 0, world = 1;
    torch::Device device{torch::kCPU};   // where the model and its gradients live
    // This rank's rows of each step's batch: [rowBegin, rowEnd) of batch_size.
    int64_t rowBegin() const { return cfg.batchSize / world * rank; }
    int64_t rowEnd() const { return cfg.batchSize / world * (rank + 1); }
    std::unique_ptr<train::WeightEma> ema;   // cfg.emaDecay > 0: the weight average ("ema.*" in checkpoint.h5)
    BackboneMode backbone;   // the backbone's precision and layout in training steps
};

// The training-only modules of a run and their tensors' prefix in checkpoint.h5 ("aux.<prefix>...").
std::vector<std::pair<std::string, torch::nn::Module*>> trainingOnlyModules(LetrRun& run) {
    std::vector<std::pair<std::string, torch::nn::Module*>> m;
    if (run.auxHead) m.emplace_back("dense.", run.auxHead.get());
    if (run.dnEncoder) m.emplace_back("denoise.", run.dnEncoder.get());
    if (run.memPos) m.emplace_back("mempos.", run.memPos.get());
    if (run.groups) m.emplace_back("groups.", run.groups.get());
    return m;
}

std::map<std::string, torch::Tensor> withoutPrefix(const std::map<std::string, torch::Tensor>& t, const std::string& prefix) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& [k, v] : t)
        if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
    return out;
}

std::string shapeText(const torch::Tensor& t) { return h5::shapeString(std::vector<int64_t>(t.sizes().begin(), t.sizes().end())); }

// cfg.init: the starting weights of the model and, from a run's checkpoint.h5, of the
// training-only modules. Tensors the file lacks (a coarse-only file for a two-stage model) keep
// their random initialization. Sets run.initFine when the file has a fine stage.
void initFromFile(LetrRun& run) {
    const std::string& path = run.cfg.init;
    const std::shared_ptr<LetrModel> src = loadLetr(path);   // errors name the file
    std::map<std::string, torch::Tensor> t = train::moduleTensors(*src);
    const std::map<std::string, torch::Tensor> mine = train::moduleTensors(*run.model);
    for (const auto& [k, v] : t) {
        const auto it = mine.find(k);
        if (it == mine.end())
            throw Error(path + " (init): tensor '" + k + "' does not exist in this run's model (a different architecture?)");
        if (!v.sizes().equals(it->second.sizes()))
            throw Error(path + " (init): tensor '" + k + "' has shape " + shapeText(v) + ", this run's model needs " +
                        shapeText(it->second));
    }
    for (const auto& [k, v] : mine) t.emplace(k, v);
    train::loadModuleTensors(*run.model, t, path + " (init)");
    run.initFine = src->config().fineStage && run.cfg.model.fineStage;
    if (loadCheckpoint(path).family != "letr-train") return;
    const train::TrainState st = train::loadTrainState(path, "letr-train");
    for (auto& [prefix, module] : trainingOnlyModules(run)) {
        const auto aux = withoutPrefix(st.aux, prefix);
        if (!aux.empty()) train::loadModuleTensors(*module, aux, path + " (init, " + prefix + "*)");
    }
}

// Restores model, step and optimizer phase from the run's checkpoint. The schedule may change
// only where the steps already done are unaffected.
void resumeRun(LetrRun& run) {
    const std::string& path = run.files.checkpoint;
    run.resumed = train::loadResumeState(path, "letr-train", run.cfgJson, kResumeMayChange, run.dataSpec);
    const LetrTrainConfig old = LetrTrainConfig::fromJson(run.resumed.meta["config"], path);
    train::loadModuleTensors(*run.model, run.resumed.model, path);
    for (auto& [prefix, module] : trainingOnlyModules(run))
        train::loadModuleTensors(*module, withoutPrefix(run.resumed.aux, prefix), path + " (" + prefix + "*)");
    run.step = run.resumed.meta.value("step", int64_t(0));
    run.optimPhase = run.resumed.meta.value("optim_phase", -1);
    run.initFine = run.resumed.meta.value("init_fine", false);
    if (run.ema) run.ema->loadState(*run.model, withoutPrefix(run.resumed.aux, "ema."), path);
    train::noteResumed(path, run.step);
    if (run.step < 0 || run.step > old.totalSteps()) throw Error(path + ": bad step " + std::to_string(run.step));
    if (run.step > run.cfg.totalSteps() || !sameHistory(old, run.cfg, run.step))
        throw Error(path + ": the new schedule (step counts, lr drops) differs from the old one within the " +
                    std::to_string(run.step) + " steps already done; resume cannot change the past");
}

RunLogWriter openLetrRunLog(const LetrRun& run) {
    nlohmann::json logConfig = run.cfgJson;
    logConfig["data"] = run.dataSpec;
    logConfig["data_description"] = run.ds->describe();
    logConfig["series"] = letrSeriesNames(run.cfg, run.world);
    logConfig["total_steps"] = run.cfg.totalSteps();
    logConfig["world_size"] = run.world;
    if (run.valDs) logConfig["val_data_description"] = run.valDs->describe();
    if (run.rank != 0) return RunLogWriter::memoryOnly(logConfig, letrSeriesNames(run.cfg, run.world));
    return train::openRunLog(run.files.runLog, logConfig, letrSeriesNames(run.cfg, run.world), run.resume ? run.step : -1);
}

// The image and normalized target lines of row `b` of the batch of `step` (augmented or just
// resized): a function of (seed, step, b) alone.
std::pair<torch::Tensor, torch::Tensor> loadRow(const LetrRun& run, int64_t step, int64_t b) {
    const LetrTrainConfig& cfg = run.cfg;
    const int64_t idx = train::shuffledIndex(cfg.seed, run.ds->size(), step * cfg.batchSize + b);
    data::LineSample s = run.ds->get(idx);
    if (cfg.augmentEnabled) {
        std::mt19937_64 rng(train::mixSeed(cfg.seed, uint64_t(step), uint64_t(100 + b)));
        s = data::augment(s, cfg.augment, rng);
    } else {
        auto hw = cfg.model.resizedSize(s.image.rows, s.image.cols);
        if (hw[0] != s.image.rows || hw[1] != s.image.cols) s = data::resizeSample(s, int(hw[1]), int(hw[0]));
    }
    auto t = letrInputTensor(s.image, cfg.model);
    const float W = float(s.image.cols), H = float(s.image.rows);
    auto l = s.lines.defined() && s.lines.numel() ? s.lines.to(torch::kFloat).reshape({-1, 4}) : torch::zeros({0, 4});
    return {t, l / torch::tensor({W, H, W, H})};
}

// The images and normalized target lines of this rank's rows of the batch of `step`. `parallel`
// (an accelerator's prefetch, whose CPU cores are otherwise idle) makes the rows on threads of
// their own; the rows are the same either way.
void loadBatch(const LetrRun& run, int64_t step, std::vector<torch::Tensor>& images, std::vector<torch::Tensor>& targets,
               bool parallel = false) {
    if (parallel && run.rowEnd() - run.rowBegin() > 1) {
        std::vector<std::future<std::pair<torch::Tensor, torch::Tensor>>> rows;
        for (int64_t b = run.rowBegin(); b < run.rowEnd(); ++b)
            rows.push_back(std::async(std::launch::async, [&run, step, b] {
                return loadRow(run, step, b);
            }));
        for (auto& r : rows) {
            auto [t, l] = r.get();   // rethrows a row's error
            images.push_back(t);
            targets.push_back(l);
        }
        return;
    }
    for (int64_t b = run.rowBegin(); b < run.rowEnd(); ++b) {
        auto [t, l] = loadRow(run, step, b);
        images.push_back(t);
        targets.push_back(l);
    }
}

// On an accelerator the CPU would sit idle while the device computes: the next step's batch is
// made on a second thread meanwhile. loadBatch depends on the step alone, so the batches (and
// the run) are the same as without it. Off on the CPU, whose cores are already busy.
class BatchPrefetch {
public:
    explicit BatchPrefetch(bool on) : on_(on) {}
    ~BatchPrefetch() {
        if (next_.valid()) next_.wait();
    }
    void start(const LetrRun& run, int64_t step) {
        if (!on_) return;
        step_ = step;
        next_ = std::async(std::launch::async, [&run, step] {
            std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> b;
            loadBatch(run, step, b.first, b.second, /*parallel=*/true);
            return b;
        });
    }
    void take(const LetrRun& run, int64_t step, std::vector<torch::Tensor>& images, std::vector<torch::Tensor>& targets) {
        if (next_.valid() && step_ == step) {
            auto b = next_.get();   // rethrows the loader's error
            images = std::move(b.first);
            targets = std::move(b.second);
            return;
        }
        if (next_.valid()) next_.wait();
        loadBatch(run, step, images, targets);
    }

private:
    bool on_;
    int64_t step_ = -1;
    std::future<std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>> next_;
};

std::map<std::string, double> stepMetrics(const LetrLoss& loss, double lr, double gradNorm, double imagesPerSecond,
                                          size_t phase, double total) {
    std::map<std::string, double> m;
    m["loss/total"] = total;
    m["loss/cls"] = loss.clsPerLayer.back();
    m["loss/l1"] = loss.l1PerLayer.back();
    for (size_t k = 0; k < loss.clsPerLayer.size(); ++k) {
        m["loss/cls_layer_" + std::to_string(k)] = loss.clsPerLayer[k];
        m["loss/l1_layer_" + std::to_string(k)] = loss.l1PerLayer[k];
    }
    m["lr"] = lr;
    m["grad_norm"] = gradNorm;
    m["throughput"] = imagesPerSecond;
    m["phase"] = double(phase);
    return m;
}

// A distributed step: the whole batch's loss values (the mean of the ranks' parts, whose
// denominators are the whole batch's) into `loss`/`total`, and each rank's throughput.
void gatherStepValues(LetrRun& run, LetrLoss& loss, double& total, std::map<std::string, double>& auxValues,
                      double imagesPerSecond, std::map<std::string, double>& extra) {
    if (!run.comm) return;
    std::vector<double> v{total};
    v.insert(v.end(), loss.clsPerLayer.begin(), loss.clsPerLayer.end());
    v.insert(v.end(), loss.l1PerLayer.begin(), loss.l1PerLayer.end());
    for (const auto& [k, x] : auxValues) v.push_back(x);   // the same keys on every rank
    std::vector<torch::Tensor> t{torch::tensor(v, torch::kFloat64)};
    run.comm->allReduce(t, true);
    auto a = t[0].accessor<double, 1>();
    total = a[0];
    const size_t L = loss.clsPerLayer.size();
    for (size_t k = 0; k < L; ++k) {
        loss.clsPerLayer[k] = a[int64_t(1 + k)];
        loss.l1PerLayer[k] = a[int64_t(1 + L + k)];
    }
    int64_t i = int64_t(1 + 2 * L);
    for (auto& kv : auxValues) kv.second = a[i++];
    extra = dist::stepSeries(run.comm, imagesPerSecond);
}

// The whole batch's loss denominators, shared by the ranks (see LossNormalizers).
LossNormalizers sharedNormalizers(LetrRun& run, const std::vector<torch::Tensor>& targets, int64_t numEntities,
                                  const LetrLossConfig& lossCfg) {
    const LossNormalizers local = batchNormalizers(targets, numEntities, lossCfg);
    double gt = 0;
    for (const auto& g : targets) gt += double(g.numel() ? g.size(0) : 0);
    std::vector<torch::Tensor> t{torch::tensor({local.clsWeight, gt}, torch::kFloat64)};
    run.comm->allReduce(t);
    const double W = double(run.world);
    return {t[0][0].item<double>() / W, std::max(1.0, t[0][1].item<double>()) / W};
}

// The model's metrics on the first val_images validation images, for the last decoder layer of
// one stage (no LSD). Eval mode, no grad, no training random numbers (the next step reseeds
// anyway); evaluateLetr restores the training flag.
eval::LineMetrics evaluateLastLayer(const LetrRun& run, bool fineStage, std::vector<double> thresholds) {
    eval::LetrEvalOptions eo;
    eo.allLayers = false;
    eo.lsd = false;
    eo.thresholds = std::move(thresholds);
    eo.maxImages = run.cfg.valImages;
    eo.coarseOnly = !fineStage;
    const auto r = eval::evaluateLetr(*run.model, *run.valDs, eo);
    const std::string key = fineStage ? "fine_" + std::to_string(run.cfg.model.fineDecLayers)
                                      : "coarse_" + std::to_string(run.cfg.model.coarseDecLayers);
    return r.row(key).metrics;
}

// Validation sAP / APH (percent, as the paper's tables and `glimpse eval letr` print them) of
// the last decoder layer of the stage being trained (of the weight average, when there is one).
void validate(LetrRun& run, const Phase& ph, RunLogWriter& log) {
    std::map<std::string, torch::Tensor> trained;   // with weight averaging, validate the average
    if (run.ema) {
        trained = train::moduleTensors(*run.model);
        run.ema->copyTo(*run.model);
    }
    const eval::LineMetrics vm = evaluateLastLayer(run, ph.fineStage, {10, 15});
    if (run.ema) train::loadModuleTensors(*run.model, trained, "LETR training (weights after validation)");
    log.append("val/sAP10", run.step, 100 * vm.sAPAt(10));
    log.append("val/sAP15", run.step, 100 * vm.sAPAt(15));
    log.append("val/APH", run.step, 100 * vm.APH);
    log.flush();
}

// The display threshold stored in model.h5: the score at which the final model's best sF10 on
// the validation images is reached (its last stage's last decoder layer), below 1; 0 (not set)
// when no prediction matches.
double validationThreshold(const LetrRun& run) {
    const eval::LineMetrics m = evaluateLastLayer(run, run.cfg.model.fineStage, {10});
    return std::clamp(eval::maxFScoreThreshold(m.curves.at(0)), 0.0, 0.99);
}

// Writes checkpoint.h5 (rank 0 only): model, optimizer, training-only modules, weight average.
void saveCheckpoint(LetrRun& run, const Phase& ph, size_t pi, const train::AdamW& opt, RunLogWriter& log) {
    if (run.rank != 0) return;   // rank 0 writes the checkpoints
    // Rows up to this step reach the log before the checkpoint does: a kill right after the
    // checkpoint must not leave a resumed log with a gap (docs/crash-safety.md).
    log.flush();
    train::TrainState st = train::stepState(run.cfgJson, run.dataSpec, run.step, *run.model, opt);
    for (auto& [prefix, module] : trainingOnlyModules(run))
        for (auto& [k, v] : train::moduleTensors(*module)) st.aux[prefix + k] = v;
    st.meta["phase"] = ph.name;
    st.meta["optim_phase"] = int(pi);
    if (run.initFine) st.meta["init_fine"] = true;
    if (run.ema)
        for (auto& [k, v] : run.ema->state()) st.aux["ema." + k] = v;
    train::saveTrainState(run.files.checkpoint, "letr-train", st);
}

// The parameters phase `ph` trains (the others stop requiring grad): the model's (trainable())
// and, in the coarse phase, the training-only modules'.
std::vector<train::AdamW::Param> phaseParams(LetrRun& run, const Phase& ph) {
    const LetrTrainConfig& cfg = run.cfg;
    auto params = trainable(*run.model, ph.fineStage, cfg.lrBackbone / cfg.lr, cfg.trainBackboneBn,
                            backboneStageIndex(cfg.backboneTrainFrom));
    for (auto& [prefix, module] : trainingOnlyModules(run))
        for (auto& p : module->named_parameters()) {
            // The dense head and the denoising encoder train with the coarse stage; the memory
            // position head has a map for each stage.
            const bool on = (run.memPos && module == run.memPos.get()) || !ph.fineStage;
            p.value().set_requires_grad(on);
            if (on) params.push_back({"aux." + prefix + p.key(), p.value(), 1.0});
        }
    return params;
}

// The sum of the extra query groups' LETR losses (each group matched on its own).
torch::Tensor groupsLoss(const LetrStageOutput& so, int64_t groups, int64_t N, const std::vector<torch::Tensor>& targets,
                         const LetrLossConfig& lossCfg, const LossNormalizers* norm) {
    torch::Tensor sum;
    for (int64_t g = 0; g < groups; ++g) {
        auto l = letrLoss(so.groupLogits.narrow(2, g * N, N), so.groupLines.narrow(2, g * N, N), targets, lossCfg, norm);
        sum = sum.defined() ? sum + l.total : l.total;
    }
    return sum;
}

// The step's objective: the main loss plus the training-only terms of this phase (query
// groups, dense maps, query denoising, memory positions); their logged values go to auxValues.
torch::Tensor addTrainingTerms(LetrRun& run, const Phase& ph, bool aux, const LetrOutput& out,
                               const LetrStageOutput& so, const std::vector<torch::Tensor>& targets,
                               const DenoiseBatch& dnBatch, const LetrLossConfig& lossCfg, const LossNormalizers& norm,
                               torch::Tensor objective, std::map<std::string, double>& auxValues) {
    const LetrTrainConfig& cfg = run.cfg;
    const bool dn = run.cfg.denoise.enabled && !ph.fineStage;
    if (run.groups) {
        const torch::Tensor g = groupsLoss(so, cfg.queryGroups, cfg.model.numQueries, targets, lossCfg,
                                           run.comm ? &norm : nullptr);
        auxValues["loss/groups"] = g.item<double>() / double(cfg.queryGroups);
        objective = (objective + g) / double(cfg.queryGroups + 1);
    }
    if (aux) {
        std::vector<torch::Tensor> cf, cc;
        for (const auto& f : out.features) {
            cf.push_back(f[size_t(cfg.model.fineLevel - 2)]);
            cc.push_back(f[size_t(cfg.model.coarseLevel - 2)]);
        }
        const DenseLoss dl = denseBatchLoss(run.auxHead, cf, cc, out.inputSizes, targets, cfg.aux,
                                            {cfg.model.fineLevel, cfg.model.coarseLevel},
                                            run.backbone.dtype);
        objective = objective + cfg.aux.coef * dl.total;
        auxValues.insert({{"loss/aux", cfg.aux.coef * dl.total.item<double>()}, {"loss/aux_line", dl.line},
                          {"loss/aux_junction", dl.junction}, {"loss/aux_direction", dl.direction},
                          {"loss/aux_offset", dl.offset}, {"loss/aux_position", dl.position}});
    }
    if (out.stages[0].dnLogits.defined()) {
        double gt = 0;
        for (const auto& g : targets) gt += double(g.numel() ? g.size(0) : 0);
        const double denom = run.comm ? norm.numGt : std::max(1.0, gt);
        const DenoiseLoss dl = denoiseLoss(out.stages[0].dnLogits, out.stages[0].dnLines, dnBatch, lossCfg, denom);
        objective = objective + cfg.denoise.coef * dl.total;
        auxValues["loss/dn"] = cfg.denoise.coef * dl.total.item<double>();
        auxValues["loss/dn_cls"] = dl.clsPerLayer.back();
        auxValues["loss/dn_l1"] = dl.l1PerLayer.back();
    } else if (dn) {   // no line in this batch: the series still get a row on every rank
        auxValues["loss/dn"] = auxValues["loss/dn_cls"] = auxValues["loss/dn_l1"] = 0.0;
    }
    if (run.memPos) {
        auto& map = ph.fineStage ? run.memPos->fine : run.memPos->coarse;
        const auto mp = memoryPositionLoss(map, so.memory, so.height, so.width, so.validSizes, out.inputSizes, so.level);
        objective = objective + cfg.memoryPositionCoef * mp;
        auxValues["loss/mem_position"] = mp.item<double>();
    }
    return objective;
}

// Trains phase `pi` from run.step to its end; false when the run was stopped (its checkpoint
// written and the log closed).
bool trainPhase(LetrRun& run, size_t pi, const Phase& ph, RunLogWriter& log, train::StepReporter& rep) {
    const LetrTrainConfig& cfg = run.cfg;
    if (ph.name == "fine" && run.step == ph.begin && !run.initFine) initFineFromCoarse(*run.model);
    // The average restarts with every phase (a resumed run inside a phase continues its own).
    if (run.ema && run.step == ph.begin) run.ema->reset(*run.model);
    auto params = phaseParams(run, ph);
    // The dense head trains with the backbone (coarse phase); afterwards it is idle.
    const bool aux = run.auxHead && !ph.fineStage;
    const bool dn = cfg.denoise.enabled && !ph.fineStage;   // query denoising: coarse stage only
    std::unique_ptr<dist::GradientReducer> reducer;
    if (run.comm) {
        std::vector<torch::Tensor> ts;
        for (const auto& p : params) ts.push_back(p.tensor);
        reducer = std::make_unique<dist::GradientReducer>(run.comm, ts);
    }
    train::AdamW::Options o;
    o.lr = cfg.lr;
    o.weightDecay = cfg.weightDecay;
    train::AdamW opt(params, o);
    if (run.resume && run.optimPhase == int(pi) && run.step > ph.begin) opt.loadState(run.resumed.optimizer, run.files.checkpoint);
    LetrLossConfig lossCfg = cfg.loss;
    lossCfg.focal = ph.focal;
    auto save = [&] { saveCheckpoint(run, ph, pi, opt, log); };
    BatchPrefetch prefetch(!run.device.is_cpu());
    while (run.step < ph.begin + ph.steps) {
        if (dist::anyRankStops(run.comm, !run.control.checkpoint())) {
            save();
            train::endStoppedRun(log, rep, run.step, run.files.checkpoint);
            return false;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const double lr = std::get<2>(scheduleAt(cfg, run.step));
        opt.setLr(lr);
        torch::manual_seed(train::mixSeed(cfg.seed, uint64_t(run.step), 1));
        std::vector<torch::Tensor> images, targets;
        prefetch.take(run, run.step, images, targets);
        if (run.step + 1 < ph.begin + ph.steps) prefetch.start(run, run.step + 1);
        LetrForwardOptions fo;
        fo.coarseOnly = !ph.fineStage;
        fo.keepFeatures = aux;
        if (run.groups) fo.groupQueryEmbed = run.groups->weight;
        fo.backboneDtype = run.backbone.dtype;
        fo.backboneChannelsLast = run.backbone.channelsLast;
        DenoiseBatch dnBatch;
        if (dn) {
            std::vector<std::mt19937_64> rngs;
            for (int64_t b = run.rowBegin(); b < run.rowEnd(); ++b)
                rngs.emplace_back(train::mixSeed(cfg.seed, uint64_t(run.step), uint64_t(200 + b)));
            dnBatch = makeDenoiseBatch(targets, cfg.denoise, rngs);
            // A model with anchor queries embeds the noised lines itself (its anchor encoder).
            if (dnBatch.valid.size(1) > 0 && cfg.model.lineQueries()) fo.denoiseReference = dnBatch.noised;
            else if (dnBatch.valid.size(1) > 0) fo.denoiseQueryPos = run.dnEncoder->forward(dnBatch.noised);
        }
        auto out = run.model->forward(images, fo);
        const auto& so = out.stages[ph.fineStage ? 1 : 0];
        LossNormalizers norm;
        if (run.comm) norm = sharedNormalizers(run, targets, so.logits.size(2), lossCfg);
        auto loss = letrLoss(so.logits, so.lines, targets, lossCfg, run.comm ? &norm : nullptr);
        std::map<std::string, double> auxValues;
        const torch::Tensor objective =
            addTrainingTerms(run, ph, aux, out, so, targets, dnBatch, lossCfg, norm, loss.total, auxValues);
        double total = objective.item<double>();
        train::checkLossFinite(total, run.step, "LETR training");
        opt.zeroGrad();
        if (reducer) reducer->beginStep();
        objective.backward();
        if (reducer) reducer->finishStep();   // gradients averaged over the ranks
        const double gn = train::clipGradNorm(params, cfg.clipMaxNorm);
        opt.step();
        if (run.ema) run.ema->update(*run.model);
        ++run.step;
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::map<std::string, double> extra;
        gatherStepValues(run, loss, total, auxValues, double(run.rowEnd() - run.rowBegin()) / std::max(dt, 1e-9), extra);
        auto metrics = stepMetrics(loss, lr, gn, double(cfg.batchSize) / std::max(dt, 1e-9), pi, total);
        metrics.insert(extra.begin(), extra.end());
        metrics.insert(auxValues.begin(), auxValues.end());
        rep.report(run.step, ph.name, metrics);
        const bool phaseEnd = run.step == ph.begin + ph.steps;
        // The phase hands its average on: validation, the checkpoint, the next phase and model.h5.
        if (phaseEnd && run.ema) run.ema->copyTo(*run.model);
        if (run.valDs && run.rank == 0 && (run.step % cfg.valEvery == 0 || phaseEnd)) validate(run, ph, log);
        if (run.step % cfg.checkpointEvery == 0 || phaseEnd) {
            save();
            log.flush();
        }
    }
    return true;
}

} // namespace

BackboneMode trainingBackboneMode(bool bf16Backbone, const torch::Device& device, bool cpuBf16) {
    BackboneMode m;
    if (!bf16Backbone) return m;
    m.channelsLast = true;
    if (!device.is_cpu() || cpuBf16) m.dtype = torch::kBFloat16;
    else m.fellBack = true;
    return m;
}

void trainLetr(const LetrTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir, bool resume,
               train::Control& control, const train::ProgressFn& progress, dist::Communicator* comm,
               const torch::Device& device) {
    cfg.validate();
    const int world = comm ? comm->worldSize() : 1;
    if (world > 1 && !device.is_cpu())
        throw Error("distributed LETR training runs on the CPU (Gloo); --device " + device.str() + " needs one process");
    train::checkBatchDividesWorld(cfg.batchSize, world, "images");
    LetrRun run{cfg, dataSpec, control, {}, data::openLineDataset(dataSpec), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, cfg.toJson(), resume};
    if (run.ds->size() < 1) throw Error("dataset '" + dataSpec + "' is empty");
    run.files = train::runFiles(outDir);
    run.resume = train::resumeFrom(run.files.checkpoint, resume);   // none yet: start from step 0
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);   // the CLI also sets BLAS threads (setComputeThreads)
    run.valDs = openValidation(cfg, *run.ds);
    run.model = std::make_shared<LetrModel>(cfg.model, cfg.seed);
    run.model->train(true);
    run.model->setTrainBackboneBn(cfg.trainBackboneBn);
    if (cfg.aux.enabled)
        run.auxHead = DenseLineHead(cfg.model.levelChannels(cfg.model.fineLevel), cfg.model.levelChannels(cfg.model.coarseLevel),
                                    cfg.aux, cfg.seed);
    if (cfg.denoise.enabled && !cfg.model.lineQueries()) run.dnEncoder = LineQueryEncoder(cfg.model.hiddenDim, cfg.seed);
    if (cfg.memoryPositionCoef > 0) run.memPos = MemoryPositionHead(cfg.model.hiddenDim, cfg.seed);
    if (cfg.queryGroups > 0) run.groups = QueryGroups(cfg.queryGroups, cfg.model.numQueries, cfg.model.hiddenDim, cfg.seed);
    run.device = device;
    run.backbone = trainingBackboneMode(cfg.bf16Backbone, device, device.is_cpu() && cpuHasBf16());
    run.model->to(device);   // loading below copies into these tensors, on their device
    for (auto& [prefix, module] : trainingOnlyModules(run)) module->to(device);
    if (cfg.emaDecay > 0) run.ema = std::make_unique<train::WeightEma>(cfg.emaDecay);
    if (comm && world > 1) {
        run.comm = comm;
        run.rank = comm->rank();
        run.world = world;
    }
    if (run.resume) {
        resumeRun(run);
    } else {
        if (!cfg.backboneWeights.empty()) loadLetrBackbone(*run.model, cfg.backboneWeights);
        if (!cfg.init.empty()) initFromFile(run);
    }
    dist::broadcastModule(run.comm, *run.model);   // every rank holds rank 0's weights
    for (auto& [prefix, module] : trainingOnlyModules(run)) dist::broadcastModule(run.comm, *module);
    const std::vector<Phase> phases = phasesOf(cfg);
    RunLogWriter log = openLetrRunLog(run);
    train::StepReporter rep(log, progress, cfg.totalSteps(), run.step);
    try {
        for (size_t pi = 0; pi < phases.size(); ++pi) {
            const Phase& ph = phases[pi];
            if (ph.steps == 0 || run.step >= ph.begin + ph.steps) continue;
            if (!trainPhase(run, pi, ph, log, rep)) return;
        }
        run.model->train(false);
        for (auto& p : run.model->parameters()) p.set_requires_grad(true);
        if (run.rank == 0) {
            if (run.valDs) run.model->setScoreThreshold(validationThreshold(run));
            saveLetr(*run.model, run.files.model);
        }
        log.finish();
    } catch (const std::exception& e) {
        if (!log.closed()) log.fail(e.what());
        throw;
    }
}

} // namespace glimpse::letr
