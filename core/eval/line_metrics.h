#pragma once
// Line-segment detection metrics (dissertation chapter 2; docs/models.md, "sAP and the other line metrics").
//
// Structural AP (L-CNN's definition, used by LETR): predictions and ground truth are scaled to
// a 128 x 128 frame (x * 128 / W, y * 128 / H); the distance between a prediction and a ground
// truth line is the smaller, over the two endpoint orders, of the summed squared endpoint
// distances. Within an image predictions are taken in score order; each one is compared with
// its nearest ground-truth line and is a true positive when that distance is < t and that
// ground truth is not matched yet, otherwise a false positive. TP/FP are pooled over all
// images and sorted by score; recall is over the total number of ground-truth lines; AP is the
// VOC area under the precision envelope. sF = the largest F-score along that curve.
//
// Heatmap AP/F (APH, FH): both line sets are rasterized into the same 128 x 128 frame (8-
// connected Bresenham lines; a prediction pixel holds the highest score of the lines through
// it, ground truth is binary). At a score threshold s, a prediction pixel with value >= s is
// correct when a ground-truth pixel lies in its 3 x 3 neighbourhood (tolerance: one pixel,
// diagonals included, ~0.008 of the frame diagonal); a ground-truth pixel is recalled when a
// prediction pixel >= s lies in its 3 x 3 neighbourhood. Pixel counts are pooled over images;
// the sweep over s gives a PR curve, APH (VOC area as above) and FH (largest F-score). This is
// a one-to-many simplification of the BSDS bipartite boundary matching (docs/decisions.md).
//
// All values are fractions in [0, 1] (tables print them x 100).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/eval/lsd.h"

namespace glimpse::eval {

struct GtLine {
    float x1 = 0, y1 = 0, x2 = 0, y2 = 0;   // image pixels
};

struct PrCurve {
    std::vector<double> precision, recall, score;   // one point per prediction, score descending
    size_t size() const { return precision.size(); }
    // At most `maxPoints` points spread evenly over the curve (the last point always kept).
    PrCurve subsampled(size_t maxPoints) const;
};

// VOC average precision over a PR curve (precision envelope, area at recall changes).
double averagePrecision(const PrCurve& curve);
// max over the curve of 2PR / (P + R) (0 for an empty curve).
double maxFScore(const PrCurve& curve);
// The score of the curve's point where 2PR / (P + R) is highest (the first such point, i.e.
// the highest such score): keeping the predictions scored >= it gives that F-score. 0 for an
// empty curve or one whose F-score is 0 everywhere.
double maxFScoreThreshold(const PrCurve& curve);

// The frame size used by sAP and the heatmap metrics.
constexpr int kMetricFrame = 128;

// L-CNN's squared distance between two segments, endpoints given as (x1, y1, x2, y2).
double structuralDistance(const std::array<float, 4>& a, const std::array<float, 4>& b);

struct LineMetrics {
    std::vector<double> thresholds;   // sAP distance thresholds t (squared pixels in 128 x 128)
    std::vector<double> sAP;          // per threshold
    std::vector<double> sF;           // per threshold
    std::vector<PrCurve> curves;      // per threshold
    double APH = 0, FH = 0;
    PrCurve heatmapCurve;
    int64_t images = 0, gtLines = 0, predLines = 0;
    // sAP / sF at threshold t (which must be one of `thresholds`).
    double sAPAt(double t) const;
    double sFAt(double t) const;
};

// What LineEvaluator::add decided for one image, per prediction in the order given: the
// nearest ground-truth line (-1 when the image has none), the squared structural distance to
// it (128 x 128 frame) and bit k of `tp` set when it is a true positive at thresholds[k]
// (at most 8 thresholds are recorded). Results files (core/results) store these, so their
// per-image records are the summary's own matches.
struct ImageMatches {
    std::vector<int32_t> nearestGt;
    std::vector<float> distance;
    std::vector<uint8_t> tp;
};

// Accumulates predictions and ground truth image by image; compute() pools them.
class LineEvaluator {
public:
    explicit LineEvaluator(std::vector<double> thresholds = {5, 10, 15});
    // One image: predictions (any order; scores rank them) and ground truth, both in the
    // pixels of a width x height image. Throws glimpse::Error on a non-positive size or
    // non-finite coordinates. Returns the image's matches (above).
    ImageMatches add(const std::vector<ScoredLine>& predictions, const std::vector<GtLine>& groundTruth,
             int width, int height);
    LineMetrics compute() const;
    int64_t images() const { return images_; }

private:
    struct Hit {
        float score;
        int64_t order;   // insertion order: a stable tiebreak
        std::vector<uint8_t> tp;   // per threshold
    };
    std::vector<double> thresholds_;
    std::vector<Hit> hits_;
    // Heatmap pixels: prediction pixels (score, correct) and per-GT-pixel best nearby score.
    std::vector<std::pair<float, uint8_t>> predPixels_;
    std::vector<float> gtPixelBest_;
    int64_t images_ = 0, gtLines_ = 0;
};

} // namespace glimpse::eval
