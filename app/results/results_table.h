#pragma once
// The results dock's sample table: a QAbstractTableModel over a results file's per-sample
// columns (core/results/results.h, loaded when the file opens; nothing is copied per row: a
// cell is formatted when the view asks for it). Sorting orders sample indices by one numeric
// column (results::sortedOrder); filtering keeps the samples a predicate accepts (a chart pick)
// whose name contains the filter text; both replace one index vector. Columns whose values are
// still being computed on a worker (LETR counts at the display score) hold NaN and show "...".
#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <functional>
#include <memory>
#include <vector>

namespace glimpse::app {

struct ResultsColumn {
    QString name;
    QString tip;
    std::vector<double> values;   // one per sample (NaN: not known yet / not applicable)
    int decimals = 0;
    // Text of a cell (default: the value with `decimals`); for label-like columns.
    std::function<QString(int64_t sample)> text;
};

class ResultsTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit ResultsTableModel(QObject* parent = nullptr);

    // New columns for `samples` samples; `names` (one per sample) is what the text filter
    // searches. Keeps the sort column (by name) and the filters.
    void setColumns(std::vector<ResultsColumn> columns, int64_t samples, QStringList names);
    // Replaces one column's values (a worker finished); re-sorts when it is the sort column.
    void setColumnValues(int column, std::vector<double> values);
    int columnIndex(const QString& name) const;
    const ResultsColumn& column(int c) const { return columns_.at(size_t(c)); }
    int64_t samples() const { return samples_; }

    // The chart's pick (null: none) and its description ("true 3 (Dress), predicted 6").
    void setPickFilter(std::function<bool(int64_t)> keep, const QString& description);
    QString pickDescription() const { return pickText_; }
    void setTextFilter(const QString& text);
    QString textFilter() const { return text_; }
    void clearFilters();

    // Visible rows: sample index at a row, and the row of a sample (-1 when filtered out).
    int64_t sampleAt(int row) const { return visible_.at(size_t(row)); }
    int rowOf(int64_t sample) const;
    const std::vector<int64_t>& visibleSamples() const { return visible_; }
    int sortColumn() const { return sortColumn_; }
    Qt::SortOrder sortOrder() const { return sortOrder_; }
    // Milliseconds the last sort / filter took (the benchmark reads them).
    double lastSortMs() const { return sortMs_; }
    double lastFilterMs() const { return filterMs_; }

    // The visible rows as CSV (header = column names; values as shown, full precision for
    // numbers; quoted where needed).
    QString csv() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

Q_SIGNALS:
    // The visible rows changed (sort, filter, new columns): the thumbnail grid follows.
    void rowsRearranged();

private:
    QString cellText(int c, int64_t sample) const;
    void rebuildOrder();     // sort (all samples) then filter
    void applyFilter();      // filter the sorted order

    std::vector<ResultsColumn> columns_;
    int64_t samples_ = 0;
    QStringList names_;
    std::vector<int64_t> order_;     // every sample in sort order
    std::vector<int64_t> visible_;   // order_ filtered
    std::vector<int> rowOf_;         // sample -> visible row, -1
    int sortColumn_ = -1;
    QString sortName_;
    Qt::SortOrder sortOrder_ = Qt::AscendingOrder;
    std::function<bool(int64_t)> pick_;
    QString pickText_, text_;
    double sortMs_ = 0, filterMs_ = 0;
};

} // namespace glimpse::app
