#pragma once
// Live training charts, drawn with QPainter. Plain data only (no core/, no LibTorch): the app
// feeds rows (step, wall time, value) read from run logs. Each chart holds one line per run
// (or per game of a run); run 0 is drawn solid, overlaid runs in their own colour and dash,
// the same in every chart. What TensorBoard's scalar dashboard users expect is here:
//   * smoothing: an exponential moving average (TensorBoard's debiased one) drawn over the raw
//     line, which stays faint behind it;
//   * log scale per chart (the "log" toggle in the chart's header; non-positive values are
//     clipped to the bottom);
//   * the x axis by step, by time since the run started, or by wall-clock time;
//   * a hover read-out of every line's value at the cursor, and each line's last value as a
//     number under the plot (a single point is drawn as a dot, on a sensible axis);
//   * decimation per pixel column keeping the column's first, lowest, highest and last value
//     (spikes stay visible), from a min/max pyramid, so drawing costs the chart's width, not
//     the run's length (a million steps draw as fast as a hundred).
#include <QColor>
#include <QMap>
#include <QPen>
#include <QPointF>
#include <QRectF>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <functional>
#include <limits>
#include <map>
#include <vector>

class QGridLayout;
class QLabel;
class QPainter;
class QToolButton;
class QVBoxLayout;

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
// The same for a real axis: 1, 2 or 5 x 10^k (any k), > 0.
double niceTickInterval(double span, int maxTicks = 6);

// TensorBoard's smoothing: an exponential moving average with weight w in [0, 1), debiased
// (divided by 1 - w^(i+1)) so the first values are not pulled towards 0. w = 0: the raw values.
std::vector<double> emaSmooth(const std::vector<double>& values, double w);

enum class XAxisMode { Step, RelativeTime, WallTime };

// Min and max of consecutive blocks at doubling sizes: the min/max of any index range in
// O(kBase + log n). Appending extends it (complete blocks only).
class MinMaxPyramid {
public:
    static constexpr int kShift = 5;
    static constexpr int kBase = 1 << kShift;
    void clear();
    void extend(const double* values, int n);   // values[0..n) (n = the new total count)
    // Min and max of values[a, b) (a < b <= n of the last extend).
    std::pair<double, double> range(const double* values, int a, int b) const;
    // Asks the CPU to fetch what range(values, a, b) will read (a paint queries the columns
    // in order and prefetches a few columns ahead: the levels' cache misses then overlap).
    void prefetch(const double* values, int a, int b) const;

private:
    // level k: blocks of kBase << k values, each as its min and max side by side (one cache
    // line holds both: a paint walks the levels column by column, so misses are its cost)
    std::vector<std::vector<double>> lv_;
    size_t blocks(size_t k) const { return lv_[k].size() / 2; }
};

// One line's rows made ready for a chart: non-finite rows dropped, wall times as a running
// maximum (NaN where unknown), the min/max pyramid built and, for a smoothing weight > 0, the
// smoothed line and its pyramid. prepare() is what appending rows to a new line does; it
// touches no widget, so a worker thread can do it for a long log while the UI thread goes on
// (LiveChart::adoptRows then only moves the vectors in).
struct ChartRows {
    std::vector<double> x;   // step
    std::vector<double> t;   // seconds since the run started, a running maximum (NaN: unknown)
    std::vector<double> y;   // value
    std::vector<double> s;   // smoothed value (empty while smoothing is off)
    bool hasTime = true;
    double emaLast = 0, emaWeight = 0;   // the EMA's state after the last smoothed row
    double smoothing = 0;                // the weight s was computed with
    double minPositive = std::numeric_limits<double>::infinity();   // for the log axis
    MinMaxPyramid py, ps;
    size_t size() const { return y.size(); }
    // Appends rows (the rules above); a line without rows takes the vectors over.
    void append(std::vector<double>&& steps, std::vector<double>&& wallTimes, std::vector<double>&& values);
    // Brings s (and ps) up to date for weight w (recomputed from the first row when w changed).
    void smooth(double w);
    static ChartRows prepare(std::vector<double>&& steps, std::vector<double>&& wallTimes, std::vector<double>&& values,
                             double smoothing);
};

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
    // Appends rows to a line (steps ascending within a line); non-finite values (a diverged
    // loss) are dropped. wallTimes: seconds since the run started, one per row, or empty
    // (then the line has no place on a time axis).
    void appendPoints(int run, const QVector<QPointF>& points);
    // A new line takes the vectors over (a long run's rows are not copied again).
    void appendRows(int run, std::vector<double>&& steps, std::vector<double>&& wallTimes, std::vector<double>&& values);
    // Rows prepared elsewhere (ChartRows::prepare on a worker): a new line takes them over as
    // they are; a line with rows already gets them appended.
    void adoptRows(int run, ChartRows&& rows);
    // The text shown in an empty plot ("" : "no rows yet"), e.g. while a long log is read.
    void setPlaceholder(const QString& text);
    // Unix time of the run's start (the wall-clock axis adds it to the rows' wall times).
    void setRunStart(int run, double unixTime);
    void clearRun(int run);     // removes the run's line
    void clearAll();
    QList<int> runs() const;
    int pointCount(int run) const;   // 0 for an unknown run
    QPointF lastPoint(int run) const;
    QVector<QPointF> points(int run) const;   // the run's (step, value) rows
    QVector<double> wallTimes(int run) const;
    QVector<double> smoothedValues(int run) const;   // the EMA drawn (the raw values when off)

    // The points the run's line draws at the chart's current width, in data coordinates:
    // per pixel column of the plot the first, lowest, highest and last row in it, in x order
    // (every row when there are fewer rows than columns).
    QVector<QPointF> shownPoints(int run) const;
    QPen runPen(int run) const;      // the pen the run's line is drawn with

    // Hidden lines are neither drawn nor counted for the axes (the run filter).
    void setLineVisible(int run, bool visible);
    bool lineVisible(int run) const { return !hidden_.contains(run); }
    // A live line (its run is still being written) gives the x axis headroom: while a visible
    // line is live, the axis ends past the last row, at the next multiple of a 1, 2, 5 x 10^k
    // spacing of 1/20 to 1/8 of the span. So the axis moves only when the rows pass that end
    // (every 5-12% of growth), not on every refresh, and each paint in between re-decimates
    // only the last pixel column of a line (the columns before it are cached). Without live
    // lines the axis spans the first to the last row.
    void setLineLive(int run, bool live);
    bool lineLive(int run) const { return live_.contains(run); }
    // What the decimation cost so far: paints that computed every pixel column of a line
    // (full), paints that extended a cached line from its last column (incremental), the pixel
    // columns holding rows computed in all (a paint of unchanged rows computes none).
    struct DecimationStats {
        int full = 0, incremental = 0;
        qint64 columns = 0;
    };
    DecimationStats decimationStats() const { return stats_; }

    void setSmoothing(double w);     // clamped to [0, 0.999]
    double smoothing() const { return smoothing_; }
    void setLogScale(bool on);
    bool logScale() const { return logY_; }
    void setXAxisMode(XAxisMode m);
    XAxisMode xAxisMode() const { return xMode_; }

    // Axis ranges as drawn (x in the axis' unit; y in values, also on a log axis).
    QPointF xRange() const;
    QPointF yRange() const;
    // Spacing of the x axis' ticks as drawn (by step: 1, 2 or 5 times a power of ten, at least
    // 1, so labels never show fractions; about one per 70 px, at least 3; by time: one per
    // 90 px).
    double xTickInterval() const;
    // Geometry, in widget coordinates: the plot area and where a data point is drawn.
    QRectF plotRect() const;
    QPointF toPixel(double x, double y) const;
    // The x coordinate (axis unit) of line `run`'s row i.
    double rowX(int run, int i) const;
    // The read-out at axis position x: per visible line its label and the value of the row
    // nearest x (raw, and smoothed when smoothing is on). "" without lines.
    QString readout(double x) const;
    QString hoverText() const;   // the read-out shown now (the mouse is over the plot), or ""
    // The last raw value of each visible line, as the legend shows it ("label  0.123").
    QStringList lastValueTexts() const;
    QRect logToggleRect() const;   // the header's "log" toggle

    // Draws the chart into `target` (export: PNG through a QImage, SVG through QSvgGenerator).
    void draw(QPainter& p, const QRect& target) const;
    QSize sizeHint() const override { return {420, 260}; }
    QSize minimumSizeHint() const override { return {220, 160}; }

Q_SIGNALS:
    void maximizeRequested();   // double-click
    void logScaleChanged(bool on);

protected:
    void paintEvent(QPaintEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseDoubleClickEvent(QMouseEvent* e) override;
    void leaveEvent(QEvent* e) override;

private:
    struct Line;
    struct Axes;
    Line& line(int run);
    const std::vector<double>& smoothedLine(const Line& l) const;   // brings the EMA up to date
    Axes axes(const QRect& plot) const;
    double xTickSpacing(const Axes& a) const;
    QRect plotIn(const QRect& r) const;
    int legendRows(int width) const;
    // groups (when given): where each pixel column's points start (empty: every row is a point).
    QVector<QPointF> decimated(const Line& l, bool smoothed, const Axes& a, QVector<int>* groups = nullptr) const;
    void drawLegend(QPainter& p, const QRect& r) const;
    void drawAxes(QPainter& p, const Axes& a) const;
    void drawLine(QPainter& p, const Line& l, const Axes& a, bool smoothed, const QPen& pen) const;
    QColor colourOf(int run) const;
    Qt::PenStyle styleOf(int run) const;

    QString title_;
    std::map<int, Line>* lines_;   // owned (std::map keeps Line out of the header)
    QMap<int, QString> labels_;
    QMap<int, QPair<QColor, Qt::PenStyle>> styles_;   // setLineStyle's overrides
    QMap<int, double> starts_;                        // setRunStart
    QSet<int> hidden_;
    QSet<int> live_;
    mutable DecimationStats stats_;
    double smoothing_ = 0;
    bool logY_ = false;
    XAxisMode xMode_ = XAxisMode::Step;
    double hoverX_ = -1;   // widget x of the mouse over the plot, -1: none
    QString placeholder_;
};

// The grid of charts of a training view: one LiveChart per series, created on first append,
// in groups (losses, validation metrics, ... as the grouping function says) that can be
// collapsed; as many columns as fit the width; one chart maximized fills the grid
// (double-click a chart; Escape or restore() brings the grid back). Smoothing, the x axis and
// the run filter apply to every chart.
class ChartGrid : public QWidget {
    Q_OBJECT
public:
    struct Placement {
        int group = 0;        // groups are laid out in ascending order
        QString groupTitle;   // the group's header ("Losses")
        int rank = 0;         // order within the group (then by name)
    };
    using Grouping = std::function<Placement(const QString& series)>;

    explicit ChartGrid(QWidget* parent = nullptr, int columns = 0);   // 0: as many as fit
    void setRunLabel(int run, const QString& label);
    void appendPoints(const QString& series, int run, const QVector<QPointF>& points);
    void appendRows(const QString& series, int run, std::vector<double>&& steps, std::vector<double>&& wallTimes,
                    std::vector<double>&& values);
    void adoptRows(const QString& series, int run, ChartRows&& rows);
    void setRunStart(int run, double unixTime);
    void clearRun(int run);
    void clearAll();   // removes every chart
    QStringList seriesNames() const;                 // sorted by name
    QStringList layoutOrder() const;                 // as laid out (group by group, row by row)
    // A grouping instead of "everything in one group, setOrder's names first, then by name".
    void setGrouping(Grouping g);
    void setOrder(const QStringList& first);
    LiveChart* chart(const QString& series) const;   // nullptr when absent
    QList<LiveChart*> charts() const;                // in layout order
    int columns() const { return shownColumns_; }

    QStringList groupTitles() const;                 // in layout order
    void setGroupCollapsed(const QString& title, bool collapsed);
    bool groupCollapsed(const QString& title) const { return collapsed_.contains(title); }

    void maximize(const QString& series);
    void restore();
    QString maximized() const { return maximized_; }

    void setSmoothing(double w);
    double smoothing() const { return smoothing_; }
    void setXAxisMode(XAxisMode m);
    // Runs whose label does not match `pattern` (a regular expression, case-insensitive) are
    // hidden; "" shows every run. Returns false (and changes nothing) for an invalid pattern.
    bool setRunFilter(const QString& pattern);
    // Which run a line key belongs to (the filter matches the run's label); default: itself.
    void setRunOf(std::function<int(int line)> f);
    // The run is still being written: its lines give the x axes headroom (LiveChart::setLineLive).
    void setRunLive(int run, bool live);

    // Export of the charts shown (not collapsed, not filtered out): PNG and SVG draw them in
    // their grid positions; CSV holds every row of every line (chart, line, step, wall time,
    // value, smoothed value). Atomic; false with *error naming the file on failure.
    bool exportPng(const QString& path, QString* error = nullptr) const;
    bool exportSvg(const QString& path, QString* error = nullptr) const;
    bool exportCsv(const QString& path, QString* error = nullptr) const;

Q_SIGNALS:
    void layoutChanged();

protected:
    void resizeEvent(QResizeEvent* e) override;
    void keyPressEvent(QKeyEvent* e) override;

private:
    struct Group;
    void relayout();
    void applyFilter(LiveChart* c) const;
    QList<QPair<QString, LiveChart*>> shownCharts() const;   // visible, with their grid geometry
    int fitColumns() const;
    LiveChart* makeChart(const QString& series);

    int columns_;
    int shownColumns_ = 1;
    QStringList order_;
    Grouping grouping_;
    QVBoxLayout* outer_ = nullptr;
    QMap<QString, LiveChart*> charts_;
    QMap<int, QString> labels_;
    QMap<int, double> starts_;
    QList<QWidget*> sections_;   // the current layout's group headers and grids
    QSet<QString> collapsed_;
    QString maximized_;
    double smoothing_ = 0;
    XAxisMode xMode_ = XAxisMode::Step;
    QString filter_;
    QSet<int> liveRuns_;
    std::function<int(int)> runOf_;
};

} // namespace glimpse::widgets
