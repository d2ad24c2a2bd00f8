#include "app/replay/replay_panel.h"

#include <QComboBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QShortcut>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <QPointer>
#include <QWindow>

#include <algorithm>
#include <cmath>

#include "app/async.h"
#include "app/replay/replay_export.h"
#include "app/replay/replay_model.h"
#include "core/replay/episode_reader.h"
#include "widgets/live_chart.h"
#include "widgets/strip_chart.h"

namespace glimpse::app {

using replay::EpisodeReader;
using replay::FramePtr;
using replay::PerAction;
using replay::Series;

namespace {

constexpr double kSpeeds[] = {0.25, 0.5, 1, 2, 4, 8};
constexpr int kPrefetchAhead = 48;

QVector<double> toVector(const std::vector<float>& v) {
    QVector<double> out(int(v.size()));
    for (size_t i = 0; i < v.size(); ++i) out[int(i)] = v[i];
    return out;
}

QToolButton* toolButton(const QString& text, const QString& tip, QWidget* parent) {
    auto* b = new QToolButton(parent);
    b->setText(text);
    b->setToolTip(tip);
    b->setAutoRaise(false);
    b->setSizePolicy(QSizePolicy::Minimum, QSizePolicy::Fixed);
    return b;
}

} // namespace

ReplayPanel::ReplayPanel(widgets::ImageViewport* viewport, QWidget* parent)
    : QWidget(parent), viewport_(viewport), clock_(std::make_unique<QElapsedTimer>()) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* scroll = scroll_ = new QScrollArea(this);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* inner = new QWidget(scroll);
    auto* column = new QVBoxLayout(inner);
    header_ = new QLabel("No episode open: File > Open episode... (or drop an episode .h5 here).", inner);
    header_->setWordWrap(true);
    header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    column->addWidget(header_);
    buildTimeline(column);
    buildCharts(column);
    buildStepView(column);
    model_ = new ReplayModelView(this, inner);
    column->addWidget(model_);
    connect(model_, &ReplayModelView::failed, this, &ReplayPanel::failed);
    connect(model_, &ReplayModelView::busyChanged, this, [this] { Q_EMIT busyChanged(busy()); });
    buildExport(column);
    column->addStretch(1);
    scroll->setWidget(inner);
    outer->addWidget(scroll);
    playTimer_ = new QTimer(this);
    connect(playTimer_, &QTimer::timeout, this, &ReplayPanel::tick);
    installKeys();
    setEnabled(true);
    updateStepWidgets();
}

ReplayPanel::~ReplayPanel() {
    if (prefetchCancel_) prefetchCancel_->store(true);
    if (exportCancel_) exportCancel_->store(true);
}

void ReplayPanel::buildTimeline(QVBoxLayout* column) {
    // The transport as in every player: first, previous, play, next, last (issue 56 item 8).
    auto* row = new QHBoxLayout;
    auto* first = toolButton("|<", "First step (Home)", this);
    auto* back = toolButton("<", "Previous step (Left)", this);
    playButton_ = toolButton("Play", "Play / pause (Space)", this);
    playButton_->setCheckable(true);
    auto* forward = toolButton(">", "Next step (Right)", this);
    auto* last = toolButton(">|", "Last step (End)", this);
    speedBox_ = new QComboBox(this);
    for (double s : kSpeeds) speedBox_->addItem(QString::number(s) + "x", s);
    speedBox_->setCurrentIndex(2);
    speedBox_->setToolTip("Playback speed");
    for (QWidget* w : std::initializer_list<QWidget*>{first, back, playButton_, forward, last}) row->addWidget(w);
    row->addStretch(1);
    column->addLayout(row);
    transport_ = {first, back, forward, last};
    connect(first, &QToolButton::clicked, this, &ReplayPanel::seekFirst);
    connect(back, &QToolButton::clicked, this, [this] { stepBy(-1); });
    connect(playButton_, &QToolButton::toggled, this, &ReplayPanel::setPlaying);
    connect(forward, &QToolButton::clicked, this, [this] { stepBy(1); });
    connect(last, &QToolButton::clicked, this, &ReplayPanel::seekLast);
    // The event jumps, labelled, on their own row; each is enabled only when there is such an
    // event in its direction.
    auto* jumps = new QHBoxLayout;
    auto* jumpLabel = new QLabel("Jump to:", this);
    jumpPrevReward_ = toolButton("< Reward", "Previous step with a reward (PgUp)", this);
    jumpNextReward_ = toolButton("Reward >", "Next step with a reward (PgDown)", this);
    jumpPrevLife_ = toolButton("< Life lost", "Previous life loss (Shift+PgUp)", this);
    jumpNextLife_ = toolButton("Life lost >", "Next life loss (Shift+PgDown)", this);
    jumps->addWidget(jumpLabel);
    for (QWidget* w : std::initializer_list<QWidget*>{jumpPrevReward_, jumpNextReward_, jumpPrevLife_, jumpNextLife_})
        jumps->addWidget(w);
    jumps->addStretch(1);
    column->addLayout(jumps);
    connect(jumpPrevReward_, &QToolButton::clicked, this, &ReplayPanel::previousReward);
    connect(jumpNextReward_, &QToolButton::clicked, this, &ReplayPanel::nextReward);
    connect(jumpPrevLife_, &QToolButton::clicked, this, &ReplayPanel::previousLifeLoss);
    connect(jumpNextLife_, &QToolButton::clicked, this, &ReplayPanel::nextLifeLoss);
    connect(speedBox_, &QComboBox::currentIndexChanged, this,
            [this](int i) { setSpeed(speedBox_->itemData(i).toDouble()); });
    auto* scrub = new QHBoxLayout;
    slider_ = new QSlider(Qt::Horizontal, this);
    slider_->setToolTip("Scrub: drag to any step");
    stepLabel_ = new QLabel(this);
    stepLabel_->setMinimumWidth(90);
    scrub->addWidget(slider_, 1);
    scrub->addWidget(stepLabel_);
    scrub->addWidget(speedBox_);
    column->addLayout(scrub);
    connect(slider_, &QSlider::valueChanged, this, &ReplayPanel::seek);
}

void ReplayPanel::buildCharts(QVBoxLayout* column) {
    for (const QString& title : {QStringLiteral("reward"), QStringLiteral("return"), QStringLiteral("value"),
                                 QStringLiteral("value prefix"), QStringLiteral("task weights")}) {
        auto* c = new widgets::StripChart(title, this);
        c->setToolTip("Click or drag to go to a step");
        column->addWidget(c);
        charts_[title] = c;
        c->setVisible(title != "task weights");   // shown for episodes that recorded them
        connect(c, &widgets::StripChart::stepClicked, this, [this](int t) {
            setPlaying(false);
            seek(t);
        });
    }
}

void ReplayPanel::buildStepView(QVBoxLayout* column) {
    actionLabel_ = new QLabel(this);
    actionLabel_->setWordWrap(true);
    actionLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    column->addWidget(actionLabel_);
    bars_ = new widgets::BarChart(this);
    bars_->setToolTip("The network's policy and the search's visit distribution at this step; the action "
                      "taken is highlighted");
    column->addWidget(bars_);
    children_ = new QTableWidget(0, 4, this);
    children_->setHorizontalHeaderLabels({"action", "visits", "Q", "prior"});
    children_->verticalHeader()->hide();
    children_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    children_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    children_->setMinimumHeight(120);
    children_->setToolTip("The search root's children at this step");
    column->addWidget(children_);
}

void ReplayPanel::buildExport(QVBoxLayout* column) {
    auto* box = new QGroupBox("Export", this);
    auto* form = new QFormLayout(box);
    csvButton_ = new QPushButton("Export step table (CSV)...", box);
    form->addRow(csvButton_);
    auto* range = new QHBoxLayout;
    exportFirst_ = new QSpinBox(box);
    exportLast_ = new QSpinBox(box);
    range->addWidget(exportFirst_);
    range->addWidget(new QLabel("to", box));
    range->addWidget(exportLast_);
    form->addRow("Video steps", range);
    videoButton_ = new QPushButton("Export video clip (.avi)...", box);
    form->addRow(videoButton_);
    auto* progressRow = new QHBoxLayout;
    exportProgress_ = new QProgressBar(box);
    exportCancelButton_ = new QPushButton("Cancel", box);
    progressRow->addWidget(exportProgress_, 1);
    progressRow->addWidget(exportCancelButton_);
    form->addRow(progressRow);
    exportProgress_->hide();
    exportCancelButton_->hide();
    column->addWidget(box);
    connect(csvButton_, &QPushButton::clicked, this, [this] {
        const QString base = QFileInfo(path_).completeBaseName();
        const QString p = QFileDialog::getSaveFileName(this, "Export step table", base + "_steps.csv", "CSV (*.csv)");
        if (!p.isEmpty()) exportCsv(p);
    });
    connect(videoButton_, &QPushButton::clicked, this, &ReplayPanel::chooseVideoExport);
    connect(exportCancelButton_, &QPushButton::clicked, this, &ReplayPanel::cancelExport);
    connect(this, &ReplayPanel::exportProgress, this, [this](int done, int total) {
        exportProgress_->setRange(0, total);
        exportProgress_->setValue(done);
    });
}

void ReplayPanel::chooseVideoExport() {
    const QString base = QFileInfo(path_).completeBaseName();
    const QString p = QFileDialog::getSaveFileName(this, "Export video clip", base + ".avi", "MJPG video (*.avi)");
    if (!p.isEmpty()) exportVideo(p, exportFirst_->value(), exportLast_->value());
}

// Left/Right, Home/End, Space and PgUp/PgDown while the panel has focus (shortcuts) or the viewport
// does (its Vulkan window gets the key events, so they are filtered there).
void ReplayPanel::installKeys() {
    auto add = [this](const QKeySequence& k, auto fn) {
        auto* s = new QShortcut(k, this);
        s->setContext(Qt::WidgetWithChildrenShortcut);
        connect(s, &QShortcut::activated, this, fn);
    };
    add(QKeySequence(Qt::Key_Left), [this] { stepBy(-1); });
    add(QKeySequence(Qt::Key_Right), [this] { stepBy(1); });
    add(QKeySequence(Qt::Key_Space), [this] { togglePlaying(); });
    add(QKeySequence(Qt::Key_Home), [this] { seekFirst(); });
    add(QKeySequence(Qt::Key_End), [this] { seekLast(); });
    add(QKeySequence(Qt::Key_PageDown), [this] { nextReward(); });
    add(QKeySequence(Qt::Key_PageUp), [this] { previousReward(); });
    add(QKeySequence(Qt::SHIFT | Qt::Key_PageDown), [this] { nextLifeLoss(); });
    add(QKeySequence(Qt::SHIFT | Qt::Key_PageUp), [this] { previousLifeLoss(); });
    if (QWindow* w = viewport_ ? viewport_->viewWindow() : nullptr) w->installEventFilter(this);
}

bool ReplayPanel::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() != QEvent::KeyPress || !reader_ || !displayed_) return QWidget::eventFilter(watched, event);
    auto* k = static_cast<QKeyEvent*>(event);
    const bool shift = k->modifiers() & Qt::ShiftModifier;
    switch (k->key()) {
    case Qt::Key_Left: stepBy(-1); return true;
    case Qt::Key_Right: stepBy(1); return true;
    case Qt::Key_Space: togglePlaying(); return true;
    case Qt::Key_Home: seekFirst(); return true;
    case Qt::Key_End: seekLast(); return true;
    case Qt::Key_PageDown: shift ? nextLifeLoss() : nextReward(); return true;
    case Qt::Key_PageUp: shift ? previousLifeLoss() : previousReward(); return true;
    default: return QWidget::eventFilter(watched, event);
    }
}

QString ReplayPanel::headerText() const { return header_->text(); }

void ReplayPanel::revealChart(const QString& title) {
    auto it = charts_.find(title);
    if (it == charts_.end() || it->second->isHidden()) return;
    QWidget* chart = it->second;
    QTimer::singleShot(0, this, [this, chart] { scroll_->ensureWidgetVisible(chart); });   // after the layout
}

// --- opening ----------------------------------------------------------------------------------

bool ReplayPanel::busy() const { return opening_ > 0 || loading_ || exporting_ || model_->busy(); }

int ReplayPanel::length() const { return reader_ ? int(reader_->length()) : 0; }

QString ReplayPanel::frameKey(int t) const { return QFileInfo(path_).absoluteFilePath() + "#" + QString::number(t); }

double ReplayPanel::stepsPerSecond() const {
    // Atari runs at 60 Hz; an agent step spans frameSkip of those frames.
    const double skip = reader_ ? double(std::max<int64_t>(1, reader_->meta().frameSkip)) : 4.0;
    return std::clamp(60.0 / skip, 5.0, 30.0);
}

int ReplayPanel::exportScale() const {
    if (!reader_) return 1;
    const double side = double(std::max(reader_->frameHeight(), reader_->frameWidth()));
    return std::clamp(int(std::ceil(320.0 / side)), 1, 8);
}

void ReplayPanel::openEpisode(const QString& path) {
    ++opening_;
    Q_EMIT busyChanged(true);
    Q_EMIT message("Opening episode " + path + " ...");
    runAsync(
        this,
        [p = path.toStdString()] {
            auto r = std::make_shared<EpisodeReader>(p);
            r->prefetch(0, 15);   // the first frames, so step 0 shows at once
            return r;
        },
        [this, path](Outcome<std::shared_ptr<EpisodeReader>> o) {
            --opening_;
            Q_EMIT busyChanged(busy());
            if (!o.ok()) {   // the reader's errors name the file; make sure of it
                const QString name = QFileInfo(path).fileName();
                Q_EMIT openFailed(path, o.error.contains(name) ? o.error : path + ": " + o.error);
                return;
            }
            adopt(std::move(o.value), path);
        });
}

void ReplayPanel::adopt(std::shared_ptr<EpisodeReader> reader, const QString& path) {
    setPlaying(false);
    if (prefetchCancel_) prefetchCancel_->store(true);
    reader_ = std::move(reader);
    path_ = QFileInfo(path).absoluteFilePath();
    current_ = shown_ = -1;
    wanted_ = -1;
    const EpisodeReader& r = *reader_;
    const QString checkpoint = QString::fromStdString(r.meta().model.checkpoint);
    QString model = r.hasModel() ? QStringLiteral("<br>model: %1, %2 simulations, %3")
                                       .arg(QString::fromStdString(r.meta().model.family))
                                       .arg(r.meta().model.simulations)
                                       .arg(checkpoint.isEmpty() ? QStringLiteral("the training's self-play network")
                                                                 : "checkpoint " + QFileInfo(checkpoint).fileName().toHtmlEscaped())
                                 : QStringLiteral("<br>no model outputs recorded");
    if (r.hasTraining() && r.length() > 0)
        model += QStringLiteral("<br>recorded in self-play of the %1 run %2, learner updates %3-%4")
                     .arg(QString::fromStdString(r.meta().training.trainer),
                          QFileInfo(QString::fromStdString(r.meta().training.run)).fileName().toHtmlEscaped())
                     .arg(r.trainingUpdate(0))
                     .arg(r.trainingUpdate(r.length() - 1));
    header_->setText(QStringLiteral("<b>%1</b><br>%2, %3 steps, %4 x %5, return %6%7%8")
                         .arg(QFileInfo(path).fileName().toHtmlEscaped(), QString::fromStdString(r.game()))
                         .arg(r.length())
                         .arg(r.frameWidth())
                         .arg(r.frameHeight())
                         .arg(r.totalReturn())
                         .arg(r.terminal() ? ", game over" : ", cut (not terminal)")
                         .arg(model));
    header_->setToolTip(QString::fromStdString(r.path() + (r.hasModel() ? "\ncheckpoint: " + r.meta().model.checkpoint : "")));
    {
        const QSignalBlocker b(slider_);
        slider_->setRange(0, length() - 1);
        slider_->setValue(0);
    }
    exportFirst_->setRange(0, length() - 1);
    exportLast_->setRange(0, length() - 1);
    exportFirst_->setValue(0);
    exportLast_->setValue(std::min(length() - 1, 299));
    QStringList names;
    for (const auto& n : r.actionNames()) names << QString::fromStdString(n);
    bars_->setCategories(names);
    fillCharts();
    model_->episodeChanged();
    keepView_ = false;
    Q_EMIT episodeOpened(path, length());
    Q_EMIT activateRequested();
    seek(0);
}

void ReplayPanel::fillCharts() {
    const EpisodeReader& r = *reader_;
    for (auto& [title, c] : charts_) c->clear();
    charts_["reward"]->addLine({"reward", QColor(230, 160, 0), toVector(r.series(Series::Reward))});
    charts_["return"]->addLine({"return", QColor(40, 150, 60), toVector(r.series(Series::Return))});
    auto* value = charts_["value"];
    if (r.has(Series::Value)) value->addLine({"predicted value", QColor(40, 110, 220), toVector(r.series(Series::Value))});
    if (r.has(Series::RootValue))
        value->addLine({"root value", QColor(160, 60, 200), toVector(r.series(Series::RootValue)), Qt::DashLine});
    value->setVisible(!value->lines().isEmpty());
    auto* prefix = charts_["value prefix"];
    if (r.has(Series::ValuePrefix))
        prefix->addLine({"value prefix", QColor(0, 150, 160), toVector(r.series(Series::ValuePrefix))});
    prefix->setVisible(!prefix->lines().isEmpty());
    // XTRA: the offline tasks' weights in force while the episode was played, one line per game,
    // coloured by category as in the Training panel.
    auto* weights = charts_["task weights"];
    std::map<std::string, int> perCategory;
    QStringList tip;
    for (size_t i = 0; i < r.taskNames().size(); ++i) {
        const std::string category = i < r.taskCategories().size() ? r.taskCategories()[i] : "";
        const QString name = QString::fromStdString(r.taskNames()[i]);
        weights->addLine({name, widgets::gameColour(QString::fromStdString(category), perCategory[category]++),
                          toVector(r.taskWeightSeries(int64_t(i)))});
        tip << name + (category.empty() ? QString() : ": " + QString::fromStdString(category));
    }
    weights->setToolTip("The offline tasks' weights in force at each step (shooters warm, mazes cool):\n" +
                        tip.join(", ") + "\nClick or drag to go to a step");
    weights->setVisible(!weights->lines().isEmpty());
}

// --- stepping ---------------------------------------------------------------------------------

void ReplayPanel::seek(int t) {
    if (!reader_) return;
    t = std::clamp(t, 0, length() - 1);
    if (slider_->value() != t) {
        const QSignalBlocker b(slider_);
        slider_->setValue(t);
    }
    const bool changed = t != current_;
    current_ = t;
    if (changed) updateStepWidgets();
    if (t != shown_ || !displayed_) requestFrame(t);
}

void ReplayPanel::stepBy(int delta) {
    if (!reader_) return;
    setPlaying(false);
    seek(current_ + delta);
}

void ReplayPanel::jumpTo(long long t, const QString& what) {
    if (!reader_) return;
    if (t < 0) {
        Q_EMIT message(QStringLiteral("No %1 in that direction from step %2.").arg(what).arg(current_));
        return;
    }
    setPlaying(false);
    seek(int(t));
}

void ReplayPanel::seekFirst() {
    if (!reader_) return;
    setPlaying(false);
    seek(0);
}

void ReplayPanel::seekLast() {
    if (!reader_) return;
    setPlaying(false);
    seek(length() - 1);
}

void ReplayPanel::nextReward() {
    if (reader_) jumpTo(reader_->nextReward(current_), "reward");
}
void ReplayPanel::previousReward() {
    if (reader_) jumpTo(reader_->previousReward(current_), "reward");
}
void ReplayPanel::nextLifeLoss() {
    if (reader_) jumpTo(reader_->nextLifeLoss(current_), "life loss");
}
void ReplayPanel::previousLifeLoss() {
    if (reader_) jumpTo(reader_->previousLifeLoss(current_), "life loss");
}

QString ReplayPanel::stepText() const {
    if (!reader_ || current_ < 0) return {};
    const EpisodeReader& r = *reader_;
    const int64_t t = current_;
    QString s = QStringLiteral("step %1: action <b>%2</b> (%3), reward %4, return %5")
                    .arg(t)
                    .arg(QString::fromStdString(r.actionName(t)).toHtmlEscaped())
                    .arg(r.action(t))
                    .arg(r.reward(t))
                    .arg(r.cumulativeReturn(t));
    if (r.has(Series::Lives)) s += QStringLiteral(", lives %1").arg(r.series(Series::Lives)[size_t(t)]);
    if (r.lifeLost(t)) s += ", <b>life lost</b>";
    if (r.isTerminal(t)) s += ", <b>game over</b>";
    if (r.has(Series::Value)) s += QStringLiteral("<br>predicted value %1").arg(r.series(Series::Value)[size_t(t)]);
    if (r.has(Series::RootValue)) s += QStringLiteral(", root value %1").arg(r.series(Series::RootValue)[size_t(t)]);
    if (r.hasTraining()) {
        s += QStringLiteral("<br>training: update %1, environment step %2").arg(r.trainingUpdate(t)).arg(r.trainingEnvSteps(t));
        if (!r.taskNames().empty()) {
            const std::vector<float> w = r.taskWeights(t);
            QStringList parts;
            for (size_t i = 0; i < w.size(); ++i)
                parts << QStringLiteral("%1 %2").arg(QString::fromStdString(r.taskNames()[i]).toHtmlEscaped()).arg(w[i], 0, 'f', 2);
            s += "<br>task weights in force: " + parts.join(", ");
        }
    }
    return s;
}

void ReplayPanel::updateStepWidgets() {
    const bool have = bool(reader_) && current_ >= 0;
    stepLabel_->setText(have ? QStringLiteral("step %1 / %2").arg(current_).arg(length() - 1) : QString());
    for (auto& [title, c] : charts_) c->setCursor(have ? current_ : -1);
    actionLabel_->setText(have ? stepText() : QString());
    for (QWidget* w : std::initializer_list<QWidget*>{playButton_, speedBox_, slider_, csvButton_, videoButton_})
        w->setEnabled(have);
    for (size_t i = 0; i < transport_.size(); ++i)   // first, previous, next, last
        transport_[i]->setEnabled(have && (i < 2 ? current_ > 0 : current_ < length() - 1));
    jumpPrevReward_->setEnabled(have && reader_->previousReward(current_) >= 0);
    jumpNextReward_->setEnabled(have && reader_->nextReward(current_) >= 0);
    jumpPrevLife_->setEnabled(have && reader_->previousLifeLoss(current_) >= 0);
    jumpNextLife_->setEnabled(have && reader_->nextLifeLoss(current_) >= 0);
    if (have) updateStepBars(current_);
    model_->stepChanged(current_);
}

void ReplayPanel::updateStepBars(int t) {
    const EpisodeReader& r = *reader_;
    const int A = int(r.actionNames().size());
    QVector<widgets::BarChart::Series> series;
    if (r.has(PerAction::Policy)) series.push_back({"policy", QColor(40, 110, 220), toVector(r.perAction(PerAction::Policy, t))});
    std::vector<float> visits = r.has(PerAction::Visits) ? r.perAction(PerAction::Visits, t) : std::vector<float>{};
    if (!visits.empty()) {
        double sum = 0;
        for (float v : visits) sum += v;
        QVector<double> frac = toVector(visits);
        for (double& v : frac) v = sum > 0 ? v / sum : 0.0;
        series.push_back({"visits (fraction)", QColor(230, 120, 30), frac});
    }
    bars_->setSeries(series);
    bars_->setHighlight(int(r.action(t)));
    bars_->setVisible(!series.isEmpty());
    const bool table = r.has(PerAction::Visits) || r.has(PerAction::ChildQ) || r.has(PerAction::ChildPrior);
    children_->setVisible(table);
    if (!table) return;
    const std::vector<float> q = r.has(PerAction::ChildQ) ? r.perAction(PerAction::ChildQ, t) : std::vector<float>{};
    const std::vector<float> prior =
        r.has(PerAction::ChildPrior) ? r.perAction(PerAction::ChildPrior, t) : std::vector<float>{};
    children_->setRowCount(A);
    auto cell = [](const QString& text, bool bold) {
        auto* item = new QTableWidgetItem(text);
        QFont f = item->font();
        f.setBold(bold);
        item->setFont(f);
        return item;
    };
    for (int a = 0; a < A; ++a) {
        const bool taken = a == r.action(t);
        children_->setItem(a, 0, cell(QString::fromStdString(r.actionNames()[size_t(a)]), taken));
        children_->setItem(a, 1, cell(visits.empty() ? "-" : QString::number(visits[size_t(a)]), taken));
        children_->setItem(a, 2, cell(q.empty() ? "-" : QString::number(q[size_t(a)], 'g', 4), taken));
        children_->setItem(a, 3, cell(prior.empty() ? "-" : QString::number(prior[size_t(a)], 'g', 4), taken));
    }
}

// --- frames -----------------------------------------------------------------------------------

void ReplayPanel::requestFrame(int t) {
    if (FramePtr f = reader_->cachedFrame(t)) return present(t, f);
    if (loading_) {   // coalesce: read the latest request when this read ends
        wanted_ = t;
        return;
    }
    loading_ = true;
    wanted_ = -1;
    Q_EMIT busyChanged(true);
    runAsync(
        this, [reader = reader_, t] { return reader->frame(t); },
        [this, t, reader = reader_](Outcome<FramePtr> o) {
            loading_ = false;
            Q_EMIT busyChanged(busy());
            if (reader != reader_) return;
            if (!o.ok()) {
                setPlaying(false);
                Q_EMIT failed(o.error);
                return;
            }
            if (t == current_) present(t, o.value);
            const int next = wanted_ >= 0 ? wanted_ : current_;
            wanted_ = -1;
            if (next != shown_) requestFrame(next);
        });
}

void ReplayPanel::present(int t, const FramePtr& frame) {
    shown_ = t;
    const bool keep = keepView_;
    keepView_ = true;
    Q_EMIT frameReady(QFileInfo(path_).fileName(), frameImage(*frame), frameKey(t), keep);
    displayed_ = true;
    redraw();
    if (playing()) prefetchAhead(t);
    Q_EMIT frameShown(t);
}

void ReplayPanel::redraw() {
    if (!reader_ || !displayed_ || shown_ < 0 || !viewport_) return;
    widgets::ViewportScene scene;
    const EpisodeReader& r = *reader_;
    const int64_t t = shown_;
    scene.overlayRows.push_back({"step", std::to_string(t) + " / " + std::to_string(r.length() - 1)});
    scene.overlayRows.push_back({"action", r.actionName(t)});
    scene.overlayRows.push_back({"reward", QString::number(r.reward(t)).toStdString() + "  (return " +
                                               QString::number(r.cumulativeReturn(t)).toStdString() + ")"});
    model_->decorate(scene, t);
    viewport_->setScene(std::move(scene));
}

void ReplayPanel::prefetchAhead(int t) {
    if (prefetching_ || !reader_) return;
    const int last = std::min(length() - 1, t + kPrefetchAhead);
    if (t + 1 > last || reader_->cachedFrame(last)) return;
    prefetching_ = true;
    prefetchCancel_ = std::make_shared<std::atomic<bool>>(false);
    runAsync(
        this, [reader = reader_, t, last, cancel = prefetchCancel_] { return reader->prefetch(t + 1, last, cancel.get()); },
        [this](Outcome<int64_t>) { prefetching_ = false; });
}

// --- playback ---------------------------------------------------------------------------------

bool ReplayPanel::playing() const { return playTimer_ && playTimer_->isActive(); }

void ReplayPanel::setPlaying(bool on) {
    if (on && (!reader_ || length() < 2)) on = false;
    if (on && current_ >= length() - 1) seek(0);   // play again from the start
    if (playButton_->isChecked() != on) {
        const QSignalBlocker b(playButton_);
        playButton_->setChecked(on);
    }
    playButton_->setText(on ? "Pause" : "Play");
    if (on == playing()) return;
    if (on) {
        playFrom_ = current_;
        clock_->start();
        playTimer_->start(std::clamp(int(1000.0 / (stepsPerSecond() * speed_)), 8, 100));
        prefetchAhead(current_);
    } else {
        playTimer_->stop();
        if (prefetchCancel_) prefetchCancel_->store(true);
    }
}

void ReplayPanel::setSpeed(double speed) {
    speed_ = std::clamp(speed, 0.25, 8.0);
    int best = 0;
    for (int i = 0; i < speedBox_->count(); ++i)
        if (std::abs(speedBox_->itemData(i).toDouble() - speed_) < std::abs(speedBox_->itemData(best).toDouble() - speed_))
            best = i;
    if (speedBox_->currentIndex() != best) {
        const QSignalBlocker b(speedBox_);
        speedBox_->setCurrentIndex(best);
    }
    if (playing()) {   // keep going from here at the new speed
        playFrom_ = current_;
        clock_->restart();
        playTimer_->setInterval(std::clamp(int(1000.0 / (stepsPerSecond() * speed_)), 8, 100));
    }
}

// The step due now: playback follows the clock, so slow frame reads drop frames, not time.
void ReplayPanel::tick() {
    if (!reader_) return setPlaying(false);
    const int due = playFrom_ + int(clock_->elapsed() / 1000.0 * stepsPerSecond() * speed_);
    if (due >= length() - 1) {
        seek(length() - 1);
        return setPlaying(false);
    }
    if (due != current_) seek(due);
}

void ReplayPanel::sourceChanged(const QString& key) {
    const bool mine = reader_ && key.startsWith(QFileInfo(path_).absoluteFilePath() + "#");
    if (mine == displayed_) return;
    displayed_ = mine;
    if (!mine) {
        setPlaying(false);
        shown_ = -1;   // a step shown again goes back to the viewport
    }
}

// --- export -----------------------------------------------------------------------------------

void ReplayPanel::setExporting(bool on) {
    exporting_ = on;
    exportProgress_->setVisible(on);
    exportCancelButton_->setVisible(on);
    csvButton_->setEnabled(!on && reader_);
    videoButton_->setEnabled(!on && reader_);
    Q_EMIT busyChanged(busy());
}

void ReplayPanel::exportCsv(const QString& path) {
    if (!reader_) {
        Q_EMIT exportFailed(path, "Nothing to export: open an episode first.");
        return;
    }
    runAsync(
        this, [reader = reader_, p = path.toStdString()] { writeStepTableCsv(*reader, p); },
        [this, path](Outcome<std::monostate> o) {
            if (!o.ok()) {
                Q_EMIT exportFailed(path, "Export to " + path + " failed: " + o.error);
                return;
            }
            Q_EMIT message("Wrote the step table to " + path);
            Q_EMIT exported(path);
        });
}

void ReplayPanel::exportVideo(const QString& path, int first, int last) {
    if (!reader_ || exporting_) {
        Q_EMIT exportFailed(path, reader_ ? "An export is already running." : "Nothing to export: open an episode first.");
        return;
    }
    VideoExport spec;
    spec.path = path.toStdString();
    spec.first = first;
    spec.last = last;
    spec.scale = exportScale();
    spec.fps = stepsPerSecond();
    spec.scenes = model_->exportScenes(first, last);
    exportCancel_ = std::make_shared<std::atomic<bool>>(false);
    setExporting(true);
    exportProgress_->setRange(0, std::max(1, last - first + 1));
    exportProgress_->setValue(0);
    QPointer<ReplayPanel> self(this);
    runAsync(
        this,
        [reader = reader_, spec = std::move(spec), cancel = exportCancel_, self] {
            return writeEpisodeVideo(*reader, spec, *cancel, [self, cancel](int64_t done, int64_t total) {
                if (cancel->load() || !self) return;
                QMetaObject::invokeMethod(self.data(), [self, done, total] {
                    if (self) Q_EMIT self->exportProgress(int(done), int(total));
                }, Qt::QueuedConnection);
            });
        },
        [this, path](Outcome<bool> o) {
            setExporting(false);
            if (!o.ok()) Q_EMIT exportFailed(path, "Video export to " + path + " failed: " + o.error);
            else if (!o.value) {
                Q_EMIT message("Video export cancelled: " + path + " was not written.");
                Q_EMIT exportCancelled(path);
            } else {
                Q_EMIT message("Wrote the video clip " + path);
                Q_EMIT exported(path);
            }
        });
}

void ReplayPanel::cancelExport() {
    if (exportCancel_) exportCancel_->store(true);
}

widgets::StripChart* ReplayPanel::chart(const QString& title) const {
    auto it = charts_.find(title);
    return it == charts_.end() ? nullptr : it->second;
}

} // namespace glimpse::app
