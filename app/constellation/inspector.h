#pragma once
// ConstellationInspector: the ConstellationNet panel of the main window, a ModelPanel
// (app/panel.h: model, runs, trace cache, save/open, activation). It turns the current
// ConstellationTrace into viewport scenes through ConstellationView:
//   - View (cluster map / relation of the clicked cell), Module, and the base's Head, Colour
//     map and Opacity rows; hovering the image names the cell's top 3 clusters and their
//     similarities (panel label and viewport overlay); clicking a cell selects it and, in a
//     module with cell relation, shows its relation attention (a module without relation says
//     so in the panel);
//   - tabs: "Clusters" (the legend of the clusters in the map: swatch, id, cell count; and the
//     top-5 base classes), "Gallery" (the dataset patches closest to one cluster, from the novel
//     split of the Data spec, scanned on a worker with progress and Cancel; a legend click or the
//     Cluster box fills it) and "Episode" (EpisodeView: an N-way K-shot episode through the model).
// The shipped constellation_demo.h5 is offered on first use: when the panel is first shown
// without a model it is loaded (and a button offers it while no model is loaded).
#include <QString>
#include <QWidget>
#include <atomic>
#include <memory>
#include <string>

#include "app/constellation/episode_view.h"
#include "app/constellation/fewshot_data.h"
#include "app/constellation/view.h"
#include "app/panel.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;
class QTimer;

namespace glimpse::constellation {
class ConstellationModel;
}

namespace glimpse::app {

class DomainCheck;

// constellation_demo.h5 where resources are looked up (app/resources.h), or empty.
QString defaultConstellationCheckpoint();

class ConstellationInspector : public ModelPanel {
    Q_OBJECT
public:
    ConstellationInspector(widgets::ImageViewport* viewport, widgets::ImageViewport* compare,
                           QWidget* parent = nullptr);
    ~ConstellationInspector() override;

    bool busy() const override;
    std::shared_ptr<const glimpse::constellation::ConstellationTrace> trace() const;
    const ConstellationView* view() const { return view_.get(); }
    const ConstellationViewSettings& settings() const { return settings_; }
    // The hover text of the cell under shown-image point (x, y) ("" outside / without trace).
    QString hoverText(double x, double y) const;
    QString hoverLabelText() const;
    // The panel's message about the relation view ("" when it shows, or there is none to show).
    QString relationMessage() const;
    // The last failure as the panel shows it (red, under the model rows; "" after a success).
    QString problemText() const;
    // The gallery: the cluster it shows (-1: none yet) and whether a scan is running.
    int64_t galleryCluster() const { return galleryShown_; }
    bool galleryRunning() const { return galleryPending_ > 0; }
    std::string dataSpec() const;

    // Widgets (tests drive them).
    QComboBox* modeBox() const { return mode_; }
    QComboBox* moduleBox() const { return module_; }
    QListWidget* legendList() const { return legend_; }
    QTableWidget* top5Table() const { return table_; }
    QLineEdit* dataEdit() const { return data_; }
    QSpinBox* clusterBox() const { return cluster_; }
    QSpinBox* galleryScanBox() const { return scan_; }
    QSpinBox* galleryCountBox() const { return count_; }
    QListWidget* gallery() const { return gallery_; }
    QLabel* galleryStatus() const { return galleryStatus_; }
    QProgressBar* galleryProgress() const { return galleryProgress_; }
    QTabWidget* tabs() const { return tabs_; }
    EpisodeView* episodeView() const { return episode_; }
    QPushButton* shippedModelButton() const { return shipped_; }
    DomainCheck* domainCheck() const { return domain_; }

public Q_SLOTS:
    void setTrace(std::shared_ptr<const glimpse::constellation::ConstellationTrace> trace);
    void setMode(ConstellationMode mode);
    void setModule(int module);           // index into the trace's modules, -1 = last
    // Selects the cell under shown-image point (x, y) (a viewport click); in a module with
    // relation the view switches to the cell's relation attention.
    void selectPoint(double x, double y);
    void hoverAt(double x, double y);      // the cursor is over shown-image point (x, y); < 0: left
    // Fills the gallery with the patches closest to `cluster` (a worker scan of the novel split).
    void showGallery(int64_t cluster);
    void cancelGallery();
    void showEpisodeTab();
    void loadShippedModel();               // constellation_demo.h5, when installed

Q_SIGNALS:
    void galleryReady(qlonglong cluster);

protected:
    void showTrace(const Erased& trace, bool fromFile) override;
    void dropTrace() override;
    void drawScene() override;
    void enableControls(bool haveTrace) override;
    void heatmapStyleChanged() override;
    void modelChanged() override;
    void showEvent(QShowEvent* e) override;

private:
    void buildViewControls(QFormLayout* form);
    QWidget* buildClustersTab();
    QWidget* buildGalleryTab();
    void refillModules();
    void refillLegend();
    void refillTable();
    void updateRelationMessage();
    void finishGallery(int gen, int64_t cluster, const QString& error);
    EpisodeView::Source episodeSource() const;

    std::unique_ptr<ConstellationView> view_;
    ConstellationViewSettings settings_;
    widgets::ViewportScene scene_;   // the last drawn scene (hover rows are added to it)
    std::shared_ptr<FewShotDataCache> dataCache_ = std::make_shared<FewShotDataCache>();
    bool updating_ = false;
    bool offeredShipped_ = false;
    QString hoverText_;
    // Gallery scans: one at a time shown; a newer request cancels the older one.
    int galleryPending_ = 0;
    int galleryGeneration_ = 0;
    int64_t galleryShown_ = -1;
    std::shared_ptr<std::atomic<bool>> galleryCancel_;
    std::shared_ptr<std::atomic<int64_t>> galleryScanned_;
    int64_t galleryTotal_ = 0;
    QTimer* galleryTimer_ = nullptr;

    QComboBox* mode_ = nullptr;
    QComboBox* module_ = nullptr;
    QLabel* cell_ = nullptr;
    QLabel* hover_ = nullptr;
    QLabel* relationMsg_ = nullptr;
    QLabel* problem_ = nullptr;
    QLineEdit* data_ = nullptr;
    QPushButton* shipped_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QListWidget* legend_ = nullptr;
    QTableWidget* table_ = nullptr;
    QSpinBox* cluster_ = nullptr;
    QSpinBox* scan_ = nullptr;
    QSpinBox* count_ = nullptr;
    QPushButton* galleryButton_ = nullptr;
    QPushButton* galleryCancelButton_ = nullptr;
    QProgressBar* galleryProgress_ = nullptr;
    QLabel* galleryStatus_ = nullptr;
    QListWidget* gallery_ = nullptr;
    EpisodeView* episode_ = nullptr;
    DomainCheck* domain_ = nullptr;
};

} // namespace glimpse::app
