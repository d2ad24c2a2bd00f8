#pragma once
// StripChart: a compact per-step chart drawn with QPainter: a few lines over steps 0..n-1 and a
// vertical cursor at the current step; clicking or dragging reports the step under the mouse.
// Long series (100,000 steps) are drawn as one min/max bar per pixel column, so drawing costs
// the widget's width, not the episode's length. Plain data only (no core/, no LibTorch).
#include <QColor>
#include <QFont>
#include <QRect>
#include <QStringList>
#include <QString>
#include <QVector>
#include <QWidget>

namespace glimpse::widgets {

class StripChart : public QWidget {
    Q_OBJECT
public:
    struct Line {
        QString name;
        QColor color;
        QVector<double> values;   // one per step; NaN = no value (a gap)
        Qt::PenStyle style = Qt::SolidLine;
    };
    explicit StripChart(const QString& title, QWidget* parent = nullptr);

    QString title() const { return title_; }
    void setTitle(const QString& title);
    // Steps are labelled xOffset .. xOffset + n - 1 (n = the longest line).
    void setXOffset(int offset);
    void clear();
    void addLine(Line line);
    const QVector<Line>& lines() const { return lines_; }
    int length() const;
    // The cursor (-1: none), in step indices (0 .. length()-1, before the offset).
    void setCursor(int step);
    int cursorStep() const { return cursor_; }
    // The step index under widget x coordinate `x` (clamped to the plot), -1 without data.
    int stepAt(int x) const;
    // The y range drawn (min, max over all lines, padded when flat).
    std::pair<double, double> yRange() const;
    // The y axis labels (top, bottom) and their font; the plot starts right of the widest.
    QStringList yLabels() const;
    QFont labelFont() const;
    // The plot area inside the widget (axes, lines and cursor are drawn there).
    QRect plotRect() const;
    QSize sizeHint() const override { return {320, 84}; }
    QSize minimumSizeHint() const override { return {120, 56}; }

Q_SIGNALS:
    void stepClicked(int step);

protected:
    void paintEvent(QPaintEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;

private:
    void drawLine(class QPainter& p, const Line& line, const QRect& r, double lo, double hi) const;

    QString title_;
    QVector<Line> lines_;
    int cursor_ = -1;
    int xOffset_ = 0;
};

// Grouped bars over named categories (e.g. the policy and the visit distribution over action
// names), one colour per series; one category can be highlighted (the action taken).
class BarChart : public QWidget {
    Q_OBJECT
public:
    struct Series {
        QString name;
        QColor color;
        QVector<double> values;   // one per category, drawn on a 0..max scale
    };
    explicit BarChart(QWidget* parent = nullptr);
    void setCategories(const QStringList& names);
    QStringList categories() const { return names_; }
    void setSeries(const QVector<Series>& series);
    const QVector<Series>& series() const { return series_; }
    void setHighlight(int category);   // -1: none
    int highlight() const { return highlight_; }
    QSize sizeHint() const override { return {320, 120}; }
    QSize minimumSizeHint() const override { return {120, 80}; }

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    QStringList names_;
    QVector<Series> series_;
    int highlight_ = -1;
};

// A horizontal colour scale: a heatmap's colour map as a gradient bar, with its range written
// at both ends (e.g. the replay viewer's saliency heatmap).
class ColourScale : public QWidget {
    Q_OBJECT
public:
    explicit ColourScale(QWidget* parent = nullptr);
    void setTitle(const QString& title);
    QString title() const { return title_; }
    // The colour map, low to high (e.g. 256 entries).
    void setColours(const QVector<QColor>& colours);
    const QVector<QColor>& colours() const { return colours_; }
    void setRange(double lo, double hi);
    double low() const { return lo_; }
    double high() const { return hi_; }
    // The texts written at the ends of the bar.
    QString lowText() const;
    QString highText() const;
    QSize sizeHint() const override { return {320, 40}; }
    QSize minimumSizeHint() const override { return {120, 40}; }

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    QString title_;
    QVector<QColor> colours_;
    double lo_ = 0, hi_ = 1;
};

} // namespace glimpse::widgets
