// Results browser GUI test (issue 53, parts 2-4): the real MainWindow and its Results dock under
// Xvfb (lavapipe), on small results files written here with the core writer
// (core/results/results.h) from known lines, labels and episodes. Drives the dock: open by kind,
// sort, filter through chart clicks, select (the viewport's pixels: matched lines green, false
// positives red, missed ground truth dashed yellow), compare two files (sorted by the largest
// regression, both overlays side by side), export CSV and a contact sheet, moved sources and a
// foreign file refused with its name.
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QItemSelectionModel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "app/mainwindow.h"
#include "app/results/overlay.h"
#include "app/results/results_panel.h"
#include "app/results/results_table.h"
#include "app/results/summary_chart.h"
#include "app/results/thumbnails.h"
#include "core/data/fewshot.h"
#include "core/eval/line_metrics.h"
#include "core/io/image.h"
#include "core/results/results.h"
#include "widgets/viewport.h"

using glimpse::app::MainWindow;
using glimpse::app::ResultsPanel;
using glimpse::widgets::ImageViewport;
namespace res = glimpse::results;
namespace ev = glimpse::eval;
namespace rv = glimpse::app::results_view;

namespace {

constexpr int kW = 200, kH = 150, kSamples = 6;

// Ground truth of every LETR sample: two horizontal lines and a vertical one.
std::vector<ev::GtLine> gtLines() { return {{20, 20, 180, 20}, {20, 130, 180, 130}, {100, 45, 100, 105}}; }

// Sample k of file A: GT 0 found (0.9), k false positives (0.8 down), GT 1 found at 0.3 (under
// the display score 0.5: missed there). File B ("better"): no false positives, except sample 2,
// where it misses GT 0 too (its regression).
std::vector<ev::ScoredLine> predictions(int k, bool fileB) {
    std::vector<ev::ScoredLine> p;
    if (!(fileB && k == 2)) p.push_back({20, 20, 180, 20, 0.9f});
    const int fps = fileB ? (k == 2 ? 3 : 0) : k;
    for (int j = 0; j < fps; ++j) p.push_back({30.f + 12 * j, 60, 60.f + 12 * j, 100, 0.8f - 0.05f * j});
    p.push_back({20, 130, 180, 130, 0.3f});
    return p;
}

std::string writeLetr(const QString& dir, const QString& name, const QString& imageDir, bool fileB) {
    const std::vector<double> thresholds{5, 10, 15};
    std::vector<res::LetrRowInfo> rows{{"fine_1", "fine 1", false}, {"lsd", "LSD", true}};
    res::ResultsHeader h;
    h.type = res::ResultsType::Letr;
    h.family = "letr";
    h.command = "test_results_browser";
    h.source.spec = imageDir.toStdString();
    h.source.root = imageDir.toStdString();
    const std::string path = (dir + "/" + name).toStdString();
    auto w = res::ResultsWriter::createLetr(path, h, rows, thresholds);
    std::vector<ev::LineEvaluator> evals(rows.size(), ev::LineEvaluator(thresholds));
    for (int k = 0; k < kSamples; ++k) {
        res::LetrSampleIn s;
        s.index = k;
        s.name = "img" + std::to_string(k);
        s.path = (imageDir + QStringLiteral("/img%1.png").arg(k)).toStdString();
        s.width = kW;
        s.height = kH;
        s.gt = gtLines();
        for (size_t r = 0; r < rows.size(); ++r) {
            res::LetrSampleIn::Row row;
            row.lines = r == 0 ? predictions(k, fileB) : std::vector<ev::ScoredLine>{{100, 45, 100, 105, 5.0f}};
            row.matches = evals[r].add(row.lines, s.gt, kW, kH);
            s.rows.push_back(std::move(row));
        }
        w->add(s);
    }
    res::LetrSummary sum;
    sum.thresholds = thresholds;
    sum.rows = rows;
    for (auto& e : evals) sum.metrics.push_back(e.compute());
    w->finish(sum, res::Status::Complete);
    return path;
}

void writeImages(const QString& dir) {
    QDir().mkpath(dir);
    for (int k = 0; k < kSamples; ++k) {
        cv::Mat img(kH, kW, CV_8UC3, cv::Scalar(50, 50, 50));
        glimpse::saveImagePNG((dir + QStringLiteral("/img%1.png").arg(k)).toStdString(), img);
    }
}

// 9 images of 3 classes; sample 1 (a cat) is predicted dog, 5 (a dog) fox, 7 (a fox) cat.
std::string writeClassification(const QString& dir) {
    const QString imgs = dir + "/cls";
    QDir().mkpath(imgs);
    const std::vector<int64_t> labels{0, 0, 0, 1, 1, 1, 2, 2, 2}, pred{0, 1, 0, 1, 1, 2, 2, 0, 2};
    res::ResultsHeader h;
    h.type = res::ResultsType::Classification;
    h.family = "coat";
    h.source.spec = imgs.toStdString();
    h.source.root = imgs.toStdString();
    h.source.split = "val";
    const std::vector<std::string> names{"cat", "dog", "fox"};
    const std::string path = (dir + "/cls.h5").toStdString();
    auto w = res::ResultsWriter::createClassification(path, h, names);
    res::ClassSummary sum;
    sum.classNames = names;
    sum.confusion.assign(9, 0);
    for (size_t i = 0; i < labels.size(); ++i) {
        const QString p = imgs + QStringLiteral("/c%1.png").arg(i);
        glimpse::saveImagePNG(p.toStdString(), cv::Mat(48, 64, CV_8UC3, cv::Scalar(40 * double(i % 3), 90, 140)));
        res::ClassSampleIn s;
        s.index = int64_t(i);
        s.path = p.toStdString();
        s.label = labels[i];
        s.top5 = {pred[i], (pred[i] + 1) % 3, (pred[i] + 2) % 3};
        s.top5Prob = {0.6f, 0.3f, 0.1f};
        s.labelProb = labels[i] == pred[i] ? 0.6f : 0.3f;
        w->add(s);
        ++sum.confusion[size_t(labels[i] * 3 + pred[i])];
        sum.correct += labels[i] == pred[i];
    }
    sum.samples = int64_t(labels.size());
    sum.accuracy = double(sum.correct) / double(sum.samples);
    sum.top5Correct = sum.samples;
    sum.top5Accuracy = 1.0;
    w->finish(sum, res::Status::Complete);
    return path;
}

// Six 3-way 1-shot 2-query episodes of the procedural novel split (the real sampler);
// episode e gets e % 3 queries wrong.
std::string writeFewShot(const QString& dir) {
    auto splits = glimpse::data::openFewShotDataset("procedural", 32);
    glimpse::data::EpisodeSampler sampler(splits.novel, "novel");
    res::FewShotSetting st;
    st.ways = 3;
    st.shots = 1;
    st.queries = 2;
    st.episodes = 6;
    res::ResultsHeader h;
    h.type = res::ResultsType::FewShot;
    h.family = "constellation";
    h.source.spec = "procedural";
    h.source.split = "novel";
    h.config = {{"image_size", 32}};
    const std::string path = (dir + "/fewshot.h5").toStdString();
    auto w = res::ResultsWriter::createFewShot(path, h, {st}, {});
    std::vector<double> accs;
    for (int e = 0; e < 6; ++e) {
        const auto ep = sampler.sample({3, 1, 2}, 0, e);
        res::EpisodeIn in;
        in.episode = e;
        in.classes = ep.classes;
        in.support = ep.support;
        in.query = ep.query;
        int wrong = e % 3;
        for (size_t q = 0; q < ep.query.size(); ++q) {
            const int64_t way = int64_t(q) / 2;
            in.predicted.push_back(wrong > 0 ? (way + 1) % 3 : way);
            if (wrong > 0) --wrong;
        }
        in.accuracy = 1.0 - double(e % 3) / 6.0;
        accs.push_back(in.accuracy);
        w->add(in);
    }
    res::FewShotSummaryRow row;
    row.setting = st;
    row.episodesDone = 6;
    for (double a : accs) row.mean += a / 6.0;
    w->finish({row}, res::Status::Complete);
    return path;
}

bool waitFrames(ImageViewport* vp, int extra) {
    const int target = vp->framesDrawn() + extra;
    return QTest::qWaitFor([&] {
        vp->requestRedraw();
        return vp->framesDrawn() >= target;
    }, 20000);
}

// The frame's colour at image point (ix, iy) (Xvfb: device pixel ratio 1).
QColor pixelAt(ImageViewport* vp, const QImage& frame, double ix, double iy) {
    double sx, sy;
    vp->view().imageToScreen(ix, iy, frame.width(), frame.height(), sx, sy);
    return frame.pixelColor(int(std::floor(sx)), int(std::floor(sy)));
}

bool near(const QColor& c, const float* rgb, int tol = 60) {
    return std::abs(c.red() - rgb[0] * 255) < tol && std::abs(c.green() - rgb[1] * 255) < tol &&
           std::abs(c.blue() - rgb[2] * 255) < tol;
}

} // namespace

class TestResultsBrowser : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString imageDir_, letrA_, letrB_, cls_, fewshot_;

    ResultsPanel* openIn(MainWindow& w, const QString& path) {
        ResultsPanel* panel = w.resultsPanel();
        QSignalSpy opened(panel, &ResultsPanel::opened);
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        w.openImage(path);   // by kind: .h5 -> identified in a child process -> the Results dock
        if (!QTest::qWaitFor([&] { return opened.count() + failed.count() > 0; }, 30000)) return nullptr;
        if (!failed.isEmpty()) {
            qWarning() << failed.first().value(1).toString();
            return nullptr;
        }
        return panel;
    }

    bool selectAndWait(ResultsPanel* p, int64_t sample) {
        QSignalSpy shown(p, &ResultsPanel::shown);
        p->selectSample(sample);
        return shown.wait(20000) || p->shownSample() == sample;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        imageDir_ = dir_.path() + "/images";
        writeImages(imageDir_);
        letrA_ = QString::fromStdString(writeLetr(dir_.path(), "a.h5", imageDir_, false));
        letrB_ = QString::fromStdString(writeLetr(dir_.path(), "b.h5", imageDir_, true));
        cls_ = QString::fromStdString(writeClassification(dir_.path()));
        fewshot_ = QString::fromStdString(writeFewShot(dir_.path()));
    }

    // The overlay itself: colours, counts and dashes, without a window.
    void letrOverlayCounts() {
        const auto f = res::ResultsFile::open(letrA_.toStdString());
        const auto o = rv::letrOverlay(f->lines(0, 3), f->gtLines(3), 1, 0.5f, kW, kH);
        QCOMPARE(o.tp, int64_t(1));
        QCOMPARE(o.fp, int64_t(3));
        QCOMPARE(o.missed, int64_t(2));   // GT 1 (found at 0.3 only) and GT 2
        QCOMPARE(int(o.fpLines.size()), 3);
        // Dashes: more than one segment per missed line, all yellow.
        int yellow = 0;
        for (const auto& s : o.lines) yellow += s.r == rv::kMissedRgb[0] && s.g == rv::kMissedRgb[1];
        QVERIFY(yellow > 4);
        // Agrees with the reader's own counts.
        const auto c = f->counts(0, 1, 3, 0.5f);
        QCOMPARE(c.tp, o.tp);
        QCOMPARE(c.fp, o.fp);
        QCOMPARE(c.missed, o.missed);
    }

    void letrOpenSortFilterSelect() {
        MainWindow w;
        w.resize(1280, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY2(w.viewport()->vulkanError().isEmpty(), qPrintable(w.viewport()->vulkanError()));
        ResultsPanel* p = openIn(w, letrA_);
        QVERIFY(p);
        QCOMPARE(p->file()->size(), int64_t(kSamples));
        auto* table = p->tableModel();
        QCOMPARE(table->rowCount(), kSamples);
        QCOMPARE(p->rowBox()->currentText(), QString("fine 1"));
        // Default order: the lowest sample sAP first (the most false positives).
        QCOMPARE(table->sortColumn(), table->columnIndex("sAP"));
        QCOMPARE(table->sampleAt(0), int64_t(5));
        // The counts at the display score come from a worker.
        QSignalSpy counts(p, &ResultsPanel::countsReady);
        p->setMinScore(0.5);
        QVERIFY(counts.wait(20000));
        const int fpCol = table->columnIndex("FP");
        QCOMPARE(table->data(table->index(table->rowOf(4), fpCol)).toString(), QString("4"));
        // Sort by FP descending through the header, then ascending.
        p->tableView()->sortByColumn(fpCol, Qt::DescendingOrder);
        QCOMPARE(table->sampleAt(0), int64_t(5));
        p->tableView()->sortByColumn(fpCol, Qt::AscendingOrder);
        QCOMPARE(table->sampleAt(0), int64_t(0));
        // Name filter.
        p->filterEdit()->setText("img3");
        QCOMPARE(table->rowCount(), 1);
        p->filterEdit()->clear();
        QCOMPARE(table->rowCount(), kSamples);
        // A chart click: the PR legend's "fine 1" entry keeps the row and lists the samples whose
        // sAP is below the row's overall sAP.
        auto* chart = p->chart();
        QCOMPARE(chart->kind(), glimpse::app::SummaryChart::Kind::PR);
        QTest::mouseClick(chart, Qt::LeftButton, {}, chart->legendCentre(0).toPoint());
        QVERIFY(!table->pickDescription().isEmpty());
        QVERIFY(table->rowCount() > 0 && table->rowCount() < kSamples);
        const double overall = p->file()->letrSummary().metrics[0].sAP[1];
        for (int r = 0; r < table->rowCount(); ++r)
            QVERIFY(p->file()->sampleAp(0, 1)[size_t(table->sampleAt(r))] < overall);
        // The thumbnail grid follows the table and fills from workers.
        QCOMPARE(p->thumbnailModel()->rowCount(), table->rowCount());
        QVERIFY(QTest::qWaitFor([&] { return p->thumbnailModel()->cached(table->sampleAt(0)); }, 20000));
        p->clearPick();
        QCOMPARE(table->rowCount(), kSamples);

        // Select sample 3: the viewport draws its overlay.
        QVERIFY(selectAndWait(p, 3));
        QCOMPARE(w.viewport()->image().width, kW);
        QCOMPARE(int(p->shownFalsePositives().size()), 3);
        QVERIFY(waitFrames(w.viewport(), 3));
        const QImage frame = w.viewport()->grabFrame();
        QVERIFY(!frame.isNull());
        QVERIFY2(near(pixelAt(w.viewport(), frame, 100, 20), rv::kTpRgb), "matched line green");
        QVERIFY2(near(pixelAt(w.viewport(), frame, 52.5, 90), rv::kFpRgb), "false positive red");
        QVERIFY2(near(pixelAt(w.viewport(), frame, 100, 45 + 1.0), rv::kMissedRgb), "missed ground truth yellow");
        // Dashed: along the missed vertical line both yellow and background pixels.
        int yellow = 0, other = 0;
        for (double y = 46; y < 104; y += 0.5) {
            const QColor c = pixelAt(w.viewport(), frame, 100, y);
            (near(c, rv::kMissedRgb) ? yellow : other) += 1;
        }
        QVERIFY2(yellow > 10 && other > 10, qPrintable(QStringLiteral("yellow %1 other %2").arg(yellow).arg(other)));
        QCOMPARE(p->selectedSample(), int64_t(3));

        // Compare with file B: the largest regression (sample 2) first; both overlays side by side.
        QSignalSpy cmp(p, &ResultsPanel::compareOpened);
        p->openCompare(letrB_);
        QVERIFY(cmp.wait(20000));
        const int delta = table->columnIndex(QStringLiteral("ΔsAP"));
        QVERIFY(delta >= 0);
        QCOMPARE(table->sortColumn(), delta);
        QCOMPARE(table->sampleAt(0), int64_t(2));
        QVERIFY(table->column(delta).values[2] < 0);
        QVERIFY(selectAndWait(p, 2));
        QVERIFY(w.compareViewport()->isVisible());
        QCOMPARE(w.compareViewport()->image().width, kW);
        // B on sample 2: GT 0 missed (dashed), three false positives.
        int bYellow = 0, bRed = 0;
        for (const auto& l : w.compareViewport()->scene().lines) {
            bYellow += l.r == rv::kMissedRgb[0] && l.g == rv::kMissedRgb[1];
            bRed += l.r == rv::kFpRgb[0] && l.g == rv::kFpRgb[1];
        }
        QVERIFY(bYellow > 0);
        QCOMPARE(bRed, 3);

        // Export: the filtered table as CSV and a contact sheet of the selected rows.
        p->filterEdit()->setText("img");
        const QString csv = dir_.path() + "/table.csv";
        QSignalSpy exported(p, &ResultsPanel::exported);
        p->exportCsv(csv);
        QVERIFY(exported.wait(20000));
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(f.readAll()).trimmed().split('\n');
        QCOMPARE(lines.size(), kSamples + 1);
        QVERIFY(lines[0].startsWith("#,name,GT,sAP,TP,FP,missed"));
        QVERIFY(lines[1].startsWith("2,img2,"));   // the table's order
        auto* sel = p->tableView()->selectionModel();
        sel->clearSelection();
        for (int r : {0, 1, 2})
            sel->select(table->index(r, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
        QCOMPARE(int(p->selectedSamples().size()), 3);
        const QString sheet = dir_.path() + "/sheet.png";
        p->exportContactSheet(sheet);
        QVERIFY(exported.wait(20000));
        const cv::Mat png = cv::imread(sheet.toStdString(), cv::IMREAD_COLOR);
        QVERIFY(!png.empty());
        QVERIFY(png.cols >= 2 * 256 && png.rows >= 2 * 256);
        // Green matched lines drawn on the tiles (BGR here).
        cv::Mat green;
        cv::inRange(png, cv::Scalar(0, 180, 0), cv::Scalar(110, 255, 110), green);
        QVERIFY(cv::countNonZero(green) > 100);
    }

    void classificationConfusionCell() {
        MainWindow w;
        w.resize(1280, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ResultsPanel* p = openIn(w, cls_);
        QVERIFY(p);
        auto* chart = p->chart();
        QCOMPARE(chart->kind(), glimpse::app::SummaryChart::Kind::Confusion);
        QTest::mouseClick(chart, Qt::LeftButton, {}, chart->cellCentre(0, 1).toPoint());
        auto* table = p->tableModel();
        QCOMPARE(table->rowCount(), 1);
        QCOMPARE(table->sampleAt(0), int64_t(1));
        QVERIFY(table->pickDescription().contains("cat") && table->pickDescription().contains("dog"));
        QVERIFY(selectAndWait(p, 1));
        // Wrong: a red frame, and the label and top-5 in the overlay rows.
        bool redFrame = false, labelRow = false;
        for (const auto& l : w.viewport()->scene().lines) redFrame |= l.r == rv::kFpRgb[0] && l.g == rv::kFpRgb[1];
        for (const auto& r : w.viewport()->scene().overlayRows) labelRow |= r.first == "label" && r.second == "cat";
        QVERIFY(redFrame && labelRow);
        QVERIFY(waitFrames(w.viewport(), 3));
        const QImage frame = w.viewport()->grabFrame();
        QVERIFY(near(pixelAt(w.viewport(), frame, 63.0, 24), rv::kFpRgb));
    }

    void fewShotHistogramBin() {
        MainWindow w;
        w.resize(1280, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ResultsPanel* p = openIn(w, fewshot_);
        QVERIFY(p);
        auto* chart = p->chart();
        QCOMPARE(chart->kind(), glimpse::app::SummaryChart::Kind::Histogram);
        // Accuracies 1, 5/6, 4/6 (twice each): bins 9, 8 and 6 of 10.
        QCOMPARE(chart->binCounts()[9], int64_t(2));
        QTest::mouseClick(chart, Qt::LeftButton, {}, chart->binCentre(6).toPoint());
        auto* table = p->tableModel();
        QCOMPARE(table->rowCount(), 2);
        QVERIFY(selectAndWait(p, table->sampleAt(0)));
        // The mosaic: 3 rows of 1 support + 2 queries; two queries framed red.
        int red = 0;
        for (const auto& l : w.viewport()->scene().lines) red += l.r == rv::kFpRgb[0] && l.g == rv::kFpRgb[1];
        QCOMPARE(red, 2 * 4);   // four edges each
    }

    void movedSourcesAndForeignFiles() {
        // A copy of file A whose images moved: the dock says which and takes the new folder.
        const QString moved = dir_.path() + "/moved_images";
        QVERIFY(QDir().rename(imageDir_, moved));
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ResultsPanel* p = openIn(w, letrA_);
        QVERIFY(p);
        QVERIFY(!p->sourcesMessage().isEmpty());
        QVERIFY2(p->problemText().contains("img0") || p->problemText().contains(imageDir_),
                 qPrintable(p->problemText()));
        QVERIFY(p->locateButton()->isVisible());
        QSignalSpy opened(p, &ResultsPanel::opened);
        QSignalSpy msg(p, &ResultsPanel::message);
        p->relocateSources(moved);
        QVERIFY(QTest::qWaitFor([&] { return p->sourcesMessage().isEmpty() && !p->busy(); }, 20000));
        QVERIFY(!p->locateButton()->isVisible());
        QVERIFY(selectAndWait(p, 0));
        QCOMPARE(w.viewport()->image().width, kW);
        QVERIFY(QDir().rename(moved, imageDir_));

        // A foreign file: refused with its name.
        const QString foreign = dir_.path() + "/foreign.h5";
        QFile ff(foreign);
        QVERIFY(ff.open(QIODevice::WriteOnly));
        ff.write("not an HDF5 file at all");
        ff.close();
        QSignalSpy refused(p, &ResultsPanel::openFailed);
        p->open(foreign);
        QVERIFY(refused.wait(20000));
        QVERIFY2(refused.first().value(1).toString().contains("foreign.h5"), qPrintable(refused.first().value(1).toString()));
        QVERIFY(w.lastError().contains("foreign.h5"));
        QCOMPARE(p->file()->path(), letrA_.toStdString());   // the open file stays
    }
};

QTEST_MAIN(TestResultsBrowser)
#include "test_results_browser.moc"
