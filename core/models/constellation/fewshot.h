#pragma once
// Few-shot evaluation of a ConstellationNet (or its ProtoNet baseline): N-way K-shot episodes
// of a dataset's classes, the model's cosine prototype logits (ConstellationModel::
// fewShotLogits, eval mode, centers fixed), accuracy per episode, mean and 95% confidence
// interval (1.96 sample std / sqrt(episodes)).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/data/fewshot.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"

namespace glimpse::constellation {

// One episode run through the model, with what the episode view shows.
struct EpisodeResult {
    data::EpisodeSpec spec;
    data::Episode episode;
    std::vector<cv::Mat> support, query;        // the network inputs (RGB S x S), way-major
    torch::Tensor logits;                       // [ways * queries, ways]
    std::vector<int64_t> predicted;             // per query: the predicted way
    std::vector<std::string> classNames;        // per way
    double accuracy = 0;
    // Per way: the clusters of the last branch-1 constellation module closest to the way's
    // prototype (mean over its support images and cells of the similarity map), best first.
    std::vector<std::vector<ClusterScore>> prototypeClusters;
    std::string prototypeModule;                // that module's name ("" for a baseline)
};

// Runs one episode (eval mode; the model's mode is restored).
EpisodeResult runEpisode(ConstellationModel& model, const data::ClassificationDataset& ds, const data::EpisodeSpec& spec,
                         const data::Episode& episode);

struct FewShotResult {
    int64_t ways = 0, shots = 0, queries = 0;
    std::vector<double> accuracies;   // per episode, in [0, 1]
    double mean = 0, ci95 = 0;        // in [0, 1]
    double seconds = 0;
    bool cancelled = false;           // stopped early: the figures cover the episodes done
};

// One evaluated episode (results files, core/results): its number, the episode, the predicted
// way of each query (way-major, as episode.query) and its accuracy (what `accuracies` holds).
using EpisodeFn = std::function<void(int64_t, const data::Episode&, const std::vector<int64_t>&, double)>;

// Episodes 0..episodes-1 of `seed` from `sampler`. Each image's test-time features are
// computed once and reused by later episodes (the same logits as fewShotLogits per episode, up
// to float rounding: in eval mode an image's features do not depend on its batch). `progress(done, total)` after each episode;
// `cancelled()` is polled between episodes; `onEpisode` gets each episode as evaluated.
FewShotResult evaluateFewShot(ConstellationModel& model, const data::EpisodeSampler& sampler,
                              const data::EpisodeSpec& spec, int64_t episodes, uint64_t seed,
                              const std::function<void(int64_t, int64_t)>& progress = {},
                              const std::function<bool()>& cancelled = {}, const EpisodeFn& onEpisode = {});

} // namespace glimpse::constellation
