#pragma once
// ConstellationNet / ProtoNet-baseline few-shot training (dissertation ch. 4, appendix 4.8.1
// and 4.8.6, scaled to a CPU budget; docs/decisions.md "ConstellationNet training").
//
// Standard classification scheme on the base classes (cross-entropy of the linear head on the
// pooled features of branch 1); with multi_branch, branch 2 also gets the prototypical loss of
// `proto_episodes` episodes per step (cosine prototype logits scaled by the learnable temp).
// AdamW, linear warmup + cosine decay, flip + pad-crop augmentation, every random number drawn
// from (seed, step), so a resumed run repeats an uninterrupted one. Periodic few-shot validation
// on the val classes; at the end, 5-way 1-shot and 5-shot evaluation on the novel classes.
//
// Config JSON (every key optional; unknown keys are an error):
//   {
//     "model": { ConstellationConfig JSON },  // num_classes / class_names come from the data
//     "seed": 0, "batch_size": 64, "steps": 3000, "warmup_steps": 100,
//     "lr": 2e-3, "min_lr": 1e-5, "weight_decay": 5e-4, "clip_max_norm": 5.0,
//     "augment": {"hflip": 0.5, "pad_crop": 4},
//     "proto_ways": 5, "proto_shots": 3, "proto_queries": 6, "proto_episodes": 1,
//     "val_every": 500, "val_episodes": 100, "val_shots": 1,   // 5-way, 15 queries
//     "final_episodes": 600,  // novel-class evaluation at the end (1 and 5 shots; 0: skip)
//     "checkpoint_every": 250,
//     "threads": 0
//   }
// Run folder (core/train/run.h): checkpoint.h5 (family "constellation-train"), run.h5 (series
// constellationSeriesNames(); eval final/novel_{1,5}shot_{acc,ci95}, final/train_images_per_second),
// model.h5 (family "constellation").
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/constellation/config.h"
#include "core/train/control.h"

namespace glimpse::dist {
class Communicator;
}

namespace glimpse::constellation {

struct ConstellationTrainConfig {
    nlohmann::json model = nlohmann::json::object();
    uint64_t seed = 0;
    int64_t batchSize = 64, steps = 3000, warmupSteps = 100;
    double lr = 2e-3, minLr = 1e-5, weightDecay = 5e-4, clipMaxNorm = 5.0;
    double hflip = 0.5;
    int64_t padCrop = 4;
    int64_t protoWays = 5, protoShots = 3, protoQueries = 6, protoEpisodes = 1;
    int64_t valEvery = 500, valEpisodes = 100, valShots = 1, finalEpisodes = 600;
    int64_t checkpointEvery = 250;
    int threads = 0;

    // The model config for the base classes of the data (glimpse::Error when the JSON's
    // num_classes / class_names disagree).
    ConstellationConfig modelConfig(const std::vector<std::string>& baseClasses, int64_t imageSize) const;
    void validate() const;   // glimpse::Error naming the field
    nlohmann::json toJson() const;
    static ConstellationTrainConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static ConstellationTrainConfig fromFile(const std::string& path);
};

// loss/train, loss/cls, loss/proto (multi-branch), train/acc, lr, grad_norm, throughput,
// val/acc (5-way val_shots-shot accuracy on the val classes), val/ci95.
std::vector<std::string> constellationSeriesNames(int worldSize = 1);   // + dist/* for W > 1

struct ConstellationTrainResult {
    bool finished = false;
    int64_t steps = 0;
    double novel1 = -1, novel1Ci = 0, novel5 = -1, novel5Ci = 0;   // final evaluation (finished runs)
    double imagesPerSecond = 0, seconds = 0;   // this process's training images per second
    int64_t parameters = 0;
    int rank = 0, worldSize = 1;   // a distributed run: only rank 0 evaluates and writes files
};

// Trains on the few-shot dataset `dataSpec` (core/data/fewshot.h) into `outDir`. The model's
// input size is model.image_size (default 32). With `resume`, continues from
// outDir/checkpoint.h5; a checkpoint of another model config (e.g. another cluster count) or
// data is refused naming the file. A stop request writes a checkpoint and returns.
// With `comm` (W processes, docs/distributed.md): each rank trains on its batch_size / W images
// of every batch (batch-norm statistics per rank; running statistics follow rank 0) and its
// share of the prototypical episodes (all of them when proto_episodes does not divide by W);
// gradients are averaged over the ranks; rank 0 alone validates, evaluates and writes files.
ConstellationTrainResult trainConstellation(const ConstellationTrainConfig& cfg, const std::string& dataSpec,
                                            const std::string& outDir, bool resume, train::Control& control,
                                            const train::ProgressFn& progress, dist::Communicator* comm = nullptr);

} // namespace glimpse::constellation
