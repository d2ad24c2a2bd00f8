#pragma once
// EpisodeView: the ConstellationNet panel's "Episode" tab. Samples an N-way K-shot episode of
// one split of the panel's dataset (data::EpisodeSampler, seed 0, the chosen episode index),
// runs it through the loaded model on a worker (glimpse::constellation::runEpisode) and shows:
//   - per way: the class name and the prototype's top-3 clusters (colour swatches + ids and
//     similarities, from the last constellation module; none for a ProtoNet baseline);
//   - the support images (ways * shots tiles, way-major);
//   - the queries (ways * queries tiles), each framed green when the predicted way is its own
//     and red otherwise, captioned "true -> predicted" way;
//   - the episode accuracy.
// "New episode" moves to the next episode index and runs it; "Run" runs the current settings.
#include <QPixmap>
#include <QWidget>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/constellation/fewshot_data.h"
#include "core/models/constellation/fewshot.h"

class QComboBox;
class QLabel;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace glimpse::constellation {
class ConstellationModel;
}

namespace glimpse::app {

// A colour swatch (size x size) of cluster k, with a thin dark border.
QPixmap clusterSwatch(int64_t cluster, int size);

class EpisodeView : public QWidget {
    Q_OBJECT
public:
    // What an episode runs with, asked from the panel when one starts (UI thread).
    struct Source {
        std::shared_ptr<glimpse::constellation::ConstellationModel> model;   // null: no checkpoint yet
        std::shared_ptr<std::mutex> mutex;                          // the model's (one pass at a time)
        std::string dataSpec;
        std::shared_ptr<FewShotDataCache> data;
    };
    static constexpr uint64_t kSeed = 0;   // the sampler seed of every episode shown here

    explicit EpisodeView(std::function<Source()> source, QWidget* parent = nullptr);
    ~EpisodeView() override;

    bool busy() const { return pending_ > 0; }
    // The shown episode (null before the first one or after clear()).
    const glimpse::constellation::EpisodeResult* result() const { return result_.get(); }
    data::EpisodeSpec spec() const;
    int episodeIndex() const;
    QString split() const;   // "novel", "val" or "base"

    // Widgets (tests drive them).
    QSpinBox* waysBox() const { return ways_; }
    QSpinBox* shotsBox() const { return shots_; }
    QSpinBox* queriesBox() const { return queries_; }
    QSpinBox* episodeBox() const { return episode_; }
    QComboBox* splitBox() const { return split_; }
    QPushButton* newEpisodeButton() const { return newButton_; }
    QListWidget* supportList() const { return support_; }
    QListWidget* queryList() const { return query_; }
    QTableWidget* waysTable() const { return table_; }
    QLabel* statusLabel() const { return status_; }

public Q_SLOTS:
    void runEpisode();   // the current settings, on a worker
    void newEpisode();   // the next episode index, then run it
    void clear();        // forget the shown episode (e.g. another model); drops running ones

Q_SIGNALS:
    void episodeReady();
    void failed(const QString& message);
    void message(const QString& text);
    void busyChanged(bool busy);

private:
    void buildUi();
    void showResult(std::shared_ptr<const glimpse::constellation::EpisodeResult> r, const QString& what);
    void fillWays(const glimpse::constellation::EpisodeResult& r);
    void fillTiles(const glimpse::constellation::EpisodeResult& r);

    std::function<Source()> source_;
    std::shared_ptr<const glimpse::constellation::EpisodeResult> result_;
    int pending_ = 0;
    int generation_ = 0;

    QComboBox* split_ = nullptr;
    QSpinBox* ways_ = nullptr;
    QSpinBox* shots_ = nullptr;
    QSpinBox* queries_ = nullptr;
    QSpinBox* episode_ = nullptr;
    QPushButton* runButton_ = nullptr;
    QPushButton* newButton_ = nullptr;
    QLabel* status_ = nullptr;
    QTableWidget* table_ = nullptr;
    QListWidget* support_ = nullptr;
    QListWidget* query_ = nullptr;
};

} // namespace glimpse::app
