#include "widgets/strip_chart.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>
#include <limits>

namespace glimpse::widgets {

namespace {
constexpr int kMinLeft = 28, kLabelGap = 6, kRight = 6, kTop = 16, kBottom = 4;

QString shortNumber(double v) { return QString::number(v, 'g', 3); }
} // namespace

QFont StripChart::labelFont() const {
    QFont f = font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
    return f;
}

QStringList StripChart::yLabels() const {
    const auto [lo, hi] = yRange();
    return {shortNumber(hi), shortNumber(lo)};
}

StripChart::StripChart(const QString& title, QWidget* parent) : QWidget(parent), title_(title) {
    setMouseTracking(false);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setMinimumHeight(64);
}

void StripChart::setTitle(const QString& title) {
    title_ = title;
    update();
}

void StripChart::setXOffset(int offset) {
    xOffset_ = offset;
    update();
}

void StripChart::clear() {
    lines_.clear();
    cursor_ = -1;
    update();
}

void StripChart::addLine(Line line) {
    lines_.push_back(std::move(line));
    update();
}

int StripChart::length() const {
    int n = 0;
    for (const Line& l : lines_) n = std::max(n, int(l.values.size()));
    return n;
}

void StripChart::setCursor(int step) {
    if (cursor_ == step) return;
    cursor_ = step;
    update();
}

// The plot starts right of the widest y label, so labels such as "0.000738" are never cut.
QRect StripChart::plotRect() const {
    const QFontMetrics fm(labelFont());
    int left = kMinLeft;
    for (const QString& label : yLabels()) left = std::max(left, fm.horizontalAdvance(label) + 4 + kLabelGap);
    left = std::min(left, std::max(kMinLeft, width() / 2));
    return QRect(left, kTop, std::max(1, width() - left - kRight), std::max(1, height() - kTop - kBottom));
}

int StripChart::stepAt(int x) const {
    const int n = length();
    if (n <= 0) return -1;
    const QRect r = plotRect();
    if (n == 1) return 0;
    const double f = double(x - r.left()) / std::max(1, r.width() - 1);
    return std::clamp(int(std::lround(f * (n - 1))), 0, n - 1);
}

std::pair<double, double> StripChart::yRange() const {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const Line& l : lines_)
        for (double v : l.values)
            if (std::isfinite(v)) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
    if (!std::isfinite(lo)) return {0.0, 1.0};
    if (hi - lo < 1e-9) {
        const double pad = std::max(0.5, std::abs(hi) * 0.1);
        return {lo - pad, hi + pad};
    }
    const double pad = (hi - lo) * 0.06;
    return {lo - pad, hi + pad};
}

void StripChart::drawLine(QPainter& p, const Line& line, const QRect& r, double lo, double hi) const {
    const int n = int(line.values.size());
    const int total = std::max(2, length());
    auto px = [&](double i) { return r.left() + i / (total - 1) * (r.width() - 1); };
    auto py = [&](double v) { return r.bottom() - (v - lo) / (hi - lo) * (r.height() - 1); };
    p.setPen(QPen(line.color, 1.4, line.style));
    if (n <= 2 * r.width()) {
        QPainterPath path;
        bool open = false;
        for (int i = 0; i < n; ++i) {
            const double v = line.values[i];
            if (!std::isfinite(v)) {
                open = false;
                continue;
            }
            const QPointF pt(n == 1 ? r.center().x() : px(i), py(v));
            if (open) path.lineTo(pt);
            else path.moveTo(pt);
            open = true;
            if (n <= 40) p.drawEllipse(pt, 1.8, 1.8);
        }
        p.drawPath(path);
        return;
    }
    // One min/max bar per pixel column.
    for (int c = 0; c < r.width(); ++c) {
        const int i0 = int(double(c) / r.width() * n), i1 = std::max(i0 + 1, int(double(c + 1) / r.width() * n));
        double a = std::numeric_limits<double>::infinity(), b = -a;
        for (int i = i0; i < std::min(i1, n); ++i)
            if (std::isfinite(line.values[i])) {
                a = std::min(a, double(line.values[i]));
                b = std::max(b, double(line.values[i]));
            }
        if (std::isfinite(a)) p.drawLine(QPointF(r.left() + c, py(a)), QPointF(r.left() + c, py(b)));
    }
}

void StripChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, true);
    p.fillRect(rect(), palette().base());
    const QRect r = plotRect();
    const auto [lo, hi] = yRange();
    p.setPen(palette().text().color());
    p.setFont(labelFont());
    // Title and legend on the top line.
    QString head = title_;
    p.drawText(QRect(4, 0, width() - 8, kTop), Qt::AlignLeft | Qt::AlignVCenter, head);
    int x = 4 + p.fontMetrics().horizontalAdvance(head) + 16;
    for (const Line& l : lines_) {
        if (lines_.size() < 2) break;
        p.setPen(QPen(l.color, 2, l.style));
        p.drawLine(x, kTop / 2, x + 14, kTop / 2);
        p.setPen(palette().text().color());
        p.drawText(QRect(x + 17, 0, 200, kTop), Qt::AlignLeft | Qt::AlignVCenter, l.name);
        x += 24 + p.fontMetrics().horizontalAdvance(l.name);
    }
    p.drawText(QRect(0, r.top() - 2, r.left() - kLabelGap, 14), Qt::AlignRight | Qt::AlignTop, shortNumber(hi));
    p.drawText(QRect(0, r.bottom() - 12, r.left() - kLabelGap, 14), Qt::AlignRight | Qt::AlignBottom, shortNumber(lo));
    p.setPen(QPen(palette().mid().color(), 1));
    p.drawRect(r.adjusted(0, 0, -1, -1));
    if (lo < 0 && hi > 0) {
        const double y0 = r.bottom() - (0 - lo) / (hi - lo) * (r.height() - 1);
        p.setPen(QPen(palette().mid().color(), 1, Qt::DotLine));
        p.drawLine(QPointF(r.left(), y0), QPointF(r.right(), y0));
    }
    for (const Line& l : lines_) drawLine(p, l, r, lo, hi);
    const int n = length();
    if (cursor_ >= 0 && n > 0) {
        const double cx = n == 1 ? r.center().x() : r.left() + double(cursor_) / (n - 1) * (r.width() - 1);
        p.setPen(QPen(QColor(220, 40, 40), 1.2));
        p.drawLine(QPointF(cx, r.top()), QPointF(cx, r.bottom()));
        QString value;
        for (const Line& l : lines_)
            if (cursor_ < l.values.size() && std::isfinite(l.values[cursor_]))
                value += (value.isEmpty() ? "" : "  ") + shortNumber(l.values[cursor_]);
        // The values at the cursor, inside the plot's top-right corner.
        const QString text = QStringLiteral("%1: %2").arg(cursor_ + xOffset_).arg(value);
        const QRect box = p.fontMetrics().boundingRect(text).adjusted(-3, 0, 3, 0);
        const QRect at(r.right() - box.width() - 2, r.top() + 2, box.width(), box.height());
        p.fillRect(at, QColor(255, 255, 255, 200));
        p.setPen(QColor(30, 30, 30));
        p.drawText(at, Qt::AlignCenter, text);
    }
}

void StripChart::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    const int s = stepAt(int(e->position().x()));
    if (s >= 0) Q_EMIT stepClicked(s);
}

void StripChart::mouseMoveEvent(QMouseEvent* e) {
    if (!(e->buttons() & Qt::LeftButton)) return;
    const int s = stepAt(int(e->position().x()));
    if (s >= 0 && s != cursor_) Q_EMIT stepClicked(s);
}

// --- BarChart -------------------------------------------------------------------------------

BarChart::BarChart(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setMinimumHeight(110);
}

void BarChart::setCategories(const QStringList& names) {
    names_ = names;
    update();
}

void BarChart::setSeries(const QVector<Series>& series) {
    series_ = series;
    update();
}

void BarChart::setHighlight(int category) {
    highlight_ = category;
    update();
}

void BarChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    QFont f = font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
    p.setFont(f);
    const int n = int(names_.size());
    const int legendH = 14, labelH = 14;
    // Legend.
    int x = 4;
    for (const Series& s : series_) {
        p.fillRect(x, 3, 10, 9, s.color);
        p.setPen(palette().text().color());
        p.drawText(QRect(x + 13, 0, 200, legendH), Qt::AlignLeft | Qt::AlignVCenter, s.name);
        x += 24 + p.fontMetrics().horizontalAdvance(s.name);
    }
    if (n == 0 || series_.isEmpty()) return;
    const QRect r(4, legendH + 2, width() - 8, height() - legendH - labelH - 4);
    const double slot = double(r.width()) / n;
    const double barW = std::max(1.0, (slot - 4) / series_.size());
    for (int c = 0; c < n; ++c) {
        const double x0 = r.left() + c * slot;
        if (c == highlight_) p.fillRect(QRectF(x0, r.top(), slot, r.height() + labelH), QColor(255, 200, 0, 60));
        for (int s = 0; s < series_.size(); ++s) {
            const auto& vals = series_[s].values;
            double mx = 0;
            for (double v : vals) mx = std::max(mx, v);
            const double v = c < vals.size() ? vals[c] : 0.0;
            const double h = mx > 0 ? std::max(0.0, v) / mx * r.height() : 0.0;
            p.fillRect(QRectF(x0 + 2 + s * barW, r.bottom() - h, barW - 1, h), series_[s].color);
        }
        p.setPen(palette().text().color());
        const QString name = p.fontMetrics().elidedText(names_[c], Qt::ElideRight, int(slot));
        p.drawText(QRectF(x0, r.bottom() + 1, slot, labelH), Qt::AlignHCenter | Qt::AlignTop, name);
    }
}

// --- ColourScale ----------------------------------------------------------------------------

ColourScale::ColourScale(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setMinimumHeight(40);
}

void ColourScale::setTitle(const QString& title) {
    title_ = title;
    update();
}

void ColourScale::setColours(const QVector<QColor>& colours) {
    colours_ = colours;
    update();
}

void ColourScale::setRange(double lo, double hi) {
    lo_ = lo;
    hi_ = hi;
    update();
}

QString ColourScale::lowText() const { return QString::number(lo_, 'g', 3); }
QString ColourScale::highText() const { return QString::number(hi_, 'g', 3); }

void ColourScale::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().window());
    QFont f = font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
    p.setFont(f);
    const QFontMetrics fm(f);
    const int textH = fm.height();
    p.setPen(palette().text().color());
    p.drawText(QRect(4, 0, width() - 8, textH), Qt::AlignLeft | Qt::AlignVCenter, title_);
    // Bar between the two range labels.
    const QString lo = lowText(), hi = highText();
    const int loW = fm.horizontalAdvance(lo) + 6, hiW = fm.horizontalAdvance(hi) + 6;
    const QRect bar(4 + loW, textH + 2, std::max(1, width() - 8 - loW - hiW), std::max(4, height() - textH - 4));
    p.drawText(QRect(4, bar.top(), loW - 4, bar.height()), Qt::AlignRight | Qt::AlignVCenter, lo);
    p.drawText(QRect(bar.right() + 5, bar.top(), hiW, bar.height()), Qt::AlignLeft | Qt::AlignVCenter, hi);
    p.setPen(QPen(palette().mid().color(), 1));
    p.drawRect(bar.adjusted(0, 0, -1, -1));
    if (colours_.isEmpty()) return;
    // The gradient inside the frame: its first column is the map's bottom colour, its last the top.
    const QRect inner = bar.adjusted(1, 1, -1, -1);
    for (int x = 0; x < inner.width(); ++x) {
        const int i = std::clamp(int(double(x) / std::max(1, inner.width() - 1) * (colours_.size() - 1) + 0.5), 0,
                                 int(colours_.size()) - 1);
        p.fillRect(QRect(inner.left() + x, inner.top(), 1, inner.height()), colours_[i]);
    }
}

} // namespace glimpse::widgets
