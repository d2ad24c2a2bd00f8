#pragma once
// The model-family registry: one descriptor per family (LETR, CoaT, EfficientZero, ...) says
// everything the application needs to offer it: its name (the `family` in its checkpoints and
// traces), its inspector panel, its trainer for the Training panel, its defaults and its
// headless commands. MainWindow, the Training panel, file opening and the command table are
// driven by modelFamilies(); adding a family = its own folder (app/<family>/, core/models/<family>/)
// plus one line in app/families.cpp. docs/architecture.md has the recipe.
#include <QImage>
#include <QKeySequence>
#include <QString>
#include <QStringList>
#include <functional>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/training/training_job.h"

class QWidget;

namespace glimpse::widgets {
class ImageViewport;
}

namespace glimpse::app {

class ModelPanel;


// The Training panel's preview of a run: the run's latest model on fixed inputs.
struct TrainingPreview {
    QImage image;
    QString caption;
};
// Makes the preview from the run directory (its checkpoint or model file) and the run's dataset
// spec; runs on a worker thread; throws glimpse::Error when there is nothing to show yet.
using PreviewFn = std::function<TrainingPreview(const std::string& runDir, const std::string& dataSpec)>;

struct TrainingDefaults {
    QString title;          // the Training panel's model list ("LETR (line segments)")
    QString config;         // resource file of the default trainer config ("" = built-in defaults)
    QString data;           // the default dataset spec
    QString dataHint;       // the dataset field's tool tip
    QString runLogName = "run.h5";
    PreviewFn preview;      // null: no preview (the panel says so)
    // The Training view's charts of this family's run logs: which series are its losses, its
    // validation metrics and its task charts, most important first ("prefix*" matches a
    // prefix). Every other series is an optimizer / system chart (chartPlacement).
    QStringList losses, metrics, tasks;
};

// Where the Training view puts a series' chart. The groups come in the same order for every
// family: losses, validation metrics, task weights (XTRA), optimizer and system (lr,
// throughput, memory, ...); `rank` orders the charts of a group (then their names do).
struct ChartPlacement {
    int group = 0;
    QString groupTitle;
    int rank = 0;
};
// The family's own lists decide first, then the other families' (runs of several families
// overlaid); "" or an unknown family: every family's lists.
ChartPlacement chartPlacement(const std::string& family, const QString& series);

struct ModelFamily {
    std::string name;       // "letr": the `family` of its checkpoints and traces, and its CLI subject
    QString title;          // "LETR"
    // Inspector panel (null: the family has none); `compare` may be null.
    std::function<ModelPanel*(widgets::ImageViewport* viewport, widgets::ImageViewport* compare, QWidget* parent)>
        makePanel;
    QKeySequence runShortcut;        // Model > Run <title>
    QString defaultCheckpoint;       // resource file the panel loads on its first use ("" = none)
    // Trainer for the Training panel (null: not trainable from the GUI) and its defaults.
    TrainingJob::Runner trainer;
    TrainingDefaults training;
    std::vector<Command> commands;
};

// The panel factory of a family whose panel class is `Panel`.
template <class Panel>
std::function<ModelPanel*(widgets::ImageViewport*, widgets::ImageViewport*, QWidget*)> panelFactory() {
    return [](widgets::ImageViewport* v, widgets::ImageViewport* c, QWidget* parent) -> ModelPanel* {
        return new Panel(v, c, parent);
    };
}

// Every family, in menu order.
const std::vector<ModelFamily>& modelFamilies();
// The family named `name`, or null.
const ModelFamily* findFamily(const std::string& name);
// The installed default checkpoint of a family (its defaultCheckpoint resource), or empty.
QString defaultCheckpoint(const std::string& family);
// The runner the main window's TrainingJob uses: the trainer of the family named by
// TrainingSpec::model (an Error for a family without one).
TrainingJob::Runner modelRunner();

} // namespace glimpse::app
