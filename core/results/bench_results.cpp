#include "core/results/bench_results.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/eval/line_metrics.h"
#include "core/results/results.h"
#include "core/util/timing.h"
#include <memory>

namespace glimpse::results {

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double medianMs(int repeats, F&& f) {
    std::vector<double> t;
    for (int i = 0; i < std::max(1, repeats); ++i) {
        const auto t0 = Clock::now();
        f();
        t.push_back(msSince(t0));
    }
    return median(t);
}

} // namespace

using PooledHits = std::vector<std::pair<float, uint8_t>>;   // (score, tp bits per threshold) of kept lines

// The writer's rows: `layers` decoder layers (coarse first, then fine), then the LSD baseline.
static std::vector<LetrRowInfo> syntheticRows(int layers) {
    std::vector<LetrRowInfo> rows;
    const int coarse = (layers + 1) / 2;
    for (int l = 0; l < layers; ++l) {
        const bool c = l < coarse;
        const int k = c ? l + 1 : l - coarse + 1;
        rows.push_back({std::string(c ? "coarse_" : "fine_") + std::to_string(k),
                        std::string(c ? "coarse " : "fine ") + std::to_string(k), false});
    }
    rows.push_back({"lsd", "LSD", true});
    return rows;
}

static ResultsHeader syntheticHeader(const BenchResultsOptions& o) {
    ResultsHeader h;
    h.type = ResultsType::Letr;
    h.family = "letr";
    h.command = "glimpse bench results";
    h.source.spec = "procedural:" + std::to_string(o.samples) + ":" + std::to_string(o.seed) + ":" +
                    std::to_string(o.width) + "x" + std::to_string(o.height);
    h.config = {{"synthetic", true}, {"entities", o.entities}, {"layers", o.layers}, {"keep_lines", o.keepLines},
                {"summary", "pooled from the kept lines"}, {"matched", "the kept lines; the rest count as false positives"}};
    return h;
}

// One row's predicted lines of a sample. Later layers: more queries near a ground-truth line,
// less noise, sharper scores.
static std::vector<eval::ScoredLine> syntheticLines(const BenchResultsOptions& o, const LetrRowInfo& row, size_t r,
                                                    const std::vector<eval::GtLine>& gt, std::mt19937_64& rng,
                                                    std::uniform_real_distribution<float>& u,
                                                    std::normal_distribution<float>& gauss) {
    const bool lsd = row.baseline;
    const float quality = lsd ? 0.3f : 0.2f + 0.6f * float(r) / float(std::max(1, o.layers - 1));
    const int n = lsd ? 150 + int(u(rng) * 100) : o.entities;
    std::vector<eval::ScoredLine> lines(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
        eval::ScoredLine& l = lines[size_t(q)];
        if (!gt.empty() && u(rng) < 0.15f * quality + 0.02f) {
            const auto& g = gt[size_t(u(rng) * float(gt.size())) % gt.size()];
            const float s = 6.0f * (1.2f - quality);
            l = {g.x1 + s * gauss(rng), g.y1 + s * gauss(rng), g.x2 + s * gauss(rng), g.y2 + s * gauss(rng),
                 std::clamp(0.5f + 0.45f * quality + 0.15f * gauss(rng), 0.0f, 1.0f)};
        } else {
            l = {u(rng) * o.width, u(rng) * o.height, u(rng) * o.width, u(rng) * o.height,
                 std::clamp(0.05f + 0.1f * std::abs(gauss(rng)) * (1.0f - quality), 0.0f, 1.0f)};
        }
    }
    return lines;
}

// Matches from the eval's own code on the lines the file keeps (the row's best `keepLines`);
// the lower-scored rest count as false positives. (Matching all 1000 lines of 13 rows of
// 10,000 images takes an hour on a loaded 2-core machine, and the random low-scored lines
// match nothing at these thresholds anyway.) The kept lines' hits go to `pooled`.
static eval::ImageMatches matchKeptLines(const BenchResultsOptions& o, const std::vector<double>& th,
                                         const std::vector<eval::ScoredLine>& lines,
                                         const std::vector<eval::GtLine>& gt, PooledHits& pooled) {
    std::vector<size_t> ord(lines.size());
    for (size_t k = 0; k < ord.size(); ++k) ord[k] = k;
    std::stable_sort(ord.begin(), ord.end(), [&](size_t a, size_t b) { return lines[a].score > lines[b].score; });
    const size_t kept = o.keepLines < 0 ? ord.size() : std::min(ord.size(), size_t(o.keepLines));
    std::vector<eval::ScoredLine> best(kept);
    for (size_t k = 0; k < kept; ++k) best[k] = lines[ord[k]];
    eval::LineEvaluator ev(th);
    const eval::ImageMatches mb = ev.add(best, gt, o.width, o.height);
    eval::ImageMatches m;
    m.nearestGt.assign(lines.size(), -1);
    m.distance.assign(lines.size(), std::numeric_limits<float>::infinity());
    m.tp.assign(lines.size(), 0);
    for (size_t k = 0; k < kept; ++k) {
        m.nearestGt[ord[k]] = mb.nearestGt[k];
        m.distance[ord[k]] = mb.distance[k];
        m.tp[ord[k]] = mb.tp[k];
        pooled.emplace_back(best[k].score, mb.tp[k]);
    }
    return m;
}

// The summary: sAP / sF pooled over the kept lines (the full pool of 10,000 x 13 x 1000
// hits would need gigabytes; what the bench measures is the file). No heatmap metrics.
// Frees the pooled hits as it goes.
static LetrSummary pooledSummary(const std::vector<double>& th, const std::vector<LetrRowInfo>& rows,
                                 std::vector<PooledHits>& pooled, int64_t samples, int64_t gtTotal) {
    LetrSummary summary{th, rows, {}};
    for (size_t r = 0; r < rows.size(); ++r) {
        auto& p = pooled[r];
        std::stable_sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        eval::LineMetrics m;
        m.thresholds = th;
        m.images = samples;
        m.gtLines = gtTotal;
        m.predLines = int64_t(p.size());
        for (size_t k = 0; k < th.size(); ++k) {
            eval::PrCurve c;
            int64_t tp = 0, n = 0;
            for (const auto& [score, bits] : p) {
                tp += (bits >> k) & 1u;
                ++n;
                c.precision.push_back(double(tp) / double(n));
                c.recall.push_back(gtTotal > 0 ? double(tp) / double(gtTotal) : 0.0);
                c.score.push_back(score);
            }
            m.sAP.push_back(eval::averagePrecision(c));
            m.sF.push_back(eval::maxFScore(c));
            m.curves.push_back(c.subsampled(512));   // as stored (13 full curves of 400,000 points took ~400 MB)
        }
        summary.metrics.push_back(std::move(m));
        PooledHits().swap(p);
    }
    return summary;
}

// Writes the synthetic LETR results file o.path; fills fig.rows and fig.writeSeconds.
static void writeSyntheticResults(const BenchResultsOptions& o, const std::function<void(int64_t, int64_t)>& progress,
                                  BenchResultsFigures& fig) {
    const std::vector<double> th = {5, 10, 15};
    const std::vector<LetrRowInfo> rows = syntheticRows(o.layers);
    fig.rows = int64_t(rows.size());

    const ResultsHeader h = syntheticHeader(o);
    WriterOptions wo;
    wo.keepLines = o.keepLines;
    wo.expectedSamples = o.samples;
    wo.flushEvery = 64;
    const auto t0 = Clock::now();
    auto w = ResultsWriter::createLetr(o.path, h, rows, th, wo);
    std::mt19937_64 rng(o.seed);
    std::uniform_real_distribution<float> u(0, 1);
    std::normal_distribution<float> gauss(0, 1);
    // The summary: pooled over the kept lines (the full pool of 10,000 x 13 x 1000 hits would
    // need gigabytes; what the bench measures is the file).
    std::vector<PooledHits> pooled(rows.size());
    int64_t gtTotal = 0;
    for (int64_t i = 0; i < o.samples; ++i) {
        LetrSampleIn in;
        in.index = i;
        in.name = "procedural/" + std::to_string(o.seed) + "/" + std::to_string(i);
        in.width = o.width;
        in.height = o.height;
        const int ngt = o.gtMin + int(u(rng) * float(o.gtMax - o.gtMin + 1));
        for (int g = 0; g < std::min(ngt, o.gtMax); ++g)
            in.gt.push_back({u(rng) * o.width, u(rng) * o.height, u(rng) * o.width, u(rng) * o.height});
        gtTotal += int64_t(in.gt.size());
        for (size_t r = 0; r < rows.size(); ++r) {
            std::vector<eval::ScoredLine> lines = syntheticLines(o, rows[r], r, in.gt, rng, u, gauss);
            eval::ImageMatches m = matchKeptLines(o, th, lines, in.gt, pooled[r]);
            in.rows.push_back({std::move(lines), std::move(m)});
        }
        w->add(in);
        if (progress) progress(i + 1, o.samples);
    }
    w->finish(pooledSummary(th, rows, pooled, o.samples, gtTotal), Status::Complete);
    w.reset();
    fig.writeSeconds = msSince(t0) / 1000.0;
}

// Opens o.path and times what a viewer does with it: the columns, sorts, filters, counts
// and one sample's lines and ground truth.
static void timeReads(const BenchResultsOptions& o, BenchResultsFigures& fig) {
    // Open: the reader reads the header and every per-sample column.
    const long long rss0 = currentRssKiB();
    std::shared_ptr<ResultsFile> f;
    const auto t1 = Clock::now();
    f = ResultsFile::open(o.path);
    fig.openMs = msSince(t1);
    fig.keepLines = f->keepLines();
    fig.openRssKiB = currentRssKiB() - rss0;
    if (f->type() != ResultsType::Letr) throw Error(o.path + ": the benchmark measures LETR results files, this one is " + typeName(f->type()));
    if (f->size() < 1) throw Error(o.path + ": no samples");
    fig.samples = f->size();
    fig.rows = int64_t(f->letrRows().size());
    // The last decoder layer (the rows end with the baselines).
    size_t last = 0;
    for (size_t r = 0; r < f->letrRows().size(); ++r)
        if (!f->letrRows()[r].baseline) last = r;

    std::vector<double> key;
    fig.columnMs = medianMs(o.repeats, [&] {
        const auto& ap = f->sampleAp(last, 1);
        key.assign(ap.begin(), ap.end());
    });
    fig.sortMs = medianMs(o.repeats, [&] { (void)sortedOrder(key, true); });
    fig.filterMs = medianMs(o.repeats, [&] { (void)filterRange(key, 0.0, 0.25); });
    std::vector<double> tpKey;
    fig.sortTpMs = medianMs(o.repeats, [&] {
        const auto& tp = f->tpCount(last, 1);
        const auto& pc = f->predCount(last);
        tpKey.resize(tp.size());
        for (size_t i = 0; i < tp.size(); ++i) tpKey[i] = double(pc[i] - tp[i]);   // false positives
        (void)sortedOrder(tpKey, true);
    });
    fig.countsAllMs = medianMs(o.repeats, [&] { (void)f->countsAll(last, 1, 0.5f); });
    std::mt19937_64 pick(o.seed + 7);
    std::vector<double> lt, gt;
    for (int k = 0; k < 100; ++k) {
        const int64_t i = int64_t(pick() % uint64_t(fig.samples));
        auto t2 = Clock::now();
        const auto ls = f->lines(last, i);
        lt.push_back(msSince(t2));
        t2 = Clock::now();
        (void)f->gtLines(i);
        gt.push_back(msSince(t2));
        fig.storedLines = std::max<int64_t>(fig.storedLines, int64_t(ls.size()));
    }
    fig.linesMs = median(lt);
    fig.gtMs = median(gt);
}

BenchResultsFigures benchResults(const BenchResultsOptions& o, const std::function<void(int64_t, int64_t)>& progress) {
    if (o.path.empty()) throw Error("bench results: no output file");
    if (o.write && (o.samples < 1 || o.entities < 1 || o.layers < 1 || o.gtMin < 0 || o.gtMax < o.gtMin))
        throw Error("bench results: samples, entities and layers must be positive, 0 <= gt-min <= gt-max");
    BenchResultsFigures fig;
    if (o.write) writeSyntheticResults(o, progress, fig);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.path, ec)) throw Error(o.path + ": no such results file");
    fig.fileBytes = int64_t(std::filesystem::file_size(o.path));
    timeReads(o, fig);
    return fig;
}

std::string formatBenchResults(const BenchResultsOptions& o, const BenchResultsFigures& f) {
    char buf[2048];
    std::snprintf(buf, sizeof buf,
                  "results file %s: %lld LETR samples, %lld rows, %lld lines kept per row and sample\n"
                  "  write (synthetic lines, real matching and writer)  %8.1f s\n"
                  "  file size                                          %8.1f MB (%lld bytes)\n"
                  "  open (header + per-sample columns, warm cache)     %8.1f ms\n"
                  "  memory added by the open file                      %8.1f MB\n"
                  "  column: sample AP of %s as doubles           %8.2f ms\n"
                  "  sort the rows by sample AP                         %8.2f ms\n"
                  "  sort the rows by false positives (column + sort)   %8.2f ms\n"
                  "  filter the rows by a sample AP range               %8.2f ms\n"
                  "  TP/FP/missed of every sample at score 0.5 (a row)  %8.1f ms\n"
                  "  one sample's lines of one row (median of 100)      %8.3f ms\n"
                  "  one sample's ground truth (median of 100)          %8.3f ms\n",
                  o.path.c_str(), (long long)f.samples, (long long)f.rows, (long long)f.keepLines, f.writeSeconds,
                  double(f.fileBytes) / 1e6, (long long)f.fileBytes, f.openMs, double(f.openRssKiB) / 1024.0,
                  "the last layer", f.columnMs, f.sortMs, f.sortTpMs,
                  f.filterMs, f.countsAllMs, f.linesMs, f.gtMs);
    return buf;
}

} // namespace glimpse::results
