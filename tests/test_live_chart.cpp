// widgets/live_chart: points appended incrementally show up in the series and the axes; a
// second run overlays with its own style and legend entry; the grid makes one chart per series.
#include <QLegendMarker>
#include <QLineSeries>
#include <QChart>
#include <QLegend>
#include <QGridLayout>
#include <QtTest>

#include <cmath>

#include "widgets/live_chart.h"

using glimpse::widgets::ChartGrid;
using glimpse::widgets::LiveChart;
using glimpse::widgets::niceIntegerTickInterval;

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

    // A long run keeps every point but draws at most kShownPoints: each slice's first, last,
    // lowest and highest, so a one-step spike and both ends are still on the line (a line of
    // every row made each refresh of a long run stall the UI thread, docs/ui-latency.md).
    void longRunsDrawADecimatedLine() {
        LiveChart c("loss/total");
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
        QVERIFY2(shown.size() <= LiveChart::kShownPoints && shown.size() >= LiveChart::kShownPoints / 2,
                 qPrintable(QString::number(shown.size())));
        QCOMPARE(shown.front(), QPointF(0, 1.0));
        QCOMPARE(shown.back(), c.lastPoint(0));
        QVERIFY(shown.contains(QPointF(12345, 9.0)));
        QVERIFY(shown.contains(QPointF(777, -3.0)));
        for (int i = 1; i < shown.size(); ++i) QVERIFY(shown[i].x() > shown[i - 1].x());
        QCOMPARE(c.xRange(), QPointF(0, n - 1));
        QVERIFY(std::abs(c.yRange().y() - (9.0 + 0.6)) < 1e-9);   // every point counts for the axes
        // A short run draws all its points.
        LiveChart s("lr");
        s.appendPoints(0, {{0, 1.0}, {1, 2.0}, {2, 3.0}});
        QCOMPARE(s.shownPoints(0), s.points(0));
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
        const auto markers = c.chart()->legend()->markers();
        QStringList names;
        for (auto* m : markers) names << m->label();
        QCOMPARE(names, QStringList({"run A", "run B"}));
        c.clearRun(1);
        QCOMPARE(c.runs(), QList<int>({0}));
        QCOMPARE(c.xRange(), QPointF(0, 100));
        QCOMPARE(c.chart()->series().size(), 1);
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
        auto* grid = qobject_cast<QGridLayout*>(g.layout());
        QVERIFY(grid);
        QCOMPARE(grid->itemAtPosition(0, 0)->widget(), static_cast<QWidget*>(g.chart("val/sAP10")));
        QCOMPARE(grid->itemAtPosition(0, 1)->widget(), static_cast<QWidget*>(g.chart("lr")));
        QCOMPARE(grid->itemAtPosition(1, 0)->widget(), static_cast<QWidget*>(g.chart("loss/total")));
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
};

QTEST_MAIN(TestLiveChart)
#include "test_live_chart.moc"
