// core/eval/line_metrics: sAP, sF, APH and FH on hand-made cases whose answers are worked out
// in the comments (frame 128 x 128 unless a test rescales).
#include <QtTest>

#include <cmath>

#include "core/error.h"
#include "core/eval/edge_support.h"
#include "core/eval/line_metrics.h"

#include <opencv2/imgproc.hpp>
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::eval;

namespace {

ScoredLine P(float x1, float y1, float x2, float y2, float s) { return {x1, y1, x2, y2, s}; }
GtLine G(float x1, float y1, float x2, float y2) { return {x1, y1, x2, y2}; }

// Two GT lines; predictions: exact g1 (.9, TP), duplicate of g1 (.8, FP: g1 taken),
// g2 moved by (2, 2) at one end (.7, distance 8: TP for t = 10, 15, FP for t = 5),
// far away (.6, FP).
void addCaseOne(LineEvaluator& ev, float sx = 1, float sy = 1) {
    std::vector<GtLine> gt = {G(10 * sx, 10 * sy, 110 * sx, 10 * sy), G(10 * sx, 100 * sy, 110 * sx, 100 * sy)};
    std::vector<ScoredLine> pred = {
        P(60 * sx, 50 * sy, 60 * sx, 60 * sy, 0.6f),
        P(110 * sx, 10 * sy, 10 * sx, 10 * sy, 0.8f),   // reversed endpoints: still g1
        P(10 * sx, 10 * sy, 110 * sx, 10 * sy, 0.9f),
        P(12 * sx, 102 * sy, 110 * sx, 100 * sy, 0.7f),
    };
    ev.add(pred, gt, int(128 * sx), int(128 * sy));
}

} // namespace

class TestLineMetrics : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void structuralDistanceTakesTheBetterEndpointOrder() {
        QCOMPARE(structuralDistance({0, 0, 10, 0}, {0, 1, 10, 0}), 1.0);
        // same order: (10^2 + 1) + 10^2 = 201; swapped: 0 + 1 = 1
        QCOMPARE(structuralDistance({0, 0, 10, 0}, {10, 1, 0, 0}), 1.0);
        QCOMPARE(structuralDistance({0, 0, 3, 4}, {0, 0, 0, 0}), 25.0);
    }

    void averagePrecisionIsVocArea() {
        // TP, FP, TP, FP over 2 GT: P = 1, .5, 2/3, .5; R = .5, .5, 1, 1.
        // Envelope at the recall steps: .5 * 1 + .5 * 2/3 = 5/6.
        PrCurve c;
        c.precision = {1, 0.5, 2.0 / 3, 0.5};
        c.recall = {0.5, 0.5, 1, 1};
        c.score = {4, 3, 2, 1};
        QVERIFY(std::abs(averagePrecision(c) - 5.0 / 6) < 1e-12);
        QVERIFY(std::abs(maxFScore(c) - 0.8) < 1e-12);   // P 2/3, R 1
        QCOMPARE(maxFScoreThreshold(c), 2.0);              // reached at the third prediction
        c.precision[0] = 1;
        c.recall[0] = 1;   // a curve whose first point is already the best
        QCOMPARE(maxFScoreThreshold(c), 4.0);
        c.precision = {0, 0};
        c.recall = {0, 0};
        c.score = {0.9, 0.2};
        QCOMPARE(maxFScoreThreshold(c), 0.0);   // nothing matched: not set
        QCOMPARE(maxFScoreThreshold(PrCurve{}), 0.0);
        c = PrCurve{};
        c.precision = {1, 0.5, 2.0 / 3, 0.5};
        c.recall = {0.5, 0.5, 1, 1};
        c.score = {4, 3, 2, 1};
        QCOMPARE(averagePrecision(PrCurve{}), 0.0);
        const PrCurve s = c.subsampled(2);
        QCOMPARE(int(s.size()), 2);
        QCOMPARE(s.precision.front(), 1.0);
        QCOMPARE(s.precision.back(), 0.5);
        QCOMPARE(int(c.subsampled(10).size()), 4);
    }

    void sapOnHandMadeCase() {
        LineEvaluator ev;
        addCaseOne(ev);
        const LineMetrics m = ev.compute();
        QCOMPARE(m.gtLines, int64_t(2));
        QCOMPARE(m.predLines, int64_t(4));
        // t = 5: TP FP FP FP -> recall .5 at precision 1: AP .5; best F = 2/3.
        QVERIFY(std::abs(m.sAPAt(5) - 0.5) < 1e-12);
        QVERIFY(std::abs(m.sFAt(5) - 2.0 / 3) < 1e-12);
        // t = 10 and 15: TP FP TP FP -> 5/6, F 0.8.
        QVERIFY(std::abs(m.sAPAt(10) - 5.0 / 6) < 1e-12);
        QVERIFY(std::abs(m.sAPAt(15) - 5.0 / 6) < 1e-12);
        QVERIFY(std::abs(m.sFAt(10) - 0.8) < 1e-12);
        // The PR curve is in score order.
        const PrCurve& c = m.curves[1];
        QCOMPARE(int(c.size()), 4);
        QCOMPARE(c.score[0], double(0.9f));
        QCOMPARE(c.recall[2], 1.0);
        QVERIFY(std::abs(c.precision[2] - 2.0 / 3) < 1e-12);
        QVERIFY(testing::contains(testing::errorOf([&] { m.sAPAt(7); }), {"threshold"}));
    }

    void sapRescalesTo128() {
        // The same scene in a 256 x 512 image: distances are measured after scaling to 128.
        LineEvaluator a, b;
        addCaseOne(a);
        addCaseOne(b, 2, 4);
        const LineMetrics ma = a.compute(), mb = b.compute();
        for (size_t k = 0; k < ma.sAP.size(); ++k) {
            QVERIFY(std::abs(ma.sAP[k] - mb.sAP[k]) < 1e-12);
            QVERIFY(std::abs(ma.sF[k] - mb.sF[k]) < 1e-12);
        }
    }

    void sapPoolsImagesByScore() {
        // Image A: its prediction is a TP at score .5; image B: an FP at .9. Pooled: FP then TP:
        // P = 0, .5; R = 0, .5 -> AP = .5 * .5 = .25 (a per-image mean would give .5).
        LineEvaluator ev;
        ev.add({P(10, 10, 110, 10, 0.5f)}, {G(10, 10, 110, 10)}, 128, 128);
        ev.add({P(10, 60, 110, 60, 0.9f)}, {G(10, 10, 110, 10)}, 128, 128);
        const LineMetrics m = ev.compute();
        QCOMPARE(m.images, int64_t(2));
        QVERIFY(std::abs(m.sAPAt(10) - 0.25) < 1e-12);
        QVERIFY(std::abs(m.sFAt(10) - 0.5) < 1e-12);
    }

    void sapComparesWithTheNearestGroundTruthOnly() {
        // g1, g2 two pixels apart. p1 = g1 (TP). p2 lies .5 below g1: nearest is g1 (distance .5)
        // which is taken, so p2 is an FP although it is within 5 of g2 (distance 4.5).
        LineEvaluator ev;
        ev.add({P(10, 10, 110, 10, 0.9f), P(10, 10.5f, 110, 10.5f, 0.8f)},
               {G(10, 10, 110, 10), G(10, 12, 110, 12)}, 128, 128);
        const LineMetrics m = ev.compute();
        QVERIFY(std::abs(m.sAPAt(5) - 0.5) < 1e-12);
        QCOMPARE(m.curves[0].recall.back(), 0.5);
    }

    void emptyInputs() {
        LineEvaluator ev;
        ev.add({}, {G(0, 0, 10, 10)}, 64, 64);
        ev.add({P(0, 0, 10, 10, 1)}, {}, 64, 64);
        const LineMetrics m = ev.compute();
        QCOMPARE(m.sAPAt(10), 0.0);
        QCOMPARE(m.sFAt(10), 0.0);
        QCOMPARE(m.gtLines, int64_t(1));
        const LineMetrics none = LineEvaluator().compute();
        QCOMPARE(none.sAPAt(15), 0.0);
        QCOMPARE(none.APH, 0.0);
    }

    void heatmapExactAndFarLines() {
        // Equal-length horizontal lines: GT at y = 40.5; exact copy and a far copy (y = 90.5).
        const GtLine gt = G(20, 40.5f, 100, 40.5f);
        {
            // Exact at .9, far at .8: (P 1, R 1), (P .5, R 1) -> APH 1, FH 1.
            LineEvaluator ev;
            ev.add({P(20, 40.5f, 100, 40.5f, 0.9f), P(20, 90.5f, 100, 90.5f, 0.8f)}, {gt}, 128, 128);
            const LineMetrics m = ev.compute();
            QCOMPARE(int(m.heatmapCurve.size()), 2);
            QVERIFY(std::abs(m.APH - 1) < 1e-12);
            QVERIFY(std::abs(m.FH - 1) < 1e-12);
            QCOMPARE(m.heatmapCurve.precision[1], 0.5);
        }
        {
            // Far at .9, exact at .8: (P 0, R 0), (P .5, R 1) -> APH .5, FH 2/3.
            LineEvaluator ev;
            ev.add({P(20, 40.5f, 100, 40.5f, 0.8f), P(20, 90.5f, 100, 90.5f, 0.9f)}, {gt}, 128, 128);
            const LineMetrics m = ev.compute();
            QVERIFY(std::abs(m.APH - 0.5) < 1e-12);
            QVERIFY(std::abs(m.FH - 2.0 / 3) < 1e-12);
        }
    }

    void heatmapToleranceIsOnePixel() {
        const GtLine gt = G(20, 40.5f, 100, 40.5f);
        auto run = [&](float dy) {
            LineEvaluator ev;
            ev.add({P(20, 40.5f + dy, 100, 40.5f + dy, 1)}, {gt}, 128, 128);
            return ev.compute();
        };
        QVERIFY(std::abs(run(1).APH - 1) < 1e-12);    // neighbouring row: within tolerance
        QVERIFY(std::abs(run(-1).FH - 1) < 1e-12);
        QCOMPARE(run(2).APH, 0.0);                    // two rows away: no match
        QCOMPARE(run(2).FH, 0.0);
        // Heatmaps are measured in the 128 frame too: 2 pixels in a 256-wide image is 1 there.
        LineEvaluator ev;
        ev.add({P(40, 83, 200, 83, 1)}, {G(40, 81, 200, 81)}, 256, 256);
        QVERIFY(std::abs(ev.compute().APH - 1) < 1e-12);
    }

    void heatmapPartialLineHasHalfRecall() {
        // A prediction covering the left half of the GT: precision 1, recall ~ half.
        LineEvaluator ev;
        ev.add({P(20, 40.5f, 60, 40.5f, 1)}, {G(20, 40.5f, 100, 40.5f)}, 128, 128);
        const LineMetrics m = ev.compute();
        QCOMPARE(m.heatmapCurve.precision[0], 1.0);
        const double r = m.heatmapCurve.recall[0];
        QVERIFY2(r > 0.48 && r < 0.56, qPrintable(QString::number(r)));   // 42 of 81 pixels
    }

    void badInputIsAnError() {
        using testing::contains;
        using testing::errorOf;
        LineEvaluator ev;
        QVERIFY(contains(errorOf([&] { ev.add({}, {}, 0, 10); }), {"image size", "positive"}));
        QVERIFY(contains(errorOf([&] { ev.add({P(NAN, 0, 1, 1, 1)}, {}, 10, 10); }), {"non-finite"}));
        QVERIFY(contains(errorOf([&] { ev.add({}, {G(0, INFINITY, 1, 1)}, 10, 10); }), {"non-finite"}));
        QVERIFY(contains(errorOf([] { LineEvaluator(std::vector<double>{}); }), {"no sAP thresholds"}));
        QVERIFY(contains(errorOf([] { LineEvaluator({-1.0}); }), {"positive"}));
        QCOMPARE(ev.images(), int64_t(0));
        // Far-away coordinates are clipped, not a crash.
        ev.add({P(-1e9f, 5, 1e9f, 5, 1)}, {G(0, 5, 10, 5)}, 10, 10);
        QCOMPARE(ev.images(), int64_t(1));
    }

    // Edge support (the photo measure): on a vertical step edge, a line along the edge is
    // supported at every sample, a parallel line in the flat part at none, and a line across
    // the edge at none either (its gradient runs along it, not across); only the top K count.
    void edgeSupportOnAStepEdge() {
        cv::Mat img(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        img(cv::Rect(32, 0, 32, 64)).setTo(cv::Scalar(230, 230, 230));
        using glimpse::eval::ScoredLine;
        std::vector<ScoredLine> lines{{32.0f, 4.0f, 32.0f, 60.0f, 0.9f},     // on the edge (pixel x = 32 starts white)
                                      {12.0f, 4.0f, 12.0f, 60.0f, 0.8f},     // flat region
                                      {4.0f, 30.0f, 60.0f, 30.0f, 0.7f},     // across the edge
                                      {31.5f, 60.0f, 32.5f, 4.0f, 0.6f}};    // on the edge, reversed, slightly tilted
        glimpse::eval::EdgeSupportOptions o;
        o.topK = 3;
        auto r = glimpse::eval::edgeSupport(img, lines, o);
        QCOMPARE(r.lines, 3);
        QCOMPARE(r.support[0], 1.0);
        QCOMPARE(r.support[1], 0.0);
        QVERIFY2(r.support[2] < 0.1, qPrintable(QString::number(r.support[2])));
        QVERIFY(std::abs(r.onEdge - 1.0 / 3) < 1e-9);
        QVERIFY(std::abs(r.meanSupport - (r.support[0] + r.support[1] + r.support[2]) / 3) < 1e-12);
        o.topK = 50;
        auto all = glimpse::eval::edgeSupport(img, lines, o);
        QCOMPARE(all.lines, 4);
        QVERIFY(all.support[3] > 0.9);
        // The threshold is the 90th percentile of the blurred image's gradient magnitudes.
        cv::Mat g, gx, gy, m;
        cv::cvtColor(img, g, cv::COLOR_RGB2GRAY);
        g.convertTo(g, CV_32F, 1.0 / 255);
        cv::GaussianBlur(g, g, cv::Size(0, 0), 1.0);
        cv::Sobel(g, gx, CV_32F, 1, 0, 3);
        cv::Sobel(g, gy, CV_32F, 0, 1, 3);
        cv::magnitude(gx, gy, m);
        std::vector<float> v(m.begin<float>(), m.end<float>());
        std::sort(v.begin(), v.end());
        QVERIFY(std::abs(r.threshold - std::max(1e-6, double(v[size_t(0.9 * v.size())]))) < 1e-6);
        // Bad input.
        QVERIFY(testing::contains(testing::errorOf([] { glimpse::eval::edgeSupport(cv::Mat(), {}); }), {"8-bit"}));
    }

    // The measure's two halves (what the inspector uses): the field's threshold and each line's
    // support are exactly what edgeSupport reports; degenerate, non-finite and absurdly long
    // lines get an answer, not a hang; an empty field is refused.
    void edgeFieldAndLineSupport() {
        namespace ev = glimpse::eval;
        cv::Mat img(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        img(cv::Rect(32, 0, 32, 64)).setTo(cv::Scalar(230, 230, 230));
        std::vector<ev::ScoredLine> lines{{32.0f, 4.0f, 32.0f, 60.0f, 0.9f}, {12.0f, 4.0f, 12.0f, 60.0f, 0.8f},
                                          {4.0f, 30.0f, 60.0f, 30.0f, 0.7f}, {31.5f, 60.0f, 32.5f, 4.0f, 0.6f},
                                          {32.0f, 10.0f, 32.0f, 40.0f, 0.5f}};
        const ev::EdgeSupport whole = ev::edgeSupport(img, lines);
        const ev::EdgeField f = ev::edgeField(img);
        QCOMPARE(f.rows(), 64);
        QCOMPARE(f.cols(), 64);
        QCOMPARE(f.threshold, whole.threshold);
        for (size_t i = 0; i < lines.size(); ++i) {
            const auto& l = lines[i];
            QCOMPARE(ev::lineSupport(f, l.x1, l.y1, l.x2, l.y2), whole.support[i]);
        }
        // An edge over the top half of the image only: a line down the whole height is about
        // half supported.
        cv::Mat top(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        top(cv::Rect(32, 0, 32, 32)).setTo(cv::Scalar(230, 230, 230));
        const double half = ev::lineSupport(ev::edgeField(top), 32.0, 0.0, 32.0, 64.0);
        QVERIFY2(half > 0.35 && half < 0.55, qPrintable(QString::number(half)));
        QCOMPARE(ev::lineSupport(f, 5, 5, 5, 5), 0.0);
        QCOMPARE(ev::lineSupport(f, std::nan(""), 5, 5, 50), 0.0);
        QCOMPARE(ev::lineSupport(f, 12.0, -1e12, 12.0, 1e12), 0.0);   // sampled at a capped count
        QVERIFY(testing::contains(testing::errorOf([] { ev::lineSupport(ev::EdgeField{}, 0, 0, 1, 1); }), {"field"}));
        QVERIFY(testing::contains(testing::errorOf([] { ev::edgeField(cv::Mat()); }), {"8-bit"}));
    }

    // Snapping a line onto the edge it nearly follows (the photo labels' refinement): a line
    // 2.4 px beside a vertical step edge at one end, tilted by 3.5 degrees, lands on the edge (both
    // endpoints within 0.15 px, their positions along the line and the score kept) and is then
    // fully supported; lines in a flat region or across the edge are left alone; a line between
    // two edges of opposite polarity goes to one of them, not to their average.
    void snapToEdgeMovesLinesOntoEdges() {
        namespace ev = glimpse::eval;
        cv::Mat img(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        img(cv::Rect(32, 0, 32, 64)).setTo(cv::Scalar(230, 230, 230));
        const ev::EdgeField f = ev::edgeField(img);
        ev::ScoredLine l{34.4f, 4.0f, 31.0f, 60.0f, 0.7f};
        QVERIFY(ev::snapToEdge(f, l));
        QVERIFY2(std::abs(l.x1 - 32.0f) < 0.15f && std::abs(l.x2 - 32.0f) < 0.15f,
                 qPrintable(QString("%1 %2").arg(l.x1).arg(l.x2)));
        QVERIFY(std::abs(l.y1 - 4.0f) < 0.2f && std::abs(l.y2 - 60.0f) < 0.2f);
        QCOMPARE(l.score, 0.7f);
        QCOMPARE(ev::lineSupport(f, l.x1, l.y1, l.x2, l.y2), 1.0);
        QVERIFY(!ev::snapToEdge(f, l) || std::abs(l.x1 - 32.0f) < 0.15f);   // already there
        ev::ScoredLine flat{12.0f, 4.0f, 12.0f, 60.0f, 0.5f}, across{4.0f, 30.0f, 60.0f, 30.0f, 0.5f};
        const ev::ScoredLine flat0 = flat, across0 = across;
        QVERIFY(!ev::snapToEdge(f, flat));
        QVERIFY(!ev::snapToEdge(f, across));
        QCOMPARE(flat.x1, flat0.x1);
        QCOMPARE(across.y1, across0.y1);
        ev::ScoredLine degenerate{5.0f, 5.0f, 5.0f, 5.0f, 0.5f}, nan{std::nanf(""), 1.0f, 5.0f, 50.0f, 0.5f};
        QVERIFY(!ev::snapToEdge(f, degenerate));
        QVERIFY(!ev::snapToEdge(f, nan));
        // A bright bar 4 px wide: its two edges at x = 30 and 34 have opposite polarities.
        cv::Mat bar(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        bar(cv::Rect(30, 0, 4, 64)).setTo(cv::Scalar(230, 230, 230));
        const ev::EdgeField fb = ev::edgeField(bar);
        ev::ScoredLine mid{31.5f, 4.0f, 31.5f, 60.0f, 0.5f};
        QVERIFY(ev::snapToEdge(fb, mid));
        const float x = 0.5f * (mid.x1 + mid.x2);
        QVERIFY2(std::abs(x - 30.0f) < 0.25f || std::abs(x - 34.0f) < 0.25f, qPrintable(QString::number(x)));
        ev::EdgeSnapOptions bad;
        bad.maxShift = 0;
        QVERIFY(testing::contains(testing::errorOf([&] { ev::snapToEdge(f, l, {}, bad); }), {"options"}));
        QVERIFY(testing::contains(testing::errorOf([&] { ev::snapToEdge(ev::EdgeField{}, l); }), {"field"}));
    }

    // The measure's picture: each measured line in the colour of its support, at the scale asked
    // for; lines beyond the measured K are not drawn; the image itself is not changed.
    void edgeSupportPicture() {
        using glimpse::eval::ScoredLine;
        namespace ev = glimpse::eval;
        cv::Mat img(64, 64, CV_8UC3, cv::Scalar(20, 20, 20));
        img(cv::Rect(32, 0, 32, 64)).setTo(cv::Scalar(230, 230, 230));
        const cv::Mat before = img.clone();
        std::vector<ScoredLine> lines{{32.0f, 4.0f, 32.0f, 60.0f, 0.9f},    // on the edge
                                      {12.0f, 4.0f, 12.0f, 60.0f, 0.8f},    // in the flat part
                                      {24.0f, 32.0f, 24.0f, 60.0f, 0.7f},   // in the flat part
                                      {20.0f, 4.0f, 20.0f, 60.0f, 0.6f}};   // not measured (K = 3)
        ev::EdgeSupportOptions o;
        o.topK = 3;
        // Support given directly (the picture colours what it is handed): on, off, partial.
        ev::EdgeSupport r;
        r.lines = 3;
        r.support = {1.0, 0.0, 0.5};
        const cv::Mat pic = ev::drawEdgeSupport(img, lines, r, o, 128);
        QCOMPARE(pic.size(), cv::Size(128, 128));
        QCOMPARE(pic.type(), CV_8UC3);
        QCOMPARE(cv::norm(img, before, cv::NORM_INF), 0.0);
        // Line coordinates x scale 2, drawn through pixel centres: column 2x - 1 (63.5 -> 63).
        const auto px = [&](int x, int y) { return pic.at<cv::Vec3b>(y, x); };
        QCOMPARE(px(63, 64), ev::kOnEdgeColour);
        QCOMPARE(px(23, 64), ev::kOffEdgeColour);
        QCOMPARE(px(47, 96), ev::kPartialColour);
        // Not measured: the unscaled image's pixel (the dark ground) where line 4 would be.
        QCOMPARE(px(39, 20), cv::Vec3b(20, 20, 20));
        // The real measure on the same lines colours the edge line green and the flat one red.
        const ev::EdgeSupport m = ev::edgeSupport(img, lines, o);
        const cv::Mat pic1 = ev::drawEdgeSupport(img, lines, m, o);
        QCOMPARE(pic1.size(), img.size());
        QCOMPARE(pic1.at<cv::Vec3b>(32, 31), ev::kOnEdgeColour);
        QCOMPARE(pic1.at<cv::Vec3b>(32, 11), ev::kOffEdgeColour);
        // A gray image comes out RGB.
        cv::Mat gray;
        cv::cvtColor(img, gray, cv::COLOR_RGB2GRAY);
        QCOMPARE(ev::drawEdgeSupport(gray, lines, m, o).type(), CV_8UC3);
        // Bad input.
        QVERIFY(testing::contains(testing::errorOf([&] { ev::drawEdgeSupport(cv::Mat(), lines, m, o); }), {"8-bit"}));
        QVERIFY(testing::contains(testing::errorOf([&] { ev::drawEdgeSupport(img, lines, m, o, -5); }), {"height"}));
        ev::EdgeSupport wrong = m;
        wrong.lines = 9;
        QVERIFY(testing::contains(testing::errorOf([&] { ev::drawEdgeSupport(img, lines, wrong, o); }), {"does not match"}));
    }
};

QTEST_APPLESS_MAIN(TestLineMetrics)
#include "test_line_metrics.moc"
