// core/results: results files (issue 53). Small synthetic records through the real writer and
// reader: LETR records whose per-sample matches come from eval::LineEvaluator and add up to
// its pooled summary exactly, kept-line truncation, a writer killed mid-way (fork + _exit),
// refused files (missing, foreign, other kind, other version, truncated), moved sources and
// the classification / few-shot summaries.
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <opencv2/imgcodecs.hpp>

#include "core/error.h"
#include "core/eval/line_metrics.h"
#include "core/h5/h5.h"
#include "core/results/results.h"
#include "tests/support.h"

using namespace glimpse;
using namespace glimpse::results;
namespace fs = std::filesystem;

namespace {

// Sample i of a deterministic synthetic LETR eval: GT lines and, per row, noisy copies of some
// of them plus random lines (row r is noisier as r grows).
struct Synthetic {
    std::vector<eval::GtLine> gt;
    std::vector<std::vector<eval::ScoredLine>> rows;
    int width = 0, height = 0;
};

Synthetic synthetic(int64_t i, size_t numRows, int predsPerRow) {
    std::mt19937_64 rng(uint64_t(1000 + i));
    std::uniform_real_distribution<float> u(0, 1);
    Synthetic s;
    s.width = 96 + int(i % 3) * 32;
    s.height = 80 + int(i % 2) * 40;
    const int ngt = i == 3 ? 0 : int(i % 4) + 2;   // sample 3 has no ground truth
    for (int g = 0; g < ngt; ++g)
        s.gt.push_back({u(rng) * s.width, u(rng) * s.height, u(rng) * s.width, u(rng) * s.height});
    for (size_t r = 0; r < numRows; ++r) {
        std::vector<eval::ScoredLine> p;
        const float noise = 1.0f + 3.0f * float(r);
        for (int k = 0; k < predsPerRow; ++k) {
            eval::ScoredLine l;
            if (!s.gt.empty() && k % 2 == 0) {
                const auto& g = s.gt[size_t(k / 2) % s.gt.size()];
                l = {g.x1 + noise * (u(rng) - 0.5f), g.y1 + noise * (u(rng) - 0.5f), g.x2 + noise * (u(rng) - 0.5f),
                     g.y2 + noise * (u(rng) - 0.5f), 0};
            } else {
                l = {u(rng) * s.width, u(rng) * s.height, u(rng) * s.width, u(rng) * s.height, 0};
            }
            l.score = float(int(u(rng) * 50)) / 50.0f;   // coarse scores: ties across and within images
            p.push_back(l);
        }
        s.rows.push_back(p);
    }
    return s;
}

ResultsHeader header(ResultsType t, const std::string& spec = "procedural:6:1:96x96") {
    ResultsHeader h;
    h.type = t;
    h.command = "test";
    h.family = t == ResultsType::Letr ? "letr" : t == ResultsType::Classification ? "coat" : "constellation";
    h.source.spec = spec;
    return h;
}

// Writes `n` synthetic samples, returns the summary the evaluators computed.
LetrSummary writeLetr(const std::string& path, int64_t n, const WriterOptions& opts, int predsPerRow = 9,
                      bool finish = true) {
    const std::vector<LetrRowInfo> rows = {{"coarse_1", "coarse 1", false}, {"fine_1", "fine 1", false}, {"lsd", "LSD", true}};
    const std::vector<double> th = {5, 10, 15};
    auto w = ResultsWriter::createLetr(path, header(ResultsType::Letr), rows, th, opts);
    std::vector<eval::LineEvaluator> evs(rows.size(), eval::LineEvaluator(th));
    for (int64_t i = 0; i < n; ++i) {
        const Synthetic s = synthetic(i, rows.size(), predsPerRow);
        LetrSampleIn in;
        in.index = i;
        in.name = "procedural/1/" + std::to_string(i);
        in.width = s.width;
        in.height = s.height;
        in.gt = s.gt;
        for (size_t r = 0; r < rows.size(); ++r)
            in.rows.push_back({s.rows[r], evs[r].add(s.rows[r], s.gt, s.width, s.height)});
        w->add(in);
    }
    LetrSummary sum;
    sum.thresholds = th;
    sum.rows = rows;
    for (auto& ev : evs) sum.metrics.push_back(ev.compute());
    if (finish) w->finish(sum, Status::Complete);
    return sum;
}

void writeBytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}
std::string readBytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

} // namespace

class TestResults : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string file(const char* name) { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    // Every prediction kept: the per-sample records reproduce the pooled summary exactly
    // (sAP per threshold, TP / prediction / GT totals) for layers and the baseline alike.
    void letrRecordsAddUpToTheSummary() {
        const std::string path = file("letr.h5");
        const LetrSummary want = writeLetr(path, 7, {});
        auto r = ResultsFile::open(path);
        QCOMPARE(r->type(), ResultsType::Letr);
        QCOMPARE(r->status(), Status::Complete);
        QCOMPARE(r->size(), int64_t(7));
        QCOMPARE(r->letrRows().size(), size_t(3));
        QVERIFY(r->letrRows()[2].baseline);
        QCOMPARE(r->keepLines(), int64_t(-1));
        const LetrSummary& got = r->letrSummary();
        QCOMPARE(got.metrics.size(), size_t(3));
        int64_t gtTotal = 0;
        for (int32_t g : r->gtCount()) gtTotal += g;
        for (size_t row = 0; row < 3; ++row) {
            const eval::LineMetrics& m = want.metrics[row];
            QCOMPARE(got.metrics[row].sAP, m.sAP);   // stored exactly
            QCOMPARE(got.metrics[row].predLines, m.predLines);
            QCOMPARE(gtTotal, m.gtLines);
            int64_t preds = 0;
            for (int32_t p : r->predCount(row)) preds += p;
            QCOMPARE(preds, m.predLines);
            const std::vector<double> re = r->letrRecomputedSap(row);
            for (size_t k = 0; k < 3; ++k) {
                QCOMPARE(re[k], m.sAP[k]);   // bit for bit
                int64_t tp = 0;
                for (int32_t t : r->tpCount(row, k)) tp += t;
                // The pooled curve's last point: recall = TP / GT over all predictions.
                QCOMPARE(tp, int64_t(std::llround(m.curves[k].recall.back() * double(m.gtLines))));
                QCOMPARE(double(tp) / double(m.predLines), m.curves[k].precision.back());
            }
            QVERIFY(m.sAP[0] <= m.sAP[2]);
        }
        QVERIFY(want.metrics[0].sAP[1] > 0.1);   // the synthetic lines do match
        // One sample: lines best first, counts agree with the columns, endpoints within the
        // fixed-point step, missed = GT - TP over all predictions.
        const Synthetic s = synthetic(2, 3, 9);
        const auto lines = r->lines(0, 2);
        QCOMPARE(int64_t(lines.size()), int64_t(r->predCount(0)[2]));
        for (size_t k = 1; k < lines.size(); ++k) QVERIFY(lines[k - 1].score >= lines[k].score);
        const auto gt = r->gtLines(2);
        QCOMPARE(gt.size(), s.gt.size());
        for (size_t g = 0; g < gt.size(); ++g) QVERIFY(std::abs(gt[g].x1 - s.gt[g].x1) < 0.01f);
        for (size_t k = 0; k < 3; ++k) {
            const auto c = r->counts(0, k, 2, -1.0f);
            QVERIFY(c.exact);
            QCOMPARE(c.tp, int64_t(r->tpCount(0, k)[2]));
            QCOMPARE(c.tp + c.fp, int64_t(r->predCount(0)[2]));
            QCOMPARE(c.missed, int64_t(r->gtCount()[2]) - c.tp);
        }
        // The sample without ground truth: every line a false positive, AP 0.
        QCOMPARE(r->gtCount()[3], 0);
        QCOMPARE(r->tpCount(0, 2)[3], 0);
        QCOMPARE(r->sampleAp(0, 2)[3], 0.0f);
        QVERIFY(r->statusLine().find("complete: 7 samples") == 0);
        QCOMPARE(r->sampleName(4), std::string("procedural/1/4"));
        QCOMPARE(r->datasetIndex(4), int64_t(4));
        QCOMPARE(r->samplePath(4), std::string());
    }

    // keep_lines: only the best lines are stored, the per-sample totals still cover all of them.
    void keptLinesAreTheBestOnes() {
        const std::string path = file("letr_keep.h5");
        WriterOptions o;
        o.keepLines = 3;
        const LetrSummary want = writeLetr(path, 5, o);
        auto r = ResultsFile::open(path);
        QCOMPARE(r->keepLines(), int64_t(3));
        for (int64_t i = 0; i < 5; ++i) {
            QCOMPARE(r->lines(1, i).size(), size_t(3));
            QVERIFY(!r->linesComplete(1, i));
        }
        int64_t preds = 0;
        for (int32_t p : r->predCount(1)) preds += p;
        QCOMPARE(preds, want.metrics[1].predLines);
        const auto lines = r->lines(1, 0);
        const auto c = r->counts(1, 1, 0, lines.back().score + 1e-6f);
        QVERIFY(c.exact);   // above the lowest stored score: nothing unstored counts
        QCOMPARE(c.tp + c.fp, int64_t(std::count_if(lines.begin(), lines.end(), [&](const LineRecord& l) {
                                  return l.score >= lines.back().score + 1e-6f;
                              })));
        QVERIFY(!r->counts(1, 1, 0, -1.0f).exact);
    }

    // A writer killed after some flushes: the file opens, says so, holds the flushed samples.
    void killedWriterLeavesAReadablePartialFile() {
        const std::string path = file("killed.h5");
        const pid_t pid = ::fork();
        QVERIFY(pid >= 0);
        if (pid == 0) {
            try {
                WriterOptions o;
                o.flushEvery = 2;
                o.expectedSamples = 10;
                writeLetr(path, 5, o, 9, false);   // returns with the writer destroyed...
            } catch (...) {
                ::_exit(3);
            }
            ::_exit(0);
        }
        int st = 0;
        ::waitpid(pid, &st, 0);
        QCOMPARE(WEXITSTATUS(st), 0);
        // ...which flushes like a clean exit; a kill is tested below by cutting the process
        // short between flushes.
        auto r = ResultsFile::open(path);
        QCOMPARE(r->status(), Status::Running);
        QCOMPARE(r->size(), int64_t(5));
        QVERIFY(r->letrSummary().metrics.empty());

        const std::string path2 = file("killed2.h5");
        const pid_t pid2 = ::fork();
        QVERIFY(pid2 >= 0);
        if (pid2 == 0) {
            const std::vector<LetrRowInfo> rows = {{"fine_1", "fine 1", false}};
            WriterOptions o;
            o.flushEvery = 2;
            o.expectedSamples = 10;
            auto w = ResultsWriter::createLetr(path2, header(ResultsType::Letr), rows, {5, 10, 15}, o);
            eval::LineEvaluator ev({5, 10, 15});
            for (int64_t i = 0; i < 5; ++i) {
                const Synthetic s = synthetic(i, 1, 6);
                LetrSampleIn in;
                in.index = i;
                in.name = std::to_string(i);
                in.width = s.width;
                in.height = s.height;
                in.gt = s.gt;
                in.rows.push_back({s.rows[0], ev.add(s.rows[0], s.gt, s.width, s.height)});
                w->add(in);
            }
            ::_exit(0);   // no destructor, no close: what SIGKILL leaves
        }
        ::waitpid(pid2, &st, 0);
        auto k = ResultsFile::open(path2);
        QCOMPARE(k->status(), Status::Running);
        QCOMPARE(k->size(), int64_t(4));   // flushed after samples 2 and 4; the 5th was lost
        QCOMPARE(k->expectedSamples(), int64_t(10));
        QVERIFY2(k->statusLine().find("partial: 4 of 10 samples") == 0, k->statusLine().c_str());
        QCOMPARE(k->lines(0, 3).size(), size_t(6));
    }

    void badFilesAreRefusedByName() {
        using testing::errorOf;
        const std::string missing = file("nope.h5");
        QVERIFY(testing::contains(errorOf([&] { ResultsFile::open(missing); }), {missing, "does not exist"}));
        const std::string text = file("text.h5");
        writeBytes(text, "not hdf5 at all, just text\n");
        QVERIFY(testing::contains(errorOf([&] { ResultsFile::open(text); }), {text, "not an HDF5 file"}));
        const std::string foreign = file("foreign.h5");
        {
            auto f = h5::File::create(foreign);
            f.writeTensor("x", torch::zeros({3}));
        }
        QVERIFY(testing::contains(errorOf([&] { ResultsFile::open(foreign); }), {foreign, "not a Glimpse file"}));
        const std::string trace = file("trace.h5");
        h5::writeAtomically(trace, "glimpse.trace", 1, [](h5::File&) {});
        QVERIFY(testing::contains(errorOf([&] { ResultsFile::open(trace); }), {trace, "glimpse.trace", "glimpse.results"}));
        const std::string v2 = file("v2.h5");
        h5::writeAtomically(v2, kKind, 2, [](h5::File&) {});
        const std::string e2 = errorOf([&] { ResultsFile::open(v2); });
        QVERIFY2(testing::contains(e2, {v2, "version 2", "version 1"}), e2.c_str());
        // Truncated: the first half of a complete file.
        const std::string good = file("good.h5");
        writeLetr(good, 40, {});
        const std::string bytes = readBytes(good);
        const std::string cut = file("cut.h5");
        writeBytes(cut, bytes.substr(0, bytes.size() / 2));
        const std::string ec = errorOf([&] { ResultsFile::open(cut); });
        QVERIFY2(ec.find(cut) != std::string::npos && ec != "<no error>", ec.c_str());
        QVERIFY2(ec.find("truncated") != std::string::npos || ec.find("corrupt") != std::string::npos, ec.c_str());
        // Wrong record kinds and sizes are refused by the writer.
        auto w = ResultsWriter::createClassification(file("cls_bad.h5"), header(ResultsType::Classification), {"a", "b"});
        ClassSampleIn c;
        c.label = 2;
        c.top5 = {0, 1};
        c.top5Prob = {0.6f, 0.4f};
        QVERIFY(testing::contains(errorOf([&] { w->add(c); }), {"cls_bad.h5", "label 2"}));
        QVERIFY(testing::contains(errorOf([&] { w->add(LetrSampleIn{}); }), {"letr record", "classification"}));
    }

    // Classification with sample files under a folder that then moves: the reader names what
    // is missing, and a remap to the new folder finds them again.
    void movedSourcesAreFoundAfterARemap() {
        const fs::path root = fs::path(file("cls_data"));
        fs::create_directories(root / "cat");
        fs::create_directories(root / "dog");
        const std::vector<std::string> files = {(root / "cat" / "a.png").string(), (root / "dog" / "b.png").string(),
                                                (root / "dog" / "c.png").string()};
        for (size_t i = 0; i < files.size(); ++i)
            QVERIFY(cv::imwrite(files[i], cv::Mat(8, 8 + int(i), CV_8UC3, cv::Scalar(40.0 * double(i), 0, 0))));
        const std::string path = file("cls.h5");
        auto w = ResultsWriter::createClassification(path, header(ResultsType::Classification, root.string()), {"cat", "dog"});
        const int64_t labels[3] = {0, 1, 1}, preds[3] = {0, 0, 1};
        ClassSummary sum;
        sum.classNames = {"cat", "dog"};
        sum.confusion.assign(4, 0);
        for (int64_t i = 0; i < 3; ++i) {
            ClassSampleIn c;
            c.index = i;
            c.path = files[size_t(i)];
            c.label = labels[i];
            c.top5 = {preds[i], 1 - preds[i]};
            c.top5Prob = {0.7f, 0.3f};
            c.labelProb = preds[i] == labels[i] ? 0.7f : 0.3f;
            w->add(c);
            ++sum.confusion[size_t(labels[i] * 2 + preds[i])];
            sum.correct += labels[i] == preds[i];
            ++sum.top5Correct;
        }
        sum.samples = 3;
        sum.accuracy = double(sum.correct) / 3;
        sum.top5Accuracy = 1;
        w->finish(sum, Status::Complete);

        auto r = ResultsFile::open(path);
        QCOMPARE(r->source().root, root.string());
        QCOMPARE(r->samplePath(1), files[1]);
        QVERIFY(!r->missingSources().any());
        QCOMPARE(r->image(2).cols, 10);
        int64_t correct = 0;
        for (int64_t i = 0; i < r->size(); ++i) correct += r->labels()[size_t(i)] == r->predicted()[size_t(i)];
        QCOMPARE(correct, r->classSummary().correct);
        QCOMPARE(r->classSummary().confusion, sum.confusion);
        QCOMPARE(r->top5(1), std::vector<int64_t>({0, 1}));

        const fs::path moved = fs::path(file("moved_data"));
        fs::rename(root, moved);
        auto m = ResultsFile::open(path);
        const MissingSources miss = m->missingSources();
        QVERIFY(miss.datasetMissing);
        QCOMPARE(miss.missingFiles, int64_t(3));
        QVERIFY(testing::contains(miss.describe(), {root.string(), "3 sample files are missing"}));
        QVERIFY(testing::contains(testing::errorOf([&] { m->image(0); }), {files[0]}));
        QVERIFY(testing::contains(testing::errorOf([&] { m->remapSourceRoot(file("nowhere")); }), {"not a folder"}));
        m->remapSourceRoot(moved.string());
        QVERIFY2(!m->missingSources().any(), m->missingSources().describe().c_str());
        QCOMPARE(m->samplePath(0), (moved / "cat" / "a.png").string());
        QCOMPARE(m->source().spec, moved.string());
        QCOMPARE(m->image(2).cols, 10);
    }

    void fewShotEpisodesAddUpToTheMean() {
        const std::string path = file("fs.h5");
        const std::vector<FewShotSetting> settings = {{3, 1, 2, 4, 7}, {3, 2, 2, 4, 7}};
        auto w = ResultsWriter::createFewShot(path, header(ResultsType::FewShot, "procedural"), settings,
                                              {"c0", "c1", "c2", "c3", "c4"});
        std::vector<FewShotSummaryRow> sum(2);
        for (int64_t k = 0; k < 2; ++k) {
            std::vector<double> acc;
            for (int64_t e = 0; e < 4; ++e) {
                EpisodeIn ep;
                ep.setting = k;
                ep.episode = e;
                ep.classes = {e % 5, (e + 1) % 5, (e + 2) % 5};
                for (int64_t s = 0; s < 3 * settings[size_t(k)].shots; ++s) ep.support.push_back(100 * k + s);
                int64_t right = 0;
                for (int64_t q = 0; q < 6; ++q) {
                    ep.query.push_back(1000 + q);
                    ep.predicted.push_back((q + e) % 3);
                    right += (q + e) % 3 == q / 2;
                }
                ep.accuracy = double(right) / 6;
                acc.push_back(ep.accuracy);
                w->add(ep);
            }
            double s = 0;
            for (double a : acc) s += a;
            sum[size_t(k)] = {settings[size_t(k)], 4, s / 4, 0.1};
        }
        w->finish(sum, Status::Complete);
        auto r = ResultsFile::open(path);
        QCOMPARE(r->size(), int64_t(8));
        QCOMPARE(r->statusLine(), std::string("complete: 8 episodes"));
        for (int64_t k = 0; k < 2; ++k) {
            double s = 0;
            int64_t n = 0;
            for (int64_t i = 0; i < r->size(); ++i)
                if (r->episodeSetting()[size_t(i)] == k) s += r->episodeAccuracy()[size_t(i)], ++n;
            QCOMPARE(s / double(n), r->fewShotSummary()[size_t(k)].mean);
        }
        const EpisodeIn e = r->episode(5);
        QCOMPARE(e.setting, int64_t(1));
        QCOMPARE(e.episode, int64_t(1));
        QCOMPARE(e.support.size(), size_t(6));
        QCOMPARE(e.predicted.size(), size_t(6));
        QCOMPARE(e.classes, std::vector<int64_t>({1, 2, 3}));
    }

    void sortAndFilterHelpers() {
        const std::vector<double> k = {0.5, 0.1, 0.9, 0.1};
        QCOMPARE(sortedOrder(k, false), std::vector<int64_t>({1, 3, 0, 2}));
        QCOMPARE(sortedOrder(k, true), std::vector<int64_t>({2, 0, 1, 3}));
        QCOMPARE(filterRange(k, 0.1, 0.5), std::vector<int64_t>({0, 1, 3}));
    }
};

QTEST_GUILESS_MAIN(TestResults)
#include "test_results.moc"
