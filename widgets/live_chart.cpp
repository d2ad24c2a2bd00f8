#include "widgets/live_chart.h"

#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>
#include <QCoreApplication>
#include <QPointer>
#include <QValueAxis>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace glimpse::widgets {

QColor runColor(int run) {
    static const QColor palette[] = {QColor(31, 119, 180), QColor(214, 39, 40), QColor(44, 160, 44),
                                     QColor(148, 103, 189), QColor(255, 127, 14)};
    return palette[std::abs(run) % 5];
}

Qt::PenStyle runPenStyle(int run) {
    static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine};
    return styles[std::abs(run) % 4];
}

QColor gameColour(const QString& category, int k) {
    static const QColor warm[] = {QColor(230, 85, 13), QColor(214, 39, 40), QColor(253, 174, 107), QColor(140, 45, 4),
                                  QColor(227, 119, 194)};
    static const QColor cool[] = {QColor(31, 119, 180), QColor(44, 160, 44), QColor(23, 190, 207), QColor(8, 48, 107),
                                  QColor(116, 196, 118)};
    static const QColor other[] = {QColor(127, 127, 127), QColor(148, 103, 189), QColor(188, 189, 34)};
    k = std::abs(k);
    if (category == "shooter") return warm[k % 5];
    if (category == "maze") return cool[k % 5];
    return other[k % 3];
}

double niceIntegerTickInterval(double span, int maxTicks) {
    const double raw = std::max(1.0, span / double(std::max(1, maxTicks)));
    if (!std::isfinite(raw)) return 1.0;
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw * (1 - 1e-9)) return std::max(1.0, m * p);
    return 10.0 * p;
}

namespace {

// At most LiveChart::kShownPoints points of `all` (x ascending): all of them when few enough,
// else per slice of consecutive points its first, lowest, highest and last, in x order.
QVector<QPointF> decimate(const QVector<QPointF>& all) {
    const int n = int(all.size());
    if (n <= LiveChart::kShownPoints) return all;
    const int slices = LiveChart::kShownPoints / 4;
    QVector<QPointF> out;
    out.reserve(LiveChart::kShownPoints);
    for (int k = 0; k < slices; ++k) {
        const int a = int(int64_t(n) * k / slices), b = int(int64_t(n) * (k + 1) / slices);
        int lo = a, hi = a;
        for (int i = a; i < b; ++i) {
            if (all[i].y() < all[lo].y()) lo = i;
            if (all[i].y() > all[hi].y()) hi = i;
        }
        int idx[4] = {a, std::min(lo, hi), std::max(lo, hi), b - 1};
        for (int j = 0; j < 4; ++j)
            if (j == 0 || idx[j] != idx[j - 1]) out.push_back(all[idx[j]]);
    }
    return out;
}

// Charts waiting for flush(), drawn one per event-loop iteration: each next one is posted by
// the previous, and Qt handles events posted meanwhile in the next iteration, after timers
// and input (one refresh of eight charts: eight short slices of the UI thread, not one long).
QList<QPointer<LiveChart>>& flushQueue() {
    static QList<QPointer<LiveChart>> q;
    return q;
}

void flushNext() {
    auto& q = flushQueue();
    while (!q.isEmpty()) {
        QPointer<LiveChart> c = q.takeFirst();
        if (!c) continue;
        LiveChart::flushPending(c);
        break;
    }
    if (!q.isEmpty()) QMetaObject::invokeMethod(QCoreApplication::instance(), &flushNext, Qt::QueuedConnection);
}

void queueFlush(LiveChart* c) {
    auto& q = flushQueue();
    q.push_back(c);
    if (q.size() == 1 && QCoreApplication::instance())
        QMetaObject::invokeMethod(QCoreApplication::instance(), &flushNext, Qt::QueuedConnection);
}

} // namespace

void LiveChart::flushPending(LiveChart* c) { c->flush(); }

LiveChart::LiveChart(const QString& title, QWidget* parent) : QWidget(parent), title_(title) {
    chart_ = new QChart();
    chart_->setTitle(title);
    chart_->legend()->setAlignment(Qt::AlignBottom);
    chart_->setMargins(QMargins(4, 4, 4, 4));
    axisX_ = new QValueAxis(chart_);
    axisY_ = new QValueAxis(chart_);
    axisX_->setTitleText("step");
    axisX_->setLabelFormat("%.0f");
    axisX_->setTickType(QValueAxis::TicksDynamic);
    axisX_->setTickAnchor(0);
    axisX_->setTickInterval(1);
    axisY_->setLabelFormat("%.3g");
    chart_->addAxis(axisX_, Qt::AlignBottom);
    chart_->addAxis(axisY_, Qt::AlignLeft);
    view_ = new QChartView(chart_, this);   // takes ownership of the chart
    view_->setRenderHint(QPainter::Antialiasing);
    view_->setMinimumSize(240, 200);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(view_);
}

LiveChart::~LiveChart() = default;

QLineSeries* LiveChart::line(int run) {
    auto it = lines_.find(run);
    if (it != lines_.end()) return it.value();
    auto* s = new QLineSeries(chart_);
    const bool own = styles_.contains(run);
    QPen pen(own ? styles_[run].first : runColor(run));
    pen.setWidthF(1.6);
    pen.setStyle(own ? styles_[run].second : runPenStyle(run));
    s->setPen(pen);
    s->setName(runLabel(run));
    chart_->addSeries(s);
    s->attachAxis(axisX_);
    s->attachAxis(axisY_);
    lines_.insert(run, s);
    return s;
}

void LiveChart::setLineStyle(int run, const QColor& colour, Qt::PenStyle style) {
    styles_[run] = {colour, style};
    if (lines_.contains(run)) {
        QPen pen = lines_[run]->pen();
        pen.setColor(colour);
        pen.setStyle(style);
        lines_[run]->setPen(pen);
    }
}

void LiveChart::setRunLabel(int run, const QString& label) {
    labels_[run] = label;
    if (lines_.contains(run)) lines_[run]->setName(label);
}

QString LiveChart::runLabel(int run) const {
    return labels_.value(run, run == 0 ? QStringLiteral("run") : QStringLiteral("run %1").arg(run + 1));
}

void LiveChart::appendPoints(int run, const QVector<QPointF>& points) {
    if (points.isEmpty()) return;
    QVector<QPointF> finite;
    finite.reserve(points.size());
    for (const QPointF& p : points)   // NaN/inf (a diverged loss) would break the axes
        if (std::isfinite(p.x()) && std::isfinite(p.y())) finite.push_back(p);
    if (finite.isEmpty()) return;
    // Every point is kept (data_); the line draws at most kShownPoints of them, replaced in
    // one call, in flush() on the event loop. Qt's append(QList) adds point by point and the
    // line item rebuilds (and strokes) its whole path after each one: quadratic; a path of
    // every row costs each refresh more the longer the run; and the charts of one refresh
    // drawn together make one long stall. All three stalled the UI thread (docs/ui-latency.md).
    data_[run] += finite;
    line(run);
    if (!dirty_.contains(run)) dirty_.push_back(run);
    if (flushQueued_) return;
    flushQueued_ = true;
    queueFlush(this);
}

void LiveChart::flush() const {
    flushQueued_ = false;
    if (dirty_.isEmpty()) return;
    auto* self = const_cast<LiveChart*>(this);   // drawing state only: the points are data_
    self->rescale();
    for (int run : std::exchange(dirty_, {}))
        if (lines_.contains(run)) lines_[run]->replace(QList<QPointF>(decimate(data_.value(run))));
}

QVector<QPointF> LiveChart::shownPoints(int run) const {
    flush();
    return lines_.contains(run) ? QVector<QPointF>(lines_[run]->points()) : QVector<QPointF>();
}

void LiveChart::clearRun(int run) {
    if (!lines_.contains(run)) return;
    data_.remove(run);
    dirty_.removeAll(run);
    QLineSeries* s = lines_.take(run);
    chart_->removeSeries(s);
    delete s;
    rescale();
}

void LiveChart::clearAll() {
    for (int r : lines_.keys()) clearRun(r);
}

QList<int> LiveChart::runs() const { return lines_.keys(); }

int LiveChart::pointCount(int run) const { return int(data_.value(run).size()); }

QPointF LiveChart::lastPoint(int run) const {
    const auto it = data_.find(run);
    return it == data_.end() || it->isEmpty() ? QPointF() : it->back();
}

QVector<QPointF> LiveChart::points(int run) const { return data_.value(run); }

QPen LiveChart::runPen(int run) const {
    return lines_.contains(run) ? lines_[run]->pen() : QPen();
}

QPointF LiveChart::xRange() const {
    flush();
    return {axisX_->min(), axisX_->max()};
}
QPointF LiveChart::yRange() const {
    flush();
    return {axisY_->min(), axisY_->max()};
}

void LiveChart::rescale() {
    double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
    for (const QVector<QPointF>& s : data_) {   // every point, not only the shown ones
        const int n = int(s.size());
        if (n == 0) continue;
        // x ascends within a run: first and last give its extent.
        x0 = std::min(x0, s[0].x());
        x1 = std::max(x1, s[n - 1].x());
        for (int i = 0; i < n; ++i) {
            const double y = s[i].y();
            y0 = std::min(y0, y);
            y1 = std::max(y1, y);
        }
    }
    if (!std::isfinite(x0)) {
        axisX_->setRange(0, 1);
        axisX_->setTickInterval(1);
        axisY_->setRange(0, 1);
        return;
    }
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) {
        // A constant series: +-5 % about it, or +-1 about 0 (an untrained model's sAP of 0
        // would otherwise get a 1e-6 axis).
        const double pad = y0 != 0 ? std::abs(y0) * 0.05 : 1.0;
        y0 -= pad;
        y1 += pad;
    } else {
        const double pad = (y1 - y0) * 0.05;
        y0 -= pad;
        y1 += pad;
    }
    // A longer interval before a wider range (and after a narrower one): never the old
    // interval over the new range (a first refresh of 100k steps with interval 1 laid out
    // 100k tick labels; 258 of them took 40 ms per chart).
    const double interval = niceIntegerTickInterval(x1 - x0);
    if (interval >= axisX_->tickInterval()) axisX_->setTickInterval(interval);
    axisX_->setRange(x0, x1);
    axisX_->setTickInterval(interval);
    axisY_->setRange(y0, y1);
}

double LiveChart::xTickInterval() const {
    flush();
    return axisX_->tickInterval();
}

ChartGrid::ChartGrid(QWidget* parent, int columns) : QWidget(parent), columns_(std::max(1, columns)) {
    grid_ = new QGridLayout(this);
    grid_->setContentsMargins(0, 0, 0, 0);
    grid_->setSpacing(4);
}

void ChartGrid::setRunLabel(int run, const QString& label) {
    labels_[run] = label;
    for (LiveChart* c : charts_) c->setRunLabel(run, label);
}

void ChartGrid::appendPoints(const QString& series, int run, const QVector<QPointF>& points) {
    LiveChart* c = charts_.value(series, nullptr);
    if (!c) {
        c = new LiveChart(series, this);
        for (auto it = labels_.begin(); it != labels_.end(); ++it) c->setRunLabel(it.key(), it.value());
        charts_.insert(series, c);
        relayout();
    }
    c->appendPoints(run, points);
}

void ChartGrid::clearRun(int run) {
    for (LiveChart* c : charts_) c->clearRun(run);
    labels_.remove(run);
}

void ChartGrid::clearAll() {
    for (LiveChart* c : charts_) {
        grid_->removeWidget(c);
        delete c;
    }
    charts_.clear();
    labels_.clear();
}

QStringList ChartGrid::seriesNames() const { return charts_.keys(); }

LiveChart* ChartGrid::chart(const QString& series) const { return charts_.value(series, nullptr); }

void ChartGrid::setOrder(const QStringList& first) {
    order_ = first;
    relayout();
}

QStringList ChartGrid::layoutOrder() const {
    QStringList out;
    for (const QString& n : order_)
        if (charts_.contains(n) && !out.contains(n)) out << n;
    for (auto it = charts_.begin(); it != charts_.end(); ++it)   // QMap: sorted by name
        if (!out.contains(it.key())) out << it.key();
    return out;
}

void ChartGrid::relayout() {
    for (LiveChart* c : charts_) grid_->removeWidget(c);
    int i = 0;
    for (const QString& n : layoutOrder()) {
        grid_->addWidget(charts_.value(n), i / columns_, i % columns_);
        ++i;
    }
}

} // namespace glimpse::widgets
