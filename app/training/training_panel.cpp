#include "app/training/training_panel.h"
#include "app/async.h"
#include "app/family.h"
#include "app/resources.h"

#include <QDateTime>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QScrollBar>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QFrame>
#include <QTimer>
#include <QVBoxLayout>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>
#include <QThreadPool>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <mutex>
#include <algorithm>
#include <filesystem>


#include "app/training/run_follower.h"
#include "app/training/training_job.h"
#include "app/training/training_view.h"
#include "core/error.h"
#include "core/runlog.h"
#include "widgets/live_chart.h"

namespace glimpse::app {

namespace {

// The shipped small trainer config of a family (letr_demo_train.json, coat_fmnist_train.json;
// the library defaults are the papers' full-size models); empty for a family without one
// (EfficientZero: its options are flags) or when not installed.
QString defaultTrainConfig(const QString& model) {
    const ModelFamily* f = findFamily(model.toStdString());
    return f && !f->training.config.isEmpty() ? resourceFile(f->training.config) : QString();
}

// Families that can be trained from the panel, in registry order.
std::vector<const ModelFamily*> trainableFamilies() {
    std::vector<const ModelFamily*> out;
    for (const auto& f : modelFamilies())
        if (f.trainer) out.push_back(&f);
    return out;
}

constexpr int kPollMs = 1000;
constexpr int kPreviewMs = 15000;

QString formatSeconds(double s) {
    if (s < 0) return "?";
    const qint64 t = qint64(s + 0.5);
    if (t >= 3600) return QStringLiteral("%1 h %2 min").arg(t / 3600).arg((t % 3600) / 60, 2, 10, QChar('0'));
    if (t >= 60) return QStringLiteral("%1 min %2 s").arg(t / 60).arg(t % 60, 2, 10, QChar('0'));
    return QStringLiteral("%1 s").arg(t);
}

} // namespace

struct TrainingPanel::Run {
    int index = 0;
    bool live = false;   // the job's run (re-followed when the job restarts)
    std::shared_ptr<RunFollower> follower;   // shared with the worker reading a long log
    std::shared_ptr<Load> load;               // while a long log is read (startLoading)
    QString label;
    QString error;
    QStringList games;   // XTRA: the games of its per-game series, in order of appearance
};

namespace {

// XTRA's per-game series (docs/xtra.md): each quantity is one chart with a line per game.
const QList<QPair<QString, QString>> kGameGroups = {{"task_weight/", "task weights"},
                                                    {"task_loss/", "task losses"},
                                                    {"task_similarity/", "task similarities"},
                                                    {"task_policy_loss/", "task policy losses"}};
constexpr int kGameLineBase = 1000;   // line keys of games: base + run * kGamesPerRun + game
constexpr int kGamesPerRun = 64;

} // namespace

struct TrainingPanel::Load {
    std::atomic<bool> cancel{false};
    std::atomic<int64_t> rowsRead{0};
    std::atomic<int> next{0};      // the next series (in layout order) a worker takes
    std::atomic<int> running{0};   // workers still reading; the last one reports the end
    std::mutex errorMutex;
    QString error;                 // the first worker's error (the others then stop)
    int64_t rows = 0;        // to read
    int series = 0, done = 0;
    QElapsedTimer clock;
    QList<QFuture<void>> workers;
};

QPair<QString, int> TrainingPanel::seriesLine(Run& r, const QString& series) {
    for (const auto& g : kGameGroups) {
        if (!series.startsWith(g.first)) continue;
        const QString game = series.mid(g.first.size());
        if (!r.games.contains(game)) r.games << game;
        const int gi = int(r.games.indexOf(game));
        if (gi >= kGamesPerRun) return {QString(), -1};
        return {g.second, kGameLineBase + r.index * kGamesPerRun + gi};
    }
    return {series, r.index};
}

void TrainingPanel::styleGameLine(Run& r, const QString& chartName, int key) {
    widgets::LiveChart* chart = charts_->chart(chartName);
    const int gi = key - kGameLineBase - r.index * kGamesPerRun;
    if (!chart || key < kGameLineBase || gi < 0 || gi >= r.games.size()) return;
    const QString game = r.games[gi];
    chart->setRunStart(key, r.follower->startTime());
    const QMap<QString, QString> categories = r.follower->gameCategories();
    const QString category = categories.value(game);
    int k = 0;   // the game's rank among its category's games in this run
    for (int j = 0; j < gi; ++j) k += categories.value(r.games[j]) == category;
    chart->setRunLabel(key, game + (category.isEmpty() ? QString() : " (" + category + ")") +
                                (r.index ? " - " + r.label : QString()));
    chart->setLineStyle(key, widgets::gameColour(category, k), widgets::runPenStyle(r.index));
}

void TrainingPanel::appendRunPoints(Run& r, QMap<QString, RunFollower::Rows>& rows) {
    if (!rows.isEmpty()) charts_->setRunStart(r.index, r.follower->startTime());
    for (auto it = rows.begin(); it != rows.end(); ++it) {
        RunFollower::Rows& v = it.value();
        const auto [chart, key] = seriesLine(r, it.key());
        if (key < 0) continue;
        charts_->appendRows(chart, key, std::move(v.steps), std::move(v.wallTimes), std::move(v.values));
        if (key >= kGameLineBase) styleGameLine(r, chart, key);
    }
}

bool TrainingPanel::loading() const {
    return std::any_of(runs_.begin(), runs_.end(), [](const auto& r) { return r->load != nullptr; });
}

void TrainingPanel::startLoading(Run& r) {
    auto load = std::make_shared<Load>();
    load->clock.start();
    r.load = load;
    charts_->setRunStart(r.index, r.follower->startTime());
    // Every chart at once (the page does not reflow as series arrive), each saying it is read.
    QStringList names = r.follower->seriesNames();
    QMap<QString, QString> chartOf;
    for (const QString& n : names) {
        const auto [chart, key] = seriesLine(r, n);
        if (key < 0) continue;
        chartOf[n] = chart;
        charts_->appendRows(chart, key, {}, {}, {});
        if (key >= kGameLineBase) styleGameLine(r, chart, key);
        if (charts_->chart(chart)->runs().isEmpty()) charts_->chart(chart)->setPlaceholder("reading the run log...");
    }
    names = chartOf.keys();
    const QStringList order = charts_->layoutOrder();   // the charts on screen first
    std::stable_sort(names.begin(), names.end(),
                     [&](const QString& a, const QString& b) { return order.indexOf(chartOf[a]) < order.indexOf(chartOf[b]); });
    load->series = int(names.size());
    load->rows = r.follower->pendingRows();
    progressLabel_->setText(QStringLiteral("Reading %1: %2 rows in %3 series...").arg(r.label).arg(load->rows).arg(load->series));
    const double smoothing = charts_->smoothing();
    // A worker per core (at most kLoadWorkers) takes the series in layout order: the charts on
    // screen fill first, and the reading (HDF5 serializes it), the splitting into columns, the
    // first touch of their memory and the preparing of one series overlap another's.
    const int perCore = loadWorkers_ > 0 ? loadWorkers_ : QThread::idealThreadCount();
    const int workers = std::clamp(perCore, 1, std::min(kLoadWorkers, std::max(1, load->series)));
    load->running = workers;
    for (int k = 0; k < workers; ++k)
        load->workers << QtConcurrent::run(&loadPool(), [this, load, follower = r.follower, names, smoothing] {
            readSeriesInOrder(load, *follower, names, smoothing);
        });
}

QThreadPool& TrainingPanel::loadPool() {
    static QThreadPool* pool = [] {   // its own threads: the global pool also runs previews
        auto* p = new QThreadPool(qApp);
        p->setMaxThreadCount(kLoadWorkers);
        return p;
    }();
    return *pool;
}

// One loading worker: reads and prepares series until none is left, then the last worker
// reports the end (or the first error).
void TrainingPanel::readSeriesInOrder(const std::shared_ptr<Load>& load, RunFollower& follower, const QStringList& names,
                                      double smoothing) {
    try {
        for (int i = load->next++; i < names.size() && !load->cancel; i = load->next++) {
            const QString n = names[i];
            RunFollower::Rows rows = follower.readSeries(n);
            load->rowsRead += rows.size();
            auto prepared = std::make_shared<widgets::ChartRows>(
                widgets::ChartRows::prepare(std::move(rows.steps), std::move(rows.wallTimes), std::move(rows.values), smoothing));
            if (load->cancel) break;
            QMetaObject::invokeMethod(
                this, [this, load, n, prepared] { seriesLoaded(load, n, std::move(*prepared)); }, Qt::QueuedConnection);
        }
    } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(load->errorMutex);
        if (load->error.isEmpty()) load->error = QString::fromStdString(e.what());
        load->cancel = true;   // the other workers stop too
    }
    if (--load->running > 0) return;
    QString error;
    {
        std::lock_guard<std::mutex> lock(load->errorMutex);
        error = load->error;
    }
    // Cancelled by Close runs: nothing to report (an error cancels too, and is reported).
    if (error.isEmpty() && load->cancel) return;
    QMetaObject::invokeMethod(this, [this, load, error] { loadFinished(load, error); }, Qt::QueuedConnection);
}

void TrainingPanel::seriesLoaded(const std::shared_ptr<Load>& load, const QString& series, widgets::ChartRows&& rows) {
    if (load->cancel) return;
    for (auto& r : runs_) {
        if (r->load != load) continue;
        const auto [chart, key] = seriesLine(*r, series);
        if (key < 0) return;
        charts_->adoptRows(chart, key, std::move(rows));
        if (key >= kGameLineBase) styleGameLine(*r, chart, key);
        if (widgets::LiveChart* c = charts_->chart(chart)) c->setPlaceholder(QString());
        ++load->done;
        progressLabel_->setText(QStringLiteral("Reading %1: %2 of %3 series (%4%)...")
                                    .arg(r->label)
                                    .arg(load->done)
                                    .arg(load->series)
                                    .arg(load->rows ? int(100 * load->rowsRead / load->rows) : 100));
        return;
    }
}

void TrainingPanel::loadFinished(const std::shared_ptr<Load>& load, const QString& error) {
    for (auto& r : runs_) {
        if (r->load != load) continue;
        r->load.reset();
        r->error = error;
        if (!error.isEmpty()) Q_EMIT message("Run log " + r->follower->path() + ": " + error);
        else
            Q_EMIT message(QStringLiteral("Read %1 rows of %2 in %3 s (on a worker thread)")
                               .arg(load->rowsRead.load())
                               .arg(r->follower->path())
                               .arg(load->clock.elapsed() / 1000.0, 0, 'f', 1));
    }
    if (!loading())
        for (widgets::LiveChart* c : charts_->charts()) c->setPlaceholder(QString());
    rebuildRunList();
    showFollowedProgress();
    pollNow();
    if (!loading()) Q_EMIT loadingFinished();
}

void TrainingPanel::cancelLoads(bool wait) {
    for (auto& r : runs_) {
        if (!r->load) continue;
        r->load->cancel = true;
        if (wait)
            for (QFuture<void>& f : r->load->workers) f.waitForFinished();
    }
}

void TrainingPanel::clearRunCharts(Run& r) {
    charts_->clearRun(r.index);
    for (const auto& g : kGameGroups)
        if (widgets::LiveChart* c = charts_->chart(g.second))
            for (int gi = 0; gi < kGamesPerRun; ++gi) c->clearRun(kGameLineBase + r.index * kGamesPerRun + gi);
    r.games.clear();
}

TrainingPanel::TrainingPanel(TrainingJob* job, QWidget* parent) : QWidget(parent), job_(job) {
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(buildForm());
    lay->addLayout(buildButtons());
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    progressLabel_ = new QLabel("idle", this);
    lay->addWidget(progress_);
    lay->addWidget(progressLabel_);
    runList_ = new QListWidget(this);
    // The run list is short (a few runs) and the preview sits beside the charts, so the charts
    // get most of the height even when the dock shares its column with a model panel.
    // Three to four rows and the horizontal scroll bar a long path brings (64 px showed one and
    // a half rows of three overlaid runs once the bar was there; the dock gives it its minimum).
    const int rowH = runList_->fontMetrics().height() + 2;
    runList_->setMaximumHeight(4 * rowH + runList_->horizontalScrollBar()->sizeHint().height() + 2 * runList_->frameWidth() + 2);
    runList_->setMinimumHeight(3 * rowH + runList_->horizontalScrollBar()->sizeHint().height() + 2 * runList_->frameWidth());
    lay->addWidget(runList_);
    lay->addLayout(buildChartsAndPreview(), 3);
    connectJob();

    pollTimer_ = new QTimer(this);
    connect(pollTimer_, &QTimer::timeout, this, &TrainingPanel::pollNow);
    pollTimer_->start(kPollMs);
    previewTimer_ = new QTimer(this);
    connect(previewTimer_, &QTimer::timeout, this, [this] {
        bool live = job_ && job_->running();
        for (const auto& r : runs_) live |= r->follower->isOpen() && r->follower->status() == "running";
        if (live) refreshPreview();
    });
    previewTimer_->start(kPreviewMs);
    updateButtons();
}

QWidget* TrainingPanel::pathRow(QLineEdit*& edit, const QString& placeholder, bool dir) {
    auto* row = new QWidget(this);
    auto* h = new QHBoxLayout(row);
    h->setContentsMargins(0, 0, 0, 0);
    edit = new QLineEdit(row);
    edit->setPlaceholderText(placeholder);
    auto* browse = new QPushButton("...", row);
    browse->setMaximumWidth(32);
    QLineEdit* e = edit;
    connect(browse, &QPushButton::clicked, this, [this, e, dir] {
        const QString p = dir ? QFileDialog::getExistingDirectory(this, "Run directory", e->text())
                              : QFileDialog::getOpenFileName(this, "Trainer config", e->text(),
                                                             "JSON (*.json);;All files (*)");
        if (!p.isEmpty()) e->setText(p);
    });
    h->addWidget(edit);
    h->addWidget(browse);
    return row;
}

QFormLayout* TrainingPanel::buildForm() {
    auto* form = new QFormLayout;
    model_ = new QComboBox(this);
    for (const ModelFamily* f : trainableFamilies())
        model_->addItem(f->training.title, QString::fromStdString(f->name));
    form->addRow("Model", model_);
    form->addRow("Config", pathRow(config_, "trainer config .json (empty: full-size defaults)", false));
    data_ = new QLineEdit(this);
    form->addRow("Dataset", data_);
    if (const ModelFamily* f = findFamily(model().toStdString())) {
        config_->setText(defaultTrainConfig(model()));
        data_->setText(f->training.data);
        data_->setPlaceholderText(f->training.dataHint);
    }
    // Each family's default dataset (a game for EfficientZero) and hint; a dataset the user
    // typed is kept. Likewise the config: a shipped default is swapped for the new family's.
    connect(model_, &QComboBox::currentIndexChanged, this, [this] {
        const ModelFamily* f = findFamily(model().toStdString());
        if (!f) return;
        const QString text = data_->text().trimmed();
        const QString cfg = config_->text().trimmed();
        bool dataUntouched = text.isEmpty(), cfgUntouched = cfg.isEmpty();
        for (const ModelFamily* g : trainableFamilies()) {
            dataUntouched |= text == g->training.data;
            cfgUntouched |= cfg == defaultTrainConfig(QString::fromStdString(g->name));
        }
        if (dataUntouched) data_->setText(f->training.data);
        data_->setPlaceholderText(f->training.dataHint);
        if (cfgUntouched) config_->setText(defaultTrainConfig(model()));
    });
    form->addRow("Output", pathRow(outDir_, "run directory (run.h5, checkpoint.h5, model.h5)", true));
    return form;
}

QHBoxLayout* TrainingPanel::buildButtons() {
    start_ = new QPushButton("Start", this);
    pause_ = new QPushButton("Pause", this);
    pause_->setCheckable(true);
    stop_ = new QPushButton("Stop", this);
    resume_ = new QPushButton("Resume", this);
    resume_->setToolTip("Continue the stopped run in the output directory from its checkpoint");
    auto* buttons = new QHBoxLayout;
    for (auto* b : {start_, pause_, stop_, resume_}) buttons->addWidget(b);
    auto* openRunButton = new QPushButton("Open run...", this);
    auto* closeRunsButton = new QPushButton("Close runs", this);
    buttons->addStretch();
    buttons->addWidget(openRunButton);
    buttons->addWidget(closeRunsButton);
    connect(start_, &QPushButton::clicked, this, [this] { startRun(false); });
    connect(resume_, &QPushButton::clicked, this, [this] { startRun(true); });
    connect(pause_, &QPushButton::toggled, this, [this](bool on) {
        if (job_ && job_->running()) job_->setPaused(on);
    });
    connect(stop_, &QPushButton::clicked, this, [this] {
        if (job_) job_->stop();
        progressLabel_->setText(progressLabel_->text() + "  (stopping: writing the checkpoint)");
    });
    connect(openRunButton, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, "Open run log", QString(), "Run logs (*.h5);;All files (*)");
        if (p.isEmpty()) return;
        QString err;
        if (!openRun(p, &err)) Q_EMIT errorOccurred(err);
    });
    connect(closeRunsButton, &QPushButton::clicked, this, &TrainingPanel::closeRuns);
    return buttons;
}

QHBoxLayout* TrainingPanel::buildChartsAndPreview() {
    view_ = new TrainingView(this);
    charts_ = view_->grid();
    // The per-game lines of XTRA's charts belong to their run (the run filter matches its name).
    charts_->setRunOf([](int key) { return key >= kGameLineBase ? (key - kGameLineBase) / kGamesPerRun : key; });
    connect(view_, &TrainingView::message, this, &TrainingPanel::message);
    connect(view_, &TrainingView::errorOccurred, this, &TrainingPanel::errorOccurred);
    // The preview column: a fixed box and its caption below it, in a widget of its own whose
    // height follows the caption's wrapped text (the caption never runs over the image).
    auto* previewColumn = new QWidget(this);
    previewColumn->setFixedWidth(184);
    previewLabel_ = new QLabel(previewColumn);
    previewLabel_->setFixedSize(176, 132);
    previewLabel_->setAlignment(Qt::AlignCenter);
    previewLabel_->setText("no preview yet");
    previewLabel_->setFrameShape(QFrame::StyledPanel);
    previewCaption_ = new QLabel(previewColumn);
    previewCaption_->setWordWrap(true);
    previewCaption_->setFixedWidth(176);
    previewCaption_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    previewCaption_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Minimum);
    auto* previewBox = new QVBoxLayout(previewColumn);
    previewBox->setContentsMargins(0, 0, 0, 0);
    previewBox->setSpacing(4);
    previewBox->addWidget(previewLabel_);
    previewBox->addWidget(previewCaption_);
    previewBox->addStretch();
    body_ = new QHBoxLayout;
    body_->addWidget(view_, 1);
    body_->addWidget(previewColumn, 0, Qt::AlignTop);
    return body_;
}

TrainingView* TrainingPanel::detachChartsView() {
    if (body_->indexOf(view_) >= 0) {
        body_->removeWidget(view_);
        body_->insertStretch(0, 1);
        view_->hide();   // until its new parent (a tab) shows it
    }
    return view_;
}

void TrainingPanel::setPreviewCaption(const QString& text) {
    previewCaption_->setText(text);
    previewCaption_->setMinimumHeight(std::max(0, previewCaption_->heightForWidth(previewCaption_->width())));
}

QString TrainingPanel::dataSpec() const { return data_->text(); }
QString TrainingPanel::outDir() const { return outDir_->text(); }

void TrainingPanel::followFields() {
    // The job's run (started here) keeps the job's settings, read-only while it runs; an opened
    // run (another process, or finished) shows its own, read-only until Close runs.
    const Run* opened = nullptr;
    bool jobRun = job_ && job_->running();
    for (const auto& r : runs_) {
        if (r->live && job_) jobRun = true;
        else if (!opened && r->follower->isOpen()) opened = r.get();
    }
    QString model, config, data, out, tip;
    bool follow = false;
    if (jobRun) {
        const TrainingSpec& spec = job_->spec();
        view_->setFamily(spec.model);
        follow = job_->running();
        model = spec.model;
        config = spec.configPath;
        data = spec.dataSpec;
        out = spec.outDir;
        tip = "The running job's settings";
    } else if (opened) {
        follow = true;
        model = opened->follower->family();
        view_->setFamily(model);
        // The run's own config is the one recorded in its log (trainers write no config file).
        config = opened->follower->path();
        data = QString::fromStdString(opened->follower->dataSpec());
        out = QFileInfo(opened->follower->path()).absolutePath();
        tip = "The followed run's own settings (its config is the one recorded in " + opened->follower->path() +
              "); Close runs to edit them and start a run.\n\n" + opened->follower->configText().left(1500);
    }
    followingOpened_ = follow && !jobRun;
    if (followingOpened_ && !following_) userFields_ = {this->model(), config_->text(), data_->text(), outDir_->text()};
    if (followingOpened_) {
        const int i = model_->findData(model);
        if (i >= 0) model_->setCurrentIndex(i);
        config_->setText(config);
        data_->setText(data);
        outDir_->setText(out);
    } else if (following_ && !jobRun) {   // the opened runs were closed: the user's values again
        setModel(userFields_.model);
        config_->setText(userFields_.config);
        data_->setText(userFields_.data);
        outDir_->setText(userFields_.out);
    }
    following_ = follow;
    model_->setEnabled(!follow);
    for (QLineEdit* e : {config_, data_, outDir_}) {
        e->setReadOnly(follow);
        e->setToolTip(follow ? tip : QString());
    }
    for (QPushButton* b : findChildren<QPushButton*>())
        if (b->text() == "...") b->setEnabled(!follow);
    updateButtons();
}

void TrainingPanel::connectJob() {
    if (!job_) return;
    connect(job_, &TrainingJob::started, this, [this] {
        followJobRun();
        updateButtons();
        progressLabel_->setText("starting...");
    });
    connect(job_, &TrainingJob::progressed, this, [this](qint64 step, qint64 total, double eta, const QString& phase) {
        progress_->setValue(total > 0 ? int(1000 * step / total) : 0);
        progressLabel_->setText(QStringLiteral("step %1 / %2   %3   ETA %4%5")
                                    .arg(step)
                                    .arg(total)
                                    .arg(phase, formatSeconds(eta), QString(job_->paused() ? "  (paused)" : "")));
    });
    connect(job_, &TrainingJob::pausedChanged, this, [this](bool p) {
        pause_->setChecked(p);
        const QString base = progressLabel_->text().remove("  (paused)");
        progressLabel_->setText(p ? base + "  (paused)" : base);
    });
    connect(job_, &TrainingJob::finished, this, [this](bool ok, const QString& msg) {
        followFields();
        pollNow();
        refreshPreview();
        if (ok) {
            progressLabel_->setText(progressLabel_->text().section("  (", 0, 0) + "  (ended)");
            Q_EMIT message("Training ended: " + job_->spec().outDir);
        } else {
            progressLabel_->setText("failed: " + msg);
            Q_EMIT errorOccurred("Training failed: " + msg);
        }
    });
    if (job_->running()) followJobRun();   // a panel made while a run is going
}

TrainingPanel::~TrainingPanel() { cancelLoads(/*wait=*/true); }

void TrainingPanel::setConfigPath(const QString& p) { config_->setText(p); }
QString TrainingPanel::configPath() const { return config_->text(); }
void TrainingPanel::setDataSpec(const QString& s) { data_->setText(s); }
void TrainingPanel::setOutDir(const QString& d) { outDir_->setText(d); }
QString TrainingPanel::previewCaption() const { return previewCaption_->text(); }
QString TrainingPanel::previewBoxText() const { return previewLabel_->text(); }
void TrainingPanel::setModel(const QString& m) {
    const int i = model_->findData(m);
    if (i >= 0) model_->setCurrentIndex(i);
}
QString TrainingPanel::model() const { return model_->currentData().toString(); }
QString TrainingPanel::progressText() const { return progressLabel_->text(); }
int TrainingPanel::progressValue() const { return progress_->value(); }

QString TrainingPanel::runPath(int i) const {
    return i >= 0 && i < runCount() ? runs_[size_t(i)]->follower->path() : QString();
}

QString TrainingPanel::runStatus(int i) const {
    return i >= 0 && i < runCount() ? runs_[size_t(i)]->follower->status() : QString();
}

int TrainingPanel::nextRunIndex() const {
    int next = 0;
    for (const auto& r : runs_) next = std::max(next, r->index + 1);
    return next;
}

void TrainingPanel::updateButtons() {
    const bool running = job_ && job_->running();
    const bool available = job_ && job_->available();
    start_->setEnabled(available && !running && !followingOpened_);
    resume_->setEnabled(available && !running && !followingOpened_);
    const QString busy = followingOpened_ ? QStringLiteral("The form shows a followed run: Close runs to start one") : QString();
    if (available) {
        start_->setToolTip(busy);
        resume_->setToolTip(busy.isEmpty() ? QStringLiteral("Continue the stopped run in the output directory from its checkpoint") : busy);
    }
    pause_->setEnabled(running);
    stop_->setEnabled(running);
    if (!running) pause_->setChecked(false);
    if (!available) start_->setToolTip("Training is not available in this build");
}

void TrainingPanel::startRun(bool resume) {
    if (!job_) return;
    TrainingSpec spec;
    spec.configPath = config_->text().trimmed();
    spec.dataSpec = data_->text().trimmed();
    spec.outDir = outDir_->text().trimmed();
    spec.resume = resume;
    spec.model = model();
    if (spec.dataSpec.isEmpty()) {
        Q_EMIT errorOccurred("Choose a dataset for the run.");
        return;
    }
    if (!spec.outDir.isEmpty() && !QDir().mkpath(spec.outDir)) {
        Q_EMIT errorOccurred("Cannot create the run directory " + spec.outDir);
        return;
    }
    QString err;
    if (!job_->start(spec, &err)) {
        Q_EMIT errorOccurred(err);
        return;
    }
    Q_EMIT message(QStringLiteral("Training %1 in %2").arg(resume ? "resumed" : "started", spec.outDir));
}

void TrainingPanel::followJobRun() {
    // The job's run is run 0 (solid); replace an earlier live entry (a resumed run's log is
    // read again from its first row).
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
        if ((*it)->live) {
            clearRunCharts(**it);
            runs_.erase(it);
            break;
        }
    }
    auto run = std::make_unique<Run>();
    run->live = true;
    run->follower = std::make_shared<RunFollower>(job_->runLogPath());
    bool zeroTaken = false;
    for (const auto& r : runs_) zeroTaken |= r->index == 0;
    run->index = zeroTaken ? nextRunIndex() : 0;
    run->label = "training: " + QFileInfo(job_->spec().outDir).fileName();
    charts_->setRunLabel(run->index, run->label);
    runs_.push_back(std::move(run));
    rebuildRunList();
    followFields();
    Q_EMIT runsChanged();
}

bool TrainingPanel::openRun(const QString& path, QString* error) {
    auto run = std::make_unique<Run>();
    run->follower = std::make_shared<RunFollower>(path);
    RunFollower::Update u;
    bool async = false;
    try {
        run->follower->open(/*mustExist=*/true);
        async = run->follower->pendingRows() >= kAsyncRows;
        if (!async) u = run->follower->poll();
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    run->index = nextRunIndex();
    const QFileInfo fi(path);
    run->label = fi.dir().dirName() + "/" + fi.fileName();
    // Two runs in folders of the same name (runs/xtra_1, shots/xtra_1) would share a legend
    // label: take more of the path, then a number.
    const auto taken = [this](const QString& l) {
        return std::any_of(runs_.begin(), runs_.end(), [&](const auto& r) { return r->label == l; });
    };
    QDir up = fi.dir();
    for (int depth = 0; depth < 3 && taken(run->label) && up.cdUp(); ++depth) run->label = up.dirName() + "/" + run->label;
    for (int k = 2; taken(run->label); ++k) run->label = QStringLiteral("%1 (%2)").arg(fi.dir().dirName() + "/" + fi.fileName()).arg(k);
    charts_->setRunLabel(run->index, run->label);
    if (async) startLoading(*run);
    else appendRunPoints(*run, u.rows);
    runs_.push_back(std::move(run));
    rebuildRunList();
    followFields();
    showFollowedProgress();
    Q_EMIT message("Opened run " + path);
    Q_EMIT runsChanged();
    // The first opened run (with no run of the job's to show) gets its model's preview.
    if (runs_.size() == 1 && !(job_ && !job_->spec().outDir.isEmpty())) refreshPreview();
    return true;
}

void TrainingPanel::closeRuns() {
    cancelLoads(/*wait=*/false);   // a worker still reading drops what it read
    for (auto it = runs_.begin(); it != runs_.end();) {
        if ((*it)->live && job_ && job_->running()) {
            ++it;
            continue;
        }
        clearRunCharts(**it);
        it = runs_.erase(it);
    }
    for (widgets::LiveChart* c : charts_->charts()) c->setPlaceholder(QString());
    if (runs_.empty()) {   // the preview was the closed runs'
        preview_ = QImage();
        previewFirstTried_ = -1;
        previewLabel_->setPixmap(QPixmap());
        previewLabel_->setText(QStringLiteral("no preview yet"));
        setPreviewCaption(QString());
    }
    rebuildRunList();
    followFields();
    Q_EMIT runsChanged();
}

QString TrainingPanel::runListText(int i) const {
    return i >= 0 && i < runList_->count() ? runList_->item(i)->text() : QString();
}

void TrainingPanel::rebuildRunList() {
    runList_->clear();
    for (const auto& r : runs_) {
        QString status = r->follower->status();
        if (r->load) status += QStringLiteral(", reading");
        if (r->follower->worldSize() > 1) status += QStringLiteral(", %1 ranks").arg(r->follower->worldSize());
        QString text = QStringLiteral("%1  [%2]  %3").arg(r->label, status, r->follower->path());
        if (r->follower->status() == "dead") text += "  - " + r->follower->statusMessage();
        if (!r->error.isEmpty()) text += "  - " + r->error;
        auto* item = new QListWidgetItem(text, runList_);
        item->setForeground(widgets::runColor(r->index));
    }
}

void TrainingPanel::pollNow() {
    bool changed = false, listDirty = false;
    for (auto& r : runs_) {
        if (r->load) continue;   // a worker reads its first rows (loadFinished polls it then)
        // Finished and failed logs are polled too (a stat() unless the file was replaced): a
        // resumed run replaces a stopped run's log, and the job's follower may have opened the
        // old log just before its trainer replaced it.
        try {
            RunFollower::Update u = r->follower->poll();
            if (u.reset) {
                clearRunCharts(*r);
                charts_->setRunLabel(r->index, r->label);
            }
            appendRunPoints(*r, u.rows);
            // A run still being written gives the x axes headroom (they then hold still for a
            // while and a refresh re-decimates only each line's last pixel columns).
            charts_->setRunLive(r->index, r->follower->status() == QLatin1String("running"));
            changed |= !u.rows.isEmpty();
            if (u.statusChanged || u.opened) listDirty = true;
            if (!r->error.isEmpty()) {
                r->error.clear();
                listDirty = true;
            }
        } catch (const std::exception& e) {
            const QString err = QString::fromStdString(e.what());
            if (err != r->error) {
                r->error = err;
                listDirty = true;
                Q_EMIT message("Run log " + r->follower->path() + ": " + err);
            }
        }
    }
    if (listDirty) rebuildRunList();
    if (changed || listDirty) showFollowedProgress();
    // No preview yet: draw one as soon as the run's first checkpoint (or model) appears rather
    // than at the next 15 s tick; tried once per file version.
    if (preview_.isNull() && !previewBusy_) {
        const QString dir = previewDir();
        qint64 newest = -1;
        for (const char* f : {"checkpoint.h5", "model.h5"}) {
            const QFileInfo fi(QDir(dir).filePath(f));
            if (!dir.isEmpty() && fi.isFile()) newest = std::max(newest, fi.lastModified().toMSecsSinceEpoch());
        }
        if (newest >= 0 && newest != previewFirstTried_) {
            previewFirstTried_ = newest;
            refreshPreview();
        }
    }
    Q_EMIT polled(changed || listDirty);
}

// "   2 ranks: 310 | 305 img/s" for a distributed run, "" otherwise.
static QString distributedText(const RunFollower& f) {
    if (f.worldSize() <= 1) return {};
    QString t = QStringLiteral("   %1 ranks").arg(f.worldSize());
    const QVector<double> tp = f.rankThroughput();
    if (tp.isEmpty()) return t;
    QStringList parts;
    for (double v : tp) parts << QString::number(v, 'f', v < 10 ? 1 : 0);
    return t + ": " + parts.join(" | ") + " " + f.throughputUnit();
}

void TrainingPanel::showFollowedProgress() {
    // The job's run reports through its progress signal; otherwise the first followed run
    // that is still being written (another process), else the first opened one.
    if (job_ && job_->running()) return;
    const Run* pick = nullptr;
    for (const auto& r : runs_) {
        if (r->live || r->load || !r->follower->isOpen()) continue;
        if (!pick || (r->follower->status() == "running" && pick->follower->status() != "running")) pick = r.get();
    }
    if (!pick) return;
    const RunFollower::Progress p = pick->follower->progress();
    if (p.step < 0) return;
    const QString status = pick->follower->status();
    QString text = QStringLiteral("%1: step %2").arg(pick->label).arg(p.step);
    if (p.total > 0) {
        text += QStringLiteral(" / %1").arg(p.total);
        progress_->setFormat(QStringLiteral("%p%"));
        progress_->setValue(int(1000 * std::min(p.step, p.total) / p.total));
    } else {   // no total in the log: no percentage to show, but an ended run is complete
        progress_->setFormat(QStringLiteral("step %1").arg(p.step));
        progress_->setValue(status == "running" || status == "dead" ? 0 : 1000);
    }
    if (status == "running") text += QStringLiteral("   ETA %1").arg(formatSeconds(p.eta));
    else if (status == "dead") text += QStringLiteral("  (dead: %1)").arg(pick->follower->statusMessage());
    else text += QStringLiteral("  (%1)").arg(status);
    text += distributedText(*pick->follower);
    progressLabel_->setText(text);
}

QString TrainingPanel::previewDir() const {
    if (job_ && !job_->spec().outDir.isEmpty()) return job_->spec().outDir;
    if (!runs_.empty()) return QFileInfo(runs_.front()->follower->path()).absolutePath();
    return {};
}

void TrainingPanel::refreshPreview() {
    if (previewBusy_) return;
    const QString dir = previewDir();
    if (dir.isEmpty()) return;
    const bool jobRun = job_ && !job_->spec().outDir.isEmpty();
    std::string family = jobRun ? job_->spec().model.toStdString() : std::string();
    std::string dataSpec = jobRun ? job_->spec().dataSpec.toStdString() : std::string();
    if (!jobRun) {
        // An opened run: its run log says which trainer wrote it (and on which dataset); read
        // from the follower's open reader (loading the whole log here would stall the UI thread
        // on a long run).
        const RunFollower& fl = *runs_.front()->follower;
        family = fl.family().isEmpty() ? std::string("letr") : fl.family().toStdString();
        dataSpec = fl.dataSpec();
    }
    const ModelFamily* f = findFamily(family);
    if (!f || !f->training.preview) {
        // The box and its caption say the same: this family has no preview (not "not yet").
        preview_ = QImage();
        previewLabel_->setPixmap(QPixmap());
        previewLabel_->setText(QStringLiteral("no preview"));
        setPreviewCaption(QStringLiteral("no preview for %1 runs").arg(f ? f->title : QString::fromStdString(family)));
        return;
    }
    previewBusy_ = true;
    if (preview_.isNull()) previewLabel_->setText(QStringLiteral("drawing the preview..."));
    runAsync(
        this, [preview = f->training.preview, d = dir.toStdString(), dataSpec] { return preview(d, dataSpec); },
        [this](Outcome<TrainingPreview> r) {
            previewBusy_ = false;
            if (!r.ok()) {
                if (preview_.isNull()) previewLabel_->setText(QStringLiteral("no preview"));
                setPreviewCaption("no preview: " + r.error);
            } else {
                preview_ = r.value.image;
                previewLabel_->setPixmap(QPixmap::fromImage(r.value.image)
                                             .scaled(previewLabel_->size(), Qt::KeepAspectRatio,
                                                     Qt::SmoothTransformation));
                setPreviewCaption(r.value.caption);
            }
            Q_EMIT previewUpdated();
        });
}

} // namespace glimpse::app
