#pragma once
// Live training charts on QtCharts. Plain data only (no core/, no LibTorch): the app feeds
// (x, y) points read from run logs. Each chart holds one line per run; run 0 is drawn solid,
// overlaid runs (1, 2, ...) dashed / dotted in other colours, each with its own legend entry.
#include <QColor>
#include <QPen>
#include <QMap>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;
class QGridLayout;

namespace glimpse::widgets {

// The style of run `run` (shared by every chart, so a run looks the same everywhere).
QColor runColor(int run);
Qt::PenStyle runPenStyle(int run);
// The colour of the k-th game of a category ("shooter": warm shades, "maze": cool ones, any
// other: greys and muted hues), shared by the Training panel and the replay viewer.
QColor gameColour(const QString& category, int k);

// The tick spacing for an integer axis spanning `span` with at most about `maxTicks` ticks:
// the smallest of 1, 2, 5 x 10^k that is >= span / maxTicks, and at least 1.
double niceIntegerTickInterval(double span, int maxTicks = 6);

class LiveChart : public QWidget {
    Q_OBJECT
public:
    explicit LiveChart(const QString& title, QWidget* parent = nullptr);
    ~LiveChart() override;

    QString title() const { return title_; }
    // The legend text of a run (created on first use).
    void setRunLabel(int run, const QString& label);
    // A line's own colour and dash instead of its run's (e.g. one line per game in one chart);
    // applies to a line drawn already and to one created later.
    void setLineStyle(int run, const QColor& colour, Qt::PenStyle style);
    QString runLabel(int run) const;
    // Appends points to a run's line (x ascending within a run) and rescales the axes.
    void appendPoints(int run, const QVector<QPointF>& points);
    void clearRun(int run);     // removes the run's line
    void clearAll();
    QList<int> runs() const;
    int pointCount(int run) const;   // 0 for an unknown run
    QPointF lastPoint(int run) const;
    QVector<QPointF> points(int run) const;   // the run's points (empty for an unknown run)
    // The points the run's line draws: all of them up to kShownPoints, else the first, last,
    // lowest and highest point of each of kShownPoints / 2 slices (spikes stay visible).
    QVector<QPointF> shownPoints(int run) const;
    static void flushPending(LiveChart* c);   // the event-loop queue's entry (live_chart.cpp)
    static constexpr int kShownPoints = 800;   // about 2 per pixel column of a chart
    QPen runPen(int run) const;      // the pen the run's line is drawn with
    // Axis ranges after the last append (for tests and "fit" behaviour).
    QPointF xRange() const;
    QPointF yRange() const;
    // Spacing of the step axis' ticks: 1, 2 or 5 times a power of ten, at least 1 (steps are
    // whole numbers, so labels never show fractions), giving at most about 6 ticks; ticks sit
    // on multiples of it.
    double xTickInterval() const;
    QChart* chart() const { return chart_; }

private:
    QLineSeries* line(int run);
    void rescale();
    // Draws the points appended since the last call (lines and axes); appendPoints queues it
    // on the event loop, so a refresh of many charts is many short UI-thread slices, not one
    // long one. The getters call it first, so they always see every point.
    void flush() const;

    QString title_;
    QChart* chart_ = nullptr;
    QChartView* view_ = nullptr;
    QValueAxis* axisX_ = nullptr;
    QValueAxis* axisY_ = nullptr;
    QMap<int, QLineSeries*> lines_;
    mutable QList<int> dirty_;           // runs whose line is not redrawn yet
    mutable bool flushQueued_ = false;
    QMap<int, QVector<QPointF>> data_;   // every point of each run; lines_ show at most
                                         // kShownPoints of them (min/max per bucket)
    QMap<int, QString> labels_;
    QMap<int, QPair<QColor, Qt::PenStyle>> styles_;   // setLineStyle's overrides
};

// A grid of LiveCharts, one per series name, created on first append: the names given to
// setOrder first (in that order), then the others sorted by name.
class ChartGrid : public QWidget {
    Q_OBJECT
public:
    explicit ChartGrid(QWidget* parent = nullptr, int columns = 2);
    void setRunLabel(int run, const QString& label);
    void appendPoints(const QString& series, int run, const QVector<QPointF>& points);
    void clearRun(int run);
    void clearAll();   // removes every chart
    QStringList seriesNames() const;                 // sorted by name
    QStringList layoutOrder() const;                 // as laid out (row by row)
    void setOrder(const QStringList& first);
    LiveChart* chart(const QString& series) const;   // nullptr when absent

private:
    void relayout();
    int columns_;
    QStringList order_;
    QGridLayout* grid_ = nullptr;
    QMap<QString, LiveChart*> charts_;
    QMap<int, QString> labels_;
};

} // namespace glimpse::widgets
