#include "app/replay/replay_model.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QHeaderView>
#include <QScrollBar>
#include <QTableWidget>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "app/async.h"
#include "app/replay/replay_panel.h"
#include "core/models/efficientzero/model.h"
#include "core/replay/episode_reader.h"
#include "core/replay/model_view.h"
#include "renderer/colormap.h"
#include "widgets/strip_chart.h"

namespace glimpse::app {

namespace {

constexpr size_t kSaliencyKept = 64;

QVector<double> toVector(const std::vector<float>& v, size_t size) {
    QVector<double> out(int(size), std::nan(""));
    for (size_t i = 0; i < std::min(size, v.size()); ++i) out[int(i)] = v[i];
    return out;
}

const char* jobName(ReplayModelView::Job j) {
    switch (j) {
    case ReplayModelView::Job::Load: return "loading the checkpoint";
    case ReplayModelView::Job::Predict: return "predicting";
    case ReplayModelView::Job::Imagine: return "imagining";
    case ReplayModelView::Job::Saliency: return "computing saliency";
    case ReplayModelView::Job::WorldModel: return "checking the world model";
    default: return "";
    }
}

} // namespace

ReplayModelView::ReplayModelView(ReplayPanel* panel, QWidget* parent) : QGroupBox("Model", parent), panel_(panel) {
    auto* form = new QFormLayout(this);
    modelLabel_ = new QLabel("No network loaded.", this);
    modelLabel_->setWordWrap(true);
    form->addRow(modelLabel_);
    auto* ckRow = new QHBoxLayout;
    recordedButton_ = new QPushButton("Recorded", this);
    recordedButton_->setToolTip("Load the checkpoint recorded in the episode (looked for beside the episode too)");
    checkpointButton_ = new QPushButton("Checkpoint...", this);
    checkpointButton_->setToolTip("Load another EfficientZero checkpoint for this game");
    ckRow->addWidget(recordedButton_);
    ckRow->addWidget(checkpointButton_);
    form->addRow(ckRow);
    auto* predictRow = new QHBoxLayout;
    predictButton_ = new QPushButton("Predict step", this);
    predictButton_->setToolTip("Run the network on the current step's observation (worker thread)");
    followBox_ = new QCheckBox("on every step", this);
    followBox_->setToolTip("Predict again whenever the step changes");
    predictRow->addWidget(predictButton_);
    predictRow->addWidget(followBox_);
    form->addRow(predictRow);
    predictionLabel_ = new QLabel(this);
    predictionLabel_->setWordWrap(true);
    form->addRow(predictionLabel_);
    auto* imagineRow = new QHBoxLayout;
    kBox_ = new QSpinBox(this);
    kBox_->setRange(1, 50);
    kBox_->setValue(5);
    kBox_->setPrefix("K = ");
    discountBox_ = new QDoubleSpinBox(this);
    discountBox_->setRange(0.5, 1.0);
    discountBox_->setDecimals(3);
    discountBox_->setSingleStep(0.001);
    discountBox_->setValue(0.997);
    discountBox_->setPrefix("discount ");
    imagineButton_ = new QPushButton("Imagine", this);
    imagineButton_->setToolTip("Roll the model K steps ahead from this step with the recorded actions and "
                               "compare its rewards and values with what happened");
    imagineRow->addWidget(kBox_);
    imagineRow->addWidget(imagineButton_);
    form->addRow(imagineRow);
    form->addRow(discountBox_);
    rewardChart_ = new widgets::StripChart("imagined reward", this);
    valueChart_ = new widgets::StripChart("imagined value", this);
    form->addRow(rewardChart_);
    form->addRow(valueChart_);
    rewardChart_->hide();
    valueChart_->hide();
    // The world model against the whole episode: per depth, the mean absolute error of the
    // imagined reward and value, the loaded network beside an untrained one.
    worldModelButton_ = new QPushButton("World model vs game", this);
    worldModelButton_->setToolTip("Imagine K steps (the K box) from every step of the episode with the recorded actions; "
                                  "per depth, the mean absolute error of the predicted reward and value against what "
                                  "happened, for this network and for an untrained one (worker thread)");
    form->addRow(worldModelButton_);
    wmLabel_ = new QLabel(this);
    wmLabel_->setWordWrap(true);
    form->addRow(wmLabel_);
    wmTable_ = new QTableWidget(this);
    wmTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    wmTable_->verticalHeader()->hide();
    wmTable_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    wmTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    form->addRow(wmTable_);
    wmLabel_->hide();
    wmTable_->hide();
    auto* bottom = new QHBoxLayout;
    saliencyBox_ = new QCheckBox("Saliency heatmap", this);
    saliencyBox_->setToolTip("|d value / d observation| over the frame, for the shown step");
    cancelButton_ = new QPushButton("Cancel", this);
    bottom->addWidget(saliencyBox_);
    bottom->addStretch(1);
    bottom->addWidget(cancelButton_);
    form->addRow(bottom);
    // The saliency heatmap's style, as in the model panels, and its colour scale.
    colormapBox_ = new QComboBox(this);
    for (int c = 0; c < render::kColormapCount; ++c) colormapBox_->addItem(render::colormapName(render::Colormap(c)));
    colormapBox_->setCurrentIndex(int(colormap_));
    form->addRow("Colour map", colormapBox_);
    opacitySlider_ = new QSlider(Qt::Horizontal, this);
    opacitySlider_->setRange(0, 100);
    opacitySlider_->setValue(int(std::lround(opacity_ * 100)));
    form->addRow("Opacity", opacitySlider_);
    scale_ = new widgets::ColourScale(this);
    scale_->setToolTip("The saliency heatmap's colours: 0 .. the 99th percentile of the step's values "
                       "(higher values take the top colour)");
    form->addRow(scale_);
    scale_->hide();
    connect(colormapBox_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0) setSaliencyColormap(render::Colormap(i));
    });
    connect(opacitySlider_, &QSlider::valueChanged, this, [this](int v) { setSaliencyOpacity(v / 100.0); });
    statusLabel_ = new QLabel(this);
    form->addRow(statusLabel_);
    connect(recordedButton_, &QPushButton::clicked, this, [this] { loadCheckpoint(); });
    connect(checkpointButton_, &QPushButton::clicked, this, &ReplayModelView::chooseCheckpoint);
    connect(predictButton_, &QPushButton::clicked, this, &ReplayModelView::predict);
    connect(followBox_, &QCheckBox::toggled, this, [this](bool on) {
        if (on && net_) predict();
    });
    connect(imagineButton_, &QPushButton::clicked, this, [this] { imagine(kBox_->value()); });
    connect(worldModelButton_, &QPushButton::clicked, this, &ReplayModelView::checkWorldModel);
    connect(saliencyBox_, &QCheckBox::toggled, this, &ReplayModelView::setSaliency);
    connect(cancelButton_, &QPushButton::clicked, this, &ReplayModelView::cancel);
    // Clicking the imagined charts goes to that step of the episode.
    for (auto* c : {rewardChart_, valueChart_})
        connect(c, &widgets::StripChart::stepClicked, this, [this](int k) {
            if (imaginedFrom_ >= 0) panel_->seek(imaginedFrom_ + k);
        });
    updateControls();
}

ReplayModelView::~ReplayModelView() {
    if (cancel_) cancel_->store(true);
}

bool ReplayModelView::saliencyOn() const { return saliencyBox_->isChecked(); }

void ReplayModelView::updateControls() {
    const bool episode = panel_->hasEpisode();
    const bool idle = running_ == Job::None;
    const bool recorded = episode && panel_->reader()->hasModel() && !panel_->reader()->meta().model.checkpoint.empty();
    recordedButton_->setEnabled(recorded && idle);
    checkpointButton_->setEnabled(episode && idle);
    for (QWidget* w : std::initializer_list<QWidget*>{predictButton_, imagineButton_, followBox_, saliencyBox_, kBox_,
                                                      discountBox_, worldModelButton_})
        w->setEnabled(episode && bool(net_));
    colormapBox_->setEnabled(saliencyOn());
    opacitySlider_->setEnabled(saliencyOn());
    cancelButton_->setEnabled(!idle);
    statusLabel_->setText(idle ? QString() : QStringLiteral("Busy: %1 ...").arg(jobName(running_)));
}

void ReplayModelView::episodeChanged() {
    // Results belong to the previous episode; a network loaded for it is kept only when it
    // still fits (reloaded through the same checks), else the user loads one again.
    cancel();
    predictedStep_ = imaginedFrom_ = -1;
    predictionLabel_->clear();
    saliency_.clear();
    saliencyOrder_.clear();
    rewardChart_->hide();
    valueChart_->hide();
    wmTrained_ = {};
    wmUntrained_ = {};
    wmLabel_->hide();
    wmTable_->hide();
    const QString keep = checkpoint_;
    net_.reset();
    checkpoint_.clear();
    modelLabel_->setText("No network loaded.");
    updateScale();
    // The episode's own network first (issue 56 item 9): loaded on open when its file exists and
    // fits the game; else the network already loaded, when it fits.
    const auto& reader = *panel_->reader();
    const QString recorded = QString::fromStdString(reader.hasModel() ? reader.meta().model.checkpoint : "");
    const QString file = recordedCheckpointFile();
    note_.clear();
    if (!file.isEmpty()) {
        modelLabel_->setText(QStringLiteral("Loading the recorded network %1 ...").arg(QFileInfo(recorded).fileName()));
        submit({Job::Load, -1, 0, QString(), true});
    } else {
        if (!recorded.isEmpty()) {
            note_ = QStringLiteral("The recorded checkpoint %1 was not found (looked beside the episode too).")
                        .arg(recorded.toHtmlEscaped());
            modelLabel_->setText("No network loaded. " + note_ + " Choose one with Checkpoint...");
        }
        if (!keep.isEmpty()) submit({Job::Load, -1, 0, keep, true});
    }
    updateControls();
}

QString ReplayModelView::recordedCheckpointFile() const {
    if (!panel_->hasEpisode()) return {};
    const auto& reader = *panel_->reader();
    if (!reader.hasModel() || reader.meta().model.checkpoint.empty()) return {};
    const QString given = QString::fromStdString(reader.meta().model.checkpoint);
    const QFileInfo direct(given);
    if (direct.isFile()) return direct.absoluteFilePath();
    if (direct.isAbsolute()) return {};
    const QFileInfo beside(QFileInfo(panel_->episodePath()).dir(), given);
    return beside.isFile() ? beside.absoluteFilePath() : QString();
}

QString ReplayModelView::modelText() const { return modelLabel_->text(); }

void ReplayModelView::stepChanged(int step) {
    updateScale();
    if (!net_ || step < 0) return;
    if (followBox_->isChecked()) submit({Job::Predict, step});
    if (saliencyOn() && !hasSaliency(step)) submit({Job::Saliency, step});
}

void ReplayModelView::chooseCheckpoint() {
    const QString p = QFileDialog::getOpenFileName(this, "EfficientZero checkpoint", QFileInfo(panel_->episodePath()).path(),
                                                   "Glimpse checkpoints (*.h5);;All files (*)");
    if (!p.isEmpty()) loadCheckpoint(p);
}

void ReplayModelView::loadCheckpoint(const QString& path) { submit({Job::Load, -1, 0, path}); }
void ReplayModelView::predict() { submit({Job::Predict, panel_->step()}); }
void ReplayModelView::imagine(int k) { submit({Job::Imagine, panel_->step(), k}); }
void ReplayModelView::setDiscount(double discount) { discountBox_->setValue(discount); }
void ReplayModelView::checkWorldModel() { submit({Job::WorldModel, -1, kBox_->value()}); }

void ReplayModelView::setSaliency(bool on) {
    if (saliencyBox_->isChecked() != on) {
        const QSignalBlocker b(saliencyBox_);
        saliencyBox_->setChecked(on);
    }
    if (on && net_ && panel_->step() >= 0 && !hasSaliency(panel_->step())) submit({Job::Saliency, panel_->step()});
    updateControls();
    updateScale();
    panel_->redraw();
}

void ReplayModelView::setSaliencyColormap(render::Colormap c) {
    colormap_ = c;
    if (colormapBox_->currentIndex() != int(c)) {
        const QSignalBlocker b(colormapBox_);
        colormapBox_->setCurrentIndex(int(c));
    }
    updateScale();
    panel_->redraw();
}

void ReplayModelView::setSaliencyOpacity(double opacity) {
    opacity_ = float(std::clamp(opacity, 0.0, 1.0));
    const int v = int(std::lround(opacity_ * 100));
    if (opacitySlider_->value() != v) {
        const QSignalBlocker b(opacitySlider_);
        opacitySlider_->setValue(v);
    }
    panel_->redraw();
}

std::pair<float, float> ReplayModelView::saliencyRange(int step) const {
    auto it = saliency_.find(step);
    if (it == saliency_.end()) return {0.f, 0.f};
    return {0.f, it->second.top};
}

float ReplayModelView::saliencyMax(int step) const {
    auto it = saliency_.find(step);
    return it == saliency_.end() ? 0.f : it->second.max;
}

void ReplayModelView::updateScale() {
    const int step = panel_->hasEpisode() ? panel_->step() : -1;
    const bool show = saliencyOn() && panel_->hasEpisode();
    scale_->setVisible(show);
    if (!show) return;
    QVector<QColor> colours;
    const auto table = render::colormapTable(colormap_);
    for (int i = 0; i < 256; ++i) colours.push_back(QColor(table[size_t(i) * 4], table[size_t(i) * 4 + 1], table[size_t(i) * 4 + 2]));
    scale_->setColours(colours);
    if (hasSaliency(step)) {
        const auto [lo, hi] = saliencyRange(step);
        scale_->setRange(lo, hi);
        scale_->setTitle(QStringLiteral("saliency |d value / d pixel| at step %1 (max %2)")
                             .arg(step)
                             .arg(double(saliencyMax(step)), 0, 'g', 3));
    } else {
        scale_->setTitle(net_ ? QStringLiteral("saliency at step %1: computing ...").arg(step)
                              : QStringLiteral("saliency: load a checkpoint first"));
    }
}

void ReplayModelView::cancel() {
    const bool was = running_ != Job::None || !queue_.empty();
    if (cancel_) cancel_->store(true);
    ++generation_;   // the running job's result is dropped
    queue_.clear();
    running_ = Job::None;
    updateControls();
    Q_EMIT busyChanged(false);
    if (was) Q_EMIT cancelled();
}

// --- jobs -------------------------------------------------------------------------------------

void ReplayModelView::submit(Request r) {
    if (!panel_->hasEpisode()) return Q_EMIT failed("Open an episode first.");
    if (r.job != Job::Load && !net_) return Q_EMIT failed("Load a checkpoint first (Model: Recorded checkpoint or Checkpoint...).");
    if (running_ != Job::None) {   // the latest request of each kind waits for the running job
        queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const Request& q) { return q.job == r.job; }),
                     queue_.end());
        queue_.push_back(std::move(r));
        return;
    }
    start(r);
}

void ReplayModelView::start(const Request& r) {
    running_ = r.job;
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    const int gen = ++generation_;
    updateControls();
    Q_EMIT busyChanged(true);
    switch (r.job) {
    case Job::Load: return runLoad(r, gen);
    case Job::Predict: return runPredict(r, gen);
    case Job::Imagine: return runImagine(r, gen);
    case Job::Saliency: return runSaliency(r, gen);
    case Job::WorldModel: return runWorldModel(r, gen);
    case Job::None: return;
    }
}

void ReplayModelView::finished(const Request& r, const QString& error) {
    running_ = Job::None;
    if (!error.isEmpty()) Q_EMIT failed(error);
    updateControls();
    if (!queue_.empty()) {
        Request next = queue_.front();
        queue_.erase(queue_.begin());
        if (next.job == Job::Load || net_) return start(next);
    }
    Q_EMIT busyChanged(false);
    (void)r;
}

void ReplayModelView::runLoad(const Request& r, int gen) {
    runAsync(
        this,
        [reader = panel_->reader(), p = r.path.toStdString(), m = netMutex_] {
            std::lock_guard<std::mutex> lock(*m);
            return replay::loadEpisodeNetwork(*reader, p);
        },
        [this, r, gen](Outcome<std::shared_ptr<efficientzero::Network>> o) {
            if (gen != generation_) return;
            if (!o.ok() && r.automatic) {   // noted in the section, not reported as an error
                const QString name = r.path.isEmpty() ? "The recorded checkpoint" : QFileInfo(r.path).fileName();
                modelLabel_->setText(QStringLiteral("No network loaded. %1%2 does not fit this episode (%3). Choose "
                                                    "one with Checkpoint...")
                                         .arg(note_.isEmpty() ? QString() : note_ + " ", name.toHtmlEscaped(),
                                              o.error.toHtmlEscaped()));
                return finished(r, QString());
            }
            if (o.ok()) {
                net_ = std::move(o.value);
                const std::string recorded = panel_->reader()->meta().model.checkpoint;
                checkpoint_ = r.path.isEmpty() ? QString::fromStdString(recorded) : r.path;
                modelLabel_->setText(QStringLiteral("Network: %1%2")
                                         .arg(QFileInfo(checkpoint_).fileName(),
                                              r.path.isEmpty() ? " (recorded in the episode)" : ""));
                Q_EMIT networkLoaded(checkpoint_);
            }
            finished(r, o.ok() ? QString() : o.error);
            if (o.ok()) stepChanged(panel_->step());
        });
}

void ReplayModelView::runPredict(const Request& r, int gen) {
    runAsync(
        this,
        [net = net_, reader = panel_->reader(), t = r.step, m = netMutex_] {
            std::lock_guard<std::mutex> lock(*m);
            return replay::predictStep(*net, *reader, t);
        },
        [this, r, gen](Outcome<replay::StepPrediction> o) {
            if (gen != generation_) return;
            if (o.ok()) {
                predictedStep_ = r.step;
                predValue_ = o.value.value;
                predPrefix_ = o.value.valuePrefix;
                predPolicy_ = o.value.policy;
                predictionLabel_->setText(predictionText());
                Q_EMIT predicted(r.step);
            }
            finished(r, o.ok() ? QString() : o.error);
        });
}

QString ReplayModelView::predictionText() const {
    if (predictedStep_ < 0 || !panel_->hasEpisode()) return {};
    const auto& reader = *panel_->reader();
    const auto& names = reader.actionNames();
    QString policy;
    for (size_t a = 0; a < predPolicy_.size() && a < names.size(); ++a)
        policy += QStringLiteral("%1%2 %3").arg(a ? ", " : "", QString::fromStdString(names[a])).arg(predPolicy_[a], 0, 'f', 3);
    QString s = QStringLiteral("Network at step %1: value %2, value prefix %3<br>policy: %4")
                    .arg(predictedStep_)
                    .arg(predValue_, 0, 'g', 4)
                    .arg(predPrefix_, 0, 'g', 4)
                    .arg(policy);
    if (reader.has(replay::Series::Value))
        s += QStringLiteral("<br>recorded value %1").arg(reader.series(replay::Series::Value)[size_t(predictedStep_)], 0, 'g', 4);
    return s;
}

void ReplayModelView::runImagine(const Request& r, int gen) {
    const auto& reader = *panel_->reader();
    const int k = std::min<int>(r.k, int(reader.length()) - r.step);
    if (k < 1) {
        finished(r, QStringLiteral("Cannot imagine from step %1: it is the episode's last step.").arg(r.step));
        return;
    }
    runAsync(
        this,
        [net = net_, reader = panel_->reader(), t = r.step, k, d = discountBox_->value(), m = netMutex_,
         cancel = cancel_] {
            std::lock_guard<std::mutex> lock(*m);
            // Against what the network was trained on (clipped rewards, a lost life ends the
            // return), as the world-model table below: raw rewards put a demon hit (1.5-3) against a
            // prediction in units of 1 and made a trained agent's chart look wrong.
            return replay::imagine(*net, *reader, t, k, d, cancel.get(), 5, replay::Targets::AsTrained);
        },
        [this, r, gen, k](Outcome<replay::Imagined> o) {
            if (gen != generation_) return;
            if (o.ok()) {
                imaginedFrom_ = r.step;
                imPredReward_ = std::move(o.value.predictedReward);
                imActualReward_ = std::move(o.value.actualReward);
                imPredValue_ = std::move(o.value.predictedValue);
                imActualReturn_ = std::move(o.value.actualReturn);
                showImagined(r.step);
                Q_EMIT imagined(r.step, k);
            }
            finished(r, o.ok() ? QString() : o.error);
        });
}

void ReplayModelView::showImagined(int from) {
    const size_t values = imPredValue_.size();
    rewardChart_->clear();
    rewardChart_->setXOffset(from);
    rewardChart_->setTitle(QStringLiteral("imagined reward from step %1").arg(from));
    rewardChart_->setToolTip(QStringLiteral("Actual rewards clipped to their sign, as the network was trained on them"));
    rewardChart_->addLine({"predicted", QColor(40, 110, 220), toVector(imPredReward_, values)});
    rewardChart_->addLine({"actual", QColor(230, 160, 0), toVector(imActualReward_, values), Qt::DashLine});
    valueChart_->clear();
    valueChart_->setXOffset(from);
    valueChart_->setTitle(QStringLiteral("imagined value from step %1").arg(from));
    valueChart_->setToolTip(QStringLiteral("Actual return: clipped rewards, discounted, ending at a lost life or the "
                                           "game's end, as the network was trained on them"));
    valueChart_->addLine({"predicted", QColor(40, 110, 220), toVector(imPredValue_, values)});
    valueChart_->addLine({"actual return", QColor(40, 150, 60), toVector(imActualReturn_, values), Qt::DashLine});
    rewardChart_->show();
    valueChart_->show();
}

void ReplayModelView::runWorldModel(const Request& r, int gen) {
    const auto& reader = *panel_->reader();
    if (reader.length() < r.k) {
        finished(r, QStringLiteral("The episode has %1 steps, too few for rollouts of depth %2.").arg(reader.length()).arg(r.k));
        return;
    }
    replay::WorldModelCheckOptions o;
    o.depth = r.k;
    o.discount = discountBox_->value();
    wmLabel_->setText(QStringLiteral("Checking the world model over %1 steps ...").arg(reader.length()));
    wmLabel_->show();
    runAsync(
        this,
        [net = net_, reader = panel_->reader(), o, m = netMutex_, cancel = cancel_,
         ck = checkpoint_.toStdString()] {
            std::lock_guard<std::mutex> lock(*m);
            std::pair<replay::WorldModelCheck, replay::WorldModelCheck> out;
            out.first = replay::checkWorldModel(*net, *reader, o, cancel.get());
            out.first.checkpoint = ck;
            // The same configuration freshly initialised (a fixed seed, so the table repeats).
            auto fresh = replay::untrainedNetwork(net->config(), 0);
            out.second = replay::checkWorldModel(fresh, *reader, o, cancel.get());
            out.second.checkpoint = "untrained";
            return out;
        },
        [this, r, gen](Outcome<std::pair<replay::WorldModelCheck, replay::WorldModelCheck>> o) {
            if (gen != generation_) return;
            if (o.ok()) {
                wmTrained_ = std::move(o.value.first);
                wmUntrained_ = std::move(o.value.second);
                showWorldModel();
                Q_EMIT worldModelChecked();
            } else {
                wmLabel_->setText(QStringLiteral("World model check failed: %1").arg(o.error.toHtmlEscaped()));
            }
            finished(r, o.ok() ? QString() : o.error);
        });
}

void ReplayModelView::showWorldModel() {
    const auto& a = wmTrained_;
    const auto& u = wmUntrained_;
    wmLabel_->setText(QStringLiteral("World model vs game: %1 rollouts of depth %2 (every step), discount %3; rewards "
                                     "clipped to their sign and a lost life ending the return, as trained. Mean absolute "
                                     "error per depth: this network / untrained.")
                          .arg(a.starts)
                          .arg(a.options.depth)
                          .arg(a.options.discount, 0, 'g', 4));
    wmLabel_->show();
    const QStringList head{"depth", "reward", "untrained", "value", "untrained", "vs search", "untrained", "|r|", "|G|"};
    wmTable_->clear();
    wmTable_->setColumnCount(int(head.size()));
    wmTable_->setHorizontalHeaderLabels(head);
    wmTable_->horizontalHeaderItem(1)->setToolTip("mean absolute error of the predicted reward against the recorded one");
    wmTable_->horizontalHeaderItem(3)->setToolTip("mean absolute error of the predicted value against the discounted return");
    wmTable_->horizontalHeaderItem(5)->setToolTip("predicted value against the search's root value recorded at that step");
    wmTable_->horizontalHeaderItem(7)->setToolTip("mean size of the actual rewards (the error of predicting 0)");
    wmTable_->horizontalHeaderItem(8)->setToolTip("mean size of the actual returns G (the error of predicting 0)");
    wmTable_->setRowCount(int(a.depths.size()));
    auto cell = [](double v) {
        auto* it = new QTableWidgetItem(std::isnan(v) ? QStringLiteral("-") : QString::number(v, 'f', 3));
        it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        return it;
    };
    for (size_t k = 0; k < a.depths.size(); ++k) {
        const auto& d = a.depths[k];
        const bool hasU = k < u.depths.size();
        const double nan = std::nan("");
        const double vals[] = {double(d.depth), d.rewardMae, hasU ? u.depths[k].rewardMae : nan, d.valueMae,
                               hasU ? u.depths[k].valueMae : nan, d.rootValueMae, hasU ? u.depths[k].rootValueMae : nan,
                               d.meanAbsReward, d.meanAbsReturn};
        for (int c = 0; c < int(head.size()); ++c) {
            auto* it = c == 0 ? new QTableWidgetItem(QString::number(d.depth)) : cell(vals[c]);
            if (c == 0) it->setToolTip(QStringLiteral("%1 (start, depth) pairs").arg(d.count));
            // The trained figure in bold where it beats the untrained one.
            if ((c == 1 || c == 3 || c == 5) && hasU && vals[c] < vals[c + 1]) {
                QFont f = it->font();
                f.setBold(true);
                it->setFont(f);
            }
            wmTable_->setItem(int(k), c, it);
        }
    }
    wmTable_->resizeColumnsToContents();
    // Every row shown; room for the horizontal scroll bar that a narrow panel needs (the table
    // is not laid out yet here, so whether it will show is not known).
    int h = wmTable_->horizontalHeader()->height() + 2 * wmTable_->frameWidth() +
            wmTable_->horizontalScrollBar()->sizeHint().height();
    for (int i = 0; i < wmTable_->rowCount(); ++i) h += wmTable_->rowHeight(i);
    wmTable_->setFixedHeight(h);
    wmTable_->show();
}

void ReplayModelView::runSaliency(const Request& r, int gen) {
    runAsync(
        this,
        [net = net_, reader = panel_->reader(), t = r.step, m = netMutex_, cancel = cancel_] {
            std::lock_guard<std::mutex> lock(*m);
            torch::Tensor s = replay::valueSaliency(*net, *reader, t, cancel.get()).contiguous().to(torch::kFloat32);
            Saliency out;
            out.values.assign(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
            // Drawn over 0 .. the 99th percentile (nearest rank), so that the few largest values do
            // not push every other pixel to the bottom colour.
            std::vector<float> sorted = out.values;
            if (!sorted.empty()) {
                const size_t k = std::min(sorted.size() - 1, size_t(std::ceil(0.99 * double(sorted.size()))) - 1);
                std::nth_element(sorted.begin(), sorted.begin() + long(k), sorted.end());
                out.top = sorted[k];
                out.max = *std::max_element(out.values.begin(), out.values.end());
            }
            if (!(out.top > 0)) out.top = std::max(out.max, 1e-12f);
            return out;
        },
        [this, r, gen](Outcome<Saliency> o) {
            if (gen != generation_) return;
            if (o.ok()) {
                saliency_[r.step] = std::move(o.value);
                saliencyOrder_.push_back(r.step);
                while (saliencyOrder_.size() > kSaliencyKept) {
                    saliency_.erase(saliencyOrder_.front());
                    saliencyOrder_.erase(saliencyOrder_.begin());
                }
                updateScale();
                panel_->redraw();
                Q_EMIT saliencyReady(r.step);
            }
            finished(r, o.ok() ? QString() : o.error);
        });
}

// --- drawing ----------------------------------------------------------------------------------

void ReplayModelView::decorate(widgets::ViewportScene& scene, int step) const {
    if (!saliencyOn() || !panel_->hasEpisode()) return;
    auto it = saliency_.find(step);
    if (it == saliency_.end()) return;
    const auto& reader = *panel_->reader();
    scene.heatW = int(reader.frameWidth());
    scene.heatH = int(reader.frameHeight());
    scene.heat = it->second.values;
    scene.heatMin = 0.f;
    scene.heatMax = it->second.top;
    scene.heatLabel = "saliency";
    scene.colormap = colormap_;
    scene.opacity = opacity_;
    scene.overlayRows.push_back({"saliency", QStringLiteral("%1, 0 .. %2 (max %3)")
                                                 .arg(render::colormapName(colormap_))
                                                 .arg(double(it->second.top), 0, 'g', 3)
                                                 .arg(double(it->second.max), 0, 'g', 3)
                                                 .toStdString()});
}

std::map<int64_t, widgets::ViewportScene> ReplayModelView::exportScenes(int first, int last) const {
    std::map<int64_t, widgets::ViewportScene> out;
    if (!saliencyOn()) return out;
    for (const auto& [step, values] : saliency_)
        if (step >= first && step <= last) decorate(out[step], step);
    return out;
}

} // namespace glimpse::app
