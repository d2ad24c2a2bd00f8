#include "widgets/live_chart.h"

#include <QDateTime>
#include <QFile>
#include <QGridLayout>
#include <QImage>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextStream>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace glimpse::widgets {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

QColor runColor(int run) {
    // Tableau 10: distinct at a glance, each run the same colour in every chart.
    static const QColor palette[] = {QColor(31, 119, 180), QColor(214, 39, 40),  QColor(44, 160, 44),
                                     QColor(148, 103, 189), QColor(255, 127, 14), QColor(23, 190, 207),
                                     QColor(140, 86, 75),   QColor(227, 119, 194), QColor(127, 127, 127),
                                     QColor(188, 189, 34)};
    return palette[std::abs(run) % 10];
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

double niceTickInterval(double span, int maxTicks) {
    const double raw = span / double(std::max(1, maxTicks));
    if (!std::isfinite(raw) || raw <= 0) return 1.0;
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= raw * (1 - 1e-9)) return m * p;
    return 10.0 * p;
}

std::vector<double> emaSmooth(const std::vector<double>& values, double w) {
    std::vector<double> out(values.size());
    double last = 0, weight = 0;
    for (size_t i = 0; i < values.size(); ++i) {
        last = last * w + (1 - w) * values[i];
        weight = weight * w + (1 - w);
        out[i] = last / weight;
    }
    return out;
}

// ---- MinMaxPyramid ----------------------------------------------------------------------------

void MinMaxPyramid::clear() { lv_.clear(); }

void MinMaxPyramid::extend(const double* v, int n) {
    for (size_t k = 0;; ++k) {
        const int64_t blk = int64_t(kBase) << k;
        const int64_t want = n / blk;
        if (want == 0) break;
        if (lv_.size() <= k) lv_.emplace_back();
        auto& level = lv_[k];
        for (int64_t i = int64_t(level.size() / 2); i < want; ++i) {
            double a, b;
            if (k == 0) {
                a = b = v[i * blk];
                for (int64_t j = i * blk + 1; j < (i + 1) * blk; ++j) {
                    a = std::min(a, v[j]);
                    b = std::max(b, v[j]);
                }
            } else {
                const auto& below = lv_[k - 1];
                a = std::min(below[size_t(4 * i)], below[size_t(4 * i + 2)]);
                b = std::max(below[size_t(4 * i + 1)], below[size_t(4 * i + 3)]);
            }
            level.push_back(a);
            level.push_back(b);
        }
    }
}

std::pair<double, double> MinMaxPyramid::range(const double* v, int a, int b) const {
    double lo = kInf, hi = -kInf;
    int64_t i = a;
    while (i < b) {
        if ((i & (kBase - 1)) != 0 || i + kBase > b || lv_.empty() || size_t(i >> kShift) >= blocks(0)) {
            lo = std::min(lo, v[i]);
            hi = std::max(hi, v[i]);
            ++i;
            continue;
        }
        size_t k = 0;
        while (k + 1 < lv_.size()) {
            const int sh = kShift + int(k) + 1;
            const int64_t nb = int64_t(1) << sh;
            if ((i & (nb - 1)) != 0 || i + nb > b || size_t(i >> sh) >= blocks(k + 1)) break;
            ++k;
        }
        const size_t j = size_t(i >> (kShift + int(k)));
        lo = std::min(lo, lv_[k][2 * j]);
        hi = std::max(hi, lv_[k][2 * j + 1]);
        i += int64_t(1) << (kShift + int(k));
    }
    return {lo, hi};
}

void MinMaxPyramid::prefetch(const double* v, int a, int b) const {
    if (a >= b) return;
    __builtin_prefetch(v + a);
    __builtin_prefetch(v + b - 1);
    if (lv_.empty()) return;
    int64_t i = (int64_t(a) + kBase - 1) & ~int64_t(kBase - 1);   // the walk of range(), loads left out
    while (i + kBase <= b && size_t(i >> kShift) < blocks(0)) {
        size_t k = 0;
        while (k + 1 < lv_.size()) {
            const int sh = kShift + int(k) + 1;
            const int64_t nb = int64_t(1) << sh;
            if ((i & (nb - 1)) != 0 || i + nb > b || size_t(i >> sh) >= blocks(k + 1)) break;
            ++k;
        }
        __builtin_prefetch(lv_[k].data() + 2 * (i >> (kShift + int(k))));
        i += int64_t(1) << (kShift + int(k));
    }
}

// ---- ChartRows ---------------------------------------------------------------------------------

void ChartRows::append(std::vector<double>&& steps, std::vector<double>&& wallTimes, std::vector<double>&& values) {
    const size_t n = std::min(steps.size(), values.size());
    if (n == 0) return;
    const bool timed = wallTimes.size() >= n;
    const size_t first = y.size();
    // The common case in one pass each, and a new line takes the vectors over (a million-row
    // log opens without copying its rows again): every row finite, wall times too.
    bool finite = true;
    for (size_t i = 0; i < n; ++i) finite &= std::isfinite(steps[i]) & std::isfinite(values[i]) & (!timed || std::isfinite(wallTimes[i]));
    double tmax = t.empty() || !std::isfinite(t.back()) ? -kInf : t.back();
    if (finite) {
        steps.resize(n);
        values.resize(n);
        if (timed) {
            wallTimes.resize(n);
            for (double& w : wallTimes) w = tmax = std::max(tmax, w);   // a running max: searchable
        } else {
            wallTimes.assign(n, std::numeric_limits<double>::quiet_NaN());
            hasTime = false;
        }
        double mp = minPositive;
        for (size_t i = 0; i < n; ++i) mp = values[i] > 0 && values[i] < mp ? values[i] : mp;
        minPositive = mp;
        if (first == 0) {
            x = std::move(steps);
            y = std::move(values);
            t = std::move(wallTimes);
        } else {
            x.insert(x.end(), steps.begin(), steps.end());
            y.insert(y.end(), values.begin(), values.end());
            t.insert(t.end(), wallTimes.begin(), wallTimes.end());
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            const double sx = steps[i], sy = values[i];
            if (!std::isfinite(sx) || !std::isfinite(sy)) continue;   // NaN/inf (a diverged loss) would break the axes
            x.push_back(sx);
            y.push_back(sy);
            if (timed && std::isfinite(wallTimes[i])) {
                tmax = std::max(tmax, wallTimes[i]);
                t.push_back(tmax);
            } else {
                t.push_back(std::numeric_limits<double>::quiet_NaN());
                hasTime = false;
            }
            if (sy > 0) minPositive = std::min(minPositive, sy);
        }
    }
    if (y.size() != first) py.extend(y.data(), int(y.size()));
}

void ChartRows::smooth(double w) {
    if (w <= 0) {
        s.clear();
        s.shrink_to_fit();
        ps.clear();
        smoothing = 0;
        return;
    }
    size_t from = s.size();
    if (w != smoothing || from > y.size()) {
        from = 0;
        s.clear();
        ps.clear();
        emaLast = emaWeight = 0;
        smoothing = w;
    }
    if (from == y.size()) return;
    if (s.capacity() < y.size()) s.reserve(std::max(y.capacity(), y.size()));   // the rows' room for growth too
    // Appended row by row: resize() would first zero the new rows (one more pass over fresh
    // memory, 12% of a loading worker's time in a profile of a million-row log).
    for (size_t i = from; i < y.size(); ++i) {
        emaLast = emaLast * w + (1 - w) * y[i];
        emaWeight = emaWeight * w + (1 - w);
        s.push_back(emaLast / emaWeight);
    }
    ps.extend(s.data(), int(s.size()));
}

ChartRows ChartRows::prepare(std::vector<double>&& steps, std::vector<double>&& wallTimes, std::vector<double>&& values,
                             double smoothing) {
    ChartRows r;
    r.append(std::move(steps), std::move(wallTimes), std::move(values));
    if (smoothing > 0) r.smooth(smoothing);
    return r;
}

// ---- LiveChart ---------------------------------------------------------------------------------

struct LiveChart::Line : ChartRows {
    const std::vector<double>& values(bool smoothed) const { return smoothed && s.size() == y.size() ? s : y; }
    const MinMaxPyramid& pyramid(bool smoothed) const { return smoothed && s.size() == y.size() ? ps : py; }
    // The decimated line as last computed, for the raw (0) and the smoothed (1) values: valid
    // for the same axis, width and values; rows appended since (a followed run) recompute only
    // the columns from the one that held the last row.
    struct Decimation {
        struct Key {
            double x0 = 0, x1 = 0, off = 0;
            int cols = -1;
            XAxisMode mode = XAxisMode::Step;
            bool smoothed = false;
            double w = 0;
            bool operator==(const Key& o) const {
                return x0 == o.x0 && x1 == o.x1 && off == o.off && cols == o.cols && mode == o.mode &&
                       smoothed == o.smoothed && w == o.w;
            }
        } key;
        size_t n = 0;               // the rows it was computed for
        std::vector<int> bounds;    // the rows of column c: bounds[c] .. bounds[c + 1]
        std::vector<int> outAt;     // where column c's points start in out
        QVector<QPointF> out;
        QVector<int> groups;
    } dec[2];
    void resetDecimation() { dec[0] = dec[1] = Decimation(); }
};

namespace {
// The first index r in [lo, n] with xs[r] >= edge (xs ascending), searched outwards from
// `guess` (the previous column's width ahead): a paint's columns advance through the rows in
// order, so this touches a few cache lines where a binary search over a million rows misses
// about a dozen times per column.
int firstAtLeast(const double* xs, int lo, int n, double edge, int guess) {
    guess = std::clamp(guess, lo, n);
    int a = lo, b = n;
    if (guess < n && xs[guess] < edge) {
        for (int prev = guess, step = 1;; step *= 2) {
            const int64_t p = int64_t(guess) + step;
            if (p >= n) {
                a = prev + 1;
                break;
            }
            if (xs[p] >= edge) {
                a = prev + 1, b = int(p);
                break;
            }
            prev = int(p);
        }
    } else {
        for (int prev = guess, step = 1;; step *= 2) {
            const int64_t p = int64_t(guess) - step;
            if (p < lo) {
                b = prev;
                break;
            }
            if (xs[p] < edge) {
                a = int(p) + 1, b = prev;
                break;
            }
            prev = int(p);
        }
    }
    return int(std::lower_bound(xs + a, xs + b, edge) - xs);
}
} // namespace

struct LiveChart::Axes {
    QRectF plot;
    double x0 = 0, x1 = 1;   // axis units
    double y0 = 0, y1 = 1;   // drawn units (log10 of the value on a log axis)
    bool log = false;
    bool empty = true;
    double px(double x) const { return plot.left() + (x - x0) / (x1 - x0) * plot.width(); }
    double ty(double v) const {   // value -> drawn unit
        if (!log) return v;
        return v > 0 ? std::log10(v) : y0 - (y1 - y0);   // non-positive: below the axis (clipped)
    }
    double py(double v) const { return plot.bottom() - (ty(v) - y0) / (y1 - y0) * plot.height(); }
    double xAt(double px_) const { return x0 + (px_ - plot.left()) / plot.width() * (x1 - x0); }
};

namespace {

constexpr int kHeaderPad = 6;
constexpr int kLegendMaxRows = 3;

QString formatValue(double v) {
    if (v == 0) return "0";
    const double a = std::abs(v);
    if (a >= 1e5 || a < 1e-3) return QString::number(v, 'e', 2);
    return QString::number(v, 'g', 4);
}

// "45 s", "2 min", "1 h 30 min" for a duration in seconds.
QString formatDuration(double s) {
    const qint64 t = qint64(std::llround(s));
    if (std::abs(t) < 60) return QStringLiteral("%1 s").arg(t);
    if (std::abs(t) < 3600) return t % 60 ? QStringLiteral("%1 min %2 s").arg(t / 60).arg(std::abs(t % 60))
                                           : QStringLiteral("%1 min").arg(t / 60);
    return (t % 3600) / 60 ? QStringLiteral("%1 h %2 min").arg(t / 3600).arg(std::abs((t % 3600) / 60))
                           : QStringLiteral("%1 h").arg(t / 3600);
}

double timeTickInterval(double span) {
    static const double steps[] = {1,    2,    5,     10,    15,    30,    60,     120,    300,    600,
                                   900,  1800, 3600,  7200,  10800, 21600, 43200,  86400,  172800, 604800};
    for (double s : steps)
        if (span / s <= 6) return s;
    return niceTickInterval(span);
}

QString csvField(const QString& s) {
    if (!s.contains(',') && !s.contains('"') && !s.contains('\n')) return s;
    QString q = s;
    q.replace('"', "\"\"");
    return '"' + q + '"';
}

} // namespace

LiveChart::LiveChart(const QString& title, QWidget* parent)
    : QWidget(parent), title_(title), lines_(new std::map<int, Line>) {
    setMouseTracking(true);
    setFocusPolicy(Qt::ClickFocus);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setToolTip(QString());
}

LiveChart::~LiveChart() { delete lines_; }

LiveChart::Line& LiveChart::line(int run) { return (*lines_)[run]; }

QColor LiveChart::colourOf(int run) const { return styles_.contains(run) ? styles_[run].first : runColor(run); }
Qt::PenStyle LiveChart::styleOf(int run) const {
    return styles_.contains(run) ? styles_[run].second : runPenStyle(run);
}

void LiveChart::setLineStyle(int run, const QColor& colour, Qt::PenStyle style) {
    styles_[run] = {colour, style};
    update();
}

void LiveChart::setRunLabel(int run, const QString& label) {
    labels_[run] = label;
    update();
}

QString LiveChart::runLabel(int run) const {
    return labels_.value(run, run == 0 ? QStringLiteral("run") : QStringLiteral("run %1").arg(run + 1));
}

void LiveChart::appendPoints(int run, const QVector<QPointF>& points) {
    std::vector<double> steps, values;
    steps.reserve(points.size());
    values.reserve(points.size());
    for (const QPointF& p : points) {
        steps.push_back(p.x());
        values.push_back(p.y());
    }
    appendRows(run, std::move(steps), {}, std::move(values));
}

void LiveChart::appendRows(int run, std::vector<double>&& steps, std::vector<double>&& wallTimes,
                           std::vector<double>&& values) {
    if (std::min(steps.size(), values.size()) == 0) return;
    Line& l = line(run);
    const size_t first = l.y.size();
    l.append(std::move(steps), std::move(wallTimes), std::move(values));
    if (l.y.size() != first) update();   // the smoothed line catches up when drawn (smoothedLine)
}

void LiveChart::adoptRows(int run, ChartRows&& rows) {
    if (rows.y.empty()) return;
    auto it = lines_->find(run);
    if (it != lines_->end() && !it->second.y.empty()) {
        appendRows(run, std::move(rows.x), std::move(rows.t), std::move(rows.y));
        return;
    }
    Line& l = line(run);
    static_cast<ChartRows&>(l) = std::move(rows);
    l.resetDecimation();
    if (l.smoothing != smoothing_) {   // smoothed for another weight: again when drawn
        l.s.clear();
        l.ps.clear();
        l.smoothing = 0;
    }
    update();
}

void LiveChart::setPlaceholder(const QString& text) {
    if (text == placeholder_) return;
    placeholder_ = text;
    update();
}

const std::vector<double>& LiveChart::smoothedLine(const Line& line) const {
    auto& l = const_cast<Line&>(line);   // a cache of the rows: drawing state, not data
    if (smoothing_ <= 0) return l.y;
    if (l.s.size() != l.y.size() || l.smoothing != smoothing_) l.smooth(smoothing_);
    return l.s;
}

void LiveChart::setRunStart(int run, double unixTime) {
    starts_[run] = unixTime;
    if (xMode_ == XAxisMode::WallTime) update();
}

void LiveChart::clearRun(int run) {
    if (!lines_->count(run)) return;
    lines_->erase(run);
    update();
}

void LiveChart::clearAll() {
    lines_->clear();
    update();
}

QList<int> LiveChart::runs() const {
    QList<int> out;
    for (const auto& [k, l] : *lines_) out << k;
    return out;
}

int LiveChart::pointCount(int run) const {
    const auto it = lines_->find(run);
    return it == lines_->end() ? 0 : int(it->second.y.size());
}

QPointF LiveChart::lastPoint(int run) const {
    const auto it = lines_->find(run);
    return it == lines_->end() || it->second.y.empty() ? QPointF() : QPointF(it->second.x.back(), it->second.y.back());
}

QVector<QPointF> LiveChart::points(int run) const {
    QVector<QPointF> out;
    const auto it = lines_->find(run);
    if (it == lines_->end()) return out;
    out.reserve(int(it->second.y.size()));
    for (size_t i = 0; i < it->second.y.size(); ++i) out.push_back({it->second.x[i], it->second.y[i]});
    return out;
}

QVector<double> LiveChart::wallTimes(int run) const {
    const auto it = lines_->find(run);
    return it == lines_->end() ? QVector<double>() : QVector<double>(it->second.t.begin(), it->second.t.end());
}

QVector<double> LiveChart::smoothedValues(int run) const {
    const auto it = lines_->find(run);
    if (it == lines_->end()) return {};
    const auto& v = smoothedLine(it->second);
    return QVector<double>(v.begin(), v.end());
}

QPen LiveChart::runPen(int run) const {
    if (!lines_->count(run)) return QPen();
    QPen pen(colourOf(run));
    pen.setWidthF(1.6);
    pen.setStyle(styleOf(run));
    return pen;
}

void LiveChart::setLineVisible(int run, bool visible) {
    if (visible == !hidden_.contains(run)) return;
    if (visible) hidden_.remove(run);
    else hidden_.insert(run);
    update();
}

void LiveChart::setLineLive(int run, bool live) {
    if (live == live_.contains(run)) return;
    if (live) live_.insert(run);
    else live_.remove(run);
    update();
}

void LiveChart::setSmoothing(double w) {
    w = std::clamp(std::isfinite(w) ? w : 0.0, 0.0, 0.999);
    if (w == smoothing_) return;
    smoothing_ = w;
    for (auto& [k, l] : *lines_) {   // recomputed when next drawn
        l.s.clear();
        l.ps.clear();
        l.smoothing = 0;
    }
    update();
}

void LiveChart::setLogScale(bool on) {
    if (on == logY_) return;
    logY_ = on;
    update();
    Q_EMIT logScaleChanged(on);
}

void LiveChart::setXAxisMode(XAxisMode m) {
    if (m == xMode_) return;
    xMode_ = m;
    update();
}

double LiveChart::rowX(int run, int i) const {
    const auto it = lines_->find(run);
    if (it == lines_->end() || i < 0 || i >= int(it->second.y.size())) return 0;
    const Line& l = it->second;
    if (xMode_ == XAxisMode::Step) return l.x[size_t(i)];
    return l.t[size_t(i)] + (xMode_ == XAxisMode::WallTime ? starts_.value(run, 0.0) : 0.0);
}

// ---- layout of one chart: header (title, log toggle), plot, x labels, legend ----------------

int LiveChart::legendRows(int width) const {
    const QFontMetrics fm(font());
    int rows = lines_->empty() ? 0 : 1, x = 0;
    for (const auto& [k, l] : *lines_) {
        if (hidden_.contains(k)) continue;
        const int w = 16 + fm.horizontalAdvance(runLabel(k) + "  " + formatValue(l.y.empty() ? 0 : l.y.back())) + 12;
        if (x > 0 && x + w > width) {
            ++rows;
            x = 0;
        }
        x += w;
    }
    return std::min(rows, kLegendMaxRows);
}

QRect LiveChart::plotIn(const QRect& r) const {
    const QFontMetrics fm(font());
    const int header = fm.height() + kHeaderPad;
    const int xLabels = fm.height() + 4;
    const int legend = legendRows(r.width() - 16) * (fm.height() + 2) + 4;
    // Left margin: the widest y label (computed from the axes below would be circular; the
    // widest of typical labels is enough).
    const int left = fm.horizontalAdvance("-8.88e-88") + 8;
    return QRect(r.left() + left, r.top() + header + 4, std::max(10, r.width() - left - 12),
                 std::max(10, r.height() - header - 4 - xLabels - legend - 4));
}

QRectF LiveChart::plotRect() const { return plotIn(rect()); }

namespace {
QRect toggleIn(const QFont& font, const QRect& r) {
    const QFontMetrics fm(font);
    const int w = fm.horizontalAdvance("log") + 10, h = fm.height() + 2;
    return QRect(r.right() - w - 6, r.top() + 2, w, h);
}
} // namespace

QRect LiveChart::logToggleRect() const { return toggleIn(font(), rect()); }

LiveChart::Axes LiveChart::axes(const QRect& plot) const {
    Axes a;
    a.plot = plot;
    a.log = logY_;
    double x0 = kInf, x1 = -kInf, y0 = kInf, y1 = -kInf, minPos = kInf;
    bool live = false;
    for (const auto& [k, l] : *lines_) {
        if (hidden_.contains(k) || l.y.empty()) continue;
        if (xMode_ != XAxisMode::Step && !l.hasTime) continue;
        live |= live_.contains(k);
        const size_t n = l.y.size();
        const double off = xMode_ == XAxisMode::WallTime ? starts_.value(k, 0.0) : 0.0;
        const auto& xs = xMode_ == XAxisMode::Step ? l.x : l.t;
        x0 = std::min(x0, xs[0] + off);
        x1 = std::max(x1, xs[n - 1] + off);
        const auto [lo, hi] = l.py.range(l.y.data(), 0, int(n));
        y0 = std::min(y0, lo);
        y1 = std::max(y1, hi);
        minPos = std::min(minPos, l.minPositive);
    }
    if (!std::isfinite(x0)) {
        a.x0 = 0, a.x1 = 1, a.y0 = 0, a.y1 = 1;
        return a;
    }
    a.empty = false;
    if (x1 <= x0) {   // a single point (one validation so far): centred on a sensible axis
        const double pad = xMode_ == XAxisMode::Step ? 1.0 : 5.0;
        x0 -= pad;
        x1 += pad;
    } else if (live) {
        // Headroom past the last row: the next multiple of a spacing of 1/20 to 1/8 of the span
        // (1, 2, 5 x 10^k), so the axis holds still while the run grows by that much.
        const double g = xMode_ == XAxisMode::Step ? niceIntegerTickInterval(x1 - x0, 20) : niceTickInterval(x1 - x0, 20);
        x1 = x0 + (std::floor((x1 - x0) / g) + 1) * g;
    }
    a.x0 = x0;
    a.x1 = x1;
    if (logY_) {
        if (!std::isfinite(minPos)) minPos = 1, y1 = 10;   // nothing positive to show
        double l0 = std::log10(minPos), l1 = std::log10(std::max(y1, minPos));
        if (l1 <= l0) l0 -= 0.5, l1 += 0.5;
        const double pad = (l1 - l0) * 0.05;
        a.y0 = l0 - pad;
        a.y1 = l1 + pad;
        return a;
    }
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
    a.y0 = y0;
    a.y1 = y1;
    return a;
}

QPointF LiveChart::xRange() const {
    const Axes a = axes(plotIn(rect()));
    return {a.x0, a.x1};
}

QPointF LiveChart::yRange() const {
    const Axes a = axes(plotIn(rect()));
    return a.log ? QPointF(std::pow(10.0, a.y0), std::pow(10.0, a.y1)) : QPointF(a.y0, a.y1);
}

double LiveChart::xTickSpacing(const Axes& a) const {
    // At least 3 ticks on a step axis (a 230 px plot of steps 0..60 got a spacing of 50: one
    // label, "50"); step labels are narrow, time labels ("1 h 30 min") wider.
    const double span = a.x1 - a.x0;
    const int maxTicks = xMode_ == XAxisMode::Step ? std::max(3, int(a.plot.width() / 70)) : std::max(2, int(a.plot.width() / 90));
    if (xMode_ != XAxisMode::Step) return std::max(timeTickInterval(span * 6 / maxTicks), 1.0);
    double iv = niceIntegerTickInterval(span, maxTicks);
    // At least two labels (steps 7..950 at 500 apart have one, "500"): the next smaller 1, 2,
    // 5 spacing until two ticks fit, down to 1 step.
    for (int guard = 0; guard < 6 && iv > 1 && std::floor(a.x1 / iv + 1e-9) - std::ceil(a.x0 / iv - 1e-9) < 1; ++guard) {
        const double p10 = std::pow(10.0, std::floor(std::log10(iv) + 1e-9));
        const double m = std::round(iv / p10);
        iv = std::max(1.0, m >= 5 ? 2 * p10 : m >= 2 ? p10 : 0.5 * p10);
    }
    return iv;
}

double LiveChart::xTickInterval() const { return xTickSpacing(axes(plotIn(rect()))); }

QPointF LiveChart::toPixel(double x, double y) const {
    const Axes a = axes(plotIn(rect()));
    return {a.px(x), a.py(y)};
}

// Per pixel column of the plot: the first, lowest, highest and last row in it (data coords).
QVector<QPointF> LiveChart::decimated(const Line& l, bool smoothed, const Axes& a, QVector<int>* groups) const {
    QVector<QPointF> out;
    if (groups) groups->clear();
    const int n = int(l.y.size());
    if (n == 0 || a.empty) return out;
    if (xMode_ != XAxisMode::Step && !l.hasTime) return out;
    int run = 0;
    for (const auto& [k, ln] : *lines_)
        if (&ln == &l) run = k;
    const double off = xMode_ == XAxisMode::WallTime ? starts_.value(run, 0.0) : 0.0;
    const auto& xs = xMode_ == XAxisMode::Step ? l.x : l.t;
    if (smoothed) smoothedLine(l);
    const auto& v = l.values(smoothed);
    const MinMaxPyramid& pyr = l.pyramid(smoothed);
    const int cols = std::max(1, int(std::ceil(a.plot.width())));
    if (n <= cols) {
        out.reserve(n);
        for (int i = 0; i < n; ++i) out.push_back({xs[size_t(i)] + off, v[size_t(i)]});
        return out;
    }
    // The cached columns: all of them for the same rows, those from the last row's column on
    // for rows appended since (the columns before it hold the same rows on the same axis).
    auto& d = const_cast<Line&>(l).dec[smoothed ? 1 : 0];   // a cache of the paint: drawing state, not data
    const bool usesS = &v == &l.s;
    const Line::Decimation::Key key{a.x0, a.x1, off, cols, xMode_, usesS, usesS ? l.smoothing : 0.0};
    int from = 0;
    if (d.key == key && d.n > 0 && d.n <= size_t(n) && d.bounds.size() == size_t(cols) + 1) {
        if (d.n == size_t(n)) {
            if (groups) *groups = d.groups;
            return d.out;
        }
        from = int(std::upper_bound(d.bounds.begin(), d.bounds.end() - 1, int(d.n) - 1) - d.bounds.begin()) - 1;
        from = std::clamp(from, 0, cols - 1);
        const int cut = d.outAt[size_t(from)];
        d.out.resize(cut);
        while (!d.groups.isEmpty() && d.groups.back() >= cut) d.groups.removeLast();
        ++stats_.incremental;
    } else {
        d.key = key;
        d.bounds.assign(size_t(cols) + 1, n);
        d.outAt.assign(size_t(cols) + 1, 0);
        d.out.clear();
        d.out.reserve(cols * 4);
        d.groups.clear();
        d.bounds[0] = int(std::lower_bound(xs.begin(), xs.end(), a.x0 - off) - xs.begin());
        ++stats_.full;
    }
    d.n = size_t(n);
    {
        const double dx = (a.x1 - a.x0) / cols;
        const double* x = xs.data();
        int i = d.bounds[size_t(from)];
        int width = from > 0 ? d.bounds[size_t(from)] - d.bounds[size_t(from) - 1] : 0;
        for (int c = from; c < cols; ++c) {
            const double edge = a.x0 + (c + 1) * dx - off;
            const int b = c == cols - 1 ? n : firstAtLeast(x, i, n, edge, i + width);
            d.bounds[size_t(c) + 1] = b;
            width = b - i;
            i = b;
        }
    }
    const std::vector<int>& bounds = d.bounds;
    QVector<QPointF>& o = d.out;
    constexpr int kAhead = 4;   // columns prefetched ahead
    for (int c = from; c < std::min(from + kAhead, cols); ++c) pyr.prefetch(v.data(), bounds[size_t(c)], bounds[size_t(c) + 1]);
    for (int c = from; c < cols; ++c) {
        if (c + kAhead < cols) pyr.prefetch(v.data(), bounds[size_t(c + kAhead)], bounds[size_t(c + kAhead) + 1]);
        d.outAt[size_t(c)] = int(o.size());
        const int i = bounds[size_t(c)], b = bounds[size_t(c) + 1];
        if (b <= i) continue;
        ++stats_.columns;
        const auto [lo, hi] = pyr.range(v.data(), i, b);
        const double cx = xs[size_t(i)] + off;
        d.groups.push_back(int(o.size()));
        o.push_back({cx, v[size_t(i)]});
        if (b - i > 1) {
            const double ex = xs[size_t(b - 1)] + off;
            const double mid = 0.5 * (cx + ex);
            // Lowest and highest in x order of where they fall is not tracked; both are drawn at
            // the column's middle, which is the same pixel column.
            o.push_back({mid, lo});
            o.push_back({mid, hi});
            o.push_back({ex, v[size_t(b - 1)]});
        }
    }
    d.outAt[size_t(cols)] = int(o.size());
    if (groups) *groups = d.groups;
    return o;
}

QVector<QPointF> LiveChart::shownPoints(int run) const {
    const auto it = lines_->find(run);
    if (it == lines_->end()) return {};
    return decimated(it->second, false, axes(plotIn(rect())));
}

void LiveChart::drawLine(QPainter& p, const Line& l, const Axes& a, bool smoothed, const QPen& pen) const {
    QVector<int> groups;
    const QVector<QPointF> pts = decimated(l, smoothed, a, &groups);
    if (pts.isEmpty()) return;
    QPolygonF poly;
    poly.reserve(pts.size());
    for (const QPointF& q : pts) poly << QPointF(a.px(q.x()), a.py(q.y()));
    p.setPen(pen);
    // Stroking a wide antialiased polyline costs ~20x separate segments (measured: 25 ms against
    // 1.2 ms for 1700 points), so longer lines are drawn as segments: per pixel column the
    // connection from the previous column's last row and the column's lowest-to-highest bar.
    if (poly.size() <= 64) {
        if (poly.size() > 1) p.drawPolyline(poly);
    } else {
        QVector<QLineF> segs;
        segs.reserve(poly.size());
        if (groups.isEmpty()) {
            for (int i = 1; i < poly.size(); ++i) segs.push_back(QLineF(poly[i - 1], poly[i]));
        } else {
            for (int g = 0; g < groups.size(); ++g) {
                const int s0 = groups[g], s1 = g + 1 < groups.size() ? groups[g + 1] : int(poly.size());
                if (g > 0) segs.push_back(QLineF(poly[s0 - 1], poly[s0]));
                if (s1 - s0 == 4) segs.push_back(QLineF(poly[s0 + 1], poly[s0 + 2]));
            }
        }
        p.drawLines(segs);
    }
    // Few rows (a validation every N steps, or a single one): a dot on each.
    if (l.y.size() <= 1 || double(l.y.size()) < a.plot.width() / 12) {
        p.setBrush(pen.color());
        QPen dot(pen.color());
        dot.setWidthF(1);
        p.setPen(dot);
        for (const QPointF& q : poly) p.drawEllipse(q, 2.6, 2.6);
        p.setBrush(Qt::NoBrush);
    }
}

void LiveChart::drawAxes(QPainter& p, const Axes& a) const {
    const QFontMetrics fm(p.fontMetrics());
    const QColor grid(228, 228, 228), text(70, 70, 70);
    p.setPen(QPen(grid, 1));
    // y ticks
    QVector<double> yt;
    if (a.log) {
        const int d0 = int(std::ceil(a.y0 - 1e-9)), d1 = int(std::floor(a.y1 + 1e-9));
        const int every = std::max(1, (d1 - d0 + 1) / 6 + 1);
        for (int d = d0; d <= d1; d += every) yt << d;
        if (yt.size() < 2)   // less than two decades: 2x and 5x too
            for (int d = int(std::floor(a.y0)); d <= int(std::ceil(a.y1)); ++d)
                for (double m : {1.0, 2.0, 5.0}) {
                    const double v = d + std::log10(m);
                    if (v >= a.y0 && v <= a.y1 && !yt.contains(v)) yt << v;
                }
        std::sort(yt.begin(), yt.end());
    } else {
        double iv = niceTickInterval(a.y1 - a.y0, std::clamp(int(a.plot.height() / (fm.height() * 2.5)), 3, 8));
        // At least two labels (a 90 px plot of 1.2 .. 7.4 got a spacing of 5: one label, "5"):
        // the next smaller 1, 2, 5 spacing until two ticks fit.
        for (int guard = 0; guard < 6 && std::floor(a.y1 / iv + 1e-9) - std::ceil(a.y0 / iv - 1e-9) < 1; ++guard) {
            const double p10 = std::pow(10.0, std::floor(std::log10(iv) + 1e-9));
            const double m = std::round(iv / p10);
            iv = m >= 5 ? 2 * p10 : m >= 2 ? p10 : 0.5 * p10;
        }
        for (double v = std::ceil(a.y0 / iv) * iv; v <= a.y1 + iv * 1e-9; v += iv) yt << (std::abs(v) < iv * 1e-9 ? 0 : v);
    }
    // Linear tick labels with the decimals their spacing needs (0.9975 next to 1), trailing zeros cut.
    const double step = yt.size() > 1 ? yt[1] - yt[0] : 1.0;
    const int decimals = std::clamp(int(-std::floor(std::log10(std::max(step, 1e-12)) + 1e-9)) + 1, 0, 10);
    const auto tickText = [&](double v) {
        if (a.log || std::abs(v) >= 1e5 || (v != 0 && std::abs(v) < 1e-4)) return QString::number(a.log ? std::pow(10.0, v) : v, 'g', 3);
        QString t = QString::number(v, 'f', decimals);
        if (t.contains('.')) {
            while (t.endsWith('0')) t.chop(1);
            if (t.endsWith('.')) t.chop(1);
        }
        return t == "-0" ? QStringLiteral("0") : t;
    };
    for (double v : yt) {
        const double y = a.plot.bottom() - (v - a.y0) / (a.y1 - a.y0) * a.plot.height();
        p.setPen(QPen(grid, 1));
        p.drawLine(QPointF(a.plot.left(), y), QPointF(a.plot.right(), y));
        p.setPen(text);
        const QString s = tickText(v);
        p.drawText(QRectF(0, y - fm.height() / 2.0, a.plot.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter, s);
    }
    // x ticks
    const double span = a.x1 - a.x0;
    const double iv = xTickSpacing(a);
    double first = std::ceil(a.x0 / iv) * iv;
    if (xMode_ == XAxisMode::WallTime && iv >= 3600) {   // whole hours of local time
        const qint64 offset = QDateTime::fromSecsSinceEpoch(qint64(a.x0)).offsetFromUtc();
        first = std::ceil((a.x0 + offset) / iv) * iv - offset;
    }
    for (double x = first; x <= a.x1 + iv * 1e-9; x += iv) {
        const double px = a.px(x);
        p.setPen(QPen(grid, 1));
        p.drawLine(QPointF(px, a.plot.top()), QPointF(px, a.plot.bottom()));
        QString s;
        if (xMode_ == XAxisMode::Step) s = QString::number(qint64(std::llround(x)));
        else if (xMode_ == XAxisMode::RelativeTime) s = formatDuration(x);
        else s = QDateTime::fromSecsSinceEpoch(qint64(std::llround(x))).toString(span > 86400 ? "MM-dd HH:mm" : iv < 60 ? "HH:mm:ss" : "HH:mm");
        p.setPen(text);
        const int w = fm.horizontalAdvance(s);
        const double lx = std::clamp(px - w / 2.0, a.plot.left() - 20.0, a.plot.right() + 10.0 - w);
        p.drawText(QPointF(lx, a.plot.bottom() + fm.ascent() + 3), s);
    }
    p.setPen(QPen(QColor(190, 190, 190), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(a.plot);
}

void LiveChart::drawLegend(QPainter& p, const QRect& r) const {
    const QFontMetrics fm(p.fontMetrics());
    int x = r.left(), y = r.top(), row = 0, left = 0;
    for (const auto& [k, l] : *lines_) {
        if (hidden_.contains(k)) continue;
        const QString label = runLabel(k), value = formatValue(l.y.empty() ? 0 : l.y.back());
        const int w = 16 + fm.horizontalAdvance(label + "  " + value) + 12;
        if (x > r.left() && x + w > r.right()) {
            if (++row >= kLegendMaxRows) {
                ++left;
                continue;
            }
            x = r.left();
            y += fm.height() + 2;
        }
        QPen pen(colourOf(k), 2.4);
        pen.setStyle(styleOf(k));
        p.setPen(pen);
        p.drawLine(QPointF(x, y + fm.height() / 2.0), QPointF(x + 12, y + fm.height() / 2.0));
        p.setPen(QColor(60, 60, 60));
        p.drawText(QPointF(x + 16, y + fm.ascent()), label);
        QFont bold = p.font();
        bold.setBold(true);
        p.save();
        p.setFont(bold);
        p.drawText(QPointF(x + 16 + fm.horizontalAdvance(label + "  "), y + fm.ascent()), value);
        p.restore();
        x += w;
    }
    if (left > 0) {
        p.setPen(QColor(110, 110, 110));
        const QString more = QStringLiteral("+%1 more").arg(left);
        p.drawText(QPointF(r.right() - fm.horizontalAdvance(more), y + fm.ascent()), more);
    }
}

void LiveChart::draw(QPainter& p, const QRect& r) const {
    p.save();
    p.setFont(font());
    p.fillRect(r, Qt::white);
    const QFontMetrics fm(font());
    // Header: the title, the log toggle at the right.
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(QColor(40, 40, 40));
    p.drawText(QRect(r.left() + 8, r.top() + 2, r.width() - 60, fm.height() + 2), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(title_, Qt::ElideMiddle, r.width() - 70));
    p.setFont(font());
    const QRect tog = toggleIn(font(), r);
    p.setPen(QColor(150, 150, 150));
    p.setBrush(logY_ ? QColor(70, 110, 180) : Qt::white);
    p.drawRoundedRect(tog, 3, 3);
    p.setPen(logY_ ? Qt::white : QColor(110, 110, 110));
    p.drawText(tog, Qt::AlignCenter, "log");
    p.setBrush(Qt::NoBrush);

    const QRect plot = plotIn(r);
    const Axes a = axes(plot);
    p.setRenderHint(QPainter::Antialiasing, false);
    drawAxes(p, a);
    if (a.empty) {
        p.setPen(QColor(150, 150, 150));
        p.drawText(plot, Qt::AlignCenter,
                   !placeholder_.isEmpty() ? placeholder_ : lines_->empty() ? "no rows yet" : "no rows on this axis");
    }
    p.save();
    p.setClipRect(plot.adjusted(-3, -3, 3, 3));
    p.setRenderHint(QPainter::Antialiasing, true);
    // Overlays first, run 0 (the run in focus) on top; raw lines faint behind the smoothed ones.
    const bool smooth = smoothing_ > 0;
    for (int pass = 0; pass < (smooth ? 2 : 1); ++pass)
        for (auto it = lines_->rbegin(); it != lines_->rend(); ++it) {
            if (hidden_.contains(it->first)) continue;
            QPen pen(colourOf(it->first));
            pen.setStyle(styleOf(it->first));
            if (smooth && pass == 0) {
                QColor c = pen.color();
                c.setAlpha(60);
                pen.setColor(c);
                pen.setWidthF(1.0);
                drawLine(p, it->second, a, false, pen);
            } else {
                pen.setWidthF(1.6);
                drawLine(p, it->second, a, smooth, pen);
            }
                }
    p.restore();
    const QFontMetrics lfm(font());
    drawLegend(p, QRect(r.left() + 8, plot.bottom() + lfm.height() + 8, r.width() - 16,
                        r.bottom() - plot.bottom() - lfm.height() - 8));
    p.restore();
}

QString LiveChart::readout(double x) const {
    QStringList out;
    bool head = false;
    for (const auto& [k, l] : *lines_) {
        if (hidden_.contains(k) || l.y.empty()) continue;
        if (xMode_ != XAxisMode::Step && !l.hasTime) continue;
        const double off = xMode_ == XAxisMode::WallTime ? starts_.value(k, 0.0) : 0.0;
        const auto& xs = xMode_ == XAxisMode::Step ? l.x : l.t;
        size_t i = size_t(std::lower_bound(xs.begin(), xs.end(), x - off) - xs.begin());
        if (i >= xs.size()) i = xs.size() - 1;
        else if (i > 0 && std::abs(xs[i - 1] + off - x) <= std::abs(xs[i] + off - x)) --i;
        if (!head) {
            head = true;
            if (xMode_ == XAxisMode::Step) out << QStringLiteral("step %1").arg(qint64(std::llround(x)));
            else if (xMode_ == XAxisMode::RelativeTime) out << formatDuration(x);
            else out << QDateTime::fromSecsSinceEpoch(qint64(std::llround(x))).toString("yyyy-MM-dd HH:mm:ss");
        }
        QString s = QStringLiteral("%1: %2").arg(runLabel(k), formatValue(l.y[i]));
        if (smoothing_ > 0) s += QStringLiteral(" (smoothed %1)").arg(formatValue(smoothedLine(l)[i]));
        s += QStringLiteral("  @ step %1").arg(qint64(l.x[i]));
        out << s;
    }
    return out.join('\n');
}

QString LiveChart::hoverText() const {
    if (hoverX_ < 0) return {};
    const Axes a = axes(plotIn(rect()));
    if (a.empty) return {};
    return readout(a.xAt(hoverX_));
}

QStringList LiveChart::lastValueTexts() const {
    QStringList out;
    for (const auto& [k, l] : *lines_)
        if (!hidden_.contains(k) && !l.y.empty()) out << runLabel(k) + "  " + formatValue(l.y.back());
    return out;
}

void LiveChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    draw(p, rect());
    if (hoverX_ < 0) return;
    const Axes a = axes(plotIn(rect()));
    if (a.empty) return;
    // Hover: a cursor line and every line's value there.
    p.setPen(QPen(QColor(120, 120, 120), 1, Qt::DashLine));
    p.drawLine(QPointF(hoverX_, a.plot.top()), QPointF(hoverX_, a.plot.bottom()));
    const QString text = hoverText();
    if (text.isEmpty()) return;
    const QFontMetrics fm(font());
    const QRect box = fm.boundingRect(QRect(0, 0, 1000, 1000), Qt::AlignLeft, text).adjusted(-6, -4, 6, 4);
    QPoint at(int(hoverX_) + 12, int(a.plot.top()) + 6);
    if (at.x() + box.width() > int(a.plot.right())) at.setX(int(hoverX_) - 12 - box.width());
    at.setX(std::max(0, at.x()));
    const QRect b = box.translated(at - box.topLeft());
    p.setPen(QColor(160, 160, 160));
    p.setBrush(QColor(255, 255, 255, 235));
    p.drawRect(b);
    p.setPen(QColor(30, 30, 30));
    p.drawText(b.adjusted(6, 4, -6, -4), Qt::AlignLeft, text);
}

void LiveChart::mouseMoveEvent(QMouseEvent* e) {
    const QRectF plot = plotRect();
    const double x = e->position().x();
    const double hx = plot.contains(e->position()) ? x : -1;
    if (hx != hoverX_) {
        hoverX_ = hx;
        update();
    }
}

void LiveChart::leaveEvent(QEvent*) {
    if (hoverX_ >= 0) {
        hoverX_ = -1;
        update();
    }
}

void LiveChart::mousePressEvent(QMouseEvent* e) {
    if (e->button() == Qt::LeftButton && logToggleRect().contains(e->position().toPoint())) {
        setLogScale(!logY_);
        return;
    }
    QWidget::mousePressEvent(e);
}

void LiveChart::mouseDoubleClickEvent(QMouseEvent* e) {
    if (logToggleRect().contains(e->position().toPoint())) return;
    Q_EMIT maximizeRequested();
}

// ---- ChartGrid ---------------------------------------------------------------------------------

ChartGrid::ChartGrid(QWidget* parent, int columns) : QWidget(parent), columns_(std::max(0, columns)) {
    outer_ = new QVBoxLayout(this);
    outer_->setContentsMargins(0, 0, 0, 0);
    outer_->setSpacing(2);
    setFocusPolicy(Qt::ClickFocus);
    runOf_ = [](int k) { return k; };
}

void ChartGrid::setRunLabel(int run, const QString& label) {
    labels_[run] = label;
    for (LiveChart* c : charts_) {
        c->setRunLabel(run, label);
        applyFilter(c);
    }
}

LiveChart* ChartGrid::makeChart(const QString& series) {
    auto* c = new LiveChart(series, this);
    for (auto it = labels_.begin(); it != labels_.end(); ++it) c->setRunLabel(it.key(), it.value());
    for (auto it = starts_.begin(); it != starts_.end(); ++it) c->setRunStart(it.key(), it.value());
    c->setSmoothing(smoothing_);
    c->setXAxisMode(xMode_);
    connect(c, &LiveChart::maximizeRequested, this, [this, series] {
        if (maximized_ == series) restore();
        else maximize(series);
    });
    charts_.insert(series, c);
    relayout();
    return c;
}

void ChartGrid::appendPoints(const QString& series, int run, const QVector<QPointF>& points) {
    LiveChart* c = charts_.value(series, nullptr);
    if (!c) c = makeChart(series);
    const bool fresh = !c->runs().contains(run);
    c->appendPoints(run, points);
    if (fresh) applyFilter(c);
}

void ChartGrid::appendRows(const QString& series, int run, std::vector<double>&& steps, std::vector<double>&& wallTimes,
                           std::vector<double>&& values) {
    LiveChart* c = charts_.value(series, nullptr);
    if (!c) c = makeChart(series);
    const bool fresh = !c->runs().contains(run);
    c->appendRows(run, std::move(steps), std::move(wallTimes), std::move(values));
    if (fresh) applyFilter(c);
}

void ChartGrid::adoptRows(const QString& series, int run, ChartRows&& rows) {
    LiveChart* c = charts_.value(series, nullptr);
    if (!c) c = makeChart(series);
    const bool fresh = !c->runs().contains(run);
    c->adoptRows(run, std::move(rows));
    if (fresh) applyFilter(c);
}

void ChartGrid::setRunStart(int run, double unixTime) {
    starts_[run] = unixTime;
    for (LiveChart* c : charts_) c->setRunStart(run, unixTime);
}

void ChartGrid::clearRun(int run) {
    for (LiveChart* c : charts_) c->clearRun(run);
    labels_.remove(run);
}

void ChartGrid::clearAll() {
    for (QWidget* s : sections_) s->hide();
    for (LiveChart* c : charts_) delete c;
    charts_.clear();
    labels_.clear();
    liveRuns_.clear();
    maximized_.clear();
    relayout();
}

QStringList ChartGrid::seriesNames() const { return charts_.keys(); }

LiveChart* ChartGrid::chart(const QString& series) const { return charts_.value(series, nullptr); }

void ChartGrid::setOrder(const QStringList& first) {
    order_ = first;
    relayout();
}

void ChartGrid::setGrouping(Grouping g) {
    grouping_ = std::move(g);
    relayout();
}

namespace {
struct Placed {
    ChartGrid::Placement at;
    QString name;
};
} // namespace

QStringList ChartGrid::layoutOrder() const {
    QList<Placed> all;
    for (auto it = charts_.begin(); it != charts_.end(); ++it) {
        Placed p{grouping_ ? grouping_(it.key()) : ChartGrid::Placement{}, it.key()};
        if (!grouping_) {
            const int i = int(order_.indexOf(it.key()));
            p.at.rank = i >= 0 ? i : int(order_.size());
        }
        all << p;
    }
    std::stable_sort(all.begin(), all.end(), [](const Placed& a, const Placed& b) {
        if (a.at.group != b.at.group) return a.at.group < b.at.group;
        if (a.at.rank != b.at.rank) return a.at.rank < b.at.rank;
        return a.name < b.name;
    });
    QStringList out;
    for (const Placed& p : all) out << p.name;
    return out;
}

QStringList ChartGrid::groupTitles() const {
    QStringList out;
    for (const QString& n : layoutOrder()) {
        const QString t = grouping_ ? grouping_(n).groupTitle : QString();
        if (!out.contains(t)) out << t;
    }
    return out;
}

QList<LiveChart*> ChartGrid::charts() const {
    QList<LiveChart*> out;
    for (const QString& n : layoutOrder()) out << charts_.value(n);
    return out;
}

void ChartGrid::setGroupCollapsed(const QString& title, bool collapsed) {
    if (collapsed == collapsed_.contains(title)) return;
    if (collapsed) collapsed_.insert(title);
    else collapsed_.remove(title);
    relayout();
}

void ChartGrid::maximize(const QString& series) {
    if (!charts_.contains(series) || maximized_ == series) return;
    maximized_ = series;
    relayout();
    charts_.value(series)->setFocus(Qt::OtherFocusReason);
}

void ChartGrid::restore() {
    if (maximized_.isEmpty()) return;
    maximized_.clear();
    relayout();
}

int ChartGrid::fitColumns() const {
    if (columns_ > 0) return columns_;
    return std::clamp(width() / 330, 1, 4);
}

void ChartGrid::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    if (fitColumns() != shownColumns_) QTimer::singleShot(0, this, [this] {
            if (fitColumns() != shownColumns_) relayout();
        });
}

void ChartGrid::keyPressEvent(QKeyEvent* e) {
    if (e->key() == Qt::Key_Escape && !maximized_.isEmpty()) {
        restore();
        e->accept();
        return;
    }
    QWidget::keyPressEvent(e);
}

void ChartGrid::relayout() {
    // Charts go back to the grid itself while the sections are rebuilt.
    for (LiveChart* c : charts_) {
        c->hide();
        c->setParent(this);
    }
    for (QWidget* s : sections_) {
        outer_->removeWidget(s);
        s->hide();
        s->deleteLater();
    }
    sections_.clear();
    while (outer_->count() > 0) delete outer_->takeAt(0);
    shownColumns_ = fitColumns();
    const QStringList order = layoutOrder();
    if (!maximized_.isEmpty() && charts_.contains(maximized_)) {
        LiveChart* c = charts_.value(maximized_);
        auto* box = new QWidget(this);
        auto* lay = new QVBoxLayout(box);
        lay->setContentsMargins(0, 0, 0, 0);
        auto* hint = new QLabel(QStringLiteral("%1 - double-click or Esc: back to every chart").arg(maximized_), box);
        hint->setStyleSheet("color: #666;");
        lay->addWidget(hint);
        lay->addWidget(c, 1);
        c->show();
        outer_->addWidget(box, 1);
        sections_ << box;
        box->show();
        Q_EMIT layoutChanged();
        return;
    }
    QString group;
    bool first = true;
    QGridLayout* grid = nullptr;
    int i = 0;
    for (const QString& n : order) {
        const Placement at = grouping_ ? grouping_(n) : Placement{};
        if (first || at.groupTitle != group) {
            first = false;
            group = at.groupTitle;
            const bool collapsed = collapsed_.contains(group);
            int count = 0;
            for (const QString& m : order) count += (grouping_ ? grouping_(m).groupTitle : QString()) == group;
            if (grouping_) {
                auto* head = new QToolButton(this);
                head->setObjectName("chartgroup:" + group);
                head->setAutoRaise(true);
                head->setCheckable(true);
                head->setChecked(!collapsed);
                head->setArrowType(collapsed ? Qt::RightArrow : Qt::DownArrow);
                head->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
                head->setText(QStringLiteral("%1  (%2)").arg(group).arg(count));
                QFont f = head->font();
                f.setBold(true);
                head->setFont(f);
                const QString g = group;
                connect(head, &QToolButton::clicked, this, [this, g](bool open) {
                    QTimer::singleShot(0, this, [this, g, open] { setGroupCollapsed(g, !open); });
                });
                outer_->addWidget(head, 0);
                sections_ << head;
            }
            grid = nullptr;
            i = 0;
            if (collapsed) continue;
            auto* box = new QWidget(this);
            grid = new QGridLayout(box);
            grid->setContentsMargins(0, 0, 0, 0);
            grid->setSpacing(4);
            const int rows = (count + shownColumns_ - 1) / shownColumns_;
            outer_->addWidget(box, std::max(1, rows));
            sections_ << box;
        }
        if (!grid) continue;
        LiveChart* c = charts_.value(n);
        grid->addWidget(c, i / shownColumns_, i % shownColumns_);
        c->show();
        ++i;
    }
    for (QGridLayout* g : findChildren<QGridLayout*>())
        for (int col = 0; col < shownColumns_; ++col) g->setColumnStretch(col, 1);
    for (QWidget* w : sections_) w->show();   // at once (a layout shows new children later)
    if (sections_.isEmpty() || std::all_of(sections_.begin(), sections_.end(),
                                           [](QWidget* w) { return qobject_cast<QToolButton*>(w) != nullptr; }))
        outer_->addStretch(1);
    Q_EMIT layoutChanged();
}

void ChartGrid::setSmoothing(double w) {
    smoothing_ = w;
    for (LiveChart* c : charts_) c->setSmoothing(w);
}

void ChartGrid::setXAxisMode(XAxisMode m) {
    xMode_ = m;
    for (LiveChart* c : charts_) c->setXAxisMode(m);
}

void ChartGrid::setRunOf(std::function<int(int)> f) {
    runOf_ = f ? std::move(f) : [](int k) { return k; };
    for (LiveChart* c : charts_) applyFilter(c);
}

bool ChartGrid::setRunFilter(const QString& pattern) {
    const QRegularExpression re(pattern, QRegularExpression::CaseInsensitiveOption);
    if (!re.isValid()) return false;
    filter_ = pattern;
    for (LiveChart* c : charts_) applyFilter(c);
    return true;
}

void ChartGrid::setRunLive(int run, bool live) {
    if (live == liveRuns_.contains(run)) return;
    if (live) liveRuns_.insert(run);
    else liveRuns_.remove(run);
    for (LiveChart* c : charts_)
        for (int k : c->runs())
            if (runOf_(k) == run) c->setLineLive(k, live);
}

void ChartGrid::applyFilter(LiveChart* c) const {
    const QRegularExpression re(filter_, QRegularExpression::CaseInsensitiveOption);
    for (int k : c->runs()) {
        const int run = runOf_(k);
        c->setLineLive(k, liveRuns_.contains(run));
        const QString label = labels_.contains(run) ? labels_.value(run) : c->runLabel(k);
        c->setLineVisible(k, filter_.isEmpty() || re.match(label).hasMatch());
    }
}

// ---- export ---------------------------------------------------------------------------------

QList<QPair<QString, LiveChart*>> ChartGrid::shownCharts() const {
    QList<QPair<QString, LiveChart*>> out;
    for (const QString& n : layoutOrder()) {
        if (!maximized_.isEmpty() && n != maximized_) continue;
        if (grouping_ && collapsed_.contains(grouping_(n).groupTitle) && maximized_.isEmpty()) continue;
        out << qMakePair(n, charts_.value(n));
    }
    return out;
}

namespace {
constexpr int kExportW = 480, kExportH = 300;
}

bool ChartGrid::exportPng(const QString& path, QString* error) const {
    const auto shown = shownCharts();
    if (shown.isEmpty()) {
        if (error) *error = path + ": no charts to export";
        return false;
    }
    const int cols = maximized_.isEmpty() ? std::max(1, shownColumns_) : 1;
    const int rows = int((shown.size() + cols - 1) / cols);
    QImage img(cols * kExportW, rows * kExportH, QImage::Format_RGB32);
    img.fill(Qt::white);
    {
        QPainter p(&img);
        for (int i = 0; i < shown.size(); ++i)
            shown[i].second->draw(p, QRect((i % cols) * kExportW, (i / cols) * kExportH, kExportW, kExportH));
    }
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || !img.save(&f, "PNG") || !f.commit()) {
        if (error) *error = path + ": cannot write the PNG (" + f.errorString() + ")";
        return false;
    }
    return true;
}

bool ChartGrid::exportSvg(const QString& path, QString* error) const {
    const auto shown = shownCharts();
    if (shown.isEmpty()) {
        if (error) *error = path + ": no charts to export";
        return false;
    }
    const int cols = maximized_.isEmpty() ? std::max(1, shownColumns_) : 1;
    const int rows = int((shown.size() + cols - 1) / cols);
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly)) {
        if (error) *error = path + ": cannot write the SVG (" + f.errorString() + ")";
        return false;
    }
    {
        QSvgGenerator gen;
        gen.setOutputDevice(&f);
        gen.setSize(QSize(cols * kExportW, rows * kExportH));
        gen.setViewBox(QRect(0, 0, cols * kExportW, rows * kExportH));
        gen.setTitle("Glimpse training charts");
        QPainter p(&gen);
        for (int i = 0; i < shown.size(); ++i)
            shown[i].second->draw(p, QRect((i % cols) * kExportW, (i / cols) * kExportH, kExportW, kExportH));
    }
    if (!f.commit()) {
        if (error) *error = path + ": cannot write the SVG (" + f.errorString() + ")";
        return false;
    }
    return true;
}

bool ChartGrid::exportCsv(const QString& path, QString* error) const {
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) {
        if (error) *error = path + ": cannot write the CSV (" + f.errorString() + ")";
        return false;
    }
    QTextStream out(&f);
    out << "chart,line,step,wall_time,value,smoothed\n";
    for (const auto& [name, c] : shownCharts()) {
        for (int k : c->runs()) {
            if (!c->lineVisible(k)) continue;
            const QVector<QPointF> pts = c->points(k);
            const QVector<double> wt = c->wallTimes(k), sm = c->smoothedValues(k);
            const QString head = csvField(name) + ',' + csvField(c->runLabel(k)) + ',';
            for (int i = 0; i < pts.size(); ++i) {
                out << head << QString::number(qint64(pts[i].x())) << ','
                    << (i < wt.size() && std::isfinite(wt[i]) ? QString::number(wt[i], 'g', 12) : QString()) << ','
                    << QString::number(pts[i].y(), 'g', 17) << ',' << QString::number(sm.value(i, pts[i].y()), 'g', 17)
                    << '\n';
            }
        }
    }
    out.flush();
    if (!f.commit()) {
        if (error) *error = path + ": cannot write the CSV (" + f.errorString() + ")";
        return false;
    }
    return true;
}

} // namespace glimpse::widgets
