#pragma once
// The replay viewer (issue 17): a recorded episode (glimpse.episode) in the main viewport with
// a timeline (first / previous / play-pause at 0.25x-8x / next / last, scrub, and labelled
// jumps to rewards and life losses), strip charts synchronized with a cursor (reward, return
// and the recorded model outputs), the step's action, policy and visit bars and root-children
// table, CSV and video export, and with an EfficientZero checkpoint (loaded on open when the
// episode records one that fits): the network's predictions at a step, an imagined K-step rollout
// against what happened, and a value saliency heatmap (app/replay/replay_model.h).
//
// Frames: EpisodeReader::cachedFrame(t) on the UI thread, else frame(t) on a worker (one read
// at a time; requests made meanwhile are coalesced to the latest); playback prefetches ahead
// on a worker. The panel hands frames to the main window (frameReady), which shows them like
// any image, pixel for pixel (the renderer samples nearest-neighbour once zoomed in 2x).
#include <QString>
#include <QWidget>

#include <array>
#include <atomic>
#include <map>
#include <memory>

#include "widgets/viewport.h"

class QComboBox;
class QElapsedTimer;
class QLabel;
class QProgressBar;
class QPushButton;
class QScrollArea;
class QSlider;
class QSpinBox;
class QTableWidget;
class QTimer;
class QToolButton;
class QVBoxLayout;

namespace glimpse::replay {
class EpisodeReader;
struct Frame;
}
namespace glimpse::widgets {
class StripChart;
class BarChart;
}

namespace glimpse::app {

class ReplayModelView;

class ReplayPanel : public QWidget {
    Q_OBJECT
public:
    explicit ReplayPanel(widgets::ImageViewport* viewport, QWidget* parent = nullptr);
    ~ReplayPanel() override;

    bool hasEpisode() const { return bool(reader_); }
    QString episodePath() const { return path_; }
    std::shared_ptr<replay::EpisodeReader> reader() const { return reader_; }
    int length() const;
    int step() const { return current_; }      // the step asked for (slider, charts, table)
    int shownStep() const { return shown_; }   // the step whose frame the viewport shows
    bool playing() const;
    double speed() const { return speed_; }
    double stepsPerSecond() const;             // at 1x
    bool busy() const;   // opening, reading a frame, exporting or running the network
    bool exporting() const { return exporting_; }
    // Whether the viewport shows this episode now (another image may have been opened since).
    bool displayed() const { return displayed_; }
    // The source key of step t's frame ("<absolute path>#t").
    QString frameKey(int t) const;
    // The integer upscaling of video exports (frames of 160 x 210 -> 2).
    int exportScale() const;
    ReplayModelView* modelView() const { return model_; }
    // Widgets, for tests.
    widgets::StripChart* chart(const QString& title) const;
    widgets::BarChart* bars() const { return bars_; }
    QTableWidget* childrenTable() const { return children_; }
    QSlider* slider() const { return slider_; }
    QString stepText() const;
    QString headerText() const;   // the episode's summary above the timeline

public Q_SLOTS:
    // Opens on a worker thread; emits episodeOpened (then shows step 0) or openFailed. The
    // episode already open stays open when opening fails.
    void openEpisode(const QString& path);
    void seek(int t);
    void stepBy(int delta);
    void setPlaying(bool on);
    void togglePlaying() { setPlaying(!playing()); }
    void setSpeed(double speed);   // 0.25 .. 8
    void seekFirst();   // |< (Home)
    void seekLast();    // >| (End)
    void nextReward();
    void previousReward();
    void nextLifeLoss();
    void previousLifeLoss();
    // Writes the per-step table (worker thread, atomic); emits exported or exportFailed.
    void exportCsv(const QString& path);
    // Writes steps first..last as an MJPG .avi (worker thread, cancellable, with progress).
    void exportVideo(const QString& path, int first, int last);
    void cancelExport();
    // The main window shows the source `key` now (any image, video frame or episode frame).
    void sourceChanged(const QString& key);
    // Draws the step's scene (overlay rows, saliency heatmap) over the shown frame.
    void redraw();
    // Scrolls the panel so that the strip chart `title` is in view (when it is shown).
    void revealChart(const QString& title);

Q_SIGNALS:
    void episodeOpened(const QString& path, int steps);
    void openFailed(const QString& path, const QString& message);
    // Show `image` for source `key` in the viewport (keepView: same view as the last frame).
    void frameReady(const QString& label, const widgets::RgbImage& image, const QString& key, bool keepView);
    void frameShown(int step);
    void exported(const QString& path);
    void exportFailed(const QString& path, const QString& message);
    void exportCancelled(const QString& path);
    void exportProgress(int done, int total);
    void failed(const QString& message);
    void message(const QString& text);
    void busyChanged(bool busy);
    void activateRequested();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void buildTimeline(QVBoxLayout* column);
    void buildCharts(QVBoxLayout* column);
    void buildStepView(QVBoxLayout* column);
    void buildExport(QVBoxLayout* column);
    void installKeys();
    void adopt(std::shared_ptr<replay::EpisodeReader> reader, const QString& path);
    void fillCharts();
    void updateStepWidgets();
    void updateStepBars(int t);
    void requestFrame(int t);
    void present(int t, const std::shared_ptr<const replay::Frame>& frame);
    void prefetchAhead(int t);
    void tick();
    void jumpTo(long long t, const QString& what);
    void setExporting(bool on);
    void chooseVideoExport();

    widgets::ImageViewport* viewport_;
    std::shared_ptr<replay::EpisodeReader> reader_;
    QString path_;
    int current_ = -1, shown_ = -1;
    bool keepView_ = false;
    bool displayed_ = false;
    int opening_ = 0;
    bool loading_ = false;
    int wanted_ = -1;
    bool prefetching_ = false;
    std::shared_ptr<std::atomic<bool>> prefetchCancel_;
    double speed_ = 1.0;
    int playFrom_ = 0;
    QTimer* playTimer_ = nullptr;
    std::unique_ptr<QElapsedTimer> clock_;
    bool exporting_ = false;
    std::shared_ptr<std::atomic<bool>> exportCancel_;

    QScrollArea* scroll_ = nullptr;
    QLabel* header_ = nullptr;
    QToolButton* playButton_ = nullptr;
    std::array<QToolButton*, 4> transport_{};   // |<  <  >  >|
    QToolButton* jumpPrevReward_ = nullptr;
    QToolButton* jumpNextReward_ = nullptr;
    QToolButton* jumpPrevLife_ = nullptr;
    QToolButton* jumpNextLife_ = nullptr;
    QComboBox* speedBox_ = nullptr;
    QSlider* slider_ = nullptr;
    QLabel* stepLabel_ = nullptr;
    std::map<QString, widgets::StripChart*> charts_;
    QLabel* actionLabel_ = nullptr;
    widgets::BarChart* bars_ = nullptr;
    QTableWidget* children_ = nullptr;
    QSpinBox* exportFirst_ = nullptr;
    QSpinBox* exportLast_ = nullptr;
    QProgressBar* exportProgress_ = nullptr;
    QPushButton* exportCancelButton_ = nullptr;
    QPushButton* csvButton_ = nullptr;
    QPushButton* videoButton_ = nullptr;
    ReplayModelView* model_ = nullptr;
};

} // namespace glimpse::app
