#pragma once
// LETR training (dissertation ch. 2.3.5 and 2.4.2): the two-stage schedule (coarse stage with
// the backbone; then the fine stage initialized from the coarse transformer and heads, with
// backbone and coarse stage frozen; optionally a focal-loss fine-tuning phase of the fine
// stage), AdamW with weight decay, step decay, gradient clipping, batches of differently sized
// images with padding masks, deep supervision, a live RunLog, atomic resumable checkpoints.
//
// Config JSON (every key optional; unknown keys are an error):
//   {
//     "model": { LetrConfig JSON (config.h) },    // default: the small CPU model below
//     "seed": 0,                // model init, data order, augmentation and dropout
//     "batch_size": 4,
//     "coarse_steps": 3000, "fine_steps": 1500, "focal_steps": 0,
//     "lr": 1e-4, "lr_backbone": 1e-4,   // backbone lr (paper: 1e-5 with a pretrained one); 0
//                                          // freezes it (no backward pass through it)
//     "weight_decay": 1e-4, "lr_gamma": 0.1,
//     "lr_drop_coarse": 0, "lr_drop_fine": 0,     // step decay every K steps of a phase (0: off)
//     "lr_schedule": "step",    // "cosine": each phase's lr falls from lr to lr * lr_final along a
//     "lr_final": 0.01,         // half cosine (lr drops then must be 0); both keys absent when "step"
//     "lr_warmup": 0,           // each phase's first N steps ramp the lr linearly up to its
//                               // schedule (step t: (t + 1) / N of it); absent when 0
//     "clip_max_norm": 0.1,     // gradient clipping (global L2 norm; 0: off)
//     "ema_decay": 0,           // weight averaging (core/train/ema.h; 0: off): validation and
//                               // model.h5 use the average, and each phase ends by copying it
//                               // into the model (the next phase starts from it)
//     "checkpoint_every": 200,  // steps between checkpoints (and one at the end / on stop)
//     "threads": 0,             // LibTorch intra-op threads (0: leave as is)
//     "val_every": 500,         // validation every K steps and at the end of each phase (0: off)
//     "val_data": "",           // validation dataset spec ("": held-out procedural scenes, below)
//     "val_images": 16,         // images of val_data evaluated (batch 1, no LSD)
//     "loss": {"cost_class": 1, "cost_line": 5, "cls_coef": 1, "line_coef": 5,
//              "eos_coef": 0.1, "gamma": 2},
//     "augment": {"enabled": true, "hflip": 0.5, "vflip": 0.5, "min_short_side": 224,
//                 "max_short_side": 288, "max_long_side": 512, "crop": 0.5, "crop_min": 0.6,
//                 "brightness": 0.2, "contrast": 0.2, "saturation": 0.2},
//     "aux": {"enabled": false, "coef": 1, "channels": 64, "line_radius": 1,
//             "junction_sigma": 1, "stride": 8, "position_coef": 1},  // dense supervision (dense.h),
//                                                 // coarse phase only (the backbone trains there)
//     "denoise": {"enabled": false, "coef": 1, "noise": 0.2, "max_queries": 128},
//                                                 // query denoising (denoise.h), coarse phase
//     "memory_position_coef": 0, // > 0: regress every encoder-memory cell's position from the
//                                                 // memory (dense.h MemoryPositionHead), both phases
//     "bf16_backbone": false,   // the backbone's layers in bfloat16 during training steps
//                                                 // where the hardware has it, else float32
//                                                 // channels-last (trainingBackboneMode; validation
//                                                 // and model.h5 stay float32)
//     "backbone_train_from": "conv1", // the first backbone stage that trains (conv1, layer1..
//                                                 // layer4); earlier ones stay frozen, coarse phase
//     "backbone_weights": "",   // pretrained backbone weights (resources/mlsd_tiny.h5), fresh runs
//     "query_groups": 0         // extra groups of num_queries entities (Group DETR; training
//                                                 // only, "groups.*" in checkpoint.h5), both phases
//   }
// With "model": {"stages": "coarse"} only the coarse phase runs.
//
// Validation (series val/sAP10, val/sAP15, val/APH): core/eval/letr_eval on the first
// val_images images of val_data, for the last decoder layer of the stage being trained, with
// the model in eval mode. It draws no training random numbers, so a resumed run still equals
// an uninterrupted one. The val_* keys may change on resume. Default val_data: procedural
// scenes of seed (training seed + 1000) at the training images' size when the training data is
// procedural (letrValidationSpec), else 256 x 256 ones of seed 1000.
//
// Files in the output folder: run.h5 (RunLog: series letrSeriesNames(), config = this JSON plus
// "data" and "series"), checkpoint.h5 (training state, family "letr-train"), model.h5 (the
// final model, a normal LETR checkpoint that loadLetr reads; with validation on, its config's
// "score_threshold" is the score at which the final model's sF10 on the validation images is
// highest, which the app uses as the default display threshold).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/augment.h"
#include "core/models/letr/config.h"
#include "core/models/letr/dense.h"
#include "core/models/letr/denoise.h"
#include "core/models/letr/loss.h"
#include "core/train/control.h"

namespace glimpse::dist {
class Communicator;
}

namespace glimpse::letr {

struct LetrTrainConfig {
    LetrConfig model = smallModel();
    uint64_t seed = 0;
    int64_t batchSize = 4;
    int64_t coarseSteps = 3000, fineSteps = 1500, focalSteps = 0;
    double lr = 1e-4, lrBackbone = 1e-4, weightDecay = 1e-4, lrGamma = 0.1;
    int64_t lrDropCoarse = 0, lrDropFine = 0;
    bool lrCosine = false;   // "lr_schedule": "cosine" (else "step")
    double lrFinal = 0.01;   // "lr_final": the cosine's end, a fraction of lr
    int64_t lrWarmup = 0;    // "lr_warmup": linear warmup steps at the start of each phase
    double clipMaxNorm = 0.1;
    // Exponential moving average of the weights (0: off). It restarts at every phase's first
    // step from the model's weights and replaces them at the phase's end; validation reads it.
    double emaDecay = 0;
    int64_t checkpointEvery = 200;
    int threads = 0;
    int64_t valEvery = 500;
    std::string valData;
    int64_t valImages = 16;
    LetrLossConfig loss;
    bool augmentEnabled = true;
    // Train the backbone's batch norm during the coarse stage (batch statistics, running ones
    // updated; evaluation uses the running ones). On by default: the backbone is trained from
    // scratch, and with frozen identity statistics its activations grow unchecked (C5 std ~1e3
    // after 3000 steps), drowning the positional encoding. Off: DETR's frozen batch norm.
    bool trainBackboneBn = true;
    data::AugmentConfig augment;
    DenseAuxConfig aux;
    DenoiseConfig denoise;
    double memoryPositionCoef = 0;   // "memory_position_coef" (0: off, and absent from the JSON)
    // "query_groups" (Group DETR; 0: off, absent from the JSON): G extra groups of num_queries
    // entities with their own learned positional queries, decoded beside the model's own in both
    // stages with self-attention kept within each group (LetrForwardOptions::groupQueryEmbed).
    // Each group is matched to the ground truth on its own, so every line is a positive for
    // G + 1 entities per step; the loss is the mean of the groups' LETR losses (the model's own
    // group included). Inference never has them. Their queries train in the coarse phase.
    int64_t queryGroups = 0;
    // "bf16_backbone" (absent from the JSON when false): each training step runs the backbone's
    // layers in bfloat16 (autocast, channels-last; conv1, the transformers, the heads, the loss,
    // the optimizer and the weights stay float32). On CPUs with AMX or AVX512-BF16 oneDNN makes
    // the step about 1.5 times as fast (docs/decisions.md); on a CPU without them the backbone
    // trains in float32 channels-last instead (trainingBackboneMode).
    bool bf16Backbone = false;
    // "backbone_train_from" (absent from the JSON when "conv1"): the first backbone stage that
    // trains in the coarse phase: "conv1" (all of it), "layer1" .. "layer4". The stages before
    // it (conv1 and bn1 count as one) keep their weights, get no gradient and cost no backward
    // pass: most of the backbone's backward time is at strides 2-8 (conv1 .. layer2), so
    // "layer3" makes a step much cheaper while C4 and C5, the levels the stages read, still adapt.
    // (With train_backbone_bn on, the frozen stages' batch-norm running statistics still follow
    // the data; their weights do not move.)
    std::string backboneTrainFrom = "conv1";
    // "init": a LETR model (model.h5, a converted checkpoint) or a run's checkpoint.h5 whose
    // weights start this run instead of the seed's random ones (fine-tuning; a curriculum's
    // next stage). Every tensor present in the file must match this model's shape; a
    // checkpoint.h5 also starts the dense head and the denoising encoder. When the file has a
    // fine stage, the fine phase starts from it instead of from the coarse stage. A path
    // relative to the current directory. Empty: random initialization.
    std::string init;
    // "backbone_weights" (absent when empty): a backbone checkpoint copied into the model's
    // backbone at the start of a run (not on resume; before "init", which overrides it): a
    // "resnet" checkpoint for a ResNet, an M-LSD one (resources/mlsd_tiny.h5) for mlsd_tiny
    // (loadLetrBackbone). A path relative to the current directory.
    std::string backboneWeights;

    // The small CPU model: resnet10, d = 128, 4 heads, FFN 512, 2+2 layers per stage, 100
    // entities, short side 256.
    static LetrConfig smallModel();

    int64_t totalSteps() const;   // coarse + (fine + focal if the model has a fine stage)
    void validate() const;        // glimpse::Error naming the field
    nlohmann::json toJson() const;
    static LetrTrainConfig fromJson(const nlohmann::json& j, const std::string& source = "config");
    static LetrTrainConfig fromFile(const std::string& path);
};

// Every RunLog series a LETR run writes (the GUI reads this list, also stored in the RunLog's
// config under "series"): loss/total, loss/cls, loss/l1 (last decoder layer of the stage being
// trained), loss/cls_layer_<k>, loss/l1_layer_<k> (k = 0.. decoder layers - 1), lr, grad_norm,
// throughput (images/s), phase (0 coarse, 1 fine, 2 focal); with val_every > 0 also
// val/sAP10, val/sAP15, val/APH (percent, in [0, 100]; rows at the validation steps); with
// query_groups > 0 also loss/groups (the extra groups' mean LETR loss); with
// memory_position_coef > 0 also loss/mem_position (the unweighted L1 of the stage being
// trained); with aux.enabled also loss/aux (the weighted dense loss) and loss/aux_line, loss/aux_junction,
// loss/aux_direction, loss/aux_offset, loss/aux_position (coarse phase only); with denoise.enabled also loss/dn
// (the weighted denoising loss), loss/dn_cls, loss/dn_l1 (its last decoder layer); a
// distributed run of W ranks adds dist/world_size and dist/throughput_rank0 .. <W-1>.
std::vector<std::string> letrSeriesNames(const LetrTrainConfig& cfg, int worldSize = 1);

// backbone_train_from: "conv1" -> 0, "layerK" -> K, anything else -> -1; and the stage of a
// backbone parameter's name (the stem, conv1 and bn1, is 0; "...body.layerK..." is K).
int backboneStageIndex(const std::string& stage);
int backboneParamStage(const std::string& name);

// The validation dataset spec of a run on `dataSpec` (cfg.valData when set; see above).
// `dataDescription` is the opened dataset's describe() (canonical procedural spec).
std::string letrValidationSpec(const LetrTrainConfig& cfg, const std::string& dataDescription);

// How a training step runs the backbone. bf16_backbone asks for bfloat16, which it gets where
// the hardware has it: a CUDA device, or a CPU for which `cpuBf16` (cpuHasBf16()) holds. On a
// CPU without bfloat16 instructions oneDNN emulates them (a resnet10 step 3.4x slower than
// float32 there), so the backbone trains in float32, channels-last with frozen batch norms
// folded into the convolutions: the fast float32 path. Without bf16_backbone: float32 in the
// default layout (the reference implementations' rounding).
struct BackboneMode {
    torch::ScalarType dtype = torch::kFloat;
    bool channelsLast = false;
    bool fellBack = false;   // bfloat16 was asked for and the CPU lacks it
};
BackboneMode trainingBackboneMode(bool bf16Backbone, const torch::Device& device, bool cpuBf16);

// Trains on `dataSpec` (core/data/open.h) into `outDir` (created if needed). With `resume`,
// continues from outDir/checkpoint.h5 and ends with the same weights as an uninterrupted run.
// The checkpoint's config must equal cfg except checkpoint_every, threads and the schedule
// (step counts, lr drops), which may change only where the steps already done are unaffected. A stop request
// (control) writes a checkpoint and returns without model.h5. Throws glimpse::Error on bad
// data/config/checkpoint.
// With `comm` (W processes, docs/distributed.md): each rank trains on its batch_size / W images
// of every batch, with the whole batch's loss denominators (LossNormalizers), gradients averaged
// over the ranks; rank 0 alone validates and writes the files. A resumed run may change W.
// `device`: where the model, the training-only modules, the optimizer state and the weight
// average live and every forward and backward pass runs (core/util/device.h parses the CLI's
// --device). The data, the matching and the files stay on the CPU; a checkpoint written on one
// device resumes on another. A distributed run is CPU-only (Gloo).
void trainLetr(const LetrTrainConfig& cfg, const std::string& dataSpec, const std::string& outDir,
               bool resume, train::Control& control, const train::ProgressFn& progress,
               dist::Communicator* comm = nullptr, const torch::Device& device = torch::Device(torch::kCPU));

// Training-time input: RGB CV_8UC3 -> normalized [3, H, W] float (mean/std of `model`).
torch::Tensor letrInputTensor(const cv::Mat& rgb, const LetrConfig& model);

} // namespace glimpse::letr
