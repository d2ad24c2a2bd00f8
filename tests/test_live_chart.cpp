// widgets/live_chart: rows appended incrementally show up in the lines and the axes; overlays
// keep their own style; per-pixel-column decimation keeps spikes (checked against a brute-force
// min/max); smoothing draws the EMA a test formula computes, over the faint raw line; log scale;
// the x axis by step / relative / wall time; a single point is drawn; hover read-out and last
// values; the grid's groups, collapse, maximize / Escape, run filter and PNG / SVG / CSV export.
#include <QFile>
#include <QGridLayout>
#include <QPainter>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>

#include <cmath>

#include "widgets/live_chart.h"

using glimpse::widgets::ChartGrid;
using glimpse::widgets::emaSmooth;
using glimpse::widgets::LiveChart;
using glimpse::widgets::MinMaxPyramid;
using glimpse::widgets::niceIntegerTickInterval;
using glimpse::widgets::XAxisMode;

namespace {

bool near(const QColor& p, const QColor& want, int tol) {
    return std::abs(p.red() - want.red()) < tol && std::abs(p.green() - want.green()) < tol &&
           std::abs(p.blue() - want.blue()) < tol;
}

// Pixels of `want` (within tol) in the square of radius r about `at`.
int hitsNear(const QImage& img, QPointF at, const QColor& want, int r = 2, int tol = 40) {
    int hits = 0;
    for (int dy = -r; dy <= r; ++dy)
        for (int dx = -r; dx <= r; ++dx) {
            const int x = int(std::lround(at.x())) + dx, y = int(std::lround(at.y())) + dy;
            if (x >= 0 && y >= 0 && x < img.width() && y < img.height() && near(img.pixelColor(x, y), want, tol)) ++hits;
        }
    return hits;
}

QImage drawn(LiveChart& c) {
    QImage img(c.size(), QImage::Format_RGB32);
    QPainter p(&img);
    c.draw(p, img.rect());
    return img;
}

// Per pixel column of [xr.x(), xr.y()] (cols columns): the first, lowest, highest and last row
// whose x falls in it, by a brute-force scan (the last column takes every row left).
QVector<QPointF> bruteForceDecimation(const QVector<QPointF>& pts, QPointF xr, int cols) {
    const double dx = (xr.y() - xr.x()) / cols;
    QVector<QPointF> ref;
    int i = 0;
    for (int col = 0; col < cols; ++col) {
        const double edge = xr.x() + (col + 1) * dx;
        int b = i;
        while (b < pts.size() && (col == cols - 1 || pts[b].x() < edge)) ++b;
        if (b == i) continue;
        double lo = pts[i].y(), hi = lo;
        for (int j = i; j < b; ++j) lo = std::min(lo, pts[j].y()), hi = std::max(hi, pts[j].y());
        ref.push_back(pts[i]);
        if (b - i > 1) {
            const double mid = 0.5 * (pts[i].x() + pts[b - 1].x());
            ref << QPointF(mid, lo) << QPointF(mid, hi) << pts[b - 1];
        }
        i = b;
    }
    return ref;
}

// A noisy decaying loss with rare spikes, rows [first, first + n).
QVector<QPointF> lossRows(int first, int n) {
    QVector<QPointF> rows;
    rows.reserve(n);
    for (int i = first; i < first + n; ++i) {
        const double noise = std::sin(i * 12.9898) * 43758.5453;
        rows.push_back({double(i), 1.0 / (1 + i * 1e-4) * (1 + 0.1 * (noise - std::floor(noise))) + (i % 9973 == 7 ? 5 : 0)});
    }
    return rows;
}

// The grouping of the Training view, as a plain function: losses, then validation, then the rest.
ChartGrid::Placement threeGroups(const QString& s) {
    if (s.startsWith("loss")) return {0, "Losses", s == "loss/total" ? 0 : 1};
    if (s.startsWith("val/")) return {1, "Validation metrics", 0};
    return {3, "Optimizer and system", 0};
}

} // namespace

class TestLiveChart : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void appendsIncrementally() {
        LiveChart c("loss/total");
        QCOMPARE(c.pointCount(0), 0);
        c.appendPoints(0, {{0, 2.0}, {10, 1.5}});
        QCOMPARE(c.pointCount(0), 2);
        c.appendPoints(0, {{20, 1.0}, {30, 0.5}});
        QCOMPARE(c.pointCount(0), 4);
        QCOMPARE(c.lastPoint(0), QPointF(30, 0.5));
        QCOMPARE(c.xRange(), QPointF(0, 30));
        // y covers [0.5, 2] plus 5% padding.
        QVERIFY(std::abs(c.yRange().x() - (0.5 - 0.075)) < 1e-9);
        QVERIFY(std::abs(c.yRange().y() - (2.0 + 0.075)) < 1e-9);
        // A constant series gets +-5 % about its value, +-1 about 0 (an sAP of 0).
        LiveChart z("val/sAP10");
        z.appendPoints(0, {{10, 0.0}, {20, 0.0}});
        QCOMPARE(z.yRange(), QPointF(-1, 1));
        LiveChart k("lr");
        k.appendPoints(0, {{10, 2.0}, {20, 2.0}});
        QVERIFY(std::abs(k.yRange().x() - 1.9) < 1e-12 && std::abs(k.yRange().y() - 2.1) < 1e-12);
        // Non-finite points (a diverged loss) are dropped, not plotted.
        c.appendPoints(0, {{40, NAN}, {50, INFINITY}, {60, 0.25}});
        QCOMPARE(c.pointCount(0), 5);
        QCOMPARE(c.lastPoint(0), QPointF(60, 0.25));
        c.appendPoints(0, {});
        QCOMPARE(c.pointCount(0), 5);
    }

    // A long run keeps every row but draws per pixel column its first, lowest, highest and last
    // row, so a one-step spike and both ends are still on the line and drawing costs the width.
    void longRunsDrawADecimatedLine() {
        LiveChart c("loss/total");
        c.resize(600, 300);
        const int n = 20000;
        for (int first = 0; first < n; first += 1000) {   // refreshes of 1000 rows
            QVector<QPointF> rows;
            for (int i = first; i < first + 1000; ++i) rows.push_back({double(i), i == 12345 ? 9.0 : (i == 777 ? -3.0 : 1.0 / (1 + i))});
            c.appendPoints(0, rows);
        }
        QCOMPARE(c.pointCount(0), n);
        QCOMPARE(c.points(0).size(), n);
        QCOMPARE(c.lastPoint(0), QPointF(n - 1, 1.0 / n));
        const QVector<QPointF> shown = c.shownPoints(0);
        const int cols = int(std::ceil(c.plotRect().width()));
        QVERIFY2(shown.size() <= 4 * cols && shown.size() >= cols, qPrintable(QString::number(shown.size())));
        QCOMPARE(shown.front(), QPointF(0, 1.0));
        QCOMPARE(shown.back(), c.lastPoint(0));
        // The spikes are drawn in their own pixel column.
        for (const QPointF spike : {QPointF(12345, 9.0), QPointF(777, -3.0)}) {
            bool found = false;
            for (const QPointF& q : shown)
                found |= q.y() == spike.y() && std::abs(c.toPixel(q.x(), 0).x() - c.toPixel(spike.x(), 0).x()) < 1.5;
            QVERIFY2(found, qPrintable(QString::number(spike.x())));
        }
        for (int i = 1; i < shown.size(); ++i) QVERIFY(shown[i].x() >= shown[i - 1].x());
        QCOMPARE(c.xRange(), QPointF(0, n - 1));
        QVERIFY(std::abs(c.yRange().y() - (9.0 + 0.6)) < 1e-9);   // every row counts for the axes
        // A short run draws all its rows.
        LiveChart s("lr");
        s.resize(600, 300);
        s.appendPoints(0, {{0, 1.0}, {1, 2.0}, {2, 3.0}});
        QCOMPARE(s.shownPoints(0), s.points(0));
    }

    // The decimation of an uneven, growing line: per pixel column exactly the first, lowest,
    // highest and last row whose x falls in it (a brute-force scan per column), for the raw and
    // the smoothed line, while rows arrive (the column bounds are cached between paints).
    void decimationMatchesBruteForce() {
        QRandomGenerator rng(11);
        LiveChart c("loss/total");
        c.resize(500, 300);
        c.setSmoothing(0.7);
        double x = 0;
        for (int round = 0; round < 5; ++round) {
            QVector<QPointF> rows;
            for (int i = 0; i < 7000; ++i) {
                x += rng.bounded(3) == 0 ? rng.bounded(40) : 1;   // uneven steps, runs of equal spacing
                rows.push_back({x, rng.generateDouble() * (rng.bounded(500) == 0 ? 50 : 1)});
            }
            c.appendPoints(0, rows);
            const QVector<QPointF> pts = c.points(0);
            const QVector<QPointF> shown = c.shownPoints(0);
            const QPointF xr = c.xRange();
            const QVector<QPointF> ref = bruteForceDecimation(pts, xr, int(std::ceil(c.plotRect().width())));
            QCOMPARE(shown, ref);
            QImage img(500, 300, QImage::Format_RGB32);
            QPainter p(&img);
            c.draw(p, img.rect());   // the smoothed line's paint reuses the cached bounds
            QCOMPARE(c.shownPoints(0), ref);
        }
    }

    // Following a live run: its line is live, so the x axis ends past the last row and holds
    // still while rows arrive; a refresh then re-decimates only the line's last pixel columns,
    // not every column (what each refresh of every chart did when the axis ended at the last
    // row), and what is drawn is exactly what a chart fed every row at once draws.
    void liveLineRedecimatesOnlyItsTail() {
        LiveChart c("loss/total");
        c.resize(600, 300);
        c.setSmoothing(0.6);
        c.setLineLive(0, true);
        const int n0 = 203000;   // the axis ends at 220000 (a spacing of 20000)
        c.appendPoints(0, lossRows(0, n0));
        const QPointF xr0 = c.xRange();
        QCOMPARE(xr0.x(), 0.0);
        QVERIFY2(xr0.y() > n0 - 1 && xr0.y() <= (n0 - 1) * (1 + 1.0 / 8) + 1, qPrintable(QString::number(xr0.y())));
        drawn(c);
        const int cols = int(std::ceil(c.plotRect().width()));
        const LiveChart::DecimationStats s0 = c.decimationStats();
        QCOMPARE(s0.full, 2);   // the raw and the smoothed line
        int n = n0, axisChanges = 0;
        QPointF xr = xr0;
        for (int refresh = 0; refresh < 100; ++refresh) {   // 100 refreshes of 50 rows
            c.appendPoints(0, lossRows(n, 50));
            n += 50;
            axisChanges += c.xRange() != xr;
            xr = c.xRange();
            drawn(c);
        }
        const LiveChart::DecimationStats s1 = c.decimationStats();
        QCOMPARE(axisChanges, 0);
        QCOMPARE(s1.full - s0.full, 2 * axisChanges);
        QCOMPARE(s1.incremental - s0.incremental, 2 * (100 - axisChanges));
        // Each incremental paint computes the last row's column and the new rows' (50 rows are a
        // fraction of a column here: one or two columns), a full one every column.
        QVERIFY2(s1.columns - s0.columns <= qint64(2 * axisChanges * cols + 2 * 100 * 3),
                 qPrintable(QString::number(s1.columns - s0.columns)));
        // A paint without new rows computes nothing.
        drawn(c);
        QCOMPARE(c.decimationStats().columns, s1.columns);
        // Still exactly the first, lowest, highest and last row per column, raw and smoothed.
        QCOMPARE(c.shownPoints(0), bruteForceDecimation(c.points(0), c.xRange(), cols));
        LiveChart fresh("loss/total");
        fresh.resize(600, 300);
        fresh.setSmoothing(0.6);
        fresh.setLineLive(0, true);
        fresh.appendPoints(0, c.points(0));
        QCOMPARE(fresh.xRange(), c.xRange());
        QVERIFY(drawn(fresh) == drawn(c));
        // The run ended: the axis ends at its last row again.
        c.setLineLive(0, false);
        QCOMPARE(c.xRange(), QPointF(0, n - 1));

        // The axis grows geometrically: a run growing from step 1000 to 1,000,000 one row per
        // refresh (2000 refreshes) moves it at most once per 5% of growth (log 1000 / log 1.05).
        LiveChart g("loss/total");
        g.resize(600, 300);
        g.setLineLive(0, true);
        g.appendPoints(0, {{0, 1.0}});
        int moves = 0;
        QPointF last;
        for (int k = 0; k <= 2000; ++k) {
            const double step = std::round(1000 * std::pow(1000.0, k / 2000.0));
            if (step <= g.lastPoint(0).x()) continue;
            g.appendPoints(0, {{step, 1.0}});
            QVERIFY(g.xRange().y() > step);
            moves += g.xRange() != last;
            last = g.xRange();
        }
        QVERIFY2(moves >= 10 && moves <= 142, qPrintable(QString::number(moves)));

        // On a time axis too: 100 rows 0.5 s apart end at 49.5 s, the live axis at 50 s.
        LiveChart t("loss/total");
        std::vector<double> steps, wall, values;
        for (int i = 0; i < 100; ++i) steps.push_back(i), wall.push_back(0.5 * i), values.push_back(1.0 / (1 + i));
        t.appendRows(0, std::move(steps), std::move(wall), std::move(values));
        t.setXAxisMode(XAxisMode::RelativeTime);
        t.setLineLive(0, true);
        QCOMPARE(t.xRange(), QPointF(0, 50));
        t.setLineLive(0, false);
        QCOMPARE(t.xRange(), QPointF(0, 49.5));
    }

    // In a grid, a refresh that appends to every chart re-decimates no chart in full while the
    // axes hold still; appending to one chart past its axis' end rebuilds that chart only.
    void gridRefreshesRebuildOnlyTheAffectedChart() {
        ChartGrid g(nullptr, 2);
        g.resize(900, 600);
        const QStringList names{"loss/total", "loss/a", "val/b", "lr"};
        for (const QString& nm : names) g.appendPoints(nm, 0, lossRows(0, 20500));   // axes end at 22000
        g.setRunLive(0, true);
        g.show();
        QVERIFY(QTest::qWaitForWindowExposed(&g));
        g.grab();
        QMap<QString, LiveChart::DecimationStats> before;
        for (const QString& nm : names) {
            QVERIFY(g.chart(nm)->lineLive(0));
            before[nm] = g.chart(nm)->decimationStats();
            QCOMPARE(before[nm].full, 1);
        }
        int n = 20500;
        for (int refresh = 0; refresh < 20; ++refresh) {   // 20 x 20 rows: within the headroom
            for (const QString& nm : names) g.appendPoints(nm, 0, lossRows(n, 20));
            n += 20;
            g.grab();
        }
        for (const QString& nm : names) {
            QCOMPARE(g.chart(nm)->decimationStats().full, before[nm].full);
            QCOMPARE(g.chart(nm)->decimationStats().incremental, before[nm].incremental + 20);
        }
        // One chart's rows pass its axis' end: that chart is rebuilt, the others are not touched.
        const double end = g.chart("loss/a")->xRange().y();
        QVector<QPointF> past;
        for (int i = n; i <= int(end) + 10; ++i) past.push_back({double(i), 0.5});
        g.appendPoints("loss/a", 0, past);
        g.grab();
        QVERIFY(g.chart("loss/a")->xRange().y() > end);
        QCOMPARE(g.chart("loss/a")->decimationStats().full, before["loss/a"].full + 1);
        for (const QString& nm : {QString("loss/total"), QString("val/b"), QString("lr")})
            QCOMPARE(g.chart(nm)->decimationStats().full, before[nm].full);
        // A run that is no longer live: tight axes again.
        g.setRunLive(0, false);
        QVERIFY(!g.chart("lr")->lineLive(0));
        QCOMPARE(g.chart("lr")->xRange(), QPointF(0, n - 1));
    }

    // The pyramid's min/max of any range equals a brute-force scan, also while it grows.
    void pyramidMatchesBruteForce() {
        QRandomGenerator rng(7);
        std::vector<double> v;
        MinMaxPyramid p;
        for (int round = 0; round < 4; ++round) {
            const int add = 1 + int(rng.bounded(3000));
            for (int i = 0; i < add; ++i) v.push_back(rng.generateDouble() * 2 - 1 + (rng.bounded(500) == 0 ? 50 : 0));
            p.extend(v.data(), int(v.size()));
            for (int q = 0; q < 300; ++q) {
                int a = int(rng.bounded(int(v.size()))), b = int(rng.bounded(int(v.size()))) + 1;
                if (a >= b) std::swap(a, b), b = std::max(b, a + 1);
                b = std::min(b, int(v.size()));
                if (a >= b) continue;
                const auto [lo, hi] = p.range(v.data(), a, b);
                QCOMPARE(lo, *std::min_element(v.begin() + a, v.begin() + b));
                QCOMPARE(hi, *std::max_element(v.begin() + a, v.begin() + b));
            }
        }
    }

    // TensorBoard's debiased EMA, against its closed form sum_j (1-w) w^(i-j) y_j / (1 - w^(i+1)).
    void emaMatchesItsClosedForm() {
        const std::vector<double> y{3, -1, 4, 1, -5, 9, 2, 6};
        for (double w : {0.0, 0.3, 0.9}) {
            const auto s = emaSmooth(y, w);
            for (size_t i = 0; i < y.size(); ++i) {
                double num = 0;
                for (size_t j = 0; j <= i; ++j) num += (1 - w) * std::pow(w, double(i - j)) * y[j];
                QVERIFY(std::abs(s[i] - num / (1 - std::pow(w, double(i + 1)))) < 1e-12);
            }
        }
        QCOMPARE(emaSmooth(y, 0.0), y);
    }

    void stepAxisTicksAreWholeNumbers() {
        QCOMPARE(niceIntegerTickInterval(1), 1.0);
        QCOMPARE(niceIntegerTickInterval(3), 1.0);
        QCOMPARE(niceIntegerTickInterval(12), 2.0);
        QCOMPARE(niceIntegerTickInterval(30), 5.0);
        QCOMPARE(niceIntegerTickInterval(200), 50.0);
        QCOMPARE(niceIntegerTickInterval(22000), 5000.0);
        QCOMPARE(niceIntegerTickInterval(60), 10.0);
        // A run three steps long: ticks one step apart, not 0.75 (fractional step labels).
        LiveChart c("loss");
        c.appendPoints(0, {{1, 0.5}, {2, 0.4}, {3, 0.3}});
        QCOMPARE(c.xRange(), QPointF(1, 3));
        QCOMPARE(c.xTickInterval(), 1.0);
        c.appendPoints(0, {{3000, 0.1}});
        QCOMPARE(c.xTickInterval(), 500.0);
        // Every tick lands on a whole step: the interval is an integer.
        QCOMPARE(std::fmod(c.xTickInterval(), 1.0), 0.0);
        // A small chart (a maximized window's four columns) still has 3 or more labels: steps
        // 0..60 at 20 apart (one per 90 px gave 50 apart: the single label "50").
        LiveChart s("loss");
        s.resize(300, 200);
        s.appendPoints(0, {{0, 0.5}, {60, 0.3}});
        QVERIFY(s.plotRect().width() < 270);
        QCOMPARE(s.xTickInterval(), 20.0);
        // And at least two labels: steps 7..950 at 500 apart would have one ("500").
        s.clearAll();
        s.appendPoints(0, {{7, 0.5}, {950, 0.3}});
        QCOMPARE(s.xTickInterval(), 200.0);
    }

    void overlayHasItsOwnStyleAndLegend() {
        LiveChart c("lr");
        c.setRunLabel(0, "run A");
        c.setRunLabel(1, "run B");
        c.appendPoints(0, {{0, 1e-4}, {100, 1e-4}});
        c.appendPoints(1, {{0, 2e-4}, {200, 5e-5}});
        QCOMPARE(c.runs(), QList<int>({0, 1}));
        QCOMPARE(c.pointCount(1), 2);
        QVERIFY(c.runPen(0).color() != c.runPen(1).color());
        QCOMPARE(c.runPen(0).style(), Qt::SolidLine);
        QCOMPARE(c.runPen(1).style(), Qt::DashLine);
        QCOMPARE(c.xRange(), QPointF(0, 200));
        // The legend: each line's label and its last value as a number.
        QCOMPARE(c.lastValueTexts(), QStringList({"run A  1.00e-04", "run B  5.00e-05"}));
        c.clearRun(1);
        QCOMPARE(c.runs(), QList<int>({0}));
        QCOMPARE(c.xRange(), QPointF(0, 100));
    }

    void gridMakesOneChartPerSeries() {
        ChartGrid g;
        g.setRunLabel(0, "live");
        g.appendPoints("loss/total", 0, {{1, 3.0}});
        g.appendPoints("lr", 0, {{1, 1e-4}});
        g.appendPoints("loss/total", 0, {{2, 2.5}});
        g.setRunLabel(1, "older");
        g.appendPoints("loss/total", 1, {{1, 4.0}, {2, 3.5}, {3, 3.0}});
        QCOMPARE(g.seriesNames(), QStringList({"loss/total", "lr"}));
        QCOMPARE(g.chart("loss/total")->pointCount(0), 2);
        QCOMPARE(g.chart("loss/total")->pointCount(1), 3);
        QCOMPARE(g.chart("loss/total")->runLabel(1), QString("older"));
        QCOMPARE(g.chart("lr")->pointCount(1), 0);
        QVERIFY(g.chart("missing") == nullptr);
        // Layout: named series first (in the given order, absent ones skipped), then by name.
        g.appendPoints("val/sAP10", 0, {{2, 0.1}});
        QCOMPARE(g.layoutOrder(), QStringList({"loss/total", "lr", "val/sAP10"}));
        g.setOrder({"val/sAP10", "val/APH", "lr"});
        QCOMPARE(g.layoutOrder(), QStringList({"val/sAP10", "lr", "loss/total"}));
        QCOMPARE(g.charts().front(), g.chart("val/sAP10"));
        g.clearRun(1);
        QCOMPARE(g.chart("loss/total")->runs(), QList<int>({0}));
        g.clearAll();
        QVERIFY(g.seriesNames().isEmpty());
    }

    void rendersPixels() {
        // The line is actually drawn: grab the widget and find the run colour.
        LiveChart c("loss");
        c.resize(400, 300);
        c.appendPoints(0, {{0, 0}, {10, 10}});
        c.show();
        QVERIFY(QTest::qWaitForWindowExposed(&c));
        const QImage img = c.grab().toImage();
        const QColor want = glimpse::widgets::runColor(0);
        int hits = 0;
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x) {
                const QColor p = img.pixelColor(x, y);
                if (std::abs(p.red() - want.red()) < 30 && std::abs(p.green() - want.green()) < 30 &&
                    std::abs(p.blue() - want.blue()) < 30)
                    ++hits;
            }
        QVERIFY2(hits > 50, qPrintable(QString::number(hits)));
    }

    // Smoothing draws the EMA the test formula computes, in the run's full colour, over the raw
    // line drawn faint: the pixels move from the raw zig-zag to the smoothed curve.
    void smoothingChangesTheDrawnLine() {
        LiveChart c("loss");
        c.resize(500, 320);
        QVector<QPointF> rows;
        std::vector<double> ys;
        for (int i = 0; i < 40; ++i) {
            ys.push_back(i % 2 ? 1.0 : 0.0);
            rows.push_back({double(i), ys.back()});
        }
        c.appendPoints(0, rows);
        const QColor run = glimpse::widgets::runColor(0);
        const double w = 0.8;
        std::vector<double> ref(ys.size());
        for (size_t i = 0; i < ys.size(); ++i) {   // closed form of the debiased EMA
            double num = 0;
            for (size_t j = 0; j <= i; ++j) num += (1 - w) * std::pow(w, double(i - j)) * ys[j];
            ref[i] = num / (1 - std::pow(w, double(i + 1)));
        }
        // Off: the full-colour line passes through the raw rows, not through the EMA's values.
        QImage raw = drawn(c);
        int onRaw = 0, onSmoothOff = 0;
        for (int i = 10; i < 40; ++i) {
            onRaw += hitsNear(raw, c.toPixel(i, ys[size_t(i)]), run, 1) > 0;
            onSmoothOff += hitsNear(raw, c.toPixel(i, ref[size_t(i)]), run, 1) > 0;
        }
        QCOMPARE(onRaw, 30);
        QVERIFY2(onSmoothOff <= 3, qPrintable(QString::number(onSmoothOff)));
        c.setSmoothing(w);
        const QVector<double> sm = c.smoothedValues(0);
        for (int i = 0; i < 40; ++i) QVERIFY(std::abs(sm[i] - ref[size_t(i)]) < 1e-12);
        const QImage smooth = drawn(c);
        int onSmooth = 0, strongOnRaw = 0, faintOnRaw = 0;
        // The faint raw line: the run's blue at low opacity over white (light, bluish; the grid
        // lines are neutral grey).
        const auto faintNear = [&](QPointF at) {
            for (int dy = -2; dy <= 2; ++dy)
                for (int dx = -2; dx <= 2; ++dx) {
                    const QColor q = smooth.pixelColor(int(std::lround(at.x())) + dx, int(std::lround(at.y())) + dy);
                    if (q.blue() - q.red() > 8 && q.red() > 150) return true;
                }
            return false;
        };
        for (int i = 10; i < 40; ++i) {
            onSmooth += hitsNear(smooth, c.toPixel(i, ref[size_t(i)]), run, 1) > 0;
            strongOnRaw += hitsNear(smooth, c.toPixel(i, ys[size_t(i)]), run, 1) > 0;
            faintOnRaw += faintNear(c.toPixel(i, ys[size_t(i)]));
        }
        QCOMPARE(onSmooth, 30);
        QVERIFY2(strongOnRaw <= 3, qPrintable(QString::number(strongOnRaw)));
        QVERIFY2(faintOnRaw >= 25, qPrintable(QString::number(faintOnRaw)));   // the raw line stays, faint
        // New rows continue the EMA where it was.
        c.appendPoints(0, {{40, 0.0}});
        QVERIFY(std::abs(c.smoothedValues(0).back() - (ref.back() * (1 - std::pow(w, 40)) * w) / (1 - std::pow(w, 41))) < 1e-12);
    }

    // Log scale: decades equally spaced, values drawn where log10 puts them; the toggle in the
    // header switches it.
    void logScale() {
        LiveChart c("lr");
        c.resize(420, 300);
        QVector<QPointF> rows;
        for (int i = 0; i <= 40; ++i) rows.push_back({double(i), std::pow(10.0, -i / 10.0)});   // 1 .. 1e-4
        c.appendPoints(0, rows);
        c.show();
        QVERIFY(QTest::qWaitForWindowExposed(&c));
        QVERIFY(!c.logScale());
        const double linGap = c.toPixel(30, 1e-3).y() - c.toPixel(20, 1e-2).y();
        QVERIFY(std::abs(linGap) < 3);   // linear: the small values all sit at the bottom
        QTest::mouseClick(&c, Qt::LeftButton, Qt::NoModifier, c.logToggleRect().center());
        QVERIFY(c.logScale());
        const double d1 = c.toPixel(0, 1e-3).y() - c.toPixel(0, 1e-2).y(), d2 = c.toPixel(0, 1e-2).y() - c.toPixel(0, 1e-1).y();
        QVERIFY(d1 > 20 && std::abs(d1 - d2) < 1e-6);
        QVERIFY(c.yRange().x() > 0 && c.yRange().x() < 1e-4 && c.yRange().y() > 1);
        const QImage img = drawn(c);
        const QColor run = glimpse::widgets::runColor(0);
        for (int i = 0; i <= 40; i += 5) QVERIFY2(hitsNear(img, c.toPixel(i, rows[i].y()), run, 1) > 0, qPrintable(QString::number(i)));
        // Non-positive values go below the axis (not drawn), the axis stays on the positive ones.
        c.appendPoints(0, {{41, 0.0}});
        QVERIFY(c.yRange().x() > 0);
        c.setLogScale(false);
        QCOMPARE(c.yRange().x() < 0, true);
    }

    // One validation so far: the point is drawn (a dot) on an axis about it, and its value shown.
    void singlePointIsDrawn() {
        LiveChart c("val/acc");
        c.resize(420, 300);
        c.setRunLabel(0, "coat");
        c.appendPoints(0, {{600, 0.8125}});
        QCOMPARE(c.xRange(), QPointF(599, 601));
        QVERIFY(c.yRange().x() < 0.8125 && c.yRange().y() > 0.8125);
        QCOMPARE(c.lastValueTexts(), QStringList({"coat  0.8125"}));
        const QImage img = drawn(c);
        const QPointF at = c.toPixel(600, 0.8125);
        QVERIFY(c.plotRect().contains(at));
        QVERIFY2(hitsNear(img, at, glimpse::widgets::runColor(0), 2) >= 9, "no dot at the point");
    }

    // The x axis by step, by time since the run started and by wall-clock time; the hover
    // read-out names every line's value at the cursor.
    void xAxisModesAndReadout() {
        LiveChart c("loss");
        c.resize(420, 300);
        c.setRunLabel(0, "a");
        c.setRunLabel(1, "b");
        c.appendRows(0, {10, 20, 30}, {5, 15, 25}, {3, 2, 1});
        c.appendRows(1, {10, 20}, {100, 200}, {6, 4});
        c.setRunStart(0, 1.7e9);
        c.setRunStart(1, 1.7e9 + 1000);
        QCOMPARE(c.xRange(), QPointF(10, 30));
        c.setXAxisMode(XAxisMode::RelativeTime);
        QCOMPARE(c.xRange(), QPointF(5, 200));
        c.setXAxisMode(XAxisMode::WallTime);
        QCOMPARE(c.xRange(), QPointF(1.7e9 + 5, 1.7e9 + 1200));
        c.setXAxisMode(XAxisMode::Step);
        const QString r = c.readout(21);
        QVERIFY2(r.contains("a: 2") && r.contains("b: 4") && r.contains("step 21"), qPrintable(r));
        c.show();
        QVERIFY(QTest::qWaitForWindowExposed(&c));
        QTest::mouseMove(&c, c.toPixel(30, 1).toPoint());
        QTRY_VERIFY(c.hoverText().contains("a: 1"));
        QVERIFY(c.hoverText().contains("b: 4"));
        c.setLineVisible(1, false);
        QVERIFY(!c.readout(20).contains("b:"));
        QCOMPARE(c.xRange(), QPointF(10, 30));
    }

    // The grid: groups in order, collapsible; as many columns as fit; double-click maximizes a
    // chart to the grid's whole area and Escape brings the grid back; the run filter.
    void gridGroupsMaximizeAndFilter() {
        ChartGrid g;
        g.setGrouping(threeGroups);
        g.resize(800, 700);
        g.setRunLabel(0, "letr-alpha");
        g.setRunLabel(1, "coat-beta");
        for (const char* s : {"lr", "val/acc", "loss/cls", "loss/total", "throughput"})
            for (int run = 0; run < 2; ++run) g.appendPoints(s, run, {{1, 1.0 + run}, {2, 0.5}});
        QCOMPARE(g.layoutOrder(), QStringList({"loss/total", "loss/cls", "val/acc", "lr", "throughput"}));
        QCOMPARE(g.groupTitles(), QStringList({"Losses", "Validation metrics", "Optimizer and system"}));
        g.show();
        QVERIFY(QTest::qWaitForWindowExposed(&g));
        QTRY_COMPARE(g.columns(), 2);   // 800 px: two charts a row
        for (LiveChart* c : g.charts()) QVERIFY(c->isVisible());
        // Collapse the losses: their charts hide, the others stay.
        auto* head = g.findChild<QToolButton*>("chartgroup:Losses");
        QVERIFY(head);
        head->click();
        QTRY_VERIFY(g.groupCollapsed("Losses"));
        QTRY_VERIFY(!g.chart("loss/total")->isVisible());
        QVERIFY(g.chart("val/acc")->isVisible());
        g.setGroupCollapsed("Losses", false);
        QTRY_VERIFY(g.chart("loss/total")->isVisible());
        // Maximize by double-click; Escape restores.
        LiveChart* lr = g.chart("lr");
        QTest::mouseDClick(lr, Qt::LeftButton, Qt::NoModifier, lr->rect().center());
        QCOMPARE(g.maximized(), QString("lr"));
        QTRY_VERIFY(!g.chart("loss/total")->isVisible());
        QTRY_VERIFY(lr->width() > 0.9 * g.width() && lr->height() > 0.8 * g.height());
        QTest::keyClick(lr, Qt::Key_Escape);
        QCOMPARE(g.maximized(), QString());
        QTRY_VERIFY(g.chart("loss/total")->isVisible());
        QTRY_VERIFY(lr->width() < 0.6 * g.width());
        // Wider: more columns.
        g.resize(1600, 700);
        QTRY_COMPARE(g.columns(), 4);
        // The run filter: a regex on the run names, hiding the other runs' lines everywhere.
        QVERIFY(g.setRunFilter("^letr"));
        for (LiveChart* c : g.charts()) QVERIFY(c->lineVisible(0) && !c->lineVisible(1));
        QVERIFY(!g.setRunFilter("(unclosed"));
        QVERIFY(!g.chart("lr")->lineVisible(1));   // an invalid pattern changes nothing
        QVERIFY(g.setRunFilter("BETA"));           // case-insensitive
        QVERIFY(!g.chart("lr")->lineVisible(0) && g.chart("lr")->lineVisible(1));
        g.appendPoints("new/series", 0, {{1, 1.0}});   // a chart made later is filtered too
        QVERIFY(!g.chart("new/series")->lineVisible(0));
        QVERIFY(g.setRunFilter(""));
        QVERIFY(g.chart("new/series")->lineVisible(0));
    }

    // Export: the charts shown as PNG and SVG, every row as CSV.
    void exports() {
        QTemporaryDir dir;
        ChartGrid g(nullptr, 2);
        g.setGrouping(threeGroups);
        g.setRunLabel(0, "run, one");
        g.appendRows("loss/total", 0, {1, 2, 3}, {0.5, 1.5, 2.5}, {3, 2, 1});
        g.appendRows("lr", 0, {1, 2}, {}, {1e-4, 5e-5});
        g.setSmoothing(0.5);
        QString err;
        QVERIFY2(g.exportPng(dir.filePath("c.png"), &err), qPrintable(err));
        const QImage png(dir.filePath("c.png"));
        QCOMPARE(png.size(), QSize(2 * 480, 300));
        int blue = 0;
        for (int y = 0; y < png.height(); ++y)
            for (int x = 0; x < png.width(); ++x) blue += near(png.pixelColor(x, y), glimpse::widgets::runColor(0), 30);
        QVERIFY2(blue > 100, qPrintable(QString::number(blue)));
        QVERIFY2(g.exportSvg(dir.filePath("c.svg"), &err), qPrintable(err));
        QFile svg(dir.filePath("c.svg"));
        QVERIFY(svg.open(QIODevice::ReadOnly));
        const QByteArray svgText = svg.readAll();
        QVERIFY(svgText.contains("<svg") && svgText.contains("loss/total") && svgText.contains("</svg>"));
        QVERIFY2(g.exportCsv(dir.filePath("c.csv"), &err), qPrintable(err));
        QFile csv(dir.filePath("c.csv"));
        QVERIFY(csv.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList lines = QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 1 + 3 + 2);
        QCOMPARE(lines[0], QString("chart,line,step,wall_time,value,smoothed"));
        QCOMPARE(lines[1], QString("loss/total,\"run, one\",1,0.5,3,3"));
        QCOMPARE(lines[2], QString("loss/total,\"run, one\",2,1.5,2,%1").arg(QString::number((0.5 * 3 * 0.5 + 0.5 * 2) / 0.75, 'g', 17)));
        QCOMPARE(lines[4], QString("lr,\"run, one\",1,,0.0001,0.0001"));
        // Collapsed groups are not exported; a failed write names the file.
        g.setGroupCollapsed("Losses", true);
        QVERIFY(g.exportCsv(dir.filePath("c2.csv")));
        QFile c2(dir.filePath("c2.csv"));
        QVERIFY(c2.open(QIODevice::ReadOnly));
        QVERIFY(!c2.readAll().contains("loss/total"));
        QVERIFY(!g.exportPng(dir.filePath("no/such/dir/c.png"), &err));
        QVERIFY2(err.contains("no/such/dir/c.png"), qPrintable(err));
    }
};

QTEST_MAIN(TestLiveChart)
#include "test_live_chart.moc"
