#pragma once
// ResultsPanel: the Results dock (issue 53): from a metric to the images behind it.
// A results file (core/results/results.h; `glimpse eval letr|coat|fewshot --out R.h5`) opens
// here by its kind (File > Open, `glimpse R.h5`, drag and drop). The dock shows:
//   - the file, its status (complete / partial) and, when its sources moved, which ones and a
//     "Locate folder..." button that points the file at their new folder;
//   - a sortable, filterable table of the samples (ResultsTableModel) and beside it a lazy
//     thumbnail grid in the table's order (ThumbnailModel: worker threads, cached);
//   - the summary chart (SummaryChart): LETR precision-recall curves per layer and baseline at
//     the chosen sAP threshold, a classifier's confusion matrix, a histogram of few-shot
//     episode accuracies; clicking a curve, a cell or a bar filters the table;
//   - selecting a sample shows it in the main viewport with its ground truth and predictions
//     (results_view::letrOverlay etc.); "Inspect" runs the family's inspector on it (LETR: the
//     attention of the picked false positive at the chosen layer; CoaT: Grad-CAM of the
//     predicted or the true class; ConstellationNet: the episode in its Episode tab, or the
//     cluster map of a wrongly classified query);
//   - Compare: a second results file of the same data (or another row of this one): per-sample
//     differences, sorted by the largest regression, and both overlays side by side in the
//     compare pane;
//   - Export: the filtered table as CSV, a contact sheet (PNG) of the selected samples with
//     their overlays.
// Everything that reads the file runs on worker threads; the UI thread formats cells, looks up
// thumbnails and draws.
#include <QString>
#include <QWidget>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/results/results.h"
#include "widgets/viewport.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListView;
class QPushButton;
class QSplitter;
class QTableView;
class QVBoxLayout;

namespace glimpse::app {

class MainWindow;
class ResultsTableModel;
class SummaryChart;
class ThumbnailModel;

class ResultsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ResultsPanel(MainWindow* window, QWidget* parent = nullptr);
    ~ResultsPanel() override;

    std::shared_ptr<const results::ResultsFile> file() const { return file_; }
    std::shared_ptr<const results::ResultsFile> compareFile() const { return fileB_; }
    bool busy() const { return pending_ > 0; }
    // An inspector asked for by inspect() has not finished (nor failed) yet.
    bool inspecting() const { return inspecting_; }
    // Samples whose table columns are still being computed (LETR counts at the display score).
    bool countsPending() const { return countsRunning_ > 0; }
    int64_t selectedSample() const { return selected_; }
    // The sample shown in the viewport and drawn (after a selection's worker finished).
    int64_t shownSample() const { return shown_; }
    QString problemText() const;
    // The sources-moved message ("" when every source is where the file says).
    QString sourcesMessage() const;

    // Widgets (tests drive them).
    ResultsTableModel* tableModel() const { return table_; }
    QTableView* tableView() const { return tableView_; }
    QListView* thumbnailView() const { return thumbView_; }
    ThumbnailModel* thumbnailModel() const { return thumbs_; }
    SummaryChart* chart() const { return chart_; }
    QComboBox* rowBox() const { return rowBox_; }
    QComboBox* thresholdBox() const { return thresholdBox_; }
    QDoubleSpinBox* scoreBox() const { return scoreBox_; }
    QComboBox* compareRowBox() const { return compareRowBox_; }
    QLineEdit* filterEdit() const { return filter_; }
    QLabel* pickLabel() const { return pickLabel_; }
    QLabel* sampleLabel() const { return sampleLabel_; }
    QPushButton* locateButton() const { return locate_; }

    // The LETR overlay's false positives of the shown sample (stored-line indices, best first).
    const std::vector<int>& shownFalsePositives() const { return shownFps_; }
    // The stored line picked for inspection (a click on a line in the viewport; -1: the best FP).
    int pickedLine() const { return picked_; }

public Q_SLOTS:
    // Opens a results file on a worker; emits opened or failed (with the reader's message).
    void open(const QString& path);
    // Another results file of the same data to compare with (worker); "" = compare with
    // another row of this file (LETR: a layer or a baseline).
    void openCompare(const QString& path);
    void closeCompare();
    // Shows sample `sample` (file index) in the viewport with its overlay (worker; emits shown).
    void selectSample(int64_t sample);
    void setRow(int row);                 // LETR row (layer / baseline)
    void setThreshold(int index);         // index into the file's sAP thresholds
    void setMinScore(double score);       // LETR display score
    void setCompareRow(int row);
    // The chart picks (what a click does): filter the table.
    void pickSeries(int row);
    void pickCell(int trueClass, int predicted);
    void pickBin(int bin);
    void clearPick();
    // Points the file's sources at `folder` (reopened on a worker, then checked again).
    void relocateSources(const QString& folder);
    // Runs the family's inspector on the shown sample: LETR attention of the picked false
    // positive; CoaT Grad-CAM (trueClass: of the label, else of the prediction); few-shot:
    // the Episode tab (clusterMap: the cluster map of the first wrong query instead).
    void inspect(bool trueClass = false, bool clusterMap = false);
    void exportCsv(const QString& path);
    // Contact sheet of the selected samples (the table's selection; none: the first 24 visible).
    void exportContactSheet(const QString& path);
    // Selected samples (table selection order = table order).
    std::vector<int64_t> selectedSamples() const;

Q_SIGNALS:
    void opened(const QString& path);
    void failed(const QString& message);
    // open() refused the file (the reader's message names it and the problem).
    void openFailed(const QString& path, const QString& message);
    void message(const QString& text);
    void busyChanged(bool busy);
    void shown(qlonglong sample);
    void compareOpened(const QString& path);
    void countsReady();
    void exported(const QString& path);
    void exportFailed(const QString& path, const QString& message);
    // The main window shows `image` (and tells the model panels its source `key`).
    void showImageRequested(const QString& label, const widgets::RgbImage& image, const QString& key);
    // The dock wants to be shown and raised.
    void activateRequested();
    // The inspector asked for is running / has drawn (for tests and --screenshot).
    void inspected();

private:
    struct Shown;   // one sample's image(s) and scene(s), made on a worker
    void buildUi();
    QWidget* buildControls();
    void buildButtons(QVBoxLayout* column);
    void setFile(std::shared_ptr<const results::ResultsFile> f, const QString& sourcesMsg);
    void refillControls();
    void rebuildColumns();
    void startCounts();
    void refreshChart();
    void refreshThumbnails();
    void finishShow(int64_t sample, std::shared_ptr<Shown> s);
    void drawShown();
    void applyLetrInspect(int64_t sample);
    void inspectLetr();
    void inspectCoat(bool trueClass);
    void inspectFewShot(bool clusterMap);
    void updateButtons();
    void setBusy(int delta);
    int rowB() const;
    int64_t matchB(int64_t sample) const;   // the compare file's sample of the same data (-1)
    std::shared_ptr<Shown> makeShown(int64_t sample) const;   // worker

    MainWindow* window_;
    std::shared_ptr<const results::ResultsFile> file_, fileB_;
    std::vector<int64_t> bIndex_;           // sample -> compare file sample (-1)
    QString sourcesMsg_;
    int row_ = 0, threshold_ = 0, rowB_ = -1;
    float minScore_ = 0.5f;
    int64_t selected_ = -1, shown_ = -1;
    std::shared_ptr<Shown> shownData_;
    std::vector<int> shownFps_;
    int picked_ = -1;
    int pending_ = 0;
    int showGeneration_ = 0, countsGeneration_ = 0, countsRunning_ = 0;
    bool updating_ = false;
    bool comparePaneOurs_ = false;
    bool inspecting_ = false;
    // Counts at the display score (LETR): tp, fp, missed per sample for A and B.
    std::vector<double> tpA_, fpA_, missA_, tpB_, fpB_, missB_;

    ResultsTableModel* table_ = nullptr;
    ThumbnailModel* thumbs_ = nullptr;
    QLabel* title_ = nullptr;
    QLabel* status_ = nullptr;
    QLabel* problem_ = nullptr;
    QPushButton* locate_ = nullptr;
    QComboBox* rowBox_ = nullptr;
    QComboBox* thresholdBox_ = nullptr;
    QDoubleSpinBox* scoreBox_ = nullptr;
    QComboBox* compareRowBox_ = nullptr;
    QLabel* compareLabel_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QLabel* pickLabel_ = nullptr;
    QPushButton* clearPick_ = nullptr;
    QTableView* tableView_ = nullptr;
    QListView* thumbView_ = nullptr;
    SummaryChart* chart_ = nullptr;
    QLabel* sampleLabel_ = nullptr;
    QPushButton* inspect_ = nullptr;
    QPushButton* inspectTrue_ = nullptr;
    QPushButton* inspectClusters_ = nullptr;
    QPushButton* compareButton_ = nullptr;
    QPushButton* closeCompare_ = nullptr;
    QPushButton* csvButton_ = nullptr;
    QPushButton* sheetButton_ = nullptr;
    QWidget* letrControls_ = nullptr;
};

} // namespace glimpse::app
