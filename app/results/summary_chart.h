#pragma once
// SummaryChart: the results dock's summary of a results file, drawn with QPainter, whose
// elements filter the sample table when clicked:
//   - PR: precision-recall curves (one per LETR layer and baseline, at the chosen sAP
//     threshold); clicking a curve (or its legend entry) picks that row;
//   - Confusion: a classifier's confusion matrix (true class down, predicted across); clicking
//     a cell picks (true, predicted);
//   - Histogram: few-shot episode accuracies in bins; clicking a bar picks its range.
// Plain data in, signals out: the dock turns a pick into a table filter.
#include <QString>
#include <QStringList>
#include <QWidget>
#include <vector>

namespace glimpse::app {

struct PrSeries {
    QString name;                    // "fine 6", "LSD"
    std::vector<double> precision;   // one point per prediction, score descending
    std::vector<double> recall;
    double ap = 0;                   // sAP at the chart's threshold (fraction)
};

class SummaryChart : public QWidget {
    Q_OBJECT
public:
    enum class Kind { None, PR, Confusion, Histogram };
    explicit SummaryChart(QWidget* parent = nullptr);

    Kind kind() const { return kind_; }
    void clear();
    // PR curves; `highlight` is the series drawn on top, thicker (-1: none).
    void setCurves(std::vector<PrSeries> series, const QString& title, int highlight = -1);
    void setHighlight(int series);
    // counts[t * k + p]: samples of true class t predicted p; names: the k class names.
    void setConfusion(std::vector<int64_t> counts, int k, QStringList names, const QString& title);
    // Episode accuracies (0..1) in `bins` equal bins over [0, 1].
    void setHistogram(const std::vector<double>& values, int bins, const QString& title);
    // The picked element (-1 / (-1,-1) when none): drawn outlined.
    void setSelectedCell(int trueClass, int predicted);
    void setSelectedBin(int bin);
    int bins() const { return int(binCounts_.size()); }
    const std::vector<int64_t>& binCounts() const { return binCounts_; }
    // [lo, hi) of bin b (the last bin includes 1).
    std::pair<double, double> binRange(int b) const;

    // Hit tests in widget coordinates (for clicks and tests): the series / cell / bin at (x, y),
    // or -1 / (-1, -1).
    int seriesAt(QPointF p) const;
    std::pair<int, int> cellAt(QPointF p) const;
    int binAt(QPointF p) const;
    // Widget-coordinate centre of cell (t, p) / bin b / a point of series s (for tests).
    QPointF cellCentre(int t, int p) const;
    QPointF binCentre(int b) const;
    QPointF legendCentre(int s) const;

    QSize sizeHint() const override { return {360, 260}; }
    QSize minimumSizeHint() const override { return {220, 160}; }

Q_SIGNALS:
    void seriesClicked(int series);
    void cellClicked(int trueClass, int predicted);
    void binClicked(int bin);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;

private:
    QRectF plotRect() const;
    QRectF legendRect(int s) const;
    void paintCurves(class QPainter& p, const QRectF& r);
    void paintConfusion(class QPainter& p, const QRectF& r);
    void paintHistogram(class QPainter& p, const QRectF& r);

    Kind kind_ = Kind::None;
    QString title_;
    std::vector<PrSeries> series_;
    int highlight_ = -1;
    std::vector<int64_t> counts_;
    int k_ = 0;
    QStringList names_;
    int selT_ = -1, selP_ = -1;
    std::vector<int64_t> binCounts_;
    int selBin_ = -1;
};

} // namespace glimpse::app
