#include "app/results/summary_chart.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

namespace glimpse::app {

namespace {

constexpr double kTitleH = 20, kMargin = 6, kAxisLeft = 34, kAxisBottom = 22, kLegendW = 96, kLegendRowH = 16;

QColor seriesColour(int i, int n) {
    // Layers from blue (first) to orange (last); baselines (named, after the layers) grey-ish.
    if (n <= 1) return QColor(40, 120, 220);
    return QColor::fromHsvF(std::fmod(0.62 - 0.55 * double(i) / double(n - 1) + 1.0, 1.0), 0.75, 0.9);
}

// Distance from p to segment ab.
double segDist(QPointF p, QPointF a, QPointF b) {
    const QPointF d = b - a;
    const double len2 = d.x() * d.x() + d.y() * d.y();
    double t = len2 > 0 ? ((p.x() - a.x()) * d.x() + (p.y() - a.y()) * d.y()) / len2 : 0.0;
    t = std::clamp(t, 0.0, 1.0);
    const QPointF q = a + t * d;
    return std::hypot(p.x() - q.x(), p.y() - q.y());
}

} // namespace

SummaryChart::SummaryChart(QWidget* parent) : QWidget(parent) {
    setMouseTracking(false);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void SummaryChart::clear() {
    kind_ = Kind::None;
    series_.clear();
    counts_.clear();
    binCounts_.clear();
    names_.clear();
    title_.clear();
    update();
}

void SummaryChart::setCurves(std::vector<PrSeries> series, const QString& title, int highlight) {
    kind_ = Kind::PR;
    series_ = std::move(series);
    title_ = title;
    highlight_ = highlight;
    update();
}

void SummaryChart::setHighlight(int series) {
    highlight_ = series;
    update();
}

void SummaryChart::setConfusion(std::vector<int64_t> counts, int k, QStringList names, const QString& title) {
    kind_ = Kind::Confusion;
    counts_ = std::move(counts);
    k_ = k;
    names_ = std::move(names);
    title_ = title;
    selT_ = selP_ = -1;
    update();
}

void SummaryChart::setHistogram(const std::vector<double>& values, int bins, const QString& title) {
    kind_ = Kind::Histogram;
    binCounts_.assign(size_t(std::max(1, bins)), 0);
    for (double v : values) {
        if (!std::isfinite(v)) continue;
        const int b = std::clamp(int(std::floor(v * bins)), 0, bins - 1);
        ++binCounts_[size_t(b)];
    }
    title_ = title;
    selBin_ = -1;
    update();
}

void SummaryChart::setSelectedCell(int trueClass, int predicted) {
    selT_ = trueClass;
    selP_ = predicted;
    update();
}

void SummaryChart::setSelectedBin(int bin) {
    selBin_ = bin;
    update();
}

std::pair<double, double> SummaryChart::binRange(int b) const {
    const int n = std::max(1, bins());
    return {double(b) / n, b == n - 1 ? 1.0 + 1e-9 : double(b + 1) / n};
}

QRectF SummaryChart::plotRect() const {
    QRectF r(kMargin + kAxisLeft, kTitleH + kMargin, width() - 2 * kMargin - kAxisLeft,
             height() - kTitleH - 2 * kMargin - kAxisBottom);
    if (kind_ == Kind::PR) r.setWidth(r.width() - kLegendW);
    if (kind_ == Kind::Confusion) {   // square cells, the class names left and below
        const double side = std::max(10.0, std::min(r.width(), r.height()));
        r = QRectF(r.left() + 30, r.top(), side - 30, side - 30);
    }
    return r;
}

QRectF SummaryChart::legendRect(int s) const {
    const QRectF pr = plotRect();
    return QRectF(pr.right() + 8, pr.top() + s * kLegendRowH, kLegendW - 10, kLegendRowH);
}

void SummaryChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    p.setPen(palette().text().color());
    QFont f = font();
    f.setBold(true);
    p.setFont(f);
    p.drawText(QRectF(kMargin, 2, width() - 2 * kMargin, kTitleH), Qt::AlignLeft | Qt::AlignVCenter, title_);
    p.setFont(font());
    const QRectF r = plotRect();
    if (r.width() < 10 || r.height() < 10) return;
    if (kind_ == Kind::None) {
        p.drawText(rect(), Qt::AlignCenter, "No results file open");
        return;
    }
    if (kind_ == Kind::PR) paintCurves(p, r);
    else if (kind_ == Kind::Confusion) paintConfusion(p, r);
    else paintHistogram(p, r);
}

void SummaryChart::paintCurves(QPainter& p, const QRectF& r) {
    const QColor axis = palette().text().color();
    p.setPen(QPen(axis, 1));
    p.drawRect(r);
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    p.setFont(small);
    for (int i = 0; i <= 4; ++i) {   // grid and ticks at 0, .25, .5, .75, 1
        const double v = i / 4.0;
        const double x = r.left() + v * r.width(), y = r.bottom() - v * r.height();
        p.setPen(QPen(QColor(128, 128, 128, 60), 1));
        p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
        p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
        p.setPen(axis);
        p.drawText(QRectF(x - 15, r.bottom() + 1, 30, 12), Qt::AlignCenter, QString::number(v, 'g', 2));
        p.drawText(QRectF(r.left() - 30, y - 6, 27, 12), Qt::AlignRight | Qt::AlignVCenter, QString::number(v, 'g', 2));
    }
    p.drawText(QRectF(r.left(), r.bottom() + 10, r.width(), 12), Qt::AlignCenter, "recall");
    p.save();
    p.translate(kMargin + 2, r.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-40, -2, 80, 12), Qt::AlignCenter, "precision");
    p.restore();
    const int n = int(series_.size());
    auto draw = [&](int s) {
        const PrSeries& c = series_[size_t(s)];
        QPainterPath path;
        for (size_t i = 0; i < c.precision.size(); ++i) {
            const QPointF q(r.left() + c.recall[i] * r.width(), r.bottom() - c.precision[i] * r.height());
            if (i == 0) path.moveTo(q);
            else path.lineTo(q);
        }
        p.setPen(QPen(seriesColour(s, n), s == highlight_ ? 3.0 : 1.4));
        p.drawPath(path);
    };
    for (int s = 0; s < n; ++s)
        if (s != highlight_) draw(s);
    if (highlight_ >= 0 && highlight_ < n) draw(highlight_);
    for (int s = 0; s < n; ++s) {   // legend: swatch, name, AP
        const QRectF lr = legendRect(s);
        if (lr.bottom() > height()) break;
        p.fillRect(QRectF(lr.left(), lr.center().y() - 2, 12, 4), seriesColour(s, n));
        QFont lf = small;
        lf.setBold(s == highlight_);
        p.setFont(lf);
        p.setPen(axis);
        p.drawText(lr.adjusted(15, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   QStringLiteral("%1 %2").arg(series_[size_t(s)].name).arg(100.0 * series_[size_t(s)].ap, 0, 'f', 1));
    }
    p.setFont(font());
}

void SummaryChart::paintConfusion(QPainter& p, const QRectF& r) {
    if (k_ <= 0) return;
    const double cw = r.width() / k_, ch = r.height() / k_;
    // Row-normalized: a cell's shade is its share of the true class's samples.
    for (int t = 0; t < k_; ++t) {
        int64_t rowSum = 0;
        for (int q = 0; q < k_; ++q) rowSum += counts_[size_t(t * k_ + q)];
        for (int q = 0; q < k_; ++q) {
            const int64_t c = counts_[size_t(t * k_ + q)];
            const double frac = rowSum > 0 ? double(c) / double(rowSum) : 0.0;
            const QRectF cell(r.left() + q * cw, r.top() + t * ch, cw, ch);
            const QColor base = t == q ? QColor(30, 140, 60) : QColor(200, 40, 40);
            QColor fill = base;
            fill.setAlphaF(c > 0 ? 0.12 + 0.88 * frac : 0.0);
            p.fillRect(cell, fill);
            p.setPen(QPen(QColor(128, 128, 128, 90), 1));
            p.drawRect(cell);
            if (c > 0 && cw >= 16 && ch >= 11) {
                p.setPen(frac > 0.55 ? Qt::white : palette().text().color());
                QFont small = font();
                small.setPointSizeF(std::max(6.0, std::min(small.pointSizeF(), ch * 0.45)));
                p.setFont(small);
                p.drawText(cell, Qt::AlignCenter, QString::number(c));
                p.setFont(font());
            }
        }
    }
    if (selT_ >= 0 && selP_ >= 0 && selT_ < k_ && selP_ < k_) {
        p.setPen(QPen(QColor(255, 200, 0), 3));
        p.drawRect(QRectF(r.left() + selP_ * cw, r.top() + selT_ * ch, cw, ch));
    }
    QFont small = font();
    small.setPointSizeF(std::max(6.0, std::min(small.pointSizeF() * 0.85, ch * 0.7)));
    p.setFont(small);
    p.setPen(palette().text().color());
    for (int i = 0; i < k_; ++i) {   // class indices (names in the tool tips would not fit)
        const QString label = names_.value(i).isEmpty() ? QString::number(i) : names_.value(i).left(8);
        p.drawText(QRectF(r.left() - 62, r.top() + i * ch, 60, ch), Qt::AlignRight | Qt::AlignVCenter, label);
        p.save();
        p.translate(r.left() + (i + 0.5) * cw, r.bottom() + 2);
        p.rotate(-45);
        p.drawText(QRectF(-60, -6, 60, 12), Qt::AlignRight | Qt::AlignVCenter, label);
        p.restore();
    }
    p.drawText(QRectF(r.right() + 4, r.top(), 80, 14), Qt::AlignLeft, "rows: true");
    p.drawText(QRectF(r.right() + 4, r.top() + 14, 80, 14), Qt::AlignLeft, "cols: predicted");
    p.setFont(font());
}

void SummaryChart::paintHistogram(QPainter& p, const QRectF& r) {
    const int n = bins();
    const int64_t top = std::max<int64_t>(1, *std::max_element(binCounts_.begin(), binCounts_.end()));
    const QColor axis = palette().text().color();
    p.setPen(QPen(axis, 1));
    p.drawLine(r.bottomLeft(), r.bottomRight());
    p.drawLine(r.bottomLeft(), r.topLeft());
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    p.setFont(small);
    const double bw = r.width() / n;
    for (int b = 0; b < n; ++b) {
        const double h = r.height() * double(binCounts_[size_t(b)]) / double(top);
        const QRectF bar(r.left() + b * bw + 1, r.bottom() - h, bw - 2, h);
        // Red (failing episodes) to green (accurate ones).
        p.fillRect(bar, QColor::fromHsvF(0.33 * (b + 0.5) / n, 0.7, 0.85));
        if (b == selBin_) {
            p.setPen(QPen(QColor(255, 200, 0), 3));
            p.drawRect(bar.adjusted(0, std::min(0.0, h - 4), 0, 0));
            p.setPen(axis);
        }
        if (binCounts_[size_t(b)] > 0) {
            p.setPen(axis);
            p.drawText(QRectF(bar.left() - 4, bar.top() - 13, bar.width() + 8, 12), Qt::AlignCenter,
                       QString::number(binCounts_[size_t(b)]));
        }
    }
    for (int i = 0; i <= 4; ++i) {
        const double v = i / 4.0;
        p.drawText(QRectF(r.left() + v * r.width() - 15, r.bottom() + 1, 30, 12), Qt::AlignCenter,
                   QString::number(100 * v) + "%");
    }
    p.drawText(QRectF(r.left(), r.bottom() + 10, r.width(), 12), Qt::AlignCenter, "episode accuracy");
    p.setFont(font());
}

int SummaryChart::seriesAt(QPointF pt) const {
    if (kind_ != Kind::PR) return -1;
    for (int s = 0; s < int(series_.size()); ++s)
        if (legendRect(s).contains(pt)) return s;
    const QRectF r = plotRect();
    if (!r.adjusted(-4, -4, 4, 4).contains(pt)) return -1;
    int best = -1;
    double bestD = 6.0;   // pixels
    for (int s = 0; s < int(series_.size()); ++s) {
        const PrSeries& c = series_[size_t(s)];
        for (size_t i = 1; i < c.precision.size(); ++i) {
            const QPointF a(r.left() + c.recall[i - 1] * r.width(), r.bottom() - c.precision[i - 1] * r.height());
            const QPointF b(r.left() + c.recall[i] * r.width(), r.bottom() - c.precision[i] * r.height());
            const double d = segDist(pt, a, b);
            if (d < bestD) {
                bestD = d;
                best = s;
            }
        }
    }
    return best;
}

std::pair<int, int> SummaryChart::cellAt(QPointF pt) const {
    if (kind_ != Kind::Confusion || k_ <= 0) return {-1, -1};
    const QRectF r = plotRect();
    if (!r.contains(pt)) return {-1, -1};
    const int q = std::clamp(int((pt.x() - r.left()) / (r.width() / k_)), 0, k_ - 1);
    const int t = std::clamp(int((pt.y() - r.top()) / (r.height() / k_)), 0, k_ - 1);
    return {t, q};
}

int SummaryChart::binAt(QPointF pt) const {
    if (kind_ != Kind::Histogram || bins() == 0) return -1;
    const QRectF r = plotRect();
    if (pt.x() < r.left() || pt.x() >= r.right() || pt.y() < r.top() - 14 || pt.y() > r.bottom()) return -1;
    return std::clamp(int((pt.x() - r.left()) / (r.width() / bins())), 0, bins() - 1);
}

QPointF SummaryChart::cellCentre(int t, int q) const {
    const QRectF r = plotRect();
    return {r.left() + (q + 0.5) * r.width() / std::max(1, k_), r.top() + (t + 0.5) * r.height() / std::max(1, k_)};
}

QPointF SummaryChart::binCentre(int b) const {
    const QRectF r = plotRect();
    return {r.left() + (b + 0.5) * r.width() / std::max(1, bins()), r.bottom() - 2};
}

QPointF SummaryChart::legendCentre(int s) const { return legendRect(s).center(); }

void SummaryChart::mousePressEvent(QMouseEvent* e) {
    const QPointF pt = e->position();
    if (kind_ == Kind::PR) {
        const int s = seriesAt(pt);
        if (s >= 0) {
            setHighlight(s);
            Q_EMIT seriesClicked(s);
        }
    } else if (kind_ == Kind::Confusion) {
        const auto [t, q] = cellAt(pt);
        if (t >= 0) {
            setSelectedCell(t, q);
            Q_EMIT cellClicked(t, q);
        }
    } else if (kind_ == Kind::Histogram) {
        const int b = binAt(pt);
        if (b >= 0) {
            setSelectedBin(b);
            Q_EMIT binClicked(b);
        }
    }
    QWidget::mousePressEvent(e);
}

} // namespace glimpse::app
