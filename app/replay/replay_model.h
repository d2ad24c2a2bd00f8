#pragma once
// The replay viewer's model section: an EfficientZero checkpoint (the one recorded in the
// episode, loaded on open when it exists and fits the game, or one the user picks) applied to
// the open episode (core/replay/model_view.h):
//   - the network's predictions at the current step, recomputed on a worker thread;
//   - "Imagine K": K steps ahead from the current step with the recorded actions, predicted
//     reward and value against what happened (the reward and the discounted return), charted;
//   - a value saliency heatmap over the frame, drawn with the viewport's heatmap layer in a
//     colour map chosen here, with its colour scale and range (also an overlay row);
//   - "World model": the imagined rollouts of depth K from every step of the episode against
//     what happened (core/replay/world_model_check.h), per depth the mean absolute error of
//     reward and value for the loaded network and for an untrained one, as a table.
// One job at a time on a worker (the network is not shared between threads); Cancel drops
// the running job's result at once (imagine and saliency also stop between network calls).
// Requests made while a job runs wait for it, the latest of each kind wins.
#include <QGroupBox>
#include <QString>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/replay/world_model_check.h"
#include "widgets/viewport.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSlider;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace glimpse::efficientzero {
class Network;
}
namespace glimpse::widgets {
class ColourScale;
class StripChart;
}

namespace glimpse::app {

class ReplayPanel;

class ReplayModelView : public QGroupBox {
    Q_OBJECT
public:
    enum class Job { None, Load, Predict, Imagine, Saliency, WorldModel };
    ReplayModelView(ReplayPanel* panel, QWidget* parent = nullptr);
    ~ReplayModelView() override;

    bool hasNetwork() const { return bool(net_); }
    QString checkpoint() const { return checkpoint_; }
    bool busy() const { return running_ != Job::None; }
    Job runningJob() const { return running_; }
    QString predictionText() const;
    int predictedStep() const { return predictedStep_; }
    // The last imagined rollout: its start step and series (empty before one ran).
    int imaginedFrom() const { return imaginedFrom_; }
    const std::vector<float>& imaginedPredictedReward() const { return imPredReward_; }
    const std::vector<float>& imaginedActualReward() const { return imActualReward_; }
    const std::vector<float>& imaginedPredictedValue() const { return imPredValue_; }
    const std::vector<float>& imaginedActualReturn() const { return imActualReturn_; }
    // The last world-model check of the open episode (hasWorldModelCheck() once one finished): the loaded
    // network's and an untrained one's per-depth errors, and the table showing them.
    bool hasWorldModelCheck() const { return !wmTrained_.depths.empty(); }
    const replay::WorldModelCheck& worldModelTrained() const { return wmTrained_; }
    const replay::WorldModelCheck& worldModelUntrained() const { return wmUntrained_; }
    QTableWidget* worldModelTable() const { return wmTable_; }
    widgets::StripChart* rewardChart() const { return rewardChart_; }
    widgets::StripChart* valueChart() const { return valueChart_; }
    bool saliencyOn() const;
    bool hasSaliency(int step) const { return saliency_.count(step) > 0; }
    // The saliency heatmap's style (colour map and opacity, as in the model panels) and the
    // colour scale under the checkbox: the colour map with the shown step's range.
    render::Colormap saliencyColormap() const { return colormap_; }
    void setSaliencyColormap(render::Colormap c);
    void setSaliencyOpacity(double opacity);
    widgets::ColourScale* saliencyScale() const { return scale_; }
    // The range a step's saliency is drawn over: 0 .. the 99th percentile of its values (a few
    // extreme pixels would otherwise leave the rest at the bottom colour), and its maximum.
    std::pair<float, float> saliencyRange(int step) const;
    float saliencyMax(int step) const;
    // The model section's first line ("No network loaded.", the network, or why the episode's
    // recorded checkpoint was not loaded).
    QString modelText() const;

    // From the panel: a new episode (the network stays if it fits, else it is dropped), a new step.
    void episodeChanged();
    void stepChanged(int step);
    // Adds the saliency heatmap of `step` (when shown and computed) to the viewport scene.
    void decorate(widgets::ViewportScene& scene, int step) const;
    // The saliency scenes of the steps first..last computed so far (for video export).
    std::map<int64_t, widgets::ViewportScene> exportScenes(int first, int last) const;

public Q_SLOTS:
    void chooseCheckpoint();
    // Loads `path` ("" = the checkpoint recorded in the episode) on a worker thread.
    void loadCheckpoint(const QString& path = QString());
    void predict();
    void imagine(int k);
    void setSaliency(bool on);
    // Checks the world model over the whole episode (depth = the K box) on a worker thread.
    void checkWorldModel();
    // The discount of the imagined returns and the world-model check (the run's, e.g. 0.97).
    void setDiscount(double discount);
    void cancel();

Q_SIGNALS:
    void networkLoaded(const QString& checkpoint);
    void predicted(int step);
    void imagined(int from, int k);
    void saliencyReady(int step);
    void worldModelChecked();
    void cancelled();
    void failed(const QString& message);
    void busyChanged(bool busy);

private:
    struct Request {
        Job job = Job::None;
        int step = -1;
        int k = 0;
        QString path;
        bool automatic = false;   // loaded on opening an episode: failures noted in the section, not errors
    };
    struct Saliency {
        std::vector<float> values;   // H*W
        float top = 0, max = 0;      // drawn over 0..top; the largest value
    };
    void submit(Request r);
    void start(const Request& r);
    void finished(const Request& r, const QString& error);
    void runLoad(const Request& r, int gen);
    void runPredict(const Request& r, int gen);
    void runImagine(const Request& r, int gen);
    void runSaliency(const Request& r, int gen);
    void runWorldModel(const Request& r, int gen);
    void showWorldModel();
    void showImagined(int from);
    void updateControls();
    void updateScale();
    // The episode's recorded checkpoint as a file that exists (relative paths are looked for
    // beside the episode too), or "" when it records none or the file is missing.
    QString recordedCheckpointFile() const;

    ReplayPanel* panel_;
    std::shared_ptr<efficientzero::Network> net_;
    std::shared_ptr<std::mutex> netMutex_ = std::make_shared<std::mutex>();
    QString checkpoint_;
    QString note_;   // why the episode's recorded checkpoint was not loaded ("" when it was, or none)
    Job running_ = Job::None;
    int generation_ = 0;
    std::shared_ptr<std::atomic<bool>> cancel_;
    std::vector<Request> queue_;
    // Results.
    int predictedStep_ = -1;
    float predValue_ = 0, predPrefix_ = 0;
    std::vector<float> predPolicy_;
    int imaginedFrom_ = -1;
    std::vector<float> imPredReward_, imActualReward_, imPredValue_, imActualReturn_;
    std::map<int, Saliency> saliency_;   // step -> values and range
    replay::WorldModelCheck wmTrained_, wmUntrained_;
    render::Colormap colormap_ = render::Colormap::Viridis;
    float opacity_ = 0.6f;
    std::vector<int> saliencyOrder_;

    QLabel* modelLabel_ = nullptr;
    QPushButton* checkpointButton_ = nullptr;
    QPushButton* recordedButton_ = nullptr;
    QPushButton* predictButton_ = nullptr;
    QCheckBox* followBox_ = nullptr;
    QLabel* predictionLabel_ = nullptr;
    QSpinBox* kBox_ = nullptr;
    QDoubleSpinBox* discountBox_ = nullptr;
    QPushButton* imagineButton_ = nullptr;
    QCheckBox* saliencyBox_ = nullptr;
    QComboBox* colormapBox_ = nullptr;
    QSlider* opacitySlider_ = nullptr;
    widgets::ColourScale* scale_ = nullptr;
    QPushButton* cancelButton_ = nullptr;
    QPushButton* worldModelButton_ = nullptr;
    QLabel* wmLabel_ = nullptr;
    QTableWidget* wmTable_ = nullptr;
    QLabel* statusLabel_ = nullptr;
    widgets::StripChart* rewardChart_ = nullptr;
    widgets::StripChart* valueChart_ = nullptr;
};

} // namespace glimpse::app
