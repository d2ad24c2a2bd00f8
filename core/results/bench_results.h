#pragma once
// The results-file benchmark (issue 53, `glimpse bench results`): a synthetic but real-shaped
// LETR results file written through the real writer with matches from the real matching code
// (eval::LineEvaluator::add), then the figures the results browser depends on: file size, open
// time and memory, the per-sample columns' sort / filter times, one sample's lines, and a
// score-threshold column over every sample. Qt-free; the GUI bench (53B) reuses the file.
#include <cstdint>
#include <functional>
#include <string>

namespace glimpse::results {

struct BenchResultsOptions {
    std::string path;            // the file to write (kept)
    int64_t samples = 10000;
    int entities = 1000;         // predictions per layer and image
    int layers = 12;             // decoder layers (coarse 1..L/2, fine 1..L/2), plus LSD
    int64_t keepLines = 40;      // lines stored per row and sample
    int gtMin = 40, gtMax = 110; // ground-truth lines per image (Wireframe: ~74 on average)
    int width = 512, height = 512;
    uint64_t seed = 1;
    int repeats = 5;             // timed repeats of each query (median reported)
    bool write = true;           // false: measure the existing LETR results file at `path`
};

struct BenchResultsFigures {
    int64_t samples = 0, rows = 0, storedLines = 0, keepLines = 0;
    double writeSeconds = 0;
    int64_t fileBytes = 0;
    double openMs = 0;                 // ResultsFile::open (page cache warm: the file was just written)
    long long openRssKiB = 0;          // resident memory added by the open file
    double sortMs = 0, sortTpMs = 0;   // sortedOrder of a sample-AP column / a TP-count column
    double filterMs = 0;               // filterRange of the sample-AP column
    double columnMs = 0;               // building a column vector (sample AP of one row, as doubles)
    double countsAllMs = 0;            // TP / FP / missed of every sample at a score (one row)
    double linesMs = 0;                // one sample's stored lines of one row (median of 100 random)
    double gtMs = 0;                   // one sample's ground truth
};

BenchResultsFigures benchResults(const BenchResultsOptions& options,
                                 const std::function<void(int64_t, int64_t)>& progress = {});
std::string formatBenchResults(const BenchResultsOptions& options, const BenchResultsFigures& f);

} // namespace glimpse::results
