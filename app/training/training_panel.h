#pragma once
// The Training panel (a dock of the main window): trainer config, dataset and output
// directory; Start / Pause / Stop / Resume of the main window's TrainingJob; progress with
// ETA; live charts of every series of the run's RunLog (polled on a timer, new rows only) in
// a TrainingView (the main window shows it as a central tab; without one it sits in this
// panel); a preview of the latest model's predictions on a fixed validation image, computed
// on a worker thread; and any number of opened run logs overlaid on the same charts. While a
// run is followed, the form shows that run's own model, config, dataset and directory, read-only.
#include <QImage>
#include <QMap>
#include <QString>
#include <QWidget>
#include <memory>
#include <vector>

#include "app/training/run_follower.h"

class QComboBox;
class QFormLayout;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QThreadPool;
class QTimer;

namespace glimpse::widgets {
class ChartGrid;
struct ChartRows;
}

namespace glimpse::app {

class TrainingJob;
class TrainingView;

class TrainingPanel : public QWidget {
    Q_OBJECT
public:
    explicit TrainingPanel(TrainingJob* job, QWidget* parent = nullptr);
    ~TrainingPanel() override;

    // Follows a run log (live or finished). The first run is drawn solid, later ones overlay
    // it. Errors (not a run log, corrupt) return false with *error naming the file.
    bool openRun(const QString& path, QString* error = nullptr);
    void closeRuns();                 // forgets every run but the job's live one
    int runCount() const { return int(runs_.size()); }
    QString runPath(int i) const;
    QString runStatus(int i) const;
    QString runListText(int i) const;   // the run's line in the list (label, status, ranks, path)
    widgets::ChartGrid* charts() const { return charts_; }
    TrainingView* chartsView() const { return view_; }
    // Takes the charts out of this panel's layout (the main window puts them in a tab of their
    // own); the panel keeps driving them.
    TrainingView* detachChartsView();
    // Whether the form shows a followed run's fields (read-only) instead of the user's.
    bool fieldsFollowRun() const { return following_; }
    // Whether a long run log is still being read (on a worker; see startLoading).
    bool loading() const;
    // Runs opened with at least this many rows are read on worker threads (at most
    // kLoadWorkers, one per core).
    static constexpr int64_t kAsyncRows = 200000;
    static constexpr int kLoadWorkers = 4;
    // Workers for the next long logs (0: one per core; glimpse bench ui --chart-workers).
    void setLoadWorkers(int n) { loadWorkers_ = n; }
    QString dataSpec() const;
    QString outDir() const;
    QLabel* previewCaptionLabel() const { return previewCaption_; }
    QLabel* previewImageLabel() const { return previewLabel_; }
    QImage previewImage() const { return preview_; }
    QString previewCaption() const;
    QString previewBoxText() const;   // the box's text while it shows no image
    bool previewBusy() const { return previewBusy_; }   // a preview is being drawn (worker)

    // Form fields (also set by tests).
    void setConfigPath(const QString& p);
    QString configPath() const;   // starts as the small demo config when one is found
    void setDataSpec(const QString& s);
    void setOutDir(const QString& d);
    void setModel(const QString& m);   // "letr" or "coat" (TrainingSpec::model)
    QString model() const;
    QPushButton* startButton() const { return start_; }
    QPushButton* pauseButton() const { return pause_; }
    QPushButton* stopButton() const { return stop_; }
    QPushButton* resumeButton() const { return resume_; }
    QString progressText() const;
    int progressValue() const;

public Q_SLOTS:
    void pollNow();                   // one refresh of every followed run (the timer calls it)
    void refreshPreview();            // loads the run's latest model on a worker thread
    void startRun(bool resume);

Q_SIGNALS:
    void runsChanged();
    void polled(bool changed);        // after each poll
    void loadingFinished();           // every long log opened has been read
    void previewUpdated();
    void message(const QString& text);   // for the main window's Messages panel
    void errorOccurred(const QString& text);

private:
    struct Run;
    int nextRunIndex() const;
    QWidget* pathRow(QLineEdit*& edit, const QString& placeholder, bool dir);
    QFormLayout* buildForm();
    QHBoxLayout* buildButtons();
    QHBoxLayout* buildChartsAndPreview();
    // The form follows the first followed run (the job's while it runs): its model, config,
    // dataset and directory, read-only; with no run, the user's own values come back.
    void followFields();
    void setPreviewCaption(const QString& text);
    void connectJob();
    void followJobRun();
    void showFollowedProgress();   // progress / ETA of a followed run when no job is running
    void updateButtons();
    void rebuildRunList();
    // A run's new points into the charts; XTRA's per-game series go into one chart per quantity
    // ("task weights", ...), one line per game coloured by its category.
    void appendRunPoints(Run& r, QMap<QString, RunFollower::Rows>& rows);   // moves the rows on
    void clearRunCharts(Run& r);   // every line of the run, the per-game ones too
    // The chart and line key of a run's series (key < 0: not drawn, past kGamesPerRun games),
    // and the per-game line's label and colour once its chart exists.
    QPair<QString, int> seriesLine(Run& r, const QString& series);
    void styleGameLine(Run& r, const QString& chart, int key);
    // A long log (kAsyncRows rows or more) is read on a worker: the charts are laid out at once
    // and say they are being read; the worker reads the series in layout order (the charts on
    // screen first) and prepares each (widgets::ChartRows) before the UI thread takes it over;
    // the run is not polled meanwhile. Close runs cancels it.
    struct Load;
    void startLoading(Run& r);
    static QThreadPool& loadPool();
    void readSeriesInOrder(const std::shared_ptr<Load>& load, RunFollower& follower, const QStringList& names,
                           double smoothing);
    void seriesLoaded(const std::shared_ptr<Load>& load, const QString& series, widgets::ChartRows&& rows);
    void loadFinished(const std::shared_ptr<Load>& load, const QString& error);
    void cancelLoads(bool wait);

    TrainingJob* job_;
    QComboBox* model_ = nullptr;
    QLineEdit* config_ = nullptr;
    QLineEdit* data_ = nullptr;
    QLineEdit* outDir_ = nullptr;
    QPushButton* start_ = nullptr;
    QPushButton* pause_ = nullptr;
    QPushButton* stop_ = nullptr;
    QPushButton* resume_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* progressLabel_ = nullptr;
    QListWidget* runList_ = nullptr;
    widgets::ChartGrid* charts_ = nullptr;
    TrainingView* view_ = nullptr;
    QHBoxLayout* body_ = nullptr;
    int loadWorkers_ = 0;
    bool following_ = false;
    bool followingOpened_ = false;   // an opened run (not the job's) drives the form
    struct Fields {
        QString model, config, data, out;
    } userFields_;   // what the user had typed before the form followed a run
    QLabel* previewLabel_ = nullptr;
    QLabel* previewCaption_ = nullptr;
    QTimer* pollTimer_ = nullptr;
    QTimer* previewTimer_ = nullptr;
    std::vector<std::unique_ptr<Run>> runs_;
    QImage preview_;
    bool previewBusy_ = false;
    qint64 previewFirstTried_ = -1;   // mtime of the first model file tried before any preview
    QString previewDir() const;
};

} // namespace glimpse::app
