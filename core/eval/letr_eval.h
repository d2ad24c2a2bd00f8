#pragma once
// Evaluation of a LETR model on a line dataset (`glimpse eval letr`): line metrics
// (core/eval/line_metrics.h) for every decoder layer of both stages from one forward pass per
// image, so the coarse-to-fine gain (dissertation Figure 2.7(b)) shows layer by layer, and the
// LSD baseline on the same images.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/eval/line_metrics.h"

namespace glimpse {
class RunLogWriter;
namespace data {
class LineDataset;
}
namespace letr {
class LetrModel;
}
namespace train {
class Control;
}
} // namespace glimpse

namespace glimpse::eval {

// One image as evaluated (LetrEvalOptions::onSample): every row's predictions in image pixels
// and their matches as that row's LineEvaluator decided them (results files record these, so
// their per-image records add up to the summary exactly). Rows in LetrEvalResult::rows order.
struct LetrSampleEval {
    int64_t index = 0;                       // in the dataset
    std::string name;                        // LineSample::name
    int width = 0, height = 0;
    std::vector<GtLine> gt;
    std::vector<std::vector<ScoredLine>> lines;
    std::vector<ImageMatches> matches;
};

struct LetrEvalOptions {
    bool allLayers = true;        // every decoder layer; false: the last layer of each stage
    bool lsd = true;              // add the LSD baseline row
    // When set, an M-LSD baseline row ("mlsd", "M-LSD") from the lines it gives for each RGB
    // image (core/models/mlsd/model.h, detectMlsd), after LSD's.
    std::function<std::vector<ScoredLine>(const cv::Mat& rgb)> mlsd;
    std::vector<double> thresholds{5, 10, 15};
    int64_t maxImages = -1;       // evaluate the first maxImages images only (-1: all)
    size_t maxCurvePoints = 512;  // PR curves are subsampled to this many points when stored
    bool coarseOnly = false;      // evaluate (and run) the coarse stage only (validation while
                                  // the trainer is in its coarse phase)
    int flips = 1;                // 1, 2 or 4 views merged per layer (core/models/letr/flips.h)
    // Called after each image with its per-row lines and matches (results files).
    std::function<void(const LetrSampleEval&)> onSample;
};

struct EvalRow {
    std::string key;     // "coarse_1" ... "fine_6", "lsd", "mlsd" (names in eval files)
    std::string label;   // "coarse 1" ... "fine 6", "LSD", "M-LSD" (1-based, as the GUI shows layers)
    LineMetrics metrics;
};

struct LetrEvalResult {
    std::vector<EvalRow> rows;   // coarse layers, fine layers, then LSD, then M-LSD
    int64_t images = 0;
    bool stopped = false;        // the Control asked to stop: metrics cover `images` images
    double seconds = 0;
    const EvalRow& row(const std::string& key) const;   // throws glimpse::Error when absent
};

// The rows evaluateLetr produces for `model` with `options`, in order, metrics empty (what a
// results file declares before the first image).
std::vector<EvalRow> letrEvalRows(const letr::LetrModel& model, const LetrEvalOptions& options);

// (done, total) after each image.
using EvalProgressFn = std::function<void(int64_t, int64_t)>;

// Runs the model (eval mode, no grad, batch 1, the model's test-time resize) on each image of
// `data`; every query is a scored prediction (score = class-0 probability). The model's
// training flag is restored. `control` (optional) is polled between images.
LetrEvalResult evaluateLetr(letr::LetrModel& model, const data::LineDataset& data,
                            const LetrEvalOptions& options = {}, const EvalProgressFn& progress = {},
                            train::Control* control = nullptr);

// The table `glimpse eval` prints: one row per layer / LSD, columns sAP5 sAP10 sAP15 sF10 sF15
// APH FH (percent; a column appears only for thresholds that were evaluated).
std::string formatEvalTable(const LetrEvalResult& result);

// Eval tensors of the result: <key>/sAP<t>, <key>/sF<t>, <key>/APH, <key>/FH (float64
// scalars), <key>/pr<t>/{precision,recall,score} and <key>/prH/... (float64 columns,
// subsampled to options.maxCurvePoints), all under `prefix` ("" or e.g. "val/").
std::map<std::string, torch::Tensor> evalTensors(const LetrEvalResult& result,
                                                 size_t maxCurvePoints = 512,
                                                 const std::string& prefix = "");
// Into a live run log (stored by its finish()).
void writeEval(const LetrEvalResult& result, RunLogWriter& writer, const std::string& prefix = "");
// A standalone eval file: a finished run log (docs/formats.md) with no series, `config` as
// its config and the eval tensors. Atomic.
void saveEvalFile(const LetrEvalResult& result, const std::string& path, const nlohmann::json& config);

} // namespace glimpse::eval
