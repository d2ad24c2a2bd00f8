#pragma once
// CoaT image-classification training (dissertation ch. 3.4 recipe, scaled down): AdamW with
// decoupled weight decay (none on biases, norms and CLS tokens), linear warmup + cosine decay,
// label smoothing, optional mixup / cutmix, gradient clipping, deterministic data order and
// augmentation from (seed, step), periodic validation, a live RunLog and atomic resumable
// checkpoints (core/train). Data: core/data/classification.h (Fashion-MNIST or class folders).
//
// Input pipeline (training and `glimpse infer` agree): every image is converted to RGB
// (grayscale replicated to 3 channels, so in_chans stays 3 and CoatModel::preprocess is used
// unchanged), optionally flipped / padded-and-cropped in pixel space, then preprocess()ed:
// resize the shorter side to model.resize (bicubic), center crop model.image_size, normalize.
//
// Config JSON (every key optional; unknown keys are an error):
//   {
//     "model": { CoatConfig JSON (config.h) },  // merged over {"variant": "coat_lite_tiny",
//                                              //   "image_size": 32, "resize": 32};
//                                              // num_classes / class_names come from the data
//     "seed": 0,               // model init, data order, augmentation, mixup
//     "batch_size": 64, "steps": 2000, "warmup_steps": 100,
//     "lr": 1e-3, "min_lr": 1e-5, "weight_decay": 0.05,
//     "label_smoothing": 0.1,
//     "mixup": 0, "cutmix": 0,  // Beta(alpha, alpha) parameters (0: off); both > 0: one of the
//     "mix_prob": 1.0,          //   two per batch (cutmix with "switch_prob"), applied to a batch
//     "switch_prob": 0.5,       //   with probability mix_prob
//     "clip_max_norm": 5.0,     // global-norm gradient clipping (0: off)
//     "augment": {"hflip": 0.5, "pad_crop": 2},   // flip probability; pad (black) + random crop
//     "train_subset": 0,        // train on a fixed random subset of this many images (0: all)
//     "val_subset": 2000,       // periodic validation on a fixed subset (0: all); the final
//                               //   validation always uses the whole validation split
//     "eval_every": 250, "checkpoint_every": 250,
//     "first_eval": 0,          // also validate at this step (an early point; 0: none)
//     "eval_batch": 256, "holdout_every": 10,   // class folders without train/ + val/
//     "threads": 0              // LibTorch intra-op threads (0: leave as is)
//   }
//
// Files in the output folder: run.h5 (RunLog: series coatSeriesNames(); eval final/val_acc,
// final/val_loss, final/confusion [K, K] (rows true class), final/val_size), checkpoint.h5
// (family "coat-train"), model.h5 (a normal CoaT checkpoint with class names; loadCoat reads it).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/models/coat/config.h"
#include "core/train/control.h"

namespace glimpse::data {
class ClassificationDataset;
}
namespace glimpse::dist {
class Communicator;
}

namespace glimpse::coat {

struct CoatTrainConfig {
    nlohmann::json model = defaultModelJson();   // overrides merged over defaultModelJson()
    uint64_t seed = 0;
    int64_t batchSize = 64, steps = 2000, warmupSteps = 100;
    double lr = 1e-3, minLr = 1e-5, weightDecay = 0.05;
    double labelSmoothing = 0.1;
    double mixup = 0, cutmix = 0, mixProb = 1.0, switchProb = 0.5;
    double clipMaxNorm = 5.0;
    double hflip = 0.5;
    int64_t padCrop = 2;
    int64_t trainSubset = 0, valSubset = 2000;
    int64_t evalEvery = 250, checkpointEvery = 250, evalBatch = 256, holdoutEvery = 10;
    int64_t firstEval = 0;   // an extra early validation at this step (0: none)
    int threads = 0;

    static nlohmann::json defaultModelJson();
    // The model config for a dataset with these classes (glimpse::Error if the JSON's
    // num_classes / class_names disagree with the data).
    CoatConfig modelConfig(const std::vector<std::string>& classNames) const;
    void validate() const;   // glimpse::Error naming the field
    nlohmann::json toJson() const;
    static CoatTrainConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static CoatTrainConfig fromFile(const std::string& path);
};

// loss/train, train/acc (batch accuracy against the dominant label), lr, grad_norm,
// throughput (training images/s), epoch, val/acc, val/loss; a distributed run of W ranks adds
// dist/world_size and dist/throughput_rank0 .. dist/throughput_rank<W-1> (each rank's images/s).
std::vector<std::string> coatSeriesNames(int worldSize = 1);

struct CoatTrainResult {
    bool finished = false;       // false: stopped (checkpoint written, no model.h5)
    int64_t steps = 0;           // steps done
    double valAcc = -1, valLoss = -1;   // final validation (whole split), finished runs only
    int64_t valSize = 0;
    double imagesPerSecond = 0;  // training images / training-step time in this process
    int64_t parameters = 0;
    int rank = 0, worldSize = 1; // a distributed run: only rank 0 validates and writes files
};

// Trains on `dataSpec` into `outDir` (created). With `resume`, continues from
// outDir/checkpoint.h5 and ends with the same weights as an uninterrupted run (the checkpoint's
// config must equal cfg except checkpoint_every, eval_every, val_subset, eval_batch, threads).
// A stop request writes a checkpoint and returns (finished = false). Throws glimpse::Error on
// bad data / config / checkpoint.
// With `comm` (a distributed run of W processes, docs/distributed.md): every rank trains on its
// batch_size / W rows of each step's batch (batch_size must divide by W), gradients are
// averaged over the ranks (dist::GradientReducer), and rank 0 alone validates and writes the run
// log (with world_size and per-rank throughput) and the checkpoints; the others keep their log
// in memory. Ranks start from rank 0's weights. A resumed run may have another world size: the
// data order and the augmentation draws depend on the global step and sample index only.
// (Mixup / cutmix pair images within each rank's rows.) A stop request on any rank stops all.
CoatTrainResult trainCoat(const CoatTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir,
                          bool resume, train::Control& control, const train::ProgressFn& progress,
                          dist::Communicator* comm = nullptr);

// Accuracy / mean cross-entropy of `model` on items [0, count) of a fixed permutation of `ds`
// (count <= 0: all), in eval mode without gradients; confusion [K, K] int64 when requested.
struct ClassEval {
    double acc = 0, loss = 0;
    int64_t count = 0;
    torch::Tensor confusion;
};
class CoatModel;
// onSample (results files, core/results): each item as evaluated: its dataset index, label,
// predicted class (the argmax the accuracy counts) and softmax probabilities [K] (CPU float).
// cancelled (polled between batches): stop early; the result then covers `count` items done.
using ClassSampleFn = std::function<void(int64_t, int64_t, int64_t, const torch::Tensor&)>;
// productDtype: the forward's CoatForwardOptions::productDtype (kBFloat16: `eval coat
// --precision bf16`, to check that bfloat16 keeps the top-1 of float32).
ClassEval evaluateClassifier(CoatModel& model, const data::ClassificationDataset& ds, int64_t count,
                             int64_t batch, bool confusion, const ClassSampleFn& onSample = {},
                             const std::function<bool()>& cancelled = {},
                             torch::ScalarType productDtype = torch::kFloat);

// Table 3.6 position-encoding ablation: the same config with neither, CRPE only, CPE only, both.
struct PeVariant {
    std::string name;   // "neither", "crpe", "cpe", "both"
    bool useCpe, useCrpe;
};
std::vector<PeVariant> peAblationVariants();
CoatTrainConfig withVariant(const CoatTrainConfig& cfg, const PeVariant& v);

// The final results of a finished run folder (run.h5 eval + model.h5 present), else
// finished = false.
CoatTrainResult finishedRunResult(const std::string& outDir);

} // namespace glimpse::coat
