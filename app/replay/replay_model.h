#pragma once
// The replay viewer's model section: an EfficientZero checkpoint (the one recorded in the
// episode, or one the user picks) applied to the open episode (core/replay/model_view.h):
//   - the network's predictions at the current step, recomputed on a worker thread;
//   - "Imagine K": K steps ahead from the current step with the recorded actions, predicted
//     reward and value against what happened (the reward and the discounted return), charted;
//   - a value saliency heatmap over the frame, drawn with the viewport's heatmap layer.
// One job at a time on a worker (the network is not shared between threads); Cancel drops
// the running job's result at once (imagine and saliency also stop between network calls).
// Requests made while a job runs wait for it, the latest of each kind wins.
#include <QGroupBox>
#include <QString>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "widgets/viewport.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace glimpse::efficientzero {
class Network;
}
namespace glimpse::widgets {
class StripChart;
}

namespace glimpse::app {

class ReplayPanel;

class ReplayModelView : public QGroupBox {
    Q_OBJECT
public:
    enum class Job { None, Load, Predict, Imagine, Saliency };
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
    widgets::StripChart* rewardChart() const { return rewardChart_; }
    widgets::StripChart* valueChart() const { return valueChart_; }
    bool saliencyOn() const;
    bool hasSaliency(int step) const { return saliency_.count(step) > 0; }

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
    void cancel();

Q_SIGNALS:
    void networkLoaded(const QString& checkpoint);
    void predicted(int step);
    void imagined(int from, int k);
    void saliencyReady(int step);
    void cancelled();
    void failed(const QString& message);
    void busyChanged(bool busy);

private:
    struct Request {
        Job job = Job::None;
        int step = -1;
        int k = 0;
        QString path;
    };
    void submit(Request r);
    void start(const Request& r);
    void finished(const Request& r, const QString& error);
    void runLoad(const Request& r, int gen);
    void runPredict(const Request& r, int gen);
    void runImagine(const Request& r, int gen);
    void runSaliency(const Request& r, int gen);
    void showImagined(int from);
    void updateControls();

    ReplayPanel* panel_;
    std::shared_ptr<efficientzero::Network> net_;
    std::shared_ptr<std::mutex> netMutex_ = std::make_shared<std::mutex>();
    QString checkpoint_;
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
    std::map<int, std::vector<float>> saliency_;   // step -> H*W values
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
    QPushButton* cancelButton_ = nullptr;
    QLabel* statusLabel_ = nullptr;
    widgets::StripChart* rewardChart_ = nullptr;
    widgets::StripChart* valueChart_ = nullptr;
};

} // namespace glimpse::app
