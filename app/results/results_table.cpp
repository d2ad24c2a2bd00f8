#include "app/results/results_table.h"

#include <QBrush>
#include <QColor>
#include <QElapsedTimer>

#include <cmath>

#include "core/results/results.h"

namespace glimpse::app {

ResultsTableModel::ResultsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ResultsTableModel::setColumns(std::vector<ResultsColumn> columns, int64_t samples, QStringList names) {
    beginResetModel();
    columns_ = std::move(columns);
    samples_ = samples;
    names_ = std::move(names);
    sortColumn_ = columnIndex(sortName_);
    rebuildOrder();
    endResetModel();
    Q_EMIT rowsRearranged();
}

void ResultsTableModel::setColumnValues(int column, std::vector<double> values) {
    if (column < 0 || column >= int(columns_.size()) || int64_t(values.size()) != samples_) return;
    columns_[size_t(column)].values = std::move(values);
    if (column == sortColumn_) {
        beginResetModel();
        rebuildOrder();
        endResetModel();
        Q_EMIT rowsRearranged();
    } else if (!visible_.empty()) {
        Q_EMIT dataChanged(index(0, column), index(int(visible_.size()) - 1, column));
    }
}

int ResultsTableModel::columnIndex(const QString& name) const {
    for (size_t c = 0; c < columns_.size(); ++c)
        if (columns_[c].name == name) return int(c);
    return -1;
}

void ResultsTableModel::setPickFilter(std::function<bool(int64_t)> keep, const QString& description) {
    pick_ = std::move(keep);
    pickText_ = pick_ ? description : QString();
    beginResetModel();
    applyFilter();
    endResetModel();
    Q_EMIT rowsRearranged();
}

void ResultsTableModel::setTextFilter(const QString& text) {
    if (text == text_) return;
    text_ = text;
    beginResetModel();
    applyFilter();
    endResetModel();
    Q_EMIT rowsRearranged();
}

void ResultsTableModel::clearFilters() {
    pick_ = nullptr;
    pickText_.clear();
    text_.clear();
    beginResetModel();
    applyFilter();
    endResetModel();
    Q_EMIT rowsRearranged();
}

int ResultsTableModel::rowOf(int64_t sample) const {
    return sample >= 0 && sample < int64_t(rowOf_.size()) ? rowOf_[size_t(sample)] : -1;
}

void ResultsTableModel::sort(int column, Qt::SortOrder order) {
    if (column >= int(columns_.size())) return;
    beginResetModel();
    sortColumn_ = column;
    sortName_ = column >= 0 ? columns_[size_t(column)].name : QString();
    sortOrder_ = order;
    rebuildOrder();
    endResetModel();
    Q_EMIT rowsRearranged();
}

void ResultsTableModel::rebuildOrder() {
    QElapsedTimer t;
    t.start();
    if (sortColumn_ >= 0 && sortColumn_ < int(columns_.size())) {
        // NaN (unknown) sorts last either way.
        std::vector<double> key = columns_[size_t(sortColumn_)].values;
        const bool desc = sortOrder_ == Qt::DescendingOrder;
        for (double& v : key)
            if (std::isnan(v)) v = desc ? -HUGE_VAL : HUGE_VAL;
        order_ = results::sortedOrder(key, desc);
    } else {
        order_.resize(size_t(samples_));
        for (int64_t i = 0; i < samples_; ++i) order_[size_t(i)] = i;
    }
    sortMs_ = t.nsecsElapsed() / 1e6;
    applyFilter();
}

void ResultsTableModel::applyFilter() {
    QElapsedTimer t;
    t.start();
    visible_.clear();
    visible_.reserve(order_.size());
    for (int64_t s : order_) {
        if (pick_ && !pick_(s)) continue;
        if (!text_.isEmpty() && !names_.value(int(s)).contains(text_, Qt::CaseInsensitive)) continue;
        visible_.push_back(s);
    }
    rowOf_.assign(size_t(samples_), -1);
    for (size_t r = 0; r < visible_.size(); ++r) rowOf_[size_t(visible_[r])] = int(r);
    filterMs_ = t.nsecsElapsed() / 1e6;
}

int ResultsTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(visible_.size());
}

int ResultsTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(columns_.size());
}

QString ResultsTableModel::cellText(int c, int64_t sample) const {
    const ResultsColumn& col = columns_[size_t(c)];
    if (col.text) return col.text(sample);
    const double v = col.values[size_t(sample)];
    if (std::isnan(v)) return QStringLiteral("...");
    return QString::number(v, 'f', col.decimals);
}

QVariant ResultsTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(visible_.size()) || index.column() >= int(columns_.size())) return {};
    const int64_t s = visible_[size_t(index.row())];
    const ResultsColumn& col = columns_[size_t(index.column())];
    if (role == Qt::DisplayRole) return cellText(index.column(), s);
    if (role == Qt::TextAlignmentRole)
        return col.text ? QVariant(int(Qt::AlignLeft | Qt::AlignVCenter)) : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::UserRole) return qlonglong(s);
    if (role == Qt::ForegroundRole && col.name.startsWith(QStringLiteral("Δ"))) {   // regressions red
        const double v = col.values[size_t(s)];
        if (v < 0) return QBrush(QColor(200, 30, 30));
        if (v > 0) return QBrush(QColor(20, 140, 50));
    }
    return {};
}

QVariant ResultsTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o == Qt::Horizontal && section >= 0 && section < int(columns_.size())) {
        if (role == Qt::DisplayRole) return columns_[size_t(section)].name;
        if (role == Qt::ToolTipRole) return columns_[size_t(section)].tip;
    }
    if (o == Qt::Vertical && role == Qt::DisplayRole) return section + 1;
    return {};
}

QString ResultsTableModel::csv() const {
    auto quote = [](QString s) {
        if (s.contains(',') || s.contains('"') || s.contains('\n')) s = '"' + s.replace("\"", "\"\"") + '"';
        return s;
    };
    QString out;
    QStringList header;
    for (const auto& c : columns_) header << quote(c.name);
    out += header.join(',') + '\n';
    for (int64_t s : visible_) {
        QStringList row;
        for (size_t c = 0; c < columns_.size(); ++c) {
            const ResultsColumn& col = columns_[c];
            if (col.text) {
                row << quote(col.text(s));
            } else {
                const double v = col.values[size_t(s)];
                row << (std::isnan(v) ? QString() : QString::number(v, 'g', 10));
            }
        }
        out += row.join(',') + '\n';
    }
    return out;
}

} // namespace glimpse::app
