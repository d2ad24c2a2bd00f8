#include "core/eval/line_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace glimpse::eval {

namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

bool finite4(float a, float b, float c, float d) {
    return std::isfinite(a) && std::isfinite(b) && std::isfinite(c) && std::isfinite(d);
}

// Draws a segment given in frame coordinates (pixel (x, y) covers [x, x+1)) with value v.
void rasterize(cv::Mat& map, const std::array<float, 4>& l, float v) {
    constexpr int kShift = 4;
    constexpr float kOne = float(1 << kShift);
    auto fix = [&](float c) {
        // Clamp far-away endpoints so the fixed-point conversion cannot overflow.
        c = std::clamp(c, -4.0f * kMetricFrame, 5.0f * kMetricFrame);
        return int(std::lround((c - 0.5f) * kOne));
    };
    cv::line(map, cv::Point(fix(l[0]), fix(l[1])), cv::Point(fix(l[2]), fix(l[3])), cv::Scalar(v), 1,
             cv::LINE_8, kShift);
}

} // namespace

PrCurve PrCurve::subsampled(size_t maxPoints) const {
    if (size() <= maxPoints || maxPoints < 2) return *this;
    PrCurve out;
    for (size_t k = 0; k < maxPoints; ++k) {
        const size_t i = size_t(std::llround(double(k) * double(size() - 1) / double(maxPoints - 1)));
        out.precision.push_back(precision[i]);
        out.recall.push_back(recall[i]);
        out.score.push_back(score[i]);
    }
    return out;
}

double averagePrecision(const PrCurve& c) {
    const size_t n = c.size();
    std::vector<double> r(n + 2), p(n + 2);
    r[0] = 0;
    p[0] = 0;
    for (size_t i = 0; i < n; ++i) {
        r[i + 1] = c.recall[i];
        p[i + 1] = c.precision[i];
    }
    r[n + 1] = 1;
    p[n + 1] = 0;
    for (size_t i = n + 1; i > 0; --i) p[i - 1] = std::max(p[i - 1], p[i]);
    double ap = 0;
    for (size_t i = 0; i + 1 < r.size(); ++i)
        if (r[i + 1] != r[i]) ap += (r[i + 1] - r[i]) * p[i + 1];
    return ap;
}

double maxFScore(const PrCurve& c) {
    double best = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        const double s = c.precision[i] + c.recall[i];
        if (s > 0) best = std::max(best, 2 * c.precision[i] * c.recall[i] / s);
    }
    return best;
}

double maxFScoreThreshold(const PrCurve& c) {
    double best = 0, at = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        const double s = c.precision[i] + c.recall[i];
        const double f = s > 0 ? 2 * c.precision[i] * c.recall[i] / s : 0;
        if (f > best) best = f, at = c.score[i];
    }
    return at;
}

double structuralDistance(const std::array<float, 4>& a, const std::array<float, 4>& b) {
    auto sq = [](double x, double y) { return x * x + y * y; };
    const double same = sq(a[0] - b[0], a[1] - b[1]) + sq(a[2] - b[2], a[3] - b[3]);
    const double swapped = sq(a[0] - b[2], a[1] - b[3]) + sq(a[2] - b[0], a[3] - b[1]);
    return std::min(same, swapped);
}

double LineMetrics::sAPAt(double t) const {
    for (size_t i = 0; i < thresholds.size(); ++i)
        if (thresholds[i] == t) return sAP[i];
    throw Error("line metrics: no sAP at threshold " + std::to_string(t));
}

double LineMetrics::sFAt(double t) const {
    for (size_t i = 0; i < thresholds.size(); ++i)
        if (thresholds[i] == t) return sF[i];
    throw Error("line metrics: no sF at threshold " + std::to_string(t));
}

LineEvaluator::LineEvaluator(std::vector<double> thresholds) : thresholds_(std::move(thresholds)) {
    if (thresholds_.empty()) throw Error("line metrics: no sAP thresholds given");
    for (double t : thresholds_)
        if (!(t > 0) || !std::isfinite(t))
            throw Error("line metrics: sAP threshold must be positive, got " + std::to_string(t));
}

ImageMatches LineEvaluator::add(const std::vector<ScoredLine>& predictions,
                        const std::vector<GtLine>& groundTruth, int width, int height) {
    if (width <= 0 || height <= 0)
        throw Error("line metrics: image size must be positive, got " + std::to_string(width) +
                    " x " + std::to_string(height));
    const float sx = float(kMetricFrame) / float(width), sy = float(kMetricFrame) / float(height);
    std::vector<std::array<float, 4>> gt;
    gt.reserve(groundTruth.size());
    for (const GtLine& g : groundTruth) {
        if (!finite4(g.x1, g.y1, g.x2, g.y2))
            throw Error("line metrics: ground-truth line with a non-finite coordinate");
        gt.push_back({g.x1 * sx, g.y1 * sy, g.x2 * sx, g.y2 * sy});
    }
    std::vector<std::array<float, 4>> pred;
    std::vector<float> scores;
    for (const ScoredLine& p : predictions) {
        if (!finite4(p.x1, p.y1, p.x2, p.y2) || !std::isfinite(p.score))
            throw Error("line metrics: predicted line with a non-finite coordinate or score");
        pred.push_back({p.x1 * sx, p.y1 * sy, p.x2 * sx, p.y2 * sy});
        scores.push_back(p.score);
    }
    std::vector<size_t> order(pred.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });

    // sAP: each prediction against its nearest ground truth, in score order.
    std::vector<std::vector<uint8_t>> matched(thresholds_.size(), std::vector<uint8_t>(gt.size(), 0));
    ImageMatches record;
    record.nearestGt.assign(pred.size(), -1);
    record.distance.assign(pred.size(), std::numeric_limits<float>::infinity());
    record.tp.assign(pred.size(), 0);
    for (size_t i : order) {
        Hit h;
        h.score = scores[i];
        h.order = int64_t(hits_.size());
        h.tp.assign(thresholds_.size(), 0);
        double best = std::numeric_limits<double>::infinity();
        size_t choice = 0;
        for (size_t g = 0; g < gt.size(); ++g) {
            const double d = structuralDistance(pred[i], gt[g]);
            if (d < best) {
                best = d;
                choice = g;
            }
        }
        for (size_t k = 0; k < thresholds_.size(); ++k) {
            if (!gt.empty() && best < thresholds_[k] && !matched[k][choice]) {
                matched[k][choice] = 1;
                h.tp[k] = 1;
                if (k < 8) record.tp[i] |= uint8_t(1u << k);
            }
        }
        if (!gt.empty()) {
            record.nearestGt[i] = int32_t(choice);
            record.distance[i] = float(best);
        }
        hits_.push_back(std::move(h));
    }

    // Heatmaps.
    cv::Mat predMap(kMetricFrame, kMetricFrame, CV_32F, cv::Scalar(kNone));
    for (auto it = order.rbegin(); it != order.rend(); ++it) rasterize(predMap, pred[*it], scores[*it]);
    cv::Mat gtMap(kMetricFrame, kMetricFrame, CV_8U, cv::Scalar(0));
    for (const auto& g : gt) rasterize(gtMap, g, 1.0f);
    const cv::Mat kernel = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(3, 3));
    cv::Mat gtNear, predNear;
    cv::dilate(gtMap, gtNear, kernel, cv::Point(-1, -1), 1, cv::BORDER_CONSTANT, cv::Scalar(0));
    cv::dilate(predMap, predNear, kernel, cv::Point(-1, -1), 1, cv::BORDER_CONSTANT, cv::Scalar(kNone));
    for (int y = 0; y < kMetricFrame; ++y) {
        const float* pm = predMap.ptr<float>(y);
        const float* pn = predNear.ptr<float>(y);
        const uint8_t* gm = gtMap.ptr<uint8_t>(y);
        const uint8_t* gn = gtNear.ptr<uint8_t>(y);
        for (int x = 0; x < kMetricFrame; ++x) {
            if (pm[x] != kNone) predPixels_.emplace_back(pm[x], gn[x] ? 1 : 0);
            if (gm[x]) gtPixelBest_.push_back(pn[x]);
        }
    }
    gtLines_ += int64_t(gt.size());
    ++images_;
    return record;
}

LineMetrics LineEvaluator::compute() const {
    LineMetrics m;
    m.thresholds = thresholds_;
    m.images = images_;
    m.gtLines = gtLines_;
    m.predLines = int64_t(hits_.size());

    std::vector<size_t> order(hits_.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return hits_[a].score > hits_[b].score; });
    for (size_t k = 0; k < thresholds_.size(); ++k) {
        PrCurve c;
        c.precision.reserve(order.size());
        c.recall.reserve(order.size());
        c.score.reserve(order.size());
        int64_t tp = 0, n = 0;
        for (size_t i : order) {
            tp += hits_[i].tp[k];
            ++n;
            c.precision.push_back(double(tp) / double(n));
            c.recall.push_back(gtLines_ > 0 ? double(tp) / double(gtLines_) : 0.0);
            c.score.push_back(hits_[i].score);
        }
        m.sAP.push_back(gtLines_ > 0 ? averagePrecision(c) : 0.0);
        m.sF.push_back(maxFScore(c));
        m.curves.push_back(std::move(c));
    }

    // Heatmap sweep: one PR point per distinct prediction-pixel score.
    std::vector<std::pair<float, uint8_t>> px = predPixels_;
    std::sort(px.begin(), px.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<float> gtBest = gtPixelBest_;
    std::sort(gtBest.begin(), gtBest.end(), std::greater<float>());
    const double gtTotal = double(gtBest.size());
    int64_t tp = 0, n = 0;
    size_t recalled = 0;
    for (size_t i = 0; i < px.size();) {
        const float s = px[i].first;
        while (i < px.size() && px[i].first == s) {
            tp += px[i].second;
            ++n;
            ++i;
        }
        while (recalled < gtBest.size() && gtBest[recalled] >= s) ++recalled;
        m.heatmapCurve.precision.push_back(double(tp) / double(n));
        m.heatmapCurve.recall.push_back(gtTotal > 0 ? double(recalled) / gtTotal : 0.0);
        m.heatmapCurve.score.push_back(s);
    }
    m.APH = gtTotal > 0 ? averagePrecision(m.heatmapCurve) : 0.0;
    m.FH = maxFScore(m.heatmapCurve);
    return m;
}

} // namespace glimpse::eval
